package remote

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"time"
	"unicode"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2aclient"
)

// MaxA2AAnswerBytes bounds the text of an agent's answer, and of its
// question: the rest is cut.
const MaxA2AAnswerBytes = 32 << 10

// maxA2AIDBytes bounds the task and context ids an agent returns, which a
// session may keep: a longer one is garbage.
const maxA2AIDBytes = 256

// A2AClient sends messages to one remote agent, at the interface its card
// named once checked. It is safe for concurrent use.
type A2AClient struct {
	name        string
	description string
	streaming   bool
	timeout     time.Duration
	sdk         *a2aclient.Client
}

// Name is the agent's name in the configuration.
func (c *A2AClient) Name() string { return c.name }

// Streaming reports whether the agent's card says it streams its answers.
func (c *A2AClient) Streaming() bool { return c.streaming }

// SendInput is a message to an agent: text, and the ids of the remote
// conversation and task it goes on with, if any.
type SendInput struct {
	Text string
	// ContextID is the agent's id of the conversation to go on with; ""
	// starts a new one.
	ContextID string
	// TaskID is the agent's id of the task the message answers, one that
	// asked for input; "" starts a new task.
	TaskID string
}

// A2AOutcome is what an agent made of a message.
type A2AOutcome struct {
	// State is the task's state, or TaskStateCompleted when the agent
	// answered with a message rather than a task.
	State a2a.TaskState
	// Text is the agent's answer: the text of the task's artifacts, or of
	// its status message, or of the message it answered with; cut to
	// MaxA2AAnswerBytes.
	Text string
	// ContextID and TaskID are the agent's ids, for a message that goes
	// on with the conversation or answers the task.
	ContextID string
	TaskID    string
	// Question is, for a task in TaskStateInputRequired or
	// TaskStateAuthRequired, what the agent asks: its status message.
	Question string
}

// Send sends in and waits for the agent's answer: until its task ends,
// or needs input, within the agent's timeout. Every state of a task is an
// outcome; an error is a request that failed, a JSON-RPC error, a timeout
// or an answer that is not A2A, and names the agent.
func (c *A2AClient) Send(ctx context.Context, in SendInput) (*A2AOutcome, error) {
	call, cancel, over := c.bound(ctx)
	defer cancel()
	res, err := c.sdk.SendMessage(call, c.request(in))
	if err != nil {
		return nil, c.failure(ctx, call, over, err)
	}
	var out *A2AOutcome
	switch r := res.(type) {
	case *a2a.Task:
		out = taskOutcome(r)
	case *a2a.Message:
		out = messageOutcome(r)
	default:
		return nil, c.fail(errNoAnswer)
	}
	return c.checked(out)
}

// SendStreaming is Send over a stream of events, with progress, if not
// nil, given the text of each as it comes: a piece of an artifact, or a
// status message. An agent whose card does not say it streams gets Send.
func (c *A2AClient) SendStreaming(ctx context.Context, in SendInput, progress func(text string)) (*A2AOutcome, error) {
	if !c.streaming {
		return c.Send(ctx, in)
	}
	if progress == nil {
		progress = func(string) {}
	}
	call, cancel, over := c.bound(ctx)
	defer cancel()
	var s stream
	for ev, err := range c.sdk.SendStreamingMessage(call, c.request(in)) {
		if err != nil {
			return nil, c.failure(ctx, call, over, err)
		}
		if err := s.add(ev, progress); err != nil {
			return nil, c.fail(err)
		}
	}
	if over.Load() {
		return nil, c.fail(ErrTooLarge)
	}
	out, err := s.outcome()
	if err != nil {
		return nil, c.fail(err)
	}
	return c.checked(out)
}

func (c *A2AClient) request(in SendInput) *a2a.SendMessageRequest {
	m := a2a.NewMessage(a2a.MessageRoleUser, a2a.NewTextPart(in.Text))
	m.ContextID, m.TaskID = in.ContextID, a2a.TaskID(in.TaskID)
	return &a2a.SendMessageRequest{Message: m}
}

// bound is ctx within the agent's timeout, and marked with where to say
// that the answer was past the bounds of capped.
func (c *A2AClient) bound(ctx context.Context) (context.Context, context.CancelFunc, *atomic.Bool) {
	over := new(atomic.Bool)
	call, cancel := context.WithTimeout(context.WithValue(ctx, overKey{}, over), c.timeout)
	return call, cancel, over
}

// failure is the error of a call that failed: an answer past the bounds,
// the caller's end, the agent's timeout, or what the SDK said.
func (c *A2AClient) failure(ctx, call context.Context, over *atomic.Bool, err error) error {
	switch {
	case over.Load():
		return c.fail(ErrTooLarge)
	case ctx.Err() != nil:
		return c.fail(ctx.Err())
	case errors.Is(call.Err(), context.DeadlineExceeded):
		return c.fail(fmt.Errorf("no answer within %s: %w", c.timeout, context.DeadlineExceeded))
	}
	return c.fail(err)
}

func (c *A2AClient) fail(err error) error { return fmt.Errorf("A2A agent %s: %w", c.name, err) }

// checked refuses an outcome whose state or ids are garbage, and cuts its
// text.
func (c *A2AClient) checked(out *A2AOutcome) (*A2AOutcome, error) {
	switch out.State {
	case a2a.TaskStateSubmitted, a2a.TaskStateWorking, a2a.TaskStateCompleted, a2a.TaskStateFailed,
		a2a.TaskStateCanceled, a2a.TaskStateRejected, a2a.TaskStateInputRequired, a2a.TaskStateAuthRequired:
	default:
		return nil, c.fail(fmt.Errorf("the agent answered a task in no known state (%q)", cut(string(out.State), 40)))
	}
	for _, id := range []string{out.ContextID, out.TaskID} {
		if len(id) > maxA2AIDBytes || strings.ContainsFunc(id, unicode.IsControl) {
			return nil, c.fail(fmt.Errorf("the agent answered with an id that is not one (%q)", cut(id, 40)))
		}
	}
	out.Text, out.Question = cut(out.Text, MaxA2AAnswerBytes), cut(out.Question, MaxA2AAnswerBytes)
	return out, nil
}

var errNoAnswer = errors.New("the agent answered with neither a task nor a message")

func taskOutcome(t *a2a.Task) *A2AOutcome {
	var arts []string
	for _, a := range t.Artifacts {
		if a != nil {
			arts = appendText(arts, partsText(a.Parts))
		}
	}
	return withStatus(&A2AOutcome{State: t.Status.State, ContextID: t.ContextID, TaskID: string(t.ID)},
		strings.Join(arts, "\n"), messageText(t.Status.Message))
}

// withStatus completes out with the text of the task's artifacts and of
// its status message.
func withStatus(out *A2AOutcome, artifacts, status string) *A2AOutcome {
	out.Text = cmp.Or(artifacts, status)
	if out.State == a2a.TaskStateInputRequired || out.State == a2a.TaskStateAuthRequired {
		out.Question = status
	}
	return out
}

func messageOutcome(m *a2a.Message) *A2AOutcome {
	return &A2AOutcome{State: a2a.TaskStateCompleted, Text: partsText(m.Parts), ContextID: m.ContextID, TaskID: string(m.TaskID)}
}

func messageText(m *a2a.Message) string {
	if m == nil {
		return ""
	}
	return partsText(m.Parts)
}

// partsText is the text of parts: text as it is, the pieces of a stream
// put back together, and on lines of their own data as JSON and a note
// for a file.
func partsText(parts a2a.ContentParts) string {
	var b strings.Builder
	line := func(s string) {
		if b.Len() > 0 && !strings.HasSuffix(b.String(), "\n") {
			b.WriteByte('\n')
		}
		b.WriteString(s)
		b.WriteByte('\n')
	}
	for _, p := range parts {
		if p == nil {
			continue
		}
		switch c := p.Content.(type) {
		case a2a.Text:
			b.WriteString(string(c))
		case a2a.Data:
			if raw, err := json.Marshal(c.Value); err == nil {
				line(string(raw))
			}
		case a2a.URL:
			line(fmt.Sprintf("[a file at %s]", cut(string(c), 200)))
		case a2a.Raw:
			line(fmt.Sprintf("[a file of %d bytes, which cannot be shown]", len(c)))
		default:
			line("[a part of an unknown kind]")
		}
	}
	return strings.TrimSuffix(b.String(), "\n")
}

func appendText(out []string, s string) []string {
	if s == "" {
		return out
	}
	return append(out, s)
}

// stream is an answer as its events come.
type stream struct {
	message   *A2AOutcome // the agent answered with a message
	task      bool        // an event of a task came
	out       A2AOutcome
	status    string
	artifacts []*streamArtifact
}

type streamArtifact struct {
	id   a2a.ArtifactID
	text strings.Builder
}

func (s *stream) add(ev a2a.Event, progress func(string)) error {
	switch e := ev.(type) {
	case *a2a.Message:
		s.message = messageOutcome(e)
		progress(s.message.Text)
	case *a2a.Task:
		s.task = true
		s.out.State, s.out.ContextID, s.out.TaskID = e.Status.State, e.ContextID, string(e.ID)
		s.status = messageText(e.Status.Message)
		s.artifacts = nil
		for _, a := range e.Artifacts {
			if a != nil {
				s.artifact(a.ID, partsText(a.Parts), false)
			}
		}
	case *a2a.TaskStatusUpdateEvent:
		s.task = true
		s.out.State, s.out.ContextID, s.out.TaskID = e.Status.State, cmp.Or(e.ContextID, s.out.ContextID), cmp.Or(string(e.TaskID), s.out.TaskID)
		if text := messageText(e.Status.Message); text != "" {
			s.status = text
			progress(text)
		}
	case *a2a.TaskArtifactUpdateEvent:
		s.task = true
		if e.Artifact == nil {
			return errors.New("the agent sent an artifact update without an artifact")
		}
		text := partsText(e.Artifact.Parts)
		s.artifact(e.Artifact.ID, text, e.Append)
		progress(text)
	default:
		return fmt.Errorf("the agent sent an event of an unknown kind (%T)", ev)
	}
	return nil
}

// artifact adds text to the artifact id, or replaces its text.
func (s *stream) artifact(id a2a.ArtifactID, text string, add bool) {
	for _, a := range s.artifacts {
		if a.id == id {
			if !add {
				a.text.Reset()
			}
			a.text.WriteString(text)
			return
		}
	}
	a := &streamArtifact{id: id}
	a.text.WriteString(text)
	s.artifacts = append(s.artifacts, a)
}

func (s *stream) outcome() (*A2AOutcome, error) {
	if s.message != nil {
		return s.message, nil
	}
	if !s.task {
		return nil, errNoAnswer
	}
	switch st := s.out.State; {
	case st.Terminal(), st == a2a.TaskStateInputRequired, st == a2a.TaskStateAuthRequired:
	default:
		return nil, fmt.Errorf("the agent's stream ended before its task did (%s)", stateWord(st))
	}
	var arts []string
	for _, a := range s.artifacts {
		arts = appendText(arts, a.text.String())
	}
	out := s.out
	return withStatus(&out, strings.Join(arts, "\n"), s.status), nil
}
