package remote_test

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/lambda-agent/lambda-agent/internal/agent"
	"github.com/lambda-agent/lambda-agent/internal/remote"
	"github.com/lambda-agent/lambda-agent/internal/testkit"
	"github.com/lambda-agent/lambda-agent/internal/testkit/conversetest"
	"github.com/lambda-agent/lambda-agent/internal/testkit/mcptest"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// newSet returns the tool set of one server at url, named srv, with the
// clock, and the buffer its warnings go to.
func newSet(t *testing.T, cfg remote.MCPServer, opts remote.MCPOptions) (*remote.MCP, *testkit.Clock, *testkit.Buffer) {
	t.Helper()
	c := testkit.NewClock(time.Date(2026, 11, 24, 12, 0, 0, 0, time.UTC))
	var logs testkit.Buffer
	opts.Now, opts.Logger = c.Now, slog.New(slog.NewJSONHandler(&logs, nil))
	if cfg.Name == "" {
		cfg.Name = "srv"
	}
	return remote.NewMCP([]remote.MCPServer{cfg}, opts), c, &logs
}

func names(tools []agent.Tool) []string {
	var out []string
	for _, t := range tools {
		out = append(out, t.Spec().Name)
	}
	return out
}

func byName(t *testing.T, tools []agent.Tool, name string) agent.Tool {
	t.Helper()
	for _, tool := range tools {
		if tool.Spec().Name == name {
			return tool
		}
	}
	t.Fatalf("no tool %s among %v", name, names(tools))
	return nil
}

func run(t *testing.T, ctx context.Context, tool agent.Tool, input string) ([]agent.ToolResultContent, error) {
	t.Helper()
	return tool.Run(ctx, &agent.ToolCall{ID: "u1", Name: tool.Spec().Name, Input: json.RawMessage(input)})
}

// TestMCPToolNames: the server's tools get the prefix; a name Bedrock
// refuses is made valid, or left out with a warning when it cannot be, or
// when a tool that was valid as it came has the name; schemas pass through.
func TestMCPToolNames(t *testing.T) {
	srv := mcptest.NewServer()
	t.Cleanup(srv.Close)
	set, _, logs := newSet(t, remote.MCPServer{URL: srv.URL}, remote.MCPOptions{})
	tools := set.Tools(t.Context())
	got := names(tools)
	slices.Sort(got)
	want := []string{"srv_add", "srv_create_ticket", "srv_echo", "srv_explode", "srv_fail", "srv_get_weather",
		"srv_image", "srv_read_file", "srv_rpc_error", "srv_slow"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("tools (-want +got):\n%s", diff)
	}
	for _, left := range []string{`"tool":"read.file"`, `"tool":"` + mcptest.LongToolName + `"`} {
		if !strings.Contains(logs.String(), left) || !strings.Contains(logs.String(), "MCP tool left out") {
			t.Errorf("no warning for %s:\n%s", left, logs.String())
		}
	}
	// read_file is the server's own read_file, not read.file.
	out, err := run(t, t.Context(), byName(t, tools, "srv_read_file"), `{}`)
	if err != nil || out[0].Text != "called read_file" {
		t.Errorf("srv_read_file: %v %+v", err, out)
	}
	out, err = run(t, t.Context(), byName(t, tools, "srv_get_weather"), `{}`)
	if err != nil || out[0].Text != "called get weather" {
		t.Errorf("srv_get_weather calls the server's name for it: %v %+v", err, out)
	}
	var schema any
	if err := json.Unmarshal(byName(t, tools, "srv_create_ticket").Spec().InputSchema, &schema); err != nil {
		t.Fatal(err)
	}
	wantSchema, _ := json.Marshal(mcptest.CreateTicketSchema())
	var wantDoc any
	_ = json.Unmarshal(wantSchema, &wantDoc)
	if diff := cmp.Diff(wantDoc, schema); diff != "" {
		t.Errorf("the input schema does not pass through (-server +tool):\n%s", diff)
	}
}

func TestMCPAllowAndPrefix(t *testing.T) {
	srv := mcptest.NewServer()
	t.Cleanup(srv.Close)
	none := ""
	set, _, _ := newSet(t, remote.MCPServer{URL: srv.URL, Allow: []string{"add", "echo", "nothing"}, Prefix: &none}, remote.MCPOptions{Approval: []string{"add"}})
	tools := set.Tools(t.Context())
	if diff := cmp.Diff([]string{"add", "echo"}, names(tools)); diff != "" {
		t.Errorf("tools (-want +got):\n%s", diff)
	}
	// APPROVAL_TOOLS reaches MCP tools too: add waits for a person.
	s := testkit.ConverseServer(t)
	s.Enqueue(conversetestToolUse("a1", "add", `{"a":2,"b":3}`))
	a, err := agent.New(agent.Config{Model: testkit.BedrockModel(t, s, "m"), ToolSets: []agent.ToolSet{set}})
	if err != nil {
		t.Fatal(err)
	}
	res, err := a.Run(t.Context(), &agent.Conversation{}, []agent.ContentBlock{agent.Text("add")})
	if err != nil || res.StopReason != agent.StopInterrupt || srv.Calls("add") != 0 {
		t.Errorf("add did not wait for approval: %v, %s, %d calls", err, res.StopReason, srv.Calls("add"))
	}
}

// TestMCPResults: text, structured content, images and failures become
// tool results and errors.
func TestMCPResults(t *testing.T) {
	srv := mcptest.NewServer()
	t.Cleanup(srv.Close)
	set, _, _ := newSet(t, remote.MCPServer{URL: srv.URL}, remote.MCPOptions{})
	tools := set.Tools(t.Context())

	out, err := run(t, t.Context(), byName(t, tools, "srv_add"), `{"a":2,"b":3}`)
	if err != nil || len(out) != 2 || out[0].Text != "5" || string(out[1].JSON) != `{"sum":5}` {
		t.Errorf("add: %v %+v", err, out)
	}
	out, err = run(t, t.Context(), byName(t, tools, "srv_image"), `{}`)
	if err != nil || len(out) != 2 {
		t.Fatalf("image: %v %+v", err, out)
	}
	var img *agent.ImageBlock
	for _, c := range out {
		if c.Image != nil {
			img = c.Image
		}
	}
	if img == nil || img.Format != "png" || !slices.Equal(img.Source.Bytes, mcptest.PNG()) {
		t.Errorf("image: %+v", out)
	}
	for tool, want := range map[string]string{
		"srv_fail":      mcptest.FailMessage,
		"srv_explode":   mcptest.ExplodeMessage,
		"srv_rpc_error": mcptest.RPCErrorMessage,
	} {
		if _, err := run(t, t.Context(), byName(t, tools, tool), `{}`); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want an error with %q", tool, err, want)
		}
	}
	ctx, cancel := context.WithTimeout(t.Context(), 100*time.Millisecond)
	defer cancel()
	if _, err := run(t, ctx, byName(t, tools, "srv_slow"), `{"seconds":5}`); err == nil {
		t.Error("slow: no error past the deadline")
	}
	out, err = run(t, t.Context(), byName(t, tools, "srv_echo"), `{"text":"still here"}`)
	if err != nil || out[0].Text != "still here" {
		t.Errorf("after a timeout the server is still usable: %v %+v", err, out)
	}
}

// TestMCPListingIsCached: one listing serves the turns until the TTL.
func TestMCPListingIsCached(t *testing.T) {
	srv := mcptest.NewServer()
	t.Cleanup(srv.Close)
	set, c, _ := newSet(t, remote.MCPServer{URL: srv.URL}, remote.MCPOptions{TTL: time.Minute})
	set.Start()
	for range 5 {
		set.Tools(t.Context())
	}
	if n := srv.ListCalls(); n != 1 {
		t.Errorf("%d listings for 5 turns within the TTL", n)
	}
	// Past the TTL, a turn gets the list it has and the listing runs
	// beside it.
	c.Advance(2 * time.Minute)
	if tools := set.Tools(t.Context()); len(tools) == 0 {
		t.Error("a turn past the TTL got no tools")
	}
	deadline := time.Now().Add(5 * time.Second)
	for srv.ListCalls() < 2 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	if n := srv.ListCalls(); n != 2 {
		t.Errorf("%d listings after the TTL, want 2", n)
	}
}

// TestMCPServerDown: a server that is down when first asked offers no
// tools, with a warning, and is asked again only after RetryAfter; one
// that goes down after its listing keeps its tools, whose calls fail.
func TestMCPServerDown(t *testing.T) {
	srv := mcptest.NewServer()
	t.Cleanup(srv.Close)
	srv.SetDown(true)
	set, c, logs := newSet(t, remote.MCPServer{URL: srv.URL}, remote.MCPOptions{RetryAfter: 30 * time.Second})
	if tools := set.Tools(t.Context()); len(tools) != 0 {
		t.Errorf("a server that is down offered %v", names(tools))
	}
	if !strings.Contains(logs.String(), "MCP server unavailable") {
		t.Errorf("no warning:\n%s", logs.String())
	}
	srv.SetDown(false)
	if tools := set.Tools(t.Context()); len(tools) != 0 {
		t.Error("the server was asked again before RetryAfter")
	}
	c.Advance(31 * time.Second)
	tools := set.Tools(t.Context())
	if len(tools) == 0 {
		t.Fatal("no tools once the server is back")
	}
	srv.SetDown(true)
	c.Advance(time.Hour)
	kept := set.Tools(t.Context())
	if len(kept) != len(tools) {
		t.Errorf("a failed listing dropped the tools: %d, had %d", len(kept), len(tools))
	}
	if _, err := run(t, t.Context(), byName(t, kept, "srv_echo"), `{"text":"x"}`); err == nil || !strings.Contains(err.Error(), "MCP server srv") {
		t.Errorf("a call to a server that is down: %v", err)
	}
}

// TestMCPSessionLost: a stateful server that forgot the session (a
// restart) is connected to again, and the call runs once.
func TestMCPSessionLost(t *testing.T) {
	srv := mcptest.NewServer(mcptest.Stateful())
	t.Cleanup(srv.Close)
	set, _, _ := newSet(t, remote.MCPServer{URL: srv.URL}, remote.MCPOptions{})
	echo := byName(t, set.Tools(t.Context()), "srv_echo")
	srv.DropSessions()
	out, err := run(t, t.Context(), echo, `{"text":"again"}`)
	if err != nil || out[0].Text != "again" {
		t.Fatalf("after the server lost the session: %v %+v", err, out)
	}
	if n := srv.Calls("echo"); n != 1 {
		t.Errorf("echo ran %d times", n)
	}
}

// TestMCPHeaders: the configured headers reach the server.
func TestMCPHeaders(t *testing.T) {
	srv := mcptest.NewServer(mcptest.RequireHeader("Authorization", "Bearer s3cret"))
	t.Cleanup(srv.Close)
	without, _, _ := newSet(t, remote.MCPServer{URL: srv.URL}, remote.MCPOptions{})
	if tools := without.Tools(t.Context()); len(tools) != 0 {
		t.Errorf("listed without the header: %v", names(tools))
	}
	with, _, _ := newSet(t, remote.MCPServer{URL: srv.URL, Headers: map[string]string{"Authorization": "Bearer s3cret"}}, remote.MCPOptions{})
	if tools := with.Tools(t.Context()); len(tools) == 0 || srv.LastHeader("Authorization") != "Bearer s3cret" {
		t.Errorf("with the header: %v, last Authorization %q", names(tools), srv.LastHeader("Authorization"))
	}
}

// conversetestToolUse is a Converse answer that asks for one tool.
func conversetestToolUse(id, name, input string) conversetest.Reply {
	return conversetest.ToolUse(id, name, json.RawMessage(input))
}

// TestMCPSchemaBedrockRefuses: a tool whose input schema Bedrock would
// refuse is left out, with a warning, and the server's other tools stay.
func TestMCPSchemaBedrockRefuses(t *testing.T) {
	server := mcp.NewServer(&mcp.Implementation{Name: "odd", Version: "1"}, nil)
	handler := func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "ok"}}}, nil
	}
	server.AddTool(&mcp.Tool{Name: "fine", InputSchema: map[string]any{"type": "object"}}, handler)
	server.AddTool(&mcp.Tool{Name: "blank_key", InputSchema: map[string]any{"type": "object", "properties": map[string]any{"": map[string]any{"type": "string"}}}}, handler)
	hs := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return server }, &mcp.StreamableHTTPOptions{Stateless: true}))
	t.Cleanup(hs.Close)
	set, _, logs := newSet(t, remote.MCPServer{URL: hs.URL}, remote.MCPOptions{})
	if diff := cmp.Diff([]string{"srv_fine"}, names(set.Tools(t.Context()))); diff != "" {
		t.Errorf("tools (-want +got):\n%s", diff)
	}
	if !strings.Contains(logs.String(), `"tool":"blank_key"`) || !strings.Contains(logs.String(), "Bedrock would refuse its input schema") {
		t.Errorf("no warning for blank_key:\n%s", logs.String())
	}
}

// TestMCPHeadersStayWithTheServer: a redirect is not followed, so that the
// headers, secrets among them, reach only the configured server.
func TestMCPHeadersStayWithTheServer(t *testing.T) {
	var leaked []string
	elsewhere := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		leaked = append(leaked, r.Header.Get("Authorization"))
		http.Error(w, "no", http.StatusNotFound)
	}))
	t.Cleanup(elsewhere.Close)
	redirecting := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, elsewhere.URL+"/mcp", http.StatusTemporaryRedirect)
	}))
	t.Cleanup(redirecting.Close)
	set, _, _ := newSet(t, remote.MCPServer{URL: redirecting.URL, Headers: map[string]string{"Authorization": "Bearer SECRET"}}, remote.MCPOptions{})
	if tools := set.Tools(t.Context()); len(tools) != 0 {
		t.Errorf("tools through a redirect: %v", names(tools))
	}
	if len(leaked) != 0 {
		t.Errorf("the redirect's target got requests, with Authorization %q", leaked)
	}
}

// TestMCPNamesTheAgentHas: a server's tool whose name one of the agent's
// own tools has is left out, with a warning.
func TestMCPNamesTheAgentHas(t *testing.T) {
	srv := mcptest.NewServer()
	t.Cleanup(srv.Close)
	set, _, logs := newSet(t, remote.MCPServer{URL: srv.URL}, remote.MCPOptions{Taken: []string{"srv_echo"}})
	if slices.Contains(names(set.Tools(t.Context())), "srv_echo") {
		t.Error("srv_echo was offered beside the agent's own")
	}
	if !strings.Contains(logs.String(), "the agent has another tool named srv_echo") {
		t.Errorf("no warning:\n%s", logs.String())
	}
}

// TestMCPSchemaPastTheBudget (issue 24): a tool whose input schema is a
// cycle, or unfolds past MaxExpanded, is left out when it is listed, with a
// warning that names it, why and the limit; the others bring their schemas
// compiled, so that the agent does not compile them again.
func TestMCPSchemaPastTheBudget(t *testing.T) {
	set, _, logs := newSet(t, remote.MCPServer{URL: hostileSchemaServer(t)}, remote.MCPOptions{})
	tools := set.Tools(t.Context())
	if diff := cmp.Diff([]string{"srv_fine"}, names(tools)); diff != "" {
		t.Errorf("tools (-want +got):\n%s", diff)
	}
	if c, ok := byName(t, tools, "srv_fine").(agent.CompiledTool); !ok || c.CompiledSchema() == nil {
		t.Error("the tool does not bring its schema compiled")
	}
	for _, want := range []string{
		`"tool":"loop","reason":"its input schema cannot be used: invalid JSON Schema: the subschema at /$defs/loop applies itself to the same value again`,
		`"tool":"doubling","reason":"its input schema cannot be used: invalid JSON Schema: the schema expands to more than 10000 subschemas`,
		`(limit: MaxExpanded)","limit":"MaxExpanded"}`,
	} {
		if !strings.Contains(logs.String(), want) {
			t.Errorf("the warnings do not say %s:\n%s", want, logs.String())
		}
	}
}

// TestMCPOnly: a set of some of the servers offers their tools alone, and
// shares their listings with the whole set: each server is listed once,
// whichever set asks.
func TestMCPOnly(t *testing.T) {
	a, b := mcptest.NewServer(), mcptest.NewServer()
	t.Cleanup(a.Close)
	t.Cleanup(b.Close)
	set := remote.NewMCP([]remote.MCPServer{
		{Name: "a", URL: a.URL, Allow: []string{"add"}},
		{Name: "b", URL: b.URL, Allow: []string{"echo"}},
	}, remote.MCPOptions{TTL: time.Hour})
	set.Start()
	for _, tt := range []struct {
		set  *remote.MCP
		want []string
	}{
		{set.Only("a"), []string{"a_add"}},
		{set.Only("b", "nothing"), []string{"b_echo"}},
		{set.Only(), nil},
		{set, []string{"a_add", "b_echo"}},
	} {
		if diff := cmp.Diff(tt.want, names(tt.set.Tools(t.Context()))); diff != "" {
			t.Errorf("tools (-want +got):\n%s", diff)
		}
	}
	if a.ListCalls() != 1 || b.ListCalls() != 1 {
		t.Errorf("listings: a %d, b %d; want one each", a.ListCalls(), b.ListCalls())
	}
}
