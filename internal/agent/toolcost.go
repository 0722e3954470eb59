package agent

import (
	"math"
	"slices"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/lambda-agent/lambda-agent/internal/schema/limits"
)

// What the validator's work costs, in steps of at most 100 ns, so that
// MaxSteps take at most 100 ms: BenchmarkHostileToolSchemas measures 20 to
// 50 ns a step on the costliest shapes, and up to about 100 bytes
// allocated, most of them messages dropped at once. google/jsonschema-go
// has no hooks to count its work as it goes, so a validation's cost is
// estimated before it runs, from the schema and the value: every subschema
// it may apply to every part of the value, with every branch taken, and
// what each application may cost, its message included, since the
// validator formats a message for each failure, of a branch too, quoting
// the value, and wraps it again in each subschema around it.
const (
	// applySteps is applying a subschema to a value: the call, its
	// deferred wrapping of errors and its annotations.
	applySteps = 6
	// numBits are the bits of a number's exponent that cost a step when the
	// validator converts it to exact arithmetic (big.Rat), as it does for
	// each comparison and hash: 1e-300 has a denominator of 997 bits, and
	// takes some 2.5 µs.
	numBits = 40
	// printSteps is printing a part of a value in a message, by
	// reflection, a map's keys sorted.
	printSteps = 24
	// textBytes are the bytes of a string scanned in a step;
	// compareBytes are those compared.
	textBytes    = 64
	compareBytes = 512
	// regexpWork is a regular expression's instructions times the bytes it
	// is matched against, in a step: the worst case of Go's matcher.
	regexpWork = 24
	// msgBytes are the bytes of a message formatted in a step, from
	// values by reflection; copyBytes are those copied in a step as each
	// application wraps the message of the one within that failed.
	msgBytes  = 16
	copyBytes = 64
	// maxNesting bounds how deeply the validator's applications of
	// subschemas may nest, each within the one that applies it: each is a
	// frame of its stack, of about 4 KB.
	maxNesting = 16 * limits.MaxDepth
)

// nodeCost is what applying a subschema costs, but for its subschemas.
type nodeCost struct {
	// own is what any application costs: the call, and the keywords whose
	// cost is the schema's (enum, const).
	own int64
	// object is what more an application to an object costs: the
	// properties, required and dependentRequired it looks up.
	object int64
	// enum is the number of values of enum and const; enumNums what
	// converting their numbers costs, and enumDeep what comparing an
	// object or an array to them costs.
	enum, enumNums, enumDeep int64
	// msg is the size of the message of a failure here, but for the parts
	// of the value it quotes: enum, const, required, pattern, bounds.
	msg int64
	// prefix is what wrapping a message here adds to it: the schema's
	// name.
	prefix int64
	// quotes says that the message quotes the whole value: enum, const,
	// contains. (A type that the value does not have quotes it too, and
	// ends the application: apply knows which.)
	quotes bool
	// text: a string is measured (minLength, maxLength) and quoted.
	text bool
	// pattern is the size of the subschema's regular expression.
	pattern int64
	// number: a number is compared (minimum, maximum, multipleOf...).
	number bool
	// unique: an array's items are hashed and compared (uniqueItems).
	unique bool
	// lists: the message lists an object's properties (the falsy
	// additionalProperties).
	lists bool
}

// costOf computes what applying s costs. name is what the validator calls
// it in its messages.
func costOf(s *jsonschema.Schema, name string) nodeCost {
	c := nodeCost{own: applySteps, msg: 64, prefix: 16 + int64(len(name))}
	enum := s.Enum
	if s.Const != nil {
		enum = append(enum[:len(enum):len(enum)], *s.Const)
	}
	c.enum = int64(len(enum))
	for _, e := range enum {
		m := measure(e)
		c.own += m.bytes / compareBytes
		c.msg += m.printed
		if m.elems > 1 {
			c.enumDeep += 2 * (m.elems + m.nums)
		} else {
			c.enumNums += m.nums
		}
	}
	c.object = 1 + int64(len(s.Properties)) + int64(len(s.Required))
	for _, r := range s.Required {
		c.msg += 4*int64(len(r)) + 4
	}
	for _, m := range []map[string][]string{s.DependentRequired, s.DependencyStrings} {
		for k, r := range m {
			c.object += 1 + int64(len(r))
			c.msg += 4*int64(len(k)) + 4
			for _, p := range r {
				c.msg += 4*int64(len(p)) + 4
			}
		}
	}
	// oneOf names its branches, not quotes them; anyOf's are counted with
	// the messages of its branches, which it joins.
	c.msg += 24 * int64(len(s.OneOf)+2)
	c.quotes = s.Enum != nil || s.Const != nil || s.Contains != nil
	c.text = s.MinLength != nil || s.MaxLength != nil || s.Pattern != ""
	if s.Pattern != "" {
		c.pattern = int64(limits.PatternSize(s.Pattern))
		c.msg += 4*int64(len(s.Pattern)) + 4
	}
	if s.MultipleOf != nil || s.Minimum != nil || s.Maximum != nil || s.ExclusiveMinimum != nil || s.ExclusiveMaximum != nil {
		// The message prints the value and the bound in full: a float64
		// has up to 1,100 digits.
		c.number, c.msg = true, c.msg+2500
	}
	c.unique = s.UniqueItems
	c.lists = s.AdditionalProperties != nil
	return c
}

// size is what measure finds of a JSON value, decoded as encoding/json
// decodes into any.
type size struct {
	// elems counts the value and everything in it; nums is what converting
	// its numbers costs, by numCost.
	elems, nums int64
	// bytes are its strings' and keys' bytes; printed bounds the size of
	// its text as fmt prints it, with %v or %s.
	bytes, printed int64
}

func measure(v any) size {
	switch v := v.(type) {
	case map[string]any:
		z := size{elems: 1, printed: 8}
		for k, e := range v {
			m := measure(e)
			z.elems += m.elems
			z.nums += m.nums
			z.bytes += m.bytes + int64(len(k))
			z.printed += m.printed + int64(len(k)) + 4
		}
		return z
	case []any:
		z := size{elems: 1, printed: 8}
		for _, e := range v {
			m := measure(e)
			z.elems += m.elems
			z.nums += m.nums
			z.bytes += m.bytes
			z.printed += m.printed + 2
		}
		return z
	case string:
		return size{elems: 1, bytes: int64(len(v)), printed: 24 + int64(len(v))}
	case float64:
		return size{elems: 1, nums: numCost(v), printed: 48}
	}
	return size{elems: 1, printed: 24}
}

// numCost is what converting f to exact arithmetic costs, in steps.
func numCost(f float64) int64 {
	_, exp := math.Frexp(f)
	return 2 + int64(max(exp, -exp))/numBits
}

// typeMatches reports whether v, decoded as encoding/json decodes into
// any, has a type that s allows, as the validator decides it.
func typeMatches(s *jsonschema.Schema, v any) bool {
	if s.Type == "" && s.Types == nil {
		return true
	}
	var got string
	switch v := v.(type) {
	case nil:
		got = "null"
	case bool:
		got = "boolean"
	case string:
		got = "string"
	case []any:
		got = "array"
	case map[string]any:
		got = "object"
	case float64:
		got = "number"
		if _, frac := math.Modf(v); frac == 0 {
			got = "integer"
		}
	}
	if s.Type != "" {
		return got == s.Type || got == "integer" && s.Type == "number"
	}
	return slices.Contains(s.Types, got) || got == "integer" && slices.Contains(s.Types, "number")
}

// estimate is the state of one estimate of a validation's cost: a
// ToolSchema serves concurrent turns, so each validation has its own.
type estimate struct {
	nodes []*toolNode
	left  int64 // steps left of the budget; negative once past
}

// cost estimates the steps of validating v, a value that CheckJSON passed,
// against the schema: more than the validator takes. It returns the steps
// counted, and false when they are past budget or the applications nest
// past maxNesting, when it stops counting.
func (s *ToolSchema) cost(v any, budget int64) (int64, bool) {
	e := &estimate{nodes: s.nodes, left: budget}
	e.apply(0, v, 1)
	return budget - e.left, e.left >= 0
}

// apply counts applying node i to v, depth applications deep, and what it
// applies in turn. It returns the size of the message it fails with, at
// most, which the application that applied it copies.
func (e *estimate) apply(i int, v any, depth int64) int64 {
	if e.left < 0 {
		return 0
	}
	if depth > maxNesting {
		e.left = -1
		return 0
	}
	n := e.nodes[i]
	c := &n.cost
	// The largest message a subschema applied here fails with: only one
	// is returned, wrapped, but for anyOf's, which are all joined.
	var inner int64
	// The validator applies $ref first, and then checks the type: a value
	// of another type ends the application there, with a message that
	// quotes it.
	if e.left -= c.own; e.left < 0 {
		return 0
	}
	if n.ref >= 0 {
		inner = e.apply(n.ref, v, depth+1)
	}
	if !typeMatches(n.s, v) {
		m := measure(v)
		msg := c.msg + m.printed
		e.left -= m.elems*printSteps + msg/msgBytes
		return e.wrap(c, max(msg, inner))
	}
	steps, msg := c.enum, c.msg
	switch v := v.(type) {
	case map[string]any:
		steps += c.object + int64(len(v)) + c.enumDeep
		if len(n.patterns) > 0 || c.lists {
			for k := range v {
				for _, p := range n.patterns {
					steps += 1 + p.size*int64(len(k))/regexpWork
				}
				if c.lists {
					msg += 4*int64(len(k)) + 4
				}
			}
		}
	case []any:
		steps += int64(len(v)) + c.enumDeep
		if c.unique {
			m := measure(v)
			// Each item is hashed, and compared to those of its hash.
			steps += 3 * (m.elems + m.nums + m.bytes/compareBytes)
		}
	case string:
		if c.text {
			steps += 1 + int64(len(v))/textBytes
			msg += 4*int64(len(v)) + 4
		}
		if c.pattern > 0 {
			steps += 1 + c.pattern*int64(len(v))/regexpWork
		}
	case float64:
		n := numCost(v)
		steps += c.enum*n + c.enumNums
		if c.number {
			// The value is converted once; each bound, and the message.
			steps += 6 * n
		}
	}
	if c.quotes {
		m := measure(v)
		steps += m.elems * printSteps
		msg += m.printed
	}
	if e.left -= steps + msg/msgBytes; e.left < 0 {
		return 0
	}

	if len(n.anyOf) > 0 {
		// anyOf joins its branches' messages, and copies them again into
		// its own.
		joined := int64(len(n.anyOf)) * 24
		for _, j := range n.anyOf {
			joined += e.apply(j, v, depth+1)
		}
		e.left -= 2 * joined / copyBytes
		inner = max(inner, joined)
	}
	for _, j := range n.same {
		inner = max(inner, e.apply(j, v, depth+1))
	}
	switch v := v.(type) {
	case map[string]any:
		for _, d := range n.dependent {
			if _, ok := v[d.key]; ok {
				inner = max(inner, e.apply(d.node, v, depth+1))
			}
		}
		if !n.perKey {
			break
		}
		for k, x := range v {
			if e.left < 0 {
				return 0
			}
			// Every subschema that may apply to the property does: a
			// pattern may match, and additionalProperties and
			// unevaluatedProperties are counted whether or not another
			// evaluated it.
			if j, ok := n.props[k]; ok {
				inner = max(inner, e.apply(j, x, depth+1))
			}
			for _, p := range n.patterns {
				inner = max(inner, e.apply(p.node, x, depth+1))
			}
			for _, j := range []int{n.additional, n.unevProp} {
				if j >= 0 {
					inner = max(inner, e.apply(j, x, depth+1))
				}
			}
			if n.propertyNames >= 0 {
				inner = max(inner, e.apply(n.propertyNames, k, depth+1))
			}
		}
	case []any:
		if !n.perItem {
			break
		}
		for at, x := range v {
			if e.left < 0 {
				return 0
			}
			if at < len(n.prefix) {
				inner = max(inner, e.apply(n.prefix[at], x, depth+1))
			}
			if at < len(n.itemsArray) {
				inner = max(inner, e.apply(n.itemsArray[at], x, depth+1))
			}
			for _, j := range []int{n.items, n.additionalItems, n.contains, n.ue} {
				if j >= 0 {
					inner = max(inner, e.apply(j, x, depth+1))
				}
			}
		}
	}
	return e.wrap(c, max(msg, inner))
}

// wrap counts the validator's wrapping of a message of msg bytes, as it
// returns it from an application of a subschema whose cost is c, and
// returns the wrapped message's size.
func (e *estimate) wrap(c *nodeCost, msg int64) int64 {
	msg += c.prefix
	e.left -= msg / copyBytes
	return msg
}
