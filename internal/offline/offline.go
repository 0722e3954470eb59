// Package offline is a model for the local run without an AWS account: the
// strict Converse stand-in, answering with canned replies that show the
// machinery at work. It echoes, says how many messages it saw, does
// arithmetic with the calculator tool, remembers and recalls with the memory
// tools, tells the time, writes summaries, and answers structured requests
// with an object built from their schema.
package offline

import (
	"encoding/json"
	"fmt"
	"regexp"
	"strings"
	"time"

	"github.com/lambda-agent/lambda-agent/internal/conversetest"
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
	arithmetic = regexp.MustCompile(`[-+(]*\d[\d.\s]*(?:[-+*/%^×÷][\s(]*[-+]?\d[\d.\s)]*)+`)
	rememberRe = regexp.MustCompile(`(?i)remember (?:that )?my ([\w ]+?) is ([^.!?]+)`)
	recallRe   = regexp.MustCompile(`(?i)what(?:'s| is) my ([\w ]+?)\??$`)
	timeRe     = regexp.MustCompile(`(?i)\b(?:what time|time is it|the time|date today)\b`)
)

// Respond answers one Converse request.
func Respond(req *conversetest.Request) conversetest.Reply {
	tools := toolNames(req)
	if tc := req.ToolConfig; tc != nil && tc.ToolChoice != nil && tc.ToolChoice.Tool != nil {
		return structured(req, tc.ToolChoice.Tool.Name)
	}
	if len(tools) == 0 && len(req.System) > 0 && strings.Contains(req.System[0].Text, "summarize") {
		return conversetest.Text(fmt.Sprintf("(offline summary) The conversation had %d lines before this point.", strings.Count(req.Messages[0].Text(), "\n")))
	}
	last := req.Messages[len(req.Messages)-1]
	if results := toolResults(last); len(results) > 0 {
		return conversetest.Text("Here is what the tools returned: " + strings.Join(results, "; ") + ".")
	}
	text := strings.TrimSpace(last.Text())
	id := fmt.Sprintf("offline-%d", len(req.Messages))
	switch {
	case tools["remember"] && rememberRe.MatchString(text):
		m := rememberRe.FindStringSubmatch(text)
		return conversetest.Text("I'll remember that.").WithToolUse(id, "remember", map[string]string{"key": key(m[1]), "value": strings.TrimSpace(m[2])})
	case tools["recall"] && recallRe.MatchString(text):
		m := recallRe.FindStringSubmatch(text)
		return conversetest.Text("Let me check my memory.").WithToolUse(id, "recall", map[string]string{"key": key(m[1])})
	case tools["current_time"] && timeRe.MatchString(text):
		return conversetest.ToolUse(id, "current_time", map[string]string{})
	case tools["calculator"] && arithmetic.MatchString(text):
		expr := strings.TrimSpace(arithmetic.FindString(text))
		return conversetest.Text("Let me calculate that.").WithToolUse(id, "calculator", map[string]string{"expression": expr})
	}
	return conversetest.Text(fmt.Sprintf("You said: %q. I have seen %d messages in this conversation. (This is the offline model; with AWS credentials the local run talks to Bedrock.)", clip(text, 200), len(req.Messages)))
}

func key(s string) string { return strings.ReplaceAll(strings.ToLower(strings.TrimSpace(s)), " ", "_") }

func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}

func toolNames(req *conversetest.Request) map[string]bool {
	names := map[string]bool{}
	if req.ToolConfig != nil {
		for _, t := range req.ToolConfig.Tools {
			if t.ToolSpec != nil {
				names[t.ToolSpec.Name] = true
			}
		}
	}
	return names
}

func toolResults(m conversetest.Message) []string {
	var out []string
	for _, b := range m.Content {
		if r := b.ToolResult; r != nil {
			for _, c := range r.Content {
				switch {
				case c.Text != "":
					out = append(out, c.Text)
				case c.JSON != nil:
					var calc struct {
						Expression string   `json:"expression"`
						Result     *float64 `json:"result"`
					}
					if json.Unmarshal(c.JSON, &calc) == nil && calc.Result != nil {
						out = append(out, fmt.Sprintf("%s = %g", calc.Expression, *calc.Result))
					} else {
						out = append(out, string(c.JSON))
					}
				}
			}
		}
	}
	return out
}

// structured answers a request that forces a tool with an object built from
// the tool's schema, so that structured output works offline too.
func structured(req *conversetest.Request, name string) conversetest.Reply {
	for _, t := range req.ToolConfig.Tools {
		if t.ToolSpec != nil && t.ToolSpec.Name == name {
			var schema map[string]any
			_ = json.Unmarshal(t.ToolSpec.InputSchema.JSON, &schema) // the stand-in checked it is an object
			return conversetest.ToolUse(fmt.Sprintf("offline-%d", len(req.Messages)), name, Example(schema))
		}
	}
	return conversetest.Text("I cannot find the tool I am asked to use.")
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
