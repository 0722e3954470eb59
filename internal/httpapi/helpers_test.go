package httpapi_test

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-lambda-go/lambdacontext"
	"github.com/lambda-agent/lambda-agent/internal/ddbhistory"
	"github.com/lambda-agent/lambda-agent/internal/httpapi"
	"github.com/lambda-agent/lambda-agent/internal/lambdahttp"
	"github.com/lambda-agent/lambda-agent/internal/schema"
	"github.com/lambda-agent/lambda-agent/internal/testkit"
	"github.com/lambda-agent/lambda-agent/internal/testkit/conversetest"
)

// api is the handler wired like a deployed function (testkit): the real
// agent talking to the strict Converse stand-in through the SDK, and the
// real store talking to an in-process DynamoDB. Events reach it through the
// functions' adapter, lambdahttp, as they do in Lambda.
type api struct {
	*testkit.Stack
	h            http.Handler
	model        *conversetest.Server
	store        *ddbhistory.Store
	logs         *testkit.Buffer
	chatFn       lambdahttp.Handler // the chat and structured functions
	structuredFn lambdahttp.Handler
	stream       http.Handler // the stream function's URL
}

// newAPI builds the handler from environment-style settings, as a function
// does at init. env overrides the defaults.
func newAPI(t testing.TB, env map[string]string) *api {
	t.Helper()
	s := testkit.Start(t, testkit.Options{Env: env})
	a := &api{Stack: s, h: s.Handler, model: s.Model, store: s.Store, logs: s.Logs, stream: s.Handler}
	a.chatFn, a.structuredFn = a.function(t, httpapi.ChatRoutes), a.function(t, httpapi.StructuredRoutes)
	return a
}

// function is the Lambda handler of a function that serves routes, on a's
// stack.
func (a *api) function(t testing.TB, routes httpapi.Routes) lambdahttp.Handler {
	t.Helper()
	return lambdahttp.Wrap(a.handler(t, routes))
}

// handler is the handler of a function that serves routes, on a's stack.
func (a *api) handler(t testing.TB, routes httpapi.Routes) *httpapi.Handler {
	t.Helper()
	h, err := httpapi.New(httpapi.Config{
		Service:         a.Turns,
		Routes:          routes,
		CompileSchema:   schema.Compile,
		RequireAuth:     a.Config.RequireAuth,
		MaxMessageBytes: a.Config.MaxMessageBytes,
		Logger:          slog.New(slog.NewJSONHandler(a.logs, nil)),
	})
	if err != nil {
		t.Fatal(err)
	}
	return h
}

// fixture loads an event from events/, the samples `sam local invoke` uses.
func fixture(t testing.TB, name string) events.APIGatewayV2HTTPRequest {
	t.Helper()
	e, err := testkit.Event(name)
	if err != nil {
		t.Fatal(err)
	}
	return e
}

// request builds an event from a fixture of the same route, with its body,
// session and claims replaced.
type request struct {
	route   string // fixture file
	body    any    // string is sent as is; anything else is JSON-encoded
	session string // the {sessionId} of /sessions routes
	owner   string // JWT subject; empty keeps the fixture's claims, if any
	headers map[string]string
	query   map[string]string
}

func (r request) event(t testing.TB) events.APIGatewayV2HTTPRequest {
	t.Helper()
	e := fixture(t, r.route)
	if r.owner != "" {
		e.RequestContext.Authorizer = &events.APIGatewayV2HTTPRequestContextAuthorizerDescription{
			JWT: &events.APIGatewayV2HTTPRequestContextAuthorizerJWTDescription{Claims: map[string]string{"sub": r.owner}},
		}
	}
	switch b := r.body.(type) {
	case nil:
	case string:
		e.Body = b
	default:
		raw, err := json.Marshal(b)
		if err != nil {
			t.Fatal(err)
		}
		e.Body = string(raw)
	}
	if r.session != "" {
		// The fixture's path, such as /sessions/{id}/export, with the id.
		e.RawPath = strings.Replace(e.RawPath, "/sessions/"+e.PathParameters["sessionId"], "/sessions/"+r.session, 1)
		e.PathParameters = map[string]string{"sessionId": r.session}
	}
	for k, v := range r.headers {
		e.Headers[strings.ToLower(k)] = v
	}
	if r.query != nil {
		e.QueryStringParameters = r.query
	}
	return e
}

// response is a decoded answer.
type response struct {
	status  int
	headers map[string]string
	raw     string
	body    map[string]any
}

func (r response) errorCode() string {
	e, _ := r.body["error"].(map[string]any)
	code, _ := e["code"].(string)
	return code
}

func (r response) errorMessage() string {
	e, _ := r.body["error"].(map[string]any)
	msg, _ := e["message"].(string)
	return msg
}

// invoke sends req to the function that serves its route, under a Lambda
// context with a 30 s deadline, as API Gateway's would be.
func (a *api) invoke(t testing.TB, req request) response {
	t.Helper()
	return a.invokeCtx(t, context.Background(), req, 30*time.Second)
}

func (a *api) invokeCtx(t testing.TB, ctx context.Context, req request, timeout time.Duration) response {
	t.Helper()
	e := req.event(t)
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	ctx = lambdacontext.NewContext(ctx, &lambdacontext.LambdaContext{AwsRequestID: e.RequestContext.RequestID})
	serve := a.chatFn
	if strings.HasPrefix(req.route, "structured") {
		serve = a.structuredFn
	}
	resp, err := serve(ctx, e)
	if err != nil {
		t.Fatalf("handler returned an error: %v", err)
	}
	out := response{status: resp.StatusCode, headers: resp.Headers, raw: resp.Body}
	if resp.Body != "" {
		if err := json.Unmarshal([]byte(resp.Body), &out.body); err != nil {
			t.Fatalf("status %d, body is not a JSON object: %q", resp.StatusCode, resp.Body)
		}
	}
	if resp.StatusCode >= 400 {
		if out.errorCode() == "" || out.errorMessage() == "" || resp.Headers["Content-Type"] != "application/json" {
			t.Errorf("status %d without an error body {code, message}: %s", resp.StatusCode, resp.Body)
		}
	}
	if resp.StatusCode == 500 && out.errorCode() != "misconfigured" { // a bug
		t.Errorf("500 for %s: %s", req.route, resp.Body)
	}
	return out
}

// chat posts a message and returns the answer.
func (a *api) chat(t testing.TB, owner, session, message string) response {
	t.Helper()
	body := map[string]any{"message": message}
	if session != "" {
		body["session_id"] = session
	}
	return a.invoke(t, request{route: "chat-new.json", body: body, owner: owner})
}

// transcript reads a session's whole transcript through GET.
func (a *api) transcript(t testing.TB, owner, session string) response {
	t.Helper()
	return a.invoke(t, request{route: "session-get.json", session: session, owner: owner, query: map[string]string{"limit": "1000"}})
}

func messagesOf(r response) []any {
	m, _ := r.body["messages"].([]any)
	return m
}
