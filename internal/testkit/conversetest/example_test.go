package conversetest_test

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/bedrockruntime"
	"github.com/aws/aws-sdk-go-v2/service/bedrockruntime/types"

	"github.com/lambda-agent/lambda-agent/internal/testkit/conversetest"
)

func Example() {
	srv := conversetest.NewServer()
	defer srv.Close()
	srv.Enqueue(conversetest.ToolUse("t1", "get_weather", map[string]any{"city": "Oslo"}))

	client := srv.Client()
	out, err := client.Converse(context.Background(), &bedrockruntime.ConverseInput{
		ModelId:  aws.String("anthropic.claude-3-haiku-20240307-v1:0"),
		Messages: []types.Message{{Role: types.ConversationRoleUser, Content: []types.ContentBlock{&types.ContentBlockMemberText{Value: "Weather in Oslo?"}}}},
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, b := range out.Output.(*types.ConverseOutputMemberMessage).Value.Content {
		if tu, ok := b.(*types.ContentBlockMemberToolUse); ok {
			raw, _ := tu.Value.Input.MarshalSmithyDocument()
			var input map[string]any
			_ = json.Unmarshal(raw, &input)
			fmt.Println(out.StopReason, aws.ToString(tu.Value.Name), input["city"])
		}
	}

	// The caller forgot toolConfig when sending the tool call back.
	_, err = client.Converse(context.Background(), &bedrockruntime.ConverseInput{
		ModelId: aws.String("anthropic.claude-3-haiku-20240307-v1:0"),
		Messages: []types.Message{
			{Role: types.ConversationRoleUser, Content: []types.ContentBlock{&types.ContentBlockMemberText{Value: "Weather in Oslo?"}}},
			{Role: types.ConversationRoleAssistant, Content: out.Output.(*types.ConverseOutputMemberMessage).Value.Content},
			{Role: types.ConversationRoleUser, Content: []types.ContentBlock{&types.ContentBlockMemberToolResult{Value: types.ToolResultBlock{
				ToolUseId: aws.String("t1"),
				Content:   []types.ToolResultContentBlock{&types.ToolResultContentBlockMemberText{Value: "sunny"}},
			}}}},
		},
	})
	if err == nil {
		fmt.Println("accepted a request without toolConfig")
	}
	fmt.Println(srv.Violations())
	// Output:
	// tool_use get_weather Oslo
	// [toolConfig: must be present when messages contain toolUse or toolResult blocks]
}
