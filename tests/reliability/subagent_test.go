package reliability_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/lambda-agent/lambda-agent/internal/agent"
	"github.com/lambda-agent/lambda-agent/internal/ddbhistory"
	"github.com/lambda-agent/lambda-agent/internal/testkit/conversetest"
)

// helperAgents is AGENTS with one sub-agent, helper, which may use the
// slow tool.
const helperAgents = `[{"name":"helper","description":"Helps with a task.","system_prompt":"You help.","tools":["slow"]}]`

// isHelper says whether a request is the helper's.
func isHelper(req *conversetest.Request) bool {
	return len(req.System) > 0 && req.System[0].Text == "You help."
}

// delegatingModel answers the main agent by handing its message to the
// helper, and the helper by echoing its task; wait, when set, holds each
// of the helper's calls first.
func delegatingModel(wait func(context.Context) bool) func(*conversetest.Request) conversetest.Reply {
	return func(req *conversetest.Request) conversetest.Reply {
		last := req.Messages[len(req.Messages)-1]
		switch {
		case isHelper(req):
			if wait != nil && !wait(context.Background()) {
				return conversetest.Unavailable()
			}
			return conversetest.Text("done: " + last.Text())
		case last.Text() != "":
			return conversetest.ToolUse("d-"+useID(last.Text()), "helper", map[string]string{"task": last.Text()})
		}
		return conversetest.Text("The helper is done.")
	}
}

// TestDelegatingTurnsRacing sends turns at once to one session, each of
// which hands its message to a sub-agent; the sub-agent's model call holds
// every turn of a round until all of them reached it, so that all loaded
// the same session and delegated before any could commit. Exactly one
// commits; the others answer 409 and store nothing.
func TestDelegatingTurnsRacing(t *testing.T) {
	const rounds, racers = 3, 6
	s := newSystem(t, map[string]string{"TOOLS": "calculator", "AGENTS": `[{"name":"helper","description":"Helps with a task.","system_prompt":"You help.","tools":[]}]`})
	g := &gate{}
	s.Model.Responder = delegatingModel(g.wait)
	g.reset(1)
	if r := s.chat(t, "alice", "race", "opening"); r.status != 200 {
		t.Fatalf("opening turn: %d %s", r.status, r.raw)
	}
	won, lost := raceRounds(t, s, g, "race", rounds, racers, func(msg string, r reply) {
		if !strings.Contains(string(r.raw), `"done: `+msg+`"`) || !strings.Contains(string(r.raw), `"helper":{"usage"`) {
			t.Errorf("%s: the answer lacks the helper's result or usage: %s", msg, r.raw)
		}
	})
	won = append([]string{"opening"}, won...)
	if n := g.shut.Load(); n > 0 {
		t.Errorf("%d delegations gave up waiting for the others: the turns did not all meet", n)
	}
	st := s.stored(t, "alice", "race")
	texts, results := map[string]int{}, map[string]int{}
	for _, m := range st.messages {
		if m.Role == agent.RoleUser && m.Text() != "" {
			texts[m.Text()]++
		}
		for _, b := range m.Content {
			if b.ToolResult != nil {
				results[b.ToolResult.Content[0].Text]++
			}
		}
	}
	wrong := 0
	for _, msg := range won {
		if texts[msg] != 1 || results["done: "+msg] != 1 {
			wrong++
			t.Errorf("the committed turn %q is not stored once with its delegation's result", msg)
		}
	}
	for _, msg := range lost {
		if texts[msg]+results["done: "+msg] > 0 {
			wrong++
			t.Errorf("the losing turn %q left something in the session", msg)
		}
	}
	if want := 4 * len(won); len(st.messages) != want {
		wrong++
		t.Errorf("%d messages stored for %d committed turns of 4; want %d", len(st.messages), len(won), want)
	}
	validHistory(t, st.messages)
	// The helper's own conversation holds the committed turns' tasks and
	// answers, in order, and nothing of the others'.
	helper := agentHistory(t, s.direct, st, "helper")
	var want []string
	for _, msg := range won {
		want = append(want, msg, "done: "+msg)
	}
	var got []string
	for _, m := range helper {
		got = append(got, m.Text())
	}
	if diff := cmp.Diff(want, got); diff != "" {
		wrong++
		t.Errorf("the helper's conversation (-committed +stored):\n%s", diff)
	}
	validHistory(t, helper)
	report(t, "Turns that delegate to a sub-agent, racing on one session: one commits, the others answer 409 and store nothing, their delegations' results and their sub-agent's messages included",
		fmt.Sprintf("%d rounds of %d turns at once, all at their sub-agent's model call before any committed (%d committed, %d answered 409)", rounds, racers, len(won)-1, len(lost)), wrong)
}

// TestDelegatingTurnRetriedAndForeign sends a turn that delegates again
// with its Idempotency-Key: while its sub-agent works, 409 in_progress;
// once answered, the answer replayed, usage by agent included, and no
// model called again; with another message, 422. Another owner reaching
// for the session gets 404, and neither agent's model is called.
func TestDelegatingTurnRetriedAndForeign(t *testing.T) {
	s := newSystem(t, map[string]string{"TOOLS": "calculator", "AGENTS": `[{"name":"helper","description":"Helps with a task.","system_prompt":"You help.","tools":[]}]`})
	entered, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	s.Model.Responder = delegatingModel(func(ctx context.Context) bool {
		once.Do(func() {
			close(entered)
			<-release
		})
		return true
	})
	turn := call("POST", "/chat", "alice", map[string]any{"session_id": "keyed", "message": "do it"}).withKey("deleg-1")
	answered := make(chan reply, 1)
	go func() { answered <- s.serve(t, turn, 30*time.Second) }()
	select {
	case <-entered:
	case <-time.After(10 * time.Second):
		t.Fatal("the turn never reached its sub-agent")
	}
	wrong := 0
	if r := s.serve(t, turn, 30*time.Second); r.status != 409 || r.code() != "in_progress" {
		wrong++
		t.Errorf("the retry while the sub-agent works: %d %s; want 409 in_progress", r.status, r.raw)
	}
	close(release)
	first := <-answered
	if first.status != 200 || !strings.Contains(string(first.raw), `"done: do it"`) || !strings.Contains(string(first.raw), `"helper":{"usage"`) {
		t.Fatalf("the turn: %d %s", first.status, first.raw)
	}
	calls := s.Model.Calls()
	const retries = 3
	for i := range retries {
		again := s.serve(t, turn, 30*time.Second)
		if again.status != 200 || again.headers.Get("Idempotent-Replayed") != "true" {
			wrong++
			t.Errorf("retry %d: %d %s", i, again.status, again.raw)
		}
		if diff := cmp.Diff(first.body, again.body); diff != "" {
			wrong++
			t.Errorf("retry %d replays another answer (-first +retry):\n%s", i, diff)
		}
	}
	other := call("POST", "/chat", "alice", map[string]any{"session_id": "keyed", "message": "something else"}).withKey("deleg-1")
	if r := s.serve(t, other, 30*time.Second); r.status != 422 || r.code() != "idempotency_key_reused" {
		wrong++
		t.Errorf("another message under the key: %d %s; want 422", r.status, r.raw)
	}
	before := s.stored(t, "alice", "keyed")
	for _, q := range []request{
		call("POST", "/chat", "mallory", map[string]any{"session_id": "keyed", "message": "delegate for me"}),
		call("POST", "/chat", "mallory", map[string]any{"session_id": "keyed", "message": "delegate for me"}).withKey("deleg-1"),
	} {
		if r := s.serve(t, q, 30*time.Second); r.status != 404 {
			wrong++
			t.Errorf("another owner: %d %s; want 404", r.status, r.raw)
		}
	}
	if n := s.Model.Calls(); n != calls {
		wrong++
		t.Errorf("the model was called %d times more by retries and another owner", n-calls)
	}
	if after := s.stored(t, "alice", "keyed"); !after.sameAs(before) {
		wrong++
		t.Errorf("the session changed:\n%s", before.diff(after))
	}
	validHistory(t, before.messages)
	if h := agentHistory(t, s.direct, before, "helper"); len(h) != 2 || h[0].Text() != "do it" {
		wrong++
		t.Errorf("the helper's conversation after the retries: %+v; want the one delegation", h)
	}
	report(t, "A turn that delegated, sent again with its Idempotency-Key, calls no model again and adds nothing to its sub-agent's conversation: 409 in_progress while its sub-agent works, then its answer replayed, usage by agent included; another owner gets 404 and changes nothing",
		fmt.Sprintf("1 delegating turn: 1 retry while the sub-agent worked, %d after the answer, 1 other message under the key; 2 requests from another owner; %d model calls in all", retries, calls), wrong)
}

// TestCrashDuringADelegation kills the built chat function with SIGKILL
// during a sub-agent's model call and while the sub-agent's tool runs.
// After each kill the session is as it was and valid, and the next turn,
// which delegates again, answers 200.
func TestCrashDuringADelegation(t *testing.T) {
	t.Parallel()
	b := newSandbox(t, "AGENTS="+helperAgents)
	b.model.Enqueue(conversetest.Text("hello"))
	if resp, _ := b.invoke(t, "opening", 20*time.Second); resp.StatusCode != 200 {
		t.Fatalf("opening: %d %s", resp.StatusCode, resp.Body)
	}
	lost, kills := 0, 0
	kill := func(where string, replies ...conversetest.Reply) {
		t.Helper()
		before := storedIn(t, b.store, "", "crashy")
		calls := b.model.Calls()
		b.model.Enqueue(replies...)
		inv, err := b.fn.InvokeAsync(t.Context(), chatEvent(t, "doomed"), 8*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		waitFor(t, where, func() bool { return b.model.Calls() == calls+2 })
		if where == "while the sub-agent's tool runs" {
			time.Sleep(50 * time.Millisecond) // past the answer, into the tool
		}
		b.kill(t, inv, where)
		kills++
		after := storedIn(t, b.store, "", "crashy")
		if !after.sameAs(before) {
			lost++
			t.Errorf("%s: the killed turn changed the session:\n%s", where, before.diff(after))
		}
		validHistory(t, after.messages)
		if h := agentHistory(t, b.store, after, "helper"); len(h) != 0 {
			lost++
			t.Errorf("%s: the killed turn left %d messages in the helper's conversation", where, len(h))
		}
		b.model.Reset()
		if err := b.fn.Restart(t.Context()); err != nil {
			t.Fatal(err)
		}
	}
	kill("during the sub-agent's model call",
		conversetest.ToolUse("d-1", "helper", map[string]string{"task": "wait"}),
		conversetest.Text("never sent").WithDelay(time.Minute))
	kill("while the sub-agent's tool runs",
		conversetest.ToolUse("d-2", "helper", map[string]string{"task": "be slow"}),
		conversetest.ToolUse("s-1", "slow", map[string]int{"milliseconds": 60_000}))

	b.model.Enqueue(
		conversetest.ToolUse("d-3", "helper", map[string]string{"task": "quick"}),
		conversetest.Text("quick, done"),
		conversetest.Text("The helper is done."))
	resp, _ := b.invoke(t, "still there?", 20*time.Second)
	if resp.StatusCode != 200 || !strings.Contains(resp.Body, "quick, done") {
		lost++
		t.Errorf("after the kills: %d %s", resp.StatusCode, resp.Body)
	}
	final := storedIn(t, b.store, "", "crashy")
	validHistory(t, final.messages)
	if h := agentHistory(t, b.store, final, "helper"); len(h) != 2 || h[0].Text() != "quick" || h[1].Text() != "quick, done" {
		lost++
		t.Errorf("the helper's conversation after the kills and a turn: %+v", h)
	}
	report(t, "A crash (SIGKILL) during a delegation, in the sub-agent's model call or while its tool runs, leaves the session as it was, the sub-agent's conversation included, valid and usable",
		fmt.Sprintf("%d SIGKILLs of the chat bootstrap: during the sub-agent's model call, while its tool runs", kills), lost)
}

// TestSubAgentModelFailureIsAResult: a sub-agent whose model fails, on
// every retry, answers its parent with an error result; the turn goes on
// and answers 200, and the session stays valid.
func TestSubAgentModelFailureIsAResult(t *testing.T) {
	s := newSystem(t, map[string]string{"TOOLS": "calculator", "AGENTS": `[{"name":"helper","description":"Helps with a task.","system_prompt":"You help.","tools":[]}]`})
	failures := []conversetest.Reply{conversetest.Unavailable(), conversetest.Error(400, conversetest.CodeValidation, "malformed")}
	wrong := 0
	for i, failure := range failures {
		s.Model.Responder = func(req *conversetest.Request) conversetest.Reply {
			if isHelper(req) {
				return failure
			}
			return delegatingModel(nil)(req)
		}
		msg := fmt.Sprintf("failure %d", i)
		r := s.chat(t, "alice", "failing", msg)
		if r.status != 200 || !strings.Contains(string(r.raw), "the agent helper failed") || !strings.Contains(string(r.raw), `"status":"error"`) {
			wrong++
			t.Errorf("%s: %d %s; want 200 with the helper's error result", msg, r.status, r.raw)
		}
	}
	st := s.stored(t, "alice", "failing")
	if len(st.messages) != 4*len(failures) {
		wrong++
		t.Errorf("%d messages stored for %d turns", len(st.messages), len(failures))
	}
	validHistory(t, st.messages)
	report(t, "A sub-agent whose model fails answers its parent with an error result: the turn goes on and commits",
		fmt.Sprintf("%d turns whose sub-agent's model answered 503 or 400 on every attempt", len(failures)), wrong)
}

// agentHistory reads from store the conversation st's session keeps for
// the sub-agent name: its window, which the tests here keep whole.
func agentHistory(t testing.TB, store *ddbhistory.Store, st *stored, name string) []agent.Message {
	t.Helper()
	c, err := store.LoadAgent(t.Context(), st.session, name)
	if err != nil {
		t.Fatalf("read the %s agent's conversation: %v", name, err)
	}
	if c.Conversation.Window.Removed != 0 {
		t.Fatalf("the %s agent's window starts at %d: the test reads its window alone", name, c.Conversation.Window.Removed)
	}
	return c.Conversation.Messages
}
