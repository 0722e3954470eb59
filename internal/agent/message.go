package agent

import (
	"encoding/json"
	"slices"
	"strings"
	"unicode/utf8"
)

// Role is the author of a message.
type Role string

// The two roles Bedrock accepts.
const (
	RoleUser      Role = "user"
	RoleAssistant Role = "assistant"
)

// Message is one message of a conversation. It is the form in which
// conversations are stored: unlike Bedrock's types.Message it survives
// encoding/json unchanged.
type Message struct {
	// ID, when set, is the id a client gave the message, such as an AG-UI
	// client's, which the session keeps so that the client knows the
	// message again. The model never sees it.
	ID      string         `json:"id,omitempty"`
	Role    Role           `json:"role"`
	Content []ContentBlock `json:"content"`
}

// ContentBlock is one block of a message. Exactly one field is set. The JSON
// shape of text, image and document blocks is Bedrock's own, so API callers can
// send blocks the way Bedrock documents them.
type ContentBlock struct {
	Text       string           `json:"text,omitempty"`
	Image      *ImageBlock      `json:"image,omitempty"`
	Document   *DocumentBlock   `json:"document,omitempty"`
	ToolUse    *ToolUseBlock    `json:"toolUse,omitempty"`
	ToolResult *ToolResultBlock `json:"toolResult,omitempty"`
	Reasoning  *ReasoningBlock  `json:"reasoning,omitempty"`
}

// ImageBlock is an image. Bedrock accepts images only in user messages and in
// tool results.
type ImageBlock struct {
	// Format is one of png, jpeg, gif or webp.
	Format string `json:"format"`
	Source Source `json:"source"`
}

// DocumentBlock is a document. Bedrock accepts documents only in user messages
// that also carry a text block.
type DocumentBlock struct {
	// Format is one of pdf, csv, doc, docx, xls, xlsx, html, txt or md.
	Format string `json:"format"`
	// Name is shown to the model; Bedrock allows letters, digits, single
	// spaces, hyphens, parentheses and square brackets.
	Name   string `json:"name"`
	Source Source `json:"source"`
}

// Source is where the bytes of an image or document come from. Exactly one
// field is set. Bytes are base64 in JSON.
type Source struct {
	Bytes []byte `json:"bytes,omitempty"`
	// Text is the inline text of a document.
	Text string `json:"text,omitempty"`
	// S3 is an object in Amazon S3.
	S3 *S3Location `json:"s3Location,omitempty"`
}

// S3Location names an object in Amazon S3.
type S3Location struct {
	URI         string `json:"uri"`
	BucketOwner string `json:"bucketOwner,omitempty"`
}

// ToolUseBlock is the model's request to run a tool.
type ToolUseBlock struct {
	ToolUseID string          `json:"toolUseId"`
	Name      string          `json:"name"`
	Input     json.RawMessage `json:"input"`
}

// ToolResultStatus says whether a tool run succeeded.
type ToolResultStatus string

// The statuses Bedrock accepts.
const (
	ToolSuccess ToolResultStatus = "success"
	ToolError   ToolResultStatus = "error"
)

// ToolResultBlock answers the tool use with the same ToolUseID.
type ToolResultBlock struct {
	ToolUseID string              `json:"toolUseId"`
	Status    ToolResultStatus    `json:"status,omitempty"`
	Content   []ToolResultContent `json:"content"`
	// MessageID, when set, is the id a client gave the message that
	// brought this result, a client tool's (see Message.ID). The model
	// never sees it.
	MessageID string `json:"messageId,omitempty"`
}

// ToolResultContent is one part of a tool result. Exactly one field is set.
type ToolResultContent struct {
	Text     string          `json:"text,omitempty"`
	JSON     json.RawMessage `json:"json,omitempty"`
	Image    *ImageBlock     `json:"image,omitempty"`
	Document *DocumentBlock  `json:"document,omitempty"`
}

// ReasoningBlock is the model's visible or redacted reasoning. It must be sent
// back unchanged, signature included, in later calls.
type ReasoningBlock struct {
	Text      string `json:"text,omitempty"`
	Signature string `json:"signature,omitempty"`
	Redacted  []byte `json:"redacted,omitempty"`
}

// Text returns a text content block.
func Text(s string) ContentBlock { return ContentBlock{Text: s} }

// UserText returns a user message holding one text block.
func UserText(s string) Message {
	return Message{Role: RoleUser, Content: []ContentBlock{Text(s)}}
}

// AssistantText returns an assistant message holding one text block.
func AssistantText(s string) Message {
	return Message{Role: RoleAssistant, Content: []ContentBlock{Text(s)}}
}

// TextResult returns a tool result holding one text part.
func TextResult(id string, status ToolResultStatus, text string) *ToolResultBlock {
	return &ToolResultBlock{ToolUseID: id, Status: status, Content: []ToolResultContent{{Text: text}}}
}

// Text returns the message's text blocks joined by newlines.
func (m Message) Text() string {
	var parts []string
	for _, b := range m.Content {
		if b.Text != "" {
			parts = append(parts, b.Text)
		}
	}
	return strings.Join(parts, "\n")
}

// ToolUses returns the message's tool uses, in order.
func (m Message) ToolUses() []*ToolUseBlock {
	var uses []*ToolUseBlock
	for _, b := range m.Content {
		if b.ToolUse != nil {
			uses = append(uses, b.ToolUse)
		}
	}
	return uses
}

// HasToolResults reports whether the message carries any tool result.
func (m Message) HasToolResults() bool {
	for _, b := range m.Content {
		if b.ToolResult != nil {
			return true
		}
	}
	return false
}

// clone returns a copy of m whose content slice can be changed without
// touching m's. The blocks' own pointers are shared.
func (m Message) clone() Message {
	m.Content = append([]ContentBlock(nil), m.Content...)
	return m
}

// StartsTurn reports whether m is the message that starts a turn: the
// user's, with content of the user's own, besides the tool results that a
// message which moved on from pending interrupts carries first.
func StartsTurn(m Message) bool {
	return m.Role == RoleUser && slices.ContainsFunc(m.Content, func(b ContentBlock) bool { return b.ToolResult == nil })
}

// IsTurnStart reports whether a window may begin at m: a user message that
// answers no tool use, so nothing before it is needed to make sense of it.
func IsTurnStart(m Message) bool {
	return m.Role == RoleUser && !m.HasToolResults()
}

func (s Source) size() int { return len(s.Bytes) + len(s.Text) }

func (r *ToolResultBlock) size() int {
	n := 0
	for _, c := range r.Content {
		n += len(c.Text) + len(c.JSON)
		if c.Image != nil {
			n += c.Image.Source.size()
		}
		if c.Document != nil {
			n += c.Document.Source.size()
		}
	}
	return n
}

// Clip cuts s to at most n bytes, never within a character, and marks the
// cut with an ellipsis: for texts quoted in logs, notes and traces.
func Clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "…"
}
