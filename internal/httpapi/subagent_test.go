package httpapi_test

import (
	"encoding/json"
	"math"
	"net/http"
	"strings"
	"testing"

	"github.com/lambda-agent/lambda-agent/internal/agent"
	"github.com/lambda-agent/lambda-agent/internal/testkit"
	"github.com/lambda-agent/lambda-agent/internal/testkit/conversetest"
	"github.com/lambda-agent/lambda-agent/internal/turn"
)

// TestChatDelegatesToASubAgent: with AGENTS set, POST /chat's turn hands
// a task to a sub-agent, whose answer is the tool's result; the answer
// reports usage by agent, the total counts both, and the session holds
// the main agent's conversation, valid for Bedrock.
func TestChatDelegatesToASubAgent(t *testing.T) {
	s := testkit.Start(t, testkit.Options{Env: map[string]string{
		"TOOLS":        "calculator",
		"MODEL_PRICES": `{"input":3,"output":15}`,
		"GUARDRAIL_ID": "g1", "GUARDRAIL_VERSION": "1",
		"AGENTS": `[{"name":"researcher","description":"Researches a question.","system_prompt":"You research.","tools":["calculator"]}]`,
	}})
	s.Model.Responder = func(req *conversetest.Request) conversetest.Reply {
		switch {
		case len(req.System) > 0 && req.System[0].Text == "You research.":
			return conversetest.Text("Forty-two.").WithUsage(30, 3)
		case len(req.Messages) == 1:
			return conversetest.ToolUse("d1", "researcher", map[string]string{"task": "What is 6*7?"}).WithUsage(20, 2)
		}
		return conversetest.Text("The researcher says forty-two.").WithUsage(25, 4)
	}
	w := postJSON(t, s, "/chat", `{"session_id":"deleg","message":"Ask the researcher."}`)
	if w.Code != http.StatusOK {
		t.Fatalf("%d %s", w.Code, w.Body)
	}
	var answer turn.ChatAnswer
	if err := json.Unmarshal(w.Body.Bytes(), &answer); err != nil {
		t.Fatal(err)
	}
	if answer.Text != "The researcher says forty-two." || answer.Usage.InputTokens != 75 || answer.Metrics.ModelCalls != 3 {
		t.Errorf("answer %q, usage %+v, %d model calls", answer.Text, answer.Usage, answer.Metrics.ModelCalls)
	}
	if got := answer.Agents; got["main"].Usage.InputTokens != 45 || got["researcher"].Usage.InputTokens != 30 || len(got) != 2 {
		t.Errorf("usage by agent %+v", got)
	}
	main, sub, total := answer.Agents["main"].EstimatedCostUSD, answer.Agents["researcher"].EstimatedCostUSD, answer.Metrics.EstimatedCostUSD
	if main == nil || sub == nil || total == nil || math.Abs(*main+*sub-*total) > 1e-12 || math.Abs(*sub-(30*3+3*15)/1e6) > 1e-12 {
		t.Errorf("costs: main %v, researcher %v, turn %v", main, sub, total)
	}
	// The sub-agent calls the same model, with the guardrail.
	if sub := s.Model.Requests()[1]; sub.ModelID != "test-model" || sub.GuardrailConfig == nil || len(sub.Messages) != 1 {
		t.Errorf("the sub-agent's request: model %s, guardrail %v, %d messages", sub.ModelID, sub.GuardrailConfig, len(sub.Messages))
	}
	stored := transcriptOf(t, s, "", "deleg")
	if err := agent.ValidateHistory(stored); err != nil || len(stored) != 4 {
		t.Fatalf("%d messages stored: %v", len(stored), err)
	}
	if r := stored[2].Content[0].ToolResult; r == nil || r.Content[0].Text != "Forty-two." {
		t.Errorf("the delegation's result: %+v", stored[2])
	}
	// A turn that does not delegate has no usage by agent.
	s.Model.Enqueue(conversetest.Text("Hi."))
	w = postJSON(t, s, "/chat", `{"message":"Hello"}`)
	if w.Code != http.StatusOK || strings.Contains(w.Body.String(), `"agents"`) {
		t.Errorf("a turn without delegation: %d %s", w.Code, w.Body)
	}
}
