package schema

import (
	"encoding/json"
	"fmt"
	"math"
	"net/url"
	"regexp/syntax"
	"slices"
	"strconv"
	"strings"
	"time"
)

// The budget of a caller's schema. A schema past one of the static limits is
// refused when it is compiled, with an *agent.InputError of kind
// agent.ErrInvalidSchema whose reason names the limit; validations that
// would take more than MaxSteps, or MaxValidateTime, are refused the same
// way. Together they keep compiling a schema of up to MaxBytes, and all the
// validations of a request against it, well under a second.
const (
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
	// schema, all of them together, in steps: one for each subschema
	// applied to a part of a value, and more for the keywords whose cost
	// grows with the value or the schema (enum, const, pattern,
	// uniqueItems, format, unevaluated*). A compiled schema serves one
	// request, so this bounds the request's validations however many
	// attempts it makes. MaxSteps take about 100 ms of a core at worst
	// (BenchmarkHostileSchemas).
	MaxSteps = 1_000_000

	// MaxValidateTime bounds the time of validating values against one
	// compiled schema, all of them together, in case a step costs more than
	// it was measured to.
	MaxValidateTime = 250 * time.Millisecond
)

// survey is what Compile learns of a decoded schema before the validator's
// compiler sees it.
type survey struct {
	// anchors are the pointers of the subschemas with a $dynamicAnchor or
	// $recursiveAnchor, which a dynamic reference may reach without any
	// field of the compiled schema leading there.
	anchors []string
	// patterns are the estimated sizes of the schema's regular expressions.
	patterns map[string]int
}

// checkDocument checks a decoded schema against the static limits that
// protect the validator's compiler: MaxDepth as JSON, MaxNumberLength,
// MaxNumberExponent, MaxSubschemas, MaxResources, MaxBranches, MaxRefs and
// MaxPatternSize. It also refuses a reference to a part of the document that
// is not a subschema: the compiler would take it as one, at a cost that
// grows with the document.
func checkDocument(root any) (*survey, error) {
	if _, err := checkJSON(root, MaxDepth, "MaxDepth"); err != nil {
		return nil, invalid("in the schema at %s, %s (limit: %s)", pointer(err.ptr), err.reason, err.limit)
	}
	w := &walker{
		d:         &survey{patterns: map[string]int{}},
		positions: map[string]bool{},
		resources: map[string]string{},
	}
	base, _ := url.Parse(docURL)
	w.resources[docURL] = ""
	w.schema(root, "", base, draft2020)
	if w.err != nil {
		return nil, w.err
	}
	switch {
	case len(w.positions) > MaxSubschemas:
		return nil, invalid("the schema has more than %d subschemas (limit: MaxSubschemas)", MaxSubschemas)
	case len(w.resources)-1 > MaxResources:
		return nil, invalid("the schema has more than %d subschemas with an $id (limit: MaxResources)", MaxResources)
	case w.branches > MaxBranches:
		return nil, invalid("the schema has %d branches (entries of allOf, anyOf and oneOf, and not, if, then, else, dependentSchemas and dependencies), more than %d (limit: MaxBranches)", w.branches, MaxBranches)
	case len(w.refs) > MaxRefs:
		return nil, invalid("the schema has %d references ($ref, $dynamicRef, $recursiveRef), more than %d (limit: MaxRefs)", len(w.refs), MaxRefs)
	}
	for _, r := range w.refs {
		if err := w.checkRef(r); err != nil {
			return nil, err
		}
	}
	return w.d, nil
}

// limitError is a part of a JSON value past a limit: where, what is wrong,
// and the limit's name.
type limitError struct{ ptr, reason, limit string }

// checkJSON checks the nesting and the numbers of a JSON value against
// maxDepth, whose name is depthLimit, and the number limits. It returns the
// depth of the deepest object or array in v.
func checkJSON(v any, maxDepth int, depthLimit string) (int, *limitError) {
	var path []string
	var walk func(v any, depth int) (int, *limitError)
	walk = func(v any, depth int) (int, *limitError) {
		deepest := depth - 1
		switch v := v.(type) {
		case map[string]any:
			if depth > maxDepth {
				return 0, &limitError{jsonPointer(path), fmt.Sprintf("objects and arrays are nested more than %d deep", maxDepth), depthLimit}
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
				return 0, &limitError{jsonPointer(path), fmt.Sprintf("objects and arrays are nested more than %d deep", maxDepth), depthLimit}
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
			if reason, limit := checkNumber(string(v)); reason != "" {
				return 0, &limitError{jsonPointer(path), fmt.Sprintf("the number %s %s", shorten(string(v)), reason), limit}
			}
		}
		return deepest, nil
	}
	return walk(v, 1)
}

// checkNumber returns why a JSON number is past the number limits, and the
// limit, or "".
func checkNumber(n string) (reason, limit string) {
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
	d *survey
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
		w.d.anchors = append(w.d.anchors, ptr)
	} else if a, _ := obj["$recursiveAnchor"].(bool); a {
		w.d.anchors = append(w.d.anchors, ptr)
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
		kv, kptr := obj[k], ptr+"/"+escape(k)
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
					w.schema(e, kptr+"/"+escape(name), base, draft)
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
	if _, ok := w.d.patterns[p]; !ok {
		w.d.patterns[p] = patternSize(p)
	}
	w.patterns += w.d.patterns[p]
	if w.patterns > MaxPatternSize && w.err == nil {
		w.err = invalid("the schema's regular expressions compile to more than %d instructions, the one at %s bringing them to %d (limit: MaxPatternSize)", MaxPatternSize, pointer(ptr), w.patterns)
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
			return invalid("%s %q at %s is not a URL: %w", r.keyword, r.value, pointer(r.ptr), err)
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
		return invalid("%s %q at %s is not a URL: %w", r.keyword, r.value, pointer(r.ptr), err)
	}
	if !w.positions[target+frag] {
		return invalid("%s %q at %s points to %s, which is not a subschema; put what it refers to under $defs", r.keyword, r.value, pointer(r.ptr), pointer(target+frag))
	}
	return nil
}

// patternSize estimates the instructions a regular expression compiles to;
// an expression that does not parse counts 1, and the compiler refuses it.
func patternSize(p string) int {
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

// escape escapes a key as a JSON pointer token.
func escape(tok string) string {
	return strings.ReplaceAll(strings.ReplaceAll(tok, "~", "~0"), "/", "~1")
}

// pointer shows a JSON pointer in a reason: "/" for the root.
func pointer(ptr string) string {
	if ptr == "" {
		return "/"
	}
	return shorten(ptr)
}

// shorten keeps a reason readable when what it quotes is long.
func shorten(s string) string {
	const max = 200
	if len(s) <= max {
		return s
	}
	return s[:max/2] + "…" + s[len(s)-max/2:]
}
