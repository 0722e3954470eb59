package turn_test

import (
	"context"
	"encoding/json"
	"errors"
	"sync"

	"github.com/lambda-agent/lambda-agent/internal/agent"
	"github.com/lambda-agent/lambda-agent/internal/ddbhistory"
	"github.com/lambda-agent/lambda-agent/internal/turn"
)

// fakeStore keeps sessions in memory, with what ddbhistory promises of
// them: a version check on commit, holds on idempotency keys, and replays.
// Its fields make a call fail.
type fakeStore struct {
	mu       sync.Mutex
	sessions map[ddbhistory.Key]*stored
	records  map[string]*record // by owner + "\x00" + key

	loadErr, beginErr, commitErr error
	// beforeCommit runs as a commit starts, as another writer might.
	beforeCommit func()
	released     []*ddbhistory.Hold
}

type stored struct {
	version  int64
	messages []agent.Message
	state    map[string]json.RawMessage
	window   agent.WindowState
}

type record struct {
	fingerprint, sessionID string
	hold                   *ddbhistory.Hold // nil once committed
	response               json.RawMessage
	first, count           int
}

var _ turn.Store = (*fakeStore)(nil)

func newFakeStore() *fakeStore {
	return &fakeStore{sessions: map[ddbhistory.Key]*stored{}, records: map[string]*record{}}
}

func recordID(owner, key string) string { return owner + "\x00" + key }

func (f *fakeStore) Load(_ context.Context, key ddbhistory.Key, idemKey string) (*ddbhistory.Session, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.loadErr != nil {
		return nil, f.loadErr
	}
	st, ok := f.sessions[key]
	if !ok {
		return nil, ddbhistory.ErrNotFound
	}
	sess := ddbhistory.NewSession(key)
	sess.Version, sess.Count = st.version, len(st.messages)
	sess.Conversation = agent.Conversation{Messages: append([]agent.Message(nil), st.messages...), State: st.state, Window: st.window}
	if r := f.records[recordID(key.Owner, idemKey)]; idemKey != "" && r != nil && r.hold == nil {
		sess.Replay = &ddbhistory.Replay{Fingerprint: r.fingerprint, SessionID: r.sessionID, First: r.first, Count: r.count}
		if r.sessionID == key.ID {
			sess.Replay.Response = r.response
		}
	}
	return sess, nil
}

func (f *fakeStore) Begin(_ context.Context, sess *ddbhistory.Session, key, fp string) (*ddbhistory.Hold, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.beginErr != nil {
		return nil, f.beginErr
	}
	if r := f.records[recordID(sess.Owner, key)]; r != nil {
		return nil, &ddbhistory.KeyInUseError{Fingerprint: r.fingerprint, Committed: r.hold == nil}
	}
	h := &ddbhistory.Hold{Key: key, Fingerprint: fp}
	f.records[recordID(sess.Owner, key)] = &record{fingerprint: fp, sessionID: sess.ID, hold: h}
	return h, nil
}

func (f *fakeStore) Commit(_ context.Context, sess *ddbhistory.Session, t ddbhistory.Turn) error {
	if f.beforeCommit != nil {
		f.beforeCommit()
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.commitErr != nil && !errorsIsUnknown(f.commitErr) {
		return f.commitErr
	}
	st := f.sessions[sess.Key]
	if st == nil {
		st = &stored{}
	}
	if st.version != sess.Version {
		return ddbhistory.ErrConflict
	}
	if t.Hold != nil {
		r := f.records[recordID(sess.Owner, t.Hold.Key)]
		if r == nil || r.hold != t.Hold {
			return ddbhistory.ErrConflict
		}
		r.hold, r.response, r.first, r.count = nil, t.Response, len(st.messages), len(t.Messages)
	}
	st.version++
	if t.Rewind {
		st.messages = st.messages[:t.From]
	}
	st.messages = append(st.messages, t.Messages...)
	st.state, st.window = t.State, t.Window
	f.sessions[sess.Key] = st
	return f.commitErr // an unknown outcome that in fact landed
}

func (f *fakeStore) WindowBefore(_ context.Context, sess *ddbhistory.Session, from, to int) ([]agent.Message, int, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]agent.Message(nil), f.sessions[sess.Key].messages[from:to]...), from, nil
}

func (f *fakeStore) Release(_ context.Context, h *ddbhistory.Hold) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.released = append(f.released, h)
	for id, r := range f.records {
		if r.hold == h {
			delete(f.records, id)
		}
	}
	return nil
}

func (f *fakeStore) Transcript(_ context.Context, key ddbhistory.Key, cursor string, limit int) (*ddbhistory.Page, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	st := f.sessions[key]
	if st == nil {
		return nil, ddbhistory.ErrNotFound
	}
	from := 0
	for i := range st.messages {
		if ddbhistory.CursorAt(i) == cursor {
			from = i
		}
	}
	return &ddbhistory.Page{Messages: st.messages[from:min(from+limit, len(st.messages))]}, nil
}

// fakeAgent answers every turn with its text, or fails with err. It adds
// to the agent state, so commits can be told apart.
type fakeAgent struct {
	mu    sync.Mutex
	err   error
	runs  int
	block chan struct{} // when set, a run waits for it (or its context)
}

var _ turn.Agent = (*fakeAgent)(nil)

func (a *fakeAgent) result(ctx context.Context, conv *agent.Conversation, input []agent.ContentBlock) (*agent.Result, error) {
	a.mu.Lock()
	a.runs++
	err, block := a.err, a.block
	a.mu.Unlock()
	if block != nil {
		select {
		case <-block:
		case <-ctx.Done():
			return nil, agent.ErrDeadline
		}
	}
	if err != nil {
		return nil, err
	}
	text := "re: " + input[0].Text
	return &agent.Result{
		Messages:   []agent.Message{{Role: agent.RoleUser, Content: input}, agent.AssistantText(text)},
		Text:       text,
		StopReason: agent.StopEndTurn,
		Usage:      agent.Usage{InputTokens: 10, OutputTokens: 2},
		Window:     conv.Window,
		State:      map[string]json.RawMessage{"turns": json.RawMessage(`1`)},
	}, nil
}

func (a *fakeAgent) Run(ctx context.Context, conv *agent.Conversation, input []agent.ContentBlock) (*agent.Result, error) {
	return a.result(ctx, conv, input)
}

func (a *fakeAgent) Stream(ctx context.Context, conv *agent.Conversation, input []agent.ContentBlock, emit func(agent.Event)) (*agent.Result, error) {
	res, err := a.result(ctx, conv, input)
	if err == nil {
		emit(agent.Event{Text: res.Text})
	}
	return res, err
}

func (a *fakeAgent) Structured(ctx context.Context, conv *agent.Conversation, req agent.StructuredRequest) (*agent.StructuredResult, error) {
	res, err := a.result(ctx, conv, req.Prompt)
	if err != nil {
		return nil, err
	}
	return &agent.StructuredResult{Result: *res, Data: json.RawMessage(`{"ok":true}`), Attempts: 1}, nil
}

func (a *fakeAgent) calls() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.runs
}

// ClaimPending bumps the session's version, as the store's claim does; the
// fake keeps no pending interrupts, so the tests here never resume.
func (f *fakeStore) ClaimPending(_ context.Context, sess *ddbhistory.Session) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	st := f.sessions[sess.Key]
	if st == nil || st.version != sess.Version {
		return ddbhistory.ErrConflict
	}
	st.version++
	sess.Version++
	return nil
}

func (a *fakeAgent) Answer(context.Context, *agent.Conversation, []agent.Response, func(agent.Event)) (*agent.Result, error) {
	return nil, agent.ErrNothingPending
}

func (a *fakeAgent) Continue(ctx context.Context, conv *agent.Conversation, _ func(agent.Event)) (*agent.Result, error) {
	return a.result(ctx, conv, []agent.ContentBlock{agent.Text("continue")})
}

func (f *fakeStore) ReleaseClaim(context.Context, *ddbhistory.Session) error { return nil }

func (a *fakeAgent) CallTool(ctx context.Context, conv *agent.Conversation, call agent.DirectCall) (*agent.DirectResult, error) {
	res, err := a.result(ctx, conv, []agent.ContentBlock{agent.Text("call " + call.Name)})
	if err != nil {
		return nil, err
	}
	use := &agent.ToolUseBlock{ToolUseID: "direct_1", Name: call.Name, Input: call.Input}
	return &agent.DirectResult{Result: *res, Use: use, Output: agent.TextResult(use.ToolUseID, agent.ToolSuccess, "done")}, nil
}

func (f *fakeStore) List(context.Context, string, string, int) (*ddbhistory.SessionList, error) {
	return nil, errors.New("fakeStore: List is not kept")
}

func (f *fakeStore) Delete(context.Context, ddbhistory.Key) error {
	return errors.New("fakeStore: Delete is not kept")
}

func (f *fakeStore) Stage(context.Context, ddbhistory.Key, string, int, []agent.Message, json.RawMessage) (*ddbhistory.Staging, error) {
	return nil, errors.New("fakeStore: Stage is not kept")
}

func (f *fakeStore) Staged(context.Context, ddbhistory.Key, string) (*ddbhistory.Staging, error) {
	return nil, errors.New("fakeStore: Staged is not kept")
}
