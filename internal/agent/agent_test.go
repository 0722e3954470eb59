package agent_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/lambda-agent/lambda-agent/internal/agent"
	"github.com/lambda-agent/lambda-agent/internal/agent/bedrock"
	"github.com/lambda-agent/lambda-agent/internal/testkit/conversetest"
	"github.com/lambda-agent/lambda-agent/internal/tools"
)

// newServer starts a strict Converse stand-in. A test fails if the agent ever
// sent it a request that Bedrock would reject.
func newServer(t *testing.T) *conversetest.Server { return conversetest.NewChecked(t) }

// newModel returns the Bedrock model on the stand-in s: the real SDK client,
// over HTTP.
func newModel(t *testing.T, s *conversetest.Server, modelID string) *bedrock.Model {
	t.Helper()
	m, err := bedrock.New(s.Client(), bedrock.Config{ModelID: modelID, MaxTokens: 512})
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// The internal tests cannot import internal/agent/bedrock, which imports
// package agent; they get their model on the stand-in from here.
func init() {
	agent.NewWireModel = func(s *conversetest.Server, modelID string) (agent.Model, error) {
		return bedrock.New(s.Client(), bedrock.Config{ModelID: modelID})
	}
}

// newAgent builds an agent on the stand-in, with fast retries.
func newAgent(t *testing.T, s *conversetest.Server, cfg agent.Config) *agent.Agent {
	t.Helper()
	if cfg.Model == nil {
		cfg.Model = newModel(t, s, "test-model")
	}
	if cfg.Retry == (agent.RetryPolicy{}) {
		cfg.Retry = agent.RetryPolicy{BaseDelay: time.Millisecond, MaxDelay: 5 * time.Millisecond}
	}
	a, err := agent.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

func input(s string) []agent.ContentBlock { return []agent.ContentBlock{agent.Text(s)} }

// next returns the conversation a later invocation would load after res was
// committed, the way the store rebuilds it. It checks that what the turn left
// behind is a history Bedrock accepts as it is, without repair.
func next(t *testing.T, conv *agent.Conversation, res *agent.Result) *agent.Conversation {
	t.Helper()
	full := append(append([]agent.Message(nil), conv.Messages...), res.Messages...)
	if diff := cmp.Diff(full, agent.Repair(full)); diff != "" {
		t.Fatalf("the turn left a history that needs repair (-stored +repaired):\n%s", diff)
	}
	if last := res.Messages[len(res.Messages)-1]; last.Role != agent.RoleAssistant {
		t.Fatalf("the turn ended with a %s message", last.Role)
	}
	drop := res.Window.Removed - conv.Window.Removed
	return &agent.Conversation{Messages: full[drop:], Window: res.Window, State: res.State}
}

func TestPlainTurn(t *testing.T) {
	s := newServer(t)
	s.Enqueue(conversetest.Text("Hello!").WithUsage(12, 3))
	a := newAgent(t, s, agent.Config{System: "Be brief."})
	conv := &agent.Conversation{}

	res, err := a.Run(t.Context(), conv, input("Hi"))
	if err != nil {
		t.Fatal(err)
	}
	want := []agent.Message{agent.UserText("Hi"), agent.AssistantText("Hello!")}
	if diff := cmp.Diff(want, res.Messages); diff != "" {
		t.Errorf("messages (-want +got):\n%s", diff)
	}
	if res.Text != "Hello!" || res.StopReason != agent.StopEndTurn {
		t.Errorf("text %q, stop %q", res.Text, res.StopReason)
	}
	if want := (agent.Usage{InputTokens: 12, OutputTokens: 3, TotalTokens: 15}); res.Usage != want {
		t.Errorf("usage %+v, want %+v", res.Usage, want)
	}
	if m := res.Metrics; m.Cycles != 1 || m.ModelCalls != 1 || m.ToolCalls != 0 || m.Duration <= 0 || m.ModelLatency <= 0 {
		t.Errorf("metrics %+v", m)
	}
	if len(conv.Messages) != 0 {
		t.Error("Run changed the conversation it was given")
	}
	req := s.Requests()[0]
	if req.ModelID != "test-model" || req.System[0].Text != "Be brief." || req.InferenceConfig.MaxTokens == nil || *req.InferenceConfig.MaxTokens != 512 {
		t.Errorf("request: model %q, system %+v, inference %+v", req.ModelID, req.System, req.InferenceConfig)
	}

	// The next turn sees the history.
	s.Enqueue(conversetest.Text("Still here."))
	if _, err := a.Run(t.Context(), next(t, conv, res), input("Again")); err != nil {
		t.Fatal(err)
	}
	if got := len(s.Requests()[1].Messages); got != 3 {
		t.Errorf("second turn sent %d messages, want 3", got)
	}
}

func TestToolRoundTrip(t *testing.T) {
	s := newServer(t)
	s.Enqueue(
		conversetest.Text("Let me calculate.").WithToolUse("c1", "calculator", map[string]string{"expression": "25*48"}),
		conversetest.Text("25 × 48 = 1200."),
	)
	a := newAgent(t, s, agent.Config{Tools: []agent.Tool{tools.Calculator()}})
	conv := &agent.Conversation{}
	res, err := a.Run(t.Context(), conv, input("What is 25*48?"))
	if err != nil {
		t.Fatal(err)
	}
	if res.Text != "25 × 48 = 1200." || res.Metrics.Cycles != 2 || res.Metrics.ToolCalls != 1 {
		t.Errorf("text %q, metrics %+v", res.Text, res.Metrics)
	}
	if len(res.Messages) != 4 {
		t.Fatalf("%d messages, want 4", len(res.Messages))
	}
	r := res.Messages[2].Content[0].ToolResult
	if r == nil || r.Status != agent.ToolSuccess || string(r.Content[0].JSON) != `{"expression":"25*48","result":1200}` {
		t.Errorf("tool result %+v", r)
	}
	// The model got the result, and the tools, in the second call.
	second := s.Requests()[1]
	got := second.Messages[2].Content[0].ToolResult
	if got == nil || !strings.Contains(string(got.Content[0].JSON), "1200") || second.ToolConfig == nil {
		t.Errorf("second request: result %+v, toolConfig %v", got, second.ToolConfig)
	}
	next(t, conv, res)
}

// sleeper is a tool that takes d and counts how many of it run at once.
type sleeper struct {
	d             time.Duration
	running, peak atomic.Int32
}

func (s *sleeper) tool(t *testing.T) agent.Tool {
	t.Helper()
	tool, err := agent.NewFuncTool("sleep", "sleeps", func(ctx context.Context, _ *agent.ToolCall, in struct {
		N int `json:"n"`
	}) (string, error) {
		n := s.running.Add(1)
		defer s.running.Add(-1)
		for {
			p := s.peak.Load()
			if n <= p || s.peak.CompareAndSwap(p, n) {
				break
			}
		}
		select {
		case <-time.After(s.d):
			return fmt.Sprintf("slept %d", in.N), nil
		case <-ctx.Done():
			return "", ctx.Err()
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	return tool
}

func TestToolsRunConcurrentlyInOrder(t *testing.T) {
	for _, tt := range []struct {
		limit, wantPeak int
	}{{0, 4}, {2, 2}} {
		t.Run(fmt.Sprintf("limit %d", tt.limit), func(t *testing.T) {
			s := newServer(t)
			reply := conversetest.Text("four at once")
			for i := range 4 {
				reply = reply.WithToolUse(fmt.Sprintf("s%d", i), "sleep", map[string]int{"n": i})
			}
			s.Enqueue(reply, conversetest.Text("done"))
			sl := &sleeper{d: 100 * time.Millisecond}
			a := newAgent(t, s, agent.Config{Tools: []agent.Tool{sl.tool(t)}, ToolConcurrency: tt.limit})
			res, err := a.Run(t.Context(), &agent.Conversation{}, input("sleep"))
			if err != nil {
				t.Fatal(err)
			}
			if got := int(sl.peak.Load()); got != tt.wantPeak {
				t.Errorf("peak concurrency %d, want %d", got, tt.wantPeak)
			}
			results := res.Messages[2].Content
			for i, b := range results {
				r := b.ToolResult
				if r.ToolUseID != fmt.Sprintf("s%d", i) || r.Content[0].Text != fmt.Sprintf("slept %d", i) {
					t.Errorf("result %d: %+v", i, r)
				}
			}
			if res.Metrics.ToolCalls != 4 {
				t.Errorf("ToolCalls = %d", res.Metrics.ToolCalls)
			}
		})
	}
}

func TestToolFailuresGoBackToTheModel(t *testing.T) {
	boom, _ := agent.NewFuncTool("boom", "fails", func(context.Context, *agent.ToolCall, struct{}) (string, error) {
		return "", errors.New("disk on fire")
	})
	panicky, _ := agent.NewFuncTool("panicky", "panics", func(context.Context, *agent.ToolCall, struct{}) (string, error) {
		panic("nil map")
	})
	stuck, _ := agent.NewFuncTool("stuck", "ignores its context", func(context.Context, *agent.ToolCall, struct{}) (string, error) {
		time.Sleep(time.Hour)
		return "", nil
	})
	silent, _ := agent.NewFuncTool("silent", "returns nothing", func(context.Context, *agent.ToolCall, struct{}) (string, error) {
		return "  ", nil
	})
	s := newServer(t)
	s.Enqueue(
		conversetest.ToolUse("u1", "no_such_tool", map[string]any{}).
			WithToolUse("u2", "calculator", map[string]any{}).
			WithToolUse("u3", "boom", map[string]any{}).
			WithToolUse("u4", "panicky", map[string]any{}).
			WithToolUse("u5", "stuck", map[string]any{}).
			WithToolUse("u6", "silent", map[string]any{}),
		conversetest.Text("Some tools failed."),
	)
	a := newAgent(t, s, agent.Config{
		Tools:       []agent.Tool{tools.Calculator(), boom, panicky, stuck, silent},
		ToolTimeout: 50 * time.Millisecond,
	})
	res, err := a.Run(t.Context(), &agent.Conversation{}, input("try everything"))
	if err != nil {
		t.Fatalf("a tool failure ended the turn: %v", err)
	}
	want := []struct {
		status agent.ToolResultStatus
		text   string
	}{
		{agent.ToolError, `There is no tool named "no_such_tool"`},
		{agent.ToolError, `missing properties: ["expression"]`},
		{agent.ToolError, "The tool failed: disk on fire"},
		{agent.ToolError, "nil map"},
		{agent.ToolError, "did not finish within 50ms"},
		{agent.ToolSuccess, "The tool returned no output."},
	}
	results := res.Messages[2].Content
	for i, w := range want {
		r := results[i].ToolResult
		if r.Status != w.status || !strings.Contains(r.Content[0].Text, w.text) {
			t.Errorf("result %d = %s %q, want %s containing %q", i, r.Status, r.Content[0].Text, w.status, w.text)
		}
	}
	if res.Text != "Some tools failed." {
		t.Errorf("text %q", res.Text)
	}
}

func TestMaxCycles(t *testing.T) {
	s := newServer(t)
	var n atomic.Int32
	s.Responder = func(*conversetest.Request) conversetest.Reply {
		return conversetest.ToolUse(fmt.Sprintf("loop%d", n.Add(1)), "calculator", map[string]string{"expression": "1+1"})
	}
	a := newAgent(t, s, agent.Config{Tools: []agent.Tool{tools.Calculator()}, MaxCycles: 3})
	conv := &agent.Conversation{}
	res, err := a.Run(t.Context(), conv, input("loop forever"))
	if err != nil {
		t.Fatal(err)
	}
	if res.StopReason != agent.StopMaxCycles || res.Metrics.ModelCalls != 3 || s.Calls() != 3 {
		t.Errorf("stop %q after %d calls (server saw %d)", res.StopReason, res.Metrics.ModelCalls, s.Calls())
	}
	if !strings.Contains(res.Text, "limit of 3 model calls") {
		t.Errorf("text %q", res.Text)
	}
	// The history is valid: the next turn goes through the strict stand-in.
	s.Responder = conversetest.EchoResponder
	if _, err := a.Run(t.Context(), next(t, conv, res), input("ok, stop")); err != nil {
		t.Fatalf("turn after max cycles: %v", err)
	}
}

func TestDefaultMaxCyclesIs20(t *testing.T) {
	s := newServer(t)
	s.Responder = func(*conversetest.Request) conversetest.Reply {
		return conversetest.ToolUse(fmt.Sprintf("id%d", s.Calls()), "calculator", map[string]string{"expression": "1"})
	}
	a := newAgent(t, s, agent.Config{Tools: []agent.Tool{tools.Calculator()}})
	res, err := a.Run(t.Context(), &agent.Conversation{}, input("go"))
	if err != nil {
		t.Fatal(err)
	}
	if res.StopReason != agent.StopMaxCycles || res.Metrics.ModelCalls != agent.DefaultMaxCycles || agent.DefaultMaxCycles != 20 {
		t.Errorf("stop %q after %d calls", res.StopReason, res.Metrics.ModelCalls)
	}
}

func TestMaxTokensDuringToolUse(t *testing.T) {
	s := newServer(t)
	s.Enqueue(conversetest.Text("I will compute").
		WithToolUse("cut", "calculator", map[string]string{"expression": "2*"}).
		WithStop(conversetest.StopMaxTokens))
	ran := false
	a := newAgent(t, s, agent.Config{
		Tools: []agent.Tool{tools.Calculator()},
		Hooks: agent.Hooks{BeforeToolCall: []func(context.Context, *agent.BeforeToolCallEvent){
			func(context.Context, *agent.BeforeToolCallEvent) { ran = true },
		}},
	})
	conv := &agent.Conversation{}
	res, err := a.Run(t.Context(), conv, input("compute"))
	if err != nil {
		t.Fatal(err)
	}
	if ran || res.StopReason != agent.StopMaxTokens || len(res.Messages) != 2 {
		t.Errorf("tool ran %v, stop %q, %d messages", ran, res.StopReason, len(res.Messages))
	}
	if last := res.Messages[1]; len(last.ToolUses()) != 0 || !strings.Contains(last.Text(), "was not run") {
		t.Errorf("last message %+v", last)
	}
	if _, err := a.Run(t.Context(), next(t, conv, res), input("go on")); err != nil {
		t.Fatalf("turn after max_tokens: %v", err)
	}
}

func TestEmptyAnswerKeepsHistoryValid(t *testing.T) {
	s := newServer(t)
	s.Enqueue(conversetest.Text(""))
	a := newAgent(t, s, agent.Config{})
	conv := &agent.Conversation{}
	res, err := a.Run(t.Context(), conv, input("say nothing"))
	if err != nil {
		t.Fatal(err)
	}
	if res.Text != "" {
		t.Errorf("text %q, want empty", res.Text)
	}
	if _, err := a.Run(t.Context(), next(t, conv, res), input("hello?")); err != nil {
		t.Fatal(err)
	}
}

func TestRetries(t *testing.T) {
	retryable := map[string]conversetest.Reply{
		"throttling":      conversetest.Throttle(),
		"model not ready": conversetest.ModelNotReady(),
		"unavailable":     conversetest.Unavailable(),
		"internal":        conversetest.InternalError(),
		"model timeout":   conversetest.ModelTimeout(),
	}
	for name, fault := range retryable {
		t.Run(name, func(t *testing.T) {
			s := newServer(t)
			s.Enqueue(fault, fault, conversetest.Text("finally"))
			a := newAgent(t, s, agent.Config{})
			res, err := a.Run(t.Context(), &agent.Conversation{}, input("hi"))
			if err != nil {
				t.Fatal(err)
			}
			if res.Text != "finally" || s.Calls() != 3 || res.Metrics.ModelCalls != 1 {
				t.Errorf("text %q after %d server calls, %d model calls", res.Text, s.Calls(), res.Metrics.ModelCalls)
			}
		})
	}
	final := map[string]struct {
		reply conversetest.Reply
		kind  agent.ErrorKind
	}{
		"validation":    {conversetest.Error(400, conversetest.CodeValidation, "messages: bad"), agent.KindInvalid},
		"access denied": {conversetest.AccessDenied(), agent.KindDenied},
		"not found":     {conversetest.ResourceNotFound(), agent.KindNotFound},
	}
	for name, tt := range final {
		t.Run(name, func(t *testing.T) {
			s := newServer(t)
			s.Enqueue(tt.reply, conversetest.Text("never"))
			a := newAgent(t, s, agent.Config{})
			_, err := a.Run(t.Context(), &agent.Conversation{}, input("hi"))
			if !agent.IsModelError(err, tt.kind) || s.Calls() != 1 {
				t.Errorf("err = %v after %d calls, want %s after 1", err, s.Calls(), tt.kind)
			}
		})
	}
	t.Run("gives up after MaxAttempts", func(t *testing.T) {
		s := newServer(t)
		s.Responder = func(*conversetest.Request) conversetest.Reply { return conversetest.Throttle() }
		a := newAgent(t, s, agent.Config{Retry: agent.RetryPolicy{MaxAttempts: 4, BaseDelay: time.Millisecond}})
		_, err := a.Run(t.Context(), &agent.Conversation{}, input("hi"))
		if !agent.IsModelError(err, agent.KindThrottled) || s.Calls() != 4 {
			t.Errorf("err = %v after %d calls", err, s.Calls())
		}
	})
}

func TestRetriesStopBeforeTheDeadline(t *testing.T) {
	s := newServer(t)
	s.Responder = func(*conversetest.Request) conversetest.Reply { return conversetest.Throttle() }
	a := newAgent(t, s, agent.Config{
		Reserve: 300 * time.Millisecond,
		Retry:   agent.RetryPolicy{MaxAttempts: 100, BaseDelay: 200 * time.Millisecond, MaxDelay: 200 * time.Millisecond},
	})
	ctx, cancel := context.WithTimeout(t.Context(), time.Second)
	defer cancel()
	start := time.Now()
	_, err := a.Run(ctx, &agent.Conversation{}, input("hi"))
	elapsed := time.Since(start)
	// Either no retry fit any more (the throttling error, a 429), or the
	// reserve began while one was in flight (ErrDeadline, a 504); both
	// leave the caller its reserve.
	if !agent.IsModelError(err, agent.KindThrottled) && !errors.Is(err, agent.ErrDeadline) {
		t.Errorf("err = %v, want the throttling error or ErrDeadline", err)
	}
	if elapsed > 700*time.Millisecond+100*time.Millisecond {
		t.Errorf("gave up after %s, past the deadline less the reserve", elapsed)
	}
	if s.Calls() < 2 {
		t.Errorf("only %d calls: no retry was made", s.Calls())
	}
}

func TestSlowModelEndsWithErrDeadline(t *testing.T) {
	s := newServer(t)
	s.Enqueue(conversetest.Text("too late").WithDelay(5 * time.Second))
	a := newAgent(t, s, agent.Config{Reserve: 200 * time.Millisecond})
	ctx, cancel := context.WithTimeout(t.Context(), 600*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err := a.Run(ctx, &agent.Conversation{}, input("hi"))
	if !errors.Is(err, agent.ErrDeadline) {
		t.Errorf("err = %v, want ErrDeadline", err)
	}
	if d := time.Since(start); d > 500*time.Millisecond {
		t.Errorf("returned after %s; the reserve was not kept", d)
	}
	if ctx.Err() != nil {
		t.Error("the caller's deadline passed before Run returned")
	}
}

func TestCancelledTurn(t *testing.T) {
	s := newServer(t)
	s.Enqueue(conversetest.Text("slow").WithDelay(5 * time.Second))
	a := newAgent(t, s, agent.Config{})
	ctx, cancel := context.WithCancel(t.Context())
	time.AfterFunc(50*time.Millisecond, cancel)
	_, err := a.Run(ctx, &agent.Conversation{}, input("hi"))
	if !errors.Is(err, context.Canceled) {
		t.Errorf("err = %v, want context.Canceled", err)
	}
}

// longConversation is a stored window of n plain turns.
func longConversation(n int) *agent.Conversation {
	c := &agent.Conversation{}
	for i := range n {
		c.Messages = append(c.Messages, agent.UserText(fmt.Sprintf("question %d %s", i, strings.Repeat("x", 200))), agent.AssistantText(fmt.Sprintf("answer %d", i)))
	}
	return c
}

func TestOverflowIsReducedAndRetried(t *testing.T) {
	for _, tt := range []struct {
		name  string
		fault conversetest.Reply
	}{{"exception", conversetest.Overflow()}, {"stop reason", conversetest.OverflowStop()}} {
		t.Run(tt.name, func(t *testing.T) {
			s := newServer(t)
			s.Enqueue(tt.fault, tt.fault, conversetest.Text("fits now"))
			a := newAgent(t, s, agent.Config{})
			conv := longConversation(10)
			res, err := a.Run(t.Context(), conv, input("more"))
			if err != nil {
				t.Fatal(err)
			}
			// 21 messages lose a quarter, to the next turn start, twice.
			if res.Metrics.Reductions != 2 || res.Window.Removed != 10 {
				t.Errorf("reductions %d, removed %d; want 2 and 10", res.Metrics.Reductions, res.Window.Removed)
			}
			reqs := s.Requests()
			if a, b := len(reqs[0].Messages), len(reqs[2].Messages); b != a-10 {
				t.Errorf("windows of %d then %d messages", a, b)
			}
			next(t, conv, res)
		})
	}
}

func TestNaturalOverflow(t *testing.T) {
	s := newServer(t)
	s.MaxInputBytes = 10_000 // about 45 of longConversation's turns
	a := newAgent(t, s, agent.Config{Manager: agent.SlidingWindow{Size: 1000}})
	conv := longConversation(60)
	res, err := a.Run(t.Context(), conv, input("more"))
	if err != nil {
		t.Fatal(err)
	}
	if res.Window.Removed == 0 || res.Metrics.Reductions == 0 {
		t.Errorf("removed %d after %d reductions", res.Window.Removed, res.Metrics.Reductions)
	}
	last := s.Requests()[len(s.Requests())-1]
	if conversetest.EstimateInputBytes(last) > s.MaxInputBytes {
		t.Errorf("final request is %d bytes", conversetest.EstimateInputBytes(last))
	}
}

func TestOverflowThatCannotBeReduced(t *testing.T) {
	t.Run("none manager", func(t *testing.T) {
		s := newServer(t)
		s.Enqueue(conversetest.Overflow())
		a := newAgent(t, s, agent.Config{Manager: agent.NoManager{}})
		_, err := a.Run(t.Context(), longConversation(3), input("more"))
		if !errors.Is(err, agent.ErrContextOverflow) || s.Calls() != 1 {
			t.Errorf("err = %v after %d calls", err, s.Calls())
		}
	})
	t.Run("sliding window runs out", func(t *testing.T) {
		s := newServer(t)
		s.Responder = func(*conversetest.Request) conversetest.Reply { return conversetest.Overflow() }
		a := newAgent(t, s, agent.Config{})
		_, err := a.Run(t.Context(), longConversation(3), input("more"))
		if !errors.Is(err, agent.ErrContextOverflow) || s.Calls() != 4 {
			t.Errorf("err = %v after %d calls, want 4 (3 turns dropped)", err, s.Calls())
		}
	})
	t.Run("bounded by MaxReductions", func(t *testing.T) {
		s := newServer(t)
		s.Responder = func(*conversetest.Request) conversetest.Reply { return conversetest.Overflow() }
		a := newAgent(t, s, agent.Config{MaxReductions: 2})
		_, err := a.Run(t.Context(), longConversation(30), input("more"))
		if !errors.Is(err, agent.ErrContextOverflow) || s.Calls() != 3 {
			t.Errorf("err = %v after %d calls", err, s.Calls())
		}
	})
}

func TestProactiveReduction(t *testing.T) {
	s := newServer(t)
	s.Enqueue(conversetest.Text("big").WithUsage(9_000, 10), conversetest.Text("smaller"))
	a := newAgent(t, s, agent.Config{ContextWindowTokens: 10_000, ReduceAt: 0.8})
	conv := longConversation(10)
	res, err := a.Run(t.Context(), conv, input("one"))
	if err != nil {
		t.Fatal(err)
	}
	if res.Window.LastInputTokens != 9_000 || res.Metrics.Reductions != 0 {
		t.Fatalf("first turn: %+v, %d reductions", res.Window, res.Metrics.Reductions)
	}
	// The next turn reduces before its call, because the last one was at 90%.
	conv2 := next(t, conv, res)
	res2, err := a.Run(t.Context(), conv2, input("two"))
	if err != nil {
		t.Fatal(err)
	}
	// 23 messages lose a quarter, to the next turn start.
	if res2.Metrics.Reductions != 1 || res2.Window.Removed != 6 || s.Calls() != 2 {
		t.Errorf("second turn: %d reductions, removed %d, %d calls", res2.Metrics.Reductions, res2.Window.Removed, s.Calls())
	}
}

func TestRepairOnLoad(t *testing.T) {
	// The process died after the model asked for tools and before their
	// results were stored.
	conv := &agent.Conversation{Messages: []agent.Message{
		agent.UserText("what is 2+2 and 3+3?"),
		{Role: agent.RoleAssistant, Content: []agent.ContentBlock{
			{ToolUse: &agent.ToolUseBlock{ToolUseID: "a", Name: "calculator", Input: json.RawMessage(`{"expression":"2+2"}`)}},
			{ToolUse: &agent.ToolUseBlock{ToolUseID: "b", Name: "calculator", Input: json.RawMessage(`{"expression":"3+3"}`)}},
		}},
	}}
	s := newServer(t)
	s.Enqueue(conversetest.Text("Sorry, I was interrupted. Ask again?"))
	a := newAgent(t, s, agent.Config{Tools: []agent.Tool{tools.Calculator()}})
	res, err := a.Run(t.Context(), conv, input("hello?"))
	if err != nil {
		t.Fatal(err)
	}
	first := res.Messages[0]
	if len(first.Content) != 3 || first.Content[0].ToolResult.ToolUseID != "a" || first.Content[1].ToolResult.ToolUseID != "b" ||
		first.Content[0].ToolResult.Status != agent.ToolError || first.Content[2].Text != "hello?" {
		t.Errorf("first message %+v", first)
	}
	if !strings.Contains(first.Content[0].ToolResult.Content[0].Text, "interrupted") {
		t.Errorf("repair result says %q", first.Content[0].ToolResult.Content[0].Text)
	}
	next(t, conv, res)
}

func TestStateAcrossTurns(t *testing.T) {
	s := newServer(t)
	s.Enqueue(
		conversetest.ToolUse("r1", "remember", map[string]string{"key": "colour", "value": "teal"}),
		conversetest.Text("Noted."),
		conversetest.ToolUse("r2", "recall", map[string]string{"key": "colour"}),
		conversetest.Text("Teal."),
	)
	ts, err := tools.ByName(tools.Names)
	if err != nil {
		t.Fatal(err)
	}
	a := newAgent(t, s, agent.Config{Tools: ts})
	conv := &agent.Conversation{}
	res, err := a.Run(t.Context(), conv, input("my favourite colour is teal"))
	if err != nil {
		t.Fatal(err)
	}
	// Persisting is the caller's: the state crosses invocations through JSON.
	raw, err := json.Marshal(res.State)
	if err != nil {
		t.Fatal(err)
	}
	conv2 := next(t, conv, res)
	conv2.State = nil
	if err := json.Unmarshal(raw, &conv2.State); err != nil {
		t.Fatal(err)
	}
	res2, err := a.Run(t.Context(), conv2, input("what is my favourite colour?"))
	if err != nil {
		t.Fatal(err)
	}
	if got := res2.Messages[2].Content[0].ToolResult.Content[0].Text; got != "teal" {
		t.Errorf("recall returned %q", got)
	}
}

func TestHooks(t *testing.T) {
	var mu sync.Mutex
	var events []string
	record := func(s string) {
		mu.Lock()
		events = append(events, s)
		mu.Unlock()
	}
	replacement, _ := agent.NewFuncTool("calculator", "replaced", func(context.Context, *agent.ToolCall, tools.CalculatorInput) (string, error) {
		return "replaced result", nil
	})
	hooks := agent.Hooks{
		BeforeInvocation: []func(context.Context, *agent.BeforeInvocationEvent){
			func(context.Context, *agent.BeforeInvocationEvent) { record("before invocation 1") },
			func(context.Context, *agent.BeforeInvocationEvent) { record("before invocation 2") },
		},
		AfterInvocation: []func(context.Context, *agent.AfterInvocationEvent){
			func(_ context.Context, e *agent.AfterInvocationEvent) { record("after invocation 1: " + e.Result.Text) },
			func(context.Context, *agent.AfterInvocationEvent) { record("after invocation 2") },
		},
		MessageAdded: []func(context.Context, *agent.MessageAddedEvent){
			func(_ context.Context, e *agent.MessageAddedEvent) { record("message " + string(e.Message.Role)) },
		},
		BeforeModelCall: []func(context.Context, *agent.BeforeModelCallEvent){
			func(_ context.Context, e *agent.BeforeModelCallEvent) {
				record(fmt.Sprintf("before model (%d messages)", len(e.Request.Messages)))
			},
		},
		AfterModelCall: []func(context.Context, *agent.AfterModelCallEvent){
			func(_ context.Context, e *agent.AfterModelCallEvent) {
				record("after model: " + string(e.Response.StopReason))
			},
		},
		BeforeToolCall: []func(context.Context, *agent.BeforeToolCallEvent){
			func(_ context.Context, e *agent.BeforeToolCallEvent) {
				switch e.Use.ToolUseID {
				case "cancel-me":
					e.Cancel = "not allowed"
				case "replace-me":
					e.Tool = replacement
				}
			},
		},
		AfterToolCall: []func(context.Context, *agent.AfterToolCallEvent){
			func(_ context.Context, e *agent.AfterToolCallEvent) {
				if e.Use.ToolUseID == "rewrite-me" {
					e.Result = agent.TextResult(e.Use.ToolUseID, agent.ToolSuccess, "rewritten")
				}
			},
		},
	}
	s := newServer(t)
	s.Enqueue(
		conversetest.ToolUse("cancel-me", "calculator", map[string]string{"expression": "1"}).
			WithToolUse("replace-me", "calculator", map[string]string{"expression": "2"}).
			WithToolUse("rewrite-me", "calculator", map[string]string{"expression": "3"}),
		conversetest.Text("done"),
	)
	a := newAgent(t, s, agent.Config{Tools: []agent.Tool{tools.Calculator()}, Hooks: hooks})
	res, err := a.Run(t.Context(), &agent.Conversation{}, input("go"))
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		"before invocation 1", "before invocation 2",
		"message user",
		"before model (1 messages)", "after model: tool_use",
		"message assistant", "message user",
		"before model (3 messages)", "after model: end_turn",
		"message assistant",
		"after invocation 2", "after invocation 1: done",
	}
	if diff := cmp.Diff(want, events); diff != "" {
		t.Errorf("events (-want +got):\n%s", diff)
	}
	results := res.Messages[2].Content
	for i, w := range []string{"cancelled: not allowed", "replaced result", "rewritten"} {
		if got := results[i].ToolResult.Content[0].Text; !strings.Contains(got, w) {
			t.Errorf("result %d = %q, want %q", i, got, w)
		}
	}
}

func TestSummarizingEndToEnd(t *testing.T) {
	s := newServer(t)
	s.Responder = func(req *conversetest.Request) conversetest.Reply {
		if req.ModelID == "summarizer" {
			return conversetest.Text("The user asked numbered questions.")
		}
		return conversetest.EchoResponder(req)
	}
	a := newAgent(t, s, agent.Config{Manager: agent.Summarizing{
		Model:       agent.Retrying(newModel(t, s, "summarizer"), agent.RetryPolicy{}),
		MaxMessages: 20,
	}})
	conv := longConversation(10) // 20 messages; the turn's input makes 21
	res, err := a.Run(t.Context(), conv, input("and now?"))
	if err != nil {
		t.Fatal(err)
	}
	if res.Window.Summary != "The user asked numbered questions." || res.Window.Removed != 6 {
		t.Errorf("window %+v", res.Window)
	}
	var chat *conversetest.Request
	for _, r := range s.Requests() {
		if r.ModelID == "test-model" {
			chat = r
		}
	}
	if !strings.HasPrefix(chat.Messages[0].Content[0].Text, "Summary of the earlier conversation:\nThe user asked") {
		t.Errorf("first block sent to the model: %q", chat.Messages[0].Content[0].Text)
	}
	if got := len(chat.Messages); got != 15 {
		t.Errorf("model saw %d messages, want 15", got)
	}
	next(t, conv, res)
}

func TestInvalidInput(t *testing.T) {
	s := newServer(t)
	a := newAgent(t, s, agent.Config{})
	for name, in := range map[string][]agent.ContentBlock{
		"empty":             nil,
		"blank text":        input("  \n"),
		"tool use":          {{ToolUse: &agent.ToolUseBlock{ToolUseID: "x", Name: "y"}}},
		"bad image":         {{Image: &agent.ImageBlock{Format: "bmp", Source: agent.Source{Bytes: []byte{1}}}}},
		"empty image":       {{Image: &agent.ImageBlock{Format: "png"}}},
		"document alone":    {{Document: &agent.DocumentBlock{Format: "txt", Name: "d", Source: agent.Source{Bytes: []byte("x")}}}},
		"bad document name": {agent.Text("see"), {Document: &agent.DocumentBlock{Format: "txt", Name: "a.txt", Source: agent.Source{Bytes: []byte("x")}}}},
		"two members":       {{Text: "x", Image: &agent.ImageBlock{Format: "png", Source: agent.Source{Bytes: []byte{1}}}}},
	} {
		_, err := a.Run(t.Context(), &agent.Conversation{}, in)
		if !errors.Is(err, agent.ErrInvalidInput) {
			t.Errorf("%s: err = %v, want ErrInvalidInput", name, err)
		}
	}
	if s.Calls() != 0 {
		t.Errorf("invalid input reached the model %d times", s.Calls())
	}
}

func TestNewRejectsBadConfig(t *testing.T) {
	s := newServer(t)
	m := newModel(t, s, "m")
	calc := tools.Calculator()
	for name, cfg := range map[string]agent.Config{
		"no model":        {},
		"duplicate tools": {Model: m, Tools: []agent.Tool{calc, calc}},
		"negative cycles": {Model: m, MaxCycles: -1},
		"bad ReduceAt":    {Model: m, ReduceAt: 1.5},
	} {
		if _, err := agent.New(cfg); err == nil {
			t.Errorf("%s: New succeeded", name)
		}
	}
}

func TestToolHistoryWithToolsSwitchedOff(t *testing.T) {
	// A session that used a tool, loaded by an agent that has no tools (a
	// redeploy with TOOLS=none): Bedrock refuses tool blocks without a tool
	// configuration, so they must reach it as text.
	s := newServer(t)
	s.Enqueue(conversetest.ToolUse("c1", "calculator", map[string]string{"expression": "6*7"}), conversetest.Text("42"))
	withTools := newAgent(t, s, agent.Config{Tools: []agent.Tool{tools.Calculator()}})
	conv := &agent.Conversation{}
	res, err := withTools.Run(t.Context(), conv, input("6*7?"))
	if err != nil {
		t.Fatal(err)
	}
	without := newAgent(t, s, agent.Config{})
	s.Enqueue(conversetest.Text("still here"))
	if _, err := without.Run(t.Context(), next(t, conv, res), input("and now?")); err != nil {
		t.Fatalf("a session with tool history, without tools: %v", err)
	}
	last := s.Requests()[len(s.Requests())-1]
	if last.ToolConfig != nil || !strings.Contains(last.Messages[1].Text(), "[called tool calculator") {
		t.Errorf("request: toolConfig %v, message %q", last.ToolConfig, last.Messages[1].Text())
	}
}
