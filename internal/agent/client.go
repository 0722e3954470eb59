package agent

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"unicode/utf8"
)

// What a caller's application brings to one turn, beside its message: the
// tools it runs itself, and context for the model. Neither is stored; an
// application sends them with every turn (AG-UI's RunAgentInput.tools and
// .context).
//
// A client tool is offered to the model after the agent's own tools. A call
// of one pauses the turn, as an approval does, with an interrupt of kind
// KindClientTool: the application runs the tool and sends its result as a
// Response, which Answer adds with the others. The call waits as long as
// an interrupt does; a new message denies it, as it denies an interrupt.

// Bounds on what a caller's application brings to a turn.
const (
	// MaxClientTools bounds the client tools of one turn.
	MaxClientTools = 64
	// MaxClientToolDescription bounds a client tool's description, in
	// bytes.
	MaxClientToolDescription = 4 << 10
	// MaxContextBytes bounds a turn's context: descriptions and values
	// together, in bytes.
	MaxContextBytes = 32 << 10
)

// ClientTools are the tools a caller's application runs, checked and
// compiled for a turn (Conversation.ClientTools). Make them with
// NewClientTools.
type ClientTools struct {
	tools []clientTool // by name
}

// NewClientTools checks the tools a caller's application offers for a turn
// and compiles their input schemas, each under the budget of every schema
// from outside (CompileToolSchema). Each tool needs a name Bedrock takes,
// used once, and a description; at most MaxClientTools. The error is an
// *InputError of kind ErrInvalidInput that lists every problem. Whether a
// name is one of the agent's own is the agent's to check
// (Agent.CheckClientTools).
func NewClientTools(specs []ToolSpec) (*ClientTools, error) {
	if len(specs) == 0 {
		return nil, nil
	}
	var problems []string
	if len(specs) > MaxClientTools {
		return nil, invalidInput("%d client tools; at most %d", len(specs), MaxClientTools)
	}
	out := &ClientTools{tools: make([]clientTool, 0, len(specs))}
	seen := make(map[string]bool, len(specs))
	for i, spec := range specs {
		at := fmt.Sprintf("tools[%d]", i)
		switch {
		case !ValidToolName(spec.Name):
			problems = append(problems, fmt.Sprintf("%s: the name %q does not match %s", at, Clip(spec.Name, 80), ToolNameRule))
			continue
		case seen[spec.Name]:
			problems = append(problems, fmt.Sprintf("%s: a second tool named %q", at, spec.Name))
			continue
		case strings.TrimSpace(spec.Description) == "":
			problems = append(problems, fmt.Sprintf("%s (%s): the description is empty; the model chooses tools by it", at, spec.Name))
			continue
		case len(spec.Description) > MaxClientToolDescription || !utf8.ValidString(spec.Description):
			problems = append(problems, fmt.Sprintf("%s (%s): the description must be UTF-8 of at most %d bytes", at, spec.Name, MaxClientToolDescription))
			continue
		}
		seen[spec.Name] = true
		if len(spec.InputSchema) == 0 {
			spec.InputSchema = []byte(`{"type":"object"}`)
		}
		schema, err := CompileToolSchema(spec.InputSchema)
		if err != nil {
			problems = append(problems, fmt.Sprintf("%s (%s): parameters: %s", at, spec.Name, reasonOf(err)))
			continue
		}
		out.tools = append(out.tools, clientTool{spec: spec, schema: schema})
	}
	if len(problems) > 0 {
		return nil, invalidInput("%s", strings.Join(problems, "; "))
	}
	slices.SortFunc(out.tools, func(a, b clientTool) int { return cmp.Compare(a.spec.Name, b.spec.Name) })
	return out, nil
}

// Names returns the tools' names, sorted.
func (c *ClientTools) Names() []string {
	if c == nil {
		return nil
	}
	names := make([]string, len(c.tools))
	for i, t := range c.tools {
		names[i] = t.spec.Name
	}
	return names
}

// CheckClientTools refuses client tools named like one of the agent's own
// tools, as the turn would find them now: the model could not tell the
// two apart. The error is an *InputError of kind ErrInvalidInput.
func (a *Agent) CheckClientTools(ctx context.Context, c *ClientTools) error {
	_, err := a.turnBox(ctx, c)
	return err
}

// turnBox returns the tools of a turn that starts now: the agent's own
// (toolbox), then the client's, sorted by name, so that a client that
// sends the same tools keeps the prompt cache serving.
func (a *Agent) turnBox(ctx context.Context, c *ClientTools) (*toolbox, error) {
	own := a.toolbox(ctx)
	if c == nil || len(c.tools) == 0 {
		return own, nil
	}
	var clash []string
	for _, t := range c.tools {
		if _, taken := own.tools[t.spec.Name]; taken {
			clash = append(clash, t.spec.Name)
		}
	}
	if len(clash) > 0 {
		return nil, invalidInput("the client tools %s are named like tools of the agent; rename them", strings.Join(clash, ", "))
	}
	b := &toolbox{tools: make(map[string]*registered, len(own.tools)+len(c.tools)), specs: slices.Clip(own.specs)}
	for name, r := range own.tools {
		b.tools[name] = r
	}
	for _, t := range c.tools {
		b.add(t, t.spec, t.schema)
	}
	return b, nil
}

// clientTool is a tool the caller's application runs: a call of it waits
// for the application's result.
type clientTool struct {
	spec   ToolSpec
	schema *ToolSchema
}

func (t clientTool) Spec() ToolSpec { return t.spec }

// Run is never called for a use that waits (interruptFor); a use whose
// input the schema refuses is answered with the problems before Run.
func (t clientTool) Run(context.Context, *ToolCall) ([]ToolResultContent, error) {
	return nil, errClientTool
}

var errClientTool = errors.New("this tool runs in the client application, not here")

func (t clientTool) CompiledSchema() *ToolSchema { return t.schema }

func (t clientTool) interrupt(u *ToolUseBlock) Interrupt {
	return Interrupt{Kind: KindClientTool, Name: KindClientTool, Reason: fmt.Sprintf("%s runs in the client application, which sends its result.", u.Name)}
}

// ContextEntry is one piece of context a caller's application gives the
// model for a turn, such as what the person has open.
type ContextEntry struct {
	Description string
	Value       string
}

// CheckContext refuses context past MaxContextBytes, or not UTF-8. The
// error is an *InputError of kind ErrInvalidInput.
func CheckContext(entries []ContextEntry) error {
	n := 0
	for i, e := range entries {
		if !utf8.ValidString(e.Description) || !utf8.ValidString(e.Value) {
			return invalidInput("context[%d] is not UTF-8", i)
		}
		n += len(e.Description) + len(e.Value)
	}
	if n > MaxContextBytes {
		return invalidInput("the context is %d bytes; at most %d (MaxContextBytes), descriptions and values together", n, MaxContextBytes)
	}
	return nil
}

// ContextHeader begins the text block that gives a turn its context: data
// beside the person's words, not their words.
const ContextHeader = "Context from the application this conversation runs in (not written by the person):"

// withContext returns view with the context in the last turn start, as
// its first block: after the cache point at the end of the turns before
// (previousTurnEnd), so that context that changes from turn to turn
// leaves the cached prefix alone. The view's messages are copies; the
// stored ones are unchanged.
func withContext(view []Message, entries []ContextEntry) []Message {
	if len(entries) == 0 {
		return view
	}
	for i := len(view) - 1; i >= 0; i-- {
		if !IsTurnStart(view[i]) {
			continue
		}
		var b strings.Builder
		b.WriteString(ContextHeader)
		for _, e := range entries {
			b.WriteString("\n- ")
			if e.Description != "" {
				b.WriteString(e.Description)
				b.WriteString(": ")
			}
			b.WriteString(e.Value)
		}
		out := slices.Clone(view)
		m := out[i]
		m.Content = append([]ContentBlock{{Text: b.String()}}, m.Content...)
		out[i] = m
		return out
	}
	return view
}
