package lambdahttp_test

import (
	"encoding/base64"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/aws/aws-lambda-go/events"
	"github.com/google/go-cmp/cmp"
	"github.com/lambda-agent/lambda-agent/internal/httpapi"
	"github.com/lambda-agent/lambda-agent/internal/lambdahttp"
	"github.com/lambda-agent/lambda-agent/internal/testkit"
)

// seen is what a handler saw of a request.
type seen struct {
	Method, Path, Query, Body, Header, ReadErr string
	Sub                                        string
}

// echo answers with what it saw, and sets a cookie and a header.
func echo(got *seen) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, err := io.ReadAll(r.Body)
		*got = seen{Method: r.Method, Path: r.URL.Path, Query: r.URL.RawQuery, Body: string(b), Header: r.Header.Get("X-Custom")}
		if err != nil {
			got.ReadErr = err.Error()
		}
		if ev, ok := lambdahttp.RequestFromContext(r.Context()); ok && ev.RequestContext.Authorizer != nil {
			got.Sub = ev.RequestContext.Authorizer.JWT.Claims["sub"]
		}
		http.SetCookie(w, &http.Cookie{Name: "a", Value: "1"})
		w.Header().Set("X-Answer", "yes")
		w.WriteHeader(http.StatusCreated)
		_, _ = w.Write([]byte("done"))
	})
}

func fixture(t *testing.T, name string) events.APIGatewayV2HTTPRequest {
	t.Helper()
	ev, err := testkit.Event(name)
	if err != nil {
		t.Fatal(err)
	}
	return ev
}

func TestEventBecomesRequest(t *testing.T) {
	jwt := fixture(t, "chat-jwt.json")
	tests := []struct {
		name string
		ev   events.APIGatewayV2HTTPRequest
		want seen
	}{
		{"a route with a parameter: the path comes from the route, not the stage's raw path", events.APIGatewayV2HTTPRequest{
			RouteKey:       "GET /sessions/{sessionId}",
			RawPath:        "/prod/sessions/abc",
			PathParameters: map[string]string{"sessionId": "abc"},
			RawQueryString: "limit=5",
			Headers:        map[string]string{"x-custom": "1"},
			RequestContext: events.APIGatewayV2HTTPRequestContext{HTTP: events.APIGatewayV2HTTPRequestContextHTTPDescription{Method: "GET"}},
		}, seen{Method: "GET", Path: "/sessions/abc", Query: "limit=5", Header: "1"}},
		{"the $default route: the raw path", events.APIGatewayV2HTTPRequest{
			RouteKey:              "$default",
			RawPath:               "/sessions/xyz",
			QueryStringParameters: map[string]string{"cursor": "c d"},
			RequestContext:        events.APIGatewayV2HTTPRequestContext{HTTP: events.APIGatewayV2HTTPRequestContextHTTPDescription{Method: "DELETE"}},
		}, seen{Method: "DELETE", Path: "/sessions/xyz", Query: "cursor=c+d"}},
		{"a base64 body is decoded", events.APIGatewayV2HTTPRequest{
			RouteKey:        "POST /chat",
			Body:            base64.StdEncoding.EncodeToString([]byte(`{"message":"hi"}`)),
			IsBase64Encoded: true,
		}, seen{Method: "POST", Path: "/chat", Body: `{"message":"hi"}`}},
		{"a body that is not base64 fails to read", events.APIGatewayV2HTTPRequest{
			RouteKey:        "POST /chat",
			Body:            "###",
			IsBase64Encoded: true,
		}, seen{Method: "POST", Path: "/chat", ReadErr: "the body is marked base64 but is not valid base64: illegal base64 data at input byte 0"}},
		{"a sample event, and the authorizer it carries", jwt,
			seen{Method: "POST", Path: "/chat", Body: jwt.Body, Sub: jwt.RequestContext.Authorizer.JWT.Claims["sub"]}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got seen
			resp, err := lambdahttp.Wrap(echo(&got))(t.Context(), tt.ev)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("request (-want +got):\n%s", diff)
			}
			want := events.APIGatewayV2HTTPResponse{
				StatusCode: 201,
				Headers:    map[string]string{"X-Answer": "yes"},
				Cookies:    []string{"a=1"},
				Body:       "done",
			}
			if diff := cmp.Diff(want, resp); diff != "" {
				t.Errorf("response (-want +got):\n%s", diff)
			}
		})
	}
}

func TestBinaryResponseIsBase64(t *testing.T) {
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { _, _ = w.Write([]byte{0xff, 0x00}) })
	resp, err := lambdahttp.Wrap(h)(t.Context(), events.APIGatewayV2HTTPRequest{RawPath: "/"})
	if err != nil || resp.StatusCode != 200 || !resp.IsBase64Encoded || resp.Body != "/wA=" {
		t.Errorf("got %+v, %v", resp, err)
	}
}

// hostileParameters are path parameters that would move a request to
// another route if they were pasted into the path as they are: API Gateway
// decodes %2F and %2E in a parameter, so that any of them can arrive.
var hostileParameters = []string{
	".", "..", "...", "a/b", "demo/export", "demo/tools/calculator", "calc/../../x", "../../chat",
	"/demo", "demo/", "a%2Fb", "%2E%2E", "a\x00b", "a\nb", "\x7f", "a?b", "a#b", "a b", "é/ü",
}

// TestParametersStayInTheirSegment serves events of every route with path
// parameters through a ServeMux of the handler's routes: whatever a
// parameter holds, the request reaches the event's route, never a redirect
// or another route, and the route reads the parameter as API Gateway gave
// it.
func TestParametersStayInTheirSegment(t *testing.T) {
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
				params := map[string]string{"sessionId": "demo", "name": "calculator"}
				if !strings.Contains(pattern, "{name}") {
					delete(params, "name")
				}
				params[name] = v
				ev := events.APIGatewayV2HTTPRequest{
					RouteKey:       route,
					RawPath:        "/prod" + pattern, // a stage's path, which the route's replaces
					PathParameters: params,
					RequestContext: events.APIGatewayV2HTTPRequestContext{HTTP: events.APIGatewayV2HTTPRequestContextHTTPDescription{Method: method}},
				}
				got = match{}
				w := httptest.NewRecorder()
				mux.ServeHTTP(w, lambdahttp.Request(t.Context(), &ev))
				if want := (match{Pattern: route, Values: params}); w.Code != http.StatusOK || !cmp.Equal(want, got) {
					t.Errorf("%s with %s=%q: %d %s, reached %+v; want %+v", route, name, v, w.Code, w.Header().Get("Location"), got, want)
				}
			}
		}
	}
}

// TestURLPathsThatDoNotParse serves function URL events whose raw path
// holds what a URL cannot hold as it is: the handler gets the path the
// client sent, in the same segments, rather than a failed invocation or a
// path cut short.
func TestURLPathsThatDoNotParse(t *testing.T) {
	var got seen
	fn := lambdahttp.WrapURL(echo(&got))
	tests := []struct{ rawPath, query, wantPath, wantQuery string }{
		{"/sessions/abc", "limit=5", "/sessions/abc", "limit=5"},
		{"/sessions/a%2Fb", "", "/sessions/a/b", ""},
		{"/sessions/100%", "", "/sessions/100%", ""},
		{"/sessions/%zz/x", "", "/sessions/%zz/x", ""},
		{"/sessions/a\x00b", "", "/sessions/a\x00b", ""},
		{"/sessions/a\nb", "q=a\nb", "/sessions/a\nb", "q=a%0Ab"},
		{"/sessions/a#b", "", "/sessions/a#b", ""},
		{"/sessions/a?b", "c=d", "/sessions/a?b", "c=d"},
		{"/sessions/a", "c=d#e", "/sessions/a", "c=d%23e"},
	}
	for _, tt := range tests {
		got = seen{}
		resp, err := fn(t.Context(), &events.LambdaFunctionURLRequest{
			RawPath: tt.rawPath, RawQueryString: tt.query,
			RequestContext: events.LambdaFunctionURLRequestContext{DomainName: "abc.lambda-url.us-east-1.on.aws", HTTP: events.LambdaFunctionURLRequestContextHTTPDescription{Method: "GET"}},
		})
		if err != nil {
			t.Errorf("%q: %v", tt.rawPath, err)
			continue
		}
		_, _ = io.ReadAll(resp.Body)
		if got.Path != tt.wantPath || got.Query != tt.wantQuery || resp.StatusCode != http.StatusCreated {
			t.Errorf("%q ? %q: the handler saw %q ? %q (%d); want %q ? %q", tt.rawPath, tt.query, got.Path, got.Query, resp.StatusCode, tt.wantPath, tt.wantQuery)
		}
	}
}
