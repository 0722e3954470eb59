package agui

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/lambda-agent/lambda-agent/internal/agent"
	"github.com/lambda-agent/lambda-agent/internal/turn"
)

// Stream writes a run as AG-UI events, as Server-Sent Events whose data
// lines hold one JSON event each. It is the turn's sink: the service calls
// Start when the turn starts to run, then Event as things happen; the
// caller ends the run with Finish, Replay or Fail.
//
// The ids of the messages it streams are the ones the thread's messages
// have once stored (MessageID, ToolMessageID), so that a client that keeps
// the thread from the events, as HttpAgent does, sends the server back
// the ids it knows. Every stored message of the run reaches the client:
// the results that a person's or the client's response made come as
// TOOL_CALL_RESULT, as the tools' own do, but for the client's own
// results, which it holds already.
type Stream struct {
	mu              sync.Mutex
	w               http.ResponseWriter
	run             *Run
	threadID, runID string
	model           string
	started         bool
	next            int    // the stored index of the next assistant message
	message         string // the id of the assistant message under way
	open            bool   // a text message of it is open
	afterResults    bool   // the last events were tool results
	ended           bool
	sent            map[string]bool // the ids of the messages sent
	state           map[string]json.RawMessage
	subs            map[string]*subagentRun // the delegations under way, by id
}

// subagentRun is a delegation's part of the stream: its messages' ids are
// its own, as the thread the server holds has none of them.
type subagentRun struct {
	id           string
	message      string // the id of its assistant message under way
	n            int    // its assistant messages so far
	open         bool
	afterResults bool
}

var _ turn.Sink = (*Stream)(nil)

// NewStream returns the stream of run, which Prepare made of the run runID
// on threadID; its usage is of model.
func NewStream(w http.ResponseWriter, run *Run, threadID, runID, model string) *Stream {
	sent := make(map[string]bool, len(run.Known))
	for id := range run.Known {
		sent[id] = true
	}
	return &Stream{w: w, run: run, threadID: threadID, runID: runID, model: model, sent: sent, state: run.State}
}

// Started reports whether the stream has begun: past it, a failure is a
// RUN_ERROR event, not a status.
func (s *Stream) Started() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.started
}

// Start sends the headers and RUN_STARTED, the thread as the client should
// hold it when it lacks messages the server holds (MESSAGES_SNAPSHOT, or
// their events), and the agent state (STATE_SNAPSHOT). first is the stored
// index of the turn's first message, the user's: the assistant's follow
// it.
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
	switch {
	case s.run.Snapshot != nil:
		s.write(map[string]any{"type": EventMessagesSnapshot, "messages": s.run.Snapshot})
	case len(s.run.Missing) > 0:
		s.messages(s.run.Missing, s.run.MissingFrom)
	}
	s.write(map[string]any{"type": EventStateSnapshot, "snapshot": nonNil(s.state)})
}

// CustomToolProgress names the CUSTOM events of a tool's progress
// (agent.ToolProgress): {"toolCallId","delta"}.
const CustomToolProgress = "tool_progress"

// Event sends what happened in the turn: a piece of text, a tool call, a
// tool's result, or a change of the agent state (STATE_DELTA).
func (s *Stream) Event(e agent.Event) {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case e.Delegation != nil:
		s.delegation(e.Delegation)
	case e.Agent != nil:
		s.subagentEvent(e)
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
		s.toolCall(e.ToolUse, s.message, "")
	case e.ToolResult != nil:
		s.closeText()
		s.afterResults = true
		s.result(e.ToolResult)
	case e.ToolProgress != nil:
		// AG-UI has no event of its own for it: a CUSTOM event, which a
		// client that knows it may show beside the tool call.
		s.write(map[string]any{"type": EventCustom, "name": CustomToolProgress, "value": map[string]string{"toolCallId": e.ToolProgress.ToolUseID, "delta": e.ToolProgress.Text}})
	case e.State != nil:
		if patch := diff(s.state, e.State); len(patch) > 0 {
			s.write(map[string]any{"type": EventStateDelta, "delta": patch})
		}
		s.state = e.State
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
	s.sent[s.message] = true
	s.open, s.afterResults = false, false
}

func (s *Stream) closeText() {
	if s.open {
		s.write(map[string]any{"type": EventTextMessageEnd, "messageId": s.message})
		s.open = false
	}
}

// toolCall sends a call of a tool in the assistant message parent; a
// sub-agent's, when subagentRunID is set.
func (s *Stream) toolCall(u *agent.ToolUseBlock, parent, subagentRunID string) {
	for _, ev := range []map[string]any{
		{"type": EventToolCallStart, "toolCallId": u.ToolUseID, "toolCallName": u.Name, "parentMessageId": parent},
		{"type": EventToolCallArgs, "toolCallId": u.ToolUseID, "delta": string(inputOf(u))},
		{"type": EventToolCallEnd, "toolCallId": u.ToolUseID},
	} {
		if subagentRunID != "" {
			ev["subagentRunId"] = subagentRunID
		}
		s.write(ev)
	}
}

// delegation opens a sub-agent's run (SUBAGENT_STARTED), under the tool
// call that delegated, or ends it (SUBAGENT_FINISHED or SUBAGENT_ERROR).
func (s *Stream) delegation(d *agent.Delegation) {
	id := d.Run.ID
	switch {
	case !d.Done && s.subs[id] != nil, d.Done && d.Continues:
		// The two steps of a resume are one run of the sub-agent.
		if sub := s.subs[id]; sub != nil {
			s.closeSubText(sub)
		}
		return
	}
	if !d.Done {
		s.closeText()
		ev := map[string]any{"type": EventSubagentStarted, "subagentRunId": id, "name": d.Run.Name, "parentToolCallId": id, "parentMessageId": s.message}
		if d.Run.Description != "" {
			ev["description"] = d.Run.Description
		}
		if p := s.subs[d.Run.ParentID]; p != nil {
			s.closeSubText(p)
			ev["parentSubagentRunId"], ev["parentMessageId"] = p.id, p.message
		}
		if s.subs == nil {
			s.subs = map[string]*subagentRun{}
		}
		s.subs[id] = &subagentRun{id: id}
		s.write(ev)
		return
	}
	if sub := s.subs[id]; sub != nil {
		s.closeSubText(sub)
		delete(s.subs, id)
	}
	if d.Err != "" {
		s.write(map[string]any{"type": EventSubagentError, "subagentRunId": id, "message": d.Err})
		return
	}
	outcome := map[string]any{"type": "success"}
	if d.Suspended != nil {
		outcome = map[string]any{"type": "suspended", "interruptIds": d.Suspended}
	}
	s.write(map[string]any{"type": EventSubagentFinished, "subagentRunId": id, "outcome": outcome})
}

// subagentEvent sends a piece of a sub-agent's work, tagged with its run.
func (s *Stream) subagentEvent(e agent.Event) {
	sub := s.subs[e.Agent.ID]
	if sub == nil {
		return // a delegation that never started: nothing to tie it to
	}
	tag := func(ev map[string]any) map[string]any {
		ev["subagentRunId"] = sub.id
		return ev
	}
	if (e.Text != "" || e.ToolUse != nil) && (sub.message == "" || sub.afterResults) {
		sub.n++
		sub.message, sub.afterResults = fmt.Sprintf("%s.m%d", sub.id, sub.n), false
	}
	switch {
	case e.Text != "":
		if !sub.open {
			s.write(tag(map[string]any{"type": EventTextMessageStart, "messageId": sub.message, "role": RoleAssistant}))
			sub.open = true
		}
		s.write(tag(map[string]any{"type": EventTextMessageContent, "messageId": sub.message, "delta": e.Text}))
	case e.ToolUse != nil:
		s.closeSubText(sub)
		s.toolCall(e.ToolUse, sub.message, sub.id)
	case e.ToolResult != nil:
		s.closeSubText(sub)
		sub.afterResults = true
		r := e.ToolResult
		s.write(tag(map[string]any{"type": EventToolCallResult, "messageId": sub.id + "." + ToolMessageID(r), "toolCallId": r.ToolUseID, "role": RoleTool, "content": resultText(r)}))
	}
}

func (s *Stream) closeSubText(sub *subagentRun) {
	if sub.open {
		s.write(map[string]any{"type": EventTextMessageEnd, "messageId": sub.message, "subagentRunId": sub.id})
		sub.open = false
	}
}

// result sends a tool's result, unless the client has it: a result the
// client sent, or one sent before.
func (s *Stream) result(r *agent.ToolResultBlock) {
	id := ToolMessageID(r)
	if r.MessageID != "" || s.sent[id] {
		return
	}
	s.sent[id] = true
	s.write(map[string]any{"type": EventToolCallResult, "messageId": id, "toolCallId": r.ToolUseID, "role": RoleTool, "content": resultText(r)})
}

// messages sends stored messages from stored index first as the events
// that make them, but for those the client has.
func (s *Stream) messages(msgs []agent.Message, first int) {
	for k, m := range msgs {
		id := MessageID(m, first+k)
		if m.Role == agent.RoleAssistant {
			if !s.sent[id] {
				s.sent[id] = true
				if text := m.Text(); text != "" {
					s.write(map[string]any{"type": EventTextMessageStart, "messageId": id, "role": RoleAssistant})
					s.write(map[string]any{"type": EventTextMessageContent, "messageId": id, "delta": text})
					s.write(map[string]any{"type": EventTextMessageEnd, "messageId": id})
				}
				for _, u := range m.ToolUses() {
					s.toolCall(u, id, "")
				}
			}
			continue
		}
		for _, b := range m.Content {
			if b.ToolResult != nil {
				s.result(b.ToolResult)
			}
		}
		if text := m.Text(); text != "" && !s.sent[id] {
			s.sent[id] = true
			s.write(map[string]any{"type": EventTextMessageStart, "messageId": id, "role": RoleUser})
			s.write(map[string]any{"type": EventTextMessageContent, "messageId": id, "delta": text})
			s.write(map[string]any{"type": EventTextMessageEnd, "messageId": id})
		}
	}
}

// Finish ends a turn that the service committed (or replayed), with
// RUN_FINISHED: its outcome, and its usage. The client gets what it lacks
// of the turn's messages first: all of a replayed turn's, and of one that
// ran now, the results no event carried.
func (s *Stream) Finish(out *turn.Outcome[turn.ChatAnswer], first int) {
	if !s.Started() {
		s.Start(out.Answer.SessionID, first)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.closeText()
	if out.Replayed {
		s.messages(out.Answer.Messages, first)
	} else {
		for _, m := range out.Answer.Messages {
			for _, b := range m.Content {
				if b.ToolResult != nil {
					s.result(b.ToolResult)
				}
			}
		}
	}
	u := out.Answer.Usage
	in := u.InputTokens + u.CacheReadInputTokens + u.CacheWriteInputTokens
	usage := TokenUsage{
		Provider: "aws.bedrock", Model: s.model,
		InputTokens: in, OutputTokens: u.OutputTokens, TotalTokens: in + u.OutputTokens,
		CachedInputTokens: u.CacheReadInputTokens, CacheWriteInputTokens: u.CacheWriteInputTokens,
	}
	s.write(map[string]any{"type": EventRunFinished, "threadId": s.threadID, "runId": s.runID, "outcome": outcomeOf(out.Answer.Interrupts), "usage": []TokenUsage{usage}})
	s.ended = true
}

// Replay answers a run that brings nothing new: the thread is as the
// server holds it, and the run's outcome what it waits for.
func (s *Stream) Replay() {
	s.Start(s.threadID, 0)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.write(map[string]any{"type": EventRunFinished, "threadId": s.threadID, "runId": s.runID, "outcome": outcomeOf(s.run.Pending)})
	s.ended = true
}

// outcomeOf is the outcome of a run that leaves interrupts: the approvals
// and questions, which resume entries answer, come first; once none is
// left, the client tools' calls, whose results the client sends.
func outcomeOf(interrupts []agent.Interrupt) Outcome {
	var out []Interrupt
	var calls []string
	for _, in := range interrupts {
		if in.Kind == agent.KindClientTool {
			calls = append(calls, in.ID)
			continue
		}
		out = append(out, interruptOf(in))
	}
	if len(out) > 0 {
		return Outcome{Type: "interrupt", Interrupts: out}
	}
	return Outcome{Type: "success", PendingToolCallIDs: calls}
}

// The payloads of resume entries, as the interrupts' responseSchema.
var (
	approvalSchema = json.RawMessage(`{"type":"object","properties":{"reason":{"type":"string","description":"Why, in a few words. A denial's reason reaches the model."}},"additionalProperties":false}`)
	questionSchema = `{"type":"object","properties":{"answer":{"type":"string","minLength":1,"description":"The answer to the question."%s}},"required":["answer"],"additionalProperties":false}`
)

func interruptOf(in agent.Interrupt) Interrupt {
	out := Interrupt{
		ID: in.ID, Reason: in.Kind, Message: in.Reason, ToolCallID: in.ID, SubagentRunID: in.SubagentRunID,
		ExpiresAt: in.ExpiresAt.UTC().Format(time.RFC3339),
		Metadata:  map[string]any{"tool": in.Tool, "input": in.Input, "name": in.Name},
	}
	if len(in.AgentPath) > 0 {
		out.Metadata["agentPath"] = in.AgentPath
	}
	if len(in.Payload) > 0 {
		out.Metadata["payload"] = in.Payload
	}
	switch in.Kind {
	case agent.KindQuestion:
		var q agent.AskUserInput
		_ = json.Unmarshal(in.Payload, &q) // a question's payload is its input
		examples := ""
		if len(q.Options) > 0 {
			b, _ := json.Marshal(q.Options)
			examples = `,"examples":` + string(b)
		}
		out.ResponseSchema = json.RawMessage(fmt.Sprintf(questionSchema, examples))
	default:
		out.ResponseSchema = approvalSchema
	}
	return out
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

// diff is the JSON Patch that turns the state from into to: the state is
// an object of keys, each replaced whole.
func diff(from, to map[string]json.RawMessage) []map[string]any {
	var patch []map[string]any
	keys := make([]string, 0, len(from)+len(to))
	for k := range from {
		keys = append(keys, k)
	}
	for k := range to {
		if _, ok := from[k]; !ok {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	for _, k := range keys {
		path := "/" + strings.NewReplacer("~", "~0", "/", "~1").Replace(k)
		old, had := from[k]
		v, has := to[k]
		switch {
		case had && !has:
			patch = append(patch, map[string]any{"op": "remove", "path": path})
		case !had:
			patch = append(patch, map[string]any{"op": "add", "path": path, "value": v})
		case string(old) != string(v):
			patch = append(patch, map[string]any{"op": "replace", "path": path, "value": v})
		}
	}
	return patch
}

func nonNil(m map[string]json.RawMessage) map[string]json.RawMessage {
	if m == nil {
		return map[string]json.RawMessage{}
	}
	return m
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

// Snapshot is a stored thread as AG-UI messages, from stored index first,
// followed by the client's new ones.
func Snapshot(msgs []agent.Message, first int, fresh []Message) []Message {
	out := make([]Message, 0, len(msgs)+len(fresh))
	for k, m := range msgs {
		id := MessageID(m, first+k)
		if m.Role == agent.RoleAssistant {
			am := Message{ID: id, Role: RoleAssistant}
			if text := m.Text(); text != "" {
				am.Content, _ = json.Marshal(text)
			}
			for _, u := range m.ToolUses() {
				am.ToolCalls = append(am.ToolCalls, ToolCall{ID: u.ToolUseID, Type: "function", Function: FunctionCall{Name: u.Name, Arguments: string(inputOf(u))}})
			}
			out = append(out, am)
			continue
		}
		var parts []ContentPart
		for _, b := range m.Content {
			switch {
			case b.ToolResult != nil:
				content, _ := json.Marshal(resultText(b.ToolResult))
				out = append(out, Message{ID: ToolMessageID(b.ToolResult), Role: RoleTool, Content: content, ToolCallID: b.ToolResult.ToolUseID})
			case b.Text != "":
				parts = append(parts, ContentPart{Type: "text", Text: b.Text})
			case b.Image != nil:
				parts = append(parts, ContentPart{Type: "image", Source: &Source{Type: "data", Value: base64.StdEncoding.EncodeToString(b.Image.Source.Bytes), MimeType: "image/" + b.Image.Format}})
			case b.Document != nil:
				parts = append(parts, ContentPart{Type: "document", Source: &Source{Type: "data", Value: base64.StdEncoding.EncodeToString(b.Document.Source.Bytes), MimeType: mimeOf(b.Document.Format)}})
			}
		}
		if len(parts) > 0 {
			content, _ := json.Marshal(parts)
			out = append(out, Message{ID: id, Role: RoleUser, Content: content})
		}
	}
	return append(out, slices.Clone(fresh)...)
}

// mimeOf is the MIME type of a document format, formatOf's inverse.
func mimeOf(format string) string {
	for _, mt := range []string{"application/pdf", "text/plain", "text/markdown", "text/csv", "text/html", "application/msword",
		"application/vnd.openxmlformats-officedocument.wordprocessingml.document", "application/vnd.ms-excel",
		"application/vnd.openxmlformats-officedocument.spreadsheetml.sheet"} {
		if formatOf(mt) == format {
			return mt
		}
	}
	return "application/octet-stream"
}
