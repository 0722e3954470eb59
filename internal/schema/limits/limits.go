// Package limits is the budget of a JSON Schema that comes from outside: a
// caller's schema for structured output, which internal/schema compiles, and
// a remote tool's input schema, which the agent compiles. Both refuse a
// schema past the same limits, with the same checks, so that the budget is
// literally one: the constants, the checks of a decoded document
// (CheckDocument, CheckJSON) and the check of its graph of subschemas
// (CheckGraph).
//
// It is a package of its own, which links no schema validator, so that the
// functions that only run tools can use it without the strict validator's
// start-up cost.
package limits

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/url"
	"regexp/syntax"
	"slices"
	"strconv"
	"strings"
	"time"
)

// The budget of a schema from outside. A schema past one of the static
// limits is refused when it is compiled, with a reason that names the
// limit; validations that would take more than MaxSteps, or
// MaxValidateTime, are refused the same way. Together they keep compiling a
// schema of up to MaxBytes, and validating against it, well under a second.
// A caller's schema for structured output serves one request, whose
// validations share MaxSteps and MaxValidateTime; a tool's input schema
// serves the container's life, and each validation of a tool's input has
// them to itself.
const (
	// MaxBytes bounds the size of a schema, as JSON.
	MaxBytes = 64 << 10

	// MaxDepth bounds how deeply a schema nests: as JSON, objects and arrays
	// within each other (64 leaves room for about 30 levels of nested
	// object properties), and as subschemas, counted along references. The
	// validator's compiler takes time that grows faster than the square of
	// the nesting: 600 levels of properties take most of a second.
	MaxDepth = 64

	// MaxSubschemas bounds the subschemas in a schema: the validator's
	// compiler takes time that grows with their square (5000 take 70 ms).
	MaxSubschemas = 5000

	// MaxResources bounds the subschemas with an $id, each a resource of
	// its own: the compiler takes time that grows with their number times
	// the number of subschemas.
	MaxResources = 100

	// MaxBranches bounds the subschemas a value is checked against in
	// addition to its own schema: the entries of allOf, anyOf and oneOf, and
	// not, if, then, else, dependentSchemas and dependencies.
	MaxBranches = 2000

	// MaxRefs bounds the references ($ref, $dynamicRef, $recursiveRef).
	MaxRefs = 1000

	// MaxExpanded bounds the subschemas in the tree a schema unfolds to when
	// every reference is replaced by its target, a reference back to a
	// schema that encloses it (recursion) counting once. It is the limit
	// that catches the schemas whose validation grows exponentially, such
	// as 30 definitions each referring twice to the next: 2^30 subschemas
	// in 2 KB.
	MaxExpanded = 10000

	// MaxPatternSize bounds the size of all the regular expressions of a
	// schema (pattern and patternProperties), in the instructions they
	// compile to: compiling takes time in proportion, and "a{1000}" is
	// 1000 instructions in 7 bytes.
	MaxPatternSize = 50000

	// MaxNumberLength bounds the characters of a number, in a schema and
	// in a value; MaxNumberExponent bounds its exponent. The validator does
	// exact arithmetic, and 1e999999 takes milliseconds to read, each time
	// it is compared.
	MaxNumberLength   = 100
	MaxNumberExponent = 400

	// MaxInstanceDepth bounds how deeply a value nests objects and arrays;
	// deeper values are refused as problems for the model to fix. Some of
	// the validator's work on a value grows with its depth.
	MaxInstanceDepth = 64

	// MaxSteps bounds the work of validating values against one compiled
	// schema, in steps: one for each subschema applied to a part of a
	// value, and more for the keywords whose cost grows with the value or
	// the schema (enum, const, pattern, uniqueItems, format,
	// unevaluated*). A caller's compiled schema serves one request, so this
	// bounds the request's validations, all of them together, however many
	// attempts it makes. MaxSteps take about 100 ms of a core at worst
	// (BenchmarkHostileSchemas in internal/schema and internal/agent).
	MaxSteps = 1_000_000

	// MaxValidateTime bounds the time of validating values against one
	// compiled schema (a caller's: all of them together), in case a step
	// costs more than it was measured to.
	MaxValidateTime = 250 * time.Millisecond
)

// DocURL is the URL a schema's document is checked under: its resources'
// $ids resolve against it, as internal/schema's compiler resolves them.
const DocURL = "mem:///schema.json"

// Error is a schema, or a value, that a check of this package refuses. Its
// message is the reason, followed by the limit's name, when there is one,
// as "(limit: MaxDepth)".
type Error struct {
	// Limit names the limit the schema is past, such as "MaxExpanded"; it
	// is empty when the schema is refused for what it is rather than its
	// size, such as a cycle that no value can pass.
	Limit string
	// Ptr is where in a value CheckJSON found it past a limit, as a JSON
	// pointer ("" for the root).
	Ptr    string
	Reason string
	// Err is the cause, if any, such as a URL's parse error.
	Err error
}

func (e *Error) Error() string {
	if e.Limit == "" {
		return e.Reason
	}
	return e.Reason + " (limit: " + e.Limit + ")"
}

func (e *Error) Unwrap() error { return e.Err }

// past is an *Error for a schema past limit.
func past(limit, format string, args ...any) *Error {
	return &Error{Limit: limit, Reason: fmt.Sprintf(format, args...)}
}

// refuse is an *Error for a schema refused for what it is; format may wrap
// a cause with %w.
func refuse(format string, args ...any) *Error {
	err := fmt.Errorf(format, args...)
	return &Error{Reason: err.Error(), Err: errors.Unwrap(err)}
}

// Survey is what CheckDocument learns of a decoded schema, for its
// compiler.
type Survey struct {
	// Anchors are the pointers of the subschemas with a $dynamicAnchor or
	// $recursiveAnchor, which a dynamic reference may reach without any
	// field of the compiled schema leading there.
	Anchors []string
	// Patterns are the estimated sizes of the schema's regular expressions,
	// by PatternSize.
	Patterns map[string]int
}

// CheckDocument checks a schema, decoded with json.Number for its numbers,
// against the static limits that protect a validator's compiler: MaxDepth
// as JSON, MaxNumberLength, MaxNumberExponent, MaxSubschemas, MaxResources,
// MaxBranches, MaxRefs and MaxPatternSize. It also refuses a reference to a
// part of the document that is not a subschema: a compiler would take it
// as one, at a cost that grows with the document. The error is an *Error.
func CheckDocument(root any) (*Survey, error) {
	if _, err := CheckJSON(root, MaxDepth, "MaxDepth"); err != nil {
		return nil, past(err.Limit, "in the schema at %s, %s", Pointer(err.Ptr), err.Reason)
	}
	w := &walker{
		d:         &Survey{Patterns: map[string]int{}},
		positions: map[string]bool{},
		resources: map[string]string{},
	}
	base, _ := url.Parse(DocURL)
	w.resources[DocURL] = ""
	w.schema(root, "", base, draft2020)
	if w.err != nil {
		return nil, w.err
	}
	switch {
	case len(w.positions) > MaxSubschemas:
		return nil, past("MaxSubschemas", "the schema has more than %d subschemas", MaxSubschemas)
	case len(w.resources)-1 > MaxResources:
		return nil, past("MaxResources", "the schema has more than %d subschemas with an $id", MaxResources)
	case w.branches > MaxBranches:
		return nil, past("MaxBranches", "the schema has %d branches (entries of allOf, anyOf and oneOf, and not, if, then, else, dependentSchemas and dependencies), more than %d", w.branches, MaxBranches)
	case len(w.refs) > MaxRefs:
		return nil, past("MaxRefs", "the schema has %d references ($ref, $dynamicRef, $recursiveRef), more than %d", len(w.refs), MaxRefs)
	}
	for _, r := range w.refs {
		if err := w.checkRef(r); err != nil {
			return nil, err
		}
	}
	return w.d, nil
}

// CheckJSON checks the nesting and the numbers (json.Number) of a decoded
// JSON value against maxDepth, whose name is depthLimit, and the number
// limits. It returns the depth of the deepest object or array in v, or an
// *Error that says where v is past which limit.
func CheckJSON(v any, maxDepth int, depthLimit string) (int, *Error) {
	var path []string
	var walk func(v any, depth int) (int, *Error)
	walk = func(v any, depth int) (int, *Error) {
		deepest := depth - 1
		switch v := v.(type) {
		case map[string]any:
			if depth > maxDepth {
				return 0, &Error{Ptr: JSONPointer(path), Reason: fmt.Sprintf("objects and arrays are nested more than %d deep", maxDepth), Limit: depthLimit}
			}
			deepest = depth
			for k, e := range v {
				path = append(path, k)
				d, err := walk(e, depth+1)
				path = path[:len(path)-1]
				if err != nil {
					return 0, err
				}
				deepest = max(deepest, d)
			}
		case []any:
			if depth > maxDepth {
				return 0, &Error{Ptr: JSONPointer(path), Reason: fmt.Sprintf("objects and arrays are nested more than %d deep", maxDepth), Limit: depthLimit}
			}
			deepest = depth
			for i, e := range v {
				path = append(path, strconv.Itoa(i))
				d, err := walk(e, depth+1)
				path = path[:len(path)-1]
				if err != nil {
					return 0, err
				}
				deepest = max(deepest, d)
			}
		case json.Number:
			if reason, limit := CheckNumber(string(v)); reason != "" {
				return 0, &Error{Ptr: JSONPointer(path), Reason: fmt.Sprintf("the number %s %s", Shorten(string(v)), reason), Limit: limit}
			}
		}
		return deepest, nil
	}
	return walk(v, 1)
}

// CheckNumber returns why a JSON number is past the number limits, and the
// limit, or "".
func CheckNumber(n string) (reason, limit string) {
	if len(n) > MaxNumberLength {
		return fmt.Sprintf("has more than %d characters", MaxNumberLength), "MaxNumberLength"
	}
	i := strings.IndexAny(n, "eE")
	if i < 0 {
		return "", ""
	}
	exp, err := strconv.Atoi(strings.TrimPrefix(n[i+1:], "+"))
	if err != nil || exp > MaxNumberExponent || exp < -MaxNumberExponent {
		return fmt.Sprintf("has an exponent beyond ±%d", MaxNumberExponent), "MaxNumberExponent"
	}
	return "", ""
}

// The drafts, by the version numbers the validator gives them.
const (
	draft4    = 4
	draft6    = 6
	draft7    = 7
	draft2019 = 2019
	draft2020 = 2020
)

// draftOf returns the draft a $schema names, or 0.
func draftOf(s string) int {
	s, frag, _ := strings.Cut(s, "#")
	if frag != "" {
		return 0
	}
	s, ok := strings.CutPrefix(s, "http://")
	if !ok {
		s, _ = strings.CutPrefix(s, "https://")
	}
	switch s {
	case "json-schema.org/schema", "json-schema.org/draft/2020-12/schema":
		return draft2020
	case "json-schema.org/draft/2019-09/schema":
		return draft2019
	case "json-schema.org/draft-07/schema":
		return draft7
	case "json-schema.org/draft-06/schema":
		return draft6
	case "json-schema.org/draft-04/schema":
		return draft4
	}
	return 0
}

// Where subschemas are, as the validator's compiler finds them: keywords
// whose value is a subschema, an array of subschemas, or an object whose
// values are subschemas, with the draft that introduced each.
var (
	singleKeywords = map[string]int{
		"not": draft4, "additionalProperties": draft4, "items": draft4, "additionalItems": draft4,
		"propertyNames": draft6, "contains": draft6,
		"if": draft7, "then": draft7, "else": draft7,
		"unevaluatedProperties": draft2019, "unevaluatedItems": draft2019, "contentSchema": draft2019,
	}
	arrayKeywords = map[string]int{
		"allOf": draft4, "anyOf": draft4, "oneOf": draft4, "items": draft4,
		"prefixItems": draft2020,
	}
	mapKeywords = map[string]int{
		"definitions": draft4, "properties": draft4, "patternProperties": draft4, "dependencies": draft4,
		"$defs": draft2019, "dependentSchemas": draft2019,
	}
	// branchKeywords apply their subschemas to the value of the schema
	// that holds them.
	branchKeywords = map[string]bool{
		"allOf": true, "anyOf": true, "oneOf": true, "not": true, "if": true, "then": true, "else": true,
		"dependentSchemas": true, "dependencies": true,
	}
	refKeywords = []string{"$ref", "$dynamicRef", "$recursiveRef"}
)

// walker walks the subschemas of a decoded schema, as the validator's
// compiler would find them.
type walker struct {
	d *Survey
	// positions are the pointers of the subschemas.
	positions map[string]bool
	// resources maps the absolute URL of each resource ($id) to its pointer.
	resources map[string]string
	refs      []ref
	branches  int
	patterns  int
	err       error
}

// ref is a reference and where it is.
type ref struct {
	keyword, value, ptr string
	base                *url.URL
}

func (w *walker) schema(v any, ptr string, base *url.URL, draft int) {
	w.positions[ptr] = true
	obj, ok := v.(map[string]any)
	if !ok || w.err != nil {
		return
	}
	// As the compiler does: a $schema counts at the root and in a
	// resource, whose $id is read by the draft $schema names.
	declared := draft
	if s, ok := obj["$schema"].(string); ok && draftOf(s) != 0 {
		declared = draftOf(s)
	}
	id := resourceID(obj, declared)
	if id != "" || ptr == "" {
		draft = declared
	} else {
		id = resourceID(obj, draft)
	}
	if id != "" {
		if u, err := url.Parse(id); err == nil {
			base = base.ResolveReference(u)
			base.Fragment, base.RawFragment = "", ""
			w.resources[base.String()] = ptr
		}
	}
	if _, ok := obj["$dynamicAnchor"].(string); ok {
		w.d.Anchors = append(w.d.Anchors, ptr)
	} else if a, _ := obj["$recursiveAnchor"].(bool); a {
		w.d.Anchors = append(w.d.Anchors, ptr)
	}
	for _, k := range refKeywords {
		if s, ok := obj[k].(string); ok {
			w.refs = append(w.refs, ref{keyword: k, value: s, ptr: ptr, base: base})
		}
	}
	if p, ok := obj["pattern"].(string); ok {
		w.pattern(p, ptr+"/pattern")
	}
	// The keys are sorted so that the first limit a schema hits is always
	// the same one.
	keys := make([]string, 0, len(obj))
	for k := range obj {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		kv, kptr := obj[k], ptr+"/"+Escape(k)
		if d, ok := singleKeywords[k]; ok && draft >= d {
			if branchKeywords[k] {
				w.branches++
			}
			w.schema(kv, kptr, base, draft)
		}
		if d, ok := arrayKeywords[k]; ok && draft >= d {
			if arr, ok := kv.([]any); ok {
				if branchKeywords[k] {
					w.branches += len(arr)
				}
				for i, e := range arr {
					w.schema(e, kptr+"/"+strconv.Itoa(i), base, draft)
				}
			}
		}
		if d, ok := mapKeywords[k]; ok && draft >= d {
			if m, ok := kv.(map[string]any); ok {
				names := make([]string, 0, len(m))
				for name := range m {
					names = append(names, name)
				}
				slices.Sort(names)
				for _, name := range names {
					e := m[name]
					if k == "patternProperties" {
						w.pattern(name, kptr)
					}
					if branchKeywords[k] {
						if _, isArray := e.([]any); !isArray {
							w.branches++
						}
					}
					w.schema(e, kptr+"/"+Escape(name), base, draft)
				}
			}
		}
	}
}

// resourceID returns the URL part of a subschema's $id (id in draft 4), or
// "". Before draft 2019-09 a $ref hides everything beside it.
func resourceID(obj map[string]any, draft int) string {
	keyword := "$id"
	if draft == draft4 {
		keyword = "id"
	}
	if _, ok := obj["$ref"]; ok && draft < draft2019 {
		return ""
	}
	id, _ := obj[keyword].(string)
	id, _, _ = strings.Cut(id, "#")
	return id
}

// pattern adds a regular expression's size to the schema's total.
func (w *walker) pattern(p, ptr string) {
	if _, ok := w.d.Patterns[p]; !ok {
		w.d.Patterns[p] = PatternSize(p)
	}
	w.patterns += w.d.Patterns[p]
	if w.patterns > MaxPatternSize && w.err == nil {
		w.err = past("MaxPatternSize", "the schema's regular expressions compile to more than %d instructions, the one at %s bringing them to %d", MaxPatternSize, Pointer(ptr), w.patterns)
	}
}

// checkRef refuses a reference whose target is a part of the document that
// is not a subschema. Other references are the compiler's to resolve: an
// anchor, a resource, or a URL outside the schema, which is an error.
func (w *walker) checkRef(r ref) error {
	u, frag, _ := strings.Cut(r.value, "#")
	target := ""
	if u != "" {
		ru, err := url.Parse(u)
		if err != nil {
			return refuse("%s %q at %s is not a URL: %w", r.keyword, r.value, Pointer(r.ptr), err)
		}
		abs := r.base.ResolveReference(ru)
		abs.Fragment, abs.RawFragment = "", ""
		res, ok := w.resources[abs.String()]
		if !ok {
			return nil
		}
		target = res
	} else if res, ok := w.resources[r.base.String()]; ok {
		target = res
	}
	if !strings.HasPrefix(frag, "/") {
		return nil
	}
	frag, err := url.PathUnescape(frag)
	if err != nil {
		return refuse("%s %q at %s is not a URL: %w", r.keyword, r.value, Pointer(r.ptr), err)
	}
	if !w.positions[target+frag] {
		return refuse("%s %q at %s points to %s, which is not a subschema; put what it refers to under $defs", r.keyword, r.value, Pointer(r.ptr), Pointer(target+frag))
	}
	return nil
}

// PatternSize estimates the instructions a regular expression compiles to;
// an expression that does not parse counts 1, and a compiler refuses it.
func PatternSize(p string) int {
	re, err := syntax.Parse(p, syntax.Perl)
	if err != nil {
		return 1
	}
	return min(regexpSize(re), math.MaxInt32)
}

func regexpSize(re *syntax.Regexp) int {
	switch re.Op {
	case syntax.OpLiteral:
		return max(1, len(re.Rune))
	case syntax.OpConcat, syntax.OpAlternate:
		n := len(re.Sub)
		for _, sub := range re.Sub {
			n = satAdd(n, regexpSize(sub))
		}
		return n
	case syntax.OpCapture:
		return satAdd(2, regexpSize(re.Sub[0]))
	case syntax.OpStar, syntax.OpPlus, syntax.OpQuest:
		return satAdd(1, regexpSize(re.Sub[0]))
	case syntax.OpRepeat:
		// Min copies, then Max-Min optional ones, or a loop.
		sub := regexpSize(re.Sub[0])
		if re.Max < 0 {
			return satAdd(satMul(re.Min+1, sub), 2)
		}
		return satAdd(satMul(re.Max, sub), re.Max-re.Min+1)
	}
	return 1
}

func satAdd(a, b int) int { return min(a+b, math.MaxInt32) }

func satMul(a, b int) int {
	if a != 0 && b > math.MaxInt32/a {
		return math.MaxInt32
	}
	return a * b
}

// Escape escapes a key as a JSON pointer token.
func Escape(tok string) string {
	return strings.ReplaceAll(strings.ReplaceAll(tok, "~", "~0"), "/", "~1")
}

// JSONPointer is the JSON pointer of a path of keys and indexes.
func JSONPointer(tokens []string) string {
	var b strings.Builder
	for _, t := range tokens {
		b.WriteString("/" + Escape(t))
	}
	return b.String()
}

// Pointer shows a JSON pointer in a reason: "/" for the root.
func Pointer(ptr string) string {
	if ptr == "" {
		return "/"
	}
	return Shorten(ptr)
}

// Shorten keeps a reason readable when what it quotes is long.
func Shorten(s string) string {
	const max = 200
	if len(s) <= max {
		return s
	}
	return s[:max/2] + "…" + s[len(s)-max/2:]
}
