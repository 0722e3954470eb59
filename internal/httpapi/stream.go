package httpapi

import (
	"encoding/json"
	"fmt"
	"net/http"
	"runtime/debug"
	"strings"
	"sync"
	"time"

	"github.com/lambda-agent/lambda-agent/internal/agent"
	"github.com/lambda-agent/lambda-agent/internal/turn"
)

// The events of a streamed chat turn, in Server-Sent Events' "event" field.
// A stream is start, then text, tool_use and tool_result in the order they
// happen, an interrupt for each tool use the turn pauses for, then done or
// error. Each event's data is one JSON object.
const (
	EventStart      = "start"       // {"session_id"}
	EventText       = "text"        // {"delta"}: a piece of the model's text
	EventToolUse    = "tool_use"    // {"id","name","input"}
	EventToolResult = "tool_result" // {"id","status","preview"}
	// EventToolProgress is what a tool reports while it runs, such as a
	// remote agent's answer as it streams: {"id","name","delta"}.
	EventToolProgress = "tool_progress"
	EventInterrupt    = "interrupt" // an interrupt: a tool use that waits for a person
	EventDone         = "done"      // a ChatResponse: the turn is committed
	EventError        = "error"     // {"error":{"code","message"}}: nothing was committed
)

// The events of a sub-agent's turn inside a streamed turn, from its
// delegation's tool_use to its tool_result: agent_start, then agent_text,
// agent_tool_use and agent_tool_result as they happen, then agent_end.
// Their names are their own, so that a client that knows only the events
// above shows the main agent's answer alone.
const (
	EventAgentStart      = "agent_start"       // {"id","name","path","parent_id"?}
	EventAgentText       = "agent_text"        // {"agent_id","delta"}
	EventAgentToolUse    = "agent_tool_use"    // {"agent_id","id","name","input"}
	EventAgentToolResult = "agent_tool_result" // {"agent_id","id","status","preview"}
	// EventAgentToolProgress is a sub-agent's tool's progress:
	// {"agent_id","id","name","delta"}.
	EventAgentToolProgress = "agent_tool_progress"
	EventAgentEnd          = "agent_end" // {"id","name","error"?}
)

// AgentStart is the data of an agent_start event. ID is the delegating
// tool use's id, which the sub-agent's events carry as agent_id.
type AgentStart struct {
	ID   string   `json:"id"`
	Name string   `json:"name"`
	Path []string `json:"path"`
	// ParentID is the delegation this one runs in; absent when the main
	// agent delegated.
	ParentID string `json:"parent_id,omitempty"`
}

// AgentEnd is the data of an agent_end event.
type AgentEnd struct {
	ID   string `json:"id"`
	Name string `json:"name"`
	// Error says why the sub-agent failed; absent when it answered.
	Error string `json:"error,omitempty"`
	// Suspended, when the sub-agent's turn paused for a person, are the
	// ids of the interrupts it waits for: the interrupt events that follow
	// carry them, with the agent path.
	Suspended []string `json:"suspended,omitempty"`
}

// ToolResultPreview is the data of a tool_result event.
type ToolResultPreview struct {
	ID     string                 `json:"id"`
	Status agent.ToolResultStatus `json:"status"`
	// Preview is the start of the result's content, as text.
	Preview string `json:"preview"`
}

// maxPreview bounds a tool_result's preview, in bytes.
const maxPreview = 300

// chatStream serves POST /chat as Server-Sent Events: the same request,
// idempotency, owner scoping and errors as POST /chat, with the turn
// streamed as it happens. Lambda streams it through a function URL in
// RESPONSE_STREAM mode (lambdaurl); the local run serves it directly.
//
// Errors found before the turn begins (a bad request, an unknown session,
// an Idempotency-Key in use) are answered with their status and JSON body,
// as POST /chat answers them. Once the stream has begun, a failure is an
// error event; the turn is committed only if it completed, and done is sent
// only after the commit.
func (h *Handler) chatStream(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	rec := &record{}
	s := &sse{w: w}
	defer func() {
		if v := recover(); v != nil {
			rec.err = fmt.Errorf("panic: %v\n%s", v, debug.Stack())
			s.fail(internalError(), rec)
		}
		h.log(r, s.status, rec, time.Since(start))
	}()
	c, e := h.chatRequest(r, rec)
	if e != nil {
		s.fail(e, rec)
		return
	}
	c.Sink = s
	out, err := h.cfg.Service.Chat(r.Context(), c)
	if err != nil {
		rec.noteCost(err)
		s.fail(errorFor(err), rec)
		return
	}
	rec.outcome, rec.result, rec.replayed = "ok", out.Result, out.Replayed
	if out.Replayed { // the turn ran in an earlier request
		s.Start(out.Answer.SessionID, out.First)
	}
	s.event(EventDone, out.Answer)
}

// sse writes a Server-Sent Events stream. The agent emits from one goroutine
// at a time; the mutex also orders the handler's own events after them.
type sse struct {
	mu      sync.Mutex
	w       http.ResponseWriter
	started bool
	status  int
	// open holds the sub-agents' runs started and not ended: a resumed
	// one goes on across the two steps of its resume, as one run.
	open map[string]bool
}

var _ turn.Sink = (*sse)(nil)

// Start sends the headers and the start event.
func (s *sse) Start(sessionID string, _ int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	h := s.w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	s.w.WriteHeader(http.StatusOK)
	s.started, s.status = true, http.StatusOK
	s.write(EventStart, map[string]string{"session_id": sessionID})
}

// Event sends an agent event.
func (s *sse) Event(e agent.Event) {
	// The agent's events come one at a time: open needs no lock.
	switch d := e.Delegation; {
	case d != nil && !d.Done && !s.open[d.Run.ID]:
		if s.open == nil {
			s.open = map[string]bool{}
		}
		s.open[d.Run.ID] = true
		s.event(EventAgentStart, AgentStart{ID: d.Run.ID, Name: d.Run.Name, Path: d.Run.Path, ParentID: d.Run.ParentID})
	case d != nil && d.Done && !d.Continues:
		delete(s.open, d.Run.ID)
		s.event(EventAgentEnd, AgentEnd{ID: d.Run.ID, Name: d.Run.Name, Error: d.Err, Suspended: d.Suspended})
	case d != nil: // a run that is open already, or goes on
	case e.Agent != nil:
		s.agentEvent(e)
	case e.Text != "":
		s.event(EventText, map[string]string{"delta": e.Text})
	case e.ToolUse != nil:
		s.event(EventToolUse, map[string]any{"id": e.ToolUse.ToolUseID, "name": e.ToolUse.Name, "input": e.ToolUse.Input})
	case e.ToolResult != nil:
		s.event(EventToolResult, ToolResultPreview{ID: e.ToolResult.ToolUseID, Status: e.ToolResult.Status, Preview: preview(e.ToolResult)})
	case e.ToolProgress != nil:
		s.event(EventToolProgress, map[string]string{"id": e.ToolProgress.ToolUseID, "name": e.ToolProgress.Name, "delta": e.ToolProgress.Text})
	case e.Interrupt != nil:
		s.event(EventInterrupt, e.Interrupt)
	}
}

// agentEvent sends an event of a sub-agent's turn.
func (s *sse) agentEvent(e agent.Event) {
	id := e.Agent.ID
	switch {
	case e.Text != "":
		s.event(EventAgentText, map[string]string{"agent_id": id, "delta": e.Text})
	case e.ToolUse != nil:
		s.event(EventAgentToolUse, map[string]any{"agent_id": id, "id": e.ToolUse.ToolUseID, "name": e.ToolUse.Name, "input": e.ToolUse.Input})
	case e.ToolResult != nil:
		s.event(EventAgentToolResult, map[string]any{"agent_id": id, "id": e.ToolResult.ToolUseID, "status": e.ToolResult.Status, "preview": preview(e.ToolResult)})
	case e.ToolProgress != nil:
		s.event(EventAgentToolProgress, map[string]string{"agent_id": id, "id": e.ToolProgress.ToolUseID, "name": e.ToolProgress.Name, "delta": e.ToolProgress.Text})
	}
}

func (s *sse) event(name string, data any) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.write(name, data)
}

// fail answers e: an error event once the stream has begun, else the
// status and JSON body Chat would answer.
func (s *sse) fail(e *Error, rec *record) {
	rec.outcome = e.Code
	if rec.err == nil {
		rec.err = e.err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.started {
		// The stream answered 200; what failed is as grave as its own
		// status, for the log and the metrics.
		rec.errorStatus = e.Status()
		s.write(EventError, map[string]*Error{"error": e})
		return
	}
	s.status = writeError(s.w, e, rec)
}

// write sends one event and flushes it. A client that went away is not an
// error: the turn goes on, and commits or not, on its own.
func (s *sse) write(name string, data any) {
	b, err := json.Marshal(data)
	if err != nil {
		b, _ = json.Marshal(map[string]*Error{"error": {Code: "internal", Message: "an event could not be encoded"}})
		name = EventError
	}
	_, _ = fmt.Fprintf(s.w, "event: %s\ndata: %s\n\n", name, b)
	if f, ok := s.w.(http.Flusher); ok {
		f.Flush()
	}
}

// preview returns the start of a tool result's content as text.
func preview(r *agent.ToolResultBlock) string {
	var b strings.Builder
	for _, c := range r.Content {
		switch {
		case c.Text != "":
			b.WriteString(c.Text)
		case c.JSON != nil:
			b.Write(c.JSON)
		case c.Image != nil:
			b.WriteString("[image]")
		case c.Document != nil:
			b.WriteString("[document]")
		}
		if b.Len() >= maxPreview {
			break
		}
		b.WriteByte(' ')
	}
	p := strings.TrimSpace(b.String())
	return agent.Clip(p, maxPreview)
}
