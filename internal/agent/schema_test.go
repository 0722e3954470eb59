package agent

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
)

func TestCompileToolSchema(t *testing.T) {
	tests := []struct {
		name    string
		schema  string
		wantErr string // empty for a usable schema
	}{
		{"object", `{"type":"object","properties":{"a":{"type":"string"}},"required":["a"]}`, ""},
		{"local reference", `{"type":"object","$defs":{"n":{"type":"integer"}},"properties":{"n":{"$ref":"#/$defs/n"}}}`, ""},
		{"not JSON", `{"type":`, "invalid JSON Schema"},
		{"array root", `[]`, "root must be a JSON object"},
		{"non-object type", `{"type":"string"}`, `"type": "object"`},
		{"empty key", `{"type":"object","properties":{"":{}}}`, "key is empty"},
		{"remote reference", `{"type":"object","properties":{"a":{"$ref":"https://example.com/s.json"}}}`, "remote"},
		{"bad keyword value", `{"type":"object","properties":{"a":{"minLength":"x"}}}`, "invalid JSON Schema"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := CompileToolSchema(json.RawMessage(tt.schema))
			if tt.wantErr == "" {
				if err != nil {
					t.Fatalf("CompileToolSchema: %v", err)
				}
				return
			}
			if !errors.Is(err, ErrInvalidSchema) || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("err = %v, want ErrInvalidSchema mentioning %q", err, tt.wantErr)
			}
		})
	}
}

func TestToolSchemaValidate(t *testing.T) {
	s, err := CompileToolSchema(json.RawMessage(`{
		"type": "object",
		"properties": {
			"name": {"type": "string", "minLength": 1},
			"age": {"type": "integer", "minimum": 0},
			"tags": {"type": "array", "items": {"type": "string"}}
		},
		"required": ["name", "age"],
		"additionalProperties": false
	}`))
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name  string
		value string
		want  string // a substring of the problem; empty when valid
	}{
		{"valid", `{"name":"Ada","age":36,"tags":["x"]}`, ""},
		{"wrong type", `{"name":"Ada","age":"36"}`, "age"},
		{"not an integer", `{"name":"Ada","age":3.5}`, "integer"},
		{"missing", `{"name":"Ada"}`, "age"},
		{"extra", `{"name":"Ada","age":1,"x":1}`, "x"},
		{"nested", `{"name":"Ada","age":1,"tags":[1]}`, "tags"},
		{"not an object", `[1]`, "object"},
		{"not JSON", `{"name":`, "not valid JSON"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := s.validate(json.RawMessage(tt.value))
			if tt.want == "" {
				if got != nil {
					t.Errorf("validate = %q, want no problems", got)
				}
				return
			}
			if len(got) == 0 || !strings.Contains(strings.Join(got, "\n"), tt.want) {
				t.Errorf("problems %q do not mention %q", got, tt.want)
			}
		})
	}
}
