package httpapi

import (
	"context"
	"encoding/json"
	"errors"
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

// decodeTurn returns the caller and decodes a turn's body into v.
func (h *Handler) decodeTurn(req *events.APIGatewayV2HTTPRequest, v any) (string, *Error) {
	owner, e := h.owner(req)
	if e != nil {
		return "", e
	}
	raw, e := body(req, h.bodyLimit())
	if e != nil {
		return "", e
	}
	return owner, decodeJSON(raw, v, "the body")
}

func (h *Handler) chat(ctx context.Context, req *events.APIGatewayV2HTTPRequest, rec *record) (int, []byte, error) {
	var in ChatRequest
	owner, e := h.decodeTurn(req, &in)
	if e != nil {
		return 0, nil, e
	}
	input, e := content(in.Message, in.Content, h.cfg.MaxMessageBytes)
	if e != nil {
		return 0, nil, e
	}
	return h.turn(ctx, req, rec, owner, in.SessionID, func(sess *ddbhistory.Session) (*agent.Result, any, error) {
		res, err := h.cfg.Agent.Run(ctx, &sess.Conversation, input)
		if err != nil {
			return nil, nil, err
		}
		return res, ChatResponse{
			SessionID:  sess.ID,
			Text:       res.Text,
			Messages:   res.Messages,
			StopReason: res.StopReason,
			Usage:      res.Usage,
			Metrics:    metricsOf(res),
			Window:     windowOf(res.Window),
		}, nil
	})
}

// turn runs one turn on a session and commits it: load (or start) the
// session, answer a replayed idempotency key from the store, run, encode the
// answer, commit it with the turn. Nothing is written unless the whole turn
// succeeded.
func (h *Handler) turn(ctx context.Context, req *events.APIGatewayV2HTTPRequest, rec *record, owner string, named *string,
	run func(*ddbhistory.Session) (*agent.Result, any, error)) (int, []byte, error) {
	idemKey, e := idempotencyKey(req)
	if e != nil {
		return 0, nil, e
	}
	id, e := sessionID(named, owner, idemKey)
	if e != nil {
		return 0, nil, e
	}
	rec.sessionID = id
	key := ddbhistory.Key{Owner: owner, ID: id}
	sess, err := h.cfg.Store.Load(ctx, key, idemKey)
	switch {
	case errors.Is(err, ddbhistory.ErrNotFound) && !errors.Is(err, ddbhistory.ErrIDTaken):
		sess = ddbhistory.NewSession(key) // created by the commit, under the caller
	case err != nil:
		return 0, nil, err
	case sess.Replay != nil:
		rec.replayed = true
		return http.StatusOK, sess.Replay, nil
	}
	res, answer, err := run(sess)
	if err != nil {
		return 0, nil, err
	}
	rec.result = res
	out, err := json.Marshal(answer)
	if err != nil {
		return 0, nil, err
	}
	err = h.cfg.Store.Commit(ctx, sess, ddbhistory.Turn{
		Messages:       res.Messages,
		Window:         res.Window,
		State:          res.State,
		IdempotencyKey: idemKey,
		Response:       out,
	})
	if err != nil {
		return 0, nil, err
	}
	return http.StatusOK, out, nil
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
	owner, e := h.decodeTurn(req, &in)
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
	schema, err := agent.CompileSchema(in.Schema)
	if err != nil {
		return 0, nil, err
	}
	return h.turn(ctx, req, rec, owner, in.SessionID, func(sess *ddbhistory.Session) (*agent.Result, any, error) {
		res, err := h.cfg.Agent.Structured(ctx, &sess.Conversation, agent.StructuredRequest{
			Prompt:      prompt,
			Schema:      schema,
			Name:        in.Name,
			Description: in.Description,
		})
		if err != nil {
			return nil, nil, err
		}
		return &res.Result, StructuredResponse{
			SessionID: sess.ID,
			Data:      res.Data,
			Attempts:  res.Attempts,
			Usage:     res.Usage,
			Metrics:   metricsOf(&res.Result),
		}, nil
	})
}

// SessionResponse is the answer to GET /sessions/{sessionId}: one page of
// the full transcript, oldest first.
type SessionResponse struct {
	SessionID string                     `json:"session_id"`
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
	limit := DefaultPageSize
	if v, ok := req.QueryStringParameters["limit"]; ok {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > MaxPageSize {
			return 0, nil, badRequest("invalid_limit", "limit=%q must be a whole number from 1 to %d", v, MaxPageSize)
		}
		limit = n
	}
	page, err := h.cfg.Store.Transcript(ctx, key, req.QueryStringParameters["cursor"], limit)
	if err != nil {
		return 0, nil, err
	}
	s := page.Session
	out := SessionResponse{
		SessionID:  s.ID,
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
	if err := h.cfg.Store.Delete(ctx, key); err != nil {
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
