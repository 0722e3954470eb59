package telemetry_test

import (
	"net/http"
	"testing"

	"github.com/lambda-agent/lambda-agent/internal/testkit/conversetest"
)

// TestTraceOfASubAgentWithItsModel: a sub-agent with a model_id has its
// model calls traced under that model's id, as docs/subagents.md says.
func TestTraceOfASubAgentWithItsModel(t *testing.T) {
	const lite = "amazon.nova-lite-v1:0"
	s, c := tracedStack(t, map[string]string{
		"AWS_REGION": "us-east-1", "ADDITIONAL_MODEL_ARNS": "arn:aws:bedrock:*::foundation-model/" + lite,
		"AGENTS": `[{"name":"cheap","description":"Cheap work.","system_prompt":"You are cheap.","tools":[],"model_id":"` + lite + `"}]`,
	})
	s.Model.Enqueue(
		conversetest.ToolUse("d-1", "cheap", map[string]any{"task": "Do it."}),
		conversetest.Text("Done."),
		conversetest.Text("It is done."),
	)
	if w := postChat(t.Context(), s, `{"session_id":"deleg-model","message":"delegate"}`); w.Code != http.StatusOK {
		t.Fatalf("%d %s", w.Code, w.Body)
	}
	tr := oneTrace(t, c.Spans())
	if got := len(tr.named("chat test-model")); got != 2 {
		t.Errorf("%d chat spans of MODEL_ID, want the main agent's 2", got)
	}
	sub := tr.one(t, "chat "+lite)
	if got := attrs(sub.Attributes)["gen_ai.request.model"]; got != lite {
		t.Errorf("the sub-agent's span: gen_ai.request.model = %v, want %s", got, lite)
	}
}
