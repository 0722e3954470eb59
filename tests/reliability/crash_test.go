package reliability_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/lambda-agent/lambda-agent/internal/ddbhistory"
	"github.com/lambda-agent/lambda-agent/internal/testkit"
	"github.com/lambda-agent/lambda-agent/internal/testkit/conversetest"
	"github.com/lambda-agent/lambda-agent/internal/testkit/dynamodbtest"
	"github.com/lambda-agent/lambda-agent/internal/testkit/runtimetest"
)

// chatBinary is the chat function built as a bootstrap, with the faulttools
// tag, which adds a "slow" tool so that a crash can land while a tool runs.
var chatBinary = sync.OnceValues(func() (string, error) {
	dir, err := os.MkdirTemp("", "reliability-*")
	if err != nil {
		return "", err
	}
	return runtimetest.Build(context.Background(), "../../functions/chat", dir, "faulttools")
})

// sandbox is the chat function running as a real process against in-test
// DynamoDB and Bedrock.
type sandbox struct {
	fn    *runtimetest.Function
	model *conversetest.Server
	store *ddbhistory.Store
	ddb   *dynamodbtest.Server
}

// newSandbox starts the chat function; env adds to its environment, as
// "NAME=value".
func newSandbox(t *testing.T, env ...string) *sandbox {
	t.Helper()
	bin, err := chatBinary()
	if err != nil {
		t.Fatal(err)
	}
	return newSandboxOf(t, bin, "chat", env...)
}

// newSandboxOf starts the function bin, name, as newSandbox does.
func newSandboxOf(t *testing.T, bin, name string, env ...string) *sandbox {
	t.Helper()
	backends := testkit.StartBackends(t, testkit.BackendOptions{})
	store, err := ddbhistory.New(backends.DDB.Client(), ddbhistory.Config{Table: testkit.Table})
	if err != nil {
		t.Fatal(err)
	}
	fn, err := runtimetest.Start(t.Context(), bin, runtimetest.Config{Name: name, Env: slices.Concat(backends.Env, []string{
		"MODEL_ID=test-model",
		"TOOLS=calculator,slow",
	}, env)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = fn.Close() })
	return &sandbox{fn: fn, model: backends.Model, store: store, ddb: backends.DDB}
}

func (b *sandbox) invoke(t *testing.T, message string, timeout time.Duration) (events.APIGatewayV2HTTPResponse, time.Duration) {
	t.Helper()
	start := time.Now()
	out, err := b.fn.Invoke(t.Context(), chatEvent(t, message), timeout)
	if err != nil {
		t.Fatalf("invoke: %v\n%s", err, b.fn.Logs())
	}
	var resp events.APIGatewayV2HTTPResponse
	if err := json.Unmarshal(out, &resp); err != nil {
		t.Fatalf("not an HTTP response: %s", out)
	}
	return resp, time.Since(start)
}

// holdWrite makes DynamoDB hold the nth request of operation op (such as
// "TransactWriteItems") from now on, until the server sees its client die,
// so that a killed function's write is dropped unserved: released sooner,
// it could land after the kill, as a write already sent may. The channel
// closes when the request arrives. b.ddb.SetHook(nil) ends the hold.
func (b *sandbox) holdWrite(op string, nth int) <-chan struct{} {
	reached := make(chan struct{})
	var seen atomic.Int32
	b.ddb.SetHook(func(o string, r *http.Request) {
		if o == op && int(seen.Add(1)) == nth {
			close(reached)
			select {
			case <-r.Context().Done():
			case <-time.After(15 * time.Second):
			}
		}
	})
	return reached
}

// kill kills the function while inv is in flight, and fails the test, at
// what, if inv finished anyway: the kill must have cut it short.
func (b *sandbox) kill(t *testing.T, inv *runtimetest.Invocation, what string) {
	t.Helper()
	if err := b.fn.Kill(); err != nil {
		t.Fatal(err)
	}
	if _, err := inv.Wait(t.Context()); err == nil {
		t.Fatalf("%s: the invocation finished despite the kill", what)
	}
}

// chatEvent is an API Gateway event that posts message to the session
// "crashy".
func chatEvent(t *testing.T, message string) []byte {
	t.Helper()
	return keyedChatEvent(t, "crashy", message, "")
}

// keyedChatEvent is the sample events/chat-new.json with its body replaced
// by message to session, and with the Idempotency-Key key unless it is "".
func keyedChatEvent(t *testing.T, session, message, key string) []byte {
	t.Helper()
	return sandboxEvent(t, "POST", "/chat", map[string]any{"session_id": session, "message": message}, key)
}

// waitFor polls until cond holds, or fails the test.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	// Long enough for a machine busy with the whole race suite: a wait
	// that runs out is a failure of the machine, not of what is tested.
	for deadline := time.Now().Add(25 * time.Second); !cond(); time.Sleep(2 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
	}
}

// TestCrashMidTurn kills the function's process with SIGKILL while a turn is
// in flight, at points that matter: during the model call, while a tool runs,
// and at random moments. After each kill the session must load, be exactly as
// it was, pass Bedrock's rules as stored, and take the next turn.
func TestCrashMidTurn(t *testing.T) {
	b := newSandbox(t)
	if r, _ := b.invoke(t, "opening", 10*time.Second); r.StatusCode != 200 {
		t.Fatalf("opening turn: %d %s", r.StatusCode, r.Body)
	}
	rng := newRand(7)
	kills := map[string]int{}
	damaged := 0
	// when gets the model's call count from before the doomed turn, so that
	// it waits for that turn's own call, not one of the turns before.
	crash := func(where string, script func(), when func(calls int)) {
		t.Helper()
		before := storedIn(t, b.store, "", "crashy")
		calls := b.model.Calls()
		script()
		inv, err := b.fn.InvokeAsync(t.Context(), chatEvent(t, "doomed "+where), 20*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		when(calls)
		b.kill(t, inv, where)
		kills[where]++
		if after := storedIn(t, b.store, "", "crashy"); !after.sameAs(before) {
			damaged++
			t.Errorf("%s: the killed turn changed the session", where)
		}
		b.model.Reset()
		if err := b.fn.Restart(t.Context()); err != nil {
			t.Fatal(err)
		}
		if r, _ := b.invoke(t, "after the crash "+where, 10*time.Second); r.StatusCode != 200 {
			damaged++
			t.Errorf("%s: the next turn got %d %s", where, r.StatusCode, r.Body)
		}
		validHistory(t, storedIn(t, b.store, "", "crashy").messages)
	}

	for range 3 {
		crash("during the model call",
			func() { b.model.Enqueue(conversetest.Text("never sent").WithDelay(time.Minute)) },
			func(calls int) { waitFor(t, "the model call", func() bool { return b.model.Calls() == calls+1 }) })
		crash("while a tool runs",
			func() {
				b.model.Enqueue(conversetest.Text("working on it").WithToolUse("s1", "slow", map[string]int{"milliseconds": 60_000}))
			},
			func(calls int) {
				waitFor(t, "the model's tool use", func() bool { return b.model.Calls() == calls+1 })
				time.Sleep(50 * time.Millisecond) // the answer is decoded and the tool started
			})
	}
	for i := range 6 {
		// A tool turn of at least 50 ms (two model calls of 10 ms around a
		// 30 ms tool), killed anywhere in its first 45 ms.
		at := time.Duration(rng.IntN(45)) * time.Millisecond
		crash("at a random moment",
			func() {
				b.model.Enqueue(
					conversetest.Text("step").WithToolUse(fmt.Sprintf("r%d", i), "slow", map[string]int{"milliseconds": 30}).WithDelay(10*time.Millisecond),
					conversetest.Text("done").WithDelay(10*time.Millisecond),
				)
			},
			func(int) { time.Sleep(at) })
	}
	total := 0
	var parts []string
	for _, where := range []string{"during the model call", "while a tool runs", "at a random moment"} {
		total += kills[where]
		parts = append(parts, fmt.Sprintf("%d %s", kills[where], where))
	}
	report(t, "A crash mid-turn (SIGKILL) leaves the session as it was, valid, and usable",
		fmt.Sprintf("%d SIGKILLs of the chat bootstrap: %s", total, strings.Join(parts, ", ")), damaged)
}

// TestDeadlineAnswers504 gives the function a model slower than its time
// left. It must answer 504 itself, before Lambda's timeout would kill it, and
// write nothing.
func TestDeadlineAnswers504(t *testing.T) {
	b := newSandbox(t)
	if r, _ := b.invoke(t, "opening", 10*time.Second); r.StatusCode != 200 {
		t.Fatalf("opening turn: %d %s", r.StatusCode, r.Body)
	}
	changed := 0
	const runs, timeout = 3, 5 * time.Second
	for range runs {
		before := storedIn(t, b.store, "", "crashy")
		b.model.Enqueue(conversetest.Text("too late").WithDelay(time.Minute))
		r, took := b.invoke(t, "slow one", timeout)
		if r.StatusCode != 504 || !strings.Contains(r.Body, `"code":"timeout"`) {
			t.Errorf("got %d %s, want 504", r.StatusCode, r.Body)
		}
		if took >= timeout {
			t.Errorf("answered after %s, past the %s timeout", took, timeout)
		}
		if after := storedIn(t, b.store, "", "crashy"); !after.sameAs(before) {
			changed++
			t.Error("the timed-out turn changed the session")
		}
		b.model.Reset()
	}
	report(t, "A model slower than the time left gets a 504 before the Lambda timeout, with nothing written",
		fmt.Sprintf("%d invocations with a %s timeout and a model that takes a minute", runs, timeout), changed)
}
