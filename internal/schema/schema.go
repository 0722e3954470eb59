// Package schema compiles the JSON Schemas that callers supply, for
// structured output. It is strict, because the schemas come from outside: a
// schema is checked against its draft's meta-schema, may not refer to
// anything outside itself, and is bounded in size.
//
// It also bounds the work a schema can cause. A schema of a few kilobytes
// can make a validator visit billions of subschemas (30 definitions each
// referring twice to the next), or make its compiler take minutes (deep
// nesting, huge exponents, large repetitions in patterns). Compile refuses
// the schemas past the static limits (MaxDepth, MaxBranches, MaxRefs,
// MaxExpanded, MaxPatternSize and the number limits) before and after the
// validator's compiler sees them, and gives every subschema a hook that
// counts the steps of a validation, so that Validate stops one past MaxSteps
// or MaxValidateTime, or when its context ends.
//
// It is a package of its own so that only the functions that take schemas
// link it: its validator compiles every draft's meta-schema when the program
// starts, a few milliseconds of every cold start. The agent validates its
// tools' inputs without it (agent.CompileToolSchema), under the same
// budget: the limits and the static checks are internal/schema/limits'.
package schema

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"time"

	"github.com/lambda-agent/lambda-agent/internal/agent"
	"github.com/lambda-agent/lambda-agent/internal/schema/limits"
	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/santhosh-tekuri/jsonschema/v6/kind"
)

// maxProblems bounds the problems Validate reports, which go back to the
// model: the first ones are enough to fix, and the text of one can be as
// large as the schema (an enum). Of the violations, at most formatProblems
// are formatted to find them.
const (
	maxProblems    = 20
	formatProblems = 200
)

// compiled is a JSON Schema (draft 2020-12 unless it says otherwise),
// compiled, with a hook in every subschema that charges its meter. It is
// safe for concurrent use; validations of one compiled schema take turns.
type compiled struct {
	raw    json.RawMessage
	schema *jsonschema.Schema
	meter  *meter
	// early is what applying the root costs before its hook runs.
	early int64
	// timeout bounds a validation's time: MaxValidateTime, but for tests.
	timeout time.Duration
}

// Compile compiles a JSON Schema whose root describes an object; its
// signature is the one httpapi.Config.CompileSchema takes. An invalid
// schema, or one past a limit of this package, is an *agent.InputError of
// kind agent.ErrInvalidSchema that says what is wrong, naming the limit. A
// $ref to a file or URL is an error rather than a read.
func Compile(raw json.RawMessage) (agent.Schema, error) {
	if len(raw) > MaxBytes {
		return nil, invalid("larger than %d bytes (limit: MaxBytes)", MaxBytes)
	}
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
	if err != nil {
		return nil, invalid("%w", err)
	}
	if err := agent.CheckSchemaDocument(doc); err != nil {
		return nil, err
	}
	// The static limits come first: the compiler's own work grows faster
	// than the document with nesting, numbers and patterns.
	info, err := limits.CheckDocument(doc)
	if err != nil {
		return nil, invalid("%w", err)
	}
	m := newMeter()
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft2020)
	c.UseLoader(noLoader{})
	c.UseRegexpEngine(m.regexpEngine(info.Patterns))
	if err := c.AddResource(docURL, doc); err != nil {
		return nil, invalid("%w", err)
	}
	sch, err := c.Compile(docURL)
	if err != nil {
		return nil, invalid("%w", err)
	}
	roots := []*jsonschema.Schema{sch}
	for _, ptr := range info.Anchors {
		a, err := c.Compile(docURL + "#" + (&url.URL{Fragment: ptr}).EscapedFragment())
		if err != nil {
			return nil, invalid("%w", err)
		}
		roots = append(roots, a)
	}
	g, err := newGraph(roots)
	if err != nil {
		return nil, err
	}
	if err := g.check(sch); err != nil {
		return nil, err
	}
	earlies, costs := g.costs()
	for i, c := range costs {
		s := g.nodes[i]
		s.Format = m.hook(c, s.Format)
	}
	return &compiled{raw: bytes.Clone(raw), schema: sch, meter: m, early: earlies[g.index[sch]], timeout: MaxValidateTime}, nil
}

// Raw returns the schema as it was given.
func (s *compiled) Raw() json.RawMessage { return s.raw }

// Validate checks a JSON value against the schema. It returns nil or the
// violations, one line each, such as `/age: got string, want integer`, at
// most 20 and a count of the rest. A value nested deeper than
// MaxInstanceDepth, or with a number past the number limits, is a problem
// too. The error is an *agent.InputError of kind agent.ErrInvalidSchema when
// the validations against this schema, this one and those before it, take
// more than MaxSteps or MaxValidateTime together, and wraps ctx.Err() when
// ctx ends first.
func (s *compiled) Validate(ctx context.Context, value json.RawMessage) ([]string, error) {
	v, err := jsonschema.UnmarshalJSON(bytes.NewReader(value))
	if err != nil {
		return []string{"not valid JSON: " + err.Error()}, nil
	}
	depth, lerr := limits.CheckJSON(v, MaxInstanceDepth, "MaxInstanceDepth")
	if lerr != nil {
		return []string{pointer(lerr.Ptr) + ": " + lerr.Error()}, nil
	}
	verr, err := s.validate(ctx, v, depth)
	if err != nil || verr == nil {
		return nil, err
	}
	return problems(verr), nil
}

// validate runs the validator on v, whose objects and arrays nest depth
// deep, with the meter on. It returns the validator's error, or why the
// meter stopped it.
func (s *compiled) validate(ctx context.Context, v any, depth int) (verr, err error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("schema: validate: %w", err)
	}
	m := s.meter
	m.mu.Lock()
	defer m.mu.Unlock()
	began := time.Now()
	m.start(ctx, s.timeout, depth)
	defer func() {
		m.on, m.ctx = false, nil
		m.spent += time.Since(began)
		if r := recover(); r != nil {
			st, ok := r.(stop)
			if !ok {
				panic(r)
			}
			err = st.err
		}
	}()
	m.charge(s.early)
	return s.schema.Validate(v), nil
}

// problems lists the violations in a validator's error: one line for each
// failed keyword, the wrappers that only group others left out, each line
// once. Formatting a line costs as much as the schema's part in it (an enum
// lists its values), so at most formatProblems are formatted.
func problems(err error) []string {
	var ve *jsonschema.ValidationError
	if !errors.As(err, &ve) {
		return []string{err.Error()}
	}
	var out []string
	seen := map[string]bool{}
	formatted, more := 0, 0
	var walk func(e *jsonschema.ValidationError)
	walk = func(e *jsonschema.ValidationError) {
		switch e.ErrorKind.(type) {
		case *kind.Schema, *kind.Group, *kind.Reference:
		default:
			if formatted == formatProblems || len(out) == maxProblems {
				more++
				break
			}
			formatted++
			line := pointer(jsonPointer(e.InstanceLocation)) + ": " + shorten(message(e.ErrorKind))
			if !seen[line] {
				seen[line] = true
				out = append(out, line)
			}
		}
		for _, c := range e.Causes {
			walk(c)
		}
	}
	walk(ve)
	if len(out) == 0 {
		out = []string{"/: " + message(ve.ErrorKind)}
	}
	if more > 0 {
		out = append(out, fmt.Sprintf("and %d more", more))
	}
	return out
}

// message is the English text of a violation.
func message(k jsonschema.ErrorKind) string {
	return (&jsonschema.ValidationError{ErrorKind: k}).BasicOutput().Error.String()
}

func invalid(format string, args ...any) error {
	err := fmt.Errorf(format, args...)
	return &agent.InputError{Kind: agent.ErrInvalidSchema, Reason: err.Error(), Err: errors.Unwrap(err)}
}

type noLoader struct{}

func (noLoader) Load(url string) (any, error) {
	return nil, fmt.Errorf("references outside the schema are not allowed: %s", url)
}
