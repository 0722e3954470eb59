package reliability_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/lambda-agent/lambda-agent/internal/agent"
	"github.com/lambda-agent/lambda-agent/internal/agent/bedrock"
	"github.com/lambda-agent/lambda-agent/internal/ddbhistory"
	"github.com/lambda-agent/lambda-agent/internal/httpapi"
	"github.com/lambda-agent/lambda-agent/internal/testkit"
	"github.com/lambda-agent/lambda-agent/internal/testkit/conversetest"
	"github.com/lambda-agent/lambda-agent/internal/testkit/dynamodbtest"
)

// system is the real handler, wired as a function wires it (testkit), on
// the strict Converse stand-in and the in-process DynamoDB, with a fault
// injector on the DynamoDB client's transport.
type system struct {
	*testkit.Stack
	// direct reads the table without the application's client, so that
	// no fault reaches what a test checks.
	direct *ddbhistory.Store
	faults *faults
}

// newSystem starts a system whose functions' environment is env, over the
// defaults.
func newSystem(t *testing.T, env map[string]string) *system {
	t.Helper()
	return newSystemWith(t, testkit.Options{Env: env})
}

// newSystemWith starts a system on opts, with the suite's DynamoDB client
// (its faults, and the SDK's retries with short waits) and, unless opts
// says otherwise, the agent's own retry policy and no log.
func newSystemWith(t *testing.T, opts testkit.Options) *system {
	t.Helper()
	f := &faults{}
	if opts.Retry == nil {
		// The agent's own retry policy, waits and all: the suite checks
		// what production does, and the deadlines bound the waits.
		opts.Retry = &agent.RetryPolicy{}
	}
	opts.DynamoDB = func(next http.RoundTripper) http.RoundTripper {
		f.next = next
		return f
	}
	opts.DynamoDBOptions = []func(*dynamodb.Options){func(o *dynamodb.Options) {
		// The SDK's retries, with waits short enough for a test.
		o.Retryer = retry.NewStandard(func(o *retry.StandardOptions) {
			o.Backoff = retry.BackoffDelayerFunc(func(int, error) (time.Duration, error) { return 5 * time.Millisecond, nil })
			o.RateLimiter = noRateLimit{}
		})
	}}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	s := testkit.Start(t, opts)
	return &system{Stack: s, direct: s.DirectStore(), faults: f}
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
	return dynamodbtest.ErrorResponse(r, "ThrottlingException", "Rate of requests exceeds the allowed throughput."), nil
}

// reply is an HTTP answer, decoded.
type reply struct {
	status  int
	headers http.Header
	body    map[string]any
	raw     string
}

func (r reply) code() string {
	e, _ := r.body["error"].(map[string]any)
	c, _ := e["code"].(string)
	return c
}

// request is a request to the handler. It is a value, built into an
// http.Request each time it is sent, so that a test can send it again.
type request struct {
	method, path string
	// owner is the subject of the caller's JWT; "" is a caller without an
	// identity.
	owner string
	// auth, when set, is what the authorizer verified instead of owner.
	auth *events.APIGatewayV2HTTPRequestContextAuthorizerDescription
	// body is JSON-encoded, unless it is []byte, which is sent as it is.
	body any
	// key is the Idempotency-Key header, if not "".
	key string
}

// call is a request from owner, with body JSON-encoded unless it is nil.
func call(method, path, owner string, body any) request {
	return request{method: method, path: path, owner: owner, body: body}
}

// withKey returns q with the Idempotency-Key key.
func (q request) withKey(key string) request {
	q.key = key
	return q
}

// build returns q as an http.Request under ctx.
func (q request) build(t testing.TB, ctx context.Context) *http.Request {
	t.Helper()
	var body io.Reader
	switch b := q.body.(type) {
	case nil:
	case []byte:
		body = bytes.NewReader(b)
	default:
		raw, err := json.Marshal(b)
		if err != nil {
			t.Fatal(err)
		}
		body = bytes.NewReader(raw)
	}
	r := httptest.NewRequestWithContext(ctx, q.method, q.path, body)
	if body != nil {
		r.Header.Set("Content-Type", "application/json")
	}
	if q.key != "" {
		r.Header.Set("Idempotency-Key", q.key)
	}
	if q.auth != nil {
		return r.WithContext(httpapi.WithAuthorizer(ctx, q.auth))
	}
	return testkit.As(r, q.owner)
}

// serve sends q to the handler with a deadline timeout away, as the
// function's would be.
func (s *system) serve(t testing.TB, q request, timeout time.Duration) reply {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	w := s.Serve(q.build(t, ctx))
	r := reply{status: w.Code, headers: w.Header(), raw: w.Body.String()}
	if r.raw != "" {
		if err := json.Unmarshal(w.Body.Bytes(), &r.body); err != nil {
			t.Fatalf("%d with a body that is not JSON: %q", r.status, r.raw)
		}
	}
	if r.status >= 500 && r.status != 502 && r.status != 503 && r.status != 504 {
		t.Errorf("%d for %s %s: %s", r.status, q.method, q.path, r.raw)
	}
	return r
}

func (s *system) chat(t testing.TB, owner, session, message string) reply {
	t.Helper()
	return s.serve(t, call("POST", "/chat", owner, map[string]any{"session_id": session, "message": message}), 30*time.Second)
}

// stored is a session as the store holds it, read from the store directly,
// or nil when there is none.
type stored struct {
	// session is the session item: version, message count, window and agent
	// state, times and title. Its Conversation.Messages is not set.
	session *ddbhistory.Session
	// messages is the full transcript, oldest first.
	messages []agent.Message
}

func (s *system) stored(t testing.TB, owner, id string) *stored {
	t.Helper()
	return storedIn(t, s.direct, owner, id)
}

func storedIn(t testing.TB, store *ddbhistory.Store, owner, id string) *stored {
	t.Helper()
	if owner == "" {
		owner = "anonymous" // what the handler calls a caller without claims
	}
	key := ddbhistory.Key{Owner: owner, ID: id}
	var st *stored
	for cursor := ""; ; {
		page, err := store.Transcript(t.Context(), key, cursor, ddbhistory.MaxPageSize)
		switch {
		case errors.Is(err, ddbhistory.ErrNotFound):
			return nil
		case err != nil:
			t.Fatalf("read session %s: %v", id, err)
		case st == nil:
			st = &stored{session: page.Session}
		case page.Session.Version != st.session.Version:
			t.Fatalf("session %s changed while its transcript was read", id)
		}
		st.messages = append(st.messages, page.Messages...)
		if page.NextCursor == "" {
			return st
		}
		cursor = page.NextCursor
	}
}

// sameAs reports whether two reads found the same session: the same session
// item and the same transcript.
func (a *stored) sameAs(b *stored) bool { return a.diff(b) == "" }

// diff describes how b differs from a, or is "" when they are the same. The
// session item's unexported fields (its incarnation and id claim) are left
// out: only a commit writes them, and a commit changes the version too.
func (a *stored) diff(b *stored) string {
	switch {
	case a == nil && b == nil:
		return ""
	case a == nil:
		return fmt.Sprintf("no session, then one of %d messages", len(b.messages))
	case b == nil:
		return fmt.Sprintf("a session of %d messages, then none", len(a.messages))
	}
	return cmp.Diff(a, b, cmp.AllowUnexported(stored{}), cmpopts.IgnoreUnexported(ddbhistory.Session{}))
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
	m, err := bedrock.New(s.Client(), bedrock.Config{ModelID: "check"})
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
