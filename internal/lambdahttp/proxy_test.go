package lambdahttp_test

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"github.com/aws/aws-lambda-go/events"
	"github.com/google/go-cmp/cmp"
	"github.com/lambda-agent/lambda-agent/internal/httpapi"
	"github.com/lambda-agent/lambda-agent/internal/lambdahttp"
	"github.com/lambda-agent/lambda-agent/internal/testkit"
)

func proxyFixture(t *testing.T, name string) events.APIGatewayProxyRequest {
	t.Helper()
	ev, err := testkit.ProxyEvent(name)
	if err != nil {
		t.Fatal(err)
	}
	return ev
}

// prelude is the start of a streamed answer, as Lambda reads it: its
// status and headers, as JSON, before eight NUL bytes and the body.
type prelude struct {
	StatusCode        int                 `json:"statusCode"`
	Headers           map[string]string   `json:"headers"`
	MultiValueHeaders map[string][]string `json:"multiValueHeaders"`
	Cookies           []string            `json:"cookies"`
}

// readStream reads a streamed answer whole, as the runtime does, and
// splits it into its prelude and its body.
func readStream(t *testing.T, r io.Reader) (prelude, string) {
	t.Helper()
	out, err := io.ReadAll(r)
	if err != nil {
		t.Fatalf("reading the answer: %v", err)
	}
	head, body, ok := bytes.Cut(out, make([]byte, 8))
	if !ok {
		t.Fatalf("no prelude separator in %q", out)
	}
	var p prelude
	if err := json.Unmarshal(head, &p); err != nil {
		t.Fatalf("prelude %q: %v", head, err)
	}
	return p, string(body)
}

func TestProxyEventBecomesRequest(t *testing.T) {
	session := proxyFixture(t, "session-get-rest.json")
	chat := proxyFixture(t, "stream-chat-rest.json")
	tests := []struct {
		name string
		ev   events.APIGatewayProxyRequest
		want seen
	}{
		{"a sample event: the path comes from the resource, not the stage's path", session,
			seen{Method: "GET", Path: "/sessions/rest-session", Query: "limit=10"}},
		{"a sample event with a body", chat,
			seen{Method: "POST", Path: "/chat/stream", Body: chat.Body}},
		{"a custom domain's base path is left out", events.APIGatewayProxyRequest{
			Resource: "/sessions/{sessionId}", Path: "/v1/sessions/abc", HTTPMethod: "DELETE",
			PathParameters: map[string]string{"sessionId": "abc"},
		}, seen{Method: "DELETE", Path: "/sessions/abc"}},
		{"repeated query parameters and headers are all kept", events.APIGatewayProxyRequest{
			Resource: "/sessions", Path: "/sessions", HTTPMethod: "GET",
			QueryStringParameters:           map[string]string{"cursor": "b", "limit": "5"},
			MultiValueQueryStringParameters: map[string][]string{"cursor": {"a b", "b"}},
			Headers:                         map[string]string{"x-custom": "2"},
			MultiValueHeaders:               map[string][]string{"x-custom": {"1", "2"}},
		}, seen{Method: "GET", Path: "/sessions", Query: "cursor=a+b&cursor=b&limit=5", Header: "1"}},
		{"single-valued headers alone", events.APIGatewayProxyRequest{
			Resource: "/chat/stream", Path: "/chat/stream", HTTPMethod: "POST",
			Headers: map[string]string{"X-Custom": "only"},
		}, seen{Method: "POST", Path: "/chat/stream", Header: "only"}},
		{"a greedy resource: the event's path", events.APIGatewayProxyRequest{
			Resource: "/{proxy+}", Path: "/sessions/xyz", HTTPMethod: "GET",
			PathParameters: map[string]string{"proxy": "sessions/xyz"},
		}, seen{Method: "GET", Path: "/sessions/xyz"}},
		{"a base64 body is decoded", events.APIGatewayProxyRequest{
			Resource: "/agui", Path: "/agui", HTTPMethod: "POST",
			Body: base64.StdEncoding.EncodeToString([]byte(`{"threadId":"t"}`)), IsBase64Encoded: true,
		}, seen{Method: "POST", Path: "/agui", Body: `{"threadId":"t"}`}},
		{"a body that is not base64 fails to read", events.APIGatewayProxyRequest{
			Resource: "/agui", Path: "/agui", HTTPMethod: "POST", Body: "###", IsBase64Encoded: true,
		}, seen{Method: "POST", Path: "/agui", ReadErr: "the body is marked base64 but is not valid base64: illegal base64 data at input byte 0"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got seen
			resp, err := lambdahttp.WrapProxyStream(echo(&got), lambdahttp.StreamOptions{})(t.Context(), &tt.ev)
			if err != nil {
				t.Fatal(err)
			}
			p, body := readStream(t, resp)
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("request (-want +got):\n%s", diff)
			}
			want := prelude{
				StatusCode:        201,
				Headers:           map[string]string{"X-Answer": "yes"},
				MultiValueHeaders: nil,
			}
			// The cookie is a header like the others: a REST API takes
			// Set-Cookie among the headers.
			want.Headers["Set-Cookie"] = "a=1"
			if diff := cmp.Diff(want, p); diff != "" || body != "done" {
				t.Errorf("answer %q (-want +got):\n%s", body, diff)
			}
		})
	}
}

// TestProxyRequestCarriesItsEvent: the handler finds the REST event it
// serves, and the caller in it, and only a REST event's request does.
func TestProxyRequestCarriesItsEvent(t *testing.T) {
	ev := proxyFixture(t, "agui-rest.json")
	r := lambdahttp.ProxyRequest(t.Context(), &ev)
	got, ok := lambdahttp.ProxyRequestFromContext(r.Context())
	if !ok || got != &ev {
		t.Fatalf("ProxyRequestFromContext = %p, %v; want the event, %p", got, ok, &ev)
	}
	claims, _ := got.RequestContext.Authorizer["claims"].(map[string]any)
	if claims["sub"] != "3f1c2d4e-5a6b-7c8d-9e0f-1a2b3c4d5e6f" {
		t.Errorf("the Cognito claims in the event: %v", got.RequestContext.Authorizer)
	}
	if r.Host != ev.RequestContext.DomainName || r.RemoteAddr != "203.0.113.10" || r.Header.Get("Origin") != "https://chat.example.com" {
		t.Errorf("Host %q, RemoteAddr %q, Origin %q", r.Host, r.RemoteAddr, r.Header.Get("Origin"))
	}
	if _, ok := lambdahttp.ProxyRequestFromContext(httptest.NewRequest("GET", "/", nil).Context()); ok {
		t.Error("a plain request has a REST event")
	}
	v2 := fixture(t, "chat-jwt.json")
	if _, ok := lambdahttp.ProxyRequestFromContext(lambdahttp.Request(t.Context(), &v2).Context()); ok {
		t.Error("an HTTP API event's request has a REST event")
	}
	if lambdahttp.Buffered(r) {
		t.Error("a streamed REST request counts as buffered: its answers would be held to 6 MB")
	}
}

// TestProxyParametersStayInTheirSegment serves REST events of every
// resource with path parameters through a ServeMux of the handler's
// routes, as TestParametersStayInTheirSegment does for HTTP API events:
// whatever a parameter holds, as the client encoded it or already decoded,
// the request reaches the event's route, and the route reads it decoded.
func TestProxyParametersStayInTheirSegment(t *testing.T) {
	routes := []string{httpapi.RouteGetSession, httpapi.RouteDeleteSession, httpapi.RouteCallTool, httpapi.RouteExportSession, httpapi.RouteImportPage, httpapi.RouteRewind}
	type match struct {
		Pattern string
		Values  map[string]string
	}
	var got match
	mux := http.NewServeMux()
	for _, p := range append(routes, httpapi.RouteChat, httpapi.RouteListSessions, httpapi.RouteImportSession, "/") {
		mux.HandleFunc(p, func(w http.ResponseWriter, r *http.Request) {
			got = match{Pattern: r.Pattern, Values: map[string]string{}}
			for _, name := range []string{"sessionId", "name"} {
				if v := r.PathValue(name); v != "" {
					got.Values[name] = v
				}
			}
		})
	}
	for _, route := range routes {
		method, pattern, _ := strings.Cut(route, " ")
		for _, name := range []string{"sessionId", "name"} {
			if !strings.Contains(pattern, "{"+name+"}") {
				continue
			}
			for _, v := range hostileParameters {
				for _, sent := range []string{url.PathEscape(v), v} {
					params := map[string]string{"sessionId": "demo", "name": "calculator"}
					if !strings.Contains(pattern, "{name}") {
						delete(params, "name")
					}
					params[name] = sent
					ev := events.APIGatewayProxyRequest{
						Resource:       pattern,
						Path:           "/prod" + pattern, // a base path's, which the resource's replaces
						HTTPMethod:     method,
						PathParameters: params,
					}
					want := match{Pattern: route, Values: map[string]string{}}
					for k, p := range params {
						if d, err := url.PathUnescape(p); err == nil {
							p = d
						}
						want.Values[k] = p
					}
					got = match{}
					w := httptest.NewRecorder()
					mux.ServeHTTP(w, lambdahttp.ProxyRequest(t.Context(), &ev))
					if w.Code != http.StatusOK || !cmp.Equal(want, got) {
						t.Errorf("%s with %s=%q: %d %s, reached %+v; want %+v", route, name, sent, w.Code, w.Header().Get("Location"), got, want)
					}
				}
			}
		}
	}
}

func TestEventKindOf(t *testing.T) {
	tests := []struct {
		name string
		raw  string
		want lambdahttp.EventKind
	}{
		{"stream-chat.json", "", lambdahttp.FunctionURLEvent},
		{"agui-rest.json", "", lambdahttp.ProxyEvent},
		{"stream-chat-rest.json", "", lambdahttp.ProxyEvent},
		{"session-get-rest.json", "", lambdahttp.ProxyEvent},
		{"an HTTP API event of a route", "chat-jwt.json", 0},
		{"an empty object", "{}", 0},
		{"a list", "[]", 0},
		{"a string", `"POST /agui"`, 0},
		{"a method without a resource", `{"httpMethod":"POST","path":"/agui"}`, 0},
		{"version 2.0 without requestContext.http", `{"version":"2.0","rawPath":"/"}`, 0},
		{"requestContext that is no object", `{"version":"2.0","requestContext":"http"}`, 0},
		{"both kinds at once", `{"version":"2.0","httpMethod":"POST","resource":"/agui","requestContext":{"http":{"method":"POST"}}}`, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			raw := []byte(tt.raw)
			if tt.raw == "" || strings.HasSuffix(tt.raw, ".json") {
				file := tt.raw
				if file == "" {
					file = tt.name
				}
				var err error
				if raw, err = testkit.EventJSON(file); err != nil {
					t.Fatal(err)
				}
			}
			got, err := lambdahttp.EventKindOf(raw)
			if got != tt.want || (err == nil) != (tt.want != 0) {
				t.Errorf("EventKindOf = %v, %v; want %v", got, err, tt.want)
			}
		})
	}
}

// TestWrapStreamServesBothKinds invokes one handler with a function URL's
// event and a REST API's, as the stream function is invoked, and sees each
// served and streamed in its own form; anything else fails the invocation.
func TestWrapStreamServesBothKinds(t *testing.T) {
	var got seen
	fn := lambdahttp.WrapStream(echo(&got), lambdahttp.StreamOptions{AllowedOrigins: []string{"https://chat.example.com"}})
	for _, tt := range []struct {
		file string
		want seen
	}{
		{"stream-chat.json", seen{Method: "POST", Path: "/", Body: `{"session_id": "stream-session", "message": "What is 25*48?"}`}},
		{"stream-chat-rest.json", seen{Method: "POST", Path: "/chat/stream", Body: `{"session_id": "rest-session", "message": "What is 25*48?"}`}},
	} {
		raw, err := testkit.EventJSON(tt.file)
		if err != nil {
			t.Fatal(err)
		}
		got = seen{}
		out, err := fn(t.Context(), raw)
		if err != nil {
			t.Fatalf("%s: %v", tt.file, err)
		}
		if ct, _ := out.(interface{ ContentType() string }); ct == nil || ct.ContentType() != "application/vnd.awslambda.http-integration-response" {
			t.Errorf("%s: the answer is a %T, not Lambda's streamed HTTP answer", tt.file, out)
		}
		p, body := readStream(t, out)
		if diff := cmp.Diff(tt.want, got); diff != "" {
			t.Errorf("%s: request (-want +got):\n%s", tt.file, diff)
		}
		if p.StatusCode != 201 || body != "done" {
			t.Errorf("%s: %d %q", tt.file, p.StatusCode, body)
		}
	}
	for _, raw := range []string{`{}`, `not json`} {
		if out, err := fn(t.Context(), json.RawMessage(raw)); err == nil {
			t.Errorf("%s: served as %T, want an error", raw, out)
		}
	}
}

// TestProxyCORS: an answer to a REST event allows the request's origin
// when it is one of AllowedOrigins, and no other; function URL answers are
// left to the URL's own CORS.
func TestProxyCORS(t *testing.T) {
	var got seen
	allowed := []string{"https://chat.example.com", "http://localhost:3000"}
	fn := lambdahttp.WrapStream(echo(&got), lambdahttp.StreamOptions{AllowedOrigins: allowed})
	rest := proxyFixture(t, "agui-rest.json")
	for _, tt := range []struct{ origin, want string }{
		{"https://chat.example.com", "https://chat.example.com"},
		{"http://localhost:3000", "http://localhost:3000"},
		{"https://evil.example.com", ""},
		{"https://chat.example.com.evil.example.com", ""},
		{"", ""},
		{"null", ""},
	} {
		ev := rest
		ev.Headers = map[string]string{"origin": tt.origin}
		ev.MultiValueHeaders = nil
		raw, _ := json.Marshal(ev)
		out, err := fn(t.Context(), raw)
		if err != nil {
			t.Fatal(err)
		}
		p, _ := readStream(t, out)
		if p.Headers["Access-Control-Allow-Origin"] != tt.want {
			t.Errorf("origin %q: Access-Control-Allow-Origin %q, want %q", tt.origin, p.Headers["Access-Control-Allow-Origin"], tt.want)
		}
		if exposed, vary := p.Headers["Access-Control-Expose-Headers"], p.Headers["Vary"]; tt.want != "" && (exposed != "retry-after" || vary != "Origin") {
			t.Errorf("origin %q: Expose-Headers %q, Vary %q; want retry-after, Origin", tt.origin, exposed, vary)
		}
	}
	url, err := testkit.URLEvent("stream-chat.json")
	if err != nil {
		t.Fatal(err)
	}
	url.Headers["origin"] = "https://chat.example.com"
	raw, _ := json.Marshal(url)
	out, err := fn(t.Context(), raw)
	if err != nil {
		t.Fatal(err)
	}
	if p, _ := readStream(t, out); p.Headers["Access-Control-Allow-Origin"] != "" {
		t.Errorf("a function URL answer got Access-Control-Allow-Origin %q; the URL's CORS settings add it", p.Headers["Access-Control-Allow-Origin"])
	}
}

// TestProxyStreams: the answer's status and headers, and what the handler
// flushed, reach Lambda while the handler still runs.
func TestProxyStreams(t *testing.T) {
	release := make(chan struct{})
	finished := make(chan struct{})
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		defer close(finished)
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = io.WriteString(w, "event: start\n\n")
		w.(http.Flusher).Flush()
		<-release
		_, _ = io.WriteString(w, "event: done\n\n")
	})
	ev := proxyFixture(t, "stream-chat-rest.json")
	resp, err := lambdahttp.WrapProxyStream(h, lambdahttp.StreamOptions{})(t.Context(), &ev)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != 200 || resp.Headers["Content-Type"] != "text/event-stream" {
		t.Errorf("status %d, headers %v", resp.StatusCode, resp.Headers)
	}
	want := "event: start\n\n"
	first := make([]byte, len(want))
	var skipped []byte
	// The prelude, its eight NUL bytes, then the first event, all before
	// the handler is let go.
	for !bytes.HasSuffix(skipped, make([]byte, 8)) {
		b := make([]byte, 1)
		if _, err := io.ReadFull(resp, b); err != nil {
			t.Fatal(err)
		}
		skipped = append(skipped, b...)
	}
	if _, err := io.ReadFull(resp, first); err != nil || string(first) != want {
		t.Fatalf("first bytes %q, %v; want %q", first, err, want)
	}
	select {
	case <-finished:
		t.Fatal("the handler finished before it was let go")
	default:
	}
	close(release)
	rest, err := io.ReadAll(resp)
	if err != nil || string(rest) != "event: done\n\n" {
		t.Errorf("the rest: %q, %v", rest, err)
	}
}

// TestProxyHandlerPanics: a handler that panics before it writes answers
// 500, and the body ends with an error, which the runtime reports as the
// invocation's failure; a handler that writes nothing answers 200.
func TestProxyHandlerPanics(t *testing.T) {
	ev := proxyFixture(t, "stream-chat-rest.json")
	panics := http.HandlerFunc(func(http.ResponseWriter, *http.Request) { panic("boom") })
	resp, err := lambdahttp.WrapProxyStream(panics, lambdahttp.StreamOptions{})(t.Context(), &ev)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != 500 {
		t.Errorf("status %d, want 500", resp.StatusCode)
	}
	if _, err := io.ReadAll(resp); err == nil || !strings.Contains(err.Error(), "boom") {
		t.Errorf("reading the body: %v; want the panic", err)
	}
	silent := http.HandlerFunc(func(http.ResponseWriter, *http.Request) {})
	resp, err = lambdahttp.WrapProxyStream(silent, lambdahttp.StreamOptions{})(t.Context(), &ev)
	if err != nil {
		t.Fatal(err)
	}
	if p, body := readStream(t, resp); p.StatusCode != 200 || body != "" {
		t.Errorf("a handler that wrote nothing: %d %q", p.StatusCode, body)
	}
}
