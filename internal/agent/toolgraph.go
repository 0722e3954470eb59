package agent

import (
	"fmt"
	"maps"
	"net/url"
	"slices"
	"strconv"
	"strings"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/lambda-agent/lambda-agent/internal/schema/limits"
)

// toolNode is a subschema of a tool's schema, as google/jsonschema-go's
// validator applies it: the subschemas it applies in turn, by their index
// in the schema's nodes, -1 for none, and what applying it costs.
type toolNode struct {
	s *jsonschema.Schema
	// ptr is its JSON pointer in the document; name what the validator
	// calls it in its messages.
	ptr, name string

	// Applied to the same value: $ref, anyOf, then allOf, oneOf, not, if,
	// then and else; dependent when the object has the property.
	ref       int
	anyOf     []int
	same      []int
	dependent []keyed
	// Applied to the properties of an object.
	props                               map[string]int
	propOrder                           []keyed // props, by name
	patterns                            []pattern
	additional, propertyNames, unevProp int
	// Applied to the items of an array: prefixItems, and items as an
	// array (draft-07), by position; the others to every item.
	prefix, itemsArray                   []int
	items, additionalItems, contains, ue int
	// perKey and perItem say that any of these is there.
	perKey, perItem bool

	cost nodeCost
}

// keyed is a subschema under a key: a property's, or the one that
// dependentSchemas applies when the object has the property.
type keyed struct {
	key  string
	node int
}

// pattern is a subschema of patternProperties, with the size of its
// regular expression.
type pattern struct {
	size int64
	node int
}

// eachChild calls f for each subschema that the validator may apply when
// it applies n, with same true when it applies it to the same value.
func (n *toolNode) eachChild(f func(j int, same bool)) {
	one := func(j int, same bool) {
		if j >= 0 {
			f(j, same)
		}
	}
	one(n.ref, true)
	for _, j := range slices.Concat(n.anyOf, n.same) {
		f(j, true)
	}
	for _, d := range n.dependent {
		f(d.node, true)
	}
	for _, p := range n.propOrder {
		f(p.node, false)
	}
	for _, p := range n.patterns {
		f(p.node, false)
	}
	for _, j := range []int{n.additional, n.propertyNames, n.unevProp} {
		one(j, false)
	}
	for _, j := range n.prefix {
		f(j, false)
	}
	for _, j := range n.itemsArray {
		f(j, false)
	}
	for _, j := range []int{n.items, n.additionalItems, n.contains, n.ue} {
		one(j, false)
	}
}

// supportedDrafts are the values of $schema that the validator knows:
// another makes it refuse every value.
var supportedDrafts = map[string]bool{
	"": true,
	"http://json-schema.org/draft-07/schema#":      true,
	"https://json-schema.org/draft-07/schema#":     true,
	"https://json-schema.org/draft/2020-12/schema": true,
}

// analyse finds the subschemas of a decoded tool schema, root first, as the
// validator will apply them once the schema is resolved, and refuses what
// cannot be analysed soundly or is past a limit: a reference that is not a
// JSON pointer into the schema itself, a resource ($id below the root), an
// anchor, a dynamic or recursive reference, more than MaxSubschemas
// subschemas or MaxPatternSize in regular expressions, a cycle of
// subschemas applied to the same value, and a tree that unfolds past
// MaxExpanded or MaxDepth. The error is a *limits.Error.
func analyse(root *jsonschema.Schema) ([]*toolNode, error) {
	if !supportedDrafts[root.Schema] {
		return nil, refuse(`"$schema": %q is not a draft the validator knows; use draft 2020-12 or draft-07`, limits.Shorten(root.Schema))
	}
	a := &analysis{index: map[*jsonschema.Schema]int{}, byPtr: map[string]int{}}
	if err := a.walk(root, ""); err != nil {
		return nil, err
	}
	for i, n := range a.nodes {
		if err := a.link(i, n); err != nil {
			return nil, err
		}
	}
	if a.patterns > limits.MaxPatternSize {
		return nil, &limits.Error{Limit: "MaxPatternSize", Reason: fmt.Sprintf("the schema's regular expressions compile to more than %d instructions", limits.MaxPatternSize)}
	}
	// The graph check sees only what the root reaches, as the strict
	// compiler's does: a definition that nothing uses is never applied.
	reach := map[int]int{} // node → its index in the graph
	var order []int
	var walk func(i int)
	walk = func(i int) {
		if _, ok := reach[i]; ok {
			return
		}
		reach[i] = len(order)
		order = append(order, i)
		a.nodes[i].eachChild(func(j int, _ bool) { walk(j) })
	}
	walk(0)
	g := limits.Graph{
		N: len(order),
		Children: func(i int, f func(j int, same bool)) {
			a.nodes[order[i]].eachChild(func(j int, same bool) { f(reach[j], same) })
		},
		Where: func(i int) string { return limits.Pointer(a.nodes[order[i]].ptr) },
	}
	if err := g.Check(0); err != nil {
		return nil, err
	}
	return a.nodes, nil
}

// analysis is the state of analyse.
type analysis struct {
	nodes    []*toolNode
	index    map[*jsonschema.Schema]int
	byPtr    map[string]int // nodes by their JSON pointers, escaped
	patterns int64
}

func refuse(format string, args ...any) *limits.Error {
	return &limits.Error{Reason: fmt.Sprintf(format, args...)}
}

// walk numbers s and the subschemas in it, each with its JSON pointer: the
// path by which the validator's JSON pointers reach it.
func (a *analysis) walk(s *jsonschema.Schema, ptr string) error {
	if len(a.nodes) == limits.MaxSubschemas {
		return &limits.Error{Limit: "MaxSubschemas", Reason: fmt.Sprintf("the schema has more than %d subschemas", limits.MaxSubschemas)}
	}
	name := ptr
	switch {
	case s.ID != "" && ptr != "":
		return refuse("the subschema at %s has an $id, a resource of its own, which a tool's schema may not have", limits.Pointer(ptr))
	case s.ID != "":
		if strings.Contains(s.ID, "#") {
			return refuse(`the root's $id %q has a fragment, an anchor, which a tool's schema may not have`, limits.Shorten(s.ID))
		}
		name = s.ID
	case ptr == "":
		name = "root"
	}
	for _, k := range []struct{ keyword, value string }{{"$anchor", s.Anchor}, {"$dynamicAnchor", s.DynamicAnchor}, {"$dynamicRef", s.DynamicRef}} {
		if k.value != "" {
			return refuse("the subschema at %s has %s, which a tool's schema may not have: refer to a part of the schema by its JSON pointer, as \"#/$defs/name\"", limits.Pointer(ptr), k.keyword)
		}
	}
	for _, k := range []string{"$recursiveRef", "$recursiveAnchor"} {
		if _, ok := s.Extra[k]; ok {
			return refuse("the subschema at %s has %s, which a tool's schema may not have: refer to a part of the schema by its JSON pointer, as \"#/$defs/name\"", limits.Pointer(ptr), k)
		}
	}
	i := len(a.nodes)
	a.index[s] = i
	a.byPtr[ptr] = i
	a.nodes = append(a.nodes, &toolNode{s: s, ptr: ptr, name: name})
	if s.Pattern != "" {
		a.patterns += int64(limits.PatternSize(s.Pattern))
	}
	for re := range s.PatternProperties {
		a.patterns += int64(limits.PatternSize(re))
	}
	return eachSubschema(s, func(c *jsonschema.Schema, path string) error {
		return a.walk(c, ptr+path)
	})
}

// eachSubschema calls f for each subschema directly in s, with the path
// from s to it, in the order of the validator's JSON pointers. The
// subschemas are those of every field of Schema whose type holds schemas,
// which TestToolSchemaFieldsAreKnown keeps in step with the validator.
func eachSubschema(s *jsonschema.Schema, f func(c *jsonschema.Schema, path string) error) error {
	for _, one := range []struct {
		keyword string
		s       *jsonschema.Schema
	}{
		{"additionalItems", s.AdditionalItems}, {"additionalProperties", s.AdditionalProperties},
		{"contains", s.Contains}, {"contentSchema", s.ContentSchema}, {"else", s.Else}, {"if", s.If},
		{"items", s.Items}, {"not", s.Not}, {"propertyNames", s.PropertyNames}, {"then", s.Then},
		{"unevaluatedItems", s.UnevaluatedItems}, {"unevaluatedProperties", s.UnevaluatedProperties},
	} {
		if one.s != nil {
			if err := f(one.s, "/"+one.keyword); err != nil {
				return err
			}
		}
	}
	for _, list := range []struct {
		keyword string
		ss      []*jsonschema.Schema
	}{{"allOf", s.AllOf}, {"anyOf", s.AnyOf}, {"oneOf", s.OneOf}, {"prefixItems", s.PrefixItems}, {"items", s.ItemsArray}} {
		for i, c := range list.ss {
			if c == nil {
				return refuse("%s/%d is null", list.keyword, i)
			}
			if err := f(c, "/"+list.keyword+"/"+strconv.Itoa(i)); err != nil {
				return err
			}
		}
	}
	for _, m := range []struct {
		keyword string
		ss      map[string]*jsonschema.Schema
	}{
		{"$defs", s.Defs}, {"definitions", s.Definitions}, {"dependencies", s.DependencySchemas},
		{"dependentSchemas", s.DependentSchemas}, {"patternProperties", s.PatternProperties}, {"properties", s.Properties},
	} {
		for _, k := range slices.Sorted(maps.Keys(m.ss)) {
			if m.ss[k] == nil {
				return refuse("%s/%s is null", m.keyword, limits.Shorten(k))
			}
			if err := f(m.ss[k], "/"+m.keyword+"/"+limits.Escape(k)); err != nil {
				return err
			}
		}
	}
	return nil
}

// link fills in the subschemas that n applies, resolving its $ref, and its
// cost.
func (a *analysis) link(i int, n *toolNode) error {
	s := n.s
	of := func(c *jsonschema.Schema) int {
		if c == nil {
			return -1
		}
		return a.index[c]
	}
	n.ref = -1
	if s.Ref != "" {
		j, err := a.target(s.Ref, n.ptr)
		if err != nil {
			return err
		}
		n.ref = j
	}
	for _, c := range s.AnyOf {
		n.anyOf = append(n.anyOf, a.index[c])
	}
	for _, c := range slices.Concat(s.AllOf, s.OneOf, []*jsonschema.Schema{s.Not, s.If, s.Then, s.Else}) {
		if c != nil {
			n.same = append(n.same, a.index[c])
		}
	}
	for _, m := range []map[string]*jsonschema.Schema{s.DependentSchemas, s.DependencySchemas} {
		for _, k := range slices.Sorted(maps.Keys(m)) {
			n.dependent = append(n.dependent, keyed{k, a.index[m[k]]})
		}
	}
	if len(s.Properties) > 0 {
		n.props = make(map[string]int, len(s.Properties))
		for _, k := range slices.Sorted(maps.Keys(s.Properties)) {
			n.props[k] = a.index[s.Properties[k]]
			n.propOrder = append(n.propOrder, keyed{k, a.index[s.Properties[k]]})
		}
	}
	for _, re := range slices.Sorted(maps.Keys(s.PatternProperties)) {
		n.patterns = append(n.patterns, pattern{size: int64(limits.PatternSize(re)), node: a.index[s.PatternProperties[re]]})
	}
	n.additional, n.propertyNames, n.unevProp = of(s.AdditionalProperties), of(s.PropertyNames), of(s.UnevaluatedProperties)
	for _, c := range s.PrefixItems {
		n.prefix = append(n.prefix, a.index[c])
	}
	for _, c := range s.ItemsArray {
		n.itemsArray = append(n.itemsArray, a.index[c])
	}
	n.items, n.additionalItems, n.contains, n.ue = of(s.Items), of(s.AdditionalItems), of(s.Contains), of(s.UnevaluatedItems)
	n.perKey = len(n.props) > 0 || len(n.patterns) > 0 || max(n.additional, n.propertyNames, n.unevProp) >= 0
	n.perItem = len(n.prefix) > 0 || len(n.itemsArray) > 0 || max(n.items, n.additionalItems, n.contains, n.ue) >= 0
	n.cost = costOf(s, n.name)
	return nil
}

// target resolves a $ref at ptr as the validator does, when it is a JSON
// pointer into the schema itself: "#" or "#/…", escaped as a URL's
// fragment and as a JSON pointer. Anything else is refused.
func (a *analysis) target(ref, ptr string) (int, error) {
	if !strings.HasPrefix(ref, "#") {
		return 0, refuse("the $ref %q at %s is a remote reference, outside the schema; a tool's schema may refer only to its own parts, as \"#/$defs/name\"", limits.Shorten(ref), limits.Pointer(ptr))
	}
	u, err := url.Parse(ref)
	if err != nil {
		return 0, &limits.Error{Reason: fmt.Sprintf("the $ref %q at %s is not a URL", limits.Shorten(ref), limits.Pointer(ptr)), Err: err}
	}
	frag := u.Fragment
	if frag != "" && !strings.HasPrefix(frag, "/") {
		return 0, refuse("the $ref %q at %s names an anchor, which a tool's schema may not have: refer to a part of the schema by its JSON pointer, as \"#/$defs/name\"", limits.Shorten(ref), limits.Pointer(ptr))
	}
	// The validator splits the pointer at each "/" and unescapes each
	// token; escaped again, the tokens make the pointer of a subschema as
	// walk recorded it.
	var canonical strings.Builder
	if frag != "" {
		for _, tok := range strings.Split(frag[1:], "/") {
			canonical.WriteString("/" + limits.Escape(strings.NewReplacer("~0", "~", "~1", "/").Replace(tok)))
		}
	}
	j, ok := a.byPtr[canonical.String()]
	if !ok {
		return 0, refuse("the $ref %q at %s does not point to a subschema", limits.Shorten(ref), limits.Pointer(ptr))
	}
	return j, nil
}
