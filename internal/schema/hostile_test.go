package schema

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/lambda-agent/lambda-agent/internal/agent"
)

// A hostile case is a schema of up to MaxBytes and a value to validate
// against it, built to cost as much as the limits allow; want is the limit
// that stops it, or "" when it is cheap enough to validate.
type hostileCase struct {
	name          string
	schema, value string
	want          string
}

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

// refChain is n definitions, each applying the next twice through keyword:
// 2^n paths from d0.
func refChain(n int, keyword string) string {
	return fmt.Sprintf(`"$defs":{%s,"d%d":{"type":"object"}}`, join(n, func(i int) string {
		return fmt.Sprintf(`"d%d":{%q:[{"$ref":"#/$defs/d%d"},{"$ref":"#/$defs/d%d"}]}`, i, keyword, i+1, i+1)
	}), n)
}

// nested is inner inside n pairs of open and close.
func nested(open, close string, n int, inner string) string {
	return strings.Repeat(open, n) + inner + strings.Repeat(close, n)
}

// twice is a definition that applies itself to every item of an array twice,
// through items and contains.
const twice = `"$defs":{"t":{"type":"array","items":{"$ref":"#/$defs/t"},"contains":{"$ref":"#/$defs/t"}}}`

// hostileCases are the worst shapes found. BenchmarkHostileSchemas measures
// them; TestHostileSchemas checks how each ends.
var hostileCases = []hostileCase{
	{"allOf chain, 2 KB", object(`"$ref":"#/$defs/d0",` + refChain(30, "allOf")), `{}`, "MaxExpanded"},
	{"anyOf chain, 2 KB", object(`"$ref":"#/$defs/d0",` + refChain(30, "anyOf")), `{}`, "MaxExpanded"},
	{"oneOf chain, 2 KB", object(`"$ref":"#/$defs/d0",` + refChain(30, "oneOf")), `{}`, "MaxExpanded"},
	{"items and contains chain, 2 KB", object(`"$ref":"#/$defs/d0","$defs":{` + join(30, func(i int) string {
		return fmt.Sprintf(`"d%d":{"items":{"$ref":"#/$defs/d%d"},"contains":{"$ref":"#/$defs/d%d"}}`, i, i+1, i+1)
	}) + `,"d30":true}`), `{}`, "MaxExpanded"},
	{"allOf chain under MaxExpanded, on every item", object(`"properties":{"a":{"items":{"$ref":"#/$defs/d0"}}},` + refChain(11, "allOf")),
		`{"a":[` + join(20000, func(int) string { return `{}` }) + `]}`, "MaxSteps"},
	{"items and contains recursion", object(`"properties":{"a":{"$ref":"#/$defs/t"}},` + twice),
		`{"a":` + nested("[", "]", MaxInstanceDepth-1, "") + `}`, "MaxSteps"},
	{"items and contains recursion under not", object(`"properties":{"a":{"not":{"$ref":"#/$defs/t"}}},` + twice),
		`{"a":` + nested("[", "]", MaxInstanceDepth-1, "1") + `}`, "MaxSteps"},
	{"prefixItems, items and contains recursion", object(`"properties":{"a":{"$ref":"#/$defs/t"}},"$defs":{"t":{"type":"array","prefixItems":[{"$ref":"#/$defs/t"},{"$ref":"#/$defs/t"}],"contains":{"$ref":"#/$defs/t"},"items":{"$ref":"#/$defs/t"}}}`),
		`{"a":` + nested("[", "]", 14, "") + `}`, ""},
	{"wide anyOf on every item", object(`"properties":{"a":{"items":{"anyOf":[` + join(MaxBranches, func(i int) string { return fmt.Sprintf(`{"const":%d}`, i) }) + `]}}}`),
		`{"a":[` + join(40000, func(int) string { return `-1` }) + `]}`, "MaxSteps"},
	{"large enum on every item", object(`"properties":{"a":{"items":{"enum":[` + join(7000, func(i int) string { return fmt.Sprintf(`"%04d"`, i) }) + `]}}}`),
		`{"a":[` + join(30000, func(int) string { return `"x"` }) + `]}`, "MaxSteps"},
	{"number enum on every item", object(`"properties":{"a":{"items":{"enum":[` + join(9000, func(i int) string { return fmt.Sprintf(`%de3`, i) }) + `]}}}`),
		`{"a":[` + join(40000, func(int) string { return `1e300` }) + `]}`, "MaxSteps"},
	{"uniqueItems", object(`"properties":{"a":{"uniqueItems":true,"items":{"type":"array"}}}`),
		`{"a":[` + join(20000, func(i int) string { return fmt.Sprintf(`[%d,[1,2,3]]`, i) }) + `]}`, ""},
	{"many patternProperties", object(`"patternProperties":{` + join(200, func(i int) string { return fmt.Sprintf(`"^(a|b|c|d)*%d$":{"type":"string"}`, i) }) + `}`),
		`{` + join(10000, func(i int) string { return fmt.Sprintf(`"abababab%d":1`, i) }) + `}`, "MaxSteps"},
	{"patterns at MaxPatternSize, on long strings", object(`"properties":{` + join(MaxPatternSize/1001, func(i int) string { return fmt.Sprintf(`"p%d":{"pattern":"a{1000}b"}`, i) }) + `}`),
		`{` + join(MaxPatternSize/1001, func(i int) string { return fmt.Sprintf(`"p%d":"%s"`, i, strings.Repeat("a", 4000)) }) + `}`, "MaxSteps"},
	{"large pattern", object(`"properties":{"a":{"pattern":"` + strings.Repeat(`a?`, MaxPatternSize/2) + `b"}}`), `{}`, "MaxPatternSize"},
	{"unevaluatedProperties with many branches", object(`"unevaluatedProperties":false,"anyOf":[` + join(1000, func(i int) string { return fmt.Sprintf(`{"properties":{"p%d":true}}`, i) }) + `]`),
		`{` + join(15000, func(i int) string { return fmt.Sprintf(`"q%d":1`, i) }) + `}`, "MaxSteps"},
	{"regex format on every item", `{"$schema":"http://json-schema.org/draft-07/schema#","type":"object","properties":{"a":{"items":{"format":"regex"}}}}`,
		`{"a":[` + join(200, func(int) string { return `"` + strings.Repeat(`(a{999})`, 100) + `"` }) + `]}`, "MaxSteps"},
	{"dynamicRef recursion", object(`"$id":"https://example.com/t","$dynamicAnchor":"n","properties":{"a":{"items":{"$dynamicRef":"#n"}},"b":{"items":{"$dynamicRef":"#n"}}}`),
		`{"a":[` + join(3000, func(int) string { return `{"a":[{"b":[{}]}],"b":[{"a":[]}]}` }) + `]}`, "MaxSteps"},
	{"large const on every item", object(`"properties":{"a":{"items":{"const":{` + join(3000, func(i int) string { return fmt.Sprintf(`"k%d":%d`, i, i) }) + `}}}}`),
		`{"a":[` + join(80, func(int) string {
			return `{` + join(3000, func(i int) string { return fmt.Sprintf(`"k%d":%d`, i, i) }) + `}`
		}) + `]}`, "MaxSteps"},
	{"nesting at MaxDepth, 64 KB", object(`"properties":{` + join(90, func(i int) string {
		return fmt.Sprintf(`"p%d":%s`, i, nested(`{"properties":{"a":`, `}}`, MaxDepth/2-2, `{}`))
	}) + `}`), `{}`, ""},
	{"subschemas at MaxSubschemas", object(`"properties":{"a":{"prefixItems":[` + join(MaxSubschemas-10, func(int) string { return `{}` }) + `]}}`),
		`{"a":[` + join(MaxSubschemas, func(int) string { return `{}` }) + `]}`, ""},
	{"resources at MaxResources", object(`"properties":{` + join(MaxResources, func(i int) string { return fmt.Sprintf(`"%d":{"$id":"%d"}`, i, i) }) + `,` +
		join(MaxSubschemas-MaxResources-10, func(i int) string { return fmt.Sprintf(`"x%d":{}`, i) }) + `}`), `{}`, ""},
}

// outcome compiles and validates a hostile case, with a validation time of
// timeout. It returns the error that stopped it.
func outcome(tb testing.TB, c hostileCase, timeout time.Duration) error {
	if len(c.schema) > MaxBytes {
		tb.Fatalf("%s: the schema has %d bytes, more than MaxBytes", c.name, len(c.schema))
	}
	s, err := Compile(json.RawMessage(c.schema))
	if err != nil {
		return err
	}
	s.(*compiled).timeout = timeout
	_, err = s.Validate(tb.Context(), json.RawMessage(c.value))
	return err
}

// BenchmarkHostileSchemas measures compiling a hostile schema and validating
// a value against it, each of which must take well under a second:
//
//	go test -run='^$' -bench=HostileSchemas -benchtime=5x ./internal/schema
func BenchmarkHostileSchemas(b *testing.B) {
	for _, c := range hostileCases {
		b.Run(strings.ReplaceAll(c.name, " ", "_"), func(b *testing.B) {
			b.ReportAllocs()
			var err error
			for b.Loop() {
				err = outcome(b, c, MaxValidateTime)
			}
			var ie *agent.InputError
			if err != nil && !errors.As(err, &ie) {
				b.Fatal(err)
			}
			b.Logf("%d-byte schema, %d-byte value: %v", len(c.schema), len(c.value), err)
		})
	}
}

// BenchmarkRealistic measures compiling the realistic schema and validating
// the realistic value.
func BenchmarkRealistic(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		s, err := Compile(invoiceSchema)
		if err != nil {
			b.Fatal(err)
		}
		if p, err := s.Validate(b.Context(), invoice); p != nil || err != nil {
			b.Fatal(p, err)
		}
	}
}
