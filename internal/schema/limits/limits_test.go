package limits

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
)

// graphOf is a Graph of n subschemas whose edges are given as "i>j" (to the
// same value) and "i:j" (to a part of it).
func graphOf(n int, edges ...string) Graph {
	type edge struct {
		to   int
		same bool
	}
	out := make([][]edge, n)
	for _, e := range edges {
		var i, j int
		if _, err := fmt.Sscanf(e, "%d>%d", &i, &j); err == nil {
			out[i] = append(out[i], edge{j, true})
		} else if _, err := fmt.Sscanf(e, "%d:%d", &i, &j); err == nil {
			out[i] = append(out[i], edge{j, false})
		} else {
			panic(e)
		}
	}
	return Graph{
		N: n,
		Children: func(i int, f func(int, bool)) {
			for _, e := range out[i] {
				f(e.to, e.same)
			}
		},
		Where: func(i int) string { return fmt.Sprintf("#%d", i) },
	}
}

// chain is n subschemas, each applying the next twice to the same value.
func chain(n int) Graph {
	var edges []string
	for i := range n - 1 {
		edges = append(edges, fmt.Sprintf("%d>%d", i, i+1), fmt.Sprintf("%d>%d", i, i+1))
	}
	return graphOf(n, edges...)
}

func TestGraphCheck(t *testing.T) {
	tests := []struct {
		name  string
		g     Graph
		limit string // "" with want for a refusal that names no limit
		want  string // a part of the reason; "" when the graph passes
	}{
		{"a tree", graphOf(3, "0>1", "0:2"), "", ""},
		{"recursion through a part", graphOf(2, "0:1", "1:0", "1>0"), "", ""},
		{"self reference", graphOf(2, "0:1", "1>1"), "", "applies itself to the same value again"},
		{"cycle of two", graphOf(3, "0>1", "1>2", "2>1"), "", "applies itself to the same value again"},
		{"cycle away from the root", graphOf(3, "0:1", "2>2"), "", "applies itself"},
		{"doubling chain", chain(20), "MaxExpanded", "expands to more than"},
		{"chain under MaxExpanded", chain(12), "", ""},
		{"deep", chainOnce(MaxDepth + 1), "MaxDepth", "nested more than"},
		{"deep enough", chainOnce(MaxDepth), "", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.g.Check(0)
			if tt.want == "" {
				if err != nil {
					t.Fatalf("Check: %v", err)
				}
				return
			}
			var le *Error
			if !errors.As(err, &le) || le.Limit != tt.limit || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("Check: %v, want an *Error of limit %q saying %q", err, tt.limit, tt.want)
			}
			if tt.limit != "" && !strings.HasSuffix(err.Error(), "(limit: "+tt.limit+")") {
				t.Errorf("the reason does not end with the limit: %v", err)
			}
		})
	}
}

// chainOnce is n subschemas, each applying the next once to a part.
func chainOnce(n int) Graph {
	var edges []string
	for i := range n - 1 {
		edges = append(edges, fmt.Sprintf("%d:%d", i, i+1))
	}
	return graphOf(n, edges...)
}

func TestCheckJSON(t *testing.T) {
	decode := func(s string) any {
		d := json.NewDecoder(strings.NewReader(s))
		d.UseNumber()
		var v any
		if err := d.Decode(&v); err != nil {
			t.Fatal(err)
		}
		return v
	}
	tests := []struct {
		value, ptr, limit string
		depth             int
	}{
		{`{"a":[1,{"b":2}]}`, "", "", 3},
		{`"x"`, "", "", 0},
		{strings.Repeat("[", 5) + strings.Repeat("]", 5), "", "", 5},
		{strings.Repeat("[", 6) + strings.Repeat("]", 6), "/0/0/0/0/0", "Deep", 0},
		{`{"a/b":[1e999]}`, "/a~1b/0", "MaxNumberExponent", 0},
		{`[` + strings.Repeat("1", MaxNumberLength+1) + `]`, "/0", "MaxNumberLength", 0},
	}
	for _, tt := range tests {
		depth, err := CheckJSON(decode(tt.value), 5, "Deep")
		switch {
		case tt.limit == "" && (err != nil || depth != tt.depth):
			t.Errorf("CheckJSON(%.20s) = %d, %v; want %d", tt.value, depth, err, tt.depth)
		case tt.limit != "" && (err == nil || err.Limit != tt.limit || err.Ptr != tt.ptr):
			t.Errorf("CheckJSON(%.20s): %+v; want %s at %q", tt.value, err, tt.limit, tt.ptr)
		}
	}
}
