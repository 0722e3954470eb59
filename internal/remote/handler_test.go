package remote_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/lambda-agent/lambda-agent/internal/app"
	"github.com/lambda-agent/lambda-agent/internal/ddbhistory"
	"github.com/lambda-agent/lambda-agent/internal/testkit"
	"github.com/lambda-agent/lambda-agent/internal/testkit/conversetest"
	"github.com/lambda-agent/lambda-agent/internal/testkit/lambdatest"
	"github.com/lambda-agent/lambda-agent/internal/testkit/mcptest"
	"github.com/lambda-agent/lambda-agent/internal/testkit/ssmtest"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// chat posts message to session on s's handler and decodes the answer.
func chat(t *testing.T, s *testkit.Stack, session, message string) (int, map[string]any) {
	t.Helper()
	body, _ := json.Marshal(map[string]string{"session_id": session, "message": message})
	r := httptest.NewRequestWithContext(t.Context(), "POST", "/chat", strings.NewReader(string(body)))
	r.Header.Set("Content-Type", "application/json")
	w := s.Serve(r)
	var out map[string]any
	if err := json.Unmarshal(w.Body.Bytes(), &out); err != nil {
		t.Fatalf("%d %s", w.Code, w.Body)
	}
	return w.Code, out
}

// results returns the tool results of the turn's answer, by tool use id.
func results(t *testing.T, answer map[string]any) map[string]map[string]any {
	t.Helper()
	out := map[string]map[string]any{}
	msgs, _ := answer["messages"].([]any)
	for _, m := range msgs {
		for _, b := range m.(map[string]any)["content"].([]any) {
			if r, ok := b.(map[string]any)["toolResult"].(map[string]any); ok {
				out[r["toolUseId"].(string)] = r
			}
		}
	}
	return out
}

func firstText(r map[string]any) string {
	for _, c := range r["content"].([]any) {
		if text, ok := c.(map[string]any)["text"].(string); ok {
			return text
		}
	}
	return ""
}

// TestMCPToolsThroughTheHandler: a turn on the real handler uses an MCP
// server's tools against the strict Converse stand-in: answers, images,
// failures and a timeout reach the model as tool results, and a server
// that is down fails only its tools, never the turn.
func TestMCPToolsThroughTheHandler(t *testing.T) {
	srv := mcptest.NewServer()
	t.Cleanup(srv.Close)
	s := testkit.Start(t, testkit.Options{Env: map[string]string{
		"MCP_SERVERS": fmt.Sprintf(`[{"name":"tickets","url":%q}]`, srv.URL),
	}})
	s.Model.Enqueue(
		conversetest.Text("Using the server.").
			WithToolUse("u-add", "tickets_add", map[string]int{"a": 2, "b": 3}).
			WithToolUse("u-img", "tickets_image", map[string]any{}).
			WithToolUse("u-fail", "tickets_fail", map[string]any{}).
			WithToolUse("u-calc", "calculator", map[string]string{"expression": "6*7"}),
		conversetest.Text("Done."),
	)
	code, answer := chat(t, s, "mcp", "use the tools")
	if code != 200 || answer["text"] != "Done." {
		t.Fatalf("%d %v", code, answer)
	}
	rs := results(t, answer)
	if r := rs["u-add"]; r["status"] != "success" || firstText(r) != "5" {
		t.Errorf("add: %v", r)
	}
	if r := rs["u-img"]; r["status"] != "success" || !strings.Contains(fmt.Sprint(r["content"]), "png") {
		t.Errorf("image: %v", r)
	}
	if r := rs["u-fail"]; r["status"] != "error" || !strings.Contains(firstText(r), mcptest.FailMessage) {
		t.Errorf("fail: %v", r)
	}
	if r := rs["u-calc"]; r["status"] != "success" {
		t.Errorf("the built-in beside them: %v", r)
	}
	offered := map[string]bool{}
	for _, tool := range s.Model.Requests()[0].ToolConfig.Tools {
		offered[tool.ToolSpec.Name] = true
	}
	for _, name := range []string{"calculator", "tickets_add", "tickets_get_weather"} {
		if !offered[name] {
			t.Errorf("%s was not offered to the model", name)
		}
	}

	// The server goes down: its tools fail as error results, and the turn
	// goes on.
	srv.SetDown(true)
	s.Model.Enqueue(conversetest.ToolUse("u-echo", "tickets_echo", map[string]string{"text": "hi"}), conversetest.Text("It is down."))
	code, answer = chat(t, s, "mcp", "again")
	if code != 200 {
		t.Fatalf("a turn with the server down: %d %v", code, answer)
	}
	if r := results(t, answer)["u-echo"]; r["status"] != "error" || !strings.Contains(firstText(r), "tickets") {
		t.Errorf("echo with the server down: %v", r)
	}
	if !strings.Contains(s.Logs.String(), `"msg":"tool failed"`) {
		t.Errorf("the failed call is not logged:\n%s", s.Logs.String())
	}
}

// TestMCPServerDownAtInit: the function starts, and its turns run, when an
// MCP server cannot be reached at all.
func TestMCPServerDownAtInit(t *testing.T) {
	srv := mcptest.NewServer()
	url := srv.URL
	srv.Close()
	s := testkit.Start(t, testkit.Options{Env: map[string]string{
		"MCP_SERVERS": fmt.Sprintf(`[{"name":"gone","url":%q}]`, url),
	}})
	s.Model.Enqueue(conversetest.Text("Hello."))
	if code, answer := chat(t, s, "down", "hello"); code != 200 || answer["text"] != "Hello." {
		t.Fatalf("%d %v", code, answer)
	}
	if !strings.Contains(s.Logs.String(), "MCP server unavailable") {
		t.Errorf("no warning about the server:\n%s", s.Logs.String())
	}
}

// TestLambdaToolsAndSecretsThroughTheHandler: a Lambda function is a tool,
// its failure an error result with the function's message; an MCP
// server's Authorization header comes from SSM, read once at init.
func TestLambdaToolsAndSecretsThroughTheHandler(t *testing.T) {
	fn := lambdatest.NewServer()
	t.Cleanup(fn.Close)
	fn.Register("orders", orders)
	params := ssmtest.NewServer()
	t.Cleanup(params.Close)
	params.Put("/agent/token", "Bearer s3cret", true)
	srv := mcptest.NewServer(mcptest.RequireHeader("Authorization", "Bearer s3cret"))
	t.Cleanup(srv.Close)
	s := testkit.Start(t, testkit.Options{
		Env: map[string]string{
			"LAMBDA_TOOLS": `[{"name":"lookup_order","function":"orders","description":"Look up an order.",
				"input_schema":{"type":"object","properties":{"order_id":{"type":"string"}},"required":["order_id"]}}]`,
			"MCP_SERVERS": fmt.Sprintf(`[{"name":"tickets","url":%q,"secret_headers":{"Authorization":"/agent/token"}}]`, srv.URL),
		},
		Remote: app.Remote{Lambda: fn.Client(), SSM: params.Client()},
	})
	s.Model.Enqueue(
		conversetest.ToolUse("u-ok", "lookup_order", map[string]string{"order_id": "42"}).
			WithToolUse("u-missing", "lookup_order", map[string]string{"order_id": "missing"}).
			WithToolUse("u-bad", "lookup_order", map[string]int{"order": 1}).
			WithToolUse("u-echo", "tickets_echo", map[string]string{"text": "authorized"}),
		conversetest.Text("Done."),
	)
	code, answer := chat(t, s, "lambda", "where is my order?")
	if code != 200 {
		t.Fatalf("%d %v", code, answer)
	}
	rs := results(t, answer)
	if r := rs["u-ok"]; r["status"] != "success" || !strings.Contains(fmt.Sprint(r["content"]), "shipped") {
		t.Errorf("the function's answer: %v", r)
	}
	if r := rs["u-missing"]; r["status"] != "error" || !strings.Contains(firstText(r), "OrderNotFound") || !strings.Contains(firstText(r), "no order missing") {
		t.Errorf("the function's error: %v", r)
	}
	if r := rs["u-bad"]; r["status"] != "error" || !strings.Contains(firstText(r), "schema") {
		t.Errorf("an input the schema refuses: %v", r)
	}
	if r := rs["u-echo"]; r["status"] != "success" || firstText(r) != "authorized" {
		t.Errorf("the MCP tool with the secret header: %v", r)
	}
	if n := fn.Calls("orders"); n != 2 {
		t.Errorf("the function ran %d times; the refused input must not reach it", n)
	}
	if n := params.Calls(); n != 1 {
		t.Errorf("SSM was read %d times", n)
	}
}

// TestUnreadableSecretLeavesTheServerOut: a secret header whose parameter
// cannot be read leaves its server out, with an error in the log; the
// function starts, and its other tools work.
func TestUnreadableSecretLeavesTheServerOut(t *testing.T) {
	params := ssmtest.NewServer()
	t.Cleanup(params.Close)
	srv := mcptest.NewServer()
	t.Cleanup(srv.Close)
	s := testkit.Start(t, testkit.Options{
		Env:    map[string]string{"MCP_SERVERS": fmt.Sprintf(`[{"name":"locked","url":%q,"secret_headers":{"Authorization":"/agent/missing"}}]`, srv.URL)},
		Remote: app.Remote{SSM: params.Client()},
	})
	s.Model.Enqueue(conversetest.ToolUse("u1", "calculator", map[string]string{"expression": "1+1"}), conversetest.Text("2"))
	if code, answer := chat(t, s, "locked", "1+1"); code != 200 || results(t, answer)["u1"]["status"] != "success" {
		t.Fatalf("%d %v", code, answer)
	}
	if !strings.Contains(s.Logs.String(), `"msg":"MCP server left out"`) || !strings.Contains(s.Logs.String(), "/agent/missing") {
		t.Errorf("no error about the secret:\n%s", s.Logs.String())
	}
	for _, tool := range s.Model.Requests()[0].ToolConfig.Tools {
		if strings.HasPrefix(tool.ToolSpec.Name, "locked_") {
			t.Errorf("the server left out offered %s", tool.ToolSpec.Name)
		}
	}
	if srv.ListCalls() != 0 {
		t.Error("the server left out was asked for its tools")
	}
}

// TestSlowMCPToolMeetsTheDeadline: a remote tool that outlasts the
// invocation is cut off before the deadline, so that the function answers
// 504 itself, with nothing stored, rather than be stopped by Lambda.
func TestSlowMCPToolMeetsTheDeadline(t *testing.T) {
	srv := mcptest.NewServer()
	t.Cleanup(srv.Close)
	s := testkit.Start(t, testkit.Options{Env: map[string]string{
		"MCP_SERVERS": fmt.Sprintf(`[{"name":"tickets","url":%q}]`, srv.URL),
	}})
	s.Model.Enqueue(conversetest.ToolUse("u-slow", "tickets_slow", map[string]int{"seconds": 60}))
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	r := httptest.NewRequestWithContext(ctx, "POST", "/chat", strings.NewReader(`{"session_id":"slow","message":"take your time"}`))
	r.Header.Set("Content-Type", "application/json")
	start := time.Now()
	w := s.Serve(r)
	took := time.Since(start)
	if w.Code != 504 || !strings.Contains(w.Body.String(), `"code":"timeout"`) {
		t.Errorf("%d %s", w.Code, w.Body)
	}
	if took >= 5*time.Second {
		t.Errorf("the answer came after the deadline: %s", took)
	}
	if _, err := s.Store.Load(t.Context(), ddbhistory.Key{Owner: "anonymous", ID: "slow"}, ""); !errors.Is(err, ddbhistory.ErrNotFound) {
		t.Errorf("after the timeout, the session: %v; want nothing stored", err)
	}
	if srv.Calls("slow") != 1 {
		t.Errorf("the slow tool was called %d times", srv.Calls("slow"))
	}
}

// TestPauseTooLargeForTheSessionItem: the results that wait beside a
// paused tool use live in the session item; past its size the pause is
// refused with 413 too_large, and nothing is stored.
func TestPauseTooLargeForTheSessionItem(t *testing.T) {
	srv := mcptest.NewServer()
	t.Cleanup(srv.Close)
	s := testkit.Start(t, testkit.Options{Env: map[string]string{
		"MCP_SERVERS":           fmt.Sprintf(`[{"name":"tickets","url":%q}]`, srv.URL),
		"APPROVAL_TOOLS":        "calculator",
		"MAX_TOOL_RESULT_BYTES": "1048576",
	}})
	// 800,000 letters compress to some 470 KB: past the item's 400 KB.
	big := randomText(800_000)
	s.Model.Enqueue(conversetest.ToolUse("u-big", "tickets_echo", map[string]string{"text": big}).
		WithToolUse("u-calc", "calculator", map[string]string{"expression": "1+1"}))
	code, answer := chat(t, s, "big-pause", "echo this and add")
	if code != 413 || !strings.Contains(fmt.Sprint(answer["error"]), "too_large") {
		t.Errorf("%d, error %v, stop %v", code, answer["error"], answer["stop_reason"])
	}
	if _, err := s.Store.Load(t.Context(), ddbhistory.Key{Owner: "anonymous", ID: "big-pause"}, ""); !errors.Is(err, ddbhistory.ErrNotFound) {
		t.Errorf("the session after the refused pause: %v; want nothing stored", err)
	}
}

// randomText is n letters that do not compress, so that their size is
// what the store meets.
func randomText(n int) string {
	b := make([]byte, n)
	x := uint32(2463534242)
	for i := range b {
		x ^= x << 13
		x ^= x >> 17
		x ^= x << 5
		b[i] = 'a' + byte(x%26)
	}
	return string(b)
}

// hostileSchemaServer is an MCP server, built with the official SDK, whose
// tools' input schemas are hostile: loop refers to itself, so that a
// validator that follows it never ends; doubling applies each of 30
// definitions twice to the next, 2^30 subschemas in 2 KB. Its tool fine is
// an ordinary tool. Every tool answers "ran".
func hostileSchemaServer(t *testing.T) string {
	t.Helper()
	server := mcp.NewServer(&mcp.Implementation{Name: "hostile", Version: "1"}, nil)
	handler := func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "ran"}}}, nil
	}
	schema := func(raw string) map[string]any {
		var m map[string]any
		if err := json.Unmarshal([]byte(raw), &m); err != nil {
			t.Fatal(err)
		}
		return m
	}
	defs := make([]string, 30)
	for i := range defs {
		defs[i] = fmt.Sprintf(`"d%d":{"allOf":[{"$ref":"#/$defs/d%d"},{"$ref":"#/$defs/d%d"}]}`, i, i+1, i+1)
	}
	server.AddTool(&mcp.Tool{Name: "loop", InputSchema: schema(`{"type":"object","$ref":"#/$defs/loop","$defs":{"loop":{"$ref":"#/$defs/loop"}}}`)}, handler)
	server.AddTool(&mcp.Tool{Name: "doubling", InputSchema: schema(`{"type":"object","$ref":"#/$defs/d0","$defs":{` + strings.Join(defs, ",") + `,"d30":{"type":"object"}}}`)}, handler)
	server.AddTool(&mcp.Tool{Name: "fine", InputSchema: schema(`{"type":"object","properties":{"q":{"type":"string"}}}`)}, handler)
	hs := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return server }, &mcp.StreamableHTTPOptions{Stateless: true}))
	t.Cleanup(hs.Close)
	return hs.URL
}

// TestHostileToolSchemasThroughTheHandler (issue 24): an MCP tool whose
// input schema refers to itself in a cycle, and one that unfolds past
// MaxExpanded, are left out when they are listed, and a Lambda tool whose
// schema is a cycle at init, each with a warning that names the tool and
// why, and the limit; the model is not offered them, a call to any is
// answered "There is no tool named…", and the turn answers 200 with the
// server's other tool working beside them.
func TestHostileToolSchemasThroughTheHandler(t *testing.T) {
	fn := lambdatest.NewServer()
	t.Cleanup(fn.Close)
	fn.Register("orders", orders)
	s := testkit.Start(t, testkit.Options{
		Env: map[string]string{
			"MCP_SERVERS": fmt.Sprintf(`[{"name":"h","url":%q}]`, hostileSchemaServer(t)),
			"LAMBDA_TOOLS": `[{"name":"cyclic","function":"orders","description":"A cycle.",
				"input_schema":{"type":"object","properties":{"a":{"$ref":"#/$defs/x"}},"$defs":{"x":{"anyOf":[{"$ref":"#/$defs/x"}]}}}}]`,
		},
		Remote: app.Remote{Lambda: fn.Client()},
	})
	s.Model.Enqueue(
		conversetest.ToolUse("u-loop", "h_loop", map[string]any{}).
			WithToolUse("u-doubling", "h_doubling", map[string]any{}).
			WithToolUse("u-cyclic", "cyclic", map[string]any{"a": 1}).
			WithToolUse("u-fine", "h_fine", map[string]string{"q": "x"}),
		conversetest.Text("Done."),
	)
	code, answer := chat(t, s, "hostile", "use the tools")
	if code != 200 || answer["text"] != "Done." {
		t.Fatalf("%d %v", code, answer)
	}
	rs := results(t, answer)
	for _, id := range []string{"u-loop", "u-doubling", "u-cyclic"} {
		if r := rs[id]; r["status"] != "error" || !strings.Contains(firstText(r), "There is no tool named") {
			t.Errorf("%s: %v", id, r)
		}
	}
	if r := rs["u-fine"]; r["status"] != "success" || firstText(r) != "ran" {
		t.Errorf("the server's ordinary tool: %v", r)
	}
	for _, tool := range s.Model.Requests()[0].ToolConfig.Tools {
		if n := tool.ToolSpec.Name; n == "h_loop" || n == "h_doubling" || n == "cyclic" {
			t.Errorf("the model was offered %s", n)
		}
	}
	if fn.Calls("orders") != 0 {
		t.Errorf("the Lambda tool left out was called")
	}
	warnings := map[string]string{}
	for _, line := range strings.Split(s.Logs.String(), "\n") {
		var l struct{ Msg, Tool, Reason, Limit string }
		if json.Unmarshal([]byte(line), &l) == nil && strings.HasSuffix(l.Msg, "tool left out") {
			warnings[l.Tool] = l.Msg + ": " + l.Reason + " [" + l.Limit + "]"
		}
	}
	for tool, want := range map[string][]string{
		"loop":     {"MCP tool left out", "applies itself to the same value again"},
		"doubling": {"MCP tool left out", "(limit: MaxExpanded)", "[MaxExpanded]"},
		"cyclic":   {"Lambda tool left out", "applies itself to the same value again"},
	} {
		for _, w := range want {
			if !strings.Contains(warnings[tool], w) {
				t.Errorf("the warning that %s is left out, %q, does not say %q", tool, warnings[tool], w)
			}
		}
	}
}
