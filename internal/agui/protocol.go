package agui

import "encoding/json"

// ProtocolVersion is the AG-UI version these types are of: @ag-ui/core
// 1.0.0's PROTOCOL_VERSION.
const ProtocolVersion = "1.0"

// RunAgentInput is the body of a run: the thread, the run, the client's
// messages and tools, its context, and the answers to the interrupts the
// last run ended with. Fields this server does not read (forwardedProps,
// parentRunId, protocolVersion, metadata) are accepted and ignored.
type RunAgentInput struct {
	ThreadID string    `json:"threadId"`
	RunID    string    `json:"runId"`
	Messages []Message `json:"messages"`
	Tools    []Tool    `json:"tools"`
	Context  []Context `json:"context"`
	// State is the client's view of the agent state. The server ignores
	// it: state changes only through tools, and STATE_SNAPSHOT tells the
	// client what it is.
	State  json.RawMessage `json:"state,omitempty"`
	Resume []ResumeEntry   `json:"resume,omitempty"`
}

// Message is a message of a thread, of any role: user (Content), assistant
// (Content and ToolCalls), tool (Content and ToolCallID), and the system
// and developer messages this server refuses.
type Message struct {
	ID   string `json:"id"`
	Role string `json:"role"`
	// Content is a string, or for user and tool messages a list of
	// content parts.
	Content    json.RawMessage `json:"content,omitempty"`
	ToolCalls  []ToolCall      `json:"toolCalls,omitempty"`
	ToolCallID string          `json:"toolCallId,omitempty"`
	// Error is a tool message's error, for a client tool that failed.
	Error string `json:"error,omitempty"`
	// SubagentRunID marks a message of a sub-agent's work, which a run
	// streamed (SUBAGENT_STARTED) and a client keeps in its thread. The
	// thread the server holds is the main agent's: a run leaves these out.
	SubagentRunID string `json:"subagentRunId,omitempty"`
}

// The roles of messages.
const (
	RoleUser      = "user"
	RoleAssistant = "assistant"
	RoleTool      = "tool"
	RoleSystem    = "system"
	RoleDeveloper = "developer"
)

// ContentPart is a part of a user or tool message: text, an image or a
// document (audio and video are refused), with a source.
type ContentPart struct {
	Type   string  `json:"type"`
	Text   string  `json:"text,omitempty"`
	Source *Source `json:"source,omitempty"`
}

// Source is where a media part's bytes are: inline ("data", base64), at a
// URL ("url", refused), or a provider's file ("file", refused).
type Source struct {
	Type     string `json:"type"`
	Value    string `json:"value"`
	MimeType string `json:"mimeType,omitempty"`
}

// ToolCall is a call of a tool in an assistant message.
type ToolCall struct {
	ID       string       `json:"id"`
	Type     string       `json:"type"`
	Function FunctionCall `json:"function"`
}

// FunctionCall is a tool call's name and arguments, as JSON text.
type FunctionCall struct {
	Name      string `json:"name"`
	Arguments string `json:"arguments"`
}

// Tool is a tool the client runs itself.
type Tool struct {
	Name        string          `json:"name"`
	Description string          `json:"description"`
	Parameters  json.RawMessage `json:"parameters,omitempty"`
}

// Context is something the client tells the agent for the run.
type Context struct {
	Description string `json:"description"`
	Value       string `json:"value"`
}

// ResumeEntry answers an interrupt of the last run.
type ResumeEntry struct {
	InterruptID string          `json:"interruptId"`
	Status      string          `json:"status"` // "resolved" or "cancelled"
	Payload     json.RawMessage `json:"payload,omitempty"`
}

// The event types this server sends.
const (
	EventRunStarted         = "RUN_STARTED"
	EventRunFinished        = "RUN_FINISHED"
	EventRunError           = "RUN_ERROR"
	EventTextMessageStart   = "TEXT_MESSAGE_START"
	EventTextMessageContent = "TEXT_MESSAGE_CONTENT"
	EventTextMessageEnd     = "TEXT_MESSAGE_END"
	EventToolCallStart      = "TOOL_CALL_START"
	EventToolCallArgs       = "TOOL_CALL_ARGS"
	EventToolCallEnd        = "TOOL_CALL_END"
	EventToolCallResult     = "TOOL_CALL_RESULT"
	EventStateSnapshot      = "STATE_SNAPSHOT"
	EventStateDelta         = "STATE_DELTA"
	EventCustom             = "CUSTOM"
	EventMessagesSnapshot   = "MESSAGES_SNAPSHOT"
	EventSubagentStarted    = "SUBAGENT_STARTED"
	EventSubagentFinished   = "SUBAGENT_FINISHED"
	EventSubagentError      = "SUBAGENT_ERROR"
)

// TokenUsage is what a run's model calls of one model used. InputTokens
// includes the input read from and written to the prompt cache, which
// CachedInputTokens and CacheWriteInputTokens count apart.
type TokenUsage struct {
	Provider              string `json:"provider,omitempty"`
	Model                 string `json:"model,omitempty"`
	InputTokens           int    `json:"inputTokens"`
	OutputTokens          int    `json:"outputTokens"`
	TotalTokens           int    `json:"totalTokens"`
	CachedInputTokens     int    `json:"cachedInputTokens,omitempty"`
	CacheWriteInputTokens int    `json:"cacheWriteInputTokens,omitempty"`
}

// Outcome is how a run finished: "success", or "interrupt" when it waits
// for answers to Interrupts.
type Outcome struct {
	Type string `json:"type"`
	// PendingToolCallIDs, on success, are the client's tool calls that
	// wait for their results.
	PendingToolCallIDs []string    `json:"pendingToolCallIds,omitempty"`
	Interrupts         []Interrupt `json:"interrupts,omitempty"`
}

// Interrupt is something a run waits for: an approval of a tool call, or
// an answer to a question. A resume entry with its id answers it.
type Interrupt struct {
	ID string `json:"id"`
	// SubagentRunID, for an interrupt of a sub-agent's turn, is the
	// sub-agent's run that paused.
	SubagentRunID string `json:"subagentRunId,omitempty"`
	// Reason is "approval" or "question".
	Reason     string `json:"reason"`
	Message    string `json:"message,omitempty"`
	ToolCallID string `json:"toolCallId,omitempty"`
	// ResponseSchema is the JSON Schema of a resolving entry's payload.
	ResponseSchema json.RawMessage `json:"responseSchema,omitempty"`
	// ExpiresAt is when it can no longer be answered, in RFC 3339.
	ExpiresAt string `json:"expiresAt,omitempty"`
	// Metadata carries what the interrupt holds beside: the tool, its
	// input, and what its raiser attached.
	Metadata map[string]any `json:"metadata,omitempty"`
}
