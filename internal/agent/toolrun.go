package agent

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"golang.org/x/sync/errgroup"
)

// runTools runs the tool uses of one answer concurrently, at most
// ToolConcurrency at a time, and returns their results in the order of the
// uses. It never fails: every failure becomes an error result for the model.
func (t *turn) runTools(ctx context.Context, uses []*ToolUseBlock) []ContentBlock {
	results := make([]ContentBlock, len(uses))
	var g errgroup.Group
	g.SetLimit(t.a.cfg.ToolConcurrency)
	for i, u := range uses {
		g.Go(func() error {
			results[i] = ContentBlock{ToolResult: t.runTool(ctx, u)}
			t.send(Event{ToolResult: results[i].ToolResult})
			return nil
		})
	}
	_ = g.Wait() // the goroutines return no errors
	t.metrics.ToolCalls += len(uses)
	return results
}

func (t *turn) runTool(ctx context.Context, u *ToolUseBlock) *ToolResultBlock {
	hooks := &t.a.cfg.Hooks
	start := time.Now()
	ev := &BeforeToolCallEvent{Use: u}
	if r, ok := t.a.tools[u.Name]; ok {
		ev.Tool = r.tool
	}
	before(ctx, hooks.BeforeToolCall, ev)

	var result *ToolResultBlock
	switch {
	case ev.Cancel != "":
		result = TextResult(u.ToolUseID, ToolError, "The tool call was cancelled: "+ev.Cancel)
	case ev.Tool == nil:
		result = TextResult(u.ToolUseID, ToolError, fmt.Sprintf("There is no tool named %q. The tools are: %s.", u.Name, t.a.toolNames()))
	default:
		result = t.invoke(ctx, ev.Tool, u)
	}

	aev := &AfterToolCallEvent{Use: u, Result: result, Duration: time.Since(start)}
	after(ctx, hooks.AfterToolCall, aev)
	if aev.Result == nil || aev.Result.ToolUseID != u.ToolUseID {
		return result // a hook may replace the result, not detach it from its use
	}
	return aev.Result
}

func (a *Agent) toolNames() string {
	if len(a.specs) == 0 {
		return "(none)"
	}
	names := make([]string, len(a.specs))
	for i, s := range a.specs {
		names[i] = s.Name
	}
	return strings.Join(names, ", ")
}

// errToolPanicked wraps the value a tool panicked with.
var errToolPanicked = errors.New("the tool failed unexpectedly")

// invoke validates the input and runs the tool under its own timeout. A tool
// that ignores its context is abandoned when the timeout ends, so it cannot
// hold up the turn.
func (t *turn) invoke(ctx context.Context, tool Tool, u *ToolUseBlock) *ToolResultBlock {
	schema, err := t.a.schemaFor(tool)
	if err != nil {
		return TextResult(u.ToolUseID, ToolError, "The tool cannot be used: "+err.Error())
	}
	input := u.Input
	if len(input) == 0 {
		input = []byte("{}")
	}
	if problems := schema.validate(input); problems != nil {
		return TextResult(u.ToolUseID, ToolError, "The input does not match the tool's schema:\n- "+strings.Join(problems, "\n- "))
	}

	ctx, cancel := context.WithTimeout(ctx, t.a.cfg.ToolTimeout)
	defer cancel()
	type outcome struct {
		content []ToolResultContent
		err     error
	}
	done := make(chan outcome, 1)
	go func() {
		defer func() {
			if v := recover(); v != nil {
				done <- outcome{err: fmt.Errorf("%w: %v", errToolPanicked, v)}
			}
		}()
		content, err := tool.Run(ctx, &ToolCall{ID: u.ToolUseID, Name: u.Name, Input: input, State: t.state})
		done <- outcome{content, err}
	}()

	var o outcome
	select {
	case o = <-done:
	case <-ctx.Done():
		o.err = ctx.Err()
	}
	switch {
	case errors.Is(o.err, context.DeadlineExceeded) && ctx.Err() != nil:
		return TextResult(u.ToolUseID, ToolError, fmt.Sprintf("The tool did not finish within %s.", t.a.cfg.ToolTimeout))
	case o.err != nil:
		return TextResult(u.ToolUseID, ToolError, "The tool failed: "+o.err.Error())
	}
	content := slices.DeleteFunc(o.content, func(c ToolResultContent) bool {
		return c.JSON == nil && c.Image == nil && c.Document == nil && strings.TrimSpace(c.Text) == ""
	})
	if len(content) == 0 {
		content = []ToolResultContent{{Text: "The tool returned no output."}}
	}
	return &ToolResultBlock{ToolUseID: u.ToolUseID, Status: ToolSuccess, Content: content}
}

// schemaFor returns the compiled input schema of tool: the one New compiled
// when the schema is a registered tool's, or else a fresh one, for a tool a
// hook put in place of another.
func (a *Agent) schemaFor(tool Tool) (*toolSchema, error) {
	spec := tool.Spec()
	if r, ok := a.tools[spec.Name]; ok && bytes.Equal(r.schema.raw, spec.InputSchema) {
		return r.schema, nil
	}
	return compileToolSchema(spec.InputSchema)
}
