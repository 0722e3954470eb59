package a2a

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/lambda-agent/lambda-agent/internal/agent"
)

// taskRef is what a task id encodes: the session, the index of the turn's
// first message, and the id of the message that started the turn, which
// tells the turn from one that a rewind put in its place.
type taskRef struct {
	session string
	first   int
	message string
}

// maxTaskID bounds a task id that a caller sends: a session id, an index
// and a message id, encoded.
const maxTaskID = 512

func (r taskRef) id() a2a.TaskID {
	raw := r.session + "\n" + strconv.Itoa(r.first) + "\n" + r.message
	return a2a.TaskID(base64.RawURLEncoding.EncodeToString([]byte(raw)))
}

// parseTask reads a task id that id encodes; ok is false for one this
// package did not make.
func parseTask(id a2a.TaskID) (taskRef, bool) {
	if id == "" || len(id) > maxTaskID {
		return taskRef{}, false
	}
	raw, err := base64.RawURLEncoding.DecodeString(string(id))
	if err != nil {
		return taskRef{}, false
	}
	parts := strings.SplitN(string(raw), "\n", 3)
	if len(parts) != 3 || parts[0] == "" {
		return taskRef{}, false
	}
	first, err := strconv.Atoi(parts[1])
	if err != nil || first < 0 || strconv.Itoa(first) != parts[1] {
		return taskRef{}, false
	}
	return taskRef{session: parts[0], first: first, message: parts[2]}, true
}

// turnView is what a task is derived from: the messages of its turn, from
// the index its id names, and what the session says of its end.
type turnView struct {
	ref  taskRef
	msgs []agent.Message
	// last says the turn is the session's last, whose end is the
	// session's: pending and resuming are then the session's.
	last     bool
	pending  *agent.Pending
	resuming bool
	updated  time.Time
}

// start is the index in msgs of the message that started the turn; -1
// for none. A turn that follows one that ended with the user's message
// begins with the agent's note, before it.
func (v *turnView) start() int {
	for i, m := range v.msgs {
		if agent.StartsTurn(m) {
			return i
		}
		if i > 0 {
			break
		}
	}
	return -1
}

// nextTurn is the index in msgs of the first message of the turn after
// the one that starts at start: its start, or the agent's note before it;
// -1 when msgs end first.
func nextTurn(msgs []agent.Message, start int) int {
	for i := start + 1; i < len(msgs); i++ {
		if agent.StartsTurn(msgs[i]) {
			if agent.Unanswered(msgs[i-1]) {
				return i - 1
			}
			return i
		}
	}
	return -1
}

// task derives the task: its state from how the turn ended, the agent's
// text messages as its artifacts, and its messages as its history, the
// last historyLength of them (nil for all).
func (v *turnView) task(historyLength *int, now time.Time) *a2a.Task {
	id := v.ref.id()
	t := &a2a.Task{ID: id, ContextID: v.ref.session, Artifacts: artifactsOf(v.msgs)}
	status := a2a.TaskStatus{}
	if !v.updated.IsZero() {
		ts := v.updated.UTC()
		status.Timestamp = &ts
	}
	end := v.msgs[len(v.msgs)-1]
	live := v.pending.Live(now)
	switch {
	case v.last && v.resuming:
		status.State = a2a.TaskStateWorking
		status.Message = v.note("A request is answering the task's interrupts, and its turn runs on.")
	case v.last && len(live) > 0:
		status.State = a2a.TaskStateInputRequired
		status.Message = interruptMessage(v.ref, live)
	case agent.Canceled(end):
		status.State = a2a.TaskStateCanceled
		status.Message = v.note("The task was canceled while it waited for a person; what waited did not run.")
	case end.Role == agent.RoleAssistant && len(end.ToolUses()) > 0:
		// The turn paused, and nobody answered: its interrupts expired, or
		// a later message moved on from them.
		status.State = a2a.TaskStateCanceled
		status.Message = v.note("Nobody answered the task's interrupts in time, or a later message moved on from them; what waited did not run.")
	case end.Role == agent.RoleAssistant:
		status.State = a2a.TaskStateCompleted
		if text := end.Text(); text != "" {
			status.Message = v.agentMessage("answer", a2a.NewTextPart(text))
		}
	default:
		status.State = a2a.TaskStateFailed
		status.Message = v.note("The turn stopped before the agent answered.")
	}
	t.Status = status
	t.History = historyOf(v.ref, v.msgs, historyLength)
	return t
}

func (v *turnView) note(text string) *a2a.Message {
	return v.agentMessage("status", a2a.NewTextPart(text))
}

func (v *turnView) agentMessage(kind string, parts ...*a2a.Part) *a2a.Message {
	return &a2a.Message{ID: string(v.ref.id()) + "-" + kind, Role: a2a.MessageRoleAgent, ContextID: v.ref.session, TaskID: v.ref.id(), Parts: parts}
}

// interruptMessage is the status message of a task that waits for a
// person: the reasons and questions as text, and the interrupts, in the
// shape POST /chat lists them, as a data part.
func interruptMessage(ref taskRef, live []agent.Interrupt) *a2a.Message {
	var lines []string
	for _, in := range live {
		lines = append(lines, in.Reason)
	}
	text := strings.Join(lines, "\n")
	data := map[string]any{"interrupts": live}
	return &a2a.Message{
		ID: string(ref.id()) + "-input", Role: a2a.MessageRoleAgent, ContextID: ref.session, TaskID: ref.id(),
		Parts: a2a.ContentParts{a2a.NewTextPart(text), a2a.NewDataPart(jsonValue(data))},
	}
}

// jsonValue is v as the generic JSON value a data part holds.
func jsonValue(v any) any {
	raw, err := json.Marshal(v)
	if err != nil {
		return nil
	}
	var out any
	_ = json.Unmarshal(raw, &out) // raw is JSON
	return out
}

// artifactsOf lists the agent's text messages of a turn, in order: the
// answer is the last. Their ids are their order, as a stream numbers
// them.
func artifactsOf(msgs []agent.Message) []*a2a.Artifact {
	var out []*a2a.Artifact
	for i, m := range msgs {
		// A turn that begins with the agent's message begins with a note
		// before the user's; a cancelled turn ends with one.
		if m.Role != agent.RoleAssistant || i == 0 || agent.Canceled(m) {
			continue
		}
		if text := m.Text(); text != "" {
			out = append(out, textArtifact(len(out)+1, text))
		}
	}
	return out
}

func textArtifact(n int, text string) *a2a.Artifact {
	return &a2a.Artifact{ID: artifactID(n), Name: "text", Parts: a2a.ContentParts{a2a.NewTextPart(text)}}
}

func artifactID(n int) a2a.ArtifactID { return a2a.ArtifactID(fmt.Sprintf("text-%d", n)) }

// historyOf is a turn's messages as A2A messages: the user's content, and
// the agent's text; tool uses and results are left out. A message's id is
// the one its client gave it, or its index.
func historyOf(ref taskRef, msgs []agent.Message, length *int) []*a2a.Message {
	if length != nil && *length <= 0 {
		return nil
	}
	var out []*a2a.Message
	for i, m := range msgs {
		role := a2a.MessageRoleAgent
		if m.Role == agent.RoleUser {
			role = a2a.MessageRoleUser
		}
		parts := partsOf(m)
		if len(parts) == 0 {
			continue
		}
		id := m.ID
		if id == "" {
			id = fmt.Sprintf("%s-%d", ref.session, ref.first+i)
		}
		out = append(out, &a2a.Message{ID: id, Role: role, ContextID: ref.session, TaskID: ref.id(), Parts: parts})
	}
	if length != nil && len(out) > *length {
		out = out[len(out)-*length:]
	}
	return out
}

// partsOf is what of m an A2A message shows: text, images and documents.
func partsOf(m agent.Message) a2a.ContentParts {
	var parts a2a.ContentParts
	for _, b := range m.Content {
		switch {
		case b.Text != "":
			parts = append(parts, a2a.NewTextPart(b.Text))
		case b.Image != nil && b.Image.Source.Bytes != nil:
			p := a2a.NewRawPart(b.Image.Source.Bytes)
			p.MediaType = "image/" + b.Image.Format
			parts = append(parts, p)
		case b.Document != nil && b.Document.Source.Bytes != nil:
			p := a2a.NewRawPart(b.Document.Source.Bytes)
			p.MediaType, p.Filename = documentTypes[b.Document.Format], b.Document.Name
			parts = append(parts, p)
		default:
			// Tool uses and results, reasoning, and media by reference are
			// the agent's own.
		}
	}
	return parts
}
