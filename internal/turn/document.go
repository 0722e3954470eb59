package turn

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/lambda-agent/lambda-agent/internal/agent"
	"github.com/lambda-agent/lambda-agent/internal/ddbhistory"
)

// A session document is a whole session as one self-describing JSON
// document: Export writes it, and Import creates a session from it, for
// the caller, whoever exported it. A session longer than one page is
// exported in pages (see Document.NextCursor), whose messages a client
// concatenates into one document to import, or imports page by page
// (ImportPage). Import checks the document strictly before anything is
// written, and never overwrites a session.

// The format a session document declares.
const (
	DocumentFormat  = "lambda-agent/session"
	DocumentVersion = 1
)

// Document is a session, whole: what Export's first page is, and what
// Import takes.
type Document struct {
	Format        string `json:"format"`
	FormatVersion int    `json:"format_version"`
	// SessionID is the exported session's id. Import does not reuse it:
	// see Import.SessionID.
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
	// NextCursor, on an export, continues Messages: the cursor of the
	// export's next page. A document to import carries none, unless it is
	// the first page of an import in pages.
	NextCursor string `json:"next_cursor,omitempty"`
	// Messages is the whole transcript, oldest first. It comes last, after
	// the session's header.
	Messages []agent.Message `json:"messages"`
}

// DocumentPage continues an exported Document: more of its messages, and
// the cursor of the next page, if any.
type DocumentPage struct {
	Format        string `json:"format"`
	FormatVersion int    `json:"format_version"`
	SessionID     string `json:"session_id"`
	// First is the index of the page's first message.
	First      *int            `json:"first"`
	NextCursor string          `json:"next_cursor,omitempty"`
	Messages   []agent.Message `json:"messages"`
}

// Errors of a session document, each the Kind of a *DocumentError.
var (
	// ErrInvalidDocument is a document, or a page, that breaks a rule.
	ErrInvalidDocument = errors.New("invalid session document")
	// ErrUnsupportedVersion is a document of a format version this service
	// does not read.
	ErrUnsupportedVersion = errors.New("unsupported session document version")
	// ErrDocumentTooLarge is a document, or a page, that one request
	// cannot import.
	ErrDocumentTooLarge = errors.New("the session document is too large for one request")
)

// DocumentError says what is wrong with a session document to import, by
// its place in the document, such as messages[3].role. Nothing was
// written. It matches its Kind.
type DocumentError struct {
	Kind   error
	Reason string
}

func (e *DocumentError) Error() string { return e.Reason }

// Is makes errors.Is(err, e.Kind) true.
func (e *DocumentError) Is(target error) bool { return target == e.Kind }

func invalidDocument(format string, args ...any) error {
	return &DocumentError{Kind: ErrInvalidDocument, Reason: fmt.Sprintf(format, args...)}
}

func documentTooLarge(format string, args ...any) error {
	return &DocumentError{Kind: ErrDocumentTooLarge, Reason: fmt.Sprintf(format, args...)}
}

// Bounds on what one import request takes.
const (
	// MaxImportMessages bounds the messages of one import request, whole
	// or a page, so that its commit stays within about a hundred
	// transactions, a second or two: ten export pages.
	MaxImportMessages = 10 * ddbhistory.MaxPageSize
	// MaxMessageJSON bounds one message of an imported session: one page
	// of the store can carry it, whatever else the page holds.
	MaxMessageJSON = ddbhistory.MaxPageBytes
)

// documentChecks checks documents to import, with the service's limits.
type documentChecks struct {
	// maxState bounds the agent state, as agent.State counts it.
	maxState int
}

// document checks a session document to import, whole or the first page
// of one (with next_cursor), and returns its state compacted, as the store
// keeps it.
func (c documentChecks) document(d *Document) (map[string]json.RawMessage, error) {
	if err := checkFormat(d.Format, d.FormatVersion); err != nil {
		return nil, err
	}
	switch paged := d.NextCursor != ""; {
	case !paged && d.MessageCount != len(d.Messages):
		return nil, invalidDocument("message_count is %d, but messages holds %d; a document in pages goes with its next_cursor, and its pages follow it (see POST /sessions/{sessionId}/import)", d.MessageCount, len(d.Messages))
	case paged && d.MessageCount <= len(d.Messages):
		return nil, invalidDocument("next_cursor is set, but message_count %d says that messages, %d of them, holds them all", d.MessageCount, len(d.Messages))
	case paged && len(d.Messages) == 0:
		return nil, invalidDocument("messages is empty; the first page of a document holds its first messages")
	}
	if len(d.Messages) > MaxImportMessages {
		return nil, documentTooLarge("messages holds %d messages; one request may import at most %d: send the document in pages, as its export comes (see POST /sessions/{sessionId}/import)", len(d.Messages), MaxImportMessages)
	}
	state, err := c.state(d.State)
	if err != nil {
		return nil, err
	}
	if err := checkWindow(d.Window, d.MessageCount); err != nil {
		return nil, err
	}
	if err := checkSessionItem(d); err != nil {
		return nil, err
	}
	if err := checkPart(d, nil, 0, d.Messages); err != nil {
		return nil, err
	}
	if d.NextCursor == "" {
		if err := checkDocumentPending(d.Pending, d.Messages, len(d.Messages)); err != nil {
			return nil, err
		}
	}
	return state, nil
}

// page checks a later page of an import in pages, before it is placed.
func (documentChecks) page(p *DocumentPage) error {
	if err := checkFormat(p.Format, p.FormatVersion); err != nil {
		return err
	}
	switch {
	case p.First == nil || len(p.Messages) == 0:
		return invalidDocument("a page needs first, the index of its first message, and messages, as GET /sessions/{id}/export?cursor= returns them")
	case len(p.Messages) > MaxImportMessages:
		return documentTooLarge("the page holds %d messages; a page may hold at most %d", len(p.Messages), MaxImportMessages)
	}
	return nil
}

// checkSessionItem refuses a document whose window, state and pending
// interrupts could not fit the session item beside the rest, before any of
// it is written.
func checkSessionItem(d *Document) error {
	n := 0
	for _, v := range []any{d.Window, d.State, d.Pending} {
		raw, err := json.Marshal(v)
		if err != nil {
			return invalidDocument("%v", err)
		}
		n += len(raw)
	}
	if limit := ddbhistory.MaxItemBytes - 16<<10; n > limit {
		return documentTooLarge("window, state and pending are %d bytes of JSON together; the session item holds at most %d of them", n, limit)
	}
	return nil
}

// checkFormat checks a document's or a page's format and version.
func checkFormat(format string, version int) error {
	switch {
	case format != DocumentFormat:
		return invalidDocument("format is %q; a session document's is %q, as GET /sessions/{id}/export writes it", format, DocumentFormat)
	case version != DocumentVersion:
		return &DocumentError{Kind: ErrUnsupportedVersion, Reason: fmt.Sprintf("format_version %d is not one this service reads; it reads %d", version, DocumentVersion)}
	}
	return nil
}

// checkPart checks messages first, first+1 and on of the document d, which
// follow prev: the history's rules, their sizes, and the window's start
// when it is among them.
func checkPart(d *Document, prev *agent.Message, first int, msgs []agent.Message) error {
	if err := agent.ValidateHistoryPart(prev, first, msgs); err != nil {
		return invalidDocument("%v", err)
	}
	for k, m := range msgs {
		i := first + k
		raw, err := json.Marshal(m)
		if err != nil {
			return invalidDocument("messages[%d]: %v", i, err)
		}
		if len(raw) > MaxMessageJSON {
			return invalidDocument("messages[%d] is %d bytes of JSON; a message may be at most %d, which one export page can carry", i, len(raw), MaxMessageJSON)
		}
		if i == d.Window.Removed && i > 0 && !agent.IsTurnStart(m) {
			return invalidDocument("window.removed is %d, but messages[%d] is not the start of a turn (a user message without toolResult blocks), where a window must begin", i, i)
		}
	}
	return nil
}

// state returns the agent state compacted, as the store keeps it, and
// refuses one past the agent's cap: its keys and values, as agent.State
// counts them.
func (c documentChecks) state(in map[string]json.RawMessage) (map[string]json.RawMessage, error) {
	out := make(map[string]json.RawMessage, len(in))
	size := 0
	for k, v := range in {
		var buf bytes.Buffer
		if err := json.Compact(&buf, v); err != nil {
			return nil, invalidDocument("state.%s: %v", k, err)
		}
		out[k] = buf.Bytes()
		size += len(k) + buf.Len()
	}
	if size > c.maxState {
		return nil, invalidDocument("state is %d bytes of keys and values; the agent state may hold at most %d", size, c.maxState)
	}
	return out, nil
}

// checkWindow checks the conversation manager's state against the count
// of messages: a summary stands for messages removed. (checkPart checks
// that the window starts at a turn start, as a manager cuts it.)
func checkWindow(w agent.WindowState, count int) error {
	switch {
	case w.Removed < 0 || w.Removed > count:
		return invalidDocument("window.removed is %d; it counts messages, from 0 to the %d of message_count", w.Removed, count)
	case w.Summary != "" && w.Removed == 0:
		return invalidDocument("window.summary is set, but window.removed is 0: a summary stands for removed messages")
	case w.Summary != "" && strings.TrimSpace(w.Summary) == "":
		return invalidDocument("window.summary is blank")
	case w.ToolResultLimit < 0:
		return invalidDocument("window.tool_result_limit is %d; it must not be negative", w.ToolResultLimit)
	case w.LastInputTokens < 0:
		return invalidDocument("window.last_input_tokens is %d; it must not be negative", w.LastInputTokens)
	}
	return nil
}

// checkDocumentPending checks what the session waits for against its messages,
// the last ones of a document of count messages: the interrupts and the
// kept results are of tool uses of the last message, an assistant
// message, each once, and the results pass the rule of every tool result.
func checkDocumentPending(p *agent.Pending, msgs []agent.Message, count int) error {
	if p == nil {
		return nil
	}
	if len(p.Interrupts) == 0 {
		return invalidDocument("pending.interrupts is empty; pending is null for a session that waits for nothing")
	}
	if len(msgs) == 0 || msgs[len(msgs)-1].Role != agent.RoleAssistant {
		return invalidDocument("pending is set, but the last message is not the assistant's: interrupts wait on the tool uses of the last message")
	}
	uses := map[string]bool{}
	for _, u := range msgs[len(msgs)-1].ToolUses() {
		uses[u.ToolUseID] = true
	}
	seen := map[string]string{}
	for i, in := range p.Interrupts {
		switch {
		case !uses[in.ID]:
			return invalidDocument("pending.interrupts[%d].id %q is no toolUse of messages[%d], the last message", i, in.ID, count-1)
		case seen[in.ID] != "":
			return invalidDocument("pending.interrupts[%d].id %q is held back twice, first by %s", i, in.ID, seen[in.ID])
		case in.Kind != agent.KindApproval && in.Kind != agent.KindQuestion:
			return invalidDocument("pending.interrupts[%d].kind %q is not %q or %q", i, in.Kind, agent.KindApproval, agent.KindQuestion)
		}
		seen[in.ID] = fmt.Sprintf("pending.interrupts[%d]", i)
	}
	for i, r := range p.Results {
		switch {
		case r == nil:
			return invalidDocument("pending.results[%d] is null", i)
		case !uses[r.ToolUseID]:
			return invalidDocument("pending.results[%d].toolUseId %q is no toolUse of messages[%d], the last message", i, r.ToolUseID, count-1)
		case seen[r.ToolUseID] != "":
			return invalidDocument("pending.results[%d].toolUseId %q is answered already, by %s", i, r.ToolUseID, seen[r.ToolUseID])
		}
		if err := agent.ValidateToolResult(r); err != nil {
			return invalidDocument("pending.results[%d].%v", i, err)
		}
		seen[r.ToolUseID] = fmt.Sprintf("pending.results[%d]", i)
	}
	return nil
}

// sameMessage reports whether a and b are the same message, as JSON: a
// message the store gave back against one a caller sent.
func sameMessage(a, b agent.Message) bool {
	ja, errA := json.Marshal(a)
	jb, errB := json.Marshal(b)
	return errA == nil && errB == nil && bytes.Equal(ja, jb)
}
