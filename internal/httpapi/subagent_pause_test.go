package httpapi_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"

	"github.com/lambda-agent/lambda-agent/internal/agent"
	"github.com/lambda-agent/lambda-agent/internal/agui"
	"github.com/lambda-agent/lambda-agent/internal/testkit"
	"github.com/lambda-agent/lambda-agent/internal/testkit/conversetest"
	"github.com/lambda-agent/lambda-agent/internal/turn"
)

// askingResearcher is a deployment whose researcher asks the person, and
// the responder of its model: the researcher asks "Which colour?" for
// every task, and answers with what it was told; the main agent delegates
// every message, and says what the researcher answered.
func askingResearcher(t *testing.T) *testkit.Stack {
	s := testkit.Start(t, testkit.Options{Env: map[string]string{
		"TOOLS":  "ask_user",
		"AGENTS": `[{"name":"researcher","description":"Researches.","system_prompt":"You research.","tools":["ask_user"]}]`,
	}})
	s.Model.Responder = func(req *conversetest.Request) conversetest.Reply {
		last := req.Messages[len(req.Messages)-1]
		switch {
		case len(req.System) > 0 && req.System[0].Text == "You research." && last.Text() != "":
			return conversetest.ToolUse(fmt.Sprint("q", len(req.Messages)), agent.AskUserName, map[string]string{"question": "Which colour?"}).WithUsage(11, 1)
		case len(req.System) > 0 && req.System[0].Text == "You research.":
			return conversetest.Text("Told "+last.Content[0].ToolResult.Content[0].Text).WithUsage(13, 2)
		case last.Text() != "":
			return conversetest.ToolUse(fmt.Sprint("d", len(req.Messages)), "researcher", map[string]string{"task": last.Text()}).WithUsage(7, 1)
		}
		return conversetest.Text("Main: "+last.Content[0].ToolResult.Content[0].Text).WithUsage(5, 1)
	}
	return s
}

// TestChatSubAgentAsks: a sub-agent's question pauses the chat turn; the
// interrupt names the agent (agent_path) and the delegation; the session
// lists it; a later request's responses resume the sub-agent, then the
// main agent, and the answer counts both agents' calls of both requests'
// work. Both agents' histories are valid for the strict stand-in, which
// the next turn's requests carry.
func TestChatSubAgentAsks(t *testing.T) {
	s := askingResearcher(t)
	w := postJSON(t, s, "/chat", `{"session_id":"asks","message":"Colours?"}`)
	var paused turn.ChatAnswer
	if err := json.Unmarshal(w.Body.Bytes(), &paused); err != nil || w.Code != http.StatusOK {
		t.Fatalf("%d %s", w.Code, w.Body)
	}
	if paused.StopReason != agent.StopInterrupt || len(paused.Interrupts) != 1 {
		t.Fatalf("stop %s, interrupts %+v", paused.StopReason, paused.Interrupts)
	}
	in := paused.Interrupts[0]
	if !slices.Equal(in.AgentPath, []string{"researcher"}) || in.DelegationID != "d1" || in.SubagentRunID != "d1" || in.Kind != agent.KindQuestion || in.Reason != "Which colour?" {
		t.Errorf("the interrupt: %+v", in)
	}
	if !strings.Contains(w.Body.String(), `"agent_path":["researcher"]`) {
		t.Errorf("the answer does not carry agent_path: %s", w.Body)
	}
	page := s.Serve(testkit.As(httptest.NewRequestWithContext(t.Context(), http.MethodGet, "/sessions/asks", nil), ""))
	if !strings.Contains(page.Body.String(), `"agent_path":["researcher"]`) {
		t.Errorf("the session does not list the sub-agent's interrupt: %s", page.Body)
	}
	// A message while it waits is refused, as for the main agent's.
	if w := postJSON(t, s, "/chat", `{"session_id":"asks","message":"Hello?"}`); w.Code != http.StatusConflict || !strings.Contains(w.Body.String(), `"code":"interrupt_pending"`) {
		t.Errorf("a message while the sub-agent waits: %d %s", w.Code, w.Body)
	}

	w = postJSON(t, s, "/chat", fmt.Sprintf(`{"session_id":"asks","responses":[{"interrupt_id":%q,"answer":"teal"}]}`, in.ID))
	var done turn.ChatAnswer
	if err := json.Unmarshal(w.Body.Bytes(), &done); err != nil || w.Code != http.StatusOK {
		t.Fatalf("%d %s", w.Code, w.Body)
	}
	if done.Text != "Main: Told teal" {
		t.Errorf("text %q", done.Text)
	}
	// The resume's answer counts the researcher's call in it and the main
	// agent's: 13 and 5 input tokens.
	if got := done.Agents; got["researcher"].Usage.InputTokens != 13 || got["main"].Usage.InputTokens != 5 || done.Usage.InputTokens != 18 || done.Metrics.ModelCalls != 2 {
		t.Errorf("usage %+v by agent %+v, %d model calls", done.Usage, got, done.Metrics.ModelCalls)
	}
	stored := transcriptOf(t, s, "", "asks")
	if err := agent.ValidateHistory(stored); err != nil || len(stored) != 4 {
		t.Errorf("%d messages stored: %v", len(stored), err)
	}
	// The next delegation goes on from the researcher's whole exchange.
	w = postJSON(t, s, "/chat", `{"session_id":"asks","message":"More?"}`)
	if w.Code != http.StatusOK || !strings.Contains(w.Body.String(), `"agent_path":["researcher"]`) {
		t.Fatalf("the next turn: %d %s", w.Code, w.Body)
	}
	if reqs := s.Model.Requests(); len(reqs[len(reqs)-1].Messages) != 5 {
		t.Errorf("the researcher's next request carries %d messages, want its 4 and the task", len(reqs[len(reqs)-1].Messages))
	}

	// deny_pending denies them at every level: the main agent's waiting
	// delegation now, and the researcher's question on its next turn.
	w = postJSON(t, s, "/chat", `{"session_id":"asks","message":"Other?","deny_pending":true}`)
	if w.Code != http.StatusOK {
		t.Fatalf("deny_pending: %d %s", w.Code, w.Body)
	}
	stored = transcriptOf(t, s, "", "asks")
	denial := stored[len(stored)-2] // it answers the delegation, then says "Other?"; the researcher asks again
	if r := denial.Content[0].ToolResult; r == nil || r.Status != agent.ToolError || !strings.Contains(r.Content[0].Text, "sent a new message instead") {
		t.Errorf("the main agent's denied delegation: %+v", denial)
	}
	reqs := s.Model.Requests()
	sub := reqs[len(reqs)-1] // the researcher, asking again
	if got := sub.Messages[len(sub.Messages)-1]; got.Content[0].ToolResult == nil || !strings.Contains(got.Content[0].ToolResult.Content[0].Text, "sent a new message instead") {
		t.Errorf("the researcher's denied question: %+v", got)
	}
}

// TestStreamedSubAgentAsks: the stream shows the sub-agent's pause, its
// agent_end with the interrupts it waits for, and the interrupt with its
// agent path; the resume streams the sub-agent's work again, then the
// main agent's answer.
func TestStreamedSubAgentAsks(t *testing.T) {
	s := askingResearcher(t)
	srv := httptest.NewServer(s.Handler)
	t.Cleanup(srv.Close)
	post := func(body string) string {
		t.Helper()
		resp, err := http.Post(srv.URL+"/chat/stream", "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return string(b)
	}
	got := post(`{"session_id":"stream-asks","message":"Colours?"}`)
	for _, want := range []string{
		"event: agent_start", `"suspended":["q1"]`,
		`event: interrupt` + "\n" + `data: {"id":"q1"`, `"agent_path":["researcher"],"delegation_id":"d1","subagent_run_id":"d1"`,
	} {
		if !strings.Contains(got, want) {
			t.Errorf("the paused stream lacks %s:\n%s", want, got)
		}
	}
	got = post(`{"session_id":"stream-asks","responses":[{"interrupt_id":"q1","answer":"red"}]}`)
	if !strings.Contains(got, "event: agent_start") || !strings.Contains(got, `"agent_id":"d1","delta":"Told`) || !strings.Contains(got, `"text":"Main: Told red"`) {
		t.Errorf("the resumed stream:\n%s", got)
	}
}

// TestAGUISubAgentAsks: through AG-UI, the sub-agent's segment ends with
// SUBAGENT_FINISHED, outcome suspended, naming the interrupt, and the run
// with an interrupt outcome whose interrupt carries the subagentRunId; a
// resume entry resumes it, and the sub-agent's run streams to its end.
func TestAGUISubAgentAsks(t *testing.T) {
	s := askingResearcher(t)
	c := &client{t: t, s: s, thread: "agui-asks"}
	events := c.run(nil, userMessage("u-1", "Colours?"))
	fin := nth(t, events, agui.EventSubagentFinished, 0)
	if o := fin["outcome"].(map[string]any); o["type"] != "suspended" || fmt.Sprint(o["interruptIds"]) != "[q1]" || fin["subagentRunId"] != "d1" {
		t.Errorf("SUBAGENT_FINISHED %v", fin)
	}
	outcome := outcomeOf(events)
	ins := outcome["interrupts"].([]any)
	in := ins[0].(map[string]any)
	if outcome["type"] != "interrupt" || len(ins) != 1 || in["id"] != "q1" || in["subagentRunId"] != "d1" || fmt.Sprint(in["metadata"].(map[string]any)["agentPath"]) != "[researcher]" {
		t.Fatalf("outcome %v", outcome)
	}
	events = c.run([]agui.ResumeEntry{{InterruptID: "q1", Status: "resolved", Payload: json.RawMessage(`{"answer":"blue"}`)}})
	if got := types(events); !strings.Contains(got, "SUBAGENT_STARTED") || !strings.Contains(got, "SUBAGENT_FINISHED") || outcomeOf(events)["type"] != "success" {
		t.Errorf("the resumed run: %s", got)
	}
	if o := nth(t, events, agui.EventSubagentFinished, 0)["outcome"].(map[string]any); o["type"] != "success" {
		t.Errorf("the resumed sub-agent's outcome: %v", o)
	}
	var text strings.Builder
	for _, e := range events {
		if e["type"] == agui.EventTextMessageContent && e["subagentRunId"] == nil {
			text.WriteString(e["delta"].(string))
		}
	}
	if text.String() != "Main: Told blue" {
		t.Errorf("the main agent's text: %q", text.String())
	}
}
