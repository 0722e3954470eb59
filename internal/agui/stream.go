package agui

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"

	"github.com/lambda-agent/lambda-agent/internal/agent"
	"github.com/lambda-agent/lambda-agent/internal/turn"
)

// Stream writes a run as AG-UI events, as Server-Sent Events whose data
// lines hold one JSON event each. It is the turn's sink: the service calls
// Start when the turn starts to run, then Event as things happen; the
// caller ends the run with Finish or Fail.
//
// The ids of the messages it streams are the ones the thread's messages
// have once stored (MessageID, ToolMessageID), so that a client that keeps
// the thread from the events, as HttpAgent does, sends the server back
// the ids it knows.
type Stream struct {
	mu              sync.Mutex
	w               http.ResponseWriter
	threadID, runID string
	model           string
	started         bool
	next            int    // the stored index of the next assistant message
	message         string // the id of the assistant message under way
	open            bool   // a text message of it is open
	afterResults    bool   // the last events were tool results
	ended           bool
}

var _ turn.Sink = (*Stream)(nil)

// NewStream returns the stream of the run runID on threadID, whose usage is
// of model.
func NewStream(w http.ResponseWriter, threadID, runID, model string) *Stream {
	return &Stream{w: w, threadID: threadID, runID: runID, model: model}
}

// Started reports whether the stream has begun: past it, a failure is a
// RUN_ERROR event, not a status.
func (s *Stream) Started() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.started
}

// Start sends the headers and RUN_STARTED. first is the stored index of the
// turn's first message, the user's: the assistant's follow it.
func (s *Stream) Start(_ string, first int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.started {
		return
	}
	h := s.w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	s.w.WriteHeader(http.StatusOK)
	s.started, s.next = true, first+1
	s.write(map[string]any{"type": EventRunStarted, "threadId": s.threadID, "runId": s.runID})
}

// Event sends what happened in the turn: a piece of text, a tool call, or
// a tool's result.
func (s *Stream) Event(e agent.Event) {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case e.Text != "":
		s.assistant()
		if !s.open {
			s.write(map[string]any{"type": EventTextMessageStart, "messageId": s.message, "role": RoleAssistant})
			s.open = true
		}
		s.write(map[string]any{"type": EventTextMessageContent, "messageId": s.message, "delta": e.Text})
	case e.ToolUse != nil:
		s.assistant()
		s.closeText()
		u := e.ToolUse
		s.write(map[string]any{"type": EventToolCallStart, "toolCallId": u.ToolUseID, "toolCallName": u.Name, "parentMessageId": s.message})
		s.write(map[string]any{"type": EventToolCallArgs, "toolCallId": u.ToolUseID, "delta": string(inputOf(u))})
		s.write(map[string]any{"type": EventToolCallEnd, "toolCallId": u.ToolUseID})
	case e.ToolResult != nil:
		s.closeText()
		s.afterResults = true
		r := e.ToolResult
		s.write(map[string]any{"type": EventToolCallResult, "messageId": ToolMessageID(r.ToolUseID), "toolCallId": r.ToolUseID, "role": RoleTool, "content": resultText(r)})
	}
}

// assistant makes sure an assistant message is under way: the first of
// the turn, or the next after tool results.
func (s *Stream) assistant() {
	if s.message != "" && !s.afterResults {
		return
	}
	if s.message != "" {
		s.next += 2 // the results are a user message between
	}
	s.message = MessageID(agent.Message{}, s.next)
	s.open, s.afterResults = false, false
}

func (s *Stream) closeText() {
	if s.open {
		s.write(map[string]any{"type": EventTextMessageEnd, "messageId": s.message})
		s.open = false
	}
}

// Finish ends a turn that the service committed (or replayed): the agent
// state as it stands, when the turn ran now, and RUN_FINISHED with the
// turn's usage.
func (s *Stream) Finish(out *turn.Outcome[turn.ChatAnswer], first int) {
	if !s.Started() {
		s.Start(out.Answer.SessionID, first)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.closeText()
	if out.Result != nil {
		state := map[string]json.RawMessage{}
		for k, v := range out.Result.State {
			state[k] = v
		}
		s.write(map[string]any{"type": EventStateSnapshot, "snapshot": state})
	}
	u := out.Answer.Usage
	in := u.InputTokens + u.CacheReadInputTokens + u.CacheWriteInputTokens
	usage := TokenUsage{
		Provider: "aws.bedrock", Model: s.model,
		InputTokens: in, OutputTokens: u.OutputTokens, TotalTokens: in + u.OutputTokens,
		CachedInputTokens: u.CacheReadInputTokens, CacheWriteInputTokens: u.CacheWriteInputTokens,
	}
	s.write(map[string]any{"type": EventRunFinished, "threadId": s.threadID, "runId": s.runID, "outcome": Outcome{Type: "success"}, "usage": []TokenUsage{usage}})
	s.ended = true
}

// Fail ends a run that failed after the stream began with RUN_ERROR,
// carrying the error's code. It returns false when the stream has not
// begun: the caller answers with a status instead.
func (s *Stream) Fail(code, message string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.started {
		return false
	}
	if !s.ended {
		s.closeText()
		s.write(map[string]any{"type": EventRunError, "code": code, "message": message})
		s.ended = true
	}
	return true
}

// write sends one event and flushes it. A client that went away is not an
// error: the turn goes on, and commits or not, on its own.
func (s *Stream) write(event map[string]any) {
	b, err := json.Marshal(event)
	if err != nil {
		b, _ = json.Marshal(map[string]any{"type": EventRunError, "code": "internal", "message": "an event could not be encoded"})
	}
	_, _ = fmt.Fprintf(s.w, "data: %s\n\n", b)
	if f, ok := s.w.(http.Flusher); ok {
		f.Flush()
	}
}

func inputOf(u *agent.ToolUseBlock) json.RawMessage {
	if len(u.Input) == 0 {
		return json.RawMessage("{}")
	}
	return u.Input
}

// resultText is a tool result as the text of a tool message.
func resultText(r *agent.ToolResultBlock) string {
	var parts []string
	for _, c := range r.Content {
		switch {
		case c.Text != "":
			parts = append(parts, c.Text)
		case c.JSON != nil:
			parts = append(parts, string(c.JSON))
		case c.Image != nil:
			parts = append(parts, "[an image]")
		case c.Document != nil:
			parts = append(parts, "[a document]")
		}
	}
	return strings.Join(parts, "\n")
}
