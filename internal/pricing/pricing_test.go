package pricing_test

import (
	"math"
	"strings"
	"testing"

	"github.com/lambda-agent/lambda-agent/internal/agent"
	"github.com/lambda-agent/lambda-agent/internal/pricing"
)

func TestCost(t *testing.T) {
	sonnet, ok := pricing.Lookup("us.anthropic.claude-sonnet-4-5-20250929-v1:0")
	if !ok {
		t.Fatal("no prices for Claude Sonnet 4.5 through its inference profile")
	}
	// 1,000 uncached, 100,000 read and 10,000 written input tokens, and
	// 500 output: 0.003 + 0.03 + 0.0375 + 0.0075 dollars.
	got := sonnet.Cost(agent.Usage{InputTokens: 1000, CacheReadInputTokens: 100_000, CacheWriteInputTokens: 10_000, OutputTokens: 500})
	if math.Abs(got-0.078) > 1e-9 {
		t.Errorf("cost %v, want 0.078", got)
	}
	for _, id := range []string{"anthropic.claude-3-5-haiku-20241022-v1:0", "amazon.nova-lite-v1:0", "eu.anthropic.claude-haiku-4-5-20251001-v1:0"} {
		if _, ok := pricing.Lookup(id); !ok {
			t.Errorf("no prices for %s", id)
		}
	}
	if opus45, _ := pricing.Lookup("anthropic.claude-opus-4-5-20251101-v1:0"); opus45.Input != 5 {
		t.Errorf("Opus 4.5 got another Opus's prices: %+v", opus45)
	}
	if _, ok := pricing.Lookup("meta.llama3-70b-instruct-v1:0"); ok {
		t.Error("prices for a model the table does not list")
	}
}

func TestParse(t *testing.T) {
	p, err := pricing.Parse(`{"input":3,"output":15,"cache_read":0.3}`)
	if err != nil || p != (pricing.Prices{Input: 3, Output: 15, CacheRead: 0.3}) {
		t.Errorf("%+v, %v", p, err)
	}
	for bad, says := range map[string]string{
		`{"input":3}`:                     "required",
		`{"input":3,"output":-1}`:         "negative",
		`{"input":3,"output":1,"cost":2}`: "unknown field",
		`[1,2]`:                           "want",
	} {
		if _, err := pricing.Parse(bad); err == nil || !strings.Contains(err.Error(), says) {
			t.Errorf("%s: %v, want an error that says %q", bad, err, says)
		}
	}
}

func TestTableCost(t *testing.T) {
	main, cheap := pricing.Prices{Input: 3, Output: 15}, pricing.Prices{Input: 1, Output: 5}
	tb := pricing.Table{Main: &main, Agents: map[string]*pricing.Prices{"cheap": &cheap, "unknown": nil}}
	u := func(in, out int) agent.Usage { return agent.Usage{InputTokens: in, OutputTokens: out} }
	if c, ok := tb.Cost(u(1000, 100), nil); !ok || c != main.Cost(u(1000, 100)) {
		t.Errorf("a turn that delegated nothing: %v, %v", c, ok)
	}
	by := map[string]agent.Usage{"main": u(600, 60), "cheap": u(400, 40)}
	if c, ok := tb.Cost(u(1000, 100), by); !ok || c != main.Cost(u(600, 60))+cheap.Cost(u(400, 40)) {
		t.Errorf("by agent: %v, %v", c, ok)
	}
	by["unknown"] = u(1, 1)
	if _, ok := tb.Cost(u(1001, 101), by); ok {
		t.Error("a share at unknown prices has a cost")
	}
	if tb.For("other") != &main || tb.For("cheap") != &cheap || tb.For("unknown") != nil {
		t.Error("For")
	}
}
