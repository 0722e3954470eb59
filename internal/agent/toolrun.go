package agent

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"golang.org/x/sync/errgroup"
)

// runTools runs the tool uses of one answer concurrently, at most
// ToolConcurrency at a time, and returns their results in the order of the
// uses. It never fails: every failure becomes an error result for the model.
// A use that waits for a person does not run: it comes back as an
// interrupt, and its slot in the results stays empty. approved says that a
// person approved the uses, which then run.
func (t *turn) runTools(ctx context.Context, uses []*ToolUseBlock, approved bool) ([]ContentBlock, []Interrupt) {
	results := make([]ContentBlock, len(uses))
	held := make([][]Interrupt, len(uses))
	runs := make([]ToolRun, len(uses))
	var g errgroup.Group
	g.SetLimit(t.a.cfg.ToolConcurrency)
	for i, u := range uses {
		g.Go(func() error {
			results[i].ToolResult, held[i] = t.runTool(ctx, u, approved, &runs[i])
			if results[i].ToolResult != nil {
				t.send(Event{ToolResult: results[i].ToolResult})
			}
			return nil
		})
	}
	_ = g.Wait() // the goroutines return no errors
	if n, ok := t.state.changed(t.stateSeen); ok {
		t.stateSeen = n
		t.send(Event{State: t.state.Snapshot()})
	}
	var interrupts []Interrupt
	for i, in := range held {
		switch {
		case in != nil:
			interrupts = append(interrupts, in...)
		case runs[i].Name != "":
			t.metrics.Tools = append(t.metrics.Tools, runs[i])
			fallthrough
		default:
			t.metrics.ToolCalls++
		}
	}
	return results, interrupts
}

// runTool runs one use, or returns the interrupts that hold it back: its
// own, or those of the sub-agent's turn it delegated to, which paused. It
// describes the run in run, when the tool is the agent's and ran to its
// end.
func (t *turn) runTool(ctx context.Context, u *ToolUseBlock, approved bool, run *ToolRun) (*ToolResultBlock, []Interrupt) {
	hooks := &t.a.cfg.Hooks
	start := time.Now()
	ev := &BeforeToolCallEvent{Use: u, Approved: approved}
	if r, ok := t.box.tools[u.Name]; ok {
		ev.Tool = r.tool
	}
	before(ctx, hooks.BeforeToolCall, ev)
	if in := t.interruptFor(u, ev); in != nil {
		return nil, []Interrupt{*in}
	}
	_, delegates := ev.Tool.(*delegation)
	ctx = contextFrom(ctx, hooks.ToolContext, &ToolContextEvent{Use: u, Tool: ev.Tool, Delegation: delegates && ev.Cancel == ""})

	var result *ToolResultBlock
	switch {
	case ev.Cancel != "":
		result = TextResult(u.ToolUseID, ToolError, "The tool call was cancelled: "+ev.Cancel)
	case ev.Tool == nil:
		result = TextResult(u.ToolUseID, ToolError, fmt.Sprintf("There is no tool named %q. The tools are: %s.", u.Name, t.box.names()))
	default:
		var held []Interrupt
		if result, held = t.invoke(ctx, ev.Tool, u); held != nil {
			// The run ends here, without a result: the hooks that saw it
			// start see it end.
			note := TextResult(u.ToolUseID, ToolSuccess, fmt.Sprintf("The agent %s waits for a person's answer.", u.Name))
			after(ctx, hooks.AfterToolCall, &AfterToolCallEvent{Use: u, Tool: ev.Tool, Result: note, Duration: time.Since(start), Paused: true})
			return nil, held
		}
	}

	aev := &AfterToolCallEvent{Use: u, Tool: ev.Tool, Result: result, Duration: time.Since(start)}
	after(ctx, hooks.AfterToolCall, aev)
	if aev.Result != nil && aev.Result.ToolUseID == u.ToolUseID {
		result = aev.Result // a hook may replace the result, not detach it from its use
	}
	result = t.a.admit(result)
	if ev.Tool != nil {
		*run = ToolRun{Name: u.Name, Duration: aev.Duration, Failed: result.Status == ToolError}
	}
	return result, nil
}

// interruptFor returns the interrupt that holds u back after the
// BeforeToolCall hooks ran, or nil when it runs: a hook's, or the tool's
// own when it waits for a person or a client. Nothing holds back a
// cancelled use, an approved one but for a client tool's, or one whose
// input the tool would refuse anyway.
func (t *turn) interruptFor(u *ToolUseBlock, ev *BeforeToolCallEvent) *Interrupt {
	if ev.Cancel != "" {
		return nil
	}
	var in Interrupt
	_, client := ev.Tool.(clientTool)
	ir, waits := ev.Tool.(interrupter)
	switch r := ev.Interrupt; {
	case r != nil && !ev.Approved:
		in = Interrupt{Kind: KindApproval, Name: cmp.Or(r.Name, "approval"), Reason: r.Reason, Payload: r.Payload}
	case ev.Approved && !client, !waits:
		// Approved, a client tool's call still waits for the client.
		return nil
	default:
		if schema, err := t.schemaFor(ir); err != nil || schema.validate(inputOf(u)) != nil {
			return nil
		}
		in = ir.interrupt(u)
	}
	in.ID, in.Tool, in.Input = u.ToolUseID, u.Name, inputOf(u)
	if len(in.Payload) > 0 && !json.Valid(in.Payload) {
		in.Payload = nil
	}
	// Whole seconds, rounded up: an interrupt never expires early.
	in.ExpiresAt = t.a.cfg.Now().Add(t.a.cfg.InterruptTTL + time.Second - 1).UTC().Truncate(time.Second)
	return &in
}

// inputOf returns u's input, with {} for none.
func inputOf(u *ToolUseBlock) json.RawMessage {
	if len(u.Input) == 0 {
		return json.RawMessage("{}")
	}
	return u.Input
}

func (b *toolbox) names() string {
	if len(b.specs) == 0 {
		return "(none)"
	}
	names := make([]string, len(b.specs))
	for i, s := range b.specs {
		names[i] = s.Name
	}
	return strings.Join(names, ", ")
}

// errToolPanicked wraps the value a tool panicked with.
var errToolPanicked = errors.New("the tool failed unexpectedly")

// invoke validates the input and runs the tool under its own timeout. A tool
// that ignores its context is abandoned when the timeout ends, so it cannot
// hold up the turn. A delegation whose sub-agent's turn paused returns no
// result, but the interrupts that hold it back.
func (t *turn) invoke(ctx context.Context, tool Tool, u *ToolUseBlock) (*ToolResultBlock, []Interrupt) {
	schema, err := t.schemaFor(tool)
	if err != nil {
		return TextResult(u.ToolUseID, ToolError, "The tool cannot be used: "+err.Error()), nil
	}
	input := inputOf(u)
	if problems, err := schema.Validate(ctx, input); err != nil {
		return TextResult(u.ToolUseID, ToolError, "The input could not be checked against the tool's schema: "+reasonOf(err)), nil
	} else if problems != nil {
		return TextResult(u.ToolUseID, ToolError, "The input does not match the tool's schema:\n- "+strings.Join(problems, "\n- ")), nil
	}

	var cancel context.CancelFunc
	if _, ok := tool.(*delegation); ok {
		ctx, cancel = context.WithCancel(ctx) // a delegation has the turn's time
	} else {
		ctx, cancel = context.WithTimeout(ctx, t.a.cfg.ToolTimeout)
	}
	defer cancel()
	type outcome struct {
		content []ToolResultContent
		err     error
	}
	done := make(chan outcome, 1)
	// Progress goes to the stream while the run lasts, and never after:
	// a run past its time goes on in its goroutine, unheard.
	var gate sync.Mutex
	live := t.emit != nil
	progress := func(text string) {
		gate.Lock()
		defer gate.Unlock()
		if live {
			t.send(Event{ToolProgress: &ToolProgress{ToolUseID: u.ToolUseID, Name: u.Name, Text: text}})
		}
	}
	defer func() {
		gate.Lock()
		live = false
		gate.Unlock()
	}()
	go func() {
		defer func() {
			if v := recover(); v != nil {
				done <- outcome{err: fmt.Errorf("%w: %v", errToolPanicked, v)}
			}
		}()
		call := &ToolCall{ID: u.ToolUseID, Name: u.Name, Input: input, State: t.state, turn: t, progress: progress}
		var content []ToolResultContent
		var err error
		if answer, ok := t.answers[u.ToolUseID]; ok {
			if asker, isAsker := askerOf(tool); isAsker {
				content, err = asker.Answered(ctx, call, answer)
			} else { // the tool asked in an earlier invocation, and is another now
				err = errors.New("the tool takes no answers any more")
			}
		} else {
			content, err = tool.Run(ctx, call)
		}
		done <- outcome{content, err}
	}()

	var o outcome
	select {
	case o = <-done:
	case <-ctx.Done():
		o.err = ctx.Err()
	}
	var paused *pausedError
	if in, ok := t.askedInterrupt(tool, u, o.err); ok {
		return nil, []Interrupt{*in}
	}
	switch {
	case errors.As(o.err, &paused):
		return nil, paused.interrupts
	case errors.Is(o.err, context.DeadlineExceeded) && ctx.Err() != nil:
		return TextResult(u.ToolUseID, ToolError, fmt.Sprintf("The tool did not finish within %s.", t.a.cfg.ToolTimeout)), nil
	case o.err != nil:
		return TextResult(u.ToolUseID, ToolError, "The tool failed: "+o.err.Error()), nil
	}
	return &ToolResultBlock{ToolUseID: u.ToolUseID, Status: ToolSuccess, Content: o.content}, nil // runTool admits it
}

// schemaFor returns the compiled input schema of tool: the one compiled
// when the tool joined the turn, or else the one it brings or a fresh one,
// for a tool a hook put in place of another.
func (t *turn) schemaFor(tool Tool) (*ToolSchema, error) {
	spec := tool.Spec()
	if r, ok := t.box.tools[spec.Name]; ok && bytes.Equal(r.schema.raw, spec.InputSchema) {
		return r.schema, nil
	}
	return schemaOf(tool, spec)
}
