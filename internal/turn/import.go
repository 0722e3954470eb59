package turn

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/lambda-agent/lambda-agent/internal/agent"
	"github.com/lambda-agent/lambda-agent/internal/ddbhistory"
)

// Errors of an import.
var (
	// ErrSessionExists is an import under a session id that is in use:
	// the caller's session, or another owner's. An import never
	// overwrites one. The error is a *SessionExistsError.
	ErrSessionExists = errors.New("the session id is in use")
	// ErrImportNotFound is a page for an import in pages that is not
	// under way: complete, replaced by a later import under the same id,
	// or expired.
	ErrImportNotFound = errors.New("no import is under way with this token")
	// ErrKeyOnPagedImport is an idempotency key on an import in pages,
	// whose pages are retried one by one instead.
	ErrKeyOnPagedImport = errors.New("an import in pages takes no idempotency key")
)

// SessionExistsError names the session id in use; it matches
// ErrSessionExists, whoever holds the id.
type SessionExistsError struct {
	ID  string
	Err error
}

func (e *SessionExistsError) Error() string {
	return fmt.Sprintf("%v: %q: %v", ErrSessionExists, e.ID, e.Err)
}

// Is makes errors.Is(err, ErrSessionExists) true.
func (e *SessionExistsError) Is(target error) bool { return target == ErrSessionExists }

func (e *SessionExistsError) Unwrap() error { return e.Err }

// Import is an import of a session document: whole, or the first page of
// an import in pages (Document.NextCursor set), whose later pages
// ImportPage takes. Request.SessionID is the id to create the session
// under; empty, the id comes from the idempotency key, so that a retry
// finds what its first attempt created, or is random.
type Import struct {
	Request
	Document *Document
}

// ImportPage is a later page of an import in pages: Token is the
// ImportToken of the first page's answer. Its Request names the owner and
// the session; it takes no idempotency key, since a page is retried by
// sending it again.
type ImportPage struct {
	Request
	Token string
	Page  *DocumentPage
}

// ImportAnswer is what an import request came to. A complete import has
// only its session and its count of messages, as the store keeps it for
// replays; a page of an import in pages that is not its last also has the
// token its next pages carry and how many of its messages are in.
type ImportAnswer struct {
	SessionID    string `json:"session_id"`
	ImportToken  string `json:"import_token,omitempty"`
	Received     int    `json:"received,omitempty"`
	MessageCount int    `json:"message_count"`
}

// Complete reports whether the import is done: the session exists, whole.
func (a ImportAnswer) Complete() bool { return a.ImportToken == "" }

// Import checks a session document strictly, with the service's limits,
// and imports it: a *DocumentError says what is wrong, by its place in the
// document, and nothing is written. A whole document is committed as a new
// session with the idempotency of Chat (a retry with the key answers the
// first import again), in one commit, in parts if it is large, which
// readers see all of or none. The first page of an import in pages is
// staged where no reader looks. An id in use, whoever's, is a
// *SessionExistsError.
func (s *Service) Import(ctx context.Context, im Import) (*Outcome[ImportAnswer], error) {
	d := im.Document
	state, err := s.docs.document(d)
	if err != nil {
		return nil, err
	}
	if d.NextCursor == "" {
		return s.importTurn(ctx, im.Request, importData{msgs: d.Messages, window: d.Window, state: state, pending: d.Pending})
	}
	if im.IdempotencyKey != "" {
		return nil, ErrKeyOnPagedImport
	}
	// A paged import takes no idempotency key: a new id is random.
	key := ddbhistory.Key{Owner: im.Owner, ID: cmp.Or(im.SessionID, NewSessionID())}
	header := *d
	header.Messages, header.NextCursor = nil, ""
	raw, err := json.Marshal(header)
	if err != nil {
		return nil, fmt.Errorf("turn: encode an import's header: %w", err)
	}
	storeCtx, cancel := StoreContext(ctx)
	defer cancel()
	st, err := s.store.Stage(storeCtx, key, strings.ToLower(rand.Text()), 0, d.Messages, raw)
	if errors.Is(err, ddbhistory.ErrConflict) || errors.Is(err, ddbhistory.ErrIDTaken) {
		return nil, &SessionExistsError{ID: key.ID, Err: err}
	}
	if err != nil {
		return nil, err
	}
	return progress(key.ID, st, d.MessageCount), nil
}

// ImportPage takes a later page of an import in pages: it stages the page,
// or, with the last, commits the session, which appears whole. A page's
// first must be where the import stands; the one exception is the page
// sent last, sent again because its answer was lost, which reaches the
// import's end with the message stored there and is not stored twice.
// Any other first is a *DocumentError that names it. A token that names
// no import under way is ErrImportNotFound.
func (s *Service) ImportPage(ctx context.Context, ip ImportPage) (*Outcome[ImportAnswer], error) {
	if ip.IdempotencyKey != "" {
		return nil, ErrKeyOnPagedImport
	}
	page := ip.Page
	if err := s.docs.page(page); err != nil {
		return nil, err
	}
	key := ddbhistory.Key{Owner: ip.Owner, ID: ip.SessionID}
	storeCtx, cancel := StoreContext(ctx)
	defer cancel()
	st, err := s.store.Staged(storeCtx, key, ip.Token)
	if errors.Is(err, ddbhistory.ErrNotFound) {
		return nil, fmt.Errorf("%w: %w", ErrImportNotFound, err)
	}
	if err != nil {
		return nil, err
	}
	var d Document
	if err := json.Unmarshal(st.Header, &d); err != nil {
		return nil, fmt.Errorf("turn: decode a staged import's header: %w", err)
	}
	first, msgs := *page.First, page.Messages
	switch {
	case first < 0:
		return nil, invalidDocument("first is %d; a page's first is the index of its first message, from 0, and the import stands at %d", first, st.Count)
	case first > st.Count:
		return nil, invalidDocument("first is %d, but the import holds %d messages: send the page that starts at %d", first, st.Count, st.Count)
	case first < st.Count && (first+len(msgs) < st.Count || st.Last == nil || !sameMessage(msgs[st.Count-1-first], *st.Last)):
		// A page sent again is the one that reached the import's end, as
		// it was sent: its message where the import ends is the last
		// stored.
		return nil, invalidDocument("first is %d, but the import stands at %d, and the page is not the one sent last, sent again: send the page that starts at %d", first, st.Count, st.Count)
	case first+len(msgs) == st.Count:
		return progress(key.ID, st, d.MessageCount), nil // sent before, and stored then
	}
	// A page sent again after part of it was stored goes on from there.
	msgs = msgs[st.Count-first:]
	first = st.Count
	end := first + len(msgs)
	if err := checkPart(&d, st.Last, first, msgs); err != nil {
		return nil, err
	}
	switch {
	case end > d.MessageCount:
		return nil, invalidDocument("the pages hold %d messages or more, but message_count is %d", end, d.MessageCount)
	case end < d.MessageCount && page.NextCursor == "":
		return nil, invalidDocument("the page has no next_cursor, so it is the last, but the import holds %d messages of message_count %d", end, d.MessageCount)
	case end < d.MessageCount:
		st, err := s.store.Stage(storeCtx, key, ip.Token, first, msgs, nil)
		if err != nil {
			return nil, err
		}
		return progress(key.ID, st, d.MessageCount), nil
	}
	if err := checkDocumentPending(d.Pending, msgs, end); err != nil {
		return nil, err
	}
	state, err := s.docs.state(d.State)
	if err != nil {
		return nil, err
	}
	return s.importTurn(ctx, Request{Owner: key.Owner, SessionID: key.ID},
		importData{msgs: msgs, window: d.Window, state: state, pending: d.Pending, staging: st})
}

// progress is the answer to a page of an import that is not its last.
func progress(id string, st *ddbhistory.Staging, count int) *Outcome[ImportAnswer] {
	return &Outcome[ImportAnswer]{Answer: ImportAnswer{SessionID: id, ImportToken: st.Token, Received: st.Count, MessageCount: count}}
}

// importData is what an import commits: messages, and the state beside
// them. staging, for the last page of an import in pages, holds the pages
// before it (see ddbhistory.Stage).
type importData struct {
	msgs    []agent.Message
	window  agent.WindowState
	state   map[string]json.RawMessage
	pending *agent.Pending
	staging *ddbhistory.Staging
}

// importTurn commits a checked import as a new session, with the
// idempotency of Chat.
func (s *Service) importTurn(ctx context.Context, req Request, im importData) (*Outcome[ImportAnswer], error) {
	req.SessionID = sessionID(req)
	out, err := run(ctx, s, req, job[ImportAnswer]{
		run: func(_, _ context.Context, sess *ddbhistory.Session) (*done[ImportAnswer], error) {
			if sess.Version != 0 {
				return nil, &SessionExistsError{ID: sess.ID, Err: ddbhistory.ErrConflict}
			}
			count := len(im.msgs)
			if im.staging != nil {
				count += im.staging.Count
			}
			return &done[ImportAnswer]{
				Result:  &agent.Result{Messages: im.msgs, Window: im.window, State: im.state, Pending: im.pending},
				Answer:  ImportAnswer{SessionID: sess.ID, MessageCount: count},
				Staging: im.staging,
			}, nil
		},
		stored: whole[ImportAnswer],
		replay: storedAnswer[ImportAnswer],
	})
	var commit *CommitError
	switch {
	case errors.Is(err, ErrSessionExists):
	case errors.Is(err, ddbhistory.ErrIDTaken),
		errors.As(err, &commit) && (errors.Is(err, ddbhistory.ErrConflict) || errors.Is(err, ddbhistory.ErrNotFound)):
		// Another owner's id, or a session created since the load: to the
		// caller, an id in use either way.
		return nil, &SessionExistsError{ID: req.SessionID, Err: err}
	}
	return out, err
}
