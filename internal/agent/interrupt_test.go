package agent_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/lambda-agent/lambda-agent/internal/agent"
	"github.com/lambda-agent/lambda-agent/internal/testkit/conversetest"
)

// counter is a tool that counts its runs and echoes its input's n.
type counter struct{ runs atomic.Int32 }

func (c *counter) tool(t *testing.T, name string) agent.Tool {
	t.Helper()
	tool, err := agent.NewFuncTool(name, "counts", func(_ context.Context, _ *agent.ToolCall, in struct {
		N int `json:"n"`
	}) (string, error) {
		c.runs.Add(1)
		return name + " ran", nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return tool
}

// committed returns the conversation a later invocation would load after
// res was committed, and checks that the history is one Bedrock accepts
// once the paused tool uses get their results: valid as it is, but for a
// trailing assistant message's unanswered uses.
func committed(t *testing.T, conv *agent.Conversation, res *agent.Result) *agent.Conversation {
	t.Helper()
	full := append(append([]agent.Message(nil), conv.Messages...), res.Messages...)
	var answered []agent.Message
	if last := full[len(full)-1]; last.Role == agent.RoleAssistant && len(last.ToolUses()) > 0 {
		answered = agent.Repair(full)[:len(full)]
	} else {
		answered = agent.Repair(full)
	}
	if diff := cmp.Diff(full, answered); diff != "" {
		t.Fatalf("the turn left a history that needs repair (-stored +repaired):\n%s", diff)
	}
	drop := res.Window.Removed - conv.Window.Removed
	return &agent.Conversation{Messages: full[drop:], Window: res.Window, State: res.State, Pending: res.Pending}
}

func approve(id string, yes bool, message string) agent.Response {
	return agent.Response{InterruptID: id, Approve: &yes, Message: message}
}

// TestApprovalPausesAndResumes: a tool that requires approval holds back
// its use, while the other use of the same answer runs; the turn ends with
// the interrupt, and Answer and Continue finish it with the tool's result.
func TestApprovalPausesAndResumes(t *testing.T) {
	s := newServer(t)
	s.Enqueue(
		conversetest.Text("Working on it.").WithToolUse("u1", "refund", map[string]int{"n": 120}).WithToolUse("u2", "lookup", map[string]int{"n": 1}),
		conversetest.Text("Refunded."),
	)
	var refund, lookup counter
	a := newAgent(t, s, agent.Config{Tools: []agent.Tool{agent.RequireApproval(refund.tool(t, "refund")), lookup.tool(t, "lookup")}})
	conv := &agent.Conversation{}
	res, err := a.Run(t.Context(), conv, input("refund my order"))
	if err != nil {
		t.Fatal(err)
	}
	if res.StopReason != agent.StopInterrupt || res.Pending == nil || len(res.Pending.Interrupts) != 1 {
		t.Fatalf("stop %s, pending %+v", res.StopReason, res.Pending)
	}
	in := res.Pending.Interrupts[0]
	if in.ID != "u1" || in.Tool != "refund" || in.Kind != agent.KindApproval || string(in.Input) != `{"n":120}` || in.Reason == "" {
		t.Errorf("interrupt %+v", in)
	}
	if refund.runs.Load() != 0 || lookup.runs.Load() != 1 || res.Metrics.ToolCalls != 1 {
		t.Errorf("refund ran %d, lookup %d, ToolCalls %d; want 0, 1, 1", refund.runs.Load(), lookup.runs.Load(), res.Metrics.ToolCalls)
	}
	if len(res.Pending.Results) != 1 || res.Pending.Results[0].ToolUseID != "u2" {
		t.Errorf("kept results %+v", res.Pending.Results)
	}
	if s.Calls() != 1 {
		t.Fatalf("%d model calls before the person answered", s.Calls())
	}
	conv = committed(t, conv, res)

	ans, err := a.Answer(t.Context(), conv, []agent.Response{approve("u1", true, "")}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if refund.runs.Load() != 1 || len(ans.Messages) != 1 || s.Calls() != 1 {
		t.Fatalf("refund ran %d times, %d messages, %d calls", refund.runs.Load(), len(ans.Messages), s.Calls())
	}
	results := ans.Messages[0].Content
	if len(results) != 2 || results[0].ToolResult.ToolUseID != "u1" || results[0].ToolResult.Content[0].Text != "refund ran" ||
		results[1].ToolResult.ToolUseID != "u2" || results[1].ToolResult.Content[0].Text != "lookup ran" {
		t.Fatalf("results %+v", results)
	}
	conv = committed(t, conv, ans)
	if conv.Pending != nil {
		t.Errorf("pending after Answer: %+v", conv.Pending)
	}
	done, err := a.Continue(t.Context(), conv, nil)
	if err != nil {
		t.Fatal(err)
	}
	if done.Text != "Refunded." || done.StopReason != agent.StopEndTurn {
		t.Errorf("text %q, stop %s", done.Text, done.StopReason)
	}
	committed(t, conv, done)
	if lookup.runs.Load() != 1 {
		t.Errorf("lookup ran %d times; it ran before the pause, and only then", lookup.runs.Load())
	}
}

// TestDeniedUseGetsTheMessage: a denial answers the use with an error
// result that carries the person's message, and nothing runs.
func TestDeniedUseGetsTheMessage(t *testing.T) {
	s := newServer(t)
	s.Enqueue(conversetest.ToolUse("u1", "refund", map[string]int{"n": 5}), conversetest.Text("Understood."))
	var refund counter
	a := newAgent(t, s, agent.Config{Tools: []agent.Tool{agent.RequireApproval(refund.tool(t, "refund"))}})
	conv := &agent.Conversation{}
	res, err := a.Run(t.Context(), conv, input("refund"))
	if err != nil {
		t.Fatal(err)
	}
	conv = committed(t, conv, res)
	ans, err := a.Answer(t.Context(), conv, []agent.Response{approve("u1", false, "not this one")}, nil)
	if err != nil {
		t.Fatal(err)
	}
	r := ans.Messages[0].Content[0].ToolResult
	if r.Status != agent.ToolError || !strings.Contains(r.Content[0].Text, "denied") || !strings.Contains(r.Content[0].Text, "not this one") {
		t.Errorf("denial %+v", r)
	}
	if refund.runs.Load() != 0 {
		t.Error("a denied tool ran")
	}
	if _, err := a.Continue(t.Context(), committed(t, conv, ans), nil); err != nil {
		t.Fatal(err)
	}
}

// TestHookInterrupts: a BeforeToolCall hook holds back the uses it
// chooses, with its name, reason and payload; when approved, the hook sees
// Approved and the tool runs.
func TestHookInterrupts(t *testing.T) {
	s := newServer(t)
	s.Enqueue(
		conversetest.ToolUse("big", "refund", map[string]int{"n": 120}).WithToolUse("small", "refund", map[string]int{"n": 20}),
		conversetest.Text("Both refunded."),
	)
	var refund counter
	var approvedSeen atomic.Int32
	hooks := agent.Hooks{BeforeToolCall: []func(context.Context, *agent.BeforeToolCallEvent){
		func(_ context.Context, e *agent.BeforeToolCallEvent) {
			var in struct{ N int }
			_ = json.Unmarshal(e.Use.Input, &in)
			if e.Approved {
				approvedSeen.Add(1)
			}
			if in.N > 100 {
				e.Interrupt = &agent.InterruptRequest{Name: "large_refund", Reason: "refunds over 100 need approval", Payload: json.RawMessage(`{"amount":120}`)}
			}
		},
	}}
	a := newAgent(t, s, agent.Config{Tools: []agent.Tool{refund.tool(t, "refund")}, Hooks: hooks})
	conv := &agent.Conversation{}
	res, err := a.Run(t.Context(), conv, input("refund both"))
	if err != nil {
		t.Fatal(err)
	}
	want := []agent.Interrupt{{
		ID: "big", Kind: agent.KindApproval, Name: "large_refund", Tool: "refund", Input: json.RawMessage(`{"n":120}`),
		Reason: "refunds over 100 need approval", Payload: json.RawMessage(`{"amount":120}`),
	}}
	if diff := cmp.Diff(want, res.Pending.Interrupts, cmpIgnoreExpiry); diff != "" {
		t.Errorf("interrupts (-want +got):\n%s", diff)
	}
	if refund.runs.Load() != 1 {
		t.Fatalf("refund ran %d times before the approval; want 1 (the small one)", refund.runs.Load())
	}
	conv = committed(t, conv, res)
	ans, err := a.Answer(t.Context(), conv, []agent.Response{approve("big", true, "")}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if refund.runs.Load() != 2 || approvedSeen.Load() != 1 {
		t.Errorf("refund ran %d times, the hook saw %d approved uses; want 2, 1", refund.runs.Load(), approvedSeen.Load())
	}
	if _, err := a.Continue(t.Context(), committed(t, conv, ans), nil); err != nil {
		t.Fatal(err)
	}
}

var cmpIgnoreExpiry = cmp.FilterPath(func(p cmp.Path) bool { return p.Last().String() == ".ExpiresAt" }, cmp.Ignore())

// TestAskUser: the ask_user tool pauses with the question; the answer is
// the tool's result.
func TestAskUser(t *testing.T) {
	s := newServer(t)
	s.Enqueue(
		conversetest.ToolUse("q1", agent.AskUserName, map[string]any{"question": "Which account?", "options": []string{"checking", "savings"}}),
		conversetest.Text("Savings it is."),
	)
	a := newAgent(t, s, agent.Config{Tools: []agent.Tool{agent.AskUser()}})
	conv := &agent.Conversation{}
	res, err := a.Run(t.Context(), conv, input("move money"))
	if err != nil {
		t.Fatal(err)
	}
	in := res.Pending.Interrupts[0]
	if in.Kind != agent.KindQuestion || in.Reason != "Which account?" || string(in.Payload) != `{"question":"Which account?","options":["checking","savings"]}` {
		t.Errorf("interrupt %+v, payload %s", in, in.Payload)
	}
	conv = committed(t, conv, res)
	var bad *agent.ResponsesError
	if _, err := a.Answer(t.Context(), conv, []agent.Response{approve("q1", true, "")}, nil); !errors.As(err, &bad) || len(bad.Problems) != 1 {
		t.Errorf("approving a question: %v", err)
	}
	ans, err := a.Answer(t.Context(), conv, []agent.Response{{InterruptID: "q1", Answer: "savings"}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if r := ans.Messages[0].Content[0].ToolResult; r.Status != agent.ToolSuccess || r.Content[0].Text != "savings" {
		t.Errorf("result %+v", r)
	}
	done, err := a.Continue(t.Context(), committed(t, conv, ans), nil)
	if err != nil || done.Text != "Savings it is." {
		t.Fatalf("%v, %+v", err, done)
	}
	if got := s.Requests()[1].Messages[2].Content[0].ToolResult; got == nil || got.Content[0].Text != "savings" {
		t.Errorf("the model did not get the answer: %+v", s.Requests()[1].Messages[2])
	}
}

// TestResponsesMustAnswerEveryLiveInterrupt: missing, unknown, duplicate
// and misshapen responses are refused, listing what is wrong, and nothing
// runs; an expired interrupt needs no response and counts as denied.
func TestResponsesMustAnswerEveryLiveInterrupt(t *testing.T) {
	s := newServer(t)
	s.Enqueue(conversetest.ToolUse("u1", "refund", map[string]int{"n": 1}).WithToolUse("u2", "refund", map[string]int{"n": 2}))
	var refund counter
	now := time.Date(2026, 11, 24, 12, 0, 0, 0, time.UTC)
	clock := func() time.Time { return now }
	a := newAgent(t, s, agent.Config{Tools: []agent.Tool{agent.RequireApproval(refund.tool(t, "refund"))}, Now: clock, InterruptTTL: time.Hour})
	conv := &agent.Conversation{}
	res, err := a.Run(t.Context(), conv, input("refund"))
	if err != nil {
		t.Fatal(err)
	}
	conv = committed(t, conv, res)
	for _, tt := range []struct {
		name      string
		responses []agent.Response
		want      agent.ResponsesError
	}{
		{"partial", []agent.Response{approve("u1", true, "")}, agent.ResponsesError{Missing: []string{"u2"}}},
		{"unknown", []agent.Response{approve("u1", true, ""), approve("u2", true, ""), approve("u9", true, "")}, agent.ResponsesError{Unknown: []string{"u9"}}},
		{"twice", []agent.Response{approve("u1", true, ""), approve("u1", false, ""), approve("u2", true, "")}, agent.ResponsesError{Problems: []string{"responses[1]: a second response to u1"}}},
		{"no approve", []agent.Response{{InterruptID: "u1"}, approve("u2", true, "")}, agent.ResponsesError{Problems: []string{"responses[0]: u1 is an approval: set approve to true or false"}}},
		{"no id", []agent.Response{approve("", true, ""), approve("u1", true, ""), approve("u2", true, "")}, agent.ResponsesError{Problems: []string{"responses[0] has no interrupt_id"}}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := a.Answer(t.Context(), conv, tt.responses, nil)
			var got *agent.ResponsesError
			if !errors.As(err, &got) || !errors.Is(err, agent.ErrInvalidResponses) {
				t.Fatalf("error %v", err)
			}
			if diff := cmp.Diff(tt.want, *got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
	if refund.runs.Load() != 0 {
		t.Fatal("a tool ran on refused responses")
	}

	now = now.Add(2 * time.Hour) // both expired
	ans, err := a.Answer(t.Context(), conv, []agent.Response{approve("u1", true, "")}, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range ans.Messages[0].Content {
		if r := b.ToolResult; r.Status != agent.ToolError || !strings.Contains(r.Content[0].Text, "expired") {
			t.Errorf("an expired interrupt answered %+v", r)
		}
	}
	if refund.runs.Load() != 0 {
		t.Error("an expired approval ran its tool")
	}
	if _, err := a.Answer(t.Context(), &agent.Conversation{Messages: conv.Messages}, nil, nil); !errors.Is(err, agent.ErrNothingPending) {
		t.Errorf("Answer without pending: %v", err)
	}
}

// TestMessageInsteadOfResponse: Run on a paused conversation answers its
// uses, the kept result and a denial, in the message's first blocks.
func TestMessageInsteadOfResponse(t *testing.T) {
	s := newServer(t)
	s.Enqueue(
		conversetest.ToolUse("u1", "refund", map[string]int{"n": 1}).WithToolUse("u2", "lookup", map[string]int{"n": 2}),
		conversetest.Text("OK, no refund."),
	)
	var refund, lookup counter
	a := newAgent(t, s, agent.Config{Tools: []agent.Tool{agent.RequireApproval(refund.tool(t, "refund")), lookup.tool(t, "lookup")}})
	conv := &agent.Conversation{}
	res, err := a.Run(t.Context(), conv, input("refund"))
	if err != nil {
		t.Fatal(err)
	}
	conv = committed(t, conv, res)
	res, err = a.Run(t.Context(), conv, input("never mind"))
	if err != nil {
		t.Fatal(err)
	}
	first := res.Messages[0].Content
	if len(first) != 3 || !strings.Contains(first[0].ToolResult.Content[0].Text, "new message") || first[1].ToolResult.Content[0].Text != "lookup ran" || first[2].Text != "never mind" {
		t.Errorf("first message %+v", first)
	}
	if res.Pending != nil || refund.runs.Load() != 0 || lookup.runs.Load() != 1 {
		t.Errorf("pending %+v, refund %d, lookup %d", res.Pending, refund.runs.Load(), lookup.runs.Load())
	}
	committed(t, conv, res)
}

// TestStreamEmitsInterrupts: a streamed turn emits each interrupt.
func TestStreamEmitsInterrupts(t *testing.T) {
	s := newServer(t)
	s.Enqueue(conversetest.ToolUse("u1", "refund", map[string]int{"n": 1}))
	var refund counter
	a := newAgent(t, s, agent.Config{Tools: []agent.Tool{agent.RequireApproval(refund.tool(t, "refund"))}})
	var got []string
	_, err := a.Stream(t.Context(), &agent.Conversation{}, input("refund"), func(e agent.Event) {
		switch {
		case e.ToolUse != nil:
			got = append(got, "use "+e.ToolUse.ToolUseID)
		case e.Interrupt != nil:
			got = append(got, "interrupt "+e.Interrupt.ID)
		case e.ToolResult != nil:
			got = append(got, "result "+e.ToolResult.ToolUseID)
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"use u1", "interrupt u1"}, got); diff != "" {
		t.Errorf("events (-want +got):\n%s", diff)
	}
}

// TestMessageAfterUnansweredResults: a message to a conversation whose
// last message is a resume's results, never answered because the model
// failed, follows a note from the assistant, so that the stored roles
// alternate.
func TestMessageAfterUnansweredResults(t *testing.T) {
	s := newServer(t)
	s.Enqueue(conversetest.ToolUse("u1", "refund", map[string]int{"n": 1}), conversetest.InternalError(), conversetest.Text("Hello."))
	var refund counter
	a := newAgent(t, s, agent.Config{Tools: []agent.Tool{agent.RequireApproval(refund.tool(t, "refund"))}, Retry: agent.RetryPolicy{MaxAttempts: 1}})
	conv := &agent.Conversation{}
	res, err := a.Run(t.Context(), conv, input("refund"))
	if err != nil {
		t.Fatal(err)
	}
	conv = committed(t, conv, res)
	ans, err := a.Answer(t.Context(), conv, []agent.Response{approve("u1", true, "")}, nil)
	if err != nil {
		t.Fatal(err)
	}
	conv = committed(t, conv, ans)
	if _, err := a.Continue(t.Context(), conv, nil); !agent.IsModelError(err, agent.KindUnavailable) {
		t.Fatalf("Continue: %v, want the model's failure", err)
	}
	res, err = a.Run(t.Context(), conv, input("hello"))
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Messages) != 3 || res.Messages[0].Role != agent.RoleAssistant || res.Messages[1].Text() != "hello" {
		t.Fatalf("messages %+v", res.Messages)
	}
	committed(t, conv, res)
}
