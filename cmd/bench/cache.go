package main

import (
	"context"
	"fmt"
	"strings"

	"github.com/lambda-agent/lambda-agent/internal/agent"
	"github.com/lambda-agent/lambda-agent/internal/agent/bedrock"
	"github.com/lambda-agent/lambda-agent/internal/pricing"
	"github.com/lambda-agent/lambda-agent/internal/testkit/conversetest"
)

// cacheModel is the model id of the token cost section: Claude Sonnet 4.5,
// whose cache and prices the project's tables hold.
const cacheModel = "us.anthropic.claude-sonnet-4-5-20250929-v1:0"

// tokenCost runs a 200-turn conversation through the agent on the Converse
// stand-in with its prompt cache simulated, in four configurations, and
// reports the input tokens per turn and the input's cost.
func tokenCost(ctx context.Context, _ config, b *strings.Builder) error {
	prices, _ := pricing.Lookup(cacheModel)
	type run struct {
		name   string
		cfg    agent.Config
		turns  int
		totals agent.Usage
		steady agent.Usage // the last 100 turns
	}
	runs := []*run{
		{name: "no caching, plain sliding window", cfg: agent.Config{Manager: agent.SlidingWindow{Size: 40, LowWater: 40}}},
		{name: "caching, plain sliding window", cfg: agent.Config{PromptCache: true, Manager: agent.SlidingWindow{Size: 40, LowWater: 40}}},
		{name: "caching, cache-aware window", cfg: agent.Config{PromptCache: true, Manager: agent.SlidingWindow{Size: 40}}},
		{name: "caching, cache-aware window, trimming", cfg: agent.Config{PromptCache: true, Manager: agent.SlidingWindow{Size: 40},
			TrimResults: agent.ResultTrim{KeepTurns: 3, MinBytes: 2048}}},
	}
	for _, r := range runs {
		u, steady, err := conversation(ctx, r.cfg)
		if err != nil {
			return fmt.Errorf("%s: %w", r.name, err)
		}
		r.totals, r.steady, r.turns = u, steady, 200
	}
	inputCost := func(u agent.Usage) float64 {
		u.OutputTokens = 0
		return prices.Cost(u)
	}
	fmt.Fprintf(b, "### Token cost of a long conversation\n\n200 turns through the agent and the Bedrock model against the Converse stand-in with its prompt cache simulated (minimum 1,024 tokens, 5-minute TTL, 20-block lookback): a window of 40 messages, user messages of about 120 characters and answers of about 480, a system prompt of about 2,000 tokens and a tool, and an 8 KB tool result every fifth turn. Costs are of the input side, at %s's prices (`internal/pricing`, %s).\n\n", cacheModel, pricing.AsOf)
	b.WriteString("| configuration | input tokens per turn: full price | cache read | cache write | input cost of 200 turns | steady state read from the cache |\n|---|---|---|---|---|---|\n")
	for _, r := range runs {
		t := r.totals
		steadyIn := r.steady.InputTokens + r.steady.CacheReadInputTokens + r.steady.CacheWriteInputTokens
		share := 0.0
		if steadyIn > 0 {
			share = float64(r.steady.CacheReadInputTokens) / float64(steadyIn)
		}
		fmt.Fprintf(b, "| %s | %d | %d | %d | $%.3f | %.0f%% |\n", r.name, t.InputTokens/r.turns, t.CacheReadInputTokens/r.turns, t.CacheWriteInputTokens/r.turns, inputCost(t), 100*share)
	}
	uncached, plain, aware := inputCost(runs[0].totals), inputCost(runs[1].totals), inputCost(runs[2].totals)
	steady := runs[2].steady
	share := float64(steady.CacheReadInputTokens) / float64(steady.InputTokens+steady.CacheReadInputTokens+steady.CacheWriteInputTokens)
	verdict := func(ok bool) string {
		if ok {
			return "met"
		}
		return "**missed**"
	}
	fmt.Fprintf(b, "\nThe cache-aware window costs **%.2f×** the uncached input (target ≤ 0.35: %s) and **%.2f×** the plain sliding window with caching (target ≤ 0.5: %s); at steady state it reads **%.0f%%** of its input from the cache (target ≥ 70%%: %s).\n\n",
		aware/uncached, verdict(aware/uncached <= 0.35), aware/plain, verdict(aware/plain <= 0.5), 100*share, verdict(share >= 0.7))
	return nil
}

// conversation runs the 200 turns with cfg and returns the usage of all of
// them and of the last 100.
func conversation(ctx context.Context, cfg agent.Config) (all, steady agent.Usage, err error) {
	s := conversetest.NewServer()
	defer s.Close()
	s.EnableCache(conversetest.CacheConfig{MinTokens: 1024})
	answer := strings.Repeat("This is a considered answer of some length. ", 11) // about 480 characters
	s.Responder = func(r *conversetest.Request) conversetest.Reply {
		last := r.Messages[len(r.Messages)-1]
		if last.Content[0].ToolResult == nil && len(r.Messages)%10 == 9 { // about every fifth turn
			return conversetest.ToolUse(fmt.Sprintf("t%d", len(r.Messages)), "lookup", map[string]string{"q": "records"})
		}
		return conversetest.Text(answer)
	}
	model, err := bedrock.New(s.Client(), bedrock.Config{ModelID: cacheModel})
	if err != nil {
		return all, steady, err
	}
	lookup, err := agent.NewFuncTool("lookup", "Look up records.", func(context.Context, *agent.ToolCall, struct {
		Q string `json:"q"`
	}) (string, error) {
		return strings.Repeat("record 0123456789 ", 455), nil // about 8 KB
	})
	if err != nil {
		return all, steady, err
	}
	cfg.Model = model
	cfg.System = strings.Repeat("Follow the house rules for every answer, and be exact. ", 145) // about 2,000 tokens
	cfg.Tools = []agent.Tool{lookup}
	a, err := agent.New(cfg)
	if err != nil {
		return all, steady, err
	}
	conv := &agent.Conversation{}
	question := strings.Repeat("What about this one? ", 6) // about 120 characters
	for i := range 200 {
		res, err := a.Run(ctx, conv, []agent.ContentBlock{agent.Text(fmt.Sprintf("%d. %s", i, question))})
		if err != nil {
			return all, steady, fmt.Errorf("turn %d: %w", i, err)
		}
		all = sum(all, res.Usage)
		if i >= 100 {
			steady = sum(steady, res.Usage)
		}
		msgs := append(conv.Messages, res.Messages...)
		conv = &agent.Conversation{Messages: msgs[res.Window.Removed-conv.Window.Removed:], Window: res.Window, State: res.State}
	}
	return all, steady, nil
}

func sum(a, b agent.Usage) agent.Usage {
	return agent.Usage{
		InputTokens: a.InputTokens + b.InputTokens, OutputTokens: a.OutputTokens + b.OutputTokens, TotalTokens: a.TotalTokens + b.TotalTokens,
		CacheReadInputTokens: a.CacheReadInputTokens + b.CacheReadInputTokens, CacheWriteInputTokens: a.CacheWriteInputTokens + b.CacheWriteInputTokens,
	}
}
