package main

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/lambda-agent/lambda-agent/internal/agent"
	"github.com/lambda-agent/lambda-agent/internal/agent/bedrock"
	"github.com/lambda-agent/lambda-agent/internal/testkit/conversetest"
)

// toolConcurrency times a turn whose model asks for four 100 ms tools at once.
func toolConcurrency(ctx context.Context, cfg config, b *strings.Builder) error {
	s := conversetest.NewServer()
	defer s.Close()
	s.Responder = func(r *conversetest.Request) conversetest.Reply {
		if last := r.Messages[len(r.Messages)-1]; last.Content[0].ToolResult != nil {
			return conversetest.Text("all four done")
		}
		reply := conversetest.Text("four at once")
		for i := range 4 {
			reply = reply.WithToolUse(fmt.Sprintf("w%d-%d", len(r.Messages), i), "wait", map[string]int{"ms": 100})
		}
		return reply
	}
	wait, err := agent.NewFuncTool("wait", "waits", func(ctx context.Context, _ *agent.ToolCall, in struct {
		MS int `json:"ms"`
	}) (string, error) {
		select {
		case <-time.After(time.Duration(in.MS) * time.Millisecond):
			return "waited", nil
		case <-ctx.Done():
			return "", ctx.Err()
		}
	})
	if err != nil {
		return err
	}
	model, err := bedrock.New(s.Client(), bedrock.Config{ModelID: "bench"})
	if err != nil {
		return err
	}
	a, err := agent.New(agent.Config{Model: model, Tools: []agent.Tool{wait}})
	if err != nil {
		return err
	}
	runs := max(cfg.coldRuns/2, 5)
	var durations []time.Duration
	for range runs {
		start := time.Now()
		res, err := a.Run(ctx, &agent.Conversation{}, []agent.ContentBlock{agent.Text("wait four times")})
		if err != nil {
			return err
		}
		if res.Metrics.ToolCalls != 4 {
			return fmt.Errorf("%d tool calls", res.Metrics.ToolCalls)
		}
		durations = append(durations, time.Since(start))
	}
	med := percentile(durations, 50)
	verdict := "met"
	if med > 150*time.Millisecond {
		verdict = "**missed**"
	}
	fmt.Fprintf(b, "### Tool concurrency\n\nA turn whose model asks for four tools of 100 ms each in one answer, %d runs. The tools run concurrently, so the turn takes one tool's time, not four.\n\n| turn, median | p90 | the tools one after another |\n|---|---|---|\n| %s | %s | 400 ms |\n\nTarget about 100 ms: %s.\n\n",
		runs, ms(med), ms(percentile(durations, 90)), verdict)
	return nil
}
