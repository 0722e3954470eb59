package schema

import (
	"bytes"
	"errors"
	"testing"

	"github.com/lambda-agent/lambda-agent/internal/agent"
)

// FuzzCompile compiles arbitrary schemas and validates arbitrary values
// against those that compile: nothing panics, every refusal of a schema is an
// *agent.InputError of kind ErrInvalidSchema, a schema that compiles is kept
// as it came, and a validation ends with problems, nothing, or the schema
// refused as too expensive. Seeds are in testdata/fuzz/FuzzCompile: the
// hostile schemas of hostileCases that fit in a few kilobytes, and their
// relatives.
func FuzzCompile(f *testing.F) {
	f.Add([]byte(`{"type":"object","properties":{"a":{"type":"string"}},"required":["a"]}`), []byte(`{"a":"x"}`))
	f.Fuzz(func(t *testing.T, schema, value []byte) {
		s, err := Compile(schema)
		if err != nil {
			if !isSchemaError(err) {
				t.Fatalf("Compile: %v, not an *agent.InputError of kind ErrInvalidSchema", err)
			}
			return
		}
		if !bytes.Equal(s.Raw(), schema) {
			t.Fatalf("Raw() = %q, want the schema as given", s.Raw())
		}
		problems, err := s.Validate(t.Context(), value)
		switch {
		case err != nil && !isSchemaError(err):
			t.Fatalf("Validate: %v, not an *agent.InputError of kind ErrInvalidSchema", err)
		case err != nil && problems != nil:
			t.Fatalf("Validate returned both problems %q and %v", problems, err)
		case len(problems) > maxProblems+1:
			t.Fatalf("Validate returned %d problems", len(problems))
		}
	})
}

func isSchemaError(err error) bool {
	var ie *agent.InputError
	return errors.As(err, &ie) && ie.Kind == agent.ErrInvalidSchema
}
