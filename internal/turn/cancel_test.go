package turn_test

import (
	"errors"
	"testing"

	"github.com/lambda-agent/lambda-agent/internal/agent"
	"github.com/lambda-agent/lambda-agent/internal/ddbhistory"
	"github.com/lambda-agent/lambda-agent/internal/turn"
)

// TestCancel ends a paused turn in one commit, with no tool run; a session
// with nothing pending, one being resumed and one another owner holds are
// refused, and change nothing.
func TestCancel(t *testing.T) {
	store, model := newFakeStore(), &fakeAgent{}
	svc, _ := turn.New(store, model)
	req := func(id string) turn.Cancel { return turn.Cancel{Request: turn.Request{Owner: owner, SessionID: id}} }

	mustChat(t, svc, chat("plain", "", "hi"))
	if _, err := svc.Cancel(t.Context(), req("plain")); !errors.Is(err, turn.ErrNothingPending) {
		t.Errorf("cancel of a session with nothing pending: %v; want ErrNothingPending", err)
	}
	if _, err := svc.Cancel(t.Context(), req("none")); !errors.Is(err, ddbhistory.ErrNotFound) {
		t.Errorf("cancel of no session: %v; want ErrNotFound", err)
	}

	pause(t, svc, model, "s1")
	other := req("s1")
	other.Owner = "someone-else"
	if _, err := svc.Cancel(t.Context(), other); !errors.Is(err, ddbhistory.ErrNotFound) {
		t.Errorf("cancel by another owner: %v; want ErrNotFound", err)
	}
	pause(t, svc, model, "claimed")
	sess, err := store.Load(t.Context(), ddbhistory.Key{Owner: owner, ID: "claimed"}, "")
	if err != nil {
		t.Fatal(err)
	}
	if err := store.ClaimPending(t.Context(), sess); err != nil {
		t.Fatal(err)
	}
	if _, err := svc.Cancel(t.Context(), req("claimed")); !errors.Is(err, turn.ErrResuming) {
		t.Errorf("cancel of a session being resumed: %v; want ErrResuming", err)
	}
	if st := store.session(t, "claimed"); st.pending == nil || len(st.messages) != 2 {
		t.Errorf("the claimed session changed: pending %+v, %d messages", st.pending, len(st.messages))
	}

	n := store.commitCount()
	out, err := svc.Cancel(t.Context(), req("s1"))
	if err != nil {
		t.Fatal(err)
	}
	if got := store.commitCount() - n; got != 1 {
		t.Errorf("%d commits; want 1", got)
	}
	st := store.session(t, "s1")
	if len(st.messages) != 4 || st.pending != nil || len(model.ran) != 0 || out.First != 2 || out.Answer.Text != "canceled" {
		t.Errorf("after the cancel: %d messages, pending %+v, ran %v, first %d, text %q", len(st.messages), st.pending, model.ran, out.First, out.Answer.Text)
	}
	if r := st.messages[2].Content[0].ToolResult; r == nil || r.ToolUseID != "u1" || r.Status != agent.ToolError {
		t.Errorf("the paused use's result: %+v", r)
	}
	if _, err := svc.Cancel(t.Context(), req("s1")); !errors.Is(err, turn.ErrNothingPending) {
		t.Errorf("a second cancel: %v; want ErrNothingPending", err)
	}
}
