package agent

import (
	"cmp"
	"fmt"
	"strings"
	"unicode/utf8"
)

// Texts the repair writes. They are fixed so that a repair is deterministic:
// the same stored history always gives the same window.
const (
	interruptedText  = "The tool run was interrupted before it returned a result, so no result is available."
	placeholderText  = "(empty)"
	continuationText = "(The conversation continues from earlier messages that are no longer shown.)"
	unansweredText   = "(No answer: the turn stopped here, after the tools ran.)"
)

// Repair returns a copy of msgs that Bedrock accepts, whatever msgs holds:
//
//   - blank text blocks are dropped, and a message left empty says "(empty)";
//   - consecutive messages of one role are merged, tool results first;
//   - a history that starts with the assistant gets a user message before it;
//   - every tool use is answered in the next user message, by an error result
//     saying the run was interrupted where the real result is missing;
//   - a tool result that answers no tool use of the message before it is
//     turned into text, so its content is kept but nothing is orphaned;
//   - images and documents in assistant messages become text notes, and
//     reasoning in user messages is dropped;
//   - a tool use id used before is renamed, with the results that answer it.
//
// It leaves msgs unchanged and is deterministic. A history that was already
// valid comes back equal to the input.
func Repair(msgs []Message) []Message {
	out := make([]Message, 0, len(msgs)+1)
	for _, m := range msgs {
		m = cleanBlocks(m)
		if len(m.Content) == 0 {
			continue
		}
		if n := len(out); n > 0 && out[n-1].Role == m.Role {
			out[n-1] = merge(out[n-1], m)
			continue
		}
		out = append(out, m)
	}
	if len(out) > 0 && out[0].Role != RoleUser {
		out = append([]Message{UserText(continuationText)}, out...)
	}
	seen := make(map[string]bool)
	for i := range out {
		if out[i].Role == RoleAssistant {
			renamed := uniqueToolUseIDs(&out[i], seen)
			if len(renamed) > 0 && i+1 < len(out) {
				out[i+1] = renameResults(out[i+1], renamed)
			}
			continue
		}
		var prev *Message
		if i > 0 {
			prev = &out[i-1]
		}
		out[i] = answerToolUses(prev, out[i])
	}
	if n := len(out); n > 0 && len(out[n-1].ToolUses()) > 0 {
		out = append(out, answerToolUses(&out[n-1], Message{Role: RoleUser}))
	}
	limitMedia(out)
	return out
}

// withoutToolBlocks returns msgs with tool uses and tool results turned into
// text. Bedrock refuses such blocks in a request that offers no tools, which
// is what a session that used tools meets once its tools are switched off.
func withoutToolBlocks(msgs []Message) []Message {
	out := make([]Message, len(msgs))
	for i, m := range msgs {
		out[i] = m
		changed := false
		for j, b := range m.Content {
			var text string
			switch {
			case b.ToolUse != nil:
				text = fmt.Sprintf("[called tool %s with %s]", b.ToolUse.Name, b.ToolUse.Input)
			case b.ToolResult != nil:
				text = "[" + resultText(b.ToolResult) + "]"
			default:
				continue
			}
			if !changed {
				out[i] = m.clone()
				changed = true
			}
			out[i].Content[j] = Text(text)
		}
	}
	return out
}

// limitMedia keeps the latest MaxImages images and MaxDocuments documents,
// which is all Bedrock accepts in one request, and turns older ones into
// notes. It changes msgs in place, copying any tool result it changes.
func limitMedia(msgs []Message) {
	var images, docs int
	over := func(b ContentBlock) bool {
		switch {
		case b.Image != nil:
			images++
			return images > MaxImages
		case b.Document != nil:
			docs++
			return docs > MaxDocuments
		}
		return false
	}
	for i := len(msgs) - 1; i >= 0; i-- {
		content := msgs[i].Content
		for j := len(content) - 1; j >= 0; j-- {
			b := content[j]
			if over(b) {
				content[j] = Text("[" + mediaNote(b) + " omitted: the conversation holds too many]")
			}
			r := b.ToolResult
			if r == nil {
				continue
			}
			copied := false
			for k := len(r.Content) - 1; k >= 0; k-- {
				c := r.Content[k]
				if over(ContentBlock{Image: c.Image, Document: c.Document}) {
					if !copied {
						r = &ToolResultBlock{ToolUseID: r.ToolUseID, Status: r.Status, Content: append([]ToolResultContent(nil), r.Content...)}
						content[j] = ContentBlock{ToolResult: r}
						copied = true
					}
					r.Content[k] = ToolResultContent{Text: "[" + mediaNote(ContentBlock{Image: c.Image, Document: c.Document}) + " omitted: the conversation holds too many]"}
				}
			}
		}
		if hasDocument(content) && !hasText(content) {
			msgs[i].Content = append(content, Text("(document attached)"))
		}
	}
}

func hasDocument(content []ContentBlock) bool {
	for _, b := range content {
		if b.Document != nil {
			return true
		}
	}
	return false
}

func hasText(content []ContentBlock) bool {
	for _, b := range content {
		if b.Text != "" {
			return true
		}
	}
	return false
}

// cleanBlocks drops what Bedrock rejects inside one message: blank text and
// empty blocks, and media in assistant messages. Roles other than user and
// assistant are treated as user.
func cleanBlocks(m Message) Message {
	if m.Role != RoleAssistant {
		m.Role = RoleUser
	}
	out := Message{ID: m.ID, Role: m.Role, Content: make([]ContentBlock, 0, len(m.Content))}
	for _, b := range m.Content {
		switch {
		case b.Image != nil || b.Document != nil:
			if m.Role == RoleAssistant {
				b = Text("[" + mediaNote(b) + " omitted: only user messages may carry it]")
			}
		case b.Reasoning != nil:
			if m.Role == RoleUser {
				continue // reasoning is the model's own, and means nothing in user text
			}
		case b.ToolUse != nil, b.ToolResult != nil:
			if b.ToolUse != nil && m.Role == RoleUser {
				b = Text(fmt.Sprintf("[request to run tool %s]", b.ToolUse.Name))
			}
			if b.ToolResult != nil && m.Role == RoleAssistant {
				b = Text("[" + resultText(b.ToolResult) + "]")
			}
		case strings.TrimSpace(b.Text) == "":
			continue
		}
		out.Content = append(out.Content, b)
	}
	if len(out.Content) == 0 && len(m.Content) > 0 {
		out.Content = append(out.Content, Text(placeholderText))
	}
	return out
}

func mediaNote(b ContentBlock) string {
	if b.Image != nil {
		return b.Image.Format + " image"
	}
	return "document " + b.Document.Name
}

// merge joins two messages of the same role. In a user message Bedrock wants
// the tool results before anything else.
func merge(a, b Message) Message {
	content := make([]ContentBlock, 0, len(a.Content)+len(b.Content))
	content = append(content, a.Content...)
	content = append(content, b.Content...)
	if a.Role == RoleUser {
		content = resultsFirst(content)
	}
	return Message{ID: cmp.Or(a.ID, b.ID), Role: a.Role, Content: content}
}

func resultsFirst(content []ContentBlock) []ContentBlock {
	out := make([]ContentBlock, 0, len(content))
	for _, b := range content {
		if b.ToolResult != nil {
			out = append(out, b)
		}
	}
	for _, b := range content {
		if b.ToolResult == nil {
			out = append(out, b)
		}
	}
	return out
}

// answerToolUses makes user message m answer exactly the tool uses of prev:
// one result per use, in the uses' order, an interruption note for each
// missing one, and orphaned results turned into text.
func answerToolUses(prev *Message, m Message) Message {
	var uses []*ToolUseBlock
	if prev != nil {
		uses = prev.ToolUses()
	}
	if len(uses) == 0 && !m.HasToolResults() {
		return m
	}
	byID := make(map[string]*ToolResultBlock)
	var rest []ContentBlock
	for _, b := range m.Content {
		if r := b.ToolResult; r != nil {
			if _, dup := byID[r.ToolUseID]; !dup && wanted(uses, r.ToolUseID) {
				byID[r.ToolUseID] = r
				continue
			}
			b = Text("[" + resultText(r) + "]")
		}
		rest = append(rest, b)
	}
	out := Message{ID: m.ID, Role: RoleUser, Content: make([]ContentBlock, 0, len(uses)+len(rest))}
	seen := make(map[string]bool, len(uses))
	for _, u := range uses {
		if seen[u.ToolUseID] {
			continue
		}
		seen[u.ToolUseID] = true
		r, ok := byID[u.ToolUseID]
		if !ok {
			r = TextResult(u.ToolUseID, ToolError, interruptedText)
		}
		out.Content = append(out.Content, ContentBlock{ToolResult: r})
	}
	out.Content = append(out.Content, rest...)
	return out
}

// uniqueToolUseIDs renames the tool uses in m whose ids are in seen, adds the
// ids of m to seen, and returns what it renamed. The new id is derived from
// the old and its position, so a repair stays deterministic.
func uniqueToolUseIDs(m *Message, seen map[string]bool) map[string]string {
	var renamed map[string]string
	for j, b := range m.Content {
		u := b.ToolUse
		if u == nil {
			continue
		}
		id := u.ToolUseID
		for n := 2; seen[id]; n++ {
			id = fmt.Sprintf("%.56s_dup%d", u.ToolUseID, n)
		}
		seen[id] = true
		if id == u.ToolUseID {
			continue
		}
		if renamed == nil {
			renamed = make(map[string]string)
			m.Content = append([]ContentBlock(nil), m.Content...)
		}
		if _, ok := renamed[u.ToolUseID]; !ok {
			renamed[u.ToolUseID] = id
		}
		c := *u
		c.ToolUseID = id
		m.Content[j] = ContentBlock{ToolUse: &c}
	}
	return renamed
}

// renameResults points the results in m at renamed tool uses. When one
// message repeats an id, only its first result is renamed.
func renameResults(m Message, renamed map[string]string) Message {
	m = m.clone()
	done := make(map[string]bool)
	for j, b := range m.Content {
		r := b.ToolResult
		if r == nil || done[r.ToolUseID] {
			continue
		}
		if id, ok := renamed[r.ToolUseID]; ok {
			done[r.ToolUseID] = true
			c := *r
			c.ToolUseID = id
			m.Content[j] = ContentBlock{ToolResult: &c}
		}
	}
	return m
}

func wanted(uses []*ToolUseBlock, id string) bool {
	for _, u := range uses {
		if u.ToolUseID == id {
			return true
		}
	}
	return false
}

// resultText renders a tool result as text, for results that have lost the
// tool use they answered.
func resultText(r *ToolResultBlock) string {
	var sb strings.Builder
	fmt.Fprintf(&sb, "result of earlier tool call %s", r.ToolUseID)
	if r.Status == ToolError {
		sb.WriteString(" (error)")
	}
	sb.WriteString(":")
	for _, c := range r.Content {
		switch {
		case c.JSON != nil:
			sb.WriteString(" " + string(c.JSON))
		case c.Image != nil:
			sb.WriteString(" [" + c.Image.Format + " image]")
		case c.Document != nil:
			sb.WriteString(" [document " + c.Document.Name + "]")
		default:
			sb.WriteString(" " + c.Text)
		}
	}
	return sb.String()
}

// truncateMiddle keeps the head and the tail of s within limit bytes and says
// how much was cut in between. It never splits a UTF-8 sequence.
func truncateMiddle(s string, limit int) string {
	if len(s) <= limit {
		return s
	}
	half := limit / 2
	head, tail := s[:half], s[len(s)-half:]
	// Step back over at most one partial rune at each cut.
	for i := 0; i < utf8.UTFMax-1 && len(head) > 0; i++ {
		if r, n := utf8.DecodeLastRuneInString(head); r != utf8.RuneError || n != 1 {
			break
		}
		head = head[:len(head)-1]
	}
	for i := 0; i < utf8.UTFMax-1 && len(tail) > 0 && !utf8.RuneStart(tail[0]); i++ {
		tail = tail[1:]
	}
	return fmt.Sprintf("%s\n[... %d of %d bytes truncated ...]\n%s", head, len(s)-len(head)-len(tail), len(s), tail)
}
