package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/lambda-agent/lambda-agent/internal/schema/limits"
)

// join writes n items, separated by commas, with f.
func join(n int, f func(i int) string) string {
	parts := make([]string, n)
	for i := range parts {
		parts[i] = f(i)
	}
	return strings.Join(parts, ",")
}

// object is a schema for an object with the given keywords.
func object(keywords string) string { return `{"type":"object",` + keywords + `}` }

// doubling is n definitions, each applying the next twice through keyword:
// 2^n paths from d0.
func doubling(n int, keyword string) string {
	return fmt.Sprintf(`"$defs":{%s,"d%d":{"type":"object"}}`, join(n, func(i int) string {
		return fmt.Sprintf(`"d%d":{%q:[{"$ref":"#/$defs/d%d"},{"$ref":"#/$defs/d%d"}]}`, i, keyword, i+1, i+1)
	}), n)
}

// nested is inner inside n pairs of open and close.
func nested(open, close string, n int, inner string) string {
	return strings.Repeat(open, n) + inner + strings.Repeat(close, n)
}

// Hostile tool schemas, each refused when it is compiled: the seeds of
// FuzzToolSchema too.
var hostileToolSchemas = []struct {
	name, schema string
	limit        string // the limit named, or "" for a refusal that names none
	want         string // a part of the reason
}{
	{"self reference", object(`"$ref":"#"`), "", "applies itself to the same value again"},
	{"$ref cycle", object(`"$ref":"#/$defs/a","$defs":{"a":{"$ref":"#/$defs/b"},"b":{"allOf":[{"$ref":"#/$defs/a"}]}}`), "", "applies itself to the same value again"},
	{"cycle through not and if", object(`"properties":{"x":{"$ref":"#/$defs/a"}},"$defs":{"a":{"not":{"if":{"$ref":"#/$defs/a"}}}}`), "", "applies itself"},
	{"cycle through dependentSchemas", object(`"$defs":{"a":{"dependentSchemas":{"k":{"$ref":"#/$defs/a"}}}},"properties":{"x":{"$ref":"#/$defs/a"}}`), "", "applies itself"},
	{"remote reference", object(`"properties":{"a":{"$ref":"https://example.com/s.json"}}`), "", "remote reference"},
	{"relative reference", object(`"properties":{"a":{"$ref":"other.json#/x"}}`), "", "remote reference"},
	{"reference to no subschema", object(`"properties":{"a":{"$ref":"#/properties/b"}}`), "", "not a subschema"},
	{"reference to nothing", object(`"properties":{"a":{"$ref":"#/$defs/b/allOf/0"}},"$defs":{"b":{}}`), "", "not a subschema"},
	{"reference to a value", object(`"properties":{"a":{"$ref":"#/enum/0"}},"enum":[{}]`), "", "not a subschema"},
	{"anchor", object(`"properties":{"a":{"$ref":"#x"}},"$defs":{"x":{"$anchor":"x"}}`), "", "$anchor"},
	{"dynamic reference", object(`"$dynamicAnchor":"n","properties":{"a":{"$dynamicRef":"#n"}}`), "", "$dynamicAnchor"},
	{"recursive reference", object(`"properties":{"a":{"$recursiveRef":"#"}}`), "", "$recursiveRef"},
	{"$id below the root", object(`"properties":{"a":{"$id":"https://example.com/a"}}`), "", "$id"},
	{"unknown draft", `{"$schema":"http://json-schema.org/draft-04/schema#","type":"object"}`, "", "draft"},
	{"200-deep nesting", object(`"properties":{"a":` + nested(`{"properties":{"a":`, `}}`, 100, `{}`) + `}`), "MaxDepth", "nested more than"},
	{"deep along references", object(`"$ref":"#/$defs/d0","$defs":{` + join(limits.MaxDepth, func(i int) string {
		return fmt.Sprintf(`"d%d":{"properties":{"a":{"$ref":"#/$defs/d%d"}}}`, i, i+1)
	}) + fmt.Sprintf(`,"d%d":{}}`, limits.MaxDepth)), "MaxDepth", "when references are followed"},
	{"doubling allOf chain", object(`"$ref":"#/$defs/d0",` + doubling(30, "allOf")), "MaxExpanded", "expands to more than"},
	{"doubling anyOf chain", object(`"$ref":"#/$defs/d0",` + doubling(30, "anyOf")), "MaxExpanded", "expands to more than"},
	{"doubling through properties", object(`"properties":{"a":{"$ref":"#/$defs/d0"}},"$defs":{` + join(20, func(i int) string {
		return fmt.Sprintf(`"d%d":{"properties":{"x":{"$ref":"#/$defs/d%d"},"y":{"$ref":"#/$defs/d%d"}}}`, i, i+1, i+1)
	}) + `,"d20":{}}`), "MaxExpanded", "expands"},
	{"bytes", object(`"description":"` + strings.Repeat("x", limits.MaxBytes) + `"`), "MaxBytes", "larger than"},
	{"patterns", object(`"properties":{` + join(limits.MaxPatternSize/1000+1, func(i int) string { return fmt.Sprintf(`"p%d":{"pattern":"a{1000}"}`, i) }) + `}`), "MaxPatternSize", "regular expressions"},
	{"patterns in draft-07's $defs", `{"$schema":"http://json-schema.org/draft-07/schema#","type":"object","$defs":{` + join(limits.MaxPatternSize/1000+1, func(i int) string { return fmt.Sprintf(`"p%d":{"pattern":"a{1000}"}`, i) }) + `}}`, "MaxPatternSize", "regular expressions"},
	{"large exponent", object(`"properties":{"a":{"maximum":1e999999}}`), "MaxNumberExponent", "exponent"},
	{"branches", object(`"anyOf":[` + join(limits.MaxBranches+1, func(int) string { return `{}` }) + `]`), "MaxBranches", "branches"},
	{"array root", `[{"type":"object"}]`, "", "root must be a JSON object"},
	{"string root", `"object"`, "", "root must be a JSON object"},
	{"boolean root", `true`, "", "root must be a JSON object"},
	{"root of another type", `{"type":"array"}`, "", `"type": "object"`},
	{"null subschema", object(`"allOf":[null]`), "", "null"},
	{"not JSON", `{"type":`, "", "unexpected"},
	{"two values", `{"type":"object"} {}`, "", "more than one JSON value"},
}

func TestCompileToolSchemaRefuses(t *testing.T) {
	for _, tt := range hostileToolSchemas {
		t.Run(tt.name, func(t *testing.T) {
			s, err := CompileToolSchema(json.RawMessage(tt.schema))
			if err == nil {
				t.Fatalf("compiled: %p", s)
			}
			var ie *InputError
			if !errors.As(err, &ie) || ie.Kind != ErrInvalidSchema || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("err = %v; want an *InputError of kind ErrInvalidSchema saying %q", err, tt.want)
			}
			var le *limits.Error
			if got := ""; errors.As(err, &le) && le.Limit != tt.limit || !errors.As(err, &le) && tt.limit != got {
				t.Errorf("err = %v; want the limit %q", err, tt.limit)
			}
		})
	}
}

// createTicket is the input schema of a realistic MCP tool.
const createTicket = `{
	"type": "object",
	"properties": {
		"title": {"type": "string", "minLength": 1, "maxLength": 200},
		"priority": {"type": "string", "enum": ["low", "normal", "high", "urgent"]},
		"labels": {"type": "array", "items": {"type": "string", "pattern": "^[a-z][a-z0-9-]*$"}, "uniqueItems": true, "maxItems": 10},
		"assignee": {"type": ["string", "null"]},
		"due": {"type": "object", "properties": {"date": {"type": "string", "format": "date"}, "hard": {"type": "boolean"}}, "required": ["date"], "additionalProperties": false},
		"estimate": {"type": "number", "minimum": 0, "maximum": 1000, "multipleOf": 0.5}
	},
	"required": ["title", "priority"],
	"additionalProperties": false
}`

func TestCompileToolSchemaAccepts(t *testing.T) {
	generated, err := jsonschema.For[struct {
		Name  string   `json:"name"`
		Tags  []string `json:"tags,omitempty"`
		Inner struct {
			N int `json:"n"`
		} `json:"inner"`
	}](nil)
	if err != nil {
		t.Fatal(err)
	}
	raw, err := json.Marshal(generated)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name, schema, valid, invalid string
	}{
		{"realistic", createTicket, `{"title":"x","priority":"low","labels":["a","b"],"estimate":1.5}`, `{"title":"x","priority":"low","labels":["a","a"]}`},
		{"generated by the agent", string(raw), `{"name":"a","inner":{"n":1}}`, `{"name":"a","inner":{"n":"1"}}`},
		{"tree, recursive through a property", object(`"properties":{"root":{"$ref":"#/$defs/node"}},"$defs":{"node":{"type":"object","properties":{"value":{"type":"integer"},"children":{"type":"array","items":{"$ref":"#/$defs/node"}}}}}`),
			`{"root":{"value":1,"children":[{"value":2,"children":[]}]}}`, `{"root":{"value":1,"children":[{"value":"2"}]}}`},
		{"recursion to the root", object(`"properties":{"next":{"$ref":"#"}}`), `{"next":{"next":{}}}`, `{"next":{"next":1}}`},
		{"draft-07, references into properties", `{"$schema":"http://json-schema.org/draft-07/schema#","type":"object","properties":{"a":{"type":"string"},"b":{"$ref":"#/properties/a"}},"definitions":{"n":{"type":"number"}},"additionalProperties":{"$ref":"#/definitions/n"}}`,
			`{"a":"x","b":"y","c":1}`, `{"b":1}`},
		{"escaped pointer", object(`"properties":{"a":{"$ref":"#/$defs/a~1b%20c"}},"$defs":{"a/b c":{"type":"string"}}`), `{"a":"x"}`, `{"a":1}`},
		{"root $id", object(`"$id":"https://example.com/tool","properties":{"a":{"$ref":"#/$defs/s"}},"$defs":{"s":{"type":"string"}}`), `{"a":"x"}`, `{"a":1}`},
		{"a cycle nothing uses", object(`"$defs":{"a":{"$ref":"#/$defs/a"}}`), `{}`, `[]`},
		{"allOf chain under MaxExpanded", object(`"$ref":"#/$defs/d0",` + doubling(10, "allOf")), `{}`, `1`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, err := CompileToolSchema(json.RawMessage(tt.schema))
			if err != nil {
				t.Fatalf("CompileToolSchema: %v", err)
			}
			if string(s.Raw()) != tt.schema {
				t.Errorf("Raw() = %s, want the schema as given", s.Raw())
			}
			if problems, err := s.Validate(t.Context(), json.RawMessage(tt.valid)); problems != nil || err != nil {
				t.Errorf("Validate(%.200s) = %.200q, %v; want it valid", tt.valid, problems, err)
			}
			if problems, err := s.Validate(t.Context(), json.RawMessage(tt.invalid)); len(problems) != 1 || err != nil {
				t.Errorf("Validate(%.200s) = %.200q, %v; want one problem", tt.invalid, problems, err)
			}
		})
	}
}

// TestToolSchemaFieldsAreKnown: the analysis knows every field of the
// validator's Schema that holds subschemas, so that none escapes the
// checks; a new one in a later version of the validator fails this test.
func TestToolSchemaFieldsAreKnown(t *testing.T) {
	var s jsonschema.Schema
	v := reflect.ValueOf(&s).Elem()
	fields := 0
	for i := range v.NumField() {
		f := v.Field(i)
		switch f.Type() {
		case reflect.TypeFor[*jsonschema.Schema]():
			f.Set(reflect.ValueOf(&jsonschema.Schema{}))
		case reflect.TypeFor[[]*jsonschema.Schema]():
			f.Set(reflect.ValueOf([]*jsonschema.Schema{{}}))
		case reflect.TypeFor[map[string]*jsonschema.Schema]():
			f.Set(reflect.ValueOf(map[string]*jsonschema.Schema{"k": {}}))
		default:
			continue
		}
		fields++
	}
	if fields < 20 {
		t.Fatalf("found %d fields of subschemas: is the test looking at the right type?", fields)
	}
	found := 0
	if err := eachSubschema(&s, func(*jsonschema.Schema, string) error { found++; return nil }); err != nil {
		t.Fatal(err)
	}
	if found != fields {
		t.Errorf("eachSubschema found %d subschemas of %d fields", found, fields)
	}
}

// A hostile case is a schema that compiles and a value to validate against
// it, built to cost as much as the limits allow; want is the limit that
// stops it, or "" when it is cheap enough to validate.
type hostileCase struct {
	name, schema, value, want string
}

// twice is a definition that applies itself to every item of an array
// twice, through items and contains.
const twice = `"$defs":{"t":{"type":"array","items":{"$ref":"#/$defs/t"},"contains":{"$ref":"#/$defs/t"}}}`

var hostileToolCases = []hostileCase{
	{"allOf chain under MaxExpanded, on every item", object(`"properties":{"a":{"items":{"$ref":"#/$defs/d0"}}},` + doubling(11, "allOf")),
		`{"a":[` + join(2000, func(int) string { return `{}` }) + `]}`, "MaxSteps"},
	{"allOf chain under MaxExpanded, on a few items", object(`"properties":{"a":{"items":{"$ref":"#/$defs/d0"}}},` + doubling(11, "allOf")),
		`{"a":[{},{}]}`, ""},
	{"items and contains recursion", object(`"properties":{"a":{"$ref":"#/$defs/t"}},` + twice),
		`{"a":` + nested("[", "]", limits.MaxInstanceDepth-1, "") + `}`, "MaxSteps"},
	{"items and contains recursion, shallow", object(`"properties":{"a":{"$ref":"#/$defs/t"}},` + twice),
		`{"a":` + nested("[", "]", 12, "") + `}`, ""},
	{"wide anyOf on every item", object(`"properties":{"a":{"items":{"anyOf":[` + join(limits.MaxBranches, func(i int) string { return fmt.Sprintf(`{"const":%d}`, i) }) + `]}}}`),
		`{"a":[` + join(2000, func(int) string { return `-1` }) + `]}`, "MaxSteps"},
	{"large enum on every item", object(`"properties":{"a":{"items":{"enum":[` + join(7000, func(i int) string { return fmt.Sprintf(`"%04d"`, i) }) + `]}}}`),
		`{"a":[` + join(30000, func(int) string { return `"x"` }) + `]}`, "MaxSteps"},
	{"number enum on every item", object(`"properties":{"a":{"items":{"enum":[` + join(9000, func(i int) string { return fmt.Sprintf(`%de3`, i) }) + `]}}}`),
		`{"a":[` + join(400, func(int) string { return `1e300` }) + `]}`, "MaxSteps"},
	{"uniqueItems", object(`"properties":{"a":{"uniqueItems":true,"items":{"type":"array"}}}`),
		`{"a":[` + join(5000, func(i int) string { return fmt.Sprintf(`[%d,[1,2,3]]`, i) }) + `]}`, ""},
	{"uniqueItems, more items", object(`"properties":{"a":{"uniqueItems":true,"items":{"type":"array"}}}`),
		`{"a":[` + join(50000, func(i int) string { return fmt.Sprintf(`[%d,[1,2,3]]`, i) }) + `]}`, "MaxSteps"},
	{"many patternProperties", object(`"patternProperties":{` + join(200, func(i int) string { return fmt.Sprintf(`"^(a|b|c|d)*%d$":{"type":"string"}`, i) }) + `}`),
		`{` + join(10000, func(i int) string { return fmt.Sprintf(`"abababab%d":1`, i) }) + `}`, "MaxSteps"},
	{"patterns at MaxPatternSize, on long strings", object(`"properties":{` + join(limits.MaxPatternSize/1001, func(i int) string { return fmt.Sprintf(`"p%d":{"pattern":"a{1000}b"}`, i) }) + `}`),
		`{` + join(limits.MaxPatternSize/1001, func(i int) string { return fmt.Sprintf(`"p%d":"%s"`, i, strings.Repeat("a", 4000)) }) + `}`, "MaxSteps"},
	{"the value quoted by many failing branches", object(`"anyOf":[` + join(1000, func(int) string { return `{"type":"array"}` }) + `]`),
		`{` + join(10000, func(i int) string { return fmt.Sprintf(`"k%d":"%s"`, i, strings.Repeat("v", 20)) }) + `}`, "MaxSteps"},
	{"the value quoted by a few failing branches", object(`"anyOf":[` + join(10, func(int) string { return `{"type":"array"}` }) + `]`),
		`{` + join(100, func(i int) string { return fmt.Sprintf(`"k%d":"%s"`, i, strings.Repeat("v", 20)) }) + `}`, ""},
	{"a long message wrapped deep", object(`"properties":{"a":{"$ref":"#/$defs/t"}},"$defs":{"t":{"anyOf":[{"type":"string","maxLength":1},{"type":"array","items":{"$ref":"#/$defs/t"}}]}}`),
		`{"a":` + nested("[", "]", limits.MaxInstanceDepth-1, `"`+strings.Repeat("x", 100000)+`"`) + `}`, "MaxSteps"},
	{"unevaluatedProperties with many branches", object(`"unevaluatedProperties":false,"anyOf":[` + join(1000, func(i int) string { return fmt.Sprintf(`{"properties":{"p%d":true}}`, i) }) + `]`),
		`{` + join(1500, func(i int) string { return fmt.Sprintf(`"q%d":1`, i) }) + `}`, "MaxSteps"},
	{"large const on every item", object(`"properties":{"a":{"items":{"const":{` + join(3000, func(i int) string { return fmt.Sprintf(`"k%d":%d`, i, i) }) + `}}}}`),
		`{"a":[` + join(80, func(int) string {
			return `{` + join(3000, func(i int) string { return fmt.Sprintf(`"k%d":%d`, i, i) }) + `}`
		}) + `]}`, "MaxSteps"},
	{"uniqueItems of small numbers", object(`"properties":{"a":{"uniqueItems":true}}`),
		`{"a":[` + join(50000, func(i int) string { return fmt.Sprintf(`%d.5e-300`, i) }) + `]}`, "MaxSteps"},
	{"uniqueItems of a few small numbers", object(`"properties":{"a":{"uniqueItems":true}}`),
		`{"a":[` + join(5000, func(i int) string { return fmt.Sprintf(`%d.5e-300`, i) }) + `]}`, ""},
	{"the value quoted by many failing branches, deep", object(`"anyOf":[` + join(1000, func(int) string { return `{"type":"array"}` }) + `]`),
		`{` + join(100, func(i int) string { return fmt.Sprintf(`"k%d":"%s"`, i, strings.Repeat("v", 20)) }) + `}`, "MaxSteps"},
	{"a large enum quoted at every level", object(`"properties":{"a":{"$ref":"#/$defs/t"}},"$defs":{"t":{"anyOf":[{"enum":[` + join(300, func(i int) string { return fmt.Sprintf(`"%0100d"`, i) }) + `]},{"type":"array","items":{"$ref":"#/$defs/t"}}]}}`),
		`{"a":` + nested("[", "]", 60, `"x"`) + `}`, "MaxSteps"},
	{"bounds that tiny numbers fail", object(`"properties":{"a":{"items":{"anyOf":[{"minimum":1e308},{"maximum":5e-324}]}}}`),
		`{"a":[` + join(5000, func(i int) string { return `1.7e-308` }) + `]}`, "MaxSteps"},
	{"bounds that a few tiny numbers fail", object(`"properties":{"a":{"items":{"anyOf":[{"minimum":1e308},{"maximum":5e-324}]}}}`),
		`{"a":[` + join(500, func(i int) string { return `1.7e-308` }) + `]}`, ""},
	{"many small objects", object(`"properties":{"a":{"items":{"type":"object","properties":{"x":{"type":"integer"},"y":{"type":"string"}},"required":["x"],"additionalProperties":false}}}`),
		`{"a":[` + join(5000, func(i int) string { return fmt.Sprintf(`{"x":%d,"y":"s"}`, i) }) + `]}`, ""},
	{"realistic", createTicket, `{"title":"` + strings.Repeat("t", 150) + `","priority":"high","labels":[` + join(10, func(i int) string { return fmt.Sprintf(`"l%d"`, i) }) + `],"due":{"date":"2026-01-01"},"estimate":3}`, ""},
}

// TestHostileToolInputs: checking an input against a compiled schema is
// refused, before the validator runs, as too costly when it would take more
// than MaxSteps; otherwise it runs, and ends.
func TestHostileToolInputs(t *testing.T) {
	for _, c := range hostileToolCases {
		t.Run(c.name, func(t *testing.T) {
			s, err := CompileToolSchema(json.RawMessage(c.schema))
			if err != nil {
				t.Fatalf("CompileToolSchema: %v", err)
			}
			s.timeout = time.Hour // the steps, not the time, decide
			problems, err := s.Validate(t.Context(), json.RawMessage(c.value))
			var le *limits.Error
			switch {
			case c.want == "" && err != nil:
				t.Fatalf("Validate: %v", err)
			case c.want != "" && (!errors.As(err, &le) || le.Limit != c.want || !errors.Is(err, ErrInvalidSchema)):
				t.Fatalf("Validate = %.200q, %v; want it refused for %s", problems, err, c.want)
			case c.want != "" && !strings.Contains(err.Error(), "too costly to check"):
				t.Errorf("the reason does not say that the input is too costly to check: %v", err)
			}
			for _, p := range problems {
				if len(p) > maxProblemBytes+len("…") {
					t.Errorf("a problem of %d bytes", len(p))
				}
			}
		})
	}
}

func TestToolSchemaValidateInputs(t *testing.T) {
	s, err := CompileToolSchema(json.RawMessage(object(`"properties":{"a":{}}`)))
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct{ name, value, want string }{
		{"not JSON", `{"a":`, "not valid JSON"},
		{"nested past MaxInstanceDepth", `{"a":` + nested("[", "]", limits.MaxInstanceDepth, "") + `}`, "(limit: MaxInstanceDepth)"},
		{"nested to MaxInstanceDepth", `{"a":` + nested("[", "]", limits.MaxInstanceDepth-1, "") + `}`, ""},
		{"a number out of range", `{"a":1e999}`, "not valid JSON"},
	}
	for _, tt := range tests {
		problems, err := s.Validate(t.Context(), json.RawMessage(tt.value))
		if err != nil || (tt.want == "") != (problems == nil) || !strings.Contains(strings.Join(problems, "\n"), tt.want) {
			t.Errorf("%s: Validate = %q, %v; want a problem saying %q", tt.name, problems, err, tt.want)
		}
	}
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if _, err := s.Validate(ctx, json.RawMessage(`{}`)); !errors.Is(err, context.Canceled) {
		t.Errorf("Validate with its context ended: %v", err)
	}
}

// TestToolSchemaConcurrentValidations: one compiled schema serves
// concurrent turns, each validation with its own budget: a costly input
// beside them leaves the others' alone. (The others are cheap enough to
// run without a clock, which a busy machine could otherwise run out.)
func TestToolSchemaConcurrentValidations(t *testing.T) {
	c := hostileToolCases[0]
	s, err := CompileToolSchema(json.RawMessage(c.schema))
	if err != nil {
		t.Fatal(err)
	}
	if steps, _ := s.cost(map[string]any{"a": []any{}}, limits.MaxSteps); steps > inlineSteps {
		t.Fatalf("the cheap input is estimated at %d steps, past inlineSteps", steps)
	}
	var wg sync.WaitGroup
	for i := range 16 {
		wg.Go(func() {
			value, want := `{"a":[]}`, false
			if i%4 == 0 {
				value, want = c.value, true
			}
			_, err := s.Validate(t.Context(), json.RawMessage(value))
			if (err != nil) != want {
				t.Errorf("validation %d: %v", i, err)
			}
		})
	}
	wg.Wait()
}

// BenchmarkHostileToolSchemas measures validating each hostile case's value
// against its schema, the validator run whatever the estimate, and reports
// the estimate's steps and the time a step took, which must stay under
// 100 ns for MaxSteps to take 100 ms:
//
//	go test -run='^$' -bench=HostileToolSchemas -benchtime=3x ./internal/agent
func BenchmarkHostileToolSchemas(b *testing.B) {
	for _, c := range hostileToolCases {
		b.Run(strings.ReplaceAll(c.name, " ", "_"), func(b *testing.B) {
			s, err := CompileToolSchema(json.RawMessage(c.schema))
			if err != nil {
				b.Fatal(err)
			}
			var v any
			if err := json.Unmarshal([]byte(c.value), &v); err != nil {
				b.Fatal(err)
			}
			steps, ok := s.cost(v, 20*limits.MaxSteps)
			if !ok {
				b.Skipf("more than %d steps: too many to run", 20*limits.MaxSteps)
			}
			var estimating time.Duration
			for b.Loop() {
				start := time.Now()
				s.cost(v, limits.MaxSteps)
				estimating += time.Since(start)
				_ = s.resolved.Validate(v)
			}
			b.ReportMetric(float64(steps), "steps")
			b.ReportMetric(float64(b.Elapsed()-estimating)/float64(b.N)/float64(max(steps, 1)), "ns/step")
			b.ReportMetric(float64(estimating.Microseconds())/float64(b.N), "µs-estimating")
		})
	}
}

// FuzzToolSchema compiles arbitrary tool schemas and validates arbitrary
// inputs against those that compile: nothing panics, every refusal of a
// schema is an *InputError of kind ErrInvalidSchema, a schema that compiles
// is kept as it came, and a validation returns (the validator does not
// recurse without end: the test binary would die of it) with problems,
// nothing, or the input refused as too costly, having run only when the
// estimate was within MaxSteps. The seeds are the hostile schemas above: a
// $ref cycle, a self reference, remote references, 200-deep nesting, roots
// that are not objects, doubling allOf chains, and the hostile inputs.
func FuzzToolSchema(f *testing.F) {
	for _, s := range hostileToolSchemas {
		if len(s.schema) < 4096 {
			f.Add([]byte(s.schema), []byte(`{}`))
		}
	}
	for _, c := range hostileToolCases {
		if len(c.schema)+len(c.value) < 8192 {
			f.Add([]byte(c.schema), []byte(c.value))
		}
	}
	f.Add([]byte(createTicket), []byte(`{"title":"x","priority":"low"}`))
	f.Add([]byte(object(`"properties":{"a":{"$ref":"#/$defs/t"}},`+twice)), []byte(`{"a":[[[[[[[[[[[[[[[[]]]]]]]]]]]]]]]]}`))
	f.Fuzz(func(t *testing.T, schema, value []byte) {
		s, err := CompileToolSchema(schema)
		if err != nil {
			var ie *InputError
			if !errors.As(err, &ie) || ie.Kind != ErrInvalidSchema {
				t.Fatalf("CompileToolSchema: %v, not an *InputError of kind ErrInvalidSchema", err)
			}
			return
		}
		if string(s.Raw()) != string(schema) {
			t.Fatalf("Raw() = %q, want the schema as given", s.Raw())
		}
		s.timeout = time.Hour // the step bound, not the clock, must end it
		problems, err := s.Validate(t.Context(), value)
		switch {
		case err != nil && !errors.Is(err, ErrInvalidSchema):
			t.Fatalf("Validate: %v, not of kind ErrInvalidSchema", err)
		case err != nil && problems != nil:
			t.Fatalf("Validate returned both problems %q and %v", problems, err)
		case len(problems) > 1 || len(problems) == 1 && len(problems[0]) > maxProblemBytes+len("…"):
			t.Fatalf("Validate returned %d problems, the first of %d bytes", len(problems), len(problems[0]))
		}
		var v any
		if err == nil && json.Unmarshal(value, &v) == nil {
			if _, deep := limits.CheckJSON(v, limits.MaxInstanceDepth, ""); deep == nil {
				if steps, ok := s.cost(v, limits.MaxSteps); !ok {
					t.Fatalf("the validator ran on an input estimated at %d steps, past MaxSteps", steps)
				}
			}
		}
	})
}

// compiledTool is a tool that brings its schema compiled.
type compiledTool struct {
	spec   ToolSpec
	schema *ToolSchema
}

func (t *compiledTool) Spec() ToolSpec                                              { return t.spec }
func (t *compiledTool) CompiledSchema() *ToolSchema                                 { return t.schema }
func (t *compiledTool) Run(context.Context, *ToolCall) ([]ToolResultContent, error) { return nil, nil }

type toolList []Tool

func (l toolList) Tools(context.Context) []Tool { return l }

// TestToolSetSchemasAreCompiledOnce: the agent uses the schema a tool
// brings compiled, through RequireApproval too, at every turn, but not one
// compiled from other JSON than its spec's; a schema it compiles itself,
// and one that does not compile, it compiles once.
func TestToolSetSchemasAreCompiledOnce(t *testing.T) {
	const raw = `{"type":"object","properties":{"n":{"type":"integer"}}}`
	brought, err := CompileToolSchema(json.RawMessage(raw))
	if err != nil {
		t.Fatal(err)
	}
	other, err := CompileToolSchema(json.RawMessage(`{"type":"object"}`))
	if err != nil {
		t.Fatal(err)
	}
	spec := func(name, schema string) ToolSpec { return ToolSpec{Name: name, InputSchema: json.RawMessage(schema)} }
	set := toolList{
		&compiledTool{spec("brings", raw), brought},
		RequireApproval(&compiledTool{spec("approved", raw), brought}),
		&compiledTool{spec("lies", raw), other},
		&compiledTool{spec("plain", raw), nil},
		&compiledTool{spec("cycle", object(`"$ref":"#"`)), nil},
	}
	a := &Agent{cfg: Config{ToolSets: []ToolSet{set}}, box: toolbox{tools: map[string]*registered{}}}
	first := a.toolbox(t.Context())
	for _, name := range []string{"brings", "approved"} {
		if first.tools[name].schema != brought {
			t.Errorf("%s: the agent compiled the schema the tool brings again", name)
		}
	}
	lies := first.tools["lies"].schema
	if lies == other || lies == nil || string(lies.Raw()) != raw {
		t.Errorf("the agent used a schema compiled from other JSON than the spec's")
	}
	if _, ok := first.tools["cycle"]; ok {
		t.Error("a tool whose schema does not compile joined the turn")
	}
	second := a.toolbox(t.Context())
	if second.tools["plain"].schema != first.tools["plain"].schema {
		t.Error("the agent compiled a tool's schema again at the next turn")
	}
	_, err1 := a.compiled(set[4], set[4].Spec())
	_, err2 := a.compiled(set[4], set[4].Spec())
	if err1 == nil || err1 != err2 {
		t.Errorf("a schema that does not compile: %v, then %v; want the same error, remembered", err1, err2)
	}
}

// BenchmarkCompileToolSchema measures compiling a realistic tool schema,
// as a request that brings its own tools would for each, and the costliest
// schemas within the budget:
//
//	go test -run='^$' -bench=CompileToolSchema ./internal/agent
func BenchmarkCompileToolSchema(b *testing.B) {
	cases := []struct{ name, schema string }{
		{"realistic", createTicket},
		{"nesting at MaxDepth, 64 KB", object(`"properties":{` + join(90, func(i int) string {
			return fmt.Sprintf(`"p%d":%s`, i, nested(`{"properties":{"a":`, `}}`, limits.MaxDepth/2-2, `{}`))
		}) + `}`)},
		{"subschemas near MaxSubschemas", object(`"properties":{"a":{"prefixItems":[` + join(limits.MaxSubschemas-10, func(int) string { return `{}` }) + `]}}`)},
		{"patterns at MaxPatternSize", object(`"properties":{` + join(limits.MaxPatternSize/1001, func(i int) string { return fmt.Sprintf(`"p%d":{"pattern":"a{1000}b"}`, i) }) + `}`)},
		{"allOf chain under MaxExpanded", object(`"$ref":"#/$defs/d0",` + doubling(11, "allOf"))},
	}
	for _, c := range cases {
		b.Run(strings.ReplaceAll(c.name, " ", "_"), func(b *testing.B) {
			if len(c.schema) > limits.MaxBytes {
				b.Fatalf("%d bytes", len(c.schema))
			}
			b.ReportAllocs()
			for b.Loop() {
				if _, err := CompileToolSchema(json.RawMessage(c.schema)); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// TestToolSchemaClock: the clock bounds only validations estimated past
// inlineSteps; a cheap one runs without it, so that a busy machine cannot
// make it fail.
func TestToolSchemaClock(t *testing.T) {
	c := hostileToolCases[len(hostileToolCases)-2] // many small objects
	s, err := CompileToolSchema(json.RawMessage(c.schema))
	if err != nil {
		t.Fatal(err)
	}
	s.timeout = time.Nanosecond
	var v any
	if err := json.Unmarshal([]byte(c.value), &v); err != nil {
		t.Fatal(err)
	}
	if steps, _ := s.cost(v, limits.MaxSteps); steps <= inlineSteps {
		t.Fatalf("the costly case is estimated at %d steps, not past inlineSteps (%d)", steps, inlineSteps)
	}
	var le *limits.Error
	if _, err := s.Validate(t.Context(), json.RawMessage(c.value)); !errors.As(err, &le) || le.Limit != "MaxValidateTime" {
		t.Errorf("a costly validation past its time: %v, want it refused for MaxValidateTime", err)
	}
	if problems, err := s.Validate(t.Context(), json.RawMessage(`{"a":[{"x":1},{"x":"two"}]}`)); err != nil || len(problems) != 1 {
		t.Errorf("a cheap validation with no time: %q, %v; want its one problem", problems, err)
	}
}
