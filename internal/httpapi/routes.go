package httpapi

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/lambda-agent/lambda-agent/internal/agent"
	"github.com/lambda-agent/lambda-agent/internal/ddbhistory"
)

// ChatRequest is the body of POST /chat: a message, or content blocks in
// Bedrock's shape.
type ChatRequest struct {
	SessionID *string           `json:"session_id,omitempty"`
	Message   *string           `json:"message,omitempty"`
	Content   []json.RawMessage `json:"content,omitempty"`
}

// ChatResponse is the answer to POST /chat.
type ChatResponse struct {
	SessionID string `json:"session_id"`
	// Text is the final assistant text.
	Text string `json:"text"`
	// Messages are the messages the turn added.
	Messages   []agent.Message  `json:"messages"`
	StopReason agent.StopReason `json:"stop_reason"`
	Usage      agent.Usage      `json:"usage"`
	Metrics    Metrics          `json:"metrics"`
	// Window says which stored messages the model sees from now on.
	Window Window `json:"window"`
}

// Metrics describe a turn's work.
type Metrics struct {
	Cycles     int   `json:"cycles"`
	ModelCalls int   `json:"model_calls"`
	ToolCalls  int   `json:"tool_calls"`
	Reductions int   `json:"reductions"`
	DurationMS int64 `json:"duration_ms"`
}

// Window is the conversation manager's state, as clients see it.
type Window struct {
	// Removed counts the stored messages the model no longer sees.
	Removed int `json:"removed"`
	// Summarized is true when a summary stands for them.
	Summarized bool `json:"summarized"`
}

func chatResponse(sessionID string, res *agent.Result) ChatResponse {
	return ChatResponse{
		SessionID:  sessionID,
		Text:       res.Text,
		Messages:   res.Messages,
		StopReason: res.StopReason,
		Usage:      res.Usage,
		Metrics:    metricsOf(res),
		Window:     windowOf(res.Window),
	}
}

func metricsOf(r *agent.Result) Metrics {
	return Metrics{
		Cycles:     r.Metrics.Cycles,
		ModelCalls: r.Metrics.ModelCalls,
		ToolCalls:  r.Metrics.ToolCalls,
		Reductions: r.Metrics.Reductions,
		DurationMS: r.Metrics.Duration.Milliseconds(),
	}
}

func windowOf(w agent.WindowState) Window {
	return Window{Removed: w.Removed, Summarized: w.Summary != ""}
}

// bodyLimit allows for base64 and JSON escaping around a message of the
// maximum size.
func (h *Handler) bodyLimit() int { return 2*h.cfg.MaxMessageBytes + 64<<10 }

// decodeTurn returns the caller and the body of a turn's request, decoded
// into v.
func (h *Handler) decodeTurn(req *events.APIGatewayV2HTTPRequest, v any) (string, []byte, *Error) {
	owner, e := h.owner(req)
	if e != nil {
		return "", nil, e
	}
	raw, e := body(req, h.bodyLimit())
	if e != nil {
		return "", nil, e
	}
	return owner, raw, decodeJSON(raw, v, "the body")
}

func (h *Handler) chat(ctx context.Context, req *events.APIGatewayV2HTTPRequest, rec *record) (int, []byte, error) {
	return h.chatTurn(ctx, req, rec, func(sess *ddbhistory.Session, input []agent.ContentBlock) (*agent.Result, error) {
		return h.cfg.Agent.Run(ctx, &sess.Conversation, input)
	})
}

// chatTurn runs a POST /chat turn, whether answered whole (Chat) or
// streamed (ChatStream), which differ only in run. Both routes share the
// request, the checks and the idempotency fingerprint, so a key sent to
// either replays the same turn.
func (h *Handler) chatTurn(ctx context.Context, req *events.APIGatewayV2HTTPRequest, rec *record, run func(*ddbhistory.Session, []agent.ContentBlock) (*agent.Result, error)) (int, []byte, error) {
	var in ChatRequest
	owner, raw, e := h.decodeTurn(req, &in)
	if e != nil {
		return 0, nil, e
	}
	input, e := content(in.Message, in.Content, h.cfg.MaxMessageBytes)
	if e != nil {
		return 0, nil, e
	}
	return h.turn(ctx, req, rec, owner, turnSpec{route: RouteChat, body: raw, named: in.SessionID,
		run: func(sess *ddbhistory.Session) (*agent.Result, any, any, error) {
			res, err := run(sess, input)
			if err != nil {
				return nil, nil, nil, err
			}
			answer := chatResponse(sess.ID, res)
			stored := answer
			stored.Messages = nil // replays read them from the transcript
			return res, answer, stored, nil
		}})
}

// storeMargin is how long before the invocation's deadline store calls
// give up, so that there is always time to answer.
const storeMargin = 500 * time.Millisecond

// storeContext returns the context for store calls: ctx, ending storeMargin
// before its deadline.
func storeContext(ctx context.Context) (context.Context, context.CancelFunc) {
	if d, ok := ctx.Deadline(); ok {
		return context.WithDeadline(ctx, d.Add(-storeMargin))
	}
	return context.WithCancel(ctx)
}

// turnSpec is one route's turn: its request and how to run it.
type turnSpec struct {
	route string
	body  []byte  // the request body, which the idempotency fingerprint covers
	named *string // the session the request names, if any
	// run runs the turn and returns the result, the answer, and the form
	// of the answer to store for replays.
	run func(*ddbhistory.Session) (res *agent.Result, answer, stored any, err error)
}

// turn runs one turn on a session and commits it: load (or start) the
// session, answer a replayed idempotency key from the store, hold the key,
// run, encode the answer, commit it with the turn. Nothing is written unless
// the whole turn succeeded.
func (h *Handler) turn(ctx context.Context, req *events.APIGatewayV2HTTPRequest, rec *record, owner string, spec turnSpec) (int, []byte, error) {
	idemKey, e := idempotencyKey(req)
	if e != nil {
		return 0, nil, e
	}
	id, e := sessionID(spec.named, owner, idemKey)
	if e != nil {
		return 0, nil, e
	}
	rec.sessionID = id
	key := ddbhistory.Key{Owner: owner, ID: id}
	fp := fingerprint(spec.route, spec.body)
	storeCtx, cancel := storeContext(ctx)
	defer cancel()

	sess, err := h.cfg.Store.Load(storeCtx, key, idemKey)
	switch {
	case errors.Is(err, ddbhistory.ErrNotFound) && !errors.Is(err, ddbhistory.ErrIDTaken):
		sess = ddbhistory.NewSession(key) // created by the commit, under the caller
	case err != nil:
		return 0, nil, err
	case sess.Replay != nil:
		return h.replay(storeCtx, key, spec.route, fp, sess.Replay, rec)
	}
	releaseHold := true
	if idemKey != "" {
		if err := h.cfg.Store.Begin(storeCtx, sess, idemKey, fp); err != nil {
			return h.keyInUse(storeCtx, key, idemKey, spec.route, fp, err, rec)
		}
		defer func() {
			if !releaseHold {
				return
			}
			// Free the key of a turn that did not commit, so a retry need
			// not wait for the hold to expire; its own context, because
			// the request's may be what ended the turn.
			rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Second)
			defer cancel()
			_ = h.cfg.Store.Release(rctx, sess)
		}()
	}

	res, answer, stored, err := spec.run(sess)
	if err != nil {
		return 0, nil, err
	}
	rec.result = res
	out, err := json.Marshal(answer)
	if err != nil {
		return 0, nil, err
	}
	var replay []byte
	if idemKey != "" {
		if replay, err = json.Marshal(stored); err != nil {
			return 0, nil, err
		}
	}
	err = h.cfg.Store.Commit(storeCtx, sess, ddbhistory.Turn{
		Messages:       res.Messages,
		Window:         res.Window,
		State:          res.State,
		IdempotencyKey: idemKey,
		Fingerprint:    fp,
		Response:       replay,
	})
	if errors.Is(err, ddbhistory.ErrOutcomeUnknown) {
		// The turn may be stored: keep the key held, so that a retry
		// waits for the hold to expire and then replays or runs the turn
		// once, rather than run it beside a commit that may still land.
		releaseHold = false
	}
	if err != nil {
		return 0, nil, err
	}
	return http.StatusOK, out, nil
}

// fingerprint identifies a request, so that an idempotency key reused for
// another request is told apart from a retry.
func fingerprint(route string, body []byte) string {
	h := sha256.New()
	h.Write([]byte(route + "\n"))
	h.Write(body)
	return hex.EncodeToString(h.Sum(nil))
}

// keyInUse answers a request whose idempotency key another request holds or
// has used.
func (h *Handler) keyInUse(ctx context.Context, key ddbhistory.Key, idemKey, route, fp string, err error, rec *record) (int, []byte, error) {
	var inUse *ddbhistory.KeyInUseError
	switch {
	case !errors.As(err, &inUse):
		return 0, nil, err
	case inUse.Fingerprint != fp:
		return 0, nil, keyReused()
	case inUse.Committed:
		// The first request committed between our load and our hold, or
		// its session is gone.
		sess, err := h.cfg.Store.Load(ctx, key, idemKey)
		switch {
		case err == nil && sess.Replay != nil:
			return h.replay(ctx, key, route, fp, sess.Replay, rec)
		case err == nil, errors.Is(err, ddbhistory.ErrNotFound), errors.Is(err, ddbhistory.ErrDeleting):
			return 0, nil, replayGone(err)
		}
		return 0, nil, err
	}
	return 0, nil, &Error{Status: http.StatusConflict, Code: "in_progress", Message: "a request with this Idempotency-Key is still running; retry shortly to get its response", RetryAfter: 2, err: err}
}

// replayGone answers a retry of a committed request whose session has been
// deleted since, with the turn.
func replayGone(err error) *Error {
	return &Error{Status: http.StatusNotFound, Code: "not_found", Message: "the request with this Idempotency-Key was answered, but the session it went to has been deleted since", err: err}
}

func keyReused() *Error {
	return &Error{Status: http.StatusUnprocessableEntity, Code: "idempotency_key_reused", Message: "this Idempotency-Key was used for a different request; use a new key for a new request"}
}

// replay answers with the response of the turn an idempotency key recorded.
// A chat response is stored without its messages, which the transcript
// holds already; they are read back from it.
func (h *Handler) replay(ctx context.Context, key ddbhistory.Key, route, fp string, r *ddbhistory.Replay, rec *record) (int, []byte, error) {
	switch {
	case r.Fingerprint != fp || r.SessionID != key.ID:
		return 0, nil, keyReused()
	case r.Response == nil:
		return 0, nil, replayGone(nil)
	}
	body := []byte(r.Response)
	if route == RouteChat {
		var resp ChatResponse
		if err := json.Unmarshal(body, &resp); err != nil {
			return 0, nil, fmt.Errorf("httpapi: decode a stored response: %w", err)
		}
		page, err := h.cfg.Store.Transcript(ctx, key, ddbhistory.CursorAt(r.First), max(r.Count, 1))
		if err != nil {
			return 0, nil, err
		}
		resp.Messages = page.Messages
		if body, err = json.Marshal(resp); err != nil {
			return 0, nil, err
		}
	}
	rec.replayed = true
	return http.StatusOK, body, nil
}

// StructuredRequest is the body of POST /structured.
type StructuredRequest struct {
	SessionID   *string         `json:"session_id,omitempty"`
	Prompt      *string         `json:"prompt"`
	Schema      json.RawMessage `json:"schema"`
	Name        string          `json:"name,omitempty"`
	Description string          `json:"description,omitempty"`
}

// StructuredResponse is the answer to POST /structured.
type StructuredResponse struct {
	SessionID string          `json:"session_id"`
	Data      json.RawMessage `json:"data"`
	Attempts  int             `json:"attempts"`
	Usage     agent.Usage     `json:"usage"`
	Metrics   Metrics         `json:"metrics"`
}

func (h *Handler) structured(ctx context.Context, req *events.APIGatewayV2HTTPRequest, rec *record) (int, []byte, error) {
	var in StructuredRequest
	owner, raw, e := h.decodeTurn(req, &in)
	if e != nil {
		return 0, nil, e
	}
	if in.Prompt == nil {
		return 0, nil, badRequest("invalid_request", "prompt is required")
	}
	prompt, e := content(in.Prompt, nil, h.cfg.MaxMessageBytes)
	if e != nil {
		return 0, nil, e
	}
	if len(in.Schema) == 0 || string(in.Schema) == "null" {
		return 0, nil, badRequest("invalid_schema", "schema is required: a JSON Schema whose root has \"type\": \"object\"")
	}
	if h.cfg.CompileSchema == nil {
		return 0, nil, errors.New("httpapi: Config.CompileSchema is not set, and the structured route needs it")
	}
	schema, err := h.cfg.CompileSchema(in.Schema)
	if err != nil {
		return 0, nil, err
	}
	return h.turn(ctx, req, rec, owner, turnSpec{route: RouteStructured, body: raw, named: in.SessionID,
		run: func(sess *ddbhistory.Session) (*agent.Result, any, any, error) {
			res, err := h.cfg.Agent.Structured(ctx, &sess.Conversation, agent.StructuredRequest{
				Prompt:      prompt,
				Schema:      schema,
				Name:        in.Name,
				Description: in.Description,
			})
			if err != nil {
				return nil, nil, nil, err
			}
			answer := StructuredResponse{
				SessionID: sess.ID,
				Data:      res.Data,
				Attempts:  res.Attempts,
				Usage:     res.Usage,
				Metrics:   metricsOf(&res.Result),
			}
			return &res.Result, answer, answer, nil
		}})
}

// SessionsResponse is the answer to GET /sessions: the caller's sessions,
// newest first.
type SessionsResponse struct {
	Sessions   []SessionSummary `json:"sessions"`
	NextCursor string           `json:"next_cursor,omitempty"`
}

// SessionSummary is a session in a list.
type SessionSummary struct {
	SessionID string `json:"session_id"`
	// Title is the start of the session's first message.
	Title     string    `json:"title"`
	CreatedAt time.Time `json:"created_at"`
}

// Page sizes of GET /sessions.
const (
	DefaultListSize = 20
	MaxListSize     = ddbhistory.MaxListSize
)

func (h *Handler) listSessions(ctx context.Context, req *events.APIGatewayV2HTTPRequest, _ *record) (int, []byte, error) {
	owner, e := h.owner(req)
	if e != nil {
		return 0, nil, e
	}
	limit, e := limitParam(req, DefaultListSize, MaxListSize)
	if e != nil {
		return 0, nil, e
	}
	storeCtx, cancel := storeContext(ctx)
	defer cancel()
	list, err := h.cfg.Store.List(storeCtx, owner, req.QueryStringParameters["cursor"], limit)
	if err != nil {
		return 0, nil, err
	}
	out := SessionsResponse{Sessions: make([]SessionSummary, 0, len(list.Sessions)), NextCursor: list.NextCursor}
	for _, s := range list.Sessions {
		out.Sessions = append(out.Sessions, SessionSummary{SessionID: s.ID, Title: s.Title, CreatedAt: s.CreatedAt.UTC()})
	}
	body, err := json.Marshal(out)
	if err != nil {
		return 0, nil, err
	}
	return http.StatusOK, body, nil
}

// limitParam reads the limit query parameter: a whole number from 1 to max,
// def when absent.
func limitParam(req *events.APIGatewayV2HTTPRequest, def, max int) (int, *Error) {
	v, ok := req.QueryStringParameters["limit"]
	if !ok {
		return def, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 || n > max {
		return 0, badRequest("invalid_limit", "limit=%q must be a whole number from 1 to %d", v, max)
	}
	return n, nil
}

// SessionResponse is the answer to GET /sessions/{sessionId}: one page of
// the full transcript, oldest first.
type SessionResponse struct {
	SessionID string                     `json:"session_id"`
	Title     string                     `json:"title"`
	Messages  []agent.Message            `json:"messages"`
	State     map[string]json.RawMessage `json:"state"`
	Summary   *string                    `json:"summary"`
	Window    Window                     `json:"window"`
	CreatedAt time.Time                  `json:"created_at"`
	UpdatedAt time.Time                  `json:"updated_at"`
	// ExpiresAt is null for a session that never expires.
	ExpiresAt  *time.Time `json:"expires_at"`
	NextCursor string     `json:"next_cursor,omitempty"`
}

// Page sizes of GET /sessions/{sessionId}.
const (
	DefaultPageSize = 100
	MaxPageSize     = ddbhistory.MaxPageSize
)

func (h *Handler) getSession(ctx context.Context, req *events.APIGatewayV2HTTPRequest, rec *record) (int, []byte, error) {
	key, e := h.sessionKey(req, rec)
	if e != nil {
		return 0, nil, e
	}
	limit, e := limitParam(req, DefaultPageSize, MaxPageSize)
	if e != nil {
		return 0, nil, e
	}
	storeCtx, cancel := storeContext(ctx)
	defer cancel()
	page, err := h.cfg.Store.Transcript(storeCtx, key, req.QueryStringParameters["cursor"], limit)
	if err != nil {
		return 0, nil, err
	}
	s := page.Session
	out := SessionResponse{
		SessionID:  s.ID,
		Title:      s.Title,
		Messages:   page.Messages,
		State:      s.Conversation.State,
		Window:     windowOf(s.Conversation.Window),
		CreatedAt:  s.CreatedAt.UTC(),
		UpdatedAt:  s.UpdatedAt.UTC(),
		NextCursor: page.NextCursor,
	}
	if out.Messages == nil {
		out.Messages = []agent.Message{}
	}
	if out.State == nil {
		out.State = map[string]json.RawMessage{}
	}
	if sum := s.Conversation.Window.Summary; sum != "" {
		out.Summary = &sum
	}
	if !s.ExpiresAt.IsZero() {
		at := s.ExpiresAt.UTC()
		out.ExpiresAt = &at
	}
	body, err := json.Marshal(out)
	if err != nil {
		return 0, nil, err
	}
	return http.StatusOK, body, nil
}

func (h *Handler) deleteSession(ctx context.Context, req *events.APIGatewayV2HTTPRequest, rec *record) (int, []byte, error) {
	key, e := h.sessionKey(req, rec)
	if e != nil {
		return 0, nil, e
	}
	storeCtx, cancel := storeContext(ctx)
	defer cancel()
	if err := h.cfg.Store.Delete(storeCtx, key); err != nil {
		return 0, nil, err
	}
	return http.StatusNoContent, nil, nil
}

// sessionKey returns the session a /sessions/{sessionId} request names.
func (h *Handler) sessionKey(req *events.APIGatewayV2HTTPRequest, rec *record) (ddbhistory.Key, *Error) {
	owner, e := h.owner(req)
	if e != nil {
		return ddbhistory.Key{}, e
	}
	id := req.PathParameters["sessionId"]
	rec.sessionID = id
	if !ddbhistory.ValidID(id) {
		return ddbhistory.Key{}, badRequest("invalid_session_id", "session id %q must be 1 to 128 letters, digits, '.', '_', ':' or '-', starting with a letter or digit", id)
	}
	return ddbhistory.Key{Owner: owner, ID: id}, nil
}
