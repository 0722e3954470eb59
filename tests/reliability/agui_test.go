package reliability_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"os"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/lambda-agent/lambda-agent/internal/agent"
	"github.com/lambda-agent/lambda-agent/internal/agui"
	"github.com/lambda-agent/lambda-agent/internal/testkit"
	"github.com/lambda-agent/lambda-agent/internal/testkit/conversetest"
	"github.com/lambda-agent/lambda-agent/internal/testkit/runtimetest"
)

// An AG-UI run has the guarantees of every other way in: runs that race
// on one thread, a run retried under its runId, another owner, and a crash
// midway.

// aguiReply is an AG-UI run's answer: a status and JSON error before the
// stream, or the events.
type aguiReply struct {
	status int
	raw    string
	events []map[string]any
}

// last is the last event's type, and its code for RUN_ERROR.
func (r aguiReply) last() string {
	if len(r.events) == 0 {
		return ""
	}
	e := r.events[len(r.events)-1]
	if e["type"] == agui.EventRunError {
		return fmt.Sprintf("%s %s", e["type"], e["code"])
	}
	return fmt.Sprint(e["type"])
}

// code is a refusal's error code.
func (r aguiReply) code() string {
	var body struct{ Error struct{ Code string } }
	_ = json.Unmarshal([]byte(r.raw), &body)
	return body.Error.Code
}

func aguiEvents(raw string) []map[string]any {
	var out []map[string]any
	sc := bufio.NewScanner(strings.NewReader(raw))
	sc.Buffer(nil, 4<<20)
	for sc.Scan() {
		if data, ok := strings.CutPrefix(sc.Text(), "data: "); ok {
			var e map[string]any
			if json.Unmarshal([]byte(data), &e) == nil {
				out = append(out, e)
			}
		}
	}
	return out
}

// agui posts a run to the system's POST /agui as owner.
func (s *system) agui(t testing.TB, owner string, in agui.RunAgentInput) aguiReply {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	w := s.Serve(call("POST", "/agui", owner, in).build(t, ctx))
	r := aguiReply{status: w.Code, raw: w.Body.String()}
	if strings.HasPrefix(w.Header().Get("Content-Type"), "text/event-stream") {
		r.events = aguiEvents(r.raw)
	}
	if r.status >= 500 {
		t.Errorf("%d for an AG-UI run: %s", r.status, r.raw)
	}
	return r
}

func aguiUser(id, text string) agui.Message {
	raw, _ := json.Marshal(text)
	return agui.Message{ID: id, Role: agui.RoleUser, Content: raw}
}

// TestAGUIRunsRacing races AG-UI runs on one thread: two new messages at
// once, and two runs that resolve one approval at once. Of each pair one
// wins; the other ends with RUN_ERROR conflict, or is refused before the
// stream. The thread holds exactly what the winners added, and the
// approved tool ran once.
func TestAGUIRunsRacing(t *testing.T) {
	s := newSystem(t, map[string]string{"TOOLS": "calculator", "APPROVAL_TOOLS": "calculator"})
	s.Model.Responder = func(req *conversetest.Request) conversetest.Reply {
		if strings.Contains(req.Messages[len(req.Messages)-1].Text(), "compute") {
			return conversetest.ToolUse(fmt.Sprintf("calc-%d", len(req.Messages)), "calculator", map[string]string{"expression": "6*7"})
		}
		return conversetest.Text("noted").WithDelay(20 * time.Millisecond)
	}
	const rounds = 10
	wins, conflicts, lost := 0, 0, 0
	for round := range rounds {
		var wg sync.WaitGroup
		var mu sync.Mutex
		for i := range 2 {
			wg.Go(func() {
				r := s.agui(t, "alice", agui.RunAgentInput{ThreadID: "racing", RunID: fmt.Sprintf("r-%d-%d", round, i), Messages: []agui.Message{aguiUser(fmt.Sprintf("u-%d-%d", round, i), "hello")}})
				mu.Lock()
				defer mu.Unlock()
				switch {
				case r.status == 200 && r.last() == agui.EventRunFinished:
					wins++
				case r.status == 200 && r.last() == "RUN_ERROR conflict", r.status == 409 && r.code() == "conflict":
					conflicts++
				default:
					lost++
					t.Errorf("round %d: %d %s", round, r.status, r.raw)
				}
			})
		}
		wg.Wait()
	}
	st := s.stored(t, "alice", "racing")
	if len(st.messages) != 2*wins {
		lost++
		t.Errorf("%d messages stored; the %d winners added %d", len(st.messages), wins, 2*wins)
	}
	validHistory(t, st.messages)

	// One approval, resolved by two runs at once.
	r := s.agui(t, "alice", agui.RunAgentInput{ThreadID: "racing-resume", RunID: "pause", Messages: []agui.Message{aguiUser("u-0", "compute")}})
	outcome, _ := r.events[len(r.events)-1]["outcome"].(map[string]any)
	if outcome["type"] != "interrupt" {
		t.Fatalf("the pause: %s", r.raw)
	}
	id := outcome["interrupts"].([]any)[0].(map[string]any)["id"].(string)
	calls := s.Model.Calls()
	resolved, refused := 0, 0
	var wg sync.WaitGroup
	var mu sync.Mutex
	for i := range 2 {
		wg.Go(func() {
			r := s.agui(t, "alice", agui.RunAgentInput{ThreadID: "racing-resume", RunID: fmt.Sprintf("resume-%d", i), Resume: []agui.ResumeEntry{{InterruptID: id, Status: "resolved"}}})
			mu.Lock()
			defer mu.Unlock()
			switch {
			case r.status == 200 && r.last() == agui.EventRunFinished:
				resolved++
			case r.status == 409 && (r.code() == "conflict" || r.code() == "no_interrupt_pending"), r.last() == "RUN_ERROR conflict":
				refused++
			default:
				lost++
				t.Errorf("a racing resume: %d %s", r.status, r.raw)
			}
		})
	}
	wg.Wait()
	st = s.stored(t, "alice", "racing-resume")
	if resolved != 1 || s.Model.Calls() != calls+1 || len(st.messages) != 4 || len(st.messages[2].Content) != 1 {
		lost++
		t.Errorf("%d resumes won, %d model calls, %d messages", resolved, s.Model.Calls()-calls, len(st.messages))
	}
	validHistory(t, st.messages)
	report(t, "AG-UI runs racing on one thread: one wins, the other ends with RUN_ERROR conflict or a 409 before the stream; an approval resolved by two runs at once runs its tool once",
		fmt.Sprintf("%d rounds of 2 runs with new messages (%d won, %d conflicts); 2 runs resolving one approval (%d won, %d refused)", rounds, wins, conflicts, resolved, refused), lost)
}

// TestAGUIRunRetriedAndForeign sends a run again under its runId: while it
// runs, a 409 in_progress; once it finished, the messages the client
// lacks, with no model call; with other input, a 422. Another owner gets a
// 404 with a JSON error before the stream, and changes nothing; its own
// thread may use the same runId.
func TestAGUIRunRetriedAndForeign(t *testing.T) {
	s := newSystem(t, nil)
	release := make(chan struct{})
	s.Model.Responder = func(req *conversetest.Request) conversetest.Reply {
		if strings.Contains(req.Messages[len(req.Messages)-1].Text(), "slow") {
			<-release
		}
		return conversetest.Text("answered")
	}
	lost := 0
	in := agui.RunAgentInput{ThreadID: "keyed", RunID: "run-1", Messages: []agui.Message{aguiUser("u-1", "slow please")}}
	done := make(chan aguiReply, 1)
	go func() { done <- s.agui(t, "alice", in) }()
	waitFor(t, "the run's model call", func() bool { return s.Model.Calls() == 1 })
	if r := s.agui(t, "alice", in); r.status != 409 || r.code() != "in_progress" {
		lost++
		t.Errorf("the run again while it runs: %d %s", r.status, r.raw)
	}
	close(release)
	if r := <-done; r.last() != agui.EventRunFinished {
		t.Fatalf("the run: %s", r.raw)
	}
	const retries = 3
	for range retries {
		r := s.agui(t, "alice", in)
		if r.last() != agui.EventRunFinished || !strings.Contains(r.raw, `"delta":"answered"`) || s.Model.Calls() != 1 {
			lost++
			t.Errorf("the run again once it finished: %s, %d model calls", r.raw, s.Model.Calls())
		}
	}
	other := in
	other.Messages = []agui.Message{aguiUser("u-2", "something else")}
	if r := s.agui(t, "alice", other); r.status != 422 || r.code() != "idempotency_key_reused" {
		lost++
		t.Errorf("the runId with another input: %d %s", r.status, r.raw)
	}
	before := s.stored(t, "alice", "keyed")
	foreign := []agui.RunAgentInput{
		in,
		{ThreadID: "keyed", RunID: "m-1", Messages: []agui.Message{aguiUser("x-1", "let me in")}},
		{ThreadID: "keyed", RunID: "m-2", Resume: []agui.ResumeEntry{{InterruptID: "x", Status: "resolved"}}},
	}
	for _, f := range foreign {
		if r := s.agui(t, "mallory", f); r.status != 404 || r.code() != "not_found" || r.events != nil {
			lost++
			t.Errorf("another owner: %d %s", r.status, r.raw)
		}
	}
	if after := s.stored(t, "alice", "keyed"); !after.sameAs(before) {
		lost++
		t.Error("another owner's runs changed the thread")
	}
	if r := s.agui(t, "mallory", agui.RunAgentInput{ThreadID: "mallorys", RunID: "run-1", Messages: []agui.Message{aguiUser("u-1", "mine")}}); r.last() != agui.EventRunFinished {
		lost++
		t.Errorf("another owner's own thread under the same runId: %s", r.raw)
	}
	report(t, "An AG-UI run sent again under its runId is a 409 in_progress while it runs, then gets what the client lacks without a model call, and a 422 with other input; another owner gets a 404 before the stream and changes nothing",
		fmt.Sprintf("1 run, sent again once while it ran and %d times after; 1 with other input; %d runs from another owner", retries, len(foreign)), lost)
}

// streamBinary is the stream function built as a bootstrap, with the
// faulttools tag.
var streamBinary = sync.OnceValues(func() (string, error) {
	dir, err := os.MkdirTemp("", "reliability-stream-*")
	if err != nil {
		return "", err
	}
	return runtimetest.Build(context.Background(), "../../functions/stream", dir, "faulttools")
})

// streamOwner is the caller of the sample function URL event.
const streamOwner = "iam:arn:aws:sts::123456789012:assumed-role/chat-client/ada"

// aguiEvent is the stream function's URL event of a run.
func aguiEvent(t *testing.T, in agui.RunAgentInput) []byte {
	t.Helper()
	e, err := testkit.URLEvent("stream-chat.json")
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := json.Marshal(in)
	e.RawPath, e.RequestContext.HTTP.Path = "/agui", "/agui"
	e.Body, e.IsBase64Encoded = base64.StdEncoding.EncodeToString(raw), true
	out, _ := json.Marshal(e)
	return out
}

// streamed is the events of the stream function's answer.
func streamed(out []byte) []map[string]any {
	_, body, _ := bytes.Cut(out, make([]byte, 8))
	return aguiEvents(string(body))
}

// TestCrashDuringAnAGUIRun kills the built stream function with SIGKILL
// during AG-UI runs: during the model call, while a tool runs, and while a
// run resolves an approval. After each kill the thread is as it was, or,
// for the resolving run, as it was or with the approved tool's results;
// it is one Bedrock takes, and the next run goes on.
func TestCrashDuringAnAGUIRun(t *testing.T) {
	t.Parallel()
	bin, err := streamBinary()
	if err != nil {
		t.Fatal(err)
	}
	b := newSandboxOf(t, bin, "stream", "APPROVAL_TOOLS=calculator")
	run := func(in agui.RunAgentInput) []map[string]any {
		t.Helper()
		out, err := b.fn.Invoke(t.Context(), aguiEvent(t, in), 20*time.Second)
		if err != nil {
			t.Fatalf("invoke: %v\n%s", err, b.fn.Logs())
		}
		return streamed(out)
	}
	thread := "crashy-agui"
	b.model.Enqueue(conversetest.Text("hello"))
	if ev := run(agui.RunAgentInput{ThreadID: thread, RunID: "opening", Messages: []agui.Message{aguiUser("u-0", "opening")}}); ev[len(ev)-1]["type"] != agui.EventRunFinished {
		t.Fatalf("opening: %v", ev)
	}
	lost, kills := 0, 0
	// kill kills a run once reached holds; the thread must then be as it
	// was, or as also says it may be.
	kill := func(where string, in agui.RunAgentInput, reached func() bool, also func(before, after *stored) bool) {
		t.Helper()
		before := storedIn(t, b.store, streamOwner, thread)
		inv, err := b.fn.InvokeAsync(t.Context(), aguiEvent(t, in), 8*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		waitFor(t, where, reached)
		b.kill(t, inv, where)
		kills++
		after := storedIn(t, b.store, streamOwner, thread)
		if !after.sameAs(before) && (also == nil || !also(before, after)) {
			lost++
			t.Errorf("%s: the killed run changed the thread:\n%s", where, before.diff(after))
		}
		if n := len(after.messages); n > 0 && after.messages[n-1].Role == agent.RoleUser {
			// A resume's checkpoint: the results, whose answer is to come.
			if err := agent.ValidateHistory(after.messages); err != nil {
				t.Errorf("%s: %v", where, err)
			}
		} else {
			validHistory(t, after.messages)
		}
		b.model.Reset()
		if err := b.fn.Restart(t.Context()); err != nil {
			t.Fatal(err)
		}
	}
	// During the model call.
	calls := b.model.Calls()
	b.model.Enqueue(conversetest.Text("never sent").WithDelay(time.Minute))
	kill("during the model call", agui.RunAgentInput{ThreadID: thread, RunID: "doomed-1", Messages: []agui.Message{aguiUser("u-1", "doomed")}},
		func() bool { return b.model.Calls() == calls+1 }, nil)
	// While a tool runs.
	calls = b.model.Calls()
	b.model.Enqueue(conversetest.ToolUse("slow-1", "slow", map[string]int{"milliseconds": 60_000}))
	kill("while a tool runs", agui.RunAgentInput{ThreadID: thread, RunID: "doomed-2", Messages: []agui.Message{aguiUser("u-2", "doomed")}},
		func() bool { return b.model.Calls() == calls+1 }, nil)

	// While a run resolves an approval: the tool's results may be stored
	// (the resume's checkpoint), the turn's end not.
	b.model.Enqueue(conversetest.ToolUse("calc-1", "calculator", map[string]string{"expression": "6*7"}))
	if ev := run(agui.RunAgentInput{ThreadID: thread, RunID: "pause", Messages: []agui.Message{aguiUser("u-3", "compute")}}); ev[len(ev)-1]["outcome"].(map[string]any)["type"] != "interrupt" {
		t.Fatalf("the pause: %v", ev)
	}
	calls = b.model.Calls()
	b.model.Enqueue(conversetest.Text("never sent").WithDelay(time.Minute))
	resume := agui.RunAgentInput{ThreadID: thread, RunID: "resume", Resume: []agui.ResumeEntry{{InterruptID: "calc-1", Status: "resolved"}}}
	kill("while a run resolves an approval", resume, func() bool { return b.model.Calls() == calls+1 }, func(before, after *stored) bool {
		n := len(before.messages)
		if len(after.messages) != n+1 || !reflect.DeepEqual(after.messages[:n], before.messages[:n]) {
			return false
		}
		c := after.messages[n].Content
		return len(c) == 1 && c[0].ToolResult != nil && c[0].ToolResult.ToolUseID == "calc-1"
	})

	// The thread goes on: the resume's retry, once the dead run's claim
	// lapsed, finishes the turn; then a new message.
	b.model.Enqueue(conversetest.Text("42"), conversetest.Text("bye"))
	var ev []map[string]any
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(time.Second) {
		resume.RunID = fmt.Sprintf("resume-%d", time.Now().UnixNano())
		if ev = run(resume); ev != nil && ev[len(ev)-1]["type"] == agui.EventRunFinished || time.Now().After(deadline) {
			break
		}
	}
	if ev == nil || ev[len(ev)-1]["type"] != agui.EventRunFinished {
		lost++
		t.Errorf("the resume after the kill: %v", ev)
	}
	if ev := run(agui.RunAgentInput{ThreadID: thread, RunID: "after", Messages: []agui.Message{aguiUser("u-4", "still there?")}}); ev[len(ev)-1]["type"] != agui.EventRunFinished {
		lost++
		t.Errorf("after the kills: %v", ev)
	}
	validHistory(t, storedIn(t, b.store, streamOwner, thread).messages)
	report(t, "A crash (SIGKILL) during an AG-UI run, or while a run resolves an approval, leaves the thread valid and usable: as it was, or with the approved tool's results",
		fmt.Sprintf("%d SIGKILLs of the stream bootstrap: during the model call, while a tool runs, while a run resolves an approval", kills), lost)
}
