package agent

import (
	"bytes"
	"errors"
	"fmt"
	"slices"
	"strings"
)

// ErrInvalidHistory is the kind of a HistoryError.
var ErrInvalidHistory = errors.New("invalid history")

// HistoryError is a stored history that breaks a rule ValidateHistory
// checks. It matches ErrInvalidHistory.
type HistoryError struct {
	// Index is the message at fault.
	Index int
	// Path is the JSON path of the element at fault, such as
	// messages[3].content[1].toolUse.toolUseId.
	Path string
	// Reason says what is wrong, for a person.
	Reason string
}

// Error names the element at fault and what is wrong with it.
func (e *HistoryError) Error() string { return e.Path + ": " + e.Reason }

// Is makes errors.Is(err, ErrInvalidHistory) true.
func (e *HistoryError) Is(target error) bool { return target == ErrInvalidHistory }

// ValidateHistory checks a whole stored history, as a session's transcript
// holds it, against the rules a turn relies on and Bedrock enforces:
//
//   - roles are user or assistant, alternating, starting with the user;
//   - every message has content, and every block exactly one member: text
//     that is not blank, an image or document (in user messages and tool
//     results, of a format and size Bedrock reads, whose inline bytes are
//     of that format), a toolUse (in assistant messages), a toolResult
//     with at least one part (in user messages; see ValidateToolResult),
//     or reasoning (in assistant messages);
//   - a toolUse has an id and a name Bedrock accepts and an object as input,
//     and its id is used once in the history;
//   - every toolUse is answered by a toolResult with its id in the very next
//     message, and every toolResult answers a toolUse of the message right
//     before it, once.
//
// The one exception is the last message: an assistant message whose tool
// uses wait for their results, as a turn that paused for a person (see
// Pending) or was cut short leaves it. The next turn answers them.
//
// It returns nil or a *HistoryError whose path starts with "messages[i]".
// What one request may carry in all (images, documents, cache points) is
// left to the view, which repairs it.
func ValidateHistory(msgs []Message) error { return ValidateHistoryPart(nil, 0, msgs) }

// ValidateHistoryPart is ValidateHistory for a part of a history: msgs
// are its messages first, first+1 and on, and prev, the message before
// them (nil when first is 0), which they must follow. Paths name the
// messages by their index in the whole history. Tool use ids are checked
// for reuse within the part, and its last message may also be a user
// message or an assistant message whose tool uses the next part answers.
func ValidateHistoryPart(prev *Message, first int, msgs []Message) error {
	useAt := make(map[string]string) // toolUseId -> the path of its first use
	for k, m := range msgs {
		i := first + k
		before := prev
		if k > 0 {
			before = &msgs[k-1]
		}
		at := fmt.Sprintf("messages[%d]", i)
		switch {
		case m.Role != RoleUser && m.Role != RoleAssistant:
			return historyError(i, at+".role", "%q is not \"user\" or \"assistant\"", m.Role)
		case before == nil && m.Role != RoleUser:
			return historyError(i, at+".role", "the history must start with a user message, not %q", m.Role)
		case before != nil && m.Role == before.Role:
			return historyError(i, at+".role", "must be %q after a%s %s message: roles alternate", other(m.Role), article(m.Role), m.Role)
		case len(m.Content) == 0:
			return historyError(i, at+".content", "is empty; a message holds at least one block")
		}
		if err := checkBlocks(i, at, m); err != nil {
			return err
		}
		for j, b := range m.Content {
			if u := b.ToolUse; u != nil {
				p := fmt.Sprintf("%s.content[%d].toolUse.toolUseId", at, j)
				if first, dup := useAt[u.ToolUseID]; dup {
					return historyError(i, p, "%q was used before, at %s; every toolUse needs an id of its own", u.ToolUseID, strings.TrimSuffix(first, ".toolUse.toolUseId"))
				}
				useAt[u.ToolUseID] = p
			}
		}
		if m.Role == RoleUser {
			if err := checkAnswers(i, at, before, m); err != nil {
				return err
			}
		}
	}
	return nil
}

func historyError(i int, path, format string, args ...any) error {
	return &HistoryError{Index: i, Path: path, Reason: fmt.Sprintf(format, args...)}
}

// other is the role that must follow r.
func other(r Role) Role {
	if r == RoleUser {
		return RoleAssistant
	}
	return RoleUser
}

func article(r Role) string {
	if r == RoleAssistant {
		return "n"
	}
	return ""
}

// checkAnswers checks that the user message m, at index i, answers exactly
// the tool uses of prev, the assistant message before it (nil for none).
func checkAnswers(i int, at string, prev *Message, m Message) error {
	var want []*ToolUseBlock
	if prev != nil {
		want = prev.ToolUses()
	}
	answered := make(map[string]bool, len(want))
	for j, b := range m.Content {
		r := b.ToolResult
		if r == nil {
			continue
		}
		p := fmt.Sprintf("%s.content[%d].toolResult.toolUseId", at, j)
		switch {
		case useOf(want, r.ToolUseID) == nil:
			return historyError(i, p, "%q answers no toolUse of messages[%d], the message before it", r.ToolUseID, i-1)
		case answered[r.ToolUseID]:
			return historyError(i, p, "%q is answered twice in this message", r.ToolUseID)
		}
		answered[r.ToolUseID] = true
	}
	for _, u := range want {
		if !answered[u.ToolUseID] {
			return historyError(i, at+".content", "holds no toolResult for toolUse %q of messages[%d]; every toolUse is answered in the very next message", u.ToolUseID, i-1)
		}
	}
	return nil
}

// checkBlocks checks the blocks of message m, at index i, one by one.
func checkBlocks(i int, at string, m Message) error {
	hasText, docAt := false, -1
	for j, b := range m.Content {
		p := fmt.Sprintf("%s.content[%d]", at, j)
		var members []string
		for name, set := range map[string]bool{
			"text": b.Text != "", "image": b.Image != nil, "document": b.Document != nil,
			"toolUse": b.ToolUse != nil, "toolResult": b.ToolResult != nil, "reasoning": b.Reasoning != nil,
		} {
			if set {
				members = append(members, name)
			}
		}
		slices.Sort(members)
		if len(members) != 1 {
			if len(members) == 0 {
				return historyError(i, p, "a block needs exactly one of text, image, document, toolUse, toolResult or reasoning, and has none (a text block's text is never empty)")
			}
			return historyError(i, p, "a block needs exactly one of text, image, document, toolUse, toolResult or reasoning, and has %s", strings.Join(members, ", "))
		}
		only := func(role Role) error {
			if m.Role != role {
				return historyError(i, p, "a %s block belongs in %s messages, not %s", members[0], role, m.Role)
			}
			return nil
		}
		var err error
		switch {
		case b.Text != "":
			hasText = true
			if strings.TrimSpace(b.Text) == "" {
				err = historyError(i, p+".text", "is blank")
			}
		case b.Image != nil:
			if err = only(RoleUser); err == nil {
				err = checkImage(i, p+".image", b.Image, true)
			}
		case b.Document != nil:
			if docAt < 0 {
				docAt = j
			}
			if err = only(RoleUser); err == nil {
				err = checkDocument(i, p+".document", b.Document, true)
			}
		case b.ToolUse != nil:
			if err = only(RoleAssistant); err == nil {
				err = checkToolUse(i, p+".toolUse", b.ToolUse)
			}
		case b.ToolResult != nil:
			if err = only(RoleUser); err == nil {
				err = checkToolResult(i, p+".toolResult", b.ToolResult)
			}
		case b.Reasoning != nil:
			if err = only(RoleAssistant); err == nil && b.Reasoning.Text == "" && len(b.Reasoning.Redacted) == 0 {
				err = historyError(i, p+".reasoning", "holds neither text nor redacted content")
			}
		}
		if err != nil {
			return err
		}
	}
	if docAt >= 0 && !hasText {
		return historyError(i, fmt.Sprintf("%s.content[%d]", at, docAt), "a document needs a text block in the same message")
	}
	return nil
}

func checkToolUse(i int, p string, u *ToolUseBlock) error {
	switch {
	case !ValidToolName(u.ToolUseID):
		return historyError(i, p+".toolUseId", "%q does not match %s", u.ToolUseID, ToolNameRule)
	case !ValidToolName(u.Name):
		return historyError(i, p+".name", "%q does not match %s", u.Name, ToolNameRule)
	case !bytes.HasPrefix(bytes.TrimSpace(u.Input), []byte("{")):
		return historyError(i, p+".input", "must be a JSON object")
	}
	return nil
}

// ValidateToolResult checks a tool result as every history must hold it,
// whatever made it (a tool, a person's answer, an import): the checks of a
// toolResult in ValidateHistory. It returns nil or a *HistoryError whose
// path starts with "content", such as content[1].image, and whose Index is
// -1.
func ValidateToolResult(r *ToolResultBlock) error {
	err := checkToolResult(-1, "", r)
	if e, ok := err.(*HistoryError); ok {
		e.Path = strings.TrimPrefix(e.Path, ".")
	}
	return err
}

func checkToolResult(i int, p string, r *ToolResultBlock) error {
	switch {
	case r.ToolUseID == "":
		return historyError(i, p+".toolUseId", "is empty")
	case r.Status != "" && r.Status != ToolSuccess && r.Status != ToolError:
		return historyError(i, p+".status", "%q is not %q or %q", r.Status, ToolSuccess, ToolError)
	case len(r.Content) == 0:
		return historyError(i, p+".content", "is empty; a tool result holds at least one part, as Bedrock requires")
	}
	for k, c := range r.Content {
		cp := fmt.Sprintf("%s.content[%d]", p, k)
		n := 0
		for _, set := range []bool{c.Text != "", c.JSON != nil, c.Image != nil, c.Document != nil} {
			if set {
				n++
			}
		}
		var err error
		switch {
		case n != 1:
			err = historyError(i, cp, "a tool result's part needs exactly one of text, json, image or document; it has %d", n)
		case c.Text != "" && strings.TrimSpace(c.Text) == "":
			err = historyError(i, cp+".text", "is blank")
		case c.Image != nil:
			err = checkImage(i, cp+".image", c.Image, false)
		case c.Document != nil:
			err = checkDocument(i, cp+".document", c.Document, false)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// checkImage checks an image of a history: a format and a size Bedrock
// reads, one source, and inline bytes that are of its format, which Bedrock
// checks too. An image the user sent (input) has inline bytes, as
// ValidateInput requires of input; a tool's may come from elsewhere.
func checkImage(i int, p string, img *ImageBlock, input bool) error {
	if err := checkSource(img.Format, imageFormats, img.Source, MaxImageBytes, input); err != nil {
		return historyError(i, p, "%v", err)
	}
	if len(img.Source.Bytes) > 0 {
		if err := checkBytes(img.Format, true, img.Source.Bytes); err != nil {
			return historyError(i, p, "%v", err)
		}
	}
	return nil
}

// checkDocument is checkImage for a document, whose name Bedrock checks
// too.
func checkDocument(i int, p string, d *DocumentBlock, input bool) error {
	if err := checkSource(d.Format, documentFormats, d.Source, MaxDocumentBytes, input); err != nil {
		return historyError(i, p, "%v", err)
	}
	if len(d.Name) > 200 || !documentNamePattern.MatchString(d.Name) {
		return historyError(i, p+".name", "%q must be 1-200 letters, digits, single spaces, hyphens, parentheses or square brackets", d.Name)
	}
	if len(d.Source.Bytes) > 0 {
		if err := checkBytes(d.Format, false, d.Source.Bytes); err != nil {
			return historyError(i, p, "%v", err)
		}
	}
	return nil
}

// checkSource checks the format and source of media: input has inline
// bytes (checkMedia), a tool's result exactly one source of any kind.
func checkSource(format string, formats []string, src Source, maxBytes int, input bool) error {
	if input {
		return checkMedia(format, formats, src, maxBytes)
	}
	if !slices.Contains(formats, format) {
		return fmt.Errorf("format %q is not one of %s", format, strings.Join(formats, ", "))
	}
	n := 0
	for _, set := range []bool{len(src.Bytes) > 0, src.Text != "", src.S3 != nil} {
		if set {
			n++
		}
	}
	switch {
	case n != 1:
		return fmt.Errorf("the source needs exactly one of bytes, text or s3Location; it has %d", n)
	case len(src.Bytes) > maxBytes:
		return fmt.Errorf("%d bytes; at most %d", len(src.Bytes), maxBytes)
	}
	return nil
}
