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
// (checkAgents).
func parseAgents(v string, c *Config) ([]SubAgent, error) {
	var agents []SubAgent
	if err := remote.DecodeStrict(v, &agents); err != nil {
		return nil, err
	}
	where := make([]string, len(agents))
	for i := range agents {
		where[i] = fmt.Sprintf("[%d]", i)
	}
	if err := checkAgents(agents, where, c); err != nil {
		return nil, err
	}
	return agents, nil
}

// checkAgents checks agents, each named in messages by where and its name,
// against the tools and the models c allows, and completes their tools:
// unset, the enabled built-in and Lambda tools but those that wait for a
// person or that LAMBDA_TOOLS offers to named agents only; and, set or
// not, the Lambda tools whose entries name the agent. It reports every
// problem at once.
func checkAgents(agents []SubAgent, where []string, c *Config) error {
	var errs []error
	if len(agents) > MaxSubAgents {
		errs = append(errs, fmt.Errorf("%d agents; at most %d", len(agents), MaxSubAgents))
	}
	enabled := slices.Clone(c.Tools)
	only := map[string][]string{} // the agents a Lambda tool is offered to, if not to all
	for _, t := range c.LambdaTools {
		enabled = append(enabled, t.Name)
		if t.Agents != nil {
			only[t.Name] = t.Agents
		}
	}
	byName := map[string]*SubAgent{}
	for i := range agents {
		a := &agents[i]
		fail := func(format string, args ...any) {
			errs = append(errs, fmt.Errorf("%s %s: %s", where[i], a.Name, fmt.Sprintf(format, args...)))
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
		case !validModelID(a.ModelID):
			fail("model_id must be a foundation model id or a system-defined inference profile id (%s), not an ARN", modelIDRule)
		default:
			if err := c.checkModel(a.ModelID); err != nil {
				fail("model_id: %v", err)
			}
		}
	}
	for i := range agents {
		a := &agents[i]
		fail := func(format string, args ...any) {
			errs = append(errs, fmt.Errorf("%s %s: tools: %s", where[i], a.Name, fmt.Sprintf(format, args...)))
		}
		if a.Tools == nil {
			for _, n := range enabled {
				if only[n] == nil && !waitsForAPerson(n, c) {
					a.Tools = append(a.Tools, n)
				}
			}
		} else {
			for _, n := range a.Tools {
				switch {
				case n == a.Name:
					fail("an agent cannot delegate to itself")
				case byName[n] != nil:
				case !slices.Contains(enabled, n):
					fail("%q is neither an enabled built-in or Lambda tool nor an agent; the tools are %s", n, strings.Join(enabled, ", "))
				case only[n] != nil && !slices.Contains(only[n], a.Name):
					fail("%q is offered only to the agents its entry in LAMBDA_TOOLS names: %s", n, strings.Join(only[n], ", "))
				case a.Fresh && waitsForAPerson(n, c):
					fail("%q waits for a person, which an agent that starts fresh cannot do: nothing keeps its turn to resume", n)
				}
			}
		}
		for _, t := range c.LambdaTools {
			if slices.Contains(t.Agents, a.Name) && !slices.Contains(a.Tools, t.Name) {
				a.Tools = append(a.Tools, t.Name)
			}
		}
	}
	if len(errs) == 0 {
		errs = append(errs, checkDelegations(agents, byName)...)
	}
	return errors.Join(errs...)
}

// checkAudiences checks the agents that MCP_SERVERS' and LAMBDA_TOOLS'
// entries offer their tools to, instead of the main agent: agents of
// AGENTS, at least one, and, for a Lambda tool that waits for a person,
// not only agents that start fresh, which cannot wait.
func checkAudiences(c *Config) []error {
	var errs []error
	var known []string
	fresh := map[string]bool{}
	for _, a := range c.Agents {
		known = append(known, a.Name)
		fresh[a.Name] = a.Fresh
	}
	check := func(variable string, i int, name string, agents []string) {
		switch {
		case agents == nil:
		case len(agents) == 0:
			errs = append(errs, fmt.Errorf("%s: [%d] %s: agents is empty, which offers the tools to no agent; leave it out to offer them to the main agent", variable, i, name))
		case len(known) == 0:
			errs = append(errs, fmt.Errorf("%s: [%d] %s: agents names %s, and AGENTS defines no agent", variable, i, name, strings.Join(agents, ", ")))
		default:
			for _, n := range agents {
				if !slices.Contains(known, n) {
					errs = append(errs, fmt.Errorf("%s: [%d] %s: agents: %q is not an agent of AGENTS, which are %s", variable, i, name, n, strings.Join(known, ", ")))
				}
			}
		}
	}
	for i, s := range c.MCPServers {
		check("MCP_SERVERS", i, s.Name, s.Agents)
	}
	for i, a := range c.A2AAgents {
		check("A2A_AGENTS", i, a.Name, a.Agents)
		if len(a.Agents) > 0 && !slices.ContainsFunc(a.Agents, func(n string) bool { return !fresh[n] }) {
			errs = append(errs, fmt.Errorf("A2A_AGENTS: [%d] %s: a remote agent may ask for a person's answer, and the agents it is offered to start fresh, which cannot wait", i, a.Name))
		}
		if slices.Contains(c.Tools, a.Name) || slices.ContainsFunc(c.LambdaTools, func(t remote.LambdaTool) bool { return t.Name == a.Name }) ||
			slices.ContainsFunc(c.Agents, func(s SubAgent) bool { return s.Name == a.Name }) {
			errs = append(errs, fmt.Errorf("A2A_AGENTS: [%d] %s: another tool, Lambda tool or sub-agent has this name; name the remote agent otherwise", i, a.Name))
		}
	}
	for i, t := range c.LambdaTools {
		check("LAMBDA_TOOLS", i, t.Name, t.Agents)
		if len(t.Agents) > 0 && slices.Contains(c.ApprovalTools, t.Name) && !slices.ContainsFunc(t.Agents, func(n string) bool { return !fresh[n] }) {
			errs = append(errs, fmt.Errorf("APPROVAL_TOOLS: %q waits for a person, and the agents that LAMBDA_TOOLS offers it to start fresh, which cannot wait", t.Name))
		}
	}
	return errs
}

// waitsForAPerson says whether tool n pauses a turn for a person.
func waitsForAPerson(n string, c *Config) bool {
	return n == agent.AskUserName || slices.Contains(c.ApprovalTools, n) ||
		slices.ContainsFunc(c.A2AAgents, func(a remote.A2AAgent) bool { return a.Name == n }) // a remote agent may ask
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
