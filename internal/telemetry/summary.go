package telemetry

import (
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/lambda-agent/lambda-agent/internal/pricing"
)

// Summary writes a line a person reads for each request that ran a turn, or
// a direct tool call:
// its outcome, duration, tokens, estimated cost and tools. The local run
// prints it; a function has its metrics instead.
type Summary struct {
	Out io.Writer
	// Prices, when known, give the cost.
	Prices pricing.Table
}

// Record writes r's line, when r ran a turn or a direct tool call.
func (s *Summary) Record(r Request) {
	res := r.Result
	if s == nil || s.Out == nil || res == nil || r.Replayed {
		return
	}
	var b strings.Builder
	kind := "turn"
	if !r.Turn {
		kind = "call" // a direct tool call: no turn, no model
	}
	fmt.Fprintf(&b, "%s %s %d %s session=%s %s", kind, r.Route, r.Status, r.Code, r.SessionID, r.Duration.Round(time.Millisecond))
	u := res.Usage
	fmt.Fprintf(&b, " tokens: in=%d out=%d", u.InputTokens, u.OutputTokens)
	if u.CacheReadInputTokens+u.CacheWriteInputTokens > 0 {
		fmt.Fprintf(&b, " cache_read=%d cache_write=%d", u.CacheReadInputTokens, u.CacheWriteInputTokens)
	}
	if cost, ok := s.Prices.Cost(u, res.AgentUsage); ok {
		fmt.Fprintf(&b, " cost=$%.4f", cost)
	}
	fmt.Fprintf(&b, " model_calls=%d", res.Metrics.ModelCalls)
	if n := res.Metrics.Retries; n > 0 {
		fmt.Fprintf(&b, " retries=%d", n)
	}
	var tools []string
	for _, t := range byTool(res.Metrics.Tools) {
		s := t.name
		if len(t.durations) > 1 {
			s += fmt.Sprintf("×%d", len(t.durations))
		}
		if t.failed > 0 {
			s += fmt.Sprintf("(%d failed)", t.failed)
		}
		tools = append(tools, s)
	}
	if len(tools) > 0 {
		b.WriteString(" tools=" + strings.Join(tools, ","))
	}
	b.WriteByte('\n')
	_, _ = io.WriteString(s.Out, b.String()) // a summary that cannot be written is not worth failing a request for
}
