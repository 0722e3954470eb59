package turn

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
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
// readers see all of or none, its sub-agents' conversations with it. The
// first page of an import in pages is staged where no reader looks. An id
// in use, whoever's, is a *SessionExistsError.
func (s *Service) Import(ctx context.Context, im Import) (*Outcome[ImportAnswer], error) {
	d := im.Document
	state, agentStates, err := s.docs.document(d, s.subAgents())
	if err != nil {
		return nil, err
	}
	if d.NextCursor == "" {
		var agents []agent.AgentTurn
		for _, name := range slices.Sorted(maps.Keys(d.Agents)) {
			a := d.Agents[name]
			agents = append(agents, agent.AgentTurn{Name: name, Messages: a.Messages, Window: a.Window, State: agentStates[name]})
		}
		return s.importTurn(ctx, im.Request, importData{msgs: d.Messages, window: d.Window, state: state, pending: d.Pending, agents: agents})
	}
	if im.IdempotencyKey != "" {
		return nil, ErrKeyOnPagedImport
	}
	// A paged import takes no idempotency key: a new id is random.
	key := ddbhistory.Key{Owner: im.Owner, ID: cmp.Or(im.SessionID, NewSessionID())}
	header := *d
	header.Messages, header.NextCursor, header.Agents = nil, "", nil
	for name, a := range d.Agents {
		if header.Agents == nil {
			header.Agents = map[string]*AgentDocument{}
		}
		h := *a
		h.Messages = nil
		header.Agents[name] = &h
	}
	raw, err := json.Marshal(header)
	if err != nil {
		return nil, fmt.Errorf("turn: encode an import's header: %w", err)
	}
	storeCtx, cancel := StoreContext(ctx)
	defer cancel()
	token := strings.ToLower(rand.Text())
	st, err := s.store.Stage(storeCtx, key, token, 0, d.Messages, raw)
	var tooLarge *TooLargeError
	switch {
	case errors.Is(err, ddbhistory.ErrConflict) || errors.Is(err, ddbhistory.ErrIDTaken):
		return nil, &SessionExistsError{ID: key.ID, Err: err}
	case errors.As(err, &tooLarge):
		return nil, documentTooLarge("the headers of the session and of its agents (their windows, states and pending interrupts) take %d bytes, compressed, which an import in pages keeps in one item of at most %d until its last page: import fewer agents, or smaller states", tooLarge.Size, tooLarge.Limit)
	case err != nil:
		return nil, err
	}
	for _, name := range slices.Sorted(maps.Keys(d.Agents)) {
		if msgs := d.Agents[name].Messages; len(msgs) > 0 {
			if err := s.store.StageAgent(storeCtx, key, token, name, 0, msgs); err != nil {
				return nil, err
			}
		}
	}
	return progress(key.ID, st.Token, st.Count, d.MessageCount), nil
}

// ImportPage takes a later page of an import in pages: it stages the page,
// or, with the last, commits the session, which appears whole. Each of
// its conversations' messages, the main agent's and each sub-agent's, must
// start where the import stands in that conversation; the one exception
// is the page sent last, sent again because its answer was lost, whose
// messages reach where the import stands with the message stored there,
// and are not stored twice. Any other first is a *DocumentError that
// names it. A token that names no import under way is ErrImportNotFound.
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

	// What of the page is not stored yet, conversation by conversation.
	var msgs []agent.Message
	if page.First != nil && len(page.Messages) > 0 {
		if msgs, err = follow("", *page.First, page.Messages, st.Count, st.Last); err != nil {
			return nil, err
		}
	}
	parts := map[string][]agent.Message{}
	for _, name := range slices.Sorted(maps.Keys(page.Agents)) {
		if d.Agents[name] == nil {
			return nil, invalidDocument("agents.%s is not among the agents of the document's first page, whose messages a page continues", name)
		}
		p, staged := page.Agents[name], st.Agents[name]
		if parts[name], err = follow("agents."+name+".", *p.First, p.Messages, staged.Count, staged.Last); err != nil {
			return nil, err
		}
	}
	sentBefore := len(msgs) == 0
	for _, part := range parts {
		sentBefore = sentBefore && len(part) == 0
	}
	if sentBefore {
		return progress(key.ID, st.Token, st.Count, d.MessageCount), nil // and stored then
	}

	// Each part follows its conversation, within its count.
	end := st.Count + len(msgs)
	if err := checkPart(d.Window, st.Last, st.Count, msgs); err != nil {
		return nil, err
	}
	if end > d.MessageCount {
		return nil, invalidDocument("the pages hold %d messages or more, but message_count is %d", end, d.MessageCount)
	}
	complete, missing := end == d.MessageCount, ""
	if !complete {
		missing = fmt.Sprintf("the import holds %d messages of message_count %d", end, d.MessageCount)
	}
	for _, name := range slices.Sorted(maps.Keys(d.Agents)) {
		a, staged, part := d.Agents[name], st.Agents[name], parts[name]
		at := "agents." + name
		if err := checkPart(a.Window, staged.Last, staged.Count, part); err != nil {
			return nil, placed(at, err)
		}
		switch n := staged.Count + len(part); {
		case n > a.MessageCount:
			return nil, invalidDocument("the pages hold %d messages of %s or more, but its message_count is %d", n, at, a.MessageCount)
		case n < a.MessageCount && complete:
			complete, missing = false, fmt.Sprintf("the import holds %d messages of %s, whose message_count is %d", n, at, a.MessageCount)
		}
	}
	switch {
	case !complete && page.NextCursor == "":
		return nil, invalidDocument("the page has no next_cursor, so it is the last, but %s", missing)
	case !complete:
		count := st.Count
		if len(msgs) > 0 {
			staged, err := s.store.Stage(storeCtx, key, ip.Token, st.Count, msgs, nil)
			if err != nil {
				return nil, err
			}
			count = staged.Count
		}
		for _, name := range slices.Sorted(maps.Keys(parts)) {
			if part := parts[name]; len(part) > 0 {
				if err := s.store.StageAgent(storeCtx, key, ip.Token, name, st.Agents[name].Count, part); err != nil {
					return nil, err
				}
			}
		}
		return progress(key.ID, st.Token, count, d.MessageCount), nil
	}

	// The last page: the session's last message is this page's, or the
	// last staged.
	last := msgs
	if len(last) == 0 {
		last = []agent.Message{*st.Last}
	}
	if err := checkDocumentPending(d.Pending, last, end); err != nil {
		return nil, err
	}
	state, err := s.docs.state(d.State)
	if err != nil {
		return nil, err
	}
	var agents []agent.AgentTurn
	for _, name := range slices.Sorted(maps.Keys(d.Agents)) {
		a := d.Agents[name]
		state, err := s.docs.state(a.State)
		if err != nil {
			return nil, placed("agents."+name, err)
		}
		agents = append(agents, agent.AgentTurn{Name: name, First: st.Agents[name].Count, Messages: parts[name], Window: a.Window, State: state})
	}
	return s.importTurn(ctx, Request{Owner: key.Owner, SessionID: key.ID},
		importData{msgs: msgs, window: d.Window, state: state, pending: d.Pending, staging: st, agents: agents})
}

// follow returns what of a page's messages of a conversation, first and
// on, the import does not hold yet: it holds count of them, the last of
// them last. place names the conversation's first in errors. A page sent
// again is the one that reached the import's end, as it was sent: its
// message where the import ends is the last stored.
func follow(place string, first int, msgs []agent.Message, count int, last *agent.Message) ([]agent.Message, error) {
	switch {
	case first < 0:
		return nil, invalidDocument("%sfirst is %d; a page's first is the index of its first message, from 0, and the import stands at %d", place, first, count)
	case first > count:
		return nil, invalidDocument("%sfirst is %d, but the import holds %d messages: send the page that starts at %d", place, first, count, count)
	case first < count && (first+len(msgs) < count || last == nil || !sameMessage(msgs[count-1-first], *last)):
		return nil, invalidDocument("%sfirst is %d, but the import stands at %d, and the page is not the one sent last, sent again: send the page that starts at %d", place, first, count, count)
	}
	return msgs[count-first:], nil
}

// progress is the answer to a page of an import that is not its last:
// where the import of the session's messages stands.
func progress(id, token string, received, count int) *Outcome[ImportAnswer] {
	return &Outcome[ImportAnswer]{Answer: ImportAnswer{SessionID: id, ImportToken: token, Received: received, MessageCount: count}}
}

// importData is what an import commits: messages, the state beside
// them, and the sub-agents' conversations. staging, for the last page of
// an import in pages, holds the pages before it (see ddbhistory.Stage).
type importData struct {
	msgs    []agent.Message
	window  agent.WindowState
	state   map[string]json.RawMessage
	pending *agent.Pending
	staging *ddbhistory.Staging
	agents  []agent.AgentTurn
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
				Result:  &agent.Result{Messages: im.msgs, Window: im.window, State: im.state, Pending: im.pending, Agents: im.agents},
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
