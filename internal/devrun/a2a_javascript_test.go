package devrun_test

import (
	"strings"
	"testing"

	"github.com/lambda-agent/lambda-agent/internal/testkit/a2aclient"
)

// TestA2AWithTheJavaScriptClient: the official JavaScript SDK's client
// (@a2a-js/sdk) finds the local run by its card, chooses its 1.0
// interface, and holds tasks with it: a blocking send, a streamed one in
// the same context, an approval through TASK_STATE_INPUT_REQUIRED, read
// again with getTask and answered with a data part of responses.
func TestA2AWithTheJavaScriptClient(t *testing.T) {
	url := start(t, map[string]string{"APPROVAL_TOOLS": "calculator"})
	res := a2aclient.Run(t, url)
	if res.Error != "" {
		t.Fatalf("the client failed: %s", res.Error)
	}
	if res.ProtocolVersion != "1.0" {
		t.Errorf("the client chose protocol %q", res.ProtocolVersion)
	}
	if res.Blocking.State != "TASK_STATE_COMPLETED" || !strings.Contains(res.Blocking.Answer, "Hello from JavaScript") || res.Blocking.ContextID == "" {
		t.Errorf("blocking: %+v", res.Blocking)
	}
	if k := res.Streamed.Kinds; len(k) < 3 || k[0] != "task" || k[len(k)-1] != "statusUpdate" || res.Streamed.Final != "TASK_STATE_COMPLETED" || !strings.Contains(res.Streamed.Text, "And streamed") {
		t.Errorf("streamed: %+v", res.Streamed)
	}
	if res.Paused.State != "TASK_STATE_INPUT_REQUIRED" || len(res.Paused.Interrupts) != 1 || res.Paused.Interrupts[0]["tool"] != "calculator" || res.Got.State != "TASK_STATE_INPUT_REQUIRED" {
		t.Errorf("paused: %+v, got %+v", res.Paused, res.Got)
	}
	if res.Answered.State != "TASK_STATE_COMPLETED" || !strings.Contains(res.Answered.Answer, "144") || !res.Answered.SameTask {
		t.Errorf("answered: %+v", res.Answered)
	}
}
