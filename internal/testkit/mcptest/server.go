package mcptest

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Path is where the server serves MCP. Every other path is answered 404.
const Path = "/mcp"

// An Option changes how [NewServer] builds the server.
//
// A test server has a useful zero configuration and a few independent
// switches, so options read better at the call site than a Config struct.
type Option func(*config)

type config struct {
	stateful     bool
	noSessionID  bool
	jsonResponse bool
	pageSize     int
	header       string
	value        string
}

// Stateful makes the server keep sessions: the Mcp-Session-Id it hands out
// at initialize is required on every later request (404 "session not found"
// for an unknown one), GET opens the standalone SSE stream and DELETE ends
// the session.
//
// The default is the SDK's stateless mode, which fits Lambda: every POST is
// served by a fresh session, GET is answered 405 and DELETE 204. The SDK
// still hands out an Mcp-Session-Id at initialize in that mode, and then
// ignores the one the client echoes; [NoSessionID] stops that.
func Stateful() Option { return func(c *config) { c.stateful = true } }

// NoSessionID makes the server send no Mcp-Session-Id header at all, as
// stateless servers built with other SDKs do. It implies stateless mode.
func NoSessionID() Option { return func(c *config) { c.noSessionID = true } }

// JSONResponse makes the server answer calls with application/json rather
// than a text/event-stream carrying the response.
func JSONResponse() Option { return func(c *config) { c.jsonResponse = true } }

// PageSize makes tools/list answer at most n tools a page, with a
// nextCursor to the rest, so a client can be checked for following it. The
// default is the SDK's, 1000, which lists every tool at once.
func PageSize(n int) Option { return func(c *config) { c.pageSize = n } }

// RequireHeader makes the server answer 401 to any request whose header
// name is not exactly value, such as RequireHeader("Authorization",
// "Bearer secret").
func RequireHeader(name, value string) Option {
	return func(c *config) { c.header, c.value = name, value }
}

// Server is a real MCP server on a loopback port. Its methods are safe for
// concurrent use.
type Server struct {
	// URL is the streamable HTTP endpoint, such as
	// "http://127.0.0.1:51234/mcp".
	URL string

	cfg     config
	mcp     *mcp.Server
	handler http.Handler
	hs      *httptest.Server
	down    atomic.Bool
	closed  chan struct{} // closed by Close, to end slow calls
	once    sync.Once

	mu            sync.Mutex
	calls         map[string]int // tools/call by tool name
	lastMeta      mcp.Meta       // the _meta of the last tools/call
	methods       map[string]int // JSON-RPC requests and notifications by method
	httpMethods   map[string]int // HTTP requests by method
	last          http.Header
	slowCancelled int
}

// NewServer starts a server with every tool of the package on a random
// loopback port. Call Close when done. Like httptest.NewServer, it panics
// if it cannot listen.
func NewServer(opts ...Option) *Server {
	s := &Server{
		calls:       map[string]int{},
		methods:     map[string]int{},
		httpMethods: map[string]int{},
		closed:      make(chan struct{}),
	}
	for _, o := range opts {
		o(&s.cfg)
	}
	mopts := mcp.ServerOptions{PageSize: s.cfg.pageSize}
	if s.cfg.noSessionID {
		// The SDK's documented special case: "" means no Mcp-Session-Id.
		mopts.GetSessionID = func() string { return "" }
	}
	s.mcp = mcp.NewServer(&mcp.Implementation{Name: "mcptest", Version: "v1.0.0"}, &mopts)
	s.mcp.AddReceivingMiddleware(s.count)
	addTools(s.mcp, s.closed, func() {
		s.mu.Lock()
		s.slowCancelled++
		s.mu.Unlock()
	})
	s.handler = mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s.mcp },
		&mcp.StreamableHTTPOptions{
			Stateless:    !s.cfg.stateful || s.cfg.noSessionID,
			JSONResponse: s.cfg.jsonResponse,
		})
	mux := http.NewServeMux()
	mux.HandleFunc(Path, s.serveHTTP)
	s.hs = httptest.NewServer(mux)
	s.URL = s.hs.URL + Path
	return s
}

// Close cuts short slow calls, ends every MCP session (which ends
// standalone SSE streams), closes every connection and stops the server.
// Later requests fail to connect. It is safe to call more than once.
func (s *Server) Close() {
	// Slow calls first: the SDK closes a session only once its calls are done.
	s.once.Do(func() { close(s.closed) })
	s.DropSessions()
	s.hs.CloseClientConnections()
	s.hs.Close()
}

// SetDown makes the server answer every request 503 Service Unavailable
// while down is true, as a server that is restarting does.
func (s *Server) SetDown(down bool) { s.down.Store(down) }

// DropSessions ends every live MCP session, as a server restart would: in
// Stateful mode the next request carrying one of their ids is answered 404.
// The SDK ends a session only once its calls in flight are done, so
// DropSessions waits for them.
func (s *Server) DropSessions() {
	for ss := range s.mcp.Sessions() {
		ss.Close()
	}
}

// Sessions reports how many MCP sessions are live. In Stateful mode that is
// the sessions handed out and not yet ended; in stateless mode only those of
// requests in flight.
func (s *Server) Sessions() int {
	n := 0
	for range s.mcp.Sessions() {
		n++
	}
	return n
}

// Calls reports how many tools/call requests for tool reached the MCP
// server (requests refused with 401 or 503 never do).
func (s *Server) Calls(tool string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.calls[tool]
}

// LastMeta returns the _meta of the last tools/call that reached the MCP
// server.
func (s *Server) LastMeta() map[string]any {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.lastMeta
}

// ListCalls reports how many tools/list requests reached the MCP server.
func (s *Server) ListCalls() int { return s.Requests("tools/list") }

// Requests reports how many JSON-RPC messages with method, such as
// "initialize", "tools/call" or "notifications/cancelled", reached the MCP
// server. A request is counted before its response is sent; a notification
// only when the server handles it, just after answering 202. In stateless
// mode the SDK usually ends a notification's fresh session before handling
// it, so notifications are rarely counted there.
func (s *Server) Requests(method string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.methods[method]
}

// HTTPRequests reports how many HTTP requests with method ("POST", "GET",
// "DELETE") arrived at the endpoint, including refused ones.
func (s *Server) HTTPRequests(method string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.httpMethods[method]
}

// LastHeader returns the value of header name in the last HTTP request that
// arrived at the endpoint, of any method and including refused ones, or ""
// if there was none.
func (s *Server) LastHeader(name string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.last.Get(name)
}

// SlowCancelled reports how many slow calls ended early because the SDK
// cancelled their context. That happens in Stateful mode, when the client
// gives up and sends notifications/cancelled; in stateless mode the
// notification reaches a different, fresh session, and the call runs on.
func (s *Server) SlowCancelled() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.slowCancelled
}

func (s *Server) serveHTTP(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	s.httpMethods[r.Method]++
	s.last = r.Header.Clone()
	s.mu.Unlock()

	if s.down.Load() {
		http.Error(w, "mcptest: server is down", http.StatusServiceUnavailable)
		return
	}
	if s.cfg.header != "" && r.Header.Get(s.cfg.header) != s.cfg.value {
		w.Header().Set("WWW-Authenticate", `Bearer realm="mcptest"`)
		http.Error(w, "mcptest: missing or wrong "+s.cfg.header, http.StatusUnauthorized)
		return
	}
	s.handler.ServeHTTP(w, r)
}

// count is receiving middleware: it counts every message that reaches the
// MCP server, before the SDK dispatches it.
func (s *Server) count(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		s.mu.Lock()
		s.methods[method]++
		if p, ok := req.GetParams().(*mcp.CallToolParamsRaw); ok {
			s.calls[p.Name]++
			s.lastMeta = p.Meta
		}
		s.mu.Unlock()
		return next(ctx, method, req)
	}
}
