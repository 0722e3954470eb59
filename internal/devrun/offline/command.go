package offline

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"unicode"

	"github.com/lambda-agent/lambda-agent/internal/testkit/conversetest"
)

// parseCommand parses "/tool NAME {JSON input}". The input may be left out,
// for a tool without required properties. ok is false when text is not the
// command.
func parseCommand(text string) (name, input string, ok bool) {
	rest, ok := strings.CutPrefix(text, "/tool")
	if !ok || rest != "" && !unicode.IsSpace(rune(rest[0])) {
		return "", "", false
	}
	rest = strings.TrimSpace(rest)
	end := strings.IndexFunc(rest, func(r rune) bool { return unicode.IsSpace(r) || r == '{' })
	if end < 0 {
		end = len(rest)
	}
	return rest[:end], strings.TrimSpace(rest[end:]), true
}

// command answers "/tool NAME {JSON input}" with a call to the tool, or says
// why it cannot: no such tool among those offered, or an input that is not a
// JSON object. The agent checks the input against the tool's schema, so the
// model does not.
func command(req *conversetest.Request, tools []string, name, input string) conversetest.Reply {
	switch {
	case name == "":
		text := "To call a tool, send /tool NAME {JSON input}."
		if len(tools) > 0 {
			text += " For example: " + exampleCommand(req, tools[0]) + "."
		}
		return conversetest.Text(text + " " + toolList(tools))
	case !slices.Contains(tools, name):
		return conversetest.Text(fmt.Sprintf("There is no tool named %q here. %s", name, toolList(tools)))
	}
	if input == "" {
		input = "{}"
	}
	var v any
	if err := json.Unmarshal([]byte(input), &v); err != nil {
		return conversetest.Text(fmt.Sprintf("The input for %s is not valid JSON (%v). Send a JSON object, such as: %s", name, err, exampleCommand(req, name)))
	}
	if _, ok := v.(map[string]any); !ok {
		return conversetest.Text(fmt.Sprintf("The input for %s must be a JSON object, such as: %s", name, exampleCommand(req, name)))
	}
	return conversetest.Text("Calling the "+name+" tool.").WithToolUse(newID(req), name, json.RawMessage(input))
}

// toolList says which tools are offered: "I have 2 tools: calculator, weather."
func toolList(tools []string) string {
	if len(tools) == 0 {
		return "I have no tools in this conversation."
	}
	return "I have " + count(len(tools), "tool") + ": " + strings.Join(tools, ", ") + "."
}

// exampleCommand returns a command that calls the tool with an input built
// from its schema, such as /tool weather {"city":"example"}.
func exampleCommand(req *conversetest.Request, name string) string {
	in := []byte("{}")
	if schema, ok := inputSchema(req, name); ok {
		if b, err := json.Marshal(Example(schema)); err == nil && b[0] == '{' {
			in = b
		}
	}
	return "/tool " + name + " " + string(in)
}
