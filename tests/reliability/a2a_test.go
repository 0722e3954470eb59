package reliability_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"iter"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2asrv"
	"github.com/lambda-agent/lambda-agent/internal/agent"
	"github.com/lambda-agent/lambda-agent/internal/ddbhistory"
	"github.com/lambda-agent/lambda-agent/internal/testkit"
	"github.com/lambda-agent/lambda-agent/internal/testkit/conversetest"
)

// The JSON-RPC error codes the tests expect (see docs/a2a.md).
const (
	rpcTaskNotFound  = -32001
	rpcInvalidParams = -32602
)

// The task states the tests expect.
const (
	stateWorking   = "TASK_STATE_WORKING"
	stateInput     = "TASK_STATE_INPUT_REQUIRED"
	stateCompleted = "TASK_STATE_COMPLETED"
	stateCanceled  = "TASK_STATE_CANCELED"
)

// a2aReply is a JSON-RPC answer of POST /a2a: its result, or its error's
// code and the HTTP API's code in its data.
type a2aReply struct {
	reply
	result  map[string]any
	rpcCode int
	code    string
}

// task is the task a reply holds: SendMessage's result.task, or the
// result itself.
func (r a2aReply) task() map[string]any {
	if t, ok := r.result["task"].(map[string]any); ok {
		return t
	}
	return r.result
}

func (r a2aReply) state() string {
	status, _ := r.task()["status"].(map[string]any)
	s, _ := status["state"].(string)
	return s
}

func (r a2aReply) taskID() string {
	id, _ := r.task()["id"].(string)
	return id
}

// text is the text of the task's status message: a completed task's
// answer.
func (r a2aReply) text() string {
	status, _ := r.task()["status"].(map[string]any)
	return messageText(status["message"])
}

// outcome is what the reply says of its task, as a2aStream says it of a
// stream.
func (r a2aReply) outcome() a2aOutcome {
	return a2aOutcome{task: r.taskID(), state: r.state(), text: r.text(), rpcCode: r.rpcCode, code: r.code}
}

// a2aOutcome is how a SendMessage or a SendStreamingMessage ended: the
// task's id, its last state and status text, or the error's codes.
type a2aOutcome struct {
	task, state, text string
	rpcCode           int
	code              string
}

func (o a2aOutcome) String() string {
	if o.rpcCode != 0 {
		return fmt.Sprintf("error %d %s", o.rpcCode, o.code)
	}
	return fmt.Sprintf("task %s %s %q", o.task, o.state, o.text)
}

// messageText is the text of an A2A message's text parts.
func messageText(msg any) string {
	m, _ := msg.(map[string]any)
	parts, _ := m["parts"].([]any)
	var sb strings.Builder
	for _, p := range parts {
		if p, ok := p.(map[string]any); ok {
			s, _ := p["text"].(string)
			sb.WriteString(s)
		}
	}
	return sb.String()
}

// a2aRequest is the body of a JSON-RPC request of method.
func a2aRequest(method string, params any) map[string]any {
	return map[string]any{"jsonrpc": "2.0", "id": 1, "method": method, "params": params}
}

// a2a sends one JSON-RPC request to POST /a2a as owner.
func (s *system) a2a(t testing.TB, owner, method string, params any) a2aReply {
	t.Helper()
	r := s.serve(t, call("POST", "/a2a", owner, a2aRequest(method, params)), 30*time.Second)
	return decodeA2A(t, method, r)
}

// decodeA2A reads r, the answer of a JSON-RPC request of method.
func decodeA2A(t testing.TB, method string, r reply) a2aReply {
	t.Helper()
	out := a2aReply{reply: r}
	if r.status != 200 {
		t.Fatalf("%s: %d %s", method, r.status, r.raw)
	}
	out.result, _ = r.body["result"].(map[string]any)
	if e, ok := r.body["error"].(map[string]any); ok {
		code, _ := e["code"].(float64)
		out.rpcCode = int(code)
		data, _ := e["data"].([]any)
		for _, d := range data {
			if m, ok := d.(map[string]any); ok && m["code"] != nil {
				out.code, _ = m["code"].(string)
			}
		}
	}
	if out.result == nil && out.rpcCode == 0 {
		t.Fatalf("%s: neither a result nor an error: %s", method, r.raw)
	}
	return out
}

// a2aMessage is SendMessage's params: text from the user, with messageId
// id, in context (if not "") or on task (if not "").
func a2aMessage(id, context, task string, parts ...any) map[string]any {
	m := map[string]any{"messageId": id, "role": "ROLE_USER", "parts": parts}
	if context != "" {
		m["contextId"] = context
	}
	if task != "" {
		m["taskId"] = task
	}
	return map[string]any{"message": m}
}

func textPart(s string) map[string]any { return map[string]any{"text": s} }

// approvalPart is the data part that approves the interrupt id.
func approvalPart(id string) map[string]any {
	return map[string]any{"data": map[string]any{"responses": []any{map[string]any{"interrupt_id": id, "approve": true}}}}
}

// a2aTaskID is the id of the task that the message id started at index
// first of session, as docs/a2a.md says it is made: base64url of the
// three, a line each. A test derives the id of a task that it was never
// given, a losing racer's or a killed one's, to ask for it.
func a2aTaskID(session string, first int, id string) string {
	return base64.RawURLEncoding.EncodeToString([]byte(session + "\n" + strconv.Itoa(first) + "\n" + id))
}

// TestA2AMessagesRacing: A2A messages racing on one context are turns
// racing on one session. The model holds every message of a round until
// all of them reached it, so all of them loaded the same session before
// any could commit: exactly one completes, committed whole, and the others
// get the conflict error and store nothing. None is lost, duplicated or
// interleaved; each completed task reads back completed, and a losing
// one's task is not found, never the winner's in its place.
func TestA2AMessagesRacing(t *testing.T) {
	const rounds, racers, ctxID = 3, 10, "a2a-race"
	s := newSystem(t, nil)
	g := &gate{}
	s.Model.Responder = func(r *conversetest.Request) conversetest.Reply {
		g.wait(context.Background())
		return conversetest.Text("reply to " + r.Messages[len(r.Messages)-1].Text())
	}
	g.reset(1)
	opening := s.a2a(t, "ada", "SendMessage", a2aMessage("opening", ctxID, "", textPart("opening")))
	if opening.state() != stateCompleted {
		t.Fatal(opening.raw)
	}
	won := map[string]string{} // message id → task id
	var losers []string        // the losing messages' task ids
	other := 0
	for round := range rounds {
		g.reset(racers)
		first := 2 + 2*round // the index every racer loaded the session at
		answers := make([]a2aReply, racers)
		var wg sync.WaitGroup
		for i := range racers {
			wg.Go(func() {
				id := fmt.Sprintf("r%d-%d", round, i)
				answers[i] = s.a2a(t, "ada", "SendMessage", a2aMessage(id, ctxID, "", textPart("message "+id)))
			})
		}
		wg.Wait()
		winners := 0
		for i, r := range answers {
			id := fmt.Sprintf("r%d-%d", round, i)
			switch {
			case r.state() == stateCompleted && r.text() == "reply to message "+id:
				winners++
				won[id] = r.taskID()
				if r.taskID() != a2aTaskID(ctxID, first, id) {
					t.Errorf("%s: task %s; want %s, the id docs/a2a.md describes", id, r.taskID(), a2aTaskID(ctxID, first, id))
				}
			case r.rpcCode == rpcInvalidParams && r.code == "conflict":
				losers = append(losers, a2aTaskID(ctxID, first, id))
			default:
				other++
				t.Errorf("%s: %s; want the task completed, or the conflict error", id, r.raw)
			}
		}
		if winners != 1 {
			t.Errorf("round %d: %d tasks completed; want exactly 1", round, winners)
		}
	}
	if n := g.shut.Load(); n > 0 {
		t.Errorf("%d messages gave up waiting for the others at the model: the racers did not all meet", n)
	}

	st := s.stored(t, "ada", ctxID)
	lost := 0
	if want := 2 + 2*len(won); len(st.messages) != want {
		lost = abs(want - len(st.messages))
		t.Errorf("%d messages stored for %d completed tasks; want %d", len(st.messages), len(won), want)
	}
	seen := map[string]bool{}
	for i := 2; i+1 < len(st.messages); i += 2 {
		q, a := st.messages[i], st.messages[i+1]
		if _, ok := won[q.ID]; !ok || seen[q.ID] || q.Role != agent.RoleUser || q.Text() != "message "+q.ID || a.Role != agent.RoleAssistant || a.Text() != "reply to message "+q.ID {
			t.Errorf("stored turn %q (%s) / %q is not exactly one completed task", q.ID, q.Text(), a.Text())
		}
		seen[q.ID] = true
	}
	for id, task := range won {
		if !seen[id] {
			lost++
			t.Errorf("completed task %s is not stored", id)
		}
		if r := s.a2a(t, "ada", "GetTask", map[string]any{"id": task}); r.state() != stateCompleted || r.text() != "reply to message "+id {
			lost++
			t.Errorf("GetTask of %s: %s", id, r.raw)
		}
	}
	for _, task := range losers {
		if r := s.a2a(t, "ada", "GetTask", map[string]any{"id": task}); r.rpcCode != rpcTaskNotFound || r.code != "not_found" {
			lost++
			t.Errorf("GetTask of a losing message's task %s: %s; want TaskNotFound", task, r.raw)
		}
	}
	list := s.a2a(t, "ada", "ListTasks", map[string]any{"contextId": ctxID})
	if tasks, _ := list.result["tasks"].([]any); len(tasks) != 1+len(won) {
		lost++
		t.Errorf("ListTasks lists %d tasks; want the opening's and the %d completed", len(tasks), len(won))
	}
	validHistory(t, st.messages)
	if len(won) != rounds || other > 0 {
		t.Errorf("%d completed, %d other answers", len(won), other)
	}
	report(t, "A2A messages racing on one context, all having loaded it before any commits: one task of each round completes, committed whole; the others get the conflict error, store nothing, and their tasks are TaskNotFound; none is lost, duplicated or interleaved",
		fmt.Sprintf("%d rounds of %d SendMessage at once, held at the model until all arrived (%d completed, %d conflicts), each task read back with GetTask", rounds, racers, len(won), len(losers)), lost)
}

// TestA2AMessageRetried: a message sent again under its messageId while
// it runs, blocking and streaming, gets the in_progress error; sent again
// after, it answers with the first's task and text, without a model call;
// other content under the id is refused. An answer to a task that waits
// for input, sent again, runs the approved tool once.
func TestA2AMessageRetried(t *testing.T) {
	const ctxID = "a2a-retry"
	s, runs := newApprovalSystem(t, nil)
	var calls atomic.Int32
	arrived, release := make(chan struct{}), make(chan struct{})
	s.Model.Responder = func(r *conversetest.Request) conversetest.Reply {
		if calls.Add(1) == 1 {
			close(arrived)
			select {
			case <-release:
			case <-time.After(20 * time.Second): // the test failed; do not hang
			}
		}
		return conversetest.Text("once")
	}
	wrong := 0
	// sendBoth sends params blocking and streaming at once.
	sendBoth := func(params any) []a2aOutcome {
		out := make([]a2aOutcome, 2)
		var wg sync.WaitGroup
		wg.Go(func() { out[0] = s.a2a(t, "ada", "SendMessage", params).outcome() })
		wg.Go(func() { out[1] = s.a2aStream(t, "ada", params) })
		wg.Wait()
		return out
	}
	msg := a2aMessage("m-retry", ctxID, "", textPart("hello"))
	first := make(chan a2aOutcome, 1)
	go func() { first <- s.a2a(t, "ada", "SendMessage", msg).outcome() }()
	await(t, arrived, "the message's model call")
	during := sendBoth(msg)
	close(release)
	want := <-first
	if want.state != stateCompleted || want.text != "once" || want.task != a2aTaskID(ctxID, 0, "m-retry") {
		t.Fatalf("the message: %s", want)
	}
	for _, o := range during {
		if o.rpcCode != rpcInvalidParams || o.code != "in_progress" {
			wrong++
			t.Errorf("sent again while it ran: %s; want the in_progress error", o)
		}
	}
	after := append(sendBoth(msg), sendBoth(msg)...)
	for _, o := range after {
		if o != want {
			wrong++
			t.Errorf("sent again after it ran: %s; want %s", o, want)
		}
	}
	if n := calls.Load(); n != 1 {
		wrong++
		t.Errorf("%d model calls; want 1", n)
	}
	for _, o := range sendBoth(a2aMessage("m-retry", ctxID, "", textPart("something else"))) {
		if o.rpcCode != rpcInvalidParams || o.code != "idempotency_key_reused" {
			wrong++
			t.Errorf("other content under the same messageId: %s; want InvalidParams idempotency_key_reused", o)
		}
	}
	if st := s.stored(t, "ada", ctxID); len(st.messages) != 2 {
		wrong++
		t.Errorf("%d messages stored; want the one turn", len(st.messages))
	}

	// An answer to a task that waits for input, sent again while its
	// model call after the approved tool holds, and after.
	answered, answerRelease := make(chan struct{}), make(chan struct{})
	var once sync.Once
	s.Model.Responder = func(r *conversetest.Request) conversetest.Reply {
		calls.Add(1)
		last := r.Messages[len(r.Messages)-1]
		if len(last.Content) > 0 && last.Content[0].ToolResult != nil {
			once.Do(func() { close(answered) })
			select {
			case <-answerRelease:
			case <-time.After(20 * time.Second):
			}
			return conversetest.Text("done")
		}
		return conversetest.ToolUse("calc-r", "calculator", failing)
	}
	paused := s.a2a(t, "ada", "SendMessage", a2aMessage("m-pause", ctxID, "", textPart("compute")))
	if paused.state() != stateInput {
		t.Fatalf("the pause: %s", paused.raw)
	}
	answer := a2aMessage("m-answer", "", paused.taskID(), approvalPart("calc-r"))
	callsBefore := calls.Load()
	firstAnswer := make(chan a2aOutcome, 1)
	go func() { firstAnswer <- s.a2a(t, "ada", "SendMessage", answer).outcome() }()
	await(t, answered, "the model call after the approved tool")
	if r := s.a2a(t, "ada", "GetTask", map[string]any{"id": paused.taskID()}); r.state() != stateWorking {
		wrong++
		t.Errorf("GetTask while the answer runs: %s; want %s", r.raw, stateWorking)
	}
	duringAnswer := sendBoth(answer)
	close(answerRelease)
	wantAnswer := <-firstAnswer
	if wantAnswer.state != stateCompleted || wantAnswer.text != "done" || wantAnswer.task != paused.taskID() {
		t.Fatalf("the answer: %s", wantAnswer)
	}
	for _, o := range duringAnswer {
		if o.rpcCode != rpcInvalidParams || o.code != "in_progress" {
			wrong++
			t.Errorf("the answer sent again while it ran: %s; want the in_progress error", o)
		}
	}
	for _, o := range append(sendBoth(answer), sendBoth(answer)...) {
		if o != wantAnswer {
			wrong++
			t.Errorf("the answer sent again after it ran: %s; want %s", o, wantAnswer)
		}
	}
	// The same approval under another messageId is a new request, which
	// finds nothing to answer.
	if o := s.a2a(t, "ada", "SendMessage", a2aMessage("m-answer-2", "", paused.taskID(), approvalPart("calc-r"))).outcome(); o.rpcCode == 0 {
		wrong++
		t.Errorf("the approval under another messageId, after the task completed: %s; want an error", o)
	}
	if n := runs.of("calc-r"); n != 1 {
		wrong++
		t.Errorf("the approved tool ran %d times; want 1", n)
	}
	if n := calls.Load() - callsBefore; n != 1 {
		wrong++
		t.Errorf("%d model calls for the answer and its retries; want 1", n)
	}
	st := s.stored(t, "ada", ctxID)
	if rs := resultsFor(st.messages, "calc-r"); len(rs) != 1 {
		wrong++
		t.Errorf("%d results stored for the approved tool; want 1", len(rs))
	}
	validHistory(t, st.messages)
	report(t, "An A2A message sent again under its messageId, blocking or streaming: while it runs, the in_progress error; after, the first's task and text, with no model call; other content under it is refused; an answer to a task waiting for input, sent again, runs the approved tool once",
		fmt.Sprintf("1 message sent again 2 times while it ran and 4 times after, 2 with other content; 1 answer sent again 2 times while its model call held and 4 times after, and the approval under another messageId; %d model calls, %d tool runs", calls.Load(), runs.of("calc-r")), wrong)
}

// a2aStream sends SendStreamingMessage as owner, and returns how its
// events end: the task's id and last status, or the error.
func (s *system) a2aStream(t testing.TB, owner string, params any) a2aOutcome {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	w := s.Serve(call("POST", "/a2a", owner, a2aRequest("SendStreamingMessage", params)).build(t, ctx))
	if w.Code != 200 {
		t.Fatalf("SendStreamingMessage: %d %s", w.Code, w.Body)
	}
	return streamOutcome(t, w.Body.String())
}

// streamOutcome reads the Server-Sent Events of a SendStreamingMessage.
func streamOutcome(t testing.TB, body string) a2aOutcome {
	t.Helper()
	var out a2aOutcome
	events := 0
	for line := range strings.Lines(body) {
		data, ok := strings.CutPrefix(strings.TrimSpace(line), "data: ")
		if !ok {
			continue
		}
		events++
		var ev struct {
			Result map[string]map[string]any `json:"result"`
			Error  *struct {
				Code float64          `json:"code"`
				Data []map[string]any `json:"data"`
			} `json:"error"`
		}
		if err := json.Unmarshal([]byte(data), &ev); err != nil {
			t.Fatalf("an event that is not JSON-RPC: %q", data)
		}
		if ev.Error != nil {
			out = a2aOutcome{rpcCode: int(ev.Error.Code)}
			for _, d := range ev.Error.Data {
				if c, ok := d["code"].(string); ok {
					out.code = c
				}
			}
			return out
		}
		var status map[string]any
		switch {
		case ev.Result["task"] != nil:
			task := ev.Result["task"]
			if out.task == "" {
				out.task, _ = task["id"].(string)
			}
			status, _ = task["status"].(map[string]any)
		case ev.Result["statusUpdate"] != nil:
			status, _ = ev.Result["statusUpdate"]["status"].(map[string]any)
		}
		if status != nil {
			out.state, _ = status["state"].(string)
			out.text = messageText(status["message"])
		}
	}
	if events == 0 {
		t.Fatalf("a stream of no events: %q", body)
	}
	return out
}

// TestA2ATasksAreTheOwners: another caller, or one without an identity,
// gets TaskNotFound for a task (GetTask, CancelTask, an answer to it,
// blocking or streaming), lists none of them, with or without the
// context, and cannot send to the context; nothing runs, no model is
// called, and the session is unchanged.
func TestA2ATasksAreTheOwners(t *testing.T) {
	const ctxID = "a2a-own"
	s, runs := newApprovalSystem(t, nil)
	s.Model.Enqueue(conversetest.Text("mine"))
	done := s.a2a(t, "ada", "SendMessage", a2aMessage("m-1", ctxID, "", textPart("hello")))
	s.Model.Enqueue(conversetest.ToolUse("calc-o", "calculator", failing))
	paused := s.a2a(t, "ada", "SendMessage", a2aMessage("m-2", ctxID, "", textPart("compute")))
	if done.state() != stateCompleted || paused.state() != stateInput {
		t.Fatalf("the owner's tasks: %s %s", done.raw, paused.raw)
	}
	before := s.stored(t, "ada", ctxID)
	calls := s.Model.Calls()
	wrong, tried := 0, 0
	notFound := func(owner, what string, o a2aOutcome) {
		t.Helper()
		tried++
		if o.rpcCode != rpcTaskNotFound || o.code != "not_found" {
			wrong++
			t.Errorf("%q, %s: %s; want TaskNotFound not_found", owner, what, o)
		}
	}
	for _, owner := range []string{"mallory", ""} {
		notFound(owner, "GetTask", s.a2a(t, owner, "GetTask", map[string]any{"id": done.taskID()}).outcome())
		notFound(owner, "GetTask of the waiting task", s.a2a(t, owner, "GetTask", map[string]any{"id": paused.taskID()}).outcome())
		notFound(owner, "CancelTask", s.a2a(t, owner, "CancelTask", map[string]any{"id": paused.taskID()}).outcome())
		approval := a2aMessage("m-3", "", paused.taskID(), approvalPart("calc-o"))
		notFound(owner, "the approval", s.a2a(t, owner, "SendMessage", approval).outcome())
		notFound(owner, "the approval, streamed", s.a2aStream(t, owner, approval))
		notFound(owner, "a text answer", s.a2a(t, owner, "SendMessage", a2aMessage("m-4", "", paused.taskID(), textPart("yes"))).outcome())
		notFound(owner, "an approval naming the context too", s.a2a(t, owner, "SendMessage", a2aMessage("m-5", ctxID, paused.taskID(), approvalPart("calc-o"))).outcome())
		// The owner's context is a session id that is not the caller's:
		// refused as the HTTP API refuses it, with nothing run.
		for _, o := range []a2aOutcome{
			s.a2a(t, owner, "SendMessage", a2aMessage("m-6", ctxID, "", textPart("let me in"))).outcome(),
			s.a2aStream(t, owner, a2aMessage("m-7", ctxID, "", textPart("let me in"))),
		} {
			tried++
			if o.rpcCode == 0 || o.task != "" {
				wrong++
				t.Errorf("%q sent to the owner's context: %s; want an error", owner, o)
			}
		}
		for _, params := range []map[string]any{{}, {"contextId": ctxID}} {
			tried++
			r := s.a2a(t, owner, "ListTasks", params)
			if tasks, _ := r.result["tasks"].([]any); len(tasks) != 0 || (r.rpcCode != 0 && r.rpcCode != rpcTaskNotFound) {
				wrong++
				t.Errorf("%q, ListTasks %v: %s", owner, params, r.raw)
			}
		}
	}
	if after := s.stored(t, "ada", ctxID); !after.sameAs(before) || s.Model.Calls() != calls || runs.of("calc-o") != 0 {
		wrong++
		t.Errorf("another owner changed the session, or ran something:\n%s", before.diff(after))
	}
	if r := s.a2a(t, "ada", "GetTask", map[string]any{"id": paused.taskID()}); r.state() != stateInput {
		wrong++
		t.Errorf("the owner's paused task: %s", r.raw)
	}
	if r := s.a2a(t, "ada", "ListTasks", map[string]any{"contextId": ctxID}); len(r.result["tasks"].([]any)) != 2 {
		wrong++
		t.Errorf("the owner's ListTasks: %s", r.raw)
	}
	report(t, "Another caller cannot read, list, cancel, answer or send to an A2A caller's tasks and contexts: TaskNotFound or a refusal; nothing runs and nothing changes",
		fmt.Sprintf("%d requests from 2 callers (another subject, and none): GetTask ×2, CancelTask, 4 answers (1 streamed), 2 messages to the context (1 streamed), 2 ListTasks", tried), wrong)
}

// TestA2ACancelRacingAResume: CancelTask and the answer of one task that
// waits for input race. In half the rounds both are held at their first
// write until both reached it, so both loaded the session first; in the
// others one starts at a random moment of the other. Exactly one wins:
// canceled with the tool never run, or completed with it run once; the
// other gets an error, and GetTask and the stored session agree.
func TestA2ACancelRacingAResume(t *testing.T) {
	const rounds, ctxID = 10, "a2a-cancel"
	s, runs := newApprovalSystem(t, nil)
	s.Model.Responder = func(r *conversetest.Request) conversetest.Reply {
		last := r.Messages[len(r.Messages)-1]
		if len(last.Content) > 0 && last.Content[0].ToolResult != nil {
			return conversetest.Text("done").WithDelay(10 * time.Millisecond)
		}
		return conversetest.ToolUse("calc-"+last.Text(), "calculator", failing)
	}
	rng := newRand(29)
	wrong, canceled, completed, met := 0, 0, 0, 0
	refusals := map[string]int{}
	for round := range rounds {
		id := fmt.Sprintf("c%d", round)
		use := "calc-" + id
		paused := s.a2a(t, "ada", "SendMessage", a2aMessage("m-"+id, ctxID, "", textPart(id)))
		if paused.state() != stateInput {
			t.Fatalf("round %d: %s", round, paused.raw)
		}
		var delays [2]time.Duration
		var together func() bool
		if round%2 == 0 {
			together = meetAtFirstWrite(s, 2, 2*time.Second)
		} else {
			delays[rng.IntN(2)] = time.Duration(rng.IntN(30)) * time.Millisecond
		}
		var cancel, resume a2aReply
		var wg sync.WaitGroup
		wg.Go(func() {
			time.Sleep(delays[0])
			cancel = s.a2a(t, "ada", "CancelTask", map[string]any{"id": paused.taskID()})
		})
		wg.Go(func() {
			time.Sleep(delays[1])
			resume = s.a2a(t, "ada", "SendMessage", a2aMessage("a-"+id, "", paused.taskID(), approvalPart(use)))
		})
		wg.Wait()
		s.faults.setHold(nil)
		if together != nil && together() {
			met++
		}
		final := s.a2a(t, "ada", "GetTask", map[string]any{"id": paused.taskID()}).state()
		st := s.stored(t, "ada", ctxID)
		rs, last := resultsFor(st.messages, use), st.messages[len(st.messages)-1]
		inStore := ""
		switch {
		case len(rs) == 1 && rs[0].Status == agent.ToolError && agent.Canceled(last):
			inStore = stateCanceled
		case len(rs) == 1 && last.Role == agent.RoleAssistant && last.Text() == "done":
			inStore = stateCompleted
		}
		switch {
		case cancel.state() == stateCanceled && resume.rpcCode != 0 && runs.of(use) == 0 && final == stateCanceled && inStore == stateCanceled:
			canceled++
			refusals["answer "+resume.code]++
		case resume.state() == stateCompleted && resume.text() == "done" && cancel.rpcCode != 0 && runs.of(use) == 1 && final == stateCompleted && inStore == stateCompleted:
			completed++
			refusals["cancel "+cancel.code]++
		default:
			wrong++
			t.Errorf("round %d: cancel %s, answer %s, %d runs, then GetTask %s, and the session stored %d results, ending %q",
				round, cancel.raw, resume.raw, runs.of(use), final, len(rs), last.Text())
		}
		if len(st.session.Conversation.Pending.Live(time.Now())) != 0 {
			wrong++
			t.Errorf("round %d: the session still waits for input", round)
		}
	}
	if met < rounds/2 {
		t.Errorf("the cancel and the answer met at their first write in %d of %d rounds", met, rounds/2)
	}
	validHistory(t, s.stored(t, "ada", ctxID).messages)
	var refused []string
	for k, n := range refusals {
		refused = append(refused, fmt.Sprintf("%s %d", k, n))
	}
	sort.Strings(refused)
	report(t, "CancelTask racing the answer of an A2A task waiting for input: one wins, canceled with the tool never run or completed with it run once; the other gets an error, and GetTask and the stored session agree",
		fmt.Sprintf("%d rounds, %d meeting at their first write, the others at random offsets (%d canceled, %d completed; refused: %s)", rounds, met, canceled, completed, strings.Join(refused, ", ")), wrong)
}

// urlEvent is the stream function's URL event of method on path, with
// body (none if nil).
func urlEvent(t *testing.T, method, path string, body []byte) []byte {
	t.Helper()
	e, err := testkit.URLEvent("stream-chat.json")
	if err != nil {
		t.Fatal(err)
	}
	e.RawPath, e.RequestContext.HTTP.Path, e.RequestContext.HTTP.Method = path, path, method
	e.Body, e.IsBase64Encoded = "", false
	if body != nil {
		e.Body, e.IsBase64Encoded = base64.StdEncoding.EncodeToString(body), true
	}
	out, _ := json.Marshal(e)
	return out
}

// a2aEvent is the stream function's URL event of a JSON-RPC request to
// POST /a2a.
func a2aEvent(t *testing.T, method string, params any) []byte {
	t.Helper()
	raw, _ := json.Marshal(a2aRequest(method, params))
	return urlEvent(t, "POST", "/a2a", raw)
}

// url invokes the stream function with ev and returns its HTTP answer:
// the status its prelude holds, and the body after it.
func (b *sandbox) url(t *testing.T, ev []byte) reply {
	t.Helper()
	out, err := b.fn.Invoke(t.Context(), ev, 20*time.Second)
	if err != nil {
		t.Fatalf("invoke: %v\n%s", err, b.fn.Logs())
	}
	prelude, body, ok := strings.Cut(string(out), string(make([]byte, 8)))
	var head struct {
		StatusCode int `json:"statusCode"`
	}
	if !ok || json.Unmarshal([]byte(prelude), &head) != nil {
		t.Fatalf("not a streamed HTTP answer: %q", out)
	}
	r := reply{status: head.StatusCode, raw: body}
	if err := json.Unmarshal([]byte(body), &r.body); err != nil {
		t.Fatalf("%d with a body that is not JSON: %q", r.status, body)
	}
	return r
}

// a2a sends one JSON-RPC request to the stream function's POST /a2a.
func (b *sandbox) a2a(t *testing.T, method string, params any) a2aReply {
	t.Helper()
	return decodeA2A(t, method, b.url(t, a2aEvent(t, method, params)))
}

// interruptsListed is the ids of the interrupts GET /sessions/{id} of the
// stream function lists.
func (b *sandbox) interruptsListed(t *testing.T, id string) []string {
	t.Helper()
	r := b.url(t, urlEvent(t, "GET", "/sessions/"+id, nil))
	if r.status != 200 {
		t.Fatalf("GET /sessions/%s: %d %s", id, r.status, r.raw)
	}
	var ids []string
	for _, in := range r.body["interrupts"].([]any) {
		ids = append(ids, in.(map[string]any)["id"].(string))
	}
	return ids
}

// TestCrashDuringAnA2ATask kills the built stream function with SIGKILL
// during an A2A task's model call: the context is as it was, the killed
// task is TaskNotFound, and the message sent again gets the in_progress
// error until the dead invocation's hold lapses, then runs once against
// the strict stand-in, and is replayed after.
func TestCrashDuringAnA2ATask(t *testing.T) {
	t.Parallel()
	bin, err := streamBinary()
	if err != nil {
		t.Fatal(err)
	}
	b := newSandboxOf(t, bin, "stream")
	const ctxID, timeout = "crashy-a2a", 5 * time.Second
	b.model.Enqueue(conversetest.Text("hello"))
	if r := b.a2a(t, "SendMessage", a2aMessage("opening", ctxID, "", textPart("opening"))); r.state() != stateCompleted {
		t.Fatalf("opening: %s", r.raw)
	}
	before := storedIn(t, b.store, streamOwner, ctxID)
	calls := b.model.Calls()
	b.model.Enqueue(conversetest.Text("never sent").WithDelay(time.Minute))
	doomed := a2aMessage("doomed", ctxID, "", textPart("doomed"))
	inv, err := b.fn.InvokeAsync(t.Context(), a2aEvent(t, "SendMessage", doomed), timeout)
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the model call", func() bool { return b.model.Calls() == calls+1 })
	b.kill(t, inv, "during the model call")
	deadline := inv.Timing().Deadline
	lost := 0
	after := storedIn(t, b.store, streamOwner, ctxID)
	if !after.sameAs(before) {
		lost++
		t.Errorf("the killed task changed the context:\n%s", before.diff(after))
	}
	validHistory(t, after.messages)
	b.model.Reset()
	if err := b.fn.Restart(t.Context()); err != nil {
		t.Fatal(err)
	}
	task := a2aTaskID(ctxID, 2, "doomed")
	if r := b.a2a(t, "GetTask", map[string]any{"id": task}); r.rpcCode != rpcTaskNotFound {
		lost++
		t.Errorf("GetTask of the killed task: %s; want TaskNotFound", r.raw)
	}
	list := b.a2a(t, "ListTasks", map[string]any{"contextId": ctxID})
	if tasks, _ := list.result["tasks"].([]any); len(tasks) != 1 {
		lost++
		t.Errorf("tasks after the kill: %s; want the opening's alone", list.raw)
	}

	// The retry is refused while the dead invocation could still commit,
	// then runs once.
	b.model.Enqueue(conversetest.Text("survived"))
	refused := 0
	r := b.a2a(t, "SendMessage", doomed)
	if r.code != "in_progress" || time.Now().After(deadline) {
		t.Errorf("the retry before the dead invocation's deadline: %s; want the in_progress error", r.raw)
	}
	freeBy := deadline.Add(ddbhistory.HoldMargin + 2*time.Second)
	for r.code == "in_progress" && time.Now().Before(freeBy) {
		refused++
		time.Sleep(250 * time.Millisecond)
		r = b.a2a(t, "SendMessage", doomed)
	}
	if r.state() != stateCompleted || r.text() != "survived" || r.taskID() != task || b.model.Calls() != 1 {
		lost++
		t.Errorf("the retry %s after the deadline: %s, %d model calls", time.Since(deadline).Round(time.Second), r.raw, b.model.Calls())
	}
	if again := b.a2a(t, "SendMessage", doomed); again.outcome() != r.outcome() || b.model.Calls() != 1 {
		lost++
		t.Errorf("the retry after that: %s, %d model calls; want a replay", again.raw, b.model.Calls())
	}
	if r := b.a2a(t, "GetTask", map[string]any{"id": task}); r.state() != stateCompleted {
		lost++
		t.Errorf("GetTask after the retry: %s", r.raw)
	}
	b.model.Enqueue(conversetest.Text("still here"))
	if r := b.a2a(t, "SendMessage", a2aMessage("after", ctxID, "", textPart("after"))); r.state() != stateCompleted {
		lost++
		t.Errorf("the next message: %s", r.raw)
	}
	st := storedIn(t, b.store, streamOwner, ctxID)
	if len(st.messages) != 6 {
		lost++
		t.Errorf("%d messages stored; want the opening, the retried message once, and the next", len(st.messages))
	}
	validHistory(t, st.messages)
	report(t, "A crash (SIGKILL) during an A2A task leaves its context as it was and the task TaskNotFound; the message sent again gets in_progress until the dead invocation's hold lapses, then runs once",
		fmt.Sprintf("1 SIGKILL of the stream bootstrap (timeout %s) during a SendMessage's model call; its retry refused %d times, then run, then replayed", timeout, refused), lost)
}

// TestCrashDuringAnA2AAnswer kills the built stream function with SIGKILL
// while the tool that an A2A answer approved runs. The task still waits
// (working while the dead invocation's claim holds), as GET
// /sessions/{id} says; the answer sent again gets in_progress until the
// hold lapses, then runs the tool and completes the task, once.
func TestCrashDuringAnA2AAnswer(t *testing.T) {
	t.Parallel()
	bin, err := streamBinary()
	if err != nil {
		t.Fatal(err)
	}
	b := newSandboxOf(t, bin, "stream", "APPROVAL_TOOLS=slow")
	const ctxID, use, toolTime, timeout = "crashy-a2a-answer", "slow-a", time.Second, 5 * time.Second
	b.model.Enqueue(conversetest.Text("that takes a while").WithToolUse(use, "slow", map[string]int{"milliseconds": int(toolTime.Milliseconds())}))
	paused := b.a2a(t, "SendMessage", a2aMessage("ask", ctxID, "", textPart("run it")))
	if paused.state() != stateInput {
		t.Fatalf("the pause: %s", paused.raw)
	}
	task := paused.taskID()
	before := storedIn(t, b.store, streamOwner, ctxID)
	answer := a2aMessage("approve", "", task, approvalPart(use))
	inv, err := b.fn.InvokeAsync(t.Context(), a2aEvent(t, "SendMessage", answer), timeout)
	if err != nil {
		t.Fatal(err)
	}
	// The claim is written just before the tool starts.
	waitFor(t, "the claim", func() bool {
		sess, err := b.store.Load(t.Context(), ddbhistory.Key{Owner: streamOwner, ID: ctxID}, "")
		return err == nil && sess.Resuming
	})
	b.kill(t, inv, "while the approved tool runs")
	deadline := inv.Timing().Deadline
	b.model.Reset()
	if err := b.fn.Restart(t.Context()); err != nil {
		t.Fatal(err)
	}
	wrong := 0
	after := storedIn(t, b.store, streamOwner, ctxID)
	if !sameMessages(after.messages, before.messages) || after.session.Conversation.Pending == nil {
		wrong++
		t.Errorf("the kill changed the messages, or the session waits no more:\n%s", before.diff(after))
	}
	resumable(t, after.messages)
	// consistent checks GetTask against what is stored and what GET lists.
	consistent := func(when string, want ...string) {
		t.Helper()
		r := b.a2a(t, "GetTask", map[string]any{"id": task})
		listed := b.interruptsListed(t, ctxID)
		waits := len(listed) == 1 && listed[0] == use
		switch st := r.state(); {
		case (st == stateWorking || st == stateInput) && waits:
		case st == stateCompleted && len(listed) == 0:
		default:
			wrong++
			t.Errorf("%s: GetTask %s, while GET lists %v", when, r.raw, listed)
			return
		}
		for _, w := range want {
			if r.state() == w {
				return
			}
		}
		wrong++
		t.Errorf("%s: GetTask is %s; want one of %v", when, r.state(), want)
	}
	consistent("after the kill", stateWorking)

	b.model.Enqueue(conversetest.Text("done"))
	refused := 0
	start := time.Now()
	r := b.a2a(t, "SendMessage", answer)
	if r.code != "in_progress" {
		t.Errorf("the answer sent again before the dead invocation's deadline: %s; want the in_progress error", r.raw)
	}
	freeBy := deadline.Add(ddbhistory.HoldMargin + 2*time.Second)
	for r.code == "in_progress" && time.Now().Before(freeBy) {
		refused++
		consistent("while the dead invocation's hold lasts", stateWorking, stateInput)
		time.Sleep(250 * time.Millisecond)
		start = time.Now()
		r = b.a2a(t, "SendMessage", answer)
	}
	took := time.Since(start)
	if r.state() != stateCompleted || r.text() != "done" || r.taskID() != task || took < toolTime || b.model.Calls() != 1 {
		wrong++
		t.Errorf("the answer sent again %s after the deadline: %s in %s, %d model calls; want it completed, the tool run",
			time.Since(deadline).Round(time.Second), r.raw, took, b.model.Calls())
	}
	start = time.Now()
	if again := b.a2a(t, "SendMessage", answer); again.outcome() != r.outcome() || time.Since(start) >= toolTime || b.model.Calls() != 1 {
		wrong++
		t.Errorf("the answer sent again after that: %s, %d model calls; want a replay", again.raw, b.model.Calls())
	}
	consistent("after the retry", stateCompleted)
	st := storedIn(t, b.store, streamOwner, ctxID)
	if rs := resultsFor(st.messages, use); len(rs) != 1 || rs[0].Status != agent.ToolSuccess {
		wrong++
		t.Errorf("the stored results for %s: %+v; want one, a success", use, rs)
	}
	b.model.Enqueue(conversetest.Text("still here"))
	if r := b.a2a(t, "SendMessage", a2aMessage("after", ctxID, "", textPart("after"))); r.state() != stateCompleted {
		wrong++
		t.Errorf("the next message: %s", r.raw)
	}
	validHistory(t, storedIn(t, b.store, streamOwner, ctxID).messages)
	report(t, "A crash (SIGKILL) while an A2A answer's approved tool runs leaves the task waiting, as GET /sessions/{id} says; the answer sent again gets in_progress until the dead invocation's hold lapses, then runs the tool and completes the task once",
		fmt.Sprintf("1 SIGKILL of the stream bootstrap (timeout %s) while the approved tool ran; the answer sent again refused %d times, then run, then replayed", timeout, refused), wrong)
}

// remoteA2A is a remote agent for the suite: an a2a-go server that
// answers each message with its text, counting them; while gate is set,
// each waits for it to close (or its request to end) first.
type remoteA2A struct {
	srv      *httptest.Server
	messages atomic.Int32
	mu       sync.Mutex
	gate     chan struct{}
}

func (r *remoteA2A) Execute(ctx context.Context, ec *a2asrv.ExecutorContext) iter.Seq2[a2a.Event, error] {
	return func(yield func(a2a.Event, error) bool) {
		r.messages.Add(1)
		r.mu.Lock()
		gate := r.gate
		r.mu.Unlock()
		if gate != nil {
			select {
			case <-gate:
			case <-ctx.Done():
				return
			}
		}
		text := ""
		for _, p := range ec.Message.Parts {
			text += p.Text()
		}
		if ec.StoredTask == nil && !yield(a2a.NewSubmittedTask(ec, ec.Message), nil) {
			return
		}
		if yield(a2a.NewArtifactEvent(ec, a2a.NewTextPart("remote: "+text)), nil) {
			yield(a2a.NewStatusUpdateEvent(ec, a2a.TaskStateCompleted, nil), nil)
		}
	}
}

func (r *remoteA2A) Cancel(_ context.Context, ec *a2asrv.ExecutorContext) iter.Seq2[a2a.Event, error] {
	return func(yield func(a2a.Event, error) bool) {
		yield(a2a.NewStatusUpdateEvent(ec, a2a.TaskStateCanceled, nil), nil)
	}
}

// hold makes the messages from now on wait until release.
func (r *remoteA2A) hold() (release func()) {
	gate := make(chan struct{})
	r.mu.Lock()
	r.gate = gate
	r.mu.Unlock()
	return func() {
		r.mu.Lock()
		if r.gate == gate {
			r.gate = nil
		}
		r.mu.Unlock()
		close(gate)
	}
}

// startRemoteA2A serves a remote agent on loopback, closed when t ends.
func startRemoteA2A(t *testing.T) *remoteA2A {
	t.Helper()
	r := &remoteA2A{}
	mux := http.NewServeMux()
	r.srv = httptest.NewServer(mux)
	t.Cleanup(r.srv.Close)
	card := &a2a.AgentCard{
		Name: "remote", Description: "Echoes.", Version: "1",
		SupportedInterfaces: []*a2a.AgentInterface{{URL: r.srv.URL + "/a2a", ProtocolBinding: a2a.TransportProtocolJSONRPC, ProtocolVersion: a2a.Version}},
	}
	mux.Handle("/.well-known/agent-card.json", a2asrv.NewStaticAgentCardHandler(card))
	mux.Handle("/a2a", a2asrv.NewJSONRPCHandler(a2asrv.NewHandler(r, a2asrv.WithLogger(slog.New(slog.DiscardHandler)))))
	return r
}

func (r *remoteA2A) env() map[string]string {
	return map[string]string{"A2A_AGENTS": `[{"name":"remote","card_url":"` + r.srv.URL + `/.well-known/agent-card.json"}]`}
}

// remoteAgentModel calls the remote agent with the turn's message, and
// answers with its result.
func remoteAgentModel(r *conversetest.Request) conversetest.Reply {
	last := r.Messages[len(r.Messages)-1]
	if len(last.Content) > 0 && last.Content[0].ToolResult != nil {
		return conversetest.Text("done")
	}
	return conversetest.ToolUse("a2a-"+useID(last.Text()), "remote", map[string]string{"message": last.Text()})
}

// TestA2AAgentTurnsRacing: turns that call a remote agent over A2A, racing
// on one session: one commits, the others answer 409 and store nothing,
// neither their tool results nor the remote context they were given; the
// remote agent got every call, which a lost race cannot take back.
func TestA2AAgentTurnsRacing(t *testing.T) {
	const racers = 6
	remote := startRemoteA2A(t)
	s := newSystem(t, remote.env())
	s.Model.Responder = remoteAgentModel
	if r := s.chat(t, "", "a2a-tools", "opening"); r.status != 200 {
		t.Fatal(r.raw)
	}
	before := s.stored(t, "", "a2a-tools")
	release := remote.hold()
	arrived := remote.messages.Load()
	go func() {
		for remote.messages.Load() < arrived+racers {
			time.Sleep(5 * time.Millisecond)
		}
		release() // every racer loaded the session and called the agent
	}()
	var wg sync.WaitGroup
	var mu sync.Mutex
	statuses := map[int]int{}
	var winner string
	for i := range racers {
		wg.Go(func() {
			msg := fmt.Sprintf("racer %d", i)
			r := s.chat(t, "", "a2a-tools", msg)
			mu.Lock()
			defer mu.Unlock()
			statuses[r.status]++
			if r.status == 200 {
				winner = msg
			}
		})
	}
	wg.Wait()
	lost := 0
	after := s.stored(t, "", "a2a-tools")
	if statuses[200] != 1 || statuses[409] != racers-1 || len(after.messages) != len(before.messages)+4 || after.messages[len(before.messages)].Text() != winner {
		lost++
		t.Errorf("statuses %v; %d messages stored after %d", statuses, len(after.messages), len(before.messages))
	}
	var kept struct {
		ContextID string `json:"context_id"`
	}
	raw := after.session.Conversation.State["a2a:remote"]
	if err := json.Unmarshal(raw, &kept); err != nil || kept.ContextID == "" {
		lost++
		t.Errorf("the remote context the winner kept: %s", raw)
	}
	if got := remote.messages.Load() - arrived; got != racers {
		t.Errorf("the remote agent got %d messages; want one from each racer", got)
	}
	validHistory(t, after.messages)
	report(t, "Turns that call a remote agent over A2A, racing on one session: one commits, the others answer 409 and store nothing, neither their results nor the remote context they got",
		fmt.Sprintf("%d turns at once, each holding at the remote agent until all had called it", racers), lost)
}

// TestA2AAgentTurnRetriedWithItsKey: a turn that called a remote agent,
// sent again with its Idempotency-Key while it runs, gets 409
// in_progress; after its answer, replays, calling the agent no more.
func TestA2AAgentTurnRetriedWithItsKey(t *testing.T) {
	remote := startRemoteA2A(t)
	s := newSystem(t, remote.env())
	s.Model.Responder = remoteAgentModel
	req := call("POST", "/chat", "ada", map[string]any{"session_id": "a2a-key", "message": "once"}).withKey("k-remote")
	release := remote.hold()
	first := make(chan reply, 1)
	go func() { first <- s.serve(t, req, 30*time.Second) }()
	waitFor(t, "the remote call", func() bool { return remote.messages.Load() == 1 })
	lost := 0
	if r := s.serve(t, req, 30*time.Second); r.status != 409 || r.code() != "in_progress" {
		lost++
		t.Errorf("a retry while the remote agent works: %d %s", r.status, r.raw)
	}
	release()
	if r := <-first; r.status != 200 {
		t.Fatalf("the turn: %d %s", r.status, r.raw)
	}
	for range 3 {
		if r := s.serve(t, req, 30*time.Second); r.status != 200 || r.headers.Get("Idempotent-Replayed") != "true" {
			lost++
			t.Errorf("a retry after the answer: %d %s", r.status, r.raw)
		}
	}
	if n := remote.messages.Load(); n != 1 {
		lost++
		t.Errorf("the remote agent got %d messages; want 1", n)
	}
	report(t, "A turn that called a remote agent over A2A, sent again with its Idempotency-Key, calls it no more: 409 in_progress while it runs, then replays",
		"1 turn, sent again once while the remote agent worked and 3 times after", lost)
}

// TestCrashWhileARemoteAgentWorks kills the built chat function with
// SIGKILL while a remote agent answers its call: the session is as it
// was, remote context included, and the next turn calls the agent again.
func TestCrashWhileARemoteAgentWorks(t *testing.T) {
	t.Parallel()
	remote := startRemoteA2A(t)
	b := newSandbox(t, "A2A_AGENTS="+remote.env()["A2A_AGENTS"])
	b.model.Responder = remoteAgentModel
	if resp, _ := b.invoke(t, "opening", 20*time.Second); resp.StatusCode != 200 {
		t.Fatalf("opening: %d %s", resp.StatusCode, resp.Body)
	}
	before := storedIn(t, b.store, "", "crashy")
	release := remote.hold()
	arrived := remote.messages.Load()
	inv, err := b.fn.InvokeAsync(t.Context(), chatEvent(t, "doomed"), 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the remote call", func() bool { return remote.messages.Load() == arrived+1 })
	b.kill(t, inv, "while the remote agent works")
	release()
	lost := 0
	if after := storedIn(t, b.store, "", "crashy"); !after.sameAs(before) {
		lost++
		t.Errorf("the killed turn changed the session:\n%s", before.diff(after))
	}
	if err := b.fn.Restart(t.Context()); err != nil {
		t.Fatal(err)
	}
	if resp, _ := b.invoke(t, "after", 20*time.Second); resp.StatusCode != 200 || remote.messages.Load() != arrived+2 {
		lost++
		t.Errorf("the next turn: %d %s; the remote agent got %d messages", resp.StatusCode, resp.Body, remote.messages.Load()-arrived)
	}
	validHistory(t, storedIn(t, b.store, "", "crashy").messages)
	report(t, "A crash (SIGKILL) while a remote agent answers an A2A call leaves the session as it was, remote context included, and the next turn calls the agent again",
		"1 SIGKILL of the chat bootstrap while the remote agent held its answer", lost)
}
