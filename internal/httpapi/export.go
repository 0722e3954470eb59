package httpapi

import (
	"bytes"
	"cmp"
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/lambda-agent/lambda-agent/internal/agent"
	"github.com/lambda-agent/lambda-agent/internal/ddbhistory"
	"github.com/lambda-agent/lambda-agent/internal/turn"
)

// A session document is a whole session as one self-describing JSON
// document: GET /sessions/{sessionId}/export writes it, and POST
// /sessions/import creates a session from it, for the caller, whoever
// exported it. A session longer than one response is exported in pages
// (see SessionDocument.NextCursor), whose messages the client concatenates
// into one document to import. Import checks the document strictly before
// anything is written, and never overwrites a session.

// The format a session document declares.
const (
	DocumentFormat  = "lambda-agent/session"
	DocumentVersion = 1
)

// SessionDocument is a session, whole: the answer to GET
// /sessions/{sessionId}/export, and the body of POST /sessions/import.
type SessionDocument struct {
	Format        string `json:"format"`
	FormatVersion int    `json:"format_version"`
	// SessionID is the exported session's id. Import does not reuse it:
	// see ImportRequest.NewSessionID.
	SessionID string `json:"session_id"`
	// Title, CreatedAt, UpdatedAt and ExpiresAt describe the exported
	// session. Import ignores them: the imported session gets its own, and
	// its title from its first message, as every session does.
	Title     string     `json:"title"`
	CreatedAt time.Time  `json:"created_at"`
	UpdatedAt time.Time  `json:"updated_at"`
	ExpiresAt *time.Time `json:"expires_at,omitempty"`
	// MessageCount is how many messages the session holds: the length of
	// Messages once every page is in.
	MessageCount int `json:"message_count"`
	// State is the agent state.
	State map[string]json.RawMessage `json:"state"`
	// Window is the conversation manager's state: the messages before
	// Removed are outside the window, and Summary stands for them.
	Window agent.WindowState `json:"window"`
	// Pending is what the session's last turn waits for; null for nothing.
	Pending *agent.Pending `json:"pending"`
	// NextCursor, on an export, continues Messages: GET
	// /sessions/{sessionId}/export?cursor=... returns the next page. A
	// document to import carries none.
	NextCursor string `json:"next_cursor,omitempty"`
	// Messages is the whole transcript, oldest first, as GET
	// /sessions/{sessionId} returns it. It comes last, after the
	// session's header.
	Messages []agent.Message `json:"messages"`
}

// SessionDocumentPage continues an exported SessionDocument: more of its
// messages, and the cursor of the next page, if any.
type SessionDocumentPage struct {
	Format        string `json:"format"`
	FormatVersion int    `json:"format_version"`
	SessionID     string `json:"session_id"`
	// First is the index of the page's first message.
	First      *int            `json:"first"`
	NextCursor string          `json:"next_cursor,omitempty"`
	Messages   []agent.Message `json:"messages"`
}

// ImportRequest is the body of POST /sessions/import: a session document,
// whole, and the id of the session to create.
type ImportRequest struct {
	SessionDocument
	// NewSessionID is the id to create the session under. Absent, the
	// session gets a new id: derived from the Idempotency-Key when there is
	// one, so that a retry finds the session its first attempt created,
	// else random.
	NewSessionID *string `json:"new_session_id,omitempty"`
}

// ImportResponse is the answer to POST /sessions/import, a 201.
type ImportResponse struct {
	SessionID    string `json:"session_id"`
	MessageCount int    `json:"message_count"`
}

// MaxImportBytes bounds the body of POST /sessions/import: what a Lambda
// request (6 MB, with its event around the body) can carry. A session
// larger than this cannot be imported in one request.
const MaxImportBytes = 5<<20 + 512<<10

// maxExportBytes bounds an export page's body as Lambda carries it (see
// lambdahttp.BodySize), on every route: a page is also the body of an
// import, which Lambda carries in 6 MB, event included.
const maxExportBytes = 5<<20 + 512<<10

// maxMessageJSON bounds one message of an imported session: one export
// page must be able to carry it, whatever else the page holds.
const maxMessageJSON = ddbhistory.MaxPageBytes

func (h *Handler) exportSession(r *http.Request, rec *record) (int, []byte, error) {
	key, e := h.sessionKey(r, rec)
	if e != nil {
		return 0, nil, e
	}
	version, offset, cursor, e := exportCursor(r.URL.Query().Get("cursor"))
	if e != nil {
		return 0, nil, e
	}
	ctx, cancel := turn.StoreContext(r.Context())
	defer cancel()
	page, err := h.cfg.Sessions.Transcript(ctx, key, cursor, ddbhistory.MaxPageSize)
	if err != nil {
		return 0, nil, err
	}
	s := page.Session
	if version != 0 && s.Version != version {
		return 0, nil, &Error{Status: http.StatusConflict, Code: "session_changed", Message: "the session changed since its export began (a turn or a rewind), so its pages would not fit together; export it again from the first page"}
	}
	// Messages that expired, always a session's oldest, are not in the
	// document, which begins with the first message there is: offset is
	// that message's index in the session.
	if cursor == "" {
		offset = page.First
	}
	at := page.First - offset
	// Every page is one that POST /sessions/import takes, on any route.
	body, err := fitPage(maxExportBytes, page, func(raws []json.RawMessage, storeNext string) any {
		var next string
		if storeNext != "" {
			next = base64.RawURLEncoding.EncodeToString(fmt.Appendf(nil, "%d.%d.%s", s.Version, offset, storeNext))
		}
		if cursor == "" {
			return documentBody{SessionDocument: documentOf(s, offset, nil, next), Messages: raws}
		}
		return pageBody{SessionDocumentPage: SessionDocumentPage{Format: DocumentFormat, FormatVersion: DocumentVersion, SessionID: s.ID, First: &at, NextCursor: next}, Messages: raws}
	})
	if err != nil {
		return 0, nil, err
	}
	return http.StatusOK, body, nil
}

// documentBody and pageBody are the pages of an export whose messages are
// encoded already, and fitted to the response (see messageList).
type (
	documentBody struct {
		SessionDocument
		Messages []json.RawMessage `json:"messages"`
	}
	pageBody struct {
		SessionDocumentPage
		Messages []json.RawMessage `json:"messages"`
	}
)

// sameMessage reports whether a and b are the same message, as JSON: a
// message the store gave back against one a caller sent.
func sameMessage(a, b agent.Message) bool {
	ja, errA := json.Marshal(a)
	jb, errB := json.Marshal(b)
	return errA == nil && errB == nil && bytes.Equal(ja, jb)
}

// documentOf is the first page of an export: the session's header, and
// the first of its messages.
func documentOf(s *ddbhistory.Session, offset int, msgs []agent.Message, next string) SessionDocument {
	window := s.Conversation.Window
	window.Removed = max(window.Removed-offset, 0)
	doc := SessionDocument{
		Format:        DocumentFormat,
		FormatVersion: DocumentVersion,
		SessionID:     s.ID,
		Title:         s.Title,
		CreatedAt:     s.CreatedAt.UTC(),
		UpdatedAt:     s.UpdatedAt.UTC(),
		MessageCount:  s.Count - offset,
		Messages:      msgs,
		State:         s.Conversation.State,
		Window:        window,
		Pending:       s.Conversation.Pending,
		NextCursor:    next,
	}
	if doc.State == nil {
		doc.State = map[string]json.RawMessage{}
	}
	if !s.ExpiresAt.IsZero() {
		at := s.ExpiresAt.UTC()
		doc.ExpiresAt = &at
	}
	return doc
}

// exportCursor reads an export's cursor: the session's version when the
// export began, which every page checks so that the pages fit together;
// the index in the session of the document's first message; and the
// store's cursor. "" is the first page.
func exportCursor(c string) (version int64, offset int, store string, e *Error) {
	if c == "" {
		return 0, 0, "", nil
	}
	raw, err := base64.RawURLEncoding.DecodeString(c)
	parts := strings.SplitN(string(raw), ".", 3)
	if err == nil && len(parts) == 3 && parts[2] != "" {
		version, err = strconv.ParseInt(parts[0], 10, 64)
		if err == nil {
			offset, err = strconv.Atoi(parts[1])
		}
		if err == nil && version >= 1 && offset >= 0 {
			return version, offset, parts[2], nil
		}
	}
	return 0, 0, "", badRequest("invalid_request", "malformed cursor %q: pass the next_cursor of the previous page as it is", c)
}

func (h *Handler) importSession(r *http.Request, rec *record) (int, []byte, error) {
	owner, e := h.owner(r)
	if e != nil {
		return 0, nil, e
	}
	idem, e := idempotencyKey(r)
	if e != nil {
		return 0, nil, e
	}
	raw, e := body(r, MaxImportBytes)
	if e != nil {
		return 0, nil, e
	}
	var in ImportRequest
	if e := decodeJSON(raw, &in, "the body"); e != nil {
		return 0, nil, e
	}
	// Without new_session_id the turn service chooses the id: derived from
	// the Idempotency-Key, so that a retry finds what its first attempt
	// created, or random.
	id, e := namedSession(in.NewSessionID, rec)
	if e != nil {
		return 0, nil, e
	}
	im, e := checkDocument(&in.SessionDocument)
	if e != nil {
		return 0, nil, e
	}
	if in.NextCursor != "" {
		// A paged import takes no Idempotency-Key: a new id is random.
		return h.stageFirst(r.Context(), rec, ddbhistory.Key{Owner: owner, ID: cmp.Or(id, turn.NewSessionID())}, idem, &in.SessionDocument)
	}
	im.Request = turn.Request{Owner: owner, SessionID: id, IdempotencyKey: idem, Fingerprint: turn.Fingerprint(RouteImportSession, raw)}
	return h.importTurn(r.Context(), rec, im)
}

// importTurn commits an import, whole or the last page of one, and
// answers 201.
func (h *Handler) importTurn(ctx context.Context, rec *record, im turn.Import) (int, []byte, error) {
	out, err := h.cfg.Turns.Import(ctx, im)
	if errors.Is(err, turn.ErrSessionExists) {
		// The caller's session, or another owner's, which the answer
		// must not tell apart.
		return 0, nil, sessionExists(im.SessionID, err)
	}
	_, body, err := answer(out, err, rec)
	if err != nil {
		return 0, nil, err
	}
	rec.result = nil // no model, no tools: nothing to count
	rec.sessionID, rec.location = out.Answer.SessionID, "/sessions/"+out.Answer.SessionID
	return http.StatusCreated, body, nil
}

func sessionExists(id string, err error) *Error {
	return &Error{Status: http.StatusConflict, Code: "session_exists", Message: fmt.Sprintf("the session id %q is in use, and an import never overwrites a session; import under another new_session_id, or leave it out for a new id", id), err: err}
}

// ImportProgress is the answer to a page of an import that is not its
// last, a 202: the session it will be, the token that its next pages
// carry, and how many of its messages are in.
type ImportProgress struct {
	SessionID    string `json:"session_id"`
	ImportToken  string `json:"import_token"`
	Received     int    `json:"received"`
	MessageCount int    `json:"message_count"`
}

// errNoPagedKey refuses an Idempotency-Key on a paged import, whose pages
// are retried one by one instead.
var errNoPagedKey = badRequest("invalid_request", "an import in pages takes no Idempotency-Key: each page says where it starts, so a page sent again is not stored twice; send a page again when its answer is lost, and GET the session when the last one's is")

// stageFirst stages the first page of an import in pages, and answers 202.
func (h *Handler) stageFirst(ctx context.Context, rec *record, key ddbhistory.Key, idem string, d *SessionDocument) (int, []byte, error) {
	if idem != "" {
		return 0, nil, errNoPagedKey
	}
	rec.sessionID = key.ID
	header := *d
	header.Messages, header.NextCursor = nil, ""
	raw, err := json.Marshal(header)
	if err != nil {
		return 0, nil, err
	}
	ctx, cancel := turn.StoreContext(ctx)
	defer cancel()
	st, err := h.cfg.Sessions.Stage(ctx, key, newImportToken(), 0, d.Messages, raw)
	if errors.Is(err, ddbhistory.ErrConflict) || errors.Is(err, ddbhistory.ErrIDTaken) {
		return 0, nil, sessionExists(key.ID, err)
	}
	if err != nil {
		return 0, nil, err
	}
	return progress(key.ID, st, d.MessageCount)
}

// newImportToken names a paged import.
func newImportToken() string { return strings.ToLower(rand.Text()) }

func progress(id string, st *ddbhistory.Staging, count int) (int, []byte, error) {
	body, err := json.Marshal(ImportProgress{SessionID: id, ImportToken: st.Token, Received: st.Count, MessageCount: count})
	if err != nil {
		return 0, nil, err
	}
	return http.StatusAccepted, body, nil
}

// importPage takes a later page of an import in pages: it stages the
// page, or, with the last, commits the session.
func (h *Handler) importPage(r *http.Request, rec *record) (int, []byte, error) {
	key, e := h.sessionKey(r, rec)
	if e != nil {
		return 0, nil, e
	}
	if idem, e := idempotencyKey(r); e != nil || idem != "" {
		return 0, nil, cmp.Or(e, errNoPagedKey)
	}
	token := r.URL.Query().Get("token")
	if token == "" {
		return 0, nil, badRequest("invalid_request", "token is required: the import_token the first page's answer gave")
	}
	raw, e := body(r, MaxImportBytes)
	if e != nil {
		return 0, nil, e
	}
	var page SessionDocumentPage
	if e := decodeJSON(raw, &page, "the body"); e != nil {
		return 0, nil, e
	}
	if e := checkFormat(page.Format, page.FormatVersion); e != nil {
		return 0, nil, e
	}
	switch {
	case page.First == nil || len(page.Messages) == 0:
		return 0, nil, badRequest("invalid_session_document", "a page needs first, the index of its first message, and messages, as GET /sessions/{id}/export?cursor= returns them")
	case len(page.Messages) > MaxImportMessages:
		return 0, nil, &Error{Status: http.StatusRequestEntityTooLarge, Code: "too_large", Message: fmt.Sprintf("the page holds %d messages; a page may hold at most %d", len(page.Messages), MaxImportMessages)}
	}
	ctx, cancel := turn.StoreContext(r.Context())
	defer cancel()
	st, err := h.cfg.Sessions.Staged(ctx, key, token)
	if errors.Is(err, ddbhistory.ErrNotFound) {
		return 0, nil, &Error{Status: http.StatusNotFound, Code: "import_not_found", Message: "no import is under way with this token: it was completed (GET the session), replaced by a later import under the same id, or has expired; start again from the first page", err: err}
	}
	if err != nil {
		return 0, nil, err
	}
	var d SessionDocument
	if err := json.Unmarshal(st.Header, &d); err != nil {
		return 0, nil, fmt.Errorf("httpapi: decode a staged import's header: %w", err)
	}
	first, msgs := *page.First, page.Messages
	switch {
	case first < 0:
		return 0, nil, badRequest("invalid_session_document", "first is %d; a page's first is the index of its first message, from 0, and the import stands at %d", first, st.Count)
	case first > st.Count:
		return 0, nil, badRequest("invalid_session_document", "first is %d, but the import holds %d messages: send the page that starts at %d", first, st.Count, st.Count)
	case first < st.Count && (first+len(msgs) < st.Count || st.Last == nil || !sameMessage(msgs[st.Count-1-first], *st.Last)):
		// A page sent again is the one that reached the import's end, as
		// it was sent: its message where the import ends is the last
		// stored.
		return 0, nil, badRequest("invalid_session_document", "first is %d, but the import stands at %d, and the page is not the one sent last, sent again: send the page that starts at %d", first, st.Count, st.Count)
	case first+len(msgs) == st.Count:
		return progress(key.ID, st, d.MessageCount) // sent before, and stored then
	}
	// A page sent again after part of it was stored goes on from there.
	msgs = msgs[st.Count-first:]
	first = st.Count
	end := first + len(msgs)
	if e := checkPart(&d, st.Last, first, msgs); e != nil {
		return 0, nil, e
	}
	switch {
	case end > d.MessageCount:
		return 0, nil, badRequest("invalid_session_document", "the pages hold %d messages or more, but message_count is %d", end, d.MessageCount)
	case end < d.MessageCount && page.NextCursor == "":
		return 0, nil, badRequest("invalid_session_document", "the page has no next_cursor, so it is the last, but the import holds %d messages of message_count %d", end, d.MessageCount)
	case end < d.MessageCount:
		st, err := h.cfg.Sessions.Stage(ctx, key, token, first, msgs, nil)
		if err != nil {
			return 0, nil, err
		}
		return progress(key.ID, st, d.MessageCount)
	}
	if e := checkPendingAt(d.Pending, msgs, end); e != nil {
		return 0, nil, e
	}
	state, e := checkState(d.State)
	if e != nil {
		return 0, nil, e
	}
	return h.importTurn(r.Context(), rec, turn.Import{
		Request:  turn.Request{Owner: key.Owner, SessionID: key.ID},
		Messages: msgs, Window: d.Window, State: state, Pending: d.Pending,
		Staging: st,
	})
}

// checkDocument checks a session document to import, whole or the first
// page of one (with next_cursor), and returns the import of it. Its errors
// name the problem in the document's terms: invalid_session_document, or
// unsupported_format_version.
func checkDocument(d *SessionDocument) (turn.Import, *Error) {
	invalid := func(format string, args ...any) *Error {
		return badRequest("invalid_session_document", format, args...)
	}
	if e := checkFormat(d.Format, d.FormatVersion); e != nil {
		return turn.Import{}, e
	}
	switch paged := d.NextCursor != ""; {
	case !paged && d.MessageCount != len(d.Messages):
		return turn.Import{}, invalid("message_count is %d, but messages holds %d; a document in pages goes with its next_cursor, and its pages follow it (see POST /sessions/{sessionId}/import)", d.MessageCount, len(d.Messages))
	case paged && d.MessageCount <= len(d.Messages):
		return turn.Import{}, invalid("next_cursor is set, but message_count %d says that messages, %d of them, holds them all", d.MessageCount, len(d.Messages))
	case paged && len(d.Messages) == 0:
		return turn.Import{}, invalid("messages is empty; the first page of a document holds its first messages")
	}
	if len(d.Messages) > MaxImportMessages {
		return turn.Import{}, &Error{Status: http.StatusRequestEntityTooLarge, Code: "too_large", Message: fmt.Sprintf("messages holds %d messages; one request may import at most %d: send the document in pages, as its export comes (see POST /sessions/{sessionId}/import)", len(d.Messages), MaxImportMessages)}
	}
	state, e := checkState(d.State)
	if e != nil {
		return turn.Import{}, e
	}
	if e := checkWindow(d.Window, d.MessageCount); e != nil {
		return turn.Import{}, e
	}
	if e := checkSessionItem(d); e != nil {
		return turn.Import{}, e
	}
	if e := checkPart(d, nil, 0, d.Messages); e != nil {
		return turn.Import{}, e
	}
	if d.NextCursor == "" {
		if e := checkPending(d.Pending, d.Messages); e != nil {
			return turn.Import{}, e
		}
	}
	return turn.Import{Messages: d.Messages, Window: d.Window, State: state, Pending: d.Pending}, nil
}

// MaxImportMessages bounds the messages of one import request, whole or a
// page, so that its commit stays within about a hundred transactions, a
// second or two: ten export pages.
const MaxImportMessages = 10 * ddbhistory.MaxPageSize

// checkSessionItem refuses a document whose window, state and pending
// interrupts could not fit the session item beside the rest, before any of
// it is written.
func checkSessionItem(d *SessionDocument) *Error {
	n := 0
	for _, v := range []any{d.Window, d.State, d.Pending} {
		raw, err := json.Marshal(v)
		if err != nil {
			return badRequest("invalid_session_document", "%v", err)
		}
		n += len(raw)
	}
	if limit := ddbhistory.MaxItemBytes - 16<<10; n > limit {
		return &Error{Status: http.StatusRequestEntityTooLarge, Code: "too_large", Message: fmt.Sprintf("window, state and pending are %d bytes of JSON together; the session item holds at most %d of them", n, limit)}
	}
	return nil
}

// checkFormat checks a document's or a page's format and version.
func checkFormat(format string, version int) *Error {
	switch {
	case format != DocumentFormat:
		return badRequest("invalid_session_document", "format is %q; a session document's is %q, as GET /sessions/{id}/export writes it", format, DocumentFormat)
	case version != DocumentVersion:
		return badRequest("unsupported_format_version", "format_version %d is not one this service reads; it reads %d", version, DocumentVersion)
	}
	return nil
}

// checkPart checks messages first, first+1 and on of the document d, which
// follow prev: the history's rules, their sizes, and the window's start
// when it is among them.
func checkPart(d *SessionDocument, prev *agent.Message, first int, msgs []agent.Message) *Error {
	invalid := func(format string, args ...any) *Error {
		return badRequest("invalid_session_document", format, args...)
	}
	if err := agent.ValidateHistoryPart(prev, first, msgs); err != nil {
		return invalid("%v", err)
	}
	for k, m := range msgs {
		i := first + k
		raw, err := json.Marshal(m)
		if err != nil {
			return invalid("messages[%d]: %v", i, err)
		}
		if len(raw) > maxMessageJSON {
			return invalid("messages[%d] is %d bytes of JSON; a message may be at most %d, which one export page can carry", i, len(raw), maxMessageJSON)
		}
		if i == d.Window.Removed && i > 0 && !agent.IsTurnStart(m) {
			return invalid("window.removed is %d, but messages[%d] is not the start of a turn (a user message without toolResult blocks), where a window must begin", i, i)
		}
	}
	return nil
}

// checkState returns the agent state compacted, as the store keeps it, and
// refuses one past the agent's cap: its keys and values, as agent.State
// counts them.
func checkState(in map[string]json.RawMessage) (map[string]json.RawMessage, *Error) {
	out := make(map[string]json.RawMessage, len(in))
	size := 0
	for k, v := range in {
		var buf bytes.Buffer
		if err := json.Compact(&buf, v); err != nil { // the decoder checked it
			return nil, badRequest("invalid_session_document", "state.%s: %v", k, err)
		}
		out[k] = buf.Bytes()
		size += len(k) + buf.Len()
	}
	if size > agent.DefaultMaxStateBytes {
		return nil, badRequest("invalid_session_document", "state is %d bytes of keys and values; the agent state may hold at most %d", size, agent.DefaultMaxStateBytes)
	}
	return out, nil
}

// checkWindow checks the conversation manager's state against the count
// of messages: a summary stands for messages removed. (checkPart checks
// that the window starts at a turn start, as a manager cuts it.)
func checkWindow(w agent.WindowState, count int) *Error {
	invalid := func(format string, args ...any) *Error {
		return badRequest("invalid_session_document", format, args...)
	}
	switch {
	case w.Removed < 0 || w.Removed > count:
		return invalid("window.removed is %d; it counts messages, from 0 to the %d of message_count", w.Removed, count)
	case w.Summary != "" && w.Removed == 0:
		return invalid("window.summary is set, but window.removed is 0: a summary stands for removed messages")
	case w.Summary != "" && strings.TrimSpace(w.Summary) == "":
		return invalid("window.summary is blank")
	case w.ToolResultLimit < 0:
		return invalid("window.tool_result_limit is %d; it must not be negative", w.ToolResultLimit)
	case w.LastInputTokens < 0:
		return invalid("window.last_input_tokens is %d; it must not be negative", w.LastInputTokens)
	}
	return nil
}

// checkPending checks what the session waits for against its messages:
// the interrupts and the kept results are of tool uses of the last
// message, an assistant message, each once.
func checkPending(p *agent.Pending, msgs []agent.Message) *Error {
	return checkPendingAt(p, msgs, len(msgs))
}

// checkPendingAt is checkPending for a document of count messages, whose
// last ones are msgs.
func checkPendingAt(p *agent.Pending, msgs []agent.Message, count int) *Error {
	if p == nil {
		return nil
	}
	invalid := func(format string, args ...any) *Error {
		return badRequest("invalid_session_document", format, args...)
	}
	n := count
	if len(p.Interrupts) == 0 {
		return invalid("pending.interrupts is empty; pending is null for a session that waits for nothing")
	}
	if len(msgs) == 0 || msgs[len(msgs)-1].Role != agent.RoleAssistant {
		return invalid("pending is set, but the last message is not the assistant's: interrupts wait on the tool uses of the last message")
	}
	uses := map[string]bool{}
	for _, u := range msgs[len(msgs)-1].ToolUses() {
		uses[u.ToolUseID] = true
	}
	seen := map[string]string{}
	for i, in := range p.Interrupts {
		switch {
		case !uses[in.ID]:
			return invalid("pending.interrupts[%d].id %q is no toolUse of messages[%d], the last message", i, in.ID, n-1)
		case seen[in.ID] != "":
			return invalid("pending.interrupts[%d].id %q is held back twice, first by %s", i, in.ID, seen[in.ID])
		case in.Kind != agent.KindApproval && in.Kind != agent.KindQuestion:
			return invalid("pending.interrupts[%d].kind %q is not %q or %q", i, in.Kind, agent.KindApproval, agent.KindQuestion)
		}
		seen[in.ID] = fmt.Sprintf("pending.interrupts[%d]", i)
	}
	for i, r := range p.Results {
		switch {
		case r == nil:
			return invalid("pending.results[%d] is null", i)
		case !uses[r.ToolUseID]:
			return invalid("pending.results[%d].toolUseId %q is no toolUse of messages[%d], the last message", i, r.ToolUseID, n-1)
		case seen[r.ToolUseID] != "":
			return invalid("pending.results[%d].toolUseId %q is answered already, by %s", i, r.ToolUseID, seen[r.ToolUseID])
		}
		if err := agent.ValidateToolResult(r); err != nil {
			return invalid("pending.results[%d].%v", i, err)
		}
		seen[r.ToolUseID] = fmt.Sprintf("pending.results[%d]", i)
	}
	return nil
}
