package schema

import (
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"sync"
	"time"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// What the steps of a validation cost, measured by BenchmarkHostileSchemas
// so that MaxSteps take about 100 ms at worst: a step is 100 ns or less. A
// step is about one subschema applied to a part of a value.
const (
	// numSteps is reading or comparing a number: exact arithmetic, from
	// the number's text each time.
	numSteps = 8
	// textBytes are the bytes of a string scanned in a step, by minLength
	// or a format; compareBytes are those compared in an eighth of a step.
	textBytes    = 32
	compareBytes = 256
	// regexpWork is a regular expression's instructions times the bytes it
	// is matched against, in a step: the worst case of Go's matcher.
	regexpWork = 24
	// compileSteps is what compiling an instruction of a regular expression
	// costs, for the "regex" format, which compiles the value.
	compileSteps = 2
	// depthSteps is the depth of a value that adds a step to every step of
	// its validation: the validator copies the location of each violation,
	// and keeps it.
	depthSteps = 8
	// checkEvery is how many steps pass between looks at the context.
	checkEvery = 4096
)

// meter counts the steps of the validations against one compiled schema,
// for the hooks that Compile gives every subschema. The steps and the time
// are a budget for all of them together: a compiled schema serves one
// request, whose validations must not add up to more than one bounded one.
// The validator cannot be interrupted, so a validation out of steps or time
// is aborted by a panic with a stop, which Validate recovers; the validator
// keeps no state between validations for the panic to leave behind, and
// runs in Validate's goroutine, so nothing goes on after it. A meter serves
// one validation at a time: mu is held for the whole of it. It keeps the
// validation's context, against the house rule, because the hooks the
// validator calls cannot be given it.
type meter struct {
	mu       sync.Mutex
	on       bool
	ctx      context.Context
	deadline time.Time
	left     int64         // steps left of MaxSteps
	spent    time.Duration // time spent validating so far
	tick     int64
	scale    int64 // what a step costs, for the depth of the value
}

func newMeter() *meter { return &meter{left: MaxSteps} }

// start readies the meter for a validation of a value nested depth deep,
// which may take what is left of timeout. The caller holds mu.
func (m *meter) start(ctx context.Context, timeout time.Duration, depth int) {
	m.on, m.ctx, m.deadline = true, ctx, time.Now().Add(timeout-m.spent)
	m.tick, m.scale = 0, 1+int64(depth)/depthSteps
}

// stop aborts a validation with err.
type stop struct{ err error }

// charge counts n steps of the current validation, and aborts it when it has
// run out of steps or time, or its context has ended. Outside a validation
// it does nothing.
func (m *meter) charge(n int64) {
	if !m.on {
		return
	}
	n *= m.scale
	m.left -= n
	if m.left < 0 {
		m.left = -1 // spent: any further validation stops at once
		panic(stop{invalid("the schema is too expensive to validate: checking the model's objects against it takes more than %d steps (limit: MaxSteps)", MaxSteps)})
	}
	m.tick += n
	if m.tick < checkEvery {
		return
	}
	m.tick = 0
	if err := m.ctx.Err(); err != nil {
		panic(stop{fmt.Errorf("schema: validate: %w", err)})
	}
	if time.Now().After(m.deadline) {
		panic(stop{invalid("the schema is too expensive to validate: checking the model's objects against it takes more than %v (limit: MaxValidateTime)", MaxValidateTime)})
	}
}

// cost is what applying a subschema to a value costs beyond what was
// charged before its hook ran (its early cost, which whoever applies it
// pays).
type cost struct {
	// own is the fixed part: the subschema's own keywords and the early
	// costs of the subschemas applied to the same value.
	own int64
	// props are the early costs of the subschemas in properties.
	props map[string]int64
	// perKey is what every property of an object costs: the early costs of
	// patternProperties, additionalProperties, propertyNames and
	// unevaluatedProperties, which may all apply.
	perKey int64
	// prefix are the early costs of prefixItems (items, before 2020-12);
	// perItem is what every item past them costs, perElem what every item
	// costs (contains, unevaluatedItems).
	prefix           []int64
	perItem, perElem int64
	// fanout is the subschemas that copy the set of unevaluated properties
	// or items of the value, when the schema has unevaluated* anywhere.
	fanout int64
	unique bool // uniqueItems hashes the whole array
	text   bool // a string is scanned: minLength, maxLength, format
	number bool // a number is read: minimum, maximum, multipleOf
}

// steps is what applying the subschema to v costs.
func (c *cost) steps(v any) int64 {
	n := c.own
	switch v := v.(type) {
	case map[string]any:
		n += int64(len(v)) * (1 + c.perKey + c.fanout)
		if len(v) < len(c.props) {
			for k := range v {
				n += c.props[k]
			}
		} else {
			for k, e := range c.props {
				if _, ok := v[k]; ok {
					n += e
				}
			}
		}
	case []any:
		p := min(len(v), len(c.prefix))
		for _, e := range c.prefix[:p] {
			n += e
		}
		n += int64(len(v)-p)*c.perItem + int64(len(v))*(c.perElem+c.fanout)
		if c.unique {
			// Up to 20 items are compared in pairs, more are hashed.
			pairs := int64(1)
			if len(v) <= 20 {
				pairs = max(1, int64(len(v))/2)
			}
			n += (valueCost(v) + 7) / 8 * pairs
		}
	case string:
		if c.text {
			n += 1 + int64(len(v))/textBytes
		}
	case json.Number:
		if c.number {
			n += numSteps
		}
	}
	return n
}

// early is what applying s costs before its hook runs: the checks of type,
// const and enum, which may end it early, with a violation that the
// validator keeps.
func early(s *jsonschema.Schema) int64 {
	if s == nil {
		return 0
	}
	n := int64(1)
	if s.Types != nil || s.Const != nil || s.Enum != nil {
		n++
	}
	if s.Types != nil && slices.Contains(s.Types.ToStrings(), "integer") {
		n += numSteps
	}
	var eighths int64
	if s.Const != nil {
		eighths += valueCost(*s.Const)
	}
	if s.Enum != nil {
		for _, e := range s.Enum.Values {
			eighths += valueCost(e)
		}
	}
	return n + (eighths+7)/8
}

// valueCost is what comparing or hashing a JSON value costs, in eighths of a
// step: comparing strings is cheap, and numbers dear.
func valueCost(v any) int64 {
	switch v := v.(type) {
	case map[string]any:
		n := int64(8)
		for k, e := range v {
			n += 2 + int64(len(k))/compareBytes + valueCost(e)
		}
		return n
	case []any:
		n := int64(8)
		for _, e := range v {
			n += 1 + valueCost(e)
		}
		return n
	case string:
		return 1 + int64(len(v))/compareBytes
	case json.Number:
		return 8 * numSteps
	}
	return 1
}

// hook is the format that Compile gives a subschema so that the validator
// calls the meter each time it applies the subschema to a value, after its
// early checks and before anything else. orig is the subschema's own format,
// when the validator asserts it (before draft 2019-09).
func (m *meter) hook(c *cost, orig *jsonschema.Format) *jsonschema.Format {
	name := "budget"
	if orig != nil {
		name = orig.Name
	}
	return &jsonschema.Format{Name: name, Validate: func(v any) error {
		m.charge(c.steps(v))
		if orig != nil {
			return orig.Validate(v)
		}
		return nil
	}}
}

// regexpEngine compiles regular expressions so that matching one is charged
// to the meter: the schema's own when it is compiled, with sizes their
// estimated sizes, and the values that the "regex" format compiles, whose
// compiling is charged first. (Outside a validation, charging does nothing.)
func (m *meter) regexpEngine(sizes map[string]int) jsonschema.RegexpEngine {
	return func(s string) (jsonschema.Regexp, error) {
		m.charge(1 + int64(len(s))/textBytes)
		size, ok := sizes[s]
		if !ok {
			size = patternSize(s)
		}
		m.charge(int64(size) * compileSteps)
		re, err := regexp.Compile(s)
		if err != nil {
			return nil, err
		}
		return &meteredRegexp{re: re, size: int64(size), m: m}, nil
	}
}

type meteredRegexp struct {
	re   *regexp.Regexp
	size int64
	m    *meter
}

func (r *meteredRegexp) MatchString(s string) bool {
	r.m.charge(1 + int64(len(s))*r.size/regexpWork)
	return r.re.MatchString(s)
}

func (r *meteredRegexp) String() string { return r.re.String() }
