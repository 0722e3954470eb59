package agent

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"
)

// StructuredRequest asks the model for one object that is valid against a
// JSON Schema.
type StructuredRequest struct {
	Prompt []ContentBlock
	// Schema is the object's schema, usually compiled by internal/schema.
	Schema Schema
	// Name is the name of the tool the schema is offered as; empty means
	// DefaultStructuredName.
	Name string
	// Description tells the model what the object is for.
	Description string
	// MaxAttempts caps the model's tries; 0 means DefaultStructuredAttempts.
	MaxAttempts int
}

// Defaults for StructuredRequest.
const (
	DefaultStructuredName     = "structured_output"
	DefaultStructuredAttempts = 3
)

// StructuredResult is a turn that produced an object.
type StructuredResult struct {
	Result
	// Data is the object, valid against the schema.
	Data json.RawMessage
	// Attempts counts the model's tries, 1 when the first was valid.
	Attempts int
}

// StructuredError is a structured request that produced no valid object. It
// matches ErrStructuredOutput.
type StructuredError struct {
	Attempts int
	// Reason says what went wrong in the last attempt.
	Reason string
	// Problems are the last attempt's validation errors.
	Problems []string
}

func (e *StructuredError) Error() string {
	return fmt.Sprintf("structured output failed after %d attempts: %s", e.Attempts, e.Reason)
}

// Is makes errors.Is(err, ErrStructuredOutput) true.
func (e *StructuredError) Is(target error) bool { return target == ErrStructuredOutput }

// Structured runs a turn that must end in an object valid against
// req.Schema. The schema is offered as a tool and the model is made to call
// it; models that cannot be made to are asked to instead. Each invalid object
// goes back to the model with the validation errors as an error result, up to
// MaxAttempts tries. An error from req.Schema.Validate ends the turn with
// that error: for a schema too expensive to check, an *InputError.
//
// The conversation so far is part of the request. What the turn adds to the
// history is the prompt and an assistant message holding the object as JSON;
// the failed attempts are not kept. On failure the error is a
// *StructuredError, or one of Run's errors.
func (a *Agent) Structured(ctx context.Context, conv *Conversation, req StructuredRequest) (*StructuredResult, error) {
	before(ctx, a.cfg.Hooks.BeforeInvocation, &BeforeInvocationEvent{Conversation: conv, Input: req.Prompt})
	res, err := a.structured(ctx, conv, req)
	ev := &AfterInvocationEvent{Err: err}
	if res != nil {
		ev.Result = &res.Result
	}
	after(ctx, a.cfg.Hooks.AfterInvocation, ev)
	return res, err
}

func (a *Agent) structured(ctx context.Context, conv *Conversation, req StructuredRequest) (*StructuredResult, error) {
	if err := ValidateInput(req.Prompt); err != nil {
		return nil, err
	}
	if req.Schema == nil {
		return nil, invalidSchema("no schema")
	}
	name := cmp.Or(req.Name, DefaultStructuredName)
	if !ValidToolName(name) {
		return nil, invalidInput("name %q does not match %s", name, ToolNameRule)
	}
	description := cmp.Or(req.Description, "Return the answer as an object that matches the input schema.")
	spec := ToolSpec{Name: name, Description: description, InputSchema: req.Schema.Raw()}
	mreq := ModelRequest{System: a.cfg.System, Tools: []ToolSpec{spec}, ToolChoice: ToolChoice{Tool: name}}

	t := a.newTurn(conv)
	work, cancel := a.workContext(ctx)
	defer cancel()
	t.begin(ctx, req.Prompt)

	// The attempts live only in the request: they are not the history's.
	var attempts []Message
	fail := &StructuredError{}
	for fail.Attempts < cmp.Or(req.MaxAttempts, DefaultStructuredAttempts) {
		// Each attempt is a cycle, as in Run; a call refused for its
		// toolChoice is asked again within the same cycle.
		t.metrics.Cycles = fail.Attempts + 1
		resp, err := t.converse(work, mreq, attempts...)
		if IsModelError(err, KindToolChoiceUnsupported) && mreq.ToolChoice.Tool != "" {
			mreq.ToolChoice = ToolChoice{}
			mreq.System = strings.TrimSpace(a.cfg.System + "\n\n" + fmt.Sprintf("Answer by calling the %s tool, and only that tool.", name))
			continue
		}
		if err != nil {
			return nil, t.fail(ctx, work, err)
		}
		fail.Attempts++
		data, found := structuredInput(resp.Message, name)
		switch {
		case !found:
			fail.Reason = "the model did not call the " + name + " tool"
			fail.Problems = []string{fail.Reason}
		default:
			// A schema too expensive to check ends the turn: another
			// attempt would cost as much, and the caller must fix it.
			fail.Problems, err = req.Schema.Validate(work, data)
			if err != nil {
				return nil, t.fail(ctx, work, err)
			}
			if fail.Problems == nil {
				return t.structuredResult(ctx, data, fail.Attempts)
			}
			fail.Reason = "the object did not match the schema"
		}
		msg := answer(resp)
		attempts = append(attempts, msg, feedback(msg, name, fail.Problems))
	}
	t.metrics.Duration = time.Since(t.start)
	return nil, &TurnError{Err: fmt.Errorf("agent: %w", fail), Usage: t.totalUsage(), Metrics: t.totalMetrics()}
}

func (t *turn) structuredResult(ctx context.Context, data json.RawMessage, attempts int) (*StructuredResult, error) {
	var buf bytes.Buffer
	if err := json.Compact(&buf, data); err != nil {
		return nil, fmt.Errorf("agent: structured output: %w", err)
	}
	data = buf.Bytes()
	t.add(ctx, AssistantText(string(data)))
	return &StructuredResult{Result: *t.finish(StopToolUse, string(data)), Data: data, Attempts: attempts}, nil
}

// structuredInput finds the object in an answer: the input of the first call
// to the named tool, or else a JSON object in the text, for models that
// answered in words.
func structuredInput(m Message, name string) (json.RawMessage, bool) {
	for _, u := range m.ToolUses() {
		if u.Name == name {
			return u.Input, true
		}
	}
	return jsonInText(m.Text())
}

// jsonInText finds a JSON object in text: the whole text, a fenced block, or
// the span from the first '{' to the last '}'.
func jsonInText(text string) (json.RawMessage, bool) {
	text = strings.TrimSpace(text)
	candidates := []string{text}
	if _, rest, ok := strings.Cut(text, "```"); ok {
		rest = strings.TrimPrefix(rest, "json")
		if block, _, ok := strings.Cut(rest, "```"); ok {
			candidates = append(candidates, block)
		}
	}
	if i, j := strings.Index(text, "{"), strings.LastIndex(text, "}"); i >= 0 && j > i {
		candidates = append(candidates, text[i:j+1])
	}
	for _, c := range candidates {
		c = strings.TrimSpace(c)
		if strings.HasPrefix(c, "{") && json.Valid([]byte(c)) {
			return json.RawMessage(c), true
		}
	}
	return nil, false
}

// feedback answers a failed attempt: every tool use gets an error result,
// which for the structured tool lists the problems; an answer without tool
// uses gets a reminder in text.
func feedback(answer Message, name string, problems []string) Message {
	list := "- " + strings.Join(problems, "\n- ")
	m := Message{Role: RoleUser}
	for _, u := range answer.ToolUses() {
		text := "Only the " + name + " tool can be used here."
		if u.Name == name {
			text = "The input does not match the schema. Call the tool again with these problems fixed:\n" + list
		}
		m.Content = append(m.Content, ContentBlock{ToolResult: TextResult(u.ToolUseID, ToolError, text)})
	}
	if len(m.Content) == 0 {
		m.Content = []ContentBlock{Text("Answer by calling the " + name + " tool with an input that matches its schema. Problems with the last answer:\n" + list)}
	}
	return m
}
