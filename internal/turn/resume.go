package turn

import (
	"context"
	"errors"
	"slices"
	"time"

	"github.com/lambda-agent/lambda-agent/internal/agent"
	"github.com/lambda-agent/lambda-agent/internal/ddbhistory"
)

// checkPending refuses a new message or prompt for sess while its last
// turn waits for a person, unless deny says to deny what waits, and while
// another request resumes that turn.
func checkPending(sess *ddbhistory.Session, deny bool) error {
	if sess.Resuming {
		return ErrResuming
	}
	if live := sess.Conversation.Pending.Live(time.Now()); len(live) > 0 && !deny {
		return &PendingError{Interrupts: live}
	}
	return nil
}

// resume continues the turn that sess's pending interrupts paused, with
// the person's responses. It runs in two commits, so that a tool a person
// approved runs at most once: the first, a checkpoint, stores the results
// that answer the paused tool uses, once the tools ran; the second the rest
// of the turn. Before any tool runs, the interrupts are claimed, so that of
// two resumes that race only one runs them; the checkpoint keeps the
// claim, so that no other turn comes between the two commits. When the
// rest of the turn fails, the claim ends and the session keeps the results:
// a retry of the request, which finds them, continues from there without
// running a tool again, and a message goes on after them.
//
// Responses that leave a client tool's call unanswered commit the rest
// alone: the turn waits on for the client's result, and the answer lists
// what still waits.
func (s *Service) resume(ctx context.Context, c Chat, client func(*agent.Conversation)) (*Outcome[ChatAnswer], error) {
	if len(c.Content) > 0 || c.DenyPending {
		return nil, errors.New("turn: responses come without content and without DenyPending")
	}
	// checkpointed is set once the results are stored, under the claim.
	var checkpointed bool
	return run(ctx, s, c.Request, job[ChatAnswer]{
		run: func(ctx, storeCtx context.Context, sess *ddbhistory.Session) (*done[ChatAnswer], error) {
			// The stream starts once the request is known to resume the
			// turn, so that a refusal keeps its status.
			var emit func(agent.Event)
			start := func() {
				if c.Sink != nil {
					c.Sink.Start(sess.ID, sess.Count)
					emit = c.Sink.Event
				}
			}
			conv := &sess.Conversation
			client(conv)
			if err := s.provide(ctx, sess.Key, conv, nil); err != nil {
				return nil, err
			}
			// earlier are the turn's messages stored before its end: the
			// results, by this request's checkpoint or an earlier attempt's.
			var earlier []agent.Message
			// What the answering did, which the turn's usage and metrics
			// include: a resumed sub-agent calls its model.
			var answering *agent.Result
			switch {
			case sess.Version == 0:
				return nil, ddbhistory.ErrNotFound
			case sess.Resuming:
				return nil, ErrResuming
			case conv.Pending != nil && len(conv.Pending.Interrupts) == 0:
				// An earlier attempt stored the sub-agents' answers to these
				// responses, and stopped: the rest of the turn is left.
				if !resumedBy(conv.Pending, c.Responses) {
					return nil, ErrNothingPending
				}
				start()
			case conv.Pending != nil:
				if err := conv.Pending.Check(c.Responses, time.Now()); err != nil {
					return nil, err
				}
				if err := s.store.ClaimPending(storeCtx, sess); err != nil {
					return nil, err
				}
				start()
				first, err := s.agent.Answer(ctx, conv, c.Responses, emit)
				if err != nil {
					return nil, err
				}
				if first.Pending != nil && len(first.Pending.Interrupts) > 0 {
					// Client tools' calls wait on: this is the turn's end
					// for now, and its commit ends the claim.
					return &done[ChatAnswer]{Result: first, Answer: s.chatAnswer(sess.ID, first)}, nil
				}
				// The results, or the sub-agents' answers, are stored
				// before any model call, so that no approved tool that ran
				// runs again.
				window := append(conv.Messages, first.Messages...)
				at := sess.Count
				err = s.store.Commit(storeCtx, sess, ddbhistory.Turn{Messages: first.Messages, Window: first.Window, State: first.State, Pending: first.Pending, Agents: agentTurns(first), Resuming: true})
				if err != nil {
					return nil, &CommitError{Result: first, Err: err}
				}
				s.committed(ctx, sess.Key, at, first.Messages)
				checkpointed = true
				conv.Messages = window // the commit left the client's tools and context, and the loader
				earlier, answering = first.Messages, first
			case !answered(conv.Messages, c.Responses):
				return nil, ErrNothingPending
			default:
				start()
				earlier = conv.Messages[len(conv.Messages)-1:]
			}
			res, err := s.agent.Continue(ctx, conv, emit)
			if err != nil {
				return nil, err
			}
			if answering != nil {
				res.Include(answering)
			}
			answer := s.chatAnswer(sess.ID, res)
			answer.Messages = append(slices.Clip(earlier), res.Messages...)
			return &done[ChatAnswer]{Result: res, Answer: answer, Earlier: len(earlier)}, nil
		},
		stored: storedChat,
		replay: s.replayChat,
		cleanup: func(ctx context.Context, sess *ddbhistory.Session) {
			if checkpointed {
				_ = s.store.ReleaseClaim(ctx, sess) // a claim left behind expires
			}
		},
	})
}

// Cancel ends the turn that a session's pending interrupts paused, with
// nothing run that they hold back and no model call (agent.Agent.Cancel):
// a task given up while it waited for a person. A session whose live
// interrupts are none is ErrNothingPending; one whose interrupts another
// request is answering, ErrResuming. A claim taken after the session was
// read makes the commit fail with ddbhistory.ErrConflict.
type Cancel struct {
	Request
}

// Cancel ends a paused turn (see Cancel).
func (s *Service) Cancel(ctx context.Context, c Cancel) (*Outcome[ChatAnswer], error) {
	return run(ctx, s, c.Request, job[ChatAnswer]{
		run: func(ctx, _ context.Context, sess *ddbhistory.Session) (*done[ChatAnswer], error) {
			switch {
			case sess.Version == 0:
				return nil, ddbhistory.ErrNotFound
			case sess.Resuming:
				return nil, ErrResuming
			case len(sess.Conversation.Pending.Live(time.Now())) == 0:
				return nil, ErrNothingPending
			}
			res, err := s.agent.Cancel(ctx, &sess.Conversation)
			if err != nil {
				return nil, err
			}
			return &done[ChatAnswer]{Result: res, Answer: s.chatAnswer(sess.ID, res)}, nil
		},
		stored: storedChat,
		replay: s.replayChat,
	})
}

// resumedBy reports whether p holds back only the turns of sub-agents that
// took responses already, and responses name those interrupts alone: a
// retry of a resume whose first step was stored.
func resumedBy(p *agent.Pending, responses []agent.Response) bool {
	if len(p.Resumed) == 0 || len(responses) == 0 {
		return false
	}
	for _, r := range responses {
		if !slices.ContainsFunc(p.Resumed, func(in agent.Interrupt) bool { return in.ID == r.InterruptID }) {
			return false
		}
	}
	return true
}

// answered reports whether msgs end with the user message that answered
// the tool uses responses name: a resume whose results were committed, and
// whose turn did not finish.
func answered(msgs []agent.Message, responses []agent.Response) bool {
	n := len(msgs)
	if n == 0 || msgs[n-1].Role != agent.RoleUser {
		return false
	}
	ids := make(map[string]bool)
	for _, b := range msgs[n-1].Content {
		if b.ToolResult != nil {
			ids[b.ToolResult.ToolUseID] = true
		}
	}
	for _, r := range responses {
		if !ids[r.InterruptID] {
			return false
		}
	}
	return true
}
