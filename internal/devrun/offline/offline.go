package offline

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/lambda-agent/lambda-agent/internal/testkit/conversetest"
)

// NewServer starts the offline model: a Converse and ConverseStream
// endpoint on a loopback port that the real SDK client reaches through its
// endpoint setting. Streamed answers come a few words at a time, at about
// the pace of a real model, so that the chat page shows them arriving.
func NewServer() *conversetest.Server {
	s := conversetest.NewServer()
	s.Responder = func(req *conversetest.Request) conversetest.Reply {
		return Respond(req).WithChunking(StreamChunkBytes, StreamChunkDelay)
	}
	return s
}

// The offline model's pace when it streams.
const (
	StreamChunkBytes = 12
	StreamChunkDelay = 15 * time.Millisecond
)

var (
	rememberRe = regexp.MustCompile(`(?i)remember (?:that )?my ([\w ]+?) is ([^.!?]+)`)
	recallRe   = regexp.MustCompile(`(?i)what(?:'s| is) my ([\w ]+?)\??$`)
	timeRe     = regexp.MustCompile(`(?i)\b(?:what time|time is it|the time|date today)\b`)
)

// Respond answers one Converse request, in the ways the package comment
// lists. It is safe for concurrent use.
func Respond(req *conversetest.Request) conversetest.Reply {
	tools := req.ToolNames()
	if tc := req.ToolConfig; tc != nil && tc.ToolChoice != nil && tc.ToolChoice.Tool != nil {
		if reply, ok := extraction(req, tc.ToolChoice.Tool.Name); ok {
			return reply
		}
		return structured(req, tc.ToolChoice.Tool.Name)
	}
	if len(tools) == 0 && len(req.System) > 0 && strings.Contains(req.System[0].Text, "summarize") {
		return conversetest.Text("(offline summary) The conversation had " + count(transcriptLines(req.Messages[0].Text()), "line") + " before this point.")
	}
	last := req.Messages[len(req.Messages)-1]
	// The context the application adds, such as what memory recalled, is
	// not the person's words.
	text, context := personText(last)
	text = strings.TrimSpace(text)
	// A user message with text as well as results answers tool uses that
	// were interrupted; the text is what to answer then.
	if text == "" && hasToolResults(last) {
		return conversetest.Text(report(req))
	}
	if name, input, ok := parseCommand(text); ok {
		return command(req, tools, name, input)
	}
	if answer, ok := fromMemory(req, text, recalledRecords(context)); ok {
		return conversetest.Text(answer)
	}
	offered := func(name string) bool { return slices.Contains(tools, name) }
	switch {
	case offered("remember") && rememberRe.MatchString(text):
		m := rememberRe.FindStringSubmatch(text)
		return conversetest.Text("I'll remember that.").WithToolUse(newID(req), "remember", map[string]string{"key": key(m[1]), "value": strings.TrimSpace(m[2])})
	case offered("recall") && recallRe.MatchString(text):
		m := recallRe.FindStringSubmatch(text)
		return conversetest.Text("Let me check my memory.").WithToolUse(newID(req), "recall", map[string]string{"key": key(m[1])})
	case offered("current_time") && timeRe.MatchString(text):
		return conversetest.ToolUse(newID(req), "current_time", map[string]string{})
	case offered("calculator"):
		if expr, ok := expression(text); ok {
			return conversetest.Text("Let me calculate that.").WithToolUse(newID(req), "calculator", map[string]string{"expression": expr})
		}
	}
	return conversetest.Text(sentence(fmt.Sprintf("You said: %q", clip(text, 200))) +
		" I have seen " + count(len(req.Messages), "message") + " in this conversation." +
		" (This is the offline model; with AWS credentials the local run talks to Bedrock.)")
}

// newID returns the id of the tool use that answers req. Ids must be unique
// within a session: a hash of the messages is, since a session's history
// only grows, while a count would repeat once the window slides. And the
// same conversation gets the same ids, so that the docs' examples can
// name them.
func newID(req *conversetest.Request) string {
	raw, _ := json.Marshal(req.Messages) // decoded from JSON, so it encodes
	sum := sha256.Sum256(raw)
	return "tooluse_" + hex.EncodeToString(sum[:8])
}

func key(s string) string { return strings.ReplaceAll(strings.ToLower(strings.TrimSpace(s)), " ", "_") }

// clip cuts s to at most n bytes, at a character boundary, marking the cut.
func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "..."
}

// count returns n and the noun, in the plural unless n is 1: "1 message",
// "2 messages".
func count(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}

// sentence ends s with a period unless it ends with a sentence's punctuation
// already, possibly inside quotes or brackets: `said "Hi."` stays as it is.
func sentence(s string) string {
	s = strings.TrimRight(s, " \t\n")
	end := strings.TrimRight(s, `"')]”’»`)
	if strings.HasSuffix(end, ".") || strings.HasSuffix(end, "!") || strings.HasSuffix(end, "?") || strings.HasSuffix(end, "…") {
		return s
	}
	return s + "."
}

// transcriptLines counts the lines of the conversation in a summarizer's
// transcript, after its heading when it has one.
func transcriptLines(transcript string) int {
	if _, conv, ok := strings.Cut(transcript, "Conversation to summarize:\n"); ok {
		transcript = conv
	}
	n := 0
	for line := range strings.Lines(transcript) {
		if strings.TrimSpace(line) != "" {
			n++
		}
	}
	return n
}

func hasToolResults(m conversetest.Message) bool {
	for _, b := range m.Content {
		if b.ToolResult != nil {
			return true
		}
	}
	return false
}

// report answers the results of the tools, one sentence each, such as
// "The calculator tool returned: 25*48 = 1200."
func report(req *conversetest.Request) string {
	uses := map[string]*conversetest.ToolUseBlock{} // by tool use id
	if n := len(req.Messages); n >= 2 {
		for _, b := range req.Messages[n-2].Content {
			if u := b.ToolUse; u != nil {
				uses[u.ToolUseID] = u
			}
		}
	}
	var out []string
	for _, b := range req.Messages[len(req.Messages)-1].Content {
		r := b.ToolResult
		if r == nil {
			continue
		}
		if s, ok := denial(uses[r.ToolUseID], r); ok {
			out = append(out, s)
			continue
		}
		who := "A tool"
		if u, ok := uses[r.ToolUseID]; ok {
			who = "The " + u.Name + " tool"
		}
		verb := "returned"
		if r.Status == "error" {
			verb = "reported an error"
		}
		out = append(out, sentence(fmt.Sprintf("%s %s: %s", who, verb, resultText(r))))
	}
	return strings.Join(out, " ")
}

// The start of the result the agent gives a tool use that a person denied,
// and of the message they may have added to it. A model reads the result's
// text, and so does this one.
const (
	deniedText       = "A person denied this tool call."
	deniedMessageTag = "Their message:"
)

// denial says plainly that the person denied the use, such as "You denied
// the calculation of 99/3, so I did not calculate it. Your message: Not
// today." ok is false when r is not a denial.
func denial(u *conversetest.ToolUseBlock, r *conversetest.ToolResultBlock) (string, bool) {
	if r.Status != "error" || len(r.Content) == 0 {
		return "", false
	}
	rest, ok := strings.CutPrefix(strings.TrimSpace(r.Content[0].Text), deniedText)
	if !ok {
		return "", false
	}
	var s string
	var calc struct {
		Expression string `json:"expression"`
	}
	switch {
	case u == nil:
		s = "You denied a tool call, so it did not run."
	case u.Name == "calculator" && json.Unmarshal(u.Input, &calc) == nil && calc.Expression != "":
		s = fmt.Sprintf("You denied the calculation of %s, so I did not calculate it.", calc.Expression)
	default:
		s = fmt.Sprintf("You denied the call to the %s tool, so it did not run.", u.Name)
	}
	if msg, ok := strings.CutPrefix(strings.TrimSpace(rest), deniedMessageTag); ok && strings.TrimSpace(msg) != "" {
		s += " " + sentence("Your message: "+strings.TrimSpace(msg))
	}
	return s, true
}

// resultText renders a tool result's content; a calculator's result reads
// "25*48 = 1200".
func resultText(r *conversetest.ToolResultBlock) string {
	var parts []string
	for _, c := range r.Content {
		switch {
		case c.Text != "":
			parts = append(parts, strings.TrimSpace(c.Text))
		case c.JSON != nil:
			var calc struct {
				Expression string       `json:"expression"`
				Result     *json.Number `json:"result"`
			}
			var compact bytes.Buffer
			switch {
			case json.Unmarshal(c.JSON, &calc) == nil && calc.Result != nil:
				parts = append(parts, fmt.Sprintf("%s = %s", calc.Expression, *calc.Result))
			case json.Compact(&compact, c.JSON) == nil:
				parts = append(parts, compact.String())
			default:
				parts = append(parts, string(c.JSON))
			}
		case c.Image != nil:
			parts = append(parts, "an image")
		case c.Document != nil:
			parts = append(parts, "a document")
		}
	}
	if len(parts) == 0 {
		return "nothing"
	}
	for i, p := range parts[:len(parts)-1] {
		parts[i] = strings.TrimSuffix(p, ".") // the parts are joined by "; "
	}
	return strings.Join(parts, "; ")
}

// structured answers a request that forces a tool with an object built from
// the tool's schema, so that structured output works offline too.
func structured(req *conversetest.Request, name string) conversetest.Reply {
	if schema, ok := inputSchema(req, name); ok {
		return conversetest.ToolUse(newID(req), name, Example(schema))
	}
	return conversetest.Text("I cannot find the tool I am asked to use.")
}

// inputSchema returns the input schema of the tool offered under name.
func inputSchema(req *conversetest.Request, name string) (map[string]any, bool) {
	if req.ToolConfig == nil {
		return nil, false
	}
	for _, t := range req.ToolConfig.Tools {
		if t.ToolSpec != nil && t.ToolSpec.Name == name {
			var schema map[string]any
			_ = json.Unmarshal(t.ToolSpec.InputSchema.JSON, &schema) // the stand-in checked it is an object
			return schema, true
		}
	}
	return nil, false
}

// Example returns a value that satisfies common JSON Schemas: the first enum
// or const value, the minimum of a number, the required properties of an
// object, minItems items of an array, a string of minLength.
func Example(schema map[string]any) any {
	if v, ok := schema["const"]; ok {
		return v
	}
	if e, ok := schema["enum"].([]any); ok && len(e) > 0 {
		return e[0]
	}
	for _, k := range []string{"anyOf", "oneOf", "allOf"} {
		if alts, ok := schema[k].([]any); ok && len(alts) > 0 {
			if alt, ok := alts[0].(map[string]any); ok {
				return Example(alt)
			}
		}
	}
	typ := schema["type"]
	if list, ok := typ.([]any); ok && len(list) > 0 {
		typ = list[0]
		if typ == "null" && len(list) > 1 {
			typ = list[1]
		}
	}
	num := func(v any) float64 { f, _ := v.(float64); return f }
	switch typ {
	case "object":
		out := map[string]any{}
		props, _ := schema["properties"].(map[string]any)
		req, _ := schema["required"].([]any)
		for _, r := range req {
			name, _ := r.(string)
			if p, ok := props[name].(map[string]any); ok {
				out[name] = Example(p)
			} else {
				out[name] = "example"
			}
		}
		return out
	case "array":
		item, _ := schema["items"].(map[string]any)
		out := []any{}
		for range int(num(schema["minItems"])) {
			out = append(out, Example(item))
		}
		return out
	case "integer":
		if m, ok := schema["minimum"]; ok {
			return int(num(m))
		}
		return 1
	case "number":
		if m, ok := schema["minimum"]; ok {
			return num(m)
		}
		return 1.5
	case "boolean":
		return true
	case "null":
		return nil
	}
	s := "example"
	for len(s) < int(num(schema["minLength"])) {
		s += " example"
	}
	return s
}
