package turn

import (
	"context"
	"errors"
	"fmt"

	"github.com/lambda-agent/lambda-agent/internal/agent"
	"github.com/lambda-agent/lambda-agent/internal/ddbhistory"
)

// ErrInvalidRewind is a rewind, an edit or a regenerate that the session
// cannot take: a message index past its end, or one that does not start a
// user turn. The error's text says which.
var ErrInvalidRewind = errors.New("invalid rewind")

// Rewind discards a session's messages from To on. To must start a user
// turn, so that no tool use is parted from its result.
type Rewind struct {
	Request
	To int
}

// RewindAnswer is the answer to a rewind, as POST /sessions/{id}/rewind
// returns it and the store keeps it for replays.
type RewindAnswer struct {
	SessionID string `json:"session_id"`
	// MessageCount is how many messages the session keeps, and Discarded
	// how many it lost.
	MessageCount int `json:"message_count"`
	Discarded    int `json:"discarded"`
	// Window says which stored messages the model sees from now on.
	Window Window `json:"window"`
}

// Rewind discards a session's messages from r.To on, in one commit under
// the session's version, with the idempotency, owners and conflicts of
// Chat. What the session had pending is discarded with them.
func (s *Service) Rewind(ctx context.Context, r Rewind) (*Outcome[RewindAnswer], error) {
	return run(ctx, s, r.Request, job[RewindAnswer]{
		run: func(ctx, storeCtx context.Context, sess *ddbhistory.Session) (*done[RewindAnswer], error) {
			conv, err := s.rewound(storeCtx, sess, r.To)
			if err != nil {
				return nil, err
			}
			return &done[RewindAnswer]{
				Result: &agent.Result{Window: conv.Window, State: conv.State},
				Answer: RewindAnswer{
					SessionID:    sess.ID,
					MessageCount: r.To,
					Discarded:    sess.Count - r.To,
					Window:       WindowOf(conv.Window),
				},
				Rewind: true, From: r.To,
			}, nil
		},
		stored: whole[RewindAnswer],
		replay: storedAnswer[RewindAnswer],
	})
}

// Edit replaces the user message at From, and all that follows it, with
// Content: see Chat.
type Edit struct {
	From    int
	Content []agent.ContentBlock
}

// redo runs c again from a rewound point of sess: the last user turn's
// message for a regenerate, c.Edit's content from c.Edit.From for an edit.
// The turn's messages replace the session's from that point on, in its one
// commit.
func (s *Service) redo(ctx, storeCtx context.Context, sess *ddbhistory.Session, c Chat) (*done[ChatAnswer], error) {
	if sess.Version == 0 {
		return nil, ddbhistory.ErrNotFound
	}
	var (
		from    int
		content []agent.ContentBlock
		err     error
	)
	if c.Edit != nil {
		from, content = c.Edit.From, c.Edit.Content
	} else if from, content, err = s.lastUserTurn(storeCtx, sess); err != nil {
		return nil, err
	}
	conv, err := s.rewound(storeCtx, sess, from)
	if err != nil {
		return nil, err
	}
	res, err := s.chatRun(ctx, sess.ID, from, &conv, content, c.Sink)
	if err != nil {
		return nil, err
	}
	answer := s.chatAnswer(sess.ID, res)
	answer.RewoundTo = &from
	return &done[ChatAnswer]{Result: res, Answer: answer, Rewind: true, From: from}, nil
}

// lastUserTurn returns where sess's last user turn starts, and its message.
func (s *Service) lastUserTurn(ctx context.Context, sess *ddbhistory.Session) (int, []agent.ContentBlock, error) {
	w := sess.Conversation.Window.Removed
	msgs := sess.Conversation.Messages
	for i := len(msgs) - 1; i >= 0; i-- {
		if agent.IsTurnStart(msgs[i]) {
			return w + i, msgs[i].Content, nil
		}
	}
	// The window holds no turn start: the last turn began before it, or
	// the session has no user message at all. A turn longer than the
	// window is rare; one longer than a transcript page is not looked for.
	if w > 0 {
		earlier, start, err := s.store.WindowBefore(ctx, sess, max(0, w-ddbhistory.MaxPageSize), w)
		if err != nil {
			return 0, nil, err
		}
		for i := len(earlier) - 1; i >= 0; i-- {
			if agent.IsTurnStart(earlier[i]) {
				return start + i, earlier[i].Content, nil
			}
		}
	}
	return 0, nil, fmt.Errorf("%w: session %s has no user message to regenerate", ErrInvalidRewind, sess.ID)
}

// rewound returns sess's conversation with its messages from `to` on
// discarded, and nothing pending. A summary that covered discarded messages
// is dropped, and the window restarts at the first turn start of the last
// ddbhistory.MaxPageSize messages before to (the session's first message,
// for most): the conversation manager cuts or summarizes it again before
// the next model call.
func (s *Service) rewound(ctx context.Context, sess *ddbhistory.Session, to int) (agent.Conversation, error) {
	if sess.Version == 0 {
		return agent.Conversation{}, ddbhistory.ErrNotFound
	}
	if sess.Resuming {
		return agent.Conversation{}, ErrResuming
	}
	if to < 0 || to >= sess.Count {
		return agent.Conversation{}, fmt.Errorf("%w: message %d is not in session %s, which has %d messages (0 to %d)", ErrInvalidRewind, to, sess.ID, sess.Count, sess.Count-1)
	}
	conv := sess.Conversation
	conv.Pending = nil
	conv.Window.LastInputTokens = 0
	removed := conv.Window.Removed
	var first agent.Message
	if to >= removed {
		first = conv.Messages[to-removed]
		conv.Messages = conv.Messages[: to-removed : to-removed]
	} else {
		// The window restarts at most a transcript page before to, at a
		// turn start, so that neither this read nor the next turn's load
		// has to read the whole session.
		msgs, start, err := s.store.WindowBefore(ctx, sess, max(0, to+1-ddbhistory.MaxPageSize), to+1)
		if err != nil {
			return agent.Conversation{}, err
		}
		if len(msgs) == 0 || start+len(msgs) != to+1 {
			return agent.Conversation{}, fmt.Errorf("%w: message %d of session %s has expired", ErrInvalidRewind, to, sess.ID)
		}
		first = msgs[len(msgs)-1]
		msgs = msgs[:len(msgs)-1]
		k := 0
		for start > 0 && k < len(msgs) && !agent.IsTurnStart(msgs[k]) {
			k++
		}
		conv.Messages = msgs[k:len(msgs):len(msgs)]
		conv.Window.Removed, conv.Window.Summary = start+k, ""
	}
	if !agent.IsTurnStart(first) {
		what := "an assistant message"
		if first.Role == agent.RoleUser {
			what = "a user message that answers tool uses"
		}
		return agent.Conversation{}, fmt.Errorf("%w: message %d of session %s is %s, not the start of a user turn", ErrInvalidRewind, to, sess.ID, what)
	}
	return conv, nil
}
