package main

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net/http"
	"runtime"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/lambda-agent/lambda-agent/internal/agent"
	"github.com/lambda-agent/lambda-agent/internal/ddbhistory"
	"github.com/lambda-agent/lambda-agent/internal/httpapi"
	"github.com/lambda-agent/lambda-agent/internal/lambdahttp"
	"github.com/lambda-agent/lambda-agent/internal/testkit"
)

// stack is the chat function as it runs in Lambda (newStack), or the
// stream function (newStreamStack): its handler, wired by testkit as
// app.New wires it, on the Converse stand-in and an in-process DynamoDB,
// behind the adapter that serves its events (lambdahttp). Its DynamoDB
// client is metered and timed, and its Bedrock client timed.
type stack struct {
	*testkit.Stack
	// fn serves API Gateway's events, as the chat function does.
	fn lambdahttp.Handler
	// url serves function URL events and streams the answer, as the
	// stream function does.
	url func(context.Context, *events.LambdaFunctionURLRequest) (*events.LambdaFunctionURLStreamingResponse, error)
	// direct writes to the table without the metered client.
	direct *ddbhistory.Store
	timer  *timer // time in DynamoDB requests
	// modelTimer is the time in Converse requests.
	modelTimer *timer
	// person is the JWT subject chat turns come from; "" is anonymous.
	person string
}

// timer adds up the time during which a client has requests in flight:
// requests that overlap, such as a turn's concurrent reads, count once.
// With countAllocs set, it also adds up the allocations the process makes
// meanwhile, which for a stand-in in the process are mostly the
// stand-in's.
type timer struct {
	next http.RoundTripper

	mu          sync.Mutex
	active      int       // requests in flight
	since       time.Time // when the first of them began
	busy        time.Duration
	countAllocs bool
	mem         runtime.MemStats // when the first of them began
	allocs      allocs
}

// allocs are allocations made: how many, and their bytes.
type allocs struct{ count, bytes uint64 }

func (t *timer) RoundTrip(r *http.Request) (*http.Response, error) {
	t.mu.Lock()
	if t.active++; t.active == 1 {
		if t.countAllocs {
			runtime.ReadMemStats(&t.mem)
		}
		t.since = time.Now()
	}
	t.mu.Unlock()
	resp, err := t.next.RoundTrip(r)
	t.mu.Lock()
	if t.active--; t.active == 0 {
		t.busy += time.Since(t.since)
		if t.countAllocs {
			before := t.mem
			runtime.ReadMemStats(&t.mem)
			t.allocs.count += t.mem.Mallocs - before.Mallocs
			t.allocs.bytes += t.mem.TotalAlloc - before.TotalAlloc
		}
	}
	t.mu.Unlock()
	return resp, err
}

// take returns the time in requests since the last take.
func (t *timer) take() time.Duration {
	t.mu.Lock()
	defer t.mu.Unlock()
	d := t.busy
	t.busy = 0
	return d
}

// takeAllocs returns the allocations made during requests since the last
// takeAllocs, and counts them from now on if count is set.
func (t *timer) takeAllocs(count bool) allocs {
	t.mu.Lock()
	defer t.mu.Unlock()
	a := t.allocs
	t.allocs, t.countAllocs = allocs{}, count
	return a
}

// wrap makes t time what next sends, and returns t: a transport wrapper
// for testkit.Options.
func (t *timer) wrap(next http.RoundTripper) http.RoundTripper {
	t.next = next
	return t
}

// newStack builds the chat function on stand-ins; env adds to its
// environment.
func newStack(ctx context.Context, env map[string]string) (*stack, error) {
	return buildStack(ctx, env, httpapi.ChatRoutes)
}

// newStreamStack builds the stream function on stand-ins: the routes of its
// function URL, served through stack.url.
func newStreamStack(ctx context.Context, env map[string]string) (*stack, error) {
	return buildStack(ctx, env, httpapi.FunctionURLRoutes)
}

func buildStack(ctx context.Context, env map[string]string, routes httpapi.Routes) (*stack, error) {
	vars := map[string]string{"MODEL_ID": "bench-model"}
	maps.Copy(vars, env)
	tm, mt := &timer{}, &timer{}
	s, err := testkit.New(ctx, testkit.Options{
		Env:    vars,
		Routes: routes,
		// The timer is outside testkit's meter, as it always was.
		DynamoDB: tm.wrap,
		Bedrock:  mt.wrap,
		Logger:   slog.New(slog.DiscardHandler),
		// Metrics are encoded as the functions encode them, for stdout.
		Metrics: io.Discard,
	})
	if err != nil {
		return nil, err
	}
	return &stack{Stack: s, fn: lambdahttp.Wrap(s.Handler), url: lambdahttp.WrapURL(s.Handler), direct: s.DirectStore(), timer: tm, modelTimer: mt}, nil
}

// fill stores n messages in a session, the last 40 of them its window.
func (s *stack) fill(ctx context.Context, id string, n int) error {
	sess := ddbhistory.NewSession(ddbhistory.Key{Owner: cmp.Or(s.person, "anonymous"), ID: id})
	for i := 0; sess.Count < n; {
		var msgs []agent.Message
		for len(msgs) < 98 && sess.Count+len(msgs) < n {
			msgs = append(msgs, agent.UserText(fmt.Sprintf("question %06d", i)), agent.AssistantText(fmt.Sprintf("answer %06d", i)))
			i++
		}
		count := sess.Count + len(msgs)
		if err := s.direct.Commit(ctx, sess, ddbhistory.Turn{Messages: msgs, Window: agent.WindowState{Removed: max(0, count-40)}}); err != nil {
			return err
		}
	}
	return nil
}

// chat sends one chat turn through the handler and returns its answer.
func (s *stack) chat(ctx context.Context, id, message string) (httpapi.ChatResponse, error) {
	return s.chatWithKey(ctx, id, message, "")
}

// chatWithKey is chat with an Idempotency-Key, unless key is empty. It
// sends the event through the adapter, as Lambda does.
func (s *stack) chatWithKey(ctx context.Context, id, message, key string) (httpapi.ChatResponse, error) {
	ev, err := chatEvent(id, message, key)
	if err != nil {
		return httpapi.ChatResponse{}, err
	}
	if s.person != "" {
		ev.RequestContext.Authorizer = &events.APIGatewayV2HTTPRequestContextAuthorizerDescription{
			JWT: &events.APIGatewayV2HTTPRequestContextAuthorizerJWTDescription{Claims: map[string]string{"sub": s.person}},
		}
	}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	resp, err := s.fn(ctx, ev)
	if err != nil {
		return httpapi.ChatResponse{}, err
	}
	if resp.StatusCode != 200 {
		return httpapi.ChatResponse{}, fmt.Errorf("chat: %d %s", resp.StatusCode, resp.Body)
	}
	var out httpapi.ChatResponse
	return out, json.Unmarshal([]byte(resp.Body), &out)
}

// chatFixture is the sample chat event (what sam local invoke sends), read
// once.
var chatFixture = sync.OnceValues(func() (events.APIGatewayV2HTTPRequest, error) {
	return testkit.Event("chat-new.json")
})

// chatEvent is the sample chat event with its body replaced by message to
// session id, and with the Idempotency-Key key unless it is empty.
func chatEvent(id, message, key string) (events.APIGatewayV2HTTPRequest, error) {
	ev, err := chatFixture()
	if err != nil {
		return ev, err
	}
	body, err := json.Marshal(map[string]string{"session_id": id, "message": message})
	if err != nil {
		return ev, err
	}
	ev.Body = string(body)
	ev.Headers = maps.Clone(ev.Headers)
	ev.Headers["content-length"] = strconv.Itoa(len(body))
	if key != "" {
		ev.Headers["idempotency-key"] = key
	}
	return ev, nil
}

// urlFixture is the stream function's sample event (what sam local invoke
// sends), read once.
var urlFixture = sync.OnceValues(func() (events.LambdaFunctionURLRequest, error) {
	return testkit.URLEvent("stream-chat.json")
})

// urlEvent is the stream function's sample event as a request of method to
// path with body, and with headers added to its own.
func urlEvent(method, path string, body []byte, headers map[string]string) (*events.LambdaFunctionURLRequest, error) {
	ev, err := urlFixture()
	if err != nil {
		return nil, err
	}
	ev.RawPath, ev.RequestContext.HTTP.Method, ev.RequestContext.HTTP.Path = path, method, path
	ev.Body = string(body)
	ev.Headers = maps.Clone(ev.Headers)
	ev.Headers["content-length"] = strconv.Itoa(len(body))
	maps.Copy(ev.Headers, headers)
	return &ev, nil
}

// serveURL sends ev to the stream function's handler, as its function URL
// does, and reads the answer it streams into body, which it empties first.
// It returns the answer's status.
func (s *stack) serveURL(ctx context.Context, ev *events.LambdaFunctionURLRequest, body *bytes.Buffer) (int, error) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	resp, err := s.url(ctx, ev)
	if err != nil {
		return 0, err
	}
	body.Reset()
	if _, err := body.ReadFrom(resp.Body); err != nil {
		return 0, err
	}
	return resp.StatusCode, nil
}

// percentile returns the p-th percentile of d (0 < p <= 100), nearest rank.
func percentile(d []time.Duration, p float64) time.Duration {
	s := slices.Clone(d)
	slices.Sort(s)
	i := int(float64(len(s))*p/100+0.999999) - 1
	return s[min(max(i, 0), len(s)-1)]
}

func ms(d time.Duration) string { return fmt.Sprintf("%.2f ms", float64(d.Microseconds())/1000) }
