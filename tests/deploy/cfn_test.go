package deploy

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"

	"gopkg.in/yaml.v3"
)

// The deployment files, relative to this package.
var (
	templatePath  = filepath.Join("..", "..", "template.yaml")
	samconfigPath = filepath.Join("..", "..", "samconfig.toml")
)

// tmpl is the part of a SAM template the tests read. Values below the
// resource level stay generic: maps, slices and strings, with CloudFormation's
// short-form tags turned into their long form ({"Ref": x}, {"Fn::If": [...]}).
type tmpl struct {
	Parameters map[string]parameter
	Rules      map[string]rule
	Conditions map[string]any
	Globals    struct {
		Function map[string]any
	}
	Resources map[string]resource
	Outputs   map[string]struct {
		Condition string
		Value     any
	}
	Metadata struct {
		Interface struct {
			ParameterGroups []struct {
				Parameters []string
			}
		} `json:"AWS::CloudFormation::Interface"`
	}
}

type parameter struct {
	Type           string
	Default        *string
	AllowedPattern string
	AllowedValues  []string
	MinValue       string
	MaxValue       string
	MaxLength      string
}

// rule is one of the template's Rules: CloudFormation refuses to deploy
// when RuleCondition holds (or is absent) and an Assert does not.
type rule struct {
	RuleCondition any
	Assertions    []struct {
		Assert            any
		AssertDescription string
	}
}

type resource struct {
	Type                string
	Condition           string
	DeletionPolicy      string
	UpdateReplacePolicy string
	Metadata            map[string]any
	Properties          map[string]any
}

// loadTemplate reads template.yaml.
func loadTemplate(t *testing.T) *tmpl {
	t.Helper()
	b, err := os.ReadFile(templatePath)
	if err != nil {
		t.Fatal(err)
	}
	var doc yaml.Node
	if err := yaml.Unmarshal(b, &doc); err != nil {
		t.Fatalf("parse %s: %v", templatePath, err)
	}
	generic, err := fromNode(&doc)
	if err != nil {
		t.Fatalf("parse %s: %v", templatePath, err)
	}
	// A JSON round trip turns the generic tree into the typed view.
	j, err := json.Marshal(generic)
	if err != nil {
		t.Fatal(err)
	}
	var tp tmpl
	if err := json.Unmarshal(j, &tp); err != nil {
		t.Fatalf("decode %s: %v", templatePath, err)
	}
	return &tp
}

// fromNode converts a YAML node to maps, slices and strings (scalars keep
// their text, so 30 and true become "30" and "true"). A CloudFormation tag
// becomes the long form of its intrinsic function.
func fromNode(n *yaml.Node) (any, error) { return convert(n, false) }

// fromTypedNode is fromNode with numbers and booleans as YAML reads them,
// as CloudFormation and SAM's transform take them: SAM refuses "30" where
// it wants 30.
func fromTypedNode(n *yaml.Node) (any, error) { return convert(n, true) }

func convert(n *yaml.Node, typed bool) (any, error) {
	var v any
	switch n.Kind {
	case yaml.DocumentNode:
		if len(n.Content) != 1 {
			return nil, fmt.Errorf("line %d: want one document", n.Line)
		}
		return convert(n.Content[0], typed)
	case yaml.AliasNode:
		return nil, fmt.Errorf("line %d: CloudFormation does not take YAML aliases", n.Line)
	case yaml.ScalarNode:
		switch {
		case n.Tag == "!!null":
			v = nil
		case typed && (n.Tag == "!!int" || n.Tag == "!!bool" || n.Tag == "!!float"):
			if err := n.Decode(&v); err != nil {
				return nil, fmt.Errorf("line %d: %w", n.Line, err)
			}
		default:
			v = n.Value
		}
	case yaml.SequenceNode:
		s := make([]any, 0, len(n.Content))
		for _, c := range n.Content {
			e, err := convert(c, typed)
			if err != nil {
				return nil, err
			}
			s = append(s, e)
		}
		v = s
	case yaml.MappingNode:
		m := make(map[string]any, len(n.Content)/2)
		for i := 0; i+1 < len(n.Content); i += 2 {
			k := n.Content[i].Value
			if _, dup := m[k]; dup {
				return nil, fmt.Errorf("line %d: duplicate key %q", n.Content[i].Line, k)
			}
			e, err := convert(n.Content[i+1], typed)
			if err != nil {
				return nil, err
			}
			m[k] = e
		}
		v = m
	default:
		return nil, fmt.Errorf("line %d: unexpected YAML node kind %v", n.Line, n.Kind)
	}
	tag, custom := strings.CutPrefix(n.Tag, "!")
	if !custom || strings.HasPrefix(tag, "!") { // "!!str" and the like are YAML's own
		return v, nil
	}
	switch tag {
	case "Ref", "Condition":
		return map[string]any{tag: v}, nil
	case "GetAtt":
		if s, ok := v.(string); ok {
			res, attr, _ := strings.Cut(s, ".")
			v = []any{res, attr}
		}
	}
	return map[string]any{"Fn::" + tag: v}, nil
}

// Helpers that read the generic values.

func ref(name string) map[string]any { return map[string]any{"Ref": name} }

func getAtt(res, attr string) map[string]any {
	return map[string]any{"Fn::GetAtt": []any{res, attr}}
}

func fnIf(cond string, yes, no any) map[string]any {
	return map[string]any{"Fn::If": []any{cond, yes, no}}
}

var noValue = ref("AWS::NoValue")

// sub returns the string of an Fn::Sub, or "".
func sub(v any) string {
	m, _ := v.(map[string]any)
	s, _ := m["Fn::Sub"].(string)
	return s
}

// refName returns the name of a Ref, or "".
func refName(v any) string {
	m, _ := v.(map[string]any)
	if len(m) != 1 {
		return ""
	}
	s, _ := m["Ref"].(string)
	return s
}

// branches returns what v can be: a list's elements, both branches of an
// Fn::If, recursively, and nothing for AWS::NoValue.
func branches(v any) []any {
	switch v := v.(type) {
	case []any:
		var out []any
		for _, e := range v {
			out = append(out, branches(e)...)
		}
		return out
	case map[string]any:
		if refName(v) == "AWS::NoValue" {
			return nil
		}
		if args, ok := v["Fn::If"].([]any); ok && len(v) == 1 && len(args) == 3 {
			return append(branches(args[1]), branches(args[2])...)
		}
	}
	return []any{v}
}

// strs returns v as a list of strings: a string alone or a list of them.
func strs(t *testing.T, v any) []string {
	t.Helper()
	var out []string
	for _, e := range branches(v) {
		s, ok := e.(string)
		if !ok {
			t.Errorf("want a string, got %v", e)
			continue
		}
		out = append(out, s)
	}
	return out
}

// get walks m along keys and returns what it finds, or nil.
func get(v any, keys ...string) any {
	for _, k := range keys {
		m, ok := v.(map[string]any)
		if !ok {
			return nil
		}
		v = m[k]
	}
	return v
}

// ofType returns the logical ids of the resources of a type, sorted.
func (tp *tmpl) ofType(typ string) []string {
	var ids []string
	for id, r := range tp.Resources {
		if r.Type == typ {
			ids = append(ids, id)
		}
	}
	slices.Sort(ids)
	return ids
}

// functionProperties returns a function's properties with the template's
// Globals under them, as SAM merges them (maps merge; other values are
// replaced).
func (tp *tmpl) functionProperties(id string) map[string]any {
	return merge(tp.Globals.Function, tp.Resources[id].Properties).(map[string]any)
}

// properties returns a resource's properties as deployed: a SAM
// function's with the Globals under them, any other resource's as written.
func (tp *tmpl) properties(id string) map[string]any {
	if tp.Resources[id].Type == "AWS::Serverless::Function" {
		return tp.functionProperties(id)
	}
	return tp.Resources[id].Properties
}

func merge(global, local any) any {
	gm, gok := global.(map[string]any)
	lm, lok := local.(map[string]any)
	if !gok || !lok {
		if local != nil {
			return local
		}
		return global
	}
	out := make(map[string]any, len(gm)+len(lm))
	for k, v := range gm {
		out[k] = v
	}
	for k, v := range lm {
		out[k] = merge(gm[k], v)
	}
	return out
}

// fullMatch reports whether s matches a CloudFormation AllowedPattern, which
// must match the whole value. AllowedPattern is a Java regular expression;
// Go's have no lookahead, so a leading negative lookahead, ^(?!X), is
// checked on its own: s must not begin with a match of X.
func fullMatch(t *testing.T, pattern, s string) bool {
	t.Helper()
	if rest, ok := strings.CutPrefix(pattern, "^(?!"); ok {
		ahead, rest, ok := cutGroup(rest)
		if !ok {
			t.Fatalf("AllowedPattern %q: unterminated lookahead", pattern)
		}
		if fullMatch(t, `(?:`+ahead+`)[\s\S]*`, s) {
			return false
		}
		pattern = "^" + rest
	}
	re, err := regexp.Compile(`^(?:` + pattern + `)$`)
	if err != nil {
		t.Fatalf("AllowedPattern %q: %v", pattern, err)
	}
	return re.MatchString(s)
}

// cutGroup splits s, which follows a group's opening parenthesis, at the
// parenthesis that closes the group.
func cutGroup(s string) (inside, after string, ok bool) {
	depth, class := 1, false
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c == '\\':
			i++
		case class:
			class = c != ']'
		case c == '[':
			class = true
		case c == '(':
			depth++
		case c == ')':
			if depth--; depth == 0 {
				return s[:i], s[i+1:], true
			}
		}
	}
	return "", "", false
}

// allowed reports whether value is one that parameter p accepts.
func (p parameter) allowed(t *testing.T, value string) bool {
	t.Helper()
	if p.AllowedValues != nil && !slices.Contains(p.AllowedValues, value) {
		return false
	}
	if p.AllowedPattern != "" && !fullMatch(t, p.AllowedPattern, value) {
		return false
	}
	if n, err := strconv.Atoi(p.MaxLength); err == nil && utf8.RuneCountInString(value) > n {
		return false
	}
	return true
}
