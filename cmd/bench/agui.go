package main

import (
	"bytes"
	"context"
	crand "crypto/rand"
	"encoding/json"
	"fmt"
	"maps"
	"math/rand/v2"
	"net/http"
	"runtime"
	"runtime/debug"
	"slices"
	"strings"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/lambda-agent/lambda-agent/internal/testkit/conversetest"
	"github.com/lambda-agent/lambda-agent/internal/testkit/dynamodbtest"
)

// aguiThreads are the lengths of the stored threads that the AG-UI section
// runs on: a short conversation and a long one.
var aguiThreads = []int{20, 200}

// aguiAnswer is the model's answer to every request of the AG-UI section,
// about 480 characters, which the Converse stand-in streams in pieces of 8
// bytes (conversetest.DefaultChunkBytes).
var aguiAnswer = strings.Repeat("This is a considered answer of some length. ", 11)

// requestShape is a request that the AG-UI section measures.
type requestShape struct {
	name  string
	agui  bool // POST /agui; else POST /chat/stream
	key   bool // with an Idempotency-Key (an AG-UI run's runId is one)
	whole bool // the AG-UI client that sends the whole thread
}

// requestShapes are our own stream, without and with an Idempotency-Key,
// and AG-UI's two kinds of client.
var requestShapes = []requestShape{
	{name: "`/chat/stream`"},
	{name: "`/chat/stream`, Idempotency-Key", key: true},
	{name: "AG-UI, new message only", agui: true, key: true},
	{name: "AG-UI, whole thread", agui: true, key: true, whole: true},
}

// aguiMessage is a message of an AG-UI thread as a client keeps it and
// sends it back: the fields of @ag-ui/core's user and assistant messages
// that the bench's threads use.
type aguiMessage struct {
	ID      string `json:"id"`
	Role    string `json:"role"`
	Content string `json:"content"`
}

// runAgentInput is the body of an AG-UI run, with the fields HttpAgent
// sends: it sends its tools, context, state and forwarded props on every
// run, empty here.
type runAgentInput struct {
	ThreadID       string         `json:"threadId"`
	RunID          string         `json:"runId"`
	State          map[string]any `json:"state"`
	Messages       []aguiMessage  `json:"messages"`
	Tools          []any          `json:"tools"`
	Context        []any          `json:"context"`
	ForwardedProps map[string]any `json:"forwardedProps"`
}

func newRunInput(threadID string, msgs []aguiMessage) runAgentInput {
	return runAgentInput{ThreadID: threadID, RunID: newID(), State: map[string]any{}, Messages: msgs, Tools: []any{}, Context: []any{}, ForwardedProps: map[string]any{}}
}

// newID returns a random UUID, as HttpAgent mints for run and message ids.
func newID() string {
	var b [16]byte
	_, _ = crand.Read(b[:]) // never fails
	b[6], b[8] = b[6]&0x0f|0x40, b[8]&0x3f|0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:])
}

// aguiEvent is the part of an AG-UI event that the bench reads.
type aguiEvent struct {
	Type      string `json:"type"`
	MessageID string `json:"messageId"`
	Delta     string `json:"delta"`
	Code      string `json:"code"`
	Message   string `json:"message"`
}

// assistantMessages reads the events of an AG-UI run, as Server-Sent
// Events, and returns the assistant's messages as a client keeps them:
// under the ids the events gave them. A run that ends with RUN_ERROR, or
// without RUN_FINISHED, is an error. Events the bench does not need, such
// as STATE_SNAPSHOT, are skipped.
func assistantMessages(stream []byte) ([]aguiMessage, error) {
	var out []aguiMessage
	finished := false
	for line := range bytes.Lines(stream) {
		data, ok := bytes.CutPrefix(line, []byte("data:"))
		if !ok {
			continue
		}
		var e aguiEvent
		if err := json.Unmarshal(data, &e); err != nil {
			return nil, fmt.Errorf("an event that is not JSON: %s", bytes.TrimSpace(data))
		}
		switch e.Type {
		case "TEXT_MESSAGE_START":
			out = append(out, aguiMessage{ID: e.MessageID, Role: "assistant"})
		case "TEXT_MESSAGE_CONTENT":
			if len(out) == 0 || out[len(out)-1].ID != e.MessageID {
				return nil, fmt.Errorf("TEXT_MESSAGE_CONTENT of message %q, which did not start", e.MessageID)
			}
			out[len(out)-1].Content += e.Delta
		case "RUN_ERROR":
			return nil, fmt.Errorf("RUN_ERROR %s: %s", e.Code, e.Message)
		case "RUN_FINISHED":
			finished = true
		}
	}
	if !finished {
		return nil, fmt.Errorf("the run ended without RUN_FINISHED:\n%s", stream)
	}
	return out, nil
}

// storedThread is a thread that the server holds: its messages as a client
// keeps them, and the session's export, from which each measured request
// gets a copy of its own.
type storedThread struct {
	messages []aguiMessage
	export   map[string]json.RawMessage
}

// aguiThread builds a thread of n messages (n even) on session id, as
// HttpAgent does: each run sends the thread so far and a new user message,
// and the client keeps the assistant's answer under the id its events gave.
func (s *stack) aguiThread(ctx context.Context, id string, n int) (*storedThread, error) {
	t := &storedThread{}
	var body bytes.Buffer
	for len(t.messages) < n {
		thread := append(slices.Clone(t.messages), aguiMessage{ID: newID(), Role: "user", Content: fmt.Sprintf("question %d", len(t.messages)/2)})
		raw, err := json.Marshal(newRunInput(id, thread))
		if err != nil {
			return nil, err
		}
		ev, err := urlEvent("POST", "/agui", raw, nil)
		if err != nil {
			return nil, err
		}
		status, err := s.serveURL(ctx, ev, &body)
		if err != nil {
			return nil, err
		}
		if status != http.StatusOK {
			return nil, fmt.Errorf("POST /agui: %d %s", status, body.Bytes())
		}
		answers, err := assistantMessages(body.Bytes())
		if err != nil {
			return nil, err
		}
		t.messages = append(thread, answers...)
	}
	if len(t.messages) != n {
		return nil, fmt.Errorf("the thread holds %d messages, not %d", len(t.messages), n)
	}
	ev, err := urlEvent("GET", "/sessions/"+id+"/export", nil, nil)
	if err != nil {
		return nil, err
	}
	if status, err := s.serveURL(ctx, ev, &body); err != nil || status != http.StatusOK {
		return nil, fmt.Errorf("export: %d %s (%v)", status, body.Bytes(), err)
	}
	if err := json.Unmarshal(body.Bytes(), &t.export); err != nil {
		return nil, err
	}
	if _, more := t.export["next_cursor"]; more {
		return nil, fmt.Errorf("the export of %d messages came in pages", n)
	}
	return t, nil
}

// copyThread imports t's session as session id, through the stream
// function's own import route.
func (s *stack) copyThread(ctx context.Context, t *storedThread, id string, body *bytes.Buffer) error {
	doc := maps.Clone(t.export)
	doc["new_session_id"], _ = json.Marshal(id)
	raw, err := json.Marshal(doc)
	if err != nil {
		return err
	}
	ev, err := urlEvent("POST", "/sessions/import", raw, nil)
	if err != nil {
		return err
	}
	if status, err := s.serveURL(ctx, ev, body); err != nil || status != http.StatusCreated {
		return fmt.Errorf("import: %d %s (%v)", status, body.Bytes(), err)
	}
	return nil
}

// deleteSession deletes session id, through the stream function's route.
func (s *stack) deleteSession(ctx context.Context, id string, body *bytes.Buffer) error {
	ev, err := urlEvent("DELETE", "/sessions/"+id, nil, nil)
	if err != nil {
		return err
	}
	if status, err := s.serveURL(ctx, ev, body); err != nil || status != http.StatusNoContent {
		return fmt.Errorf("delete: %d %s (%v)", status, body.Bytes(), err)
	}
	return nil
}

// event is the function URL event of the request of this shape to session
// id, which holds the thread t, with a new user message.
func (r requestShape) event(id string, t *storedThread) (*events.LambdaFunctionURLRequest, error) {
	const message = "Hello again"
	if !r.agui {
		raw, err := json.Marshal(map[string]string{"session_id": id, "message": message})
		if err != nil {
			return nil, err
		}
		var headers map[string]string
		if r.key {
			headers = map[string]string{"idempotency-key": newID()}
		}
		return urlEvent("POST", "/chat/stream", raw, headers)
	}
	msgs := []aguiMessage{{ID: newID(), Role: "user", Content: message}}
	if r.whole {
		msgs = append(slices.Clone(t.messages), msgs...)
	}
	raw, err := json.Marshal(newRunInput(id, msgs))
	if err != nil {
		return nil, err
	}
	return urlEvent("POST", "/agui", raw, nil)
}

// check says whether a request of this shape was answered in full: the
// turn committed and the answer streamed.
func (r requestShape) check(status int, body []byte) error {
	if status != http.StatusOK {
		return fmt.Errorf("answered %d: %s", status, body)
	}
	if r.agui {
		answers, err := assistantMessages(body)
		if err == nil && (len(answers) != 1 || answers[0].Content != aguiAnswer) {
			err = fmt.Errorf("the run streamed %+v, not the model's answer", answers)
		}
		return err
	}
	if !bytes.Contains(body, []byte("event: done\n")) || bytes.Contains(body, []byte("event: error\n")) {
		return fmt.Errorf("the stream did not end with done:\n%s", body)
	}
	return nil
}

// runSample is what one request cost: its time, or its allocations.
type runSample struct {
	wall time.Duration
	// own is the wall time without the round trips of the model's and
	// DynamoDB's requests.
	own time.Duration
	// allocs are the allocations in the process while the request was
	// served, less those made while a DynamoDB request was in flight.
	allocs allocs
	// request and response are the bytes of the request's body and the
	// answer's.
	request, response int
	ddb               dynamodbtest.Usage
}

// measure sends one request of shape r on a copy of t, made for it and
// deleted after it, so that every request finds the same thread. It times
// the request, or, with countAllocs, counts its allocations: reading the
// process's allocations stops the world, which would slow the request
// down.
func (s *stack) measure(ctx context.Context, t *storedThread, r requestShape, id string, countAllocs bool, body *bytes.Buffer) (runSample, error) {
	var x runSample
	if countAllocs {
		// The store pools its compressors, which allocate 1.2 MB each. A
		// pool loses what it holds to a collection, and a goroutine does
		// not find one that another processor put back last: so that no
		// count falls on a refill, the collector is held off from the copy
		// to the end of the request, on one processor.
		defer debug.SetGCPercent(debug.SetGCPercent(-1))
		defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	}
	if err := s.copyThread(ctx, t, id, body); err != nil {
		return x, err
	}
	ev, err := r.event(id, t)
	if err != nil {
		return x, err
	}
	calls := s.Model.Calls()
	s.timer.take()
	s.modelTimer.take()
	s.Meter.Take()
	var before, after runtime.MemStats
	if countAllocs {
		s.timer.takeAllocs(true)
		runtime.ReadMemStats(&before)
	}
	start := time.Now()
	status, err := s.serveURL(ctx, ev, body)
	x.wall = time.Since(start)
	if countAllocs {
		runtime.ReadMemStats(&after)
		ddb := s.timer.takeAllocs(false)
		x.allocs = allocs{count: after.Mallocs - before.Mallocs - ddb.count, bytes: after.TotalAlloc - before.TotalAlloc - ddb.bytes}
	}
	if err != nil {
		return x, err
	}
	x.own = x.wall - s.timer.take() - s.modelTimer.take()
	x.request, x.response, x.ddb = len(ev.Body), body.Len(), s.Meter.Take()
	if err := r.check(status, body.Bytes()); err != nil {
		return x, err
	}
	if c := s.Model.Calls() - calls; c != 1 {
		return x, fmt.Errorf("the request made %d model calls", c)
	}
	return x, s.deleteSession(ctx, id, body)
}

// runStats sums up the samples of one shape on one thread: medians, and
// DynamoDB's usage per request.
type runStats struct {
	wall, own                   time.Duration
	allocs                      allocs
	request, response           int
	requests, rcu, wcu, ddbSize float64
}

// statsOf sums up the timed samples and the counted ones.
func statsOf(timed, counted []runSample) runStats {
	pick := func(xs []runSample, f func(runSample) float64) float64 {
		vs := make([]float64, len(xs))
		for i, x := range xs {
			vs[i] = f(x)
		}
		return median(vs)
	}
	var st runStats
	st.wall = time.Duration(pick(timed, func(x runSample) float64 { return float64(x.wall) }))
	st.own = time.Duration(pick(timed, func(x runSample) float64 { return float64(x.own) }))
	st.allocs.count = uint64(pick(counted, func(x runSample) float64 { return float64(x.allocs.count) }))
	st.allocs.bytes = uint64(pick(counted, func(x runSample) float64 { return float64(x.allocs.bytes) }))
	st.request = int(pick(timed, func(x runSample) float64 { return float64(x.request) }))
	st.response = int(pick(timed, func(x runSample) float64 { return float64(x.response) }))
	for _, x := range timed {
		n := float64(len(timed))
		st.requests += float64(x.ddb.Requests) / n
		st.rcu += x.ddb.RCU / n
		st.wcu += x.ddb.WCU / n
		st.ddbSize += float64(x.ddb.Sent+x.ddb.Received) / n
	}
	return st
}

// median is the median of xs, the mean of the middle two for an even count.
func median(xs []float64) float64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	if len(s) == 0 {
		return 0
	}
	mid := len(s) / 2
	if len(s)%2 == 1 {
		return s[mid]
	}
	return (s[mid-1] + s[mid]) / 2
}

// aguiOverhead measures AG-UI runs (POST /agui) against our own stream
// (POST /chat/stream), through the stream function's handler.
func aguiOverhead(ctx context.Context, cfg config, b *strings.Builder) error {
	s, err := newStreamStack(ctx, nil)
	if err != nil {
		return err
	}
	defer s.Close()
	s.Model.Responder = func(*conversetest.Request) conversetest.Reply { return conversetest.Text(aguiAnswer) }
	threads := map[int]*storedThread{}
	for _, n := range aguiThreads {
		if threads[n], err = s.aguiThread(ctx, fmt.Sprintf("thread-%d", n), n); err != nil {
			return fmt.Errorf("a thread of %d messages: %w", n, err)
		}
	}
	type key struct{ n, shape int }
	timed, counted := map[key][]runSample{}, map[key][]runSample{}
	var body bytes.Buffer
	var order []key
	for _, n := range aguiThreads {
		for k := range requestShapes {
			order = append(order, key{n, k})
		}
	}
	// A round to warm up, then rounds of every shape on every thread, in
	// an order shuffled each round, so that a busy moment on the machine,
	// or the collection that a request's garbage brings on, falls on all
	// alike; every tenth round, each is sent once more to count its
	// allocations.
	shuffle := rand.New(rand.NewPCG(26, 9))
	for i := -1; i < cfg.warmTurns; i++ {
		shuffle.Shuffle(len(order), func(a, b int) { order[a], order[b] = order[b], order[a] })
		for _, at := range order {
			r := requestShapes[at.shape]
			for _, count := range []bool{false, true} {
				if count && i%10 != 0 {
					continue
				}
				x, err := s.measure(ctx, threads[at.n], r, fmt.Sprintf("run-%d-%d-%d-%t", at.n, at.shape, i, count), count, &body)
				if err != nil {
					return fmt.Errorf("%s on %d messages: %w", r.name, at.n, err)
				}
				switch {
				case i < 0:
				case count:
					counted[at] = append(counted[at], x)
				default:
					timed[at] = append(timed[at], x)
				}
			}
		}
	}
	stats := map[int][]runStats{}
	for _, n := range aguiThreads {
		for k := range requestShapes {
			stats[n] = append(stats[n], statsOf(timed[key{n, k}], counted[key{n, k}]))
		}
	}
	writeAGUI(b, cfg.warmTurns, len(counted[key{aguiThreads[0], 0}]), stats)
	return nil
}

// writeAGUI writes the AG-UI section from the figures of each request
// shape (in the order of requestShapes) on each thread length, of runs
// timed requests of each and counted ones whose allocations were counted.
func writeAGUI(b *strings.Builder, runs, counted int, stats map[int][]runStats) {
	fmt.Fprintf(b, "### AG-UI against our own stream\n\nAn AG-UI run (`POST /agui`) against a streamed chat turn (`POST /chat/stream`), both through the stream function's handler behind the adapter that streams its function URL's events, on the same stand-ins, with the same model answer: %d characters, which the Converse stand-in streams in pieces of 8 bytes. %d requests of each kind, in rounds of one of each in a shuffled order, on threads of %d and %d messages; each request gets a copy of its thread, imported from the thread's export and deleted after it, so that every request finds the same thread. The threads are built as `@ag-ui/client`'s `HttpAgent` builds them, by AG-UI runs, keeping each assistant message under the id its events gave. The whole-thread client sends every message of the thread under those ids, then the new user message, as `HttpAgent` does; the new-message client sends only the new message. An AG-UI run's `runId` is its idempotency key, so our stream is measured with an `Idempotency-Key` too.\n\nTimes are medians. The model's time taken out is its request's round trip to the first byte of the answer's stream; the stream that follows, which the handler turns into events as it comes, stays in. Allocations are the median of %d more requests of each kind, counted apart because reading them stops the world: the process's allocations while the request is served, less those made while a DynamoDB request is in flight (the in-process DynamoDB's, which copies its whole table on every transaction), with the collector held off and on one processor, so that no count falls on the refill of a pool. Request and response are the bodies' bytes; DynamoDB's figures are per request.\n\n",
		len(aguiAnswer), runs, aguiThreads[0], aguiThreads[len(aguiThreads)-1], counted)
	b.WriteString("| request | stored messages | wall, median | without model and DynamoDB, median | allocations | allocated | request | response | DynamoDB requests | DynamoDB bytes | RCU | WCU |\n|---|---|---|---|---|---|---|---|---|---|---|---|\n")
	for _, n := range aguiThreads {
		for k, r := range requestShapes {
			st := stats[n][k]
			fmt.Fprintf(b, "| %s | %d | %s | %s | %d | %.0f KB | %d B | %d B | %.1f | %.0f B | %.1f | %.1f |\n",
				r.name, n, ms(st.wall), ms(st.own), st.allocs.count, float64(st.allocs.bytes)/1024, st.request, st.response, st.requests, st.ddbSize, st.rcu, st.wcu)
		}
	}
	keyed := slices.IndexFunc(requestShapes, func(r requestShape) bool { return !r.agui && r.key })
	b.WriteString("\nRatio of medians, AG-UI / `/chat/stream` with an `Idempotency-Key`, on the same thread:\n\n| AG-UI client | stored messages | wall | without model and DynamoDB | allocations | allocated | response | DynamoDB requests |\n|---|---|---|---|---|---|---|---|\n")
	for _, n := range aguiThreads {
		base := stats[n][keyed]
		for k, r := range requestShapes {
			if !r.agui {
				continue
			}
			st := stats[n][k]
			fmt.Fprintf(b, "| %s | %d | %.2f× | %.2f× | %.2f× | %.2f× | %.2f× | %.2f× |\n", strings.TrimPrefix(r.name, "AG-UI, "), n,
				ratio(st.wall, base.wall), ratio(st.own, base.own), ratio(st.allocs.count, base.allocs.count), ratio(st.allocs.bytes, base.allocs.bytes), ratio(st.response, base.response), st.requests/base.requests)
		}
	}
	b.WriteString("\n" + aguiHeadline(stats))
}

// aguiHeadline sums the section up: an AG-UI run's wall time against our
// own stream's, with and without a key, for each client on the shortest
// and longest threads, and what the whole thread costs in DynamoDB.
func aguiHeadline(stats map[int][]runStats) string {
	index := func(f func(requestShape) bool) int { return slices.IndexFunc(requestShapes, f) }
	plain := index(func(r requestShape) bool { return !r.agui && !r.key })
	keyed := index(func(r requestShape) bool { return !r.agui && r.key })
	fresh := index(func(r requestShape) bool { return r.agui && !r.whole })
	whole := index(func(r requestShape) bool { return r.whole })
	short, long := aguiThreads[0], aguiThreads[len(aguiThreads)-1]
	wall := func(n, k, base int) float64 { return ratio(stats[n][k].wall, stats[n][base].wall) }
	w := stats[long][whole]
	return fmt.Sprintf("An AG-UI run's wall time, against our own stream with a key: **%.2f×** for the new-message client and **%.2f×** for the whole-thread client on %d messages; **%.2f×** and **%.2f×** on %d. Against our stream without a key, the new-message client is **%.2f×** on %d messages. On %d messages, the whole-thread client sends %d B against the new-message client's %d B, and its run makes %.1f DynamoDB requests and reads %.1f RCU, against %.1f and %.1f.\n\n",
		wall(short, fresh, keyed), wall(short, whole, keyed), short, wall(long, fresh, keyed), wall(long, whole, keyed), long,
		wall(short, fresh, plain), short,
		long, w.request, stats[long][fresh].request, w.requests, w.rcu, stats[long][fresh].requests, stats[long][fresh].rcu)
}

func ratio[T time.Duration | uint64 | int](a, b T) float64 {
	if b == 0 {
		return 0
	}
	return float64(a) / float64(b)
}
