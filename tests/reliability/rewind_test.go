package reliability_test

import (
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lambda-agent/lambda-agent/internal/agent"
	"github.com/lambda-agent/lambda-agent/internal/testkit/conversetest"
)

// regenerate asks for the last turn of session again, as owner.
func regenerate(session, owner string) request {
	return call("POST", "/chat", owner, map[string]any{"session_id": session, "regenerate": true})
}

// edit replaces session's messages from `from` on with a turn on message.
func edit(session, owner string, from int, message string) request {
	return call("POST", "/chat", owner, map[string]any{"session_id": session, "edit": map[string]any{"from": from, "message": message}})
}

// rewindTo discards session's messages from `to` on.
func rewindTo(session, owner string, to int) request {
	return call("POST", "/sessions/"+session+"/rewind", owner, map[string]any{"to": to})
}

// said lists each message's role and text, so that a test can compare a
// history with what it expects.
func said(msgs []agent.Message) []string {
	out := make([]string, len(msgs))
	for i, m := range msgs {
		out[i] = string(m.Role) + ": " + m.Text()
	}
	return out
}

// heldModel is a model whose calls for chosen prompts wait until the test
// lets them answer, so that a test can have two requests load the same
// session before either commits. Each answer is "re: " and the prompt,
// numbered, so that a regenerated answer differs from the one it replaces.
type heldModel struct {
	n  atomic.Int64
	mu sync.Mutex
	// arrived is closed when the call for its prompt arrives; release
	// lets it answer.
	arrived, release map[string]chan struct{}
}

// hold makes the next call for prompt wait, and returns the channels that
// say it arrived and let it answer.
func (h *heldModel) hold(prompt string) (arrived, release chan struct{}) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.arrived == nil {
		h.arrived, h.release = map[string]chan struct{}{}, map[string]chan struct{}{}
	}
	arrived, release = make(chan struct{}), make(chan struct{})
	h.arrived[prompt], h.release[prompt] = arrived, release
	return arrived, release
}

func (h *heldModel) respond(req *conversetest.Request) conversetest.Reply {
	msgs := req.Messages
	var prompt string
	for _, c := range msgs[len(msgs)-1].Content {
		prompt += c.Text
	}
	h.mu.Lock()
	arrived, release := h.arrived[prompt], h.release[prompt]
	delete(h.arrived, prompt)
	delete(h.release, prompt)
	h.mu.Unlock()
	if arrived != nil {
		close(arrived)
		select {
		case <-release:
		case <-time.After(20 * time.Second): // the test failed; do not hang
		}
	}
	return conversetest.Text(fmt.Sprintf("re: %s #%d", prompt, h.n.Add(1)))
}

// await waits for ch to be closed, or fails the test.
func await(t *testing.T, ch <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(10 * time.Second):
		t.Fatalf("timed out waiting for %s", what)
	}
}

// TestRewindsRacingTurns races a regenerate, an edit and a rewind against a
// plain chat turn on one session, both having loaded the same session
// before either commits, each side winning in turn. Exactly one answers 200
// and the other 409; the stored history is exactly the winner's outcome,
// never a rewound session without the new turn or a mix, and Bedrock's
// rules hold for it.
func TestRewindsRacingTurns(t *testing.T) {
	s := newSystem(t, nil)
	model := &heldModel{}
	s.Model.Responder = model.respond
	const session = "racing-rewinds"
	if r := s.chat(t, "alice", session, "opening"); r.status != 200 {
		t.Fatalf("opening: %d %s", r.status, r.raw)
	}
	const rounds = 12
	redoWon, turnsWon, conflicts, lost := 0, 0, 0, 0
	for round := range rounds {
		kind := []string{"regenerate", "edit", "rewind"}[round%3]
		redoWins := round%2 == 0
		setup := fmt.Sprintf("setup %d", round)
		if r := s.chat(t, "alice", session, setup); r.status != 200 {
			t.Fatalf("round %d: the setup turn: %d %s", round, r.status, r.raw)
		}
		before := s.stored(t, "alice", session)
		n := len(before.messages)
		if said(before.messages[n-2:])[0] != "user: "+setup {
			t.Fatalf("round %d: the session does not end with the setup turn: %q", round, said(before.messages))
		}
		from := n - 2 // the setup turn's start

		// The turn loads, and waits in its model call.
		message := fmt.Sprintf("turn %d", round)
		turnArrived, turnRelease := model.hold(message)
		var turnReply, redoReply reply
		turnDone, redoDone := make(chan struct{}), make(chan struct{})
		go func() {
			defer close(turnDone)
			turnReply = s.chat(t, "alice", session, message)
		}()
		await(t, turnArrived, "the turn's model call")

		// The redo loads too, and waits: in its model call, or, for a
		// rewind, which calls no model, as it sends its commit.
		var redo request
		var redoArrived, redoRelease chan struct{}
		switch kind {
		case "regenerate":
			redo = regenerate(session, "alice")
			redoArrived, redoRelease = model.hold(setup)
		case "edit":
			redo = edit(session, "alice", from, fmt.Sprintf("edited %d", round))
			redoArrived, redoRelease = model.hold(fmt.Sprintf("edited %d", round))
		case "rewind":
			redo = rewindTo(session, "alice", from)
			redoArrived, redoRelease = make(chan struct{}), make(chan struct{})
			var held atomic.Bool
			s.faults.setHold(func(op string) {
				if op == "TransactWriteItems" && held.CompareAndSwap(false, true) {
					close(redoArrived)
					<-redoRelease
				}
			})
		}
		go func() {
			defer close(redoDone)
			redoReply = s.serve(t, redo, 30*time.Second)
		}()
		await(t, redoArrived, "the "+kind+" to load")

		// Let the winner commit first, then the loser.
		first, second := turnRelease, redoRelease
		firstDone, secondDone := turnDone, redoDone
		if redoWins {
			first, second, firstDone, secondDone = redoRelease, turnRelease, redoDone, turnDone
		}
		close(first)
		await(t, firstDone, "the first to commit")
		close(second)
		await(t, secondDone, "the second to commit")
		s.faults.setHold(nil)

		winner, loser := turnReply, redoReply
		if redoWins {
			winner, loser = redoReply, turnReply
		}
		if winner.status != 200 || loser.status != 409 || loser.code() != "conflict" {
			lost++
			t.Errorf("round %d (%s): the first to commit got %d %s, the second %d %s; want 200 and 409", round, kind, winner.status, winner.raw, loser.status, loser.raw)
			continue
		}
		conflicts++
		text, _ := winner.body["text"].(string)
		var want []string
		switch {
		case !redoWins:
			turnsWon++
			want = append(said(before.messages), "user: "+message, "assistant: "+text)
		case kind == "regenerate":
			redoWon++
			want = append(said(before.messages[:from]), "user: "+setup, "assistant: "+text)
		case kind == "edit":
			redoWon++
			want = append(said(before.messages[:from]), fmt.Sprintf("user: edited %d", round), "assistant: "+text)
		case kind == "rewind":
			redoWon++
			want = said(before.messages[:from])
		}
		after := s.stored(t, "alice", session)
		if got := said(after.messages); strings.Join(got, "\n") != strings.Join(want, "\n") ||
			!sameMessages(after.messages[:min(from, len(after.messages))], before.messages[:from]) {
			lost++
			t.Errorf("round %d (%s, %s first): stored\n%q\nwant\n%q", round, kind, map[bool]string{true: kind, false: "the turn"}[redoWins], got, want)
		}
		if after.session.Version != before.session.Version+1 || after.session.Count != len(want) {
			lost++
			t.Errorf("round %d: version %d, count %d; want %d, %d: one commit", round, after.session.Version, after.session.Count, before.session.Version+1, len(want))
		}
		validHistory(t, after.messages)
	}
	// A turn after all of it is accepted by the strict stand-in.
	if r := s.chat(t, "alice", session, "after"); r.status != 200 {
		lost++
		t.Errorf("the turn after: %d %s", r.status, r.raw)
	}
	if v := s.Model.Violations(); len(v) > 0 {
		lost++
		t.Errorf("the model refused: %q", v)
	}
	report(t, "A regenerate, an edit or a rewind racing a chat turn on one session: one commits, the other gets 409, and the history is exactly the winner's, valid",
		fmt.Sprintf("%d rounds, each a regenerate, an edit or a rewind and a turn loading the same version, each side first in half of them: %d redos and %d turns won, %d answered 409", rounds, redoWon, turnsWon, conflicts), lost)
}

// TestRewindsRetriedAndForeign retries a regenerate, an edit and a rewind
// with their Idempotency-Keys, which replay the answer and run nothing
// again, and sends another owner's regenerates, edits and rewinds, which
// get 404 and change nothing.
func TestRewindsRetriedAndForeign(t *testing.T) {
	s := newSystem(t, nil)
	model := &heldModel{}
	s.Model.Responder = model.respond
	const session = "keyed-rewinds"
	for _, m := range []string{"one", "two", "three"} {
		if r := s.chat(t, "alice", session, m); r.status != 200 {
			t.Fatalf("%s: %d %s", m, r.status, r.raw)
		}
	}
	lost := 0
	const retries = 5
	retried := func(what string, q request, modelCalls int) reply {
		t.Helper()
		calls := s.Model.Calls()
		first := s.serve(t, q, 30*time.Second)
		if first.status != 200 {
			t.Fatalf("%s: %d %s", what, first.status, first.raw)
		}
		after := s.stored(t, "alice", session)
		for range retries {
			again := s.serve(t, q, 30*time.Second)
			if again.status != 200 || again.raw != first.raw || again.headers.Get("Idempotent-Replayed") != "true" {
				lost++
				t.Errorf("%s retried: %d %s, replayed %q; want %s", what, again.status, again.raw, again.headers.Get("Idempotent-Replayed"), first.raw)
			}
		}
		if n := s.Model.Calls() - calls; n != modelCalls {
			lost++
			t.Errorf("%s and %d retries called the model %d times, want %d", what, retries, n, modelCalls)
		}
		if now := s.stored(t, "alice", session); !now.sameAs(after) {
			lost++
			t.Errorf("the retries of %s changed the session: %s", what, after.diff(now))
		}
		return first
	}
	regen := retried("a regenerate", regenerate(session, "alice").withKey("regen-1"), 1)
	if got := said(s.stored(t, "alice", session).messages); len(got) != 6 || got[4] != "user: three" || got[5] != fmt.Sprint("assistant: ", regen.body["text"]) {
		lost++
		t.Errorf("after the regenerate: %q", got)
	}
	retried("an edit", edit(session, "alice", 2, "deux").withKey("edit-1"), 1)
	if got := said(s.stored(t, "alice", session).messages); len(got) != 4 || got[2] != "user: deux" {
		lost++
		t.Errorf("after the edit: %q", got)
	}
	retried("a rewind", rewindTo(session, "alice", 2).withKey("rewind-1"), 0)
	// The edit's messages are gone: its key no longer replays an answer.
	if r := s.serve(t, edit(session, "alice", 2, "deux").withKey("edit-1"), 30*time.Second); r.status != 404 {
		lost++
		t.Errorf("a retry of the rewound edit: %d %s, want 404", r.status, r.raw)
	}

	before := s.stored(t, "alice", session)
	calls := s.Model.Calls()
	foreign := 0
	for _, q := range []request{
		regenerate(session, "mallory"),
		regenerate(session, "mallory").withKey("regen-1"),
		edit(session, "mallory", 0, "mine now"),
		edit(session, "mallory", 0, "mine now").withKey("edit-1"),
		rewindTo(session, "mallory", 0),
		rewindTo(session, "mallory", 0).withKey("rewind-1"),
		regenerate(session, ""),
		rewindTo(session, "", 0),
	} {
		foreign++
		if r := s.serve(t, q, 30*time.Second); r.status != 404 || r.code() != "not_found" {
			lost++
			t.Errorf("%s %s as %q: %d %s, want 404", q.method, q.path, q.owner, r.status, r.raw)
		}
	}
	if after := s.stored(t, "alice", session); !after.sameAs(before) {
		lost++
		t.Errorf("another owner's requests changed the session: %s", before.diff(after))
	}
	if s.Model.Calls() != calls {
		lost++
		t.Error("another owner's requests called the model")
	}
	// The owner's next regenerate still works.
	if r := s.serve(t, regenerate(session, "alice"), 30*time.Second); r.status != 200 {
		lost++
		t.Errorf("the owner's regenerate after them: %d %s", r.status, r.raw)
	}
	validHistory(t, s.stored(t, "alice", session).messages)
	report(t, "A regenerate, an edit or a rewind retried with its Idempotency-Key replays its answer and runs the model no more; a rewound edit's retry gets 404; another owner's get 404 and change nothing",
		fmt.Sprintf("1 keyed regenerate, edit and rewind, each retried %d times; %d requests from another owner or none", retries, foreign), lost)
}

// TestCrashDuringARegenerate kills the built function while a regenerate's
// or an edit's model call is in flight, after it loaded the session and
// worked out what to discard: the session must be exactly as it was, never
// rewound without the new turn, valid, and the next regenerate must work.
func TestCrashDuringARegenerate(t *testing.T) {
	b := newSandbox(t)
	for _, m := range []string{"opening", "second"} {
		if r, _ := b.invoke(t, m, 10*time.Second); r.StatusCode != 200 {
			t.Fatalf("%s turn: %d %s", m, r.StatusCode, r.Body)
		}
	}
	const kills = 4
	lost := 0
	for i := range kills {
		before := storedIn(t, b.store, "", "crashy")
		n := len(before.messages)
		body := map[string]any{"session_id": "crashy", "regenerate": true}
		what := fmt.Sprintf("kill %d, during a regenerate", i)
		if i%2 == 1 {
			body = map[string]any{"session_id": "crashy", "edit": map[string]any{"from": n - 2, "message": fmt.Sprintf("edited %d", i)}}
			what = fmt.Sprintf("kill %d, during an edit", i)
		}
		calls := b.model.Calls()
		b.model.Enqueue(conversetest.Text("never sent").WithDelay(time.Minute))
		inv, err := b.fn.InvokeAsync(t.Context(), sandboxEvent(t, "POST", "/chat", body, ""), 20*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		waitFor(t, "the model call", func() bool { return b.model.Calls() == calls+1 })
		b.kill(t, inv, what)
		if after := storedIn(t, b.store, "", "crashy"); !after.sameAs(before) {
			lost++
			t.Errorf("%s: the killed request changed the session: %s", what, before.diff(after))
		}
		b.model.Reset()
		if err := b.fn.Restart(t.Context()); err != nil {
			t.Fatal(err)
		}
		b.model.Enqueue(conversetest.Text(fmt.Sprintf("regenerated %d", i)))
		status, resp, raw := b.send(t, sandboxEvent(t, "POST", "/chat", map[string]any{"session_id": "crashy", "regenerate": true}, ""), 10*time.Second)
		if status != 200 || resp["text"] != fmt.Sprintf("regenerated %d", i) || resp["rewound_to"] != float64(n-2) {
			lost++
			t.Errorf("%s: the next regenerate: %d %s", what, status, raw)
		}
		after := storedIn(t, b.store, "", "crashy")
		if got, want := said(after.messages), append(said(before.messages[:n-1]), fmt.Sprintf("assistant: regenerated %d", i)); strings.Join(got, "\n") != strings.Join(want, "\n") {
			lost++
			t.Errorf("%s: after the next regenerate the session holds %q, want %q", what, got, want)
		}
		validHistory(t, after.messages)
	}
	report(t, "A crash (SIGKILL) during a regenerate's or an edit's model call leaves the session exactly as it was, never rewound without the new turn, valid, and the next regenerate works",
		fmt.Sprintf("%d SIGKILLs of the chat bootstrap during the model call: %d of a regenerate, %d of an edit", kills, (kills+1)/2, kills/2), lost)
}
