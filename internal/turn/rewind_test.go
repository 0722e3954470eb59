package turn_test

import (
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/lambda-agent/lambda-agent/internal/agent"
	"github.com/lambda-agent/lambda-agent/internal/ddbhistory"
	"github.com/lambda-agent/lambda-agent/internal/turn"
)

// texts are the texts of msgs, in order.
func texts(msgs []agent.Message) []string {
	out := make([]string, len(msgs))
	for i, m := range msgs {
		out[i] = m.Text()
	}
	return out
}

// twoTurns starts session s1 with two chat turns, under keys k1 and k2:
// "one", "re: one", "two", "re: two".
func twoTurns(t *testing.T, svc *turn.Service) {
	t.Helper()
	mustChat(t, svc, chat("s1", "k1", "one"))
	mustChat(t, svc, chat("s1", "k2", "two"))
}

func rewindTo(to int, key string) turn.Rewind {
	return turn.Rewind{Request: turn.Request{Owner: owner, SessionID: "s1", IdempotencyKey: key, Fingerprint: turn.Fingerprint("rewind", []byte{byte(to)})}, To: to}
}

// TestRewind discards a session's messages from a user turn on, in one
// commit, with the idempotency of a turn: a retry replays the rewind, and
// the turns it discarded replay no more.
func TestRewind(t *testing.T) {
	store, model := newFakeStore(), &fakeAgent{}
	svc, _ := turn.New(store, model)
	twoTurns(t, svc)
	out, err := svc.Rewind(t.Context(), rewindTo(2, "rw"))
	if err != nil {
		t.Fatal(err)
	}
	want := turn.RewindAnswer{SessionID: "s1", MessageCount: 2, Discarded: 2}
	if diff := cmp.Diff(want, out.Answer); diff != "" || out.First != 2 {
		t.Errorf("the answer: first %d (-want +got):\n%s", out.First, diff)
	}
	st := store.session(t, "s1")
	if diff := cmp.Diff([]string{"one", "re: one"}, texts(st.messages)); diff != "" || st.version != 3 {
		t.Errorf("after the rewind: version %d (-want +got):\n%s", st.version, diff)
	}
	if c := store.commits[len(store.commits)-1]; !c.Rewind || c.From != 2 || len(c.Messages) != 0 {
		t.Errorf("the rewind's commit: %+v", c)
	}

	again, err := svc.Rewind(t.Context(), rewindTo(2, "rw"))
	if err != nil || !again.Replayed || again.Answer != out.Answer {
		t.Errorf("a retry of the rewind: %v, %+v; want its replay", err, again)
	}
	if _, err := svc.Chat(t.Context(), chat("s1", "k2", "two")); !errors.Is(err, turn.ErrReplayGone) {
		t.Errorf("a retry of the discarded turn: %v, want ErrReplayGone", err)
	}
	if kept, err := svc.Chat(t.Context(), chat("s1", "k1", "one")); err != nil || !kept.Replayed || kept.Answer.Text != "re: one" {
		t.Errorf("a retry of the kept turn: %v, %+v; want its replay", err, kept)
	}
	if st := store.session(t, "s1"); len(st.messages) != 2 || st.version != 3 || model.calls() != 2 {
		t.Errorf("the retries changed the session: %d messages, version %d, %d runs", len(st.messages), st.version, model.calls())
	}
}

// TestRewindDiscardsWhatIsPending: a rewind of a paused session leaves
// nothing pending, and a message is then taken.
func TestRewindDiscardsWhatIsPending(t *testing.T) {
	store, model := newFakeStore(), &fakeAgent{}
	svc, _ := turn.New(store, model)
	mustChat(t, svc, chat("s1", "", "hi"))
	pause(t, svc, model, "s1")
	if _, err := svc.Chat(t.Context(), chat("s1", "", "and?")); !errors.Is(err, turn.ErrInterruptPending) {
		t.Fatalf("a message on the paused session: %v, want ErrInterruptPending", err)
	}
	if _, err := svc.Rewind(t.Context(), rewindTo(2, "")); err != nil {
		t.Fatal(err)
	}
	if st := store.session(t, "s1"); st.pending != nil || len(st.messages) != 2 {
		t.Errorf("after the rewind: pending %+v, %d messages; want none, 2", st.pending, len(st.messages))
	}
	mustChat(t, svc, chat("s1", "", "and?"))
}

// TestRewindRefused: a rewind to a message that does not start a user
// turn, or that the session does not have, is ErrInvalidRewind, runs
// nothing and changes nothing; an edit too.
func TestRewindRefused(t *testing.T) {
	tests := []struct {
		name string
		to   int
		edit bool
	}{
		{name: "an assistant message", to: 1},
		{name: "past the end", to: 4},
		{name: "negative", to: -1},
		{name: "an edit of an assistant message", to: 3, edit: true},
		{name: "an edit past the end", to: 4, edit: true},
		{name: "an edit of a user message that answers tool uses", to: 6, edit: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			store, model := newFakeStore(), &fakeAgent{}
			svc, _ := turn.New(store, model)
			twoTurns(t, svc)
			if tt.to == 6 {
				// Messages 4 to 7: a paused turn, and its resume.
				pause(t, svc, model, "s1")
				if _, err := svc.Chat(t.Context(), resume("s1", "", true)); err != nil {
					t.Fatal(err)
				}
			}
			before, runs := store.commitCount(), model.calls()
			var err error
			if tt.edit {
				c := chat("s1", "ed", "")
				c.Content, c.Edit = nil, &turn.Edit{From: tt.to, Content: []agent.ContentBlock{agent.Text("edited")}}
				_, err = svc.Chat(t.Context(), c)
			} else {
				_, err = svc.Rewind(t.Context(), rewindTo(tt.to, "rw"))
			}
			if !errors.Is(err, turn.ErrInvalidRewind) {
				t.Fatalf("err = %v, want ErrInvalidRewind", err)
			}
			if store.commitCount() != before || model.calls() != runs {
				t.Errorf("the refused rewind committed %d turns and ran %d", store.commitCount()-before, model.calls()-runs)
			}
			if len(store.released) != 1 || store.records[recordID(owner, "rw")] != nil || store.records[recordID(owner, "ed")] != nil {
				t.Errorf("the key of the refused rewind: %d released", len(store.released))
			}
		})
	}
}

// TestRegenerate runs a session's last user message again, in place of its
// last turn, in one commit.
func TestRegenerate(t *testing.T) {
	store, model := newFakeStore(), &fakeAgent{}
	svc, _ := turn.New(store, model)
	twoTurns(t, svc)
	model.text = "two, again"
	c := chat("s1", "rg", "")
	c.Content, c.Regenerate = nil, true
	out, err := svc.Chat(t.Context(), c)
	if err != nil {
		t.Fatal(err)
	}
	if out.Answer.RewoundTo == nil || *out.Answer.RewoundTo != 2 || out.First != 2 || out.Answer.Text != "two, again" {
		t.Errorf("the answer: rewound to %v, first %d, text %q", out.Answer.RewoundTo, out.First, out.Answer.Text)
	}
	if diff := cmp.Diff([]string{"two", "two, again"}, texts(out.Answer.Messages)); diff != "" {
		t.Errorf("the answer's messages (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"one", "re: one"}, texts(model.given[2].Messages)); diff != "" {
		t.Errorf("the regenerated turn ran on (-want +got):\n%s", diff)
	}
	st := store.session(t, "s1")
	if diff := cmp.Diff([]string{"one", "re: one", "two", "two, again"}, texts(st.messages)); diff != "" {
		t.Errorf("stored (-want +got):\n%s", diff)
	}
	if c := store.commits[len(store.commits)-1]; !c.Rewind || c.From != 2 {
		t.Errorf("the commit: rewind %v from %d; want one commit from 2", c.Rewind, c.From)
	}
	again, err := svc.Chat(t.Context(), c)
	if err != nil || !again.Replayed {
		t.Fatalf("a retry: %v, %+v", err, again)
	}
	if diff := cmp.Diff(out.Answer, again.Answer); diff != "" {
		t.Errorf("the replay differs (-first +retry):\n%s", diff)
	}
}

// TestRegenerateATurnLongerThanItsWindow: when the window holds no turn
// start, the last user message is read from before it (WindowBefore), and
// the turn runs again on the window up to it, the summary dropped.
func TestRegenerateATurnLongerThanItsWindow(t *testing.T) {
	store, model := newFakeStore(), &fakeAgent{}
	svc, _ := turn.New(store, model)
	use := &agent.ToolUseBlock{ToolUseID: "t1", Name: "search", Input: []byte(`{}`)}
	msgs := []agent.Message{
		agent.UserText("zero"), agent.AssistantText("re: zero"),
		agent.UserText("look it up"),
		{Role: agent.RoleAssistant, Content: []agent.ContentBlock{{ToolUse: use}}},
		{Role: agent.RoleUser, Content: []agent.ContentBlock{{ToolResult: agent.TextResult("t1", agent.ToolSuccess, "found")}}},
		agent.AssistantText("it is found"),
	}
	key := ddbhistory.Key{Owner: owner, ID: "s1"}
	window := agent.WindowState{Removed: 3, Summary: "a question, and a search"}
	if err := store.Commit(t.Context(), ddbhistory.NewSession(key), ddbhistory.Turn{Messages: msgs, Window: window}); err != nil {
		t.Fatal(err)
	}
	c := chat("s1", "", "")
	c.Content, c.Regenerate = nil, true
	out, err := svc.Chat(t.Context(), c)
	if err != nil {
		t.Fatal(err)
	}
	if out.Answer.RewoundTo == nil || *out.Answer.RewoundTo != 2 || out.Answer.Text != "re: look it up" {
		t.Errorf("the answer: rewound to %v, text %q", out.Answer.RewoundTo, out.Answer.Text)
	}
	given := model.given[0]
	if diff := cmp.Diff([]string{"zero", "re: zero"}, texts(given.Messages)); diff != "" || given.Window.Removed != 0 || given.Window.Summary != "" {
		t.Errorf("the turn ran on window %+v (-want +got):\n%s", given.Window, diff)
	}
	st := store.session(t, "s1")
	if diff := cmp.Diff([]string{"zero", "re: zero", "look it up", "re: look it up"}, texts(st.messages)); diff != "" || st.window.Summary != "" {
		t.Errorf("stored, with window %+v (-want +got):\n%s", st.window, diff)
	}
}

// TestEdit runs new content in place of a user message and all that
// follows it, in one commit; an edit of the first message gives the
// session its title, and one of a paused session discards what was
// pending.
func TestEdit(t *testing.T) {
	for _, from := range []int{0, 2} {
		store, model := newFakeStore(), &fakeAgent{}
		svc, _ := turn.New(store, model)
		twoTurns(t, svc)
		pause(t, svc, model, "s1")
		c := chat("s1", "ed", "")
		c.Content, c.Edit = nil, &turn.Edit{From: from, Content: []agent.ContentBlock{agent.Text("edited")}}
		out, err := svc.Chat(t.Context(), c)
		if err != nil {
			t.Fatalf("edit from %d: %v", from, err)
		}
		if out.Answer.RewoundTo == nil || *out.Answer.RewoundTo != from || out.First != from || out.Answer.Text != "re: edited" {
			t.Errorf("edit from %d: rewound to %v, first %d, text %q", from, out.Answer.RewoundTo, out.First, out.Answer.Text)
		}
		want := append([]string{"one", "re: one"}[:from], "edited", "re: edited")
		st := store.session(t, "s1")
		if diff := cmp.Diff(want, texts(st.messages)); diff != "" || st.pending != nil {
			t.Errorf("edit from %d: stored, pending %+v (-want +got):\n%s", from, st.pending, diff)
		}
		if diff := cmp.Diff(want[:from], texts(model.given[len(model.given)-1].Messages), cmpopts.EquateEmpty()); diff != "" {
			t.Errorf("edit from %d: the turn ran on (-want +got):\n%s", from, diff)
		}
		wantTitle := map[int]string{0: "edited", 2: "one"}[from]
		if st.title != wantTitle {
			t.Errorf("edit from %d: title %q, want %q", from, st.title, wantTitle)
		}
	}
}
