package agent

// DefaultRedactedInput is Config.RedactedInput's default: the text kept in
// place of a user's input that the model's guardrail blocked.
const DefaultRedactedInput = "[User input redacted.]"

// redactBlockedInput replaces the turn's input, in what the turn adds, by
// Config.RedactedInput when the guardrail that ended the turn blocked it,
// so that the input is committed redacted with the rest of the turn.
// Kept, it would go back to the guardrail with every later request, to be
// blocked again, and stay in the session's store and its exports.
//
// The trace tells a blocked input from a blocked answer: after an answer
// the guardrail replaced, the input passed it and is kept. Without a trace
// the input is redacted, as it may be what was blocked. A turn without an
// input of its own, a resume, has nothing to redact.
func (t *turn) redactBlockedInput(g *GuardrailTrace) {
	if t.input < 0 || (g != nil && !g.Input) {
		return
	}
	t.redacted = &Redaction{Text: t.a.cfg.RedactedInput}
	for _, b := range t.added[t.input].Content {
		if b.ToolResult == nil {
			t.redacted.Input = append(t.redacted.Input, b)
		}
	}
	t.added[t.input] = redacted(t.added[t.input], t.a.cfg.RedactedInput)
}

// redacted is the user message m with its content replaced by text. The
// tool results that open it, which answer the tool uses of the message
// before it, stay, so that the history remains valid: a guardrail does not
// read tool results.
func redacted(m Message, text string) Message {
	out := Message{Role: m.Role}
	for _, b := range m.Content {
		if b.ToolResult != nil {
			out.Content = append(out.Content, b)
		}
	}
	out.Content = append(out.Content, Text(text))
	return out
}
