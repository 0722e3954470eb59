package agent

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// MainAgent is the name of the agent a turn starts with, in usage by
// agent and in agent paths. No sub-agent may take it.
const MainAgent = "main"

// MaxDelegationDepth is how deep delegations may nest: the main agent's
// sub-agents are at depth 1, theirs at 2.
const MaxDelegationDepth = 3

// Delegate returns the tool through which an agent hands a task to sub, a
// sub-agent named name: the model calls it with {"task": "..."}, sub runs
// a turn of its own whose user message is the task, and its final answer
// is the tool's result.
//
// A delegation shares the turn's budgets: its model calls count against
// the MaxCycles of the agent the turn started with, as well as against
// sub's own, and it runs within the turn's deadline, not under
// ToolTimeout. Its usage and metrics are added to the turn's, and
// Result.AgentUsage reports each agent's usage by name.
//
// A sub-agent goes on from its conversation: the one Conversation.Agents
// reads, once per turn, and Result.Agents reports for the store, or, with
// no loader, an empty one that lasts the turn. Delegations to one
// sub-agent take turns on it. One whose turn waits for a person pauses the
// delegating turn: the interrupts hold back the delegation's tool use,
// with the sub-agent's name first in their AgentPath, and Answer resumes
// it. With Fresh, every delegation starts from an empty conversation,
// stored nowhere, and one that would wait for a person answers with an
// error result. One that fails or runs out of model calls answers with an
// error result, and the turn goes on.
func Delegate(name, description string, sub *Agent, opts ...DelegateOption) Tool {
	d := &delegation{name: name, description: description, sub: sub}
	for _, o := range opts {
		o(d)
	}
	return d
}

// SubAgents lists the names of the sub-agents a's turns may reach, through
// its delegations and theirs, in order; fresh says which of them start
// afresh on every delegation, and so have no stored conversation.
func (a *Agent) SubAgents() (names []string, fresh map[string]bool) {
	fresh = map[string]bool{}
	seen := map[*Agent]bool{}
	var walk func(a *Agent)
	walk = func(a *Agent) {
		if seen[a] {
			return
		}
		seen[a] = true
		for _, t := range a.cfg.Tools {
			d, ok := t.(*delegation)
			if !ok {
				continue
			}
			if _, dup := fresh[d.name]; !dup {
				names = append(names, d.name)
			}
			fresh[d.name] = d.fresh
			walk(d.sub)
		}
	}
	walk(a)
	slices.Sort(names)
	return names, fresh
}

// DelegateOption configures a delegation.
type DelegateOption func(*delegation)

// Fresh makes every delegation start the sub-agent from an empty
// conversation, which is stored nowhere, rather than continue the one the
// session keeps for it.
func Fresh() DelegateOption { return func(d *delegation) { d.fresh = true } }

type delegation struct {
	name, description string
	sub               *Agent
	fresh             bool
}

// taskSchema is a delegation's input.
var taskSchema = json.RawMessage(`{"type":"object","properties":{"task":{"type":"string","minLength":1,"description":"The task, with everything the agent needs to know to do it: it sees nothing else of this conversation."}},"required":["task"],"additionalProperties":false}`)

func (d *delegation) Spec() ToolSpec {
	return ToolSpec{Name: d.name, Description: d.description, InputSchema: taskSchema}
}

// Run runs the sub-agent's turn: for a model's call, inside the turn
// that made it; for a direct call, as a turn of its own.
func (d *delegation) Run(ctx context.Context, call *ToolCall) ([]ToolResultContent, error) {
	var in struct {
		Task string `json:"task"`
	}
	if err := json.Unmarshal(call.Input, &in); err != nil || strings.TrimSpace(in.Task) == "" {
		return nil, errors.New(`the input must be {"task": "..."}, with a task that is not blank`)
	}
	return d.run(ctx, call, false, func(t *turn) (*Result, error) {
		t.begin(ctx, []ContentBlock{Text(in.Task)})
		return t.loop(ctx)
	})
}

// errGoesOn ends the first step of a delegation's resume: its sub-agent
// took the responses, and Continue runs the rest of its turn.
var errGoesOn = errors.New("the sub-agent goes on once its answer is stored")

// pausedError is a delegation whose sub-agent's turn paused for a person:
// the interrupts hold back the delegating tool use, as they are seen from
// the delegating agent.
type pausedError struct{ interrupts []Interrupt }

func (e *pausedError) Error() string { return "the sub-agent waits for a person" }

// run runs a turn of the sub-agent, which step takes from its
// conversation to its end, and makes the delegation's result of it. Inside
// a turn, the sub-agent shares its budget and stream, and its
// conversation is the one the session keeps for it, unless it starts
// fresh; a turn of such a sub-agent that pauses pauses the delegating
// turn.
//
// A partial step, the first of a resume, leaves the sub-agent's turn to be
// continued: once it ran, run keeps the conversation and returns
// errGoesOn.
func (d *delegation) run(ctx context.Context, call *ToolCall, partial bool, step func(t *turn) (*Result, error)) (_ []ToolResultContent, err error) {
	parent := call.turn
	if parent != nil && len(parent.path) >= MaxDelegationDepth {
		return nil, fmt.Errorf("delegations nest at most %d deep", MaxDelegationDepth)
	}
	conv := &Conversation{}
	var kept *agentConversation
	if parent != nil && !d.fresh {
		// One delegation at a time goes on the sub-agent's conversation:
		// the next continues from where this one leaves it.
		c, release, err := parent.agents.take(ctx, d.name)
		if err != nil {
			return nil, fmt.Errorf("the agent %s's conversation could not be read: %w", d.name, err)
		}
		defer release()
		if c.paused {
			return nil, fmt.Errorf("the agent %s waits for a person's answer in this turn; delegate to it again once the person answered", d.name)
		}
		conv, kept = c.conv, c
	}
	t := d.sub.newTurn(conv)
	t.name = d.name
	if parent != nil {
		t.path = append(append([]string(nil), parent.path...), d.name)
		t.budget = parent.budget
		t.agents = parent.agents
		t.nested = true
		defer parent.merge(t)
		t.run = &AgentRun{ID: call.ID, Name: d.name, Description: d.description, Path: t.path}
		if parent.run != nil {
			t.run.ParentID = parent.run.ID
		}
		if parent.emit != nil {
			run := t.run
			t.emit = func(e Event) {
				if e.State != nil || e.Interrupt != nil {
					// The sub-agent's state is its own, and its interrupts
					// reach the stream as the delegating turn's.
					return
				}
				if e.Agent == nil && e.Delegation == nil {
					e.Agent = run
				}
				parent.send(e)
			}
			parent.send(Event{Delegation: &Delegation{Run: *run}})
			defer func() {
				end := &Delegation{Run: *run, Done: true}
				var paused *pausedError
				switch {
				case errors.Is(err, errGoesOn):
					end.Continues = true
				case errors.As(err, &paused):
					for _, in := range paused.interrupts {
						end.Suspended = append(end.Suspended, in.ID)
					}
				case err != nil:
					end.Err = err.Error()
				}
				parent.send(Event{Delegation: end})
			}()
		}
	} else {
		t.path = []string{d.name}
	}
	box, err := d.sub.turnBox(ctx, nil)
	if err != nil {
		return nil, err
	}
	t.box = box
	res, err := step(t)
	if err != nil {
		var te *TurnError
		if errors.As(err, &te) {
			err = te.Err
		}
		return nil, fmt.Errorf("the agent %s failed: %w", d.name, err)
	}
	if res.StopReason == StopInterrupt && kept == nil {
		return nil, fmt.Errorf("the agent %s needs a person's answer, which a sub-agent that starts fresh cannot wait for", d.name)
	}
	if kept != nil {
		// The turn ended as a turn does, or paused, or took its responses:
		// a history the next delegation, or the resume, goes on from.
		kept.ran(t, res)
	}
	switch {
	case partial && res.StopReason != StopInterrupt:
		return nil, errGoesOn
	case res.StopReason == StopInterrupt:
		return nil, &pausedError{interrupts: lift(res.Pending.Interrupts, d.name, call.ID)}
	case res.StopReason == StopMaxCycles && t.budget.spent():
		return nil, fmt.Errorf("the agent %s stopped before it finished: the turn reached its limit of %d model calls", d.name, t.budget.max)
	case res.StopReason == StopMaxCycles:
		return nil, fmt.Errorf("the agent %s stopped before it finished: it reached its limit of %d model calls", d.name, d.sub.cfg.MaxCycles)
	case strings.TrimSpace(res.Text) == "":
		return nil, fmt.Errorf("the agent %s answered with no text (stop reason %s)", d.name, res.StopReason)
	}
	return []ToolResultContent{{Text: res.Text}}, nil
}

// lift returns the interrupts of the sub-agent name's paused turn as the
// agent that delegated to it sees them: under the sub-agent's name, held
// back by the delegating tool use id.
func lift(interrupts []Interrupt, name, id string) []Interrupt {
	out := make([]Interrupt, len(interrupts))
	for i, in := range interrupts {
		in.AgentPath = append([]string{name}, in.AgentPath...)
		in.SubagentRunID = cmp.Or(in.SubagentRunID, id)
		in.DelegationID = id
		out[i] = in
	}
	return out
}

// answerDelegation gives the sub-agent's turn that u, a delegation of t's
// agent, waits for the responses to its interrupts: its approved tools
// run, and its conversation keeps its answer, for the store. goesOn says
// that Continue runs the rest of its turn (resumeDelegation); else r is
// u's result, an error result.
func (t *turn) answerDelegation(ctx context.Context, u *ToolUseBlock, responses []Response) (r *ToolResultBlock, goesOn bool) {
	d, r := t.delegationOf(u)
	if d == nil {
		return r, false
	}
	ctx, done := t.hookRun(ctx, u, d)
	_, err := d.run(ctx, t.delegationCall(u), true, func(st *turn) (*Result, error) {
		if st.conv.Pending == nil {
			return nil, errors.New("its turn waits for nothing: the stored conversation has no pending interrupts")
		}
		work, cancel := context.WithCancel(ctx)
		defer cancel()
		return st.answer(ctx, work, responses)
	})
	if errors.Is(err, errGoesOn) {
		done(nil)
		return nil, true
	}
	if err == nil {
		err = errors.New("its turn ended without going on") // a partial step always goes on or fails
	}
	r = t.a.admit(TextResult(u.ToolUseID, ToolError, "The tool failed: "+err.Error()))
	done(r)
	return r, false
}

// hookRun gives a step of a resumed delegation u of d the hooks of a tool
// run, but for BeforeToolCall's, which decided on it when it first ran:
// the context its ToolContext hooks make, and done, which runs its
// AfterToolCall hooks with its result, or, for nil, with a note that the
// delegation goes on or waits, as a paused one's.
func (t *turn) hookRun(ctx context.Context, u *ToolUseBlock, d *delegation) (context.Context, func(*ToolResultBlock)) {
	hooks := &t.a.cfg.Hooks
	start := time.Now()
	ctx = contextFrom(ctx, hooks.ToolContext, &ToolContextEvent{Use: u, Tool: d, Delegation: true})
	return ctx, func(r *ToolResultBlock) {
		e := &AfterToolCallEvent{Use: u, Tool: d, Result: r, Duration: time.Since(start)}
		if r == nil {
			e.Result, e.Paused = TextResult(u.ToolUseID, ToolSuccess, fmt.Sprintf("The agent %s goes on once its answer is stored, or waits for a person's.", u.Name)), true
		}
		after(ctx, hooks.AfterToolCall, e)
	}
}

// resumeDelegation runs the rest of the sub-agent's turn that u, a
// delegation of t's agent, waits for, whose answer answerDelegation
// stored: u's result, or the interrupts it waits for again.
func (t *turn) resumeDelegation(ctx context.Context, u *ToolUseBlock) (*ToolResultBlock, []Interrupt) {
	d, r := t.delegationOf(u)
	if d == nil {
		return r, nil
	}
	start := time.Now()
	ctx, done := t.hookRun(ctx, u, d)
	content, err := d.run(ctx, t.delegationCall(u), false, func(st *turn) (*Result, error) { return st.goOn(ctx) })
	var paused *pausedError
	var result *ToolResultBlock
	switch {
	case errors.As(err, &paused):
		done(nil)
		return nil, paused.interrupts
	case err != nil:
		result = TextResult(u.ToolUseID, ToolError, "The tool failed: "+err.Error())
	default:
		result = &ToolResultBlock{ToolUseID: u.ToolUseID, Status: ToolSuccess, Content: content}
	}
	result = t.a.admit(result)
	done(result)
	t.metrics.ToolCalls++
	t.metrics.Tools = append(t.metrics.Tools, ToolRun{Name: u.Name, Duration: time.Since(start), Failed: result.Status == ToolError})
	return result, nil
}

// delegationOf returns the delegation u calls, or, when t's agent has no
// such sub-agent any more, nil and u's error result.
func (t *turn) delegationOf(u *ToolUseBlock) (*delegation, *ToolResultBlock) {
	if r, ok := t.box.tools[u.Name]; ok {
		if d, ok := r.tool.(*delegation); ok {
			return d, nil
		}
	}
	return nil, t.a.admit(TextResult(u.ToolUseID, ToolError, fmt.Sprintf("The agent %s cannot be resumed: it is no longer one of this agent's sub-agents.", u.Name)))
}

// delegationCall is the call of the delegation u, inside t.
func (t *turn) delegationCall(u *ToolUseBlock) *ToolCall {
	return &ToolCall{ID: u.ToolUseID, Name: u.Name, Input: inputOf(u), State: t.state, turn: t}
}

// AgentRun is one delegation: a sub-agent's turn inside the turn of the
// agent that delegated.
type AgentRun struct {
	// ID is the id of the tool use that delegated: one delegation's, the
	// key of its events.
	ID          string
	Name        string
	Description string
	// Path names the agents from the main agent's delegation down to this
	// one, this one last.
	Path []string
	// ParentID is the delegation this one runs in; "" when the main agent
	// delegated.
	ParentID string
}

// Delegation is an event of a delegation: its start, then its end (Done),
// with Err when the sub-agent failed, or Suspended, the ids of the
// interrupts its turn paused for; its result follows as the delegating
// tool use's, or, when it paused, once the interrupts are answered.
type Delegation struct {
	Run       AgentRun
	Done      bool
	Err       string
	Suspended []string
	// Continues ends the first step of a resume: the sub-agent took the
	// responses, and the same run goes on, after a commit, with its
	// start event again.
	Continues bool
}

// AgentTurn is what a turn added to a sub-agent's conversation.
type AgentTurn struct {
	Name string
	// First is the index of Messages[0]: the count of the conversation's
	// stored messages before the turn.
	First int
	// Messages are the messages the turn's delegations added, in order.
	Messages []Message
	// Window and State are the conversation manager's state and the
	// sub-agent's state after the turn, and Pending what its turn waits
	// for, when it paused for a person.
	Window  WindowState
	State   map[string]json.RawMessage
	Pending *Pending
}

// agentConversations are the conversations of a turn's sub-agents, shared
// by the turn and its delegations: each read, through load, when a
// delegation first needs it, and what the turn added to it.
type agentConversations struct {
	load   AgentLoader
	mu     sync.Mutex
	byName map[string]*agentConversation
}

// agentConversation is one sub-agent's conversation in a turn. Its slot
// admits one delegation at a time.
type agentConversation struct {
	slot   chan struct{}
	loaded bool
	conv   *Conversation
	turn   AgentTurn
	// changed says that a delegation of this turn changed the
	// conversation: its messages, or, for a resume, its pending
	// interrupts alone.
	changed bool
	// paused says that a delegation of this turn paused the
	// conversation's turn for a person.
	paused bool
}

// take waits until no other delegation of the turn works on the
// sub-agent name's conversation, reads it if no delegation has, and
// returns it with the function that frees it. Without a loader a
// sub-agent's conversation starts empty, and lasts the turn.
func (as *agentConversations) take(ctx context.Context, name string) (*agentConversation, func(), error) {
	as.mu.Lock()
	if as.byName == nil {
		as.byName = map[string]*agentConversation{}
	}
	c := as.byName[name]
	if c == nil {
		c = &agentConversation{slot: make(chan struct{}, 1)}
		as.byName[name] = c
	}
	as.mu.Unlock()
	select {
	case c.slot <- struct{}{}:
	case <-ctx.Done():
		return nil, nil, ctx.Err()
	}
	release := func() { <-c.slot }
	if !c.loaded {
		conv, count := &Conversation{}, 0
		if as.load != nil {
			loaded, n, err := as.load(ctx, name)
			if err != nil {
				release()
				return nil, nil, err
			}
			conv, count = loaded, n
		}
		c.conv, c.loaded = conv, true
		c.turn = AgentTurn{Name: name, First: count, Window: conv.Window, State: conv.State, Pending: conv.Pending}
	}
	return c, release, nil
}

// ran records what t, a delegation's turn that ended with res, did to the
// conversation, for the next delegation and the store.
func (c *agentConversation) ran(t *turn, res *Result) {
	c.conv = &Conversation{Messages: t.conv.Messages, Window: t.conv.Window, State: res.State, Pending: res.Pending}
	c.turn.Messages = append(c.turn.Messages, res.Messages...)
	c.turn.Window, c.turn.State, c.turn.Pending = res.Window, res.State, res.Pending
	c.changed = true
	c.paused = res.Pending != nil && len(res.Pending.Interrupts) > 0
}

// agentTurns lists what the turn added to its sub-agents' conversations,
// by name; nil for a delegation's turn, whose delegating turn lists them.
// The turn's tool runs have all ended.
func (t *turn) agentTurns() []AgentTurn {
	if t.nested {
		return nil
	}
	as := t.agents
	as.mu.Lock()
	defer as.mu.Unlock()
	var out []AgentTurn
	for _, c := range as.byName {
		if c.changed {
			out = append(out, c.turn)
		}
	}
	slices.SortFunc(out, func(a, b AgentTurn) int { return strings.Compare(a.Name, b.Name) })
	return out
}

// budget is the model calls a turn may still make, shared by every agent
// the turn runs.
type budget struct {
	max  int
	used atomic.Int64
}

// take counts a model call, and says whether it was within the budget.
func (b *budget) take() bool { return b.used.Add(1) <= int64(b.max) }

// spent says whether the budget is used up.
func (b *budget) spent() bool { return b.used.Load() >= int64(b.max) }

// delegated is what the sub-agents of a turn used, merged into it as
// each delegation ends; delegations of one answer run at once.
type delegated struct {
	mu      sync.Mutex
	usage   Usage
	byAgent map[string]Usage
	metrics Metrics
}

// merge adds what the delegated turn c used to t.
func (t *turn) merge(c *turn) {
	usage, byAgent, cm := c.totalUsage(), c.agentUsage(), c.totalMetrics()
	d := &t.delegated
	d.mu.Lock()
	defer d.mu.Unlock()
	d.usage.add(usage)
	if d.byAgent == nil {
		d.byAgent = map[string]Usage{}
	}
	addUsages(d.byAgent, byAgent)
	d.metrics.addWork(cm)
}

// addUsages adds the usages of src to those of dst, by agent.
func addUsages(dst, src map[string]Usage) {
	for name, u := range src {
		sum := dst[name]
		sum.add(u)
		dst[name] = sum
	}
}

// addWork adds to m the model and tool calls of o, other work of the same
// turn, with their retries and throttles, and their latencies and runs
// after m's; Cycles, Reductions and Duration stay m's.
func (m *Metrics) addWork(o Metrics) {
	m.ModelCalls += o.ModelCalls
	m.ToolCalls += o.ToolCalls
	m.Retries += o.Retries
	m.Throttles += o.Throttles
	m.ModelLatency += o.ModelLatency
	m.ModelLatencies = append(slices.Clip(m.ModelLatencies), o.ModelLatencies...)
	m.Tools = append(slices.Clip(m.Tools), o.Tools...)
}

// totalUsage is the usage of t's model calls and its delegations'.
func (t *turn) totalUsage() Usage {
	t.delegated.mu.Lock()
	defer t.delegated.mu.Unlock()
	u := t.usage
	u.add(t.delegated.usage)
	return u
}

// agentUsage is the usage of t's turn by agent, t's own included; nil
// when t delegated nothing.
func (t *turn) agentUsage() map[string]Usage {
	t.delegated.mu.Lock()
	defer t.delegated.mu.Unlock()
	if t.delegated.byAgent == nil && !t.nested {
		return nil
	}
	out := map[string]Usage{}
	for name, u := range t.delegated.byAgent {
		out[name] = u
	}
	own := out[t.name]
	own.add(t.usage)
	out[t.name] = own
	return out
}

// totalMetrics is t's metrics with its delegations' model calls, tool
// calls and retries added; Cycles stays t's own.
func (t *turn) totalMetrics() Metrics {
	t.delegated.mu.Lock()
	defer t.delegated.mu.Unlock()
	m, d := t.metrics, t.delegated.metrics
	if t.delegated.byAgent == nil {
		return m // nothing delegated
	}
	m.addWork(d)
	return m
}
