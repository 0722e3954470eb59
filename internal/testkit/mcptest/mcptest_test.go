package mcptest_test

import (
	"context"
	"errors"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/lambda-agent/lambda-agent/internal/testkit/mcptest"
)

// codeRejected is the code of the SDK's internal jsonrpc2.ErrRejected,
// which the client wraps around transient HTTP failures (429, 5xx) and
// requests that never reached the server.
const codeRejected = -32005

// modes are the server configurations every basic test runs against.
var modes = []struct {
	name string
	opts []mcptest.Option
}{
	{"stateless", nil},
	{"stateful", []mcptest.Option{mcptest.Stateful()}},
	{"no session id", []mcptest.Option{mcptest.NoSessionID()}},
	{"json response", []mcptest.Option{mcptest.JSONResponse()}},
	{"stateful json response", []mcptest.Option{mcptest.Stateful(), mcptest.JSONResponse()}},
}

// connect opens a client session the way a Lambda would: no standalone SSE
// stream. The session is closed when the test ends.
func connect(t *testing.T, url string, hc *http.Client) *mcp.ClientSession {
	t.Helper()
	cs, err := dial(t.Context(), url, hc)
	if err != nil {
		t.Fatalf("connect %s: %v", url, err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs
}

func dial(ctx context.Context, url string, hc *http.Client) (*mcp.ClientSession, error) {
	c := mcp.NewClient(&mcp.Implementation{Name: "mcptest-client", Version: "v0"}, nil)
	return c.Connect(ctx, &mcp.StreamableClientTransport{
		Endpoint: url, HTTPClient: hc, DisableStandaloneSSE: true,
	}, nil)
}

func call(t *testing.T, cs *mcp.ClientSession, name string, args map[string]any) (*mcp.CallToolResult, error) {
	t.Helper()
	return cs.CallTool(t.Context(), &mcp.CallToolParams{Name: name, Arguments: args})
}

// texts returns the text of every text block of res.
func texts(res *mcp.CallToolResult) []string {
	var out []string
	for _, c := range res.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			out = append(out, tc.Text)
		}
	}
	return out
}

func wireCode(err error) (int64, bool) {
	var we *jsonrpc.Error
	if errors.As(err, &we) {
		return we.Code, true
	}
	return 0, false
}

func TestListTools(t *testing.T) {
	for _, m := range modes {
		t.Run(m.name, func(t *testing.T) {
			s := mcptest.NewServer(m.opts...)
			defer s.Close()
			cs := connect(t, s.URL, nil)

			res, err := cs.ListTools(t.Context(), nil)
			if err != nil {
				t.Fatal(err)
			}
			tools := map[string]*mcp.Tool{}
			var names []string
			for _, tool := range res.Tools {
				tools[tool.Name] = tool
				names = append(names, tool.Name)
			}
			want := mcptest.ToolNames()
			slices.Sort(want)
			slices.Sort(names)
			if diff := cmp.Diff(want, names); diff != "" {
				t.Errorf("tool names (-want +got):\n%s", diff)
			}
			for _, tool := range res.Tools {
				schema, ok := tool.InputSchema.(map[string]any)
				if !ok || schema["type"] != "object" {
					t.Errorf("%s: inputSchema = %#v, want an object schema", tool.Name, tool.InputSchema)
				}
			}
			if diff := cmp.Diff(mcptest.CreateTicketSchema(), tools[mcptest.ToolCreateTicket].InputSchema); diff != "" {
				t.Errorf("create_ticket schema (-want +got):\n%s", diff)
			}
			wantAdd := map[string]any{
				"type": "object",
				"properties": map[string]any{
					"a": map[string]any{"type": "number", "description": "the first addend"},
					"b": map[string]any{"type": "number", "description": "the second addend"},
				},
				"required":             []any{"a", "b"},
				"additionalProperties": false,
			}
			if diff := cmp.Diff(wantAdd, tools[mcptest.ToolAdd].InputSchema); diff != "" {
				t.Errorf("add schema (-want +got):\n%s", diff)
			}
			if tools[mcptest.ToolAdd].OutputSchema == nil {
				t.Error("add has no outputSchema; want the one inferred from its output type")
			}
			if got := tools[mcptest.ToolRPCError].Description; got != "" {
				t.Errorf("rpc_error description = %q, want none", got)
			}
			if got := len(mcptest.LongToolName); got != 70 {
				t.Errorf("len(LongToolName) = %d, want 70", got)
			}
			if got := s.ListCalls(); got != 1 {
				t.Errorf("ListCalls() = %d, want 1", got)
			}
		})
	}
}

func TestPageSize(t *testing.T) {
	s := mcptest.NewServer(mcptest.PageSize(5))
	defer s.Close()
	cs := connect(t, s.URL, nil)

	first, err := cs.ListTools(t.Context(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(first.Tools) != 5 || first.NextCursor == "" {
		t.Fatalf("first page: %d tools, nextCursor %q; want 5 and a cursor", len(first.Tools), first.NextCursor)
	}
	var names []string
	for tool, err := range cs.Tools(t.Context(), nil) {
		if err != nil {
			t.Fatal(err)
		}
		names = append(names, tool.Name)
	}
	if got, want := len(names), len(mcptest.ToolNames()); got != want {
		t.Errorf("Tools iterator gave %d tools, want %d", got, want)
	}
	// One page by hand, then three pages for 12 tools.
	if got := s.ListCalls(); got != 4 {
		t.Errorf("ListCalls() = %d, want 4", got)
	}
}

func TestCallTool(t *testing.T) {
	tests := []struct {
		name           string
		tool           string
		args           map[string]any
		wantTexts      []string
		wantIsError    bool
		wantStructured any
	}{
		{
			name: "add", tool: mcptest.ToolAdd, args: map[string]any{"a": 2, "b": 3},
			wantTexts: []string{"5"}, wantStructured: map[string]any{"sum": float64(5)},
		},
		{
			name: "echo", tool: mcptest.ToolEcho, args: map[string]any{"text": "héllo\nworld"},
			wantTexts: []string{"héllo\nworld"},
		},
		{
			name: "fail", tool: mcptest.ToolFail,
			wantTexts: []string{mcptest.FailMessage}, wantIsError: true,
		},
		{
			// A typed handler's Go error becomes a tool failure, not a protocol error.
			name: "explode", tool: mcptest.ToolExplode,
			wantTexts: []string{mcptest.ExplodeMessage}, wantIsError: true,
		},
		{
			name: "slow short", tool: mcptest.ToolSlow, args: map[string]any{"seconds": 0.01},
			wantTexts: []string{"slept 0.01s"},
		},
		{
			name: "create_ticket", tool: mcptest.ToolCreateTicket,
			args: map[string]any{
				"title": "Printer on fire", "priority": "high", "labels": []any{"hw"},
				"customer": map[string]any{"id": "c-42", "tier": "pro"},
			},
			wantTexts: []string{"created TCK-1: Printer on fire"},
			wantStructured: map[string]any{"id": "TCK-1", "arguments": map[string]any{
				"title": "Printer on fire", "priority": "high", "labels": []any{"hw"},
				"customer": map[string]any{"id": "c-42", "tier": "pro"},
			}},
		},
		{name: "dotted name", tool: mcptest.ToolDotted, wantTexts: []string{"called read.file"}},
		{name: "underscored name", tool: mcptest.ToolUnderscored, wantTexts: []string{"called read_file"}},
		{name: "spaced name", tool: mcptest.ToolSpaced, wantTexts: []string{"called get weather"}},
		{name: "long name", tool: mcptest.LongToolName, wantTexts: []string{"called " + mcptest.LongToolName}},
	}
	for _, m := range modes {
		t.Run(m.name, func(t *testing.T) {
			s := mcptest.NewServer(m.opts...)
			defer s.Close()
			cs := connect(t, s.URL, nil)
			for _, tt := range tests {
				t.Run(tt.name, func(t *testing.T) {
					got, err := call(t, cs, tt.tool, tt.args)
					if err != nil {
						t.Fatalf("CallTool(%q): %v", tt.tool, err)
					}
					if diff := cmp.Diff(tt.wantTexts, texts(got)); diff != "" {
						t.Errorf("texts (-want +got):\n%s", diff)
					}
					if got.IsError != tt.wantIsError {
						t.Errorf("IsError = %v, want %v", got.IsError, tt.wantIsError)
					}
					if diff := cmp.Diff(tt.wantStructured, got.StructuredContent); diff != "" {
						t.Errorf("structuredContent (-want +got):\n%s", diff)
					}
				})
			}
			for _, tt := range tests {
				if got := s.Calls(tt.tool); got != 1 {
					t.Errorf("Calls(%q) = %d, want 1", tt.tool, got)
				}
			}
		})
	}
}

func TestInvalidArguments(t *testing.T) {
	s := mcptest.NewServer()
	defer s.Close()
	cs := connect(t, s.URL, nil)

	for _, tt := range []struct {
		tool string
		args map[string]any
	}{
		{mcptest.ToolAdd, map[string]any{"a": "two", "b": 3}},
		{mcptest.ToolAdd, map[string]any{"a": 2}},
		{mcptest.ToolCreateTicket, map[string]any{"title": "x", "priority": "urgent", "customer": map[string]any{"id": "c"}}},
		{mcptest.ToolCreateTicket, map[string]any{"title": "x", "priority": "low"}},
		{mcptest.ToolEcho, map[string]any{"text": "x", "extra": true}},
	} {
		got, err := call(t, cs, tt.tool, tt.args)
		if err != nil {
			t.Errorf("CallTool(%q, %v): %v; want an isError result", tt.tool, tt.args, err)
			continue
		}
		if txt := texts(got); !got.IsError || len(txt) != 1 || !strings.HasPrefix(txt[0], `validating "arguments"`) {
			t.Errorf("CallTool(%q, %v) = isError %v, texts %q; want isError and a validation message", tt.tool, tt.args, got.IsError, txt)
		}
	}
}

func TestImage(t *testing.T) {
	s := mcptest.NewServer()
	defer s.Close()
	cs := connect(t, s.URL, nil)

	got, err := call(t, cs, mcptest.ToolImage, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(got.Content) != 2 {
		t.Fatalf("got %d content blocks, want 2", len(got.Content))
	}
	img, ok := got.Content[0].(*mcp.ImageContent)
	if !ok {
		t.Fatalf("content[0] is %T, want *mcp.ImageContent", got.Content[0])
	}
	if img.MIMEType != "image/png" {
		t.Errorf("MIMEType = %q, want image/png", img.MIMEType)
	}
	// The client decodes the base64 of the wire: Data holds the PNG's bytes.
	if !slices.Equal(img.Data, mcptest.PNG()) {
		t.Errorf("image data = %d bytes, want the %d bytes of mcptest.PNG()", len(img.Data), len(mcptest.PNG()))
	}
	if !strings.HasPrefix(string(img.Data), "\x89PNG\r\n\x1a\n") {
		t.Error("image data lacks the PNG signature")
	}
	if diff := cmp.Diff([]string{mcptest.ImageCaption}, texts(got)); diff != "" {
		t.Errorf("texts (-want +got):\n%s", diff)
	}
}

func TestProtocolErrors(t *testing.T) {
	s := mcptest.NewServer()
	defer s.Close()
	cs := connect(t, s.URL, nil)

	tests := []struct {
		tool     string
		wantCode int64
		wantMsg  string
	}{
		// A raw handler's Go error is sent as a JSON-RPC error with code 0.
		{mcptest.ToolRPCError, 0, mcptest.RPCErrorMessage},
		{"no_such_tool", jsonrpc.CodeInvalidParams, `unknown tool "no_such_tool"`},
	}
	for _, tt := range tests {
		got, err := call(t, cs, tt.tool, nil)
		if err == nil {
			t.Errorf("CallTool(%q) = %v, want a protocol error", tt.tool, got)
			continue
		}
		var we *jsonrpc.Error
		if !errors.As(err, &we) {
			t.Errorf("CallTool(%q) error %v is not a *jsonrpc.Error", tt.tool, err)
			continue
		}
		if we.Code != tt.wantCode || we.Message != tt.wantMsg {
			t.Errorf("CallTool(%q) error = code %d %q, want code %d %q", tt.tool, we.Code, we.Message, tt.wantCode, tt.wantMsg)
		}
	}
	// A protocol error does not break the session.
	if _, err := call(t, cs, mcptest.ToolEcho, map[string]any{"text": "still here"}); err != nil {
		t.Errorf("call after a protocol error: %v", err)
	}
}

func TestSlowDeadline(t *testing.T) {
	for _, m := range modes[:2] {
		t.Run(m.name, func(t *testing.T) {
			s := mcptest.NewServer(m.opts...)
			defer s.Close()
			cs := connect(t, s.URL, nil)

			ctx, cancel := context.WithTimeout(t.Context(), 100*time.Millisecond)
			defer cancel()
			start := time.Now()
			_, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: mcptest.ToolSlow, Arguments: map[string]any{"seconds": 30}})
			if !errors.Is(err, context.DeadlineExceeded) {
				t.Fatalf("CallTool(slow 30s) with a 100ms deadline: %v, want context.DeadlineExceeded", err)
			}
			if d := time.Since(start); d > 5*time.Second {
				t.Errorf("CallTool returned after %v, want about 100ms", d)
			}
			// The session survives a cancelled call.
			if _, err := call(t, cs, mcptest.ToolEcho, map[string]any{"text": "x"}); err != nil {
				t.Errorf("call after a deadline: %v", err)
			}
			if m.name == "stateful" {
				// The client sends notifications/cancelled, which reaches the
				// call's session only when the server keeps sessions.
				waitFor(t, func() bool { return s.SlowCancelled() == 1 })
			}
		})
	}
}

// waitFor polls cond for up to five seconds.
func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if cond() {
			return
		}
	}
	t.Fatal("condition not met within 5s")
}

// headerTransport sets a header on every request; tests change it mid-session.
type headerTransport struct {
	name string

	mu    sync.Mutex
	value string
}

func (h *headerTransport) set(v string) {
	h.mu.Lock()
	h.value = v
	h.mu.Unlock()
}

func (h *headerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	h.mu.Lock()
	v := h.value
	h.mu.Unlock()
	r = r.Clone(r.Context())
	r.Header.Set(h.name, v)
	return http.DefaultTransport.RoundTrip(r)
}

var _ http.RoundTripper = (*headerTransport)(nil)

func TestRequireHeader(t *testing.T) {
	for _, m := range modes[:2] {
		t.Run(m.name, func(t *testing.T) {
			opts := append([]mcptest.Option{mcptest.RequireHeader("Authorization", "Bearer good")}, m.opts...)
			s := mcptest.NewServer(opts...)
			defer s.Close()

			// Without the header, initialize is answered 401.
			if cs, err := dial(t.Context(), s.URL, nil); err == nil {
				cs.Close()
				t.Fatal("connect without Authorization succeeded, want 401")
			}
			if got := s.Requests("initialize"); got != 0 {
				t.Errorf("Requests(initialize) = %d, want 0: a refused request must not reach the MCP server", got)
			}

			// The SDK transport has no header setting: headers go through the
			// http.Client.
			rt := &headerTransport{name: "Authorization", value: "Bearer good"}
			cs := connect(t, s.URL, &http.Client{Transport: rt})
			if _, err := call(t, cs, mcptest.ToolEcho, map[string]any{"text": "x"}); err != nil {
				t.Fatal(err)
			}
			if got := s.LastHeader("Authorization"); got != "Bearer good" {
				t.Errorf("LastHeader(Authorization) = %q, want %q", got, "Bearer good")
			}
			if got := s.LastHeader("Mcp-Protocol-Version"); got == "" {
				t.Error("the client sent no Mcp-Protocol-Version after initialize")
			}

			// A 401 mid-session breaks the client session for good.
			rt.set("Bearer expired")
			if _, err := call(t, cs, mcptest.ToolEcho, map[string]any{"text": "x"}); err == nil {
				t.Fatal("call with a wrong token succeeded, want 401")
			}
			rt.set("Bearer good")
			_, err := call(t, cs, mcptest.ToolEcho, map[string]any{"text": "x"})
			if !errors.Is(err, mcp.ErrConnectionClosed) {
				t.Errorf("call after a 401: %v, want mcp.ErrConnectionClosed", err)
			}
			if got := s.Calls(mcptest.ToolEcho); got != 1 {
				t.Errorf("Calls(echo) = %d, want 1", got)
			}
		})
	}
}

func TestDown(t *testing.T) {
	for _, m := range modes[:2] {
		t.Run(m.name, func(t *testing.T) {
			s := mcptest.NewServer(m.opts...)
			defer s.Close()
			cs := connect(t, s.URL, nil)

			s.SetDown(true)
			_, err := call(t, cs, mcptest.ToolEcho, map[string]any{"text": "x"})
			if code, ok := wireCode(err); !ok || code != codeRejected {
				t.Fatalf("call while down: %v, want a *jsonrpc.Error with code %d", err, codeRejected)
			}
			if _, err := dial(t.Context(), s.URL, nil); err == nil {
				t.Error("connect while down succeeded, want 503")
			}
			if got := s.Calls(mcptest.ToolEcho); got != 0 {
				t.Errorf("Calls(echo) = %d while down, want 0", got)
			}

			// A 503 does not break the session: it works again once the server is up.
			s.SetDown(false)
			got, err := call(t, cs, mcptest.ToolEcho, map[string]any{"text": "back"})
			if err != nil {
				t.Fatalf("call after up: %v", err)
			}
			if diff := cmp.Diff([]string{"back"}, texts(got)); diff != "" {
				t.Errorf("texts (-want +got):\n%s", diff)
			}
		})
	}
}

func TestSessions(t *testing.T) {
	t.Run("stateful", func(t *testing.T) {
		s := mcptest.NewServer(mcptest.Stateful())
		defer s.Close()
		cs := connect(t, s.URL, nil)

		if cs.ID() == "" {
			t.Fatal("stateful server handed out no session id")
		}
		if _, err := call(t, cs, mcptest.ToolEcho, map[string]any{"text": "x"}); err != nil {
			t.Fatal(err)
		}
		if got := s.LastHeader("Mcp-Session-Id"); got != cs.ID() {
			t.Errorf("LastHeader(Mcp-Session-Id) = %q, want %q", got, cs.ID())
		}
		if got := s.Sessions(); got != 1 {
			t.Errorf("Sessions() = %d, want 1", got)
		}

		// The server forgets the session: 404, then the client session is dead.
		s.DropSessions()
		_, err := call(t, cs, mcptest.ToolEcho, map[string]any{"text": "x"})
		if !errors.Is(err, mcp.ErrSessionMissing) {
			t.Errorf("call after DropSessions: %v, want mcp.ErrSessionMissing", err)
		}
		_, err = call(t, cs, mcptest.ToolEcho, map[string]any{"text": "x"})
		if !errors.Is(err, mcp.ErrConnectionClosed) {
			t.Errorf("second call after DropSessions: %v, want mcp.ErrConnectionClosed", err)
		}
		// A new session works.
		cs2 := connect(t, s.URL, nil)
		if _, err := call(t, cs2, mcptest.ToolEcho, map[string]any{"text": "x"}); err != nil {
			t.Errorf("call on a new session: %v", err)
		}

		// Closing the client session DELETEs it on the server.
		deletes := s.HTTPRequests("DELETE")
		cs2.Close()
		if got := s.HTTPRequests("DELETE"); got != deletes+1 {
			t.Errorf("DELETE requests = %d after Close, want %d", got, deletes+1)
		}
		waitFor(t, func() bool { return s.Sessions() == 0 })
	})

	t.Run("stateless", func(t *testing.T) {
		s := mcptest.NewServer()
		defer s.Close()
		cs := connect(t, s.URL, nil)

		// The SDK's stateless mode hands out an id, and never checks it.
		if cs.ID() == "" {
			t.Error("stateless server handed out no session id; the SDK's default does")
		}
		s.DropSessions()
		if _, err := call(t, cs, mcptest.ToolEcho, map[string]any{"text": "x"}); err != nil {
			t.Errorf("call after DropSessions: %v", err)
		}
		// Each request's session ends just after its response is sent.
		waitFor(t, func() bool { return s.Sessions() == 0 })
	})

	t.Run("no session id", func(t *testing.T) {
		s := mcptest.NewServer(mcptest.NoSessionID())
		defer s.Close()
		cs := connect(t, s.URL, nil)

		if cs.ID() != "" {
			t.Errorf("session id = %q, want none", cs.ID())
		}
		if _, err := call(t, cs, mcptest.ToolEcho, map[string]any{"text": "x"}); err != nil {
			t.Fatal(err)
		}
		if got := s.LastHeader("Mcp-Session-Id"); got != "" {
			t.Errorf("the client sent Mcp-Session-Id %q", got)
		}
	})
}

func TestStandaloneSSE(t *testing.T) {
	for _, m := range modes[:2] {
		t.Run(m.name, func(t *testing.T) {
			s := mcptest.NewServer(m.opts...)
			defer s.Close()
			c := mcp.NewClient(&mcp.Implementation{Name: "mcptest-client", Version: "v0"}, nil)
			cs, err := c.Connect(t.Context(), &mcp.StreamableClientTransport{Endpoint: s.URL}, nil)
			if err != nil {
				t.Fatal(err)
			}
			defer cs.Close()
			if _, err := call(t, cs, mcptest.ToolEcho, map[string]any{"text": "x"}); err != nil {
				t.Fatal(err)
			}
			// Stateless answers the GET 405, which the client accepts;
			// stateful holds it open as the standalone stream.
			waitFor(t, func() bool { return s.HTTPRequests("GET") == 1 })
		})
	}

	t.Run("disabled", func(t *testing.T) {
		s := mcptest.NewServer(mcptest.Stateful())
		defer s.Close()
		cs := connect(t, s.URL, nil)
		if _, err := call(t, cs, mcptest.ToolEcho, map[string]any{"text": "x"}); err != nil {
			t.Fatal(err)
		}
		// Connect is initialize plus notifications/initialized, then the call.
		if got, want := s.HTTPRequests("POST"), 3; got != want {
			t.Errorf("POST requests = %d, want %d", got, want)
		}
		if got := s.HTTPRequests("GET"); got != 0 {
			t.Errorf("GET requests = %d, want 0 with DisableStandaloneSSE", got)
		}
	})
}

// contentTypes records the Content-Type of every POST response.
type contentTypes struct {
	mu  sync.Mutex
	got []string
}

func (c *contentTypes) RoundTrip(r *http.Request) (*http.Response, error) {
	resp, err := http.DefaultTransport.RoundTrip(r)
	if err == nil && r.Method == http.MethodPost && resp.StatusCode == http.StatusOK {
		c.mu.Lock()
		c.got = append(c.got, resp.Header.Get("Content-Type"))
		c.mu.Unlock()
	}
	return resp, err
}

func TestJSONResponse(t *testing.T) {
	for _, tt := range []struct {
		name string
		opts []mcptest.Option
		want string
	}{
		{"default", nil, "text/event-stream"},
		{"json", []mcptest.Option{mcptest.JSONResponse()}, "application/json"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			s := mcptest.NewServer(tt.opts...)
			defer s.Close()
			rt := &contentTypes{}
			cs := connect(t, s.URL, &http.Client{Transport: rt})
			if _, err := call(t, cs, mcptest.ToolAdd, map[string]any{"a": 1, "b": 2}); err != nil {
				t.Fatal(err)
			}
			rt.mu.Lock()
			defer rt.mu.Unlock()
			want := []string{tt.want, tt.want} // initialize, tools/call
			if diff := cmp.Diff(want, rt.got); diff != "" {
				t.Errorf("Content-Types (-want +got):\n%s", diff)
			}
		})
	}
}

func TestClose(t *testing.T) {
	s := mcptest.NewServer()
	cs := connect(t, s.URL, nil)

	// Close cuts short a slow call in flight.
	done := make(chan error, 1)
	go func() {
		_, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: mcptest.ToolSlow, Arguments: map[string]any{"seconds": 60}})
		done <- err
	}()
	waitFor(t, func() bool { return s.Calls(mcptest.ToolSlow) == 1 })
	start := time.Now()
	s.Close()
	s.Close() // idempotent
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("Close took %v with a slow call in flight", d)
	}
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("the slow call did not return after Close")
	}

	// A closed server refuses connections: the client reports them as
	// rejected, and keeps the session.
	_, err := call(t, cs, mcptest.ToolEcho, map[string]any{"text": "x"})
	if code, ok := wireCode(err); !ok || code != codeRejected {
		t.Errorf("call after Close: %v, want a *jsonrpc.Error with code %d", err, codeRejected)
	}
	if _, err := dial(t.Context(), s.URL, nil); err == nil {
		t.Error("connect after Close succeeded")
	}
}

func TestWrongPath(t *testing.T) {
	s := mcptest.NewServer()
	defer s.Close()
	// A 404 looks like a lost session to the SDK client.
	_, err := dial(t.Context(), strings.TrimSuffix(s.URL, mcptest.Path)+"/wrong", nil)
	if !errors.Is(err, mcp.ErrSessionMissing) {
		t.Errorf("connect to a wrong path: %v, want mcp.ErrSessionMissing", err)
	}
}

func TestCounters(t *testing.T) {
	s := mcptest.NewServer()
	defer s.Close()
	cs := connect(t, s.URL, nil)
	for range 3 {
		if _, err := cs.ListTools(t.Context(), nil); err != nil {
			t.Fatal(err)
		}
	}
	for range 2 {
		if _, err := call(t, cs, mcptest.ToolAdd, map[string]any{"a": 1, "b": 1}); err != nil {
			t.Fatal(err)
		}
	}
	got := map[string]int{
		"ListCalls":  s.ListCalls(),
		"initialize": s.Requests("initialize"),
		"tools/call": s.Requests("tools/call"),
		"add":        s.Calls(mcptest.ToolAdd),
		"echo":       s.Calls(mcptest.ToolEcho),
	}
	want := map[string]int{"ListCalls": 3, "initialize": 1, "tools/call": 2, "add": 2, "echo": 0}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("counters (-want +got):\n%s", diff)
	}
}
