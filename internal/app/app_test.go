package app_test

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/lambda-agent/lambda-agent/internal/testkit"
	"github.com/lambda-agent/lambda-agent/internal/testkit/conversetest"
)

// A tool that fails does not fail the turn: the model gets the error. The
// operator gets a line that names the tool.
func TestFailedToolRunsAreLogged(t *testing.T) {
	s := testkit.Start(t, testkit.Options{Env: map[string]string{"TOOLS": "calculator"}})
	s.Model.Enqueue(
		conversetest.ToolUse("ok-1", "calculator", map[string]string{"expression": "2+2"}).
			WithToolUse("bad-1", "calculator", map[string]string{"expression": "2+"}).
			WithToolUse("none-1", "weather", map[string]string{"city": "Lisbon"}),
		conversetest.Text("done"),
	)
	r := httptest.NewRequest(http.MethodPost, "/chat", strings.NewReader(`{"session_id":"tools","message":"go"}`))
	if w := s.Serve(testkit.As(r, "alice")); w.Code != http.StatusOK {
		t.Fatalf("status %d: %s", w.Code, w.Body)
	}

	failed := map[string]map[string]any{}
	for line := range strings.Lines(s.Logs.String()) {
		var l map[string]any
		if err := json.Unmarshal([]byte(line), &l); err != nil {
			t.Fatalf("a log line is not JSON: %q", line)
		}
		if l["msg"] == "tool failed" {
			failed[l["tool_use_id"].(string)] = l
		}
	}
	if len(failed) != 2 || failed["bad-1"] == nil || failed["none-1"] == nil {
		t.Fatalf("want lines for bad-1 and none-1 only, got %v", failed)
	}
	if l := failed["bad-1"]; l["level"] != "WARN" || l["tool"] != "calculator" || !strings.Contains(l["error"].(string), "The tool failed") {
		t.Errorf("the calculator's line = %v", l)
	}
	if l := failed["none-1"]; l["tool"] != "weather" || !strings.Contains(l["error"].(string), `no tool named "weather"`) {
		t.Errorf("the unknown tool's line = %v", l)
	}
}

// A retried model call does not fail the turn, but it makes it slower and
// dearer: the operator gets a warning per retry, with its cause.
func TestRetriedModelCallsAreLogged(t *testing.T) {
	s := testkit.Start(t, testkit.Options{})
	s.Model.Enqueue(conversetest.Throttle(), conversetest.Throttle(), conversetest.Text("at last"))
	r := httptest.NewRequest(http.MethodPost, "/chat", strings.NewReader(`{"session_id":"retries","message":"go"}`))
	if w := s.Serve(r); w.Code != http.StatusOK {
		t.Fatalf("status %d: %s", w.Code, w.Body)
	}
	var retries []map[string]any
	for line := range strings.Lines(s.Logs.String()) {
		var l map[string]any
		if err := json.Unmarshal([]byte(line), &l); err != nil {
			t.Fatalf("a log line is not JSON: %q", line)
		}
		if l["msg"] == "model call retried" {
			retries = append(retries, l)
		}
	}
	if len(retries) != 2 {
		t.Fatalf("%d retry lines, want 2:\n%s", len(retries), s.Logs)
	}
	for i, l := range retries {
		if l["level"] != "WARN" || l["attempt"] != float64(i+1) || l["kind"] != "throttled" || l["code"] != "ThrottlingException" || l["wait_ms"] == nil {
			t.Errorf("retry line %d = %v", i, l)
		}
	}
}
