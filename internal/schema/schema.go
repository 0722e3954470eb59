// Package schema compiles the JSON Schemas that callers supply, for
// structured output. It is strict, because the schemas come from outside: a
// schema is checked against its draft's meta-schema, may not refer to
// anything outside itself, and is bounded in size.
//
// It is a package of its own so that only the functions that take schemas
// link it: its validator compiles every draft's meta-schema when the program
// starts, a few milliseconds of every cold start. The agent validates its
// tools' inputs, whose schemas are the program's own, without it.
package schema

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/lambda-agent/lambda-agent/internal/agent"
	"github.com/santhosh-tekuri/jsonschema/v6"
)

// MaxBytes bounds the schemas callers may supply.
const MaxBytes = 64 << 10

// compiled is a JSON Schema (draft 2020-12 unless it says otherwise),
// compiled. It is safe for concurrent use.
type compiled struct {
	raw    json.RawMessage
	schema *jsonschema.Schema
}

// Compile compiles a JSON Schema whose root describes an object; its
// signature is the one httpapi.Config.CompileSchema takes. An invalid
// schema is an *agent.InputError of kind agent.ErrInvalidSchema that says what
// is wrong. A $ref to a file or URL is an error rather than a read.
func Compile(raw json.RawMessage) (agent.Schema, error) {
	if len(raw) > MaxBytes {
		return nil, invalid("larger than %d bytes", MaxBytes)
	}
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
	if err != nil {
		return nil, invalid("%w", err)
	}
	if err := agent.CheckSchemaDocument(doc); err != nil {
		return nil, err
	}
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft2020)
	c.UseLoader(noLoader{})
	const url = "mem:///schema.json"
	if err := c.AddResource(url, doc); err != nil {
		return nil, invalid("%w", err)
	}
	sch, err := c.Compile(url)
	if err != nil {
		return nil, invalid("%w", err)
	}
	return &compiled{raw: bytes.Clone(raw), schema: sch}, nil
}

// Raw returns the schema as it was given.
func (s *compiled) Raw() json.RawMessage { return s.raw }

// Validate checks a JSON value against the schema. It returns nil or the
// violations, one line each, such as `/age: got string, want integer`.
func (s *compiled) Validate(value json.RawMessage) []string {
	v, err := jsonschema.UnmarshalJSON(bytes.NewReader(value))
	if err != nil {
		return []string{"not valid JSON: " + err.Error()}
	}
	err = s.schema.Validate(v)
	if err == nil {
		return nil
	}
	var ve *jsonschema.ValidationError
	if !errors.As(err, &ve) {
		return []string{err.Error()}
	}
	return flatten(ve.BasicOutput())
}

func flatten(u *jsonschema.OutputUnit) []string {
	var out []string
	var walk func(u *jsonschema.OutputUnit)
	walk = func(u *jsonschema.OutputUnit) {
		if u.Error != nil {
			loc := u.InstanceLocation
			if loc == "" {
				loc = "/"
			}
			out = append(out, loc+": "+u.Error.String())
		}
		for i := range u.Errors {
			walk(&u.Errors[i])
		}
	}
	walk(u)
	out = slices.Compact(out)
	// The basic output repeats a summary line ("validation failed") above the
	// causes; keep only the causes when there are some.
	if len(out) > 1 {
		out = slices.DeleteFunc(out, func(s string) bool { return strings.HasSuffix(s, ": validation failed") })
	}
	return out
}

func invalid(format string, args ...any) error {
	err := fmt.Errorf(format, args...)
	return &agent.InputError{Kind: agent.ErrInvalidSchema, Reason: err.Error(), Err: errors.Unwrap(err)}
}

type noLoader struct{}

func (noLoader) Load(url string) (any, error) {
	return nil, fmt.Errorf("references outside the schema are not allowed: %s", url)
}
