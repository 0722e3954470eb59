package turn

import (
	"encoding/json"

	"github.com/lambda-agent/lambda-agent/internal/agent"
)

// ChatAnswer is the answer to a chat turn. It is what POST /chat returns,
// and, without its messages, what the store keeps for replays.
type ChatAnswer struct {
	SessionID string `json:"session_id"`
	// Text is the final assistant text.
	Text       string           `json:"text"`
	StopReason agent.StopReason `json:"stop_reason"`
	Usage      agent.Usage      `json:"usage"`
	// Agents, for a turn that delegated to sub-agents, is its usage by
	// agent: the main agent's own model calls under "main", and each
	// sub-agent's under its name. Usage counts them all.
	Agents  map[string]AgentUsage `json:"agents,omitempty"`
	Metrics Metrics               `json:"metrics"`
	// Window says which stored messages the model sees from now on.
	Window Window `json:"window"`
	// Interrupts, with stop reason "interrupt", are the tool uses that
	// wait for a person's response.
	Interrupts []agent.Interrupt `json:"interrupts,omitempty"`
	// RewoundTo, for a regenerate or an edit, is the index of the first
	// message the turn replaced: Messages are stored from there on.
	RewoundTo *int `json:"rewound_to,omitempty"`
	// Messages are the messages the turn added.
	Messages []agent.Message `json:"messages"`
}

// StructuredAnswer is the answer to a structured turn, as POST /structured
// returns it and the store keeps it for replays.
type StructuredAnswer struct {
	SessionID string          `json:"session_id"`
	Data      json.RawMessage `json:"data"`
	Attempts  int             `json:"attempts"`
	Usage     agent.Usage     `json:"usage"`
	Metrics   Metrics         `json:"metrics"`
}

// AgentUsage is what one agent of a turn used.
type AgentUsage struct {
	Usage agent.Usage `json:"usage"`
	// EstimatedCostUSD is what its tokens cost at the prices of the model
	// it calls; absent for a model whose prices are unknown.
	EstimatedCostUSD *float64 `json:"estimated_cost_usd,omitempty"`
}

// Metrics describe a turn's work.
type Metrics struct {
	Cycles     int   `json:"cycles"`
	ModelCalls int   `json:"model_calls"`
	ToolCalls  int   `json:"tool_calls"`
	Reductions int   `json:"reductions"`
	DurationMS int64 `json:"duration_ms"`
	// EstimatedCostUSD is what the turn's tokens cost at the model's
	// prices (see pricing); absent for a model whose prices are unknown.
	EstimatedCostUSD *float64 `json:"estimated_cost_usd,omitempty"`
}

// Window is the conversation manager's state, as clients see it.
type Window struct {
	// Removed counts the stored messages the model no longer sees.
	Removed int `json:"removed"`
	// Summarized is true when a summary stands for them.
	Summarized bool `json:"summarized"`
}

// WindowOf returns what clients see of the manager's state w.
func WindowOf(w agent.WindowState) Window {
	return Window{Removed: w.Removed, Summarized: w.Summary != ""}
}

func (s *Service) chatAnswer(sessionID string, res *agent.Result) ChatAnswer {
	return ChatAnswer{
		SessionID:  sessionID,
		Text:       res.Text,
		Messages:   res.Messages,
		StopReason: res.StopReason,
		Usage:      res.Usage,
		Agents:     s.agentsOf(res),
		Metrics:    s.metricsOf(res),
		Window:     WindowOf(res.Window),
		Interrupts: interruptsOf(res.Pending),
	}
}

func interruptsOf(p *agent.Pending) []agent.Interrupt {
	if p == nil {
		return nil
	}
	return p.Interrupts
}

func (s *Service) agentsOf(r *agent.Result) map[string]AgentUsage {
	if r.AgentUsage == nil {
		return nil
	}
	out := make(map[string]AgentUsage, len(r.AgentUsage))
	for name, u := range r.AgentUsage {
		au := AgentUsage{Usage: u}
		if p := s.prices.For(name); p != nil {
			cost := p.Cost(u)
			au.EstimatedCostUSD = &cost
		}
		out[name] = au
	}
	return out
}

func (s *Service) metricsOf(r *agent.Result) Metrics {
	m := Metrics{
		Cycles:     r.Metrics.Cycles,
		ModelCalls: r.Metrics.ModelCalls,
		ToolCalls:  r.Metrics.ToolCalls,
		Reductions: r.Metrics.Reductions,
		DurationMS: r.Metrics.Duration.Milliseconds(),
	}
	if cost, ok := s.prices.Cost(r.Usage, r.AgentUsage); ok {
		m.EstimatedCostUSD = &cost
	}
	return m
}
