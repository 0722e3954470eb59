package a2a

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"iter"
	"net/http"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2asrv"
	"github.com/lambda-agent/lambda-agent/internal/agent"
	"github.com/lambda-agent/lambda-agent/internal/turn"
)

// Service is the session service, as A2A uses it. *turn.Service
// implements it; its errors are the turn package's, the agent's and the
// store's. It must be safe for concurrent use.
type Service interface {
	Chat(ctx context.Context, c turn.Chat) (*turn.Outcome[turn.ChatAnswer], error)
	Cancel(ctx context.Context, c turn.Cancel) (*turn.Outcome[turn.ChatAnswer], error)
	Transcript(ctx context.Context, owner, id, cursor string, limit int) (*turn.Page, error)
	Tail(ctx context.Context, owner, id string, n int) (*turn.Page, error)
	List(ctx context.Context, owner, cursor string, limit int) (*turn.SessionList, error)
}

var _ Service = (*turn.Service)(nil)

// Problem is what the HTTP API answers an error with: its code, status
// and message, which A2A's error carries as its data.
type Problem struct {
	Code    string
	Status  int
	Message string
}

// Config configures a Handler.
type Config struct {
	Service Service
	// CheckInput checks a turn's input as every way in does (its size,
	// and what the agent takes); its errors are ones Describe knows.
	CheckInput func([]agent.ContentBlock) error
	// Describe gives an error the code, status and message the HTTP API
	// gives it: the one place that chooses them.
	Describe func(error) Problem
	// Now is the clock; nil means time.Now.
	Now func() time.Time
}

// Handler answers A2A's methods over the turn service. It implements
// a2asrv.RequestHandler; serve it with a2asrv.NewJSONRPCHandler, with the
// caller set on each request's context by WithOwner. It is safe for
// concurrent use.
type Handler struct {
	cfg Config
}

var _ a2asrv.RequestHandler = (*Handler)(nil)

// New returns a Handler.
func New(cfg Config) (*Handler, error) {
	if cfg.Service == nil || cfg.CheckInput == nil || cfg.Describe == nil {
		return nil, errors.New("a2a: a Service, CheckInput and Describe are required")
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	return &Handler{cfg: cfg}, nil
}

type callKey struct{}

// Call is one request's caller, and what it did, for the line the edge
// logs.
type Call struct {
	// Owner is the caller, who owns the sessions.
	Owner string
	// SessionID is the context the request used, once known.
	SessionID string
	// Result is what a turn did; Replayed says the turn was a retry's.
	Result   *agent.Result
	Replayed bool
	// Err is the error the request failed with, if any.
	Err error
}

// WithCall returns ctx carrying c: the caller the Handler acts for, and
// where it notes what the request did.
func WithCall(ctx context.Context, c *Call) context.Context {
	return context.WithValue(ctx, callKey{}, c)
}

// call returns the request's Call; an empty one when none was set, whose
// owner the turn service refuses.
func call(ctx context.Context) *Call {
	if c, ok := ctx.Value(callKey{}).(*Call); ok {
		return c
	}
	return &Call{}
}

// fail returns err as an A2A error: the A2A code that fits, and the HTTP
// API's code, status and message as its data. It notes err on c.
func (h *Handler) fail(c *Call, err error) error {
	c.Err = err
	var ae *a2a.Error
	if errors.As(err, &ae) {
		return ae
	}
	p := h.cfg.Describe(err)
	var kind error
	switch {
	case p.Code == "not_found":
		kind = a2a.ErrTaskNotFound
	case p.Status == http.StatusUnauthorized:
		kind = a2a.ErrUnauthenticated
	case p.Status < 500 && p.Status != http.StatusTooManyRequests:
		kind = a2a.ErrInvalidParams
	case p.Status == http.StatusInternalServerError:
		kind = a2a.ErrInternalError
	default: // throttled, the model's failures, timeouts: worth a retry
		kind = a2a.ErrServerError
	}
	return a2a.NewError(kind, p.Message).WithDetails(map[string]any{"code": p.Code, "status": p.Status})
}

func taskNotFound(id a2a.TaskID) *a2a.Error {
	return a2a.NewError(a2a.ErrTaskNotFound, fmt.Sprintf("no task %s: it is not stored, because its turn still runs in another invocation or failed, or its session was rewound past it or deleted, or is another caller's", id)).
		WithDetails(map[string]any{"code": "not_found", "status": http.StatusNotFound})
}

func unsupported(what string) *a2a.Error {
	return a2a.NewError(a2a.ErrUnsupportedOperation, what).WithDetails(map[string]any{"code": "unsupported", "status": http.StatusBadRequest})
}

// GetTask derives a task from its committed session.
func (h *Handler) GetTask(ctx context.Context, req *a2a.GetTaskRequest) (*a2a.Task, error) {
	c := call(ctx)
	v, _, err := h.taskNamed(ctx, c, req.ID)
	if err != nil {
		return nil, h.fail(c, err)
	}
	return v.task(req.HistoryLength, h.cfg.Now()), nil
}

// taskNamed reads the turn of the task that id names, for c's caller.
func (h *Handler) taskNamed(ctx context.Context, c *Call, id a2a.TaskID) (*turnView, taskRef, error) {
	ref, ok := parseTask(id)
	if !ok {
		return nil, ref, taskNotFound(id)
	}
	c.SessionID = ref.session
	v, err := h.view(ctx, c.Owner, ref)
	return v, ref, err
}

// CancelTask cancels a task that waits for a person: what waits is
// denied, and the task is TASK_STATE_CANCELED. A task whose turn has
// ended cannot be cancelled; nor can one that runs, in this invocation or
// another, which nothing can stop: it commits or fails on its own.
func (h *Handler) CancelTask(ctx context.Context, req *a2a.CancelTaskRequest) (*a2a.Task, error) {
	c := call(ctx)
	v, ref, err := h.taskNamed(ctx, c, req.ID)
	if err != nil {
		return nil, h.fail(c, err)
	}
	now := h.cfg.Now()
	if t := v.task(nil, now); t.Status.State != a2a.TaskStateInputRequired {
		return nil, h.fail(c, notCancelable(t))
	}
	out, err := h.cfg.Service.Cancel(ctx, turn.Cancel{Request: turn.Request{Owner: c.Owner, SessionID: ref.session}})
	if err != nil {
		if errors.Is(err, turn.ErrResuming) || errors.Is(err, turn.ErrNothingPending) {
			// Another request answered the task, or is answering it.
			if v, verr := h.view(ctx, c.Owner, ref); verr == nil {
				return nil, h.fail(c, notCancelable(v.task(nil, now)))
			}
		}
		return nil, h.fail(c, err)
	}
	c.Result = out.Result
	v, err = h.view(ctx, c.Owner, ref)
	if err != nil {
		return nil, h.fail(c, err)
	}
	return v.task(nil, h.cfg.Now()), nil
}

func notCancelable(t *a2a.Task) *a2a.Error {
	why := "its turn has ended"
	if t.Status.State == a2a.TaskStateWorking {
		why = "its turn runs on in another request, which cannot be stopped; it commits or fails on its own"
	}
	return a2a.NewError(a2a.ErrTaskNotCancelable, fmt.Sprintf("task %s is %s: only a task that waits for input (%s) can be canceled, and %s", t.ID, t.Status.State, a2a.TaskStateInputRequired, why)).
		WithDetails(map[string]any{"code": "not_cancelable", "status": http.StatusConflict, "state": string(t.Status.State)})
}

// SendMessage runs a turn, or answers the interrupts of the task the
// message names, and answers with the task.
func (h *Handler) SendMessage(ctx context.Context, req *a2a.SendMessageRequest) (a2a.SendMessageResult, error) {
	c := call(ctx)
	m, err := h.message(ctx, c, req)
	if err != nil {
		return nil, h.fail(c, err)
	}
	out, err := h.cfg.Service.Chat(ctx, m.chat)
	if err != nil {
		return nil, h.fail(c, err)
	}
	c.Result, c.Replayed = out.Result, out.Replayed
	t, err := h.after(ctx, c, m, out, historyLength(req))
	if err != nil {
		return nil, h.fail(c, err)
	}
	return t, nil
}

func historyLength(req *a2a.SendMessageRequest) *int {
	if req.Config == nil {
		return nil
	}
	return req.Config.HistoryLength
}

// SendStreamingMessage runs a turn as SendMessage does, streamed: the task
// when the turn starts, the agent's text as artifact updates as it writes
// it, its tool calls as status updates, and the task's end.
func (h *Handler) SendStreamingMessage(ctx context.Context, req *a2a.SendMessageRequest) iter.Seq2[a2a.Event, error] {
	return func(yield func(a2a.Event, error) bool) {
		c := call(ctx)
		m, err := h.message(ctx, c, req)
		if err != nil {
			yield(nil, h.fail(c, err))
			return
		}
		s := &stream{yield: yield, msg: req.Message, resumed: m.resumed}
		if m.resumed != nil {
			s.texts = len(m.resumed.Artifacts)
		}
		m.chat.Sink = s
		out, err := h.cfg.Service.Chat(ctx, m.chat)
		if err != nil {
			s.send(nil, h.fail(c, err))
			return
		}
		c.Result, c.Replayed = out.Result, out.Replayed
		t, err := h.after(ctx, c, m, out, historyLength(req))
		if err != nil {
			s.send(nil, h.fail(c, err))
			return
		}
		s.finish(t)
	}
}

// sent is a caller's message, read: the turn it asks for, and, for a
// message that answers a task's interrupts, that task as it was.
type sent struct {
	chat    turn.Chat
	id      string
	resumed *a2a.Task // nil for a new task
	ref     taskRef   // the resumed task's
}

// message reads a SendMessage request into the turn it asks for.
func (h *Handler) message(ctx context.Context, c *Call, req *a2a.SendMessageRequest) (*sent, error) {
	if cfg := req.Config; cfg != nil {
		switch {
		case cfg.ReturnImmediately:
			return nil, unsupported("returnImmediately is not supported: a task's turn runs within the request, so send the message blocking or streaming, and read the task again with GetTask")
		case cfg.PushConfig != nil:
			return nil, unsupported("push notifications are not supported: stream the message, or read the task with GetTask")
		}
	}
	in, err := readMessage(req.Message)
	if err != nil {
		return nil, err
	}
	msg := req.Message
	raw, err := json.Marshal(msg)
	if err != nil {
		return nil, invalid("message: %v", err)
	}
	m := &sent{id: msg.ID, chat: turn.Chat{
		Request: turn.Request{
			Owner: c.Owner, SessionID: msg.ContextID,
			IdempotencyKey: "a2a:" + msg.ID, Fingerprint: turn.Fingerprint("a2a message", raw),
		},
		MessageID: msg.ID,
	}}
	c.SessionID = msg.ContextID
	if msg.TaskID == "" {
		if in.responses != nil {
			return nil, invalid("responses answer a task's interrupts: send them with the taskId of the task that waits for input")
		}
		if err := h.cfg.CheckInput(in.content); err != nil {
			return nil, err
		}
		// A new task moves on from what the context's last one waits for,
		// which is then cancelled.
		m.chat.Content, m.chat.DenyPending = in.content, true
		return m, nil
	}
	ref, ok := parseTask(msg.TaskID)
	if !ok {
		return nil, taskNotFound(msg.TaskID)
	}
	if msg.ContextID != "" && msg.ContextID != ref.session {
		return nil, invalid("message.contextId %q is not the context of task %s", msg.ContextID, msg.TaskID)
	}
	c.SessionID, m.chat.SessionID, m.ref = ref.session, ref.session, ref
	v, err := h.view(ctx, c.Owner, ref)
	if err != nil {
		return nil, err
	}
	m.resumed = v.task(nil, h.cfg.Now())
	switch {
	case in.responses != nil:
		m.chat.Responses = in.responses
	case in.text != "":
		m.chat.Responses = []agent.Response{{InterruptID: v.question(h.cfg.Now()), Answer: in.text}}
	default:
		return nil, invalid("a message to task %s answers its interrupts: send a data part {\"responses\": [...]}, or text alone to answer its one question", msg.TaskID)
	}
	return m, nil
}

// question returns the id of the task's one live question, or "" when it
// has none, or more than one interrupt: then text alone cannot answer it,
// which the resume refuses.
func (v *turnView) question(now time.Time) string {
	live := v.pending.Live(now)
	if !v.last || len(live) != 1 || live[0].Kind != agent.KindQuestion {
		return ""
	}
	return live[0].ID
}

// after is the task a turn came to: derived from the answer when it holds
// the whole turn, else read back from the session.
func (h *Handler) after(ctx context.Context, c *Call, m *sent, out *turn.Outcome[turn.ChatAnswer], length *int) (*a2a.Task, error) {
	c.SessionID = out.Answer.SessionID
	ref := m.ref
	if m.resumed == nil {
		ref = taskRef{session: out.Answer.SessionID, first: out.First, message: m.id}
	}
	if m.resumed == nil && !out.Replayed {
		v := &turnView{ref: ref, msgs: out.Answer.Messages, last: true, updated: h.cfg.Now()}
		if len(out.Answer.Interrupts) > 0 {
			v.pending = &agent.Pending{Interrupts: out.Answer.Interrupts}
		}
		return v.task(length, h.cfg.Now()), nil
	}
	v, err := h.view(ctx, c.Owner, ref)
	if err != nil {
		return nil, err
	}
	return v.task(length, h.cfg.Now()), nil
}

// Bounds on reading a task: the messages of a page, and the pages.
const (
	taskPage     = 100
	maxTaskPages = 10
)

// view reads the turn of the task ref names from its session.
func (h *Handler) view(ctx context.Context, owner string, ref taskRef) (*turnView, error) {
	v := &turnView{ref: ref}
	cursor := turn.CursorAt(ref.first)
	for pages := 1; ; pages++ {
		page, err := h.cfg.Service.Transcript(ctx, owner, ref.session, cursor, taskPage)
		switch {
		case errors.Is(err, turn.ErrNotFound):
			return nil, taskNotFound(ref.id())
		case err != nil:
			return nil, err
		case pages == 1 && (page.First != ref.first || len(page.Messages) == 0):
			return nil, taskNotFound(ref.id())
		}
		v.msgs = append(v.msgs, page.Messages...)
		v.pending, v.resuming, v.updated = page.Pending, page.Resuming, page.UpdatedAt
		start := v.start()
		if start < 0 || v.msgs[start].ID != ref.message {
			return nil, taskNotFound(ref.id())
		}
		if end := nextTurn(v.msgs, start); end >= 0 {
			v.msgs, v.pending, v.resuming = v.msgs[:end], nil, false
			return v, nil
		}
		if page.NextCursor == "" || pages == maxTaskPages {
			v.last = page.NextCursor == ""
			return v, nil
		}
		cursor = page.NextCursor
	}
}

// SubscribeToTask is not supported: a task's turn streams to the request
// that runs it.
func (h *Handler) SubscribeToTask(ctx context.Context, _ *a2a.SubscribeToTaskRequest) iter.Seq2[a2a.Event, error] {
	return func(yield func(a2a.Event, error) bool) {
		yield(nil, h.fail(call(ctx), unsupported("SubscribeToTask is not supported: a task's turn streams to the request that sent its message; read the task with GetTask")))
	}
}

func (h *Handler) noPush(ctx context.Context) error {
	return h.fail(call(ctx), unsupported("push notifications are not supported: stream the message, or read the task with GetTask"))
}

// GetTaskPushConfig is not supported.
func (h *Handler) GetTaskPushConfig(ctx context.Context, _ *a2a.GetTaskPushConfigRequest) (*a2a.PushConfig, error) {
	return nil, h.noPush(ctx)
}

// ListTaskPushConfigs is not supported.
func (h *Handler) ListTaskPushConfigs(ctx context.Context, _ *a2a.ListTaskPushConfigRequest) (*a2a.ListTaskPushConfigResponse, error) {
	return nil, h.noPush(ctx)
}

// CreateTaskPushConfig is not supported.
func (h *Handler) CreateTaskPushConfig(ctx context.Context, _ *a2a.PushConfig) (*a2a.PushConfig, error) {
	return nil, h.noPush(ctx)
}

// DeleteTaskPushConfig is not supported.
func (h *Handler) DeleteTaskPushConfig(ctx context.Context, _ *a2a.DeleteTaskPushConfigRequest) error {
	return h.noPush(ctx)
}

// GetExtendedAgentCard is not supported: the public card is the whole
// card.
func (h *Handler) GetExtendedAgentCard(ctx context.Context, _ *a2a.GetExtendedAgentCardRequest) (*a2a.AgentCard, error) {
	return nil, h.fail(call(ctx), a2a.NewError(a2a.ErrExtendedCardNotConfigured, "there is no extended agent card: the public card is the whole card").
		WithDetails(map[string]any{"code": "unsupported", "status": http.StatusBadRequest}))
}
