package turn

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/lambda-agent/lambda-agent/internal/audit"
	"github.com/lambda-agent/lambda-agent/internal/ddbhistory"
)

// AuditStore is what the audit record needs of the store.
// *ddbhistory.Store implements it, with its errors; it must be safe for
// concurrent use.
type AuditStore interface {
	PutAudit(ctx context.Context, sess *ddbhistory.Session, turn string, t ddbhistory.AuditTurn, ttl time.Duration) ([]string, error)
	Audit(ctx context.Context, key ddbhistory.Key, cursor string, limit, budget int) (*ddbhistory.AuditPage, error)
	AuditRecordOf(ctx context.Context, key ddbhistory.Key, id string) (*ddbhistory.AuditRecord, error)
	PruneAudit(ctx context.Context, sess *ddbhistory.Session) error
}

var _ AuditStore = (*ddbhistory.Store)(nil)

// AuditConfig turns the audit record on: every model call of every turn
// is kept, as sent and as answered (internal/audit), for TTL.
type AuditConfig struct {
	Store AuditStore
	// TTL is how long a record is kept; 0 means DefaultAuditTTL.
	TTL time.Duration
	// Written, when set, is told of each turn's records once they are
	// written, or failed to be: a failure is never the turn's.
	Written func(ctx context.Context, w AuditWrite)
}

// DefaultAuditTTL is how long records are kept unless configured.
const DefaultAuditTTL = 30 * 24 * time.Hour

// auditTimeout bounds the writes of one turn's records, which run after
// the turn's commit, before its answer.
const auditTimeout = time.Second

// AuditWrite is what became of a turn's records.
type AuditWrite struct {
	SessionID string
	// Records and Bytes count the records and their JSON.
	Records, Bytes int
	Duration       time.Duration
	// Err is why they were not stored; nil when they were.
	Err error
}

// WithAudit turns the audit record on.
func WithAudit(c AuditConfig) Option {
	return func(s *Service) {
		if c.TTL <= 0 {
			c.TTL = DefaultAuditTTL
		}
		s.audit = &c
	}
}

// ErrAuditOff is a read of the audit record of a service that keeps none.
var ErrAuditOff = errors.New("the audit record is off")

// auditTurn is what run knows of a turn, for its records.
type auditTurn struct {
	log *audit.Log
	// base is the session's version when the turn loaded it, and at the
	// index its first message takes, or would have taken.
	base int64
	at   int
	turn string
}

// startAudit gives ctx a log for the turn's model calls, when the audit
// record is on.
func (s *Service) startAudit(ctx context.Context) (context.Context, *auditTurn) {
	if s.audit == nil {
		return ctx, nil
	}
	a := &auditTurn{log: &audit.Log{}, turn: ddbhistory.NewAuditTurn(time.Now())}
	return audit.With(ctx, a.log), a
}

// saveAudit stores the records of a turn that ran on sess: committed when
// res is set and sess has moved on, or not, and prunes what a rewinding
// commit discarded. It runs on a context of its own, bounded by
// auditTimeout and by ctx's deadline, so that neither the caller's end nor
// a slow store makes the turn fail or wait long; a failure goes to
// AuditConfig.Written only.
func (s *Service) saveAudit(ctx context.Context, sess *ddbhistory.Session, a *auditTurn, out *outcomeOf, rewound bool) {
	if a == nil {
		return
	}
	records := a.log.Records()
	if sess.Version == 0 || (len(records) == 0 && !rewound) {
		return // a new session that stored nothing has no place for them
	}
	started := time.Now()
	wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), auditTimeout)
	defer cancel()
	if d, ok := ctx.Deadline(); ok {
		var cancel2 context.CancelFunc
		wctx, cancel2 = context.WithDeadline(wctx, d)
		defer cancel2()
	}
	w := AuditWrite{SessionID: sess.ID, Records: len(records)}
	t := ddbhistory.AuditTurn{At: a.at, Base: a.base}
	if out != nil {
		t.At, t.Committed = out.first, sess.Version
		if r := out.redacted; r != nil {
			a.log.Redact(r.Input, r.Text)
			records = a.log.Records()
		}
	}
	var errs []error
	if rewound {
		errs = append(errs, s.audit.Store.PruneAudit(wctx, sess))
	}
	for _, r := range records {
		raw, err := json.Marshal(r)
		if err != nil {
			errs = append(errs, fmt.Errorf("turn: encode an audit record: %w", err))
			continue
		}
		w.Bytes += len(raw)
		t.Records = append(t.Records, raw)
	}
	if len(t.Records) > ddbhistory.MaxAuditCalls {
		t.Records = t.Records[:ddbhistory.MaxAuditCalls]
	}
	if len(t.Records) > 0 {
		_, err := s.audit.Store.PutAudit(wctx, sess, a.turn, t, s.audit.TTL)
		errs = append(errs, err)
	}
	w.Err = errors.Join(errs...)
	w.Duration = time.Since(started)
	if s.audit.Written != nil {
		s.audit.Written(ctx, w)
	}
}

// AuditPage is a page of a session's audit record.
type AuditPage = ddbhistory.AuditPage

// Audit reads a page of the audit record of a session of owner's: limit
// records at most, with their JSON while it totals budget bytes (0: no
// bound). It returns ErrAuditOff when the service keeps no audit record.
func (s *Service) Audit(ctx context.Context, owner, id, cursor string, limit, budget int) (*AuditPage, error) {
	if s.audit == nil {
		return nil, ErrAuditOff
	}
	ctx, cancel := StoreContext(ctx)
	defer cancel()
	return s.audit.Store.Audit(ctx, ddbhistory.Key{Owner: owner, ID: id}, cursor, limit, budget)
}

// AuditRecord reads one record of a session of owner's, whole.
func (s *Service) AuditRecord(ctx context.Context, owner, id, record string) (*ddbhistory.AuditRecord, error) {
	if s.audit == nil {
		return nil, ErrAuditOff
	}
	ctx, cancel := StoreContext(ctx)
	defer cancel()
	return s.audit.Store.AuditRecordOf(ctx, ddbhistory.Key{Owner: owner, ID: id}, record)
}
