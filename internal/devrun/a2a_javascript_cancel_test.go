package devrun_test

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/lambda-agent/lambda-agent/internal/testkit/a2aclient"
)

// TestA2ACancelWithTheJavaScriptClient: the official JavaScript SDK's
// client cancels a task of the local run that waits for an approval and
// reads it back canceled; and each call the server refuses reaches the
// SDK as the A2A error it is, with its JSON-RPC code and, in its data,
// the HTTP API's code.
func TestA2ACancelWithTheJavaScriptClient(t *testing.T) {
	url := start(t, map[string]string{"APPROVAL_TOOLS": "calculator"})
	res := a2aclient.RunCancel(t, url)
	if res.Error != "" {
		t.Fatalf("the client failed: %s", res.Error)
	}
	if res.Cancel == nil {
		t.Fatalf("the client saw no cancel: %+v", res)
	}
	if c := res.Cancel; c.Paused != "TASK_STATE_INPUT_REQUIRED" || c.Canceled != "TASK_STATE_CANCELED" || c.Got != "TASK_STATE_CANCELED" {
		t.Errorf("cancel: %+v", c)
	}
	refused := func(name string, code int, ours string) a2aclient.Refusal {
		return a2aclient.Refusal{Class: "JsonRpc" + name, Name: name, EnvelopeCode: code, Code: ours}
	}
	want := map[string]a2aclient.Refusal{
		"cancelAgain":     refused("TaskNotCancelableError", -32002, "not_cancelable"),
		"cancelCompleted": refused("TaskNotCancelableError", -32002, "not_cancelable"),
		"getUnknown":      refused("TaskNotFoundError", -32001, "not_found"),
		// The SDK names JSON-RPC's InvalidParams (-32602) RequestMalformedError.
		"agentRole":         refused("RequestMalformedError", -32602, "invalid_request"),
		"urlPart":           refused("ContentTypeNotSupportedError", -32005, "invalid_content"),
		"returnImmediately": refused("UnsupportedOperationError", -32004, "unsupported"),
	}
	if diff := cmp.Diff(want, res.Cancel.Refusals); diff != "" {
		t.Errorf("refusals (-want +got):\n%s", diff)
	}
}
