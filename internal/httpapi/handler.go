package httpapi

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"runtime/debug"
	"strconv"
	"strings"
	"time"

	"github.com/lambda-agent/lambda-agent/internal/a2a"
	"github.com/lambda-agent/lambda-agent/internal/agent"
	"github.com/lambda-agent/lambda-agent/internal/ddbhistory"
	"github.com/lambda-agent/lambda-agent/internal/telemetry"
	"github.com/lambda-agent/lambda-agent/internal/turn"
)

// Service is the session service: every use of a session, turns and the
// rest. *turn.Service implements it; its errors are the turn package's and
// the agent's. It must be safe for concurrent use.
type Service interface {
	Chat(ctx context.Context, c turn.Chat) (*turn.Outcome[turn.ChatAnswer], error)
	Structured(ctx context.Context, s turn.Structured) (*turn.Outcome[turn.StructuredAnswer], error)
	CallTool(ctx context.Context, c turn.ToolCall) (*turn.Outcome[turn.ToolAnswer], error)
	Rewind(ctx context.Context, r turn.Rewind) (*turn.Outcome[turn.RewindAnswer], error)
	Import(ctx context.Context, im turn.Import) (*turn.Outcome[turn.ImportAnswer], error)
	ImportPage(ctx context.Context, p turn.ImportPage) (*turn.Outcome[turn.ImportAnswer], error)
	Transcript(ctx context.Context, owner, id, cursor string, limit int) (*turn.Page, error)
	AgentTranscript(ctx context.Context, owner, id, name, cursor string, limit int) (*turn.Page, error)
	Tail(ctx context.Context, owner, id string, n int) (*turn.Page, error)
	Export(ctx context.Context, owner, id, cursor string) (*turn.Export, error)
	List(ctx context.Context, owner, cursor string, limit int) (*turn.SessionList, error)
	Delete(ctx context.Context, owner, id string) error
	Cancel(ctx context.Context, c turn.Cancel) (*turn.Outcome[turn.ChatAnswer], error)
	Audit(ctx context.Context, owner, id, cursor string, limit, budget int) (*turn.AuditPage, error)
	AuditRecord(ctx context.Context, owner, id, record string) (*ddbhistory.AuditRecord, error)
}

var _ Service = (*turn.Service)(nil)

// Routes chooses the routes a Handler serves: each function serves its own,
// and the local run serves them all.
type Routes uint8

// The route sets.
const (
	// ChatRoutes: POST /chat and the session routes, GET /sessions, GET
	// and DELETE /sessions/{sessionId}, POST
	// /sessions/{sessionId}/tools/{name}, POST
	// /sessions/{sessionId}/rewind, GET /sessions/{sessionId}/export, POST
	// /sessions/import and POST /sessions/{sessionId}/import; the chat
	// function.
	ChatRoutes Routes = 1 << iota
	// StructuredRoutes: POST /structured; the structured function.
	StructuredRoutes
	// StreamRoutes: POST /chat/stream, the streamed chat.
	StreamRoutes
	// FunctionURLRoutes: the stream function's URL, which streams a POST to
	// any path, and serves the session routes of ChatRoutes. Callers that
	// sign with IAM own their sessions as iam:<ARN>, which the HTTP API's
	// routes cannot reach; this is where such a caller lists, reloads and
	// deletes them.
	FunctionURLRoutes
)

// AllRoutes is what the local run serves.
const AllRoutes = ChatRoutes | StructuredRoutes | StreamRoutes

// The routes, as ServeMux patterns and as API Gateway's route keys.
const (
	RouteChat          = "POST /chat"
	RouteChatStream    = "POST /chat/stream"
	RouteListSessions  = "GET /sessions"
	RouteGetSession    = "GET /sessions/{sessionId}"
	RouteDeleteSession = "DELETE /sessions/{sessionId}"
	RouteCallTool      = "POST /sessions/{sessionId}/tools/{name}"
	RouteExportSession = "GET /sessions/{sessionId}/export"
	RouteImportSession = "POST /sessions/import"
	RouteImportPage    = "POST /sessions/{sessionId}/import"
	RouteRewind        = "POST /sessions/{sessionId}/rewind"
	RouteStructured    = "POST /structured"
	RouteAGUI          = "POST /agui"
	routeURLStream     = "POST /"
)

// Config configures a Handler.
type Config struct {
	Service Service
	// Routes are the routes to serve; 0 means AllRoutes.
	Routes Routes
	// RequireAuth makes requests without an identity fail with 401 rather
	// than belong to the owner "anonymous".
	RequireAuth bool
	// CompileSchema compiles the schema of a structured request; schema.Compile
	// (internal/schema) is the one to use. Only the structured route needs it,
	// so the chat function goes without the validator's start-up cost.
	CompileSchema func(json.RawMessage) (agent.Schema, error)
	// MaxMessageBytes bounds a turn's input; 0 means DefaultMaxMessageBytes.
	MaxMessageBytes int
	// ModelID is the model the turns run on, which AG-UI's usage names.
	ModelID string
	// Memory is the long-term memory of the memory routes; nil when the
	// deployment keeps none, and then every caller has none.
	Memory Memory
	// Card is what the A2A agent card says of the agent (internal/a2a),
	// which the stream routes serve with A2A's JSON-RPC endpoint.
	Card a2a.CardConfig
	// Logger gets one line per request; nil means slog.Default().
	Logger *slog.Logger
	// Record, when set, is told of each request once it is answered, after
	// its line is logged: internal/telemetry counts it in metrics and
	// describes it on its trace.
	Record func(context.Context, telemetry.Request)
}

// DefaultMaxMessageBytes is the default limit on a turn's input.
const DefaultMaxMessageBytes = 256 << 10

// Handler is the HTTP API: one http.Handler, a ServeMux of the configured
// routes. Every error is a JSON body {"error":{"code","message"}}, unknown
// routes, wrong methods and paths that are not clean included: it never
// redirects. It is safe for concurrent use.
type Handler struct {
	cfg Config
	mux *http.ServeMux
	a2a http.Handler // POST /a2a's
}

var _ http.Handler = (*Handler)(nil)

// New returns a Handler.
func New(cfg Config) (*Handler, error) {
	if cfg.Service == nil {
		return nil, errors.New("httpapi: a Service is required")
	}
	if cfg.MaxMessageBytes < 0 {
		return nil, fmt.Errorf("httpapi: MaxMessageBytes %d is negative", cfg.MaxMessageBytes)
	}
	cfg.MaxMessageBytes = cmp.Or(cfg.MaxMessageBytes, DefaultMaxMessageBytes)
	cfg.Routes = cmp.Or(cfg.Routes, AllRoutes)
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	h := &Handler{cfg: cfg, mux: http.NewServeMux()}
	if cfg.Routes&(ChatRoutes|FunctionURLRoutes) != 0 {
		h.handle(RouteListSessions, h.listSessions)
		h.handle(RouteGetSession, h.getSession)
		h.handle(RouteDeleteSession, h.deleteSession)
		h.handle(RouteCallTool, h.callTool)
		h.handle(RouteExportSession, h.exportSession)
		h.handle(RouteImportSession, h.importSession)
		h.handle(RouteImportPage, h.importPage)
		h.handle(RouteRewind, h.rewind)
		h.handle(RouteAudit, h.getAudit)
		h.handle(RouteAuditRecord, h.getAuditRecord)
		h.handle(RouteListMemory, h.listMemory)
		h.handle(RouteExportMemory, h.exportMemory)
		h.handle(RouteDeleteRecord, h.deleteRecord)
		h.handle(RouteForget, h.forget)
	}
	if cfg.Routes&ChatRoutes != 0 {
		h.handle(RouteChat, h.chat)
	}
	if cfg.Routes&StructuredRoutes != 0 {
		h.handle(RouteStructured, h.structured)
	}
	if cfg.Routes&StreamRoutes != 0 {
		h.mux.HandleFunc(RouteChatStream, h.chatStream)
	}
	if cfg.Routes&FunctionURLRoutes != 0 {
		h.mux.HandleFunc(routeURLStream, h.chatStream)
	}
	if cfg.Routes&(StreamRoutes|FunctionURLRoutes) != 0 {
		h.mux.HandleFunc(RouteAGUI, h.aguiRun)
		a, err := h.newA2A()
		if err != nil {
			return nil, err
		}
		h.a2a = a
		h.handle(RouteAgentCard, h.agentCard)
		h.mux.HandleFunc(RouteA2A, h.a2aRun)
	}
	h.handle("/", h.noRoute)
	return h, nil
}

// ServeHTTP implements http.Handler. A path that a ServeMux would clean is
// refused before the mux, which would answer it with a redirect to another
// path, and so perhaps another route.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if !CleanPath(r.URL) {
		h.serve(w, r, uncleanPath)
		return
	}
	h.mux.ServeHTTP(w, r)
}

// CleanPath reports whether u's escaped path is one a ServeMux routes as it
// is: it begins with a slash and has no empty, "." or ".." segment. (A
// segment spelled with %2E or %2F is one segment, which the route reads
// decoded.) The Handler answers any other path with 400 invalid_path, for
// every method; a ServeMux in front of it must pass such a path to it rather
// than route it, which would redirect it.
func CleanPath(u *url.URL) bool {
	p := u.EscapedPath()
	if p == "/" {
		return true
	}
	if !strings.HasPrefix(p, "/") {
		return false
	}
	// A trailing slash is an empty last segment that cleaning keeps.
	for seg := range strings.SplitSeq(strings.TrimSuffix(p[1:], "/"), "/") {
		if seg == "" || seg == "." || seg == ".." {
			return false
		}
	}
	return true
}

// uncleanPath answers a path that is not clean (see CleanPath).
func uncleanPath(r *http.Request, _ *record) (int, []byte, error) {
	p, what := r.URL.EscapedPath(), `has an empty, "." or ".." segment`
	if !strings.HasPrefix(p, "/") {
		what = "does not begin with /"
	}
	return 0, nil, badRequest("invalid_path", "the path %q %s; paths are not cleaned or redirected, so send the route's own path", p, what)
}

// route serves one route. It returns the status and body of a success, or
// an error; the log record collects what the line at the edge reports.
type route func(r *http.Request, rec *record) (int, []byte, error)

// record is what the request's log line says.
type record struct {
	sessionID string
	replayed  bool
	result    *agent.Result
	outcome   string // "ok", or the error code
	err       error  // the cause of a failure, which callers do not see
	// errorStatus is the status of a failure reported in a stream that
	// had begun with 200.
	errorStatus int
	// location is the Location header of a success that created something.
	location string
}

// noteCost keeps in rec what a failed turn did, whose tokens are billed too.
func (rec *record) noteCost(err error) {
	var te *agent.TurnError
	var ce *turn.CommitError
	switch {
	case errors.As(err, &ce):
		rec.result = ce.Result
	case errors.As(err, &te):
		rec.result = &agent.Result{Usage: te.Usage, Metrics: te.Metrics}
	}
}

// handle serves pattern with serve.
func (h *Handler) handle(pattern string, serve route) {
	h.mux.HandleFunc(pattern, func(w http.ResponseWriter, r *http.Request) { h.serve(w, r, serve) })
}

// serve answers r with serve: it turns errors and panics into answers, and
// logs one line for the request.
func (h *Handler) serve(w http.ResponseWriter, r *http.Request, serve route) {
	start := time.Now()
	rec := &record{}
	status := 0
	defer func() {
		if v := recover(); v != nil {
			rec.err = fmt.Errorf("panic: %v\n%s", v, debug.Stack())
			status = writeError(w, internalError(), rec)
		}
		h.log(r, status, rec, time.Since(start))
	}()
	code, body, err := serve(r, rec)
	if err != nil {
		rec.noteCost(err)
		status = writeError(w, errorFor(err), rec)
		return
	}
	rec.outcome, status = "ok", code
	if body != nil {
		w.Header().Set("Content-Type", "application/json")
	}
	if rec.replayed {
		w.Header().Set("Idempotent-Replayed", "true")
	}
	if rec.location != "" {
		w.Header().Set("Location", rec.location)
	}
	w.WriteHeader(code)
	_, _ = w.Write(body) // a client that left cannot be told
}

func internalError() *Error {
	return &Error{Code: "internal", Message: "an internal error occurred"}
}

// noRoute answers a request that no route matched: 405 when the path has
// routes for other methods, else 404.
func (h *Handler) noRoute(r *http.Request, _ *record) (int, []byte, error) {
	var allowed []string
	for _, m := range []string{http.MethodGet, http.MethodPost, http.MethodDelete} {
		probe := &http.Request{Method: m, URL: r.URL, Host: r.Host}
		if _, pattern := h.mux.Handler(probe); pattern != "/" && m != r.Method {
			allowed = append(allowed, m)
		}
	}
	if len(allowed) > 0 {
		return 0, nil, &Error{Code: "method_not_allowed", Message: fmt.Sprintf("%s is not allowed on %s; use %s", r.Method, r.URL.Path, strings.Join(allowed, " or ")), allow: allowed}
	}
	return 0, nil, &Error{Code: "no_route", Message: fmt.Sprintf("there is no route %s %s", r.Method, r.URL.Path)}
}

// writeError answers e, which it notes in rec for the log, and returns the
// status.
func writeError(w http.ResponseWriter, e *Error, rec *record) int {
	rec.outcome = e.Code
	if rec.err == nil {
		rec.err = e.err
	}
	body, _ := json.Marshal(map[string]*Error{"error": e}) // an Error always encodes
	w.Header().Set("Content-Type", "application/json")
	if e.RetryAfter > 0 {
		w.Header().Set("Retry-After", strconv.Itoa(e.RetryAfter))
	}
	if len(e.allow) > 0 {
		w.Header().Set("Allow", strings.Join(e.allow, ", "))
	}
	w.WriteHeader(e.Status())
	_, _ = w.Write(body) // a client that left cannot be told
	return e.Status()
}

// log writes the request's one line: who, what, the outcome and the cost.
func (h *Handler) log(r *http.Request, status int, rec *record, d time.Duration) {
	route := r.Pattern
	matched := true
	switch route {
	case routeURLStream: // the function URL's stream is the same route
		route = RouteChatStream
	case "/", "": // no route matched: say what was asked for
		route, matched = r.Method+" "+r.URL.Path, false
	}
	// A stream's failure counts as its error's status, though the stream
	// began with 200.
	effective := cmp.Or(rec.errorStatus, status)
	attrs := []slog.Attr{
		slog.String("route", route),
		slog.Int("status", status),
		slog.String("outcome", rec.outcome),
		slog.String("session_id", rec.sessionID),
		slog.Int64("duration_ms", d.Milliseconds()),
	}
	if rec.errorStatus != 0 {
		attrs = append(attrs, slog.Int("error_status", rec.errorStatus))
	}
	if rec.err != nil && effective >= 500 {
		attrs = append(attrs, slog.String("error", rec.err.Error()))
	}
	if rec.replayed {
		attrs = append(attrs, slog.Bool("replayed", true))
	}
	if res := rec.result; res != nil {
		if res.StopReason != "" {
			attrs = append(attrs, slog.String("stop_reason", string(res.StopReason)))
		}
		if res.Pending != nil {
			attrs = append(attrs, slog.Int("interrupts", len(res.Pending.Interrupts)))
		}
		attrs = append(attrs,
			slog.Int("input_tokens", res.Usage.InputTokens),
			slog.Int("output_tokens", res.Usage.OutputTokens),
			slog.Int("cache_read_input_tokens", res.Usage.CacheReadInputTokens),
			slog.Int("cache_write_input_tokens", res.Usage.CacheWriteInputTokens),
			slog.Int("model_calls", res.Metrics.ModelCalls),
			slog.Int("tool_calls", res.Metrics.ToolCalls),
			slog.Int64("model_ms", res.Metrics.ModelLatency.Milliseconds()),
		)
	}
	level := slog.LevelInfo
	if effective >= 500 {
		level = slog.LevelError
	} else if effective >= 400 {
		level = slog.LevelWarn
	}
	h.cfg.Logger.LogAttrs(r.Context(), level, "request", attrs...)
	if h.cfg.Record != nil {
		req := telemetry.Request{
			Method: r.Method, Status: effective, Code: rec.outcome, SessionID: rec.sessionID,
			Turn:   route == RouteChat || route == RouteChatStream || route == RouteStructured || (route == RouteA2A && rec.result != nil),
			Result: rec.result, Replayed: rec.replayed, Duration: d,
		}
		if matched { // a path that matched no route is the caller's, of any length
			req.Route = route
		}
		h.cfg.Record(r.Context(), req)
	}
}
