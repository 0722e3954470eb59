package agent

import (
	"fmt"
	"strings"
)

// Defaults for the limits on one tool result (Config.MaxToolResultBytes and
// Config.MaxToolResultMediaBytes). The text default is about 16,000 tokens:
// a small part of any model's context, and of a stored item (400 KB). The
// media default is one image as large as Bedrock takes, which a buffered
// answer can still carry whole (see internal/httpapi).
const (
	DefaultMaxToolResultBytes      = 64 << 10
	DefaultMaxToolResultMediaBytes = MaxImageBytes
)

// maxResultParts bounds the parts of one tool result: each part costs the
// model and the store something however small it is.
const maxResultParts = 100

// admit makes a tool's result one that may enter a history, whoever made
// it (a tool, a hook, a person's answer): the only gate between what comes
// from outside and what the model sees and the store keeps.
//
//   - Blank text parts are dropped; a result left with no parts says so.
//   - Parts past maxResultParts are replaced by a note of how many.
//   - Images and documents past MaxToolResultMediaBytes, together, are
//     replaced by a note of their size.
//   - Text and JSON past MaxToolResultBytes, together, are cut in the
//     middle, the same way every time, with a note of their full size.
//   - What is left must pass ValidateToolResult, the rule of every stored
//     history; a result that does not is replaced by an error result that
//     says what was wrong, so that the model can tell the person, and the
//     turn goes on.
//
// The session stores what the model saw: the cut result, never the whole.
func (a *Agent) admit(r *ToolResultBlock) *ToolResultBlock {
	if r == nil {
		return nil
	}
	out := &ToolResultBlock{ToolUseID: r.ToolUseID, Status: r.Status, Content: make([]ToolResultContent, 0, min(len(r.Content), maxResultParts))}
	media, dropped := 0, 0
	for _, c := range r.Content {
		if c.JSON == nil && c.Image == nil && c.Document == nil && strings.TrimSpace(c.Text) == "" {
			continue
		}
		if len(out.Content) == maxResultParts-1 {
			dropped++
			continue
		}
		if n := c.mediaSize(); n > 0 {
			if media+n > a.cfg.MaxToolResultMediaBytes {
				c = ToolResultContent{Text: fmt.Sprintf("[%s of %d bytes, left out: the images and documents of one tool result may hold %d bytes in all]", c.mediaKind(), n, a.cfg.MaxToolResultMediaBytes)}
			} else {
				media += n
			}
		}
		out.Content = append(out.Content, c)
	}
	switch {
	case dropped > 0:
		out.Content = append(out.Content, ToolResultContent{Text: fmt.Sprintf("[%d more parts, left out: a tool result may hold %d parts]", dropped, maxResultParts)})
	case len(out.Content) == 0 && r.Status == ToolError:
		out.Content = []ToolResultContent{{Text: "The tool failed, without saying why."}}
	case len(out.Content) == 0:
		out.Content = []ToolResultContent{{Text: "The tool returned no output."}}
	}
	if out.textSize() > a.cfg.MaxToolResultBytes {
		out = truncateResult(out, a.cfg.MaxToolResultBytes)
	}
	if err := ValidateToolResult(out); err != nil {
		out = TextResult(r.ToolUseID, ToolError, "The tool's result was refused, so it is not shown: "+err.Error())
	}
	out.MessageID = r.MessageID
	return out
}

// mediaSize is the size of the part's image or document, or 0.
func (c ToolResultContent) mediaSize() int {
	switch {
	case c.Image != nil:
		return max(c.Image.Source.size(), 1)
	case c.Document != nil:
		return max(c.Document.Source.size(), 1)
	}
	return 0
}

func (c ToolResultContent) mediaKind() string {
	if c.Image != nil {
		return "an image"
	}
	return "a document"
}

// textSize is the size of the result's text and JSON.
func (r *ToolResultBlock) textSize() int {
	n := 0
	for _, c := range r.Content {
		n += len(c.Text) + len(c.JSON)
	}
	return n
}

// Include adds to r what earlier, a part of the same turn that came
// before it, used: Answer's, whose resumed delegations call models,
// before Continue's. Usage, by agent too, and the metrics' counts and
// runs add up; Cycles stays r's.
func (r *Result) Include(earlier *Result) {
	if earlier.AgentUsage != nil || r.AgentUsage != nil {
		sum := map[string]Usage{}
		for _, x := range []*Result{earlier, r} {
			if x.AgentUsage == nil { // it delegated nothing
				addUsages(sum, map[string]Usage{MainAgent: x.Usage})
			} else {
				addUsages(sum, x.AgentUsage)
			}
		}
		r.AgentUsage = sum
	}
	r.Usage.add(earlier.Usage)
	m := earlier.Metrics // its work first
	m.addWork(r.Metrics)
	m.Cycles = r.Metrics.Cycles
	m.Reductions += r.Metrics.Reductions
	m.Duration += r.Metrics.Duration
	r.Metrics = m
}
