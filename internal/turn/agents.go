package turn

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/lambda-agent/lambda-agent/internal/ddbhistory"
)

// The conversations a session keeps for its sub-agents, beside the main
// agent's: which sub-agents a session can have, and reading one's
// transcript. Turns read and write them through the agent (see
// agentLoader); exports and imports carry them (see Document.Agents).

// subAgentLister is what the service asks of its agent to know the
// sub-agents a turn may reach. *agent.Agent implements it; an agent that
// does not has none.
type subAgentLister interface {
	SubAgents() (names []string, fresh map[string]bool)
}

// subAgents lists the names of the sub-agents the service's turns may
// reach, sorted: the conversations a session can keep. A fresh one, which
// starts afresh on every delegation, is among them; it has nothing stored.
func (s *Service) subAgents() []string {
	l, ok := s.agent.(subAgentLister)
	if !ok {
		return nil
	}
	names, _ := l.SubAgents()
	return names
}

// ErrUnknownAgent is a sub-agent that the service's agent does not have;
// the error is an *UnknownAgentError.
var ErrUnknownAgent = errors.New("no such sub-agent")

// UnknownAgentError names a sub-agent the service's agent does not have,
// and lists those it has.
type UnknownAgentError struct {
	Name   string
	Agents []string
}

func (e *UnknownAgentError) Error() string {
	if len(e.Agents) == 0 {
		return fmt.Sprintf("there is no sub-agent %q: the agent has none (AGENTS is not set)", e.Name)
	}
	return fmt.Sprintf("there is no sub-agent %q: the agent's sub-agents are %s (AGENTS)", e.Name, strings.Join(e.Agents, ", "))
}

// Is makes errors.Is(err, ErrUnknownAgent) true.
func (e *UnknownAgentError) Is(target error) bool { return target == ErrUnknownAgent }

// knownAgent refuses a name that is not one of the service's sub-agents.
func (s *Service) knownAgent(name string) error {
	if agents := s.subAgents(); !slices.Contains(agents, name) {
		return &UnknownAgentError{Name: name, Agents: agents}
	}
	return nil
}

// AgentTranscript reads a page of the conversation a session keeps for
// its sub-agent name, as Transcript reads the main agent's: limit
// messages from cursor, "" for the first page. The page's Count, State
// and Window are the sub-agent's, and it has no Pending; its title and
// times are the session's. A sub-agent with nothing stored has no
// messages. A name that is not one of the agent's sub-agents is an
// *UnknownAgentError; another owner's session, or a missing one,
// ErrNotFound; a malformed cursor or limit, an *ArgumentError.
func (s *Service) AgentTranscript(ctx context.Context, owner, id, name, cursor string, limit int) (*Page, error) {
	if err := s.knownAgent(name); err != nil {
		return nil, err
	}
	ctx, cancel := StoreContext(ctx)
	defer cancel()
	p, err := s.store.AgentTranscript(ctx, ddbhistory.Key{Owner: owner, ID: id}, name, cursor, limit)
	if err != nil {
		return nil, err
	}
	return pageOf(p), nil
}
