package app_test

import (
	"encoding/json"
	"maps"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/lambda-agent/lambda-agent/internal/testkit"
	"github.com/lambda-agent/lambda-agent/internal/testkit/conversetest"
	"github.com/lambda-agent/lambda-agent/internal/turn"
)

// chat posts a chat turn and returns its answer, failing t unless it is a
// 200.
func chat(t *testing.T, s *testkit.Stack, body string) turn.ChatAnswer {
	t.Helper()
	r := httptest.NewRequest(http.MethodPost, "/chat", strings.NewReader(body))
	r.Header.Set("Content-Type", "application/json")
	w := s.Serve(r)
	if w.Code != http.StatusOK {
		t.Fatalf("%d %s", w.Code, w.Body)
	}
	var a turn.ChatAnswer
	if err := json.Unmarshal(w.Body.Bytes(), &a); err != nil {
		t.Fatal(err)
	}
	return a
}

// systemIs says whether req's system prompt is prompt.
func systemIs(req *conversetest.Request, prompt string) bool {
	return len(req.System) > 0 && req.System[0].Text == prompt
}

// TestSubAgentCallsItsModel: a sub-agent with a model_id calls that model,
// with the guardrail and the answers' settings the main agent's calls
// have, retried as they are; one without calls MODEL_ID. Every agent's
// cost is estimated at MODEL_ID's prices, and its metrics line has
// MODEL_ID for Model, as docs/subagents.md says.
func TestSubAgentCallsItsModel(t *testing.T) {
	const lite = "amazon.nova-lite-v1:0"
	var metrics testkit.Buffer
	throttled := false
	s := testkit.Start(t, testkit.Options{Metrics: &metrics, Env: map[string]string{
		"AWS_REGION": "us-east-1", "ADDITIONAL_MODEL_ARNS": "arn:aws:bedrock:us-east-1::foundation-model/" + lite,
		"GUARDRAIL_ID": "g1", "GUARDRAIL_VERSION": "1", "MAX_TOKENS": "700", "TEMPERATURE": "0.25", "MODEL_PRICES": `{"input":3,"output":15}`,
		"AGENTS": `[{"name":"cheap","description":"Cheap work.","system_prompt":"You are cheap.","model_id":"` + lite + `"},
			{"name":"same","description":"Other work.","system_prompt":"You are the same.","tools":[]}]`,
	}})
	s.Model.Responder = func(req *conversetest.Request) conversetest.Reply {
		switch {
		case systemIs(req, "You are cheap.") && !throttled:
			throttled = true
			return conversetest.Throttle()
		case systemIs(req, "You are cheap."):
			return conversetest.Text("cheap answer").WithUsage(100, 10)
		case systemIs(req, "You are the same."):
			return conversetest.Text("same answer")
		case len(req.Messages) == 1:
			return conversetest.ToolUse("d1", "cheap", map[string]string{"task": "a"}).WithToolUse("d2", "same", map[string]string{"task": "b"})
		}
		return conversetest.Text("done")
	}
	a := chat(t, s, `{"session_id":"models","message":"delegate"}`)
	models := map[string]string{}
	for _, req := range s.Model.Requests() {
		who := "main"
		if systemIs(req, "You are cheap.") {
			who = "cheap"
		} else if systemIs(req, "You are the same.") {
			who = "same"
		}
		models[who] = req.ModelID
		if ic := req.InferenceConfig; req.GuardrailConfig == nil || ic == nil || ic.MaxTokens == nil || *ic.MaxTokens != 700 || ic.Temperature == nil || *ic.Temperature != 0.25 {
			t.Errorf("%s's request: guardrail %v, inference %+v; want both the main agent's", who, req.GuardrailConfig, req.InferenceConfig)
		}
	}
	if want := map[string]string{"main": "test-model", "cheap": lite, "same": "test-model"}; !maps.Equal(models, want) {
		t.Errorf("models %v, want %v", models, want)
	}
	if c := a.Agents["cheap"].EstimatedCostUSD; c == nil || *c != (100*3+10*15)/1e6 {
		t.Errorf("the cheap agent's cost %v, want MODEL_ID's prices", c)
	}
	if a.Metrics.ModelCalls != 4 || !strings.Contains(a.Text, "done") {
		t.Errorf("%d model calls, answer %q; want the main agent's 2, and each sub-agent's 1 after the cheap one's retry", a.Metrics.ModelCalls, a.Text)
	}
	found := false
	for line := range strings.Lines(metrics.String()) {
		if strings.Contains(line, `"AgentName":"cheap"`) {
			found = strings.Contains(line, `"Model":"test-model"`)
		}
	}
	if !found {
		t.Errorf("no metrics line of the cheap agent with Model test-model:\n%s", metrics.String())
	}
}
