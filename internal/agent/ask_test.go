package agent_test

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lambda-agent/lambda-agent/internal/agent"
	"github.com/lambda-agent/lambda-agent/internal/testkit/conversetest"
)

// weatherAsker is an Asker: its run asks which city, and the answer is
// the forecast; "again" asks once more.
type weatherAsker struct {
	agent.Tool
	runs, answers atomic.Int32
}

func newWeatherAsker(t *testing.T) *weatherAsker {
	t.Helper()
	w := &weatherAsker{}
	tool, err := agent.NewFuncTool("weather", "the weather", func(context.Context, *agent.ToolCall, struct{}) (string, error) {
		w.runs.Add(1)
		return "", agent.Ask("Which city?")
	})
	if err != nil {
		t.Fatal(err)
	}
	w.Tool = tool
	return w
}

func (w *weatherAsker) Answered(_ context.Context, call *agent.ToolCall, answer string) ([]agent.ToolResultContent, error) {
	w.answers.Add(1)
	if answer == "again" {
		return nil, agent.Ask("Which city, really?")
	}
	if err := call.State.Set("city", answer); err != nil {
		return nil, err
	}
	return []agent.ToolResultContent{{Text: "Sunny in " + answer + "."}}, nil
}

var _ agent.Asker = (*weatherAsker)(nil)

// TestAskerPausesAndTakesTheAnswer: a tool whose run asks the person
// pauses the turn on a question named AskedName; the answer goes to the
// tool's Answered, not to the model, whose result is the use's; an
// answer that asks again waits again; a declined question runs nothing;
// a tool that needs approval first asks after it. Every history passes
// the strict stand-in.
func TestAskerPausesAndTakesTheAnswer(t *testing.T) {
	for _, approval := range []bool{false, true} {
		name := "plain"
		if approval {
			name = "after an approval"
		}
		t.Run(name, func(t *testing.T) {
			s := newServer(t)
			s.Enqueue(conversetest.ToolUse("u1", "weather", map[string]any{}), conversetest.Text("It is sunny."))
			w := newWeatherAsker(t)
			var tool agent.Tool = w
			if approval {
				tool = agent.RequireApproval(w)
			}
			a := newAgent(t, s, agent.Config{Tools: []agent.Tool{tool}})
			conv := &agent.Conversation{}
			res, err := a.Run(t.Context(), conv, input("weather?"))
			if err != nil {
				t.Fatal(err)
			}
			conv = committed(t, conv, res)
			if approval {
				res, err = a.Answer(t.Context(), conv, []agent.Response{approve("u1", true, "")}, nil)
				if err != nil {
					t.Fatal(err)
				}
				conv = committed(t, conv, res)
			}
			if res.Pending == nil || len(res.Pending.Interrupts) != 1 {
				t.Fatalf("pending %+v", res.Pending)
			}
			in := res.Pending.Interrupts[0]
			if in.Kind != agent.KindQuestion || in.Name != agent.AskedName || in.Reason != "Which city?" || in.Tool != "weather" || in.ID != "u1" || w.runs.Load() != 1 {
				t.Fatalf("interrupt %+v, %d runs", in, w.runs.Load())
			}
			again, err := a.Answer(t.Context(), conv, []agent.Response{{InterruptID: "u1", Answer: "again"}}, nil)
			if err != nil {
				t.Fatal(err)
			}
			if again.Pending == nil || len(again.Pending.Interrupts) != 1 || again.Pending.Interrupts[0].Reason != "Which city, really?" || len(again.Messages) != 0 {
				t.Fatalf("asked again: pending %+v, messages %+v", again.Pending, again.Messages)
			}
			conv = committed(t, conv, again)
			ans, err := a.Answer(t.Context(), conv, []agent.Response{{InterruptID: "u1", Answer: "Paris"}}, nil)
			if err != nil {
				t.Fatal(err)
			}
			if len(ans.Messages) != 1 || ans.Messages[0].Content[0].ToolResult.Content[0].Text != "Sunny in Paris." || w.answers.Load() != 2 || w.runs.Load() != 1 {
				t.Fatalf("answered: %+v, %d answers, %d runs", ans.Messages, w.answers.Load(), w.runs.Load())
			}
			if string(ans.State["city"]) != `"Paris"` {
				t.Errorf("state %s", ans.State)
			}
			conv = committed(t, conv, ans)
			done, err := a.Continue(t.Context(), conv, nil)
			if err != nil || done.Text != "It is sunny." {
				t.Fatalf("continue: %v %+v", err, done)
			}
			committed(t, conv, done)
		})
	}
}

// TestDeclinedAskerQuestion: a declined question gets an error result,
// and the tool is not called.
func TestDeclinedAskerQuestion(t *testing.T) {
	s := newServer(t)
	s.Enqueue(conversetest.ToolUse("u1", "weather", map[string]any{}), conversetest.Text("OK."))
	w := newWeatherAsker(t)
	a := newAgent(t, s, agent.Config{Tools: []agent.Tool{w}})
	conv := &agent.Conversation{}
	res, err := a.Run(t.Context(), conv, input("weather?"))
	if err != nil {
		t.Fatal(err)
	}
	conv = committed(t, conv, res)
	no := false
	ans, err := a.Answer(t.Context(), conv, []agent.Response{{InterruptID: "u1", Approve: &no}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	r := ans.Messages[0].Content[0].ToolResult
	if r.Status != agent.ToolError || !strings.Contains(r.Content[0].Text, "declined") || w.answers.Load() != 0 {
		t.Errorf("result %+v, %d answers", r, w.answers.Load())
	}
	if _, err := a.Answer(t.Context(), committed(t, conv, ans), []agent.Response{{InterruptID: "u1", Answer: "x"}}, nil); !errors.Is(err, agent.ErrNothingPending) && err == nil {
		t.Errorf("an answer after the decline: %v", err)
	}
}

// TestToolProgressIsStreamed: what a tool reports while it runs is
// emitted between its use and its result, in order, when the turn
// streams; an unstreamed turn drops it; and a run past its time reports
// nothing after the turn, as Stream promises.
func TestToolProgressIsStreamed(t *testing.T) {
	late := make(chan struct{})
	reported := make(chan struct{})
	tool, err := agent.NewFuncTool("remote", "reports as it goes", func(ctx context.Context, call *agent.ToolCall, in struct {
		Slow bool `json:"slow,omitempty"`
	}) (string, error) {
		if in.Slow {
			<-ctx.Done() // past its time: it reports after the turn
			go func() {
				<-late
				call.Progress("too late")
				close(reported)
			}()
			return "", ctx.Err()
		}
		call.Progress("one, ")
		call.Progress("two")
		return "done", nil
	})
	if err != nil {
		t.Fatal(err)
	}
	s := newServer(t)
	s.Enqueue(conversetest.ToolUse("u1", "remote", map[string]any{}), conversetest.Text("OK."))
	a := newAgent(t, s, agent.Config{Tools: []agent.Tool{tool}, ToolTimeout: 50 * time.Millisecond})
	var events []string
	var ended atomic.Bool
	emit := func(e agent.Event) {
		if ended.Load() {
			t.Errorf("an event after the turn: %+v", e)
		}
		switch {
		case e.ToolUse != nil:
			events = append(events, "use")
		case e.ToolProgress != nil:
			if e.ToolProgress.ToolUseID != "u1" || e.ToolProgress.Name != "remote" {
				t.Errorf("progress %+v", e.ToolProgress)
			}
			events = append(events, "progress:"+e.ToolProgress.Text)
		case e.ToolResult != nil:
			events = append(events, "result")
		}
	}
	if _, err := a.Stream(t.Context(), &agent.Conversation{}, input("go"), emit); err != nil {
		t.Fatal(err)
	}
	if want := "use progress:one,  progress:two result"; strings.Join(events, " ") != want {
		t.Errorf("events %q; want %q", strings.Join(events, " "), want)
	}

	s.Enqueue(conversetest.ToolUse("u2", "remote", map[string]any{}), conversetest.Text("OK."))
	if _, err := a.Run(t.Context(), &agent.Conversation{}, input("go")); err != nil {
		t.Fatal(err)
	}

	s.Enqueue(conversetest.ToolUse("u3", "remote", map[string]any{"slow": true}), conversetest.Text("OK."))
	events = nil
	if _, err := a.Stream(t.Context(), &agent.Conversation{}, input("go"), emit); err != nil {
		t.Fatal(err)
	}
	ended.Store(true)
	close(late)
	<-reported
	if strings.Contains(strings.Join(events, " "), "too late") {
		t.Errorf("a run past its time reported: %v", events)
	}
}
