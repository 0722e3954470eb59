package turn

import (
	"context"
	"encoding/json"
	"time"

	"github.com/lambda-agent/lambda-agent/internal/agent"
	"github.com/lambda-agent/lambda-agent/internal/ddbhistory"
)

// The session use cases that run no turn: reading a transcript, listing
// and deleting sessions, and exporting a session's document. Each bounds
// its store calls by StoreContext, as a turn does, and each is the
// owner's: another owner's session is ErrNotFound.

// Page is a page of a session's transcript, oldest first, with what the
// session holds beside its messages.
type Page struct {
	SessionID string
	// Agent is the sub-agent whose conversation the page is of; "" for
	// the main agent's.
	Agent string
	Title string
	// First is the index in the session of the first of Messages: the
	// index of message k is First+k. Messages that expired, always the
	// oldest, are left out.
	First    int
	Messages []agent.Message
	// Count is how many messages the session holds: the index its next
	// message takes.
	Count int
	State map[string]json.RawMessage
	// Window is the conversation manager's state; Pending what the last
	// turn waits for.
	Window  agent.WindowState
	Pending *agent.Pending
	// Resuming says that a request is answering Pending: it claimed the
	// interrupts, and the rest of their turn runs.
	Resuming  bool
	CreatedAt time.Time
	UpdatedAt time.Time
	// ExpiresAt is zero for a session that never expires.
	ExpiresAt time.Time
	// NextCursor continues the transcript; empty on the last page.
	NextCursor string
}

// Transcript reads a page of a session's transcript: limit messages from
// cursor, "" for the first page. A malformed cursor or limit is an
// *ArgumentError.
func (s *Service) Transcript(ctx context.Context, owner, id, cursor string, limit int) (*Page, error) {
	ctx, cancel := StoreContext(ctx)
	defer cancel()
	p, err := s.store.Transcript(ctx, ddbhistory.Key{Owner: owner, ID: id}, cursor, limit)
	if err != nil {
		return nil, err
	}
	return pageOf(p), nil
}

// pageOf is the store's page p: of the main agent's conversation, or of
// a sub-agent's (p.Agent), whose count, state and window it then has, and
// nothing pending; the title and the times are the session's.
func pageOf(p *ddbhistory.Page) *Page {
	sess := p.Session
	out := &Page{
		SessionID: sess.ID, Title: sess.Title, First: p.First, Messages: p.Messages, Count: sess.Count,
		State: sess.Conversation.State, Window: sess.Conversation.Window, Pending: sess.Conversation.Pending, Resuming: sess.Resuming,
		CreatedAt: sess.CreatedAt, UpdatedAt: sess.UpdatedAt, ExpiresAt: sess.ExpiresAt, NextCursor: p.NextCursor,
	}
	if a := p.Agent; a != nil {
		out.Agent, out.Count, out.State, out.Window, out.Pending, out.Resuming = a.Name, a.Count, a.Conversation.State, a.Conversation.Window, nil, false
	}
	return out
}

// Tail reads the end of a session's transcript: its last n messages, at
// most, in one read for most sessions, however long. n must be 1 to
// ddbhistory.MaxPageSize.
func (s *Service) Tail(ctx context.Context, owner, id string, n int) (*Page, error) {
	ctx, cancel := StoreContext(ctx)
	defer cancel()
	p, err := s.store.Tail(ctx, ddbhistory.Key{Owner: owner, ID: id}, n)
	if err != nil {
		return nil, err
	}
	return pageOf(p), nil
}

// Summary is a session in a list.
type Summary struct {
	SessionID string
	// Title is the start of the session's first message.
	Title     string
	CreatedAt time.Time
}

// SessionList is a page of an owner's sessions, newest first.
type SessionList struct {
	Sessions []Summary
	// NextCursor continues the list; empty on the last page.
	NextCursor string
}

// List lists an owner's sessions, newest first, limit at a time from
// cursor, "" for the first page.
func (s *Service) List(ctx context.Context, owner, cursor string, limit int) (*SessionList, error) {
	ctx, cancel := StoreContext(ctx)
	defer cancel()
	l, err := s.store.List(ctx, owner, cursor, limit)
	if err != nil {
		return nil, err
	}
	out := &SessionList{Sessions: make([]Summary, 0, len(l.Sessions)), NextCursor: l.NextCursor}
	for _, sum := range l.Sessions {
		out.Sessions = append(out.Sessions, Summary{SessionID: sum.ID, Title: sum.Title, CreatedAt: sum.CreatedAt})
	}
	return out, nil
}

// Delete deletes a session, every item of it. A delete that stops
// part-way has hidden the session already, and is ErrDeleteUnfinished;
// one whose context ends while it writes is ErrOutcomeUnknown. Either is
// finished by deleting again.
func (s *Service) Delete(ctx context.Context, owner, id string) error {
	ctx, cancel := StoreContext(ctx)
	defer cancel()
	return s.store.Delete(ctx, ddbhistory.Key{Owner: owner, ID: id})
}
