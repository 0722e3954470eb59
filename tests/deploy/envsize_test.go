package deploy

import (
	"encoding/json"
	"fmt"
	"maps"
	"regexp/syntax"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/lambda-agent/lambda-agent/internal/testkit"
)

// Lambda's limits on environment variables: all of a function's together,
// as Lambda measures them (the compact JSON object of names and values:
// its error quotes it as "String measured"), at most 4 KB; and a
// CloudFormation parameter value, which bounds one without MaxLength, at
// most 4,096 bytes.
const (
	maxEnvironmentBytes = 4096
	maxParameterValue   = 4096
)

// maxTableName is the longest TABLE_NAME: DynamoDB's longest table name,
// as CloudFormation names the table from the stack's name.
const maxTableName = 255

// longest returns the longest value parameter p accepts, in characters,
// and what bounds it: the longest of its AllowedValues, its MaxLength, or
// the longest match of its AllowedPattern, whichever is shortest; or
// CloudFormation's limit on a parameter value, when none of them is.
func longest(t *testing.T, p parameter) (int, string) {
	t.Helper()
	if p.AllowedValues != nil {
		n := 0
		for _, v := range p.AllowedValues {
			n = max(n, len(v))
		}
		return n, "AllowedValues"
	}
	n, why := maxParameterValue, "CloudFormation's limit"
	if p.MaxLength != "" {
		m, err := strconv.Atoi(p.MaxLength)
		if err != nil {
			t.Fatalf("MaxLength %q: %v", p.MaxLength, err)
		}
		n, why = m, "MaxLength"
	}
	if p.AllowedPattern != "" {
		if m := longestMatch(t, p.AllowedPattern); m >= 0 && m < n {
			n, why = m, "AllowedPattern"
		}
	}
	return n, why
}

// longestMatch returns the length of the longest string an AllowedPattern
// matches, in characters, or -1 when it has no bound. A leading negative
// lookahead, which Go's regexps lack, only refuses strings, and is left
// out.
func longestMatch(t *testing.T, pattern string) int {
	t.Helper()
	if rest, ok := strings.CutPrefix(pattern, "^(?!"); ok {
		_, after, ok := cutGroup(rest)
		if !ok {
			t.Fatalf("AllowedPattern %q: unterminated lookahead", pattern)
		}
		pattern = "^" + after
	}
	re, err := syntax.Parse(pattern, syntax.Perl)
	if err != nil {
		t.Fatalf("AllowedPattern %q: %v", pattern, err)
	}
	var walk func(re *syntax.Regexp) int
	walk = func(re *syntax.Regexp) int {
		switch re.Op {
		case syntax.OpLiteral:
			return len(re.Rune)
		case syntax.OpCharClass, syntax.OpAnyChar, syntax.OpAnyCharNotNL:
			return 1
		case syntax.OpCapture, syntax.OpQuest:
			return walk(re.Sub[0])
		case syntax.OpStar, syntax.OpPlus:
			return -1
		case syntax.OpRepeat:
			sub := walk(re.Sub[0])
			if re.Max < 0 || sub < 0 {
				return -1
			}
			return re.Max * sub
		case syntax.OpConcat, syntax.OpAlternate: // the sum, or the longest
			n := 0
			for _, s := range re.Sub {
				m := walk(s)
				switch {
				case m < 0:
					return -1
				case re.Op == syntax.OpConcat:
					n += m
				default:
					n = max(n, m)
				}
			}
			return n
		}
		return 0 // anchors and empty matches
	}
	return walk(re)
}

// TestEnvironmentFitsLambda: with every parameter at its longest, each
// function's environment variables, as the template resolves them and
// Lambda measures them, fit in Lambda's 4 KB. A parameter that reaches a
// variable needs a bound of its own, below CloudFormation's, for this to
// hold. Each character is counted as a byte, as plain ASCII is:
// docs/deploy.md says what quotes and other characters cost.
func TestEnvironmentFitsLambda(t *testing.T) {
	tp := loadTemplate(t)
	// The SAM functions get the Globals' variables; the authorizer and the
	// memory function, plain AWS::Lambda::Functions, their own alone.
	variables := func(id string) map[string]any {
		vars, _ := get(tp.properties(id), "Environment", "Variables").(map[string]any)
		return vars
	}
	ids := append(slices.Sorted(maps.Keys(functions)), "AuthorizerFunction", memoryFunction)
	reach := map[string]bool{} // the parameters that reach a variable
	for _, id := range ids {
		for _, v := range variables(id) {
			for _, name := range refs(v) {
				reach[name] = true
			}
		}
	}
	r := &resolver{tp: tp, params: map[string]string{}}
	bounds := map[string]string{}
	for name, p := range tp.Parameters {
		n, why := longest(t, p)
		bounds[name] = fmt.Sprintf("%d (%s)", n, why)
		if why == "CloudFormation's limit" && reach[name] {
			t.Errorf("parameter %s reaches the functions' variables and has no bound of its own: give it a MaxLength", name)
		}
		// The longest value: an allowed one when there is a list, else
		// plain characters, which Lambda counts one byte each.
		r.params[name] = strings.Repeat("x", n)
		for _, v := range p.AllowedValues {
			if len(v) == n {
				r.params[name] = v
			}
		}
	}
	for _, id := range ids {
		env := map[string]string{}
		for k, v := range variables(id) {
			s, err := r.bound(v)
			if err != nil {
				t.Fatalf("%s: %s: %v", id, k, err)
			}
			env[k] = s
		}
		measured, err := json.Marshal(env)
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("%s: %d variables, %d bytes at most of Lambda's %d", id, len(env), len(measured), maxEnvironmentBytes)
		if len(measured) > maxEnvironmentBytes {
			var rows []string
			for _, k := range slices.Sorted(maps.Keys(env)) {
				rows = append(rows, fmt.Sprintf("%s=%d", k, len(env[k])))
			}
			t.Errorf("%s: its variables take up to %d bytes, past Lambda's %d:\n%s", id, len(measured), maxEnvironmentBytes, strings.Join(rows, "\n"))
		}
	}
	if t.Failed() || testing.Verbose() {
		for _, name := range slices.Sorted(maps.Keys(bounds)) {
			t.Logf("%s: %s", name, bounds[name])
		}
	}
}

// bound resolves an environment variable's value to its longest: a Ref to
// a parameter, the parameter's value; to the table, its longest name; an
// Fn::If, its longer branch, whichever the condition.
func (r *resolver) bound(v any) (string, error) {
	if name := refName(v); name == tableID {
		return strings.Repeat("t", maxTableName), nil
	}
	if args, ok := get(v, "Fn::If").([]any); ok && len(args) == 3 {
		yes, err := r.bound(args[1])
		if err != nil {
			return "", err
		}
		no, err := r.bound(args[2])
		if err != nil {
			return "", err
		}
		if len(no) > len(yes) {
			return no, nil
		}
		return yes, nil
	}
	return r.value(v)
}

// refs returns the names that v's Refs name, in every branch.
func refs(v any) []string {
	switch v := v.(type) {
	case []any:
		var out []string
		for _, e := range v {
			out = append(out, refs(e)...)
		}
		return out
	case map[string]any:
		if name := refName(v); name != "" {
			return []string{name}
		}
		var out []string
		for _, e := range v {
			out = append(out, refs(e)...)
		}
		return out
	}
	return nil
}

// TestEnvironmentBoundsAsDocumented: the bounds docs/deploy.md lists are
// the template's.
func TestEnvironmentBoundsAsDocumented(t *testing.T) {
	tp := loadTemplate(t)
	section, err := testkit.DocSection("docs/deploy.md", "## The 4 KB of environment variables")
	if err != nil {
		t.Fatal(err)
	}
	rows := 0
	for line := range strings.Lines(section) {
		cells := strings.Split(strings.TrimSpace(line), "|")
		if len(cells) != 4 || !strings.HasPrefix(strings.TrimSpace(cells[1]), "`") {
			continue
		}
		rows++
		name := strings.Trim(strings.TrimSpace(cells[1]), "`")
		p, ok := tp.Parameters[name]
		if !ok {
			t.Errorf("docs/deploy.md lists %s, which is no parameter", name)
			continue
		}
		if n, _ := longest(t, p); strconv.Itoa(n) != strings.TrimSpace(cells[2]) {
			t.Errorf("docs/deploy.md: %s at most %s; the template's bound is %d", name, strings.TrimSpace(cells[2]), n)
		}
	}
	if rows == 0 {
		t.Error("no bounds in docs/deploy.md")
	}
}
