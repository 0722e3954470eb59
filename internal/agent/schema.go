package agent

import (
	"context"
	"encoding/json"
	"errors"
)

// Schema is a compiled JSON Schema: the schema of a structured output, which
// internal/schema compiles from what a caller supplies. Implementations must
// be safe for concurrent use.
type Schema interface {
	// Raw returns the schema's JSON, as the model is given it.
	Raw() json.RawMessage
	// Validate checks a JSON value against the schema. It returns nil or the
	// violations, one line each, for the model to read. An error means the
	// value could not be checked: an *InputError of kind ErrInvalidSchema
	// when checking it would cost more than the implementation allows (the
	// schema is at fault, not the value), or ctx's error when ctx ends
	// first. Validation must stop soon after ctx ends.
	Validate(ctx context.Context, value json.RawMessage) ([]string, error)
}

// ErrInvalidSchema is the kind of the *InputError for a schema that cannot be
// used; its Reason says what is wrong.
var ErrInvalidSchema = errors.New("invalid JSON Schema")

// CheckSchemaDocument checks what Bedrock needs of a decoded schema beyond
// its validity: the root is an object with "type": "object", and no object
// in it has an empty key, which the AWS SDK cannot send.
func CheckSchemaDocument(doc any) error {
	root, ok := doc.(map[string]any)
	if !ok {
		return invalidSchema("the root must be a JSON object")
	}
	if t, _ := root["type"].(string); t != "object" {
		return invalidSchema(`the root must have "type": "object"`)
	}
	if hasEmptyKey(doc) {
		return invalidSchema("an object key is empty, which the AWS SDK cannot send")
	}
	return nil
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
