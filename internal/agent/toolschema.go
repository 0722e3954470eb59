package agent

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/lambda-agent/lambda-agent/internal/schema/limits"
)

// ToolSchema is a tool's input schema, compiled by CompileToolSchema: it
// validates the tool's inputs, each validation bounded in its work. It is
// compiled once, when the tool is listed, and then serves every turn, so it
// keeps no state between validations and is safe for concurrent use.
//
// A tool's schema may come from outside (a remote server's listing, a
// frontend's request), so it is held to the budget of a caller's schema,
// internal/schema/limits, and validated with the validator that the agent
// links already (google/jsonschema-go): the strict one of internal/schema
// compiles every draft's meta-schema when the program starts, a few
// milliseconds of every cold start of the functions that only run tools.
type ToolSchema struct {
	raw      json.RawMessage
	resolved *jsonschema.Resolved
	// nodes are the subschemas, the root first, for the cost of a
	// validation.
	nodes []*toolNode
	// timeout bounds a validation's time: MaxValidateTime, but for tests.
	timeout time.Duration
}

var _ Schema = (*ToolSchema)(nil)

// CompileToolSchema compiles a tool's input schema, a JSON Schema (draft
// 2020-12, or draft-07 if its $schema says so) whose root describes an
// object. It refuses, with an *InputError of kind ErrInvalidSchema that says
// why, a schema that Bedrock would refuse (CheckSchemaDocument), one past a
// limit of internal/schema/limits (whose reason names the limit; errors.As
// finds the *limits.Error), one with a cycle of subschemas that apply each
// other to the same value, and one that it cannot analyse soundly: a
// reference that is not a JSON pointer into the schema itself ("#" or
// "#/…"), an $id below the root, an anchor, a $dynamicRef or a
// $recursiveRef. Its work is bounded by the limits, so it may be called for
// every request that brings tools of its own.
func CompileToolSchema(raw json.RawMessage) (*ToolSchema, error) {
	if len(raw) > limits.MaxBytes {
		return nil, invalidSchema("%w", &limits.Error{Limit: "MaxBytes", Reason: fmt.Sprintf("larger than %d bytes", limits.MaxBytes)})
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var doc any
	if err := dec.Decode(&doc); err != nil {
		return nil, invalidSchema("%w", err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, invalidSchema("more than one JSON value")
	}
	if err := CheckSchemaDocument(doc); err != nil {
		return nil, err
	}
	// The static limits come first: the work of decoding and resolving
	// grows with the nesting, the references and the patterns.
	if _, err := limits.CheckDocument(doc); err != nil {
		return nil, invalidSchema("%w", err)
	}
	s, err := resolve(raw)
	if err != nil {
		return nil, invalidSchema("%w", err)
	}
	return s, nil
}

// resolve decodes a schema that passed the static checks for the
// validator, analyses it, and resolves it. The validator is not written
// for hostile schemas, so a panic of its is a schema refused.
func resolve(raw json.RawMessage) (_ *ToolSchema, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("the validator failed on the schema: %v", r)
		}
	}()
	var root jsonschema.Schema
	if err := json.Unmarshal(raw, &root); err != nil {
		return nil, err
	}
	nodes, err := analyse(&root)
	if err != nil {
		return nil, err
	}
	resolved, err := root.Resolve(nil)
	if err != nil {
		return nil, err
	}
	return &ToolSchema{raw: bytes.Clone(raw), resolved: resolved, nodes: nodes, timeout: limits.MaxValidateTime}, nil
}

// Raw returns the schema as it was given.
func (s *ToolSchema) Raw() json.RawMessage { return s.raw }

// maxProblemBytes bounds the text of the problems Validate reports, which
// go back to the model: the validator's message quotes the value and the
// schema, and can be as large as both.
const maxProblemBytes = 2000

// Validate checks a tool's input against the schema. It returns nil or the
// problems, for the model to read: the input is not JSON, nests objects and
// arrays deeper than MaxInstanceDepth, or does not match. The error is an
// *InputError of kind ErrInvalidSchema when checking the input would take
// more than MaxSteps, as estimated from the schema and the input before the
// validator runs, or more than MaxValidateTime; or ctx's error, when ctx
// ends first.
func (s *ToolSchema) Validate(ctx context.Context, value json.RawMessage) ([]string, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	var v any
	if err := json.Unmarshal(value, &v); err != nil {
		return []string{"not valid JSON: " + err.Error()}, nil
	}
	if _, lerr := limits.CheckJSON(v, limits.MaxInstanceDepth, "MaxInstanceDepth"); lerr != nil {
		return []string{limits.Pointer(lerr.Ptr) + ": " + lerr.Error()}, nil
	}
	steps, ok := s.cost(v, limits.MaxSteps)
	if !ok {
		return nil, invalidSchema("%w", &limits.Error{Limit: "MaxSteps", Reason: fmt.Sprintf("too costly to check: it would take more than %d steps", limits.MaxSteps)})
	}
	var verr error
	var err error
	if steps <= inlineSteps {
		verr, err = s.check(v)
	} else {
		verr, err = s.run(ctx, v)
	}
	if err != nil || verr == nil {
		return nil, err
	}
	return []string{Clip(verr.Error(), maxProblemBytes)}, nil
}

// inlineSteps is the estimated cost up to which Validate runs the
// validator on the caller's goroutine, with no clock: at about 100 ns a
// step, well under a millisecond. MaxValidateTime is a backstop for costly
// validations; on a busy machine a cheap one could wait that long for a
// goroutine to be scheduled, and fail for it.
const inlineSteps = 5000

// check runs the validator on v, and returns its verdict, or why it has
// none.
func (s *ToolSchema) check(v any) (verdict, err error) {
	defer func() {
		if r := recover(); r != nil {
			verdict, err = nil, invalidSchema("the validator failed on the input: %v", r)
		}
	}()
	return s.resolved.Validate(v), nil
}

// run runs check on a goroutine of its own, since the validator cannot be
// interrupted, and stops waiting for it when the validation takes more
// than the timeout or ctx ends; the cost, which Validate bounded, bounds
// what it does after that.
func (s *ToolSchema) run(ctx context.Context, v any) (verdict, err error) {
	type outcome struct{ verdict, err error }
	done := make(chan outcome, 1)
	go func() {
		verdict, err := s.check(v)
		done <- outcome{verdict, err}
	}()
	timer := time.NewTimer(s.timeout)
	defer timer.Stop()
	select {
	case o := <-done:
		return o.verdict, o.err
	case <-timer.C:
		return nil, invalidSchema("%w", &limits.Error{Limit: "MaxValidateTime", Reason: fmt.Sprintf("too costly to check: it takes more than %v", limits.MaxValidateTime)})
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// validate returns nil or what is wrong with input, for the model or a
// person to read: Validate's problems, or why it could not check the input.
func (s *ToolSchema) validate(input json.RawMessage) []string {
	problems, err := s.Validate(context.Background(), input)
	if err != nil {
		return []string{reasonOf(err)}
	}
	return problems
}

// reasonOf is the reason of an *InputError, or else err's text.
func reasonOf(err error) string {
	var ie *InputError
	if errors.As(err, &ie) {
		return ie.Reason
	}
	return err.Error()
}
