package turn_test

import (
	"context"
	"encoding/json"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/lambda-agent/lambda-agent/internal/agent"
	"github.com/lambda-agent/lambda-agent/internal/ddbhistory"
	"github.com/lambda-agent/lambda-agent/internal/turn"
)

// refund is the interrupt of a paused turn: a refund that waits for a
// person's approval, for an hour.
func refund() agent.Interrupt {
	return agent.Interrupt{
		ID: "u1", Kind: agent.KindApproval, Name: "approval", Tool: "refund", Input: json.RawMessage(`{"n":1}`),
		Reason: "refund needs your approval to run.", ExpiresAt: time.Now().Add(time.Hour),
	}
}

// pause runs a chat turn on session id that pauses for refund's approval,
// and returns its answer.
func pause(t *testing.T, svc *turn.Service, model *fakeAgent, id string) turn.ChatAnswer {
	t.Helper()
	model.pause = []agent.Interrupt{refund()}
	defer func() { model.pause = nil }()
	out, err := svc.Chat(t.Context(), chat(id, "", "refund my order"))
	if err != nil {
		t.Fatal(err)
	}
	if out.Answer.StopReason != agent.StopInterrupt || len(out.Answer.Interrupts) != 1 || out.Answer.Interrupts[0].ID != "u1" {
		t.Fatalf("the paused turn: stop %q, interrupts %+v", out.Answer.StopReason, out.Answer.Interrupts)
	}
	return out.Answer
}

// resume is the request that answers the paused turn's interrupt.
func resume(id, key string, approve bool) turn.Chat {
	body, _ := json.Marshal(map[string]any{"session": id, "approve": approve})
	return turn.Chat{
		Request:   turn.Request{Owner: owner, SessionID: id, IdempotencyKey: key, Fingerprint: turn.Fingerprint("chat", body)},
		Responses: []agent.Response{{InterruptID: "u1", Approve: &approve}},
	}
}

// results is the message that answers the paused turn when the refund is
// approved, and final the answer the turn then ends with.
var (
	results = agent.Message{Role: agent.RoleUser, Content: []agent.ContentBlock{
		{ToolResult: agent.TextResult("u1", agent.ToolSuccess, "ran refund")},
		{ToolResult: agent.TextResult("kept", agent.ToolSuccess, "looked up")},
	}}
	final = agent.AssistantText("done, after 2 results")
)

// session returns what the fake store holds of a session of owner's.
func (f *fakeStore) session(t *testing.T, id string) *stored {
	t.Helper()
	f.mu.Lock()
	defer f.mu.Unlock()
	st := f.sessions[ddbhistory.Key{Owner: owner, ID: id}]
	if st == nil {
		t.Fatalf("no session %s", id)
	}
	return st
}

// committed returns the turns committed since the first n.
func (f *fakeStore) committed(n int) []ddbhistory.Turn {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.commits[n:]
}

func (f *fakeStore) commitCount() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.commits)
}

// checkResumed fails the test unless session id holds the paused turn
// resumed to its end, with nothing pending and no claim.
func checkResumed(t *testing.T, store *fakeStore, id string) {
	t.Helper()
	st := store.session(t, id)
	if len(st.messages) != 4 || st.pending != nil || st.resuming || string(st.state["answered"]) != "true" {
		t.Fatalf("session %s: %d messages, pending %+v, resuming %v, state %s; want 4, none, false, answered", id, len(st.messages), st.pending, st.resuming, st.state)
	}
	if diff := cmp.Diff([]agent.Message{results, final}, st.messages[2:]); diff != "" {
		t.Errorf("the turn's end, stored (-want +got):\n%s", diff)
	}
}

// TestResume answers a paused turn: the interrupt is claimed, the approved
// tool runs once, the results are committed as a checkpoint that keeps the
// claim, and the rest of the turn is committed after them, under the
// request's key; the answer carries the messages of both, and a retry
// replays them.
func TestResume(t *testing.T) {
	store, model := newFakeStore(), &fakeAgent{}
	svc, _ := turn.New(store, model)
	pause(t, svc, model, "s1")
	if st := store.session(t, "s1"); st.pending == nil || len(st.messages) != 2 {
		t.Fatalf("the paused session: pending %+v, %d messages", st.pending, len(st.messages))
	}
	n := store.commitCount()
	sink := &recordingSink{}
	req := resume("s1", "r1", true)
	req.Sink = sink
	out, err := svc.Chat(t.Context(), req)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]agent.Message{results, final}, out.Answer.Messages); diff != "" {
		t.Errorf("the answer's messages (-want +got):\n%s", diff)
	}
	if out.First != 2 || out.Replayed || out.Answer.Text != final.Text() || out.Answer.StopReason != agent.StopEndTurn || out.Answer.Metrics.ToolCalls != 1 {
		t.Errorf("outcome: first %d, replayed %v, text %q, stop %q, tool calls %d", out.First, out.Replayed, out.Answer.Text, out.Answer.StopReason, out.Answer.Metrics.ToolCalls)
	}
	if len(model.ran) != 1 || model.ran[0] != "refund" {
		t.Errorf("tools run: %v, want refund once", model.ran)
	}
	if len(model.continued) != 1 || !cmp.Equal(model.continued[0], results) {
		t.Errorf("the rest of the turn ran on %+v, want the results", model.continued)
	}
	if sink.started != "s1" || sink.first != 2 || len(sink.events) != 3 || sink.events[2].Text != final.Text() {
		t.Errorf("sink: started %q at %d, events %+v; want two results and the text, from message 2", sink.started, sink.first, sink.events)
	}

	// Two commits: the checkpoint keeps the claim and no key, the end
	// records the key with the checkpoint's message counted as earlier.
	commits := store.committed(n)
	if len(commits) != 2 {
		t.Fatalf("%d commits, want the checkpoint and the end", len(commits))
	}
	if c := commits[0]; !c.Resuming || c.Hold != nil || c.Earlier != 0 || !cmp.Equal(c.Messages, []agent.Message{results}) {
		t.Errorf("the checkpoint: resuming %v, hold %v, earlier %d, messages %+v", c.Resuming, c.Hold, c.Earlier, c.Messages)
	}
	if c := commits[1]; c.Resuming || c.Hold == nil || c.Hold.Key != "r1" || c.Earlier != 1 || !cmp.Equal(c.Messages, []agent.Message{final}) {
		t.Errorf("the end: resuming %v, hold %v, earlier %d, messages %+v", c.Resuming, c.Hold, c.Earlier, c.Messages)
	}
	checkResumed(t, store, "s1")

	again, err := svc.Chat(t.Context(), resume("s1", "r1", true))
	if err != nil || !again.Replayed || again.First != 2 {
		t.Fatalf("the retry: %v, %+v; want a replay from 2", err, again)
	}
	if diff := cmp.Diff(out.Answer, again.Answer); diff != "" {
		t.Errorf("the replay differs from the answer (-first +retry):\n%s", diff)
	}
	if len(model.ran) != 1 || store.commitCount() != n+2 {
		t.Errorf("the replay ran %v, and committed %d times", model.ran, store.commitCount()-n-2)
	}
}

// TestResumeFailsBetweenItsCommits: when the rest of the turn fails after
// the checkpoint, the claim and the key are released and the session keeps
// the results; a retry continues from them without running the tool again,
// and a new message goes on after them.
func TestResumeFailsBetweenItsCommits(t *testing.T) {
	modelDown := &agent.ModelError{Kind: agent.KindUnavailable, Message: "down"}
	for _, key := range []string{"r1", ""} {
		t.Run("key "+key, func(t *testing.T) {
			store, model := newFakeStore(), &fakeAgent{}
			svc, _ := turn.New(store, model)
			pause(t, svc, model, "s1")
			n := store.commitCount()
			model.continueErr = modelDown
			if _, err := svc.Chat(t.Context(), resume("s1", key, true)); !errors.Is(err, modelDown) {
				t.Fatalf("err = %v, want the model's", err)
			}
			st := store.session(t, "s1")
			if len(st.messages) != 3 || !cmp.Equal(st.messages[2], results) || st.pending != nil || st.resuming {
				t.Errorf("after the failure: %d messages, pending %+v, resuming %v; want the results kept, nothing pending, no claim", len(st.messages), st.pending, st.resuming)
			}
			if c := store.committed(n); len(c) != 1 || !c[0].Resuming {
				t.Errorf("commits after the failure: %+v; want the checkpoint alone", c)
			}
			if key != "" && (len(store.released) != 1 || store.records[recordID(owner, key)] != nil) {
				t.Errorf("the key after the failure: %d released, record %+v", len(store.released), store.records[recordID(owner, key)])
			}

			model.continueErr = nil
			out, err := svc.Chat(t.Context(), resume("s1", key, true))
			if err != nil {
				t.Fatalf("the retry: %v", err)
			}
			if diff := cmp.Diff([]agent.Message{results, final}, out.Answer.Messages); diff != "" || out.First != 2 || out.Replayed {
				t.Errorf("the retry: first %d, replayed %v (-want +got):\n%s", out.First, out.Replayed, diff)
			}
			if len(model.ran) != 1 || len(model.continued) != 2 || !cmp.Equal(model.continued[1], results) {
				t.Errorf("the retry ran tools %v and continued from %+v; want refund once, the results", model.ran, model.continued)
			}
			if c := store.committed(n + 1); len(c) != 1 || c[0].Earlier != 1 || c[0].Resuming || (c[0].Hold != nil) != (key != "") {
				t.Errorf("the retry's commits: %+v; want one, with the results as earlier", c)
			}
			checkResumed(t, store, "s1")
			if key == "" {
				return
			}
			again, err := svc.Chat(t.Context(), resume("s1", key, true))
			if err != nil || !again.Replayed || !cmp.Equal(again.Answer.Messages, out.Answer.Messages) {
				t.Errorf("a replay of the retry: %v, %+v", err, again)
			}
		})
	}

	t.Run("a message instead", func(t *testing.T) {
		store, model := newFakeStore(), &fakeAgent{}
		svc, _ := turn.New(store, model)
		pause(t, svc, model, "s1")
		model.continueErr = modelDown
		if _, err := svc.Chat(t.Context(), resume("s1", "", true)); !errors.Is(err, modelDown) {
			t.Fatalf("err = %v, want the model's", err)
		}
		if _, err := svc.Chat(t.Context(), chat("s1", "", "never mind")); err != nil {
			t.Fatalf("a message after the failed resume: %v", err)
		}
		st := store.session(t, "s1")
		if len(st.messages) != 5 || !cmp.Equal(st.messages[2], results) || st.messages[3].Text() != "never mind" {
			t.Errorf("after the message: %d messages, %+v", len(st.messages), st.messages)
		}
	})
}

// TestResumeWhoseEndFailsToCommit: a final commit that fails releases the
// claim that the checkpoint kept, though the checkpoint moved the session
// on; a retry continues from the results.
func TestResumeWhoseEndFailsToCommit(t *testing.T) {
	store, model := newFakeStore(), &fakeAgent{}
	svc, _ := turn.New(store, model)
	pause(t, svc, model, "s1")
	commits := 0
	store.beforeCommit = func() {
		if commits++; commits == 2 {
			store.commitErr = ddbhistory.ErrThrottled
		}
	}
	_, err := svc.Chat(t.Context(), resume("s1", "r1", true))
	var ce *turn.CommitError
	if !errors.As(err, &ce) || !errors.Is(err, ddbhistory.ErrThrottled) || ce.Result.Text != final.Text() {
		t.Fatalf("err = %v, want a *CommitError of the throttled end", err)
	}
	if st := store.session(t, "s1"); len(st.messages) != 3 || st.resuming || st.pending != nil {
		t.Errorf("after the failed end: %d messages, resuming %v, pending %+v; want the results, no claim", len(st.messages), st.resuming, st.pending)
	}
	if len(store.released) != 1 {
		t.Errorf("%d holds released, want 1", len(store.released))
	}
	store.beforeCommit, store.commitErr = nil, nil
	if _, err := svc.Chat(t.Context(), resume("s1", "r1", true)); err != nil {
		t.Fatalf("the retry: %v", err)
	}
	if len(model.ran) != 1 {
		t.Errorf("tools run: %v, want refund once", model.ran)
	}
	checkResumed(t, store, "s1")
}

// TestResumeRefused: a resume that cannot run changes nothing, runs no
// tool, and leaves no claim, but for one whose tools may have run.
func TestResumeRefused(t *testing.T) {
	modelDown := &agent.ModelError{Kind: agent.KindUnavailable, Message: "down"}
	tests := []struct {
		name  string
		setup func(*testing.T, *turn.Service, *fakeStore, *fakeAgent)
		req   turn.Chat

		wantErr      error
		wantMessages int  // stored after the resume; -1 for no session
		wantPending  bool // the interrupts are still pending
		wantClaimed  bool // the interrupts are still claimed
	}{
		{
			name: "nothing pending",
			setup: func(t *testing.T, svc *turn.Service, _ *fakeStore, _ *fakeAgent) {
				mustChat(t, svc, chat("s1", "", "hi"))
			},
			req:          resume("s1", "", true),
			wantErr:      turn.ErrNothingPending,
			wantMessages: 2,
		},
		{
			name:         "responses to other interrupts",
			setup:        func(t *testing.T, svc *turn.Service, _ *fakeStore, a *fakeAgent) { pause(t, svc, a, "s1") },
			req:          turn.Chat{Request: resume("s1", "", true).Request, Responses: []agent.Response{{InterruptID: "u9", Answer: "yes"}}},
			wantErr:      agent.ErrInvalidResponses,
			wantMessages: 2, wantPending: true,
		},
		{
			name: "claimed by another request",
			setup: func(t *testing.T, svc *turn.Service, s *fakeStore, a *fakeAgent) {
				pause(t, svc, a, "s1")
				sess, err := s.Load(t.Context(), ddbhistory.Key{Owner: owner, ID: "s1"}, "")
				if err == nil {
					err = s.ClaimPending(t.Context(), sess)
				}
				if err != nil {
					t.Fatal(err)
				}
			},
			req:          resume("s1", "r1", true),
			wantErr:      turn.ErrResuming,
			wantMessages: 2, wantPending: true, wantClaimed: true,
		},
		{
			// The tools may have run before the answering failed: the claim
			// stays until it expires, so that no retry runs them beside it.
			name: "the answering fails",
			setup: func(t *testing.T, svc *turn.Service, _ *fakeStore, a *fakeAgent) {
				pause(t, svc, a, "s1")
				a.answerErr = modelDown
			},
			req:          resume("s1", "r1", true),
			wantErr:      modelDown,
			wantMessages: 2, wantPending: true, wantClaimed: true,
		},
		{
			name:         "content beside the responses",
			setup:        func(t *testing.T, svc *turn.Service, _ *fakeStore, a *fakeAgent) { pause(t, svc, a, "s1") },
			req:          turn.Chat{Request: resume("s1", "", true).Request, Responses: resume("s1", "", true).Responses, Content: []agent.ContentBlock{agent.Text("and")}},
			wantErr:      errors.New("turn: responses come without content and without DenyPending"),
			wantMessages: 2, wantPending: true,
		},
		{
			name:         "no session",
			req:          resume("s1", "", true),
			wantErr:      turn.ErrNotFound,
			wantMessages: -1,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			store, model := newFakeStore(), &fakeAgent{}
			svc, _ := turn.New(store, model)
			if tt.setup != nil {
				tt.setup(t, svc, store, model)
			}
			n := store.commitCount()
			_, err := svc.Chat(t.Context(), tt.req)
			if !errors.Is(err, tt.wantErr) && (err == nil || err.Error() != tt.wantErr.Error()) {
				t.Fatalf("err = %v, want %v", err, tt.wantErr)
			}
			if len(model.ran) != 0 || store.commitCount() != n {
				t.Errorf("tools run %v, %d commits; want none", model.ran, store.commitCount()-n)
			}
			if r := store.records[recordID(owner, "r1")]; r != nil {
				t.Errorf("the key is kept: %+v", r)
			}
			if tt.wantMessages < 0 {
				return
			}
			st := store.session(t, "s1")
			if len(st.messages) != tt.wantMessages || (st.pending != nil) != tt.wantPending || st.resuming != tt.wantClaimed {
				t.Errorf("after: %d messages, pending %v, claimed %v; want %d, %v, %v", len(st.messages), st.pending != nil, st.resuming, tt.wantMessages, tt.wantPending, tt.wantClaimed)
			}
			if tt.wantClaimed {
				// While the claim lasts, the session takes no other turn.
				model.answerErr = nil
				for name, err := range map[string]error{
					"a resume":    errOf(svc.Chat(t.Context(), resume("s1", "", true))),
					"a message":   errOf(svc.Chat(t.Context(), chat("s1", "", "hello?"))),
					"a tool call": errOf(svc.CallTool(t.Context(), turn.ToolCall{Request: turn.Request{Owner: owner, SessionID: "s1"}, Name: "orders"})),
					"a rewind":    errOf(svc.Rewind(t.Context(), turn.Rewind{Request: turn.Request{Owner: owner, SessionID: "s1"}, To: 0})),
				} {
					if !errors.Is(err, turn.ErrResuming) {
						t.Errorf("%s while the claim lasts: %v, want ErrResuming", name, err)
					}
				}
			}
		})
	}
}

// TestRacingResumesRunTheToolOnce: of resumes racing to answer one paused
// turn, one runs the approved tool and ends the turn; the others are
// refused, each with the reason the session gave it when it came.
func TestRacingResumesRunTheToolOnce(t *testing.T) {
	store, model := newFakeStore(), &fakeAgent{}
	svc, _ := turn.New(store, model)
	pause(t, svc, model, "s1")
	const n = 4
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() { errs[i] = errOf(svc.Chat(context.Background(), resume("s1", "", true))) })
	}
	wg.Wait()
	ok := 0
	for i, err := range errs {
		switch {
		case err == nil:
			ok++
		case !errors.Is(err, turn.ErrConflict) && !errors.Is(err, turn.ErrResuming) && !errors.Is(err, turn.ErrNothingPending):
			t.Errorf("resume %d: %v", i, err)
		}
	}
	if ok != 1 || len(model.ran) != 1 {
		t.Errorf("%d resumes succeeded, and ran %v; want one, refund once", ok, model.ran)
	}
	checkResumed(t, store, "s1")
}

// mustChat runs a chat turn, or fails the test.
func mustChat(t *testing.T, svc *turn.Service, c turn.Chat) *turn.Outcome[turn.ChatAnswer] {
	t.Helper()
	out, err := svc.Chat(t.Context(), c)
	if err != nil {
		t.Fatalf("chat on %q: %v", c.SessionID, err)
	}
	return out
}

// errOf is the error of a call that returns a value too.
func errOf[T any](_ T, err error) error { return err }
