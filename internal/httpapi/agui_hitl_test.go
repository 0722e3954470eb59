package httpapi_test

import (
	"encoding/json"
	"fmt"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/lambda-agent/lambda-agent/internal/agent"
	"github.com/lambda-agent/lambda-agent/internal/agui"
	"github.com/lambda-agent/lambda-agent/internal/testkit"
	"github.com/lambda-agent/lambda-agent/internal/testkit/conversetest"
)

// The people and the client applications in the loop of an AG-UI run:
// approvals and questions end a run with an interrupt outcome, which the
// next run's resume entries answer; client tools' calls end it with
// pendingToolCallIds, which the next run's tool messages answer.

// hitl is a deployment whose calculator needs approval, with ask_user on.
var hitl = testkit.Options{Env: map[string]string{"APPROVAL_TOOLS": "calculator", "TOOLS": "calculator,current_time,remember,ask_user"}}

// chart is a tool the client application runs.
var chart = agui.Tool{Name: "show_chart", Description: "Show a chart of a stock to the person.", Parameters: json.RawMessage(`{"type":"object","properties":{"symbol":{"type":"string"}},"required":["symbol"]}`)}

// client is an AG-UI client that keeps the thread from the events, as
// HttpAgent does, and sends the whole of it with every run.
type client struct {
	t      *testing.T
	s      *testkit.Stack
	thread string
	msgs   []agui.Message
	runs   int
	tools  []agui.Tool
}

// run sends the thread, with what is new, and keeps what the events
// build; it returns the events, or fails the test on a refusal.
func (c *client) run(resume []agui.ResumeEntry, fresh ...agui.Message) []map[string]any {
	c.t.Helper()
	w := c.send(resume, fresh...)
	if w.Code != 200 {
		c.t.Fatalf("run %d: %d %s", c.runs, w.Code, w.Body)
	}
	events := aguiEvents(c.t, w)
	c.msgs = thread(append(c.msgs, fresh...), events)
	if last := events[len(events)-1]; last["type"] != agui.EventRunFinished {
		c.t.Fatalf("run %d ended with %v", c.runs, last)
	}
	return events
}

func (c *client) send(resume []agui.ResumeEntry, fresh ...agui.Message) *httptest.ResponseRecorder {
	c.runs++
	return aguiRun(c.t, c.s, "", agui.RunAgentInput{ThreadID: c.thread, RunID: fmt.Sprintf("%s-run-%d", c.thread, c.runs), Messages: append(slices.Clone(c.msgs), fresh...), Tools: c.tools, Resume: resume})
}

func outcomeOf(events []map[string]any) map[string]any {
	return events[len(events)-1]["outcome"].(map[string]any)
}

func toolMessage(id, call, content string) agui.Message {
	raw, _ := json.Marshal(content)
	return agui.Message{ID: id, Role: agui.RoleTool, ToolCallID: call, Content: raw}
}

// TestAGUIApproval: a tool that needs approval ends the run with an
// interrupt, with what a kit needs to ask (reason, toolCallId, expiresAt,
// responseSchema); resolving it runs the tool, cancelling it denies it
// with the person's reason, and either way the thread stays one the
// client and the server agree on.
func TestAGUIApproval(t *testing.T) {
	s := testkit.Start(t, hitl)
	for _, tt := range []struct {
		name   string
		resume agui.ResumeEntry
		result string
	}{
		{"resolved", agui.ResumeEntry{InterruptID: "calc-1", Status: "resolved"}, "42"},
		{"cancelled", agui.ResumeEntry{InterruptID: "calc-1", Status: "cancelled", Payload: json.RawMessage(`{"reason":"not now"}`)}, "denied this tool call. Their message: not now"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			c := &client{t: t, s: s, thread: "approval-" + tt.name}
			s.Model.Enqueue(conversetest.ToolUse("calc-1", "calculator", map[string]string{"expression": "6*7"}).WithText("I need to compute."))
			events := c.run(nil, userMessage("u-1", "What is 6*7?"))
			out := outcomeOf(events)
			if out["type"] != "interrupt" {
				t.Fatalf("outcome %v", out)
			}
			in := out["interrupts"].([]any)[0].(map[string]any)
			expires, err := time.Parse(time.RFC3339, fmt.Sprint(in["expiresAt"]))
			if in["id"] != "calc-1" || in["reason"] != "approval" || in["toolCallId"] != "calc-1" || err != nil || time.Until(expires) < 23*time.Hour {
				t.Errorf("interrupt %v", in)
			}
			if schema := fmt.Sprint(in["responseSchema"]); !strings.Contains(schema, "reason") {
				t.Errorf("responseSchema %s", schema)
			}
			// A new message while the approval waits is refused.
			if w := c.send(nil, userMessage("u-x", "Never mind")); w.Code != 409 || !strings.Contains(w.Body.String(), "interrupt_pending") {
				t.Errorf("a message while an approval waits: %d %s", w.Code, w.Body)
			}
			c.runs--
			s.Model.Enqueue(conversetest.Text("Done."))
			events = c.run([]agui.ResumeEntry{tt.resume})
			result := nth(t, events, agui.EventToolCallResult, 0)
			if result["messageId"] != "t-calc-1" || !strings.Contains(fmt.Sprint(result["content"]), tt.result) {
				t.Errorf("the result %v, want it to say %q", result, tt.result)
			}
			if outcomeOf(events)["type"] != "success" {
				t.Errorf("outcome %v", outcomeOf(events))
			}
			// The thread the client holds is the server's: the next run of
			// the whole of it goes on.
			s.Model.Enqueue(conversetest.Text("Bye."))
			c.run(nil, userMessage("u-2", "Thanks"))
			if err := agent.ValidateHistory(transcriptOf(t, s, "", c.thread)); err != nil {
				t.Error(err)
			}
		})
	}
}

// TestAGUIQuestion: ask_user ends the run with a question, whose
// responseSchema offers the model's options; a resume entry's answer is
// the tool's result.
func TestAGUIQuestion(t *testing.T) {
	s := testkit.Start(t, hitl)
	c := &client{t: t, s: s, thread: "question"}
	s.Model.Enqueue(conversetest.ToolUse("ask-1", "ask_user", map[string]any{"question": "Which account?", "options": []string{"checking", "savings"}}))
	in := outcomeOf(c.run(nil, userMessage("u-1", "Move 10 euros")))["interrupts"].([]any)[0].(map[string]any)
	if in["reason"] != "question" || in["message"] != "Which account?" || !strings.Contains(fmt.Sprint(in["responseSchema"]), "savings") {
		t.Fatalf("interrupt %v", in)
	}
	s.Model.Enqueue(conversetest.Text("Moved."))
	events := c.run([]agui.ResumeEntry{{InterruptID: "ask-1", Status: "resolved", Payload: json.RawMessage(`{"answer":"savings"}`)}})
	if r := nth(t, events, agui.EventToolCallResult, 0); r["content"] != "savings" {
		t.Errorf("the answer's result %v", r)
	}
	// An answer without its payload is refused before the stream.
	s.Model.Enqueue(conversetest.ToolUse("ask-2", "ask_user", map[string]any{"question": "Sure?"}))
	c.run(nil, userMessage("u-2", "And 20 more"))
	if w := c.send([]agui.ResumeEntry{{InterruptID: "ask-2", Status: "resolved"}}); w.Code != 400 || !strings.Contains(w.Body.String(), "needs an answer") {
		t.Errorf("an answer without payload: %d %s", w.Code, w.Body)
	}
}

// TestAGUIClientTools: a client tool is offered to the model after the
// agent's own; its call ends the run with pendingToolCallIds, and the
// client's tool message with its result continues the turn. While the
// call waits, a new message is a 409 client_tool_pending that names it,
// and POST /chat lists it and may only deny it.
func TestAGUIClientTools(t *testing.T) {
	a := newAPI(t, hitl.Env)
	s := a.Stack
	c := &client{t: t, s: s, thread: "client-tools", tools: []agui.Tool{chart}}
	s.Model.Enqueue(conversetest.ToolUse("chart-1", "show_chart", map[string]string{"symbol": "AMZN"}).WithText("Here is the chart."))
	events := c.run(nil, userMessage("u-1", "Show me Amazon"))
	if out := outcomeOf(events); out["type"] != "success" || fmt.Sprint(out["pendingToolCallIds"]) != "[chart-1]" {
		t.Fatalf("outcome %v", out)
	}
	if strings.Contains(types(events), agui.EventToolCallResult) {
		t.Errorf("the client tool's call got a result from the server: %s", types(events))
	}
	// The model was offered the agent's tools, then the client's.
	var names []string
	for _, tool := range s.Model.Requests()[0].ToolConfig.Tools {
		if tool.ToolSpec != nil {
			names = append(names, tool.ToolSpec.Name)
		}
	}
	if len(names) < 2 || names[len(names)-1] != "show_chart" || slices.Index(names, "calculator") > slices.Index(names, "show_chart") {
		t.Errorf("the tools offered: %v", names)
	}

	w := c.send(nil, userMessage("u-x", "Anything else?"))
	if w.Code != 409 || !strings.Contains(w.Body.String(), "client_tool_pending") || !strings.Contains(w.Body.String(), "chart-1 (show_chart)") {
		t.Errorf("a message while the call waits: %d %s", w.Code, w.Body)
	}
	c.runs--
	pending := interruptsOf(t, a.transcript(t, "", c.thread).body["interrupts"])
	if len(pending) != 1 || pending[0]["kind"] != agent.KindClientTool {
		t.Errorf("GET lists %v", pending)
	}
	if r := a.respond(t, "", c.thread, approved("chart-1", true)); r.status != 400 || !strings.Contains(string(r.raw), "may only be denied") {
		t.Errorf("POST /chat approving the call: %d %s", r.status, r.raw)
	}

	calls := s.Model.Calls()
	s.Model.Enqueue(conversetest.Text("Amazon is up."))
	events = c.run(nil, toolMessage("tool-1", "chart-1", "shown: AMZN 190"))
	if s.Model.Calls() != calls+1 || strings.Contains(types(events), agui.EventToolCallResult) || outcomeOf(events)["type"] != "success" {
		t.Errorf("the result's run: %s, %d model calls", types(events), s.Model.Calls()-calls)
	}
	got := s.Model.Requests()[calls].Messages
	if last, _ := json.Marshal(got[len(got)-1]); !strings.Contains(string(last), `"toolUseId":"chart-1"`) || !strings.Contains(string(last), "shown: AMZN 190") {
		t.Errorf("the model saw %s", last)
	}
	// The server keeps the client's id with its result: the whole thread,
	// the tool message under the client's id, goes on.
	s.Model.Enqueue(conversetest.Text("Bye."))
	c.run(nil, userMessage("u-2", "Thanks"))
	msgs := transcriptOf(t, s, "", c.thread)
	if err := agent.ValidateHistory(msgs); err != nil {
		t.Error(err)
	}
	if r := msgs[2].Content[0].ToolResult; r == nil || r.MessageID != "tool-1" || r.Status != agent.ToolSuccess {
		t.Errorf("the stored result %+v", msgs[2])
	}

	// POST /chat denies a waiting call; so does a run whose resume entry
	// cancels it, beside a new message.
	for _, deny := range []string{"chat", "agui"} {
		d := &client{t: t, s: s, thread: "client-tools-denied-" + deny, tools: []agui.Tool{chart}}
		s.Model.Enqueue(conversetest.ToolUse("chart-2", "show_chart", map[string]string{"symbol": "AMZN"}), conversetest.Text("As you wish."))
		d.run(nil, userMessage("u-1", "Show me Amazon"))
		if deny == "chat" {
			if r := a.respond(t, "", d.thread, approved("chart-2", false)); r.status != 200 {
				t.Fatalf("POST /chat denying the call: %d %s", r.status, r.raw)
			}
		} else {
			d.run([]agui.ResumeEntry{{InterruptID: "chart-2", Status: "cancelled"}}, userMessage("u-2", "Never mind"))
		}
		stored := transcriptOf(t, s, "", d.thread)
		if r := stored[2].Content[0].ToolResult; r == nil || r.Status != agent.ToolError {
			t.Errorf("%s: the denied call's result %+v", deny, stored[2])
		}
		if err := agent.ValidateHistory(stored); err != nil {
			t.Error(err)
		}
	}
}

// TestAGUIApprovalBeforeClientTools: when one answer of the model both
// needs an approval and calls a client tool, the run ends with the
// interrupt; the run that resolves it reports the client's call, without
// calling the model; the client's result then continues the turn.
func TestAGUIApprovalBeforeClientTools(t *testing.T) {
	s := testkit.Start(t, hitl)
	c := &client{t: t, s: s, thread: "both", tools: []agui.Tool{chart}}
	s.Model.Enqueue(conversetest.ToolUse("calc-1", "calculator", map[string]string{"expression": "190*2"}).WithToolUse("chart-1", "show_chart", map[string]string{"symbol": "AMZN"}))
	out := outcomeOf(c.run(nil, userMessage("u-1", "Chart Amazon and double its price")))
	if out["type"] != "interrupt" || len(out["interrupts"].([]any)) != 1 || out["interrupts"].([]any)[0].(map[string]any)["id"] != "calc-1" {
		t.Fatalf("outcome %v", out)
	}
	calls := s.Model.Calls()
	events := c.run([]agui.ResumeEntry{{InterruptID: "calc-1", Status: "resolved"}})
	if out := outcomeOf(events); out["type"] != "success" || fmt.Sprint(out["pendingToolCallIds"]) != "[chart-1]" || s.Model.Calls() != calls {
		t.Fatalf("the resolving run: outcome %v, %d model calls", out, s.Model.Calls()-calls)
	}
	if r := nth(t, events, agui.EventToolCallResult, 0); r["toolCallId"] != "calc-1" || !strings.Contains(fmt.Sprint(r["content"]), `"result":380`) {
		t.Errorf("the approved tool's result %v", r)
	}
	s.Model.Enqueue(conversetest.Text("Done: 380."))
	events = c.run(nil, toolMessage("tool-1", "chart-1", "shown"))
	if outcomeOf(events)["type"] != "success" || s.Model.Calls() != calls+1 {
		t.Fatalf("the result's run: %s", types(events))
	}
	msgs := transcriptOf(t, s, "", c.thread)
	if err := agent.ValidateHistory(msgs); err != nil {
		t.Error(err)
	}
	if len(msgs) != 4 || len(msgs[2].Content) != 2 {
		t.Errorf("the stored thread %+v", msgs)
	}
	// The tool messages of one answer may come in any order.
	k := slices.IndexFunc(c.msgs, func(m agui.Message) bool { return m.ID == "tool-1" })
	c.msgs[k-1], c.msgs[k] = c.msgs[k], c.msgs[k-1]
	s.Model.Enqueue(conversetest.Text("Bye."))
	c.run(nil, userMessage("u-2", "Thanks"))
}

// TestAGUIContext: a run's context reaches the model in the turn's user
// message, and the session never stores it.
func TestAGUIContext(t *testing.T) {
	s := testkit.Start(t, testkit.Options{})
	s.Model.Enqueue(conversetest.Text("You are on the pricing page."))
	in := agui.RunAgentInput{ThreadID: "ctx", RunID: "r1", Messages: []agui.Message{userMessage("u-1", "Where am I?")}, Context: []agui.Context{{Description: "the page the person has open", Value: "/pricing"}}}
	if w := aguiRun(t, s, "", in); w.Code != 200 {
		t.Fatal(w.Body)
	}
	got := s.Model.Requests()[0].Messages
	if text := got[len(got)-1].Text(); !strings.Contains(text, "the page the person has open: /pricing") || !strings.HasSuffix(text, "Where am I?") {
		t.Errorf("the model saw %q", text)
	}
	for _, m := range transcriptOf(t, s, "", "ctx") {
		if b, _ := json.Marshal(m); strings.Contains(string(b), "/pricing") {
			t.Errorf("the session stored the context: %s", b)
		}
	}
}

// TestAGUIState: a run starts with the agent state (STATE_SNAPSHOT), and
// a tool's change to it comes as a STATE_DELTA that applies to it.
func TestAGUIState(t *testing.T) {
	s := testkit.Start(t, hitl)
	c := &client{t: t, s: s, thread: "state"}
	s.Model.Enqueue(
		conversetest.ToolUse("rem-1", "remember", map[string]string{"key": "city", "value": "Lisbon"}),
		conversetest.Text("Noted."),
	)
	events := c.run(nil, userMessage("u-1", "I live in Lisbon"))
	if got := types(events); !strings.HasPrefix(got, "RUN_STARTED STATE_SNAPSHOT") || !strings.Contains(got, "TOOL_CALL_RESULT STATE_DELTA") {
		t.Fatalf("events %s", got)
	}
	delta := fmt.Sprint(nth(t, events, agui.EventStateDelta, 0)["delta"])
	if !strings.Contains(delta, "op:add") || !strings.Contains(delta, "path:/memory:city") || !strings.Contains(delta, "Lisbon") {
		t.Errorf("STATE_DELTA %s", delta)
	}
	s.Model.Enqueue(conversetest.Text("Hello."))
	events = c.run(nil, userMessage("u-2", "Hi"))
	if snap := fmt.Sprint(nth(t, events, agui.EventStateSnapshot, 0)["snapshot"]); !strings.Contains(snap, "Lisbon") {
		t.Errorf("the next run's STATE_SNAPSHOT %s", snap)
	}
}

// TestAGUIResync: a client that missed the end of a turn, as when a run's
// stream broke off after its commit, and sends a new message gets the
// thread as the server holds it (MESSAGES_SNAPSHOT) before the new run.
func TestAGUIResync(t *testing.T) {
	s := testkit.Start(t, testkit.Options{})
	s.Model.Enqueue(conversetest.Text("First answer."), conversetest.Text("Second answer."))
	first := []agui.Message{userMessage("u-1", "One")}
	if w := aguiRun(t, s, "", agui.RunAgentInput{ThreadID: "resync", RunID: "r1", Messages: first}); w.Code != 200 {
		t.Fatal(w.Body)
	}
	// The client never saw "First answer." (m-1).
	events := aguiEvents(t, aguiRun(t, s, "", agui.RunAgentInput{ThreadID: "resync", RunID: "r2", Messages: append(first, userMessage("u-2", "Two"))}))
	if got := types(events); !strings.HasPrefix(got, "RUN_STARTED MESSAGES_SNAPSHOT STATE_SNAPSHOT TEXT_MESSAGE_START") {
		t.Fatalf("events %s", got)
	}
	var ids []string
	for _, m := range nth(t, events, agui.EventMessagesSnapshot, 0)["messages"].([]any) {
		ids = append(ids, m.(map[string]any)["id"].(string))
	}
	if strings.Join(ids, " ") != "u-1 m-1 u-2" {
		t.Errorf("the snapshot's messages %v", ids)
	}
	if e := nth(t, events, agui.EventTextMessageStart, 0); e["messageId"] != "m-3" {
		t.Errorf("the new answer %v", e)
	}
	msgs := transcriptOf(t, s, "", "resync")
	if len(msgs) != 4 || msgs[2].ID != "u-2" {
		t.Errorf("the stored thread %+v", msgs)
	}
}

// TestAGUIExpiredInterrupt: an interrupt past INTERRUPT_TTL counts as
// denied, whatever the resume entry says, as on POST /chat.
func TestAGUIExpiredInterrupt(t *testing.T) {
	s := testkit.Start(t, testkit.Options{Env: map[string]string{"APPROVAL_TOOLS": "calculator", "INTERRUPT_TTL": "1s"}})
	c := &client{t: t, s: s, thread: "expiring"}
	s.Model.Enqueue(conversetest.ToolUse("calc-1", "calculator", map[string]string{"expression": "6*7"}))
	in := outcomeOf(c.run(nil, userMessage("u-1", "What is 6*7?")))["interrupts"].([]any)[0].(map[string]any)
	at, err := time.Parse(time.RFC3339, in["expiresAt"].(string))
	if err != nil || time.Until(at) > 2*time.Second {
		t.Fatalf("expiresAt %v with INTERRUPT_TTL 1s", in["expiresAt"])
	}
	time.Sleep(time.Until(at) + 10*time.Millisecond)
	s.Model.Enqueue(conversetest.Text("Too late."))
	events := c.run([]agui.ResumeEntry{{InterruptID: "calc-1", Status: "resolved"}})
	if r := nth(t, events, agui.EventToolCallResult, 0); !strings.Contains(fmt.Sprint(r["content"]), "expired") {
		t.Errorf("the expired approval's result %v", r)
	}
}

// TestAGUIClientToolAfterAnApproval: a run that resolves an approval
// offers the client's tools to the rest of its turn, whose model may call
// one: the run ends with its call pending. The resume's first step, its
// commit, once dropped the request's tools before the model was called
// again, and the call came back as a tool the agent does not have.
func TestAGUIClientToolAfterAnApproval(t *testing.T) {
	s := testkit.Start(t, hitl)
	c := &client{t: t, s: s, thread: "approval-then-chart", tools: []agui.Tool{chart}}
	s.Model.Enqueue(conversetest.ToolUse("calc-1", "calculator", map[string]string{"expression": "6*7"}))
	events := c.run(nil, userMessage("u-1", "Compute, then chart it"))
	if out := outcomeOf(events); out["type"] != "interrupt" {
		t.Fatalf("outcome %v", out)
	}
	s.Model.Enqueue(conversetest.ToolUse("chart-1", "show_chart", map[string]string{"symbol": "AMZN"}))
	events = c.run([]agui.ResumeEntry{{InterruptID: "calc-1", Status: "resolved"}})
	if out := outcomeOf(events); out["type"] != "success" || fmt.Sprint(out["pendingToolCallIds"]) != "[chart-1]" {
		t.Errorf("the resumed run's outcome %v: %s", out, types(events))
	}
	reqs := s.Model.Requests()
	offered := false
	for _, tool := range reqs[len(reqs)-1].ToolConfig.Tools {
		offered = offered || tool.ToolSpec != nil && tool.ToolSpec.Name == "show_chart"
	}
	if !offered {
		t.Error("the resumed turn's model call was not offered the client's tool")
	}
}
