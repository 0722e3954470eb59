package agent

import "context"

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

func (b *toolbox) add(t Tool, spec ToolSpec, schema *toolSchema) {
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
			if _, taken := b.tools[spec.Name]; taken || !toolNamePattern.MatchString(spec.Name) {
				continue
			}
			if schema, err := a.compiled(spec); err == nil {
				b.add(t, spec, schema)
			}
		}
	}
	return b
}

// compiled returns the compiled schema of a tool set's tool, from the cache
// when the same tool had it compiled before.
func (a *Agent) compiled(spec ToolSpec) (*toolSchema, error) {
	key := spec.Name + "\x00" + string(spec.InputSchema)
	if s, ok := a.schemas.Load(key); ok {
		return s.(*toolSchema), nil
	}
	s, err := compileToolSchema(spec.InputSchema)
	if err != nil {
		return nil, err
	}
	a.schemas.Store(key, s)
	return s, nil
}
