package turn

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/lambda-agent/lambda-agent/internal/agent"
	"github.com/lambda-agent/lambda-agent/internal/ddbhistory"
)

// Provider takes part in every chat turn the service runs, as Microsoft
// Agent Framework's context providers do: before the model sees the
// conversation, Provide may add context for the turn's model calls; after
// the turn is committed, Committed may act on what it added. Both know
// whose session it is, which the agent does not. A long-term memory is
// one: it recalls what it knows of the owner, and learns from what the
// turn added.
//
// Provide's entries reach the model as the caller's context does
// (agent.Conversation.Context): as data, marked as such, beside the
// turn's user message, for this turn's model calls alone; they are never
// stored, and they count against agent.MaxContextBytes with the caller's.
// An error ends the turn before it runs, as the store's does; a provider
// that can do without its context returns none instead. Committed runs
// after the commit and before the answer is sent, with a context of its
// own that the caller's end does not cancel: it should be quick, or hand
// its work off. A Provider must be safe for concurrent use.
type Provider interface {
	Provide(ctx context.Context, p Provision) ([]agent.ContextEntry, error)
	Committed(ctx context.Context, c Committed)
}

// Provision is what Provide knows of a turn about to run.
type Provision struct {
	Owner, SessionID string
	// Input is the user's new content, an edit's included; empty for a
	// turn that resumes after a person's responses, or regenerates.
	Input []agent.ContentBlock
	// Room is how many bytes of context the turn has left, after the
	// caller's and the providers' before: entries past it fail the turn.
	Room int
}

// Committed is what a committed turn added to a session: Messages, stored
// from index First on.
type Committed struct {
	Owner, SessionID string
	First            int
	Messages         []agent.Message
}

// WithProviders makes every chat turn of the service take ps, in order.
func WithProviders(ps ...Provider) Option {
	return func(s *Service) { s.providers = append(s.providers, ps...) }
}

// committedTimeout bounds the Committed calls of one commit.
const committedTimeout = 2 * time.Second

// provide adds to conv's context what the providers give the turn.
func (s *Service) provide(ctx context.Context, key ddbhistory.Key, conv *agent.Conversation, input []agent.ContentBlock) error {
	if len(s.providers) == 0 {
		return nil
	}
	entries := conv.Context
	for i, p := range s.providers {
		room := agent.MaxContextBytes
		for _, e := range entries {
			room -= len(e.Description) + len(e.Value)
		}
		more, err := p.Provide(ctx, Provision{Owner: key.Owner, SessionID: key.ID, Input: input, Room: max(room, 0)})
		if err != nil {
			return fmt.Errorf("turn: context provider %d: %w", i, err)
		}
		entries = append(entries, more...)
	}
	if agent.CheckContext(entries) != nil {
		// The providers' fault, not the caller's: no input error.
		return errors.New("turn: the context providers' context, with the caller's, is past agent.MaxContextBytes or not UTF-8")
	}
	conv.Context = entries
	return nil
}

// committed tells the providers what a commit added to sess.
func (s *Service) committed(ctx context.Context, key ddbhistory.Key, first int, msgs []agent.Message) {
	if len(s.providers) == 0 || len(msgs) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), committedTimeout)
	defer cancel()
	for _, p := range s.providers {
		p.Committed(ctx, Committed{Owner: key.Owner, SessionID: key.ID, First: first, Messages: msgs})
	}
}
