package agent_test

import (
	"context"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/lambda-agent/lambda-agent/internal/agent"
	"github.com/lambda-agent/lambda-agent/internal/testkit/conversetest"
)

// pathKey keys the calls a context was derived through, such as "/d1/s1".
type pathKey struct{}

func pathOf(ctx context.Context) string { s, _ := ctx.Value(pathKey{}).(string); return s }

// TestToolContext: the ToolContext callbacks give each call that goes
// ahead, in parallel with others, the context its tool runs with and its
// AfterToolCall callbacks get, in the order they were registered; a
// sub-agent's calls run within the context of the delegation that started
// it. A call held back for a person has none, a cancelled call or one of
// an unknown tool has one, and only a delegation that runs says so.
func TestToolContext(t *testing.T) {
	var mu sync.Mutex
	ran, after, delegation := map[string]string{}, map[string]string{}, map[string]bool{}
	var unknown []string
	probe, err := agent.NewFuncTool("probe", "Reports its context.", func(ctx context.Context, call *agent.ToolCall, _ struct{}) (string, error) {
		mu.Lock()
		defer mu.Unlock()
		ran[call.ID] = pathOf(ctx)
		return "ok", nil
	})
	if err != nil {
		t.Fatal(err)
	}
	hooks := agent.Hooks{
		BeforeToolCall: []func(context.Context, *agent.BeforeToolCallEvent){
			func(_ context.Context, e *agent.BeforeToolCallEvent) {
				switch e.Use.ToolUseID {
				case "c1":
					e.Cancel = "not now"
				case "h1":
					e.Interrupt = &agent.InterruptRequest{Reason: "ask first"}
				}
			},
		},
		ToolContext: []func(context.Context, *agent.ToolContextEvent) context.Context{
			func(ctx context.Context, e *agent.ToolContextEvent) context.Context {
				mu.Lock()
				defer mu.Unlock()
				delegation[e.Use.ToolUseID] = e.Delegation
				if e.Tool == nil {
					unknown = append(unknown, e.Use.ToolUseID)
				}
				return context.WithValue(ctx, pathKey{}, pathOf(ctx)+"/"+e.Use.ToolUseID)
			},
			func(ctx context.Context, _ *agent.ToolContextEvent) context.Context {
				return context.WithValue(ctx, pathKey{}, pathOf(ctx)+"'") // after the first
			},
			func(context.Context, *agent.ToolContextEvent) context.Context { return nil }, // keeps it
		},
		AfterToolCall: []func(context.Context, *agent.AfterToolCallEvent){
			func(ctx context.Context, e *agent.AfterToolCallEvent) {
				mu.Lock()
				defer mu.Unlock()
				after[e.Use.ToolUseID] = pathOf(ctx)
			},
		},
	}
	s := newServer(t)
	s.Responder = func(req *conversetest.Request) conversetest.Reply {
		switch {
		case system(req) == "You research." && len(req.Messages) == 1:
			return conversetest.ToolUse("s1", "probe", map[string]any{})
		case system(req) == "You research.":
			return conversetest.Text("Researched.")
		default:
			return conversetest.ToolUse("p1", "probe", map[string]any{}).
				WithToolUse("d1", "researcher", map[string]string{"task": "Research."}).
				WithToolUse("c1", "researcher", map[string]string{"task": "Research again."}).
				WithToolUse("x1", "nosuch", map[string]any{}).
				WithToolUse("h1", "probe", map[string]any{})
		}
	}
	sub := newAgent(t, s, agent.Config{System: "You research.", Tools: []agent.Tool{probe}, Hooks: hooks})
	a := newAgent(t, s, agent.Config{System: "You lead.", Tools: []agent.Tool{probe, agent.Delegate("researcher", "Researches.", sub)}, Hooks: hooks})
	res, err := a.Run(t.Context(), &agent.Conversation{}, input("go"))
	if err != nil {
		t.Fatal(err)
	}
	if res.StopReason != agent.StopInterrupt {
		t.Fatalf("stop reason %s, want the interrupt of h1", res.StopReason)
	}
	if diff := cmp.Diff(map[string]string{"p1": "/p1'", "s1": "/d1'/s1'"}, ran); diff != "" {
		t.Errorf("the contexts the tools ran with (-want +got):\n%s", diff)
	}
	wantAfter := map[string]string{"p1": "/p1'", "d1": "/d1'", "c1": "/c1'", "x1": "/x1'", "s1": "/d1'/s1'"}
	if diff := cmp.Diff(wantAfter, after); diff != "" {
		t.Errorf("the contexts the AfterToolCall callbacks got (-want +got):\n%s", diff)
	}
	wantDelegation := map[string]bool{"p1": false, "d1": true, "c1": false, "x1": false, "s1": false}
	if diff := cmp.Diff(wantDelegation, delegation); diff != "" {
		t.Errorf("Delegation of the calls that went ahead (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"x1"}, unknown); diff != "" {
		t.Errorf("calls with no tool (-want +got):\n%s", diff)
	}
}
