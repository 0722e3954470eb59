package turn_test

import (
	"encoding/json"
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/lambda-agent/lambda-agent/internal/agent"
	"github.com/lambda-agent/lambda-agent/internal/turn"
)

func toolCall(id, key, name string, record bool) turn.ToolCall {
	body, _ := json.Marshal(map[string]any{"session": id, "record": record})
	return turn.ToolCall{
		Request: turn.Request{Owner: owner, SessionID: id, IdempotencyKey: key, Fingerprint: turn.Fingerprint("tools/"+name, body)},
		Name:    name, Input: json.RawMessage(`{"page":1}`), Record: record,
	}
}

// TestCallTool: a direct call is committed as a turn. Recorded, its
// messages are added to the conversation and its answer carries them; not
// recorded, only the agent state the tool changed is committed. Either is
// replayed for its key.
func TestCallTool(t *testing.T) {
	for _, record := range []bool{true, false} {
		name := map[bool]string{true: "recorded", false: "not recorded"}[record]
		t.Run(name, func(t *testing.T) {
			store, model := newFakeStore(), &fakeAgent{}
			svc, _ := turn.New(store, model)
			mustChat(t, svc, chat("s1", "", "hi"))
			n := store.commitCount()
			out, err := svc.CallTool(t.Context(), toolCall("s1", "c1", "orders", record))
			if err != nil {
				t.Fatal(err)
			}
			a := out.Answer
			if a.SessionID != "s1" || a.Tool != "orders" || a.ToolUseID != "direct_1" || a.Status != agent.ToolSuccess || a.Recorded != record || a.Metrics.ToolCalls != 1 {
				t.Errorf("the answer: %+v", a)
			}
			if diff := cmp.Diff([]agent.ToolResultContent{{Text: "called orders"}}, a.Content); diff != "" {
				t.Errorf("the answer's content (-want +got):\n%s", diff)
			}
			wantMessages := map[bool]int{true: 4, false: 0}[record]
			if a.Messages == nil || len(a.Messages) != wantMessages || out.First != 2 {
				t.Errorf("the answer: %d messages (nil %v) from %d; want %d from 2", len(a.Messages), a.Messages == nil, out.First, wantMessages)
			}
			st := store.session(t, "s1")
			if len(st.messages) != 2+wantMessages || string(st.state["called:orders"]) != "true" || st.version != 2 || store.commitCount() != n+1 {
				t.Errorf("stored: %d messages, state %s, version %d, %d commits; want %d, called, 2, 1", len(st.messages), st.state, st.version, store.commitCount()-n, 2+wantMessages)
			}
			if diff := cmp.Diff(a.Messages, st.messages[2:], cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("the stored messages differ from the answer's (-answer +stored):\n%s", diff)
			}

			again, err := svc.CallTool(t.Context(), toolCall("s1", "c1", "orders", record))
			if err != nil || !again.Replayed || model.calls() != 2 {
				t.Fatalf("a retry: %v, %+v, %d runs; want a replay", err, again, model.calls())
			}
			if diff := cmp.Diff(a, again.Answer); diff != "" {
				t.Errorf("the replay differs (-first +retry):\n%s", diff)
			}
			if _, err := svc.CallTool(t.Context(), toolCall("s1", "c1", "orders", !record)); !errors.Is(err, turn.ErrKeyReused) {
				t.Errorf("the key with another call: %v, want ErrKeyReused", err)
			}
		})
	}
}

// TestCallToolOnAPausedSession: a session whose last turn waits for a
// person refuses a direct call, recorded or not, with what it waits for:
// the tool does not run and nothing is stored.
func TestCallToolOnAPausedSession(t *testing.T) {
	for _, record := range []bool{true, false} {
		store, model := newFakeStore(), &fakeAgent{}
		svc, _ := turn.New(store, model)
		pause(t, svc, model, "s1")
		n, runs := store.commitCount(), model.calls()
		_, err := svc.CallTool(t.Context(), toolCall("s1", "c1", "orders", record))
		var pending *turn.PendingError
		if !errors.As(err, &pending) || !errors.Is(err, turn.ErrInterruptPending) || len(pending.Interrupts) != 1 || pending.Interrupts[0].ID != "u1" {
			t.Errorf("record %v: %v, want a *PendingError of u1", record, err)
		}
		if store.commitCount() != n || model.calls() != runs || len(store.released) != 1 {
			t.Errorf("record %v: %d commits, %d runs, %d holds released; want none, none, 1", record, store.commitCount()-n, model.calls()-runs, len(store.released))
		}
		if st := store.session(t, "s1"); st.pending == nil || len(st.messages) != 2 || st.state["called:orders"] != nil {
			t.Errorf("record %v: the session changed: pending %+v, %d messages, state %s", record, st.pending, len(st.messages), st.state)
		}
		// Once the turn is resumed, the call runs.
		if _, err := svc.Chat(t.Context(), resume("s1", "", true)); err != nil {
			t.Fatal(err)
		}
		if _, err := svc.CallTool(t.Context(), toolCall("s1", "c2", "orders", record)); err != nil {
			t.Errorf("record %v: a call after the resume: %v", record, err)
		}
	}
}
