package agent_test

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/lambda-agent/lambda-agent/internal/agent"
	"github.com/lambda-agent/lambda-agent/internal/testkit/conversetest"
	"github.com/lambda-agent/lambda-agent/internal/tools"
)

// TestCallToolRecordsAValidHistory checks the four messages of a recorded
// direct call, after a history that ends with an unanswered user message,
// which first gets the assistant's note so that the roles alternate.
func TestCallToolRecordsAValidHistory(t *testing.T) {
	s := newServer(t)
	var approved []bool
	a := newAgent(t, s, agent.Config{
		Tools:       []agent.Tool{tools.Calculator()},
		DirectTools: []string{"calculator"},
		Hooks: agent.Hooks{BeforeToolCall: []func(context.Context, *agent.BeforeToolCallEvent){
			func(_ context.Context, e *agent.BeforeToolCallEvent) { approved = append(approved, e.Approved) },
		}},
	})
	conv := &agent.Conversation{Messages: []agent.Message{agent.UserText("hello?")}}
	res, err := a.CallTool(t.Context(), conv, agent.DirectCall{Name: "calculator", Input: json.RawMessage(`{"expression":"2*21"}`), Record: true})
	if err != nil {
		t.Fatal(err)
	}
	var roles []agent.Role
	for _, m := range res.Messages {
		roles = append(roles, m.Role)
	}
	want := []agent.Role{agent.RoleAssistant, agent.RoleUser, agent.RoleAssistant, agent.RoleUser, agent.RoleAssistant}
	if diff := cmp.Diff(want, roles); diff != "" {
		t.Errorf("roles (-want +got):\n%s", diff)
	}
	if u := res.Messages[2].Content[0].ToolUse; u == nil || u.ToolUseID != res.Use.ToolUseID {
		t.Errorf("the assistant's message is not the tool use: %+v", res.Messages[2])
	}
	if r := res.Messages[3].Content[0].ToolResult; r == nil || r.ToolUseID != res.Use.ToolUseID || r.Status != agent.ToolSuccess {
		t.Errorf("the user's message is not the result: %+v", res.Messages[3])
	}
	if !strings.Contains(res.Messages[1].Content[0].Text, `calculator`) || !strings.Contains(res.Messages[1].Content[0].Text, `{"expression":"2*21"}`) {
		t.Errorf("the note of the call: %q", res.Messages[1].Content[0].Text)
	}
	if diff := cmp.Diff([]bool{true}, approved); diff != "" {
		t.Errorf("the hook saw Approved (-want +got):\n%s", diff)
	}
	if s.Calls() != 0 || res.Metrics.ModelCalls != 0 || res.Metrics.ToolCalls != 1 {
		t.Errorf("%d model calls, metrics %+v", s.Calls(), res.Metrics)
	}
	if len(conv.Messages) != 1 {
		t.Error("CallTool changed the conversation it was given")
	}
	// The history it leaves is one Bedrock takes: the next turn runs on
	// the strict stand-in.
	next := &agent.Conversation{Messages: append(conv.Messages, res.Messages...)}
	s.Enqueue(conversetest.Text("fine"))
	if _, err := a.Run(t.Context(), next, input("and now?")); err != nil {
		t.Errorf("the turn after the call: %v", err)
	}
}

// TestCallToolFailures: a tool that fails or takes too long gives an error
// result, as it would to the model; an unknown tool and a refused input
// are errors, and nothing runs.
func TestCallToolFailures(t *testing.T) {
	s := newServer(t)
	stuck, err := agent.NewFuncTool("stuck", "Never ends.", func(ctx context.Context, _ *agent.ToolCall, _ struct{}) (string, error) {
		<-ctx.Done()
		return "", ctx.Err()
	})
	if err != nil {
		t.Fatal(err)
	}
	a := newAgent(t, s, agent.Config{Tools: []agent.Tool{tools.Calculator(), tools.CurrentTime(time.Now), stuck}, DirectTools: []string{"calculator", "stuck"}, ToolTimeout: 20 * time.Millisecond})
	res, err := a.CallTool(t.Context(), &agent.Conversation{}, agent.DirectCall{Name: "stuck"})
	if err != nil || res.Output.Status != agent.ToolError || !strings.Contains(res.Output.Content[0].Text, "did not finish") || len(res.Messages) != 0 {
		t.Errorf("a stuck tool: %+v, %v", res, err)
	}
	for _, name := range []string{"shell", "current_time"} { // unknown; not among DirectTools
		if _, err := a.CallTool(t.Context(), &agent.Conversation{}, agent.DirectCall{Name: name}); !errors.Is(err, agent.ErrUnknownTool) {
			t.Errorf("%s: %v", name, err)
		}
	}
	var ie *agent.ToolInputError
	if _, err := a.CallTool(t.Context(), &agent.Conversation{}, agent.DirectCall{Name: "calculator", Input: json.RawMessage(`{"expression":7}`)}); !errors.As(err, &ie) || len(ie.Problems) == 0 {
		t.Errorf("a refused input: %v", err)
	}
}

// TestCallToolAfterAnExpiredInterrupt: a session whose interrupt expired
// ends with the paused answer's tool uses, and keeps the results of the
// tools that ran. A recorded call answers those uses first, with the kept
// result and the expiry; an unrecorded one keeps them for the next turn.
func TestCallToolAfterAnExpiredInterrupt(t *testing.T) {
	s := newServer(t)
	a := newAgent(t, s, agent.Config{Tools: []agent.Tool{tools.Calculator()}, DirectTools: []string{"calculator"}})
	paused := agent.Message{Role: agent.RoleAssistant, Content: []agent.ContentBlock{
		{ToolUse: &agent.ToolUseBlock{ToolUseID: "ran", Name: "calculator", Input: json.RawMessage(`{"expression":"1+1"}`)}},
		{ToolUse: &agent.ToolUseBlock{ToolUseID: "held", Name: "calculator", Input: json.RawMessage(`{"expression":"2+2"}`)}},
	}}
	pending := &agent.Pending{
		Interrupts: []agent.Interrupt{{ID: "held", Kind: agent.KindApproval, Tool: "calculator", ExpiresAt: time.Now().Add(-time.Hour)}},
		Results:    []*agent.ToolResultBlock{agent.TextResult("ran", agent.ToolSuccess, "2")},
	}
	conv := &agent.Conversation{Messages: []agent.Message{agent.UserText("sums"), paused}, Pending: pending}

	kept, err := a.CallTool(t.Context(), conv, agent.DirectCall{Name: "calculator", Input: json.RawMessage(`{"expression":"3+3"}`)})
	if err != nil {
		t.Fatal(err)
	}
	if len(kept.Messages) != 0 || kept.Pending != pending {
		t.Errorf("an unrecorded call: %d messages, pending %v", len(kept.Messages), kept.Pending)
	}

	res, err := a.CallTool(t.Context(), conv, agent.DirectCall{Name: "calculator", Input: json.RawMessage(`{"expression":"3+3"}`), Record: true})
	if err != nil {
		t.Fatal(err)
	}
	first := res.Messages[0]
	if first.Role != agent.RoleUser || len(first.Content) != 3 {
		t.Fatalf("the first message: %+v", first)
	}
	if r := first.Content[0].ToolResult; r == nil || r.ToolUseID != "ran" || r.Content[0].Text != "2" {
		t.Errorf("the kept result: %+v", first.Content[0])
	}
	if r := first.Content[1].ToolResult; r == nil || r.ToolUseID != "held" || r.Status != agent.ToolError || !strings.Contains(r.Content[0].Text, "expired") {
		t.Errorf("the expired use's result: %+v", first.Content[1])
	}
	if res.Pending != nil {
		t.Errorf("a recorded call left pending %v", res.Pending)
	}
	// Bedrock takes the history it leaves.
	s.Enqueue(conversetest.Text("fine"))
	next := &agent.Conversation{Messages: append(slices.Clone(conv.Messages), res.Messages...)}
	if _, err := a.Run(t.Context(), next, input("and now?")); err != nil {
		t.Errorf("the turn after the call: %v", err)
	}
}
