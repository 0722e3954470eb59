package agent_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/lambda-agent/lambda-agent/internal/agent"
	"github.com/lambda-agent/lambda-agent/internal/testkit/conversetest"
)

// setOf is a tool set whose tools a test changes between turns.
type setOf struct {
	mu    sync.Mutex
	tools []agent.Tool
	calls int
}

func (s *setOf) Tools(context.Context) []agent.Tool {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.calls++
	return s.tools
}

// specTool is a tool with a given spec that answers with its name.
type specTool struct{ spec agent.ToolSpec }

func (t specTool) Spec() agent.ToolSpec { return t.spec }

func (t specTool) Run(context.Context, *agent.ToolCall) ([]agent.ToolResultContent, error) {
	return []agent.ToolResultContent{{Text: t.spec.Name + " ran"}}, nil
}

func remoteTool(name, schema string) agent.Tool {
	return specTool{agent.ToolSpec{Name: name, Description: "remote", InputSchema: json.RawMessage(schema)}}
}

// TestToolSetsJoinEachTurn: a tool set's tools are offered and run beside
// the agent's own, as the set has them when the turn starts; a tool whose
// name is taken or invalid, or whose schema does not compile, is left out.
func TestToolSetsJoinEachTurn(t *testing.T) {
	s := newServer(t)
	var own counter
	set := &setOf{tools: []agent.Tool{
		remoteTool("lookup", `{"type":"object","properties":{"id":{"type":"string"}}}`),
		remoteTool("refund", `{"type":"object"}`),   // the agent's own name
		remoteTool("bad.name", `{"type":"object"}`), // Bedrock refuses the name
		remoteTool("broken", `{"type":"array"}`),    // the root must be an object
		remoteTool("lookup", `{"type":"object"}`),   // a second lookup
	}}
	a := newAgent(t, s, agent.Config{Tools: []agent.Tool{own.tool(t, "refund")}, ToolSets: []agent.ToolSet{set}})
	s.Enqueue(conversetest.ToolUse("l1", "lookup", map[string]string{"id": "7"}), conversetest.Text("found"))
	res, err := a.Run(t.Context(), &agent.Conversation{}, input("look it up"))
	if err != nil {
		t.Fatal(err)
	}
	var offered []string
	for _, tool := range s.Requests()[0].ToolConfig.Tools {
		offered = append(offered, tool.ToolSpec.Name)
	}
	if diff := cmp.Diff([]string{"refund", "lookup"}, offered); diff != "" {
		t.Errorf("tools offered (-want +got):\n%s", diff)
	}
	if got := res.Messages[2].Content[0].ToolResult.Content[0].Text; got != "lookup ran" {
		t.Errorf("the set's tool answered %q", got)
	}

	// The next turn sees the set as it is then.
	set.mu.Lock()
	set.tools = nil
	set.mu.Unlock()
	s.Enqueue(conversetest.ToolUse("l2", "lookup", map[string]string{"id": "8"}), conversetest.Text("gone"))
	res, err = a.Run(t.Context(), &agent.Conversation{}, input("again"))
	if err != nil {
		t.Fatal(err)
	}
	if r := res.Messages[2].Content[0].ToolResult; r.Status != agent.ToolError {
		t.Errorf("a tool the set no longer has ran: %+v", r)
	}
	if set.calls != 2 {
		t.Errorf("the set was asked %d times in 2 turns", set.calls)
	}
}

// TestToolInputTooCostlyToCheck: a tool set's tool whose schema compiles,
// but against which an input would take more than MaxSteps to check, gets
// an error result that says so, before it runs; the turn goes on.
func TestToolInputTooCostlyToCheck(t *testing.T) {
	s := newServer(t)
	defs := make([]string, 11)
	for i := range defs {
		defs[i] = fmt.Sprintf(`"d%d":{"allOf":[{"$ref":"#/$defs/d%d"},{"$ref":"#/$defs/d%d"}]}`, i, i+1, i+1)
	}
	schema := `{"type":"object","properties":{"a":{"type":"array","items":{"$ref":"#/$defs/d0"}}},"$defs":{` + strings.Join(defs, ",") + `,"d11":{"type":"object"}}}`
	ran := &countedTool{spec: agent.ToolSpec{Name: "costly", Description: "remote", InputSchema: json.RawMessage(schema)}}
	set := &setOf{tools: []agent.Tool{ran}}
	a := newAgent(t, s, agent.Config{ToolSets: []agent.ToolSet{set}})
	items := make([]map[string]any, 2000)
	for i := range items {
		items[i] = map[string]any{}
	}
	s.Enqueue(
		conversetest.ToolUse("c1", "costly", map[string]any{"a": items[:2]}).WithToolUse("c2", "costly", map[string]any{"a": items}),
		conversetest.Text("done"),
	)
	res, err := a.Run(t.Context(), &agent.Conversation{}, input("go"))
	if err != nil {
		t.Fatal(err)
	}
	results := res.Messages[2].Content
	if r := results[0].ToolResult; r.Status != agent.ToolSuccess {
		t.Errorf("a cheap input: %+v", r)
	}
	if r := results[1].ToolResult; r.Status != agent.ToolError || !strings.Contains(r.Content[0].Text, "too costly to check") || !strings.Contains(r.Content[0].Text, "(limit: MaxSteps)") {
		t.Errorf("a costly input: %+v", r)
	}
	if n := ran.runs.Load(); n != 1 {
		t.Errorf("the tool ran %d times; the costly input must not reach it", n)
	}
}

// countedTool is a tool with a given spec that counts its runs.
type countedTool struct {
	spec agent.ToolSpec
	runs atomic.Int32
}

func (t *countedTool) Spec() agent.ToolSpec { return t.spec }

func (t *countedTool) Run(context.Context, *agent.ToolCall) ([]agent.ToolResultContent, error) {
	t.runs.Add(1)
	return []agent.ToolResultContent{{Text: "ran"}}, nil
}
