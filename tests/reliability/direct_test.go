package reliability_test

import (
	"encoding/json"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lambda-agent/lambda-agent/internal/testkit/conversetest"
)

// directCall is a direct call of tool on session, as owner.
func directCall(session, tool, owner string, body any) request {
	return call("POST", "/sessions/"+session+"/tools/"+tool, owner, body)
}

// TestDirectCallsRacingTurns races direct tool calls against a chat turn
// on one session. Each request stores all of its messages or none: the
// stored history counts exactly what the winners added, and Bedrock's rules
// hold for it.
func TestDirectCallsRacingTurns(t *testing.T) {
	s := newSystem(t, map[string]string{"TOOLS": "calculator"})
	// A model that answers at once lets the turn win some rounds; one that
	// takes 20 ms, the calls.
	var slow atomic.Bool
	s.Model.Responder = func(*conversetest.Request) conversetest.Reply {
		if slow.Load() {
			return conversetest.Text("noted").WithDelay(20 * time.Millisecond)
		}
		return conversetest.Text("noted")
	}
	if r := s.chat(t, "alice", "racing-calls", "opening"); r.status != 200 {
		t.Fatalf("opening: %d %s", r.status, r.raw)
	}
	const rounds, callers = 10, 3
	turnsWon, callsWon, conflicts, lost := 0, 0, 0, 0
	var mu sync.Mutex
	for round := range rounds {
		slow.Store(round%2 == 1)
		var wg sync.WaitGroup
		wg.Go(func() {
			r := s.chat(t, "alice", "racing-calls", fmt.Sprintf("turn %d", round))
			mu.Lock()
			defer mu.Unlock()
			switch {
			case r.status == 200:
				turnsWon++
			case r.status == 409 && r.code() == "conflict":
				conflicts++
			default:
				lost++
				t.Errorf("turn: %d %s", r.status, r.raw)
			}
		})
		for i := range callers {
			wg.Go(func() {
				r := s.serve(t, directCall("racing-calls", "calculator", "alice", map[string]any{"input": map[string]string{"expression": fmt.Sprintf("%d*%d", round, i)}}), 30*time.Second)
				mu.Lock()
				defer mu.Unlock()
				switch {
				case r.status == 200:
					callsWon++
				case r.status == 409 && r.code() == "conflict":
					conflicts++
				default:
					lost++
					t.Errorf("direct call: %d %s", r.status, r.raw)
				}
			})
		}
		wg.Wait()
	}
	st := s.stored(t, "alice", "racing-calls")
	if want := 2 + 2*turnsWon + 4*callsWon; len(st.messages) != want {
		lost++
		t.Errorf("%d messages stored; the winners added %d (%d turns, %d calls)", len(st.messages), want, turnsWon, callsWon)
	}
	validHistory(t, st.messages)
	// A turn after all of it is accepted by the strict stand-in.
	if r := s.chat(t, "alice", "racing-calls", "after"); r.status != 200 {
		lost++
		t.Errorf("the turn after: %d %s", r.status, r.raw)
	}
	report(t, "Direct tool calls racing chat turns on one session: each stores all of its messages or none, and the history stays valid",
		fmt.Sprintf("%d rounds of 1 turn and %d direct calls at once: %d turns and %d calls won, %d answered 409", rounds, callers, turnsWon, callsWon, conflicts), lost)
}

// TestDirectCallRetriedAndForeign retries a direct call with its
// Idempotency-Key, which replays the answer and runs nothing again, and
// sends another owner's calls, which get 404 and change nothing.
func TestDirectCallRetriedAndForeign(t *testing.T) {
	s := newSystem(t, map[string]string{"TOOLS": "calculator,remember,recall"})
	lost := 0
	body := map[string]any{"input": map[string]string{"expression": "7*6"}}
	first := s.serve(t, directCall("keyed-call", "calculator", "alice", body).withKey("c-1"), 30*time.Second)
	const retries = 5
	for range retries {
		again := s.serve(t, directCall("keyed-call", "calculator", "alice", body).withKey("c-1"), 30*time.Second)
		if again.status != 200 || again.raw != first.raw || again.headers.Get("Idempotent-Replayed") != "true" {
			lost++
			t.Errorf("retry: %d %s", again.status, again.raw)
		}
	}
	if st := s.stored(t, "alice", "keyed-call"); len(st.messages) != 4 {
		lost++
		t.Errorf("%d messages after a call and %d retries, want 4", len(st.messages), retries)
	}
	var a struct {
		ToolUseID string `json:"tool_use_id"`
	}
	_ = json.Unmarshal([]byte(first.raw), &a)

	before := s.stored(t, "alice", "keyed-call")
	foreign := 0
	for _, c := range []request{
		directCall("keyed-call", "calculator", "mallory", body),
		directCall("keyed-call", "remember", "mallory", map[string]any{"input": map[string]string{"key": "k", "value": "v"}, "record": false}),
		directCall("keyed-call", "calculator", "mallory", body).withKey("c-1"),
	} {
		foreign++
		if r := s.serve(t, c, 30*time.Second); r.status != 404 || r.code() != "not_found" {
			lost++
			t.Errorf("another owner: %d %s", r.status, r.raw)
		}
	}
	if after := s.stored(t, "alice", "keyed-call"); !after.sameAs(before) {
		lost++
		t.Error("another owner's calls changed the session")
	}
	report(t, "A direct tool call retried with its Idempotency-Key replays its answer and runs nothing again; another owner's calls get 404 and change nothing",
		fmt.Sprintf("1 keyed call (%s) and %d retries; %d calls from another owner", a.ToolUseID, retries, foreign), lost)
}

// TestCrashDuringADirectCall kills the built function while a directly
// called tool runs: the session must be as it was, valid, and take the
// next call.
func TestCrashDuringADirectCall(t *testing.T) {
	b := newSandbox(t)
	if r, _ := b.invoke(t, "opening", 10*time.Second); r.StatusCode != 200 {
		t.Fatalf("opening turn: %d %s", r.StatusCode, r.Body)
	}
	const kills = 3
	lost := 0
	for i := range kills {
		before := storedIn(t, b.store, "", "crashy")
		event := sandboxEvent(t, "POST", "/sessions/crashy/tools/slow", map[string]any{"input": map[string]int{"milliseconds": 60_000}}, "")
		inv, err := b.fn.InvokeAsync(t.Context(), event, 20*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		time.Sleep(100 * time.Millisecond) // the call is loaded and the tool started
		b.kill(t, inv, fmt.Sprintf("kill %d", i))
		if after := storedIn(t, b.store, "", "crashy"); !after.sameAs(before) {
			lost++
			t.Errorf("kill %d: the killed call changed the session", i)
		}
		if err := b.fn.Restart(t.Context()); err != nil {
			t.Fatal(err)
		}
		out, err := b.fn.Invoke(t.Context(), sandboxEvent(t, "POST", "/sessions/crashy/tools/calculator", map[string]any{"input": map[string]string{"expression": "1+1"}}, ""), 10*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		var resp struct {
			StatusCode int `json:"statusCode"`
		}
		if json.Unmarshal(out, &resp); resp.StatusCode != 200 {
			lost++
			t.Errorf("kill %d: the next call: %s", i, out)
		}
		validHistory(t, storedIn(t, b.store, "", "crashy").messages)
	}
	report(t, "A crash (SIGKILL) while a directly called tool runs leaves the session as it was, valid, and usable",
		fmt.Sprintf("%d SIGKILLs of the chat bootstrap during a direct call of a slow tool", kills), lost)
}
