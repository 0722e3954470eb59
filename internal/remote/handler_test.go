package remote_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/lambda-agent/lambda-agent/internal/app"
	"github.com/lambda-agent/lambda-agent/internal/conversetest"
	"github.com/lambda-agent/lambda-agent/internal/ddbhistory"
	"github.com/lambda-agent/lambda-agent/internal/lambdalocal"
	"github.com/lambda-agent/lambda-agent/internal/mcptest"
	"github.com/lambda-agent/lambda-agent/internal/ssmlocal"
	"github.com/lambda-agent/lambda-agent/internal/testkit"
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
	fn := lambdalocal.NewServer()
	t.Cleanup(fn.Close)
	fn.Register("orders", orders)
	params := ssmlocal.NewServer()
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
	params := ssmlocal.NewServer()
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
