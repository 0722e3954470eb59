package conversetest_test

import (
	"encoding/json"
	"fmt"
	"testing"

	"github.com/lambda-agent/lambda-agent/internal/testkit/conversetest"
)

// BenchmarkConverse measures one SDK round trip through the stand-in, the
// floor for any benchmark of the agent built on it.
func BenchmarkConverse(b *testing.B) {
	srv := conversetest.NewServer()
	defer srv.Close()
	client := srv.Client()
	in := validConversation()
	for b.Loop() {
		if _, err := client.Converse(b.Context(), in); err != nil {
			b.Fatalf("Converse: %v", err)
		}
		srv.Reset() // Keep the recording from growing.
	}
}

// BenchmarkValidate measures validating a 200-message conversation with 50
// tool round trips.
func BenchmarkValidate(b *testing.B) {
	req := goRequest()
	req.Messages = req.Messages[:1]
	for i := range 50 {
		id := fmt.Sprintf("t%d", i)
		req.Messages = append(req.Messages,
			conversetest.Message{Role: "assistant", Content: []conversetest.ContentBlock{{ToolUse: &conversetest.ToolUseBlock{
				ToolUseID: id, Name: "get_weather", Input: json.RawMessage(`{"city":"Oslo"}`),
			}}}},
			conversetest.Message{Role: "user", Content: []conversetest.ContentBlock{{ToolResult: &conversetest.ToolResultBlock{
				ToolUseID: id, Content: []conversetest.ToolResultContent{{Text: "sunny"}},
			}}}},
			conversetest.Message{Role: "assistant", Content: []conversetest.ContentBlock{{Text: "ok"}}},
			conversetest.Message{Role: "user", Content: []conversetest.ContentBlock{{Text: "and now?"}}},
		)
	}
	for b.Loop() {
		if err := conversetest.Validate(req); err != nil {
			b.Fatalf("Validate: %v", err)
		}
	}
}
