package agent

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/lambda-agent/lambda-agent/internal/testkit/conversetest"
)

// Stored session sizes the benchmarks compare. The window is the same for
// each: what lies outside it must not cost anything.
var storedSizes = []int{40, 1_000, 10_000}

// benchWindow returns the conversation a turn gets for a session of stored
// messages: a window of the last 40 (tool turns and plain turns), with the
// rest counted in Removed, plus the new input.
func benchWindow(stored int) *Conversation {
	var msgs []Message
	for i := 0; len(msgs) < 40; i++ {
		if i%3 == 0 {
			msgs = append(msgs, toolTurn(i, 2, 2000)...)
		} else {
			msgs = append(msgs, plainTurn(i)...)
		}
	}
	msgs = msgs[len(msgs)-40:]
	for !IsTurnStart(msgs[0]) {
		msgs = msgs[1:]
	}
	msgs = append(msgs, UserText("new input"))
	return &Conversation{Messages: msgs, Window: WindowState{Removed: stored - len(msgs) + 1}}
}

func BenchmarkManagers(b *testing.B) {
	managers := map[string]ConversationManager{
		"sliding":     SlidingWindow{},
		"summarizing": Summarizing{Model: &fakeSummarizer{}},
	}
	for _, name := range []string{"sliding", "summarizing"} {
		m := managers[name]
		for _, stored := range storedSizes {
			base := benchWindow(stored)
			b.Run(fmt.Sprintf("%s/apply+view/stored=%d", name, stored), func(b *testing.B) {
				for b.Loop() {
					c := base.clone()
					if err := m.Apply(context.Background(), c); err != nil {
						b.Fatal(err)
					}
					_ = c.View()
				}
			})
			b.Run(fmt.Sprintf("%s/reduce+view/stored=%d", name, stored), func(b *testing.B) {
				for b.Loop() {
					c := base.clone()
					if err := m.Reduce(context.Background(), c); err != nil {
						b.Fatal(err)
					}
					_ = c.View()
				}
			})
		}
	}
}

// BenchmarkReduceWholeHistory is the cost a manager would pay if a store
// handed it the whole history rather than the window, for comparison.
func BenchmarkReduceWholeHistory(b *testing.B) {
	for _, stored := range storedSizes {
		full := plainHistory(stored / 2)
		b.Run(fmt.Sprintf("sliding/stored=%d", stored), func(b *testing.B) {
			for b.Loop() {
				c := &Conversation{Messages: full}
				if err := (SlidingWindow{}).Apply(context.Background(), c); err != nil {
					b.Fatal(err)
				}
				_ = c.View()
			}
		})
	}
}

// BenchmarkTurn is a whole turn through the real SDK against the stand-in,
// which answers at once: the agent's own overhead, HTTP on loopback included.
func BenchmarkTurn(b *testing.B) {
	s := conversetest.NewServer()
	defer s.Close()
	model := wireModel(b, s, "bench")
	calc, err := NewFuncTool("calculator", "adds", func(_ context.Context, _ *ToolCall, in struct {
		Expression string `json:"expression"`
	}) (string, error) {
		return strings.Repeat("4", 1), nil
	})
	if err != nil {
		b.Fatal(err)
	}
	a, err := New(Config{Model: model, Tools: []Tool{calc}})
	if err != nil {
		b.Fatal(err)
	}
	conv := benchWindow(40)
	conv.Messages = conv.Messages[:len(conv.Messages)-1]
	b.Run("plain", func(b *testing.B) {
		s.Responder = func(*conversetest.Request) conversetest.Reply { return conversetest.Text("ok") }
		for b.Loop() {
			if _, err := a.Run(context.Background(), conv, []ContentBlock{Text("hi")}); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("tool", func(b *testing.B) {
		s.Responder = func(r *conversetest.Request) conversetest.Reply {
			if r.Messages[len(r.Messages)-1].Content[0].ToolResult != nil {
				return conversetest.Text("4")
			}
			return conversetest.ToolUse("t", "calculator", map[string]string{"expression": "2+2"})
		}
		for b.Loop() {
			if _, err := a.Run(context.Background(), conv, []ContentBlock{Text("2+2?")}); err != nil {
				b.Fatal(err)
			}
		}
	})
}
