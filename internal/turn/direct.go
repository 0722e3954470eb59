package turn

import (
	"context"
	"encoding/json"

	"github.com/lambda-agent/lambda-agent/internal/agent"
	"github.com/lambda-agent/lambda-agent/internal/ddbhistory"
)

// ToolCall is a direct call of one of the agent's tools by the person,
// with no model call: see agent.Agent.CallTool.
type ToolCall struct {
	Request
	Name  string
	Input json.RawMessage
	// Record adds the call to the conversation; without it only the agent
	// state the tool changed is committed.
	Record bool
}

// ToolAnswer is the answer to a direct tool call, as POST
// /sessions/{id}/tools/{name} returns it. The store keeps it, without its
// messages, for replays.
type ToolAnswer struct {
	SessionID string `json:"session_id"`
	Tool      string `json:"tool"`
	ToolUseID string `json:"tool_use_id"`
	// Status is the result's: success, or error when the tool failed, and
	// Content what it returned, or its error.
	Status  agent.ToolResultStatus    `json:"status"`
	Content []agent.ToolResultContent `json:"content"`
	// Recorded says that the call was added to the conversation, as
	// Messages.
	Recorded bool            `json:"recorded"`
	Metrics  Metrics         `json:"metrics"`
	Messages []agent.Message `json:"messages"`
}

// CallTool runs a direct tool call on a session and commits it as a turn:
// the same idempotency, owners and conflicts as Chat. A session whose last
// turn waits for a person refuses it with a *PendingError.
func (s *Service) CallTool(ctx context.Context, c ToolCall) (*Outcome[ToolAnswer], error) {
	return run(ctx, s, c.Request, job[ToolAnswer]{
		run: func(ctx, _ context.Context, sess *ddbhistory.Session) (*done[ToolAnswer], error) {
			if err := checkPending(sess, false); err != nil {
				return nil, err
			}
			res, err := s.agent.CallTool(ctx, &sess.Conversation, agent.DirectCall{Name: c.Name, Input: c.Input, Record: c.Record})
			if err != nil {
				return nil, err
			}
			return &done[ToolAnswer]{Result: &res.Result, Answer: ToolAnswer{
				SessionID: sess.ID,
				Tool:      res.Use.Name,
				ToolUseID: res.Use.ToolUseID,
				Status:    res.Output.Status,
				Content:   res.Output.Content,
				Recorded:  c.Record,
				Messages:  nonNilMessages(res.Messages),
				Metrics:   s.metricsOf(&res.Result),
			}}, nil
		},
		stored: func(a ToolAnswer) any {
			a.Messages = nil // the transcript holds them
			return a
		},
		replay: func(ctx context.Context, key ddbhistory.Key, r *ddbhistory.Replay) (ToolAnswer, error) {
			a, err := storedAnswer[ToolAnswer](ctx, key, r)
			if err != nil {
				return a, err
			}
			a.Messages, err = s.replayedMessages(ctx, key, r)
			return a, err
		},
	})
}

func nonNilMessages(m []agent.Message) []agent.Message {
	if m == nil {
		return []agent.Message{}
	}
	return m
}
