package telemetry_test

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/lambda-agent/lambda-agent/internal/telemetry"
	"github.com/lambda-agent/lambda-agent/internal/testkit"
	"github.com/lambda-agent/lambda-agent/internal/testkit/conversetest"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
)

// TestTelemetryOfTheEdges covers the requests whose telemetry is easy to
// get wrong: a tool the model made up, a path that matches no route, a
// stream that fails after it began, and a resume whose approved tool ran.
func TestTelemetryOfTheEdges(t *testing.T) {
	var metrics testkit.Buffer
	c := telemetry.StartCollector(t, telemetry.CollectorOptions{})
	s := testkit.Start(t, testkit.Options{Metrics: &metrics, Env: map[string]string{
		"OTEL_EXPORTER_OTLP_ENDPOINT": c.URL, "TOOLS": "calculator", "APPROVAL_TOOLS": "calculator",
	}})
	lastLine := func() emfLine {
		t.Helper()
		var last emfLine
		for _, l := range parseEMFLines(t, []byte(metrics.String())) {
			if l.metric("Requests") != nil {
				last = l
			}
		}
		return last
	}

	t.Run("a made-up tool", func(t *testing.T) {
		c.Reset()
		s.Model.Enqueue(conversetest.ToolUse("u1", "drop_tables", map[string]any{}), conversetest.Text("never mind"))
		if w := postChat(t.Context(), s, `{"session_id":"edges-1","message":"go"}`); w.Code != http.StatusOK {
			t.Fatalf("%d %s", w.Code, w.Body)
		}
		tr := oneTrace(t, c.Spans())
		if len(tr.named("execute_tool")) != 1 || len(tr.named("execute_tool drop_tables")) != 0 {
			t.Errorf("the made-up tool's span is not plain execute_tool: %v", tr.tree())
		}
		if strings.Contains(metrics.String(), "drop_tables") {
			t.Errorf("the made-up tool's name reached the metrics:\n%s", metrics.String())
		}
	})

	t.Run("no route", func(t *testing.T) {
		c.Reset()
		w := s.Serve(httptest.NewRequestWithContext(t.Context(), http.MethodGet, "/a/path/of/the/callers/choosing", nil))
		if w.Code != http.StatusNotFound {
			t.Fatalf("%d %s", w.Code, w.Body)
		}
		tr := oneTrace(t, c.Spans())
		if tr.root.Name != "GET" {
			t.Errorf("the span is named %q, want GET", tr.root.Name)
		}
		if _, ok := attrs(tr.root.Attributes)["http.route"]; ok {
			t.Error("an unmatched request has an http.route")
		}
		if l := lastLine(); l.root["route"] != "unmatched" || l.root["ErrorCode"] != "no_route" {
			t.Errorf("the metrics line: %v", l.root)
		}
	})

	t.Run("a stream that fails after it began", func(t *testing.T) {
		c.Reset()
		s.Model.Enqueue(conversetest.AccessDenied())
		r := httptest.NewRequestWithContext(t.Context(), http.MethodPost, "/chat/stream", strings.NewReader(`{"session_id":"edges-2","message":"hi"}`))
		r.Header.Set("Content-Type", "application/json")
		w := s.Serve(r)
		if w.Code != http.StatusOK || !strings.Contains(w.Body.String(), "event: error") {
			t.Fatalf("%d %s", w.Code, w.Body)
		}
		l := lastLine()
		if l.metric("ServerErrors")[0] != 1 || l.root["status"] != 500.0 {
			t.Errorf("the failed stream's line counts no server error: %v", l.root)
		}
		if got := oneTrace(t, c.Spans()).root; got.GetStatus().GetCode() != tracepb.Status_STATUS_CODE_ERROR {
			t.Errorf("the failed stream's span status %v", got.GetStatus())
		}
	})

	t.Run("a direct tool call", func(t *testing.T) {
		c.Reset()
		r := httptest.NewRequestWithContext(t.Context(), http.MethodPost, "/sessions/edges-4/tools/calculator", strings.NewReader(`{"input":{"expression":"1+2"}}`))
		r.Header.Set("Content-Type", "application/json")
		if w := s.Serve(r); w.Code != http.StatusOK {
			t.Fatalf("%d %s", w.Code, w.Body)
		}
		l := lastLine()
		if l.metric("Turns") != nil || l.metric("ToolCalls")[0] != 1 || l.metric("ModelCalls")[0] != 0 {
			t.Errorf("the direct call's line: %v", l.root)
		}
		tr := oneTrace(t, c.Spans())
		if tr.root.Name != "POST /sessions/{sessionId}/tools/{name}" || len(tr.named("execute_tool calculator")) != 1 {
			t.Errorf("the direct call's trace: %v", tr.tree())
		}
		if _, ok := attrs(tr.root.Attributes)["gen_ai.operation.name"]; ok {
			t.Error("the direct call's span is an agent invocation")
		}
	})

	t.Run("a resume whose approved tool ran", func(t *testing.T) {
		s.Model.Enqueue(conversetest.ToolUse("calc-1", "calculator", map[string]any{"expression": "2+2"}), conversetest.Text("4"))
		if w := postChat(t.Context(), s, `{"session_id":"edges-3","message":"2+2?"}`); w.Code != http.StatusOK || !strings.Contains(w.Body.String(), "interrupt") {
			t.Fatalf("%d %s", w.Code, w.Body)
		}
		mark := len(metrics.String())
		if w := postChat(t.Context(), s, `{"session_id":"edges-3","responses":[{"interrupt_id":"calc-1","approve":true}]}`); w.Code != http.StatusOK {
			t.Fatalf("%d %s", w.Code, w.Body)
		}
		var tool emfLine
		for _, l := range parseEMFLines(t, []byte(metrics.String()[mark:])) {
			if l.root["ToolName"] == "calculator" {
				tool = l
			}
		}
		if got := tool.metric("ToolCalls"); len(got) != 1 || got[0] != 1 {
			t.Errorf("the approved run's tool line: %v\n%s", tool.root, metrics.String())
		}
	})
}
