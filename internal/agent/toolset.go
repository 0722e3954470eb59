package agent

import (
	"bytes"
	"context"
)

// ToolSet is a set of tools known only at run time, such as the tools a
// remote server lists. The agent asks for them at the start of every turn,
// so a set can change between turns; Tools should answer from a cache, and
// bound any discovery by ctx. A set that cannot list its tools offers what
// it knew last, or none: it does not fail the turn.
type ToolSet interface {
	Tools(ctx context.Context) []Tool
}

// toolbox is the tools of a turn, by name, and their specs in order.
type toolbox struct {
	tools map[string]*registered
	specs []ToolSpec
}

// A CompiledTool is a Tool that brings its input schema compiled already, by
// CompileToolSchema, as the remote tools do when they are listed, so that
// the agent does not compile it again. CompiledSchema returns
// Spec().InputSchema compiled; a schema compiled from other JSON is not
// used.
type CompiledTool interface {
	Tool
	CompiledSchema() *ToolSchema
}

func (b *toolbox) add(t Tool, spec ToolSpec, schema *ToolSchema) {
	b.tools[spec.Name] = &registered{tool: t, schema: schema}
	b.specs = append(b.specs, spec)
}

// toolbox returns the tools of a turn that starts now: Config.Tools, and
// then each tool set's, but for those whose names are taken or invalid, or
// whose schemas do not compile.
func (a *Agent) toolbox(ctx context.Context) *toolbox {
	if len(a.cfg.ToolSets) == 0 {
		return &a.box
	}
	b := &toolbox{tools: make(map[string]*registered, len(a.box.tools)), specs: append([]ToolSpec(nil), a.box.specs...)}
	for name, r := range a.box.tools {
		b.tools[name] = r
	}
	for _, set := range a.cfg.ToolSets {
		for _, t := range set.Tools(ctx) {
			spec := t.Spec()
			if _, taken := b.tools[spec.Name]; taken || !ValidToolName(spec.Name) {
				continue
			}
			if schema, err := a.compiled(t, spec); err == nil {
				b.add(t, spec, schema)
			}
		}
	}
	return b
}

// compiled returns the compiled schema of a tool set's tool: the one it
// brings, or the one compiled when the same tool came before, or else a
// new one. A schema that does not compile is remembered too, so that a
// hostile one costs its compiling once.
func (a *Agent) compiled(t Tool, spec ToolSpec) (*ToolSchema, error) {
	if s := compiledOf(t, spec); s != nil {
		return s, nil
	}
	key := spec.Name + "\x00" + string(spec.InputSchema)
	if c, ok := a.schemas.Load(key); ok {
		c := c.(compiledSchema)
		return c.schema, c.err
	}
	s, err := CompileToolSchema(spec.InputSchema)
	a.schemas.Store(key, compiledSchema{s, err})
	return s, err
}

// compiledSchema is a tool's schema as CompileToolSchema compiled it, or
// why it did not.
type compiledSchema struct {
	schema *ToolSchema
	err    error
}

// compiledOf returns the schema t brings compiled (CompiledTool), looking
// through RequireApproval, or nil.
func compiledOf(t Tool, spec ToolSpec) *ToolSchema {
	for {
		switch c := t.(type) {
		case CompiledTool:
			if s := c.CompiledSchema(); s != nil && bytes.Equal(s.raw, spec.InputSchema) {
				return s
			}
			return nil
		case approvalTool:
			t = c.Tool
		default:
			return nil
		}
	}
}

// schemaOf returns the compiled schema of t, whose spec is spec: the one it
// brings, or a new one.
func schemaOf(t Tool, spec ToolSpec) (*ToolSchema, error) {
	if s := compiledOf(t, spec); s != nil {
		return s, nil
	}
	return CompileToolSchema(spec.InputSchema)
}
