package schema

import (
	"encoding/json"
	"errors"
	"fmt"
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
			got, err := s.Validate(t.Context(), json.RawMessage(tt.value))
			if err != nil {
				t.Fatal(err)
			}
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

func TestValidateProblems(t *testing.T) {
	t.Run("wrappers left out", func(t *testing.T) {
		s := compileForTest(t, `{"type":"object","properties":{"a":{"$ref":"#/$defs/n"}},"$defs":{"n":{"type":"integer"}}}`)
		got, err := s.Validate(t.Context(), json.RawMessage(`{"a":"x"}`))
		if err != nil || len(got) != 1 || got[0] != "/a: got string, want integer" {
			t.Errorf("Validate = %q, %v; want the one violation", got, err)
		}
	})
	t.Run("at most 20", func(t *testing.T) {
		s := compileForTest(t, `{"type":"object","additionalProperties":{"type":"string"}}`)
		got, err := s.Validate(t.Context(), json.RawMessage(`{`+join(30, func(i int) string { return fmt.Sprintf(`"p%02d":%d`, i, i) })+`}`))
		if err != nil || len(got) != maxProblems+1 || got[maxProblems] != "and 10 more" {
			t.Errorf("Validate = %q, %v; want 20 problems and a count of the rest", got, err)
		}
	})
	t.Run("each once", func(t *testing.T) {
		s := compileForTest(t, recursion)
		got, err := s.Validate(t.Context(), deepArray(8))
		if err != nil || len(got) == 0 {
			t.Fatalf("Validate = %q, %v; want problems", got, err)
		}
		seen := map[string]bool{}
		for _, p := range got {
			if seen[p] {
				t.Errorf("%q is repeated in %q", p, got)
			}
			seen[p] = true
		}
	})
}

// TestFormats checks that the hooks Compile puts in the format keyword keep
// its meaning: an annotation in draft 2020-12, an assertion in draft-07.
func TestFormats(t *testing.T) {
	tests := []struct {
		name, schema, value, want string
	}{
		{"2020-12 email", `{"type":"object","properties":{"a":{"format":"email"}}}`, `{"a":"nobody"}`, ""},
		{"draft-07 email", `{"$schema":"http://json-schema.org/draft-07/schema#","type":"object","properties":{"a":{"format":"email"}}}`, `{"a":"nobody"}`, "email"},
		{"draft-07 valid email", `{"$schema":"http://json-schema.org/draft-07/schema#","type":"object","properties":{"a":{"format":"email"}}}`, `{"a":"ada@example.com"}`, ""},
		{"draft-07 regex", `{"$schema":"http://json-schema.org/draft-07/schema#","type":"object","properties":{"a":{"format":"regex"}}}`, `{"a":"("}`, "regex"},
		{"draft-07 unknown format", `{"$schema":"http://json-schema.org/draft-07/schema#","type":"object","properties":{"a":{"format":"colour"}}}`, `{"a":"x"}`, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := compileForTest(t, tt.schema)
			got, err := s.Validate(t.Context(), json.RawMessage(tt.value))
			if err != nil {
				t.Fatal(err)
			}
			if tt.want == "" {
				if got != nil {
					t.Errorf("problems %q, want none", got)
				}
				return
			}
			if len(got) != 1 || !strings.Contains(got[0], tt.want) {
				t.Errorf("problems %q, want one mentioning %q", got, tt.want)
			}
		})
	}
}
