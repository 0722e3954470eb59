package reliability_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/google/go-cmp/cmp"
	"github.com/lambda-agent/lambda-agent/internal/agent"
	"github.com/lambda-agent/lambda-agent/internal/agent/bedrock"
	"github.com/lambda-agent/lambda-agent/internal/ddbhistory"
	"github.com/lambda-agent/lambda-agent/internal/testkit"
	"github.com/lambda-agent/lambda-agent/internal/testkit/conversetest"
)

// The tests in this file hold the approvals and interrupts of issue 13 to
// what the rest of the suite holds turns to: two resumes that race, a
// resume sent again, a crash while an approved tool runs, another owner,
// the conversation manager's window, and interrupts that expire. An
// approved tool must run at most once, and the session must stay valid.

// toolRuns counts the runs of tools, by tool use id, from the handler's log.
// The application logs one "tool failed" line for each run whose result is
// an error (the AfterToolCall hook app wires), and a person's denial or an
// expiry is no run and logs nothing; so a test that has the approved
// calculator fail, on a division by zero, counts exactly the tool's runs.
type toolRuns struct {
	mu   sync.Mutex
	runs map[string]int
}

var _ slog.Handler = (*toolRuns)(nil)

func (c *toolRuns) Enabled(context.Context, slog.Level) bool { return true }

func (c *toolRuns) Handle(_ context.Context, r slog.Record) error {
	if r.Message != "tool failed" {
		return nil
	}
	r.Attrs(func(a slog.Attr) bool {
		if a.Key != "tool_use_id" {
			return true
		}
		c.mu.Lock()
		defer c.mu.Unlock()
		if c.runs == nil {
			c.runs = map[string]int{}
		}
		c.runs[a.Value.String()]++
		return false
	})
	return nil
}

func (c *toolRuns) WithAttrs([]slog.Attr) slog.Handler { return c }
func (c *toolRuns) WithGroup(string) slog.Handler      { return c }

// of returns how often the tool use id ran.
func (c *toolRuns) of(id string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.runs[id]
}

// newApprovalSystem is newSystem with the calculator needing approval,
// env over that, and the tools' runs counted. The model's retries are the
// production policy's attempts with short waits (testkit.FastRetry), as
// tests here make the model fail on every attempt.
func newApprovalSystem(t *testing.T, env map[string]string) (*system, *toolRuns) {
	t.Helper()
	vars := map[string]string{"APPROVAL_TOOLS": "calculator"}
	for k, v := range env {
		vars[k] = v
	}
	runs := &toolRuns{}
	return newSystemWith(t, testkit.Options{Env: vars, Retry: &testkit.FastRetry, Logger: slog.New(runs)}), runs
}

// failing is the calculator's input that fails when it runs, so that its
// runs are counted (see toolRuns).
var failing = map[string]string{"expression": "1/0"}

// pause has the model ask for the calculator as use id, with current_time
// beside it, in a turn of owner on session, and checks that the turn paused
// for the calculator alone.
func (s *system) pause(t *testing.T, owner, session, id string) reply {
	t.Helper()
	s.Model.Enqueue(conversetest.Text("let me compute").WithToolUse(id, "calculator", failing).WithToolUse(id+"-time", "current_time", map[string]string{}))
	r := s.chat(t, owner, session, "compute 1/0 for "+id)
	ins, _ := r.body["interrupts"].([]any)
	if r.status != 200 || r.body["stop_reason"] != "interrupt" || len(ins) != 1 || ins[0].(map[string]any)["id"] != id {
		t.Fatalf("the turn that asks for %s: %d %s; want 200 with one interrupt", id, r.status, r.raw)
	}
	return r
}

// approve is the request that approves (or denies) the interrupt id of
// owner's session.
func approve(owner, session, id string, yes bool) request {
	return call("POST", "/chat", owner, map[string]any{
		"session_id": session,
		"responses":  []map[string]any{{"interrupt_id": id, "approve": yes}},
	})
}

// interruptsOf returns the ids of the interrupts that GET lists.
func (s *system) interruptsOf(t *testing.T, owner, session string) []string {
	t.Helper()
	r := s.serve(t, call("GET", "/sessions/"+session, owner, nil), 30*time.Second)
	if r.status != 200 {
		t.Fatalf("GET %s: %d %s", session, r.status, r.raw)
	}
	var ids []string
	for _, in := range r.body["interrupts"].([]any) {
		ids = append(ids, in.(map[string]any)["id"].(string))
	}
	return ids
}

// resultsFor returns the tool results that answer id in msgs.
func resultsFor(msgs []agent.Message, id string) []*agent.ToolResultBlock {
	var out []*agent.ToolResultBlock
	for _, m := range msgs {
		for _, b := range m.Content {
			if b.ToolResult != nil && b.ToolResult.ToolUseID == id {
				out = append(out, b.ToolResult)
			}
		}
	}
	return out
}

func resultText(r *agent.ToolResultBlock) string {
	var sb strings.Builder
	for _, c := range r.Content {
		sb.WriteString(c.Text)
	}
	return sb.String()
}

// resumable checks a session that waits for a person, or whose resume
// stopped after its tools ran, the way Bedrock sees it resumed: its
// messages, followed by a result for each tool use of the last message when
// that is the assistant's, must be sendable as they are, with no repair.
// (validHistory adds a user message, which such a session does not take.)
func resumable(t testing.TB, msgs []agent.Message) {
	t.Helper()
	msgs = append([]agent.Message(nil), msgs...)
	if n := len(msgs); n > 0 && msgs[n-1].Role == agent.RoleAssistant {
		m := agent.Message{Role: agent.RoleUser}
		for _, u := range msgs[n-1].ToolUses() {
			m.Content = append(m.Content, agent.ContentBlock{ToolResult: agent.TextResult(u.ToolUseID, agent.ToolError, "denied")})
		}
		msgs = append(msgs, m)
	}
	if !sameMessages(agent.Repair(msgs), msgs) {
		t.Errorf("the stored history, resumed, needs repair")
	}
	s := conversetest.NewServer()
	defer s.Close()
	m, err := bedrock.New(s.Client(), bedrock.Config{ModelID: "check"})
	if err != nil {
		t.Fatal(err)
	}
	var tools []agent.ToolSpec
	for _, name := range []string{"calculator", "current_time", "remember", "recall", "slow"} {
		tools = append(tools, agent.ToolSpec{Name: name, InputSchema: json.RawMessage(`{"type":"object"}`)})
	}
	if _, err := m.Converse(context.Background(), &agent.ModelRequest{Messages: msgs, Tools: tools}); err != nil {
		t.Errorf("the stored history, resumed, is one Bedrock rejects: %v", err)
	}
}

// raceTwo sends req twice at once, and returns the two replies: in even
// rounds both are held at DynamoDB's UpdateItem, the claim, until both
// reached it (met counts the rounds in which they did), and in odd ones the
// second starts at a random moment of the first.
func (s *system) raceTwo(t *testing.T, round int, req request, rng *rand.Rand, met *atomic.Int32) []reply {
	atClaim := round%2 == 0
	var delay time.Duration
	if atClaim {
		var claims atomic.Int32
		both := make(chan struct{})
		s.faults.setHold(func(op string) {
			if op != "UpdateItem" {
				return
			}
			if claims.Add(1) == 2 {
				close(both)
				met.Add(1)
			}
			select {
			case <-both:
			case <-time.After(2 * time.Second):
			}
		})
	} else {
		delay = time.Duration(rng.IntN(40)) * time.Millisecond
	}
	answers := make([]reply, 2)
	var wg sync.WaitGroup
	for i := range answers {
		wg.Go(func() {
			if i == 1 {
				time.Sleep(delay)
			}
			answers[i] = s.serve(t, req, 30*time.Second)
		})
	}
	wg.Wait()
	s.faults.setHold(nil)
	return answers
}

// TestResumesRacing sends two resumes of one paused turn at once, with the
// same approval and no Idempotency-Key, round after round. Exactly one
// answers 200 and the other 409, and the approved tool runs once. In half
// the rounds both resumes' claims are held until both were sent, so that
// they meet at the claim; in the others the second starts at a random
// moment of the first.
func TestResumesRacing(t *testing.T) {
	s, runs := newApprovalSystem(t, nil)
	const rounds = 20
	rng := newRand(13)
	codes := map[string]int{}
	extra := 0
	var met atomic.Int32
	for round := range rounds {
		id := fmt.Sprintf("r%d", round)
		s.pause(t, "alice", "race", id)
		s.Model.Enqueue(conversetest.Text("answered " + id).WithDelay(20 * time.Millisecond))
		answers := s.raceTwo(t, round, approve("alice", "race", id, true), rng, &met)
		ok, refused := 0, 0
		for _, r := range answers {
			switch {
			case r.status == 200 && r.body["stop_reason"] == "end_turn":
				ok++
			case r.status == 409 && (r.code() == "conflict" || r.code() == "no_interrupt_pending"):
				refused++
				codes[r.code()]++
			default:
				t.Errorf("round %d: %d %s", round, r.status, r.raw)
			}
		}
		if ok != 1 || refused != 1 {
			t.Errorf("round %d: %d answered 200 and %d 409; want one each", round, ok, refused)
		}
		if n := runs.of(id); n != 1 {
			extra += abs(n - 1)
			t.Errorf("round %d: the approved tool ran %d times", round, n)
		}
	}
	st := s.stored(t, "alice", "race")
	for round := range rounds {
		id := fmt.Sprintf("r%d", round)
		if rs := resultsFor(st.messages, id); len(rs) != 1 || !strings.Contains(resultText(rs[0]), "division by zero") {
			t.Errorf("round %d: the stored results for %s are %+v; want the tool's one", round, id, rs)
		}
	}
	validHistory(t, st.messages)
	if ids := s.interruptsOf(t, "alice", "race"); len(ids) != 0 {
		t.Errorf("GET lists interrupts %v after every resume", ids)
	}
	report(t, "Two resumes of one paused turn racing: one answers 200 and the other 409, and the approved tool runs once",
		fmt.Sprintf("%d rounds of 2 identical resumes, %d of them meeting at the claim, %d at random moments (%d refused as conflict, %d as no_interrupt_pending); %d approvals, %d tool runs",
			rounds, met.Load(), rounds-rounds/2, codes["conflict"], codes["no_interrupt_pending"], rounds, rounds+extra), extra)
}

// TestResumeRetriedWithItsKey sends a resume again with its
// Idempotency-Key: after it answered, the retry replays the answer, the
// tool's result included, and runs nothing. Then a resume whose model call
// fails on every attempt after the approved tool ran: its retry with the
// key completes the turn without running the tool again.
func TestResumeRetriedWithItsKey(t *testing.T) {
	s, runs := newApprovalSystem(t, nil)
	extra := 0
	ran := func(what, id string, want int) {
		t.Helper()
		if n := runs.of(id); n != want {
			extra += abs(n - want)
			t.Errorf("%s: the approved tool ran %d times, want %d", what, n, want)
		}
	}

	// A retry after the answer.
	s.pause(t, "alice", "again", "a1")
	s.Model.Enqueue(conversetest.Text("answered a1"))
	resume := approve("alice", "again", "a1", true).withKey("resume-a1")
	first := s.serve(t, resume, 30*time.Second)
	if first.status != 200 {
		t.Fatalf("the resume: %d %s", first.status, first.raw)
	}
	if msgs, _ := first.body["messages"].([]any); len(msgs) != 2 {
		t.Errorf("the resume answers %d messages, want the results and the answer", len(msgs))
	}
	calls := s.Model.Calls()
	const retries = 3
	for i := range retries {
		again := s.serve(t, resume, 30*time.Second)
		if again.status != 200 || again.headers.Get("Idempotent-Replayed") != "true" {
			t.Errorf("retry %d: %d %s, replayed %q", i, again.status, again.raw, again.headers.Get("Idempotent-Replayed"))
		}
		if diff := cmp.Diff(first.body, again.body); diff != "" {
			t.Errorf("retry %d replays another answer (-first +retry):\n%s", i, diff)
		}
	}
	if n := s.Model.Calls() - calls; n != 0 {
		t.Errorf("the retries called the model %d times", n)
	}
	ran("a resume and its retries", "a1", 1)
	// The key names that request: a denial under it is another request.
	if r := s.serve(t, approve("alice", "again", "a1", false).withKey("resume-a1"), 30*time.Second); r.status != 422 || r.code() != "idempotency_key_reused" {
		t.Errorf("a denial under the approval's key: %d %s; want 422", r.status, r.raw)
	}
	ran("a denial under the approval's key", "a1", 1)

	// A resume that fails after its tool ran, then its retry.
	s.pause(t, "alice", "again", "b1")
	s.Model.Responder = always(conversetest.InternalError())
	resume = approve("alice", "again", "b1", true).withKey("resume-b1")
	if r := s.serve(t, resume, 30*time.Second); r.status != 502 || r.code() != "model_error" {
		t.Errorf("the resume whose model fails: %d %s; want 502 model_error", r.status, r.raw)
	}
	ran("the failed resume", "b1", 1)
	// The tool's results are stored: GET lists no interrupt, and the
	// session ends with them.
	st := s.stored(t, "alice", "again")
	if ids := s.interruptsOf(t, "alice", "again"); len(ids) != 0 || len(resultsFor(st.messages[len(st.messages)-1:], "b1")) != 1 {
		t.Errorf("after the failed resume, GET lists %v, and the session ends with a %s message", ids, st.messages[len(st.messages)-1].Role)
	}
	resumable(t, st.messages)
	s.Model.Responder = nil
	s.Model.Enqueue(conversetest.Text("answered b1"))
	retried := s.serve(t, resume, 30*time.Second)
	if retried.status != 200 || retried.body["text"] != "answered b1" {
		t.Errorf("the retry of the failed resume: %d %s", retried.status, retried.raw)
	}
	ran("the failed resume and its retry", "b1", 1)
	calls = s.Model.Calls()
	if again := s.serve(t, resume, 30*time.Second); again.status != 200 || again.headers.Get("Idempotent-Replayed") != "true" || again.raw != retried.raw {
		t.Errorf("the second retry: %d %s, replayed %q; want %s", again.status, again.raw, again.headers.Get("Idempotent-Replayed"), retried.raw)
	}
	if s.Model.Calls() != calls {
		t.Error("the second retry called the model")
	}
	ran("the failed resume and its retries", "b1", 1)

	st = s.stored(t, "alice", "again")
	for _, id := range []string{"a1", "b1"} {
		if rs := resultsFor(st.messages, id); len(rs) != 1 {
			t.Errorf("%d stored results for %s", len(rs), id)
		}
	}
	validHistory(t, st.messages)
	report(t, "A resume sent again with its Idempotency-Key replays its answer, tool results included, and runs nothing; after a failure past its tools the retry completes the turn without running them again",
		fmt.Sprintf("1 resume replayed %d times and refused under the key with a denial; 1 resume failed by Bedrock 500 on every attempt after its tool ran, retried twice; 2 approvals, %d tool runs", retries, 2+extra), extra)
}

// TestInterruptsAreTheOwners has another owner, and a caller without an
// identity, try to read and answer a session's interrupts. Each gets 404,
// as for any session not theirs; nothing runs, the session is unchanged,
// and its owner can still resume it.
func TestInterruptsAreTheOwners(t *testing.T) {
	s, runs := newApprovalSystem(t, nil)
	s.pause(t, "alice", "mine", "m1")
	before := s.stored(t, "alice", "mine")
	calls := s.Model.Calls()
	leaks, tried := 0, 0
	for _, who := range []string{"bob", ""} {
		for _, q := range []request{
			call("GET", "/sessions/mine", who, nil),
			approve(who, "mine", "m1", true),
			approve(who, "mine", "m1", true).withKey("stolen"),
			approve(who, "mine", "m1", false),
			call("POST", "/chat", who, map[string]any{"session_id": "mine", "responses": []map[string]any{{"interrupt_id": "m1", "answer": "yes"}}}),
			call("POST", "/chat", who, map[string]any{"session_id": "mine", "message": "move on", "deny_pending": true}),
		} {
			tried++
			r := s.serve(t, q, 30*time.Second)
			if r.status != 404 || r.code() != "not_found" || strings.Contains(r.raw, "m1") {
				leaks++
				t.Errorf("%q: %s %s %v: %d %s; want 404 not_found, naming nothing", who, q.method, q.path, q.body, r.status, r.raw)
			}
		}
	}
	if n := runs.of("m1"); n != 0 {
		leaks++
		t.Errorf("the approved tool ran %d times for others", n)
	}
	if n := s.Model.Calls() - calls; n != 0 {
		leaks++
		t.Errorf("others' requests called the model %d times", n)
	}
	if diff := before.diff(s.stored(t, "alice", "mine")); diff != "" {
		leaks++
		t.Errorf("others' requests changed the session:\n%s", diff)
	}
	if ids := s.interruptsOf(t, "alice", "mine"); !cmp.Equal(ids, []string{"m1"}) {
		t.Errorf("the owner's GET lists %v, want [m1]", ids)
	}
	s.Model.Enqueue(conversetest.Text("answered m1"))
	if r := s.serve(t, approve("alice", "mine", "m1", true), 30*time.Second); r.status != 200 || runs.of("m1") != 1 {
		t.Errorf("the owner's resume: %d %s, %d tool runs", r.status, r.raw, runs.of("m1"))
	}
	validHistory(t, s.stored(t, "alice", "mine").messages)
	report(t, "Another owner, or a caller without an identity, can neither see nor answer a session's interrupts: 404, nothing runs, the session is unchanged",
		fmt.Sprintf("%d requests from 2 other identities: GET, approvals with and without a key, a denial, an answer, and a message that denies the pending interrupts", tried), leaks)
}

// windowModel answers the agent as a model that asks for the calculator
// when told to compute, and then, once approved, for the time before it
// answers; and answers the summarizer, which offers no tools, with a
// summary. Tool use ids are unique across the session, as Bedrock's are.
func windowModel() func(*conversetest.Request) conversetest.Reply {
	var n atomic.Int64
	return func(r *conversetest.Request) conversetest.Reply {
		if r.ToolConfig == nil {
			return conversetest.Text("a summary of what was said")
		}
		last := r.Messages[len(r.Messages)-1]
		for _, b := range last.Content {
			if b.ToolResult != nil && strings.HasPrefix(b.ToolResult.ToolUseID, "calc-") {
				return conversetest.Text("one more look").WithToolUse(fmt.Sprintf("time-%d", n.Add(1)), "current_time", map[string]string{})
			}
			if b.ToolResult != nil && strings.HasPrefix(b.ToolResult.ToolUseID, "time-") {
				return conversetest.Text("all done")
			}
		}
		if strings.HasPrefix(last.Text(), "compute") {
			return conversetest.Text("let me compute").WithToolUse(fmt.Sprintf("calc-%d", n.Add(1)), "calculator", map[string]string{"expression": "6*7"})
		}
		return conversetest.Text("noted")
	}
}

// answers reports whether req ends with the assistant's tool use id and a
// user message whose result for it is the calculator's when approved, and
// a denial when not.
func answers(req *conversetest.Request, id string, approved bool) bool {
	n := len(req.Messages)
	if n < 2 || !slices.ContainsFunc(req.Messages[n-2].Content, func(b conversetest.ContentBlock) bool { return b.ToolUse != nil && b.ToolUse.ToolUseID == id }) {
		return false
	}
	for _, b := range req.Messages[n-1].Content {
		if r := b.ToolResult; r != nil && r.ToolUseID == id && len(r.Content) == 1 {
			if approved {
				return r.Status == "success" && strings.Contains(string(r.Content[0].JSON), `"result":42`)
			}
			return r.Status == "error" && strings.Contains(r.Content[0].Text, "denied")
		}
	}
	return false
}

// TestResumeAfterTheWindowMoved pauses turns in sessions whose window the
// conversation manager slid or summarized, before and during the pause,
// and resumes them: every request the agent and the summarizer send must
// be one the strict stand-in accepts, the resume's first model call must see
// the paused tool use and the person's response, and no request may hold a
// result the agent's repair made up for a use the window cut from its
// result. Every resume answers 200.
func TestResumeAfterTheWindowMoved(t *testing.T) {
	managers := []struct {
		name string
		env  map[string]string
	}{
		{"a sliding window of 2", map[string]string{"WINDOW_SIZE": "2"}},
		{"a sliding window of 3", map[string]string{"WINDOW_SIZE": "3"}},
		{"a sliding window of 4", map[string]string{"WINDOW_SIZE": "4"}},
		{"a sliding window of 5", map[string]string{"WINDOW_SIZE": "5"}},
		{"summarizing past 4 messages", map[string]string{"WINDOW_SIZE": "4", "CONVERSATION_MANAGER": "summarizing"}},
		{"summarizing past 5 messages", map[string]string{"WINDOW_SIZE": "5", "CONVERSATION_MANAGER": "summarizing"}},
	}
	lost, requests, resumes := 0, 0, 0
	for _, m := range managers {
		t.Run(m.name, func(t *testing.T) {
			s, _ := newApprovalSystem(t, m.env)
			s.Model.Responder = windowModel()
			moved, summarized := false, false
			for i := range 4 {
				for j := range i {
					if r := s.chat(t, "", "moving", fmt.Sprintf("turn %d.%d", i, j)); r.status != 200 {
						t.Fatalf("turn %d.%d: %d %s", i, j, r.status, r.raw)
					}
				}
				r := s.chat(t, "", "moving", fmt.Sprintf("compute, round %d", i))
				ins, _ := r.body["interrupts"].([]any)
				if r.status != 200 || len(ins) != 1 {
					t.Fatalf("round %d: the turn that asks for the calculator: %d %s", i, r.status, r.raw)
				}
				id := ins[0].(map[string]any)["id"].(string)
				approved := i%2 == 0
				calls := s.Model.Calls()
				r = s.serve(t, approve("", "moving", id, approved), 30*time.Second)
				resumes++
				if r.status != 200 || r.body["text"] != "all done" {
					t.Errorf("round %d: the resume: %d %s", i, r.status, r.raw)
				}
				w, _ := r.body["window"].(map[string]any)
				moved = moved || w["removed"] != 0.0
				summarized = summarized || w["summarized"] == true
				// The resume's first model call, after any summarizer's, sees
				// the paused use, and the person's response as its result.
				reqs := slices.DeleteFunc(s.Model.Requests()[calls:], func(r *conversetest.Request) bool { return r.ToolConfig == nil })
				if len(reqs) == 0 || !answers(reqs[0], id, approved) {
					lost++
					t.Errorf("round %d: the resume's model call does not end with %s and the result of the response (approved %v)", i, id, approved)
				}
			}
			if !moved || strings.Contains(m.name, "summarizing") && !summarized {
				t.Errorf("the window never moved (summarized %v)", summarized)
			}
			for _, req := range s.Model.Requests() {
				requests++
				if !req.Valid {
					lost++
					t.Errorf("a request the stand-in rejected: %v", req.Err)
				}
				for _, msg := range req.Messages {
					for _, b := range msg.Content {
						if b.ToolResult != nil && b.ToolResult.Status == "error" && !strings.Contains(fmt.Sprint(b.ToolResult.Content), "denied") {
							lost++
							t.Errorf("a request holds a result the agent made up: %+v", b.ToolResult.Content)
						}
					}
				}
			}
			validHistory(t, s.stored(t, "", "moving").messages)
		})
	}
	report(t, "A resume after the conversation manager slid or summarized the window sends Bedrock only valid requests, the first of them with the paused tool use and the person's response, and answers 200",
		fmt.Sprintf("%d resumes (half approved, half denied) under %d managers (sliding windows of 2 to 5, summarizing past 4 and 5 messages), with %d requests to the strict stand-in", resumes, len(managers), requests), lost)
}

// waitForExpiry waits until the first interrupt of each paused turn of rs
// expired, and fails t when one would expire later than a TTL of 1 s and
// a second's rounding allow.
func waitForExpiry(t *testing.T, rs ...reply) {
	t.Helper()
	for _, r := range rs {
		at, err := time.Parse(time.RFC3339, r.body["interrupts"].([]any)[0].(map[string]any)["expires_at"].(string))
		if err != nil {
			t.Fatal(err)
		}
		if d := time.Until(at); d > 2*time.Second {
			t.Fatalf("the interrupt expires in %s, past its TTL of 1s and a second's rounding", d)
		}
		waitFor(t, "the interrupt's expiry", func() bool { return !time.Now().Before(at) })
	}
}

// TestExpiredInterrupts lets interrupts expire (INTERRUPT_TTL=1s). They then
// count as denied: a message needs no deny_pending, a late approval runs
// nothing, and the stored history says the use expired.
func TestExpiredInterrupts(t *testing.T) {
	s, runs := newApprovalSystem(t, map[string]string{"INTERRUPT_TTL": "1s"})
	wrong := 0
	wait := func(rs ...reply) { t.Helper(); waitForExpiry(t, rs...) }
	expired := func(what, session, id string) {
		t.Helper()
		st := s.stored(t, "alice", session)
		rs := resultsFor(st.messages, id)
		if len(rs) != 1 || rs[0].Status != agent.ToolError || !strings.Contains(resultText(rs[0]), "expired") {
			wrong++
			t.Errorf("%s: the stored results for %s are %+v; want one that says it expired", what, id, rs)
		}
		if n := runs.of(id); n != 0 {
			wrong++
			t.Errorf("%s: the tool ran %d times", what, n)
		}
		if ids := s.interruptsOf(t, "alice", session); len(ids) != 0 {
			wrong++
			t.Errorf("%s: GET lists %v", what, ids)
		}
		validHistory(t, st.messages)
	}

	wait(s.pause(t, "alice", "late-message", "e1"), s.pause(t, "alice", "late-approval", "e2"))
	if ids := s.interruptsOf(t, "alice", "late-message"); len(ids) != 0 {
		wrong++
		t.Errorf("GET lists %v after the expiry", ids)
	}
	if r := s.chat(t, "alice", "late-message", "never mind"); r.status != 200 {
		wrong++
		t.Errorf("a message after the expiry: %d %s; want 200", r.status, r.raw)
	}
	expired("a message after the expiry", "late-message", "e1")

	s.Model.Enqueue(conversetest.Text("too late"))
	if r := s.serve(t, approve("alice", "late-approval", "e2", true), 30*time.Second); r.status != 200 {
		wrong++
		t.Errorf("an approval after the expiry: %d %s; want 200", r.status, r.raw)
	}
	expired("an approval after the expiry", "late-approval", "e2")
	report(t, "An interrupt past INTERRUPT_TTL counts as denied: a message needs no deny_pending, a late approval runs nothing, and the history says it expired",
		"2 interrupts left to expire (TTL 1s): 1 followed by a message, 1 by its approval", wrong)
}

// sandboxEvent is the sample event events/chat-new.json made into method on
// path, with body JSON-encoded unless it is nil, and the Idempotency-Key key
// unless it is "".
func sandboxEvent(t *testing.T, method, path string, body any, key string) []byte {
	t.Helper()
	e, err := testkit.Event("chat-new.json")
	if err != nil {
		t.Fatal(err)
	}
	path, e.RawQueryString, _ = strings.Cut(path, "?")
	e.RouteKey = method + " " + path
	e.RequestContext.RouteKey = e.RouteKey
	e.RawPath, e.RequestContext.HTTP.Path = path, path
	e.RequestContext.HTTP.Method = method
	e.Body = ""
	delete(e.Headers, "content-type")
	delete(e.Headers, "content-length")
	if body != nil {
		raw, err := json.Marshal(body)
		if err != nil {
			t.Fatal(err)
		}
		e.Body = string(raw)
		e.Headers["content-type"] = "application/json"
		e.Headers["content-length"] = strconv.Itoa(len(raw))
	}
	if key != "" {
		e.Headers["idempotency-key"] = key
	}
	raw, err := json.Marshal(e)
	if err != nil {
		t.Fatal(err)
	}
	return raw
}

// send invokes the function with ev and decodes its HTTP answer.
func (b *sandbox) send(t *testing.T, ev []byte, timeout time.Duration) (status int, body map[string]any, raw string) {
	t.Helper()
	out, err := b.fn.Invoke(t.Context(), ev, timeout)
	if err != nil {
		t.Fatalf("invoke: %v\n%s", err, b.fn.Logs())
	}
	var resp events.APIGatewayV2HTTPResponse
	if err := json.Unmarshal(out, &resp); err != nil {
		t.Fatalf("not an HTTP response: %s", out)
	}
	_ = json.Unmarshal([]byte(resp.Body), &body)
	return resp.StatusCode, body, resp.Body
}

// TestCrashWhileResuming kills the chat function's process with SIGKILL
// while it resumes a turn whose "slow" tool a person approved: while the
// tool runs, during the model call after it, and at random moments. After
// each kill the session either still waits for the person (and then the
// retry, once the dead request's claim lapsed, runs the tool and completes
// the turn), or holds the tool's results (and the retry completes the turn
// without running the tool again), or is done; never broken. GET agrees
// with what is stored, and the history is one Bedrock takes.
func TestCrashWhileResuming(t *testing.T) {
	t.Parallel()
	b := newSandbox(t, "APPROVAL_TOOLS=slow")
	if status, _, raw := b.send(t, chatEvent(t, "opening"), 10*time.Second); status != 200 {
		t.Fatalf("opening turn: %d %s", status, raw)
	}
	// The slow tool takes toolTime, within the resume's timeout less the
	// agent's reserve of 3 s; a run of the tool takes at least that long.
	const toolTime, timeout = time.Second, 5 * time.Second
	rng := newRand(17)
	kills, states := map[string]int{}, map[string]int{}
	broken, round := 0, 0
	get := func() map[string]any {
		t.Helper()
		status, body, raw := b.send(t, sandboxEvent(t, "GET", "/sessions/crashy", nil, ""), 10*time.Second)
		if status != 200 {
			t.Fatalf("GET: %d %s", status, raw)
		}
		return body
	}
	// must, when set, is the state the kill must leave: a tool that ran to
	// its end must not run again.
	crash := func(where, must string, script func(), when func(calls int)) {
		t.Helper()
		round++
		id := fmt.Sprintf("slow-%d", round)
		b.model.Enqueue(conversetest.Text("that takes a while").WithToolUse(id, "slow", map[string]int{"milliseconds": int(toolTime.Milliseconds())}))
		if status, body, raw := b.send(t, chatEvent(t, "run "+id), 10*time.Second); status != 200 || body["stop_reason"] != "interrupt" {
			t.Fatalf("%s: the turn that asks for %s: %d %s", where, id, status, raw)
		}
		resume := sandboxEvent(t, "POST", "/chat", map[string]any{
			"session_id": "crashy",
			"responses":  []map[string]any{{"interrupt_id": id, "approve": true}},
		}, "")
		calls := b.model.Calls()
		script()
		inv, err := b.fn.InvokeAsync(t.Context(), resume, timeout)
		if err != nil {
			t.Fatal(err)
		}
		when(calls)
		if err := b.fn.Kill(); err != nil {
			t.Fatal(err)
		}
		_, _ = inv.Wait(t.Context()) // it may have finished before the kill
		deadline := inv.Timing().Deadline
		kills[where]++
		b.model.Reset()
		if err := b.fn.Restart(t.Context()); err != nil {
			t.Fatal(err)
		}

		// What the kill left.
		st := storedIn(t, b.store, "", "crashy")
		last := st.messages[len(st.messages)-1]
		listed, _ := get()["interrupts"].([]any)
		var state string
		switch {
		case last.Role == agent.RoleAssistant && len(last.ToolUses()) == 1 && last.ToolUses()[0].ToolUseID == id:
			state = "waiting"
			if st.session.Conversation.Pending == nil || len(listed) != 1 || listed[0].(map[string]any)["id"] != id {
				broken++
				t.Errorf("%s: the session waits for %s, but GET lists %v", where, id, listed)
			}
			resumable(t, st.messages)
		case last.Role == agent.RoleUser && len(resultsFor(st.messages[len(st.messages)-1:], id)) == 1:
			state = "with the tool's results"
			if st.session.Conversation.Pending != nil || len(listed) != 0 {
				broken++
				t.Errorf("%s: the session holds the results of %s, but GET lists %v", where, id, listed)
			}
			resumable(t, st.messages)
		case last.Role == agent.RoleAssistant && len(last.ToolUses()) == 0 && len(resultsFor(st.messages, id)) == 1:
			state = "done"
			if len(listed) != 0 {
				broken++
				t.Errorf("%s: the turn is done, but GET lists %v", where, listed)
			}
			validHistory(t, st.messages)
		default:
			broken++
			t.Errorf("%s: the session ends with a %s message of %d tool uses, and %d results for %s", where, last.Role, len(last.ToolUses()), len(resultsFor(st.messages, id)), id)
			return
		}
		states[state]++
		if must != "" && state != must {
			broken++
			t.Errorf("%s: the session is left %s, want %s", where, state, must)
		}

		// The retry: refused while the dead request's claim holds, then
		// answered.
		var status int
		var raw string
		var took time.Duration
		freeBy := deadline.Add(ddbhistory.HoldMargin + 2*time.Second)
		for {
			start := time.Now()
			status, _, raw = b.send(t, resume, 10*time.Second)
			took = time.Since(start)
			if status != 409 || !strings.Contains(raw, `"code":"conflict"`) || time.Now().After(freeBy) {
				break
			}
			time.Sleep(250 * time.Millisecond)
		}
		switch {
		case state == "done" && (status != 409 || !strings.Contains(raw, "no_interrupt_pending")):
			broken++
			t.Errorf("%s: the retry of a finished resume: %d %s; want 409 no_interrupt_pending", where, status, raw)
		case state == "done":
		case status != 200:
			broken++
			t.Errorf("%s: the retry, %s: %d %s; want 200", where, state, status, raw)
		case state == "waiting" && took < toolTime:
			t.Errorf("%s: the retry took %s, less than the tool, which it had to run", where, took)
		case state == "with the tool's results" && took >= toolTime:
			broken++
			t.Errorf("%s: the retry took %s: it ran the tool again", where, took)
		}
		st = storedIn(t, b.store, "", "crashy")
		if rs := resultsFor(st.messages, id); len(rs) != 1 || st.messages[len(st.messages)-1].Role != agent.RoleAssistant {
			broken++
			t.Errorf("%s: after the retry, %d results for %s, and the last message is the %s's", where, len(rs), id, st.messages[len(st.messages)-1].Role)
		}
		if listed, _ := get()["interrupts"].([]any); len(listed) != 0 {
			broken++
			t.Errorf("%s: after the retry, GET lists %v", where, listed)
		}
		validHistory(t, st.messages)
	}

	crash("while the approved tool runs", "waiting", func() {}, func(int) {
		// The claim is written just before the tool starts.
		waitFor(t, "the claim", func() bool {
			sess, err := b.store.Load(t.Context(), ddbhistory.Key{Owner: "anonymous", ID: "crashy"}, "")
			return err == nil && sess.Resuming
		})
	})
	crash("during the model call after the tool", "with the tool's results", func() {
		b.model.Enqueue(conversetest.Text("never sent").WithDelay(time.Minute))
	}, func(calls int) { waitCalls(t, b.model, calls+1) })
	for range 2 {
		at := time.Duration(rng.IntN(int(toolTime.Milliseconds())+100)) * time.Millisecond
		crash("at a random moment", "", func() {
			b.model.Enqueue(conversetest.Text("done").WithDelay(10 * time.Millisecond))
		}, func(int) { time.Sleep(at) })
	}
	var parts []string
	for _, where := range []string{"while the approved tool runs", "during the model call after the tool", "at a random moment"} {
		parts = append(parts, fmt.Sprintf("%d %s", kills[where], where))
	}
	var left []string
	for _, state := range []string{"waiting", "with the tool's results", "done"} {
		left = append(left, fmt.Sprintf("%d %s", states[state], state))
	}
	report(t, "A crash (SIGKILL) while a resume runs leaves the session waiting (the retry runs the tool once the claim lapses) or holding the tool's results (the retry does not run it again), consistent with GET and valid; never broken",
		fmt.Sprintf("%d SIGKILLs of the chat bootstrap during resumes: %s; left %s", round, strings.Join(parts, ", "), strings.Join(left, ", ")), broken)
}

// TestMessageAfterAnUnfinishedResume sends a message, not the responses
// again, to a session whose resume stopped after its tools ran and their
// results were stored: once after the resume failed, and once while the
// resume still waits for the model. The stored history must stay one that
// Bedrock takes as it is, with the roles alternating.
func TestMessageAfterAnUnfinishedResume(t *testing.T) {
	s, runs := newApprovalSystem(t, nil)

	s.pause(t, "alice", "failed", "f1")
	s.Model.Responder = always(conversetest.InternalError())
	if r := s.serve(t, approve("alice", "failed", "f1", true), 30*time.Second); r.status != 502 {
		t.Fatalf("the resume whose model fails: %d %s", r.status, r.raw)
	}
	s.Model.Responder = nil
	if r := s.chat(t, "alice", "failed", "something else"); r.status != 200 {
		t.Errorf("a message after the failed resume: %d %s", r.status, r.raw)
	}
	validHistory(t, s.stored(t, "alice", "failed").messages)

	s.pause(t, "alice", "racing", "g1")
	calls := s.Model.Calls()
	s.Model.Enqueue(conversetest.Text("late").WithDelay(300 * time.Millisecond))
	resumed := make(chan reply, 1)
	go func() { resumed <- s.serve(t, approve("alice", "racing", "g1", true), 30*time.Second) }()
	waitCalls(t, s.Model, calls+1)
	msg := s.serve(t, call("POST", "/chat", "alice", map[string]any{"session_id": "racing", "message": "never mind", "deny_pending": true}), 30*time.Second)
	r := <-resumed
	t.Logf("during the resume's model call: the message got %d, the resume %d %s", msg.status, r.status, r.raw)
	if msg.status == 200 && r.status == 200 {
		t.Errorf("both the resume and the message during its model call answered 200")
	}
	ran := runs.of("g1")
	if ran != 1 {
		t.Errorf("the approved tool ran %d times", ran)
	}
	validHistory(t, s.stored(t, "alice", "racing").messages)
	report(t, "A message after a resume that failed past its tools, or during its model call, leaves a valid history; the tool ran once",
		fmt.Sprintf("1 message after a failed resume; 1 during a resume's model call (message %d, resume %d)", msg.status, r.status), abs(ran-1))
}

// TestRetryOfAFailedResumeAnswersTheWholeTurn retries, with its
// Idempotency-Key, a resume that failed after its tools ran. The retry
// completes the turn; its answer, and the replays of it, must be the whole
// resumed turn, as an answer that never failed is: the results message
// that the failed attempt stored, and what came after.
func TestRetryOfAFailedResumeAnswersTheWholeTurn(t *testing.T) {
	s, _ := newApprovalSystem(t, nil)
	s.pause(t, "alice", "whole", "w1")
	paused := len(s.stored(t, "alice", "whole").messages)
	s.Model.Responder = always(conversetest.InternalError())
	resume := approve("alice", "whole", "w1", true).withKey("resume-w1")
	if r := s.serve(t, resume, 30*time.Second); r.status != 502 {
		t.Fatalf("the resume whose model fails: %d %s", r.status, r.raw)
	}
	s.Model.Responder = nil
	s.Model.Enqueue(conversetest.Text("answered w1"))
	retried := s.serve(t, resume, 30*time.Second)
	if retried.status != 200 {
		t.Fatalf("the retry: %d %s", retried.status, retried.raw)
	}
	want, err := json.Marshal(s.stored(t, "alice", "whole").messages[paused:])
	if err != nil {
		t.Fatal(err)
	}
	var wantMsgs any
	_ = json.Unmarshal(want, &wantMsgs)
	if diff := cmp.Diff(wantMsgs, retried.body["messages"]); diff != "" {
		t.Errorf("the retry's messages are not the resumed turn's (-stored +answered):\n%s", diff)
	}
	replayed := 0
	if again := s.serve(t, resume, 30*time.Second); again.raw != retried.raw {
		t.Errorf("the replay differs from the retry's answer: %s", again.raw)
	} else {
		replayed++
	}
	report(t, "The retry of a resume that failed past its tools answers with the whole turn, tool results included, and so do its replays",
		fmt.Sprintf("1 resume whose model failed, its retry and %d replay", replayed), 1-replayed)
}
