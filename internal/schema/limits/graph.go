package limits

// Graph is the subschemas of a compiled schema, numbered from 0 to N-1, as
// a validator applies them. Each compiler builds it from its own compiled
// form, so that the check sees the references exactly as that validator
// resolved them.
type Graph struct {
	// N is the number of subschemas.
	N int
	// Children calls f for each subschema that the validator may apply
	// when it applies subschema i: same says whether to the same value
	// (references, allOf, anyOf, oneOf, not, if, then, else,
	// dependentSchemas) or to a part of it (properties, items, ...).
	Children func(i int, f func(j int, same bool))
	// Where shows subschema i's location in a reason.
	Where func(i int) string
}

// Check refuses a schema that applies a subschema to a value through
// itself (no value passes it, and a validator that follows it never ends),
// one that nests deeper than MaxDepth when references are followed from
// root, and one whose tree from root, unfolded, has more than MaxExpanded
// subschemas: a reference back to a subschema that encloses it (recursion
// through a property or an item) counts once, since the value bounds how
// often a validator follows it. The error is an *Error.
func (g Graph) Check(root int) error {
	if err := g.checkCycles(); err != nil {
		return err
	}
	const (
		unseen = iota
		open
		done
	)
	state := make([]int, g.N)
	height := make([]int, g.N)
	size := make([]int, g.N)
	var err error
	// visit computes the height and the unfolded size of i, reached at
	// depth: a reference back to an open subschema (recursion) counts one.
	var visit func(i, depth int)
	visit = func(i, depth int) {
		if state[i] == done {
			if depth+height[i]-1 > MaxDepth && err == nil {
				err = g.tooDeep(i)
			}
			return
		}
		if depth > MaxDepth {
			err = g.tooDeep(i)
			return
		}
		state[i] = open
		height[i], size[i] = 1, 1
		g.Children(i, func(j int, _ bool) {
			if err != nil {
				return
			}
			if state[j] == open {
				size[i]++
				return
			}
			visit(j, depth+1)
			height[i] = max(height[i], height[j]+1)
			size[i] = min(size[i]+size[j], MaxExpanded+1)
		})
		state[i] = done
		if size[i] > MaxExpanded && err == nil {
			err = past("MaxExpanded", "the schema expands to more than %d subschemas when its references are followed, the one at %s alone", MaxExpanded, g.Where(i))
		}
	}
	visit(root, 1)
	return err
}

func (g Graph) tooDeep(i int) error {
	return past("MaxDepth", "subschemas are nested more than %d deep when references are followed, at %s", MaxDepth, g.Where(i))
}

// checkCycles refuses a cycle of subschemas that apply each other to the
// same value.
func (g Graph) checkCycles() error {
	const (
		unseen = iota
		open
		done
	)
	state := make([]int, g.N)
	var err error
	var visit func(i int)
	visit = func(i int) {
		state[i] = open
		g.Children(i, func(j int, same bool) {
			if !same || err != nil {
				return
			}
			switch state[j] {
			case open:
				err = refuse("the subschema at %s applies itself to the same value again, through %s, which no value can pass", g.Where(j), g.Where(i))
			case unseen:
				visit(j)
			}
		})
		state[i] = done
	}
	for i := range g.N {
		if state[i] == unseen && err == nil {
			visit(i)
		}
	}
	return err
}
