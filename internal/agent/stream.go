package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
)

// StreamingModel is a Model that can also hand over its answer as the model
// writes it.
type StreamingModel interface {
	Model
	// ConverseStream is Converse that calls emit with each piece of the
	// answer as it arrives, in order, on the calling goroutine. It returns
	// the whole answer, as Converse would. Once it has called emit, it
	// must not retry: what was emitted may already be on its way to a user.
	ConverseStream(ctx context.Context, req *ModelRequest, emit func(Delta)) (*ModelResponse, error)
}

// Delta is a piece of a streamed answer.
type Delta struct {
	// Text is a piece of a text block.
	Text string
}

// ConverseStream calls m's ConverseStream, or, for a model that cannot
// stream, Converse, emitting each text block of the answer whole.
func ConverseStream(ctx context.Context, m Model, req *ModelRequest, emit func(Delta)) (*ModelResponse, error) {
	if sm, ok := m.(StreamingModel); ok {
		return sm.ConverseStream(ctx, req, emit)
	}
	resp, err := m.Converse(ctx, req)
	if err != nil {
		return nil, err
	}
	for _, b := range resp.Message.Content {
		if b.Text != "" {
			emit(Delta{Text: b.Text})
		}
	}
	return resp, nil
}

// ConverseStream retries as Converse does, but only until the first piece
// of the answer was emitted: after that a retry would repeat it.
func (r *retrying) ConverseStream(ctx context.Context, req *ModelRequest, emit func(Delta)) (*ModelResponse, error) {
	emitted := false
	return r.retry(ctx, func() (*ModelResponse, error) {
		return ConverseStream(ctx, r.model, req, func(d Delta) {
			emitted = true
			emit(d)
		})
	}, func() bool { return !emitted })
}

// ErrStreamInterrupted wraps a model failure that came after part of the
// answer had been streamed, and so was not retried.
var ErrStreamInterrupted = errors.New("the answer broke off after part of it was sent")

// Event is something that happened in a streamed turn. Exactly one field
// is set, but for Agent, which tags the events of a sub-agent's turn.
type Event struct {
	// Agent, on a Text, ToolUse or ToolResult of a sub-agent's turn, says
	// which delegation it comes from; nil for the main agent's.
	Agent *AgentRun
	// Delegation is a delegation that starts, or one that ended (Done).
	Delegation *Delegation
	// Text is a piece of the model's text, as it arrives. The turn's final
	// text is Result.Text: the text of its last answer, which notes the
	// agent adds may complete.
	Text string
	// ToolUse is a tool call the model asked for, emitted before it runs.
	ToolUse *ToolUseBlock
	// ToolResult is a tool call's result, emitted when the tool finished.
	ToolResult *ToolResultBlock
	// ToolProgress is what a tool reports while it runs
	// (ToolCall.Progress), between its ToolUse and its ToolResult.
	ToolProgress *ToolProgress
	// Interrupt is a tool use that waits for a person, emitted when the
	// turn pauses.
	Interrupt *Interrupt
	// State is the agent state, emitted after tools changed it.
	State map[string]json.RawMessage
}

// ToolProgress is a piece of what a tool reports while it runs, such as a
// remote agent's answer as it streams.
type ToolProgress struct {
	ToolUseID string
	Name      string
	Text      string
}

// Stream runs a turn as Run does and calls emit with what happens as it
// happens: the model's text as it writes it, each tool call before it runs
// and each result when its tool finished. emit is never called concurrently,
// and not after Stream returned. What Stream returns is what Run would; a
// retryable model failure is retried only if it came before the model's
// answer had begun to stream.
func (a *Agent) Stream(ctx context.Context, conv *Conversation, input []ContentBlock, emit func(Event)) (*Result, error) {
	if emit == nil {
		return nil, errors.New("agent: Stream needs an emit function")
	}
	before(ctx, a.cfg.Hooks.BeforeInvocation, &BeforeInvocationEvent{Conversation: conv, Input: input})
	res, err := a.run(ctx, conv, input, serialized(emit))
	after(ctx, a.cfg.Hooks.AfterInvocation, &AfterInvocationEvent{Result: res, Err: err})
	return res, err
}

// serialized returns emit behind a lock: tools run concurrently, and emit
// is never called concurrently.
func serialized(emit func(Event)) func(Event) {
	var mu sync.Mutex
	return func(e Event) {
		mu.Lock()
		defer mu.Unlock()
		emit(e)
	}
}

// streamInterrupted reports a failure of a call whose answer had begun to stream.
func streamInterrupted(err error) error {
	return fmt.Errorf("%w: %w", ErrStreamInterrupted, err)
}
