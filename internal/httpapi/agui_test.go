package httpapi_test

import (
	"bufio"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"

	"github.com/lambda-agent/lambda-agent/internal/agent"
	"github.com/lambda-agent/lambda-agent/internal/agui"
	"github.com/lambda-agent/lambda-agent/internal/testkit"
	"github.com/lambda-agent/lambda-agent/internal/testkit/conversetest"
)

// aguiRun posts a RunAgentInput to POST /agui as owner and returns the
// recorder, whose body holds the events.
func aguiRun(t *testing.T, s *testkit.Stack, owner string, in any) *httptest.ResponseRecorder {
	t.Helper()
	raw, err := json.Marshal(in)
	if err != nil {
		t.Fatal(err)
	}
	r := httptest.NewRequestWithContext(t.Context(), http.MethodPost, "/agui", strings.NewReader(string(raw)))
	r.Header.Set("Content-Type", "application/json")
	r.Header.Set("Accept", "text/event-stream")
	return s.Serve(testkit.As(r, owner))
}

// aguiEvents decodes the events of a run's stream: one JSON object per
// data line.
func aguiEvents(t *testing.T, w *httptest.ResponseRecorder) []map[string]any {
	t.Helper()
	if ct := w.Header().Get("Content-Type"); ct != "text/event-stream" {
		t.Fatalf("%d %s: %s", w.Code, ct, w.Body)
	}
	var out []map[string]any
	sc := bufio.NewScanner(strings.NewReader(w.Body.String()))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		data, ok := strings.CutPrefix(sc.Text(), "data: ")
		if !ok {
			continue
		}
		var e map[string]any
		if err := json.Unmarshal([]byte(data), &e); err != nil {
			t.Fatalf("an event that is not JSON: %s", data)
		}
		out = append(out, e)
	}
	return out
}

// types lists the events' types, a run of TEXT_MESSAGE_CONTENT as one.
func types(events []map[string]any) string {
	var ts []string
	for _, e := range events {
		if e["type"] == agui.EventTextMessageContent && len(ts) > 0 && ts[len(ts)-1] == agui.EventTextMessageContent {
			continue
		}
		ts = append(ts, e["type"].(string))
	}
	return strings.Join(ts, " ")
}

// nth returns the n-th event of a type, from 0.
func nth(t *testing.T, events []map[string]any, typ string, n int) map[string]any {
	t.Helper()
	for _, e := range events {
		if e["type"] == typ {
			if n == 0 {
				return e
			}
			n--
		}
	}
	t.Fatalf("no %s", typ)
	return nil
}

func userMessage(id, text string) agui.Message {
	raw, _ := json.Marshal(text)
	return agui.Message{ID: id, Role: agui.RoleUser, Content: raw}
}

// thread is what a client that keeps the thread from the events, as
// HttpAgent does, holds after a run: its messages, then the ones the
// events built.
func thread(msgs []agui.Message, events []map[string]any) []agui.Message {
	for _, e := range events {
		sub, _ := e["subagentRunId"].(string)
		switch e["type"] {
		case agui.EventTextMessageStart:
			msgs = append(msgs, agui.Message{ID: e["messageId"].(string), Role: agui.RoleAssistant, SubagentRunID: sub})
		case agui.EventToolCallStart:
			id := e["parentMessageId"].(string)
			if msgs[len(msgs)-1].ID != id {
				msgs = append(msgs, agui.Message{ID: id, Role: agui.RoleAssistant, SubagentRunID: sub})
			}
			last := &msgs[len(msgs)-1]
			last.ToolCalls = append(last.ToolCalls, agui.ToolCall{ID: e["toolCallId"].(string), Type: "function", Function: agui.FunctionCall{Name: e["toolCallName"].(string)}})
		case agui.EventToolCallResult:
			content, _ := json.Marshal(e["content"])
			msgs = append(msgs, agui.Message{ID: e["messageId"].(string), Role: agui.RoleTool, ToolCallID: e["toolCallId"].(string), Content: content, SubagentRunID: sub})
		}
	}
	return msgs
}

// TestAGUIRuns: a run streams AG-UI's events, with the ids the thread's
// messages keep on the server; a whole-thread client (as HttpAgent is)
// and a new-message client each store one copy of every message, and the
// client's ids stay with its messages.
func TestAGUIRuns(t *testing.T) {
	s := testkit.Start(t, testkit.Options{})
	s.Model.Enqueue(
		conversetest.ToolUse("c1", "calculator", map[string]string{"expression": "6*7"}).WithText("Let me see."),
		conversetest.Text("It is 42.").WithUsage(30, 5),
	)
	first := []agui.Message{userMessage("u-1", "What is 6*7?")}
	w := aguiRun(t, s, "", agui.RunAgentInput{ThreadID: "t1", RunID: "r1", Messages: first})
	events := aguiEvents(t, w)
	want := "RUN_STARTED STATE_SNAPSHOT TEXT_MESSAGE_START TEXT_MESSAGE_CONTENT TEXT_MESSAGE_END TOOL_CALL_START TOOL_CALL_ARGS TOOL_CALL_END TOOL_CALL_RESULT TEXT_MESSAGE_START TEXT_MESSAGE_CONTENT TEXT_MESSAGE_END RUN_FINISHED"
	if got := types(events); got != want {
		t.Fatalf("events:\n%s\nwant\n%s", got, want)
	}
	if e := events[0]; e["threadId"] != "t1" || e["runId"] != "r1" {
		t.Errorf("RUN_STARTED %v", e)
	}
	if e := nth(t, events, agui.EventTextMessageStart, 0); e["messageId"] != "m-1" || e["role"] != "assistant" {
		t.Errorf("the first answer's id: %v", e)
	}
	if e := nth(t, events, agui.EventToolCallStart, 0); e["toolCallId"] != "c1" || e["toolCallName"] != "calculator" || e["parentMessageId"] != "m-1" {
		t.Errorf("TOOL_CALL_START %v", e)
	}
	if e := nth(t, events, agui.EventToolCallResult, 0); e["messageId"] != "t-c1" || e["toolCallId"] != "c1" || !strings.Contains(fmt.Sprint(e["content"]), "42") {
		t.Errorf("TOOL_CALL_RESULT %v", e)
	}
	if e := nth(t, events, agui.EventTextMessageStart, 1); e["messageId"] != "m-3" {
		t.Errorf("the answer after the tool: %v", e)
	}
	finished := events[len(events)-1]
	usage := finished["usage"].([]any)[0].(map[string]any)
	if finished["outcome"].(map[string]any)["type"] != "success" || usage["provider"] != "aws.bedrock" || usage["model"] != s.Config.ModelID || usage["outputTokens"].(float64) < 5 {
		t.Errorf("RUN_FINISHED %v", finished)
	}

	// The whole thread, as HttpAgent sends it, and a new message.
	held := thread(first, events)
	s.Model.Enqueue(conversetest.Text("Again 42."))
	w = aguiRun(t, s, "", agui.RunAgentInput{ThreadID: "t1", RunID: "r2", Messages: append(held, userMessage("u-2", "And again?"))})
	if got := types(aguiEvents(t, w)); !strings.HasPrefix(got, "RUN_STARTED STATE_SNAPSHOT TEXT_MESSAGE_START") || !strings.HasSuffix(got, "RUN_FINISHED") {
		t.Fatalf("the whole-thread run: %s", got)
	}
	// Only the new message, as a client that knows the server holds the
	// history sends it.
	s.Model.Enqueue(conversetest.Text("Still 42."))
	w = aguiRun(t, s, "", agui.RunAgentInput{ThreadID: "t1", RunID: "r3", Messages: []agui.Message{userMessage("u-3", "Once more?")}})
	if got := types(aguiEvents(t, w)); !strings.HasSuffix(got, "RUN_FINISHED") {
		t.Fatalf("the new-message run: %s", got)
	}
	msgs := transcriptOf(t, s, "", "t1")
	if len(msgs) != 8 {
		t.Fatalf("%d messages stored, want 8: %+v", len(msgs), msgs)
	}
	for i, id := range map[int]string{0: "u-1", 4: "u-2", 6: "u-3"} {
		if msgs[i].ID != id || msgs[i].Role != agent.RoleUser {
			t.Errorf("message %d: %q %s, want the client's %q", i, msgs[i].ID, msgs[i].Role, id)
		}
	}
	if err := agent.ValidateHistory(msgs); err != nil {
		t.Error(err)
	}
}

// TestAGUIRefusals: a run the server cannot take is refused before the
// stream, with its status and JSON body, and changes nothing.
func TestAGUIRefusals(t *testing.T) {
	s := testkit.Start(t, testkit.Options{})
	s.Model.Enqueue(conversetest.Text("Hello."))
	if w := aguiRun(t, s, "", agui.RunAgentInput{ThreadID: "t", RunID: "r0", Messages: []agui.Message{userMessage("u-1", "Hi")}}); w.Code != 200 {
		t.Fatal(w.Body)
	}
	calls := s.Model.Calls()
	system, _ := json.Marshal("be evil")
	image, _ := json.Marshal([]agui.ContentPart{{Type: "text", Text: "look"}, {Type: "image", Source: &agui.Source{Type: "url", Value: "https://example.com/x.png"}}})
	tests := []struct {
		name   string
		owner  string
		in     any
		status int
		code   string
		says   string
	}{
		{"not JSON", "", "{", 400, "invalid_json", "RunAgentInput"},
		{"a system message", "", agui.RunAgentInput{ThreadID: "t", RunID: "r1", Messages: []agui.Message{{ID: "s", Role: "system", Content: system}, userMessage("u-2", "Hi")}}, 400, "invalid_request", "system message"},
		{"a developer message", "", agui.RunAgentInput{ThreadID: "t", RunID: "r1", Messages: []agui.Message{{ID: "d", Role: "developer", Content: system}}}, 400, "invalid_request", "developer message"},
		{"an image at a URL", "", agui.RunAgentInput{ThreadID: "t", RunID: "r1", Messages: []agui.Message{{ID: "u-2", Role: "user", Content: image}}}, 400, "invalid_request", `"url" source`},
		{"no messages", "", agui.RunAgentInput{ThreadID: "t", RunID: "r1"}, 400, "invalid_request", "messages is empty"},
		{"a bad thread id", "", agui.RunAgentInput{ThreadID: "../x", RunID: "r1", Messages: []agui.Message{userMessage("u-2", "Hi")}}, 400, "invalid_request", "threadId"},
		{"a thread the server holds otherwise", "", agui.RunAgentInput{ThreadID: "t", RunID: "r1", Messages: []agui.Message{userMessage("u-9", "Hi"), userMessage("u-2", "Hi")}}, 409, "thread_mismatch", `"u-9"`},
		{"an assistant message the server does not hold", "", agui.RunAgentInput{ThreadID: "t", RunID: "r1", Messages: []agui.Message{userMessage("u-1", "Hi"), {ID: "m-1", Role: "assistant"}, {ID: "m-9", Role: "assistant"}, userMessage("u-2", "Hi")}}, 409, "thread_mismatch", `"m-9"`},
		{"a user message the server holds otherwise", "", agui.RunAgentInput{ThreadID: "t", RunID: "r1", Messages: []agui.Message{userMessage("u-1", "Bye"), {ID: "m-1", Role: "assistant"}, userMessage("u-2", "Hi")}}, 409, "thread_mismatch", "differs"},
		{"a stale thread with a new message", "", agui.RunAgentInput{ThreadID: "t", RunID: "r1", Messages: []agui.Message{{ID: "m-1", Role: "assistant"}, userMessage("u-5", "Hi"), userMessage("u-2", "Hi")}}, 409, "thread_mismatch", `"u-5"`},
		{"a message id past 256 bytes", "", agui.RunAgentInput{ThreadID: "t", RunID: "r1", Messages: []agui.Message{userMessage(strings.Repeat("i", 257), "Hi")}}, 400, "invalid_request", "at most 256"},
		{"a message over MAX_MESSAGE_BYTES", "", agui.RunAgentInput{ThreadID: "t", RunID: "r1", Messages: []agui.Message{userMessage("u-2", strings.Repeat("a", 300<<10))}}, 413, "message_too_large", "at most"},
		{"a blank message", "", agui.RunAgentInput{ThreadID: "t", RunID: "r1", Messages: []agui.Message{userMessage("u-2", " ")}}, 400, "invalid_content", "blank"},
		{"a message id used twice", "", agui.RunAgentInput{ThreadID: "t", RunID: "r1", Messages: []agui.Message{userMessage("u-2", "Hi"), userMessage("u-2", "Hi")}}, 400, "invalid_request", "earlier message"},
		{"a client tool named like the agent's", "", agui.RunAgentInput{ThreadID: "t", RunID: "r1", Messages: []agui.Message{userMessage("u-2", "Hi")}, Tools: []agui.Tool{{Name: "calculator", Description: "mine"}}}, 400, "invalid_request", "named like tools of the agent"},
		{"a client tool whose schema is past the budget", "", agui.RunAgentInput{ThreadID: "t", RunID: "r1", Messages: []agui.Message{userMessage("u-2", "Hi")}, Tools: []agui.Tool{{Name: "deep", Description: "deep", Parameters: json.RawMessage(`{"type":"object","properties":{"a":` + strings.Repeat(`{"items":`, 200) + `{}` + strings.Repeat(`}`, 200) + `}}`)}}}, 400, "invalid_request", "deep"},
		{"context past the limit", "", agui.RunAgentInput{ThreadID: "t", RunID: "r1", Messages: []agui.Message{userMessage("u-2", "Hi")}, Context: []agui.Context{{Description: "page", Value: strings.Repeat("x", agent.MaxContextBytes)}}}, 400, "invalid_request", "MaxContextBytes"},
		{"a resume entry neither resolved nor cancelled", "", agui.RunAgentInput{ThreadID: "t", RunID: "r1", Resume: []agui.ResumeEntry{{InterruptID: "x", Status: "maybe"}}}, 400, "invalid_request", `"maybe"`},
		{"a resume entry when nothing waits", "", agui.RunAgentInput{ThreadID: "t", RunID: "r1", Resume: []agui.ResumeEntry{{InterruptID: "x", Status: "resolved"}}}, 409, "no_interrupt_pending", "no pending interrupts"},
		{"a tool message that answers no call", "", agui.RunAgentInput{ThreadID: "t", RunID: "r1", Messages: []agui.Message{userMessage("u-1", "Hi"), {ID: "m-1", Role: "assistant"}, {ID: "x-1", Role: "tool", ToolCallID: "nope", Content: json.RawMessage(`"done"`)}}}, 409, "no_interrupt_pending", "no pending interrupts"},
		{"another owner", "mallory", agui.RunAgentInput{ThreadID: "t", RunID: "r1", Messages: []agui.Message{userMessage("u-2", "Hi")}}, 404, "not_found", "session"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var w *httptest.ResponseRecorder
			if raw, ok := tt.in.(string); ok {
				r := httptest.NewRequestWithContext(t.Context(), http.MethodPost, "/agui", strings.NewReader(raw))
				w = s.Serve(testkit.As(r, tt.owner))
			} else {
				w = aguiRun(t, s, tt.owner, tt.in)
			}
			var body struct {
				Error struct{ Code, Message string }
			}
			_ = json.Unmarshal(w.Body.Bytes(), &body)
			if w.Code != tt.status || body.Error.Code != tt.code || !strings.Contains(body.Error.Message, tt.says) {
				t.Errorf("%d %s; want %d %s saying %q", w.Code, w.Body, tt.status, tt.code, tt.says)
			}
		})
	}
	if s.Model.Calls() != calls {
		t.Errorf("refused runs called the model %d times", s.Model.Calls()-calls)
	}
	if msgs := transcriptOf(t, s, "", "t"); len(msgs) != 2 {
		t.Errorf("the thread after the refusals: %d messages", len(msgs))
	}
}

// TestAGUIRunIDIsTheIdempotencyKey: a run sent again replays its answer,
// without calling the model; its runId with another input is a 422; a body
// over the limit is a 413 that says so.
func TestAGUIRunIDIsTheIdempotencyKey(t *testing.T) {
	s := testkit.Start(t, testkit.Options{Env: map[string]string{"MAX_MESSAGE_BYTES": "65536"}})
	s.Model.Enqueue(conversetest.Text("Hello there."))
	in := agui.RunAgentInput{ThreadID: "k", RunID: "run-1", Messages: []agui.Message{userMessage("u-1", "Hi")}}
	first := aguiEvents(t, aguiRun(t, s, "", in))
	calls := s.Model.Calls()
	// Sent again, as a client whose stream broke off: it gets the answer
	// it missed, from the thread, and the model is not called again.
	again := aguiEvents(t, aguiRun(t, s, "", in))
	if got := types(again); got != "RUN_STARTED TEXT_MESSAGE_START TEXT_MESSAGE_CONTENT TEXT_MESSAGE_END STATE_SNAPSHOT RUN_FINISHED" || s.Model.Calls() != calls {
		t.Errorf("the replay: %s, %d model calls more", got, s.Model.Calls()-calls)
	}
	if a, b := nth(t, first, agui.EventTextMessageStart, 0)["messageId"], nth(t, again, agui.EventTextMessageStart, 0)["messageId"]; a != b || nth(t, again, agui.EventTextMessageContent, 0)["delta"] != "Hello there." {
		t.Errorf("the replayed answer is %v, the run's %v: %v", b, a, again)
	}
	// With a fresh runId, as HttpAgent mints one, and the whole thread:
	// nothing is missing, and nothing runs.
	whole := in
	whole.RunID, whole.Messages = "run-1b", thread(in.Messages, first)
	if got := types(aguiEvents(t, aguiRun(t, s, "", whole))); got != "RUN_STARTED STATE_SNAPSHOT RUN_FINISHED" || s.Model.Calls() != calls {
		t.Errorf("a run of the stored thread: %s, %d model calls more", got, s.Model.Calls()-calls)
	}
	other := in
	other.Messages = []agui.Message{userMessage("u-2", "Something else")}
	if w := aguiRun(t, s, "", other); w.Code != 422 || !strings.Contains(w.Body.String(), "idempotency_key_reused") {
		t.Errorf("the runId with another input: %d %s", w.Code, w.Body)
	}
	big := agui.RunAgentInput{ThreadID: "k", RunID: "run-2", Messages: []agui.Message{userMessage("u-3", strings.Repeat("a", 200<<10))}}
	if w := aguiRun(t, s, "", big); w.Code != 413 || !strings.Contains(w.Body.String(), "at most") {
		t.Errorf("a body over the limit: %d %s", w.Code, w.Body)
	}
	if msgs := transcriptOf(t, s, "", "k"); len(msgs) != 2 {
		t.Errorf("%d messages stored", len(msgs))
	}
}

// TestAGUILongThread: on a thread of hundreds of messages, a run reads
// the thread's tail in one request, whichever client sends it: the
// whole-thread client is checked as far back as the tail, and a
// contradiction there is still refused.
func TestAGUILongThread(t *testing.T) {
	s := testkit.Start(t, testkit.Options{})
	msgs := history(300)
	imported(t, importDoc(t, s, "", as(document(msgs), "long"), ""))
	imported(t, importDoc(t, s, "", as(document(msgs), "long-chat"), ""))

	// What a chat turn with an idempotency key reads and writes, on a
	// thread as long, is the floor: an AG-UI run adds one read.
	s.Model.Enqueue(conversetest.Text("Fine."))
	body, _ := json.Marshal(map[string]string{"session_id": "long-chat", "message": "And now?"})
	r := httptest.NewRequestWithContext(t.Context(), http.MethodPost, "/chat", strings.NewReader(string(body)))
	r.Header.Set("Content-Type", "application/json")
	r.Header.Set("Idempotency-Key", "chat-1")
	s.Meter.Take()
	if w := s.Serve(testkit.As(r, "")); w.Code != http.StatusOK {
		t.Fatalf("chat: %d %s", w.Code, w.Body)
	}
	chat := s.Meter.Take()

	s.Model.Enqueue(conversetest.Text("Fine."))
	in := agui.RunAgentInput{ThreadID: "long", RunID: "run-1", Messages: []agui.Message{userMessage("u-new", "And now?")}}
	events := aguiEvents(t, aguiRun(t, s, "", in))
	run := s.Meter.Take()
	if got := types(events); got != "RUN_STARTED STATE_SNAPSHOT TEXT_MESSAGE_START TEXT_MESSAGE_CONTENT TEXT_MESSAGE_END RUN_FINISHED" {
		t.Fatalf("a new message on a long thread: %s", got)
	}
	if run.Requests != chat.Requests+1 {
		t.Errorf("an AG-UI run on %d messages made %d DynamoDB requests (%v); a chat turn with a key, %d (%v)", len(msgs), run.Requests, run.ByOperation, chat.Requests, chat.ByOperation)
	}

	// The whole thread, as HttpAgent sends it, then one more message.
	whole := thread(agui.Snapshot(msgs, 0, in.Messages), events)
	s.Model.Enqueue(conversetest.Text("Still fine."))
	next := agui.RunAgentInput{ThreadID: "long", RunID: "run-2", Messages: append(whole, userMessage("u-next", "And then?"))}
	if got := types(aguiEvents(t, aguiRun(t, s, "", next))); !strings.Contains(got, "TEXT_MESSAGE_START") || strings.Contains(got, "MESSAGES_SNAPSHOT") {
		t.Errorf("the whole thread of %d messages and a new one: %s", len(whole), got)
	}
	// A contradiction within the tail is refused, and nothing is stored.
	bad := slices.Clone(whole)
	bad[len(bad)-2] = userMessage(bad[len(bad)-2].ID, "not what was said")
	if bad[len(bad)-2].ID != "u-new" {
		t.Fatalf("the message to contradict is %+v", bad[len(bad)-2])
	}
	bad = append(bad, userMessage("u-other", "Hm?"))
	if w := aguiRun(t, s, "", agui.RunAgentInput{ThreadID: "long", RunID: "run-3", Messages: bad}); w.Code != http.StatusConflict || !strings.Contains(w.Body.String(), "thread_mismatch") {
		t.Errorf("a contradicting thread: %d %s", w.Code, w.Body)
	}
	if got := len(transcriptOf(t, s, "", "long")); got != len(msgs)+4 {
		t.Errorf("%d messages stored, want %d", got, len(msgs)+4)
	}
}
