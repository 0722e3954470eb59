package schema

import (
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/lambda-agent/lambda-agent/internal/agent"
)

// invoiceSchema is a realistic extraction schema of 57 KB: definitions used
// many times, a recursive one, enums of currencies and countries, patterns,
// formats, nullable fields, a discriminated oneOf and 170 described fields.
// invoice is a 37 KB value valid against it.
var (
	//go:embed testdata/invoice.schema.json
	invoiceSchema json.RawMessage
	//go:embed testdata/invoice.json
	invoice json.RawMessage
)

// wantLimit checks that err refuses a schema for the named limit.
func wantLimit(t *testing.T, err error, limit string) {
	t.Helper()
	var ie *agent.InputError
	if !errors.As(err, &ie) || ie.Kind != agent.ErrInvalidSchema {
		t.Fatalf("err = %v, want an *agent.InputError of kind ErrInvalidSchema", err)
	}
	if !strings.Contains(err.Error(), "(limit: "+limit+")") {
		t.Errorf("err = %v, want it to name %s", err, limit)
	}
}

func TestCompileLimits(t *testing.T) {
	tests := []struct {
		name, schema, limit string
	}{
		{"bytes", object(`"description":"` + strings.Repeat("x", MaxBytes) + `"`), "MaxBytes"},
		{"nesting as JSON", object(`"properties":{"a":` + nested(`{"properties":{"a":`, `}}`, MaxDepth/2, `{}`) + `}`), "MaxDepth"},
		{"nesting in a value", object(`"default":` + nested(`[`, `]`, MaxDepth, ``)), "MaxDepth"},
		{"nesting along references", object(`"$ref":"#/$defs/d0","$defs":{` + join(MaxDepth, func(i int) string {
			return fmt.Sprintf(`"d%d":{"properties":{"a":{"$ref":"#/$defs/d%d"}}}`, i, i+1)
		}) + fmt.Sprintf(`,"d%d":{}}`, MaxDepth)), "MaxDepth"},
		{"subschemas", object(`"properties":{"a":{"prefixItems":[` + join(MaxSubschemas, func(int) string { return `{}` }) + `]}}`), "MaxSubschemas"},
		{"resources", object(`"properties":{` + join(MaxResources+1, func(i int) string { return fmt.Sprintf(`"%d":{"$id":"r%d"}`, i, i) }) + `}`), "MaxResources"},
		{"branches", object(`"anyOf":[` + join(MaxBranches+1, func(int) string { return `{}` }) + `]`), "MaxBranches"},
		{"branches of every kind", object(`"properties":{` + join(MaxBranches/4+1, func(i int) string {
			return fmt.Sprintf(`"p%d":{"not":{},"if":{},"then":{},"else":{}}`, i)
		}) + `}`), "MaxBranches"},
		{"references", object(`"$defs":{"x":{}},"properties":{` + join(MaxRefs+1, func(i int) string { return fmt.Sprintf(`"%d":{"$ref":"#/$defs/x"}`, i) }) + `}`), "MaxRefs"},
		{"expanded, allOf", object(`"$ref":"#/$defs/d0",` + refChain(30, "allOf")), "MaxExpanded"},
		{"expanded, anyOf", object(`"$ref":"#/$defs/d0",` + refChain(30, "anyOf")), "MaxExpanded"},
		{"expanded, oneOf", object(`"$ref":"#/$defs/d0",` + refChain(30, "oneOf")), "MaxExpanded"},
		{"expanded, through values", object(`"properties":{"a":{"$ref":"#/$defs/d0"}},"$defs":{` + join(20, func(i int) string {
			return fmt.Sprintf(`"d%d":{"properties":{"x":{"$ref":"#/$defs/d%d"},"y":{"$ref":"#/$defs/d%d"}}}`, i, i+1, i+1)
		}) + `,"d20":{}}`), "MaxExpanded"},
		{"expanded, recursion beside a chain", object(`"$ref":"#/$defs/d0",` + strings.Replace(refChain(14, "allOf"), `"d14":{"type":"object"}`, `"d14":{"items":{"$ref":"#"}}`, 1)), "MaxExpanded"},
		{"pattern size", object(`"properties":{` + join(MaxPatternSize/1000+1, func(i int) string { return fmt.Sprintf(`"p%d":{"pattern":"a{1000}"}`, i) }) + `}`), "MaxPatternSize"},
		{"patternProperties size", object(`"patternProperties":{` + join(MaxPatternSize/1000+1, func(i int) string { return fmt.Sprintf(`"^p%d(a{999})$":{}`, i) }) + `}`), "MaxPatternSize"},
		{"long number", object(`"properties":{"a":{"maximum":1` + strings.Repeat("0", MaxNumberLength) + `}}`), "MaxNumberLength"},
		{"large exponent", object(`"properties":{"a":{"minimum":1e999999}}`), "MaxNumberExponent"},
		{"small exponent", object(`"properties":{"a":{"multipleOf":1e-401}}`), "MaxNumberExponent"},
		{"large exponent in an enum", object(`"properties":{"a":{"enum":[1,2,3e999]}}`), "MaxNumberExponent"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.limit != "MaxBytes" && len(tt.schema) > MaxBytes {
				t.Fatalf("the schema has %d bytes: it would be refused for its size", len(tt.schema))
			}
			_, err := Compile(json.RawMessage(tt.schema))
			wantLimit(t, err, tt.limit)
		})
	}
}

func TestCompileLimitsShowWhere(t *testing.T) {
	tests := []struct {
		name, schema, want string
	}{
		{"first expanded definition", object(`"$ref":"#/$defs/d0",` + refChain(30, "allOf")), "/$defs/d18"},
		{"too deep", object(`"properties":{"a~b/c":` + nested(`{"items":`, `}`, MaxDepth, `{}`) + `}`), "/properties/a~0b~1c/items/items"},
		{"number", object(`"properties":{"a":{"minimum":1e999999}}`), "/properties/a/minimum"},
		{"pattern", object(`"properties":{"a":{"pattern":"` + strings.Repeat("a?", MaxPatternSize/2) + `"}}`), "/properties/a/pattern"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Compile(json.RawMessage(tt.schema))
			if !errors.Is(err, agent.ErrInvalidSchema) || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("err = %v, want ErrInvalidSchema mentioning %q", err, tt.want)
			}
		})
	}
}

func TestCompileRefusesReferencesItCannotBound(t *testing.T) {
	tests := []struct {
		name, schema, want string
	}{
		{"into a non-schema keyword", object(`"properties":{"a":{"$ref":"#/x"}},"x":{"type":"integer"}`), "not a subschema"},
		{"into an enum", object(`"properties":{"a":{"enum":[{"type":"string"}]},"b":{"$ref":"#/properties/a/enum/0"}}`), "not a subschema"},
		{"into $defs under draft-07", `{"$schema":"http://json-schema.org/draft-07/schema#","type":"object","properties":{"a":{"$ref":"#/$defs/x"}},"$defs":{"x":{}}}`, "not a subschema"},
		{"to a meta-schema", object(`"properties":{"s":{"$ref":"https://json-schema.org/draft/2020-12/schema"}}`), "outside the schema"},
		{"to itself", object(`"$ref":"#/$defs/x","$defs":{"x":{"$ref":"#/$defs/x"}}`), "applies itself to the same value"},
		{"to itself through allOf", object(`"$ref":"#/$defs/a","$defs":{"a":{"allOf":[{"$ref":"#/$defs/b"}]},"b":{"anyOf":[{"type":"string"},{"$ref":"#/$defs/a"}]}}`), "applies itself to the same value"},
		{"to the root, beside it", object(`"anyOf":[{"required":["a"]},{"$ref":"#"}]`), "applies itself to the same value"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Compile(json.RawMessage(tt.schema))
			if !errors.Is(err, agent.ErrInvalidSchema) || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("err = %v, want ErrInvalidSchema mentioning %q", err, tt.want)
			}
		})
	}
}

// TestLegitimateSchemas checks schemas that come near the limits, or use the
// features the limits reason about, without being hostile.
func TestLegitimateSchemas(t *testing.T) {
	tests := []struct {
		name, schema string
		valid        []string
		invalid      []string
	}{
		{"recursive tree", object(`"properties":{"name":{"type":"string"},"children":{"type":"array","items":{"$ref":"#"}}},"required":["name"]`),
			[]string{`{"name":"a","children":[{"name":"b","children":[{"name":"c"}]},{"name":"d"}]}`, `{"name":"x","children":` + nested(`[{"name":"x","children":`, `}]`, MaxInstanceDepth/2-1, `[]`) + `}`},
			[]string{`{"name":"a","children":[{"name":"b","children":[{}]}]}`}},
		{"binary tree in $defs", object(`"properties":{"root":{"$ref":"#/$defs/node"}},"$defs":{"node":{"type":["object","null"],"properties":{"left":{"$ref":"#/$defs/node"},"right":{"$ref":"#/$defs/node"},"v":{"type":"integer"}}}}`),
			[]string{`{"root":{"v":1,"left":{"v":2,"left":null},"right":{"v":3,"right":{"v":4}}}}`},
			[]string{`{"root":{"v":1,"left":{"v":"2"}}}`}},
		{"escaped references", object(`"properties":{"a":{"$ref":"#/$defs/a~1b"},"b":{"$ref":"#/$defs/c~0d"},"c":{"$ref":"#/$defs/e%20f"}},"$defs":{"a/b":{"type":"integer"},"c~d":{"type":"string"},"e f":{"type":"boolean"}}`),
			[]string{`{"a":1,"b":"x","c":true}`},
			[]string{`{"a":"1"}`, `{"b":1}`, `{"c":1}`}},
		{"anchors and ids", object(`"$id":"https://example.com/root.json","properties":{"a":{"$ref":"#int"},"b":{"$ref":"item.json"},"c":{"$ref":"item.json#/properties/n"}},"$defs":{"i":{"$anchor":"int","type":"integer"},"item":{"$id":"item.json","type":"object","properties":{"n":{"type":"number"}}}}`),
			[]string{`{"a":1,"b":{"n":2},"c":3}`},
			[]string{`{"a":"x"}`, `{"b":{"n":"x"}}`, `{"c":"x"}`}},
		{"dynamic reference", object(`"$id":"https://example.com/tree","$dynamicAnchor":"node","properties":{"kids":{"type":"array","items":{"$dynamicRef":"#node"}},"v":{"type":"integer"}}`),
			[]string{`{"v":1,"kids":[{"v":2,"kids":[{"v":3}]}]}`},
			[]string{`{"kids":[{"v":"x"}]}`}},
		{"dynamic anchor under an odd name", object(`"$id":"https://example.com/t","$defs":{"a b%c~d/e":{"$dynamicAnchor":"x","type":"integer"}},"properties":{"v":{"$dynamicRef":"#x"}}`),
			[]string{`{"v":1}`},
			[]string{`{"v":"s"}`}},
		{"recursive reference, draft 2019-09", `{"$schema":"https://json-schema.org/draft/2019-09/schema","$recursiveAnchor":true,"type":"object","properties":{"kids":{"type":"array","items":{"$recursiveRef":"#"}},"v":{"type":"integer"}}}`,
			[]string{`{"kids":[{"kids":[{"v":3}]}]}`},
			[]string{`{"kids":[{"v":"x"}]}`}},
		{"draft-07 with definitions", `{"$schema":"http://json-schema.org/draft-07/schema#","type":"object","properties":{"a":{"$ref":"#/definitions/a"}},"definitions":{"a":{"type":"string","format":"email"}}}`,
			[]string{`{"a":"ada@example.com"}`},
			[]string{`{"a":"ada"}`, `{"a":1}`}},
		{"unevaluatedProperties", object(`"properties":{"a":true},"anyOf":[{"properties":{"b":true}},{"properties":{"c":true}}],"unevaluatedProperties":false`),
			[]string{`{"a":1,"b":2}`, `{"c":1}`},
			[]string{`{"d":1}`}},
		{"a chain just under MaxExpanded", object(`"$ref":"#/$defs/d0",` + refChain(11, "allOf")), []string{`{}`}, []string{`[]`}},
		{"nesting at MaxDepth", object(`"properties":{"a":` + nested(`{"properties":{"a":`, `}}`, MaxDepth/2-2, `{"type":"integer"}`) + `}`),
			[]string{`{"a":` + nested(`{"a":`, `}`, MaxDepth/2-2, `1`) + `}`},
			[]string{`{"a":` + nested(`{"a":`, `}`, MaxDepth/2-2, `"1"`) + `}`}},
		{"patterns under MaxPatternSize", object(`"properties":{` + join(MaxPatternSize/2010, func(i int) string { return fmt.Sprintf(`"p%d":{"pattern":"^a{3,1000}$"}`, i) }) + `}`),
			[]string{`{"p0":"aaaa","p1":"` + strings.Repeat("a", 1000) + `"}`},
			[]string{`{"p0":"aa"}`}},
		{"the largest numbers", object(`"properties":{"a":{"maximum":1e400,"multipleOf":1e-400}}`),
			[]string{`{"a":12}`},
			[]string{`{"a":1e401}`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, err := Compile(json.RawMessage(tt.schema))
			if err != nil {
				t.Fatal(err)
			}
			for _, v := range tt.valid {
				if p, err := s.Validate(t.Context(), json.RawMessage(v)); p != nil || err != nil {
					t.Errorf("Validate(%.80s) = %q, %v; want it valid", v, p, err)
				}
			}
			for _, v := range tt.invalid {
				if p, err := s.Validate(t.Context(), json.RawMessage(v)); p == nil || err != nil {
					t.Errorf("Validate(%.80s) = %q, %v; want problems", v, p, err)
				}
			}
		})
	}
}

func TestRealisticSchema(t *testing.T) {
	if len(invoiceSchema) < 30<<10 || len(invoiceSchema) > MaxBytes {
		t.Fatalf("the fixture has %d bytes", len(invoiceSchema))
	}
	s, err := Compile(invoiceSchema)
	if err != nil {
		t.Fatal(err)
	}
	if p, err := s.Validate(t.Context(), invoice); p != nil || err != nil {
		t.Fatalf("Validate = %q, %v; want it valid", p, err)
	}
	// A value that breaks a definition used deep inside.
	bad := strings.Replace(string(invoice), `"currency": "EUR"`, `"currency": "EURO"`, 1)
	p, err := s.Validate(t.Context(), json.RawMessage(bad))
	if err != nil || !strings.Contains(strings.Join(p, "\n"), "/currency: value must be one of") {
		t.Errorf("Validate = %q, %v; want the currency refused", p, err)
	}
	// Realistic values use a small part of the budget, which the request's
	// validations share: a structured turn's three attempts fit with room,
	// and so do values several times this size.
	if used := MaxSteps - s.(*compiled).meter.left; used > MaxSteps/5 {
		t.Errorf("validating the %d-byte value twice took %d steps, more than a fifth of MaxSteps", len(invoice), used)
	}
}

func TestCheckNumber(t *testing.T) {
	tests := []struct {
		n, limit string
	}{
		{"0", ""},
		{"-12.5", ""},
		{"1e400", ""},
		{"1E-400", ""},
		{"1e+400", ""},
		{"1e401", "MaxNumberExponent"},
		{"1e-401", "MaxNumberExponent"},
		{"1e99999999999999999999", "MaxNumberExponent"},
		{strings.Repeat("9", MaxNumberLength), ""},
		{strings.Repeat("9", MaxNumberLength+1), "MaxNumberLength"},
	}
	for _, tt := range tests {
		if _, limit := checkNumber(tt.n); limit != tt.limit {
			t.Errorf("checkNumber(%.20s) = %q, want %q", tt.n, limit, tt.limit)
		}
	}
}

func TestPatternSize(t *testing.T) {
	// The estimate is close to what Go compiles, never much below it.
	tests := []struct {
		pattern  string
		min, max int
	}{
		{"a{999}", 999, 1100},
		{"a{0,999}", 1900, 2100},
		{"(ab){10,20}", 80, 120},
		{`^[A-Z]{2}[0-9]{2}[A-Z0-9]{1,30}$`, 60, 100},
		{strings.Repeat("a?", 100) + "b", 200, 320},
		{"(x{1000}){1000}", 1, 1}, // Go refuses it
	}
	for _, tt := range tests {
		if got := patternSize(tt.pattern); got < tt.min || got > tt.max {
			t.Errorf("patternSize(%.30s) = %d, want %d to %d", tt.pattern, got, tt.min, tt.max)
		}
	}
}
