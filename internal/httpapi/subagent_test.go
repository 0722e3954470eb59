package httpapi_test

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/google/go-cmp/cmp"
	"github.com/lambda-agent/lambda-agent/internal/agent"
	"github.com/lambda-agent/lambda-agent/internal/agui"
	"github.com/lambda-agent/lambda-agent/internal/ddbhistory"
	"github.com/lambda-agent/lambda-agent/internal/httpapi"
	"github.com/lambda-agent/lambda-agent/internal/testkit"
	"github.com/lambda-agent/lambda-agent/internal/testkit/conversetest"
	"github.com/lambda-agent/lambda-agent/internal/turn"
)

// TestChatDelegatesToASubAgent: with AGENTS set, POST /chat's turn hands
// a task to a sub-agent, whose answer is the tool's result; the answer
// reports usage by agent, the total counts both, and the session holds
// the main agent's conversation, valid for Bedrock.
func TestChatDelegatesToASubAgent(t *testing.T) {
	var metrics testkit.Buffer
	s := testkit.Start(t, testkit.Options{Metrics: &metrics, Env: map[string]string{
		"TOOLS":        "calculator",
		"MODEL_PRICES": `{"input":3,"output":15}`,
		"GUARDRAIL_ID": "g1", "GUARDRAIL_VERSION": "1",
		"AGENTS": `[{"name":"researcher","description":"Researches a question.","system_prompt":"You research.","tools":["calculator"]}]`,
	}})
	s.Model.Responder = func(req *conversetest.Request) conversetest.Reply {
		switch {
		case len(req.System) > 0 && req.System[0].Text == "You research.":
			return conversetest.Text("Forty-two.").WithUsage(30, 3)
		case len(req.Messages) == 1:
			return conversetest.ToolUse("d1", "researcher", map[string]string{"task": "What is 6*7?"}).WithUsage(20, 2)
		}
		return conversetest.Text("The researcher says forty-two.").WithUsage(25, 4)
	}
	w := postJSON(t, s, "/chat", `{"session_id":"deleg","message":"Ask the researcher."}`)
	if w.Code != http.StatusOK {
		t.Fatalf("%d %s", w.Code, w.Body)
	}
	var answer turn.ChatAnswer
	if err := json.Unmarshal(w.Body.Bytes(), &answer); err != nil {
		t.Fatal(err)
	}
	if answer.Text != "The researcher says forty-two." || answer.Usage.InputTokens != 75 || answer.Metrics.ModelCalls != 3 {
		t.Errorf("answer %q, usage %+v, %d model calls", answer.Text, answer.Usage, answer.Metrics.ModelCalls)
	}
	if got := answer.Agents; got["main"].Usage.InputTokens != 45 || got["researcher"].Usage.InputTokens != 30 || len(got) != 2 {
		t.Errorf("usage by agent %+v", got)
	}
	main, sub, total := answer.Agents["main"].EstimatedCostUSD, answer.Agents["researcher"].EstimatedCostUSD, answer.Metrics.EstimatedCostUSD
	if main == nil || sub == nil || total == nil || math.Abs(*main+*sub-*total) > 1e-12 || math.Abs(*sub-(30*3+3*15)/1e6) > 1e-12 {
		t.Errorf("costs: main %v, researcher %v, turn %v", main, sub, total)
	}
	// The sub-agent calls the same model, with the guardrail.
	if sub := s.Model.Requests()[1]; sub.ModelID != "test-model" || sub.GuardrailConfig == nil || len(sub.Messages) != 1 {
		t.Errorf("the sub-agent's request: model %s, guardrail %v, %d messages", sub.ModelID, sub.GuardrailConfig, len(sub.Messages))
	}
	// The metrics have a line per agent, with its tokens.
	for _, want := range []string{`"AgentName":"main"`, `"AgentName":"researcher"`, `"InputTokens":30`} {
		if !strings.Contains(metrics.String(), want) {
			t.Errorf("the metrics lack %s:\n%s", want, metrics.String())
		}
	}
	stored := transcriptOf(t, s, "", "deleg")
	if err := agent.ValidateHistory(stored); err != nil || len(stored) != 4 {
		t.Fatalf("%d messages stored: %v", len(stored), err)
	}
	if r := stored[2].Content[0].ToolResult; r == nil || r.Content[0].Text != "Forty-two." {
		t.Errorf("the delegation's result: %+v", stored[2])
	}
	// A turn that does not delegate has no usage by agent.
	s.Model.Enqueue(conversetest.Text("Hi."))
	w = postJSON(t, s, "/chat", `{"message":"Hello"}`)
	if w.Code != http.StatusOK || strings.Contains(w.Body.String(), `"agents"`) {
		t.Errorf("a turn without delegation: %d %s", w.Code, w.Body)
	}
}

// TestChatStreamShowsTheSubAgent: POST /chat/stream streams a sub-agent's
// work between its delegation's tool_use and tool_result, under events of
// its own (agent_start, agent_text, agent_tool_use, agent_tool_result,
// agent_end) that carry the delegation's id, so that text events remain
// the main agent's answer alone.
func TestChatStreamShowsTheSubAgent(t *testing.T) {
	a := newAPI(t, map[string]string{
		"TOOLS":  "calculator",
		"AGENTS": `[{"name":"researcher","description":"Researches.","system_prompt":"You research.","tools":["calculator"]}]`,
	})
	srv := a.streamServer(t)
	a.model.Responder = func(req *conversetest.Request) conversetest.Reply {
		research := len(req.System) > 0 && req.System[0].Text == "You research."
		switch {
		case research && len(req.Messages) == 1:
			return conversetest.ToolUse("r1", "calculator", map[string]string{"expression": "6*7"})
		case research:
			return conversetest.Text("It is 42, by the calculator.").WithChunking(4, 0)
		case len(req.Messages) == 1:
			return conversetest.ToolUse("d1", "researcher", map[string]string{"task": "Compute 6*7."})
		}
		return conversetest.Text("The researcher found 42.").WithChunking(4, 0)
	}
	evs := streamAll(t, srv, map[string]any{"session_id": "streamed", "message": "Ask the researcher."}, nil)
	var seq []string
	for _, e := range evs {
		if n := len(seq); n > 0 && seq[n-1] == e.name && (e.name == "text" || e.name == "agent_text") {
			continue
		}
		seq = append(seq, e.name)
	}
	want := "start tool_use agent_start agent_tool_use agent_tool_result agent_text agent_end tool_result text done"
	if got := strings.Join(seq, " "); got != want {
		t.Fatalf("events:\n got %s\nwant %s", got, want)
	}
	var agentText strings.Builder
	for _, e := range evs {
		switch e.name {
		case httpapi.EventAgentStart:
			if e.data["id"] != "d1" || e.data["name"] != "researcher" || fmt.Sprint(e.data["path"]) != "[researcher]" || e.data["parent_id"] != nil {
				t.Errorf("agent_start %v", e.data)
			}
		case httpapi.EventAgentText:
			agentText.WriteString(e.data["delta"].(string))
			if e.data["agent_id"] != "d1" {
				t.Errorf("agent_text %v", e.data)
			}
		case httpapi.EventAgentToolUse, httpapi.EventAgentToolResult:
			if e.data["agent_id"] != "d1" || e.data["id"] != "r1" {
				t.Errorf("%s %v", e.name, e.data)
			}
		case httpapi.EventAgentEnd:
			if e.data["id"] != "d1" || e.data["error"] != nil {
				t.Errorf("agent_end %v", e.data)
			}
		}
	}
	if got := strings.Join(deltas(evs), ""); got != "The researcher found 42." || agentText.String() != "It is 42, by the calculator." {
		t.Errorf("text %q, agent_text %q", got, agentText.String())
	}
}

// TestAGUIRunDelegates: an AG-UI run whose agent delegates streams the
// sub-agent's work as AG-UI's sub-agent events: SUBAGENT_STARTED under the
// delegating tool call, its messages and tool calls tagged with its
// subagentRunId, then SUBAGENT_FINISHED, or SUBAGENT_ERROR when it
// failed, before the call's result. A client that keeps those messages
// in its thread and sends it whole, as HttpAgent does, reconciles: the
// server holds the main agent's thread.
func TestAGUIRunDelegates(t *testing.T) {
	s := testkit.Start(t, testkit.Options{Env: map[string]string{
		"TOOLS":  "calculator",
		"AGENTS": `[{"name":"researcher","description":"Researches.","system_prompt":"You research.","tools":["calculator"]}]`,
	}})
	s.Model.Responder = func(req *conversetest.Request) conversetest.Reply {
		research := len(req.System) > 0 && req.System[0].Text == "You research."
		task := req.Messages[len(req.Messages)-1].Text()
		switch {
		case research && task == "Fail.":
			return conversetest.Error(400, conversetest.CodeValidation, "no")
		case research && task != "":
			return conversetest.ToolUse(fmt.Sprint("r", len(req.Messages)), "calculator", map[string]string{"expression": "6*7"})
		case research:
			return conversetest.Text("It is 42.")
		case req.Messages[len(req.Messages)-1].Text() == "Make it fail.":
			return conversetest.ToolUse("df", "researcher", map[string]string{"task": "Fail."})
		case req.Messages[len(req.Messages)-1].Text() != "":
			return conversetest.ToolUse(fmt.Sprint("d", len(req.Messages)), "researcher", map[string]string{"task": "Compute 6*7."})
		}
		return conversetest.Text("The researcher found 42.")
	}
	in := agui.RunAgentInput{ThreadID: "agui-deleg", RunID: "run-1", Messages: []agui.Message{userMessage("u-1", "Ask the researcher.")}}
	events := aguiEvents(t, aguiRun(t, s, "", in))
	want := "RUN_STARTED STATE_SNAPSHOT TOOL_CALL_START TOOL_CALL_ARGS TOOL_CALL_END " +
		"SUBAGENT_STARTED TOOL_CALL_START TOOL_CALL_ARGS TOOL_CALL_END TOOL_CALL_RESULT TEXT_MESSAGE_START TEXT_MESSAGE_CONTENT TEXT_MESSAGE_END SUBAGENT_FINISHED " +
		"TOOL_CALL_RESULT TEXT_MESSAGE_START TEXT_MESSAGE_CONTENT TEXT_MESSAGE_END RUN_FINISHED"
	if got := types(events); got != want {
		t.Fatalf("events:\n got %s\nwant %s", got, want)
	}
	call := nth(t, events, agui.EventToolCallStart, 0)
	started := nth(t, events, agui.EventSubagentStarted, 0)
	run := started["subagentRunId"]
	if started["name"] != "researcher" || started["parentToolCallId"] != call["toolCallId"] || started["parentMessageId"] != call["parentMessageId"] {
		t.Errorf("SUBAGENT_STARTED %v under the call %v", started, call)
	}
	for i, e := range events {
		inside := i > slices.IndexFunc(events, func(e map[string]any) bool { return e["type"] == agui.EventSubagentStarted }) &&
			i < slices.IndexFunc(events, func(e map[string]any) bool { return e["type"] == agui.EventSubagentFinished })
		if tagged := e["subagentRunId"] == run; tagged != (inside || e["type"] == agui.EventSubagentFinished || e["type"] == agui.EventSubagentStarted) {
			t.Errorf("event %d %v: tagged %v", i, e, tagged)
		}
	}
	if r := nth(t, events, agui.EventToolCallResult, 1); r["content"] != "It is 42." || r["toolCallId"] != call["toolCallId"] {
		t.Errorf("the delegation's result: %v", r)
	}
	var subText strings.Builder
	for _, e := range events {
		if e["type"] == agui.EventTextMessageContent && e["subagentRunId"] == run {
			subText.WriteString(e["delta"].(string))
		}
	}
	if subText.String() != "It is 42." {
		t.Errorf("the sub-agent's text: %q", subText.String())
	}
	// The whole thread, sub-agent's messages included, and a delegation
	// that fails.
	next := agui.RunAgentInput{ThreadID: "agui-deleg", RunID: "run-2", Messages: append(thread(in.Messages, events), userMessage("u-2", "Make it fail."))}
	failed := aguiEvents(t, aguiRun(t, s, "", next))
	if e := nth(t, failed, agui.EventSubagentError, 0); !strings.Contains(e["message"].(string), "the agent researcher failed") {
		t.Errorf("SUBAGENT_ERROR %v", e)
	}
	if got := types(failed); !strings.HasSuffix(got, "RUN_FINISHED") || strings.Contains(got, "SUBAGENT_FINISHED") {
		t.Errorf("the run whose delegation failed: %s", got)
	}
	if stored := transcriptOf(t, s, "", "agui-deleg"); len(stored) != 8 || agent.ValidateHistory(stored) != nil {
		t.Errorf("%d messages stored, want 8", len(stored))
	}
}

// TestAGUINestedDelegation: a sub-agent that delegates in turn opens a
// SUBAGENT_STARTED of its own under its tool call, with
// parentSubagentRunId, and the usage by agent names all three.
func TestAGUINestedDelegation(t *testing.T) {
	s := testkit.Start(t, testkit.Options{Env: map[string]string{
		"TOOLS": "calculator",
		"AGENTS": `[{"name":"researcher","description":"Researches.","system_prompt":"You research.","tools":["writer"]},
			{"name":"writer","description":"Writes.","system_prompt":"You write.","tools":[]}]`,
	}})
	s.Model.Responder = func(req *conversetest.Request) conversetest.Reply {
		sys := ""
		if len(req.System) > 0 {
			sys = req.System[0].Text
		}
		switch {
		case sys == "You write.":
			return conversetest.Text("Written.")
		case sys == "You research." && len(req.Messages) == 1:
			return conversetest.ToolUse("w1", "writer", map[string]string{"task": "Write it."})
		case sys == "You research.":
			return conversetest.Text("Researched and written.")
		case len(req.Messages) == 1:
			return conversetest.ToolUse("r1", "researcher", map[string]string{"task": "Research it."})
		}
		return conversetest.Text("All done.")
	}
	events := aguiEvents(t, aguiRun(t, s, "", agui.RunAgentInput{ThreadID: "nested", RunID: "run-1", Messages: []agui.Message{userMessage("u-1", "Go.")}}))
	outer, inner := nth(t, events, agui.EventSubagentStarted, 0), nth(t, events, agui.EventSubagentStarted, 1)
	if outer["subagentRunId"] != "r1" || outer["parentSubagentRunId"] != nil || inner["subagentRunId"] != "w1" || inner["parentSubagentRunId"] != "r1" || inner["name"] != "writer" {
		t.Errorf("SUBAGENT_STARTED: %v, then %v", outer, inner)
	}
	var call map[string]any
	for _, e := range events {
		if e["type"] == agui.EventToolCallStart && e["toolCallId"] == "w1" {
			call = e
		}
	}
	if call == nil || call["subagentRunId"] != "r1" || inner["parentMessageId"] != call["parentMessageId"] {
		t.Errorf("the writer's call %v; its SUBAGENT_STARTED %v", call, inner)
	}
	if got := types(events); !strings.Contains(got, "SUBAGENT_FINISHED TOOL_CALL_RESULT SUBAGENT_STARTED") && !strings.Contains(got, "SUBAGENT_FINISHED TOOL_CALL_RESULT TEXT_MESSAGE_START") {
		t.Errorf("events: %s", got)
	}
	w := postJSON(t, s, "/chat", `{"session_id":"nested-chat","message":"Go."}`)
	var answer turn.ChatAnswer
	if err := json.Unmarshal(w.Body.Bytes(), &answer); err != nil || len(answer.Agents) != 3 || answer.Metrics.ModelCalls != 5 {
		t.Fatalf("%d %s", w.Code, w.Body)
	}
	// Every agent's calls count once in the total.
	var sum agent.Usage
	for _, a := range answer.Agents {
		sum.InputTokens += a.Usage.InputTokens
		sum.OutputTokens += a.Usage.OutputTokens
	}
	if sum.InputTokens != answer.Usage.InputTokens || sum.OutputTokens != answer.Usage.OutputTokens {
		t.Errorf("the agents' usage sums to %+v, the turn's is %+v", sum, answer.Usage)
	}
}

// TestSubAgentKeepsItsConversation: a session keeps each sub-agent's
// conversation beside the main agent's, so that every delegation goes on
// from where the last left off, whatever kind of turn made it (a chat, a
// streamed one, a regenerated or edited one, which keep the sub-agent's
// conversation as it is); another session's sub-agent starts afresh. The
// strict stand-in checks each request's history, the sub-agent's among
// them, as Bedrock would.
func TestSubAgentKeepsItsConversation(t *testing.T) {
	s := testkit.Start(t, testkit.Options{Env: map[string]string{
		"AGENTS": `[{"name":"researcher","description":"Researches.","system_prompt":"You research.","tools":[]}]`,
	}})
	s.Model.Responder = func(req *conversetest.Request) conversetest.Reply {
		last := req.Messages[len(req.Messages)-1]
		switch {
		case len(req.System) > 0 && req.System[0].Text == "You research.":
			return conversetest.Text(fmt.Sprintf("%s, having seen %d messages", last.Text(), len(req.Messages)))
		case last.Text() != "":
			return conversetest.ToolUse(fmt.Sprint("d", len(req.Messages)), "researcher", map[string]string{"task": "Task " + last.Text()})
		}
		return conversetest.Text("Researcher: " + last.Content[0].ToolResult.Content[0].Text)
	}
	chat := func(body string) string {
		t.Helper()
		w := postJSON(t, s, "/chat", body)
		if w.Code != http.StatusOK {
			t.Fatalf("%s: %d %s", body, w.Code, w.Body)
		}
		var a turn.ChatAnswer
		if err := json.Unmarshal(w.Body.Bytes(), &a); err != nil {
			t.Fatal(err)
		}
		return a.Text
	}
	if got := chat(`{"session_id":"keep","message":"one"}`); got != "Researcher: Task one, having seen 1 messages" {
		t.Fatalf("first turn: %q", got)
	}
	if got := chat(`{"session_id":"keep","message":"two"}`); got != "Researcher: Task two, having seen 3 messages" {
		t.Errorf("second turn: %q", got)
	}
	srv := httptest.NewServer(s.Handler)
	t.Cleanup(srv.Close)
	resp, err := http.Post(srv.URL+"/chat/stream", "application/json", strings.NewReader(`{"session_id":"keep","message":"three"}`))
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.Contains(string(body), "Task three, having seen 5 messages") {
		t.Errorf("the streamed turn:\n%s", body)
	}
	if got := chat(`{"session_id":"keep","regenerate":true}`); got != "Researcher: Task three, having seen 7 messages" {
		t.Errorf("regenerated: %q", got)
	}
	if got := chat(`{"session_id":"keep","edit":{"from":4,"message":"four"}}`); got != "Researcher: Task four, having seen 9 messages" {
		t.Errorf("edited: %q", got)
	}
	if got := chat(`{"session_id":"other","message":"one"}`); got != "Researcher: Task one, having seen 1 messages" {
		t.Errorf("another session: %q", got)
	}
	if n := s.Model.Calls(); n != 18 {
		t.Errorf("%d model calls, want 18", n)
	}
}

// getAs gets path as owner.
func getAs(t *testing.T, s *testkit.Stack, owner, path string) *httptest.ResponseRecorder {
	t.Helper()
	return s.Serve(testkit.As(httptest.NewRequestWithContext(t.Context(), http.MethodGet, path, nil), owner))
}

// delegating answers every user message by delegating it to the
// researcher, who answers with the task and how many messages it saw, and
// then the researcher's answer: a sub-agent's conversation grows by two
// messages a turn, and shows what it was given.
func delegating(req *conversetest.Request) conversetest.Reply {
	last := req.Messages[len(req.Messages)-1]
	switch {
	case len(req.System) > 0 && req.System[0].Text == "You research.":
		return conversetest.Text(fmt.Sprintf("%s, having seen %d messages", last.Text(), len(req.Messages)))
	case last.Text() != "":
		return conversetest.ToolUse(fmt.Sprint("d", len(req.Messages)), "researcher", map[string]string{"task": "Task " + last.Text()})
	}
	return conversetest.Text("Researcher: " + last.Content[0].ToolResult.Content[0].Text)
}

// TestSubAgentTranscript: GET /sessions/{id}?agent=NAME reads a
// sub-agent's conversation, in the shape and pages of the main
// transcript, with the sub-agent's window and state, nothing pending, and
// the session's title and times; a configured sub-agent with nothing
// stored has no messages; a name the agent does not have is a 404
// unknown_agent that lists those it has; another owner's session is a
// 404 not_found, as without ?agent=; a delete leaves no item of any
// agent.
func TestSubAgentTranscript(t *testing.T) {
	s := testkit.Start(t, testkit.Options{Env: map[string]string{
		"AGENTS": `[{"name":"researcher","description":"Researches.","system_prompt":"You research.","tools":[]},
			{"name":"writer","description":"Writes.","system_prompt":"You write.","tools":[]}]`,
	}})
	s.Model.Responder = delegating
	for _, m := range []string{"one", "two", "three"} {
		chatAs(t, s, "alice", "subs", m)
	}
	var main httpapi.SessionResponse
	if w := getAs(t, s, "alice", "/sessions/subs"); w.Code != http.StatusOK {
		t.Fatalf("GET: %d %s", w.Code, w.Body)
	} else {
		strictDecode(t, w.Body.Bytes(), &main)
	}

	var got []string
	var pages []httpapi.SessionResponse
	for cursor := "first"; cursor != ""; {
		path := "/sessions/subs?agent=researcher&limit=4"
		if cursor != "first" {
			path += "&cursor=" + cursor
		}
		w := getAs(t, s, "alice", path)
		if w.Code != http.StatusOK {
			t.Fatalf("GET %s: %d %s", path, w.Code, w.Body)
		}
		var page httpapi.SessionResponse
		strictDecode(t, w.Body.Bytes(), &page)
		pages = append(pages, page)
		for _, m := range page.Messages {
			got = append(got, m.Text())
		}
		cursor = page.NextCursor
	}
	want := []string{"Task one", "Task one, having seen 1 messages", "Task two", "Task two, having seen 3 messages", "Task three", "Task three, having seen 5 messages"}
	if diff := cmp.Diff(want, got); diff != "" || len(pages) != 2 || pages[1].First != 4 {
		t.Errorf("the researcher's transcript in %d pages (-want +got):\n%s", len(pages), diff)
	}
	p := pages[0]
	if p.Agent != "researcher" || p.SessionID != "subs" || p.Title != main.Title || !p.CreatedAt.Equal(main.CreatedAt) || !p.UpdatedAt.Equal(main.UpdatedAt) ||
		p.Window != (turn.Window{}) || p.Summary != nil || len(p.State) != 0 || p.Interrupts == nil || len(p.Interrupts) != 0 {
		t.Errorf("the researcher's page: %+v; the session's: %+v", p, main)
	}
	if main.Agent != "" || len(main.Messages) != 12 {
		t.Errorf("the main transcript: agent %q, %d messages", main.Agent, len(main.Messages))
	}

	w := getAs(t, s, "alice", "/sessions/subs?agent=writer")
	var writer httpapi.SessionResponse
	if w.Code == http.StatusOK {
		strictDecode(t, w.Body.Bytes(), &writer)
	}
	if w.Code != http.StatusOK || writer.Agent != "writer" || writer.Messages == nil || len(writer.Messages) != 0 || writer.NextCursor != "" || writer.Title != main.Title {
		t.Errorf("a sub-agent with nothing stored: %d %s", w.Code, w.Body)
	}
	for _, name := range []string{"nobody", "main", "", "a%23b"} {
		w := getAs(t, s, "alice", "/sessions/subs?agent="+name)
		msg := errorMessageOf(t, w)
		if w.Code != http.StatusNotFound || !strings.Contains(w.Body.String(), `"code":"unknown_agent"`) || !strings.Contains(msg, "researcher, writer") {
			t.Errorf("?agent=%s: %d %s", name, w.Code, w.Body)
		}
	}
	for _, path := range []string{"/sessions/subs?agent=researcher", "/sessions/subs?agent=nobody"} {
		if w := getAs(t, s, "bob", path); w.Code != http.StatusNotFound || strings.Contains(w.Body.String(), "Task") {
			t.Errorf("bob's %s: %d %s", path, w.Code, w.Body)
		}
	}
	if w := getAs(t, s, "bob", "/sessions/subs?agent=researcher"); !strings.Contains(w.Body.String(), `"code":"not_found"`) {
		t.Errorf("bob's read of alice's researcher: %s", w.Body)
	}
	if w := getAs(t, s, "alice", "/sessions/none?agent=researcher"); w.Code != http.StatusNotFound || !strings.Contains(w.Body.String(), `"code":"not_found"`) {
		t.Errorf("a missing session's researcher: %d %s", w.Code, w.Body)
	}
	if w := getAs(t, s, "alice", "/sessions/subs?agent=researcher&agent=writer"); w.Code != http.StatusBadRequest {
		t.Errorf("two agents: %d %s", w.Code, w.Body)
	}

	// A rewind keeps the sub-agent's conversation as it is, and the next
	// delegation goes on from it.
	r := httptest.NewRequestWithContext(t.Context(), http.MethodPost, "/sessions/subs/rewind", strings.NewReader(`{"to":4}`))
	if w := s.Serve(testkit.As(r, "alice")); w.Code != http.StatusOK {
		t.Fatalf("rewind: %d %s", w.Code, w.Body)
	}
	if got := transcriptTexts(t, s, "alice", "subs", "researcher"); len(got) != 6 {
		t.Errorf("the researcher after a rewind: %q", got)
	}
	chatAs(t, s, "alice", "subs", "four")
	if got := transcriptTexts(t, s, "alice", "subs", "researcher"); len(got) != 8 || got[7] != "Task four, having seen 7 messages" {
		t.Errorf("the researcher after the rewind and a turn: %q", got)
	}
	if n := agentItems(t, s); n != 9 {
		t.Errorf("%d items of the researcher's conversation before the delete, want 9: its item and 8 messages", n)
	}
	r = httptest.NewRequestWithContext(t.Context(), http.MethodDelete, "/sessions/subs", nil)
	if w := s.Serve(testkit.As(r, "alice")); w.Code != http.StatusNoContent {
		t.Fatalf("DELETE: %d %s", w.Code, w.Body)
	}
	if w := getAs(t, s, "alice", "/sessions/subs?agent=researcher"); w.Code != http.StatusNotFound {
		t.Errorf("the researcher after the delete: %d %s", w.Code, w.Body)
	}
	if n := agentItems(t, s); n != 0 {
		t.Errorf("%d items of sub-agents' conversations left after the delete", n)
	}
}

// agentItems counts the items of sub-agents' conversations in the
// stack's table: those under a#<name># in a session's partition (see
// ddbhistory's keyspace).
func agentItems(t *testing.T, s *testkit.Stack) int {
	t.Helper()
	out, err := s.DDB.Client().Scan(t.Context(), &dynamodb.ScanInput{TableName: aws.String(s.Config.TableName)})
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, it := range out.Items {
		if sk, ok := it[ddbhistory.SortKey].(*ddbtypes.AttributeValueMemberS); ok && strings.HasPrefix(sk.Value, "a#") {
			n++
		}
	}
	return n
}

// transcriptTexts is the text of each message of a session's transcript,
// or of its sub-agent's when agent is not "", as owner reads it.
func transcriptTexts(t *testing.T, s *testkit.Stack, owner, id, agent string) []string {
	t.Helper()
	path := "/sessions/" + id + "?limit=1000"
	if agent != "" {
		path += "&agent=" + agent
	}
	w := getAs(t, s, owner, path)
	if w.Code != http.StatusOK {
		t.Fatalf("GET %s: %d %s", path, w.Code, w.Body)
	}
	var page httpapi.SessionResponse
	strictDecode(t, w.Body.Bytes(), &page)
	texts := make([]string, len(page.Messages))
	for i, m := range page.Messages {
		texts[i] = m.Text()
	}
	return texts
}

// errorMessageOf is the message of an error answer.
func errorMessageOf(t *testing.T, w *httptest.ResponseRecorder) string {
	t.Helper()
	var e struct {
		Error httpapi.Error `json:"error"`
	}
	_ = json.Unmarshal(w.Body.Bytes(), &e)
	return e.Error.Message
}
