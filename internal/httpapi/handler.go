package httpapi

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"runtime/debug"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/lambda-agent/lambda-agent/internal/agent"
	"github.com/lambda-agent/lambda-agent/internal/ddbhistory"
)

// Store is the session store, as the handlers use it. *ddbhistory.Store
// implements it; its errors are the ddbhistory sentinels and types. It must
// be safe for concurrent use: one Handler serves concurrent requests, and a
// Session is used by one request at a time.
type Store interface {
	Load(ctx context.Context, key ddbhistory.Key, idempotencyKey string) (*ddbhistory.Session, error)
	Begin(ctx context.Context, sess *ddbhistory.Session, idempotencyKey, fingerprint string) error
	Release(ctx context.Context, sess *ddbhistory.Session) error
	Commit(ctx context.Context, sess *ddbhistory.Session, turn ddbhistory.Turn) error
	Transcript(ctx context.Context, key ddbhistory.Key, cursor string, limit int) (*ddbhistory.Page, error)
	List(ctx context.Context, owner, cursor string, limit int) (*ddbhistory.SessionList, error)
	Delete(ctx context.Context, key ddbhistory.Key) error
}

// Agent runs turns. *agent.Agent implements it. It must be safe for
// concurrent use, and leave the Conversation it is given unchanged; its
// errors are the agent sentinels and types.
type Agent interface {
	Run(ctx context.Context, conv *agent.Conversation, input []agent.ContentBlock) (*agent.Result, error)
	Stream(ctx context.Context, conv *agent.Conversation, input []agent.ContentBlock, emit func(agent.Event)) (*agent.Result, error)
	Structured(ctx context.Context, conv *agent.Conversation, req agent.StructuredRequest) (*agent.StructuredResult, error)
}

var (
	_ Store = (*ddbhistory.Store)(nil)
	_ Agent = (*agent.Agent)(nil)
)

// Config configures a Handler.
type Config struct {
	Agent Agent
	Store Store
	// RequireAuth makes requests without JWT claims fail with 401 rather
	// than belong to the owner "anonymous".
	RequireAuth bool
	// CompileSchema compiles the schema of a structured request; schema.Compile
	// (internal/schema) is the one to use. Only the structured route needs it,
	// so the chat function goes without the validator's start-up cost.
	CompileSchema func(json.RawMessage) (agent.Schema, error)
	// MaxMessageBytes bounds a turn's input; 0 means DefaultMaxMessageBytes.
	MaxMessageBytes int
	// Logger gets one line per request; nil means slog.Default().
	Logger *slog.Logger
}

// DefaultMaxMessageBytes is the default limit on a turn's input.
const DefaultMaxMessageBytes = 256 << 10

// Handler answers API Gateway HTTP API (payload 2.0) requests for the chat
// and structured functions. It is safe for concurrent use.
type Handler struct {
	cfg Config
}

// New returns a Handler.
func New(cfg Config) (*Handler, error) {
	if cfg.Agent == nil || cfg.Store == nil {
		return nil, errors.New("httpapi: Agent and Store are required")
	}
	if cfg.MaxMessageBytes < 0 {
		return nil, fmt.Errorf("httpapi: MaxMessageBytes %d is negative", cfg.MaxMessageBytes)
	}
	cfg.MaxMessageBytes = cmp.Or(cfg.MaxMessageBytes, DefaultMaxMessageBytes)
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	return &Handler{cfg: cfg}, nil
}

// The routes, as API Gateway names them in RouteKey.
const (
	RouteChat          = "POST /chat"
	RouteListSessions  = "GET /sessions"
	RouteGetSession    = "GET /sessions/{sessionId}"
	RouteDeleteSession = "DELETE /sessions/{sessionId}"
	RouteStructured    = "POST /structured"
)

// Chat is the chat function's handler: POST /chat, GET /sessions, and GET
// and DELETE /sessions/{sessionId}. It never returns an error: every outcome is an
// HTTP response.
func (h *Handler) Chat(ctx context.Context, req events.APIGatewayV2HTTPRequest) (events.APIGatewayV2HTTPResponse, error) {
	return h.serve(ctx, &req, map[string]route{
		RouteChat:          h.chat,
		RouteListSessions:  h.listSessions,
		RouteGetSession:    h.getSession,
		RouteDeleteSession: h.deleteSession,
	}), nil
}

// Structured is the structured function's handler: POST /structured.
func (h *Handler) Structured(ctx context.Context, req events.APIGatewayV2HTTPRequest) (events.APIGatewayV2HTTPResponse, error) {
	return h.serve(ctx, &req, map[string]route{RouteStructured: h.structured}), nil
}

// route serves one route. It returns the status and body of a success, or
// an error; the log record collects what the line at the edge reports.
type route func(ctx context.Context, req *events.APIGatewayV2HTTPRequest, rec *record) (int, []byte, error)

// record is what the request's log line says.
type record struct {
	sessionID string
	replayed  bool
	result    *agent.Result
	outcome   string // "ok", or the error code
	err       error  // the cause of a failure, which callers do not see
}

// serve routes a request, turns errors and panics into answers, and logs one
// line for it.
func (h *Handler) serve(ctx context.Context, req *events.APIGatewayV2HTTPRequest, routes map[string]route) (resp events.APIGatewayV2HTTPResponse) {
	start := time.Now()
	key := routeKey(req)
	rec := &record{}
	defer func() {
		if v := recover(); v != nil {
			rec.err = fmt.Errorf("panic: %v\n%s", v, debug.Stack())
			resp = errorResponse(&Error{Status: http.StatusInternalServerError, Code: "internal", Message: "an internal error occurred"}, rec)
		}
		h.log(ctx, key, resp.StatusCode, rec, time.Since(start))
	}()

	serve, ok := routes[key]
	if !ok {
		return errorResponse(h.noRoute(req, key, routes), rec)
	}
	status, body, err := serve(ctx, req, rec)
	if err != nil {
		var te *agent.TurnError
		if errors.As(err, &te) { // a failed turn's tokens are billed too
			rec.result = &agent.Result{Usage: te.Usage, Metrics: te.Metrics}
		}
		return errorResponse(errorFor(err), rec)
	}
	rec.outcome = "ok"
	resp = events.APIGatewayV2HTTPResponse{StatusCode: status, Headers: map[string]string{}}
	if body != nil {
		resp.Headers["Content-Type"] = "application/json"
		resp.Body = string(body)
	}
	if rec.replayed {
		resp.Headers["Idempotent-Replayed"] = "true"
	}
	return resp
}

// routeKey returns the request's route: API Gateway's RouteKey, or, for
// events that have none (a $default route, a hand-written event), one made
// from the method and path.
func routeKey(req *events.APIGatewayV2HTTPRequest) string {
	if req.RouteKey != "" && req.RouteKey != "$default" {
		return req.RouteKey
	}
	method, path := req.RequestContext.HTTP.Method, req.RawPath
	if path == "" {
		path = req.RequestContext.HTTP.Path
	}
	if rest, ok := strings.CutPrefix(path, "/sessions/"); ok && rest != "" && !strings.Contains(rest, "/") {
		if req.PathParameters == nil {
			req.PathParameters = map[string]string{}
		}
		if req.PathParameters["sessionId"] == "" {
			req.PathParameters["sessionId"] = rest
		}
		path = "/sessions/{sessionId}"
	}
	return method + " " + path
}

func (h *Handler) noRoute(req *events.APIGatewayV2HTTPRequest, key string, routes map[string]route) *Error {
	_, path, _ := strings.Cut(key, " ")
	var allowed []string
	for k := range routes {
		if m, p, _ := strings.Cut(k, " "); p == path {
			allowed = append(allowed, m)
		}
	}
	if len(allowed) > 0 {
		return &Error{Status: http.StatusMethodNotAllowed, Code: "method_not_allowed", Message: fmt.Sprintf("%s is not allowed on %s; use %s", req.RequestContext.HTTP.Method, path, strings.Join(allowed, " or "))}
	}
	return &Error{Status: http.StatusNotFound, Code: "no_route", Message: fmt.Sprintf("there is no route %s", key)}
}

// errorResponse is the answer for e, which it notes in rec for the log.
func errorResponse(e *Error, rec *record) events.APIGatewayV2HTTPResponse {
	rec.outcome = e.Code
	if rec.err == nil {
		rec.err = e.err
	}
	body, _ := json.Marshal(map[string]*Error{"error": e}) // an Error always encodes
	resp := events.APIGatewayV2HTTPResponse{
		StatusCode: e.Status,
		Headers:    map[string]string{"Content-Type": "application/json"},
		Body:       string(body),
	}
	if e.RetryAfter > 0 {
		resp.Headers["Retry-After"] = strconv.Itoa(e.RetryAfter)
	}
	return resp
}

// log writes the request's one line: who, what, the outcome and the cost.
func (h *Handler) log(ctx context.Context, route string, status int, rec *record, d time.Duration) {
	attrs := []slog.Attr{
		slog.String("route", route),
		slog.Int("status", status),
		slog.String("outcome", rec.outcome),
		slog.String("session_id", rec.sessionID),
		slog.Int64("duration_ms", d.Milliseconds()),
	}
	if rec.err != nil && status >= 500 {
		attrs = append(attrs, slog.String("error", rec.err.Error()))
	}
	if rec.replayed {
		attrs = append(attrs, slog.Bool("replayed", true))
	}
	if r := rec.result; r != nil {
		if r.StopReason != "" {
			attrs = append(attrs, slog.String("stop_reason", string(r.StopReason)))
		}
		attrs = append(attrs,
			slog.Int("input_tokens", r.Usage.InputTokens),
			slog.Int("output_tokens", r.Usage.OutputTokens),
			slog.Int("model_calls", r.Metrics.ModelCalls),
			slog.Int("tool_calls", r.Metrics.ToolCalls),
			slog.Int64("model_ms", r.Metrics.ModelLatency.Milliseconds()),
		)
	}
	level := slog.LevelInfo
	if status >= 500 {
		level = slog.LevelError
	} else if status >= 400 {
		level = slog.LevelWarn
	}
	h.cfg.Logger.LogAttrs(ctx, level, "request", attrs...)
}
