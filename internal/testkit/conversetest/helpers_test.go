package conversetest_test

import (
	"encoding/json"
	"errors"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/bedrockruntime"
	"github.com/aws/aws-sdk-go-v2/service/bedrockruntime/document"
	"github.com/aws/aws-sdk-go-v2/service/bedrockruntime/types"
	"github.com/aws/smithy-go/middleware"

	"github.com/lambda-agent/lambda-agent/internal/testkit/conversetest"
)

const modelID = "anthropic.claude-3-haiku-20240307-v1:0"

// newServer starts a server that is closed when the test ends.
func newServer(t *testing.T) *conversetest.Server {
	t.Helper()
	srv := conversetest.NewServer()
	t.Cleanup(srv.Close)
	return srv
}

// noClientValidation removes the SDK's client-side check of required
// members, so that requests the SDK would refuse to send reach the server
// and the server's own rules are what is tested.
func noClientValidation(o *bedrockruntime.Options) {
	o.APIOptions = append(o.APIOptions, func(stack *middleware.Stack) error {
		_, err := stack.Initialize.Remove("OperationInputValidation")
		return err
	})
}

// isA reports whether err wraps an error of type T.
func isA[T error](err error) bool {
	var target T
	return errors.As(err, &target)
}

func text(s string) types.ContentBlock {
	return &types.ContentBlockMemberText{Value: s}
}

func user(blocks ...types.ContentBlock) types.Message {
	return types.Message{Role: types.ConversationRoleUser, Content: blocks}
}

func assistant(blocks ...types.ContentBlock) types.Message {
	return types.Message{Role: types.ConversationRoleAssistant, Content: blocks}
}

func toolUse(id, name string, input any) types.ContentBlock {
	return &types.ContentBlockMemberToolUse{Value: types.ToolUseBlock{
		ToolUseId: aws.String(id),
		Name:      aws.String(name),
		Input:     document.NewLazyDocument(input),
	}}
}

func toolResult(id string, content ...types.ToolResultContentBlock) types.ContentBlock {
	return &types.ContentBlockMemberToolResult{Value: types.ToolResultBlock{
		ToolUseId: aws.String(id),
		Content:   content,
	}}
}

func resultText(s string) types.ToolResultContentBlock {
	return &types.ToolResultContentBlockMemberText{Value: s}
}

func image(format types.ImageFormat, data []byte) types.ContentBlock {
	return &types.ContentBlockMemberImage{Value: imageBlock(format, data)}
}

func imageBlock(format types.ImageFormat, data []byte) types.ImageBlock {
	return types.ImageBlock{Format: format, Source: &types.ImageSourceMemberBytes{Value: data}}
}

func doc(format types.DocumentFormat, name string, data []byte) types.ContentBlock {
	return &types.ContentBlockMemberDocument{Value: types.DocumentBlock{
		Format: format,
		Name:   aws.String(name),
		Source: &types.DocumentSourceMemberBytes{Value: data},
	}}
}

func toolSpec(name string) types.Tool {
	return &types.ToolMemberToolSpec{Value: types.ToolSpecification{
		Name:        aws.String(name),
		Description: aws.String("a tool"),
		InputSchema: &types.ToolInputSchemaMemberJson{Value: document.NewLazyDocument(map[string]any{
			"type":       "object",
			"properties": map[string]any{"city": map[string]any{"type": "string"}},
		})},
	}}
}

func tools(names ...string) *types.ToolConfiguration {
	tc := &types.ToolConfiguration{}
	for _, n := range names {
		tc.Tools = append(tc.Tools, toolSpec(n))
	}
	return tc
}

// replyText returns the text blocks of a Converse output, joined.
func replyText(t *testing.T, out *bedrockruntime.ConverseOutput) string {
	t.Helper()
	msg, ok := out.Output.(*types.ConverseOutputMemberMessage)
	if !ok {
		t.Fatalf("output is %T, want *types.ConverseOutputMemberMessage", out.Output)
	}
	s := ""
	for _, b := range msg.Value.Content {
		if tb, ok := b.(*types.ContentBlockMemberText); ok {
			s += tb.Value
		}
	}
	return s
}

// decodeDocument reads a smithy document the way the agent does.
func decodeDocument(t *testing.T, d document.Interface) any {
	t.Helper()
	raw, err := d.MarshalSmithyDocument()
	if err != nil {
		t.Fatalf("MarshalSmithyDocument: %v", err)
	}
	var v any
	if err := json.Unmarshal(raw, &v); err != nil {
		t.Fatalf("unmarshal document %s: %v", raw, err)
	}
	return v
}
