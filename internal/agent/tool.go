package agent

import (
	"context"
	"encoding/json"
	"fmt"
	"regexp"

	"github.com/google/jsonschema-go/jsonschema"
)

// Tool is something the model can ask the agent to run.
//
// Run gets input that has already been validated against Spec().InputSchema.
// An error from Run goes back to the model as an error result; it never ends
// the turn. Run must honour ctx: the agent stops waiting for it when ctx ends.
// Tools run concurrently, so Run must be safe for concurrent use.
type Tool interface {
	Spec() ToolSpec
	Run(ctx context.Context, call *ToolCall) ([]ToolResultContent, error)
}

// ToolCall is one run of a tool that the model asked for.
type ToolCall struct {
	// ID is the model's toolUseId.
	ID   string
	Name string
	// Input is the model's input, valid against the tool's schema.
	Input json.RawMessage
	// State is the agent's state for this turn. Tools may read and write it.
	State *State
	// turn is the turn that runs the tool, which a delegation runs in.
	turn *turn
	// progress, when set, reports the tool's progress (Progress).
	progress func(text string)
}

// Progress reports a piece of what the tool does while it runs, such as
// text as it arrives: a streamed turn emits it (Event.ToolProgress); an
// unstreamed one drops it. It may be called from any goroutine, and does
// nothing once the run has ended, its time up included.
func (c *ToolCall) Progress(text string) {
	if c != nil && c.progress != nil && text != "" {
		c.progress(text)
	}
}

// ToolNameRule is the pattern a tool's name must match, Bedrock's.
const ToolNameRule = `^[a-zA-Z0-9_-]{1,64}$`

// toolNamePattern is ToolNameRule with its length checked apart
// (ValidToolName): a counted repetition compiles to a program whose size
// costs the functions' cold start.
var toolNamePattern = regexp.MustCompile(`^[a-zA-Z0-9_-]+$`)

// ValidToolName reports whether name is one Bedrock takes for a tool.
func ValidToolName(name string) bool { return len(name) <= 64 && toolNamePattern.MatchString(name) }

// FuncTool is a Tool made from a Go function with a typed input.
type FuncTool[In, Out any] struct {
	spec ToolSpec
	fn   func(context.Context, *ToolCall, In) (Out, error)
}

// NewFuncTool returns a tool that decodes its input into In and calls fn. The
// input schema is generated from In, a struct whose json tags name the
// properties and whose jsonschema tags describe them; fields without
// omitempty are required.
//
// What fn returns goes back to the model: a string as text, anything else as
// JSON.
func NewFuncTool[In, Out any](name, description string, fn func(ctx context.Context, call *ToolCall, in In) (Out, error)) (*FuncTool[In, Out], error) {
	if !ValidToolName(name) {
		return nil, fmt.Errorf("agent: tool name %q does not match %s", name, ToolNameRule)
	}
	s, err := jsonschema.For[In](nil)
	if err != nil {
		return nil, fmt.Errorf("agent: tool %s: schema: %w", name, err)
	}
	if s.Type != "object" {
		return nil, fmt.Errorf("agent: tool %s: input must be a struct, not %s", name, s.Type)
	}
	schema, err := json.Marshal(s)
	if err != nil {
		return nil, fmt.Errorf("agent: tool %s: schema: %w", name, err)
	}
	return &FuncTool[In, Out]{
		spec: ToolSpec{Name: name, Description: description, InputSchema: schema},
		fn:   fn,
	}, nil
}

// Spec describes the tool to the model.
func (t *FuncTool[In, Out]) Spec() ToolSpec { return t.spec }

// Run decodes the input and calls the function.
func (t *FuncTool[In, Out]) Run(ctx context.Context, call *ToolCall) ([]ToolResultContent, error) {
	var in In
	if err := json.Unmarshal(call.Input, &in); err != nil {
		return nil, fmt.Errorf("decode input: %w", err)
	}
	out, err := t.fn(ctx, call, in)
	if err != nil {
		return nil, err
	}
	if s, ok := any(out).(string); ok {
		return []ToolResultContent{{Text: s}}, nil
	}
	raw, err := json.Marshal(out)
	if err != nil {
		return nil, fmt.Errorf("encode result: %w", err)
	}
	if len(raw) == 0 || raw[0] != '{' {
		// Bedrock's json tool result must be an object.
		return []ToolResultContent{{Text: string(raw)}}, nil
	}
	return []ToolResultContent{{JSON: raw}}, nil
}
