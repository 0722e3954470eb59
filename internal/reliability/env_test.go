package reliability_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-lambda-go/lambdacontext"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/lambda-agent/lambda-agent/internal/agent"
	"github.com/lambda-agent/lambda-agent/internal/app"
	"github.com/lambda-agent/lambda-agent/internal/conversetest"
	"github.com/lambda-agent/lambda-agent/internal/ddbhistory"
	"github.com/lambda-agent/lambda-agent/internal/ddblocal"
	"github.com/lambda-agent/lambda-agent/internal/httpapi"
	"github.com/lambda-agent/lambda-agent/internal/schema"
)

// system is the real handler, wired as a function wires it, on the strict
// Converse stand-in and the in-process DynamoDB, with a fault injector on
// the DynamoDB client's transport.
type system struct {
	h      *httpapi.Handler
	model  *conversetest.Server
	ddb    *ddblocal.Server
	store  *ddbhistory.Store
	faults *faults
}

const table = "sessions"

func newSystem(t *testing.T, env map[string]string) *system {
	t.Helper()
	model := conversetest.NewServer()
	t.Cleanup(func() {
		if v := model.Violations(); len(v) > 0 {
			t.Errorf("requests Bedrock would reject:\n%s", strings.Join(v, "\n"))
		}
		model.Close()
	})
	ddb, err := ddblocal.NewServer("")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(ddb.Close)
	f := &faults{next: http.DefaultTransport}
	client := ddb.Client(func(o *dynamodb.Options) {
		o.HTTPClient = &http.Client{Transport: f}
		// The SDK's retries, with waits short enough for a test.
		o.Retryer = retry.NewStandard(func(o *retry.StandardOptions) {
			o.Backoff = retry.BackoffDelayerFunc(func(int, error) (time.Duration, error) { return 5 * time.Millisecond, nil })
			o.RateLimiter = noRateLimit{}
		})
	})
	if err := ddbhistory.CreateTable(t.Context(), ddb.Client(), table); err != nil {
		t.Fatal(err)
	}
	vars := map[string]string{"TABLE_NAME": table, "MODEL_ID": "test-model"}
	for k, v := range env {
		vars[k] = v
	}
	cfg, err := app.FromEnv(func(k string) string { return vars[k] })
	if err != nil {
		t.Fatal(err)
	}
	h, err := app.New(cfg, model.Client(), client, schema.Compile, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	store, err := ddbhistory.New(ddb.Client(), ddbhistory.Config{Table: table})
	if err != nil {
		t.Fatal(err)
	}
	return &system{h: h, model: model, ddb: ddb, store: store, faults: f}
}

type noRateLimit struct{}

func (noRateLimit) GetToken(context.Context, uint) (func() error, error) {
	return func() error { return nil }, nil
}
func (noRateLimit) AddTokens(uint) error { return nil }

// faults answers DynamoDB requests with throttling errors while armed, and
// lets a test hold requests or lose their answers.
type faults struct {
	next     http.RoundTripper
	left     atomic.Int64 // throttles still to inject; negative means always
	injected atomic.Int64

	mu sync.Mutex
	// hold, when set, sees each request before it is sent, and may block.
	hold func(op string)
	// lose, when set, sees each request after the server answered it, and
	// may return an error for the client to get instead of the answer.
	lose func(op string, r *http.Request) error
}

func (f *faults) setHold(h func(op string)) {
	f.mu.Lock()
	f.hold = h
	f.mu.Unlock()
}

func (f *faults) setLose(l func(op string, r *http.Request) error) {
	f.mu.Lock()
	f.lose = l
	f.mu.Unlock()
}

func (f *faults) RoundTrip(r *http.Request) (*http.Response, error) {
	f.mu.Lock()
	hold, lose := f.hold, f.lose
	f.mu.Unlock()
	target := r.Header.Get("X-Amz-Target")
	op := target[strings.LastIndex(target, ".")+1:]
	if hold != nil {
		hold(op)
	}
	resp, err := f.throttle(r)
	if err == nil && lose != nil {
		if err = lose(op, r); err != nil {
			resp.Body.Close()
			return nil, err
		}
	}
	return resp, err
}

func (f *faults) throttle(r *http.Request) (*http.Response, error) {
	for {
		n := f.left.Load()
		if n == 0 {
			return f.next.RoundTrip(r)
		}
		if n < 0 || f.left.CompareAndSwap(n, n-1) {
			break
		}
	}
	f.injected.Add(1)
	if r.Body != nil {
		_, _ = io.Copy(io.Discard, r.Body)
		r.Body.Close()
	}
	body := `{"__type":"com.amazonaws.dynamodb.v20120810#ThrottlingException","message":"Rate of requests exceeds the allowed throughput."}`
	return &http.Response{
		StatusCode: http.StatusBadRequest,
		Header:     http.Header{"Content-Type": {"application/x-amz-json-1.0"}},
		Body:       io.NopCloser(strings.NewReader(body)),
		Request:    r,
	}, nil
}

// reply is an HTTP answer, decoded.
type reply struct {
	status  int
	headers map[string]string
	body    map[string]any
	raw     string
}

func (r reply) code() string {
	e, _ := r.body["error"].(map[string]any)
	c, _ := e["code"].(string)
	return c
}

// event builds a payload-2.0 event.
func event(method, path, owner string, body any) events.APIGatewayV2HTTPRequest {
	e := events.APIGatewayV2HTTPRequest{
		Version: "2.0",
		RawPath: path,
		Headers: map[string]string{"content-type": "application/json"},
		RequestContext: events.APIGatewayV2HTTPRequestContext{
			RequestID: "req-" + path,
			HTTP:      events.APIGatewayV2HTTPRequestContextHTTPDescription{Method: method, Path: path},
		},
	}
	switch {
	case method == "POST" || path == "/sessions":
		e.RouteKey = method + " " + path
	default:
		e.RouteKey = method + " /sessions/{sessionId}"
		e.PathParameters = map[string]string{"sessionId": strings.TrimPrefix(path, "/sessions/")}
	}
	if body != nil {
		raw, _ := json.Marshal(body)
		e.Body = string(raw)
	}
	if owner != "" {
		e.RequestContext.Authorizer = &events.APIGatewayV2HTTPRequestContextAuthorizerDescription{
			JWT: &events.APIGatewayV2HTTPRequestContextAuthorizerJWTDescription{Claims: map[string]string{"sub": owner}},
		}
	}
	return e
}

// serve sends e to the function that serves it, with a Lambda context whose
// deadline is timeout away.
func (s *system) serve(t testing.TB, e events.APIGatewayV2HTTPRequest, timeout time.Duration) reply {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	ctx = lambdacontext.NewContext(ctx, &lambdacontext.LambdaContext{AwsRequestID: e.RequestContext.RequestID})
	fn := s.h.Chat
	if e.RouteKey == httpapi.RouteStructured {
		fn = s.h.Structured
	}
	resp, err := fn(ctx, e)
	if err != nil {
		t.Fatalf("the handler returned an error: %v", err)
	}
	r := reply{status: resp.StatusCode, headers: resp.Headers, raw: resp.Body}
	if resp.Body != "" {
		if err := json.Unmarshal([]byte(resp.Body), &r.body); err != nil {
			t.Fatalf("%d with a body that is not JSON: %q", resp.StatusCode, resp.Body)
		}
	}
	if r.status >= 500 && r.status != 502 && r.status != 503 && r.status != 504 {
		t.Errorf("%d for %s %s: %s", r.status, e.RequestContext.HTTP.Method, e.RawPath, resp.Body)
	}
	return r
}

func (s *system) chat(t testing.TB, owner, session, message string) reply {
	t.Helper()
	return s.serve(t, event("POST", "/chat", owner, map[string]any{"session_id": session, "message": message}), 30*time.Second)
}

// stored is a session's full transcript and version, read from the store
// directly, or nil when there is none.
type stored struct {
	version  int64
	messages []agent.Message
}

func (s *system) stored(t testing.TB, owner, id string) *stored {
	t.Helper()
	return storedIn(t, s.store, owner, id)
}

func storedIn(t testing.TB, store *ddbhistory.Store, owner, id string) *stored {
	t.Helper()
	if owner == "" {
		owner = "anonymous" // what the handler calls a caller without claims
	}
	page, err := store.Transcript(context.Background(), ddbhistory.Key{Owner: owner, ID: id}, "", ddbhistory.MaxPageSize)
	if err != nil {
		return nil
	}
	return &stored{version: page.Session.Version, messages: page.Messages}
}

// sameAs reports whether two transcripts are equal.
func (a *stored) sameAs(b *stored) bool {
	if a == nil || b == nil {
		return a == b
	}
	x, _ := json.Marshal(a)
	y, _ := json.Marshal(b)
	return a.version == b.version && bytes.Equal(x, y) && len(a.messages) == len(b.messages)
}

// validHistory checks a stored history the way Bedrock would: it must be
// sendable to the strict stand-in exactly as stored, with no repair.
func validHistory(t testing.TB, msgs []agent.Message) {
	t.Helper()
	if diff := agent.Repair(msgs); !sameMessages(diff, msgs) {
		t.Errorf("the stored history needs repair")
	}
	if len(msgs) == 0 {
		return
	}
	s := conversetest.NewServer()
	defer s.Close()
	m, err := agent.NewBedrock(s.Client(), agent.BedrockConfig{ModelID: "check"})
	if err != nil {
		t.Fatal(err)
	}
	next := append(append([]agent.Message(nil), msgs...), agent.UserText("next"))
	tools := []agent.ToolSpec{}
	for _, name := range []string{"calculator", "current_time", "remember", "recall", "slow"} {
		tools = append(tools, agent.ToolSpec{Name: name, InputSchema: json.RawMessage(`{"type":"object"}`)})
	}
	if _, err := m.Converse(context.Background(), &agent.ModelRequest{Messages: next, Tools: tools}); err != nil {
		t.Errorf("the stored history is one Bedrock rejects: %v", err)
	}
}

func sameMessages(a, b []agent.Message) bool {
	x, _ := json.Marshal(a)
	y, _ := json.Marshal(b)
	return bytes.Equal(x, y)
}

// counter counts things concurrently, for the report.
type counter struct {
	mu sync.Mutex
	n  map[string]int
}

func (c *counter) add(k string, n int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.n == nil {
		c.n = map[string]int{}
	}
	c.n[k] += n
}

func (c *counter) get(k string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n[k]
}
