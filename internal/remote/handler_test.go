package remote_test

import (
	"encoding/json"
	"fmt"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/lambda-agent/lambda-agent/internal/conversetest"
	"github.com/lambda-agent/lambda-agent/internal/mcptest"
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
