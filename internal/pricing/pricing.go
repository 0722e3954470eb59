// Package pricing estimates what a turn's tokens cost on Amazon Bedrock,
// from a table of on-demand prices by model family.
package pricing

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/lambda-agent/lambda-agent/internal/agent"
)

// Prices are a model's on-demand prices, in US dollars per million tokens.
type Prices struct {
	Input      float64 `json:"input"`
	Output     float64 `json:"output"`
	CacheRead  float64 `json:"cache_read"`
	CacheWrite float64 `json:"cache_write"`
}

// Cost is the estimated cost of u at p, in US dollars.
func (p Prices) Cost(u agent.Usage) float64 {
	return (float64(u.InputTokens)*p.Input + float64(u.OutputTokens)*p.Output +
		float64(u.CacheReadInputTokens)*p.CacheRead + float64(u.CacheWriteInputTokens)*p.CacheWrite) / 1e6
}

// AsOf is the date of the table's prices.
const AsOf = "2026-11-24"

// table holds the on-demand prices of the model families this project
// supports, by a fragment of their model ids, the most specific first, as
// the Amazon Bedrock pricing page listed them on AsOf for US Regions
// (cross-Region inference profiles cost the same). Cache writes of Claude
// cost 1.25 times the input price and reads 0.1 times; Nova bills no cache
// writes and reads at a quarter of the input price. Prices change: check
// the pricing page, and override them with MODEL_PRICES.
var table = []struct {
	fragment string
	Prices
}{
	{"anthropic.claude-opus-4-5", Prices{Input: 5, Output: 25, CacheRead: 0.5, CacheWrite: 6.25}},
	{"anthropic.claude-opus-4", Prices{Input: 15, Output: 75, CacheRead: 1.5, CacheWrite: 18.75}},
	{"anthropic.claude-sonnet-4", Prices{Input: 3, Output: 15, CacheRead: 0.3, CacheWrite: 3.75}},
	{"anthropic.claude-3-7-sonnet", Prices{Input: 3, Output: 15, CacheRead: 0.3, CacheWrite: 3.75}},
	{"anthropic.claude-haiku-4-5", Prices{Input: 1, Output: 5, CacheRead: 0.1, CacheWrite: 1.25}},
	{"anthropic.claude-3-5-haiku", Prices{Input: 0.8, Output: 4, CacheRead: 0.08, CacheWrite: 1}},
	{"amazon.nova-pro", Prices{Input: 0.8, Output: 3.2, CacheRead: 0.2}},
	{"amazon.nova-lite", Prices{Input: 0.06, Output: 0.24, CacheRead: 0.015}},
	{"amazon.nova-micro", Prices{Input: 0.035, Output: 0.14, CacheRead: 0.00875}},
}

// Lookup returns the prices of modelID, an id or an inference profile id,
// or false for a model the table does not know.
func Lookup(modelID string) (Prices, bool) {
	for _, f := range table {
		if strings.Contains(modelID, f.fragment) {
			return f.Prices, true
		}
	}
	return Prices{}, false
}

// Parse reads MODEL_PRICES: a JSON object of Prices, every price a
// non-negative number, input and output required.
func Parse(v string) (Prices, error) {
	dec := json.NewDecoder(bytes.NewReader([]byte(v)))
	dec.DisallowUnknownFields()
	var p struct {
		Input      *float64 `json:"input"`
		Output     *float64 `json:"output"`
		CacheRead  *float64 `json:"cache_read"`
		CacheWrite *float64 `json:"cache_write"`
	}
	if err := dec.Decode(&p); err != nil {
		return Prices{}, fmt.Errorf(`want {"input","output","cache_read"?,"cache_write"?} in US dollars per million tokens: %w`, err)
	}
	if p.Input == nil || p.Output == nil {
		return Prices{}, errors.New("input and output are required")
	}
	out := Prices{Input: *p.Input, Output: *p.Output}
	if p.CacheRead != nil {
		out.CacheRead = *p.CacheRead
	}
	if p.CacheWrite != nil {
		out.CacheWrite = *p.CacheWrite
	}
	if out.Input < 0 || out.Output < 0 || out.CacheRead < 0 || out.CacheWrite < 0 {
		return Prices{}, errors.New("prices may not be negative")
	}
	return out, nil
}

// Table is the prices of the models a turn's agents call: Main's for the
// main agent and every sub-agent that Agents does not name, and Agents'
// for the sub-agents that call a model of their own. A nil Prices is a
// model whose prices are unknown.
type Table struct {
	Main   *Prices
	Agents map[string]*Prices
}

// For returns the prices of the model the agent name calls; nil when they
// are unknown.
func (t Table) For(name string) *Prices {
	if p, own := t.Agents[name]; own {
		return p
	}
	return t.Main
}

// Cost is the estimated cost of a turn's usage, total, which byAgent
// divides by agent when the turn delegated: each agent's share at its
// model's prices. It is false when a price is unknown.
func (t Table) Cost(total agent.Usage, byAgent map[string]agent.Usage) (float64, bool) {
	if byAgent == nil {
		if t.Main == nil {
			return 0, false
		}
		return t.Main.Cost(total), true
	}
	sum := 0.0
	for name, u := range byAgent {
		p := t.For(name)
		if p == nil {
			return 0, false
		}
		sum += p.Cost(u)
	}
	return sum, true
}
