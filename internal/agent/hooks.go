package agent

import (
	"context"
	"time"
)

// Hooks are callbacks the agent runs at points of a turn. Each event has its
// own typed slice; append to it to register. "Before" callbacks (and
// ToolContext's) run in the order they were registered and "after"
// callbacks in reverse, so that a pair registered together nests like a
// deferred call.
//
// Tool events run on the goroutine of the tool they describe, so callbacks for
// them must be safe for concurrent use. Callbacks must not keep the events they
// are given.
type Hooks struct {
	BeforeInvocation []func(context.Context, *BeforeInvocationEvent)
	AfterInvocation  []func(context.Context, *AfterInvocationEvent)
	MessageAdded     []func(context.Context, *MessageAddedEvent)
	BeforeModelCall  []func(context.Context, *BeforeModelCallEvent)
	AfterModelCall   []func(context.Context, *AfterModelCallEvent)
	ModelRetry       []func(context.Context, *ModelRetryEvent)
	BeforeToolCall   []func(context.Context, *BeforeToolCallEvent)
	// ToolContext callbacks give a tool call that goes ahead the context
	// it runs with, which its AfterToolCall callbacks get too: the context
	// they are given, or one derived from it, such as one that carries a
	// trace span for the run, which an AfterToolCall callback then ends.
	// Each is given the context the one before returned (nil keeps it).
	ToolContext   []func(context.Context, *ToolContextEvent) context.Context
	AfterToolCall []func(context.Context, *AfterToolCallEvent)
}

// BeforeInvocationEvent starts a turn.
type BeforeInvocationEvent struct {
	// Conversation is what the turn starts from. Read only.
	Conversation *Conversation
	Input        []ContentBlock
}

// AfterInvocationEvent ends a turn, whether it succeeded or not.
type AfterInvocationEvent struct {
	// Result is nil when Err is set.
	Result *Result
	Err    error
}

// MessageAddedEvent reports a message added to the conversation.
type MessageAddedEvent struct {
	Message Message
}

// BeforeModelCallEvent precedes each model call. Retries of a failed call
// happen within it.
type BeforeModelCallEvent struct {
	// Request is what will be sent. Read only.
	Request *ModelRequest
}

// AfterModelCallEvent follows each model call.
type AfterModelCallEvent struct {
	Request *ModelRequest
	// Response is nil when Err is set.
	Response *ModelResponse
	Err      error
	Duration time.Duration
}

// ModelRetryEvent reports a failed attempt of a model call that is about to
// be tried again, within the model call's Before and After events.
type ModelRetryEvent struct {
	// Attempt is the number of the attempt that failed, from 1.
	Attempt int
	// Err is why it failed: a retryable kind, such as KindThrottled.
	Err *ModelError
	// Wait is the backoff before the next attempt.
	Wait time.Duration
}

// BeforeToolCallEvent precedes each tool run. A callback may replace Tool;
// set Cancel to a reason, which the model receives as an error result instead
// of the run; or set Interrupt, which pauses the turn until a person approves
// or denies the use (see Answer). Cancel wins over Interrupt.
type BeforeToolCallEvent struct {
	Use *ToolUseBlock
	// Tool is nil when the model named a tool the agent does not have.
	Tool   Tool
	Cancel string
	// Interrupt, when set, holds the use back for a person's approval. It
	// is ignored when Approved.
	Interrupt *InterruptRequest
	// Approved is true when a person approved the use after an interrupt:
	// the turn is resuming, and the tool runs unless a callback cancels it.
	Approved bool
}

// ToolContextEvent is a tool call that goes ahead once the BeforeToolCall
// callbacks ran: the tool runs, or the model receives an error result in
// its place, for a cancelled call or a tool the agent does not have. A
// call that waits for a person has none until it is approved.
type ToolContextEvent struct {
	Use *ToolUseBlock
	// Tool is the tool the BeforeToolCall callbacks left, nil when the
	// model named a tool the agent does not have.
	Tool Tool
	// Delegation says that Tool runs and hands the task to a sub-agent
	// (see Delegate), whose name and description are the tool's.
	Delegation bool
}

// AfterToolCallEvent follows each tool run. A callback may replace Result,
// which is what the model receives.
type AfterToolCallEvent struct {
	Use *ToolUseBlock
	// Tool is the tool that ran, nil when the model named a tool the agent
	// does not have.
	Tool     Tool
	Result   *ToolResultBlock
	Duration time.Duration
	// Paused says that the tool, a delegation, ended its run without a
	// result: its sub-agent waits for a person, and Result only says so.
	// The delegation's result comes when a resume ends the sub-agent's
	// turn; a hook's replacement of Result is ignored.
	Paused bool
}

func before[E any](ctx context.Context, fns []func(context.Context, *E), e *E) {
	for _, fn := range fns {
		fn(ctx, e)
	}
}

// contextFrom runs fns in order, each given the context the one before
// returned, and returns the last one's.
func contextFrom[E any](ctx context.Context, fns []func(context.Context, *E) context.Context, e *E) context.Context {
	for _, fn := range fns {
		if c := fn(ctx, e); c != nil {
			ctx = c
		}
	}
	return ctx
}

func after[E any](ctx context.Context, fns []func(context.Context, *E), e *E) {
	for i := len(fns) - 1; i >= 0; i-- {
		fns[i](ctx, e)
	}
}
