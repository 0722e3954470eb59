package remote

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/lambda-agent/lambda-agent/internal/agent"
	"github.com/lambda-agent/lambda-agent/internal/schema/limits"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// MCPOptions configure MCP. Zero values mean the documented defaults.
type MCPOptions struct {
	// HTTPClient makes the requests; nil means http.DefaultClient.
	HTTPClient *http.Client
	// Logger gets a warning for each tool left out and each failed
	// listing; nil means slog.Default().
	Logger *slog.Logger
	// TTL is how long a tool list is used before it is fetched again;
	// 0 means DefaultListTTL.
	TTL time.Duration
	// RetryAfter is how long a server whose listing failed is left alone;
	// 0 means DefaultRetryAfter.
	RetryAfter time.Duration
	// ListTimeout bounds one listing; 0 means DefaultListTimeout.
	ListTimeout time.Duration
	// Approval names the tools, by their names for the model, whose every
	// use waits for a person's approval (agent.RequireApproval).
	Approval []string
	// Taken are the names of the agent's other tools: a server's tool with
	// one of them is left out, with a warning.
	Taken []string
	// Now is the clock; nil means time.Now.
	Now func() time.Time
}

// Defaults for MCPOptions.
const (
	DefaultListTTL     = 5 * time.Minute
	DefaultRetryAfter  = 30 * time.Second
	DefaultListTimeout = 3 * time.Second
)

// MCP is the tools of MCP servers, as an agent.ToolSet. It is safe for
// concurrent use.
type MCP struct {
	servers []*mcpServer
	opts    MCPOptions
}

var _ agent.ToolSet = (*MCP)(nil)

// NewMCP returns the tool set of servers, whose secret headers are
// resolved already (see ResolveSecrets). It makes no request: Start or the
// first turn lists the tools.
func NewMCP(servers []MCPServer, opts MCPOptions) *MCP {
	if opts.HTTPClient == nil {
		// Calls are bounded by their contexts; the timeout bounds what the
		// SDK sends without one, such as a session's closing DELETE.
		opts.HTTPClient = &http.Client{Timeout: time.Minute}
	}
	opts.Logger = cmp.Or(opts.Logger, slog.Default())
	opts.TTL = cmp.Or(opts.TTL, DefaultListTTL)
	opts.RetryAfter = cmp.Or(opts.RetryAfter, DefaultRetryAfter)
	opts.ListTimeout = cmp.Or(opts.ListTimeout, DefaultListTimeout)
	if opts.Now == nil {
		opts.Now = time.Now
	}
	m := &MCP{opts: opts}
	client := mcp.NewClient(&mcp.Implementation{Name: "lambda-agent", Version: "1"}, nil)
	for _, cfg := range servers {
		s := &mcpServer{cfg: cfg, m: m, client: client}
		s.http = &http.Client{
			Transport: headers{cfg: cfg, next: cmp.Or(opts.HTTPClient.Transport, http.DefaultTransport)},
			Timeout:   opts.HTTPClient.Timeout,
			// The headers, secrets among them, are for the configured
			// server alone: a redirect is an answer, not a hop to follow.
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
		}
		m.servers = append(m.servers, s)
	}
	return m
}

// Only returns the tool set of m's servers that are named names, sharing
// their tool lists, listings and sessions with m: each server is listed
// once, whichever set asks, and Start on m lists them all.
func (m *MCP) Only(names ...string) *MCP {
	v := &MCP{opts: m.opts}
	for _, s := range m.servers {
		if slices.Contains(names, s.cfg.Name) {
			v.servers = append(v.servers, s)
		}
	}
	return v
}

// Start lists every server's tools in the background, so that the first
// turn finds them listed, or being listed.
func (m *MCP) Start() {
	for _, s := range m.servers {
		s.refresh()
	}
}

// Tools returns the servers' tools: the lists fetched last. A listing that
// is due starts in the background; a turn waits for one, within ctx, only
// for a server that has never listed its tools.
func (m *MCP) Tools(ctx context.Context) []agent.Tool {
	listings := make([]<-chan struct{}, len(m.servers))
	for i, s := range m.servers {
		listings[i] = s.refresh() // all at once: the waits overlap
	}
	var out []agent.Tool
	for i, s := range m.servers {
		if !s.hasListed() {
			select {
			case <-listings[i]:
			case <-ctx.Done():
			}
		}
		out = append(out, s.listed()...)
	}
	return out
}

// mcpServer is one server: its tools as listed last, and a session.
type mcpServer struct {
	cfg    MCPServer
	m      *MCP
	client *mcp.Client
	http   *http.Client

	mu      sync.Mutex
	tools   []agent.Tool
	ok      bool          // a listing succeeded once
	due     time.Time     // when the list is to be fetched again
	listing chan struct{} // closed when the listing under way ends
	session *mcp.ClientSession
}

// headers adds a server's configured headers to each request.
type headers struct {
	cfg  MCPServer
	next http.RoundTripper
}

func (h headers) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	for k, v := range h.cfg.Headers {
		r.Header.Set(k, v)
	}
	resp, err := h.next.RoundTrip(r)
	if err == nil {
		over, _ := r.Context().Value(overKey{}).(*atomic.Bool)
		resp.Body = &capped{ReadCloser: resp.Body, left: MaxResponseBytes, over: over}
	}
	return resp, err
}

// The bounds on what MCP servers may answer. The agent cuts a tool's
// result to a few kilobytes (agent.Config.MaxToolResultBytes), but reads
// it whole first, and the SDK holds several copies of it meanwhile, about
// seven bytes of memory for each byte answered: a server that answered
// without end would exhaust the function's memory, and so would several
// large answers at once. An answer past MaxResponseBytes, its framing
// included, or one that would take what is read at once past
// MaxInFlightBytes, fails its call with ErrTooLarge, which the model gets
// as an error result.
const (
	MaxResponseBytes = 24 << 20
	MaxInFlightBytes = 32 << 20
)

// ErrTooLarge is an answer of an MCP server past the bounds above.
var ErrTooLarge = fmt.Errorf("the server's answer is larger than %d MiB, or than what the function may read from its servers at once (%d MiB)", MaxResponseBytes>>20, MaxInFlightBytes>>20)

// inFlight is what the responses of every server that are being read hold
// at the moment, together.
var inFlight atomic.Int64

// overKey marks a call's context with where to say that its answer was
// past the bounds: the SDK reports a failed read only as a request that
// ended without a response.
type overKey struct{}

// capped is a response body that fails past the bounds.
type capped struct {
	io.ReadCloser
	left int          // of MaxResponseBytes
	held int64        // counted in inFlight
	over *atomic.Bool // set when the bounds stop the read; nil for none
	shut sync.Once
}

func (c *capped) Read(p []byte) (int, error) {
	if c.left <= 0 {
		var one [1]byte
		if n, err := c.ReadCloser.Read(one[:]); n == 0 && err != nil {
			c.release()
			return 0, err // the answer ended right at the limit
		}
		return 0, c.tooLarge()
	}
	n, err := c.ReadCloser.Read(p[:min(len(p), c.left)])
	c.left -= n
	c.held += int64(n)
	if inFlight.Add(int64(n)) > MaxInFlightBytes {
		return 0, c.tooLarge()
	}
	if err != nil {
		c.release() // read whole, or failed: it is read no more
	}
	return n, err
}

func (c *capped) tooLarge() error {
	c.release()
	if c.over != nil {
		c.over.Store(true)
	}
	return ErrTooLarge
}

// Close releases what the answer held of MaxInFlightBytes, if its reads
// have not.
func (c *capped) Close() error {
	c.release()
	return c.ReadCloser.Close()
}

func (c *capped) release() { c.shut.Do(func() { inFlight.Add(-c.held) }) }

// closed is a channel that is closed already.
var closed = func() chan struct{} { c := make(chan struct{}); close(c); return c }()

// refresh starts a listing if one is due and none is under way, and
// returns a channel closed when the listing under way, if any, ends.
func (s *mcpServer) refresh() <-chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case s.listing != nil:
		return s.listing
	case s.m.opts.Now().Before(s.due):
		return closed
	}
	done := make(chan struct{})
	s.listing = done
	go func() {
		defer close(done)
		ctx, cancel := context.WithTimeout(context.Background(), s.m.opts.ListTimeout)
		defer cancel()
		tools, err := s.list(ctx)
		s.mu.Lock()
		defer s.mu.Unlock()
		s.listing = nil
		if err != nil {
			s.due = s.m.opts.Now().Add(s.m.opts.RetryAfter)
			s.m.opts.Logger.Warn("MCP server unavailable", "server", s.cfg.Name, "url", s.cfg.URL,
				"tools_kept", len(s.tools), "error", err.Error())
			return
		}
		s.tools, s.ok, s.due = tools, true, s.m.opts.Now().Add(s.m.opts.TTL)
	}()
	return done
}

func (s *mcpServer) listed() []agent.Tool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.tools
}

func (s *mcpServer) hasListed() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.ok
}

// list fetches the server's tools and makes them the agent's: allowed,
// prefixed, with names Bedrock accepts. A name that had to be made valid
// yields to one that was valid as it came, whatever their order.
func (s *mcpServer) list(ctx context.Context) ([]agent.Tool, error) {
	var listed []*mcp.Tool
	err := s.do(ctx, func(sess *mcp.ClientSession) error {
		listed = nil
		for t, err := range sess.Tools(ctx, nil) {
			if err != nil {
				return err
			}
			if len(s.cfg.Allow) == 0 || slices.Contains(s.cfg.Allow, t.Name) {
				listed = append(listed, t)
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	valid := func(t *mcp.Tool) bool { return agent.ValidToolName(s.cfg.ToolPrefix() + t.Name) }
	ordered := append(slices.DeleteFunc(slices.Clone(listed), func(t *mcp.Tool) bool { return !valid(t) }),
		slices.DeleteFunc(slices.Clone(listed), valid)...)
	var tools []agent.Tool
	taken := map[string]bool{}
	for _, t := range ordered {
		tool, why, limit := s.tool(t)
		switch {
		case why != "":
		case taken[tool.Spec().Name]:
			why = fmt.Sprintf("its name made valid, %s, is another tool's", tool.Spec().Name)
		case slices.Contains(s.m.opts.Taken, tool.Spec().Name):
			why = fmt.Sprintf("the agent has another tool named %s", tool.Spec().Name)
		}
		if why != "" {
			attrs := []any{"server", s.cfg.Name, "tool", t.Name, "reason", why}
			if limit != "" {
				attrs = append(attrs, "limit", limit)
			}
			s.m.opts.Logger.Warn("MCP tool left out", attrs...)
			continue
		}
		taken[tool.Spec().Name] = true
		tools = append(tools, tool)
	}
	return tools, nil
}

// tool makes t the agent's, its input schema compiled, or says why it
// cannot be, and the limit of the schema's budget it is past, if any.
func (s *mcpServer) tool(t *mcp.Tool) (_ agent.Tool, why, limit string) {
	name, ok := validName(s.cfg.ToolPrefix() + t.Name)
	if !ok {
		return nil, fmt.Sprintf("%q cannot be made a tool name Bedrock accepts (%s)", s.cfg.ToolPrefix()+t.Name, agent.ToolNameRule), ""
	}
	schema, err := json.Marshal(t.InputSchema)
	if err != nil || string(schema) == "null" {
		return nil, "the tool has no input schema", ""
	}
	var doc any
	if err := json.Unmarshal(schema, &doc); err != nil {
		return nil, "its input schema is not JSON: " + err.Error(), ""
	}
	if err := agent.CheckSchemaDocument(doc); err != nil {
		return nil, "Bedrock would refuse its input schema: " + err.Error(), ""
	}
	compiled, err := agent.CompileToolSchema(schema)
	if err != nil {
		return nil, "its input schema cannot be used: " + err.Error(), limitOf(err)
	}
	var tool agent.Tool = &mcpTool{
		server: s,
		remote: t.Name,
		spec:   agent.ToolSpec{Name: name, Description: cmp.Or(t.Description, t.Title, t.Name), InputSchema: schema},
		schema: compiled,
	}
	if slices.Contains(s.m.opts.Approval, name) {
		tool = agent.RequireApproval(tool)
	}
	return tool, "", ""
}

// limitOf names the limit of a schema's budget that err says the schema
// is past, or "".
func limitOf(err error) string {
	var le *limits.Error
	if errors.As(err, &le) {
		return le.Limit
	}
	return ""
}

// validName makes name one that Bedrock accepts: each character it does
// not becomes _. A name over 64 characters cannot be made valid: cut, it
// could be another tool's.
func validName(name string) (string, bool) {
	if name == "" || len(name) > 64 {
		return "", false
	}
	b := []byte(name)
	for i, c := range b {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-') {
			b[i] = '_'
		}
	}
	return string(b), true
}

// do runs f on the server's session, connecting first when there is none.
// A session the server no longer knows, or one already closed, is replaced
// once, and f run again: the request was refused, or never sent. The SDK
// reports an answer of the server, a refusal such as a 503 included, as a
// *jsonrpc.Error, and keeps the session; any other failure drops it, so
// that the next call connects afresh.
func (s *mcpServer) do(ctx context.Context, f func(*mcp.ClientSession) error) error {
	for attempt := 0; ; attempt++ {
		sess, err := s.connect(ctx)
		if err != nil {
			return fmt.Errorf("connect to %s: %w", s.cfg.URL, err)
		}
		err = f(sess)
		if err == nil {
			return nil
		}
		var rpc *jsonrpc.Error
		if errors.As(err, &rpc) {
			return err // the server answered; the session is fine
		}
		s.drop(sess)
		if attempt > 0 || !errors.Is(err, mcp.ErrSessionMissing) && !errors.Is(err, mcp.ErrConnectionClosed) {
			return err
		}
	}
}

func (s *mcpServer) connect(ctx context.Context) (*mcp.ClientSession, error) {
	s.mu.Lock()
	sess := s.session
	s.mu.Unlock()
	if sess != nil {
		return sess, nil
	}
	// Lambda freezes the process between invocations, so the session gets
	// no stream of its own: every answer comes on its request.
	sess, err := s.client.Connect(ctx, &mcp.StreamableClientTransport{
		Endpoint: s.cfg.URL, HTTPClient: s.http, DisableStandaloneSSE: true, MaxRetries: -1,
	}, nil)
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.session != nil { // another call connected meanwhile
		go sess.Close()
		return s.session, nil
	}
	s.session = sess
	return sess, nil
}

func (s *mcpServer) drop(sess *mcp.ClientSession) {
	s.mu.Lock()
	if s.session == sess {
		s.session = nil
	}
	s.mu.Unlock()
	go sess.Close()
}

// mcpTool is a tool of an MCP server.
type mcpTool struct {
	server *mcpServer
	remote string // the server's name for it
	spec   agent.ToolSpec
	schema *agent.ToolSchema // spec.InputSchema, compiled when listed
}

var _ agent.CompiledTool = (*mcpTool)(nil)

func (t *mcpTool) Spec() agent.ToolSpec { return t.spec }

// CompiledSchema returns the input schema, compiled when the tool was
// listed.
func (t *mcpTool) CompiledSchema() *agent.ToolSchema { return t.schema }

// Run calls the tool, with the tool use id in _meta. The agent bounds ctx by the tool timeout and the
// invocation's deadline. A result marked isError, a protocol error and a
// server that cannot be reached are errors, which the model receives as
// error results.
func (t *mcpTool) Run(ctx context.Context, call *agent.ToolCall) ([]agent.ToolResultContent, error) {
	var res *mcp.CallToolResult
	over := new(atomic.Bool)
	ctx = context.WithValue(ctx, overKey{}, over)
	err := t.server.do(ctx, func(sess *mcp.ClientSession) (err error) {
		res, err = sess.CallTool(ctx, &mcp.CallToolParams{Name: t.remote, Arguments: call.Input, Meta: mcp.Meta{ToolUseIDKey: call.ID}})
		return err
	})
	if err != nil && over.Load() {
		err = ErrTooLarge
	}
	if err != nil {
		return nil, fmt.Errorf("MCP server %s: %w", t.server.cfg.Name, err)
	}
	content := resultContent(res)
	if res.IsError {
		return nil, errors.New(textOf(content))
	}
	return content, nil
}

// resultContent turns an MCP result into tool result content: text as
// text, images Bedrock takes as images, the structured content as JSON,
// and for the rest a note of what was left out.
func resultContent(res *mcp.CallToolResult) []agent.ToolResultContent {
	var out []agent.ToolResultContent
	for _, c := range res.Content {
		switch c := c.(type) {
		case *mcp.TextContent:
			out = append(out, agent.ToolResultContent{Text: c.Text})
		case *mcp.ImageContent:
			format, ok := imageFormat(c.MIMEType)
			if !ok {
				out = append(out, agent.ToolResultContent{Text: fmt.Sprintf("[an image of type %s, which cannot be shown]", c.MIMEType)})
				continue
			}
			out = append(out, agent.ToolResultContent{Image: &agent.ImageBlock{Format: format, Source: agent.Source{Bytes: c.Data}}})
		case *mcp.EmbeddedResource:
			if r := c.Resource; r != nil && r.Text != "" {
				out = append(out, agent.ToolResultContent{Text: r.Text})
			} else if r != nil {
				out = append(out, agent.ToolResultContent{Text: fmt.Sprintf("[a resource, %s, of %d bytes]", r.URI, len(r.Blob))})
			}
		case *mcp.ResourceLink:
			out = append(out, agent.ToolResultContent{Text: fmt.Sprintf("[a link to a resource: %s]", c.URI)})
		case *mcp.AudioContent:
			out = append(out, agent.ToolResultContent{Text: "[audio, which cannot be shown]"})
		}
	}
	if res.StructuredContent != nil {
		if raw, err := json.Marshal(res.StructuredContent); err == nil && len(raw) > 0 && raw[0] == '{' && !hasJSONText(out, raw) {
			out = append(out, agent.ToolResultContent{JSON: raw})
		}
	}
	return out
}

// hasJSONText reports whether content already holds raw as text, as
// servers that return structured content usually do too.
func hasJSONText(content []agent.ToolResultContent, raw json.RawMessage) bool {
	for _, c := range content {
		var v any
		if c.Text != "" && json.Unmarshal([]byte(c.Text), &v) == nil {
			if again, err := json.Marshal(v); err == nil && string(again) == string(raw) {
				return true
			}
		}
	}
	return false
}

func imageFormat(mime string) (string, bool) {
	switch strings.ToLower(mime) {
	case "image/png":
		return "png", true
	case "image/jpeg", "image/jpg":
		return "jpeg", true
	case "image/gif":
		return "gif", true
	case "image/webp":
		return "webp", true
	}
	return "", false
}

// textOf joins the text of content, for an error.
func textOf(content []agent.ToolResultContent) string {
	var parts []string
	for _, c := range content {
		if c.Text != "" {
			parts = append(parts, c.Text)
		}
	}
	if len(parts) == 0 {
		return "the tool reported an error, without a message"
	}
	return strings.Join(parts, "\n")
}
