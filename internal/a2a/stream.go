package a2a

import (
	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/lambda-agent/lambda-agent/internal/agent"
	"github.com/lambda-agent/lambda-agent/internal/turn"
)

// stream is a streamed task: the turn's sink, which yields A2A events as
// the turn runs. The turn calls it from one goroutine at a time, and not
// after the turn returned (see agent.Agent.Stream); once the caller stops
// reading, it yields nothing more, and the turn runs to its commit.
type stream struct {
	yield   func(a2a.Event, error) bool
	stopped bool
	msg     *a2a.Message
	// resumed is the task the message answers; nil for a new task.
	resumed *a2a.Task
	ref     taskRef
	started bool
	// texts counts the task's text artifacts; inText says the last
	// began with this model answer, whose text goes on.
	texts  int
	inText bool
}

var _ turn.Sink = (*stream)(nil)

func (s *stream) send(e a2a.Event, err error) {
	if s.stopped {
		return
	}
	if !s.yield(e, err) {
		s.stopped = true
	}
}

// Start sends the task, working.
func (s *stream) Start(sessionID string, first int) {
	s.started = true
	status := a2a.TaskStatus{State: a2a.TaskStateWorking}
	if s.resumed != nil {
		t := *s.resumed
		t.Status, s.ref = status, s.refOf(t.ID)
		s.send(&t, nil)
		return
	}
	s.ref = taskRef{session: sessionID, first: first, message: s.msg.ID}
	user := *s.msg
	user.ContextID, user.TaskID = sessionID, s.ref.id()
	s.send(&a2a.Task{ID: s.ref.id(), ContextID: sessionID, Status: status, History: []*a2a.Message{&user}}, nil)
}

func (s *stream) refOf(id a2a.TaskID) taskRef {
	ref, _ := parseTask(id) // the resumed task's id is one parseTask read
	return ref
}

// Event sends the main agent's text as artifact updates, one artifact per
// answer of its model, and its tool calls and delegations as status
// updates.
func (s *stream) Event(e agent.Event) {
	switch {
	case e.Agent != nil:
		// A sub-agent's text and tools are its delegation's, whose start
		// and end the stream shows.
	case e.Text != "":
		if !s.inText {
			s.texts++
		}
		s.send(&a2a.TaskArtifactUpdateEvent{
			TaskID: s.ref.id(), ContextID: s.ref.session, Append: s.inText,
			Artifact: &a2a.Artifact{ID: artifactID(s.texts), Name: "text", Parts: a2a.ContentParts{a2a.NewTextPart(e.Text)}},
		}, nil)
		s.inText = true
	case e.ToolUse != nil:
		s.inText = false
		s.working(map[string]any{"tool_use": map[string]any{"id": e.ToolUse.ToolUseID, "name": e.ToolUse.Name}})
	case e.ToolResult != nil:
		s.inText = false
		s.working(map[string]any{"tool_result": map[string]any{"id": e.ToolResult.ToolUseID, "status": e.ToolResult.Status}})
	case e.ToolProgress != nil:
		s.working(map[string]any{"tool_progress": map[string]any{"id": e.ToolProgress.ToolUseID, "name": e.ToolProgress.Name, "delta": e.ToolProgress.Text}})
	case e.Delegation != nil:
		d := e.Delegation
		s.working(map[string]any{"delegation": map[string]any{"id": d.Run.ID, "agent": d.Run.Name, "path": d.Run.Path, "done": d.Done}})
	default:
		// Interrupts come with the task's end; state is the session's.
	}
}

// working sends a status update, working, whose message holds data.
func (s *stream) working(data map[string]any) {
	msg := &a2a.Message{
		ID: a2a.NewMessageID(), Role: a2a.MessageRoleAgent, ContextID: s.ref.session, TaskID: s.ref.id(),
		Parts: a2a.ContentParts{a2a.NewDataPart(data)},
	}
	s.send(&a2a.TaskStatusUpdateEvent{TaskID: s.ref.id(), ContextID: s.ref.session, Status: a2a.TaskStatus{State: a2a.TaskStateWorking, Message: msg}}, nil)
}

// finish sends the task's end: its status, or, for a turn that ran in an
// earlier request and streamed nothing here, the task.
func (s *stream) finish(t *a2a.Task) {
	if !s.started {
		s.send(t, nil)
		return
	}
	s.send(&a2a.TaskStatusUpdateEvent{TaskID: t.ID, ContextID: t.ContextID, Status: t.Status}, nil)
}
