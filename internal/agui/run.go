package agui

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"mime"
	"strconv"
	"strings"

	"github.com/lambda-agent/lambda-agent/internal/agent"
	"github.com/lambda-agent/lambda-agent/internal/turn"
)

// Errors of a run refused before it starts, each the Kind of an *Error.
var (
	// ErrInvalidInput is a RunAgentInput this server cannot run: a
	// message of a role it refuses, content it cannot read, or nothing
	// new to answer.
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
	Transcript(ctx context.Context, owner, id, cursor string, limit int) (*turn.Page, error)
}

// Chat maps a run onto a chat turn of the service, for the caller owner,
// after checking it against the thread the server holds:
//
//   - the thread is the session threadId names, the caller's;
//   - the server holds the history, so a client may send only its new
//     message, or the whole thread (as HttpAgent does): the messages that
//     the server holds already, which carry the ids it gave them (see
//     MessageID) or the client's own, then the new one. A thread that
//     names a message the server does not hold, or holds otherwise, is
//     ErrThreadMismatch, and nothing runs;
//   - the new message is the user's, and its id is stored with it, so that
//     the next whole-thread run knows it;
//   - system and developer messages, and content at a URL, are
//     ErrInvalidInput.
//
// input.state is ignored: state changes only through tools.
func Chat(ctx context.Context, sessions Transcripts, owner string, in *RunAgentInput) (turn.Chat, error) {
	switch {
	case !turn.ValidID(in.ThreadID):
		return turn.Chat{}, invalid("threadId %q must be 1 to 128 letters, digits, '.', '_', ':' or '-', starting with a letter or digit: it names the session", in.ThreadID)
	case in.RunID == "":
		return turn.Chat{}, invalid("runId is required")
	case len(in.Tools) > 0:
		return turn.Chat{}, invalid("tools: this server does not run client-side tools yet; send none")
	case len(in.Context) > 0:
		return turn.Chat{}, invalid("context: this server does not take context yet; send none")
	case len(in.Resume) > 0:
		return turn.Chat{}, invalid("resume: this server does not take answers to interrupts through AG-UI yet; answer them with POST /chat")
	case len(in.Messages) == 0:
		return turn.Chat{}, invalid("messages is empty: a run answers a new user message")
	}
	for i, m := range in.Messages {
		switch m.Role {
		case RoleUser, RoleAssistant, RoleTool:
		case RoleSystem, RoleDeveloper:
			return turn.Chat{}, invalid("messages[%d] is a %s message: the agent's instructions are the server's, so a client sends user messages only", i, m.Role)
		default:
			return turn.Chat{}, invalid("messages[%d].role %q is not one this server reads", i, m.Role)
		}
		if m.ID == "" {
			return turn.Chat{}, invalid("messages[%d].id is required", i)
		}
	}
	known := 0
	if len(in.Messages) > 1 {
		// A whole thread: what the server holds comes first.
		stored, err := thread(ctx, sessions, owner, in.ThreadID)
		if err != nil {
			return turn.Chat{}, err
		}
		if known, err = reconcile(stored, in.Messages); err != nil {
			return turn.Chat{}, err
		}
	}
	fresh := in.Messages[known:]
	switch {
	case len(fresh) == 0:
		return turn.Chat{}, invalid("every message of the thread is stored already: a run answers a new user message")
	case len(fresh) > 1 || fresh[0].Role != RoleUser:
		return turn.Chat{}, mismatch("messages[%d] (%s, id %q) is not a message the server holds, and only one new user message may follow those it holds", known, fresh[0].Role, fresh[0].ID)
	}
	content, err := userContent(fresh[0], known)
	if err != nil {
		return turn.Chat{}, err
	}
	return turn.Chat{
		Request:   turn.Request{Owner: owner, SessionID: in.ThreadID},
		Content:   content,
		MessageID: fresh[0].ID,
	}, nil
}

// MessageID is the AG-UI id of a stored message: the client's, when it
// gave one, else one the stored index makes.
func MessageID(m agent.Message, index int) string {
	if m.ID != "" {
		return m.ID
	}
	return "m-" + strconv.Itoa(index)
}

// ToolMessageID is the AG-UI id of the tool message that holds the result
// of the tool call id.
func ToolMessageID(toolCallID string) string { return "t-" + toolCallID }

// view is a stored message as AG-UI messages: one, or, for a user message
// of tool results, one per result.
type view struct {
	id, role string
	text     string // a user message's text, to compare
}

// thread reads the thread the server holds, as AG-UI messages; none for a
// session that does not exist yet.
func thread(ctx context.Context, sessions Transcripts, owner, id string) ([]view, error) {
	var out []view
	for cursor := ""; ; {
		page, err := sessions.Transcript(ctx, owner, id, cursor, turn.MaxPageSize)
		if errors.Is(err, turn.ErrNotFound) {
			return nil, nil
		}
		if err != nil {
			return nil, err
		}
		for k, m := range page.Messages {
			out = append(out, views(m, page.First+k)...)
		}
		if cursor = page.NextCursor; cursor == "" {
			return out, nil
		}
	}
}

func views(m agent.Message, index int) []view {
	if m.Role == agent.RoleUser && m.HasToolResults() {
		var out []view
		for _, b := range m.Content {
			if r := b.ToolResult; r != nil {
				out = append(out, view{id: ToolMessageID(r.ToolUseID), role: RoleTool})
			}
		}
		return out
	}
	v := view{id: MessageID(m, index), role: string(m.Role)}
	if m.Role == agent.RoleUser {
		var texts []string
		for _, b := range m.Content {
			if b.Text != "" {
				texts = append(texts, b.Text)
			}
		}
		v.text = strings.Join(texts, "\n")
	}
	return []view{v}
}

// reconcile matches the messages of a whole-thread run with the thread
// the server holds, and returns how many of them it holds: they come
// first, each under the id and the role it has on the server.
func reconcile(stored []view, msgs []Message) (int, error) {
	for i, m := range msgs {
		if i == len(stored) {
			return i, nil // the rest are new
		}
		s := stored[i]
		if m.ID != s.id || m.Role != s.role {
			return 0, mismatch("messages[%d] is %s message %q, but the server holds %s message %q there; send the thread as the server holds it (GET /sessions/{threadId}), or only the new message", i, m.Role, m.ID, s.role, s.id)
		}
		if text, ok := plainText(m.Content); ok && m.Role == RoleUser && s.text != "" && text != s.text {
			return 0, mismatch("messages[%d] (id %q) differs from the message the server holds under that id", i, m.ID)
		}
	}
	if len(msgs) < len(stored) {
		return 0, mismatch("the thread holds %d of the %d messages the server holds; send all of them and the new one, or only the new one", len(msgs), len(stored))
	}
	return len(msgs), nil
}

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

// userContent turns the content of a user message into the blocks of a
// turn's input: text, and images and documents whose bytes are inline.
func userContent(m Message, i int) ([]agent.ContentBlock, error) {
	raw := bytes.TrimSpace(m.Content)
	if len(raw) == 0 || raw[0] == '"' {
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			return nil, invalid("messages[%d].content must be a string or a list of content parts", i)
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
