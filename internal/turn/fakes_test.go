package turn_test

import (
	"bytes"
	"cmp"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/lambda-agent/lambda-agent/internal/agent"
	"github.com/lambda-agent/lambda-agent/internal/ddbhistory"
	"github.com/lambda-agent/lambda-agent/internal/turn"
)

// fakeStore keeps sessions in memory, with all that turn.Store promises of
// them, which the conformance suite (storetest) checks of it as of
// *ddbhistory.Store: version checks, holds on idempotency keys and their
// replays, checkpoints, rewinds, pending interrupts and their claims,
// transcript pages, lists, deletes, staged sessions, and owners. What it
// keeps goes through JSON, as the real store's does. Nothing in it
// expires: holds and claims last until they are released or committed.
//
// Its fields make a call fail, and say what happened.
type fakeStore struct {
	mu       sync.Mutex
	sessions map[ddbhistory.Key]*stored
	records  map[string]*record                  // by recordID(owner, key)
	holds    map[*ddbhistory.Hold]ddbhistory.Key // the session each hold was taken for
	claims   map[string]string                   // a session id's owner: ids are unique across owners
	stagings map[ddbhistory.Key]*staging         // new sessions staged and not yet committed
	seq      int                                 // counts the sessions created, for incarnations

	loadErr, beginErr, commitErr error
	// beforeCommit runs as a commit starts, as another writer might.
	beforeCommit func()
	released     []*ddbhistory.Hold
	// commits are the turns committed, in order.
	commits []ddbhistory.Turn
}

// stored is a session.
type stored struct {
	version  int64
	messages []agent.Message
	// written holds, for each message, the version whose commit wrote it,
	// so that a replay can tell that a rewind rewrote its turn.
	written  []int64
	state    map[string]json.RawMessage
	window   agent.WindowState
	pending  *agent.Pending
	resuming bool
	title    string
	created  time.Time
	updated  time.Time
	// incarnation tells the session from an earlier one under its key, and
	// orders the list: it counts the sessions the store created.
	incarnation int
	// agents are the sub-agents' conversations, by name.
	agents map[string]*storedAgent
}

// storedAgent is a sub-agent's conversation, and the session version
// whose commit last wrote it.
type storedAgent struct {
	messages []agent.Message
	window   agent.WindowState
	state    map[string]json.RawMessage
	pending  *agent.Pending
	written  int64
}

// record is an idempotency key's: a hold, or the turn it answered.
type record struct {
	fingerprint, sessionID string
	hold                   *ddbhistory.Hold // nil once committed
	response               json.RawMessage
	first, count           int
	incarnation            int   // of the session the turn went to
	written                int64 // the version the turn's commit made
}

// staging is a new session staged in parts.
type staging struct {
	token    string
	header   json.RawMessage
	title    string
	messages []agent.Message
	// agents are the messages staged for sub-agents, by name.
	agents map[string][]agent.Message
}

var _ turn.Store = (*fakeStore)(nil)

func newFakeStore() *fakeStore {
	return &fakeStore{
		sessions: map[ddbhistory.Key]*stored{},
		records:  map[string]*record{},
		holds:    map[*ddbhistory.Hold]ddbhistory.Key{},
		claims:   map[string]string{},
		stagings: map[ddbhistory.Key]*staging{},
	}
}

func recordID(owner, key string) string { return owner + "\x00" + key }

// copyOf returns a deep copy of v, through JSON, as a store that encodes
// what it keeps returns it.
func copyOf[T any](v T) T {
	raw, err := json.Marshal(v)
	if err != nil {
		panic(err) // what a turn stores always encodes
	}
	var out T
	if err := json.Unmarshal(raw, &out); err != nil {
		panic(err)
	}
	return out
}

func invalid(format string, args ...any) error {
	return &ddbhistory.ArgumentError{Reason: fmt.Sprintf(format, args...)}
}

// validKey refuses a key that cannot name a session, as ddbhistory does.
func validKey(k ddbhistory.Key) error {
	if k.Owner == "" || len(k.Owner) > ddbhistory.MaxOwnerBytes || !utf8.ValidString(k.Owner) || !ddbhistory.ValidID(k.ID) {
		return invalid("session key %q of %q", k.ID, k.Owner)
	}
	return nil
}

// live returns key's session, or the error a read of it gets: ErrNotFound,
// and ErrIDTaken too when another owner holds the id.
func (f *fakeStore) live(key ddbhistory.Key) (*stored, error) {
	if st := f.sessions[key]; st != nil {
		return st, nil
	}
	if owner, ok := f.claims[key.ID]; ok && owner != key.Owner {
		return nil, fmt.Errorf("%w: %w", ddbhistory.ErrNotFound, ddbhistory.ErrIDTaken)
	}
	return nil, ddbhistory.ErrNotFound
}

// session returns st as a Session of key, without its messages.
func (st *stored) session(key ddbhistory.Key) *ddbhistory.Session {
	sess := ddbhistory.NewSession(key)
	sess.Version, sess.Count = st.version, len(st.messages)
	sess.Conversation = agent.Conversation{State: copyOf(st.state), Window: st.window, Pending: copyOf(st.pending)}
	sess.Title, sess.CreatedAt, sess.UpdatedAt, sess.Resuming = st.title, st.created, st.updated, st.resuming
	return sess
}

// rewound reports whether a rewind since r's turn discarded or rewrote any
// of its messages.
func (st *stored) rewound(r *record) bool {
	if r.first+r.count > len(st.messages) {
		return true
	}
	for _, v := range st.written[r.first : r.first+r.count] {
		if v > r.written {
			return true
		}
	}
	return false
}

func (f *fakeStore) Load(_ context.Context, key ddbhistory.Key, idemKey string) (*ddbhistory.Session, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.loadErr != nil {
		return nil, f.loadErr
	}
	if err := validKey(key); err != nil {
		return nil, err
	}
	st, err := f.live(key)
	if err != nil {
		return nil, err
	}
	sess := st.session(key)
	sess.Conversation.Messages = copyOf(st.messages[st.window.Removed:])
	if r := f.records[recordID(key.Owner, idemKey)]; idemKey != "" && r != nil && r.hold == nil {
		sess.Replay = &ddbhistory.Replay{Fingerprint: r.fingerprint, SessionID: r.sessionID}
		if r.sessionID == key.ID && r.incarnation == st.incarnation && !st.rewound(r) {
			sess.Replay.Response, sess.Replay.First, sess.Replay.Count = bytes.Clone(r.response), r.first, r.count
		}
	}
	return sess, nil
}

func (f *fakeStore) LoadAgent(_ context.Context, sess *ddbhistory.Session, name string) (*ddbhistory.AgentConversation, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := validKey(sess.Key); err != nil {
		return nil, err
	}
	if err := validAgentName(name); err != nil {
		return nil, err
	}
	out := &ddbhistory.AgentConversation{Name: name}
	st := f.sessions[sess.Key]
	if sess.Version == 0 || st == nil || st.agents[name] == nil {
		return out, nil
	}
	a := st.agents[name]
	if a.written > sess.Version {
		return nil, ddbhistory.ErrConflict
	}
	out.Count = len(a.messages)
	out.Conversation = agent.Conversation{Messages: copyOf(a.messages[a.window.Removed:]), Window: a.window, State: copyOf(a.state), Pending: copyOf(a.pending)}
	return out, nil
}

// validAgentName refuses the names ddbhistory refuses.
func validAgentName(name string) error {
	if !agent.ValidToolName(name) || name == agent.MainAgent {
		return invalid("agent name %q", name)
	}
	return nil
}

func (f *fakeStore) Begin(_ context.Context, sess *ddbhistory.Session, key, fp string) (*ddbhistory.Hold, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.beginErr != nil {
		return nil, f.beginErr
	}
	if err := validKey(sess.Key); err != nil {
		return nil, err
	}
	if key == "" {
		return nil, invalid("no idempotency key")
	}
	if r := f.records[recordID(sess.Owner, key)]; r != nil {
		return nil, &ddbhistory.KeyInUseError{Fingerprint: r.fingerprint, Committed: r.hold == nil}
	}
	h := &ddbhistory.Hold{Key: key, Fingerprint: fp}
	f.records[recordID(sess.Owner, key)] = &record{fingerprint: fp, sessionID: sess.ID, hold: h}
	f.holds[h] = sess.Key
	return h, nil
}

func (f *fakeStore) Release(_ context.Context, h *ddbhistory.Hold) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.released = append(f.released, h)
	for id, r := range f.records {
		if h != nil && r.hold == h {
			delete(f.records, id)
		}
	}
	return nil
}

// checkTurn refuses the turns that ddbhistory refuses as arguments.
func (f *fakeStore) checkTurn(sess *ddbhistory.Session, t ddbhistory.Turn) error {
	if err := validKey(sess.Key); err != nil {
		return err
	}
	if t.Hold != nil && f.holds[t.Hold] != sess.Key {
		return invalid("the idempotency key %q was not held for session %s", t.Hold.Key, sess.ID)
	}
	if t.Rewind && (t.From < 0 || t.From > sess.Count || t.Earlier != 0 || t.Resuming) {
		return invalid("rewind to message %d of %d", t.From, sess.Count)
	}
	if st := t.Staging; st != nil && (sess.Version != 0 || st.Token == "" || st.Count < 0 || t.Rewind || t.Earlier != 0 || t.Resuming) {
		return invalid("staging %q is for a new session's first commit", st.Token)
	}
	if count := t.First(sess) + len(t.Messages); t.Window.Removed < 0 || t.Window.Removed > count {
		return invalid("window starts at message %d of %d", t.Window.Removed, count)
	}
	if t.Earlier < 0 || t.Earlier > sess.Count {
		return invalid("%d earlier messages of %d", t.Earlier, sess.Count)
	}
	if t.Resuming && !sess.Resuming {
		return invalid("session %s has no claim to keep", sess.ID)
	}
	seen := map[string]bool{}
	for _, at := range t.Agents {
		if err := validAgentName(at.Name); err != nil {
			return err
		}
		staged := 0 // the messages of a new session's are staged ones
		if t.Staging != nil {
			staged = t.Staging.Agents[at.Name].Count
		}
		if count := at.First + len(at.Messages); seen[at.Name] || at.First < 0 || sess.Version == 0 && at.First != staged || at.Window.Removed < 0 || at.Window.Removed > count {
			return invalid("agent %s's turn", at.Name)
		}
		seen[at.Name] = true
	}
	return nil
}

func (f *fakeStore) Commit(ctx context.Context, sess *ddbhistory.Session, t ddbhistory.Turn) error {
	if f.beforeCommit != nil {
		f.beforeCommit()
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.commitErr != nil && !errorsIsUnknown(f.commitErr) {
		return f.commitErr
	}
	if err := f.checkTurn(sess, t); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	st := f.sessions[sess.Key]
	var staged *staging
	switch {
	case t.Staging != nil:
		staged = f.stagings[sess.Key]
		if st != nil || staged == nil || staged.token != t.Staging.Token || len(staged.messages) != t.Staging.Count {
			return ddbhistory.ErrConflict
		}
		for _, at := range t.Agents {
			if len(staged.agents[at.Name]) != t.Staging.Agents[at.Name].Count {
				return ddbhistory.ErrConflict // the staging is not as it was read
			}
		}
	case sess.Version == 0 && st != nil, sess.Version != 0 && (st == nil || st.version != sess.Version):
		return ddbhistory.ErrConflict
	}
	if owner, ok := f.claims[sess.ID]; ok && owner != sess.Owner {
		return ddbhistory.ErrNotFound // another owner's id
	}
	r := (*record)(nil)
	if t.Hold != nil {
		if r = f.records[recordID(sess.Owner, t.Hold.Key)]; r != nil && r.hold != t.Hold {
			return ddbhistory.ErrConflict // the key is another request's
		}
	}

	// The turn lands.
	now := time.Now()
	first := t.First(sess)
	if st == nil {
		f.seq++
		st = &stored{incarnation: f.seq, created: now, title: titleOf(t.Messages)}
		if staged != nil {
			st.title, st.messages = staged.title, staged.messages
			st.written = slices.Repeat([]int64{1}, len(staged.messages))
			// A sub-agent's staged messages come before its turn's, which
			// makes them visible; others stay staged, unseen.
			for _, at := range t.Agents {
				if msgs := staged.agents[at.Name]; len(msgs) > 0 {
					if st.agents == nil {
						st.agents = map[string]*storedAgent{}
					}
					st.agents[at.Name] = &storedAgent{messages: msgs}
				}
			}
		}
		delete(f.stagings, sess.Key) // a session replaces a staging under its key
		f.sessions[sess.Key] = st
		f.claims[sess.ID] = sess.Owner
	} else if first == 0 {
		st.title = titleOf(t.Messages) // every message replaced
	}
	st.version++
	st.messages = append(st.messages[:first:first], copyOf(t.Messages)...)
	st.written = append(st.written[:first:first], slices.Repeat([]int64{st.version}, len(t.Messages))...)
	st.state, st.window, st.pending, st.resuming = copyOf(t.State), t.Window, copyOf(t.Pending), t.Resuming
	st.updated = now
	for _, at := range t.Agents {
		if st.agents == nil {
			st.agents = map[string]*storedAgent{}
		}
		a := st.agents[at.Name]
		if a == nil {
			a = &storedAgent{}
			st.agents[at.Name] = a
		}
		first := min(at.First, len(a.messages)) // as ddbhistory, which overwrites from First on
		a.messages = append(a.messages[:first:first], copyOf(at.Messages)...)
		a.window, a.state, a.pending, a.written = at.Window, copyOf(at.State), copyOf(at.Pending), st.version
	}
	if t.Hold != nil {
		if r == nil {
			r = &record{}
			f.records[recordID(sess.Owner, t.Hold.Key)] = r
		}
		*r = record{
			fingerprint: t.Hold.Fingerprint, sessionID: sess.ID, response: bytes.Clone(t.Response),
			first: first - t.Earlier, count: t.Earlier + len(t.Messages), incarnation: st.incarnation, written: st.version,
		}
	}
	f.commits = append(f.commits, t)

	// The session moves on, as ddbhistory's does: without its messages.
	sess.Version, sess.Count = st.version, len(st.messages)
	conv := &sess.Conversation // what the caller brought stays, as in ddbhistory
	conv.Messages, conv.Window, conv.State, conv.Pending = nil, t.Window, t.State, t.Pending
	sess.Resuming, sess.Title, sess.CreatedAt, sess.UpdatedAt, sess.Replay = t.Resuming, st.title, st.created, st.updated, nil
	return f.commitErr // an unknown outcome that in fact landed
}

func (f *fakeStore) ClaimPending(_ context.Context, sess *ddbhistory.Session) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := validKey(sess.Key); err != nil {
		return err
	}
	if sess.Version == 0 || sess.Conversation.Pending == nil {
		return invalid("session %s has no pending interrupts", sess.ID)
	}
	st := f.sessions[sess.Key]
	if st == nil || st.version != sess.Version || st.pending == nil || st.resuming {
		return ddbhistory.ErrConflict
	}
	st.version++
	st.resuming = true
	sess.Version, sess.Resuming = st.version, true
	return nil
}

func (f *fakeStore) ReleaseClaim(_ context.Context, sess *ddbhistory.Session) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := validKey(sess.Key); err != nil {
		return err
	}
	if !sess.Resuming {
		return nil
	}
	if st := f.sessions[sess.Key]; st != nil && st.version == sess.Version {
		st.resuming = false
	}
	sess.Resuming = false
	return nil
}

func (f *fakeStore) Transcript(_ context.Context, key ddbhistory.Key, cursor string, limit int) (*ddbhistory.Page, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	st, from, err := f.pageOf(key, cursor, limit)
	if err != nil {
		return nil, err
	}
	page := &ddbhistory.Page{Session: st.session(key), First: from}
	page.Messages, page.NextCursor = pageFrom(st.messages, from, limit)
	return page, nil
}

func (f *fakeStore) AgentTranscript(_ context.Context, key ddbhistory.Key, name, cursor string, limit int) (*ddbhistory.Page, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := validAgentName(name); err != nil {
		return nil, err
	}
	st, from, err := f.pageOf(key, cursor, limit)
	if err != nil {
		return nil, err
	}
	page := &ddbhistory.Page{Session: st.session(key), First: from, Agent: &ddbhistory.AgentConversation{Name: name}}
	a := st.agents[name]
	if a == nil {
		return page, nil
	}
	page.Agent.Count = len(a.messages)
	page.Agent.Conversation = agent.Conversation{Window: a.window, State: copyOf(a.state)}
	page.Messages, page.NextCursor = pageFrom(a.messages, from, limit)
	return page, nil
}

// pageOf checks a transcript page's arguments, as ddbhistory does, and
// returns the session and the index the page starts at. f.mu is held.
func (f *fakeStore) pageOf(key ddbhistory.Key, cursor string, limit int) (*stored, int, error) {
	if err := validKey(key); err != nil {
		return nil, 0, err
	}
	if limit < 1 || limit > ddbhistory.MaxPageSize {
		return nil, 0, invalid("limit %d is not between 1 and %d", limit, ddbhistory.MaxPageSize)
	}
	from, err := cursorIndex(cursor)
	if err != nil {
		return nil, 0, err
	}
	st := f.sessions[key]
	if st == nil {
		return nil, 0, ddbhistory.ErrNotFound
	}
	return st, from, nil
}

// pageFrom returns the messages of a page of msgs from index from, at most
// limit, and the cursor of the next page.
func pageFrom(msgs []agent.Message, from, limit int) ([]agent.Message, string) {
	end := min(from+limit, len(msgs))
	if from >= end {
		return nil, ""
	}
	next := ""
	if end < len(msgs) {
		next = ddbhistory.CursorAt(end)
	}
	return copyOf(msgs[from:end]), next
}

func (f *fakeStore) Tail(ctx context.Context, key ddbhistory.Key, n int) (*ddbhistory.Page, error) {
	if n < 1 || n > ddbhistory.MaxPageSize {
		return nil, invalid("n %d is not between 1 and %d", n, ddbhistory.MaxPageSize)
	}
	f.mu.Lock()
	st := f.sessions[key]
	f.mu.Unlock()
	from := 0
	if st != nil {
		from = max(len(st.messages)-n, 0)
	}
	return f.Transcript(ctx, key, ddbhistory.CursorAt(from), n)
}

// cursorIndex returns the index of the message a transcript cursor starts
// at: the cursors are ddbhistory.CursorAt's, which the service makes too.
func cursorIndex(cursor string) (int, error) {
	if cursor == "" {
		return 0, nil
	}
	raw, err := base64.RawURLEncoding.DecodeString(cursor)
	if err == nil {
		if i, err := strconv.Atoi(string(raw)); err == nil && i >= 0 && ddbhistory.CursorAt(i) == cursor {
			return i, nil
		}
	}
	return 0, invalid("malformed cursor %q", cursor)
}

func (f *fakeStore) WindowBefore(_ context.Context, sess *ddbhistory.Session, from, to int) ([]agent.Message, int, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := validKey(sess.Key); err != nil {
		return nil, 0, err
	}
	if from < 0 || from > to || to > sess.Count {
		return nil, 0, invalid("messages %d to %d of %d", from, to, sess.Count)
	}
	st := f.sessions[sess.Key]
	if from == to || st == nil || to > len(st.messages) {
		return nil, to, nil // nothing, or a session moved on, whose commit will conflict
	}
	return copyOf(st.messages[from:to]), from, nil
}

func (f *fakeStore) List(_ context.Context, owner, cursor string, limit int) (*ddbhistory.SessionList, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := validKey(ddbhistory.Key{Owner: owner, ID: "x"}); err != nil {
		return nil, err
	}
	if limit < 1 || limit > ddbhistory.MaxListSize {
		return nil, invalid("limit %d is not between 1 and %d", limit, ddbhistory.MaxListSize)
	}
	before := math.MaxInt
	if cursor != "" {
		var ok bool
		if before, ok = listCursor(cursor, owner); !ok {
			return nil, invalid("malformed cursor %q", cursor)
		}
	}
	type listed struct {
		id string
		st *stored
	}
	var all []listed
	for key, st := range f.sessions {
		if key.Owner == owner && st.incarnation < before {
			all = append(all, listed{key.ID, st})
		}
	}
	slices.SortFunc(all, func(a, b listed) int { return cmp.Compare(b.st.incarnation, a.st.incarnation) })
	list := &ddbhistory.SessionList{Sessions: []ddbhistory.Summary{}}
	for i, l := range all {
		if i == limit {
			last := all[limit-1].st.incarnation
			list.NextCursor = base64.RawURLEncoding.EncodeToString([]byte(owner + "\x00" + strconv.Itoa(last)))
			break
		}
		list.Sessions = append(list.Sessions, ddbhistory.Summary{ID: l.id, Title: l.st.title, CreatedAt: l.st.created})
	}
	return list, nil
}

// listCursor reads a cursor of owner's list: the owner, and the
// incarnation of the last session of the page before, which newer sessions
// come before.
func listCursor(cursor, owner string) (int, bool) {
	raw, err := base64.RawURLEncoding.DecodeString(cursor)
	mine, n, cut := strings.Cut(string(raw), "\x00")
	i, errN := strconv.Atoi(n)
	return i, err == nil && cut && mine == owner && errN == nil && i > 0
}

func (f *fakeStore) Delete(_ context.Context, key ddbhistory.Key) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := validKey(key); err != nil {
		return err
	}
	delete(f.stagings, key)
	if f.sessions[key] == nil {
		return ddbhistory.ErrNotFound
	}
	// The key's records stay, spent: their responses went with the
	// session, whose incarnation no later session has.
	delete(f.sessions, key)
	if f.claims[key.ID] == key.Owner {
		delete(f.claims, key.ID)
	}
	return nil
}

func (f *fakeStore) Stage(_ context.Context, key ddbhistory.Key, token string, first int, msgs []agent.Message, header json.RawMessage) (*ddbhistory.Staging, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := validKey(key); err != nil {
		return nil, err
	}
	if token == "" || first < 0 || len(msgs) == 0 {
		return nil, invalid("staging %q: messages %d to %d", token, first, first+len(msgs))
	}
	if first == 0 {
		if _, err := f.live(key); err == nil {
			return nil, ddbhistory.ErrConflict // a session holds the key
		} else if errors.Is(err, ddbhistory.ErrIDTaken) {
			return nil, err
		}
		// A new staging replaces the one before it.
		f.stagings[key] = &staging{token: token, header: bytes.Clone(header), title: titleOf(msgs)}
	}
	sg := f.stagings[key]
	switch {
	case sg == nil || sg.token != token:
		return nil, ddbhistory.ErrNotFound
	case len(sg.messages) < first:
		return nil, fmt.Errorf("%w: %d messages are staged, and a part starts at %d", ddbhistory.ErrConflict, len(sg.messages), first)
	}
	// A part sent again goes on from where the staging is.
	if at := len(sg.messages); at < first+len(msgs) {
		sg.messages = append(sg.messages, copyOf(msgs[at-first:])...)
	}
	return sg.staging(), nil
}

func (f *fakeStore) StageAgent(_ context.Context, key ddbhistory.Key, token, name string, first int, msgs []agent.Message) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := validKey(key); err != nil {
		return err
	}
	if err := validAgentName(name); err != nil {
		return err
	}
	if token == "" || first < 0 || len(msgs) == 0 {
		return invalid("staging %q: agent %s's messages %d to %d", token, name, first, first+len(msgs))
	}
	sg := f.stagings[key]
	switch {
	case sg == nil || sg.token != token:
		return ddbhistory.ErrNotFound
	case len(sg.agents[name]) != first:
		return fmt.Errorf("%w: %d messages of agent %s are staged, and a part starts at %d", ddbhistory.ErrConflict, len(sg.agents[name]), name, first)
	}
	if sg.agents == nil {
		sg.agents = map[string][]agent.Message{}
	}
	sg.agents[name] = append(sg.agents[name], copyOf(msgs)...)
	return nil
}

func (f *fakeStore) Staged(_ context.Context, key ddbhistory.Key, token string) (*ddbhistory.Staging, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := validKey(key); err != nil {
		return nil, err
	}
	sg := f.stagings[key]
	if sg == nil || token == "" || sg.token != token {
		return nil, ddbhistory.ErrNotFound
	}
	return sg.staging(), nil
}

// staging returns sg as Stage and Staged answer it.
func (sg *staging) staging() *ddbhistory.Staging {
	st := &ddbhistory.Staging{Token: sg.token, Count: len(sg.messages), Header: bytes.Clone(sg.header), Title: sg.title}
	if n := len(sg.messages); n > 0 {
		last := copyOf(sg.messages[n-1])
		st.Last = &last
	}
	for name, msgs := range sg.agents {
		if st.Agents == nil {
			st.Agents = map[string]ddbhistory.StagedAgent{}
		}
		last := copyOf(msgs[len(msgs)-1])
		st.Agents[name] = ddbhistory.StagedAgent{Count: len(msgs), Last: &last}
	}
	return st
}

// titleOf is a session's title, by ddbhistory's rule: the start of the
// first text of its first message, on one line, at most 80 runes.
func titleOf(msgs []agent.Message) string {
	if len(msgs) == 0 {
		return ""
	}
	for _, b := range msgs[0].Content {
		if b.Text == "" {
			continue
		}
		t := []rune(strings.Join(strings.FieldsFunc(b.Text, unicode.IsSpace), " "))
		if len(t) <= 80 {
			return string(t)
		}
		return strings.TrimSpace(string(t[:79])) + "…"
	}
	return ""
}

// fakeAgent answers every turn with its text, or fails with err. It adds
// to the agent state, so commits can be told apart. Its other fields
// script the rest of what an agent does: a turn that pauses for a person,
// the answering of the pause, the rest of the turn, and direct tool calls,
// each as *agent.Agent shapes its results.
type fakeAgent struct {
	mu    sync.Mutex
	err   error
	runs  int
	block chan struct{} // when set, a run waits for it (or its context)

	// text, when set, is the text of a run's answer, in place of "re: "
	// and the input's text.
	text string
	// given are the conversations that runs were given, in order.
	given []agent.Conversation
	// pause, when set, makes a run stop for these interrupts: its answer
	// holds a tool use for each, and one more, "kept", which ran at once.
	pause []agent.Interrupt
	// answerErr and continueErr make Answer and Continue fail.
	answerErr, continueErr error
	// ran lists the tools that Answer ran, in order; continued the last
	// message of each conversation that Continue was given.
	ran       []string
	continued []agent.Message
}

var _ turn.Agent = (*fakeAgent)(nil)

func (a *fakeAgent) result(ctx context.Context, conv *agent.Conversation, input []agent.ContentBlock) (*agent.Result, error) {
	a.mu.Lock()
	a.runs++
	given := *conv
	given.Messages = slices.Clone(conv.Messages)
	a.given = append(a.given, given)
	err, block, pause, text := a.err, a.block, a.pause, cmp.Or(a.text, "re: "+input[0].Text)
	a.mu.Unlock()
	if block != nil {
		select {
		case <-block:
		case <-ctx.Done():
			return nil, agent.ErrDeadline
		}
	}
	if err != nil {
		return nil, err
	}
	res := &agent.Result{
		Messages:   []agent.Message{{Role: agent.RoleUser, Content: input}, agent.AssistantText(text)},
		Text:       text,
		StopReason: agent.StopEndTurn,
		Usage:      agent.Usage{InputTokens: 10, OutputTokens: 2},
		Window:     conv.Window,
		State:      map[string]json.RawMessage{"turns": json.RawMessage(`1`)},
	}
	if pause != nil {
		var uses []agent.ContentBlock
		for _, in := range pause {
			uses = append(uses, agent.ContentBlock{ToolUse: &agent.ToolUseBlock{ToolUseID: in.ID, Name: in.Tool, Input: in.Input}})
		}
		uses = append(uses, agent.ContentBlock{ToolUse: &agent.ToolUseBlock{ToolUseID: "kept", Name: "lookup", Input: json.RawMessage(`{}`)}})
		res.Messages[1] = agent.Message{Role: agent.RoleAssistant, Content: uses}
		res.Text, res.StopReason = "", agent.StopInterrupt
		res.Pending = &agent.Pending{Interrupts: pause, Results: []*agent.ToolResultBlock{agent.TextResult("kept", agent.ToolSuccess, "looked up")}}
	}
	return res, nil
}

func (a *fakeAgent) Run(ctx context.Context, conv *agent.Conversation, input []agent.ContentBlock) (*agent.Result, error) {
	return a.result(ctx, conv, input)
}

func (a *fakeAgent) Stream(ctx context.Context, conv *agent.Conversation, input []agent.ContentBlock, emit func(agent.Event)) (*agent.Result, error) {
	res, err := a.result(ctx, conv, input)
	if err == nil {
		emit(agent.Event{Text: res.Text})
	}
	return res, err
}

func (a *fakeAgent) Structured(ctx context.Context, conv *agent.Conversation, req agent.StructuredRequest) (*agent.StructuredResult, error) {
	res, err := a.result(ctx, conv, req.Prompt)
	if err != nil {
		return nil, err
	}
	return &agent.StructuredResult{Result: *res, Data: json.RawMessage(`{"ok":true}`), Attempts: 1}, nil
}

func (a *fakeAgent) calls() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.runs
}

// Answer answers the tool uses of conv's last message, as *agent.Agent's
// does, in one user message: a kept result as it is, an approved use with
// its tool's run, any other with a denial. It calls no model.
func (a *fakeAgent) Answer(_ context.Context, conv *agent.Conversation, responses []agent.Response, emit func(agent.Event)) (*agent.Result, error) {
	n := len(conv.Messages)
	if conv.Pending == nil || n == 0 || conv.Messages[n-1].Role != agent.RoleAssistant {
		return nil, agent.ErrNothingPending
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.answerErr != nil {
		return nil, a.answerErr
	}
	approved := map[string]bool{}
	for _, r := range responses {
		approved[r.InterruptID] = r.Approve != nil && *r.Approve
	}
	kept := map[string]*agent.ToolResultBlock{}
	for _, r := range conv.Pending.Results {
		kept[r.ToolUseID] = r
	}
	m := agent.Message{Role: agent.RoleUser}
	var metrics agent.Metrics
	for _, u := range conv.Messages[n-1].ToolUses() {
		r := kept[u.ToolUseID]
		switch {
		case r != nil:
		case approved[u.ToolUseID]:
			a.ran = append(a.ran, u.Name)
			metrics.ToolCalls++
			metrics.Tools = append(metrics.Tools, agent.ToolRun{Name: u.Name})
			r = agent.TextResult(u.ToolUseID, agent.ToolSuccess, "ran "+u.Name)
		default:
			r = agent.TextResult(u.ToolUseID, agent.ToolError, "denied")
		}
		m.Content = append(m.Content, agent.ContentBlock{ToolResult: r})
		if emit != nil {
			emit(agent.Event{ToolResult: r})
		}
	}
	state := maps.Clone(conv.State)
	if state == nil {
		state = map[string]json.RawMessage{}
	}
	state["answered"] = json.RawMessage(`true`)
	return &agent.Result{Messages: []agent.Message{m}, StopReason: agent.StopToolUse, Window: conv.Window, State: state, Metrics: metrics}, nil
}

// Continue answers a conversation that ends with a user message, such as
// the one Answer made, with one assistant message that counts its blocks.
func (a *fakeAgent) Continue(_ context.Context, conv *agent.Conversation, emit func(agent.Event)) (*agent.Result, error) {
	n := len(conv.Messages)
	if n == 0 || conv.Messages[n-1].Role != agent.RoleUser {
		return nil, errors.New("fakeAgent: Continue needs a conversation that ends with a user message")
	}
	a.mu.Lock()
	a.continued = append(a.continued, conv.Messages[n-1])
	err := a.continueErr
	a.mu.Unlock()
	if err != nil {
		return nil, err
	}
	text := fmt.Sprintf("done, after %d results", len(conv.Messages[n-1].Content))
	if emit != nil {
		emit(agent.Event{Text: text})
	}
	return &agent.Result{
		Messages:   []agent.Message{agent.AssistantText(text)},
		Text:       text,
		StopReason: agent.StopEndTurn,
		Usage:      agent.Usage{InputTokens: 20, OutputTokens: 4},
		Metrics:    agent.Metrics{Cycles: 1, ModelCalls: 1},
		Window:     conv.Window,
		State:      conv.State,
	}, nil
}

// CallTool runs a tool directly, as *agent.Agent's does: the tool changes
// the agent state, and with Record the call is four messages, the person's
// note, the tool use, its result and the assistant's note.
func (a *fakeAgent) CallTool(_ context.Context, conv *agent.Conversation, call agent.DirectCall) (*agent.DirectResult, error) {
	a.mu.Lock()
	a.runs++
	err := a.err
	a.mu.Unlock()
	if err != nil {
		return nil, err
	}
	use := &agent.ToolUseBlock{ToolUseID: "direct_1", Name: call.Name, Input: call.Input}
	out := agent.TextResult(use.ToolUseID, agent.ToolSuccess, "called "+call.Name)
	state := maps.Clone(conv.State)
	if state == nil {
		state = map[string]json.RawMessage{}
	}
	state["called:"+call.Name] = json.RawMessage(`true`)
	res := agent.Result{
		StopReason: agent.StopEndTurn,
		Metrics:    agent.Metrics{ToolCalls: 1, Tools: []agent.ToolRun{{Name: call.Name}}},
		Window:     conv.Window,
		State:      state,
	}
	if call.Record {
		res.Messages = []agent.Message{
			agent.UserText("[I called the tool " + call.Name + " myself]"),
			{Role: agent.RoleAssistant, Content: []agent.ContentBlock{{ToolUse: use}}},
			{Role: agent.RoleUser, Content: []agent.ContentBlock{{ToolResult: out}}},
			agent.AssistantText("[The tool " + call.Name + " was called directly]"),
		}
	}
	return &agent.DirectResult{Result: res, Use: use, Output: out}, nil
}

func (a *fakeAgent) CheckClientTools(context.Context, *agent.ClientTools) error { return nil }

// Cancel denies what waits, as Answer does without responses, and ends
// the turn with a note.
func (a *fakeAgent) Cancel(ctx context.Context, conv *agent.Conversation) (*agent.Result, error) {
	res, err := a.Answer(ctx, conv, nil, nil)
	if err != nil {
		return nil, err
	}
	res.Messages = append(res.Messages, agent.AssistantText("canceled"))
	res.Text, res.StopReason, res.Pending = "canceled", agent.StopEndTurn, nil
	return res, nil
}
