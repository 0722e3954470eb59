package agent_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/lambda-agent/lambda-agent/internal/agent"
	"github.com/lambda-agent/lambda-agent/internal/testkit/conversetest"
)

// TestCancelEndsAPausedTurn: Cancel answers the paused answer's uses, the
// one that ran with its kept result and the one that waits with a
// cancellation, ends the turn without a model call, and leaves a history
// the next turn sends to the strict stand-in as it is.
func TestCancelEndsAPausedTurn(t *testing.T) {
	s := newServer(t)
	s.Enqueue(
		conversetest.ToolUse("u1", "refund", map[string]int{"n": 1}).WithToolUse("u2", "lookup", map[string]int{"n": 2}),
		conversetest.Text("Hello again."),
	)
	var refund, lookup counter
	a := newAgent(t, s, agent.Config{Tools: []agent.Tool{agent.RequireApproval(refund.tool(t, "refund")), lookup.tool(t, "lookup")}})
	conv := &agent.Conversation{}
	if _, err := a.Cancel(t.Context(), conv); !errors.Is(err, agent.ErrNothingPending) {
		t.Fatalf("Cancel of a new conversation: %v; want ErrNothingPending", err)
	}
	res, err := a.Run(t.Context(), conv, input("refund"))
	if err != nil {
		t.Fatal(err)
	}
	conv = committed(t, conv, res)
	canceled, err := a.Cancel(t.Context(), conv)
	if err != nil {
		t.Fatal(err)
	}
	if s.Calls() != 1 || refund.runs.Load() != 0 || lookup.runs.Load() != 1 {
		t.Errorf("%d model calls, refund ran %d, lookup %d; want 1, 0, 1", s.Calls(), refund.runs.Load(), lookup.runs.Load())
	}
	if len(canceled.Messages) != 2 || canceled.Pending != nil || canceled.StopReason != agent.StopEndTurn {
		t.Fatalf("messages %+v, pending %+v, stop %s", canceled.Messages, canceled.Pending, canceled.StopReason)
	}
	results := canceled.Messages[0].Content
	if len(results) != 2 || !strings.Contains(results[0].ToolResult.Content[0].Text, "canceled") || results[0].ToolResult.Status != agent.ToolError ||
		results[1].ToolResult.Content[0].Text != "lookup ran" {
		t.Errorf("results %+v", results)
	}
	if last := canceled.Messages[1]; !agent.Canceled(last) || agent.Canceled(agent.AssistantText("Hello again.")) {
		t.Errorf("Canceled(%+v) is false, or true of another message", last)
	}
	conv = committed(t, conv, canceled)
	if _, err := a.Cancel(t.Context(), conv); !errors.Is(err, agent.ErrNothingPending) {
		t.Errorf("a second Cancel: %v; want ErrNothingPending", err)
	}
	next, err := a.Run(t.Context(), conv, input("hello"))
	if err != nil {
		t.Fatal(err)
	}
	if next.Text != "Hello again." {
		t.Errorf("next turn %q", next.Text)
	}
	committed(t, conv, next)
}
