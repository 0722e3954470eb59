package agent_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/lambda-agent/lambda-agent/internal/agent"
	"github.com/lambda-agent/lambda-agent/internal/testkit/conversetest"
)

// returns is a tool that returns what it is given, as a remote tool might.
type returns struct {
	content []agent.ToolResultContent
	err     error
}

func (r returns) Spec() agent.ToolSpec {
	return agent.ToolSpec{Name: "fetch", Description: "returns what it was given", InputSchema: json.RawMessage(`{"type":"object"}`)}
}

func (r returns) Run(context.Context, *agent.ToolCall) ([]agent.ToolResultContent, error) {
	return r.content, r.err
}

// resultOf runs a turn in which the model calls the tool once, and returns
// the tool's result as the session would store it. The strict stand-in
// fails the test if the model's next request, which carries the result,
// is one Bedrock would refuse.
func resultOf(t *testing.T, cfg agent.Config) *agent.ToolResultBlock {
	t.Helper()
	s := newServer(t)
	s.Enqueue(conversetest.ToolUse("t1", "fetch", map[string]any{}), conversetest.Text("Done."))
	a := newAgent(t, s, cfg)
	res, err := a.Run(t.Context(), &agent.Conversation{}, input("fetch it"))
	if err != nil {
		t.Fatal(err)
	}
	if res.StopReason != agent.StopEndTurn || len(res.Messages) != 4 {
		t.Fatalf("stop %q after %d messages", res.StopReason, len(res.Messages))
	}
	if err := agent.ValidateHistory(res.Messages); err != nil {
		t.Fatalf("the turn stored a history that ValidateHistory refuses: %v", err)
	}
	r := res.Messages[2].Content[0].ToolResult
	sent := s.Requests()[1].Messages[2].Content[0].ToolResult
	if sent == nil || len(sent.Content) != len(r.Content) {
		t.Fatalf("the model was sent %+v, the session keeps %d parts", sent, len(r.Content))
	}
	return r
}

func image(format string, b []byte) agent.ToolResultContent {
	return agent.ToolResultContent{Image: &agent.ImageBlock{Format: format, Source: agent.Source{Bytes: b}}}
}

// sized returns a file of n bytes that begins as head does.
func sized(head []byte, n int) []byte {
	return append(bytes.Clone(head), make([]byte, n-len(head))...)
}

// TestToolResultsPassTheHistoryGate: whatever a tool returns, the model
// gets, and the session keeps, a result Bedrock accepts; what cannot be
// shown becomes an error result that says why, and the turn goes on.
func TestToolResultsPassTheHistoryGate(t *testing.T) {
	tests := []struct {
		name   string
		tool   returns
		status agent.ToolResultStatus
		says   string // in the result's text
	}{
		{"JPEG labelled png", returns{content: []agent.ToolResultContent{{Text: "a chart"}, image("png", conversetest.JPEGStart)}}, agent.ToolError,
			`content[1].image: the bytes are not a PNG image (they look like JPEG); set "format": "jpeg"`},
		{"text labelled pdf", returns{content: []agent.ToolResultContent{{Document: &agent.DocumentBlock{Format: "pdf", Name: "report", Source: agent.Source{Bytes: []byte("just text")}}}}}, agent.ToolError,
			`content[0].document: the bytes are not a PDF document (they look like text)`},
		{"unknown image format", returns{content: []agent.ToolResultContent{image("bmp", []byte("BM"))}}, agent.ToolError,
			`content[0].image: format "bmp" is not one of`},
		{"two members in a part", returns{content: []agent.ToolResultContent{{Text: "a", JSON: json.RawMessage(`{}`)}}}, agent.ToolError,
			"content[0]: a tool result's part needs exactly one of text, json, image or document; it has 2"},
		{"no content", returns{}, agent.ToolSuccess, "The tool returned no output."},
		{"only blank text", returns{content: []agent.ToolResultContent{{Text: " \n"}, {Text: ""}}}, agent.ToolSuccess, "The tool returned no output."},
		{"a failure with an empty message", returns{err: fmt.Errorf("%s", "")}, agent.ToolError, "The tool failed: "},
		{"a good image", returns{content: []agent.ToolResultContent{image("png", conversetest.PNGStart)}}, agent.ToolSuccess, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := resultOf(t, agent.Config{Tools: []agent.Tool{tt.tool}})
			text := ""
			for _, c := range r.Content {
				text += c.Text
			}
			if r.Status != tt.status || !strings.Contains(text, tt.says) {
				t.Errorf("status %q, text %q; want %q saying %q", r.Status, text, tt.status, tt.says)
			}
		})
	}
}

// TestToolResultsAreBounded: a result past the limits reaches the model,
// and the session, cut: the text in the middle with a note of its full
// size, the same way every time; images and documents past their share
// replaced by a note; parts past a hundred left out.
func TestToolResultsAreBounded(t *testing.T) {
	huge := strings.Repeat(`"\`, 10<<20) // 20 MiB of what JSON escapes
	t.Run("20 MiB of text, at the default limit", func(t *testing.T) {
		tool := returns{content: []agent.ToolResultContent{{Text: huge}}}
		r := resultOf(t, agent.Config{Tools: []agent.Tool{tool}})
		again := resultOf(t, agent.Config{Tools: []agent.Tool{tool}})
		if diff := cmp.Diff(r, again); diff != "" {
			t.Errorf("the cut differs from one turn to the next:\n%s", diff)
		}
		got := r.Content[0].Text
		if n := len(got); n > agent.DefaultMaxToolResultBytes+100 || n < agent.DefaultMaxToolResultBytes-100 {
			t.Errorf("the cut result is %d bytes; the limit is %d", n, agent.DefaultMaxToolResultBytes)
		}
		if !strings.Contains(got, fmt.Sprintf("of %d bytes truncated", len(huge))) || !strings.HasPrefix(got, huge[:1000]) || !strings.HasSuffix(got, huge[len(huge)-1000:]) {
			t.Errorf("the cut keeps no head, tail or note of the full size: %.200q", got)
		}
	})
	t.Run("JSON past the limit becomes text", func(t *testing.T) {
		raw, _ := json.Marshal(map[string]string{"page": strings.Repeat("x", 5000)})
		r := resultOf(t, agent.Config{MaxToolResultBytes: 1000, Tools: []agent.Tool{returns{content: []agent.ToolResultContent{{JSON: raw}}}}})
		if c := r.Content[0]; c.JSON != nil || len(c.Text) > 1100 || !strings.Contains(c.Text, fmt.Sprintf("of %d bytes truncated", len(raw))) {
			t.Errorf("part: json %d bytes, text %.200q", len(c.JSON), c.Text)
		}
	})
	t.Run("media past the limit", func(t *testing.T) {
		png := sized(conversetest.PNGStart, 3_000_000)
		r := resultOf(t, agent.Config{Tools: []agent.Tool{returns{content: []agent.ToolResultContent{image("png", png), {Text: "and another"}, image("png", png)}}}})
		if r.Status != agent.ToolSuccess || r.Content[0].Image == nil || r.Content[1].Text != "and another" ||
			r.Content[2].Text != fmt.Sprintf("[an image of 3000000 bytes, left out: the images and documents of one tool result may hold %d bytes in all]", agent.DefaultMaxToolResultMediaBytes) {
			t.Errorf("result %.300v", r.Content)
		}
	})
	t.Run("a thousand parts", func(t *testing.T) {
		var parts []agent.ToolResultContent
		for i := range 1000 {
			parts = append(parts, agent.ToolResultContent{Text: fmt.Sprint(i)})
		}
		r := resultOf(t, agent.Config{Tools: []agent.Tool{returns{content: parts}}})
		if len(r.Content) != 100 || r.Content[98].Text != "98" || r.Content[99].Text != "[901 more parts, left out: a tool result may hold 100 parts]" {
			t.Errorf("%d parts, the last %q", len(r.Content), r.Content[len(r.Content)-1].Text)
		}
	})
}

// TestHookResultsPassTheGate: a hook that replaces a result cannot slip
// past the gate either.
func TestHookResultsPassTheGate(t *testing.T) {
	hooks := agent.Hooks{AfterToolCall: []func(context.Context, *agent.AfterToolCallEvent){
		func(_ context.Context, ev *agent.AfterToolCallEvent) {
			ev.Result = &agent.ToolResultBlock{ToolUseID: ev.Use.ToolUseID, Status: agent.ToolSuccess, Content: []agent.ToolResultContent{image("gif", conversetest.PNGStart)}}
		},
	}}
	r := resultOf(t, agent.Config{Hooks: hooks, Tools: []agent.Tool{returns{content: []agent.ToolResultContent{{Text: "fine"}}}}})
	if r.Status != agent.ToolError || !strings.Contains(r.Content[0].Text, "content[0].image: the bytes are not a GIF image (they look like PNG)") {
		t.Errorf("result %+v", r.Content)
	}
}

// TestLongAnswersAreCut: a person's answer to ask_user is a tool result
// like any other, bounded the same way.
func TestLongAnswersAreCut(t *testing.T) {
	s := newServer(t)
	s.Enqueue(conversetest.ToolUse("q1", "ask_user", map[string]any{"question": "Paste the log?"}))
	a := newAgent(t, s, agent.Config{MaxToolResultBytes: 2000, Tools: []agent.Tool{agent.AskUser()}})
	conv := &agent.Conversation{}
	res, err := a.Run(t.Context(), conv, input("Look at my log"))
	if err != nil || res.Pending == nil {
		t.Fatalf("pending %v, %v", res, err)
	}
	conv = committed(t, conv, res)
	log := strings.Repeat("line\n", 10000)
	res, err = a.Answer(t.Context(), conv, []agent.Response{{InterruptID: "q1", Answer: log}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	got := res.Messages[0].Content[0].ToolResult.Content[0].Text
	if len(got) > 2100 || !strings.Contains(got, fmt.Sprintf("of %d bytes truncated", len(log))) {
		t.Errorf("the stored answer is %d bytes: %.100q", len(got), got)
	}
}
