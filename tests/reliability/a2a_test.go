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
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2asrv"
	"github.com/lambda-agent/lambda-agent/internal/agent"
	"github.com/lambda-agent/lambda-agent/internal/testkit"
	"github.com/lambda-agent/lambda-agent/internal/testkit/conversetest"
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

// a2a sends one JSON-RPC request to POST /a2a as owner.
func (s *system) a2a(t testing.TB, owner, method string, params any) a2aReply {
	t.Helper()
	r := s.serve(t, call("POST", "/a2a", owner, map[string]any{"jsonrpc": "2.0", "id": 1, "method": method, "params": params}), 30*time.Second)
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

// TestA2AMessagesRacing: A2A messages racing on one context are turns
// racing on one session: each ends completed, committed whole, or with
// the conflict error, and stores nothing; none is lost, duplicated or
// interleaved, and each completed task reads back completed.
func TestA2AMessagesRacing(t *testing.T) {
	const rounds, racers = 3, 10
	s := newSystem(t, nil)
	if r := s.a2a(t, "ada", "SendMessage", a2aMessage("opening", "a2a-race", "", textPart("opening"))); r.state() != "TASK_STATE_COMPLETED" {
		t.Fatal(r.raw)
	}
	s.Model.Responder = func(r *conversetest.Request) conversetest.Reply {
		return conversetest.Text("reply to " + r.Messages[len(r.Messages)-1].Text()).WithDelay(20 * time.Millisecond)
	}
	won := map[string]string{} // message id → task id
	var conflicts, other int
	for round := range rounds {
		var wg sync.WaitGroup
		var mu sync.Mutex
		start := make(chan struct{})
		for i := range racers {
			wg.Go(func() {
				<-start
				id := fmt.Sprintf("r%d-%d", round, i)
				r := s.a2a(t, "ada", "SendMessage", a2aMessage(id, "a2a-race", "", textPart("message "+id)))
				mu.Lock()
				defer mu.Unlock()
				switch {
				case r.state() == "TASK_STATE_COMPLETED":
					won[id] = r.taskID()
				case r.code == "conflict":
					conflicts++
				default:
					other++
					t.Errorf("%s: %s", id, r.raw)
				}
			})
		}
		close(start)
		wg.Wait()
	}
	st := s.stored(t, "ada", "a2a-race")
	lost := 0
	if want := 2 + 2*len(won); len(st.messages) != want {
		lost = abs(want - len(st.messages))
		t.Errorf("%d messages stored for %d completed tasks; want %d", len(st.messages), len(won), want)
	}
	seen := map[string]bool{}
	for i := 2; i+1 < len(st.messages); i += 2 {
		q, a := st.messages[i], st.messages[i+1]
		if _, ok := won[q.ID]; !ok || seen[q.ID] || q.Role != agent.RoleUser || a.Text() != "reply to message "+q.ID {
			t.Errorf("stored turn %q (%s) / %q is not exactly one completed task", q.ID, q.Text(), a.Text())
		}
		seen[q.ID] = true
	}
	for id, task := range won {
		if !seen[id] {
			lost++
			t.Errorf("completed task %s is not stored", id)
		}
		if r := s.a2a(t, "ada", "GetTask", map[string]any{"id": task}); r.state() != "TASK_STATE_COMPLETED" {
			t.Errorf("GetTask of %s: %s", id, r.raw)
		}
	}
	validHistory(t, st.messages)
	if len(won) < rounds || other > 0 {
		t.Errorf("%d completed, %d other answers", len(won), other)
	}
	report(t, "A2A messages racing on one context: each task completes, committed whole, or gets the conflict error and stores nothing; none is lost, duplicated or interleaved",
		fmt.Sprintf("%d rounds of %d SendMessage at once (%d completed, %d conflicts), each completed task read back with GetTask", rounds, racers, len(won), conflicts), lost)
}

// TestA2AMessageRetried: a message sent again under its messageId, at once
// and later, blocking and streaming, calls the model once and answers
// with the first's task; other content under the same id is refused. An
// answer to a paused task sent again runs the approved tool once.
func TestA2AMessageRetried(t *testing.T) {
	s, runs := newApprovalSystem(t, nil)
	var calls atomic.Int32
	s.Model.Responder = func(r *conversetest.Request) conversetest.Reply {
		calls.Add(1)
		return conversetest.Text("once").WithDelay(50 * time.Millisecond)
	}
	msg := a2aMessage("m-retry", "a2a-retry", "", textPart("hello"))
	var wg sync.WaitGroup
	var mu sync.Mutex
	tasks := map[string]int{}
	inProgress := 0
	for i := range 4 {
		wg.Go(func() {
			method := "SendMessage"
			if i%2 == 1 {
				method = "SendStreamingMessage"
			}
			var id, code string
			if method == "SendStreamingMessage" {
				id, code = s.a2aStream(t, "ada", msg)
			} else {
				r := s.a2a(t, "ada", method, msg)
				id, code = r.taskID(), r.code
				if code == "" && r.state() != "TASK_STATE_COMPLETED" {
					t.Errorf("%s: %s", method, r.raw)
				}
			}
			mu.Lock()
			defer mu.Unlock()
			switch {
			case code == "in_progress":
				inProgress++
			case code != "":
				t.Errorf("%s: %s", method, code)
			default:
				tasks[id]++
			}
		})
	}
	wg.Wait()
	for range 2 {
		r := s.a2a(t, "ada", "SendMessage", msg)
		tasks[r.taskID()]++
	}
	lost := 0
	if calls.Load() != 1 || len(tasks) != 1 {
		lost++
		t.Errorf("%d model calls, tasks %v; want one of each", calls.Load(), tasks)
	}
	if r := s.a2a(t, "ada", "SendMessage", a2aMessage("m-retry", "a2a-retry", "", textPart("something else"))); r.code != "idempotency_key_reused" {
		lost++
		t.Errorf("other content under the same messageId: %s", r.raw)
	}

	// An answer to a paused task, sent again.
	s.Model.Responder = nil
	s.Model.Enqueue(conversetest.ToolUse("calc-r", "calculator", failing), conversetest.Text("done"))
	paused := s.a2a(t, "ada", "SendMessage", a2aMessage("m-pause", "a2a-retry", "", textPart("compute")))
	if paused.state() != "TASK_STATE_INPUT_REQUIRED" {
		t.Fatalf("the pause: %s", paused.raw)
	}
	answer := a2aMessage("m-answer", "", paused.taskID(), map[string]any{"data": map[string]any{"responses": []any{map[string]any{"interrupt_id": "calc-r", "approve": true}}}})
	var states []string
	for range 3 {
		states = append(states, s.a2a(t, "ada", "SendMessage", answer).state())
	}
	if runs.of("calc-r") != 1 || strings.Join(states, " ") != "TASK_STATE_COMPLETED TASK_STATE_COMPLETED TASK_STATE_COMPLETED" {
		lost++
		t.Errorf("the approved tool ran %d times; answers %v", runs.of("calc-r"), states)
	}
	validHistory(t, s.stored(t, "ada", "a2a-retry").messages)
	report(t, "An A2A message sent again under its messageId, blocking or streaming, at once or later, calls the model once and answers with the first's task; other content under it is refused; an answer sent again runs the approved tool once",
		fmt.Sprintf("1 message sent 4 times at once (%d in progress) and 2 times after; 1 with other content; 1 answer to a paused task sent 3 times", inProgress), lost)
}

// a2aStream sends SendStreamingMessage as owner, and returns the task id
// of its events, or the code of its error.
func (s *system) a2aStream(t testing.TB, owner string, params any) (task, code string) {
	t.Helper()
	q := call("POST", "/a2a", owner, map[string]any{"jsonrpc": "2.0", "id": 1, "method": "SendStreamingMessage", "params": params})
	w := s.Serve(q.build(t, t.Context()))
	for line := range strings.Lines(w.Body.String()) {
		data, ok := strings.CutPrefix(strings.TrimSpace(line), "data: ")
		if !ok {
			continue
		}
		var ev struct {
			Result map[string]any `json:"result"`
			Error  *struct {
				Data []map[string]any `json:"data"`
			} `json:"error"`
		}
		if err := json.Unmarshal([]byte(data), &ev); err != nil {
			t.Fatalf("an event that is not JSON-RPC: %q", data)
		}
		if ev.Error != nil {
			for _, d := range ev.Error.Data {
				if c, ok := d["code"].(string); ok {
					return "", c
				}
			}
			return "", "error"
		}
		for _, v := range ev.Result {
			if m, ok := v.(map[string]any); ok {
				if id, ok := m["id"].(string); ok && task == "" {
					task = id
				}
				if id, ok := m["taskId"].(string); ok && task == "" {
					task = id
				}
			}
		}
	}
	return task, ""
}

// TestA2ATasksAreTheOwners: another caller gets TaskNotFound for a task,
// lists none of them, cannot send to the context or answer the task, and
// changes nothing, without a model call.
func TestA2ATasksAreTheOwners(t *testing.T) {
	s, runs := newApprovalSystem(t, nil)
	s.Model.Enqueue(conversetest.Text("mine"))
	done := s.a2a(t, "ada", "SendMessage", a2aMessage("m-1", "a2a-own", "", textPart("hello")))
	s.Model.Enqueue(conversetest.ToolUse("calc-o", "calculator", failing))
	paused := s.a2a(t, "ada", "SendMessage", a2aMessage("m-2", "a2a-own", "", textPart("compute")))
	if done.state() != "TASK_STATE_COMPLETED" || paused.state() != "TASK_STATE_INPUT_REQUIRED" {
		t.Fatalf("the owner's tasks: %s %s", done.raw, paused.raw)
	}
	before := s.stored(t, "ada", "a2a-own")
	calls := s.Model.Calls()
	wrong := 0
	for _, owner := range []string{"mallory", ""} {
		for _, r := range []a2aReply{
			s.a2a(t, owner, "GetTask", map[string]any{"id": done.taskID()}),
			s.a2a(t, owner, "CancelTask", map[string]any{"id": paused.taskID()}),
			s.a2a(t, owner, "SendMessage", a2aMessage("m-3", "", paused.taskID(), map[string]any{"data": map[string]any{"responses": []any{map[string]any{"interrupt_id": "calc-o", "approve": true}}}})),
			s.a2a(t, owner, "SendMessage", a2aMessage("m-4", "", paused.taskID(), textPart("yes"))),
		} {
			if r.rpcCode != -32001 {
				wrong++
				t.Errorf("%q: %s; want TaskNotFound", owner, r.raw)
			}
		}
		if r := s.a2a(t, owner, "SendMessage", a2aMessage("m-5", "a2a-own", "", textPart("let me in"))); r.rpcCode == 0 {
			wrong++
			t.Errorf("%q sent to the owner's context: %s", owner, r.raw)
		}
		for _, params := range []map[string]any{{}, {"contextId": "a2a-own"}} {
			r := s.a2a(t, owner, "ListTasks", params)
			if tasks, _ := r.result["tasks"].([]any); len(tasks) != 0 {
				wrong++
				t.Errorf("%q listed %v", owner, tasks)
			}
		}
	}
	if after := s.stored(t, "ada", "a2a-own"); !after.sameAs(before) || s.Model.Calls() != calls || runs.of("calc-o") != 0 {
		wrong++
		t.Errorf("another owner changed the session, or ran something:\n%s", before.diff(after))
	}
	if r := s.a2a(t, "ada", "GetTask", map[string]any{"id": paused.taskID()}); r.state() != "TASK_STATE_INPUT_REQUIRED" {
		wrong++
		t.Errorf("the owner's paused task: %s", r.raw)
	}
	report(t, "Another caller cannot read, list, cancel, answer or send to an A2A caller's tasks and contexts; nothing runs and nothing changes",
		"2 callers (another subject, and none), each with GetTask, CancelTask, 2 answers, a message to the context and 2 ListTasks", wrong)
}

// TestA2ACancelRacingAResume: CancelTask and the answer of one paused task
// race: one wins, either canceled with the tool never run or completed
// with it run once; the other gets an error, and GetTask agrees with
// what is stored.
func TestA2ACancelRacingAResume(t *testing.T) {
	const rounds = 6
	s, runs := newApprovalSystem(t, nil)
	s.Model.Responder = func(r *conversetest.Request) conversetest.Reply {
		last := r.Messages[len(r.Messages)-1]
		if len(last.Content) > 0 && last.Content[0].ToolResult != nil {
			return conversetest.Text("done").WithDelay(10 * time.Millisecond)
		}
		return conversetest.ToolUse("calc-"+last.Text(), "calculator", failing)
	}
	wrong, canceled, completed := 0, 0, 0
	for round := range rounds {
		id := fmt.Sprintf("c%d", round)
		paused := s.a2a(t, "ada", "SendMessage", a2aMessage("m-"+id, "a2a-cancel", "", textPart(id)))
		if paused.state() != "TASK_STATE_INPUT_REQUIRED" {
			t.Fatalf("round %d: %s", round, paused.raw)
		}
		var cancel, resume a2aReply
		var wg sync.WaitGroup
		start := make(chan struct{})
		wg.Go(func() {
			<-start
			cancel = s.a2a(t, "ada", "CancelTask", map[string]any{"id": paused.taskID()})
		})
		wg.Go(func() {
			<-start
			resume = s.a2a(t, "ada", "SendMessage", a2aMessage("a-"+id, "", paused.taskID(), map[string]any{"data": map[string]any{"responses": []any{map[string]any{"interrupt_id": "calc-" + id, "approve": true}}}}))
		})
		close(start)
		wg.Wait()
		final := s.a2a(t, "ada", "GetTask", map[string]any{"id": paused.taskID()}).state()
		switch {
		case cancel.state() == "TASK_STATE_CANCELED" && resume.rpcCode != 0 && runs.of("calc-"+id) == 0 && final == "TASK_STATE_CANCELED":
			canceled++
		case resume.state() == "TASK_STATE_COMPLETED" && cancel.rpcCode != 0 && runs.of("calc-"+id) == 1 && final == "TASK_STATE_COMPLETED":
			completed++
		default:
			wrong++
			t.Errorf("round %d: cancel %s, resume %s, %d runs, then %s", round, cancel.raw, resume.raw, runs.of("calc-"+id), final)
		}
	}
	validHistory(t, s.stored(t, "ada", "a2a-cancel").messages)
	report(t, "CancelTask racing the answer of a paused A2A task: one wins, canceled with the tool never run or completed with it run once; the other gets an error, and GetTask agrees",
		fmt.Sprintf("%d rounds (%d canceled, %d completed)", rounds, canceled, completed), wrong)
}

// a2aEvent is the stream function's URL event of a JSON-RPC request to
// POST /a2a.
func a2aEvent(t *testing.T, method string, params any) []byte {
	t.Helper()
	e, err := testkit.URLEvent("stream-chat.json")
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 1, "method": method, "params": params})
	e.RawPath, e.RequestContext.HTTP.Path = "/a2a", "/a2a"
	e.Body, e.IsBase64Encoded = base64.StdEncoding.EncodeToString(raw), true
	out, _ := json.Marshal(e)
	return out
}

// TestCrashDuringAnA2ATask kills the built stream function with SIGKILL
// during an A2A task's model call: the context is as it was, no task of
// it is stored (ListTasks lists none), and the message sent again, once
// the dead invocation's hold lapsed, runs once and completes.
func TestCrashDuringAnA2ATask(t *testing.T) {
	t.Parallel()
	bin, err := streamBinary()
	if err != nil {
		t.Fatal(err)
	}
	b := newSandboxOf(t, bin, "stream")
	send := func(method string, params any) map[string]any {
		t.Helper()
		out, err := b.fn.Invoke(t.Context(), a2aEvent(t, method, params), 20*time.Second)
		if err != nil {
			t.Fatalf("invoke: %v\n%s", err, b.fn.Logs())
		}
		_, body, _ := strings.Cut(string(out), string(make([]byte, 8)))
		var r map[string]any
		if err := json.Unmarshal([]byte(body), &r); err != nil {
			t.Fatalf("not JSON-RPC: %q", out)
		}
		return r
	}
	const context = "crashy-a2a"
	b.model.Enqueue(conversetest.Text("hello"))
	if r := send("SendMessage", a2aMessage("opening", context, "", textPart("opening"))); r["result"] == nil {
		t.Fatalf("opening: %v", r)
	}
	before := storedIn(t, b.store, streamOwner, context)
	calls := b.model.Calls()
	b.model.Enqueue(conversetest.Text("never sent").WithDelay(time.Minute))
	doomed := a2aMessage("doomed", context, "", textPart("doomed"))
	inv, err := b.fn.InvokeAsync(t.Context(), a2aEvent(t, "SendMessage", doomed), 8*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the model call", func() bool { return b.model.Calls() == calls+1 })
	b.kill(t, inv, "during the model call")
	lost := 0
	after := storedIn(t, b.store, streamOwner, context)
	if !after.sameAs(before) {
		lost++
		t.Errorf("the killed task changed the context:\n%s", before.diff(after))
	}
	validHistory(t, after.messages)
	b.model.Reset()
	if err := b.fn.Restart(t.Context()); err != nil {
		t.Fatal(err)
	}
	list := send("ListTasks", map[string]any{"contextId": context})
	if tasks, _ := list["result"].(map[string]any)["tasks"].([]any); len(tasks) != 1 {
		lost++
		t.Errorf("tasks after the kill: %v; want the opening's alone", list)
	}
	// The retry waits for the dead invocation's hold, then runs once.
	b.model.Enqueue(conversetest.Text("survived"))
	var r map[string]any
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(time.Second) {
		r = send("SendMessage", doomed)
		if r["result"] != nil || time.Now().After(deadline) {
			break
		}
	}
	task, _ := r["result"].(map[string]any)["task"].(map[string]any)
	if status, _ := task["status"].(map[string]any); status["state"] != "TASK_STATE_COMPLETED" || b.model.Calls() != 1 {
		lost++
		t.Errorf("the retry: %v, %d model calls", r, b.model.Calls())
	}
	validHistory(t, storedIn(t, b.store, streamOwner, context).messages)
	report(t, "A crash (SIGKILL) during an A2A task leaves its context as it was, with no task of it stored; the message sent again runs once, after the dead invocation's hold",
		"1 SIGKILL of the stream bootstrap during a SendMessage's model call, then its retry", lost)
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
