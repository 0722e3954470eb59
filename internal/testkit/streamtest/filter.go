// Package streamtest stands in for a DynamoDB stream and Lambda's event
// source mapping, which minidyn and the local run do not have: Mapping
// records the changes a store's writes make to the items a filter selects,
// as stream records with both images, and delivers them to a handler in
// order, with retries and an on-failure destination; Match evaluates an
// event filter pattern, the template's FilterCriteria, as Lambda does.
package streamtest

import (
	"encoding/json"
	"fmt"
	"math"
	"strings"
)

// Match reports whether the event, as JSON, matches the filter pattern, a
// Lambda event filter (FilterCriteria's Pattern): every field the pattern
// names must match one of the pattern's values for it. The operators are
// prefix, suffix, equals-ignore-case, anything-but (values, or a prefix),
// exists and numeric; any other is an error, so that a pattern this
// evaluator cannot judge never passes for one it can.
func Match(pattern string, event any) (bool, error) {
	var p map[string]any
	if err := json.Unmarshal([]byte(pattern), &p); err != nil {
		return false, fmt.Errorf("streamtest: pattern: %w", err)
	}
	raw, err := json.Marshal(event)
	if err != nil {
		return false, err
	}
	var ev map[string]any
	if err := json.Unmarshal(raw, &ev); err != nil {
		return false, fmt.Errorf("streamtest: the event is not a JSON object: %w", err)
	}
	return matchObject(p, ev)
}

func matchObject(p, ev map[string]any) (bool, error) {
	for field, want := range p {
		got, present := ev[field]
		var ok bool
		var err error
		switch w := want.(type) {
		case map[string]any:
			sub, isObject := got.(map[string]any)
			if !isObject {
				// A nested pattern matches only an object.
				ok, err = false, checkPattern(w)
			} else {
				ok, err = matchObject(w, sub)
			}
		case []any:
			ok, err = matchValues(w, got, present)
		default:
			return false, fmt.Errorf("streamtest: the pattern's %q must be an object or an array", field)
		}
		if err != nil || !ok {
			return false, err
		}
	}
	return true, nil
}

// checkPattern checks a nested pattern that no value reached, so that its
// mistakes are errors all the same.
func checkPattern(p map[string]any) error {
	_, err := matchObject(p, map[string]any{})
	return err
}

// matchValues reports whether got (absent unless present) matches one of
// wants. An array value matches when one of its elements does.
func matchValues(wants []any, got any, present bool) (bool, error) {
	vals := []any{got}
	if list, ok := got.([]any); ok {
		vals = list
	}
	matched := false
	for _, w := range wants {
		for _, v := range vals {
			ok, err := matchOne(w, v, present)
			if err != nil {
				return false, err
			}
			matched = matched || ok
		}
	}
	return matched, nil
}

func matchOne(want, got any, present bool) (bool, error) {
	op, isOp := want.(map[string]any)
	if !isOp {
		return present && got == want, nil
	}
	if len(op) != 1 {
		return false, fmt.Errorf("streamtest: an operator object has one key, not %d", len(op))
	}
	for name, arg := range op {
		s, isString := got.(string)
		switch name {
		case "prefix", "suffix", "equals-ignore-case":
			a, ok := arg.(string)
			if !ok {
				return false, fmt.Errorf("streamtest: %s takes a string", name)
			}
			if !present || !isString {
				return false, nil
			}
			switch name {
			case "prefix":
				return strings.HasPrefix(s, a), nil
			case "suffix":
				return strings.HasSuffix(s, a), nil
			}
			return strings.EqualFold(s, a), nil
		case "exists":
			b, ok := arg.(bool)
			if !ok {
				return false, fmt.Errorf("streamtest: exists takes true or false")
			}
			return present == b, nil
		case "anything-but":
			if !present {
				return false, nil
			}
			switch a := arg.(type) {
			case []any:
				for _, x := range a {
					if x == got {
						return false, nil
					}
				}
				return true, nil
			case map[string]any:
				pre, ok := a["prefix"].(string)
				if !ok || len(a) != 1 {
					return false, fmt.Errorf("streamtest: anything-but takes values or a prefix")
				}
				return !isString || !strings.HasPrefix(s, pre), nil
			default:
				return got != a, nil
			}
		case "numeric":
			return numeric(arg, got)
		}
		return false, fmt.Errorf("streamtest: the operator %q is not one this evaluator knows", name)
	}
	return false, nil
}

// numeric evaluates a numeric operator's comparisons, such as [">", 0,
// "<=", 5], on got, a number or a string that holds one (DynamoDB's N).
func numeric(arg, got any) (bool, error) {
	cmps, ok := arg.([]any)
	if !ok || len(cmps) == 0 || len(cmps)%2 != 0 {
		return false, fmt.Errorf("streamtest: numeric takes pairs of an operator and a number")
	}
	var x float64
	switch g := got.(type) {
	case float64:
		x = g
	case string:
		if _, err := fmt.Sscanf(g, "%g", &x); err != nil {
			return false, nil
		}
	default:
		return false, nil // absent, or not a number
	}
	for i := 0; i < len(cmps); i += 2 {
		op, _ := cmps[i].(string)
		n, isNum := cmps[i+1].(float64)
		if !isNum || math.IsNaN(n) {
			return false, fmt.Errorf("streamtest: numeric compares with numbers")
		}
		var holds bool
		switch op {
		case "=":
			holds = x == n
		case "<":
			holds = x < n
		case "<=":
			holds = x <= n
		case ">":
			holds = x > n
		case ">=":
			holds = x >= n
		default:
			return false, fmt.Errorf("streamtest: numeric operator %q", op)
		}
		if !holds {
			return false, nil
		}
	}
	return true, nil
}
