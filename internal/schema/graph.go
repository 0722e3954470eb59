package schema

import (
	"maps"
	"net/url"
	"slices"
	"strings"

	"github.com/lambda-agent/lambda-agent/internal/schema/limits"
	"github.com/santhosh-tekuri/jsonschema/v6"
)

// graph is the subschemas of a compiled schema, with its references
// resolved: the compiler has resolved them, every one, exactly.
type graph struct {
	nodes []*jsonschema.Schema
	index map[*jsonschema.Schema]int
	// dynamic are the subschemas with each $dynamicAnchor; recursive those
	// with "$recursiveAnchor": true. A dynamic reference may lead to any
	// of them.
	dynamic   map[string][]*jsonschema.Schema
	recursive []*jsonschema.Schema
	// uneval is whether any subschema has unevaluatedProperties or
	// unevaluatedItems, which make the validator copy sets of properties and
	// items as it goes.
	uneval bool
}

// newGraph finds the subschemas reachable from roots. A subschema outside
// the document, which can only be a meta-schema, is refused: it is shared
// by every compiled schema, so it cannot carry one's hooks.
func newGraph(roots []*jsonschema.Schema) (*graph, error) {
	g := &graph{index: map[*jsonschema.Schema]int{}, dynamic: map[string][]*jsonschema.Schema{}}
	stack := append([]*jsonschema.Schema(nil), roots...)
	for len(stack) > 0 {
		s := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		if _, ok := g.index[s]; ok {
			continue
		}
		if !strings.HasPrefix(s.Location, docURL+"#") {
			return nil, invalid("a reference leads outside the schema, to %s", shorten(s.Location))
		}
		g.index[s] = len(g.nodes)
		g.nodes = append(g.nodes, s)
		if s.DynamicAnchor != "" {
			g.dynamic[s.DynamicAnchor] = append(g.dynamic[s.DynamicAnchor], s)
		}
		if s.RecursiveAnchor {
			g.recursive = append(g.recursive, s)
		}
		if s.UnevaluatedProperties != nil || s.UnevaluatedItems != nil {
			g.uneval = true
		}
		g.children(s, false, func(c *jsonschema.Schema, _ bool) { stack = append(stack, c) })
	}
	return g, nil
}

// children calls f for each subschema that the validator may apply when it
// applies s: same says whether to the same value (references, allOf, ...)
// or to a part of it (properties, items, ...). With dynamic, the targets of
// dynamic references are included.
func (g *graph) children(s *jsonschema.Schema, dynamic bool, f func(c *jsonschema.Schema, same bool)) {
	one := func(c *jsonschema.Schema, same bool) {
		if c != nil {
			f(c, same)
		}
	}
	all := func(cs []*jsonschema.Schema, same bool) {
		for _, c := range cs {
			one(c, same)
		}
	}
	anyOne := func(c any, same bool) {
		if c, ok := c.(*jsonschema.Schema); ok {
			one(c, same)
		}
	}
	one(s.Ref, true)
	one(s.RecursiveRef, true)
	if dynamic && s.RecursiveRef != nil && s.RecursiveRef.RecursiveAnchor {
		all(g.recursive, true)
	}
	if s.DynamicRef != nil {
		one(s.DynamicRef.Ref, true)
		if dynamic && s.DynamicRef.Anchor != "" && s.DynamicRef.Ref != nil && s.DynamicRef.Ref.DynamicAnchor == s.DynamicRef.Anchor {
			all(g.dynamic[s.DynamicRef.Anchor], true)
		}
	}
	one(s.Not, true)
	all(s.AllOf, true)
	all(s.AnyOf, true)
	all(s.OneOf, true)
	one(s.If, true)
	one(s.Then, true)
	one(s.Else, true)
	// Maps are walked in order, so that a schema near a limit is always
	// on the same side of it.
	for _, k := range slices.Sorted(maps.Keys(s.DependentSchemas)) {
		one(s.DependentSchemas[k], true)
	}
	for _, k := range slices.Sorted(maps.Keys(s.Dependencies)) {
		anyOne(s.Dependencies[k], true)
	}

	one(s.PropertyNames, false)
	for _, k := range slices.Sorted(maps.Keys(s.Properties)) {
		one(s.Properties[k], false)
	}
	patterns := slices.SortedFunc(maps.Keys(s.PatternProperties), func(a, b jsonschema.Regexp) int {
		return strings.Compare(a.String(), b.String())
	})
	for _, k := range patterns {
		one(s.PatternProperties[k], false)
	}
	anyOne(s.AdditionalProperties, false)
	one(s.UnevaluatedProperties, false)
	switch items := s.Items.(type) {
	case *jsonschema.Schema:
		one(items, false)
	case []*jsonschema.Schema:
		all(items, false)
	}
	anyOne(s.AdditionalItems, false)
	all(s.PrefixItems, false)
	one(s.Items2020, false)
	one(s.Contains, false)
	one(s.UnevaluatedItems, false)
	one(s.ContentSchema, false)
}

// check refuses a schema that applies a subschema to a value through itself
// (no value passes it: the validator reports a cycle), one that nests deeper
// than MaxDepth when references are followed, and one whose tree, unfolded,
// has more than MaxExpanded subschemas: limits.Graph's check, on the
// references as the compiler resolved them.
func (g *graph) check(root *jsonschema.Schema) error {
	lg := limits.Graph{
		N: len(g.nodes),
		Children: func(i int, f func(j int, same bool)) {
			g.children(g.nodes[i], true, func(c *jsonschema.Schema, same bool) { f(g.index[c], same) })
		},
		Where: func(i int) string { return where(g.nodes[i]) },
	}
	if err := lg.Check(g.index[root]); err != nil {
		return invalid("%w", err)
	}
	return nil
}

// costs computes what applying each subschema costs: its early cost, which
// whoever applies it pays, and the rest, which its hook charges.
func (g *graph) costs() ([]int64, []*cost) {
	earlies := make([]int64, len(g.nodes))
	for i, s := range g.nodes {
		earlies[i] = early(s)
	}
	early := func(s *jsonschema.Schema) int64 {
		if s == nil {
			return 0
		}
		return earlies[g.index[s]]
	}
	out := make([]*cost, len(g.nodes))
	for i, s := range g.nodes {
		c := &cost{own: 1 + int64(len(s.Required))}
		for _, r := range s.DependentRequired {
			c.own += int64(len(r))
		}
		for _, d := range s.Dependencies {
			if r, ok := d.([]string); ok {
				c.own += int64(len(r))
			}
		}
		if s.DynamicRef != nil || s.RecursiveRef != nil {
			// Resolving one walks the validator's stack of subschemas.
			c.own += int64((MaxInstanceDepth + 1) * MaxDepth / 16)
		}
		var same int64
		g.children(s, true, func(ch *jsonschema.Schema, isSame bool) {
			if isSame {
				c.own += early(ch)
				same++
			}
		})
		if g.uneval {
			c.fanout = same + 1
		}
		if len(s.Properties) > 0 {
			c.props = make(map[string]int64, len(s.Properties))
			for k, p := range s.Properties {
				c.props[k] = early(p)
			}
		}
		for _, p := range s.PatternProperties {
			c.perKey += early(p)
		}
		if a, ok := s.AdditionalProperties.(*jsonschema.Schema); ok {
			c.perKey += early(a)
		}
		c.perKey += early(s.PropertyNames) + early(s.UnevaluatedProperties)
		switch items := s.Items.(type) {
		case *jsonschema.Schema:
			c.perItem += early(items)
		case []*jsonschema.Schema:
			for _, p := range items {
				c.prefix = append(c.prefix, early(p))
			}
		}
		if a, ok := s.AdditionalItems.(*jsonschema.Schema); ok {
			c.perItem += early(a)
		}
		for _, p := range s.PrefixItems {
			c.prefix = append(c.prefix, early(p))
		}
		c.perItem += early(s.Items2020)
		c.perElem = early(s.Contains) + early(s.UnevaluatedItems)
		c.unique = s.UniqueItems
		c.text = s.MinLength != nil || s.MaxLength != nil || s.Format != nil || s.ContentEncoding != nil || s.ContentMediaType != nil
		c.number = s.Minimum != nil || s.Maximum != nil || s.ExclusiveMinimum != nil || s.ExclusiveMaximum != nil || s.MultipleOf != nil
		out[i] = c
	}
	return earlies, out
}

// where shows a subschema's location in a reason: its JSON pointer in the
// document.
func where(s *jsonschema.Schema) string {
	ptr := strings.TrimPrefix(s.Location, docURL+"#")
	if p, err := url.PathUnescape(ptr); err == nil {
		ptr = p
	}
	return pointer(ptr)
}
