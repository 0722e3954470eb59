package app

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/lambda-agent/lambda-agent/internal/agent"
	"github.com/lambda-agent/lambda-agent/internal/remote"
)

// SubAgent is one entry of AGENTS: an agent the main agent may hand a
// task to, through a tool named after it.
type SubAgent struct {
	// Name names the agent and its tool: a tool name, not "main".
	Name string `json:"name"`
	// Description tells the model that delegates when to use the agent.
	Description string `json:"description"`
	// SystemPrompt is the agent's own system prompt.
	SystemPrompt string `json:"system_prompt"`
	// Tools are the tools the agent is offered: enabled built-in tools,
	// Lambda tools and other sub-agents, to which it may then delegate.
	// Unset, it is offered the enabled built-in and Lambda tools but
	// those that wait for a person.
	Tools []string `json:"tools,omitempty"`
	// MaxCycles caps the agent's model calls in one delegation; 0 means
	// MAX_CYCLES. Every delegation counts against the turn's MAX_CYCLES
	// too.
	MaxCycles int `json:"max_cycles,omitempty"`
	// ModelID is the model the agent calls, a foundation model id or a
	// system-defined inference profile id; empty means MODEL_ID. The
	// functions must be allowed to call it (Config.checkModel).
	ModelID string `json:"model_id,omitempty"`
	// Manager is the agent's conversation manager, as
	// CONVERSATION_MANAGER spells them; empty means CONVERSATION_MANAGER.
	Manager string `json:"conversation_manager,omitempty"`
	// WindowSize is the agent's WINDOW_SIZE; 0 means WINDOW_SIZE. Its
	// sliding window is cut back to half of it.
	WindowSize int `json:"window_size,omitempty"`
	// Fresh starts every delegation to the agent from an empty
	// conversation that the session does not keep (agent.Fresh).
	Fresh bool `json:"fresh,omitempty"`
}

// Bounds on AGENTS.
const (
	MaxSubAgents           = 16
	MaxSubAgentDescription = 4 << 10
	MaxSubAgentPrompt      = 32 << 10
)

// parseAgents reads AGENTS, a JSON list of sub-agents, and checks it
// against the tools c enables. It reports every problem at once.
func parseAgents(v string, c *Config) ([]SubAgent, error) {
	var agents []SubAgent
	if err := remote.DecodeStrict(v, &agents); err != nil {
		return nil, err
	}
	var errs []error
	if len(agents) > MaxSubAgents {
		errs = append(errs, fmt.Errorf("%d agents; at most %d", len(agents), MaxSubAgents))
	}
	enabled := slices.Clone(c.Tools)
	for _, t := range c.LambdaTools {
		enabled = append(enabled, t.Name)
	}
	byName := map[string]*SubAgent{}
	for i := range agents {
		a := &agents[i]
		fail := func(format string, args ...any) {
			errs = append(errs, fmt.Errorf("[%d] %s: %s", i, a.Name, fmt.Sprintf(format, args...)))
		}
		switch {
		case !agent.ValidToolName(a.Name):
			fail("name must match %s", agent.ToolNameRule)
		case a.Name == agent.MainAgent:
			fail("%q is the main agent's name", agent.MainAgent)
		case byName[a.Name] != nil:
			fail("a second agent has this name")
		case slices.Contains(enabled, a.Name):
			fail("a tool has this name; name the agent otherwise")
		}
		byName[a.Name] = a
		if d := strings.TrimSpace(a.Description); d == "" || len(a.Description) > MaxSubAgentDescription {
			fail("description is required, at most %d bytes: the model reads it to choose the agent", MaxSubAgentDescription)
		}
		if p := strings.TrimSpace(a.SystemPrompt); p == "" || len(a.SystemPrompt) > MaxSubAgentPrompt {
			fail("system_prompt is required, at most %d bytes", MaxSubAgentPrompt)
		}
		if a.MaxCycles < 0 || a.MaxCycles > 1000 {
			fail("max_cycles must be from 1 to 1000")
		}
		if a.Manager != "" && !slices.Contains(managers, a.Manager) {
			fail("conversation_manager must be one of %s", strings.Join(managers, ", "))
		}
		if a.WindowSize != 0 && (a.WindowSize < MinWindowSize || a.WindowSize > MaxWindowSize) {
			fail("window_size must be from %d to %d", MinWindowSize, MaxWindowSize)
		}
		switch {
		case a.ModelID == "":
		case !modelIDPattern.MatchString(a.ModelID):
			fail("model_id must be a foundation model id or a system-defined inference profile id (%s), not an ARN", modelIDRule)
		default:
			if err := c.checkModel(a.ModelID); err != nil {
				fail("model_id: %v", err)
			}
		}
	}
	for i := range agents {
		a := &agents[i]
		if a.Tools == nil {
			for _, n := range enabled {
				if !waitsForAPerson(n, c) {
					a.Tools = append(a.Tools, n)
				}
			}
			continue
		}
		for _, n := range a.Tools {
			switch {
			case n == a.Name:
				errs = append(errs, fmt.Errorf("[%d] %s: tools: an agent cannot delegate to itself", i, a.Name))
			case byName[n] != nil:
			case !slices.Contains(enabled, n):
				errs = append(errs, fmt.Errorf("[%d] %s: tools: %q is neither an enabled built-in or Lambda tool nor an agent; the tools are %s", i, a.Name, n, strings.Join(enabled, ", ")))
			case waitsForAPerson(n, c):
				errs = append(errs, fmt.Errorf("[%d] %s: tools: %q waits for a person, which a sub-agent cannot do yet", i, a.Name, n))
			}
		}
	}
	if len(errs) == 0 {
		errs = append(errs, checkDelegations(agents, byName)...)
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return agents, nil
}

// waitsForAPerson says whether tool n pauses a turn for a person.
func waitsForAPerson(n string, c *Config) bool {
	return n == agent.AskUserName || slices.Contains(c.ApprovalTools, n)
}

// checkDelegations refuses a cycle of delegations, and a chain deeper
// than agent.MaxDelegationDepth, counting the main agent's delegation.
func checkDelegations(agents []SubAgent, byName map[string]*SubAgent) []error {
	var errs []error
	cycles := map[string]bool{} // each cycle once, by its members
	depth := map[string]int{}   // the longest chain from an agent, itself included
	var visit func(a *SubAgent, path []string) int
	visit = func(a *SubAgent, path []string) int {
		if i := slices.Index(path, a.Name); i >= 0 {
			cycle := append(slices.Clone(path[i:]), a.Name)
			if key := strings.Join(slices.Sorted(slices.Values(path[i:])), ","); !cycles[key] {
				cycles[key] = true
				errs = append(errs, fmt.Errorf("a cycle of delegations: %s", strings.Join(cycle, " → ")))
			}
			return 0
		}
		if d, ok := depth[a.Name]; ok {
			return d
		}
		d := 1
		for _, n := range a.Tools {
			if sub := byName[n]; sub != nil {
				d = max(d, 1+visit(sub, append(slices.Clone(path), a.Name)))
			}
		}
		depth[a.Name] = d
		return d
	}
	for i := range agents {
		if d := visit(&agents[i], nil); d > agent.MaxDelegationDepth {
			errs = append(errs, fmt.Errorf("%s: its delegations nest %d deep; at most %d", agents[i].Name, d, agent.MaxDelegationDepth))
		}
	}
	return errs
}
