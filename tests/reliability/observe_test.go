package reliability_test

import (
	"bufio"
	"bytes"
	"cmp"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lambda-agent/lambda-agent/internal/testkit"
	"github.com/lambda-agent/lambda-agent/internal/testkit/conversetest"
)

// metricsLine is one of the Embedded Metric Format lines the handler
// writes, with the members the checks read.
type metricsLine struct {
	Requests   *float64 `json:"Requests"`
	Turns      *float64 `json:"Turns"`
	ModelCalls *float64 `json:"ModelCalls"`
	Errors     *float64 `json:"Errors"`
	ColdStart  *float64 `json:"ColdStart"`
	ErrorCode  string   `json:"ErrorCode"`
	ToolName   string   `json:"ToolName"`
	Status     int      `json:"status"`
	AWS        struct {
		CloudWatchMetrics []struct {
			Dimensions [][]string `json:"Dimensions"`
		} `json:"CloudWatchMetrics"`
	} `json:"_aws"`
}

func metricsLines(t *testing.T, out string) []metricsLine {
	t.Helper()
	var lines []metricsLine
	sc := bufio.NewScanner(strings.NewReader(out))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var l metricsLine
		if err := json.Unmarshal(sc.Bytes(), &l); err != nil || len(l.AWS.CloudWatchMetrics) == 0 {
			continue // another log line
		}
		lines = append(lines, l)
	}
	return lines
}

// TestEveryRequestIsCountedOnce races turns on one session, retries one
// with its Idempotency-Key, and sends another owner's requests, with
// metrics and tracing on. Each request must have exactly one metrics line
// whose error code is the answer's; every model call the stand-in served
// must be counted once, in the line of the request that made it, won or
// lost; a replay counts no turn; and no line makes a session or an owner a
// dimension.
func TestEveryRequestIsCountedOnce(t *testing.T) {
	// The collector counts the requests' spans by their names and their
	// http.route attributes, which the protobuf encoding holds as they are. Concurrent requests may share
	// an export.
	var invocations, routes atomic.Int64
	collector := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		invocations.Add(int64(bytes.Count(body, []byte("invoke_agent lambda-agent"))))
		routes.Add(int64(bytes.Count(body, []byte("http.route")))) // one per request's span
	}))
	defer collector.Close()
	var out testkit.Buffer
	s := newSystemWith(t, testkit.Options{Metrics: &out, Env: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": collector.URL}})
	s.Model.Responder = func(r *conversetest.Request) conversetest.Reply {
		return conversetest.Text("noted").WithDelay(20 * time.Millisecond)
	}
	var codes []string
	var mu sync.Mutex
	answered := func(r reply) {
		mu.Lock()
		defer mu.Unlock()
		codes = append(codes, cmp.Or(r.code(), "ok"))
	}
	answered(s.chat(t, "alice", "counted", "opening"))
	const rounds, racers = 5, 4
	for round := range rounds {
		var wg sync.WaitGroup
		for i := range racers {
			wg.Go(func() { answered(s.chat(t, "alice", "counted", fmt.Sprintf("racer %d.%d", round, i))) })
		}
		wg.Wait()
	}
	keyed := call("POST", "/chat", "alice", map[string]any{"session_id": "counted", "message": "keyed"}).withKey("k-1")
	answered(s.serve(t, keyed, 30*time.Second))
	answered(s.serve(t, keyed, 30*time.Second)) // the replay
	answered(s.chat(t, "mallory", "counted", "let me in"))
	answered(s.serve(t, call("GET", "/sessions/counted", "mallory", nil), 30*time.Second))

	lines := metricsLines(t, out.String())
	var requests []metricsLine
	modelCalls, turns := 0, 0
	lost := 0
	for _, l := range lines {
		for _, d := range l.AWS.CloudWatchMetrics {
			for _, set := range d.Dimensions {
				for _, name := range set {
					if name != "FunctionName" && name != "Model" && name != "ErrorCode" && name != "ToolName" {
						lost++
						t.Errorf("dimension %s", name)
					}
				}
			}
		}
		if l.Requests == nil {
			continue // a tool's line
		}
		requests = append(requests, l)
		if l.ModelCalls != nil {
			modelCalls += int(*l.ModelCalls)
		}
		if l.Turns != nil {
			turns++
		}
	}
	var got []string
	for _, l := range requests {
		got = append(got, cmp.Or(l.ErrorCode, "ok"))
	}
	if !slices.Equal(slices.Sorted(slices.Values(got)), slices.Sorted(slices.Values(codes))) {
		lost++
		t.Errorf("error codes of the lines %v, of the answers %v", got, codes)
	}
	if modelCalls != s.Model.Calls() {
		lost++
		t.Errorf("the lines count %d model calls; the stand-in served %d", modelCalls, s.Model.Calls())
	}
	// The opening turn, every racer and the keyed turn ran one; the replay
	// and the other owner's requests ran none.
	if want := 1 + rounds*racers + 1; turns != want {
		lost++
		t.Errorf("%d lines count a turn, want %d", turns, want)
	}
	// Each request's spans were sent before it answered.
	if n, m := invocations.Load(), routes.Load(); n != int64(len(codes)-1) || m != int64(len(codes)) {
		lost++
		t.Errorf("%d invoke_agent spans and %d request spans for %d POSTs and 1 GET", n, m, len(codes)-1)
	}
	conflicts := strings.Count(strings.Join(codes, ","), "conflict")
	report(t, "With metrics and tracing on, every request has one metrics line and one trace; each model call is counted once, by the request that made it, won or lost; a replay counts no turn; no session or owner becomes a dimension",
		fmt.Sprintf("%d requests: %d racing in %d rounds (%d lost with 409), a keyed turn and its replay, 2 from another owner; %d model calls", len(codes), rounds*racers, rounds, conflicts, modelCalls), lost)
}

// TestCrashLosesOnlyTheKilledInvocationsTelemetry kills the built function
// while its model call runs, with tracing on. The killed invocation's line
// and spans never leave the process, which is all a crash may cost: the
// session is as it was, and the restarted sandbox reports a cold start and
// exports the next turn's trace.
func TestCrashLosesOnlyTheKilledInvocationsTelemetry(t *testing.T) {
	var exports atomic.Int64
	collector := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { exports.Add(1) }))
	defer collector.Close()
	b := newSandbox(t, "OTEL_EXPORTER_OTLP_ENDPOINT="+collector.URL, "AWS_LAMBDA_LOG_FORMAT=JSON")
	if r, _ := b.invoke(t, "opening", 10*time.Second); r.StatusCode != 200 {
		t.Fatalf("opening turn: %d %s", r.StatusCode, r.Body)
	}
	const kills = 3
	lost := 0
	for i := range kills {
		before := storedIn(t, b.store, "", "crashy")
		exported := exports.Load()
		calls := b.model.Calls()
		b.model.Enqueue(conversetest.Text("never sent").WithDelay(time.Minute))
		inv, err := b.fn.InvokeAsync(t.Context(), chatEvent(t, fmt.Sprintf("doomed %d", i)), 20*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		waitFor(t, "the model call", func() bool { return b.model.Calls() == calls+1 })
		b.kill(t, inv, fmt.Sprintf("kill %d", i))
		if after := storedIn(t, b.store, "", "crashy"); !after.sameAs(before) {
			lost++
			t.Error("the killed turn changed the session")
		}
		if exports.Load() != exported {
			t.Errorf("the killed invocation exported spans")
		}
		b.model.Reset()
		if err := b.fn.Restart(t.Context()); err != nil {
			t.Fatal(err)
		}
		if r, _ := b.invoke(t, fmt.Sprintf("after crash %d", i), 10*time.Second); r.StatusCode != 200 {
			lost++
			t.Errorf("the next turn got %d %s", r.StatusCode, r.Body)
		}
		if exports.Load() != exported+1 {
			lost++
			t.Errorf("%d exports after the next turn, want %d", exports.Load(), exported+1)
		}
	}
	// The lines travel through the process's stdout pipe, and may trail the
	// answers by a moment.
	var requests, cold int
	waitFor(t, "the metrics lines", func() bool {
		requests, cold = 0, 0
		for _, l := range metricsLines(t, b.fn.Logs()) {
			if l.Requests != nil {
				requests++
			}
			if l.ColdStart != nil {
				cold++
			}
		}
		return requests >= 1+kills
	})
	if requests != 1+kills || cold != 1+kills {
		lost++
		t.Errorf("%d request lines, %d of them cold, for %d answered invocations in %d sandboxes", requests, cold, 1+kills, 1+kills)
	}
	report(t, "A crash (SIGKILL) loses only the killed invocation's metrics line and spans; the session is unchanged, and the next sandbox reports its cold start and exports its trace",
		fmt.Sprintf("%d SIGKILLs of the chat bootstrap during the model call, tracing on", kills), lost)
}
