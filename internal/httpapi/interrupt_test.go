package httpapi_test

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/lambda-agent/lambda-agent/internal/testkit/conversetest"
)

// approvals is the environment of a deployment whose calculator needs
// approval, with ask_user on.
var approvals = map[string]string{"APPROVAL_TOOLS": "calculator", "TOOLS": "calculator,current_time,ask_user"}

// pause has the model ask for the calculator with each expression, in one
// answer, and sends a message to session id: the turn pauses.
func (a *api) pause(t *testing.T, owner, id string, expressions ...string) response {
	t.Helper()
	reply := conversetest.Text("Let me compute that.")
	for i, e := range expressions {
		reply = reply.WithToolUse("calc-"+string(rune('a'+i)), "calculator", map[string]string{"expression": e})
	}
	a.model.Enqueue(reply)
	r := a.chat(t, owner, id, "compute")
	if r.status != 200 || r.body["stop_reason"] != "interrupt" {
		t.Fatalf("the turn did not pause: %d %s", r.status, r.raw)
	}
	return r
}

// respond posts responses for session id.
func (a *api) respond(t *testing.T, owner, id string, responses ...map[string]any) response {
	t.Helper()
	return a.invoke(t, request{route: "chat-new.json", owner: owner, body: map[string]any{"session_id": id, "responses": responses}})
}

func approved(id string, yes bool) map[string]any {
	return map[string]any{"interrupt_id": id, "approve": yes}
}

func interruptsOf(t *testing.T, v any) []map[string]any {
	t.Helper()
	raw, _ := json.Marshal(v)
	var out []map[string]any
	if err := json.Unmarshal(raw, &out); err != nil {
		t.Fatalf("interrupts %s: %v", raw, err)
	}
	return out
}

func TestApprovalPausesTheTurnUntilAResponse(t *testing.T) {
	a := newAPI(t, approvals)
	paused := a.pause(t, "", "approve-me", "6*7", "2+2")
	ins := interruptsOf(t, paused.body["interrupts"])
	if len(ins) != 2 || ins[0]["id"] != "calc-a" || ins[0]["tool"] != "calculator" || ins[0]["kind"] != "approval" ||
		ins[0]["reason"] == "" || ins[0]["expires_at"] == nil || ins[0]["input"].(map[string]any)["expression"] != "6*7" {
		t.Fatalf("interrupts %v", ins)
	}
	if !strings.Contains(a.logs.String(), `"stop_reason":"interrupt","interrupts":2`) {
		t.Errorf("the request's line does not count the interrupts:\n%s", a.logs.String())
	}
	before := a.transcript(t, "", "approve-me")
	if got := interruptsOf(t, before.body["interrupts"]); len(got) != 2 || got[1]["id"] != "calc-b" {
		t.Errorf("GET shows interrupts %v", got)
	}
	if n := len(messagesOf(before)); n != 2 {
		t.Errorf("%d messages stored; want the input and the answer with its tool uses", n)
	}

	// A message while the turn waits is refused, and so are responses that
	// leave an interrupt unanswered or name one that is not pending.
	busy := a.chat(t, "", "approve-me", "hello?")
	if busy.status != 409 || busy.errorCode() != "interrupt_pending" {
		t.Errorf("message while pending: %d %s", busy.status, busy.raw)
	}
	if d := busy.body["error"].(map[string]any)["details"].(map[string]any); len(interruptsOf(t, d["interrupts"])) != 2 {
		t.Errorf("the 409 does not list the interrupts: %s", busy.raw)
	}
	partial := a.respond(t, "", "approve-me", approved("calc-a", true))
	unknown := a.respond(t, "", "approve-me", approved("calc-a", true), approved("calc-b", true), approved("calc-z", true))
	for _, tt := range []struct {
		r    response
		want map[string]any
	}{
		{partial, map[string]any{"missing": []any{"calc-b"}, "unknown": []any{}, "problems": []any{}}},
		{unknown, map[string]any{"missing": []any{}, "unknown": []any{"calc-z"}, "problems": []any{}}},
	} {
		if tt.r.status != 400 || tt.r.errorCode() != "invalid_responses" {
			t.Errorf("%d %s", tt.r.status, tt.r.raw)
			continue
		}
		if diff := cmp.Diff(tt.want, tt.r.body["error"].(map[string]any)["details"]); diff != "" {
			t.Errorf("details (-want +got):\n%s", diff)
		}
	}
	if after := a.transcript(t, "", "approve-me"); after.raw != before.raw {
		t.Errorf("refused requests changed the session:\n%s\n%s", before.raw, after.raw)
	}
	if a.model.Calls() != 1 {
		t.Errorf("%d model calls; the refused requests made some", a.model.Calls())
	}

	// Approving one and denying the other runs only the approved tool, and
	// the model goes on with both results.
	a.model.Enqueue(conversetest.Text("6*7 is 42; the other was denied."))
	done := a.invoke(t, request{route: "chat-new.json", body: map[string]any{"session_id": "approve-me", "responses": []any{
		approved("calc-a", true),
		map[string]any{"interrupt_id": "calc-b", "approve": false, "message": "not needed"},
	}}})
	if done.status != 200 || done.body["stop_reason"] != "end_turn" || done.body["text"] != "6*7 is 42; the other was denied." {
		t.Fatalf("resume: %d %s", done.status, done.raw)
	}
	msgs := messagesOf(done)
	results := msgs[0].(map[string]any)["content"].([]any)
	ok := results[0].(map[string]any)["toolResult"].(map[string]any)
	denied := results[1].(map[string]any)["toolResult"].(map[string]any)
	if ok["status"] != "success" || ok["content"].([]any)[0].(map[string]any)["json"].(map[string]any)["result"] != 42.0 {
		t.Errorf("approved result %v", ok)
	}
	if text := denied["content"].([]any)[0].(map[string]any)["text"].(string); denied["status"] != "error" || !strings.Contains(text, "denied") || !strings.Contains(text, "not needed") {
		t.Errorf("denied result %v", denied)
	}
	if len(msgs) != 2 || done.body["metrics"].(map[string]any)["tool_calls"] != 1.0 {
		t.Errorf("messages %d, metrics %v", len(msgs), done.body["metrics"])
	}
	final := a.transcript(t, "", "approve-me")
	if got := interruptsOf(t, final.body["interrupts"]); len(got) != 0 || len(messagesOf(final)) != 4 {
		t.Errorf("after the resume: interrupts %v, %d messages", got, len(messagesOf(final)))
	}
	again := a.respond(t, "", "approve-me", approved("calc-a", true), approved("calc-b", true))
	if again.status != 409 || again.errorCode() != "no_interrupt_pending" {
		t.Errorf("a second resume: %d %s", again.status, again.raw)
	}
}

func TestDenyPendingSendsTheMessage(t *testing.T) {
	a := newAPI(t, approvals)
	a.pause(t, "", "moving-on", "1+1")
	a.model.Enqueue(conversetest.Text("Sure, something else."))
	r := a.invoke(t, request{route: "chat-new.json", body: map[string]any{"session_id": "moving-on", "message": "something else", "deny_pending": true}})
	if r.status != 200 {
		t.Fatalf("%d %s", r.status, r.raw)
	}
	first := messagesOf(r)[0].(map[string]any)["content"].([]any)
	denial := first[0].(map[string]any)["toolResult"].(map[string]any)
	if denial["status"] != "error" || !strings.Contains(denial["content"].([]any)[0].(map[string]any)["text"].(string), "new message") || first[1].(map[string]any)["text"] != "something else" {
		t.Errorf("first message %v", first)
	}
	if got := interruptsOf(t, a.transcript(t, "", "moving-on").body["interrupts"]); len(got) != 0 {
		t.Errorf("interrupts left %v", got)
	}
	// deny_pending on a session with nothing pending is a plain message.
	a.model.Enqueue(conversetest.Text("ok"))
	if r := a.invoke(t, request{route: "chat-new.json", body: map[string]any{"session_id": "moving-on", "message": "more", "deny_pending": true}}); r.status != 200 {
		t.Errorf("%d %s", r.status, r.raw)
	}
}

func TestAskUserThroughTheAPI(t *testing.T) {
	a := newAPI(t, approvals)
	a.model.Enqueue(
		conversetest.ToolUse("q", "ask_user", map[string]any{"question": "Which account?", "options": []string{"checking", "savings"}}),
		conversetest.Text("Moving it to savings."),
	)
	r := a.chat(t, "", "ask", "move my money")
	ins := interruptsOf(t, r.body["interrupts"])
	if r.status != 200 || len(ins) != 1 || ins[0]["kind"] != "question" || ins[0]["reason"] != "Which account?" {
		t.Fatalf("%d %s", r.status, r.raw)
	}
	bad := a.respond(t, "", "ask", approved("q", true))
	if bad.status != 400 || bad.errorCode() != "invalid_responses" || !strings.Contains(bad.errorMessage(), "question") {
		t.Errorf("approving a question: %d %s", bad.status, bad.raw)
	}
	done := a.respond(t, "", "ask", map[string]any{"interrupt_id": "q", "answer": "savings"})
	if done.status != 200 || done.body["text"] != "Moving it to savings." {
		t.Fatalf("%d %s", done.status, done.raw)
	}
	reqs := a.model.Requests()
	last := reqs[len(reqs)-1].Messages
	if got := last[len(last)-1].Content[0].ToolResult; got == nil || got.Content[0].Text != "savings" {
		t.Errorf("the model got %+v", last[len(last)-1])
	}
}

func TestResumeRequestsAreChecked(t *testing.T) {
	a := newAPI(t, approvals)
	a.pause(t, "", "checked", "3*3")
	for _, tt := range []struct {
		name string
		body any
		code string
		says string
	}{
		{"with a message", map[string]any{"session_id": "checked", "message": "hi", "responses": []any{approved("calc-a", true)}}, "invalid_request", "without a message"},
		{"with deny_pending", map[string]any{"session_id": "checked", "deny_pending": true, "responses": []any{approved("calc-a", true)}}, "invalid_request", "not both"},
		{"without a session", map[string]any{"responses": []any{approved("calc-a", true)}}, "invalid_request", "session_id"},
		{"empty", map[string]any{"session_id": "checked", "responses": []any{}}, "invalid_request", "empty"},
		{"unknown field", map[string]any{"session_id": "checked", "responses": []any{map[string]any{"interrupt_id": "calc-a", "approved": true}}}, "invalid_json", `"approved"`},
		{"approve not a bool", map[string]any{"session_id": "checked", "responses": []any{map[string]any{"interrupt_id": "calc-a", "approve": "yes"}}}, "invalid_json", "true or false"},
		{"not a list", map[string]any{"session_id": "checked", "responses": map[string]any{"calc-a": true}}, "invalid_json", "an array"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			r := a.invoke(t, request{route: "chat-new.json", body: tt.body})
			if r.status != 400 || r.errorCode() != tt.code || !strings.Contains(r.errorMessage(), tt.says) {
				t.Errorf("%d %s", r.status, r.raw)
			}
		})
	}
	if got := interruptsOf(t, a.transcript(t, "", "checked").body["interrupts"]); len(got) != 1 {
		t.Errorf("interrupts %v after refused requests", got)
	}
	// A structured prompt waits for the interrupts too.
	s := a.invoke(t, request{route: "structured.json", body: map[string]any{"session_id": "checked", "prompt": "p", "schema": map[string]any{"type": "object"}}})
	if s.status != 409 || s.errorCode() != "interrupt_pending" {
		t.Errorf("structured while pending: %d %s", s.status, s.raw)
	}
	// Responses to a session that never paused, or does not exist.
	a.model.Enqueue(conversetest.Text("hi"))
	a.chat(t, "", "plain", "hello")
	for _, id := range []string{"plain", "nobody-here"} {
		r := a.respond(t, "", id, approved("calc-a", true))
		if r.status != 409 && r.status != 404 || r.errorCode() != "no_interrupt_pending" && r.errorCode() != "not_found" {
			t.Errorf("%s: %d %s", id, r.status, r.raw)
		}
	}
}

func TestAnotherOwnerCannotSeeOrAnswerInterrupts(t *testing.T) {
	a := newAPI(t, approvals)
	a.pause(t, "alice", "alices", "5*5")
	if r := a.transcript(t, "mallory", "alices"); r.status != 404 {
		t.Errorf("GET by another owner: %d %s", r.status, r.raw)
	}
	if r := a.respond(t, "mallory", "alices", approved("calc-a", true)); r.status != 404 || r.errorCode() != "not_found" {
		t.Errorf("resume by another owner: %d %s", r.status, r.raw)
	}
	if got := interruptsOf(t, a.transcript(t, "alice", "alices").body["interrupts"]); len(got) != 1 {
		t.Errorf("alice's interrupts: %v", got)
	}
}

func TestResumeReplaysWithItsIdempotencyKey(t *testing.T) {
	a := newAPI(t, approvals)
	a.pause(t, "", "replayed", "7*6")
	a.model.Enqueue(conversetest.Text("42."))
	req := request{route: "chat-new.json", body: map[string]any{"session_id": "replayed", "responses": []any{approved("calc-a", true)}}, headers: map[string]string{"Idempotency-Key": "resume-1"}}
	first := a.invoke(t, req)
	second := a.invoke(t, req)
	if first.status != 200 || second.status != 200 {
		t.Fatalf("%d %s / %d %s", first.status, first.raw, second.status, second.raw)
	}
	if diff := cmp.Diff(first.body, second.body); diff != "" {
		t.Errorf("the replay differs (-first +second):\n%s", diff)
	}
	if len(messagesOf(second)) != 2 || a.model.Calls() != 2 {
		t.Errorf("%d messages replayed, %d model calls", len(messagesOf(second)), a.model.Calls())
	}
}

func TestStreamPausesAndResumes(t *testing.T) {
	a := newAPI(t, approvals)
	srv := a.streamServer(t)
	a.model.Enqueue(conversetest.Text("Computing.").WithToolUse("calc-s", "calculator", map[string]string{"expression": "9*9"}))
	evs := streamAll(t, srv, map[string]any{"session_id": "streamed", "message": "9*9?"}, nil)
	if got := names(evs); got != "start text tool_use interrupt done" {
		t.Fatalf("events %q", got)
	}
	if in := named(evs, "interrupt"); in["id"] != "calc-s" || in["tool"] != "calculator" || in["kind"] != "approval" {
		t.Errorf("interrupt event %v", in)
	}
	if done := named(evs, "done"); done["stop_reason"] != "interrupt" || len(interruptsOf(t, done["interrupts"])) != 1 {
		t.Errorf("done %v", done)
	}
	// A refused resume keeps its status: the stream starts only once the
	// request resumes the turn.
	if resp := stream(t, srv, map[string]any{"session_id": "streamed", "responses": []any{approved("calc-x", true)}}, nil); resp.StatusCode != 400 || resp.Header.Get("Content-Type") != "application/json" {
		t.Errorf("a bad resume on the stream: %d %s", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	a.model.Enqueue(conversetest.Text("81."))
	evs = streamAll(t, srv, map[string]any{"session_id": "streamed", "responses": []any{approved("calc-s", true)}}, nil)
	if got := names(evs); got != "start tool_result text done" {
		t.Fatalf("resume events %q", got)
	}
	if r := named(evs, "tool_result"); r["id"] != "calc-s" || r["status"] != "success" {
		t.Errorf("tool_result %v", r)
	}
	if done := evs[len(evs)-1].data; done["text"] != "81." || done["stop_reason"] != "end_turn" {
		t.Errorf("done %v", done)
	}
}

// named returns the data of the first event called name.
func named(evs []sseEvent, name string) map[string]any {
	for _, e := range evs {
		if e.name == name {
			return e.data
		}
	}
	return nil
}

func TestExpiredInterruptsCountAsDenied(t *testing.T) {
	env := map[string]string{"APPROVAL_TOOLS": "calculator", "INTERRUPT_TTL": "1s"}
	a := newAPI(t, env)
	paused := a.pause(t, "", "expiring", "8*8")
	at, err := time.Parse(time.RFC3339, interruptsOf(t, paused.body["interrupts"])[0]["expires_at"].(string))
	if err != nil {
		t.Fatal(err)
	}
	if d := time.Until(at); d > 2*time.Second {
		t.Fatalf("expires in %s; INTERRUPT_TTL is 1s", d)
	}
	time.Sleep(time.Until(at) + 10*time.Millisecond)
	if got := interruptsOf(t, a.transcript(t, "", "expiring").body["interrupts"]); len(got) != 0 {
		t.Errorf("GET lists expired interrupts: %v", got)
	}
	a.model.Enqueue(conversetest.Text("Moving on."))
	r := a.chat(t, "", "expiring", "something else")
	if r.status != 200 {
		t.Fatalf("a message after expiry: %d %s", r.status, r.raw)
	}
	result := messagesOf(r)[0].(map[string]any)["content"].([]any)[0].(map[string]any)["toolResult"].(map[string]any)
	if text := result["content"].([]any)[0].(map[string]any)["text"].(string); result["status"] != "error" || !strings.Contains(text, "expired") {
		t.Errorf("expired use answered %v", result)
	}
}
