package agent_test

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/lambda-agent/lambda-agent/internal/agent"
)

func use(id, name, input string) agent.ContentBlock {
	return agent.ContentBlock{ToolUse: &agent.ToolUseBlock{ToolUseID: id, Name: name, Input: json.RawMessage(input)}}
}

func result(id string) agent.ContentBlock {
	return agent.ContentBlock{ToolResult: agent.TextResult(id, agent.ToolSuccess, "42")}
}

func msg(role agent.Role, blocks ...agent.ContentBlock) agent.Message {
	return agent.Message{Role: role, Content: blocks}
}

// TestValidateHistory checks each rule with a history that breaks it, and
// that the error names the element at fault.
func TestValidateHistory(t *testing.T) {
	u, a := agent.RoleUser, agent.RoleAssistant
	png := []byte("\x89PNG\r\n\x1a\n0000")
	valid := []agent.Message{
		agent.UserText("what is 6*7?"),
		msg(a, agent.Text("Let me see."), use("t1", "calculator", `{"expression":"6*7"}`), use("t2", "calculator", `{}`)),
		msg(u, result("t2"), result("t1")),
		agent.AssistantText("42."),
		msg(u, agent.Text("and this?"), agent.ContentBlock{Image: &agent.ImageBlock{Format: "png", Source: agent.Source{Bytes: png}}}),
		msg(a, agent.ContentBlock{Reasoning: &agent.ReasoningBlock{Text: "hm", Signature: "sig"}}, agent.Text("A picture.")),
	}
	tests := []struct {
		name string
		msgs []agent.Message
		path string // of the error; "" for none
		says string
	}{
		{name: "valid", msgs: valid},
		{name: "empty", msgs: nil},
		{name: "paused: the last message's tool uses wait", msgs: []agent.Message{agent.UserText("hi"), msg(a, use("t1", "ask_user", `{"question":"which?"}`))}},
		{name: "ends with results", msgs: []agent.Message{agent.UserText("hi"), msg(a, use("t1", "calculator", `{}`)), msg(u, result("t1"))}},
		{name: "assistant first", msgs: []agent.Message{agent.AssistantText("hi")}, path: "messages[0].role", says: "must start with a user message"},
		{name: "two users", msgs: []agent.Message{agent.UserText("a"), agent.UserText("b")}, path: "messages[1].role", says: `must be "assistant" after a user message`},
		{name: "two assistants", msgs: []agent.Message{agent.UserText("a"), agent.AssistantText("b"), agent.AssistantText("c")}, path: "messages[2].role", says: `must be "user" after an assistant message`},
		{name: "unknown role", msgs: []agent.Message{{Role: "system", Content: []agent.ContentBlock{agent.Text("x")}}}, path: "messages[0].role", says: `"system" is not`},
		{name: "no content", msgs: []agent.Message{{Role: u}}, path: "messages[0].content", says: "is empty"},
		{name: "empty block", msgs: []agent.Message{msg(u, agent.ContentBlock{})}, path: "messages[0].content[0]", says: "has none"},
		{name: "two members", msgs: []agent.Message{msg(u, agent.ContentBlock{Text: "x", ToolResult: agent.TextResult("t", "", "x")})}, path: "messages[0].content[0]", says: "text, toolResult"},
		{name: "blank text", msgs: []agent.Message{agent.UserText("  \n")}, path: "messages[0].content[0].text", says: "blank"},
		{name: "unanswered tool use", msgs: []agent.Message{agent.UserText("a"), msg(a, use("t1", "calculator", `{}`)), agent.UserText("b")}, path: "messages[2].content", says: `no toolResult for toolUse "t1" of messages[1]`},
		{name: "one of two answered", msgs: []agent.Message{agent.UserText("a"), msg(a, use("t1", "calculator", `{}`), use("t2", "calculator", `{}`)), msg(u, result("t1"))}, path: "messages[2].content", says: `"t2"`},
		{name: "orphan result", msgs: []agent.Message{agent.UserText("a"), agent.AssistantText("b"), msg(u, result("t9"))}, path: "messages[2].content[0].toolResult.toolUseId", says: `"t9" answers no toolUse of messages[1]`},
		{name: "result first", msgs: []agent.Message{msg(u, result("t9"))}, path: "messages[0].content[0].toolResult.toolUseId", says: "answers no toolUse"},
		{name: "answered twice", msgs: []agent.Message{agent.UserText("a"), msg(a, use("t1", "calculator", `{}`)), msg(u, result("t1"), result("t1"))}, path: "messages[2].content[1].toolResult.toolUseId", says: "twice"},
		{name: "duplicate tool use id", msgs: []agent.Message{agent.UserText("a"), msg(a, use("t1", "calculator", `{}`)), msg(u, result("t1")), msg(a, use("t1", "calculator", `{}`))}, path: "messages[3].content[0].toolUse.toolUseId", says: "used before, at messages[1].content[0]"},
		{name: "tool use by the user", msgs: []agent.Message{msg(u, use("t1", "calculator", `{}`))}, path: "messages[0].content[0]", says: "toolUse block belongs in assistant messages"},
		{name: "tool result by the assistant", msgs: []agent.Message{agent.UserText("a"), msg(a, result("t1"))}, path: "messages[1].content[0]", says: "toolResult block belongs in user messages"},
		{name: "image by the assistant", msgs: []agent.Message{agent.UserText("a"), msg(a, agent.ContentBlock{Image: &agent.ImageBlock{Format: "png", Source: agent.Source{Bytes: png}}})}, path: "messages[1].content[0]", says: "image block belongs in user messages"},
		{name: "reasoning by the user", msgs: []agent.Message{msg(u, agent.ContentBlock{Reasoning: &agent.ReasoningBlock{Text: "x"}})}, path: "messages[0].content[0]", says: "reasoning block belongs in assistant"},
		{name: "bad tool use id", msgs: []agent.Message{agent.UserText("a"), msg(a, use("t 1", "calculator", `{}`))}, path: "messages[1].content[0].toolUse.toolUseId", says: "does not match"},
		{name: "bad tool name", msgs: []agent.Message{agent.UserText("a"), msg(a, use("t1", "calc.v2", `{}`))}, path: "messages[1].content[0].toolUse.name", says: "does not match"},
		{name: "input not an object", msgs: []agent.Message{agent.UserText("a"), msg(a, use("t1", "calculator", `[1]`))}, path: "messages[1].content[0].toolUse.input", says: "JSON object"},
		{name: "bad result status", msgs: []agent.Message{agent.UserText("a"), msg(a, use("t1", "calculator", `{}`)), msg(u, agent.ContentBlock{ToolResult: agent.TextResult("t1", "done", "x")})}, path: "messages[2].content[0].toolResult.status", says: `"done"`},
		{name: "empty result part", msgs: []agent.Message{agent.UserText("a"), msg(a, use("t1", "calculator", `{}`)), msg(u, agent.ContentBlock{ToolResult: &agent.ToolResultBlock{ToolUseID: "t1", Content: []agent.ToolResultContent{{}}}})}, path: "messages[2].content[0].toolResult.content[0]", says: "exactly one"},
		{name: "image format", msgs: []agent.Message{msg(u, agent.ContentBlock{Image: &agent.ImageBlock{Format: "bmp", Source: agent.Source{Bytes: png}}})}, path: "messages[0].content[0].image", says: `"bmp"`},
		{name: "image bytes", msgs: []agent.Message{msg(u, agent.ContentBlock{Image: &agent.ImageBlock{Format: "jpeg", Source: agent.Source{Bytes: png}}})}, path: "messages[0].content[0].image", says: "PNG"},
		{name: "document alone", msgs: []agent.Message{msg(u, agent.ContentBlock{Document: &agent.DocumentBlock{Format: "txt", Name: "notes", Source: agent.Source{Bytes: []byte("hello")}}})}, path: "messages[0].content[0]", says: "needs a text block"},
		{name: "document name", msgs: []agent.Message{msg(u, agent.Text("see"), agent.ContentBlock{Document: &agent.DocumentBlock{Format: "txt", Name: "notes.txt", Source: agent.Source{Bytes: []byte("hello")}}})}, path: "messages[0].content[1].document.name", says: "letters, digits"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := agent.ValidateHistory(tt.msgs)
			if tt.path == "" {
				if err != nil {
					t.Fatalf("a valid history refused: %v", err)
				}
				return
			}
			var he *agent.HistoryError
			if !errors.As(err, &he) || !errors.Is(err, agent.ErrInvalidHistory) {
				t.Fatalf("err = %v, want a *HistoryError", err)
			}
			if he.Path != tt.path || !strings.Contains(he.Reason, tt.says) || !strings.HasPrefix(err.Error(), tt.path+": ") {
				t.Errorf("err = %q (path %q), want path %q saying %q", err, he.Path, tt.path, tt.says)
			}
			if want := tt.path[len("messages[") : len("messages[")+1]; he.Index != int(want[0]-'0') {
				t.Errorf("Index = %d, want %s", he.Index, want)
			}
		})
	}
}

// TestValidateHistoryAcceptsRepaired: every history that Repair returns,
// which is what Bedrock is sent, passes, whatever it was made from.
func TestValidateHistoryAcceptsRepaired(t *testing.T) {
	u, a := agent.RoleUser, agent.RoleAssistant
	broken := [][]agent.Message{
		{agent.AssistantText("hi"), agent.AssistantText("again")},
		{agent.UserText("a"), msg(a, use("t1", "calculator", `{}`)), agent.UserText("b")},
		{agent.UserText("a"), agent.AssistantText("b"), msg(u, result("t9"))},
		{agent.UserText("a"), msg(a, use("t1", "calculator", `{}`)), msg(u, result("t1")), msg(a, use("t1", "calculator", `{}`)), msg(u, result("t1"))},
		{agent.UserText("a"), msg(a, use("t1", "calculator", `{}`))},
	}
	for i, msgs := range broken {
		if err := agent.ValidateHistory(agent.Repair(msgs)); err != nil {
			t.Errorf("history %d, repaired: %v", i, err)
		}
	}
}
