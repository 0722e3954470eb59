package agui

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"mime"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/lambda-agent/lambda-agent/internal/agent"
	"github.com/lambda-agent/lambda-agent/internal/turn"
)

// Errors of a run refused before it starts, each the Kind of an *Error.
var (
	// ErrInvalidInput is a RunAgentInput this server cannot run: a
	// message of a role it refuses, content it cannot read, or an answer
	// to an interrupt of the wrong shape.
	ErrInvalidInput = errors.New("invalid run input")
	// ErrThreadMismatch is a thread whose messages contradict the ones
	// the server holds for it.
	ErrThreadMismatch = errors.New("the thread contradicts the stored one")
)

// Error says why a run was refused before it started. It matches its
// Kind.
type Error struct {
	Kind   error
	Reason string
}

func (e *Error) Error() string { return e.Reason }

// Is makes errors.Is(err, e.Kind) true.
func (e *Error) Is(target error) bool { return target == e.Kind }

func invalid(format string, args ...any) error {
	return &Error{Kind: ErrInvalidInput, Reason: fmt.Sprintf(format, args...)}
}

func mismatch(format string, args ...any) error {
	return &Error{Kind: ErrThreadMismatch, Reason: fmt.Sprintf(format, args...)}
}

// Transcripts reads the threads the server holds: *turn.Service.
type Transcripts interface {
	Tail(ctx context.Context, owner, id string, n int) (*turn.Page, error)
}

// maxIDBytes bounds the id of a client's message, which the session keeps.
const maxIDBytes = 256

// tailSize is how many of a thread's last stored messages a run reads to
// reconcile the client's thread with: one read, however long the thread.
const tailSize = 64

// Run is what a RunAgentInput comes to, once checked against the thread
// the server holds.
type Run struct {
	// Chat is the turn to run; Replay, when true, says there is none: the
	// server holds every message of the thread, and the run answers with
	// what it holds.
	Chat   turn.Chat
	Replay bool
	// Missing are the stored messages after the client's last that the
	// client lacks, from stored index MissingFrom: a run sends them
	// before its own, so that the client catches up.
	Missing     []agent.Message
	MissingFrom int
	// Snapshot, when set, is the whole thread as the client should hold
	// it (MESSAGES_SNAPSHOT): the client lacks messages the server holds,
	// and sends a new one after them.
	Snapshot []Message
	// State is the agent state the run found, and Pending what the thread
	// waits for: a replay's outcome.
	State   map[string]json.RawMessage
	Pending []agent.Interrupt
	waiting *agent.Pending
	// Known are the ids of the messages the client sent, which the run
	// need not send back.
	Known map[string]bool
}

// Prepare checks a run against the thread the server holds, for the
// caller owner, and maps it onto a chat turn of the service:
//
//   - the thread is the session threadId names, the caller's;
//   - the server holds the history. A client may send only what is new,
//     or the whole thread (as HttpAgent does), or any part of it that
//     ends with what is new: the messages the server holds carry the ids
//     it gave them (MessageID, ToolMessageID) or the client's own. The
//     last of them the server holds marks where the new ones begin; the
//     ones before it must be the server's, in its order, as far back as
//     the last tailSize stored messages, or the run is ErrThreadMismatch
//     and nothing runs;
//   - what is new is a user message, whose id is stored with it; or tool
//     messages, each the result of a client tool's call the thread waits
//     for; or nothing, with resume entries that answer the interrupts the
//     thread waits for. A run that brings nothing new and no resume
//     replays: the server runs nothing, and answers with the messages
//     after the client's last;
//   - system and developer messages, and content at a URL, are
//     ErrInvalidInput;
//   - the messages of sub-agents' work (SubagentRunID), which a client
//     keeps from the events of earlier runs, are left out: the thread is
//     the main agent's.
//
// input.state is ignored: state changes only through tools.
func Prepare(ctx context.Context, sessions Transcripts, owner string, in *RunAgentInput) (*Run, error) {
	if slices.ContainsFunc(in.Messages, func(m Message) bool { return m.SubagentRunID != "" }) {
		main := *in
		main.Messages = slices.DeleteFunc(slices.Clone(in.Messages), func(m Message) bool { return m.SubagentRunID != "" })
		in = &main
	}
	if err := checkInput(in); err != nil {
		return nil, err
	}
	stored, err := tail(ctx, sessions, owner, in.ThreadID)
	if err != nil {
		return nil, err
	}
	r := &Run{State: stored.state, Known: make(map[string]bool, len(in.Messages))}
	for _, m := range in.Messages {
		r.Known[m.ID] = true
	}
	r.Pending, r.waiting = stored.pending.Live(time.Now()), stored.pending
	known, last, err := reconcile(stored, in.Messages)
	if err != nil {
		return nil, err
	}
	if last >= 0 {
		// What the client lacks: the stored messages after its last.
		if k := stored.entries[last].index + 1 - stored.first; k < len(stored.msgs) {
			r.Missing, r.MissingFrom = stored.msgs[k:], stored.entries[last].index+1
		}
	}
	fresh := in.Messages[known:]
	if len(fresh) > 0 && len(r.Missing) > 0 {
		// The client missed the end of a turn, as when a run's stream
		// broke off after its commit, and sends a new message. When it
		// sent its whole thread, and the server read all of its own, the
		// client gets the thread as the server holds it: the new message
		// then follows the ones it missed.
		if stored.first != 0 || len(stored.msgs) != stored.count || !slices.Contains(stored.entries[0].ids, in.Messages[0].ID) {
			return nil, mismatch("the server holds %d messages after messages[%d] (id %q) that the thread lacks, before the new ones; send the thread as the server holds it (GET /sessions/{threadId}), or only the new message", len(r.Missing), known-1, in.Messages[known-1].ID)
		}
		r.Snapshot, r.Missing = Snapshot(stored.msgs, 0, fresh), nil
	}
	tools, context := clientInput(in)
	r.Chat = turn.Chat{
		Request:     turn.Request{Owner: owner, SessionID: in.ThreadID},
		ClientTools: tools,
		Context:     context,
	}
	if err := r.turn(fresh, in, known); err != nil {
		return nil, err
	}
	return r, nil
}

// checkInput checks what a run brings on its own.
func checkInput(in *RunAgentInput) error {
	switch {
	case !turn.ValidID(in.ThreadID):
		return invalid("threadId %q must be 1 to 128 letters, digits, '.', '_', ':' or '-', starting with a letter or digit: it names the session", in.ThreadID)
	case in.RunID == "":
		return invalid("runId is required")
	case len(in.Messages) == 0 && len(in.Resume) == 0:
		return invalid("messages is empty: a run answers a new message, or resumes the thread")
	}
	seen := make(map[string]bool, len(in.Messages))
	for i, m := range in.Messages {
		switch m.Role {
		case RoleUser, RoleAssistant, RoleTool:
		case RoleSystem, RoleDeveloper:
			return invalid("messages[%d] is a %s message: the agent's instructions are the server's, so a client sends user messages, and tool messages with its tools' results", i, m.Role)
		default:
			return invalid("messages[%d].role %q is not one this server reads", i, m.Role)
		}
		switch {
		case m.ID == "":
			return invalid("messages[%d].id is required", i)
		case len(m.ID) > maxIDBytes:
			return invalid("messages[%d].id is %d bytes; at most %d", i, len(m.ID), maxIDBytes)
		case seen[m.ID]:
			return invalid("messages[%d].id %q is the id of an earlier message", i, m.ID)
		}
		seen[m.ID] = true
	}
	return nil
}

// clientInput maps the run's tools and context onto the turn's.
func clientInput(in *RunAgentInput) ([]agent.ToolSpec, []agent.ContextEntry) {
	var tools []agent.ToolSpec
	for _, t := range in.Tools {
		tools = append(tools, agent.ToolSpec{Name: t.Name, Description: t.Description, InputSchema: t.Parameters})
	}
	var context []agent.ContextEntry
	for _, c := range in.Context {
		context = append(context, agent.ContextEntry{Description: c.Description, Value: c.Value})
	}
	return tools, context
}

// turn makes the run's turn of what is new: a user message, or the
// answers to what the thread waits for, or, with neither, a replay.
func (r *Run) turn(fresh []Message, in *RunAgentInput, known int) error {
	var results []agent.Response
	var user *Message
	for i := range fresh {
		m := &fresh[i]
		at := known + i
		switch {
		case m.Role == RoleUser && i == len(fresh)-1:
			user = m
		case m.Role == RoleTool && r.held(m.ToolCallID):
			// A result the server ran and holds until the client's come:
			// the client has it from the run that ran it.
		case m.Role == RoleTool:
			res, err := toolResult(*m, at)
			if err != nil {
				return err
			}
			results = append(results, agent.Response{InterruptID: m.ToolCallID, Result: res})
		default:
			return mismatch("messages[%d] (%s, id %q) is not a message the server holds; after those it holds come the new user message, or the results of the client's tools", at, m.Role, m.ID)
		}
	}
	responses, err := r.responses(in.Resume)
	if err != nil {
		return err
	}
	responses = append(responses, results...)
	switch {
	case user != nil && len(results) > 0:
		return invalid("the run brings the client tools' results and a new user message: send the results first, in a run of their own, and the message once that run finished")
	case user != nil && len(responses) > 0:
		// Resume entries beside a new message may only cancel what waits.
		for _, resp := range responses {
			if resp.Approve == nil || *resp.Approve || resp.Answer != "" {
				return invalid("resume: with a new user message, resume entries may only cancel the interrupts; resolve them in a run of their own")
			}
		}
		r.Chat.DenyPending = true
		fallthrough
	case user != nil:
		content, err := content(*user, known+len(fresh)-1)
		if err != nil {
			return err
		}
		r.Chat.Content, r.Chat.MessageID = content, user.ID
	case len(responses) > 0:
		r.Chat.Responses = responses
	default:
		r.Replay = true
	}
	return nil
}

// held reports whether the server holds the result of the tool call id
// among what the thread waits for: a tool that ran beside a client tool's
// call that waits.
func (r *Run) held(id string) bool {
	return r.waiting != nil && slices.ContainsFunc(r.waiting.Results, func(b *agent.ToolResultBlock) bool { return b.ToolUseID == id })
}

// responses maps resume entries onto responses to the interrupts the
// thread waits for. An entry that names none is passed on as a denial,
// for the service to refuse with the others.
func (r *Run) responses(entries []ResumeEntry) ([]agent.Response, error) {
	var out []agent.Response
	for i, e := range entries {
		at := fmt.Sprintf("resume[%d]", i)
		var in agent.Interrupt
		for _, p := range r.Pending {
			if p.ID == e.InterruptID {
				in = p
			}
		}
		var payload struct {
			Answer string `json:"answer"`
			Reason string `json:"reason"`
		}
		if len(e.Payload) > 0 && string(e.Payload) != "null" {
			var s string
			if err := json.Unmarshal(e.Payload, &s); err == nil && in.Kind == agent.KindQuestion {
				payload.Answer = s
			} else if err := json.Unmarshal(e.Payload, &payload); err != nil {
				return nil, invalid("%s.payload must be an object, as the interrupt's responseSchema says: %v", at, err)
			}
		}
		resp := agent.Response{InterruptID: e.InterruptID, Message: payload.Reason}
		switch {
		case e.Status == "cancelled":
			resp.Approve = new(false)
		case e.Status != "resolved":
			return nil, invalid("%s.status %q is neither \"resolved\" nor \"cancelled\"", at, e.Status)
		case in.Kind == agent.KindQuestion:
			if strings.TrimSpace(payload.Answer) == "" {
				return nil, invalid("%s answers the question %q: its payload needs an answer, {\"answer\": \"...\"}", at, in.ID)
			}
			resp.Answer = payload.Answer
		case in.Kind == agent.KindClientTool:
			return nil, invalid("%s resolves %s, a call of the client tool %s: send its result as a tool message with toolCallId %q instead, or cancel it", at, in.ID, in.Tool, in.ID)
		default:
			resp.Approve = new(true)
		}
		out = append(out, resp)
	}
	return out, nil
}

// MessageID is the AG-UI id of a stored message: the client's, when it
// gave one, else one the stored index makes.
func MessageID(m agent.Message, index int) string {
	if m.ID != "" {
		return m.ID
	}
	return "m-" + strconv.Itoa(index)
}

// ToolMessageID is the AG-UI id of the tool message that holds a tool's
// result: the client's, for a client tool's result, else one the tool
// call id makes.
func ToolMessageID(r *agent.ToolResultBlock) string {
	if r.MessageID != "" {
		return r.MessageID
	}
	return "t-" + r.ToolUseID
}

// thread is the tail of a stored thread.
type thread struct {
	msgs    []agent.Message // the last stored messages
	first   int             // the stored index of msgs[0]
	count   int             // how many messages the thread holds
	entries []entry         // msgs as AG-UI messages, grouped
	state   map[string]json.RawMessage
	pending *agent.Pending
}

// entry is one message of a thread as AG-UI has it, or a group of
// consecutive tool messages, which a client may hold in any order.
type entry struct {
	ids   []string // one id, or a group's, sorted
	role  string
	text  string // a user message's text, to compare
	index int    // the stored index of the message it comes from
}

// tail reads the last tailSize messages of the thread the server holds;
// none for a session that does not exist yet.
func tail(ctx context.Context, sessions Transcripts, owner, id string) (*thread, error) {
	t := &thread{}
	page, err := sessions.Tail(ctx, owner, id, tailSize)
	switch {
	case errors.Is(err, turn.ErrNotFound):
		return t, nil
	case err != nil:
		return nil, err
	}
	t.state, t.pending, t.count = page.State, page.Pending, page.Count
	t.first, t.msgs = page.First, page.Messages
	for k, m := range t.msgs {
		t.entries = append(t.entries, entries(m, t.first+k)...)
	}
	return t, nil
}

// entries is a stored message as AG-UI messages: a user message of tool
// results is a group of tool messages, followed by the user's own, when
// the message holds more than the results.
func entries(m agent.Message, index int) []entry {
	if m.Role == agent.RoleAssistant {
		return []entry{{ids: []string{MessageID(m, index)}, role: RoleAssistant, index: index}}
	}
	var tools []string
	var texts []string
	other := false
	for _, b := range m.Content {
		switch {
		case b.ToolResult != nil:
			tools = append(tools, ToolMessageID(b.ToolResult))
		case b.Text != "":
			texts, other = append(texts, b.Text), true
		default:
			other = true
		}
	}
	var out []entry
	if len(tools) > 0 {
		out = append(out, entry{ids: sorted(tools), role: RoleTool, index: index})
	}
	if other || len(tools) == 0 {
		out = append(out, entry{ids: []string{MessageID(m, index)}, role: RoleUser, text: strings.Join(texts, "\n"), index: index})
	}
	return out
}

// reconcile finds where the messages of a run meet the thread the server
// holds. It returns how many of msgs the server holds, those before the
// new ones, and the stored entry of the last of them (-1 for none).
func reconcile(stored *thread, msgs []Message) (int, int, error) {
	sent := group(msgs)
	// The last sent entry the server holds.
	at := make(map[string]int, len(stored.entries))
	for k, e := range stored.entries {
		for _, id := range e.ids {
			at[id] = k
		}
	}
	s, k := -1, -1
	for i := len(sent) - 1; i >= 0 && k < 0; i-- {
		if j, ok := at[sent[i].ids[0]]; ok {
			s, k = i, j
		}
	}
	if k < 0 {
		return 0, -1, nil // all new, or older than the tail: Run.turn tells
	}
	// The ones before it must be the server's, as far back as it read.
	for d := 0; s-d >= 0 && k-d >= 0; d++ {
		got, want := sent[s-d], stored.entries[k-d]
		if got.role != want.role || strings.Join(got.ids, ",") != strings.Join(want.ids, ",") {
			return 0, -1, mismatch("messages[%d] is %s message %q, but the server holds %s message %q there; send the thread as the server holds it (GET /sessions/{threadId}), or only the new message", got.index, got.role, strings.Join(got.ids, ", "), want.role, strings.Join(want.ids, ", "))
		}
		if got.role == RoleUser && want.text != "" && got.text != "" && got.text != want.text {
			return 0, -1, mismatch("messages[%d] (id %q) differs from the message the server holds under that id", got.index, got.ids[0])
		}
	}
	return sent[s].end, k, nil
}

// sentEntry is a sent message as an entry, or a group of consecutive
// tool messages; index is the first's, end one past the last's.
type sentEntry struct {
	entry
	end int
}

// group groups a run's messages as entries are grouped.
func group(msgs []Message) []sentEntry {
	var out []sentEntry
	for i, m := range msgs {
		if n := len(out); m.Role == RoleTool && n > 0 && out[n-1].role == RoleTool && out[n-1].end == i {
			out[n-1].ids = sorted(append(out[n-1].ids, m.ID))
			out[n-1].end = i + 1
			continue
		}
		e := sentEntry{entry: entry{ids: []string{m.ID}, role: m.Role, index: i}, end: i + 1}
		if m.Role == RoleUser {
			e.text, _ = plainText(m.Content)
		}
		out = append(out, e)
	}
	return out
}

func sorted(ids []string) []string { return slices.Sorted(slices.Values(ids)) }

// plainText returns a message's content as text, when it is only text.
func plainText(raw json.RawMessage) (string, bool) {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s, true
	}
	var parts []ContentPart
	if json.Unmarshal(raw, &parts) != nil {
		return "", false
	}
	var texts []string
	for _, p := range parts {
		if p.Type != "text" {
			return "", false
		}
		texts = append(texts, p.Text)
	}
	return strings.Join(texts, "\n"), true
}

// toolResult is a tool message's content as the result of the client
// tool's call it answers.
func toolResult(m Message, i int) (*agent.ToolResultBlock, error) {
	if m.ToolCallID == "" {
		return nil, invalid("messages[%d] is a tool message without a toolCallId", i)
	}
	blocks, err := content(m, i)
	if err != nil {
		return nil, err
	}
	r := &agent.ToolResultBlock{ToolUseID: m.ToolCallID, Status: agent.ToolSuccess, MessageID: m.ID}
	if m.Error != "" {
		r.Status = agent.ToolError
		r.Content = append(r.Content, agent.ToolResultContent{Text: m.Error})
	}
	for _, b := range blocks {
		r.Content = append(r.Content, agent.ToolResultContent{Text: b.Text, Image: b.Image, Document: b.Document})
	}
	return r, nil
}

// content turns a message's content into blocks: text, and images and
// documents whose bytes are inline.
func content(m Message, i int) ([]agent.ContentBlock, error) {
	raw := bytes.TrimSpace(m.Content)
	if len(raw) == 0 || raw[0] == '"' {
		var s string
		if len(raw) > 0 {
			if err := json.Unmarshal(raw, &s); err != nil {
				return nil, invalid("messages[%d].content must be a string or a list of content parts", i)
			}
		}
		return []agent.ContentBlock{{Text: s}}, nil
	}
	var parts []ContentPart
	if err := json.Unmarshal(raw, &parts); err != nil {
		return nil, invalid("messages[%d].content must be a string or a list of content parts: %v", i, err)
	}
	blocks := make([]agent.ContentBlock, 0, len(parts))
	for k, p := range parts {
		at := fmt.Sprintf("messages[%d].content[%d]", i, k)
		switch p.Type {
		case "text":
			blocks = append(blocks, agent.ContentBlock{Text: p.Text})
		case "image", "document":
			src, err := inline(at, p.Source)
			if err != nil {
				return nil, err
			}
			format := formatOf(p.Source.MimeType)
			if p.Type == "image" {
				blocks = append(blocks, agent.ContentBlock{Image: &agent.ImageBlock{Format: format, Source: src}})
			} else {
				blocks = append(blocks, agent.ContentBlock{Document: &agent.DocumentBlock{Format: format, Name: fmt.Sprintf("document %d", k+1), Source: src}})
			}
		default:
			return nil, invalid("%s is a %q part; this server reads text, image and document parts", at, p.Type)
		}
	}
	return blocks, nil
}

// inline returns a media part's bytes, which must be in the message.
func inline(at string, src *Source) (agent.Source, error) {
	switch {
	case src == nil:
		return agent.Source{}, invalid("%s has no source", at)
	case src.Type != "data":
		return agent.Source{}, invalid("%s.source is a %q source; send the bytes in the message (a \"data\" source): this server fetches nothing", at, src.Type)
	}
	b, err := base64.StdEncoding.DecodeString(src.Value)
	if err != nil {
		return agent.Source{}, invalid("%s.source.value must be standard base64: %v", at, err)
	}
	return agent.Source{Bytes: b}, nil
}

// formatOf is the format a MIME type names, as the agent spells formats:
// image/png is png, application/pdf pdf.
func formatOf(mimeType string) string {
	mt, _, err := mime.ParseMediaType(mimeType)
	if err != nil {
		return mimeType
	}
	switch mt {
	case "application/pdf":
		return "pdf"
	case "text/plain":
		return "txt"
	case "text/markdown":
		return "md"
	case "text/csv":
		return "csv"
	case "text/html":
		return "html"
	case "application/msword":
		return "doc"
	case "application/vnd.openxmlformats-officedocument.wordprocessingml.document":
		return "docx"
	case "application/vnd.ms-excel":
		return "xls"
	case "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet":
		return "xlsx"
	}
	_, sub, _ := strings.Cut(mt, "/")
	return sub
}
