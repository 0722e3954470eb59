package conversetest_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/service/bedrockruntime"
	"github.com/aws/aws-sdk-go-v2/service/bedrockruntime/document"
	"github.com/aws/aws-sdk-go-v2/service/bedrockruntime/types"
	"github.com/aws/smithy-go"
	"github.com/google/go-cmp/cmp"

	"github.com/lambda-agent/lambda-agent/internal/testkit/conversetest"
)

// jsonAsValue compares json.RawMessage by meaning, not by formatting.
var jsonAsValue = cmp.Transformer("json", func(r json.RawMessage) any {
	var v any
	if err := json.Unmarshal(r, &v); err != nil {
		return string(r)
	}
	return v
})

func TestConverseRoundTrip(t *testing.T) {
	srv := newServer(t)
	client := srv.Client()
	png := []byte("\x89PNG\r\n\x1a\nnot really a picture")
	chart := []byte("GIF89a chart")
	const arn = "arn:aws:bedrock:us-east-1:123456789012:inference-profile/us.anthropic.claude-sonnet-4-20250514-v1:0"

	srv.Enqueue(conversetest.Text("It is 21 degrees in Oslo.").WithUsage(10, 5))
	out, err := client.Converse(t.Context(), &bedrockruntime.ConverseInput{
		ModelId: aws.String(arn),
		System:  []types.SystemContentBlock{&types.SystemContentBlockMemberText{Value: "Be brief."}},
		Messages: []types.Message{
			user(text("What is the weather where this was taken?"), image(types.ImageFormatPng, png)),
			assistant(text("Let me check."), toolUse("t1", "get_weather", map[string]any{"city": "Oslo", "days": 2})),
			user(toolResult("t1",
				&types.ToolResultContentBlockMemberJson{Value: document.NewLazyDocument(map[string]any{"celsius": 21})},
				&types.ToolResultContentBlockMemberImage{Value: imageBlock(types.ImageFormatGif, chart)},
			)),
		},
		InferenceConfig: &types.InferenceConfiguration{MaxTokens: aws.Int32(512), Temperature: aws.Float32(0.5)},
		ToolConfig: &types.ToolConfiguration{
			Tools:      []types.Tool{toolSpec("get_weather")},
			ToolChoice: &types.ToolChoiceMemberAuto{},
		},
	})
	if err != nil {
		t.Fatalf("Converse: %v", err)
	}
	if got, want := replyText(t, out), "It is 21 degrees in Oslo."; got != want {
		t.Errorf("reply text = %q, want %q", got, want)
	}
	if got, want := out.StopReason, types.StopReasonEndTurn; got != want {
		t.Errorf("stop reason = %q, want %q", got, want)
	}
	gotUsage := [3]int32{aws.ToInt32(out.Usage.InputTokens), aws.ToInt32(out.Usage.OutputTokens), aws.ToInt32(out.Usage.TotalTokens)}
	if want := [3]int32{10, 5, 15}; gotUsage != want {
		t.Errorf("usage = %v, want %v", gotUsage, want)
	}

	reqs := srv.Requests()
	if len(reqs) != 1 {
		t.Fatalf("recorded %d requests, want 1", len(reqs))
	}
	maxTokens, temperature := 512, 0.5
	want := &conversetest.Request{
		ModelID:   arn,
		Operation: "Converse",
		Valid:     true,
		System:    []conversetest.SystemBlock{{Text: "Be brief."}},
		Messages: []conversetest.Message{
			{Role: "user", Content: []conversetest.ContentBlock{
				{Text: "What is the weather where this was taken?"},
				{Image: &conversetest.ImageBlock{Format: "png", Source: conversetest.ImageSource{Bytes: png}}},
			}},
			{Role: "assistant", Content: []conversetest.ContentBlock{
				{Text: "Let me check."},
				{ToolUse: &conversetest.ToolUseBlock{ToolUseID: "t1", Name: "get_weather", Input: json.RawMessage(`{"city":"Oslo","days":2}`)}},
			}},
			{Role: "user", Content: []conversetest.ContentBlock{
				{ToolResult: &conversetest.ToolResultBlock{ToolUseID: "t1", Content: []conversetest.ToolResultContent{
					{JSON: json.RawMessage(`{"celsius":21}`)},
					{Image: &conversetest.ImageBlock{Format: "gif", Source: conversetest.ImageSource{Bytes: chart}}},
				}}},
			}},
		},
		InferenceConfig: &conversetest.InferenceConfig{MaxTokens: &maxTokens, Temperature: &temperature},
		ToolConfig: &conversetest.ToolConfig{
			Tools: []conversetest.Tool{{ToolSpec: &conversetest.ToolSpec{
				Name:        "get_weather",
				Description: "a tool",
				InputSchema: conversetest.ToolInputSchema{JSON: json.RawMessage(`{"type":"object","properties":{"city":{"type":"string"}}}`)},
			}}},
			ToolChoice: &conversetest.ToolChoice{Auto: &conversetest.AutoToolChoice{}},
		},
	}
	if diff := cmp.Diff(want, reqs[0], jsonAsValue); diff != "" {
		t.Errorf("recorded request mismatch (-want +got):\n%s", diff)
	}
	if got := srv.Violations(); len(got) != 0 {
		t.Errorf("Violations() = %q, want none", got)
	}
}

func TestConverseToolUseReply(t *testing.T) {
	srv := newServer(t)
	srv.Enqueue(conversetest.Text("Checking both.").
		WithToolUse("t1", "get_weather", map[string]any{"city": "Oslo"}).
		WithToolUse("t2", "get_weather", map[string]any{"city": "Bergen"}))
	in := &bedrockruntime.ConverseInput{
		ModelId:    aws.String(modelID),
		Messages:   []types.Message{user(text("Weather in Oslo and Bergen?"))},
		ToolConfig: tools("get_weather"),
	}
	out, err := srv.Client().Converse(t.Context(), in)
	if err != nil {
		t.Fatalf("Converse: %v", err)
	}
	if got, want := out.StopReason, types.StopReasonToolUse; got != want {
		t.Errorf("stop reason = %q, want %q", got, want)
	}
	msg := out.Output.(*types.ConverseOutputMemberMessage).Value
	if got, want := msg.Role, types.ConversationRoleAssistant; got != want {
		t.Errorf("role = %q, want %q", got, want)
	}
	type call struct {
		ID, Name string
		Input    any
	}
	var gotText string
	var gotCalls []call
	for _, b := range msg.Content {
		switch b := b.(type) {
		case *types.ContentBlockMemberText:
			gotText += b.Value
		case *types.ContentBlockMemberToolUse:
			gotCalls = append(gotCalls, call{aws.ToString(b.Value.ToolUseId), aws.ToString(b.Value.Name), decodeDocument(t, b.Value.Input)})
		default:
			t.Errorf("unexpected content block %T", b)
		}
	}
	if want := "Checking both."; gotText != want {
		t.Errorf("text = %q, want %q", gotText, want)
	}
	wantCalls := []call{
		{"t1", "get_weather", map[string]any{"city": "Oslo"}},
		{"t2", "get_weather", map[string]any{"city": "Bergen"}},
	}
	if diff := cmp.Diff(wantCalls, gotCalls); diff != "" {
		t.Errorf("tool calls mismatch (-want +got):\n%s", diff)
	}

	// Usage is estimated from the sizes when the reply does not fix it.
	req := srv.Requests()[0]
	wantIn := max(1, conversetest.EstimateInputBytes(req)/4)
	if got := int(aws.ToInt32(out.Usage.InputTokens)); got != wantIn {
		t.Errorf("input tokens = %d, want %d", got, wantIn)
	}
	if got := aws.ToInt32(out.Usage.OutputTokens); got < 1 {
		t.Errorf("output tokens = %d, want at least 1", got)
	}
	if got, want := aws.ToInt32(out.Usage.TotalTokens), aws.ToInt32(out.Usage.InputTokens)+aws.ToInt32(out.Usage.OutputTokens); got != want {
		t.Errorf("total tokens = %d, want %d", got, want)
	}
}

func TestConverseEmptyTextReply(t *testing.T) {
	srv := newServer(t)
	srv.Enqueue(conversetest.Text(""))
	out, err := srv.Client().Converse(t.Context(), &bedrockruntime.ConverseInput{
		ModelId:  aws.String(modelID),
		Messages: []types.Message{user(text("hi"))},
	})
	if err != nil {
		t.Fatalf("Converse: %v", err)
	}
	content := out.Output.(*types.ConverseOutputMemberMessage).Value.Content
	if len(content) != 1 {
		t.Fatalf("got %d content blocks, want 1", len(content))
	}
	if got, ok := content[0].(*types.ContentBlockMemberText); !ok || got.Value != "" {
		t.Errorf("content[0] = %#v, want an empty text block", content[0])
	}
}

func TestConverseReasoningReply(t *testing.T) {
	srv := newServer(t)
	srv.Enqueue(conversetest.Text("42").WithReasoning("think hard", "sig"))
	out, err := srv.Client().Converse(t.Context(), &bedrockruntime.ConverseInput{
		ModelId:  aws.String(modelID),
		Messages: []types.Message{user(text("answer?"))},
	})
	if err != nil {
		t.Fatalf("Converse: %v", err)
	}
	content := out.Output.(*types.ConverseOutputMemberMessage).Value.Content
	if len(content) != 2 {
		t.Fatalf("got %d content blocks, want 2", len(content))
	}
	r, ok := content[0].(*types.ContentBlockMemberReasoningContent)
	if !ok {
		t.Fatalf("first block is %T, want reasoning content", content[0])
	}
	rt, ok := r.Value.(*types.ReasoningContentBlockMemberReasoningText)
	if !ok {
		t.Fatalf("reasoning is %T, want reasoning text", r.Value)
	}
	if got, want := [2]string{aws.ToString(rt.Value.Text), aws.ToString(rt.Value.Signature)}, [2]string{"think hard", "sig"}; got != want {
		t.Errorf("reasoning = %q, want %q", got, want)
	}
}

// validConversation returns a valid request with a tool round trip, for
// the rule cases to break one rule at a time.
func validConversation() *bedrockruntime.ConverseInput {
	return &bedrockruntime.ConverseInput{
		ModelId: aws.String(modelID),
		Messages: []types.Message{
			user(text("weather?")),
			assistant(toolUse("t1", "get_weather", map[string]any{"city": "Oslo"})),
			user(toolResult("t1", resultText("sunny"))),
		},
		ToolConfig: tools("get_weather"),
	}
}

func TestConverseRejectsRuleViolations(t *testing.T) {
	big := func(n int) []byte { return bytes.Repeat([]byte{'x'}, n) }
	many := func(n int, block func(i int) types.ContentBlock) []types.ContentBlock {
		var blocks []types.ContentBlock
		for i := range n {
			blocks = append(blocks, block(i))
		}
		return blocks
	}
	pngBytes := []byte("\x89PNG\r\n\x1a\n")
	tests := []struct {
		name  string
		input func(in *bedrockruntime.ConverseInput)
		want  string
	}{
		{
			name:  "empty messages",
			input: func(in *bedrockruntime.ConverseInput) { in.Messages = nil; in.ToolConfig = nil },
			want:  "messages: must not be empty",
		},
		{
			name: "first message not user",
			input: func(in *bedrockruntime.ConverseInput) {
				in.Messages = []types.Message{assistant(text("hi")), user(text("hello"))}
			},
			want: "messages[0]: the conversation must start with a user message, got assistant",
		},
		{
			name: "unknown role",
			input: func(in *bedrockruntime.ConverseInput) {
				in.Messages = []types.Message{{Role: "system", Content: []types.ContentBlock{text("x")}}}
			},
			want: `messages[0]: role "system" is not user or assistant`,
		},
		{
			name: "consecutive user messages",
			input: func(in *bedrockruntime.ConverseInput) {
				in.Messages = []types.Message{user(text("a")), user(text("b"))}
			},
			want: "messages[1]: roles must alternate: two consecutive user messages",
		},
		{
			name: "consecutive assistant messages",
			input: func(in *bedrockruntime.ConverseInput) {
				in.Messages = []types.Message{user(text("a")), assistant(text("b")), assistant(text("c")), user(text("d"))}
			},
			want: "messages[2]: roles must alternate: two consecutive assistant messages",
		},
		{
			name: "last message assistant",
			input: func(in *bedrockruntime.ConverseInput) {
				in.Messages = []types.Message{user(text("a")), assistant(text("prefill"))}
			},
			want: "messages[1]: the last message must be a user message (no prefill), got assistant",
		},
		{
			name: "empty content",
			input: func(in *bedrockruntime.ConverseInput) {
				in.Messages = []types.Message{user()}
			},
			want: "messages[0]: content must not be empty",
		},
		{
			name: "empty text",
			input: func(in *bedrockruntime.ConverseInput) {
				in.Messages = []types.Message{user(text("ok"), text(""))}
			},
			want: "messages[0].content[1]: text must not be blank",
		},
		{
			name: "whitespace text",
			input: func(in *bedrockruntime.ConverseInput) {
				in.Messages[1].Content = append([]types.ContentBlock{text(" \n\t")}, in.Messages[1].Content...)
			},
			want: "messages[1].content[0]: text must not be blank",
		},
		{
			name: "blank system text",
			input: func(in *bedrockruntime.ConverseInput) {
				in.System = []types.SystemContentBlock{&types.SystemContentBlockMemberText{Value: "  "}}
			},
			want: "system[0]: text must not be blank",
		},
		{
			name: "blank tool result text",
			input: func(in *bedrockruntime.ConverseInput) {
				in.Messages[2] = user(toolResult("t1", resultText("")))
			},
			want: "messages[2].content[0].toolResult.content[0]: text must not be blank",
		},
		{
			name: "image in assistant message",
			input: func(in *bedrockruntime.ConverseInput) {
				in.Messages[1].Content = append(in.Messages[1].Content, image(types.ImageFormatPng, pngBytes))
			},
			want: "messages[1].content[1]: image blocks are only allowed in user messages",
		},
		{
			name: "document in assistant message",
			input: func(in *bedrockruntime.ConverseInput) {
				in.Messages[1].Content = append([]types.ContentBlock{text("see"), doc(types.DocumentFormatTxt, "notes", []byte("n"))}, in.Messages[1].Content...)
			},
			want: "messages[1].content[1]: document blocks are only allowed in user messages",
		},
		{
			name: "document without text",
			input: func(in *bedrockruntime.ConverseInput) {
				in.Messages[0] = user(doc(types.DocumentFormatPdf, "report", []byte("%PDF-1.7")))
			},
			want: "messages[0].content[0]: a document block needs a text block in the same message",
		},
		{
			name: "image format",
			input: func(in *bedrockruntime.ConverseInput) {
				in.Messages[0].Content = append(in.Messages[0].Content, image("bmp", pngBytes))
			},
			want: `messages[0].content[1].image.format: "bmp" is not png, jpeg, gif or webp`,
		},
		{
			name: "document format",
			input: func(in *bedrockruntime.ConverseInput) {
				in.Messages[0].Content = append(in.Messages[0].Content, doc("rtf", "report", []byte("{\\rtf")))
			},
			want: `messages[0].content[1].document.format: "rtf" is not pdf, csv, doc, docx, xls, xlsx, html, txt or md`,
		},
		{
			name: "document name with a dot",
			input: func(in *bedrockruntime.ConverseInput) {
				in.Messages[0].Content = append(in.Messages[0].Content, doc(types.DocumentFormatPdf, "report.pdf", []byte("%PDF-1.7")))
			},
			want: `messages[0].content[1].document.name: "report.pdf" may only contain`,
		},
		{
			name: "empty image bytes",
			input: func(in *bedrockruntime.ConverseInput) {
				in.Messages[0].Content = append(in.Messages[0].Content, image(types.ImageFormatPng, []byte{}))
			},
			want: "messages[0].content[1].image.source.bytes: must not be empty",
		},
		{
			name: "empty document bytes",
			input: func(in *bedrockruntime.ConverseInput) {
				in.Messages[0].Content = append(in.Messages[0].Content, doc(types.DocumentFormatPdf, "report", nil))
			},
			want: "messages[0].content[1].document.source.bytes: must not be empty",
		},
		{
			name: "too many images",
			input: func(in *bedrockruntime.ConverseInput) {
				in.Messages[0].Content = append(in.Messages[0].Content, many(21, func(int) types.ContentBlock { return image(types.ImageFormatPng, pngBytes) })...)
			},
			want: "messages: 21 images in the request, at most 20 are allowed",
		},
		{
			name: "too many documents",
			input: func(in *bedrockruntime.ConverseInput) {
				in.Messages[0].Content = append(in.Messages[0].Content, many(6, func(i int) types.ContentBlock {
					return doc(types.DocumentFormatTxt, fmt.Sprintf("doc %d", i), []byte("d"))
				})...)
			},
			want: "messages: 6 documents in the request, at most 5 are allowed",
		},
		{
			name: "image too large",
			input: func(in *bedrockruntime.ConverseInput) {
				in.Messages[0].Content = append(in.Messages[0].Content, image(types.ImageFormatPng, big(conversetest.MaxImageBytes+1)))
			},
			want: "messages[0].content[1].image.source.bytes: image is 3932161 bytes, at most 3932160 are allowed",
		},
		{
			name: "document too large",
			input: func(in *bedrockruntime.ConverseInput) {
				in.Messages[0].Content = append(in.Messages[0].Content, doc(types.DocumentFormatTxt, "big", big(conversetest.MaxDocumentBytes+1)))
			},
			want: "messages[0].content[1].document.source.bytes: document is 4718593 bytes, at most 4718592 are allowed",
		},
		{
			name: "toolUse not answered",
			input: func(in *bedrockruntime.ConverseInput) {
				in.Messages[2] = user(text("never mind"))
			},
			want: `messages[2]: toolUse "t1" of messages[1] has no toolResult in this message`,
		},
		{
			name: "one of two toolUses not answered",
			input: func(in *bedrockruntime.ConverseInput) {
				in.Messages[1].Content = append(in.Messages[1].Content, toolUse("t2", "get_weather", map[string]any{}))
			},
			want: `messages[2]: toolUse "t2" of messages[1] has no toolResult in this message`,
		},
		{
			name: "extra toolResult",
			input: func(in *bedrockruntime.ConverseInput) {
				in.Messages[2].Content = append(in.Messages[2].Content, toolResult("t2", resultText("?")))
			},
			want: `messages[2].content[1]: toolResult "t2" does not answer a toolUse of the preceding assistant message`,
		},
		{
			name: "duplicate toolResult",
			input: func(in *bedrockruntime.ConverseInput) {
				in.Messages[2].Content = append(in.Messages[2].Content, toolResult("t1", resultText("again")))
			},
			want: `messages[2].content[1]: duplicate toolResult for toolUse "t1"`,
		},
		{
			name: "toolResult in first message",
			input: func(in *bedrockruntime.ConverseInput) {
				in.Messages = []types.Message{user(toolResult("t0", resultText("orphan")), text("hi"))}
			},
			want: `messages[0].content[0]: toolResult "t0" does not answer a toolUse of the preceding assistant message`,
		},
		{
			name: "toolResult answering an older toolUse",
			input: func(in *bedrockruntime.ConverseInput) {
				in.Messages = append(in.Messages, assistant(text("done")), user(toolResult("t1", resultText("late"))))
			},
			want: `messages[4].content[0]: toolResult "t1" does not answer a toolUse of the preceding assistant message`,
		},
		{
			name: "duplicate toolUse ids",
			input: func(in *bedrockruntime.ConverseInput) {
				in.Messages = append(in.Messages,
					assistant(toolUse("t1", "get_weather", map[string]any{})),
					user(toolResult("t1", resultText("again"))))
			},
			want: `messages[3].content[0].toolUse.toolUseId: duplicate id "t1", first used at messages[1].content[0]`,
		},
		{
			name: "toolUse id with bad characters",
			input: func(in *bedrockruntime.ConverseInput) {
				in.Messages[1] = assistant(toolUse("call 1", "get_weather", map[string]any{}))
				in.Messages[2] = user(toolResult("call 1", resultText("x")))
			},
			want: `messages[1].content[0].toolUse.toolUseId: "call 1" does not match`,
		},
		{
			name: "toolResult status",
			input: func(in *bedrockruntime.ConverseInput) {
				in.Messages[2] = user(&types.ContentBlockMemberToolResult{Value: types.ToolResultBlock{
					ToolUseId: aws.String("t1"),
					Content:   []types.ToolResultContentBlock{resultText("x")},
					Status:    "pending",
				}})
			},
			want: `messages[2].content[0].toolResult.status: "pending" is not success or error`,
		},
		{
			name: "toolUse input not an object",
			input: func(in *bedrockruntime.ConverseInput) {
				in.Messages[1] = assistant(toolUse("t1", "get_weather", []any{"Oslo"}))
			},
			want: "messages[1].content[0].toolUse.input: must be a JSON object, got an array",
		},
		{
			name: "toolUse in user message",
			input: func(in *bedrockruntime.ConverseInput) {
				in.Messages[0].Content = append(in.Messages[0].Content, toolUse("t0", "get_weather", map[string]any{}))
			},
			want: "messages[0].content[1]: toolUse blocks are only allowed in assistant messages",
		},
		{
			name: "toolResult in assistant message",
			input: func(in *bedrockruntime.ConverseInput) {
				in.Messages[1].Content = append(in.Messages[1].Content, toolResult("t1", resultText("self")))
			},
			want: "messages[1].content[1]: toolResult blocks are only allowed in user messages",
		},
		{
			name:  "toolConfig missing",
			input: func(in *bedrockruntime.ConverseInput) { in.ToolConfig = nil },
			want:  "toolConfig: must be present when messages contain toolUse or toolResult blocks",
		},
		{
			name: "no tools",
			input: func(in *bedrockruntime.ConverseInput) {
				in.ToolConfig = &types.ToolConfiguration{Tools: []types.Tool{}}
			},
			want: "toolConfig.tools: must not be empty",
		},
		{
			name:  "tool name with a space",
			input: func(in *bedrockruntime.ConverseInput) { in.ToolConfig = tools("get_weather", "look up") },
			want:  `toolConfig.tools[1].toolSpec.name: "look up" does not match ^[a-zA-Z0-9_-]{1,64}$`,
		},
		{
			name:  "tool name too long",
			input: func(in *bedrockruntime.ConverseInput) { in.ToolConfig = tools("get_weather", strings.Repeat("a", 65)) },
			want:  "toolConfig.tools[1].toolSpec.name: ",
		},
		{
			name:  "duplicate tool names",
			input: func(in *bedrockruntime.ConverseInput) { in.ToolConfig = tools("get_weather", "get_weather") },
			want:  `toolConfig.tools[1].toolSpec.name: duplicate tool name "get_weather", first declared at toolConfig.tools[0]`,
		},
		{
			name: "toolSpec without inputSchema",
			input: func(in *bedrockruntime.ConverseInput) {
				in.ToolConfig = &types.ToolConfiguration{Tools: []types.Tool{
					&types.ToolMemberToolSpec{Value: types.ToolSpecification{Name: aws.String("get_weather")}},
				}}
			},
			want: "toolConfig.tools[0].toolSpec.inputSchema.json: must be a JSON object, got nothing",
		},
		{
			name: "inputSchema not an object",
			input: func(in *bedrockruntime.ConverseInput) {
				in.ToolConfig = &types.ToolConfiguration{Tools: []types.Tool{
					&types.ToolMemberToolSpec{Value: types.ToolSpecification{
						Name:        aws.String("get_weather"),
						InputSchema: &types.ToolInputSchemaMemberJson{Value: document.NewLazyDocument("object")},
					}},
				}}
			},
			want: "toolConfig.tools[0].toolSpec.inputSchema.json: must be a JSON object, got a string",
		},
		{
			name: "toolChoice names an unknown tool",
			input: func(in *bedrockruntime.ConverseInput) {
				in.ToolConfig.ToolChoice = &types.ToolChoiceMemberTool{Value: types.SpecificToolChoice{Name: aws.String("get_time")}}
			},
			want: `toolConfig.toolChoice.tool.name: "get_time" is not among the tools`,
		},
		{
			name: "maxTokens zero",
			input: func(in *bedrockruntime.ConverseInput) {
				in.InferenceConfig = &types.InferenceConfiguration{MaxTokens: aws.Int32(0)}
			},
			want: "inferenceConfig.maxTokens: 0 is less than 1",
		},
		{
			name: "temperature above one",
			input: func(in *bedrockruntime.ConverseInput) {
				in.InferenceConfig = &types.InferenceConfiguration{Temperature: aws.Float32(1.5)}
			},
			want: "inferenceConfig.temperature: 1.5 is outside [0, 1]",
		},
		{
			name: "topP below zero",
			input: func(in *bedrockruntime.ConverseInput) {
				in.InferenceConfig = &types.InferenceConfiguration{TopP: aws.Float32(-0.5)}
			},
			want: "inferenceConfig.topP: -0.5 is outside [0, 1]",
		},
		{
			name: "guardrail without version",
			input: func(in *bedrockruntime.ConverseInput) {
				in.GuardrailConfig = &types.GuardrailConfiguration{GuardrailIdentifier: aws.String("gr-1")}
			},
			want: "guardrailConfig.guardrailVersion: must not be empty",
		},
	}

	srv := newServer(t)
	srv.Enqueue(conversetest.Text("only for valid requests"))
	client := srv.Client(noClientValidation)

	// The base conversation must be valid, or the cases prove nothing.
	if err := conversetest.Validate(decodeVia(t, validConversation())); err != nil {
		t.Fatalf("base conversation is invalid: %v", err)
	}

	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := validConversation()
			tt.input(in)
			before := srv.Calls()
			_, err := client.Converse(t.Context(), in)
			var ve *types.ValidationException
			if !errors.As(err, &ve) {
				t.Fatalf("Converse error = %v, want a *types.ValidationException", err)
			}
			if got := ve.ErrorMessage(); !strings.Contains(got, tt.want) {
				t.Errorf("message = %q, want it to contain %q", got, tt.want)
			}
			var re *awshttp.ResponseError
			if !errors.As(err, &re) || re.HTTPStatusCode() != 400 {
				t.Errorf("HTTP status: got error %v, want status 400", err)
			}
			if got, want := srv.Calls(), before+1; got != want {
				t.Fatalf("Calls() = %d, want %d", got, want)
			}
			reqs := srv.Requests()
			last := reqs[len(reqs)-1]
			if last.Valid || last.Err == nil {
				t.Errorf("recorded Valid = %v, Err = %v; want false and the violation", last.Valid, last.Err)
			}
			violations := srv.Violations()
			if len(violations) == 0 || violations[len(violations)-1] != ve.ErrorMessage() {
				t.Errorf("last violation = %q, want %q", violations, ve.ErrorMessage())
			}
		})
	}
	if got, want := srv.Pending(), 1; got != want {
		t.Errorf("Pending() = %d after invalid requests only, want %d (invalid requests must not consume the queue)", got, want)
	}
	if got, want := len(srv.Violations()), len(tests); got != want {
		t.Errorf("len(Violations()) = %d, want %d", got, want)
	}
}

// decodeVia sends in through the SDK to a scratch server and returns what
// the server decoded, to check a conversation with Validate directly.
func decodeVia(t *testing.T, in *bedrockruntime.ConverseInput) *conversetest.Request {
	t.Helper()
	scratch := newServer(t)
	if _, err := scratch.Client().Converse(t.Context(), in); err != nil {
		t.Fatalf("Converse on scratch server: %v", err)
	}
	return scratch.Requests()[0]
}

func TestConverseErrorReplies(t *testing.T) {
	tests := []struct {
		name       string
		reply      conversetest.Reply
		wantType   func(error) bool
		wantStatus int
		wantCode   string
	}{
		{"throttle", conversetest.Throttle(), isA[*types.ThrottlingException], 429, "ThrottlingException"},
		{"model not ready", conversetest.ModelNotReady(), isA[*types.ModelNotReadyException], 429, "ModelNotReadyException"},
		{"unavailable", conversetest.Unavailable(), isA[*types.ServiceUnavailableException], 503, "ServiceUnavailableException"},
		{"internal error", conversetest.InternalError(), isA[*types.InternalServerException], 500, "InternalServerException"},
		{"model timeout", conversetest.ModelTimeout(), isA[*types.ModelTimeoutException], 408, "ModelTimeoutException"},
		{"access denied", conversetest.AccessDenied(), isA[*types.AccessDeniedException], 403, "AccessDeniedException"},
		{"not found", conversetest.ResourceNotFound(), isA[*types.ResourceNotFoundException], 404, "ResourceNotFoundException"},
		{"overflow", conversetest.Overflow(), isA[*types.ValidationException], 400, "ValidationException"},
		{"custom", conversetest.Error(400, "ValidationException", "prompt is too long"), isA[*types.ValidationException], 400, "ValidationException"},
		{"unmodelled code", conversetest.Error(418, "TeapotException", "short and stout"), isA[*smithy.GenericAPIError], 418, "TeapotException"},
	}
	srv := newServer(t)
	client := srv.Client()
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv.Enqueue(tt.reply)
			_, err := client.Converse(t.Context(), &bedrockruntime.ConverseInput{
				ModelId:  aws.String(modelID),
				Messages: []types.Message{user(text("hi"))},
			})
			if !tt.wantType(err) {
				t.Fatalf("Converse error = %T %v, want another type", err, err)
			}
			var apiErr smithy.APIError
			if !errors.As(err, &apiErr) {
				t.Fatalf("error %v is not a smithy.APIError", err)
			}
			if got := apiErr.ErrorCode(); got != tt.wantCode {
				t.Errorf("code = %q, want %q", got, tt.wantCode)
			}
			if got, want := apiErr.ErrorMessage(), tt.reply.Err.Message; got != want {
				t.Errorf("message = %q, want %q", got, want)
			}
			var re *awshttp.ResponseError
			if !errors.As(err, &re) || re.HTTPStatusCode() != tt.wantStatus {
				t.Errorf("error %v: want HTTP status %d", err, tt.wantStatus)
			}
		})
	}
	if got := srv.Violations(); len(got) != 0 {
		t.Errorf("Violations() = %q, want none: scripted errors are not violations", got)
	}
}

func TestConverseOverflow(t *testing.T) {
	converse := func(t *testing.T, srv *conversetest.Server, prompt string) (*bedrockruntime.ConverseOutput, error) {
		t.Helper()
		return srv.Client().Converse(t.Context(), &bedrockruntime.ConverseInput{
			ModelId:  aws.String(modelID),
			System:   []types.SystemContentBlock{&types.SystemContentBlockMemberText{Value: "0123456789"}},
			Messages: []types.Message{user(text(prompt))},
		})
	}
	wantOverflow := func(t *testing.T, err error) {
		t.Helper()
		var ve *types.ValidationException
		if !errors.As(err, &ve) {
			t.Fatalf("error = %v, want a *types.ValidationException", err)
		}
		if !strings.Contains(ve.ErrorMessage(), "Input is too long for requested model") {
			t.Errorf("message = %q, want the overflow message", ve.ErrorMessage())
		}
	}

	t.Run("scripted", func(t *testing.T) {
		srv := newServer(t)
		srv.Enqueue(conversetest.Overflow())
		_, err := converse(t, srv, "hi")
		wantOverflow(t, err)
	})

	t.Run("stop reason", func(t *testing.T) {
		srv := newServer(t)
		srv.Enqueue(conversetest.OverflowStop())
		out, err := converse(t, srv, "hi")
		if err != nil {
			t.Fatalf("Converse: %v", err)
		}
		if got, want := out.StopReason, types.StopReasonModelContextWindowExceeded; got != want {
			t.Errorf("stop reason = %q, want %q", got, want)
		}
	})

	t.Run("MaxInputBytes", func(t *testing.T) {
		srv := newServer(t)
		srv.MaxInputBytes = 100 // The system text takes 10 of them.
		srv.Enqueue(conversetest.Text("fits"), conversetest.Text("after overflow"))

		out, err := converse(t, srv, strings.Repeat("a", 90))
		if err != nil {
			t.Fatalf("Converse at the limit: %v", err)
		}
		if got, want := replyText(t, out), "fits"; got != want {
			t.Errorf("reply = %q, want %q", got, want)
		}

		_, err = converse(t, srv, strings.Repeat("a", 91))
		wantOverflow(t, err)
		last := srv.Requests()[1]
		if !last.Valid || last.Err == nil {
			t.Errorf("overflowing request: Valid = %v, Err = %v; want true and the overflow", last.Valid, last.Err)
		}
		if got := srv.Violations(); len(got) != 0 {
			t.Errorf("Violations() = %q, want none: overflow is not a rule violation", got)
		}
		if got, want := srv.Pending(), 1; got != want {
			t.Errorf("Pending() = %d, want %d: an overflow must not consume the queue", got, want)
		}
	})
}

func TestConverseScriptOrder(t *testing.T) {
	srv := newServer(t)
	client := srv.Client(noClientValidation)
	srv.Enqueue(conversetest.Text("one"), conversetest.Throttle(), conversetest.Text("two"))

	send := func(t *testing.T, msgs ...types.Message) (string, error) {
		t.Helper()
		out, err := client.Converse(t.Context(), &bedrockruntime.ConverseInput{ModelId: aws.String(modelID), Messages: msgs})
		if err != nil {
			return "", err
		}
		return replyText(t, out), nil
	}
	var got []string
	for _, msgs := range [][]types.Message{
		{user(text("a"))},
		{user(text("b"))},
		{user(text("c")), user(text("invalid: not alternating"))},
		{user(text("d"))},
		{user(text("e")), assistant(text("f")), user(text("g"))},
	} {
		s, err := send(t, msgs...)
		if err != nil {
			var apiErr smithy.APIError
			if !errors.As(err, &apiErr) {
				t.Fatalf("Converse: %v", err)
			}
			s = apiErr.ErrorCode()
		}
		got = append(got, s)
	}
	want := []string{"one", "ThrottlingException", "ValidationException", "two", "seen 3 messages"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("replies mismatch (-want +got):\n%s", diff)
	}
	if got, want := srv.Calls(), 5; got != want {
		t.Errorf("Calls() = %d, want %d", got, want)
	}
	var gotValid []bool
	for _, r := range srv.Requests() {
		gotValid = append(gotValid, r.Valid)
	}
	if diff := cmp.Diff([]bool{true, true, false, true, true}, gotValid); diff != "" {
		t.Errorf("Valid flags mismatch (-want +got):\n%s", diff)
	}

	srv.Reset()
	if got := [3]int{srv.Calls(), len(srv.Violations()), srv.Pending()}; got != [3]int{} {
		t.Errorf("after Reset: Calls, len(Violations), Pending = %v, want zeros", got)
	}
}

func TestConverseResponder(t *testing.T) {
	srv := newServer(t)
	srv.Responder = func(req *conversetest.Request) conversetest.Reply {
		return conversetest.Text("you said: " + req.Messages[len(req.Messages)-1].Text()).WithStop(conversetest.StopMaxTokens)
	}
	out, err := srv.Client().Converse(t.Context(), &bedrockruntime.ConverseInput{
		ModelId:  aws.String(modelID),
		Messages: []types.Message{user(text("hello"), text("there"))},
	})
	if err != nil {
		t.Fatalf("Converse: %v", err)
	}
	if got, want := replyText(t, out), "you said: hello\nthere"; got != want {
		t.Errorf("reply = %q, want %q", got, want)
	}
	if got, want := out.StopReason, types.StopReasonMaxTokens; got != want {
		t.Errorf("stop reason = %q, want %q", got, want)
	}
}

func TestConverseDelay(t *testing.T) {
	in := &bedrockruntime.ConverseInput{ModelId: aws.String(modelID), Messages: []types.Message{user(text("hi"))}}

	t.Run("waits", func(t *testing.T) {
		srv := newServer(t)
		const delay = 50 * time.Millisecond
		srv.Enqueue(conversetest.Text("late").WithDelay(delay))
		start := time.Now()
		out, err := srv.Client().Converse(t.Context(), in)
		if err != nil {
			t.Fatalf("Converse: %v", err)
		}
		if got := time.Since(start); got < delay {
			t.Errorf("answered after %v, want at least %v", got, delay)
		}
		if got, want := replyText(t, out), "late"; got != want {
			t.Errorf("reply = %q, want %q", got, want)
		}
	})

	t.Run("client cancels", func(t *testing.T) {
		srv := newServer(t)
		srv.Enqueue(conversetest.Text("too late").WithDelay(time.Hour))
		// Mounting the handler in an httptest.Server gives a Close that
		// waits for handlers without cutting their delay short, so it only
		// returns promptly if the handler noticed the client leave.
		hs := httptest.NewServer(srv.Handler())
		client := srv.Client(func(o *bedrockruntime.Options) { o.BaseEndpoint = aws.String(hs.URL) })
		ctx, cancel := context.WithTimeout(t.Context(), 50*time.Millisecond)
		defer cancel()
		_, err := client.Converse(ctx, in)
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("Converse error = %v, want context.DeadlineExceeded", err)
		}
		closed := make(chan struct{})
		go func() { hs.Close(); close(closed) }()
		select {
		case <-closed:
		case <-time.After(5 * time.Second):
			t.Fatal("the handler is still waiting after the client went away")
		}
		if got, want := srv.Calls(), 1; got != want {
			t.Errorf("Calls() = %d, want %d", got, want)
		}
	})

	t.Run("server closes", func(t *testing.T) {
		srv := conversetest.NewServer()
		srv.Enqueue(conversetest.Text("never").WithDelay(time.Hour))
		errc := make(chan error, 1)
		go func() {
			_, err := srv.Client().Converse(t.Context(), in)
			errc <- err
		}()
		for deadline := time.Now().Add(5 * time.Second); srv.Calls() == 0; time.Sleep(time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatal("the request never arrived")
			}
		}
		closed := make(chan struct{})
		go func() { srv.Close(); close(closed) }()
		select {
		case <-closed:
		case <-time.After(5 * time.Second):
			t.Fatal("Close did not cut the delay short")
		}
		if err := <-errc; err == nil {
			t.Error("Converse succeeded, want an error after the server closed")
		}
	})
}

func TestConverseConcurrent(t *testing.T) {
	srv := newServer(t)
	client := srv.Client()
	const n = 32
	srv.Enqueue(conversetest.Text("scripted"))
	var wg sync.WaitGroup
	errs := make(chan error, n)
	texts := make(chan string, n)
	for i := range n {
		wg.Go(func() {
			out, err := client.Converse(t.Context(), &bedrockruntime.ConverseInput{
				ModelId:  aws.String(modelID),
				Messages: []types.Message{user(text(fmt.Sprintf("request %d", i)))},
			})
			if err != nil {
				errs <- err
				return
			}
			msg := out.Output.(*types.ConverseOutputMemberMessage).Value
			texts <- msg.Content[0].(*types.ContentBlockMemberText).Value
		})
	}
	wg.Wait()
	close(errs)
	close(texts)
	for err := range errs {
		t.Errorf("Converse: %v", err)
	}
	got := map[string]int{}
	for s := range texts {
		got[s]++
	}
	want := map[string]int{"scripted": 1, "seen 1 messages": n - 1}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("replies mismatch (-want +got):\n%s", diff)
	}
	if got := srv.Calls(); got != n {
		t.Errorf("Calls() = %d, want %d", got, n)
	}
}
