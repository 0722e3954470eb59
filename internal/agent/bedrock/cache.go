package bedrock

import (
	"encoding/json"
	"strings"

	"github.com/aws/aws-sdk-go-v2/service/bedrockruntime"
	"github.com/aws/aws-sdk-go-v2/service/bedrockruntime/types"
	"github.com/lambda-agent/lambda-agent/internal/agent"
)

// caching is what a model family's prompt cache takes.
type caching struct {
	// MinTokens is the least prefix a cache point caches.
	MinTokens int
	// Tools says whether a point may stand among the tools.
	Tools bool
}

// cacheFamilies are the model families whose prompt cache Bedrock offers,
// by a fragment of their model ids, the most specific first. Sources, as
// of 2026-11-24: the Amazon Bedrock user guide, "Prompt caching for faster
// model inference" (its table of supported models, minimum tokens per cache
// checkpoint and cacheable fields), and Anthropic's prompt caching guide
// for the Claude minimums. A model not listed gets no cache points.
var cacheFamilies = []struct {
	fragment string
	caching
}{
	{"anthropic.claude-haiku-4", caching{MinTokens: 4096, Tools: true}},
	{"anthropic.claude-3-5-haiku", caching{MinTokens: 2048, Tools: true}},
	{"anthropic.claude-3-7-sonnet", caching{MinTokens: 1024, Tools: true}},
	{"anthropic.claude-sonnet-4", caching{MinTokens: 1024, Tools: true}},
	{"anthropic.claude-opus-4", caching{MinTokens: 1024, Tools: true}},
	// Nova caches the system prompt and messages, not tools.
	{"amazon.nova-", caching{MinTokens: 1000, Tools: false}},
}

// cachingOf returns how the model caches, or false for a model without a
// prompt cache. An inference profile's id holds its model's.
func cachingOf(modelID string) (caching, bool) {
	for _, f := range cacheFamilies {
		if strings.Contains(modelID, f.fragment) {
			return f.caching, true
		}
	}
	return caching{}, false
}

// MaxCachePoints is how many cache points Bedrock takes in one request.
const MaxCachePoints = 4

// addCachePoints puts cache points into in where req's hints ask for them
// and the model caches: after the tools and system prompt, and after each
// message req.CacheAfter names, each only where the prefix before it
// reaches the model's minimum, at most MaxCachePoints. The points live in
// the request alone, never in the history.
func (m *Model) addCachePoints(in *bedrockruntime.ConverseInput, req *agent.ModelRequest) {
	c, ok := cachingOf(m.cfg.ModelID)
	if !ok || !req.CacheSystem && len(req.CacheAfter) == 0 {
		return
	}
	point := &types.CachePointBlock{Type: types.CachePointTypeDefault}
	// The prefix is measured only until it reaches the minimum: every
	// point past that qualifies, and measuring the rest of a long window
	// on every call would be waste.
	tokens := 0
	grow := func(v any) {
		if tokens < c.MinTokens {
			tokens += estimate(v)
		}
	}
	if in.ToolConfig != nil {
		grow(in.ToolConfig.Tools)
	}
	grow(in.System)
	points := 0
	if req.CacheSystem && tokens >= c.MinTokens {
		switch {
		case len(in.System) > 0:
			in.System = append(in.System, &types.SystemContentBlockMemberCachePoint{Value: *point})
			points++
		case in.ToolConfig != nil && c.Tools:
			in.ToolConfig.Tools = append(in.ToolConfig.Tools, &types.ToolMemberCachePoint{Value: *point})
			points++
		}
	}
	next := 0
	for i, msg := range in.Messages {
		grow(msg.Content)
		if next >= len(req.CacheAfter) || points >= MaxCachePoints {
			break
		}
		if i != req.CacheAfter[next] {
			continue
		}
		next++
		if tokens < c.MinTokens || endsWithReasoning(msg.Content) {
			continue
		}
		in.Messages[i].Content = append(msg.Content, &types.ContentBlockMemberCachePoint{Value: *point})
		points++
	}
}

// endsWithReasoning reports whether content ends with reasoning, after
// which Bedrock takes no cache point.
func endsWithReasoning(content []types.ContentBlock) bool {
	if n := len(content); n > 0 {
		_, ok := content[n-1].(*types.ContentBlockMemberReasoningContent)
		return ok
	}
	return false
}

// estimate guesses the tokens of v at 4 bytes of JSON a token, which is
// close enough to place cache points: a point a little short of the
// minimum caches nothing, and costs nothing.
func estimate(v any) int {
	raw, err := json.Marshal(v)
	if err != nil {
		return 0
	}
	return len(raw) / 4
}
