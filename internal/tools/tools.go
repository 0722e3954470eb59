package tools

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"
	_ "time/tzdata" // current_time must know every IANA zone, and Lambda's base image has none

	"github.com/lambda-agent/lambda-agent/internal/agent"
)

// Names are the built-in tools a deployment enables by default, in the
// order it lists them.
var Names = []string{"calculator", "current_time", "remember", "recall"}

// Optional are the built-in tools enabled only by name. ask_user pauses
// turns for a person, which a client must then answer (see
// agent.AskUser), so no deployment gets it without asking.
var Optional = []string{agent.AskUserName}

// extra holds tools that only test builds include (see slow.go).
var extra = map[string]func() agent.Tool{}

// ByName returns the built-in tools with the given names, in that order.
func ByName(names []string) ([]agent.Tool, error) {
	var out []agent.Tool
	for _, name := range names {
		var t agent.Tool
		switch name {
		case "calculator":
			t = Calculator()
		case "current_time":
			t = CurrentTime(time.Now)
		case "remember":
			t = Remember()
		case "recall":
			t = Recall()
		case agent.AskUserName:
			t = agent.AskUser()
		default:
			build, ok := extra[name]
			if !ok {
				return nil, fmt.Errorf("tools: unknown tool %q; the built-ins are %s", name, strings.Join(append(slices.Clone(Names), Optional...), ", "))
			}
			t = build()
		}
		out = append(out, t)
	}
	return out, nil
}

// CalculatorInput is the calculator's input.
type CalculatorInput struct {
	Expression string `json:"expression" jsonschema:"an arithmetic expression with + - * / % ^ and parentheses, e.g. (2.5 + 3) * 4^2"`
}

// CalculatorOutput is the calculator's answer.
type CalculatorOutput struct {
	Expression string  `json:"expression"`
	Result     float64 `json:"result"`
}

// Calculator returns a tool that evaluates arithmetic with Eval.
func Calculator() agent.Tool {
	return must(agent.NewFuncTool("calculator",
		"Evaluate an arithmetic expression exactly. Use it for any arithmetic instead of computing in your head.",
		func(_ context.Context, _ *agent.ToolCall, in CalculatorInput) (CalculatorOutput, error) {
			v, err := Eval(in.Expression)
			if err != nil {
				return CalculatorOutput{}, err
			}
			return CalculatorOutput{Expression: in.Expression, Result: v}, nil
		}))
}

// TimeInput is current_time's input.
type TimeInput struct {
	Timezone string `json:"timezone,omitempty" jsonschema:"an IANA time zone such as Europe/Paris; UTC when omitted"`
}

// TimeOutput is current_time's answer.
type TimeOutput struct {
	Timezone string `json:"timezone"`
	Time     string `json:"time"`
	Weekday  string `json:"weekday"`
}

// CurrentTime returns a tool that tells the time in an IANA zone. now is the
// clock; production passes time.Now.
func CurrentTime(now func() time.Time) agent.Tool {
	return must(agent.NewFuncTool("current_time",
		"Get the current date and time, in UTC or in an IANA time zone.",
		func(_ context.Context, _ *agent.ToolCall, in TimeInput) (TimeOutput, error) {
			zone := in.Timezone
			if zone == "" {
				zone = "UTC"
			}
			if zone == "Local" {
				return TimeOutput{}, errors.New(`unknown time zone "Local"; use an IANA name such as America/New_York`)
			}
			loc, err := time.LoadLocation(zone)
			if err != nil {
				return TimeOutput{}, fmt.Errorf("unknown time zone %q; use an IANA name such as America/New_York", zone)
			}
			t := now().In(loc)
			return TimeOutput{Timezone: zone, Time: t.Format(time.RFC3339), Weekday: t.Weekday().String()}, nil
		}))
}

// memoryPrefix namespaces remembered facts in the agent state.
const memoryPrefix = "memory:"

// maxKey and maxValue bound what remember stores, so a model cannot bloat the
// session.
const (
	maxKey   = 128
	maxValue = 4096
)

// RememberInput is remember's input.
type RememberInput struct {
	Key   string `json:"key" jsonschema:"a short name for the fact, e.g. favourite_colour"`
	Value string `json:"value" jsonschema:"the fact to remember"`
}

// Remember returns a tool that stores a fact in the agent state, where it
// outlives the turn.
func Remember() agent.Tool {
	return must(agent.NewFuncTool("remember",
		"Remember a fact about the user or the conversation under a key, for later turns.",
		func(_ context.Context, call *agent.ToolCall, in RememberInput) (string, error) {
			key := strings.TrimSpace(in.Key)
			switch {
			case key == "" || len(key) > maxKey:
				return "", fmt.Errorf("the key must be 1 to %d bytes", maxKey)
			case len(in.Value) > maxValue:
				return "", fmt.Errorf("the value is %d bytes; at most %d", len(in.Value), maxValue)
			}
			if err := call.State.Set(memoryPrefix+key, in.Value); err != nil {
				return "", err
			}
			return fmt.Sprintf("Remembered %s.", key), nil
		}))
}

// RecallInput is recall's input.
type RecallInput struct {
	Key string `json:"key,omitempty" jsonschema:"the key of the fact; omit it to list every key"`
}

// Recall returns a tool that reads facts stored by Remember.
func Recall() agent.Tool {
	return must(agent.NewFuncTool("recall",
		"Recall a fact remembered earlier, by key; without a key, list the keys.",
		func(_ context.Context, call *agent.ToolCall, in RecallInput) (string, error) {
			keys := memoryKeys(call.State)
			key := strings.TrimSpace(in.Key)
			if key == "" {
				if len(keys) == 0 {
					return "Nothing has been remembered yet.", nil
				}
				return "Remembered keys: " + strings.Join(keys, ", "), nil
			}
			var value string
			ok, err := call.State.Get(memoryPrefix+key, &value)
			switch {
			case err != nil:
				return "", err
			case !ok && len(keys) == 0:
				return "", fmt.Errorf("nothing is remembered under %q; nothing has been remembered yet", key)
			case !ok:
				return "", fmt.Errorf("nothing is remembered under %q; the keys are %s", key, strings.Join(keys, ", "))
			}
			return value, nil
		}))
}

func memoryKeys(s *agent.State) []string {
	var keys []string
	for _, k := range s.Keys() {
		if name, ok := strings.CutPrefix(k, memoryPrefix); ok {
			keys = append(keys, name)
		}
	}
	slices.Sort(keys)
	return keys
}

// must unwraps a tool built from constants, which can fail only through a
// programming error that the package's tests catch.
func must[T agent.Tool](t T, err error) agent.Tool {
	if err != nil {
		panic(err)
	}
	return t
}
