package schema

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/lambda-agent/lambda-agent/internal/agent"
)

func TestCompile(t *testing.T) {
	tests := []struct {
		name    string
		schema  string
		wantErr string // empty for a valid schema
	}{
		{"object", `{"type":"object","properties":{"a":{"type":"string"}}}`, ""},
		{"draft 2020-12 keywords", `{"$schema":"https://json-schema.org/draft/2020-12/schema","type":"object","$defs":{"n":{"type":"integer"}},"properties":{"n":{"$ref":"#/$defs/n"},"t":{"type":"array","prefixItems":[{"type":"string"}]}}}`, ""},
		{"not JSON", `{"type":`, "invalid JSON Schema"},
		{"array root", `[]`, "root must be a JSON object"},
		{"non-object type", `{"type":"string"}`, `"type": "object"`},
		{"no type", `{"properties":{}}`, `"type": "object"`},
		{"bad keyword value", `{"type":"object","properties":{"a":{"type":"strin"}}}`, "invalid JSON Schema"},
		{"file reference", `{"type":"object","properties":{"a":{"$ref":"file:///etc/passwd"}}}`, "not allowed"},
		{"remote reference", `{"type":"object","properties":{"a":{"$ref":"https://example.com/s.json"}}}`, "not allowed"},
		{"empty key", `{"type":"object","properties":{"":{"type":"string"}}}`, "key is empty"},
		{"too large", `{"type":"object","description":"` + strings.Repeat("x", MaxBytes) + `"}`, "larger than"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, err := Compile(json.RawMessage(tt.schema))
			if tt.wantErr == "" {
				if err != nil {
					t.Fatalf("CompileSchema: %v", err)
				}
				if s.Raw() == nil {
					t.Error("Raw() is nil")
				}
				return
			}
			if !errors.Is(err, agent.ErrInvalidSchema) || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("err = %v, want ErrInvalidSchema mentioning %q", err, tt.wantErr)
			}
		})
	}
}

func TestValidate(t *testing.T) {
	s, err := Compile(json.RawMessage(`{
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
		want  []string // substrings, one per expected problem; nil when valid
	}{
		{"valid", `{"name":"Ada","age":36,"tags":["x"]}`, nil},
		{"big integer", `{"name":"Ada","age":123456789012345678901234567890}`, nil},
		{"wrong type", `{"name":"Ada","age":"36"}`, []string{"/age", "integer"}},
		{"missing", `{"name":"Ada"}`, []string{"age"}},
		{"extra", `{"name":"Ada","age":1,"x":1}`, []string{"x"}},
		{"nested", `{"name":"Ada","age":1,"tags":[1]}`, []string{"/tags/0"}},
		{"not an object", `[1]`, []string{"object"}},
		{"not JSON", `{"name":`, []string{"not valid JSON"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := s.Validate(json.RawMessage(tt.value))
			if tt.want == nil {
				if got != nil {
					t.Errorf("Validate = %q, want no problems", got)
				}
				return
			}
			all := strings.Join(got, "\n")
			for _, w := range tt.want {
				if !strings.Contains(all, w) {
					t.Errorf("problems %q do not mention %q", got, w)
				}
			}
		})
	}
}
