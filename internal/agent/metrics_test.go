package agent_test

import (
	"context"
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/lambda-agent/lambda-agent/internal/agent"
	"github.com/lambda-agent/lambda-agent/internal/testkit/conversetest"
)

// TestMetricsDescribeTheTurn checks what a turn reports of its work: each
// model call's latency, the retries and throttles, and a run per use of one
// of the agent's tools, failed or not, but none for a made-up tool.
func TestMetricsDescribeTheTurn(t *testing.T) {
	s := newServer(t)
	s.Enqueue(
		conversetest.Throttle(),
		conversetest.ToolUse("t1", "echo", map[string]any{"text": "hi"}),
		conversetest.Throttle(),
		conversetest.Throttle(),
		conversetest.ToolUse("t2", "broken", map[string]any{"text": "x"}),
		conversetest.ToolUse("t3", "invented", map[string]any{}),
		conversetest.Text("done"),
	)
	echo, err := agent.NewFuncTool("echo", "Echoes.", func(_ context.Context, _ *agent.ToolCall, in struct {
		Text string `json:"text"`
	}) (string, error) {
		return in.Text, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	broken, err := agent.NewFuncTool("broken", "Fails.", func(context.Context, *agent.ToolCall, struct {
		Text string `json:"text"`
	}) (string, error) {
		return "", errors.New("out of order")
	})
	if err != nil {
		t.Fatal(err)
	}
	var retries []int
	a := newAgent(t, s, agent.Config{
		Tools: []agent.Tool{echo, broken},
		Hooks: agent.Hooks{ModelRetry: []func(context.Context, *agent.ModelRetryEvent){
			func(_ context.Context, e *agent.ModelRetryEvent) {
				if e.Err.Kind != agent.KindThrottled {
					t.Errorf("retry of %v, want a throttle", e.Err)
				}
				retries = append(retries, e.Attempt)
			},
		}},
	})
	res, err := a.Run(t.Context(), &agent.Conversation{}, input("go"))
	if err != nil {
		t.Fatal(err)
	}
	m := res.Metrics
	if diff := cmp.Diff([]int{1, 1, 2}, retries); diff != "" {
		t.Errorf("retried attempts (-want +got):\n%s", diff)
	}
	if m.Retries != 3 || m.Throttles != 3 {
		t.Errorf("Retries, Throttles = %d, %d; want 3, 3", m.Retries, m.Throttles)
	}
	if len(m.ModelLatencies) != m.ModelCalls || m.ModelCalls != 4 {
		t.Errorf("%d latencies for %d model calls, want 4 of each", len(m.ModelLatencies), m.ModelCalls)
	}
	var sum int64
	for _, d := range m.ModelLatencies {
		sum += int64(d)
	}
	if sum != int64(m.ModelLatency) {
		t.Errorf("latencies add up to %d, ModelLatency is %d", sum, m.ModelLatency)
	}
	var got []agent.ToolRun
	for _, r := range m.Tools {
		if r.Duration <= 0 {
			t.Errorf("run of %s took %s", r.Name, r.Duration)
		}
		got = append(got, agent.ToolRun{Name: r.Name, Failed: r.Failed})
	}
	want := []agent.ToolRun{{Name: "echo"}, {Name: "broken", Failed: true}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("tool runs (-want +got):\n%s", diff)
	}
	if m.ToolCalls != 3 {
		t.Errorf("ToolCalls = %d, want 3: the made-up tool's use counts there", m.ToolCalls)
	}
}

// TestThrottlesCountTheLastAttempt checks that a throttle that is not
// retried, because the policy allows no more attempts, still counts.
func TestThrottlesCountTheLastAttempt(t *testing.T) {
	s := newServer(t)
	s.Responder = func(*conversetest.Request) conversetest.Reply { return conversetest.Throttle() }
	a := newAgent(t, s, agent.Config{Retry: agent.RetryPolicy{MaxAttempts: 2, BaseDelay: 1}})
	_, err := a.Run(t.Context(), &agent.Conversation{}, input("hi"))
	var te *agent.TurnError
	if !errors.As(err, &te) {
		t.Fatalf("err = %v, want a TurnError", err)
	}
	if te.Metrics.Retries != 1 || te.Metrics.Throttles != 2 {
		t.Errorf("Retries, Throttles = %d, %d; want 1, 2", te.Metrics.Retries, te.Metrics.Throttles)
	}
}
