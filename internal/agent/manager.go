package agent

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
)

// Conversation is what a turn starts from: the active window of a stored
// session and the state persisted with it.
type Conversation struct {
	// Messages is the active window, oldest first: the session's stored
	// messages from Window.Removed on.
	Messages []Message
	// Window is the conversation manager's state.
	Window WindowState
	// State is the agent state.
	State map[string]json.RawMessage
	// Pending is what the last turn waits for, when it paused for a
	// person.
	Pending *Pending
	// ClientTools and Context are what the caller's application brings
	// to this turn alone: the tools it runs, and context for the model
	// (see client.go). The store never holds them.
	ClientTools *ClientTools
	Context     []ContextEntry
	// Agents reads the conversation the session keeps for a sub-agent,
	// the first time a turn delegates to it; Result.Agents says what to
	// keep of it after the turn. Nil starts every delegation from an
	// empty conversation.
	Agents AgentLoader
}

// AgentLoader reads a sub-agent's stored conversation: its window, manager
// state and state, and the count of its stored messages, where the
// messages a turn adds to it go.
type AgentLoader func(ctx context.Context, name string) (conv *Conversation, count int, err error)

// WindowState is what a conversation manager persists between turns. The
// model sees a view derived from it and the window's messages alone, so the
// stored messages never have to be rewritten.
type WindowState struct {
	// Removed counts the stored messages before the active window.
	Removed int `json:"removed"`
	// Summary stands for the removed messages, when a summarizing manager
	// made one. The view shows it at the head of the window, as user text.
	Summary string `json:"summary,omitempty"`
	// ToolResultLimit, when positive, is the size in bytes above which tool
	// results are shown with their middle cut out.
	ToolResultLimit int `json:"tool_result_limit,omitempty"`
	// LastInputTokens is the input token count of the last model call, which
	// proactive reduction compares with the context window.
	LastInputTokens int `json:"last_input_tokens,omitempty"`
}

// summaryHeader introduces the summary in the view.
const summaryHeader = "Summary of the earlier conversation:\n"

// View returns the messages to send to the model: the window with the
// summary at its head and tool results cut to the limit, repaired so that
// Bedrock accepts it. It does not change c.
func (c *Conversation) View() []Message { return c.view(ResultTrim{}) }

// view is View with old tool results trimmed, and extra messages after the
// window, such as the attempts of a structured request, which are repaired
// with it.
func (c *Conversation) view(trim ResultTrim, extra ...Message) []Message {
	msgs := trimResults(c.Messages, trim)
	if limit := c.Window.ToolResultLimit; limit > 0 {
		msgs = truncateResults(msgs, limit)
	}
	if c.Window.Summary != "" {
		msgs = append([]Message{UserText(summaryHeader + c.Window.Summary)}, msgs...)
	}
	if len(extra) > 0 {
		msgs = append(msgs[:len(msgs):len(msgs)], extra...)
	}
	return Repair(msgs)
}

// clone returns a copy of c that a turn can change without touching c.
func (c *Conversation) clone() *Conversation {
	out := *c
	out.Messages = append([]Message(nil), c.Messages...)
	return &out
}

// trim drops the first n messages of the window.
func (c *Conversation) trim(n int) {
	c.Messages = c.Messages[n:]
	c.Window.Removed += n
}

// ConversationManager keeps the window the model sees bounded.
//
// A manager changes only c.Messages, by dropping a prefix through which
// c.Window.Removed counts, and c.Window. It may cut only before a turn start (a
// user message that answers no tool use), so a window always starts with a
// user message and never separates a tool use from its result. Managers are
// called from one goroutine per turn but are shared across turns, so they must
// keep no per-conversation state of their own.
type ConversationManager interface {
	// Apply runs before every model call and keeps the window within the
	// manager's bounds. An error ends the turn.
	Apply(ctx context.Context, c *Conversation) error
	// Reduce shrinks the window because it overflowed the model's context,
	// or is about to. It returns ErrCannotReduce when nothing is left to
	// take away.
	Reduce(ctx context.Context, c *Conversation) error
}

// Defaults for the conversation managers.
const (
	DefaultWindowSize      = 40
	DefaultToolResultLimit = 8 << 10
	DefaultSummaryRatio    = 0.3
	DefaultPreserveRecent  = 10
	// minToolResultLimit is as far as repeated overflows halve the limit.
	minToolResultLimit = 512
)

// NoManager leaves the history as it is. An overflow ends the turn with
// ErrContextOverflow.
type NoManager struct{}

// Apply does nothing.
func (NoManager) Apply(context.Context, *Conversation) error { return nil }

// Reduce always returns ErrCannotReduce.
func (NoManager) Reduce(context.Context, *Conversation) error { return ErrCannotReduce }

// SlidingWindow keeps at most Size messages. Once the window passes Size,
// it is cut back to LowWater messages, at a turn start, rather than by one
// turn: the window's start then stays where it is for many turns, and so
// does the prefix of every request, which a prompt cache can serve. On
// overflow it first cuts oversized tool results down to ToolResultLimit,
// keeping their head and tail, then drops the oldest quarter of the window.
type SlidingWindow struct {
	// Size is the window's length in messages; 0 means DefaultWindowSize.
	// The window may be longer when one turn alone is longer.
	Size int
	// LowWater is the length the window is cut back to once it passes
	// Size; 0 means half of Size. Size itself drops the oldest turns one
	// at a time, as a window that ignores the cache would.
	LowWater int
	// ToolResultLimit is the size in bytes that tool results are cut to on
	// overflow; 0 means DefaultToolResultLimit.
	ToolResultLimit int
}

// Apply cuts the window back to LowWater messages once it passes Size.
func (w SlidingWindow) Apply(_ context.Context, c *Conversation) error {
	size := cmp.Or(w.Size, DefaultWindowSize)
	if len(c.Messages) <= size {
		return nil
	}
	low := min(cmp.Or(w.LowWater, size/2), size)
	if cut := cutPoint(c.Messages, len(c.Messages)-max(low, 1), len(c.Messages)-1); cut > 0 {
		c.trim(cut)
	}
	return nil
}

// Reduce cuts oversized tool results, or else drops the oldest quarter of the
// window (at least one turn), or else cuts tool results further.
func (w SlidingWindow) Reduce(_ context.Context, c *Conversation) error {
	limit := cmp.Or(w.ToolResultLimit, DefaultToolResultLimit)
	switch {
	case limitResults(c, limit):
	case dropOldestTurns(c):
	case halveLimit(c, limit):
	default:
		return ErrCannotReduce
	}
	return nil
}

// dropOldestTurns drops the oldest quarter of the window, at least one turn,
// so that a window far over the limit fits again after a few reductions.
func dropOldestTurns(c *Conversation) bool {
	cut := cutPoint(c.Messages, len(c.Messages)/4, len(c.Messages)-1)
	if cut <= 0 {
		return false
	}
	c.trim(cut)
	return true
}

// limitResults lowers the tool result limit to limit when that changes what
// the model sees: some result in the window is larger than limit, and the
// current limit is not already as low.
func limitResults(c *Conversation, limit int) bool {
	limit = max(limit, minToolResultLimit)
	if cur := c.Window.ToolResultLimit; cur > 0 && cur <= limit {
		return false
	}
	for _, m := range c.Messages {
		for _, b := range m.Content {
			if b.ToolResult != nil && b.ToolResult.size() > limit {
				c.Window.ToolResultLimit = limit
				return true
			}
		}
	}
	return false
}

// halveLimit halves the tool result limit, the last resort of a reduction.
func halveLimit(c *Conversation, limit int) bool {
	return limitResults(c, cmp.Or(c.Window.ToolResultLimit, limit)/2)
}

// cutPoint returns where to cut msgs: among the turn starts at indexes 1 to
// maxCut, the first at or after target, or else the last before it; -1 when
// there is none.
func cutPoint(msgs []Message, target, maxCut int) int {
	maxCut = min(maxCut, len(msgs)-1)
	target = max(target, 1)
	for i := target; i <= maxCut; i++ {
		if IsTurnStart(msgs[i]) {
			return i
		}
	}
	for i := min(target-1, maxCut); i > 0; i-- {
		if IsTurnStart(msgs[i]) {
			return i
		}
	}
	return -1
}

// ResultTrim trims, in what the model sees, the tool results of older turns:
// those larger than MinBytes, before the last KeepTurns turns, become a
// short note that says how large the result was. The stored transcript
// keeps them whole, and the note depends on nothing but the result, so that
// a trimmed result reads the same on every later turn and a prompt cache
// still serves the prefix. The zero value trims nothing.
type ResultTrim struct {
	// KeepTurns counts the latest turns whose results are kept whole,
	// the current one among them; less than 1 means 1.
	KeepTurns int
	// MinBytes is the size above which an older result is trimmed; 0
	// turns trimming off.
	MinBytes int
}

// trimmedText stands for a trimmed tool result.
const trimmedText = "[This tool result, %d bytes, was trimmed from the conversation to save tokens. It is stored whole; call the tool again if you need it.]"

// trimResults returns msgs with the results trim trims replaced by a note.
// Messages it leaves alone are shared.
func trimResults(msgs []Message, trim ResultTrim) []Message {
	if trim.MinBytes <= 0 {
		return msgs
	}
	// The boundary is the start of the oldest turn kept whole.
	boundary, turns := len(msgs), 0
	for i := len(msgs) - 1; i >= 0 && turns < max(trim.KeepTurns, 1); i-- {
		if IsTurnStart(msgs[i]) {
			boundary, turns = i, turns+1
		}
	}
	var out []Message
	for i, m := range msgs[:boundary] {
		for j, b := range m.Content {
			r := b.ToolResult
			if r == nil || r.size() <= trim.MinBytes {
				continue
			}
			if out == nil {
				out = append([]Message(nil), msgs...)
			}
			if &out[i].Content[0] == &msgs[i].Content[0] {
				out[i] = m.clone()
			}
			out[i].Content[j] = ContentBlock{ToolResult: TextResult(r.ToolUseID, r.Status, fmt.Sprintf(trimmedText, r.size()))}
		}
	}
	if out == nil {
		return msgs
	}
	return out
}

// truncateResults returns msgs with the text and JSON of every tool result
// larger than limit cut to limit. Messages it leaves alone are shared.
func truncateResults(msgs []Message, limit int) []Message {
	var out []Message
	for i, m := range msgs {
		changed := false
		for j, b := range m.Content {
			if b.ToolResult == nil || b.ToolResult.size() <= limit {
				continue
			}
			if !changed {
				if out == nil {
					out = append([]Message(nil), msgs...)
				}
				m = m.clone()
				changed = true
			}
			m.Content[j] = ContentBlock{ToolResult: truncateResult(b.ToolResult, limit)}
		}
		if changed {
			out[i] = m
		}
	}
	if out == nil {
		return msgs
	}
	return out
}

// truncateResult cuts a tool result to about limit bytes. JSON that has to be
// cut becomes text, because half a JSON document is not JSON.
func truncateResult(r *ToolResultBlock, limit int) *ToolResultBlock {
	out := &ToolResultBlock{ToolUseID: r.ToolUseID, Status: r.Status, Content: make([]ToolResultContent, len(r.Content))}
	budget := max(limit/max(len(r.Content), 1), 64)
	for i, c := range r.Content {
		switch {
		case len(c.Text) > budget:
			c.Text = truncateMiddle(c.Text, budget)
		case len(c.JSON) > budget:
			c = ToolResultContent{Text: truncateMiddle(string(c.JSON), budget)}
		}
		out.Content[i] = c
	}
	return out
}

// Summarizing replaces the oldest messages with a summary written by a
// model. The summary lives in WindowState and is shown at the head of the
// window; the stored messages stay as they were.
type Summarizing struct {
	// Model writes the summaries. Required; it may differ from the agent's
	// model, and should be wrapped with Retrying.
	Model Model
	// Ratio is the share of the window to summarize at a time; 0 means
	// DefaultSummaryRatio. It is clamped to [0.1, 0.8].
	Ratio float64
	// PreserveRecent is how many of the latest messages are never
	// summarized unless nothing else can be reduced; 0 means
	// DefaultPreserveRecent.
	PreserveRecent int
	// Prompt is the summarizer's system prompt; empty means
	// DefaultSummaryPrompt.
	Prompt string
	// MaxMessages, when positive, makes Apply summarize once the window is
	// longer, so that loading a session stays cheap. Zero summarizes only on
	// overflow.
	MaxMessages int
	// ToolResultLimit is as in SlidingWindow.
	ToolResultLimit int
}

// DefaultSummaryPrompt is the summarizer's default system prompt.
const DefaultSummaryPrompt = `You summarize conversations between a user and an AI assistant so that the assistant can continue the conversation without the original messages.
Write a concise summary in the third person. Keep every fact, decision, name, number, preference and open question the user or the assistant stated, and what the tools returned that still matters. Leave out greetings and repetition.
Answer with the summary only.`

// Apply summarizes when the window is longer than MaxMessages.
func (s Summarizing) Apply(ctx context.Context, c *Conversation) error {
	if s.MaxMessages <= 0 || len(c.Messages) <= s.MaxMessages {
		return nil
	}
	if err := s.Reduce(ctx, c); err != nil && !errors.Is(err, ErrCannotReduce) {
		return err
	}
	return nil
}

// Reduce summarizes the oldest Ratio of the window into the summary. When the
// window has too few messages to summarize it cuts oversized tool results
// instead, and when the summarizer fails it drops the same messages without
// a summary: a reduction never fails because of the summarizer.
func (s Summarizing) Reduce(ctx context.Context, c *Conversation) error {
	n := len(c.Messages)
	ratio := min(max(cmp.Or(s.Ratio, DefaultSummaryRatio), 0.1), 0.8)
	target := max(int(float64(n)*ratio), 1)
	limit := cmp.Or(s.ToolResultLimit, DefaultToolResultLimit)
	cut := cutPoint(c.Messages, target, n-cmp.Or(s.PreserveRecent, DefaultPreserveRecent))
	if cut <= 0 {
		// Too few messages to summarize without touching the recent ones.
		// One huge tool result is the usual cause, so cut that first, and
		// summarize recent messages only when nothing else is left.
		if limitResults(c, limit) {
			return nil
		}
		cut = cutPoint(c.Messages, target, n-1)
	}
	if cut <= 0 {
		if halveLimit(c, limit) {
			return nil
		}
		return ErrCannotReduce
	}
	summary, err := s.summarize(ctx, c.Window.Summary, c.Messages[:cut], limit)
	if err == nil {
		c.Window.Summary = summary
	}
	c.trim(cut)
	return nil
}

func (s Summarizing) summarize(ctx context.Context, previous string, msgs []Message, limit int) (string, error) {
	if s.Model == nil {
		return "", fmt.Errorf("summarizing: no model")
	}
	prompt := cmp.Or(s.Prompt, DefaultSummaryPrompt)
	resp, err := s.Model.Converse(ctx, &ModelRequest{
		System:   prompt,
		Messages: []Message{UserText(transcript(previous, msgs, limit))},
	})
	if err != nil {
		return "", fmt.Errorf("summarizing: %w", err)
	}
	text := strings.TrimSpace(resp.Message.Text())
	if text == "" {
		return "", fmt.Errorf("summarizing: the model returned no text")
	}
	return text, nil
}

// transcript renders messages as plain text for the summarizer. Plain text
// needs no tool configuration, carries no images, and lets each block be cut
// to limit so that one huge tool result cannot overflow the summarizer too.
func transcript(previous string, msgs []Message, limit int) string {
	var sb strings.Builder
	if previous != "" {
		sb.WriteString("Summary of what came before:\n" + previous + "\n\n")
	}
	sb.WriteString("Conversation to summarize:\n")
	for _, m := range msgs {
		who := "User"
		if m.Role == RoleAssistant {
			who = "Assistant"
		}
		for _, b := range m.Content {
			var line string
			switch {
			case b.ToolUse != nil:
				line = fmt.Sprintf("[called tool %s with %s]", b.ToolUse.Name, b.ToolUse.Input)
			case b.ToolResult != nil:
				line = "[" + resultText(b.ToolResult) + "]"
			case b.Image != nil, b.Document != nil:
				line = "[" + mediaNote(b) + "]"
			case b.Reasoning != nil:
				continue
			default:
				line = b.Text
			}
			sb.WriteString(who + ": " + truncateMiddle(line, limit) + "\n")
		}
	}
	return sb.String()
}
