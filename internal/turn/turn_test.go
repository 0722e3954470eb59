package turn_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/lambda-agent/lambda-agent/internal/agent"
	"github.com/lambda-agent/lambda-agent/internal/ddbhistory"
	"github.com/lambda-agent/lambda-agent/internal/turn"
)

func errorsIsUnknown(err error) bool { return errors.Is(err, ddbhistory.ErrOutcomeUnknown) }

const owner = "alice"

func chat(session, key, text string) turn.Chat {
	return turn.Chat{
		Request: turn.Request{Owner: owner, SessionID: session, IdempotencyKey: key, Fingerprint: turn.Fingerprint("chat", []byte(session+"\n"+text))},
		Content: []agent.ContentBlock{agent.Text(text)},
	}
}

// TestOutcomes runs a turn on a session that has one committed turn
// (with idempotency key "k1"), in each situation a turn can meet, and
// checks its outcome and what the store holds after it.
func TestOutcomes(t *testing.T) {
	modelDown := &agent.ModelError{Kind: agent.KindUnavailable, Message: "down"}
	tests := []struct {
		name  string
		setup func(*fakeStore, *fakeAgent)
		req   turn.Chat
		ctx   func(context.Context) (context.Context, context.CancelFunc)

		wantErr      error // nil for success
		wantText     string
		wantReplayed bool
		wantRuns     int
		wantMessages int // stored after the turn
		wantReleased int // holds released
	}{
		{name: "ok", req: chat("s1", "", "hi"), wantText: "re: hi", wantRuns: 1, wantMessages: 4},
		{name: "ok with a key", req: chat("s1", "k2", "hi"), wantText: "re: hi", wantRuns: 1, wantMessages: 4},
		{name: "new session", req: chat("", "", "hi"), wantText: "re: hi", wantRuns: 1, wantMessages: 2},
		{name: "replay", req: chat("s1", "k1", "first"), wantText: "re: first", wantReplayed: true, wantMessages: 2},
		{name: "key reused for another body", req: chat("s1", "k1", "other"), wantErr: turn.ErrKeyReused, wantMessages: 2},
		{name: "key reused on another session", req: chat("s2", "k1", "first"), wantErr: turn.ErrKeyReused, wantMessages: 2},
		{name: "key held by a running request", setup: func(s *fakeStore, _ *fakeAgent) {
			s.beginErr = &ddbhistory.KeyInUseError{Fingerprint: chat("s1", "", "hi").Fingerprint}
		}, req: chat("s1", "k2", "hi"), wantErr: turn.ErrInProgress, wantMessages: 2},
		{name: "key committed between load and hold, session deleted since", setup: func(s *fakeStore, _ *fakeAgent) {
			s.beginErr = &ddbhistory.KeyInUseError{Fingerprint: chat("s1", "", "hi").Fingerprint, Committed: true}
		}, req: chat("s1", "k2", "hi"), wantErr: turn.ErrReplayGone, wantMessages: 2},
		{name: "conflict", setup: func(s *fakeStore, _ *fakeAgent) {
			s.beforeCommit = func() { // another turn commits first
				s.mu.Lock()
				defer s.mu.Unlock()
				s.sessions[ddbhistory.Key{Owner: owner, ID: "s1"}].version++
				s.beforeCommit = nil
			}
		}, req: chat("s1", "k2", "hi"), wantErr: ddbhistory.ErrConflict, wantRuns: 1, wantMessages: 2, wantReleased: 1},
		{name: "model error", setup: func(_ *fakeStore, a *fakeAgent) { a.err = modelDown },
			req: chat("s1", "k2", "hi"), wantErr: modelDown, wantRuns: 1, wantMessages: 2, wantReleased: 1},
		{name: "timeout before the commit", setup: func(_ *fakeStore, a *fakeAgent) { a.block = make(chan struct{}) },
			ctx: func(ctx context.Context) (context.Context, context.CancelFunc) {
				return context.WithTimeout(ctx, turn.StoreMargin+50*time.Millisecond)
			},
			req: chat("s1", "k2", "hi"), wantErr: agent.ErrDeadline, wantRuns: 1, wantMessages: 2, wantReleased: 1},
		{name: "unknown outcome after the commit", setup: func(s *fakeStore, _ *fakeAgent) { s.commitErr = ddbhistory.ErrOutcomeUnknown },
			req: chat("s1", "k2", "hi"), wantErr: ddbhistory.ErrOutcomeUnknown, wantRuns: 1, wantMessages: 4},
		{name: "store down", setup: func(s *fakeStore, _ *fakeAgent) { s.loadErr = errors.New("connection refused") },
			req: chat("s1", "k2", "hi"), wantErr: errors.New("connection refused"), wantMessages: 2},
		{name: "session id of another owner", setup: func(s *fakeStore, _ *fakeAgent) {
			s.loadErr = errors.Join(ddbhistory.ErrNotFound, ddbhistory.ErrIDTaken)
		}, req: chat("taken", "", "hi"), wantErr: ddbhistory.ErrIDTaken, wantMessages: 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			store, model := newFakeStore(), &fakeAgent{}
			svc, err := turn.New(store, model)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := svc.Chat(t.Context(), chat("s1", "k1", "first")); err != nil {
				t.Fatal(err)
			}
			model.runs = 0
			if tt.setup != nil {
				tt.setup(store, model)
			}
			ctx, cancel := context.WithCancel(t.Context())
			if tt.ctx != nil {
				ctx, cancel = tt.ctx(t.Context())
			}
			defer cancel()

			out, err := svc.Chat(ctx, tt.req)
			switch {
			case tt.wantErr == nil && err != nil:
				t.Fatalf("err = %v", err)
			case tt.wantErr != nil && !errors.Is(err, tt.wantErr) && (err == nil || !strings.Contains(err.Error(), tt.wantErr.Error())):
				t.Fatalf("err = %v, want %v", err, tt.wantErr)
			case tt.wantErr != nil && out != nil:
				t.Errorf("an outcome with the error: %+v", out)
			case tt.wantErr == nil:
				if out.Answer.Text != tt.wantText || out.Replayed != tt.wantReplayed || (out.Result == nil) != tt.wantReplayed {
					t.Errorf("outcome: text %q replayed %v result %v", out.Answer.Text, out.Replayed, out.Result)
				}
				if len(out.Answer.Messages) != 2 {
					t.Errorf("the answer has %d messages, want the turn's 2", len(out.Answer.Messages))
				}
			}
			if got := model.calls(); got != tt.wantRuns {
				t.Errorf("the agent ran %d times, want %d", got, tt.wantRuns)
			}
			if st := store.sessions[ddbhistory.Key{Owner: owner, ID: "s1"}]; len(st.messages) != tt.wantMessages && tt.req.SessionID == "s1" {
				t.Errorf("session s1 holds %d messages, want %d", len(st.messages), tt.wantMessages)
			}
			// A failed turn frees its key, unless it may be stored.
			if len(store.released) != tt.wantReleased {
				t.Errorf("%d holds released, want %d", len(store.released), tt.wantReleased)
			}
			if r := store.records[recordID(owner, "k2")]; r != nil && r.hold != nil {
				t.Errorf("the key is still held after the turn")
			}
		})
	}
}

// TestCommitErrorCarriesTheCost: a turn that ran but did not commit says
// what it did, so that its tokens are logged.
func TestCommitErrorCarriesTheCost(t *testing.T) {
	store, model := newFakeStore(), &fakeAgent{}
	store.commitErr = ddbhistory.ErrThrottled
	svc, _ := turn.New(store, model)
	_, err := svc.Chat(t.Context(), chat("s1", "", "hi"))
	var ce *turn.CommitError
	if !errors.As(err, &ce) || !errors.Is(err, ddbhistory.ErrThrottled) || ce.Result.Usage.InputTokens != 10 {
		t.Errorf("err = %#v", err)
	}
}

// TestNewSessionFromAKey: a new session's id comes from the idempotency
// key, so that a retry finds the session its first attempt created, and
// replays.
func TestNewSessionFromAKey(t *testing.T) {
	store, model := newFakeStore(), &fakeAgent{}
	svc, _ := turn.New(store, model)
	first, err := svc.Chat(t.Context(), chat("", "new-1", "hi"))
	if err != nil {
		t.Fatal(err)
	}
	retry, err := svc.Chat(t.Context(), chat("", "new-1", "hi"))
	if err != nil {
		t.Fatal(err)
	}
	if !retry.Replayed || retry.Answer.SessionID != first.Answer.SessionID || model.calls() != 1 {
		t.Errorf("retry: replayed %v, session %s (first %s), %d runs", retry.Replayed, retry.Answer.SessionID, first.Answer.SessionID, model.calls())
	}
	if diff := cmp.Diff(first.Answer, retry.Answer); diff != "" {
		t.Errorf("the replay differs from the answer (-first +retry):\n%s", diff)
	}
	other, err := svc.Chat(t.Context(), turn.Chat{Request: turn.Request{Owner: "bob", IdempotencyKey: "new-1"}, Content: []agent.ContentBlock{agent.Text("hi")}})
	if err != nil || other.Answer.SessionID == first.Answer.SessionID {
		t.Errorf("another owner's key of the same name: %v, session %s", err, other.Answer.SessionID)
	}
}

// recordingSink is a Sink that notes what it gets.
type recordingSink struct {
	started string
	first   int
	events  []agent.Event
}

func (r *recordingSink) Start(id string, first int) { r.started, r.first = id, first }
func (r *recordingSink) Event(e agent.Event)        { r.events = append(r.events, e) }

// TestStreamedTurn: a streamed turn is a chat turn with a sink, replayed
// like one, and its sink hears nothing of a replay.
func TestStreamedTurn(t *testing.T) {
	store, model := newFakeStore(), &fakeAgent{}
	svc, _ := turn.New(store, model)
	sink := &recordingSink{}
	req := chat("s1", "k", "hi")
	req.Sink = sink
	out, err := svc.Chat(t.Context(), req)
	if err != nil {
		t.Fatal(err)
	}
	if sink.started != "s1" || sink.first != 0 || len(sink.events) != 1 || sink.events[0].Text != out.Answer.Text {
		t.Errorf("sink: started %q, events %+v", sink.started, sink.events)
	}
	again := &recordingSink{}
	req.Sink = again
	if out, err := svc.Chat(t.Context(), req); err != nil || !out.Replayed || again.started != "" || len(again.events) != 0 {
		t.Errorf("replay: %v %+v, sink %+v", err, out, again)
	}
	// A chat key sent as a structured turn is another request.
	if _, err := svc.Structured(t.Context(), turn.Structured{Request: turn.Request{Owner: owner, SessionID: "s1", IdempotencyKey: "k", Fingerprint: "structured"}}); !errors.Is(err, turn.ErrKeyReused) {
		t.Errorf("structured with a chat key: %v", err)
	}
}

// TestStructuredReplay: a structured answer is stored whole and replayed
// as it was.
func TestStructuredReplay(t *testing.T) {
	store, model := newFakeStore(), &fakeAgent{}
	svc, _ := turn.New(store, model)
	req := turn.Structured{
		Request: turn.Request{Owner: owner, IdempotencyKey: "k", Fingerprint: turn.Fingerprint("structured", []byte("p"))},
		Prompt:  []agent.ContentBlock{agent.Text("p")},
	}
	first, err := svc.Structured(t.Context(), req)
	if err != nil {
		t.Fatal(err)
	}
	again, err := svc.Structured(t.Context(), req)
	if err != nil || !again.Replayed {
		t.Fatalf("retry: %v %+v", err, again)
	}
	if diff := cmp.Diff(first.Answer, again.Answer); diff != "" {
		t.Errorf("replay (-first +retry):\n%s", diff)
	}
}
