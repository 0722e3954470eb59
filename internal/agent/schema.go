package agent

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// Schema is a compiled JSON Schema (draft 2020-12 unless it says otherwise).
// It is safe for concurrent use.
type Schema struct {
	raw      json.RawMessage
	compiled *jsonschema.Schema
}

// maxSchemaBytes bounds the schemas callers may supply.
const maxSchemaBytes = 64 << 10

// ErrInvalidSchema is returned by CompileSchema; the message says what is wrong.
var ErrInvalidSchema = errors.New("invalid JSON Schema")

// CompileSchema compiles a JSON Schema whose root describes an object. The
// schema may not refer to anything outside itself: a $ref to a file or URL is
// an error rather than a read, because schemas come from callers.
func CompileSchema(raw json.RawMessage) (*Schema, error) {
	if len(raw) > maxSchemaBytes {
		return nil, invalidSchema("larger than %d bytes", maxSchemaBytes)
	}
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
	if err != nil {
		return nil, invalidSchema("%w", err)
	}
	if hasEmptyKey(doc) {
		return nil, invalidSchema("%v", errEmptyKey)
	}
	root, ok := doc.(map[string]any)
	if !ok {
		return nil, invalidSchema("the root must be a JSON object")
	}
	if t, _ := root["type"].(string); t != "object" {
		return nil, invalidSchema(`the root must have "type": "object"`)
	}
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft2020)
	c.UseLoader(noLoader{})
	const url = "mem:///schema.json"
	if err := c.AddResource(url, doc); err != nil {
		return nil, invalidSchema("%w", err)
	}
	compiled, err := c.Compile(url)
	if err != nil {
		return nil, invalidSchema("%w", err)
	}
	return &Schema{raw: bytes.Clone(raw), compiled: compiled}, nil
}

// Raw returns the schema as it was given.
func (s *Schema) Raw() json.RawMessage { return s.raw }

// Validate checks a JSON value against the schema. It returns nil or the
// violations, one line each, such as `/age: got string, want integer`.
func (s *Schema) Validate(value json.RawMessage) []string {
	v, err := jsonschema.UnmarshalJSON(bytes.NewReader(value))
	if err != nil {
		return []string{"not valid JSON: " + err.Error()}
	}
	err = s.compiled.Validate(v)
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

func hasEmptyKey(v any) bool {
	switch v := v.(type) {
	case map[string]any:
		if _, ok := v[""]; ok {
			return true
		}
		for _, e := range v {
			if hasEmptyKey(e) {
				return true
			}
		}
	case []any:
		for _, e := range v {
			if hasEmptyKey(e) {
				return true
			}
		}
	}
	return false
}

type noLoader struct{}

func (noLoader) Load(url string) (any, error) {
	return nil, fmt.Errorf("references outside the schema are not allowed: %s", url)
}
