package agent_test

import (
	stdcmp "cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/lambda-agent/lambda-agent/internal/agent"
	"github.com/lambda-agent/lambda-agent/internal/testkit/conversetest"
	"github.com/lambda-agent/lambda-agent/internal/tools"
)

// system is the system prompt of a request, which tells the agents apart
// on one stand-in.
func system(req *conversetest.Request) string {
	var parts []string
	for _, b := range req.System {
		parts = append(parts, b.Text)
	}
	return strings.Join(parts, "")
}

// lastResult is the text of the last tool result a request carries.
func lastResult(req *conversetest.Request) string {
	m := req.Messages[len(req.Messages)-1]
	for _, b := range m.Content {
		if b.ToolResult != nil && len(b.ToolResult.Content) > 0 {
			if c := b.ToolResult.Content[0]; c.Text != "" {
				return c.Text
			}
			return string(b.ToolResult.Content[0].JSON)
		}
	}
	return ""
}

// TestDelegation: the main agent hands a task to a sub-agent, which runs
// its own turn, with its own prompt and tools, from an empty conversation;
// its answer is the tool's result, and the turn's usage counts both
// agents, by name.
func TestDelegation(t *testing.T) {
	s := newServer(t)
	s.Responder = func(req *conversetest.Request) conversetest.Reply {
		last := req.Messages[len(req.Messages)-1].Text()
		switch {
		case system(req) == "You research." && len(req.Messages) == 1:
			return conversetest.ToolUse("r1", "calculator", map[string]string{"expression": "6*7"}).WithUsage(100, 10)
		case system(req) == "You research.":
			return conversetest.Text("The answer is "+lastResult(req)+".").WithUsage(120, 8)
		case strings.Contains(last, "What is six times seven?"):
			return conversetest.ToolUse("m1", "researcher", map[string]string{"task": "Compute 6*7."}).WithUsage(50, 5)
		default:
			return conversetest.Text("Researcher says: "+lastResult(req)).WithUsage(70, 9)
		}
	}
	calc, err := tools.ByName([]string{"calculator"})
	if err != nil {
		t.Fatal(err)
	}
	researcher := newAgent(t, s, agent.Config{System: "You research.", Tools: calc})
	main := newAgent(t, s, agent.Config{System: "You lead.", Tools: []agent.Tool{agent.Delegate("researcher", "Researches a question.", researcher)}})

	conv := &agent.Conversation{}
	res, err := main.Run(t.Context(), conv, input("What is six times seven?"))
	if err != nil {
		t.Fatal(err)
	}
	if res.Text != `Researcher says: The answer is {"expression":"6*7","result":42}.` {
		t.Errorf("text %q", res.Text)
	}
	next(t, conv, res) // the main agent's history is valid on its own
	reqs := s.Requests()
	if len(reqs) != 4 {
		t.Fatalf("%d model calls, want 4", len(reqs))
	}
	sub := reqs[1]
	if system(sub) != "You research." || len(sub.Messages) != 1 || sub.Messages[0].Text() != "Compute 6*7." {
		t.Errorf("the sub-agent's first request: system %q, messages %+v", system(sub), sub.Messages)
	}
	if names := toolNames(sub); names != "calculator" {
		t.Errorf("the sub-agent was offered %s", names)
	}
	if names := toolNames(reqs[0]); names != "researcher" {
		t.Errorf("the main agent was offered %s", names)
	}
	want := agent.Usage{InputTokens: 340, OutputTokens: 32, TotalTokens: 372}
	if res.Usage != want {
		t.Errorf("usage %+v, want %+v", res.Usage, want)
	}
	if got := res.AgentUsage; got[agent.MainAgent].InputTokens != 120 || got["researcher"].InputTokens != 220 || len(got) != 2 {
		t.Errorf("usage by agent %+v", got)
	}
	if res.Metrics.ModelCalls != 4 || res.Metrics.Cycles != 2 || res.Metrics.ToolCalls != 2 {
		t.Errorf("metrics: %d model calls, %d cycles, %d tool calls", res.Metrics.ModelCalls, res.Metrics.Cycles, res.Metrics.ToolCalls)
	}
	// With no Conversation.Agents to read it from, the next turn's
	// delegation starts afresh: the sub-agent sees its task alone.
	res2, err := main.Run(t.Context(), next(t, conv, res), input("What is six times seven?"))
	if err != nil || res2.Text != res.Text {
		t.Fatalf("second turn: %v, %v", res2, err)
	}
	if sub := s.Requests()[5]; len(sub.Messages) != 1 {
		t.Errorf("the second delegation sent %d messages", len(sub.Messages))
	}
	// A turn that delegates nothing reports no usage by agent.
	plain := newAgent(t, s, agent.Config{System: "You lead."})
	s.Enqueue(conversetest.Text("Hi."))
	if res, err := plain.Run(t.Context(), &agent.Conversation{}, input("Hello")); err != nil || res.AgentUsage != nil {
		t.Errorf("a plain turn: %v, usage by agent %v", err, res.AgentUsage)
	}
}

func toolNames(req *conversetest.Request) string {
	if req.ToolConfig == nil {
		return ""
	}
	var names []string
	for _, t := range req.ToolConfig.Tools {
		names = append(names, t.ToolSpec.Name)
	}
	return strings.Join(names, ",")
}

// TestDelegationSharesTheTurnsBudget: the sub-agents' model calls count
// against the turn's MaxCycles; a sub-agent that runs out answers its
// parent with an error result that says so, and the main agent's turn
// ends at the cap.
func TestDelegationSharesTheTurnsBudget(t *testing.T) {
	s := newServer(t)
	s.Responder = func(req *conversetest.Request) conversetest.Reply {
		if system(req) == "You loop." {
			return conversetest.ToolUse(fmt.Sprintf("l%d", len(req.Messages)), "calculator", map[string]string{"expression": "1+1"})
		}
		if len(req.Messages) == 1 {
			return conversetest.ToolUse("m1", "looper", map[string]string{"task": "Loop."})
		}
		return conversetest.Text("Looper said: " + lastResult(req))
	}
	calc, _ := tools.ByName([]string{"calculator"})
	looper := newAgent(t, s, agent.Config{System: "You loop.", Tools: calc, MaxCycles: 50})
	main := newAgent(t, s, agent.Config{System: "You lead.", MaxCycles: 5, Tools: []agent.Tool{agent.Delegate("looper", "Loops.", looper)}})
	res, err := main.Run(t.Context(), &agent.Conversation{}, input("Go."))
	if err != nil {
		t.Fatal(err)
	}
	// The main agent's call, then the looper's four: the fifth is the cap.
	if calls := s.Calls(); calls != 5 || res.Metrics.ModelCalls != 5 {
		t.Errorf("%d model calls (metrics %d), want 5", calls, res.Metrics.ModelCalls)
	}
	if res.StopReason != agent.StopMaxCycles {
		t.Errorf("stop %s, text %q", res.StopReason, res.Text)
	}
	var result *agent.ToolResultBlock
	for _, m := range res.Messages {
		for _, b := range m.Content {
			if b.ToolResult != nil {
				result = b.ToolResult
			}
		}
	}
	if result == nil || result.Status != agent.ToolError || !strings.Contains(result.Content[0].Text, "the agent looper stopped before it finished: the turn reached its limit of 5 model calls") {
		t.Errorf("the looper's result: %+v", result)
	}

	// A sub-agent that reaches its own cap, within the turn's, says so.
	short := newAgent(t, s, agent.Config{System: "You loop.", Tools: calc, MaxCycles: 2})
	main = newAgent(t, s, agent.Config{System: "You lead.", MaxCycles: 20, Tools: []agent.Tool{agent.Delegate("looper", "Loops.", short)}})
	res, err = main.Run(t.Context(), &agent.Conversation{}, input("Go."))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(res.Text, "the agent looper stopped before it finished: it reached its limit of 2 model calls") {
		t.Errorf("the short looper's result: %q", res.Text)
	}
}

// TestDelegationFailures: a sub-agent whose model fails, or that starts
// fresh and would wait for a person, answers its parent with an error
// result; the turn goes on.
func TestDelegationFailures(t *testing.T) {
	for _, tt := range []struct {
		name  string
		reply conversetest.Reply
		sub   func(t *testing.T, s *conversetest.Server) *agent.Agent
		want  string
	}{
		{"model error", conversetest.Error(400, conversetest.CodeValidation, "bad request"), nil, "the agent helper failed"},
		{"approval", conversetest.ToolUse("h1", "calculator", map[string]string{"expression": "1"}), func(t *testing.T, s *conversetest.Server) *agent.Agent {
			calc, _ := tools.ByName([]string{"calculator"})
			return newAgent(t, s, agent.Config{System: "You help.", Tools: []agent.Tool{agent.RequireApproval(calc[0])}})
		}, "needs a person's answer, which a sub-agent that starts fresh cannot wait for"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			s := newServer(t)
			s.Responder = func(req *conversetest.Request) conversetest.Reply {
				switch {
				case system(req) == "You help.":
					return tt.reply
				case len(req.Messages) == 1:
					return conversetest.ToolUse("m1", "helper", map[string]string{"task": "Help."})
				}
				return conversetest.Text("Done: " + lastResult(req))
			}
			sub := newAgent(t, s, agent.Config{System: "You help."})
			if tt.sub != nil {
				sub = tt.sub(t, s)
			}
			main := newAgent(t, s, agent.Config{System: "You lead.", Tools: []agent.Tool{agent.Delegate("helper", "Helps.", sub, agent.Fresh())}})
			conv := &agent.Conversation{}
			res, err := main.Run(t.Context(), conv, input("Go."))
			if err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(res.Text, tt.want) || res.Pending != nil {
				t.Errorf("text %q, pending %v", res.Text, res.Pending)
			}
			next(t, conv, res)
		})
	}
}

// TestDelegationsAtOnce: two delegations in one answer to a sub-agent that
// starts fresh each time run at once, and the turn counts both.
func TestDelegationsAtOnce(t *testing.T) {
	s := newServer(t)
	s.Responder = func(req *conversetest.Request) conversetest.Reply {
		switch {
		case system(req) == "You help.":
			return conversetest.Text("done: "+req.Messages[0].Text()).WithUsage(10, 1)
		case len(req.Messages) == 1:
			return conversetest.ToolUse("a", "helper", map[string]string{"task": "A"}).
				WithToolUse("b", "helper", map[string]string{"task": "B"}).WithUsage(5, 1)
		}
		return conversetest.Text("Both done.").WithUsage(5, 1)
	}
	helper := newAgent(t, s, agent.Config{System: "You help."})
	main := newAgent(t, s, agent.Config{System: "You lead.", Tools: []agent.Tool{agent.Delegate("helper", "Helps.", helper, agent.Fresh())}})
	conv := &agent.Conversation{}
	res, err := main.Run(t.Context(), conv, input("Go."))
	if err != nil {
		t.Fatal(err)
	}
	next(t, conv, res)
	if res.Agents != nil {
		t.Errorf("a fresh sub-agent's conversation is kept: %+v", res.Agents)
	}
	if res.AgentUsage["helper"].InputTokens != 20 || res.AgentUsage[agent.MainAgent].InputTokens != 10 || res.Usage.InputTokens != 30 || res.Metrics.ModelCalls != 4 {
		t.Errorf("usage %+v by agent %+v, %d model calls", res.Usage, res.AgentUsage, res.Metrics.ModelCalls)
	}
	results := res.Messages[2].Content
	if len(results) != 2 || results[0].ToolResult.Content[0].Text != "done: A" || results[1].ToolResult.Content[0].Text != "done: B" {
		t.Errorf("results %+v", results)
	}
}

// TestDelegationHasTheTurnsTime: a delegation runs within the turn's
// deadline, not under ToolTimeout.
func TestDelegationHasTheTurnsTime(t *testing.T) {
	s := newServer(t)
	s.Responder = func(req *conversetest.Request) conversetest.Reply {
		switch {
		case system(req) == "You are slow.":
			return conversetest.Text("Finally.").WithDelay(300 * time.Millisecond)
		case len(req.Messages) == 1:
			return conversetest.ToolUse("m1", "slow", map[string]string{"task": "Take your time."})
		}
		return conversetest.Text("Slow said: " + lastResult(req))
	}
	slow := newAgent(t, s, agent.Config{System: "You are slow."})
	main := newAgent(t, s, agent.Config{System: "You lead.", ToolTimeout: 50 * time.Millisecond, Tools: []agent.Tool{agent.Delegate("slow", "Slow.", slow)}})
	res, err := main.Run(t.Context(), &agent.Conversation{}, input("Go."))
	if err != nil || res.Text != "Slow said: Finally." {
		t.Errorf("%v, %v", res, err)
	}
}

// TestDelegationStreams: a streamed turn shows its sub-agent's work as it
// happens, between the delegation's tool use and its result, each event
// tagged with the delegation; the sub-agent's state stays its own.
func TestDelegationStreams(t *testing.T) {
	s := newServer(t)
	s.Responder = func(req *conversetest.Request) conversetest.Reply {
		switch {
		case system(req) == "You research." && len(req.Messages) == 1:
			return conversetest.ToolUse("r1", "calculator", map[string]string{"expression": "6*7"})
		case system(req) == "You research.":
			return conversetest.Text("It is 42.")
		case len(req.Messages) == 1:
			return conversetest.ToolUse("m1", "researcher", map[string]string{"task": "Compute 6*7."})
		}
		return conversetest.Text("Done.")
	}
	calc, _ := tools.ByName([]string{"calculator"})
	researcher := newAgent(t, s, agent.Config{System: "You research.", Tools: calc})
	main := newAgent(t, s, agent.Config{System: "You lead.", Tools: []agent.Tool{agent.Delegate("researcher", "Researches.", researcher)}})
	var got []string
	_, err := main.Stream(t.Context(), &agent.Conversation{}, input("Go."), func(e agent.Event) {
		who := "main"
		if e.Agent != nil {
			who = e.Agent.Name + "@" + e.Agent.ID
		}
		switch {
		case e.Delegation != nil && !e.Delegation.Done:
			got = append(got, fmt.Sprintf("start %s@%s %v", e.Delegation.Run.Name, e.Delegation.Run.ID, e.Delegation.Run.Path))
		case e.Delegation != nil:
			got = append(got, fmt.Sprintf("end %s@%s %q", e.Delegation.Run.Name, e.Delegation.Run.ID, e.Delegation.Err))
		case e.Text != "":
			if n := len(got); n > 0 && strings.HasPrefix(got[n-1], who+" text ") {
				got[n-1] += e.Text
				return
			}
			got = append(got, who+" text "+e.Text)
		case e.ToolUse != nil:
			got = append(got, who+" use "+e.ToolUse.Name)
		case e.ToolResult != nil:
			got = append(got, who+" result "+e.ToolResult.ToolUseID)
		case e.State != nil:
			got = append(got, who+" state")
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		"main use researcher",
		"start researcher@m1 [researcher]",
		"researcher@m1 use calculator",
		"researcher@m1 result r1",
		"researcher@m1 text It is 42.",
		`end researcher@m1 ""`,
		"main result m1",
		"main text Done.",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("events (-want +got):\n%s", diff)
	}
}

// TestDelegationContinuesItsConversation: a sub-agent goes on from the
// conversation the loader reads, once per turn; two delegations of one
// answer take turns on it, the second seeing the first; nested and direct
// delegations share it; and Result.Agents holds what to store, a history
// Bedrock accepts on its own. A delegation that fails adds nothing.
func TestDelegationContinuesItsConversation(t *testing.T) {
	s := newServer(t)
	s.Responder = func(req *conversetest.Request) conversetest.Reply {
		last := req.Messages[len(req.Messages)-1].Text()
		switch system(req) {
		case "You help.":
			if last == "Fail." {
				return conversetest.Error(400, conversetest.CodeValidation, "bad request")
			}
			return conversetest.Text(fmt.Sprintf("%s: I have seen %d messages", last, len(req.Messages)))
		case "You write.":
			if len(req.Messages) == 1 {
				return conversetest.ToolUse("w1", "helper", map[string]string{"task": "C"})
			}
			return conversetest.Text("wrote: " + lastResult(req))
		}
		if len(req.Messages) == 1 {
			return conversetest.ToolUse("a", "helper", map[string]string{"task": "A"}).
				WithToolUse("b", "helper", map[string]string{"task": "B"}).
				WithToolUse("w", "writer", map[string]string{"task": "Write."}).
				WithToolUse("f", "helper", map[string]string{"task": "Fail."})
		}
		return conversetest.Text("All done.")
	}
	helper := newAgent(t, s, agent.Config{System: "You help."})
	helperTool := agent.Delegate("helper", "Helps.", helper)
	writer := newAgent(t, s, agent.Config{System: "You write.", Tools: []agent.Tool{helperTool}})
	main := newAgent(t, s, agent.Config{System: "You lead.", Tools: []agent.Tool{helperTool, agent.Delegate("writer", "Writes.", writer)}})

	stored := []agent.Message{agent.UserText("Earlier."), agent.AssistantText("Earlier: done")}
	state := map[string]json.RawMessage{"seen": json.RawMessage(`1`)}
	var loads []string
	var mu sync.Mutex
	conv := &agent.Conversation{Agents: func(_ context.Context, name string) (*agent.Conversation, int, error) {
		mu.Lock()
		defer mu.Unlock()
		loads = append(loads, name)
		if name == "helper" {
			return &agent.Conversation{Messages: slices.Clone(stored), Window: agent.WindowState{Removed: 6}, State: state}, 8, nil
		}
		return &agent.Conversation{}, 0, nil
	}}
	res, err := main.Run(t.Context(), conv, input("Go."))
	if err != nil {
		t.Fatal(err)
	}
	next(t, conv, res)
	slices.Sort(loads)
	if !slices.Equal(loads, []string{"helper", "writer"}) {
		t.Errorf("loads %v, want each agent once", loads)
	}
	results := map[string]string{}
	for _, b := range res.Messages[2].Content {
		results[b.ToolResult.ToolUseID] = b.ToolResult.Content[0].Text
	}
	// The stored two, then two more for each delegation before it: the
	// three delegations to helper ran one at a time, in some order.
	var seen []string
	for _, id := range []string{"a", "b"} {
		seen = append(seen, strings.SplitN(results[id], "seen ", 2)[1])
	}
	seen = append(seen, strings.SplitN(results["w"], "seen ", 2)[1])
	slices.Sort(seen)
	if !slices.Equal(seen, []string{"3 messages", "5 messages", "7 messages"}) || !strings.Contains(results["f"], "the agent helper failed") {
		t.Errorf("results %v", results)
	}
	if len(res.Agents) != 2 || res.Agents[0].Name != "helper" || res.Agents[1].Name != "writer" {
		t.Fatalf("agents %+v", res.Agents)
	}
	h := res.Agents[0]
	if h.First != 8 || len(h.Messages) != 6 || h.Window.Removed != 6 || string(h.State["seen"]) != "1" {
		t.Errorf("helper's turn: first %d, %d messages, window %+v, state %s", h.First, len(h.Messages), h.Window, h.State)
	}
	if err := agent.ValidateHistory(append(slices.Clone(stored), h.Messages...)); err != nil {
		t.Errorf("helper's history: %v", err)
	}
	if w := res.Agents[1]; w.First != 0 || len(w.Messages) != 4 || agent.ValidateHistory(w.Messages) != nil {
		t.Errorf("writer's turn: %+v", w)
	}
}

// TestDelegationCannotReadItsConversation: a conversation the loader
// cannot read makes the delegation an error result; nothing runs, and the
// turn goes on.
func TestDelegationCannotReadItsConversation(t *testing.T) {
	s := newServer(t)
	s.Responder = func(req *conversetest.Request) conversetest.Reply {
		if len(req.Messages) == 1 {
			return conversetest.ToolUse("a", "helper", map[string]string{"task": "A"})
		}
		return conversetest.Text("Helper: " + lastResult(req))
	}
	main := newAgent(t, s, agent.Config{System: "You lead.", Tools: []agent.Tool{agent.Delegate("helper", "Helps.", newAgent(t, s, agent.Config{System: "You help."}))}})
	conv := &agent.Conversation{Agents: func(context.Context, string) (*agent.Conversation, int, error) {
		return nil, 0, errors.New("throttled")
	}}
	res, err := main.Run(t.Context(), conv, input("Go."))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(res.Text, "the agent helper's conversation could not be read: throttled") || res.Agents != nil || s.Calls() != 2 {
		t.Errorf("text %q, agents %+v, %d calls", res.Text, res.Agents, s.Calls())
	}
}

func TestSubAgents(t *testing.T) {
	s := newServer(t)
	leaf := newAgent(t, s, agent.Config{System: "Leaf."})
	mid := newAgent(t, s, agent.Config{System: "Mid.", Tools: []agent.Tool{agent.Delegate("leaf", "Leaf.", leaf)}})
	calc, _ := tools.ByName([]string{"calculator"})
	main := newAgent(t, s, agent.Config{System: "Main.", Tools: append(calc, agent.Delegate("mid", "Mid.", mid), agent.Delegate("once", "Once.", leaf, agent.Fresh()))})
	names, fresh := main.SubAgents()
	if !slices.Equal(names, []string{"leaf", "mid", "once"}) || !fresh["once"] || fresh["leaf"] || fresh["mid"] {
		t.Errorf("sub-agents %v, fresh %v", names, fresh)
	}
	if names, _ := leaf.SubAgents(); names != nil {
		t.Errorf("an agent without delegations lists %v", names)
	}
}

// agentStore keeps sub-agents' conversations as a session does: it loads
// them for Conversation.Agents, and commits a Result's Agents.
type agentStore struct {
	mu  sync.Mutex
	all map[string][]agent.Message
	at  map[string]agent.AgentTurn
}

func newAgentStore() *agentStore {
	return &agentStore{all: map[string][]agent.Message{}, at: map[string]agent.AgentTurn{}}
}

func (s *agentStore) load(_ context.Context, name string) (*agent.Conversation, int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	at, all := s.at[name], s.all[name]
	return &agent.Conversation{Messages: slices.Clone(all[at.Window.Removed:]), Window: at.Window, State: at.State, Pending: at.Pending}, len(all), nil
}

// commit stores what res did to the sub-agents, and checks that each one's
// history is one Bedrock accepts on its own.
func (s *agentStore) commit(t *testing.T, res *agent.Result) {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, at := range res.Agents {
		if at.First != len(s.all[at.Name]) {
			t.Fatalf("%s: the turn's messages start at %d of %d", at.Name, at.First, len(s.all[at.Name]))
		}
		s.all[at.Name] = append(s.all[at.Name], at.Messages...)
		s.at[at.Name] = at
		if err := agent.ValidateHistory(s.all[at.Name]); err != nil {
			t.Fatalf("%s's history: %v", at.Name, err)
		}
	}
}

// session runs turns of a main agent on one conversation, through an
// agentStore, as invocations of a stateless function would.
type session struct {
	t      *testing.T
	conv   *agent.Conversation
	agents *agentStore
}

func newSession(t *testing.T) *session {
	s := &session{t: t, agents: newAgentStore()}
	s.conv = &agent.Conversation{Agents: s.agents.load}
	return s
}

// commit keeps res, as a commit would, for the next invocation.
func (s *session) commit(res *agent.Result) {
	s.t.Helper()
	full := append(slices.Clone(s.conv.Messages), res.Messages...)
	if err := agent.ValidateHistory(full); err != nil {
		s.t.Fatalf("the main agent's history: %v", err)
	}
	s.agents.commit(s.t, res)
	s.conv = &agent.Conversation{Messages: full, Window: res.Window, State: res.State, Pending: res.Pending, Agents: s.agents.load}
}

// TestDelegationPausesTheTurn: an approval or a question inside a
// sub-agent, at any depth, pauses the whole turn, and the interrupt names
// the agents down to the one that asked. The responses, in a later call,
// resume the sub-agent, which finishes; its answer is the delegation's
// result, and the main agent goes on. Each agent's history is valid on its
// own at every step.
func TestDelegationPausesTheTurn(t *testing.T) {
	s := newServer(t)
	s.Responder = func(req *conversetest.Request) conversetest.Reply {
		last := req.Messages[len(req.Messages)-1]
		switch system(req) {
		case "You research.":
			if last.Text() != "" {
				return conversetest.ToolUse(fmt.Sprint("r", len(req.Messages)), "calculator", map[string]string{"expression": "6*7"}).
					WithToolUse(fmt.Sprint("q", len(req.Messages)), agent.AskUserName, map[string]string{"question": "Which colour?"})
			}
			return conversetest.Text("Researched: " + wireResults(last))
		case "You write.":
			if last.Text() != "" {
				return conversetest.ToolUse(fmt.Sprint("w", len(req.Messages)), "researcher", map[string]string{"task": "Research " + last.Text()})
			}
			return conversetest.Text("Wrote: " + wireResults(last))
		}
		switch last.Text() {
		case "Ask the writer.":
			return conversetest.ToolUse(fmt.Sprint("m", len(req.Messages)), "writer", map[string]string{"task": "it"})
		case "":
			return conversetest.Text("Main: " + wireResults(last))
		}
		return conversetest.ToolUse(fmt.Sprint("m", len(req.Messages)), "researcher", map[string]string{"task": last.Text()})
	}
	calc, _ := tools.ByName([]string{"calculator"})
	researcher := newAgent(t, s, agent.Config{System: "You research.", Tools: []agent.Tool{agent.RequireApproval(calc[0]), agent.AskUser()}})
	research := agent.Delegate("researcher", "Researches.", researcher)
	writer := newAgent(t, s, agent.Config{System: "You write.", Tools: []agent.Tool{research}})
	main := newAgent(t, s, agent.Config{System: "You lead.", Tools: []agent.Tool{research, agent.Delegate("writer", "Writes.", writer)}})

	sess := newSession(t)
	res, err := main.Run(t.Context(), sess.conv, input("Colours?"))
	if err != nil {
		t.Fatal(err)
	}
	if res.StopReason != agent.StopInterrupt || len(res.Pending.Interrupts) != 2 {
		t.Fatalf("stop %s, pending %+v", res.StopReason, res.Pending)
	}
	for _, in := range res.Pending.Interrupts {
		if !slices.Equal(in.AgentPath, []string{"researcher"}) || in.DelegationID != "m1" || in.SubagentRunID != "m1" {
			t.Errorf("interrupt %s: path %v, delegation %s, run %s", in.ID, in.AgentPath, in.DelegationID, in.SubagentRunID)
		}
	}
	if len(res.Agents) != 1 || res.Agents[0].Pending == nil || len(res.Agents[0].Messages) != 2 {
		t.Fatalf("the researcher's turn: %+v", res.Agents)
	}
	sess.commit(res)

	// The next invocation answers, in two steps with a commit between, as
	// the turn service runs them: Answer runs the researcher's approved
	// tool and stores its answer, and calls no model; Continue runs the
	// rest of the researcher's turn, then the main agent's.
	ans, err := main.Answer(t.Context(), sess.conv, []agent.Response{
		{InterruptID: "r1", Approve: ptr(true)},
		{InterruptID: "q1", Answer: "teal"},
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(ans.Messages) != 0 || ans.Pending == nil || len(ans.Pending.Interrupts) != 0 || len(ans.Pending.Resumed) != 2 || ans.Metrics.ModelCalls != 0 || ans.Metrics.ToolCalls != 1 {
		t.Fatalf("answer: %d messages, pending %+v, %d model calls, %d tool calls", len(ans.Messages), ans.Pending, ans.Metrics.ModelCalls, ans.Metrics.ToolCalls)
	}
	if r := ans.Agents; len(r) != 1 || r[0].Pending != nil || r[0].First != 2 || len(r[0].Messages) != 1 || resultTexts(r[0].Messages[0]) != `{"expression":"6*7","result":42} teal` {
		t.Errorf("the researcher's answer: %+v", r)
	}
	sess.commit(ans)
	done, err := main.Continue(t.Context(), sess.conv, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := resultTexts(done.Messages[0]); got != `Researched: {"expression":"6*7","result":42} teal` {
		t.Errorf("the delegation's result: %q", got)
	}
	if done.Text != `Main: Researched: {"expression":"6*7","result":42} teal` {
		t.Errorf("the main agent's answer: %q", done.Text)
	}
	if r := done.Agents; len(r) != 1 || r[0].First != 3 || len(r[0].Messages) != 1 {
		t.Errorf("the rest of the researcher's turn: %+v", r)
	}
	if done.AgentUsage["researcher"].InputTokens == 0 || done.Metrics.ModelCalls != 2 {
		t.Errorf("usage by agent %+v, %d model calls", done.AgentUsage, done.Metrics.ModelCalls)
	}
	sess.commit(done)

	// Two deep: the interrupt names both agents; the writer's delegation
	// is the run that paused. A denial resumes as well.
	res, err = main.Run(t.Context(), sess.conv, input("Ask the writer."))
	if err != nil {
		t.Fatal(err)
	}
	in := res.Pending.Interrupts[0]
	if !slices.Equal(in.AgentPath, []string{"writer", "researcher"}) || in.DelegationID != "m5" || in.SubagentRunID != "w1" {
		t.Fatalf("the nested interrupt: %+v", in)
	}
	sess.commit(res)
	var ids []agent.Response
	for _, in := range res.Pending.Interrupts {
		ids = append(ids, agent.Response{InterruptID: in.ID, Approve: ptr(false)})
	}
	ans, err = main.Answer(t.Context(), sess.conv, ids, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(ans.Agents) != 2 || len(ans.Pending.Resumed) != 2 {
		t.Errorf("the answer changed %d agents, want the writer and the researcher; pending %+v", len(ans.Agents), ans.Pending)
	}
	sess.commit(ans)
	done, err = main.Continue(t.Context(), sess.conv, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := resultTexts(done.Messages[0]); !strings.HasPrefix(got, "Wrote: Researched: A person denied this tool call.") {
		t.Errorf("the writer's result: %q", got)
	}
	sess.commit(done)

	// A new message instead of responses denies a sub-agent's interrupts
	// too: the main agent's delegation gets its note now, and the
	// researcher's uses theirs on its next delegation.
	res, err = main.Run(t.Context(), sess.conv, input("More colours?"))
	if err != nil {
		t.Fatal(err)
	}
	sess.commit(res)
	res, err = main.Run(t.Context(), sess.conv, input("Even more?"))
	if err != nil {
		t.Fatal(err)
	}
	if m := res.Messages[0]; m.Content[0].ToolResult == nil || !strings.Contains(m.Content[0].ToolResult.Content[0].Text, "sent a new message instead") {
		t.Errorf("the main agent's paused delegation: %+v", m)
	}
	sess.commit(res)
	researcherHistory := sess.agents.all["researcher"]
	if !strings.Contains(resultTexts(researcherHistory[len(researcherHistory)-2]), "sent a new message instead") {
		t.Errorf("the researcher's paused uses were not answered with the note: %+v", researcherHistory[len(researcherHistory)-2])
	}
}

// resultTexts joins the texts of m's tool results.
func resultTexts(m agent.Message) string {
	var parts []string
	for _, b := range m.Content {
		if r := b.ToolResult; r != nil {
			for _, c := range r.Content {
				parts = append(parts, stdcmp.Or(c.Text, string(c.JSON)))
			}
		}
	}
	return strings.Join(parts, " ")
}

// wireResults joins the texts of the tool results of m, a message of a
// request.
func wireResults(m conversetest.Message) string {
	var parts []string
	for _, b := range m.Content {
		if r := b.ToolResult; r != nil {
			for _, c := range r.Content {
				parts = append(parts, stdcmp.Or(c.Text, string(c.JSON)))
			}
		}
	}
	return strings.Join(parts, " ")
}

func ptr[T any](v T) *T { return &v }

// TestDelegationToAPausedSubAgent: a second delegation, in the same turn,
// to a sub-agent whose turn paused gets an error result that says so; the
// turn pauses for the first.
func TestDelegationToAPausedSubAgent(t *testing.T) {
	s := newServer(t)
	s.Responder = func(req *conversetest.Request) conversetest.Reply {
		if system(req) == "You research." {
			return conversetest.ToolUse(fmt.Sprint("q", len(req.Messages)), agent.AskUserName, map[string]string{"question": "Which?"})
		}
		return conversetest.ToolUse("a", "researcher", map[string]string{"task": "A"}).
			WithToolUse("b", "researcher", map[string]string{"task": "B"})
	}
	researcher := newAgent(t, s, agent.Config{System: "You research.", Tools: []agent.Tool{agent.AskUser()}})
	main := newAgent(t, s, agent.Config{System: "You lead.", Tools: []agent.Tool{agent.Delegate("researcher", "Researches.", researcher)}})
	sess := newSession(t)
	res, err := main.Run(t.Context(), sess.conv, input("Go."))
	if err != nil {
		t.Fatal(err)
	}
	if res.StopReason != agent.StopInterrupt || len(res.Pending.Interrupts) != 1 || len(res.Pending.Results) != 1 {
		t.Fatalf("stop %s, pending %+v", res.StopReason, res.Pending)
	}
	waits, refused := res.Pending.Interrupts[0].DelegationID, res.Pending.Results[0]
	if waits == refused.ToolUseID || refused.Status != agent.ToolError || !strings.Contains(refused.Content[0].Text, "the agent researcher waits for a person's answer in this turn") {
		t.Errorf("the delegation %s waits; the other's result: %+v", waits, refused)
	}
	sess.commit(res)
}

// TestResumeOfARemovedSubAgent: a turn that paused inside a sub-agent that
// a new configuration no longer has resumes with an error result for the
// delegation, which says so; the main agent goes on.
func TestResumeOfARemovedSubAgent(t *testing.T) {
	s := newServer(t)
	s.Responder = func(req *conversetest.Request) conversetest.Reply {
		if system(req) == "You research." {
			return conversetest.ToolUse("q1", agent.AskUserName, map[string]string{"question": "Which?"})
		}
		return conversetest.ToolUse("m1", "researcher", map[string]string{"task": "A"})
	}
	researcher := newAgent(t, s, agent.Config{System: "You research.", Tools: []agent.Tool{agent.AskUser()}})
	main := newAgent(t, s, agent.Config{System: "You lead.", Tools: []agent.Tool{agent.Delegate("researcher", "Researches.", researcher)}})
	sess := newSession(t)
	res, err := main.Run(t.Context(), sess.conv, input("Go."))
	if err != nil || res.StopReason != agent.StopInterrupt {
		t.Fatalf("%v, %v", res, err)
	}
	sess.commit(res)
	without := newAgent(t, s, agent.Config{System: "You lead."})
	ans, err := without.Answer(t.Context(), sess.conv, []agent.Response{{InterruptID: "q1", Answer: "x"}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if ans.Pending != nil || len(ans.Messages) != 1 {
		t.Fatalf("answer: %+v", ans)
	}
	if r := ans.Messages[0].Content[0].ToolResult; r.Status != agent.ToolError || !strings.Contains(r.Content[0].Text, "no longer one of this agent's sub-agents") {
		t.Errorf("the delegation's result: %+v", r)
	}
	sess.commit(ans)
}

// TestTwoSubAgentsPauseAtOnce: two sub-agents of one answer both wait for
// a person; one request answers both, and each resumes with its own
// response.
func TestTwoSubAgentsPauseAtOnce(t *testing.T) {
	s := newServer(t)
	s.Responder = func(req *conversetest.Request) conversetest.Reply {
		last := req.Messages[len(req.Messages)-1]
		switch sys := system(req); {
		case sys != "You lead." && last.Text() != "":
			return conversetest.ToolUse("q-"+strings.TrimSuffix(sys, "."), agent.AskUserName, map[string]string{"question": sys + " Which?"})
		case sys != "You lead.":
			return conversetest.Text(sys + " " + wireResults(last))
		case last.Text() != "":
			return conversetest.ToolUse("a", "one", map[string]string{"task": "A"}).WithToolUse("b", "two", map[string]string{"task": "B"})
		}
		return conversetest.Text(wireResults(last))
	}
	one := newAgent(t, s, agent.Config{System: "One.", Tools: []agent.Tool{agent.AskUser()}})
	two := newAgent(t, s, agent.Config{System: "Two.", Tools: []agent.Tool{agent.AskUser()}})
	main := newAgent(t, s, agent.Config{System: "You lead.", Tools: []agent.Tool{agent.Delegate("one", "One.", one), agent.Delegate("two", "Two.", two)}})
	sess := newSession(t)
	res, err := main.Run(t.Context(), sess.conv, input("Go."))
	if err != nil || len(res.Pending.Interrupts) != 2 {
		t.Fatalf("%+v, %v", res, err)
	}
	sess.commit(res)
	ans, err := main.Answer(t.Context(), sess.conv, []agent.Response{{InterruptID: "q-One", Answer: "red"}, {InterruptID: "q-Two", Answer: "blue"}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	sess.commit(ans)
	done, err := main.Continue(t.Context(), sess.conv, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := resultTexts(done.Messages[0]); got != "One. red Two. blue" {
		t.Errorf("the delegations' results: %q", got)
	}
	sess.commit(done)
}
