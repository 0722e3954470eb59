package reliability_test

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/lambda-agent/lambda-agent/internal/agent"
	"github.com/lambda-agent/lambda-agent/internal/ddbhistory"
	"github.com/lambda-agent/lambda-agent/internal/testkit/conversetest"
)

// The tests in this file hold a pause inside a sub-agent (issue 27, point
// 3) to what interrupt_test.go holds the main agent's pauses to: two
// resumes that race, a resume sent again, another owner, interrupts that
// expire, and a crash while a resume runs. The approval waits in the
// researcher's turn, which the main agent's delegation waits for; a resume
// answers the researcher, which goes on to its end, commits a checkpoint,
// then runs the main agent. The approved tool must run at most once, and
// both agents' stored conversations must stay valid.

// researcherPrompt is the researcher's system prompt, by which the model
// stand-in tells its calls from the main agent's.
const researcherPrompt = "You research."

// researcherAgents is AGENTS with one sub-agent, researcher, offered tools.
func researcherAgents(tools ...string) string {
	raw, err := json.Marshal([]map[string]any{{
		"name": "researcher", "description": "Researches.", "system_prompt": researcherPrompt, "tools": tools,
	}})
	if err != nil {
		panic(err)
	}
	return string(raw)
}

// nestedModel answers as a main agent that hands every message to the
// researcher, as its task, under the delegation id "d-" and useID of the
// message; and as a researcher that, given the task "compute ID", asks for
// the approved tool as use ID (and current_time as ID-time when beside is
// set), and notes any other task. Each answers with its tools' results
// once it has them. Its fields may change between requests; it counts each
// agent's calls.
type nestedModel struct {
	tool   string // the tool that needs approval
	input  any    // its input
	beside bool   // the researcher asks for current_time too

	researcherCalls, mainCalls atomic.Int32
	// failMain and failResearcher, when set, fail the main agent's calls
	// that follow its delegation's result, and the researcher's that
	// follow its tools' (Bedrock 500, on every attempt).
	failMain, failResearcher atomic.Bool
	// slowResearcher and slowMain delay their answers that follow their
	// tools' results.
	slowResearcher, slowMain atomic.Int64
}

// delegationOf is the id of the main agent's delegation of the task
// "compute id".
func delegationOf(id string) string { return "d-" + useID("compute "+id) }

func (m *nestedModel) respond(req *conversetest.Request) conversetest.Reply {
	last := req.Messages[len(req.Messages)-1]
	text := last.Text()
	if len(req.System) > 0 && req.System[0].Text == researcherPrompt {
		m.researcherCalls.Add(1)
		switch {
		case strings.HasPrefix(text, "compute "):
			id := strings.TrimPrefix(text, "compute ")
			r := conversetest.Text("let me compute").WithToolUse(id, m.tool, m.input)
			if m.beside {
				r = r.WithToolUse(id+"-time", "current_time", map[string]string{})
			}
			return r
		case text != "":
			return conversetest.Text("noted: " + text)
		case m.failResearcher.Load():
			return conversetest.InternalError()
		}
		return conversetest.Text("researched: " + wireResultTexts(last)).WithDelay(time.Duration(m.slowResearcher.Load()))
	}
	m.mainCalls.Add(1)
	switch {
	case text != "":
		return conversetest.ToolUse("d-"+useID(text), "researcher", map[string]string{"task": text})
	case m.failMain.Load():
		return conversetest.InternalError()
	}
	return conversetest.Text("main: " + wireResultTexts(last)).WithDelay(time.Duration(m.slowMain.Load()))
}

// wireResultTexts joins the texts of the tool results in m, a message of
// a request.
func wireResultTexts(m conversetest.Message) string {
	var parts []string
	for _, b := range m.Content {
		if r := b.ToolResult; r != nil {
			for _, c := range r.Content {
				parts = append(parts, c.Text+string(c.JSON))
			}
		}
	}
	return strings.Join(parts, " ")
}

// newNestedSystem is newApprovalSystem with the researcher, which may use
// the calculator (approved) and current_time, and the model m answering.
func newNestedSystem(t *testing.T, env map[string]string) (*system, *toolRuns, *nestedModel) {
	t.Helper()
	vars := map[string]string{"AGENTS": researcherAgents("calculator", "current_time")}
	for k, v := range env {
		vars[k] = v
	}
	s, runs := newApprovalSystem(t, vars)
	m := &nestedModel{tool: "calculator", input: failing, beside: true}
	s.Model.Responder = m.respond
	return s, runs, m
}

// pauseInResearcher has owner's turn on session hand "compute id" to the
// researcher, whose calculator use id waits for approval, and checks that
// the turn paused for it alone, naming the researcher and the delegation.
func (s *system) pauseInResearcher(t *testing.T, owner, session, id string) reply {
	t.Helper()
	r := s.chat(t, owner, session, "compute "+id)
	ins, _ := r.body["interrupts"].([]any)
	if r.status != 200 || r.body["stop_reason"] != "interrupt" || len(ins) != 1 {
		t.Fatalf("the turn that asks for %s: %d %s; want 200 with one interrupt", id, r.status, r.raw)
	}
	if !isResearchersInterrupt(ins[0], id) {
		t.Fatalf("the turn that asks for %s paused for %v; want the researcher's %s, held by %s", id, ins[0], id, delegationOf(id))
	}
	return r
}

// isResearchersInterrupt says whether in, an interrupt as JSON decodes it,
// is the researcher's use id, held back by its delegation.
func isResearchersInterrupt(in any, id string) bool {
	m, _ := in.(map[string]any)
	return m["id"] == id && fmt.Sprint(m["agent_path"]) == "[researcher]" &&
		m["delegation_id"] == delegationOf(id) && m["subagent_run_id"] == delegationOf(id)
}

// researcherIn reads the conversation owner's session id keeps for the
// researcher: its window, and what it waits for.
func researcherIn(t testing.TB, store *ddbhistory.Store, owner, id string) *ddbhistory.AgentConversation {
	t.Helper()
	if owner == "" {
		owner = "anonymous"
	}
	sess, err := store.Load(t.Context(), ddbhistory.Key{Owner: owner, ID: id}, "")
	if err != nil {
		t.Fatalf("load session %s: %v", id, err)
	}
	c, err := store.LoadAgent(t.Context(), sess, "researcher")
	if err != nil {
		t.Fatalf("load the researcher's conversation of %s: %v", id, err)
	}
	return c
}

// researcherFinished checks that the researcher's conversation c answered
// its use id once and ended its turn: it waits for nothing and is valid.
// It returns the one result, or nil.
func researcherFinished(t testing.TB, c *ddbhistory.AgentConversation, id string) *agent.ToolResultBlock {
	t.Helper()
	msgs := c.Conversation.Messages
	rs := resultsFor(msgs, id)
	last := msgs[len(msgs)-1]
	if len(rs) != 1 || c.Conversation.Pending != nil || last.Role != agent.RoleAssistant || len(last.ToolUses()) > 0 {
		t.Errorf("the researcher's conversation holds %d results for %s, waits for %v, and ends with a %s message of %d tool uses; want one result and its answer",
			len(rs), id, c.Conversation.Pending, last.Role, len(last.ToolUses()))
		return nil
	}
	validHistory(t, msgs)
	return rs[0]
}

// researcherAnswered checks that the researcher's conversation c holds the
// result of its use id in its last message, the answer that the first
// step of a resume stores before any model call, and waits for nothing.
func researcherAnswered(t testing.TB, c *ddbhistory.AgentConversation, id string) bool {
	t.Helper()
	msgs := c.Conversation.Messages
	last := msgs[len(msgs)-1]
	if len(resultsFor(msgs[len(msgs)-1:], id)) != 1 || c.Conversation.Pending != nil || last.Role != agent.RoleUser {
		t.Errorf("the researcher's conversation ends with a %s message, with %d results for %s, and waits for %v; want its answer to %s", last.Role, len(resultsFor(msgs[len(msgs)-1:], id)), id, c.Conversation.Pending, id)
		return false
	}
	return true
}

// researcherWaits checks that the researcher's conversation c waits for
// the approval of its use id, as Bedrock would see it resumed.
func researcherWaits(t testing.TB, c *ddbhistory.AgentConversation, id string) bool {
	t.Helper()
	msgs := c.Conversation.Messages
	last := msgs[len(msgs)-1]
	p := c.Conversation.Pending
	if last.Role != agent.RoleAssistant || !slices.ContainsFunc(last.ToolUses(), func(u *agent.ToolUseBlock) bool { return u.ToolUseID == id }) ||
		p == nil || !slices.ContainsFunc(p.Interrupts, func(in agent.Interrupt) bool { return in.ID == id }) {
		t.Errorf("the researcher's conversation ends with a %s message of %d tool uses and waits for %v; want it to wait for %s", last.Role, len(last.ToolUses()), p, id)
		return false
	}
	resumable(t, msgs)
	return true
}

// validOrResumable checks a stored history as validHistory does, or, when
// it ends with the results of a resume that did not finish (which a check
// has already reported), as resumable does, so that one failure is not
// reported twice.
func validOrResumable(t testing.TB, msgs []agent.Message) {
	t.Helper()
	if len(msgs) > 0 && msgs[len(msgs)-1].Role == agent.RoleUser {
		resumable(t, msgs)
		return
	}
	validHistory(t, msgs)
}

// TestSubAgentResumesRacing sends two resumes of a turn paused inside the
// researcher at once, with the same approval and no Idempotency-Key,
// round after round: exactly one answers 200 and the other 409, and the
// researcher's approved tool runs once. In half the rounds both resumes'
// claims are held until both were sent, so that they meet at the claim;
// in the others the second starts at a random moment of the first.
func TestSubAgentResumesRacing(t *testing.T) {
	s, runs, m := newNestedSystem(t, nil)
	m.slowResearcher.Store(int64(20 * time.Millisecond))
	const rounds = 20
	rng := newRand(27)
	codes := map[string]int{}
	extra, wrong := 0, 0
	var met atomic.Int32
	for round := range rounds {
		id := fmt.Sprintf("r%d", round)
		s.pauseInResearcher(t, "alice", "race", id)
		answers := s.raceTwo(t, round, approve("alice", "race", id, true), rng, &met)
		ok, refused := 0, 0
		for _, r := range answers {
			switch {
			case r.status == 200 && r.body["stop_reason"] == "end_turn" && strings.HasPrefix(fmt.Sprint(r.body["text"]), "main: researched: "):
				ok++
			case r.status == 409 && (r.code() == "conflict" || r.code() == "no_interrupt_pending"):
				refused++
				codes[r.code()]++
			default:
				t.Errorf("round %d: %d %s", round, r.status, r.raw)
			}
		}
		if ok != 1 || refused != 1 {
			wrong++
			t.Errorf("round %d: %d answered 200 and %d 409; want one each", round, ok, refused)
		}
		if n := runs.of(id); n != 1 {
			extra += abs(n - 1)
			t.Errorf("round %d: the approved tool ran %d times", round, n)
		}
		// The researcher's window may slide past earlier rounds: each
		// round checks its own.
		if r := researcherFinished(t, researcherIn(t, s.direct, "alice", "race"), id); r == nil || !strings.Contains(resultText(r), "division by zero") {
			wrong++
			t.Errorf("round %d: the researcher's result for %s is %+v; want the tool's one", round, id, r)
		}
	}
	st := s.stored(t, "alice", "race")
	for round := range rounds {
		id := fmt.Sprintf("r%d", round)
		if rs := resultsFor(st.messages, delegationOf(id)); len(rs) != 1 || !strings.Contains(resultText(rs[0]), "division by zero") {
			wrong++
			t.Errorf("round %d: the main agent's stored results for %s are %+v; want the researcher's one answer", round, delegationOf(id), rs)
		}
	}
	validHistory(t, st.messages)
	if ids := s.interruptsOf(t, "alice", "race"); len(ids) != 0 {
		wrong++
		t.Errorf("GET lists interrupts %v after every resume", ids)
	}
	report(t, "Two resumes of a turn paused inside a sub-agent, racing: one answers 200 and the other 409, the sub-agent's approved tool runs once, and both agents' stored conversations stay valid",
		fmt.Sprintf("%d rounds of 2 identical resumes of the researcher's approval, %d of them meeting at the claim, %d at random moments (%d refused as conflict, %d as no_interrupt_pending); %d approvals, %d tool runs",
			rounds, met.Load(), rounds-rounds/2, codes["conflict"], codes["no_interrupt_pending"], rounds, rounds+extra), extra+wrong)
}

// TestSubAgentResumeRetriedWithItsKey sends a resume of a turn paused
// inside the researcher again with its Idempotency-Key: after it
// answered, the retry replays the answer and runs no tool and calls no
// model. Then a resume whose main agent's model fails on every attempt
// after the researcher finished: its retry with the key completes the
// turn without running the researcher's tool or calling its model again.
func TestSubAgentResumeRetriedWithItsKey(t *testing.T) {
	s, runs, m := newNestedSystem(t, nil)
	extra, wrong := 0, 0
	ran := func(what, id string, want int) {
		t.Helper()
		if n := runs.of(id); n != want {
			extra += abs(n - want)
			t.Errorf("%s: the approved tool ran %d times, want %d", what, n, want)
		}
	}

	// A retry after the answer.
	s.pauseInResearcher(t, "alice", "again", "a1")
	resume := approve("alice", "again", "a1", true).withKey("resume-a1")
	first := s.serve(t, resume, 30*time.Second)
	if first.status != 200 || !strings.HasPrefix(fmt.Sprint(first.body["text"]), "main: researched: ") {
		t.Fatalf("the resume: %d %s", first.status, first.raw)
	}
	if msgs, _ := first.body["messages"].([]any); len(msgs) != 2 {
		wrong++
		t.Errorf("the resume answers %d messages, want the delegation's result and the answer", len(msgs))
	}
	calls := s.Model.Calls()
	const retries = 3
	for i := range retries {
		again := s.serve(t, resume, 30*time.Second)
		if again.status != 200 || again.headers.Get("Idempotent-Replayed") != "true" {
			wrong++
			t.Errorf("retry %d: %d %s, replayed %q", i, again.status, again.raw, again.headers.Get("Idempotent-Replayed"))
		}
		if diff := cmp.Diff(first.body, again.body); diff != "" {
			wrong++
			t.Errorf("retry %d replays another answer (-first +retry):\n%s", i, diff)
		}
	}
	if n := s.Model.Calls() - calls; n != 0 {
		wrong++
		t.Errorf("the retries called the model %d times", n)
	}
	ran("a resume and its retries", "a1", 1)
	if r := s.serve(t, approve("alice", "again", "a1", false).withKey("resume-a1"), 30*time.Second); r.status != 422 || r.code() != "idempotency_key_reused" {
		wrong++
		t.Errorf("a denial under the approval's key: %d %s; want 422", r.status, r.raw)
	}
	ran("a denial under the approval's key", "a1", 1)

	// A resume whose main agent fails after the researcher finished, then
	// its retry.
	s.pauseInResearcher(t, "alice", "again", "b1")
	m.failMain.Store(true)
	resume = approve("alice", "again", "b1", true).withKey("resume-b1")
	if r := s.serve(t, resume, 30*time.Second); r.status != 502 || r.code() != "model_error" {
		wrong++
		t.Errorf("the resume whose main agent's model fails: %d %s; want 502 model_error", r.status, r.raw)
	}
	ran("the failed resume", "b1", 1)
	// The checkpoint holds the researcher's answer, its tool's result,
	// stored before any model call: GET lists no interrupt, the session
	// still ends with the delegation, and the main agent's turn waits for
	// the rest of the researcher's.
	st := s.stored(t, "alice", "again")
	if ids := s.interruptsOf(t, "alice", "again"); len(ids) != 0 || st.session.Conversation.Pending == nil || len(st.session.Conversation.Pending.Resumed) != 1 {
		wrong++
		t.Errorf("after the failed resume, GET lists %v, and the session holds back %+v", ids, st.session.Conversation.Pending)
	}
	resumable(t, st.messages)
	if !researcherAnswered(t, researcherIn(t, s.direct, "alice", "again"), "b1") {
		wrong++
	}
	m.failMain.Store(false)
	retried := s.serve(t, resume, 30*time.Second)
	if retried.status != 200 || !strings.HasPrefix(fmt.Sprint(retried.body["text"]), "main: researched: ") {
		wrong++
		t.Errorf("the retry of the resume that failed after the researcher's tool ran: %d %s; want 200 with the main agent's answer", retried.status, retried.raw)
	}
	// The researcher's answer to its tool's result was not stored, as a
	// model's is not until its turn commits: the retry asks it again, and
	// runs no tool.
	researcherFinished(t, researcherIn(t, s.direct, "alice", "again"), "b1")
	ran("the failed resume and its retry", "b1", 1)
	calls = s.Model.Calls()
	if again := s.serve(t, resume, 30*time.Second); again.status != 200 || again.headers.Get("Idempotent-Replayed") != "true" || again.raw != retried.raw {
		wrong++
		t.Errorf("the second retry: %d %s, replayed %q; want %s", again.status, again.raw, again.headers.Get("Idempotent-Replayed"), retried.raw)
	}
	if s.Model.Calls() != calls {
		wrong++
		t.Error("the second retry called the model")
	}
	ran("the failed resume and its retries", "b1", 1)

	st = s.stored(t, "alice", "again")
	for _, id := range []string{"a1", "b1"} {
		if rs := resultsFor(st.messages, delegationOf(id)); len(rs) != 1 {
			wrong++
			t.Errorf("%d stored results for %s", len(rs), delegationOf(id))
		}
	}
	if last := st.messages[len(st.messages)-1]; last.Role != agent.RoleAssistant || len(last.ToolUses()) > 0 {
		wrong++
		t.Errorf("the session ends with a %s message of %d tool uses; want the main agent's answer", last.Role, len(last.ToolUses()))
	}
	validOrResumable(t, st.messages)
	validHistory(t, researcherIn(t, s.direct, "alice", "again").Conversation.Messages)
	report(t, "A resume of a turn paused inside a sub-agent, sent again with its Idempotency-Key, replays its answer and runs nothing; after a model failed past the sub-agent's tool, the retry completes the turn without running the tool again",
		fmt.Sprintf("1 resume replayed %d times and refused under the key with a denial; 1 resume whose main agent's model failed (Bedrock 500 on every attempt) after the researcher finished, retried twice; 2 approvals, %d tool runs", retries, 2+extra), extra+wrong)
}

// TestSubAgentResumeWhoseSubAgentFails resumes a turn paused inside the
// researcher whose model then fails on every attempt, after its approved
// tool ran. The delegation's result is an error and the turn answers 200,
// as for any sub-agent whose model fails; the tool ran once; and the
// researcher's stored conversation holds what the tool gave, so that its
// next turn never tells it that the tool did not run.
func TestSubAgentResumeWhoseSubAgentFails(t *testing.T) {
	s, runs, m := newNestedSystem(t, nil)
	wrong := 0
	s.pauseInResearcher(t, "alice", "failing", "f1")
	m.failResearcher.Store(true)
	r := s.serve(t, approve("alice", "failing", "f1", true), 30*time.Second)
	m.failResearcher.Store(false)
	if r.status != 200 || !strings.Contains(r.raw, "the agent researcher failed") {
		wrong++
		t.Errorf("the resume whose researcher's model fails: %d %s; want 200 with the delegation's error result", r.status, r.raw)
	}
	if n := runs.of("f1"); n != 1 {
		wrong++
		t.Errorf("the approved tool ran %d times, want 1", n)
	}
	st := s.stored(t, "alice", "failing")
	if ids := s.interruptsOf(t, "alice", "failing"); len(ids) != 0 || len(resultsFor(st.messages, delegationOf("f1"))) != 1 {
		wrong++
		t.Errorf("after the resume, GET lists %v, and the session holds %d results for %s", ids, len(resultsFor(st.messages, delegationOf("f1"))), delegationOf("f1"))
	}
	validHistory(t, st.messages)
	// The next delegation goes on from the researcher's stored
	// conversation: the calculator's result must be there, or be made there,
	// as what the tool gave.
	if r := s.chat(t, "alice", "failing", "next"); r.status != 200 {
		wrong++
		t.Errorf("the next turn: %d %s", r.status, r.raw)
	}
	c := researcherIn(t, s.direct, "alice", "failing")
	if rs := resultsFor(c.Conversation.Messages, "f1"); len(rs) != 1 || !strings.Contains(resultText(rs[0]), "division by zero") {
		wrong++
		var got []string
		for _, r := range rs {
			got = append(got, resultText(r))
		}
		t.Errorf("the researcher's stored results for f1, which ran, are %q; want the tool's one", got)
	}
	validHistory(t, c.Conversation.Messages)
	report(t, "A resume whose sub-agent's model fails after its approved tool ran answers 200 with the delegation's error result; the tool ran once, and the sub-agent's conversation keeps what the tool gave",
		"1 resume of the researcher's approval whose model then answered Bedrock 500 on every attempt, then 1 turn that delegates again", wrong)
}

// TestSubAgentInterruptsAreTheOwners has another owner, and a caller
// without an identity, try to read, answer and deny the interrupt of a
// turn paused inside the researcher. Each gets 404, as for any session
// not theirs; nothing runs, no model is called, neither agent's
// conversation changes, and its owner can still resume it.
func TestSubAgentInterruptsAreTheOwners(t *testing.T) {
	s, runs, _ := newNestedSystem(t, nil)
	s.pauseInResearcher(t, "alice", "mine", "m1")
	before := s.stored(t, "alice", "mine")
	researcherBefore := researcherIn(t, s.direct, "alice", "mine")
	calls := s.Model.Calls()
	leaks, tried := 0, 0
	for _, who := range []string{"bob", ""} {
		for _, q := range []request{
			call("GET", "/sessions/mine", who, nil),
			approve(who, "mine", "m1", true),
			approve(who, "mine", "m1", true).withKey("stolen"),
			approve(who, "mine", "m1", false),
			approve(who, "mine", delegationOf("m1"), true),
			call("POST", "/chat", who, map[string]any{"session_id": "mine", "responses": []map[string]any{{"interrupt_id": "m1", "answer": "yes"}}}),
			call("POST", "/chat", who, map[string]any{"session_id": "mine", "message": "move on", "deny_pending": true}),
		} {
			tried++
			r := s.serve(t, q, 30*time.Second)
			if r.status != 404 || r.code() != "not_found" || strings.Contains(r.raw, "m1") || strings.Contains(r.raw, "researcher") {
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
	if diff := cmp.Diff(researcherBefore, researcherIn(t, s.direct, "alice", "mine")); diff != "" {
		leaks++
		t.Errorf("others' requests changed the researcher's conversation:\n%s", diff)
	}
	if ids := s.interruptsOf(t, "alice", "mine"); !cmp.Equal(ids, []string{"m1"}) {
		t.Errorf("the owner's GET lists %v, want [m1]", ids)
	}
	if r := s.serve(t, approve("alice", "mine", "m1", true), 30*time.Second); r.status != 200 || runs.of("m1") != 1 {
		t.Errorf("the owner's resume: %d %s, %d tool runs", r.status, r.raw, runs.of("m1"))
	}
	validHistory(t, s.stored(t, "alice", "mine").messages)
	researcherFinished(t, researcherIn(t, s.direct, "alice", "mine"), "m1")
	report(t, "Another owner, or a caller without an identity, can neither see, answer nor deny the interrupt of a turn paused inside a sub-agent: 404, nothing runs, no model is called, neither agent's conversation changes",
		fmt.Sprintf("%d requests from 2 other identities: GET, approvals of the sub-agent's use with and without a key and of the delegation's, a denial, an answer, and a message that denies the pending interrupts", tried), leaks)
}

// TestExpiredSubAgentInterrupts lets interrupts of the researcher expire
// (INTERRUPT_TTL=1s, on the wall clock, as TestExpiredInterrupts does).
// They then count as denied: a message needs no deny_pending, and a late
// approval runs nothing; the researcher, then the main agent, go on, and
// both conversations say the use expired.
func TestExpiredSubAgentInterrupts(t *testing.T) {
	s, runs, _ := newNestedSystem(t, map[string]string{"INTERRUPT_TTL": "1s"})
	wrong := 0
	// It fails, too, on a sub-agent's interrupt that waits
	// agent.DefaultInterruptTTL (24 h), as one did while app built the
	// sub-agents without INTERRUPT_TTL.
	wait := func(rs ...reply) { t.Helper(); waitForExpiry(t, rs...) }
	expired := func(what, session, id string) {
		t.Helper()
		st := s.stored(t, "alice", session)
		rs := resultsFor(st.messages, delegationOf(id))
		if len(rs) != 1 || !strings.Contains(resultText(rs[0]), "expired") {
			wrong++
			t.Errorf("%s: the main agent's stored results for %s are %+v; want one that says it expired", what, delegationOf(id), rs)
		}
		if last := st.messages[len(st.messages)-1]; last.Role != agent.RoleAssistant || !strings.HasPrefix(last.Text(), "main: ") {
			wrong++
			t.Errorf("%s: the session ends with a %s message %q; want the main agent's answer", what, last.Role, last.Text())
		}
		if r := researcherFinished(t, researcherIn(t, s.direct, "alice", session), id); r == nil || r.Status != agent.ToolError || !strings.Contains(resultText(r), "expired") {
			wrong++
			t.Errorf("%s: the researcher's result for %s is %+v; want one that says it expired", what, id, r)
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

	wait(s.pauseInResearcher(t, "alice", "late-message", "e1"), s.pauseInResearcher(t, "alice", "late-approval", "e2"))
	if ids := s.interruptsOf(t, "alice", "late-message"); len(ids) != 0 {
		wrong++
		t.Errorf("GET lists %v after the expiry", ids)
	}
	// The message goes to the researcher too, whose first message answers
	// its expired use.
	if r := s.chat(t, "alice", "late-message", "never mind"); r.status != 200 || r.body["text"] != "main: noted: never mind" {
		wrong++
		t.Errorf("a message after the expiry: %d %s; want 200 with the researcher's note", r.status, r.raw)
	}
	expired("a message after the expiry", "late-message", "e1")

	if r := s.serve(t, approve("alice", "late-approval", "e2", true), 30*time.Second); r.status != 200 || !strings.HasPrefix(fmt.Sprint(r.body["text"]), "main: researched: ") {
		wrong++
		t.Errorf("an approval after the expiry: %d %s; want 200 with the researcher's answer", r.status, r.raw)
	}
	expired("an approval after the expiry", "late-approval", "e2")
	report(t, "An interrupt of a sub-agent past INTERRUPT_TTL counts as denied: a message needs no deny_pending, a late approval runs nothing, the sub-agent and then the main agent go on, and both conversations say it expired",
		"2 interrupts of the researcher left to expire (TTL 1s): 1 followed by a message, 1 by its approval", wrong)
}

// TestCrashWhileResumingASubAgent kills the chat function's process with
// SIGKILL while it resumes a turn paused inside the researcher, whose
// "slow" tool a person approved: while the tool runs, during the
// researcher's model call after it, between the checkpoint and the main
// agent's answer (during its model call), and at random moments. After
// each kill the session still waits for the person, or holds the
// delegation's result, or is done: never broken. GET agrees with what is
// stored, both agents' histories are ones Bedrock takes, the dead
// request's claim frees by its deadline plus the hold margin, the retry
// finishes the turn, and a tool that ran to its end does not run again.
func TestCrashWhileResumingASubAgent(t *testing.T) {
	t.Parallel()
	// The slow tool takes toolTime, within the resume's timeout less the
	// agent's reserve of 3 s; a run of the tool takes at least that long.
	const toolTime, timeout = time.Second, 5 * time.Second
	b := newSandbox(t, "APPROVAL_TOOLS=slow", "AGENTS="+researcherAgents("slow"))
	m := &nestedModel{tool: "slow", input: map[string]int{"milliseconds": int(toolTime.Milliseconds())}}
	b.model.Responder = m.respond
	rng := newRand(273)
	kills, states := map[string]int{}, map[string]int{}
	broken, round := 0, 0
	var latest time.Duration // the latest a claim freed, past its deadline
	get := func() []any {
		t.Helper()
		status, body, raw := b.send(t, sandboxEvent(t, "GET", "/sessions/crashy", nil, ""), 10*time.Second)
		if status != 200 {
			t.Fatalf("GET: %d %s", status, raw)
		}
		listed, _ := body["interrupts"].([]any)
		return listed
	}
	// must, when set, is the state the kill must leave.
	crash := func(where, must string, script func(), when func(calls int)) {
		t.Helper()
		round++
		id := fmt.Sprintf("slow-%d", round)
		delegation := delegationOf(id)
		status, body, raw := b.send(t, chatEvent(t, "compute "+id), 10*time.Second)
		if ins, _ := body["interrupts"].([]any); status != 200 || len(ins) != 1 || !isResearchersInterrupt(ins[0], id) {
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
		// The resume's first model call is the researcher's, with the
		// tool's result: once it was made, the tool had run to its end,
		// and the retry must not run it again.
		ranToItsEnd := b.model.Calls() > calls
		deadline := inv.Timing().Deadline
		kills[where]++
		m.slowResearcher.Store(0)
		m.slowMain.Store(0)
		b.model.Reset()
		if err := b.fn.Restart(t.Context()); err != nil {
			t.Fatal(err)
		}

		// What the kill left.
		st := storedIn(t, b.store, "", "crashy")
		researcher := researcherIn(t, b.store, "", "crashy")
		last := st.messages[len(st.messages)-1]
		listed := get()
		var state string
		pending := st.session.Conversation.Pending
		switch {
		case last.Role == agent.RoleAssistant && len(last.ToolUses()) == 1 && last.ToolUses()[0].ToolUseID == delegation &&
			pending != nil && len(pending.Interrupts) == 0 && len(pending.Resumed) == 1:
			// The first step of the resume is stored: the tool's result,
			// in the researcher's answer.
			state = "with the sub-agent's answer"
			if len(listed) != 0 {
				broken++
				t.Errorf("%s: the researcher's answer is stored, but GET lists %v", where, listed)
			}
			if !researcherAnswered(t, researcher, id) {
				broken++
			}
			resumable(t, st.messages)
		case last.Role == agent.RoleAssistant && len(last.ToolUses()) == 1 && last.ToolUses()[0].ToolUseID == delegation:
			state = "waiting"
			if st.session.Conversation.Pending == nil || len(listed) != 1 || !isResearchersInterrupt(listed[0], id) {
				broken++
				t.Errorf("%s: the session waits for %s, but GET lists %v", where, id, listed)
			}
			if !researcherWaits(t, researcher, id) {
				broken++
			}
			resumable(t, st.messages)
		case last.Role == agent.RoleUser && len(resultsFor(st.messages[len(st.messages)-1:], delegation)) == 1:
			state = "with the delegation's result"
			if st.session.Conversation.Pending != nil || len(listed) != 0 {
				broken++
				t.Errorf("%s: the session holds the result of %s, but GET lists %v", where, delegation, listed)
			}
			if researcherFinished(t, researcher, id) == nil {
				broken++
			}
			resumable(t, st.messages)
		case last.Role == agent.RoleAssistant && len(last.ToolUses()) == 0 && len(resultsFor(st.messages, delegation)) == 1:
			state = "done"
			if len(listed) != 0 {
				broken++
				t.Errorf("%s: the turn is done, but GET lists %v", where, listed)
			}
			if researcherFinished(t, researcher, id) == nil {
				broken++
			}
			validHistory(t, st.messages)
		default:
			broken++
			t.Errorf("%s: the session ends with a %s message of %d tool uses, and %d results for %s", where, last.Role, len(last.ToolUses()), len(resultsFor(st.messages, delegation)), delegation)
			return
		}
		states[state]++
		if must != "" && state != must {
			broken++
			t.Errorf("%s: the session is left %s, want %s", where, state, must)
		}

		// The retry: refused while the dead request's claim holds, then
		// answered.
		freeBy := deadline.Add(ddbhistory.HoldMargin + 2*time.Second)
		researcherCalls := m.researcherCalls.Load()
		var took time.Duration
		for {
			start := time.Now()
			status, _, raw = b.send(t, resume, 10*time.Second)
			took = time.Since(start)
			if status != 409 || !strings.Contains(raw, `"code":"conflict"`) || time.Now().After(freeBy) {
				break
			}
			time.Sleep(250 * time.Millisecond)
		}
		if status != 409 || !strings.Contains(raw, `"code":"conflict"`) {
			latest = max(latest, time.Since(deadline)-took)
		}
		switch {
		case status == 409 && strings.Contains(raw, `"code":"conflict"`):
			broken++
			t.Errorf("%s: the dead request's claim still held %s past its deadline", where, time.Since(deadline))
		case state == "done" && (status != 409 || !strings.Contains(raw, "no_interrupt_pending")):
			broken++
			t.Errorf("%s: the retry of a finished resume: %d %s; want 409 no_interrupt_pending", where, status, raw)
		case state == "done":
		case status != 200:
			broken++
			t.Errorf("%s: the retry, %s: %d %s; want 200", where, state, status, raw)
		case ranToItsEnd && took >= toolTime:
			broken++
			t.Errorf("%s: the retry took %s: it ran the approved tool again, which had run to its end (the session was left %s)", where, took, state)
		case state == "waiting" && took < toolTime:
			t.Errorf("%s: the retry took %s, less than the tool, which it had to run", where, took)
		case state != "waiting" && took >= toolTime:
			broken++
			t.Errorf("%s: the retry took %s: it ran the tool again", where, took)
		}
		// The researcher's answer to its tool's result is stored with the
		// turn's end alone, as a model's answer is: a retry may ask again.
		if n := m.researcherCalls.Load() - researcherCalls; state == "with the delegation's result" && n != 0 || n > 1 {
			broken++
			t.Errorf("%s: the retry, %s, called the researcher's model %d times", where, state, n)
		}
		st = storedIn(t, b.store, "", "crashy")
		if rs := resultsFor(st.messages, delegation); len(rs) != 1 || st.messages[len(st.messages)-1].Role != agent.RoleAssistant {
			broken++
			t.Errorf("%s: after the retry, %d results for %s, and the last message is the %s's", where, len(rs), delegation, st.messages[len(st.messages)-1].Role)
		}
		if listed := get(); len(listed) != 0 {
			broken++
			t.Errorf("%s: after the retry, GET lists %v", where, listed)
		}
		if researcherFinished(t, researcherIn(t, b.store, "", "crashy"), id) == nil {
			broken++
		}
		validOrResumable(t, st.messages)
	}

	const (
		inTool     = "while the sub-agent's approved tool runs"
		inResearch = "during the sub-agent's model call after the tool"
		between    = "during the main agent's model call after the sub-agent's end"
		atRandom   = "at a random moment"
	)
	crash(inTool, "waiting", func() {}, func(int) {
		// The claim is written, then the researcher's conversation read,
		// then the tool starts.
		waitFor(t, "the claim", func() bool {
			sess, err := b.store.Load(t.Context(), ddbhistory.Key{Owner: "anonymous", ID: "crashy"}, "")
			return err == nil && sess.Resuming
		})
		time.Sleep(toolTime / 4)
	})
	crash(inResearch, "with the sub-agent's answer", func() {
		m.slowResearcher.Store(int64(time.Minute))
	}, func(calls int) { waitCalls(t, b.model, calls+1) })
	crash(between, "with the sub-agent's answer", func() {
		m.slowMain.Store(int64(time.Minute))
	}, func(calls int) { waitCalls(t, b.model, calls+2) })
	for range 2 {
		at := time.Duration(rng.IntN(int(toolTime.Milliseconds())+100)) * time.Millisecond
		crash(atRandom, "", func() {
			m.slowResearcher.Store(int64(10 * time.Millisecond))
			m.slowMain.Store(int64(10 * time.Millisecond))
		}, func(int) { time.Sleep(at) })
	}
	validHistory(t, researcherIn(t, b.store, "", "crashy").Conversation.Messages)
	var parts []string
	for _, where := range []string{inTool, inResearch, between, atRandom} {
		parts = append(parts, fmt.Sprintf("%d %s", kills[where], where))
	}
	var left []string
	for _, state := range []string{"waiting", "with the sub-agent's answer", "with the delegation's result", "done"} {
		left = append(left, fmt.Sprintf("%d %s", states[state], state))
	}
	report(t, "A crash (SIGKILL) while a resume of a turn paused inside a sub-agent runs leaves the session waiting, holding the sub-agent's answer, or done, consistent with GET, both agents' histories valid; the claim frees by the dead invocation's deadline plus the hold margin, the retry finishes the turn, and a tool that ran to its end does not run again",
		fmt.Sprintf("%d SIGKILLs of the chat bootstrap during resumes: %s; left %s; claims freed at most %s past the dead invocation's deadline",
			round, strings.Join(parts, ", "), strings.Join(left, ", "), latest.Round(100*time.Millisecond)), broken)
}
