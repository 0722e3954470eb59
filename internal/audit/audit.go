package audit

import (
	"context"
	"encoding/json"
	"slices"
	"sync"
	"time"

	"github.com/lambda-agent/lambda-agent/internal/agent"
)

// Record is one model call: what was sent and what came back. Its JSON is
// what the audit routes return and what the store keeps, compressed.
type Record struct {
	// ModelID is the model, inference profile or ARN called.
	ModelID string `json:"model_id"`
	// Stream says the call was ConverseStream's, whose answer the model
	// assembled from its events; otherwise it was Converse's.
	Stream bool `json:"stream"`
	// Started is when the call was sent, and Duration how long it took
	// until its answer was whole.
	Started    time.Time `json:"started_at"`
	DurationMS int64     `json:"duration_ms"`
	Request    Request   `json:"request"`
	// Response is the answer; nil when the call failed, with Error.
	Response *Response `json:"response,omitempty"`
	Error    string    `json:"error,omitempty"`
}

// Request is a model call's request, as it went over the wire.
type Request struct {
	// System is the system prompt's text blocks.
	System []string `json:"system,omitempty"`
	// Messages are the messages sent: the window after trimming and
	// summaries, with the turn's context blocks, without cache points.
	Messages []agent.Message `json:"messages"`
	// Tools are the tool specs offered, in order.
	Tools []Tool `json:"tools,omitempty"`
	// ToolChoice is "auto", "any" or "tool:NAME"; empty without tools.
	ToolChoice string `json:"tool_choice,omitempty"`
	// CachePoints says where the request had prompt cache points.
	CachePoints *CachePoints `json:"cache_points,omitempty"`
	// Inference is the inference configuration; nil for the model's
	// defaults.
	Inference *Inference `json:"inference,omitempty"`
	// Guardrail names the guardrail applied; nil for none.
	Guardrail *Guardrail `json:"guardrail,omitempty"`
}

// Tool is one tool spec as sent.
type Tool struct {
	Name        string          `json:"name"`
	Description string          `json:"description,omitempty"`
	InputSchema json.RawMessage `json:"input_schema"`
}

// CachePoints says where a request had cache points: after the system
// prompt, after the tools, and after the messages at these indexes.
type CachePoints struct {
	System   bool  `json:"system,omitempty"`
	Tools    bool  `json:"tools,omitempty"`
	Messages []int `json:"messages,omitempty"`
}

// Inference is a request's inference configuration.
type Inference struct {
	MaxTokens     *int32   `json:"max_tokens,omitempty"`
	Temperature   *float32 `json:"temperature,omitempty"`
	TopP          *float32 `json:"top_p,omitempty"`
	StopSequences []string `json:"stop_sequences,omitempty"`
}

// Guardrail names the guardrail of a request.
type Guardrail struct {
	ID      string `json:"id"`
	Version string `json:"version"`
	Trace   bool   `json:"trace,omitempty"`
}

// Response is a model call's answer.
type Response struct {
	Message    agent.Message    `json:"message"`
	StopReason agent.StopReason `json:"stop_reason"`
	Usage      agent.Usage      `json:"usage"`
	// LatencyMS is the service's own latency, when it reports one.
	LatencyMS int64 `json:"latency_ms,omitempty"`
	// Guardrail is what the guardrail's trace says it blocked.
	Guardrail *agent.GuardrailTrace `json:"guardrail,omitempty"`
}

// Log collects the records of one turn's model calls, in the order the
// calls ended. It is safe for concurrent use: the delegations of a turn
// may call models at once.
type Log struct {
	mu      sync.Mutex
	records []Record
}

// Add appends r.
func (l *Log) Add(r Record) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.records = append(l.records, r)
}

// Records returns the records added so far.
func (l *Log) Records() []Record {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.records)
}

// Redact replaces, in every record's request, each run of blocks equal to
// input in a user message by one text block of text: what the turn kept of
// an input a guardrail blocked (agent.Result.Redacted), so that the
// records hold no more of it than the session does. A context block that
// the agent put before the input stays.
func (l *Log) Redact(input []agent.ContentBlock, text string) {
	if len(input) == 0 {
		return
	}
	want := make([]string, len(input))
	for i, b := range input {
		want[i] = blockJSON(b)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	for r := range l.records {
		msgs := slices.Clone(l.records[r].Request.Messages)
		for i, m := range msgs {
			if m.Role == agent.RoleUser {
				msgs[i].Content = redactRun(m.Content, want, text)
			}
		}
		l.records[r].Request.Messages = msgs
	}
}

// redactRun replaces each run of content whose blocks' JSON is want by a
// text block of text.
func redactRun(content []agent.ContentBlock, want []string, text string) []agent.ContentBlock {
	var out []agent.ContentBlock
	for i := 0; i < len(content); {
		if i+len(want) <= len(content) && matches(content[i:i+len(want)], want) {
			out = append(out, agent.Text(text))
			i += len(want)
			continue
		}
		out = append(out, content[i])
		i++
	}
	return out
}

func matches(blocks []agent.ContentBlock, want []string) bool {
	for i, b := range blocks {
		if blockJSON(b) != want[i] {
			return false
		}
	}
	return true
}

func blockJSON(b agent.ContentBlock) string {
	raw, err := json.Marshal(b)
	if err != nil {
		return ""
	}
	return string(raw)
}

type logKey struct{}

// With returns ctx carrying l: the model calls made with it are recorded
// in l.
func With(ctx context.Context, l *Log) context.Context {
	return context.WithValue(ctx, logKey{}, l)
}

// From returns the Log of ctx, or nil when the calls made with ctx are not
// audited.
func From(ctx context.Context) *Log {
	l, _ := ctx.Value(logKey{}).(*Log)
	return l
}
