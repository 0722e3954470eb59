package app

import (
	"context"
	"encoding/json"
	"errors"

	"github.com/lambda-agent/lambda-agent/internal/agent"
	"github.com/lambda-agent/lambda-agent/internal/ddbhistory"
	"github.com/lambda-agent/lambda-agent/internal/telemetry"
	"github.com/lambda-agent/lambda-agent/internal/turn"
)

// tracedStore is the session store with each of its requests a span of
// its own (telemetry.Tracing.StoreSpan): session.load, session.begin,
// session.commit and the rest. The wiring decorates the store this way
// when tracing is on; the service sees the same turn.Store.
type tracedStore struct {
	tracing *telemetry.Tracing
	store   turn.Store
	table   string
}

var _ turn.Store = (*tracedStore)(nil)

// traceStore returns store, whose requests tracing traces when it is on.
func traceStore(tracing *telemetry.Tracing, store turn.Store, table string) turn.Store {
	if !tracing.On() {
		return store
	}
	return &tracedStore{tracing: tracing, store: store, table: table}
}

func (s *tracedStore) span(ctx context.Context, name, id string, call func(context.Context) error) error {
	return s.tracing.StoreSpan(ctx, name, id, s.table, -1, call)
}

// Load's span is no failure when the session does not exist: that is how
// every new session starts.
func (s *tracedStore) Load(ctx context.Context, key ddbhistory.Key, idempotencyKey string) (*ddbhistory.Session, error) {
	var sess *ddbhistory.Session
	var loadErr error
	_ = s.span(ctx, "session.load", key.ID, func(ctx context.Context) error {
		sess, loadErr = s.store.Load(ctx, key, idempotencyKey)
		if errors.Is(loadErr, ddbhistory.ErrNotFound) && !errors.Is(loadErr, ddbhistory.ErrIDTaken) {
			telemetry.MarkNewSession(ctx)
			return nil
		}
		return loadErr
	})
	return sess, loadErr
}

func (s *tracedStore) Begin(ctx context.Context, sess *ddbhistory.Session, idempotencyKey, fingerprint string) (h *ddbhistory.Hold, err error) {
	err = s.span(ctx, "session.begin", sess.ID, func(ctx context.Context) error {
		h, err = s.store.Begin(ctx, sess, idempotencyKey, fingerprint)
		return err
	})
	return h, err
}

func (s *tracedStore) Commit(ctx context.Context, sess *ddbhistory.Session, t ddbhistory.Turn) error {
	return s.tracing.StoreSpan(ctx, "session.commit", sess.ID, s.table, len(t.Messages), func(ctx context.Context) error {
		return s.store.Commit(ctx, sess, t)
	})
}

func (s *tracedStore) LoadAgent(ctx context.Context, sess *ddbhistory.Session, name string) (c *ddbhistory.AgentConversation, err error) {
	err = s.span(ctx, "session.load_agent", sess.ID, func(ctx context.Context) error {
		c, err = s.store.LoadAgent(ctx, sess, name)
		return err
	})
	return c, err
}

func (s *tracedStore) Release(ctx context.Context, h *ddbhistory.Hold) error {
	return s.span(ctx, "session.release", "", func(ctx context.Context) error { return s.store.Release(ctx, h) })
}

func (s *tracedStore) ClaimPending(ctx context.Context, sess *ddbhistory.Session) error {
	return s.span(ctx, "session.claim", sess.ID, func(ctx context.Context) error { return s.store.ClaimPending(ctx, sess) })
}

func (s *tracedStore) ReleaseClaim(ctx context.Context, sess *ddbhistory.Session) error {
	return s.span(ctx, "session.release_claim", sess.ID, func(ctx context.Context) error { return s.store.ReleaseClaim(ctx, sess) })
}

func (s *tracedStore) Transcript(ctx context.Context, key ddbhistory.Key, cursor string, limit int) (p *ddbhistory.Page, err error) {
	err = s.span(ctx, "session.transcript", key.ID, func(ctx context.Context) error {
		p, err = s.store.Transcript(ctx, key, cursor, limit)
		return err
	})
	return p, err
}

func (s *tracedStore) AgentTranscript(ctx context.Context, key ddbhistory.Key, name, cursor string, limit int) (p *ddbhistory.Page, err error) {
	err = s.span(ctx, "session.agent_transcript", key.ID, func(ctx context.Context) error {
		p, err = s.store.AgentTranscript(ctx, key, name, cursor, limit)
		return err
	})
	return p, err
}

func (s *tracedStore) Tail(ctx context.Context, key ddbhistory.Key, n int) (p *ddbhistory.Page, err error) {
	err = s.span(ctx, "session.tail", key.ID, func(ctx context.Context) error {
		p, err = s.store.Tail(ctx, key, n)
		return err
	})
	return p, err
}

func (s *tracedStore) WindowBefore(ctx context.Context, sess *ddbhistory.Session, from, to int) (msgs []agent.Message, start int, err error) {
	err = s.span(ctx, "session.window", sess.ID, func(ctx context.Context) error {
		msgs, start, err = s.store.WindowBefore(ctx, sess, from, to)
		return err
	})
	return msgs, start, err
}

func (s *tracedStore) List(ctx context.Context, owner, cursor string, limit int) (l *ddbhistory.SessionList, err error) {
	err = s.span(ctx, "session.list", "", func(ctx context.Context) error {
		l, err = s.store.List(ctx, owner, cursor, limit)
		return err
	})
	return l, err
}

func (s *tracedStore) Delete(ctx context.Context, key ddbhistory.Key) error {
	return s.span(ctx, "session.delete", key.ID, func(ctx context.Context) error { return s.store.Delete(ctx, key) })
}

func (s *tracedStore) Stage(ctx context.Context, key ddbhistory.Key, token string, first int, msgs []agent.Message, header json.RawMessage) (st *ddbhistory.Staging, err error) {
	err = s.span(ctx, "session.stage", key.ID, func(ctx context.Context) error {
		st, err = s.store.Stage(ctx, key, token, first, msgs, header)
		return err
	})
	return st, err
}

func (s *tracedStore) Staged(ctx context.Context, key ddbhistory.Key, token string) (st *ddbhistory.Staging, err error) {
	err = s.span(ctx, "session.staged", key.ID, func(ctx context.Context) error {
		st, err = s.store.Staged(ctx, key, token)
		return err
	})
	return st, err
}

func (s *tracedStore) StageAgent(ctx context.Context, key ddbhistory.Key, token, name string, first int, msgs []agent.Message) error {
	return s.span(ctx, "session.stage_agent", key.ID, func(ctx context.Context) error {
		return s.store.StageAgent(ctx, key, token, name, first, msgs)
	})
}
