package agent

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"sync"
	"time"
)

// Config configures an Agent. Zero values mean the documented defaults.
type Config struct {
	// Model answers the agent. Required. The agent retries it according to
	// Retry, so it should not retry by itself.
	Model Model
	// System is the system prompt.
	System string
	// Tools are the tools the model may use. Names must be unique.
	Tools []Tool
	// ToolSets add tools known only at run time, such as a remote
	// server's, at the start of each turn. A tool whose name another has
	// already, or whose schema does not compile, is left out of the turn.
	ToolSets []ToolSet
	// Manager bounds the window; nil means SlidingWindow{}.
	Manager ConversationManager
	// MaxCycles caps the model calls of one turn (each followed by tool runs);
	// 0 means DefaultMaxCycles. Reaching it ends the turn with StopMaxCycles.
	MaxCycles int
	// ToolConcurrency caps how many tools run at once; 0 means
	// DefaultToolConcurrency.
	ToolConcurrency int
	// ToolTimeout bounds each tool run; 0 means DefaultToolTimeout.
	ToolTimeout time.Duration
	// Retry is the retry policy for model calls.
	Retry RetryPolicy
	// Reserve is how long before the context's deadline the agent stops
	// calling the model and running tools, so the caller always has time to
	// commit the turn or answer with an error; 0 means DefaultReserve.
	Reserve time.Duration
	// ContextWindowTokens, when positive, turns on proactive reduction: the
	// manager reduces the window before a call when the last call's input
	// tokens reached ReduceAt of it.
	ContextWindowTokens int
	// ReduceAt is a fraction of ContextWindowTokens; 0 means
	// DefaultReduceAt.
	ReduceAt float64
	// MaxReductions caps the reductions made to retry one overflowing call;
	// 0 means DefaultMaxReductions.
	MaxReductions int
	// MaxStateBytes caps the agent state, which is persisted with the
	// session and read and written on every turn; 0 means
	// DefaultMaxStateBytes. A tool's Set past it fails, and the model is told.
	MaxStateBytes int
	// Hooks are called at points of every turn.
	Hooks Hooks
	// TrimResults trims the tool results of older turns in what the model
	// sees; the zero value trims nothing.
	TrimResults ResultTrim
	// PromptCache asks the model for prompt cache points: after the tools
	// and system prompt, and after the previous turn's last message (see
	// ModelRequest). A model without a cache ignores them.
	PromptCache bool
	// InterruptTTL is how long a paused turn's interrupts wait for a
	// person; past it they count as denied. 0 means DefaultInterruptTTL.
	InterruptTTL time.Duration
	// DirectTools are the tools CallTool may run: a person may call these
	// without the model. None when empty.
	DirectTools []string
	// MaxToolResultBytes bounds the text and JSON of one tool result, of
	// any tool: past it, the result is cut in the middle with a note of
	// its full size, and the model and the session get the cut. 0 means
	// DefaultMaxToolResultBytes.
	MaxToolResultBytes int
	// MaxToolResultMediaBytes bounds the images and documents of one tool
	// result together: past it, they are replaced by a note of their
	// size. 0 means DefaultMaxToolResultMediaBytes.
	MaxToolResultMediaBytes int
	// RedactedInput is the text a turn keeps in place of the user's input
	// when the model's guardrail blocked it; "" means
	// DefaultRedactedInput. It must not be blank.
	RedactedInput string
	// Now is the clock that interrupts expire by; nil means time.Now.
	Now func() time.Time
}

// Defaults for Config.
const (
	DefaultMaxCycles       = 20
	DefaultToolConcurrency = 8
	DefaultToolTimeout     = 30 * time.Second
	DefaultReserve         = 3 * time.Second
	DefaultReduceAt        = 0.8
	DefaultMaxReductions   = 10
	DefaultMaxStateBytes   = 64 << 10
)

// Agent runs turns. It keeps no conversation of its own: each turn starts from
// a Conversation and returns what to persist, so one Agent serves every
// session and is safe for concurrent use.
type Agent struct {
	cfg   Config
	model Model
	box   toolbox // the tools of Config.Tools
	// schemas caches the compiled schemas of the tool sets' tools that
	// bring none, by name and schema, or why they do not compile.
	schemas sync.Map
}

type registered struct {
	tool   Tool
	schema *ToolSchema
}

// MaxStateBytes is the cap on the agent state (Config.MaxStateBytes), which
// a session imported from elsewhere must keep too.
func (a *Agent) MaxStateBytes() int { return a.cfg.MaxStateBytes }

// New returns an Agent, or an error that says what is wrong with cfg.
func New(cfg Config) (*Agent, error) {
	if cfg.Model == nil {
		return nil, errors.New("agent: Model is required")
	}
	if cfg.MaxCycles < 0 || cfg.ToolConcurrency < 0 || cfg.ToolTimeout < 0 || cfg.Reserve < 0 ||
		cfg.ContextWindowTokens < 0 || cfg.MaxReductions < 0 || cfg.MaxStateBytes < 0 || cfg.InterruptTTL < 0 ||
		cfg.MaxToolResultBytes < 0 || cfg.MaxToolResultMediaBytes < 0 {
		return nil, errors.New("agent: negative limit in Config")
	}
	if cfg.ReduceAt < 0 || cfg.ReduceAt > 1 {
		return nil, fmt.Errorf("agent: ReduceAt %v is outside [0, 1]", cfg.ReduceAt)
	}
	cfg.MaxCycles = cmp.Or(cfg.MaxCycles, DefaultMaxCycles)
	cfg.ToolConcurrency = cmp.Or(cfg.ToolConcurrency, DefaultToolConcurrency)
	cfg.ToolTimeout = cmp.Or(cfg.ToolTimeout, DefaultToolTimeout)
	cfg.Reserve = cmp.Or(cfg.Reserve, DefaultReserve)
	cfg.ReduceAt = cmp.Or(cfg.ReduceAt, DefaultReduceAt)
	cfg.MaxReductions = cmp.Or(cfg.MaxReductions, DefaultMaxReductions)
	cfg.MaxStateBytes = cmp.Or(cfg.MaxStateBytes, DefaultMaxStateBytes)
	cfg.InterruptTTL = cmp.Or(cfg.InterruptTTL, DefaultInterruptTTL)
	cfg.MaxToolResultBytes = cmp.Or(cfg.MaxToolResultBytes, DefaultMaxToolResultBytes)
	cfg.MaxToolResultMediaBytes = cmp.Or(cfg.MaxToolResultMediaBytes, DefaultMaxToolResultMediaBytes)
	cfg.RedactedInput = cmp.Or(cfg.RedactedInput, DefaultRedactedInput)
	if strings.TrimSpace(cfg.RedactedInput) == "" {
		return nil, errors.New("agent: RedactedInput is blank, which Bedrock refuses as text")
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Manager == nil {
		cfg.Manager = SlidingWindow{}
	}
	a := &Agent{cfg: cfg, model: Retrying(cfg.Model, cfg.Retry), box: toolbox{tools: make(map[string]*registered)}}
	for _, t := range cfg.Tools {
		spec := t.Spec()
		if !ValidToolName(spec.Name) {
			return nil, fmt.Errorf("agent: tool name %q does not match %s", spec.Name, ToolNameRule)
		}
		if _, dup := a.box.tools[spec.Name]; dup {
			return nil, fmt.Errorf("agent: two tools are named %q", spec.Name)
		}
		schema, err := schemaOf(t, spec)
		if err != nil {
			return nil, fmt.Errorf("agent: tool %s: %w", spec.Name, err)
		}
		a.box.add(t, spec, schema)
	}
	return a, nil
}

// Result is what a turn produced: what to persist and what to answer.
type Result struct {
	// Messages are the messages the turn added, in order. Run's begin with
	// the user's input, after a note of the assistant's when the history
	// ended with a user message that was never answered; Continue's with
	// the model's answer, and Answer's are its one user message. The last
	// is an assistant message, but for Answer's.
	Messages []Message
	// Text is the final assistant text.
	Text       string
	StopReason StopReason
	// Usage counts every model call of the turn, its delegations' too.
	Usage Usage
	// AgentUsage is Usage by agent, MainAgent's own calls under its name,
	// when the turn delegated to a sub-agent; nil when it did not.
	AgentUsage map[string]Usage
	// Metrics count the delegations' model and tool calls too; Cycles
	// are the main agent's.
	Metrics Metrics
	// Window is the conversation manager's state after the turn.
	Window WindowState
	// State is the agent state after the turn.
	State map[string]json.RawMessage
	// Pending, with StopInterrupt, is what the turn waits for: see Answer.
	Pending *Pending
	// Agents are what the turn added to its sub-agents' conversations, by
	// name in order, for the store to keep with the rest of the turn: see
	// Conversation.Agents.
	Agents []AgentTurn
	// Redacted, when a guardrail blocked the turn's input, says what
	// Messages holds redacted, so that the caller can scrub it from what
	// else it kept of the turn, such as the audit record of its model
	// calls; nil otherwise. It is never to be stored.
	Redacted *Redaction
}

// Redaction is an input a guardrail blocked: its content, which the turn
// replaced by Text (Config.RedactedInput).
type Redaction struct {
	Input []ContentBlock
	Text  string
}

// Metrics describe the work of a turn.
type Metrics struct {
	Cycles     int
	ModelCalls int
	ToolCalls  int
	// Reductions counts the conversation manager's reductions, after
	// overflows or proactive.
	Reductions int
	// ModelLatency is the time spent in model calls, retries included;
	// ModelLatencies has each call's, in order.
	ModelLatency   time.Duration
	ModelLatencies []time.Duration
	// Retries counts the model calls' attempts that failed and were tried
	// again, and Throttles the attempts the service throttled, retried or
	// not.
	Retries, Throttles int
	// Tools are the runs of the agent's tools, in the order of their uses.
	// A use of a tool the agent does not have counts in ToolCalls only, so
	// that a name the model made up never reaches a metric's dimensions.
	Tools    []ToolRun
	Duration time.Duration
}

// ToolRun is one run of a tool.
type ToolRun struct {
	Name     string
	Duration time.Duration
	// Failed says that the model received an error result.
	Failed bool
}

// maxCyclesText closes a turn that reached the cycle cap, so that the
// history still ends with an assistant message.
const maxCyclesText = "I stopped here because this turn reached its limit of %d model calls. Ask me to continue if you want me to go on."

// Run runs one turn: input goes to the model, and tools run until the model
// stops, the cycle cap is reached, a tool use waits for a person
// (StopInterrupt), or an error ends the turn. conv is not changed; the
// Result says what to persist. On error nothing of the turn is meant to be
// persisted. Interrupts pending in conv are denied: the input comes instead
// of a response to them.
//
// Errors are ErrInvalidInput, ErrContextOverflow, ErrDeadline, a *ModelError,
// or the context's error when ctx was cancelled; once the turn has begun they
// come in a *TurnError that says what it used. ErrInvalidInput, an
// *InputError, also reports the model's refusal of the input's images or
// documents.
func (a *Agent) Run(ctx context.Context, conv *Conversation, input []ContentBlock) (*Result, error) {
	before(ctx, a.cfg.Hooks.BeforeInvocation, &BeforeInvocationEvent{Conversation: conv, Input: input})
	res, err := a.run(ctx, conv, input, nil)
	after(ctx, a.cfg.Hooks.AfterInvocation, &AfterInvocationEvent{Result: res, Err: err})
	return res, err
}

// run runs a turn for Run, and for Stream with emit set.
func (a *Agent) run(ctx context.Context, conv *Conversation, input []ContentBlock, emit func(Event)) (*Result, error) {
	if err := ValidateInput(input); err != nil {
		return nil, err
	}
	box, err := a.turnBox(ctx, conv.ClientTools)
	if err != nil {
		return nil, err
	}
	t := a.newTurn(conv)
	t.emit = emit
	t.box = box
	t.begin(ctx, input)
	return t.loop(ctx)
}

// loop calls the model and runs tools until the turn ends. The window ends
// with the user's message.
func (t *turn) loop(ctx context.Context) (*Result, error) {
	a := t.a
	work, cancel := t.workContext(ctx)
	defer cancel()
	for cycle := 1; ; cycle++ {
		t.metrics.Cycles = cycle
		if !t.budget.take() {
			// Delegations used up the turn's model calls.
			text := fmt.Sprintf(maxCyclesText, t.budget.max)
			t.add(ctx, AssistantText(text))
			return t.finish(StopMaxCycles, text), nil
		}
		resp, err := t.converse(work, ModelRequest{System: a.cfg.System, Tools: t.box.specs})
		if err != nil {
			return nil, t.fail(ctx, work, err)
		}
		msg := answer(resp)
		t.add(ctx, msg)
		uses := msg.ToolUses()
		if len(uses) == 0 {
			if resp.StopReason == StopGuardrailIntervened {
				t.redactBlockedInput(resp.Guardrail)
			}
			return t.finish(resp.StopReason, resp.Message.Text()), nil
		}
		for _, u := range uses {
			t.send(Event{ToolUse: u})
		}
		results, interrupts := t.runTools(work, uses, false)
		if work.Err() != nil {
			return nil, t.fail(ctx, work, work.Err())
		}
		if len(interrupts) > 0 {
			return t.pause(results, interrupts, resp.Message.Text()), nil
		}
		t.add(ctx, Message{Role: RoleUser, Content: results})
		if cycle >= a.cfg.MaxCycles || t.budget.spent() {
			text := fmt.Sprintf(maxCyclesText, min(a.cfg.MaxCycles, t.budget.max))
			t.add(ctx, AssistantText(text))
			return t.finish(StopMaxCycles, text), nil
		}
	}
}

// pause ends a turn whose last answer has uses that wait for a person: the
// results of the others are kept for Answer.
func (t *turn) pause(results []ContentBlock, interrupts []Interrupt, text string) *Result {
	p := &Pending{Interrupts: interrupts}
	for _, b := range results {
		if b.ToolResult != nil {
			p.Results = append(p.Results, b.ToolResult)
		}
	}
	for i := range p.Interrupts {
		t.send(Event{Interrupt: &p.Interrupts[i]})
	}
	res := t.finish(StopInterrupt, text)
	res.Pending = p
	return res
}

// workContext returns the context of t's work: ctx, ending Reserve before
// its deadline, but for a delegation's turn, whose delegating turn's
// context has the reserve taken off already.
func (t *turn) workContext(ctx context.Context) (context.Context, context.CancelFunc) {
	if t.nested {
		return context.WithCancel(ctx)
	}
	return t.a.workContext(ctx)
}

// workContext returns the context for the turn's work: ctx, ending Reserve
// before ctx's deadline.
func (a *Agent) workContext(ctx context.Context) (context.Context, context.CancelFunc) {
	if d, ok := ctx.Deadline(); ok {
		return context.WithDeadline(ctx, d.Add(-a.cfg.Reserve))
	}
	return context.WithCancel(ctx)
}

// turn is the state of one call that changes a conversation: Run, Stream,
// Structured, Answer, Continue or CallTool.
type turn struct {
	a       *Agent
	conv    *Conversation
	state   *State
	added   []Message
	usage   Usage
	metrics Metrics
	start   time.Time
	// emit, when set, streams the turn (see Stream); emitted says whether
	// the last model call emitted anything.
	emit    func(Event)
	emitted bool
	// input is the index in added of the user's input; -1 for a turn
	// without one.
	input int
	// box holds the turn's tools.
	box *toolbox
	// stateSeen is the count of the state's changes last emitted.
	stateSeen int
	// name is the agent's, and path the delegations that led to this
	// turn: empty for the main agent. nested says the turn is a
	// delegation's, inside another.
	name   string
	path   []string
	nested bool
	// run is the delegation a nested turn is.
	run *AgentRun
	// budget is the model calls left to the turn and its delegations.
	budget *budget
	// agents are the sub-agents' conversations, shared by the turn and
	// its delegations.
	agents *agentConversations
	// delegated is what its delegations used.
	delegated delegated
	// answers are the person's answers to Askers' questions, by tool
	// use, which a resume passes to Answered in place of a run.
	answers map[string]string
	// redacted is the input a guardrail's block made the turn redact
	// (Result.Redacted).
	redacted *Redaction
}

// send emits e when the turn streams.
func (t *turn) send(e Event) {
	if t.emit != nil {
		t.emit(e)
	}
}

func (a *Agent) newTurn(conv *Conversation) *turn {
	state := NewState(conv.State)
	state.limit = a.cfg.MaxStateBytes
	return &turn{
		a: a, conv: conv.clone(), state: state, start: time.Now(), input: -1, box: &a.box,
		name: MainAgent, budget: &budget{max: a.cfg.MaxCycles},
		agents: &agentConversations{load: conv.Agents},
	}
}

// begin adds the user's input, the turn's first message, and ends what the
// session had pending. A history that ends with a user message, the
// results of a resume whose answer never came, first gets a note from the
// assistant, so that the roles alternate.
func (t *turn) begin(ctx context.Context, input []ContentBlock) {
	if n := len(t.conv.Messages); n > 0 && t.conv.Messages[n-1].Role == RoleUser {
		t.add(ctx, AssistantText(unansweredText))
	}
	t.input = len(t.added)
	t.add(ctx, t.userMessage(input))
	t.conv.Pending = nil
}

func (t *turn) add(ctx context.Context, m Message) {
	t.conv.Messages = append(t.conv.Messages, m)
	t.added = append(t.added, m)
	before(ctx, t.a.cfg.Hooks.MessageAdded, &MessageAddedEvent{Message: m})
}

// userMessage wraps the input in a user message. When the stored history ends
// with tool uses that were never answered, the message answers them first,
// so the persisted history becomes valid again: a use the turn paused for
// gets its kept result, or a denial; any other, because the process died
// between a tool use and its result, an error result.
func (t *turn) userMessage(input []ContentBlock) Message {
	m := Message{Role: RoleUser}
	if n := len(t.conv.Messages); n > 0 && t.conv.Messages[n-1].Role == RoleAssistant {
		now := t.a.cfg.Now()
		for _, u := range t.conv.Messages[n-1].ToolUses() {
			r := pendingResult(t.conv.Pending, u.ToolUseID, now)
			if r == nil {
				r = TextResult(u.ToolUseID, ToolError, interruptedText)
			}
			m.Content = append(m.Content, ContentBlock{ToolResult: r})
		}
	}
	m.Content = append(m.Content, input...)
	return m
}

func (t *turn) finish(stop StopReason, text string) *Result {
	t.metrics.Duration = time.Since(t.start)
	return &Result{
		Messages:   t.added,
		Text:       text,
		StopReason: stop,
		Usage:      t.totalUsage(),
		AgentUsage: t.agentUsage(),
		Metrics:    t.totalMetrics(),
		Window:     t.conv.Window,
		State:      t.state.Snapshot(),
		Agents:     t.agentTurns(),
		Redacted:   t.redacted,
	}
}

// fail turns the error that ended a turn into the one to return: the end of
// the work context becomes ErrDeadline unless the caller cancelled, and a
// refusal of the caller's attached media becomes the caller's error.
func (t *turn) fail(ctx, work context.Context, err error) error {
	switch {
	case ctx.Err() != nil && !errors.Is(ctx.Err(), context.DeadlineExceeded):
		err = ctx.Err()
	case work.Err() != nil:
		err = fmt.Errorf("%w (reserve %s)", ErrDeadline, t.a.cfg.Reserve)
	case IsModelError(err, KindInvalidContent):
		err = t.refusedContent(err)
	}
	t.metrics.Duration = time.Since(t.start)
	return &TurnError{Err: fmt.Errorf("agent: %w", err), Usage: t.totalUsage(), Metrics: t.totalMetrics()}
}

// refusedContent returns the error for err, a model call refused because of
// an image or a document: an *InputError that quotes the model, when the
// refusal can only be about the turn's input; else err, a model failure.
// It is about the input when the input carries media and no answer came
// yet in this turn. After an answer, the input had been accepted already,
// and the request held what the turn added since, such as an image a tool
// returned. A turn without media of its own was refused for media in the
// stored history, which this request cannot change: a model failure.
func (t *turn) refusedContent(err error) error {
	if t.input < 0 || len(t.added) != t.input+1 {
		return err
	}
	var images, docs int
	for _, b := range t.added[t.input].Content {
		switch {
		case b.Image != nil:
			images++
		case b.Document != nil:
			docs++
		}
	}
	what := "images and documents"
	switch {
	case images+docs == 0:
		return err
	case docs == 0:
		what = plural(images, "image")
	case images == 0:
		what = plural(docs, "document")
	}
	var me *ModelError
	errors.As(err, &me)
	return &InputError{Kind: ErrInvalidInput, Reason: fmt.Sprintf("Bedrock refused the attached %s: %s", what, me.Message), Err: err}
}

func plural(n int, noun string) string {
	if n == 1 {
		return noun
	}
	return noun + "s"
}

// TurnError is a turn that failed after it began, with what it had used:
// the tokens are billed whether or not the turn is kept. It wraps the cause.
type TurnError struct {
	Err     error
	Usage   Usage
	Metrics Metrics
}

func (e *TurnError) Error() string { return e.Err.Error() }

func (e *TurnError) Unwrap() error { return e.Err }

// converse calls the model with the current window, followed by extra
// messages that are not part of the history. It lets the manager keep the
// window bounded first, and when the window overflows the model's context it
// has the manager reduce it and calls again, at most MaxReductions times.
func (t *turn) converse(ctx context.Context, req ModelRequest, extra ...Message) (*ModelResponse, error) {
	m := t.a.cfg.Manager
	for reductions := 0; ; reductions++ {
		if err := m.Apply(ctx, t.conv); err != nil {
			return nil, fmt.Errorf("conversation manager: %w", err)
		}
		if err := t.reduceEarly(ctx); err != nil {
			return nil, err
		}
		req.Messages = withContext(t.conv.view(t.a.cfg.TrimResults, extra...), t.conv.Context)
		if t.a.cfg.PromptCache {
			req.CacheSystem, req.CacheAfter = true, previousTurnEnd(req.Messages)
		}
		if len(req.Tools) == 0 {
			req.Messages = withoutToolBlocks(req.Messages)
		}
		resp, err := t.call(ctx, &req)
		if !IsModelError(err, KindOverflow) && (err != nil || resp.StopReason != StopContextExceeded) {
			return resp, err
		}
		if t.emitted {
			// Part of the answer is out: reducing and asking again would
			// send a second answer after it.
			if err == nil {
				err = ErrContextOverflow
			}
			return nil, streamInterrupted(err)
		}
		if reductions >= t.a.cfg.MaxReductions {
			return nil, fmt.Errorf("%w: still too long after %d reductions", ErrContextOverflow, reductions)
		}
		if err := m.Reduce(ctx, t.conv); err != nil {
			if errors.Is(err, ErrCannotReduce) {
				return nil, fmt.Errorf("%w (%d messages in the window)", ErrContextOverflow, len(t.conv.Messages))
			}
			return nil, fmt.Errorf("conversation manager: %w", err)
		}
		t.metrics.Reductions++
	}
}

// reduceEarly reduces the window before a call when the last call's input
// came close to the context window.
func (t *turn) reduceEarly(ctx context.Context) error {
	window := t.a.cfg.ContextWindowTokens
	if window <= 0 || float64(t.conv.Window.LastInputTokens) < t.a.cfg.ReduceAt*float64(window) {
		return nil
	}
	t.conv.Window.LastInputTokens = 0 // the next call measures again
	switch err := t.a.cfg.Manager.Reduce(ctx, t.conv); {
	case err == nil:
		t.metrics.Reductions++
	case !errors.Is(err, ErrCannotReduce):
		return fmt.Errorf("conversation manager: %w", err)
	}
	return nil
}

func (t *turn) call(ctx context.Context, req *ModelRequest) (*ModelResponse, error) {
	hooks := &t.a.cfg.Hooks
	before(ctx, hooks.BeforeModelCall, &BeforeModelCallEvent{Request: req})
	ctx = context.WithValue(ctx, retryObserverKey{}, func(e *ModelRetryEvent) {
		t.metrics.Retries++
		if e.Err.Kind == KindThrottled {
			t.metrics.Throttles++
		}
		before(ctx, hooks.ModelRetry, e)
	})
	start := time.Now()
	var resp *ModelResponse
	var err error
	if t.emit == nil {
		resp, err = t.a.model.Converse(ctx, req)
	} else {
		t.emitted = false
		resp, err = ConverseStream(ctx, t.a.model, req, func(d Delta) {
			t.emitted = true
			t.emit(Event{Text: d.Text})
		})
	}
	d := time.Since(start)
	t.metrics.ModelCalls++
	t.metrics.ModelLatency += d
	t.metrics.ModelLatencies = append(t.metrics.ModelLatencies, d)
	if me := (*ModelError)(nil); errors.As(err, &me) && me.Kind == KindThrottled {
		t.metrics.Throttles++
	}
	if err == nil {
		t.usage.add(resp.Usage)
		t.conv.Window.LastInputTokens = resp.Usage.InputTokens
	}
	after(ctx, hooks.AfterModelCall, &AfterModelCallEvent{Request: req, Response: resp, Err: err, Duration: d})
	return resp, err
}

// answer returns the assistant message to keep from a response. Tool uses
// are kept only when the model stopped to use them: after max_tokens or a
// guardrail their input may be cut off, so they become notes and are not
// run. Blank text is dropped, and an empty answer gets a placeholder.
func answer(resp *ModelResponse) Message {
	m := Message{Role: RoleAssistant, Content: make([]ContentBlock, 0, len(resp.Message.Content))}
	for _, b := range resp.Message.Content {
		if u := b.ToolUse; u != nil && resp.StopReason != StopToolUse {
			b = Text(fmt.Sprintf("[The call to tool %s was not run: the answer stopped (%s) before it was complete.]", u.Name, resp.StopReason))
		}
		m.Content = append(m.Content, b)
	}
	m = cleanBlocks(m)
	if len(m.Content) == 0 {
		m.Content = []ContentBlock{Text(placeholderText)}
	}
	return m
}

// ErrInvalidInput is returned for turn input that Bedrock would reject; the
// message says why.
var ErrInvalidInput = errors.New("invalid input")

// Limits Bedrock puts on the content of one request.
const (
	MaxImages        = 20
	MaxImageBytes    = 3_750_000
	MaxDocuments     = 5
	MaxDocumentBytes = 4_500_000
)

var (
	documentNamePattern = regexp.MustCompile(`^[A-Za-z0-9()\[\]-]+(?: [A-Za-z0-9()\[\]-]+)*$`)
	imageFormats        = []string{"png", "jpeg", "gif", "webp"}
	documentFormats     = []string{"pdf", "csv", "doc", "docx", "xls", "xlsx", "html", "txt", "md"}
)

// ValidateInput checks the content of a user's turn: at least one block; only
// text, images and documents; no blank text; supported formats and sizes; a
// text block beside any document; and bytes that are what their format says
// (see checkBytes). Errors wrap ErrInvalidInput.
func ValidateInput(input []ContentBlock) error {
	if len(input) == 0 {
		return invalidInput("no content")
	}
	var images, docs, texts int
	for i, b := range input {
		switch {
		case b.ToolUse != nil || b.ToolResult != nil || b.Reasoning != nil:
			return invalidInput("content[%d]: only text, image and document blocks are accepted", i)
		case b.Image != nil && b.Document == nil && b.Text == "":
			images++
			if err := checkMedia(b.Image.Format, imageFormats, b.Image.Source, MaxImageBytes); err != nil {
				return invalidInput("content[%d]: image: %v", i, err)
			}
		case b.Document != nil && b.Image == nil && b.Text == "":
			docs++
			if err := checkMedia(b.Document.Format, documentFormats, b.Document.Source, MaxDocumentBytes); err != nil {
				return invalidInput("content[%d]: document: %v", i, err)
			}
			if len(b.Document.Name) > 200 || !documentNamePattern.MatchString(b.Document.Name) {
				return invalidInput("content[%d]: document name %q must be 1-200 letters, digits, single spaces, hyphens, parentheses or square brackets", i, b.Document.Name)
			}
		case b.Image == nil && b.Document == nil:
			if strings.TrimSpace(b.Text) == "" {
				return invalidInput("content[%d]: text is blank", i)
			}
			texts++
		default:
			return invalidInput("content[%d]: a block must have exactly one of text, image or document", i)
		}
	}
	switch {
	case images > MaxImages:
		return invalidInput("%d images; at most %d", images, MaxImages)
	case docs > MaxDocuments:
		return invalidInput("%d documents; at most %d", docs, MaxDocuments)
	case docs > 0 && texts == 0:
		return invalidInput("a document needs a text block beside it")
	}
	// The bytes last: the checks above are about the request's shape, which
	// is wrong whatever the files hold.
	for i, b := range input {
		switch {
		case b.Image != nil:
			if err := checkBytes(b.Image.Format, true, b.Image.Source.Bytes); err != nil {
				return invalidInput("content[%d]: image: %v", i, err)
			}
		case b.Document != nil:
			if err := checkBytes(b.Document.Format, false, b.Document.Source.Bytes); err != nil {
				return invalidInput("content[%d]: document: %v", i, err)
			}
		}
	}
	return nil
}

func checkMedia(format string, formats []string, src Source, maxBytes int) error {
	if !slices.Contains(formats, format) {
		return fmt.Errorf("format %q is not one of %s", format, strings.Join(formats, ", "))
	}
	if src.S3 != nil || src.Text != "" {
		return errors.New("only inline bytes are accepted as a source")
	}
	if len(src.Bytes) == 0 {
		return errors.New("no bytes")
	}
	if len(src.Bytes) > maxBytes {
		return fmt.Errorf("%d bytes; at most %d", len(src.Bytes), maxBytes)
	}
	return nil
}

// previousTurnEnd returns, as CacheAfter, the index of the last message
// before the latest turn start of view: the end of the turns before this
// one, whose prefix stays the same through this turn's model calls, and
// which the next turn reads from the cache before it writes its own.
func previousTurnEnd(view []Message) []int {
	for i := len(view) - 1; i > 0; i-- {
		if IsTurnStart(view[i]) {
			return []int{i - 1}
		}
	}
	return nil
}
