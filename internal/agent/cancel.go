package agent

import (
	"context"
	"slices"
)

// Texts of a turn that Cancel ended.
const (
	canceledUseText = "The task was canceled while this tool call waited for a person, so it was not run."
	canceledText    = "(Canceled: the task was canceled while it waited for a person.)"
)

// Cancel ends the turn that conv's pending interrupts paused, without
// running what they hold back and without calling a model: the paused
// answer's tool uses get their results, the ones that ran their own and
// the ones that wait a result that says the task was canceled, and a last
// message of the agent's says that the turn ended there (see Canceled).
// The Result's StopReason is StopEndTurn. A conversation with nothing
// pending is ErrNothingPending.
//
// A sub-agent whose turn waits keeps its conversation as it is: the next
// delegation to it answers its paused uses, as a new message does.
func (a *Agent) Cancel(ctx context.Context, conv *Conversation) (*Result, error) {
	n := len(conv.Messages)
	if conv.Pending == nil || len(conv.Pending.Interrupts) == 0 || n == 0 || conv.Messages[n-1].Role != RoleAssistant {
		return nil, ErrNothingPending
	}
	t := a.newTurn(conv)
	m := Message{Role: RoleUser}
	for _, u := range conv.Messages[n-1].ToolUses() {
		r := keptResult(conv.Pending, u.ToolUseID)
		if r == nil {
			r = TextResult(u.ToolUseID, ToolError, canceledUseText)
		}
		m.Content = append(m.Content, ContentBlock{ToolResult: r})
	}
	t.add(ctx, m)
	t.add(ctx, AssistantText(canceledText))
	t.conv.Pending = nil
	return t.finish(StopEndTurn, canceledText), nil
}

// Canceled reports whether m is the message that ends a turn Cancel ended.
func Canceled(m Message) bool {
	return m.Role == RoleAssistant && len(m.Content) == 1 && m.Content[0].Text == canceledText
}

// keptResult is the result p keeps for tool use id, one that ran while
// others waited; nil when it keeps none.
func keptResult(p *Pending, id string) *ToolResultBlock {
	i := slices.IndexFunc(p.Results, func(r *ToolResultBlock) bool { return r.ToolUseID == id })
	if i < 0 {
		return nil
	}
	return p.Results[i]
}

// Unanswered reports whether m is the note a turn begins with when the
// history before it ended with the user's message, the results of a
// resume whose answer never came: it belongs to the turn it precedes.
func Unanswered(m Message) bool {
	return m.Role == RoleAssistant && len(m.Content) == 1 && m.Content[0].Text == unansweredText
}
