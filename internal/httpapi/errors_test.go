package httpapi_test

import (
	"context"
	"encoding/base64"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/lambda-agent/lambda-agent/internal/agent"
	"github.com/lambda-agent/lambda-agent/internal/ddbhistory"
	"github.com/lambda-agent/lambda-agent/internal/httpapi"
	"github.com/lambda-agent/lambda-agent/internal/lambdahttp"
	"github.com/lambda-agent/lambda-agent/internal/testkit"
	"github.com/lambda-agent/lambda-agent/internal/testkit/conversetest"
	"github.com/lambda-agent/lambda-agent/internal/testkit/dynamodbtest"
	"github.com/lambda-agent/lambda-agent/internal/turn"
)

// png is the smallest valid-looking image body; the stand-in checks only
// that bytes are there.
var png = base64.StdEncoding.EncodeToString([]byte("\x89PNG\r\n\x1a\n"))

func TestBadInputGets4xxAndChangesNothing(t *testing.T) {
	a := newAPI(t, map[string]string{"MAX_MESSAGE_BYTES": "1000"})
	if r := a.chat(t, "", "victim", "hello"); r.status != 200 {
		t.Fatal(r.raw)
	}
	before := a.transcript(t, "", "victim").raw
	calls := a.model.Calls()

	tests := []struct {
		name    string
		req     request
		status  int
		code    string
		message string // a substring of the message
	}{
		{"malformed JSON", request{route: "chat-new.json", body: `{"session_id":"victim","message":`}, 400, "invalid_json", "truncated JSON"},
		{"not JSON at all", request{route: "chat-new.json", body: `session_id=victim`}, 400, "invalid_json", "not valid JSON"},
		{"not an object", request{route: "chat-new.json", body: `["victim"]`}, 400, "invalid_json", "must be"},
		{"empty body", request{route: "chat-new.json", body: ``}, 400, "invalid_json", "empty"},
		{"trailing data", request{route: "chat-new.json", body: `{"session_id":"victim","message":"x"} {}`}, 400, "invalid_json", "after the JSON value"},
		{"unknown field", request{route: "chat-new.json", body: `{"session_id":"victim","mesage":"x"}`}, 400, "invalid_json", `unknown field "mesage"`},
		{"wrong type", request{route: "chat-new.json", body: `{"session_id":"victim","message":42}`}, 400, "invalid_json", "message must be a string, not a number"},
		{"missing message", request{route: "chat-new.json", body: `{"session_id":"victim"}`}, 400, "invalid_request", "message is required"},
		{"blank message", request{route: "chat-new.json", body: `{"session_id":"victim","message":" \n\t "}`}, 400, "invalid_request", "blank"},
		{"message and content", request{route: "chat-new.json", body: `{"session_id":"victim","message":"x","content":[{"text":"y"}]}`}, 400, "invalid_request", "not both"},
		{"bad session id", request{route: "chat-new.json", body: `{"session_id":"../etc/passwd","message":"x"}`}, 400, "invalid_session_id", "../etc/passwd"},
		{"too long session id", request{route: "chat-new.json", body: `{"session_id":"` + strings.Repeat("a", 129) + `","message":"x"}`}, 400, "invalid_session_id", "128"},
		{"bad base64", request{route: "chat-new.json", body: `{"session_id":"victim","content":[{"text":"look"},{"image":{"format":"png","source":{"bytes":"%%%not base64"}}}]}`}, 400, "invalid_base64", "content[1]"},
		{"unsupported image format", request{route: "chat-new.json", body: `{"session_id":"victim","content":[{"text":"look"},{"image":{"format":"bmp","source":{"bytes":"` + png + `"}}}]}`}, 400, "invalid_content", `"bmp"`},
		{"unsupported document format", request{route: "chat-new.json", body: `{"session_id":"victim","content":[{"text":"read"},{"document":{"format":"exe","name":"x","source":{"bytes":"` + png + `"}}}]}`}, 400, "invalid_content", `"exe"`},
		{"document without text", request{route: "chat-new.json", body: `{"session_id":"victim","content":[{"document":{"format":"txt","name":"x","source":{"bytes":"` + png + `"}}}]}`}, 400, "invalid_content", "text block"},
		{"tool use smuggled in", request{route: "chat-new.json", body: `{"session_id":"victim","content":[{"toolUse":{"toolUseId":"t","name":"calculator","input":{}}}]}`}, 400, "invalid_content", "only text, image and document"},
		{"unknown block", request{route: "chat-new.json", body: `{"session_id":"victim","content":[{"video":{}}]}`}, 400, "invalid_json", `unknown field "video"`},
		{"empty content", request{route: "chat-new.json", body: `{"session_id":"victim","content":[]}`}, 400, "invalid_request", "message is required"},
		{"message over the limit", request{route: "chat-new.json", body: map[string]any{"session_id": "victim", "message": strings.Repeat("x", 1001)}}, 413, "message_too_large", "1001 bytes"},
		{"body over the limit", request{route: "chat-new.json", body: `{"session_id":"victim","message":"` + strings.Repeat(`\u0000`, 100_000) + `"}`}, 413, "message_too_large", "the body is"},
		{"bad idempotency key", request{route: "chat-new.json", body: `{"session_id":"victim","message":"x"}`, headers: map[string]string{"Idempotency-Key": strings.Repeat("k", 129)}}, 400, "invalid_idempotency_key", "128"},
		{"idempotency key with spaces", request{route: "chat-new.json", body: `{"session_id":"victim","message":"x"}`, headers: map[string]string{"Idempotency-Key": "a b"}}, 400, "invalid_idempotency_key", "visible ASCII"},
		{"bad limit", request{route: "session-get.json", session: "victim", query: map[string]string{"limit": "0"}}, 400, "invalid_limit", "limit"},
		{"limit too big", request{route: "session-get.json", session: "victim", query: map[string]string{"limit": "1001"}}, 400, "invalid_limit", "1000"},
		{"bad cursor", request{route: "session-get.json", session: "victim", query: map[string]string{"cursor": "!!!"}}, 400, "invalid_request", "cursor"},
		{"bad path id", request{route: "session-delete.json", session: "a b"}, 400, "invalid_session_id", `"a b"`},
		{"unknown session", request{route: "session-get.json", session: "nobody-here"}, 404, "not_found", "not found"},
		{"invalid schema", request{route: "structured.json", body: `{"session_id":"victim","prompt":"p","schema":{"type":"object","properties":{"a":{"type":"strin"}}}}`}, 400, "invalid_schema", "invalid JSON Schema"},
		{"schema with array root", request{route: "structured.json", body: `{"session_id":"victim","prompt":"p","schema":{"type":"array"}}`}, 400, "invalid_schema", `"type": "object"`},
		{"schema reading files", request{route: "structured.json", body: `{"session_id":"victim","prompt":"p","schema":{"type":"object","$ref":"file:///etc/passwd"}}`}, 400, "invalid_schema", "not allowed"},
		{"missing schema", request{route: "structured.json", body: `{"session_id":"victim","prompt":"p"}`}, 400, "invalid_schema", "schema is required"},
		{"missing prompt", request{route: "structured.json", body: `{"session_id":"victim","schema":{"type":"object"}}`}, 400, "invalid_request", "prompt is required"},
		{"bad tool name", request{route: "structured.json", body: `{"session_id":"victim","prompt":"p","name":"has space","schema":{"type":"object"}}`}, 400, "invalid_content", "name"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := a.invoke(t, tt.req)
			if r.status != tt.status || r.errorCode() != tt.code || !strings.Contains(r.errorMessage(), tt.message) {
				t.Errorf("got %d %s %q; want %d %s containing %q", r.status, r.errorCode(), r.errorMessage(), tt.status, tt.code, tt.message)
			}
		})
	}
	if after := a.transcript(t, "", "victim").raw; after != before {
		t.Errorf("bad input changed the session:\nbefore %s\nafter  %s", before, after)
	}
	if a.model.Calls() != calls {
		t.Errorf("bad input reached the model %d times", a.model.Calls()-calls)
	}
}

func TestRoutes(t *testing.T) {
	a := newAPI(t, nil)
	e := fixture(t, "chat-new.json")
	e.RouteKey, e.RawPath, e.RequestContext.HTTP.Method = "$default", "/nowhere", "GET"
	r := a.serve(t, a.chatFn, e)
	if r.StatusCode != 404 || !strings.Contains(r.Body, "no_route") {
		t.Errorf("unknown path: %d %s", r.StatusCode, r.Body)
	}
	e.RawPath, e.RequestContext.HTTP.Method = "/chat", "PUT"
	r = a.serve(t, a.chatFn, e)
	if r.StatusCode != 405 || !strings.Contains(r.Body, "use POST") {
		t.Errorf("wrong method: %d %s", r.StatusCode, r.Body)
	}
	// Without a RouteKey (a hand-written event, a $default route) the path
	// says where a request goes, session id included.
	e = fixture(t, "session-get.json")
	e.RouteKey, e.PathParameters = "", nil
	r = a.serve(t, a.chatFn, e)
	if r.StatusCode != 404 || !strings.Contains(r.Body, "session not found") {
		t.Errorf("routing by path: %d %s", r.StatusCode, r.Body)
	}
	// The structured function serves only its route.
	r = a.serve(t, a.structuredFn, fixture(t, "chat-new.json"))
	if r.StatusCode != 404 {
		t.Errorf("chat route on the structured function: %d", r.StatusCode)
	}
	// A body API Gateway base64-encoded is decoded.
	e = fixture(t, "chat-continue.json")
	e.Body, e.IsBase64Encoded = base64.StdEncoding.EncodeToString([]byte(e.Body)), true
	if r := a.serve(t, a.chatFn, e); r.StatusCode != 200 {
		t.Errorf("base64 body: %d %s", r.StatusCode, r.Body)
	}
	e.Body = "###"
	if r := a.serve(t, a.chatFn, e); r.StatusCode != 400 || !strings.Contains(r.Body, "base64") {
		t.Errorf("bad base64 body: %d %s", r.StatusCode, r.Body)
	}
}

func (a *api) serve(t *testing.T, serve func(context.Context, events.APIGatewayV2HTTPRequest) (events.APIGatewayV2HTTPResponse, error), e events.APIGatewayV2HTTPRequest) events.APIGatewayV2HTTPResponse {
	t.Helper()
	r, err := serve(t.Context(), e)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func TestAuth(t *testing.T) {
	a := newAPI(t, map[string]string{"REQUIRE_AUTH": "true"})
	r := a.invoke(t, request{route: "chat-continue.json"})
	if r.status != 401 || r.errorCode() != "unauthorized" {
		t.Errorf("no claims: %d %s", r.status, r.raw)
	}
	if r := a.invoke(t, request{route: "session-get.json"}); r.status != 401 {
		t.Errorf("GET without claims: %d", r.status)
	}
	if r := a.invoke(t, request{route: "chat-jwt.json"}); r.status != 200 {
		t.Errorf("with the fixture's claims: %d %s", r.status, r.raw)
	}
	if r := a.invoke(t, request{route: "chat-continue.json", owner: strings.Repeat("s", 1025)}); r.status != 401 {
		t.Errorf("oversized subject: %d", r.status)
	}
}

func TestUpstreamFailures(t *testing.T) {
	tests := []struct {
		name       string
		env        map[string]string
		setup      func(*conversetest.Server)
		timeout    time.Duration
		status     int
		code       string
		retryAfter bool
	}{
		{"model keeps throttling", nil, func(s *conversetest.Server) {
			s.Responder = func(*conversetest.Request) conversetest.Reply { return conversetest.Throttle() }
		}, 30 * time.Second, 429, "throttled", true},
		{"model keeps failing", nil, func(s *conversetest.Server) {
			s.Responder = func(*conversetest.Request) conversetest.Reply { return conversetest.InternalError() }
		}, 30 * time.Second, 502, "model_error", false},
		{"model access denied", nil, func(s *conversetest.Server) { s.Enqueue(conversetest.AccessDenied()) }, 30 * time.Second, 500, "misconfigured", false},
		{"model id unknown", nil, func(s *conversetest.Server) {
			s.Enqueue(conversetest.Error(400, "ValidationException", "The provided model identifier is invalid."))
		}, 30 * time.Second, 500, "misconfigured", false},
		{"model to call through a profile", nil, func(s *conversetest.Server) {
			s.Enqueue(conversetest.Error(400, "ValidationException", "Invocation of model ID anthropic.claude-sonnet-4-5-20250929-v1:0 with on-demand throughput isn’t supported. Retry your request with the ID or ARN of an inference profile that contains this model."))
		}, 30 * time.Second, 500, "misconfigured", false},
		{"model slower than the deadline", nil, func(s *conversetest.Server) {
			s.Enqueue(conversetest.Text("late").WithDelay(10 * time.Second))
		}, 4 * time.Second, 504, "timeout", false},
		{"context overflow with no manager", map[string]string{"CONVERSATION_MANAGER": "none"}, func(s *conversetest.Server) {
			s.Enqueue(conversetest.Overflow())
		}, 30 * time.Second, 413, "context_overflow", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a := newAPI(t, tt.env)
			if r := a.chat(t, "", "victim", "hello"); r.status != 200 {
				t.Fatal(r.raw)
			}
			before := a.transcript(t, "", "victim").raw
			tt.setup(a.model)
			start := time.Now()
			r := a.invokeCtx(t, t.Context(), request{route: "chat-new.json", body: map[string]any{"session_id": "victim", "message": "again"}}, tt.timeout)
			if r.status != tt.status || r.errorCode() != tt.code {
				t.Errorf("got %d %s, want %d %s: %s", r.status, r.errorCode(), tt.status, tt.code, r.raw)
			}
			if (r.headers["Retry-After"] != "") != tt.retryAfter {
				t.Errorf("Retry-After %q", r.headers["Retry-After"])
			}
			if d := time.Since(start); d >= tt.timeout {
				t.Errorf("answered after %s, past the %s deadline", d, tt.timeout)
			}
			a.model.Responder = conversetest.EchoResponder
			if after := a.transcript(t, "", "victim").raw; after != before {
				t.Errorf("the failed turn changed the session")
			}
		})
	}
}

// A deployment whose table does not exist answers every route with a 500
// misconfigured that names the table and the setting, not a 503 that asks
// for a retry, and logs it once, at error level.
func TestMissingTableIsMisconfigured(t *testing.T) {
	a := newAPI(t, map[string]string{"TABLE_NAME": "no-such-table"})
	for _, route := range []string{"chat-new.json", "chat-continue.json", "structured.json", "sessions-list.json", "session-get.json", "session-delete.json"} {
		before := strings.Count(a.logs.String(), "\n")
		r := a.invoke(t, request{route: route})
		if r.status != 500 || r.errorCode() != "misconfigured" || !strings.Contains(r.errorMessage(), `"no-such-table"`) || !strings.Contains(r.errorMessage(), "TABLE_NAME") {
			t.Errorf("%s: %d %s", route, r.status, r.raw)
		}
		lines := strings.Split(strings.TrimSpace(a.logs.String()), "\n")[before:]
		if len(lines) != 1 || !strings.Contains(lines[0], `"level":"ERROR"`) || !strings.Contains(lines[0], "ResourceNotFoundException") {
			t.Errorf("%s: logged %q, want one error line with DynamoDB's error", route, lines)
		}
	}
	if n := a.model.Calls(); n != 0 {
		t.Errorf("%d model calls without a table", n)
	}
}

// A role that may not use the table gets a 500 misconfigured too. DynamoDB's
// text, which names the account and the role, goes to the log only.
func TestDeniedTableIsMisconfigured(t *testing.T) {
	const denial = "User: arn:aws:sts::123456789012:assumed-role/chat-role/fn is not authorized to perform: dynamodb:Query on resource: arn:aws:dynamodb:us-east-1:123456789012:table/sessions"
	s := testkit.Start(t, testkit.Options{DynamoDB: func(http.RoundTripper) http.RoundTripper { return denyAll{denial} }})
	r := httptest.NewRequest(http.MethodPost, "/chat", strings.NewReader(`{"session_id":"s1","message":"hi"}`))
	w := s.Serve(r)
	body := w.Body.String()
	if w.Code != 500 || !strings.Contains(body, `"code":"misconfigured"`) || !strings.Contains(body, "TABLE_NAME") || strings.Contains(body, "123456789012") {
		t.Errorf("%d %s", w.Code, body)
	}
	if logs := s.Logs.String(); strings.Count(logs, `"level":"ERROR"`) != 1 || !strings.Contains(logs, "chat-role") {
		t.Errorf("logs: %s", logs)
	}
}

// denyAll answers every DynamoDB request as IAM does when a policy does not
// allow it.
type denyAll struct{ message string }

func (d denyAll) RoundTrip(r *http.Request) (*http.Response, error) {
	return dynamodbtest.ErrorResponse(r, "AccessDeniedException", d.message), nil
}

// panicky is an agent with a bug.
type panicky struct{ turn.Agent }

func (panicky) Run(context.Context, *agent.Conversation, []agent.ContentBlock) (*agent.Result, error) {
	panic("nil pointer somewhere")
}

// failingStore is a store whose backend is down.
type failingStore struct{ turn.Store }

func (failingStore) Load(context.Context, ddbhistory.Key, string) (*ddbhistory.Session, error) {
	return nil, errors.New("dial tcp: connection refused")
}

var (
	_ turn.Agent = panicky{}
	_ turn.Store = failingStore{}
)

func TestBugsAnd500(t *testing.T) {
	a := newAPI(t, nil)
	quiet := slog.New(slog.DiscardHandler)
	serve := func(store turn.Store) events.APIGatewayV2HTTPResponse {
		t.Helper()
		turns, err := turn.New(store, panicky{})
		if err != nil {
			t.Fatal(err)
		}
		h, err := httpapi.New(httpapi.Config{Service: turns, Logger: quiet})
		if err != nil {
			t.Fatal(err)
		}
		resp, err := lambdahttp.Wrap(h)(t.Context(), fixture(t, "chat-new.json"))
		if err != nil {
			t.Fatal(err)
		}
		return resp
	}
	resp := serve(a.store)
	if resp.StatusCode != 500 || !strings.Contains(resp.Body, `"code":"internal"`) || strings.Contains(resp.Body, "nil pointer") {
		t.Errorf("panic: %d %s", resp.StatusCode, resp.Body)
	}
	resp = serve(failingStore{})
	if resp.StatusCode != 503 || resp.Headers["Retry-After"] == "" || strings.Contains(resp.Body, "connection refused") {
		t.Errorf("store down: %d %s", resp.StatusCode, resp.Body)
	}
}

// TestMessagesSpeakJSON: a body of the wrong shape is answered in JSON's
// terms, naming the field that was sent and the JSON type it must be, never
// a Go type.
func TestMessagesSpeakJSON(t *testing.T) {
	a := newAPI(t, nil)
	tests := []struct {
		route, body, want string
	}{
		{"chat-new.json", `[1,2]`, "the body must be an object, not an array"},
		{"chat-new.json", `{"content":"look"}`, "content must be an array, not a string"},
		{"chat-new.json", `{"content":[{"image":{"format":"png","source":{"bytes":7}}}]}`, "image.source.bytes must be a base64 string, not a number"},
		{"chat-new.json", `{"session_id":["a"],"message":"hi"}`, "session_id must be a string, not an array"},
		{"chat-new.json", `{"message":""}`, "message is blank"},
		{"structured.json", `{"prompt":"","schema":{"type":"object"}}`, "prompt is blank"},
		{"structured.json", `{"prompt":true,"schema":{"type":"object"}}`, "prompt must be a string, not true or false"},
		{"structured.json", `{"schema":{"type":"object"}}`, "prompt is required"},
	}
	for _, tt := range tests {
		r := a.invoke(t, request{route: tt.route, body: tt.body})
		msg := r.errorMessage()
		if r.status != 400 || !strings.Contains(msg, tt.want) {
			t.Errorf("%s: %d %q, want 400 containing %q", tt.body, r.status, msg, tt.want)
		}
		for _, goName := range []string{"httpapi.", "json.", "[]", "agent.", "struct", "Go value"} {
			if strings.Contains(msg, goName) {
				t.Errorf("%s: the message shows Go's %q: %s", tt.body, goName, msg)
			}
		}
	}
}

// loseUpdates is a DynamoDB transport whose UpdateItem answers never come:
// the request lands, and the caller waits until its context ends.
type loseUpdates struct{ next http.RoundTripper }

func (l loseUpdates) RoundTrip(r *http.Request) (*http.Response, error) {
	resp, err := l.next.RoundTrip(r)
	if err == nil && strings.HasSuffix(r.Header.Get("X-Amz-Target"), ".UpdateItem") {
		resp.Body.Close()
		<-r.Context().Done()
		return nil, r.Context().Err()
	}
	return resp, err
}

// TestDeleteOutOfTime: a DELETE whose time runs out while the session is
// being deleted says that its outcome is unknown, and a second one
// finishes it.
func TestDeleteOutOfTime(t *testing.T) {
	s := testkit.Start(t, testkit.Options{DynamoDB: func(next http.RoundTripper) http.RoundTripper { return loseUpdates{next} }})
	direct := s.DirectStore()
	sess := ddbhistory.NewSession(ddbhistory.Key{Owner: "anonymous", ID: "doomed"})
	if err := direct.Commit(t.Context(), sess, ddbhistory.Turn{Messages: []agent.Message{agent.UserText("hi"), agent.AssistantText("hello")}}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), turn.StoreMargin+300*time.Millisecond)
	defer cancel()
	w := s.Serve(httptest.NewRequestWithContext(ctx, http.MethodDelete, "/sessions/doomed", nil))
	if w.Code != 504 || !strings.Contains(w.Body.String(), `"code":"outcome_unknown"`) || !strings.Contains(w.Body.String(), "DELETE again") {
		t.Errorf("DELETE out of time: %d %s", w.Code, w.Body)
	}
	if err := direct.Delete(t.Context(), sess.Key); err != nil {
		t.Errorf("the second DELETE: %v", err)
	}
}
