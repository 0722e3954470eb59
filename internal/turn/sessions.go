package turn

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
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
	Window    agent.WindowState
	Pending   *agent.Pending
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
		State: sess.Conversation.State, Window: sess.Conversation.Window, Pending: sess.Conversation.Pending,
		CreatedAt: sess.CreatedAt, UpdatedAt: sess.UpdatedAt, ExpiresAt: sess.ExpiresAt, NextCursor: p.NextCursor,
	}
	if a := p.Agent; a != nil {
		out.Agent, out.Count, out.State, out.Window, out.Pending = a.Name, a.Count, a.Conversation.State, a.Conversation.Window, nil
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

// ErrSessionChanged is a later page of an export whose session changed
// since the first: its pages would not fit together.
var ErrSessionChanged = errors.New("the session changed since its export began")

// ErrInvalidCursor is a cursor that no page gave.
var ErrInvalidCursor = errors.New("malformed cursor")

// Export is one page of a session's document: the first, the Document
// with the session's header, or a later one, the Page. A transport may
// carry fewer of its messages than it holds (Cut).
type Export struct {
	// Document is the first page, Page a later one; one is set.
	Document *Document
	Page     *DocumentPage
	// First is the stored index of the page's first message.
	First int

	version int64 // the session's, when the export began
	offset  int   // the stored index of the document's first message
}

// Messages are the page's messages.
func (e *Export) Messages() []agent.Message {
	if e.Document != nil {
		return e.Document.Messages
	}
	return e.Page.Messages
}

// Cut keeps the page's first n messages, and makes its next cursor the
// page that starts after them.
func (e *Export) Cut(n int) {
	next := e.CursorAt(e.First + n)
	if e.Document != nil {
		e.Document.Messages, e.Document.NextCursor = e.Document.Messages[:n], next
	} else {
		e.Page.Messages, e.Page.NextCursor = e.Page.Messages[:n], next
	}
}

// CursorAt returns the cursor of the page of the same export that starts
// at stored message index i. It holds the session's version when the
// export began, which every page checks so that the pages fit together;
// the index of the document's first message; and the store's cursor.
func (e *Export) CursorAt(i int) string { return e.cursor(ddbhistory.CursorAt(i)) }

// cursor is the export's cursor of the page that the store's cursor
// starts.
func (e *Export) cursor(store string) string {
	return base64.RawURLEncoding.EncodeToString(fmt.Appendf(nil, "%d.%d.%s", e.version, e.offset, store))
}

// Export reads a page of a session's document, from cursor, "" for the
// first. A later page of a session that changed since the first is
// ErrSessionChanged; a cursor that no page gave, ErrInvalidCursor.
func (s *Service) Export(ctx context.Context, owner, id, cursor string) (*Export, error) {
	version, offset, storeCursor, err := exportCursor(cursor)
	if err != nil {
		return nil, err
	}
	ctx, cancel := StoreContext(ctx)
	defer cancel()
	page, err := s.store.Transcript(ctx, ddbhistory.Key{Owner: owner, ID: id}, storeCursor, ddbhistory.MaxPageSize)
	if err != nil {
		return nil, err
	}
	sess := page.Session
	if version != 0 && sess.Version != version {
		return nil, ErrSessionChanged
	}
	// Messages that expired, always a session's oldest, are not in the
	// document, which begins with the first message there is: offset is
	// that message's index in the session.
	if cursor == "" {
		offset = page.First
	}
	e := &Export{First: page.First, version: sess.Version, offset: offset}
	msgs := page.Messages
	if msgs == nil {
		msgs = []agent.Message{}
	}
	var next string
	if page.NextCursor != "" {
		next = e.cursor(page.NextCursor)
	}
	if cursor != "" {
		at := page.First - offset
		e.Page = &DocumentPage{Format: DocumentFormat, FormatVersion: DocumentVersion, SessionID: sess.ID, First: &at, NextCursor: next, Messages: msgs}
		return e, nil
	}
	window := sess.Conversation.Window
	window.Removed = max(window.Removed-offset, 0)
	e.Document = &Document{
		Format:        DocumentFormat,
		FormatVersion: DocumentVersion,
		SessionID:     sess.ID,
		Title:         sess.Title,
		CreatedAt:     sess.CreatedAt.UTC(),
		UpdatedAt:     sess.UpdatedAt.UTC(),
		MessageCount:  sess.Count - offset,
		State:         sess.Conversation.State,
		Window:        window,
		Pending:       sess.Conversation.Pending,
		NextCursor:    next,
		Messages:      msgs,
	}
	if e.Document.State == nil {
		e.Document.State = map[string]json.RawMessage{}
	}
	if !sess.ExpiresAt.IsZero() {
		at := sess.ExpiresAt.UTC()
		e.Document.ExpiresAt = &at
	}
	return e, nil
}

// exportCursor reads an export's cursor (see Export.CursorAt); "" is the
// first page.
func exportCursor(c string) (version int64, offset int, store string, err error) {
	if c == "" {
		return 0, 0, "", nil
	}
	raw, err := base64.RawURLEncoding.DecodeString(c)
	parts := strings.SplitN(string(raw), ".", 3)
	if err == nil && len(parts) == 3 && parts[2] != "" {
		version, err = strconv.ParseInt(parts[0], 10, 64)
		if err == nil {
			offset, err = strconv.Atoi(parts[1])
		}
		if err == nil && version >= 1 && offset >= 0 {
			return version, offset, parts[2], nil
		}
	}
	return 0, 0, "", fmt.Errorf("%w %q: pass the next_cursor of the previous page as it is", ErrInvalidCursor, c)
}
