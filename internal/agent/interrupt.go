package agent

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"
)

// A turn pauses for a person when the model asks for a tool use that needs
// one: a tool registered with RequireApproval, a use a BeforeToolCall hook
// interrupts, or the AskUser tool. The other uses of the same answer run, and
// the turn ends with StopInterrupt. Its last message is the assistant's, with
// tool uses that wait for their results, and Result.Pending holds the
// interrupts and the results of the uses that ran. Answer continues the turn
// once a person responded: approved uses run, denied ones get an error
// result, and every use of the answer gets its result in one user message,
// after which Continue calls the model again. Run on a conversation with
// pending interrupts denies them, so that a person can move on.

// StopInterrupt ends a turn that waits for a person; see Pending.
const StopInterrupt StopReason = "interrupt"

// Kinds of interrupt.
const (
	// KindApproval waits for a person to approve or deny a tool use.
	KindApproval = "approval"
	// KindQuestion waits for a person's answer, which becomes the tool's
	// result (AskUser).
	KindQuestion = "question"
	// KindClientTool waits for the result of a tool that the caller's
	// application runs (Conversation.ClientTools): only the client that
	// offered the tool can answer it with a result, and anyone who may
	// answer the session's interrupts can deny it.
	KindClientTool = "client_tool"
)

// DefaultInterruptTTL is how long interrupts wait for a response when
// Config.InterruptTTL is zero. Past it they count as denied.
const DefaultInterruptTTL = 24 * time.Hour

// Interrupt is a tool use that waits for a person.
type Interrupt struct {
	// ID is the id of the tool use it holds back.
	ID string `json:"id"`
	// Kind is KindApproval or KindQuestion.
	Kind string `json:"kind"`
	// Name says what raised it: "approval" for a tool that requires
	// approval, AskUserName for a question, or the name a hook chose.
	Name string `json:"name"`
	// Tool and Input are the tool use's.
	Tool  string          `json:"tool"`
	Input json.RawMessage `json:"input"`
	// Reason says, for the person, why the use waits.
	Reason string `json:"reason"`
	// Payload is what the raiser attached for the person to see, if
	// anything.
	Payload   json.RawMessage `json:"payload,omitempty"`
	ExpiresAt time.Time       `json:"expires_at"`
	// AgentPath, for an interrupt of a sub-agent's turn, names the agents
	// from the one this agent delegated to down to the one whose tool use
	// waits; empty for a use of this agent's own. DelegationID is then
	// this agent's tool use that delegated, which waits for the
	// sub-agent's turn to end, and SubagentRunID the delegation whose turn
	// paused: the innermost, the tool use of the agent before the last in
	// the path.
	AgentPath     []string `json:"agent_path,omitempty"`
	DelegationID  string   `json:"delegation_id,omitempty"`
	SubagentRunID string   `json:"subagent_run_id,omitempty"`
}

// Expired reports whether the interrupt's time to answer ran out at now.
func (in Interrupt) Expired(now time.Time) bool { return !now.Before(in.ExpiresAt) }

// InterruptRequest is how a BeforeToolCall hook pauses a turn before a tool
// use runs, until a person approves or denies it.
type InterruptRequest struct {
	// Name names the interrupt for the application, such as "refund".
	Name string
	// Reason says, for the person, why the use needs approval.
	Reason string
	// Payload is JSON for the person, or nil.
	Payload json.RawMessage
}

// Pending is a turn that waits for a person: the interrupts, and the results
// of the uses of the same answer that needed nobody, which Answer sends with
// the others.
type Pending struct {
	Interrupts []Interrupt        `json:"interrupts"`
	Results    []*ToolResultBlock `json:"results,omitempty"`
	// Resumed are the interrupts of sub-agents that responses answered:
	// each sub-agent's answer is stored, and Continue runs the rest of its
	// turn, then this agent's. Nobody waits for them.
	Resumed []Interrupt `json:"resumed,omitempty"`
}

// Live returns the interrupts that have not expired at now.
func (p *Pending) Live(now time.Time) []Interrupt {
	if p == nil {
		return nil
	}
	return slices.DeleteFunc(slices.Clone(p.Interrupts), func(in Interrupt) bool { return in.Expired(now) })
}

// Response is a person's response to an interrupt: Approve for an approval,
// with an optional Message that a denied use's result carries; Answer for a
// question, or Approve false to decline it; Result for a client tool's
// call, or Approve false to deny it.
type Response struct {
	InterruptID string `json:"interrupt_id"`
	Approve     *bool  `json:"approve,omitempty"`
	Message     string `json:"message,omitempty"`
	Answer      string `json:"answer,omitempty"`
	// Result is a client tool's result, from the client that ran it (its
	// ToolUseID is the interrupt's). It has no JSON form: a transport
	// that carries client tools' results (AG-UI) sets it.
	Result *ToolResultBlock `json:"-"`
}

// ErrInvalidResponses is the kind of a ResponsesError.
var ErrInvalidResponses = errors.New("invalid responses to the pending interrupts")

// ResponsesError says what is wrong with the responses to a turn's pending
// interrupts: the interrupts left unanswered, the ids that name none, and
// responses of the wrong shape.
type ResponsesError struct {
	Missing  []string
	Unknown  []string
	Problems []string
}

func (e *ResponsesError) Error() string {
	var parts []string
	if len(e.Missing) > 0 {
		parts = append(parts, "no response for "+strings.Join(e.Missing, ", "))
	}
	if len(e.Unknown) > 0 {
		parts = append(parts, "no pending interrupt is "+strings.Join(e.Unknown, ", "))
	}
	parts = append(parts, e.Problems...)
	return ErrInvalidResponses.Error() + ": " + strings.Join(parts, "; ")
}

// Is makes errors.Is(err, ErrInvalidResponses) true.
func (e *ResponsesError) Is(target error) bool { return target == ErrInvalidResponses }

// ErrNothingPending is Answer's error for a conversation without pending
// interrupts.
var ErrNothingPending = errors.New("no interrupts are pending")

// interrupter is a tool that waits for a person before it runs.
type interrupter interface {
	Tool
	interrupt(u *ToolUseBlock) Interrupt
}

// RequireApproval returns t as a tool whose every use waits for a person's
// approval.
func RequireApproval(t Tool) Tool { return approvalTool{t} }

type approvalTool struct{ Tool }

func (t approvalTool) interrupt(u *ToolUseBlock) Interrupt {
	return Interrupt{Kind: KindApproval, Name: "approval", Reason: fmt.Sprintf("%s needs your approval to run.", u.Name)}
}

// AskUserName is the name of the AskUser tool.
const AskUserName = "ask_user"

// AskUserInput is the AskUser tool's input.
type AskUserInput struct {
	Question string   `json:"question" jsonschema:"the question for the person, complete and on its own"`
	Options  []string `json:"options,omitempty" jsonschema:"answers to choose from, when there are few"`
}

// AskUser returns the ask_user tool: the model asks the person a question,
// the turn pauses, and the person's answer is the tool's result.
func AskUser() Tool {
	t, err := NewFuncTool(AskUserName,
		"Ask the person a question and wait for the answer. Use it when you need a decision or a fact that only the person has; do not use it for small talk.",
		func(context.Context, *ToolCall, AskUserInput) (string, error) {
			return "", errors.New("no person can answer in this request")
		})
	if err != nil {
		panic(err) // the name and input are constants
	}
	return askUser{t}
}

type askUser struct{ Tool }

func (askUser) interrupt(u *ToolUseBlock) Interrupt {
	var in AskUserInput
	_ = json.Unmarshal(u.Input, &in) // the input was validated against the schema
	payload, _ := json.Marshal(in)
	return Interrupt{Kind: KindQuestion, Name: AskUserName, Reason: in.Question, Payload: payload}
}

// Texts of the results a person's response gives.
const (
	deniedText   = "A person denied this tool call."
	notRunText   = "The application that offers this tool did not run it: the call was denied."
	expiredText  = "A person did not respond to this tool call in time (expired), so it was not run."
	movedOnText  = "A person sent a new message instead of responding to this tool call, so it was not run."
	declinedText = "A person declined to answer."
)

// Answer continues a turn that paused for a person: it checks the
// responses, which must answer every live approval and question of
// conv.Pending (expired ones count as denied), runs the approved uses, and
// returns a Result whose one message is the user message that answers
// every tool use of the paused answer. It calls no model: commit the
// result, then Continue. Its State holds what the tools changed. emit,
// when set, gets each result.
//
// A client tool's call may be left unanswered: while one is, the Result
// adds no message, and its Pending holds what still waits, the client
// tools' calls, with the results so far. Commit that; the responses that
// bring the rest answer it.
func (a *Agent) Answer(ctx context.Context, conv *Conversation, responses []Response, emit func(Event)) (*Result, error) {
	if _, err := pausedUses(conv); err != nil {
		return nil, err
	}
	if _, err := conv.Pending.check(responses, a.cfg.Now()); err != nil {
		return nil, err
	}
	box, err := a.turnBox(ctx, conv.ClientTools)
	if err != nil {
		return nil, err
	}
	t := a.newTurn(conv)
	if emit != nil {
		t.emit = serialized(emit)
	}
	t.box = box
	work, cancel := a.workContext(ctx)
	defer cancel()
	return t.answer(ctx, work, responses)
}

// answer adds to t the user message that answers the tool uses of its
// conversation's paused answer, from responses, as Answer does; or, while
// some still wait, ends t with StopInterrupt and what waits. A delegation
// that waits resumes its sub-agent's turn with the responses to its
// interrupts, and its result is the sub-agent's answer. work is the
// context of the work.
func (t *turn) answer(ctx, work context.Context, responses []Response) (*Result, error) {
	conv := t.conv
	uses, err := pausedUses(conv)
	if err != nil {
		return nil, err
	}
	now := t.a.cfg.Now()
	byID, err := conv.Pending.check(responses, now)
	if err != nil {
		return nil, err
	}
	results := make(map[string]*ToolResultBlock, len(uses))
	for _, r := range conv.Pending.Results {
		results[r.ToolUseID] = r
	}
	kept := slices.Clone(conv.Pending.Results)
	var approved, delegations []*ToolUseBlock
	var waiting []Interrupt
	// The responses each waiting delegation passes on to its sub-agent.
	passed := map[string][]Response{}
	for _, in := range conv.Pending.Interrupts {
		r, ok := byID[in.ID]
		switch {
		case in.DelegationID != "":
			if u := useOf(uses, in.DelegationID); !slices.Contains(delegations, u) {
				delegations = append(delegations, u)
			}
			if ok {
				passed[in.DelegationID] = append(passed[in.DelegationID], r)
			}
		case in.Expired(now):
			results[in.ID] = TextResult(in.ID, ToolError, expiredText)
		case in.Kind == KindClientTool && !ok:
			waiting = append(waiting, in)
		case in.Kind == KindClientTool && r.Result != nil:
			results[in.ID] = r.Result
		case in.Kind == KindClientTool:
			results[in.ID] = TextResult(in.ID, ToolError, withMessage(notRunText, r.Message))
		case in.Kind == KindQuestion && r.Approve == nil && in.Name == AskedName:
			// An Asker's question: its tool takes the answer, and runs.
			if t.answers == nil {
				t.answers = map[string]string{}
			}
			t.answers[in.ID] = r.Answer
			approved = append(approved, useOf(uses, in.ID))
		case in.Kind == KindQuestion && r.Approve == nil:
			results[in.ID] = TextResult(in.ID, ToolSuccess, r.Answer)
		case in.Kind == KindQuestion:
			results[in.ID] = TextResult(in.ID, ToolError, withMessage(declinedText, r.Message))
		case ok && *r.Approve:
			approved = append(approved, useOf(uses, in.ID))
		default:
			results[in.ID] = TextResult(in.ID, ToolError, withMessage(deniedText, r.Message))
		}
	}
	// The results that a person's or a client's response made are emitted
	// here, once; runTools emits those of the tools it runs, and the
	// results kept from before were emitted when they were made.
	for _, u := range uses {
		if r := results[u.ToolUseID]; r != nil && !slices.Contains(kept, r) {
			r = t.a.admit(r)
			results[u.ToolUseID] = r
			t.send(Event{ToolResult: r})
		}
	}
	if len(approved) > 0 {
		ran, held := t.runTools(work, approved, true)
		if work.Err() != nil {
			return nil, t.fail(ctx, work, work.Err())
		}
		for _, b := range ran {
			if b.ToolResult != nil {
				results[b.ToolResult.ToolUseID] = b.ToolResult
			}
		}
		waiting = append(waiting, held...) // approved client tools' calls
	}
	// A delegation's sub-agent takes its responses now, and its tools
	// run; the rest of its turn is Continue's, once its answer is stored,
	// so that an approved tool that ran never runs again.
	resumed := slices.Clone(conv.Pending.Resumed)
	for _, u := range delegations {
		r, goesOn := t.answerDelegation(work, u, passed[u.ToolUseID])
		if work.Err() != nil {
			return nil, t.fail(ctx, work, work.Err())
		}
		switch {
		case goesOn:
			for _, in := range conv.Pending.Interrupts {
				if in.DelegationID == u.ToolUseID {
					resumed = append(resumed, in)
				}
			}
		case r != nil:
			results[u.ToolUseID] = r
			t.send(Event{ToolResult: r})
		}
	}
	stop := StopToolUse // nobody waits: Continue goes on
	if len(waiting) > 0 {
		stop = StopInterrupt
	}
	return t.settle(ctx, uses, results, &Pending{Interrupts: waiting, Resumed: resumed}, stop), nil
}

// settle ends a step of the turn of a paused answer, whose uses have the
// results so far: while p holds interrupts that wait, or sub-agents that
// go on, with stop and p, which keeps those results; else with the user
// message that answers every use, one without a result as interrupted.
// The results were admitted when they were made.
func (t *turn) settle(ctx context.Context, uses []*ToolUseBlock, results map[string]*ToolResultBlock, p *Pending, stop StopReason) *Result {
	if len(p.Interrupts)+len(p.Resumed) > 0 {
		for _, u := range uses {
			if r := results[u.ToolUseID]; r != nil {
				p.Results = append(p.Results, r)
			}
		}
		t.conv.Pending = p
		res := t.finish(stop, "")
		res.Pending = p
		return res
	}
	m := Message{Role: RoleUser}
	for _, u := range uses {
		r := results[u.ToolUseID]
		if r == nil {
			r = TextResult(u.ToolUseID, ToolError, interruptedText)
		}
		m.Content = append(m.Content, ContentBlock{ToolResult: r})
	}
	t.conv.Pending = nil
	t.add(ctx, m)
	return t.finish(StopToolUse, "")
}

// Continue runs the loop of a turn whose last message is the user's, such as
// the one Answer added: the model answers it, and tools run, as in Run.
// emit, when set, streams the turn as Stream does.
func (a *Agent) Continue(ctx context.Context, conv *Conversation, emit func(Event)) (*Result, error) {
	if n := len(conv.Messages); !conv.resumed() && (n == 0 || conv.Messages[n-1].Role != RoleUser) {
		return nil, errors.New("agent: Continue needs a conversation that ends with a user message, or whose sub-agents' answers are stored")
	}
	if emit != nil {
		emit = serialized(emit)
	}
	box, err := a.turnBox(ctx, conv.ClientTools)
	if err != nil {
		return nil, err
	}
	before(ctx, a.cfg.Hooks.BeforeInvocation, &BeforeInvocationEvent{Conversation: conv})
	t := a.newTurn(conv)
	t.emit = emit
	t.box = box
	res, err := t.goOn(ctx)
	after(ctx, a.cfg.Hooks.AfterInvocation, &AfterInvocationEvent{Result: res, Err: err})
	return res, err
}

// resumed reports whether c's answer waits for sub-agents whose answers
// are stored: see Pending.Resumed.
func (c *Conversation) resumed() bool {
	return c.Pending != nil && len(c.Pending.Interrupts) == 0 && len(c.Pending.Resumed) > 0
}

// goOn runs the rest of a turn whose answer is stored: the turns of the
// sub-agents that Answer resumed, to their ends, then the user message of
// their results, then the loop.
func (t *turn) goOn(ctx context.Context) (*Result, error) {
	if t.conv.resumed() {
		work, cancel := t.workContext(ctx)
		defer cancel()
		res, err := t.finishResumed(ctx, work)
		if err != nil || res.StopReason == StopInterrupt {
			return res, err
		}
	}
	if n := len(t.conv.Messages); n == 0 || t.conv.Messages[n-1].Role != RoleUser {
		return nil, errors.New("agent: nothing to continue: the conversation ends with an answer")
	}
	return t.loop(ctx)
}

// finishResumed runs the rest of the turns of the sub-agents whose
// delegations t's conversation's Pending.Resumed holds back, and adds the
// user message that answers every tool use of the paused answer; or ends
// t with StopInterrupt when a sub-agent waits for a person again.
func (t *turn) finishResumed(ctx, work context.Context) (*Result, error) {
	conv := t.conv
	uses, err := pausedUses(&Conversation{Messages: conv.Messages, Pending: &Pending{Interrupts: conv.Pending.Resumed}})
	if err != nil {
		return nil, err
	}
	results := make(map[string]*ToolResultBlock, len(uses))
	for _, r := range conv.Pending.Results {
		results[r.ToolUseID] = r
	}
	var waiting []Interrupt
	for _, u := range uses {
		if !slices.ContainsFunc(conv.Pending.Resumed, func(in Interrupt) bool { return in.DelegationID == u.ToolUseID }) {
			continue
		}
		r, held := t.resumeDelegation(work, u)
		if work.Err() != nil {
			return nil, t.fail(ctx, work, work.Err())
		}
		if r != nil {
			results[u.ToolUseID] = r
			t.send(Event{ToolResult: r})
		}
		waiting = append(waiting, held...)
	}
	for i := range waiting {
		t.send(Event{Interrupt: &waiting[i]})
	}
	return t.settle(ctx, uses, results, &Pending{Interrupts: waiting}, StopInterrupt), nil
}

// pausedUses returns the tool uses that conv's pending interrupts hold
// back: those of its last message.
func pausedUses(conv *Conversation) ([]*ToolUseBlock, error) {
	n := len(conv.Messages)
	if conv.Pending == nil || len(conv.Pending.Interrupts) == 0 || n == 0 || conv.Messages[n-1].Role != RoleAssistant {
		return nil, ErrNothingPending
	}
	uses := conv.Messages[n-1].ToolUses()
	for _, in := range conv.Pending.Interrupts {
		if useOf(uses, in.heldUse()) == nil {
			return nil, fmt.Errorf("agent: pending interrupt %s answers no tool use of the last message", in.ID)
		}
	}
	return uses, nil
}

// heldUse is the id of the tool use of the paused answer that in holds
// back: its own, or the delegation's whose sub-agent it pauses.
func (in Interrupt) heldUse() string { return cmp.Or(in.DelegationID, in.ID) }

func useOf(uses []*ToolUseBlock, id string) *ToolUseBlock {
	for _, u := range uses {
		if u.ToolUseID == id {
			return u
		}
	}
	return nil
}

// Check checks responses against p at now, as Answer does: one for each
// live interrupt, of the interrupt's kind, and none for an id p does not
// hold. A response to an expired interrupt is accepted, and the interrupt
// counts as denied. The error is a *ResponsesError.
func (p *Pending) Check(responses []Response, now time.Time) error {
	_, err := p.check(responses, now)
	return err
}

func (p *Pending) check(responses []Response, now time.Time) (map[string]Response, error) {
	known := make(map[string]Interrupt, len(p.Interrupts))
	for _, in := range p.Interrupts {
		known[in.ID] = in
	}
	e := &ResponsesError{}
	byID := make(map[string]Response, len(responses))
	for i, r := range responses {
		in, ok := known[r.InterruptID]
		switch {
		case r.InterruptID == "":
			e.Problems = append(e.Problems, fmt.Sprintf("responses[%d] has no interrupt_id", i))
		case !ok:
			e.Unknown = append(e.Unknown, r.InterruptID)
		case byID[r.InterruptID].InterruptID != "":
			e.Problems = append(e.Problems, fmt.Sprintf("responses[%d]: a second response to %s", i, r.InterruptID))
		case in.Kind == KindClientTool && r.Result != nil && (r.Approve != nil || r.Answer != ""):
			e.Problems = append(e.Problems, fmt.Sprintf("responses[%d]: %s is a client tool's call: send its result, or deny it, not both", i, r.InterruptID))
		case in.Kind == KindClientTool && r.Result != nil && r.Result.ToolUseID != in.ID:
			e.Problems = append(e.Problems, fmt.Sprintf("responses[%d]: the result is of tool call %s, not of %s", i, r.Result.ToolUseID, r.InterruptID))
		case in.Kind == KindClientTool && r.Result == nil && (r.Approve == nil || *r.Approve || r.Answer != ""):
			e.Problems = append(e.Problems, fmt.Sprintf("responses[%d]: %s is a call of %s, a tool the client application runs: only that application can answer it, with the tool's result; here it may only be denied, with approve false", i, r.InterruptID, in.Tool))
		case in.Kind != KindClientTool && r.Result != nil:
			e.Problems = append(e.Problems, fmt.Sprintf("responses[%d]: %s is a %s, which takes no tool result", i, r.InterruptID, in.Kind))
		case in.Kind == KindApproval && r.Approve == nil:
			e.Problems = append(e.Problems, fmt.Sprintf("responses[%d]: %s is an approval: set approve to true or false", i, r.InterruptID))
		case in.Kind == KindApproval && r.Answer != "":
			e.Problems = append(e.Problems, fmt.Sprintf("responses[%d]: %s is an approval, which takes no answer", i, r.InterruptID))
		case in.Kind == KindQuestion && (r.Approve == nil) == (strings.TrimSpace(r.Answer) == ""):
			e.Problems = append(e.Problems, fmt.Sprintf("responses[%d]: %s is a question: set answer, or approve false to decline it", i, r.InterruptID))
		case in.Kind == KindQuestion && r.Approve != nil && *r.Approve:
			e.Problems = append(e.Problems, fmt.Sprintf("responses[%d]: %s is a question: approve may only be false, to decline it", i, r.InterruptID))
		default:
			byID[r.InterruptID] = r
		}
	}
	// A live approval or question is missing when no response names it;
	// one that a response with a problem names is reported for that
	// problem alone. A client tool's call may wait for a later response.
	for _, in := range p.Live(now) {
		if in.Kind != KindClientTool && !slices.ContainsFunc(responses, func(r Response) bool { return r.InterruptID == in.ID }) {
			e.Missing = append(e.Missing, in.ID)
		}
	}
	if len(e.Missing)+len(e.Unknown)+len(e.Problems) > 0 {
		return nil, e
	}
	return byID, nil
}

func withMessage(text, message string) string {
	if message = strings.TrimSpace(message); message != "" {
		return text + " Their message: " + message
	}
	return text
}

// pendingResult answers a use of a paused answer in the first message of a
// turn that moves on without responding: the result kept for a use that
// ran, or a denial for an interrupt. It is nil for a use conv does not hold
// back.
func pendingResult(p *Pending, id string, now time.Time) *ToolResultBlock {
	if p == nil {
		return nil
	}
	if r := keptResult(p, id); r != nil {
		return r
	}
	for _, in := range p.Interrupts {
		if in.heldUse() == id {
			if in.Expired(now) {
				return TextResult(id, ToolError, expiredText)
			}
			return TextResult(id, ToolError, movedOnText)
		}
	}
	return nil
}
