package bedrock_test

import (
	"context"
	"strings"
	"testing"

	"github.com/lambda-agent/lambda-agent/internal/agent"
	"github.com/lambda-agent/lambda-agent/internal/agent/bedrock"
	"github.com/lambda-agent/lambda-agent/internal/testkit"
	"github.com/lambda-agent/lambda-agent/internal/testkit/conversetest"
)

// TestPromptCacheAcrossTurns: with PromptCache on, a model that caches
// gets cache points after the system prompt and after the previous turn,
// and from the second turn on, Bedrock (the simulated cache) reads the
// prefix rather than bill it whole. The history holds no cache points, and
// a model that does not cache gets none.
func TestPromptCacheAcrossTurns(t *testing.T) {
	for _, tt := range []struct {
		model  string
		caches bool
	}{
		{"us.anthropic.claude-sonnet-4-5-20250929-v1:0", true},
		{"meta.llama3-70b-instruct-v1:0", false},
	} {
		t.Run(tt.model, func(t *testing.T) {
			s := testkit.ConverseServer(t)
			s.EnableCache(conversetest.CacheConfig{MinTokens: 1024})
			s.Responder = func(*conversetest.Request) conversetest.Reply {
				return conversetest.Text(strings.Repeat("an answer ", 40))
			}
			model, err := bedrock.New(s.Client(), bedrock.Config{ModelID: tt.model})
			if err != nil {
				t.Fatal(err)
			}
			a, err := agent.New(agent.Config{Model: model, System: strings.Repeat("You are a careful assistant. ", 200), PromptCache: true})
			if err != nil {
				t.Fatal(err)
			}
			conv := &agent.Conversation{}
			var usage []agent.Usage
			for i := range 4 {
				res, err := a.Run(context.Background(), conv, []agent.ContentBlock{agent.Text(strings.Repeat("a question ", 30))})
				if err != nil {
					t.Fatalf("turn %d: %v", i, err)
				}
				usage = append(usage, res.Usage)
				conv = &agent.Conversation{Messages: append(conv.Messages, res.Messages...), Window: res.Window, State: res.State}
			}
			read := usage[3].CacheReadInputTokens
			switch {
			case tt.caches && (read == 0 || usage[0].CacheWriteInputTokens == 0 || read < usage[3].InputTokens):
				t.Errorf("usage by turn %+v: want writes on the first turn and mostly reads by the fourth", usage)
			case !tt.caches && (read != 0 || s.CacheStats().Writes != 0):
				t.Errorf("a model without a cache got cache points: %+v", s.CacheStats())
			}
			// The strict stand-in fails the test on a request with more
			// than bedrock.MaxCachePoints points, or one where Bedrock
			// refuses a point.
		})
	}
}
