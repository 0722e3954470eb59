package main

import (
	"bytes"
	"encoding/json"
	"io"
	"maps"
	"net/url"
	"strings"
	"testing"

	"github.com/aws/aws-lambda-go/events"
	"github.com/lambda-agent/lambda-agent/internal/httpapi"
	"github.com/lambda-agent/lambda-agent/internal/lambdahttp"
	"github.com/lambda-agent/lambda-agent/internal/testkit"
	"github.com/lambda-agent/lambda-agent/internal/testkit/conversetest"
)

// stack is the stream function's handler on the stand-ins, as a deployment
// behind the JWT or IAM auth runs it: callers must be named.
type stack struct {
	*testkit.Stack
	serve func(t *testing.T, raw []byte) (answer, string)
}

// answer is a streamed answer's prelude.
type answer struct {
	StatusCode int               `json:"statusCode"`
	Headers    map[string]string `json:"headers"`
}

func start(t *testing.T) *stack {
	t.Helper()
	s := testkit.Start(t, testkit.Options{
		Routes: httpapi.FunctionURLRoutes,
		Env:    map[string]string{"REQUIRE_AUTH": "true", "ALLOWED_ORIGINS": "https://chat.example.com"},
	})
	fn := handler(s.App)
	return &stack{Stack: s, serve: func(t *testing.T, raw []byte) (answer, string) {
		t.Helper()
		out, err := fn(t.Context(), raw)
		if err != nil {
			t.Fatalf("the invocation failed: %v", err)
		}
		b, err := io.ReadAll(out)
		if err != nil {
			t.Fatalf("reading the answer: %v", err)
		}
		head, body, ok := bytes.Cut(b, make([]byte, 8))
		if !ok {
			t.Fatalf("no prelude in %q", b)
		}
		var a answer
		if err := json.Unmarshal(head, &a); err != nil {
			t.Fatalf("prelude %q: %v", head, err)
		}
		return a, string(body)
	}}
}

func proxyEvent(t *testing.T, name string) events.APIGatewayProxyRequest {
	t.Helper()
	ev, err := testkit.ProxyEvent(name)
	if err != nil {
		t.Fatal(err)
	}
	return ev
}

func marshal(t *testing.T, v any) []byte {
	t.Helper()
	raw, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return raw
}

// identity is a caller of a REST API event, in one of the shapes API
// Gateway gives it.
type identity struct {
	authorizer map[string]any
	caller     events.APIGatewayRequestIdentity
}

func (id identity) on(ev events.APIGatewayProxyRequest) events.APIGatewayProxyRequest {
	ev.RequestContext.Authorizer = maps.Clone(id.authorizer)
	ev.RequestContext.Identity = id.caller
	ev.RequestContext.Identity.SourceIP = "203.0.113.10"
	return ev
}

func cognito(sub any) identity {
	claims := map[string]any{"iss": "https://cognito-idp.us-east-1.amazonaws.com/us-east-1_Example", "aud": "example-client-id", "token_use": "id"}
	if sub != nil {
		claims["sub"] = sub
	}
	return identity{authorizer: map[string]any{"claims": claims}}
}

func lambdaAuthorizer(sub any) identity {
	a := map[string]any{"principalId": "someone", "integrationLatency": 12.0}
	if sub != nil {
		a["sub"] = sub
	}
	return identity{authorizer: a}
}

func iam(arn string) identity {
	return identity{caller: events.APIGatewayRequestIdentity{AccountID: "123456789012", AccessKey: "ASIAEXAMPLEACCESSKEY", Caller: "AROAEXAMPLEROLEID:ada", User: "AROAEXAMPLEROLEID:ada", UserArn: arn}}
}

// sse returns the names of a stream's events, runs of text as one, and the
// data of its done event.
func sse(body string) (names string, done map[string]any) {
	var list []string
	for _, block := range strings.Split(strings.TrimSpace(body), "\n\n") {
		name, data, _ := strings.Cut(block, "\n")
		name = strings.TrimPrefix(name, "event: ")
		if len(list) == 0 || name != "text" || list[len(list)-1] != "text" {
			list = append(list, name)
		}
		if name == httpapi.EventDone {
			_ = json.Unmarshal([]byte(strings.TrimPrefix(data, "data: ")), &done)
		}
	}
	return strings.Join(list, " "), done
}

// errorCode returns the code of a JSON error body.
func errorCode(body string) string {
	var e struct {
		Error struct{ Code, Message string }
	}
	_ = json.Unmarshal([]byte(body), &e)
	if e.Error.Message == "" {
		return ""
	}
	return e.Error.Code
}

// TestRESTCallersOwnTheirSessions streams a turn through the stream
// function's handler for a REST API event of each kind of caller: a
// Cognito user pool's claims, our Lambda authorizer's context, and an IAM
// signature. Each caller owns the session as it owns it on the HTTP API or
// the function URL (a token's subject, or iam: and the ARN), so that the
// session is found through that other way in too; another caller of the
// same kind does not find it, and a request that names no caller is
// refused with 401.
func TestRESTCallersOwnTheirSessions(t *testing.T) {
	s := start(t)
	httpAPI := lambdahttp.Wrap(s.Handler)
	viaURL := func(t *testing.T, arn, path string) (answer, string) {
		ev, err := testkit.URLEvent("stream-chat.json")
		if err != nil {
			t.Fatal(err)
		}
		ev.RequestContext.HTTP.Method, ev.RawPath, ev.RequestContext.HTTP.Path, ev.Body = "GET", path, path, ""
		ev.RequestContext.Authorizer.IAM.UserARN = arn
		return s.serve(t, marshal(t, ev))
	}
	viaHTTPAPI := func(t *testing.T, sub, id string) (int, string) {
		ev, err := testkit.Event("session-get.json")
		if err != nil {
			t.Fatal(err)
		}
		ev.PathParameters = map[string]string{"sessionId": id}
		ev.RequestContext.Authorizer = &events.APIGatewayV2HTTPRequestContextAuthorizerDescription{
			JWT: &events.APIGatewayV2HTTPRequestContextAuthorizerJWTDescription{Claims: map[string]string{"sub": sub}},
		}
		resp, err := httpAPI(t.Context(), ev)
		if err != nil {
			t.Fatal(err)
		}
		return resp.StatusCode, resp.Body
	}
	const ada = "arn:aws:sts::123456789012:assumed-role/chat-client/ada"
	tests := []struct {
		name           string
		caller, other  identity
		elsewhere      func(t *testing.T, id string) (int, string)
		elsewhereOther func(t *testing.T, id string) (int, string)
	}{
		{
			name: "Cognito", caller: cognito("3f1c2d4e-5a6b-7c8d-9e0f-1a2b3c4d5e6f"), other: cognito("someone-else"),
			elsewhere: func(t *testing.T, id string) (int, string) {
				return viaHTTPAPI(t, "3f1c2d4e-5a6b-7c8d-9e0f-1a2b3c4d5e6f", id)
			},
			elsewhereOther: func(t *testing.T, id string) (int, string) { return viaHTTPAPI(t, "iam:"+ada, id) },
		},
		{
			name: "Lambda authorizer", caller: lambdaAuthorizer("user-42"), other: lambdaAuthorizer("user-43"),
			elsewhere:      func(t *testing.T, id string) (int, string) { return viaHTTPAPI(t, "user-42", id) },
			elsewhereOther: func(t *testing.T, id string) (int, string) { return viaHTTPAPI(t, "someone", id) },
		},
		{
			name: "IAM", caller: iam(ada), other: iam("arn:aws:sts::123456789012:assumed-role/chat-client/bob"),
			elsewhere: func(t *testing.T, id string) (int, string) {
				a, body := viaURL(t, ada, "/sessions/"+id)
				return a.StatusCode, body
			},
			// A JWT whose subject spells the owner of an IAM principal's
			// sessions is refused: it cannot pass for one.
			elsewhereOther: func(t *testing.T, id string) (int, string) { return viaHTTPAPI(t, "iam:"+ada, id) },
		},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			id := "rest-" + strings.ReplaceAll(strings.ToLower(tt.name), " ", "-")
			s.Model.Enqueue(conversetest.Text("Hello from turn " + string(rune('A'+i))))
			chat := proxyEvent(t, "stream-chat-rest.json")
			chat.Body = `{"session_id": "` + id + `", "message": "Hi"}`
			chat.Headers["origin"], chat.MultiValueHeaders = "https://chat.example.com", nil
			a, body := s.serve(t, marshal(t, tt.caller.on(chat)))
			names, done := sse(body)
			if a.StatusCode != 200 || a.Headers["Content-Type"] != "text/event-stream" || names != "start text done" || done["session_id"] != id {
				t.Fatalf("POST /chat/stream: %d %v\n%s", a.StatusCode, a.Headers, body)
			}
			if got := a.Headers["Access-Control-Allow-Origin"]; got != "https://chat.example.com" {
				t.Errorf("Access-Control-Allow-Origin %q on a stream to an allowed origin", got)
			}

			get := proxyEvent(t, "session-get-rest.json")
			get.PathParameters = map[string]string{"sessionId": id}
			get.Path = "/sessions/" + id
			a, body = s.serve(t, marshal(t, tt.caller.on(get)))
			var page struct {
				SessionID string `json:"session_id"`
				Messages  []any  `json:"messages"`
			}
			if err := json.Unmarshal([]byte(body), &page); a.StatusCode != 200 || err != nil || page.SessionID != id || len(page.Messages) != 2 {
				t.Errorf("GET /sessions/%s as its caller: %d %s", id, a.StatusCode, body)
			}
			if status, body := tt.elsewhere(t, id); status != 200 || !strings.Contains(body, `"session_id":"`+id+`"`) {
				t.Errorf("the same caller through the other API: %d %s", status, body)
			}
			if status, body := tt.elsewhereOther(t, id); status == 200 {
				t.Errorf("another owner through the other API read the session: %s", body)
			}
			if a, body := s.serve(t, marshal(t, tt.other.on(get))); a.StatusCode != 404 || errorCode(body) != "not_found" {
				t.Errorf("another caller of the same kind: %d %s; want 404 not_found", a.StatusCode, body)
			}
			if a, body := s.serve(t, marshal(t, identity{}.on(get))); a.StatusCode != 401 || errorCode(body) != "unauthorized" {
				t.Errorf("no caller: %d %s; want 401 unauthorized", a.StatusCode, body)
			}
		})
	}
}

// TestRESTCallersWhoNameNobody: a REST event whose authorizer or signature
// is there but names nobody, or names an owner of another namespace, is
// refused with 401 before anything runs, never served as anonymous.
func TestRESTCallersWhoNameNobody(t *testing.T) {
	s := start(t)
	chat := proxyEvent(t, "stream-chat-rest.json")
	for _, tt := range []struct {
		name   string
		caller identity
	}{
		{"Cognito claims without a subject", cognito(nil)},
		{"Cognito claims with a subject that is no string", cognito(42.0)},
		{"claims that are no object", identity{authorizer: map[string]any{"claims": "sub=x"}}},
		{"a Lambda authorizer's context without a subject", lambdaAuthorizer(nil)},
		{"a Lambda authorizer's empty subject", lambdaAuthorizer("")},
		{"a subject that is the anonymous owner", cognito("anonymous")},
		{"a subject in the IAM namespace", lambdaAuthorizer("iam:arn:aws:iam::123456789012:user/ada")},
		{"a signature without an ARN", iam("")},
		{"no caller", identity{}},
		{"an empty authorizer", identity{authorizer: map[string]any{}}},
	} {
		a, body := s.serve(t, marshal(t, tt.caller.on(chat)))
		if a.StatusCode != 401 || errorCode(body) != "unauthorized" {
			t.Errorf("%s: %d %s; want 401 unauthorized", tt.name, a.StatusCode, body)
		}
	}
	if s.Model.Calls() != 0 {
		t.Errorf("a refused caller reached the model %d times", s.Model.Calls())
	}
}

// TestRESTHostilePathParameters sends REST events of the session routes
// with each path parameter replaced by one that holds a slash, a dot
// segment or a control character, as the client encoded it or already
// decoded: each gets the event's own route's 400 or 404, never another
// route, a redirect or a failed invocation.
func TestRESTHostilePathParameters(t *testing.T) {
	s := start(t)
	hostile := []string{".", "..", "rest/export", "rest/tools/calculator", "calc/../../x", "../../chat",
		"/rest", "rest/", "a%2Fb", "%2E%2E", "a\x00b", "a\nb", "\x7f", "a?b", "a#b", "100%"}
	caller := iam("arn:aws:sts::123456789012:assumed-role/chat-client/ada")
	routes := []struct {
		method, resource, body string
	}{
		{"GET", "/sessions/{sessionId}", ""},
		{"DELETE", "/sessions/{sessionId}", ""},
		{"GET", "/sessions/{sessionId}/export", ""},
		{"POST", "/sessions/{sessionId}/rewind", `{"to":2}`},
		{"POST", "/sessions/{sessionId}/tools/{name}", `{"input":{"expression":"19*23"}}`},
	}
	for _, r := range routes {
		for _, param := range []string{"sessionId", "name"} {
			if !strings.Contains(r.resource, "{"+param+"}") {
				continue
			}
			status, code := 400, "invalid_session_id"
			if param == "name" {
				status, code = 404, "unknown_tool"
			}
			for _, v := range hostile {
				for _, sent := range []string{v, url.PathEscape(v)} {
					ev := proxyEvent(t, "session-get-rest.json")
					ev.HTTPMethod, ev.Resource, ev.Body = r.method, r.resource, r.body
					ev.PathParameters = map[string]string{"sessionId": "rest-session", "name": "calculator"}
					ev.PathParameters[param] = sent
					a, body := s.serve(t, marshal(t, caller.on(ev)))
					if a.StatusCode != status || errorCode(body) != code {
						t.Errorf("%s %s with %s=%q: %d %s %s; want %d %s", r.method, r.resource, param, sent, a.StatusCode, a.Headers["Location"], body, status, code)
					}
				}
			}
		}
	}
	if s.Model.Calls() != 0 {
		t.Errorf("a hostile path reached the model %d times", s.Model.Calls())
	}
}
