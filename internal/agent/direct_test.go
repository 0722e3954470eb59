package agent_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/lambda-agent/lambda-agent/internal/agent"
	"github.com/lambda-agent/lambda-agent/internal/conversetest"
	"github.com/lambda-agent/lambda-agent/internal/tools"
)

// TestCallToolRecordsAValidHistory checks the four messages of a recorded
// direct call, after a history that ends with an unanswered user message,
// which first gets the assistant's note so that the roles alternate.
func TestCallToolRecordsAValidHistory(t *testing.T) {
	s := newServer(t)
	var approved []bool
	a := newAgent(t, s, agent.Config{
		Tools: []agent.Tool{tools.Calculator()},
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
	a := newAgent(t, s, agent.Config{Tools: []agent.Tool{tools.Calculator(), stuck}, ToolTimeout: 20 * time.Millisecond})
	res, err := a.CallTool(t.Context(), &agent.Conversation{}, agent.DirectCall{Name: "stuck"})
	if err != nil || res.Output.Status != agent.ToolError || !strings.Contains(res.Output.Content[0].Text, "did not finish") || len(res.Messages) != 0 {
		t.Errorf("a stuck tool: %+v, %v", res, err)
	}
	if _, err := a.CallTool(t.Context(), &agent.Conversation{}, agent.DirectCall{Name: "shell"}); !errors.Is(err, agent.ErrUnknownTool) {
		t.Errorf("an unknown tool: %v", err)
	}
	var ie *agent.ToolInputError
	if _, err := a.CallTool(t.Context(), &agent.Conversation{}, agent.DirectCall{Name: "calculator", Input: json.RawMessage(`{"expression":7}`)}); !errors.As(err, &ie) || len(ie.Problems) == 0 {
		t.Errorf("a refused input: %v", err)
	}
}
