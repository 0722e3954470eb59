package agent_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/lambda-agent/lambda-agent/internal/agent"
	"github.com/lambda-agent/lambda-agent/internal/testkit/conversetest"
	"github.com/lambda-agent/lambda-agent/internal/tools"
)

// recorder collects a streamed turn's events.
type recorder struct{ events []agent.Event }

func (r *recorder) emit(e agent.Event) { r.events = append(r.events, e) }

// kinds names the events in order, runs of text as one "text".
func (r *recorder) kinds() string {
	var out []string
	for _, e := range r.events {
		k := "text"
		switch {
		case e.ToolUse != nil:
			k = "tool_use:" + e.ToolUse.Name
		case e.ToolResult != nil:
			k = "tool_result:" + string(e.ToolResult.Status)
		}
		if len(out) == 0 || k != "text" || out[len(out)-1] != "text" {
			out = append(out, k)
		}
	}
	return strings.Join(out, " ")
}

// texts returns the text pieces in order.
func (r *recorder) texts() []string {
	var out []string
	for _, e := range r.events {
		if e.Text != "" {
			out = append(out, e.Text)
		}
	}
	return out
}

func TestStreamText(t *testing.T) {
	s := newServer(t)
	const answer = "Streaming, one piece at a time — à la carte."
	s.Enqueue(conversetest.Text(answer).WithChunking(6, 0).WithUsage(20, 11))
	a := newAgent(t, s, agent.Config{})
	var rec recorder
	conv := longConversation(2)
	res, err := a.Stream(t.Context(), conv, input("Hello"), rec.emit)
	if err != nil {
		t.Fatal(err)
	}
	if got := rec.texts(); len(got) < 6 || strings.Join(got, "") != res.Text || res.Text != answer {
		t.Errorf("pieces %q join to %q; final text %q", got, strings.Join(got, ""), res.Text)
	}
	if res.Usage.InputTokens != 20 || res.Usage.OutputTokens != 11 || res.StopReason != agent.StopEndTurn {
		t.Errorf("usage %+v, stop %s", res.Usage, res.StopReason)
	}
	if r := s.Requests(); len(r) != 1 || r[0].Operation != "ConverseStream" {
		t.Errorf("requests %+v, want one ConverseStream", r)
	}
	next(t, conv, res)
}

func TestStreamToolRoundTrip(t *testing.T) {
	s := newServer(t)
	s.Enqueue(
		conversetest.Text("Let me compute.").
			WithToolUse("c1", "calculator", map[string]any{"expression": "21 * 21"}).
			WithReasoning("Arithmetic: use the tool.", "sig").
			WithChunking(3, 0),
		conversetest.Text("21 × 21 is 441.").WithChunking(4, 0),
	)
	a := newAgent(t, s, agent.Config{Tools: []agent.Tool{tools.Calculator()}})
	var rec recorder
	conv := &agent.Conversation{}
	res, err := a.Stream(t.Context(), conv, input("What is 21*21?"), rec.emit)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := rec.kinds(), "text tool_use:calculator tool_result:success text"; got != want {
		t.Errorf("events %s, want %s", got, want)
	}
	var use *agent.ToolUseBlock
	var result *agent.ToolResultBlock
	for _, e := range rec.events {
		if e.ToolUse != nil {
			use = e.ToolUse
		}
		if e.ToolResult != nil {
			result = e.ToolResult
		}
	}
	if string(use.Input) != `{"expression":"21 * 21"}` || use.ToolUseID != "c1" {
		t.Errorf("tool use %s %s: the input pieces were not put back together", use.ToolUseID, use.Input)
	}
	if result.ToolUseID != "c1" || !strings.Contains(string(result.Content[0].JSON)+result.Content[0].Text, "441") {
		t.Errorf("tool result %+v", result)
	}
	if res.Text != "21 × 21 is 441." || strings.Join(rec.texts(), "") != "Let me compute."+res.Text {
		t.Errorf("final %q, streamed %q", res.Text, strings.Join(rec.texts(), ""))
	}
	// The assistant message keeps the reasoning, whole, for the next call.
	first := res.Messages[1]
	if r := first.Content[0].Reasoning; r == nil || r.Text != "Arithmetic: use the tool." || r.Signature != "sig" {
		t.Errorf("reasoning %+v", first.Content[0])
	}
	// The second call carried the tool use and its result back, and the
	// strict stand-in accepted it.
	if r := s.Requests(); len(r) != 2 || !r[1].Valid {
		t.Fatalf("%d requests", len(r))
	}
	next(t, conv, res)
}

func TestStreamRetriesOnlyBeforeTheFirstPiece(t *testing.T) {
	t.Run("throttled before the stream: retried", func(t *testing.T) {
		s := newServer(t)
		s.Enqueue(conversetest.Throttle(), conversetest.Unavailable(), conversetest.Text("made it"))
		a := newAgent(t, s, agent.Config{})
		var rec recorder
		res, err := a.Stream(t.Context(), &agent.Conversation{}, input("Hello"), rec.emit)
		if err != nil {
			t.Fatal(err)
		}
		if strings.Join(rec.texts(), "") != "made it" || res.Text != "made it" || s.Calls() != 3 {
			t.Errorf("streamed %q after %d calls", rec.texts(), s.Calls())
		}
	})
	t.Run("throttled mid-stream: not retried", func(t *testing.T) {
		s := newServer(t)
		s.Enqueue(
			conversetest.Text("This will break off").WithChunking(4, 0).WithStreamError(3, conversetest.CodeThrottling, "slow down"),
			conversetest.Text("a retry would repeat the answer"),
		)
		a := newAgent(t, s, agent.Config{})
		var rec recorder
		_, err := a.Stream(t.Context(), &agent.Conversation{}, input("Hello"), rec.emit)
		if !errors.Is(err, agent.ErrStreamInterrupted) || !agent.IsModelError(err, agent.KindThrottled) {
			t.Fatalf("err = %v, want ErrStreamInterrupted wrapping a throttling error", err)
		}
		if s.Calls() != 1 || s.Pending() != 1 {
			t.Errorf("%d calls, %d replies left: the stream was retried", s.Calls(), s.Pending())
		}
		// messageStart and two pieces went out before the exception.
		if strings.Join(rec.texts(), "") != "This wil" {
			t.Errorf("streamed %q before the break", strings.Join(rec.texts(), ""))
		}
	})
	t.Run("model stream error before any text: retried", func(t *testing.T) {
		s := newServer(t)
		s.Enqueue(conversetest.Text("lost").WithStreamError(1, conversetest.CodeModelStreamError, "the model failed"), conversetest.Text("second try"))
		a := newAgent(t, s, agent.Config{})
		var rec recorder
		res, err := a.Stream(t.Context(), &agent.Conversation{}, input("Hello"), rec.emit)
		if err != nil {
			t.Fatal(err)
		}
		if strings.Join(rec.texts(), "") != "second try" || res.Text != "second try" {
			t.Errorf("streamed %q, text %q", rec.texts(), res.Text)
		}
	})
	t.Run("model stream error after text: not retried", func(t *testing.T) {
		s := newServer(t)
		s.Enqueue(conversetest.Text("Half an answer").WithStreamError(2, conversetest.CodeModelStreamError, "the model failed"), conversetest.Text("unused"))
		a := newAgent(t, s, agent.Config{})
		_, err := a.Stream(t.Context(), &agent.Conversation{}, input("Hello"), func(agent.Event) {})
		var te *agent.TurnError
		if !errors.As(err, &te) || !errors.Is(err, agent.ErrStreamInterrupted) || !agent.IsModelError(err, agent.KindUnavailable) {
			t.Fatalf("err = %v, want a TurnError: ErrStreamInterrupted, unavailable", err)
		}
		if s.Pending() != 1 {
			t.Error("retried after text was sent")
		}
	})
}

func TestStreamOverflow(t *testing.T) {
	t.Run("before the first byte: reduced and retried", func(t *testing.T) {
		s := newServer(t)
		s.Enqueue(conversetest.Overflow(), conversetest.Text("fits now").WithChunking(3, 0))
		a := newAgent(t, s, agent.Config{})
		var rec recorder
		conv := longConversation(10)
		res, err := a.Stream(t.Context(), conv, input("more"), rec.emit)
		if err != nil {
			t.Fatal(err)
		}
		if res.Metrics.Reductions != 1 || res.Window.Removed == 0 {
			t.Errorf("reductions %d, removed %d", res.Metrics.Reductions, res.Window.Removed)
		}
		if strings.Join(rec.texts(), "") != "fits now" {
			t.Errorf("streamed %q", rec.texts())
		}
		next(t, conv, res)
	})
	t.Run("natural overflow", func(t *testing.T) {
		s := newServer(t)
		s.MaxInputBytes = 10_000
		a := newAgent(t, s, agent.Config{Manager: agent.SlidingWindow{Size: 1000}})
		var rec recorder
		res, err := a.Stream(t.Context(), longConversation(60), input("more"), rec.emit)
		if err != nil {
			t.Fatal(err)
		}
		if res.Metrics.Reductions == 0 || strings.Join(rec.texts(), "") != res.Text {
			t.Errorf("reductions %d, streamed %q, text %q", res.Metrics.Reductions, rec.texts(), res.Text)
		}
	})
	t.Run("after text was sent: not retried", func(t *testing.T) {
		s := newServer(t)
		s.Enqueue(conversetest.Text("partial answer").WithStop(conversetest.StopModelContextWindowExceeded), conversetest.Text("unused"))
		a := newAgent(t, s, agent.Config{})
		_, err := a.Stream(t.Context(), longConversation(10), input("more"), func(agent.Event) {})
		if !errors.Is(err, agent.ErrStreamInterrupted) || !errors.Is(err, agent.ErrContextOverflow) {
			t.Fatalf("err = %v, want ErrStreamInterrupted and ErrContextOverflow", err)
		}
		if s.Pending() != 1 {
			t.Error("the model was asked again after part of an answer was sent")
		}
	})
}

func TestStreamCancelled(t *testing.T) {
	s := newServer(t)
	s.Enqueue(conversetest.Text("a slow answer that is never finished").WithChunking(2, 50*time.Millisecond))
	a := newAgent(t, s, agent.Config{})
	ctx, cancel := context.WithCancel(t.Context())
	var rec recorder
	_, err := a.Stream(ctx, &agent.Conversation{}, input("Hello"), func(e agent.Event) {
		rec.emit(e)
		cancel() // the client went away after the first piece
	})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v, want context.Canceled", err)
	}
	if len(rec.texts()) != 1 {
		t.Errorf("pieces after the cancel: %q", rec.texts())
	}
}

// plainModel is a Model that cannot stream.
type plainModel struct{ agent.Model }

func TestStreamWithAModelThatCannotStream(t *testing.T) {
	s := newServer(t)
	s.Enqueue(conversetest.Text("all at once"))
	a := newAgent(t, s, agent.Config{Model: plainModel{newModel(t, s, "m")}})
	var rec recorder
	res, err := a.Stream(t.Context(), &agent.Conversation{}, input("Hello"), rec.emit)
	if err != nil {
		t.Fatal(err)
	}
	if got := rec.texts(); len(got) != 1 || got[0] != "all at once" || res.Text != "all at once" {
		t.Errorf("pieces %q", got)
	}
	if s.Requests()[0].Operation != "Converse" {
		t.Errorf("operation %s", s.Requests()[0].Operation)
	}
}
