package schema

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lambda-agent/lambda-agent/internal/agent"
)

// TestHostileSchemas checks how each hostile case ends: refused when it is
// compiled, stopped by the step budget, or validated. The time budget is
// lifted so that the outcome does not depend on the machine's speed.
func TestHostileSchemas(t *testing.T) {
	for _, c := range hostileCases {
		t.Run(c.name, func(t *testing.T) {
			err := outcome(t, c, time.Hour)
			if c.want == "" {
				if err != nil {
					t.Fatalf("err = %v, want the value validated", err)
				}
				return
			}
			wantLimit(t, err, c.want)
		})
	}
}

// recursion is a schema just under the static limits whose validation
// grows exponentially with the depth of the value: every array applies the
// definition to each of its items twice, through items and contains.
const recursion = `{"type":"object","properties":{"a":{"$ref":"#/$defs/t"}},` + twice + `}`

// deepArray is {"a": [[[...]]]}, nested n deep.
func deepArray(n int) json.RawMessage {
	return json.RawMessage(`{"a":` + nested("[", "]", n, "") + `}`)
}

func compileForTest(t *testing.T, schema string) *compiled {
	t.Helper()
	s, err := Compile(json.RawMessage(schema))
	if err != nil {
		t.Fatal(err)
	}
	return s.(*compiled)
}

func TestStepBudget(t *testing.T) {
	s := compileForTest(t, recursion)
	s.timeout = time.Hour
	// Shallow values are cheap: 2^10 paths. (The innermost array has no
	// item to match contains.)
	if p, err := s.Validate(t.Context(), deepArray(10)); p == nil || err != nil {
		t.Fatalf("Validate = %q, %v; want problems", p, err)
	}
	_, err := s.Validate(t.Context(), deepArray(50))
	wantLimit(t, err, "MaxSteps")
	if !strings.Contains(err.Error(), "too expensive to validate") {
		t.Errorf("err = %v, want it to say the schema is too expensive", err)
	}
	// The budget is the request's: once spent, even a cheap value is
	// refused, so that retries cannot add up to more than one budget.
	_, err = s.Validate(t.Context(), deepArray(2))
	wantLimit(t, err, "MaxSteps")
}

func TestBudgetIsSharedByAllValidations(t *testing.T) {
	s := compileForTest(t, recursion)
	s.timeout = time.Hour
	// Each of these costs about 164,000 steps: six fit MaxSteps, ten do not.
	var err error
	n := 0
	for ; n < 10 && err == nil; n++ {
		_, err = s.Validate(t.Context(), deepArray(14))
	}
	wantLimit(t, err, "MaxSteps")
	if n < 2 {
		t.Errorf("the first validation alone spent the budget; the test needs a cheaper value")
	}
	// A fresh compile, for a fresh request, has the whole budget again.
	if p, err := compileForTest(t, recursion).Validate(t.Context(), deepArray(14)); p == nil || err != nil {
		t.Errorf("a new schema: Validate = %q, %v; want problems", p, err)
	}
}

func TestTimeBudget(t *testing.T) {
	s := compileForTest(t, recursion)
	s.timeout = time.Nanosecond
	_, err := s.Validate(t.Context(), deepArray(50))
	wantLimit(t, err, "MaxValidateTime")
}

// countdown is a context that ends after its Err has been asked n times: it
// ends a validation midway, whatever the machine's speed.
type countdown struct {
	context.Context
	n atomic.Int64
}

func (c *countdown) Err() error {
	if c.n.Add(-1) < 0 {
		return context.Canceled
	}
	return nil
}

func TestValidateStopsWhenTheContextEnds(t *testing.T) {
	s := compileForTest(t, recursion)
	s.timeout = time.Hour
	t.Run("before", func(t *testing.T) {
		ctx, cancel := context.WithCancel(t.Context())
		cancel()
		p, err := s.Validate(ctx, deepArray(2))
		if !errors.Is(err, context.Canceled) || p != nil {
			t.Errorf("Validate = %q, %v; want context.Canceled", p, err)
		}
	})
	t.Run("midway", func(t *testing.T) {
		ctx := &countdown{Context: t.Context()}
		ctx.n.Store(3)
		_, err := s.Validate(ctx, deepArray(50))
		if !errors.Is(err, context.Canceled) || errors.Is(err, agent.ErrInvalidSchema) {
			t.Errorf("err = %v, want context.Canceled and not the schema's fault", err)
		}
	})
}

func TestValidateConcurrently(t *testing.T) {
	s := compileForTest(t, recursion)
	s.timeout = time.Hour
	var wg sync.WaitGroup
	errs := make([]error, 8)
	probs := make([][]string, 8)
	for i := range errs {
		wg.Go(func() { probs[i], errs[i] = s.Validate(t.Context(), deepArray(8)) })
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil || probs[i] == nil {
			t.Errorf("validation %d: %q, %v; want problems and no error", i, probs[i], err)
		}
	}
	// Then one too expensive for what is left, whichever ran first.
	if _, err := s.Validate(t.Context(), deepArray(50)); !errors.Is(err, agent.ErrInvalidSchema) {
		t.Errorf("an expensive value after them: %v, want the schema's error", err)
	}
}

func TestValidateRefusesDeepOrHugeValues(t *testing.T) {
	s := compileForTest(t, `{"type":"object"}`)
	tests := []struct {
		name, value, want string
	}{
		{"nested too deep", `{"a":` + nested("[", "]", MaxInstanceDepth, "") + `}`, "(limit: MaxInstanceDepth)"},
		{"nested at the limit", `{"a":` + nested("[", "]", MaxInstanceDepth-1, "") + `}`, ""},
		{"a huge exponent", `{"a":[1,1e999999]}`, "/a/1: the number 1e999999 has an exponent beyond ±400 (limit: MaxNumberExponent)"},
		{"a long number", `{"a":1` + strings.Repeat("0", MaxNumberLength) + `}`, "(limit: MaxNumberLength)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := s.Validate(t.Context(), json.RawMessage(tt.value))
			if err != nil {
				t.Fatal(err)
			}
			if tt.want == "" {
				if p != nil {
					t.Errorf("problems %q, want none", p)
				}
				return
			}
			if len(p) != 1 || !strings.Contains(p[0], tt.want) {
				t.Errorf("problems %q, want one mentioning %q", p, tt.want)
			}
		})
	}
}

func TestCostSteps(t *testing.T) {
	c := &cost{own: 3, props: map[string]int64{"a": 5, "b": 7}, perKey: 2, prefix: []int64{10, 20}, perItem: 4, perElem: 1, text: true, number: true}
	tests := []struct {
		value any
		want  int64
	}{
		{map[string]any{"a": 1, "c": 2}, 3 + 2*(1+2) + 5},
		{map[string]any{"a": 1, "b": 2, "c": 3, "d": 4}, 3 + 4*(1+2) + 5 + 7},
		{[]any{1}, 3 + 10 + 1},
		{[]any{1, 2, 3, 4}, 3 + 10 + 20 + 2*4 + 4*1},
		{strings.Repeat("x", 3*textBytes), 3 + 1 + 3},
		{json.Number("1.5"), 3 + numSteps},
		{true, 3},
	}
	for _, tt := range tests {
		if got := c.steps(tt.value); got != tt.want {
			t.Errorf("steps(%v) = %d, want %d", tt.value, got, tt.want)
		}
	}
}
