package turn

import (
	"cmp"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/lambda-agent/lambda-agent/internal/agent"
	"github.com/lambda-agent/lambda-agent/internal/ddbhistory"
	"golang.org/x/sync/errgroup"
)

// ErrSessionChanged is a later page of an export whose session changed
// since the first: its pages would not fit together.
var ErrSessionChanged = errors.New("the session changed since its export began")

// ErrInvalidCursor is a cursor that no page gave.
var ErrInvalidCursor = errors.New("malformed cursor")

// An export's pages hold the document's messages in its order: the main
// agent's conversation, then each sub-agent's, by name. A page holds up
// to ddbhistory.MaxPageSize of them, and goes on from one conversation to
// the next while it has room: its messages come in runs, one per
// conversation. The first page also holds the header of every
// conversation, so that the pages after it only add messages.

// Export is one page of a session's document: the first, the Document
// with the session's header and its sub-agents', or a later one, the
// Page. A transport may carry fewer of its messages than it holds (Cut).
type Export struct {
	// Document is the first page, Page a later one; one is set. Their
	// messages are the runs'.
	Document *Document
	Page     *DocumentPage

	runs    []exportRun
	next    exportPosition // where the next page starts; done when none does
	done    bool
	version int64 // the session's, when the export began
}

// ExportRun is a page's messages of one conversation.
type ExportRun struct {
	// Agent is the sub-agent whose conversation it is; "" for the main
	// agent's.
	Agent string
	// First is the stored index of the first of Messages in that
	// conversation.
	First    int
	Messages []agent.Message
}

// exportRun is a run, with the stored index of its conversation's first
// message in the document (see exportPosition).
type exportRun struct {
	ExportRun
	offset int
}

// exportPosition is where a page of an export starts: a conversation, a
// store cursor in it, and the stored index of its first message in the
// document. Messages that expired, always a conversation's oldest, are
// not in the document, whose messages of each conversation begin with
// the first there is: its first read finds offset.
type exportPosition struct {
	agent  string
	cursor string
	offset int
}

// Runs are the page's messages, conversation by conversation, in the
// document's order.
func (e *Export) Runs() []ExportRun {
	out := make([]ExportRun, len(e.runs))
	for i, r := range e.runs {
		out[i] = r.ExportRun
	}
	return out
}

// Cut keeps the page's first n messages, across its runs, and makes its
// next cursor the page that starts after them.
func (e *Export) Cut(n int) {
	for i := range e.runs {
		r := &e.runs[i]
		switch {
		case n >= len(r.Messages) && i < len(e.runs)-1:
			n -= len(r.Messages)
			continue
		case n >= len(r.Messages):
			return // the page holds them all
		case n == 0:
			e.runs = e.runs[:i]
		default:
			r.Messages = r.Messages[:n]
			e.runs = e.runs[:i+1]
		}
		e.next, e.done = exportPosition{agent: r.Agent, cursor: ddbhistory.CursorAt(r.First + n), offset: r.offset}, false
		e.fill()
		return
	}
}

// MaxCursorLen is the length of the longest next cursor that a Cut may
// give the page, for a transport to measure the page with.
func (e *Export) MaxCursorLen() int {
	n := len(e.cursor())
	for _, r := range e.runs {
		at := exportPosition{agent: r.Agent, cursor: ddbhistory.CursorAt(r.First + len(r.Messages)), offset: r.offset}
		n = max(n, len(e.cursorOf(at)))
	}
	return n
}

// cursor is the page's next cursor; "" on the last page.
func (e *Export) cursor() string {
	if e.done {
		return ""
	}
	return e.cursorOf(e.next)
}

// cursorOf is the export's cursor of the page that starts at p. It holds
// the session's version when the export began, which every page checks
// so that the pages fit together; the offset of p's conversation; the
// store's cursor; and the sub-agent, for a sub-agent's conversation.
func (e *Export) cursorOf(p exportPosition) string {
	raw := fmt.Sprintf("%d.%d.%s", e.version, p.offset, cmp.Or(p.cursor, ddbhistory.CursorAt(0)))
	if p.agent != "" {
		raw += "." + p.agent
	}
	return base64.RawURLEncoding.EncodeToString([]byte(raw))
}

// fill sets the page's messages and next cursor from its runs. A sub-agent
// of the first page's header with no run there has no messages in it; a
// later page names only the sub-agents it has messages of.
func (e *Export) fill() {
	if d := e.Document; d != nil {
		d.Messages, d.NextCursor = []agent.Message{}, e.cursor()
		for _, a := range d.Agents {
			a.Messages = []agent.Message{}
		}
		for _, r := range e.runs {
			if r.Agent == "" {
				d.Messages = r.Messages
			} else {
				d.Agents[r.Agent].Messages = r.Messages
			}
		}
		return
	}
	p := e.Page
	p.First, p.Messages, p.Agents, p.NextCursor = nil, []agent.Message{}, nil, e.cursor()
	for _, r := range e.runs {
		at := r.First - r.offset
		if r.Agent == "" {
			p.First, p.Messages = &at, r.Messages
			continue
		}
		if p.Agents == nil {
			p.Agents = map[string]*AgentPart{}
		}
		p.Agents[r.Agent] = &AgentPart{First: &at, Messages: r.Messages}
	}
}

// Export reads a page of a session's document, from cursor, "" for the
// first. A later page of a session that changed since the first is
// ErrSessionChanged; a cursor that no page gave, ErrInvalidCursor. The
// document holds the conversations of the sub-agents that the agent has
// (its SubAgents) and that have messages stored.
func (s *Service) Export(ctx context.Context, owner, id, cursor string) (*Export, error) {
	version, from, err := exportCursor(cursor)
	if err != nil {
		return nil, err
	}
	ctx, cancel := StoreContext(ctx)
	defer cancel()
	key := ddbhistory.Key{Owner: owner, ID: id}
	x := &exporter{s: s, key: key, agents: s.subAgents(), version: version}
	if cursor != "" {
		e, err := x.page(ctx, from)
		if err != nil {
			return nil, err
		}
		e.Page = &DocumentPage{Format: DocumentFormat, FormatVersion: DocumentVersion, SessionID: id}
		e.fill()
		return e, nil
	}
	// The first page's reads must all see the session at one version: a
	// commit between them is read again.
	for attempt := 0; ; attempt++ {
		e, err := x.first(ctx)
		if !errors.Is(err, ErrSessionChanged) || attempt == 2 {
			return e, err
		}
		x.version, x.read = 0, nil
	}
}

// exporter reads the pages of one session's export.
type exporter struct {
	s       *Service
	key     ddbhistory.Key
	agents  []string
	version int64 // the session's; 0 until the first read, on a first page
	// read holds, on a first page, the first page of each sub-agent's
	// conversation, read for the header.
	read map[string]*ddbhistory.Page
}

// first reads the first page: the main agent's first messages and
// header, each sub-agent's header, and as many messages as the page
// holds.
func (x *exporter) first(ctx context.Context) (*Export, error) {
	main, err := x.transcript(ctx, exportPosition{offset: -1}, ddbhistory.MaxPageSize)
	if err != nil {
		return nil, err
	}
	x.read = make(map[string]*ddbhistory.Page, len(x.agents))
	pages := make([]*ddbhistory.Page, len(x.agents))
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(4)
	for i, name := range x.agents {
		g.Go(func() (err error) {
			pages[i], err = x.transcript(gctx, exportPosition{agent: name, offset: -1}, ddbhistory.MaxPageSize)
			return err
		})
	}
	if err := g.Wait(); err != nil {
		return nil, err
	}
	sess := main.Session
	d := &Document{
		Format:        DocumentFormat,
		FormatVersion: DocumentVersion,
		SessionID:     sess.ID,
		Title:         sess.Title,
		CreatedAt:     sess.CreatedAt.UTC(),
		UpdatedAt:     sess.UpdatedAt.UTC(),
		MessageCount:  sess.Count - main.First,
		State:         nonNilState(sess.Conversation.State),
		Window:        fromOffset(sess.Conversation.Window, main.First),
		Pending:       sess.Conversation.Pending,
	}
	if !sess.ExpiresAt.IsZero() {
		at := sess.ExpiresAt.UTC()
		d.ExpiresAt = &at
	}
	for i, name := range x.agents {
		p := pages[i]
		x.read[name] = p
		if len(p.Messages) == 0 {
			continue // nothing stored, or nothing left: see page
		}
		if d.Agents == nil {
			d.Agents = map[string]*AgentDocument{}
		}
		a := p.Agent.Conversation
		d.Agents[name] = &AgentDocument{MessageCount: p.Agent.Count - p.First, State: nonNilState(a.State), Window: fromOffset(a.Window, p.First)}
	}
	x.read[""] = main
	e, err := x.page(ctx, exportPosition{offset: -1})
	if err != nil {
		return nil, err
	}
	e.Document = d
	e.fill()
	return e, nil
}

// nonNilState is st, or an empty state, which JSON shows as {}.
func nonNilState(st map[string]json.RawMessage) map[string]json.RawMessage {
	if st == nil {
		return map[string]json.RawMessage{}
	}
	return st
}

// fromOffset is the window w of a conversation whose document begins at
// its stored message offset.
func fromOffset(w agent.WindowState, offset int) agent.WindowState {
	w.Removed = max(w.Removed-offset, 0)
	return w
}

// page reads the runs of the page that starts at from: its conversation's
// messages, then the next conversation's, and on, up to MaxPageSize
// messages.
func (x *exporter) page(ctx context.Context, from exportPosition) (*Export, error) {
	e := &Export{}
	budget := ddbhistory.MaxPageSize
	for pos := from; ; {
		limit := budget
		if pos.offset < 0 {
			limit = ddbhistory.MaxPageSize // the read that finds the offset: see first
		}
		p, err := x.transcript(ctx, pos, limit)
		if err != nil {
			return nil, err
		}
		start := pos.offset < 0
		if start {
			pos.offset = p.First
		}
		// A sub-agent whose first read finds no message has nothing in
		// the document, as its header says.
		if !start || pos.agent == "" || len(p.Messages) > 0 {
			take := min(budget, len(p.Messages))
			if take > 0 {
				e.runs = append(e.runs, exportRun{ExportRun{Agent: pos.agent, First: p.First, Messages: p.Messages[:take]}, pos.offset})
				budget -= take
			}
			switch {
			case take < len(p.Messages):
				e.next = exportPosition{agent: pos.agent, cursor: ddbhistory.CursorAt(p.First + take), offset: pos.offset}
			case p.NextCursor != "":
				e.next = exportPosition{agent: pos.agent, cursor: p.NextCursor, offset: pos.offset}
			}
			if take < len(p.Messages) || p.NextCursor != "" {
				break
			}
		}
		after := x.following(pos.agent)
		if after == "" {
			e.done = true
			break
		}
		if budget == 0 {
			// The page is full at the end of a conversation, and the
			// sub-agents after it may have nothing: the next page starts
			// with this page's last message, and so is never empty.
			last := &e.runs[len(e.runs)-1]
			n := len(last.Messages) - 1
			e.next = exportPosition{agent: last.Agent, cursor: ddbhistory.CursorAt(last.First + n), offset: last.offset}
			if last.Messages = last.Messages[:n]; n == 0 {
				e.runs = e.runs[:len(e.runs)-1]
			}
			break
		}
		pos = exportPosition{agent: after, offset: -1}
	}
	e.version = x.version
	return e, nil
}

// following is the sub-agent whose conversation comes after name's in the
// document ("" for the main agent's); "" after the last.
func (x *exporter) following(name string) string {
	for _, a := range x.agents {
		if a > name {
			return a
		}
	}
	return ""
}

// transcript reads the page of a conversation at p, limit messages,
// which must be of the session at the export's version; on a first
// page, the first page of a conversation is read once.
func (x *exporter) transcript(ctx context.Context, p exportPosition, limit int) (*ddbhistory.Page, error) {
	if page, ok := x.read[p.agent]; ok && p.cursor == "" {
		return page, nil
	}
	var (
		page *ddbhistory.Page
		err  error
	)
	if p.agent == "" {
		page, err = x.s.store.Transcript(ctx, x.key, p.cursor, limit)
	} else {
		page, err = x.s.store.AgentTranscript(ctx, x.key, p.agent, p.cursor, limit)
	}
	if err != nil {
		return nil, err
	}
	switch v := page.Session.Version; {
	case x.version == 0:
		x.version = v
	case v != x.version:
		return nil, ErrSessionChanged
	}
	return page, nil
}

// exportCursor reads an export's cursor (see Export.cursorOf); "" is the
// first page.
func exportCursor(c string) (version int64, from exportPosition, err error) {
	if c == "" {
		return 0, exportPosition{offset: -1}, nil
	}
	raw, err := base64.RawURLEncoding.DecodeString(c)
	parts := strings.SplitN(string(raw), ".", 4)
	if err == nil && len(parts) >= 3 && parts[2] != "" {
		version, err = strconv.ParseInt(parts[0], 10, 64)
		if err == nil {
			from.offset, err = strconv.Atoi(parts[1])
		}
		from.cursor = parts[2]
		if len(parts) == 4 {
			from.agent = parts[3]
		}
		if err == nil && version >= 1 && from.offset >= 0 && (len(parts) == 3 || agent.ValidToolName(from.agent) && from.agent != agent.MainAgent) {
			return version, from, nil
		}
	}
	return 0, exportPosition{}, fmt.Errorf("%w %q: pass the next_cursor of the previous page as it is", ErrInvalidCursor, c)
}
