package ddbhistory

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/lambda-agent/lambda-agent/internal/agent"
)

// AgentConversation is the conversation a session keeps for one of its
// sub-agents, as a turn starts from it.
type AgentConversation struct {
	Name string
	// Count is how many messages the conversation has stored: the index
	// its next message takes.
	Count int
	// Conversation is the active window, the manager's state and the
	// sub-agent's own state.
	Conversation agent.Conversation
}

// AgentTurn is what a turn adds to a sub-agent's conversation. A session
// keeps one conversation per sub-agent, beside the main agent's.
type AgentTurn struct {
	Name string
	// First is the index of Messages[0]: the conversation's Count as the
	// turn loaded it.
	First int
	// Messages are appended to the conversation, in order.
	Messages []agent.Message
	// Window and State are the conversation manager's state and the
	// sub-agent's state after the turn, and Pending what its turn waits
	// for, when it paused for a person inside the session's turn.
	Window  agent.WindowState
	State   map[string]json.RawMessage
	Pending *agent.Pending
}

// LoadAgent reads the conversation sess keeps for the sub-agent name, as
// Load reads the main agent's: one Query, newest first, of the
// conversation's item and the messages of its window. A sub-agent that has
// none yet, or whose conversation expired, starts with an empty one.
//
// It returns ErrConflict when a commit since sess was loaded wrote the
// conversation: the turn that loaded sess could not commit anyway.
func (s *Store) LoadAgent(ctx context.Context, sess *Session, name string) (*AgentConversation, error) {
	if err := sess.validate(); err != nil {
		return nil, err
	}
	if err := validAgentName(name); err != nil {
		return nil, err
	}
	if sess.Version == 0 {
		return &AgentConversation{Name: name}, nil
	}
	conv, window, first, err := s.readNewestSettled(ctx, sess.Key, agentKeys(name), s.cfg.WindowHint, windowStart)
	switch {
	case err != nil:
		return nil, fmt.Errorf("ddbhistory: load agent %s of %s: %w", name, sess.ID, err)
	case conv.written > sess.Version:
		return nil, fmt.Errorf("ddbhistory: load agent %s of %s: %w: a commit wrote its conversation after the session was loaded", name, sess.ID, ErrConflict)
	}
	out := &AgentConversation{Name: name, Count: conv.Count, Conversation: conv.Conversation}
	out.Conversation.Messages, out.Conversation.Window.Removed = window, first
	return out, nil
}

// validAgentName refuses a name that cannot name a sub-agent: one that is
// not a tool name, such as one with a '#', which would break the keyspace
// apart, or the main agent's.
func validAgentName(name string) error {
	if !agent.ValidToolName(name) || name == agent.MainAgent {
		return invalidArgument("agent name %q must match %s and not be %q", name, agent.ToolNameRule, agent.MainAgent)
	}
	return nil
}

// agentWrites returns the writes of a turn's sub-agent conversations: the
// messages of each, past its count, where no reader looks until its
// conversation item counts them; and the conversation items, which make
// them visible and so go in the transaction that writes the session item.
// The messages of a new session's conversation start after those its
// staging holds, if any.
// Each item records the session version the commit makes ("written"), so
// that a later LoadAgent tells a conversation written after its session
// was loaded.
func (c *commit) agentWrites(turns []AgentTurn, now time.Time) (messages, metas []write, err error) {
	seen := map[string]bool{}
	for _, at := range turns {
		if err := validAgentName(at.Name); err != nil {
			return nil, nil, err
		}
		count := at.First + len(at.Messages)
		staged := 0 // the messages of a new session's are staged ones
		if c.staging != nil {
			staged = c.staging.Agents[at.Name].Count
		}
		switch {
		case seen[at.Name]:
			return nil, nil, invalidArgument("agent %s twice in one turn", at.Name)
		case at.First < 0 || c.sess.Version == 0 && at.First != staged:
			return nil, nil, invalidArgument("agent %s's messages start at %d", at.Name, at.First)
		case at.Window.Removed < 0 || at.Window.Removed > count:
			return nil, nil, invalidArgument("agent %s's window starts at message %d of %d", at.Name, at.Window.Removed, count)
		}
		seen[at.Name] = true
		c.agents = append(c.agents, at.Name)
		ks := agentKeys(at.Name)
		ws, err := c.s.messageWrites(c.pk, ks, at.First, at.Messages, 0, c.expires, now)
		if err != nil {
			return nil, nil, fmt.Errorf("agent %s: %w", at.Name, err)
		}
		messages = append(messages, ws...)
		window, err := json.Marshal(at.Window)
		if err != nil {
			return nil, nil, fmt.Errorf("agent %s: encode window: %w", at.Name, err)
		}
		state, err := json.Marshal(at.State)
		if err != nil {
			return nil, nil, fmt.Errorf("agent %s: encode state: %w", at.Name, err)
		}
		meta := item{
			PartitionKey: str(c.pk),
			SortKey:      str(ks.meta()),
			attrCount:    num(count),
			attrWindow:   str(string(window)),
			attrState:    str(string(state)),
			attrUpdated:  num(now.UnixMilli()),
			attrWritten:  num(c.sess.Version + 1),
			TTLAttribute: num(c.expires),
		}
		if at.Pending != nil {
			pending, err := json.Marshal(at.Pending)
			if err != nil {
				return nil, nil, fmt.Errorf("agent %s: encode pending interrupts: %w", at.Name, err)
			}
			meta[attrPending] = bin(compress(pending))
		}
		metas = append(metas, write{c.s.put(meta, nil), itemSize(meta)})
	}
	return messages, metas, nil
}
