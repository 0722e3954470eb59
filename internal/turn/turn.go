package turn

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/lambda-agent/lambda-agent/internal/agent"
	"github.com/lambda-agent/lambda-agent/internal/ddbhistory"
	"github.com/lambda-agent/lambda-agent/internal/pricing"
)

// Store is the session store, as a turn uses it. *ddbhistory.Store
// implements it, and its errors are the ddbhistory sentinels and types. It
// must be safe for concurrent use; a Session and a Hold are used by one turn
// at a time.
type Store interface {
	// Load reads a session and, with an idempotency key, what the key
	// recorded (Session.Replay).
	Load(ctx context.Context, key ddbhistory.Key, idempotencyKey string) (*ddbhistory.Session, error)
	// LoadAgent reads the conversation sess keeps for a sub-agent, when a
	// turn first delegates to it.
	LoadAgent(ctx context.Context, sess *ddbhistory.Session, name string) (*ddbhistory.AgentConversation, error)
	// Begin holds an idempotency key for the turn about to run on sess.
	Begin(ctx context.Context, sess *ddbhistory.Session, idempotencyKey, fingerprint string) (*ddbhistory.Hold, error)
	// Commit stores a turn, replacing its hold with the key's record,
	// and moves sess on to it, leaving what the caller set on its
	// conversation that the store does not keep.
	Commit(ctx context.Context, sess *ddbhistory.Session, turn ddbhistory.Turn) error
	// Release frees the hold of a turn that did not commit.
	Release(ctx context.Context, hold *ddbhistory.Hold) error
	// ClaimPending claims a session's pending interrupts for the request
	// that resumes them; ReleaseClaim ends the claim of a resume that
	// failed.
	ClaimPending(ctx context.Context, sess *ddbhistory.Session) error
	ReleaseClaim(ctx context.Context, sess *ddbhistory.Session) error
	// Transcript reads stored messages, which a replayed chat answer
	// carries.
	Transcript(ctx context.Context, key ddbhistory.Key, cursor string, limit int) (*ddbhistory.Page, error)
	// Tail reads a session's last n messages, at most.
	Tail(ctx context.Context, key ddbhistory.Key, n int) (*ddbhistory.Page, error)
	// AgentTranscript reads stored messages of a sub-agent's conversation.
	AgentTranscript(ctx context.Context, key ddbhistory.Key, name, cursor string, limit int) (*ddbhistory.Page, error)
	// WindowBefore reads the window a rewind restarts with, when it
	// discards messages a summary covered.
	WindowBefore(ctx context.Context, sess *ddbhistory.Session, from, to int) ([]agent.Message, int, error)
	// List lists an owner's sessions, and Delete deletes one.
	List(ctx context.Context, owner, cursor string, limit int) (*ddbhistory.SessionList, error)
	Delete(ctx context.Context, key ddbhistory.Key) error
	// Stage and Staged keep the pages of an import in pages, where no
	// reader looks, until the commit of its last makes them visible.
	Stage(ctx context.Context, key ddbhistory.Key, token string, first int, msgs []agent.Message, header json.RawMessage) (*ddbhistory.Staging, error)
	Staged(ctx context.Context, key ddbhistory.Key, token string) (*ddbhistory.Staging, error)
	// StageAgent keeps a staged session's messages of a sub-agent's
	// conversation, as Stage keeps its own.
	StageAgent(ctx context.Context, key ddbhistory.Key, token, name string, first int, msgs []agent.Message) error
}

// Agent runs turns. *agent.Agent implements it. It must be safe for
// concurrent use and leave the Conversation it is given unchanged; its
// errors are the agent's sentinels and types.
type Agent interface {
	Run(ctx context.Context, conv *agent.Conversation, input []agent.ContentBlock) (*agent.Result, error)
	Stream(ctx context.Context, conv *agent.Conversation, input []agent.ContentBlock, emit func(agent.Event)) (*agent.Result, error)
	Structured(ctx context.Context, conv *agent.Conversation, req agent.StructuredRequest) (*agent.StructuredResult, error)
	Answer(ctx context.Context, conv *agent.Conversation, responses []agent.Response, emit func(agent.Event)) (*agent.Result, error)
	Continue(ctx context.Context, conv *agent.Conversation, emit func(agent.Event)) (*agent.Result, error)
	Cancel(ctx context.Context, conv *agent.Conversation) (*agent.Result, error)
	CallTool(ctx context.Context, conv *agent.Conversation, call agent.DirectCall) (*agent.DirectResult, error)
	// CheckClientTools refuses client tools named like the agent's own.
	CheckClientTools(ctx context.Context, tools *agent.ClientTools) error
}

var (
	_ Store = (*ddbhistory.Store)(nil)
	_ Agent = (*agent.Agent)(nil)
)

// Errors of a turn that the service itself decides. The agent's and the
// store's errors come through as they are.
var (
	// ErrKeyReused is an idempotency key sent again with another request,
	// or for another session.
	ErrKeyReused = errors.New("the idempotency key was used for a different request")
	// ErrInProgress is an idempotency key held by a request that is still
	// running. The error also matches ddbhistory.ErrKeyInUse.
	ErrInProgress = errors.New("a request with the idempotency key is still running")
	// ErrReplayGone is a retry of a committed request whose session has
	// been deleted since, and its answer with it, or rewound past its turn.
	ErrReplayGone = errors.New("the request with the idempotency key was answered, but its session has been deleted or rewound past it since")
	// ErrInterruptPending is a message or a structured prompt for a session
	// whose last turn waits for a person; the error is a *PendingError.
	ErrInterruptPending = errors.New("the session's last turn waits for responses to its interrupts")
	// ErrResuming is a turn on a session whose interrupts another request
	// is answering (see ddbhistory.Store.ClaimPending).
	ErrResuming = errors.New("another request is resuming the session's interrupted turn")
	// ErrNothingPending is a response to interrupts for a session that has
	// none pending.
	ErrNothingPending = errors.New("the session has no pending interrupts")
	// ErrInvalidRequest is a turn the service refuses before it runs for
	// what the request brings, such as client tools named like the
	// agent's own.
	ErrInvalidRequest = errors.New("invalid request")
)

// PendingError lists the interrupts a session waits for.
type PendingError struct {
	Interrupts []agent.Interrupt
}

func (e *PendingError) Error() string {
	return fmt.Sprintf("%s (%d pending)", ErrInterruptPending, len(e.Interrupts))
}

// Is makes errors.Is(err, ErrInterruptPending) true.
func (e *PendingError) Is(target error) bool { return target == ErrInterruptPending }

// StoreMargin is how long before the context's deadline the store calls of
// a turn give up, so that there is always time to answer.
const StoreMargin = 500 * time.Millisecond

// releaseTimeout bounds the release of a failed turn's hold, which runs on
// a context of its own: the turn's may be what ended it.
const releaseTimeout = time.Second

// Service runs turns, and every other use of a session. It is safe for
// concurrent use.
type Service struct {
	store  Store
	agent  Agent
	prices pricing.Table // nil prices are unknown
	docs   documentChecks
	// providers take part in every chat turn (Provider).
	providers []Provider
	// audit, when set, keeps the audit record (WithAudit).
	audit *AuditConfig
}

// New returns a Service that runs turns with a and keeps sessions in store.
func New(store Store, a Agent, opts ...Option) (*Service, error) {
	if store == nil || a == nil {
		return nil, errors.New("turn: a store and an agent are required")
	}
	s := &Service{store: store, agent: a, docs: documentChecks{maxState: agent.DefaultMaxStateBytes}}
	for _, o := range opts {
		o(s)
	}
	return s, nil
}

// Option configures a Service.
type Option func(*Service)

// WithPrices makes the answers' metrics carry the turn's estimated cost at
// p.
func WithPrices(p pricing.Prices) Option {
	return func(s *Service) { s.prices.Main = &p }
}

// WithAgentPrices gives the sub-agents that call a model of their own its
// prices, by agent name, nil for a model whose prices are unknown; the
// others are priced as the main agent.
func WithAgentPrices(prices map[string]*pricing.Prices) Option {
	return func(s *Service) { s.prices.Agents = prices }
}

// WithMaxStateBytes is the agent's cap on its state (agent.Config's
// MaxStateBytes), which an imported session's state must keep too; the
// default is agent.DefaultMaxStateBytes.
func WithMaxStateBytes(n int) Option {
	return func(s *Service) { s.docs.maxState = n }
}

// Request is what every turn names.
type Request struct {
	// Owner is the caller, who owns the session.
	Owner string
	// SessionID names the session; empty starts a new one, whose id is
	// derived from the idempotency key when there is one, so that a retry
	// finds the session its first attempt created.
	SessionID string
	// IdempotencyKey, when set, makes the turn run once: a retry gets the
	// first answer back.
	IdempotencyKey string
	// Fingerprint identifies the request, so that a key reused for another
	// request is told from a retry; see Fingerprint.
	Fingerprint string
}

// Fingerprint returns the fingerprint of a request: the kind of turn (the
// route, for the HTTP API) and the request's body, as sent.
func Fingerprint(kind string, body []byte) string {
	h := sha256.New()
	h.Write([]byte(kind + "\n"))
	h.Write(body)
	return hex.EncodeToString(h.Sum(nil))
}

// Chat is a chat turn: a user message, answered by the agent's loop; or
// the responses to the interrupts a session's last turn paused for, which
// continue that turn.
type Chat struct {
	Request
	Content []agent.ContentBlock
	// Responses answer the session's pending interrupts, and resume the
	// turn. Content must then be empty.
	Responses []agent.Response
	// DenyPending denies the session's pending interrupts, if any, so that
	// Content can be sent; without it, a session with live interrupts
	// refuses a message with a *PendingError.
	DenyPending bool
	// Sink, when set, streams the turn as it happens.
	Sink Sink
	// MessageID, when set, is the id a client gave its message, which the
	// session keeps with it (agent.Message.ID).
	MessageID string
	// ClientTools and Context are what the caller's application brings to
	// this turn alone (agent.Conversation's): tools it runs itself, whose
	// calls pause the turn until it sends their results, and context for
	// the model. Neither is stored.
	ClientTools []agent.ToolSpec
	Context     []agent.ContextEntry
	// Regenerate runs the session's last user message again, in place of
	// its last turn; Edit runs new content in place of the user message at
	// Edit.From and all that follows it. Either is one turn and one commit:
	// readers see the session as it was or with the new turn, never
	// rewound without it. Content must then be empty, but for Edit's.
	Regenerate bool
	Edit       *Edit
}

// Sink receives a streamed turn. Start comes once, when the turn starts to
// run, with the stored index its first message will take; Event for each
// thing that happens in it. A replayed turn ran in an earlier request, so
// its sink gets neither.
type Sink interface {
	Start(sessionID string, first int)
	Event(agent.Event)
}

// Structured is a structured turn: a prompt answered with an object valid
// against a schema.
type Structured struct {
	Request
	// DenyPending is Chat's.
	DenyPending bool
	Prompt      []agent.ContentBlock
	Schema      agent.Schema
	Name        string
	Description string
}

// Outcome is what a turn that succeeded came to.
type Outcome[A any] struct {
	// Answer is the turn's answer, whether it ran now or is replayed.
	Answer A
	// Result is what the agent did; nil for a replay.
	Result *agent.Result
	// Replayed is true when the answer is a committed turn's, returned for
	// a retry of its request.
	Replayed bool
	// First is the stored index of the first message the turn added (or,
	// for a resume, of the first the answer carries): the messages of an
	// answer are stored from there on.
	First int
}

// Chat runs a chat turn.
func (s *Service) Chat(ctx context.Context, c Chat) (*Outcome[ChatAnswer], error) {
	client, err := s.client(ctx, c)
	if err != nil {
		return nil, err
	}
	if len(c.Responses) > 0 {
		return s.resume(ctx, c, client)
	}
	return run(ctx, s, c.Request, job[ChatAnswer]{
		run: func(ctx, storeCtx context.Context, sess *ddbhistory.Session) (*done[ChatAnswer], error) {
			client(&sess.Conversation)
			input := c.Content
			if c.Edit != nil {
				input = c.Edit.Content
			}
			if err := s.provide(ctx, sess.Key, &sess.Conversation, input); err != nil {
				return nil, err
			}
			if c.Regenerate || c.Edit != nil {
				return s.redo(ctx, storeCtx, sess, c)
			}
			if err := checkPending(sess, c.DenyPending); err != nil {
				return nil, err
			}
			res, err := s.chatRun(ctx, sess.ID, sess.Count, &sess.Conversation, c.Content, c.Sink)
			if err != nil {
				return nil, err
			}
			if c.MessageID != "" {
				// The caller's message starts the turn (a denial of pending
				// interrupts may come before it, or within it).
				for i, m := range res.Messages {
					if agent.StartsTurn(m) {
						res.Messages[i].ID = c.MessageID
						break
					}
				}
			}
			return &done[ChatAnswer]{Result: res, Answer: s.chatAnswer(sess.ID, res)}, nil
		},
		stored: storedChat,
		replay: s.replayChat,
	})
}

// client checks what the caller's application brings to a chat turn, its
// tools and context, and returns what sets them on the turn's
// conversation.
func (s *Service) client(ctx context.Context, c Chat) (func(*agent.Conversation), error) {
	if len(c.ClientTools) == 0 && len(c.Context) == 0 {
		return func(*agent.Conversation) {}, nil
	}
	tools, err := agent.NewClientTools(c.ClientTools)
	if err == nil {
		err = s.agent.CheckClientTools(ctx, tools)
	}
	if err == nil {
		err = agent.CheckContext(c.Context)
	}
	var ie *agent.InputError
	if errors.As(err, &ie) {
		return nil, fmt.Errorf("%w: %s", ErrInvalidRequest, ie.Reason)
	} else if err != nil {
		return nil, err
	}
	return func(conv *agent.Conversation) {
		conv.ClientTools, conv.Context = tools, c.Context
	}, nil
}

// chatRun runs a chat turn's agent loop on conv, streamed to sink when
// there is one.
func (s *Service) chatRun(ctx context.Context, sessionID string, first int, conv *agent.Conversation, content []agent.ContentBlock, sink Sink) (*agent.Result, error) {
	if sink == nil {
		return s.agent.Run(ctx, conv, content)
	}
	sink.Start(sessionID, first)
	return s.agent.Stream(ctx, conv, content, sink.Event)
}

// Structured runs a structured turn.
func (s *Service) Structured(ctx context.Context, st Structured) (*Outcome[StructuredAnswer], error) {
	return run(ctx, s, st.Request, job[StructuredAnswer]{
		run: func(ctx, _ context.Context, sess *ddbhistory.Session) (*done[StructuredAnswer], error) {
			if err := checkPending(sess, st.DenyPending); err != nil {
				return nil, err
			}
			res, err := s.agent.Structured(ctx, &sess.Conversation, agent.StructuredRequest{
				Prompt:      st.Prompt,
				Schema:      st.Schema,
				Name:        st.Name,
				Description: st.Description,
			})
			if err != nil {
				return nil, err
			}
			return &done[StructuredAnswer]{Result: &res.Result, Answer: StructuredAnswer{
				SessionID: sess.ID,
				Data:      res.Data,
				Attempts:  res.Attempts,
				Usage:     res.Usage,
				Metrics:   s.metricsOf(&res.Result),
			}}, nil
		},
		stored: whole[StructuredAnswer],
		replay: storedAnswer[StructuredAnswer],
	})
}

// job is one kind of turn: how to run it, what of its answer to store for
// replays, and how to answer a replay. run gets the turn's context and the
// one for its store calls. cleanup, when set, undoes what run left behind
// when the turn failed and nothing of its end was stored.
type job[A any] struct {
	run     func(ctx, storeCtx context.Context, sess *ddbhistory.Session) (*done[A], error)
	stored  func(A) any
	replay  func(ctx context.Context, key ddbhistory.Key, r *ddbhistory.Replay) (A, error)
	cleanup func(ctx context.Context, sess *ddbhistory.Session)
}

// done is a turn that ran: what to commit, and the answer. Earlier counts
// the messages of the turn that a checkpoint committed already.
type done[A any] struct {
	Result  *agent.Result
	Answer  A
	Earlier int
	// Rewind makes the turn replace the session's messages from From on.
	Rewind bool
	From   int
	// Staging is the staged messages of a new session that come before
	// the turn's.
	Staging *ddbhistory.Staging
}

// run runs one turn on a session and commits it: load (or start) the
// session, answer a replayed idempotency key from the store, hold the key,
// run, commit the turn with its answer. Nothing is written unless the whole
// turn succeeded.
func run[A any](ctx context.Context, s *Service, req Request, j job[A]) (*Outcome[A], error) {
	key := ddbhistory.Key{Owner: req.Owner, ID: sessionID(req)}
	ctx = withOwner(ctx, req.Owner)
	storeCtx, cancel := StoreContext(ctx)
	defer cancel()

	sess, err := s.store.Load(storeCtx, key, req.IdempotencyKey)
	switch {
	case errors.Is(err, ddbhistory.ErrNotFound) && !errors.Is(err, ddbhistory.ErrIDTaken):
		sess = ddbhistory.NewSession(key) // created by the commit, under the caller
	case err != nil:
		return nil, err
	case sess.Replay != nil:
		return replay(storeCtx, key, req, sess.Replay, j)
	}
	var hold *ddbhistory.Hold
	if req.IdempotencyKey != "" {
		if hold, err = s.store.Begin(storeCtx, sess, req.IdempotencyKey, req.Fingerprint); err != nil {
			return keyInUse(storeCtx, s, key, req, err, j)
		}
	}
	sess.Conversation.Agents = s.agentLoader(sess)
	ctx, audited := s.startAudit(ctx)
	if audited != nil {
		audited.base, audited.at = sess.Version, sess.Count
	}
	var ended outcomeOf
	out, err := commitRun(ctx, storeCtx, s, sess, hold, j, &ended)
	defer func() {
		if err == nil {
			s.saveAudit(ctx, sess, audited, &ended, ended.rewound)
		} else {
			s.saveAudit(ctx, sess, audited, nil, false)
		}
	}()
	if err != nil && !errors.Is(err, ddbhistory.ErrOutcomeUnknown) {
		// Free the key of a turn that did not commit, so that a retry need
		// not wait for the hold to expire. A turn that may be stored keeps
		// it: a retry then waits for the hold to expire, and replays or runs
		// the turn once, rather than run it beside a commit that may still
		// land.
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), releaseTimeout)
		defer cancel()
		if hold != nil {
			_ = s.store.Release(rctx, hold) // a hold left behind expires
		}
		if j.cleanup != nil {
			j.cleanup(rctx, sess)
		}
	}
	return out, err
}

// outcomeOf is what the audit record needs of a committed turn: where
// its first message is, whether it rewound the session, and what its
// guardrail made it redact.
type outcomeOf struct {
	first    int
	rewound  bool
	redacted *agent.Redaction
}

// commitRun runs the turn on sess and commits it with hold, and, once it
// is committed, says so in ended.
func commitRun[A any](ctx, storeCtx context.Context, s *Service, sess *ddbhistory.Session, hold *ddbhistory.Hold, j job[A], ended *outcomeOf) (*Outcome[A], error) {
	d, err := j.run(ctx, storeCtx, sess)
	if err != nil {
		return nil, err
	}
	var stored []byte
	if hold != nil {
		if stored, err = json.Marshal(j.stored(d.Answer)); err != nil {
			return nil, fmt.Errorf("turn: encode the answer: %w", err)
		}
	}
	t := ddbhistory.Turn{
		Messages: d.Result.Messages,
		Window:   d.Result.Window,
		State:    d.Result.State,
		Pending:  d.Result.Pending,
		Hold:     hold,
		Response: stored,
		Earlier:  d.Earlier,
		Rewind:   d.Rewind,
		From:     d.From,
		Staging:  d.Staging,
		Agents:   agentTurns(d.Result),
	}
	at := t.First(sess) // before the commit moves sess on
	first := at - d.Earlier
	if err := s.store.Commit(storeCtx, sess, t); err != nil {
		return nil, &CommitError{Result: d.Result, Err: err}
	}
	s.committed(ctx, sess.Key, at, t.Messages)
	*ended = outcomeOf{first: first, rewound: d.Rewind, redacted: d.Result.Redacted}
	return &Outcome[A]{Answer: d.Answer, Result: d.Result, First: first}, nil
}

// agentLoader returns what reads the conversations sess keeps for its
// sub-agents, as the turn's delegations need them.
func (s *Service) agentLoader(sess *ddbhistory.Session) agent.AgentLoader {
	return func(ctx context.Context, name string) (*agent.Conversation, int, error) {
		if sess.Version == 0 {
			return &agent.Conversation{}, 0, nil // a new session has none
		}
		ac, err := s.store.LoadAgent(ctx, sess, name)
		if err != nil {
			return nil, 0, err
		}
		return &ac.Conversation, ac.Count, nil
	}
}

// agentTurns is what res added to the sub-agents' conversations, for the
// store.
func agentTurns(res *agent.Result) []ddbhistory.AgentTurn {
	var out []ddbhistory.AgentTurn
	for _, at := range res.Agents {
		out = append(out, ddbhistory.AgentTurn(at))
	}
	return out
}

// sessionID returns the session a turn goes to: the one named, or a new id.
// With an idempotency key a new id is derived from it, so that a retry of
// the request finds the session its first attempt created.
func sessionID(req Request) string {
	switch {
	case req.SessionID != "":
		return req.SessionID
	case req.IdempotencyKey != "":
		sum := sha256.Sum256([]byte(req.Owner + "\x00" + req.IdempotencyKey))
		return "s-" + hex.EncodeToString(sum[:16])
	}
	return NewSessionID()
}

// NewSessionID returns a new, random session id.
func NewSessionID() string { return "s-" + strings.ToLower(rand.Text()) }

// StoreContext returns the context for store calls made on behalf of a
// request: ctx, ending StoreMargin before its deadline, so that there is
// always time to answer.
func StoreContext(ctx context.Context) (context.Context, context.CancelFunc) {
	if d, ok := ctx.Deadline(); ok {
		return context.WithDeadline(ctx, d.Add(-StoreMargin))
	}
	return context.WithCancel(ctx)
}

// keyInUse answers a turn whose idempotency key another request holds or
// has used.
func keyInUse[A any](ctx context.Context, s *Service, key ddbhistory.Key, req Request, err error, j job[A]) (*Outcome[A], error) {
	var inUse *ddbhistory.KeyInUseError
	switch {
	case !errors.As(err, &inUse):
		return nil, err
	case inUse.Fingerprint != req.Fingerprint:
		return nil, ErrKeyReused
	case !inUse.Committed:
		return nil, fmt.Errorf("%w: %w", ErrInProgress, err)
	}
	// The first request committed between our load and our hold, or its
	// session is gone.
	sess, err := s.store.Load(ctx, key, req.IdempotencyKey)
	switch {
	case err == nil && sess.Replay != nil:
		return replay(ctx, key, req, sess.Replay, j)
	case err == nil, errors.Is(err, ddbhistory.ErrNotFound), errors.Is(err, ddbhistory.ErrDeleting):
		return nil, ErrReplayGone
	}
	return nil, err
}

// replay answers with the answer of the turn an idempotency key recorded.
func replay[A any](ctx context.Context, key ddbhistory.Key, req Request, r *ddbhistory.Replay, j job[A]) (*Outcome[A], error) {
	switch {
	case r.Fingerprint != req.Fingerprint || r.SessionID != key.ID:
		return nil, ErrKeyReused
	case r.Response == nil:
		return nil, ErrReplayGone
	}
	answer, err := j.replay(ctx, key, r)
	if err != nil {
		return nil, err
	}
	return &Outcome[A]{Answer: answer, Replayed: true, First: r.First}, nil
}

// storedChat is what the store keeps of a chat answer for replays: all but
// its messages, which the transcript holds and replays read back.
func storedChat(a ChatAnswer) any {
	a.Messages = nil
	return a
}

// replayChat reads a replayed chat answer: the stored answer, and the
// turn's messages from the transcript.
func (s *Service) replayChat(ctx context.Context, key ddbhistory.Key, r *ddbhistory.Replay) (ChatAnswer, error) {
	a, err := storedAnswer[ChatAnswer](ctx, key, r)
	if err != nil {
		return a, err
	}
	a.Messages, err = s.replayedMessages(ctx, key, r)
	return a, err
}

// whole is what the store keeps of an answer that it keeps whole.
func whole[A any](a A) any { return a }

// storedAnswer decodes the answer r recorded.
func storedAnswer[A any](_ context.Context, _ ddbhistory.Key, r *ddbhistory.Replay) (A, error) {
	var a A
	if err := json.Unmarshal(r.Response, &a); err != nil {
		return a, fmt.Errorf("turn: decode a stored answer: %w", err)
	}
	return a, nil
}

// replayedMessages reads from the transcript the messages of the request
// whose key r recorded: its answer's, which the store keeps without them.
func (s *Service) replayedMessages(ctx context.Context, key ddbhistory.Key, r *ddbhistory.Replay) ([]agent.Message, error) {
	msgs := []agent.Message{}
	// A page ends at MaxPageSize messages or MaxPageBytes of them, and a
	// turn can be larger.
	for cursor := ddbhistory.CursorAt(r.First); len(msgs) < r.Count && cursor != ""; {
		page, err := s.store.Transcript(ctx, key, cursor, min(r.Count-len(msgs), ddbhistory.MaxPageSize))
		if err != nil {
			return nil, err
		}
		msgs = append(msgs, page.Messages...)
		cursor = page.NextCursor
	}
	return msgs, nil
}

// CommitError is a turn that ran but whose commit failed: nothing was
// stored, or, when Err matches ddbhistory.ErrOutcomeUnknown, the turn may be
// stored. Result says what the run did, and what it cost.
type CommitError struct {
	Result *agent.Result
	Err    error
}

func (e *CommitError) Error() string { return "turn: commit: " + e.Err.Error() }

func (e *CommitError) Unwrap() error { return e.Err }
