package turn

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/lambda-agent/lambda-agent/internal/agent"
	"github.com/lambda-agent/lambda-agent/internal/ddbhistory"
)

// A session document is a whole session as one self-describing JSON
// document: Export writes it, and Import creates a session from it, for
// the caller, whoever exported it. It holds the main agent's conversation
// and the conversations the session keeps for its sub-agents
// (Document.Agents). A session longer than one page is exported in pages
// (see Document.NextCursor), whose messages a client concatenates into
// one document to import, or imports page by page (ImportPage). Import
// checks the document strictly before anything is written, and never
// overwrites a session.
//
// Adding Agents kept the format's version: a document without it is a
// session whose sub-agents have nothing stored, as before, and one with
// it is refused by a service that does not know it (an unknown field).

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
	// Messages is the whole transcript, oldest first. It comes after the
	// session's header.
	Messages []agent.Message `json:"messages"`
	// Agents are the conversations the session keeps for its sub-agents,
	// by name: those that have messages stored. On an export's first
	// page, each has its header and its first messages, if any; later
	// pages continue them, after the main agent's messages.
	Agents map[string]*AgentDocument `json:"agents,omitempty"`
}

// AgentDocument is the conversation a session keeps for one of its
// sub-agents: its messages, and what a delegation starts from beside
// them. It has what the session's own conversation has, but a title and
// pending interrupts: a sub-agent never waits for a person.
type AgentDocument struct {
	// MessageCount is how many messages the conversation holds: the
	// length of Messages once every page is in.
	MessageCount int `json:"message_count"`
	// State is the sub-agent's state, and Window its conversation
	// manager's.
	State  map[string]json.RawMessage `json:"state"`
	Window agent.WindowState          `json:"window"`
	// Messages are the conversation's messages, oldest first.
	Messages []agent.Message `json:"messages"`
}

// DocumentPage continues an exported Document: more of its messages, of
// the main agent's conversation and of its sub-agents', and the cursor of
// the next page, if any.
type DocumentPage struct {
	Format        string `json:"format"`
	FormatVersion int    `json:"format_version"`
	SessionID     string `json:"session_id"`
	// First is the index of the page's first message of the main
	// agent's conversation; absent when the page has none.
	First      *int            `json:"first,omitempty"`
	NextCursor string          `json:"next_cursor,omitempty"`
	Messages   []agent.Message `json:"messages"`
	// Agents continue the sub-agents' conversations of the document's
	// Agents, by name.
	Agents map[string]*AgentPart `json:"agents,omitempty"`
}

// AgentPart is a page's messages of a sub-agent's conversation.
type AgentPart struct {
	// First is the index of the first of Messages in the conversation.
	First    *int            `json:"first"`
	Messages []agent.Message `json:"messages"`
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
// of one (with next_cursor), whose sub-agents must be among agents, and
// returns its state, and each sub-agent's, compacted, as the store keeps
// them.
func (c documentChecks) document(d *Document, agents []string) (map[string]json.RawMessage, map[string]map[string]json.RawMessage, error) {
	if err := checkFormat(d.Format, d.FormatVersion); err != nil {
		return nil, nil, err
	}
	paged := d.NextCursor != ""
	total := len(d.Messages)
	for _, a := range d.Agents {
		if a != nil {
			total += len(a.Messages)
		}
	}
	switch {
	case !paged && d.MessageCount != len(d.Messages):
		return nil, nil, invalidDocument("message_count is %d, but messages holds %d; a document in pages goes with its next_cursor, and its pages follow it (see POST /sessions/{sessionId}/import)", d.MessageCount, len(d.Messages))
	case paged && d.MessageCount < len(d.Messages):
		return nil, nil, invalidDocument("message_count is %d, but messages holds %d", d.MessageCount, len(d.Messages))
	case paged && len(d.Messages) == 0:
		return nil, nil, invalidDocument("messages is empty; the first page of a document holds its first messages")
	case paged && d.complete():
		return nil, nil, invalidDocument("next_cursor is set, but message_count %d says that messages, %d of them, holds them all, and so does each agent's", d.MessageCount, len(d.Messages))
	case total > MaxImportMessages:
		return nil, nil, documentTooLarge("the document holds %d messages, its agents' included; one request may import at most %d: send the document in pages, as its export comes (see POST /sessions/{sessionId}/import)", total, MaxImportMessages)
	}
	state, err := c.state(d.State)
	if err != nil {
		return nil, nil, err
	}
	if err := checkWindow(d.Window, d.MessageCount); err != nil {
		return nil, nil, err
	}
	if err := checkSessionItem(d); err != nil {
		return nil, nil, err
	}
	if err := checkPart(d.Window, nil, 0, d.Messages); err != nil {
		return nil, nil, err
	}
	if d.NextCursor == "" {
		if err := checkDocumentPending(d.Pending, d.Messages, len(d.Messages)); err != nil {
			return nil, nil, err
		}
	}
	states, err := c.agents(d.Agents, agents, paged)
	if err != nil {
		return nil, nil, err
	}
	return state, states, nil
}

// complete reports whether the document holds every message of every
// conversation.
func (d *Document) complete() bool {
	for _, a := range d.Agents {
		if a != nil && a.MessageCount > len(a.Messages) {
			return false
		}
	}
	return d.MessageCount <= len(d.Messages)
}

// agents checks the sub-agents' conversations of a document, each as
// strictly as the session's own, by their place in the document
// (agents.NAME...): their names must be among known, and their messages
// all there unless the document is paged. It returns their states,
// compacted.
func (c documentChecks) agents(in map[string]*AgentDocument, known []string, paged bool) (map[string]map[string]json.RawMessage, error) {
	if len(in) == 0 {
		return nil, nil
	}
	states := make(map[string]map[string]json.RawMessage, len(in))
	for _, name := range slices.Sorted(maps.Keys(in)) {
		a, at := in[name], "agents."+name
		switch {
		case !slices.Contains(known, name):
			return nil, invalidDocument("%s: %s", at, &UnknownAgentError{Name: name, Agents: known})
		case a == nil:
			return nil, invalidDocument("%s is null; leave out a sub-agent that has no conversation", at)
		case a.MessageCount < 1:
			return nil, invalidDocument("%s.message_count is %d; a sub-agent's conversation holds at least one message: leave out one that has none", at, a.MessageCount)
		case !paged && a.MessageCount != len(a.Messages):
			return nil, invalidDocument("%s.message_count is %d, but %s.messages holds %d; a document in pages goes with its next_cursor, and its pages follow it", at, a.MessageCount, at, len(a.Messages))
		case paged && a.MessageCount < len(a.Messages):
			return nil, invalidDocument("%s.message_count is %d, but %s.messages holds %d", at, a.MessageCount, at, len(a.Messages))
		}
		state, err := c.state(a.State)
		if err == nil {
			err = checkWindow(a.Window, a.MessageCount)
		}
		if err == nil {
			err = checkPart(a.Window, nil, 0, a.Messages)
		}
		if err != nil {
			return nil, placed(at, err)
		}
		if err := checkAgentItem(at, a); err != nil {
			return nil, err
		}
		states[name] = state
	}
	return states, nil
}

// placed puts a *DocumentError of a part of the document at its place:
// at, then the path the error names.
func placed(at string, err error) error {
	var de *DocumentError
	if errors.As(err, &de) {
		return &DocumentError{Kind: de.Kind, Reason: at + "." + de.Reason}
	}
	return err
}

// page checks a later page of an import in pages, before it is placed.
func (documentChecks) page(p *DocumentPage) error {
	if err := checkFormat(p.Format, p.FormatVersion); err != nil {
		return err
	}
	total := len(p.Messages)
	for _, name := range slices.Sorted(maps.Keys(p.Agents)) {
		a := p.Agents[name]
		if a == nil || a.First == nil || len(a.Messages) == 0 {
			return invalidDocument("agents.%s needs first, the index of its first message, and messages, as GET /sessions/{id}/export?cursor= returns them", name)
		}
		total += len(a.Messages)
	}
	switch {
	case total == 0 || p.First == nil && len(p.Messages) > 0:
		return invalidDocument("a page needs first, the index of its first message, and messages, or agents, as GET /sessions/{id}/export?cursor= returns them")
	case total > MaxImportMessages:
		return documentTooLarge("the page holds %d messages, its agents' included; a page may hold at most %d", total, MaxImportMessages)
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

// checkAgentItem refuses a sub-agent's conversation, at at in the
// document, whose window and state could not fit its conversation item,
// before any of it is written.
func checkAgentItem(at string, a *AgentDocument) error {
	n := 0
	for _, v := range []any{a.Window, a.State} {
		raw, err := json.Marshal(v)
		if err != nil {
			return invalidDocument("%v", err)
		}
		n += len(raw)
	}
	if limit := ddbhistory.MaxItemBytes - 16<<10; n > limit {
		return documentTooLarge("%s: window and state are %d bytes of JSON together; a sub-agent's conversation item holds at most %d of them", at, n, limit)
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

// checkPart checks messages first, first+1 and on of a conversation
// whose window is window, which follow prev: the history's rules, their
// sizes, and the window's start when it is among them.
func checkPart(window agent.WindowState, prev *agent.Message, first int, msgs []agent.Message) error {
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
		if i == window.Removed && i > 0 && !agent.IsTurnStart(m) {
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
