package agent_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"

	"github.com/lambda-agent/lambda-agent/internal/agent"
	"github.com/lambda-agent/lambda-agent/internal/agent/bedrock"
	"github.com/lambda-agent/lambda-agent/internal/testkit/conversetest"
	"github.com/lambda-agent/lambda-agent/internal/tools"
	"github.com/lambda-agent/lambda-agent/internal/turn"
)

// The Go examples of the docs (docs/tools.md, docs/approvals.md) are these,
// run by go test. TestDocsGoIsExamples holds the two together.

// Forecast is the weather tool's answer in the example of docs/tools.md.
type Forecast struct {
	City string `json:"city"`
	Days []Day  `json:"days"`
}

// Day is one day of a Forecast.
type Day struct {
	Summary string `json:"summary"`
}

// lookUp stands in for a weather service.
func lookUp(ctx context.Context, city string, days int) (Forecast, error) {
	if err := ctx.Err(); err != nil {
		return Forecast{}, err
	}
	f := Forecast{City: city}
	for range days {
		f.Days = append(f.Days, Day{Summary: "sunny"})
	}
	return f, nil
}

type WeatherInput struct {
	City string `json:"city" jsonschema:"the city, e.g. Lisbon"`
	Days int    `json:"days,omitempty" jsonschema:"forecast days, 1 to 7"`
}

func ExampleNewFuncTool() {
	weather, err := agent.NewFuncTool("weather", "Get the weather forecast for a city.",
		func(ctx context.Context, call *agent.ToolCall, in WeatherInput) (Forecast, error) {
			return lookUp(ctx, in.City, max(in.Days, 1)) // honour ctx: tools have a timeout
		})
	if err != nil {
		panic(err)
	}

	model := exampleModel(
		conversetest.ToolUse("w1", "weather", map[string]any{"city": "Lisbon", "days": 2}).
			WithToolUse("w2", "weather", map[string]any{"city": 42}),
		conversetest.Text("Sunny in Lisbon."),
	)
	printToolResults(agent.Config{Model: model, Tools: []agent.Tool{weather}}, "the weather in Lisbon?")
	// Output:
	// success: {"city":"Lisbon","days":[{"summary":"sunny"},{"summary":"sunny"}]}
	// error: The input does not match the tool's schema:
	// - validating root: validating /properties/city: type: 42 has type "integer", want "string"
}

func ExampleHooks() {
	// Keep card numbers out of the session's memory.
	cardNumber := regexp.MustCompile(`\b(?:\d[ -]?){12,18}\d\b`)
	hooks := agent.Hooks{
		BeforeToolCall: []func(context.Context, *agent.BeforeToolCallEvent){
			func(ctx context.Context, e *agent.BeforeToolCallEvent) {
				if e.Use.Name == "remember" && cardNumber.Match(e.Use.Input) {
					e.Cancel = "card numbers are not stored"
				}
			},
		},
	}

	model := exampleModel(
		conversetest.ToolUse("r1", "remember", map[string]string{"key": "card", "value": "4111 1111 1111 1111"}).
			WithToolUse("r2", "remember", map[string]string{"key": "colour", "value": "teal"}),
		conversetest.Text("I remember your colour, not your card."),
	)
	printToolResults(agent.Config{Model: model, Tools: []agent.Tool{tools.Remember()}, Hooks: hooks},
		"remember my card, 4111 1111 1111 1111, and that I like teal")
	// Output:
	// error: The tool call was cancelled: card numbers are not stored
	// success: Remembered colour.
}

func ExampleInterruptRequest() {
	// Refunds over 100 wait for a person's approval.
	hooks := agent.Hooks{
		BeforeToolCall: []func(context.Context, *agent.BeforeToolCallEvent){
			func(ctx context.Context, e *agent.BeforeToolCallEvent) {
				var in struct{ Amount float64 }
				if e.Use.Name == "refund" && json.Unmarshal(e.Use.Input, &in) == nil && in.Amount > 100 {
					e.Interrupt = &agent.InterruptRequest{
						Name:    "large_refund",
						Reason:  fmt.Sprintf("A refund of $%.2f needs a manager's approval.", in.Amount),
						Payload: e.Use.Input,
					}
				}
			},
		},
	}

	refund, _ := agent.NewFuncTool("refund", "Refund an order.",
		func(ctx context.Context, call *agent.ToolCall, in struct {
			Amount float64 `json:"amount"`
		}) (string, error) {
			return fmt.Sprintf("Refunded $%.2f.", in.Amount), nil
		})
	model := exampleModel(conversetest.ToolUse("t1", "refund", map[string]any{"amount": 120}))
	a, err := agent.New(agent.Config{Model: model, Tools: []agent.Tool{refund}, Hooks: hooks})
	if err != nil {
		panic(err)
	}
	res, err := a.Run(context.Background(), &agent.Conversation{}, []agent.ContentBlock{agent.Text("refund my $120 order")})
	if err != nil {
		panic(err)
	}
	in := res.Pending.Interrupts[0]
	fmt.Println(res.StopReason, in.Name, in.Tool, string(in.Payload))
	fmt.Println(in.Reason)
	// Output:
	// interrupt large_refund refund {"amount":120}
	// A refund of $120.00 needs a manager's approval.
}

// exampleModel is the Bedrock model on a Converse stand-in that answers
// with the given responses, in order.
func exampleModel(answers ...conversetest.Reply) agent.Model {
	s := conversetest.NewServer()
	s.Enqueue(answers...)
	m, err := bedrock.New(s.Client(), bedrock.Config{ModelID: "test-model"})
	if err != nil {
		panic(err)
	}
	return m
}

// printToolResults runs a turn and prints the results of the tools the
// model asked for.
func printToolResults(cfg agent.Config, message string) {
	a, err := agent.New(cfg)
	if err != nil {
		panic(err)
	}
	res, err := a.Run(context.Background(), &agent.Conversation{}, []agent.ContentBlock{agent.Text(message)})
	if err != nil {
		panic(err)
	}
	for _, c := range res.Messages[2].Content {
		r := c.ToolResult.Content[0]
		fmt.Printf("%s: %s%s\n", c.ToolResult.Status, r.Text, r.JSON)
	}
}

// favourites is a context provider: it gives every turn what it knows of
// the person, and learns from what they say.
type favourites struct {
	mu    sync.Mutex
	known map[string]string // what each owner likes
}

func (f *favourites) Provide(_ context.Context, p turn.Provision) ([]agent.ContextEntry, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if like, ok := f.known[p.Owner]; ok {
		return []agent.ContextEntry{{Description: "what the person likes", Value: like}}, nil
	}
	return nil, nil
}

func (f *favourites) Committed(_ context.Context, c turn.Committed) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, m := range c.Messages {
		if like, ok := strings.CutPrefix(m.Text(), "I like "); ok && m.Role == agent.RoleUser {
			f.known[c.Owner] = like
		}
	}
}

// Example_contextProvider: a provider learns from one owner's committed
// turn, and gives that owner's next turns what it learned, and no one
// else's.
func Example_contextProvider() {
	f := &favourites{known: map[string]string{}}
	ctx := context.Background()
	said := agent.Message{Role: agent.RoleUser, Content: []agent.ContentBlock{agent.Text("I like teal")}}
	f.Committed(ctx, turn.Committed{Owner: "ada", SessionID: "s-1", Messages: []agent.Message{said, agent.AssistantText("Noted.")}})
	mine, _ := f.Provide(ctx, turn.Provision{Owner: "ada", SessionID: "s-2"})
	theirs, _ := f.Provide(ctx, turn.Provision{Owner: "bob", SessionID: "s-3"})
	fmt.Printf("%s: %s; for bob: %d entries\n", mine[0].Description, mine[0].Value, len(theirs))
	// Output: what the person likes: teal; for bob: 0 entries
}

// TestDocsGoIsExamples checks that every Go block of the README and of
// docs/ is code of this file, paragraph by paragraph, so that each one
// compiles and runs as an example.
func TestDocsGoIsExamples(t *testing.T) {
	root := filepath.Join("..", "..")
	pages, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	src, err := os.ReadFile("example_test.go")
	if err != nil {
		t.Fatal(err)
	}
	examples := dedent(string(src))

	var blocks []string
	for _, file := range append([]string{filepath.Join(root, "README.md")}, pages...) {
		text, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		var block *strings.Builder
		sc := bufio.NewScanner(strings.NewReader(string(text)))
		for sc.Scan() {
			switch line := sc.Text(); {
			case line == "```go":
				block = &strings.Builder{}
			case line == "```" && block != nil:
				blocks = append(blocks, block.String())
				block = nil
			case block != nil:
				block.WriteString(line + "\n")
			}
		}
	}
	if len(blocks) < 2 {
		t.Fatalf("found %d Go blocks in the docs, want the tool and the hook", len(blocks))
	}
	for _, b := range blocks {
		for p := range strings.SplitSeq(dedent(b), "\n\n") {
			if !strings.Contains(examples, p) {
				t.Errorf("this Go code of the docs is not in example_test.go:\n%s", p)
			}
		}
	}
}

// dedent drops each line's leading white space.
func dedent(s string) string {
	var b strings.Builder
	for line := range strings.Lines(s) {
		b.WriteString(strings.TrimLeft(line, " \t"))
	}
	return b.String()
}
