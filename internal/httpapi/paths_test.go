package httpapi_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/aws/aws-lambda-go/events"
	"github.com/lambda-agent/lambda-agent/internal/httpapi"
	"github.com/lambda-agent/lambda-agent/internal/lambdahttp"
	"github.com/lambda-agent/lambda-agent/internal/testkit/conversetest"
)

// hostileParameters are path parameters that would move a request to
// another route, or out of /sessions, if they were pasted into its path as
// they are. API Gateway decodes %2F and %2E in a parameter, so that each of
// them can arrive in an event.
var hostileParameters = []string{
	".", "..", "demo-session/export", "demo-session/tools/calculator", "calc/../../x", "../../chat",
	"/demo-session", "demo-session/", "a%2Fb", "%2E%2E", "demo-session\x00", "demo\nsession", "\x7f", "a?b", "a#b",
}

// TestHostilePathParameters sends the sample event of every route with path
// parameters, each parameter in turn replaced by one that holds a slash,
// a dot segment, an encoded slash or a control character. A session id gets
// 400 invalid_session_id and a tool name 404 unknown_tool, from the event's
// own route: never a redirect, never another route, and nothing changes.
func TestHostilePathParameters(t *testing.T) {
	a := newAPI(t, nil)
	a.model.Enqueue(conversetest.Text("hello"))
	if r := a.chat(t, "", "demo-session", "hi"); r.status != http.StatusOK {
		t.Fatal(r.raw)
	}
	before := a.transcript(t, "", "demo-session").raw
	calls := a.model.Calls()

	importPage := fixture(t, "session-rewind.json")
	importPage.RouteKey = httpapi.RouteImportPage
	importPage.QueryStringParameters = map[string]string{"token": "t"}
	routes := []struct {
		name string
		ev   events.APIGatewayV2HTTPRequest
	}{
		{"session-get.json", fixture(t, "session-get.json")},
		{"session-delete.json", fixture(t, "session-delete.json")},
		{"session-export.json", fixture(t, "session-export.json")},
		{"session-rewind.json", fixture(t, "session-rewind.json")},
		{"an import's page", importPage},
		{"tool-call.json", fixture(t, "tool-call.json")},
	}
	for _, route := range routes {
		for param := range route.ev.PathParameters {
			status, code := http.StatusBadRequest, "invalid_session_id"
			if param == "name" {
				status, code = http.StatusNotFound, "unknown_tool"
			}
			for _, v := range hostileParameters {
				ev := route.ev
				ev.PathParameters = map[string]string{}
				for k, old := range route.ev.PathParameters {
					ev.PathParameters[k] = old
				}
				ev.PathParameters[param] = v
				resp, err := a.chatFn(t.Context(), ev)
				if err != nil {
					t.Fatal(err)
				}
				var body struct {
					Error struct{ Code, Message string }
				}
				_ = json.Unmarshal([]byte(resp.Body), &body)
				if resp.StatusCode != status || body.Error.Code != code || body.Error.Message == "" {
					t.Errorf("%s with %s=%q: %d %s %s; want %d %s", route.name, param, v, resp.StatusCode, resp.Headers["Location"], resp.Body, status, code)
				}
			}
		}
	}
	if after := a.transcript(t, "", "demo-session").raw; after != before {
		t.Errorf("a hostile path changed the session:\nbefore %s\nafter  %s", before, after)
	}
	if a.model.Calls() != calls {
		t.Errorf("a hostile path reached the model %d times", a.model.Calls()-calls)
	}
}

// uncleanPaths are paths that a ServeMux would clean and redirect: empty,
// "." and ".." segments, and paths that do not begin with a slash.
var uncleanPaths = []string{
	"/sessions/../etc", "/sessions/demo-session/tools/..", "/sessions/demo-session/tools/.", "/sessions/demo-session/tools/calc/../../x",
	"/sessions/./demo-session", "/./chat", "/chat/..", "//chat", "/sessions//export", "/sessions/demo-session//", "sessions", "", "*",
}

// TestUncleanPathsAreRefused sends paths that a ServeMux would clean, with
// every method, as an API Gateway event of the $default route, which
// carries its path as it is: each gets 400 invalid_path, never a redirect.
func TestUncleanPathsAreRefused(t *testing.T) {
	a := newAPI(t, nil)
	for _, path := range uncleanPaths {
		for _, method := range []string{"GET", "POST", "DELETE", "PUT", "PATCH", "HEAD", "OPTIONS", "CONNECT"} {
			ev := fixture(t, "session-get.json")
			ev.RouteKey, ev.RawPath, ev.PathParameters = "$default", path, nil
			ev.RequestContext.HTTP.Method, ev.RequestContext.HTTP.Path = method, path
			for _, fn := range []struct {
				name  string
				serve func(context.Context, events.APIGatewayV2HTTPRequest) (events.APIGatewayV2HTTPResponse, error)
			}{{"chat", a.chatFn}, {"structured", a.structuredFn}} {
				resp, err := fn.serve(t.Context(), ev)
				if err != nil {
					t.Fatal(err)
				}
				var body struct {
					Error struct{ Code, Message string }
				}
				_ = json.Unmarshal([]byte(resp.Body), &body)
				if resp.StatusCode != http.StatusBadRequest || body.Error.Code != "invalid_path" || !strings.Contains(body.Error.Message, "not cleaned") {
					t.Errorf("%s %q to the %s function: %d %s %s; want 400 invalid_path", method, path, fn.name, resp.StatusCode, resp.Headers["Location"], resp.Body)
				}
			}
		}
	}
}

// TestHostilePathsThroughAFunctionURL sends hostile raw paths to the stream
// function's URL, as the function serves it: a function URL passes the path
// as the client encoded it, so that literal dot segments, encoded slashes
// and dots, a bare % and control characters can all arrive. Each gets its
// 400 or 404 with an error body, never a redirect, a stream or a failed
// invocation.
func TestHostilePathsThroughAFunctionURL(t *testing.T) {
	a := newAPI(t, nil)
	fn := lambdahttp.WrapURL(a.handler(t, httpapi.FunctionURLRoutes))
	tests := []struct {
		method, path string
		status       int
		code         string
	}{
		{"GET", "/sessions/../etc", 400, "invalid_path"},
		{"POST", "/sessions/../chat", 400, "invalid_path"},
		{"POST", "/sessions/demo/tools/..", 400, "invalid_path"},
		{"GET", "//sessions", 400, "invalid_path"},
		{"GET", "/sessions/demo%2Fexport", 400, "invalid_session_id"},
		{"DELETE", "/sessions/demo%2Ftools%2Fcalculator", 400, "invalid_session_id"},
		{"GET", "/sessions/%2E%2E", 400, "invalid_session_id"},
		{"GET", "/sessions/%2e", 400, "invalid_session_id"},
		{"GET", "/sessions/100%", 400, "invalid_session_id"},
		{"GET", "/sessions/100%2", 400, "invalid_session_id"},
		{"GET", "/sessions/a%00b", 400, "invalid_session_id"},
		{"GET", "/sessions/a\x00b", 400, "invalid_session_id"},
		{"DELETE", "/sessions/a\nb", 400, "invalid_session_id"},
		{"GET", "/sessions/a#b", 400, "invalid_session_id"},
		{"GET", "/sessions/a?b", 400, "invalid_session_id"},
		{"POST", "/sessions/demo/tools/calc%2F..%2F..%2Fx", 404, "unknown_tool"},
		{"POST", "/sessions/demo/tools/%2E%2E", 404, "unknown_tool"},
		{"POST", "/sessions/demo/tools/calc%0A", 404, "unknown_tool"},
	}
	for _, tt := range tests {
		resp, err := fn(t.Context(), &events.LambdaFunctionURLRequest{
			Version: "2.0", RawPath: tt.path, Body: `{}`,
			Headers: map[string]string{"content-type": "application/json"},
			RequestContext: events.LambdaFunctionURLRequestContext{
				RequestID: "r1", DomainName: "abc.lambda-url.us-east-1.on.aws",
				HTTP: events.LambdaFunctionURLRequestContextHTTPDescription{Method: tt.method, Path: tt.path},
			},
		})
		if err != nil {
			t.Errorf("%s %q: the invocation failed: %v", tt.method, tt.path, err)
			continue
		}
		out, _ := io.ReadAll(resp.Body)
		var body struct {
			Error struct{ Code, Message string }
		}
		_ = json.Unmarshal(out, &body)
		if resp.StatusCode != tt.status || body.Error.Code != tt.code || body.Error.Message == "" {
			t.Errorf("%s %q: %d %s %s; want %d %s", tt.method, tt.path, resp.StatusCode, resp.Headers["Location"], out, tt.status, tt.code)
		}
	}
	if a.model.Calls() != 0 {
		t.Errorf("a hostile path reached the model %d times", a.model.Calls())
	}
}
