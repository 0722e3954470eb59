package agent_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/lambda-agent/lambda-agent/internal/agent"
	"github.com/lambda-agent/lambda-agent/internal/testkit/conversetest"
)

func clientTools(t *testing.T, specs ...agent.ToolSpec) *agent.ClientTools {
	t.Helper()
	c, err := agent.NewClientTools(specs)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

var chartSpec = agent.ToolSpec{Name: "show_chart", Description: "Show a chart.", InputSchema: json.RawMessage(`{"type":"object","properties":{"symbol":{"type":"string"}},"required":["symbol"]}`)}

// TestClientToolWaitsForItsResult: a client tool's call pauses the turn
// with an interrupt of kind client_tool, beside an approval of the same
// answer; responses that answer the approval alone run its tool and leave
// the call waiting, with no message; the client's result then completes
// the answer, under the client's message id.
func TestClientToolWaitsForItsResult(t *testing.T) {
	s := newServer(t)
	s.Enqueue(
		conversetest.ToolUse("u1", "refund", map[string]int{"n": 1}).WithToolUse("c1", "show_chart", map[string]string{"symbol": "AMZN"}),
		conversetest.Text("Done."),
	)
	var refund counter
	a := newAgent(t, s, agent.Config{Tools: []agent.Tool{agent.RequireApproval(refund.tool(t, "refund"))}})
	theme := agent.ToolSpec{Name: "set_theme", Description: "Set the theme."}
	conv := &agent.Conversation{ClientTools: clientTools(t, theme, chartSpec)}
	res, err := a.Run(t.Context(), conv, input("refund and chart"))
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tool := range s.Requests()[0].ToolConfig.Tools {
		if tool.ToolSpec != nil {
			names = append(names, tool.ToolSpec.Name)
		}
	}
	if strings.Join(names, " ") != "refund set_theme show_chart" {
		t.Errorf("the tools offered: %v; want the agent's, then the client's by name", names)
	}
	if res.StopReason != agent.StopInterrupt || len(res.Pending.Interrupts) != 2 || res.Pending.Interrupts[1].Kind != agent.KindClientTool {
		t.Fatalf("stop %s, pending %+v", res.StopReason, res.Pending)
	}
	conv = committed(t, conv, res)
	conv.ClientTools = clientTools(t, chartSpec)

	// The approval alone: the refund runs, the chart waits.
	var events []agent.Event
	part, err := a.Answer(t.Context(), conv, []agent.Response{approve("u1", true, "")}, func(e agent.Event) { events = append(events, e) })
	if err != nil {
		t.Fatal(err)
	}
	if len(part.Messages) != 0 || part.Pending == nil || len(part.Pending.Interrupts) != 1 || part.Pending.Interrupts[0].ID != "c1" || len(part.Pending.Results) != 1 || refund.runs.Load() != 1 {
		t.Fatalf("the partial answer: %d messages, pending %+v, %d refunds", len(part.Messages), part.Pending, refund.runs.Load())
	}
	if len(events) != 1 || events[0].ToolResult == nil || events[0].ToolResult.ToolUseID != "u1" {
		t.Errorf("events %+v", events)
	}
	conv.Pending = part.Pending

	// Approving a client tool's call is refused: only its client answers.
	var re *agent.ResponsesError
	if _, err := a.Answer(t.Context(), conv, []agent.Response{approve("c1", true, "")}, nil); !errors.As(err, &re) || !strings.Contains(err.Error(), "may only be denied") {
		t.Errorf("approving the call: %v", err)
	}
	result := &agent.ToolResultBlock{ToolUseID: "c1", Status: agent.ToolSuccess, Content: []agent.ToolResultContent{{Text: "shown"}}, MessageID: "client-7"}
	done, err := a.Answer(t.Context(), conv, []agent.Response{{InterruptID: "c1", Result: result}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	m := done.Messages[0]
	if len(m.Content) != 2 || m.Content[0].ToolResult.ToolUseID != "u1" || m.Content[1].ToolResult.MessageID != "client-7" || refund.runs.Load() != 1 {
		t.Errorf("the answer %+v", m)
	}
	conv = committed(t, conv, done)
	conv.ClientTools = clientTools(t, chartSpec)
	if _, err := a.Continue(t.Context(), conv, nil); err != nil {
		t.Fatal(err)
	}
	if b, _ := json.Marshal(s.Requests()[1]); strings.Contains(string(b), "client-7") {
		t.Errorf("the model saw the client's message id: %s", b)
	}
}

// TestClientToolsAreChecked: a client's tools are refused, each problem
// named, for names Bedrock refuses or used twice, empty descriptions and
// schemas past the budget; and by the agent, for names of its own tools.
func TestClientToolsAreChecked(t *testing.T) {
	deep := `{"type":"object","properties":{"a":` + strings.Repeat(`{"items":`, 200) + `{}` + strings.Repeat(`}`, 200) + `}}`
	_, err := agent.NewClientTools([]agent.ToolSpec{
		{Name: "bad name", Description: "x"},
		{Name: "ok", Description: "x"},
		{Name: "ok", Description: "x"},
		{Name: "quiet"},
		{Name: "deep", Description: "x", InputSchema: json.RawMessage(deep)},
	})
	for _, want := range []string{"tools[0]", "tools[2]: a second tool", "tools[3] (quiet): the description is empty", "tools[4] (deep): parameters"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%v; want it to say %q", err, want)
		}
	}
	s := newServer(t)
	var c counter
	a := newAgent(t, s, agent.Config{Tools: []agent.Tool{c.tool(t, "lookup")}})
	if err := a.CheckClientTools(t.Context(), clientTools(t, agent.ToolSpec{Name: "lookup", Description: "mine"})); err == nil || !strings.Contains(err.Error(), "lookup") {
		t.Errorf("a client tool named like the agent's: %v", err)
	}
	if err := agent.CheckContext([]agent.ContextEntry{{Value: strings.Repeat("x", agent.MaxContextBytes+1)}}); err == nil {
		t.Error("context past MaxContextBytes was accepted")
	}
}

// TestContextReachesTheModel: a turn's context is the first block of its
// user message in every model call of the turn, after the cache point of
// the turns before, and the turn's messages never hold it.
func TestContextReachesTheModel(t *testing.T) {
	s := newServer(t)
	s.Enqueue(conversetest.Text("First."), conversetest.ToolUse("l1", "lookup", map[string]int{"n": 1}), conversetest.Text("Second."))
	var c counter
	a := newAgent(t, s, agent.Config{Tools: []agent.Tool{c.tool(t, "lookup")}, PromptCache: true})
	conv := &agent.Conversation{}
	res, err := a.Run(t.Context(), conv, input("hello"))
	if err != nil {
		t.Fatal(err)
	}
	conv = committed(t, conv, res)
	conv.Context = []agent.ContextEntry{{Description: "page", Value: "/pricing"}}
	res, err = a.Run(t.Context(), conv, input("where am I?"))
	if err != nil {
		t.Fatal(err)
	}
	for _, req := range s.Requests()[1:] {
		start := req.Messages[2]
		if !strings.Contains(start.Content[0].Text, "page: /pricing") || start.Content[1].Text != "where am I?" {
			t.Errorf("the turn's user message in a call: %+v", start)
		}
		if strings.Contains(req.Messages[0].Text(), "/pricing") {
			t.Error("the context is in an earlier turn")
		}
	}
	if b, _ := json.Marshal(res.Messages); strings.Contains(string(b), "/pricing") {
		t.Errorf("the turn's messages hold the context: %s", b)
	}
}

// TestStateChangesAreEmitted: a streamed turn emits the state after tools
// changed it, and only then.
func TestStateChangesAreEmitted(t *testing.T) {
	s := newServer(t)
	s.Enqueue(conversetest.ToolUse("s1", "set", map[string]int{"n": 1}), conversetest.ToolUse("l1", "lookup", map[string]int{"n": 1}), conversetest.Text("Done."))
	set, err := agent.NewFuncTool("set", "sets", func(_ context.Context, call *agent.ToolCall, in struct {
		N int `json:"n"`
	}) (string, error) {
		return "set", call.State.Set("n", in.N)
	})
	if err != nil {
		t.Fatal(err)
	}
	var c counter
	a := newAgent(t, s, agent.Config{Tools: []agent.Tool{set, c.tool(t, "lookup")}})
	var states []map[string]json.RawMessage
	if _, err := a.Stream(t.Context(), &agent.Conversation{}, input("go"), func(e agent.Event) {
		if e.State != nil {
			states = append(states, e.State)
		}
	}); err != nil {
		t.Fatal(err)
	}
	if len(states) != 1 || string(states[0]["n"]) != "1" {
		t.Errorf("state events %v", states)
	}
}
