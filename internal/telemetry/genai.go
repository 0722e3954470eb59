package telemetry

import (
	"context"
	"encoding/json"
	"errors"
	"time"

	"github.com/lambda-agent/lambda-agent/internal/agent"
	"github.com/lambda-agent/lambda-agent/internal/ddbhistory"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
)

// Model wraps m, a model of id, so that each of its calls is a chat span:
// every attempt, a retried one too, since the agent retries around it. It
// returns m itself when tracing is off.
func (t *Tracing) Model(m agent.Model, id string) agent.Model {
	if !t.On() {
		return m
	}
	return &tracedModel{t: t, model: m, id: id}
}

type tracedModel struct {
	t     *Tracing
	model agent.Model
	id    string
}

var _ agent.StreamingModel = (*tracedModel)(nil)

func (m *tracedModel) Converse(ctx context.Context, req *agent.ModelRequest) (*agent.ModelResponse, error) {
	ctx, span := m.start(ctx, req)
	resp, err := m.model.Converse(ctx, req)
	m.end(span, resp, err)
	return resp, err
}

// ConverseStream streams when the model does, and otherwise emits the
// answer's text once it has it, as the agent would.
func (m *tracedModel) ConverseStream(ctx context.Context, req *agent.ModelRequest, emit func(agent.Delta)) (*agent.ModelResponse, error) {
	ctx, span := m.start(ctx, req)
	resp, err := agent.ConverseStream(ctx, m.model, req, emit)
	m.end(span, resp, err)
	return resp, err
}

func (m *tracedModel) start(ctx context.Context, req *agent.ModelRequest) (context.Context, trace.Span) {
	attrs := []attribute.KeyValue{
		attribute.String("gen_ai.operation.name", "chat"),
		attribute.String("gen_ai.provider.name", providerName),
		attribute.String("gen_ai.request.model", m.id),
	}
	if m.t.cfg.CaptureContent {
		if req.System != "" {
			attrs = append(attrs, attribute.String("gen_ai.system_instructions", contentJSON([]part{{Type: "text", Content: req.System}})))
		}
		attrs = append(attrs, attribute.String("gen_ai.input.messages", messagesJSON(req.Messages)))
	}
	return m.t.tracer.Start(ctx, "chat "+m.id, trace.WithSpanKind(trace.SpanKindClient), trace.WithAttributes(attrs...))
}

func (m *tracedModel) end(span trace.Span, resp *agent.ModelResponse, err error) {
	defer span.End()
	if err != nil {
		kind := "error"
		var me *agent.ModelError
		if errors.As(err, &me) {
			kind = me.Kind.String()
			if me.Code != "" {
				kind = me.Code
			}
		} else if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) {
			kind = "timeout"
		}
		span.SetAttributes(attribute.String("error.type", kind))
		span.SetStatus(codes.Error, err.Error())
		return
	}
	u := resp.Usage
	span.SetAttributes(
		attribute.StringSlice("gen_ai.response.finish_reasons", []string{string(resp.StopReason)}),
		// The conventions count cached tokens in the input tokens;
		// Bedrock's inputTokens are only the rest.
		attribute.Int("gen_ai.usage.input_tokens", u.InputTokens+u.CacheReadInputTokens+u.CacheWriteInputTokens),
		attribute.Int("gen_ai.usage.output_tokens", u.OutputTokens),
		attribute.Int("gen_ai.usage.cache_read.input_tokens", u.CacheReadInputTokens),
		attribute.Int("gen_ai.usage.cache_creation.input_tokens", u.CacheWriteInputTokens),
	)
	if m.t.cfg.CaptureContent {
		span.SetAttributes(attribute.String("gen_ai.output.messages", messagesJSON([]agent.Message{resp.Message}, string(resp.StopReason))))
	}
}

// ToolHook returns an AfterToolCall hook that records each tool run as an
// execute_tool span, or nil when tracing is off. The span ends when the
// run's result is final, and starts the run's duration before.
func (t *Tracing) ToolHook() func(context.Context, *agent.AfterToolCallEvent) {
	if !t.On() {
		return nil
	}
	return func(ctx context.Context, e *agent.AfterToolCallEvent) {
		end := time.Now()
		name := "execute_tool"
		if e.Tool != nil { // not a name the model made up
			name += " " + e.Use.Name
		}
		attrs := []attribute.KeyValue{
			attribute.String("gen_ai.operation.name", "execute_tool"),
			attribute.String("gen_ai.tool.name", e.Use.Name),
			attribute.String("gen_ai.tool.call.id", e.Use.ToolUseID),
			attribute.String("gen_ai.tool.type", "function"),
		}
		if t.cfg.CaptureContent {
			attrs = append(attrs, attribute.String("gen_ai.tool.call.arguments", agent.Clip(string(e.Use.Input), maxPart)))
			if e.Result != nil {
				attrs = append(attrs, attribute.String("gen_ai.tool.call.result", contentJSON(resultParts(e.Result))))
			}
		}
		_, span := t.tracer.Start(ctx, name, trace.WithSpanKind(trace.SpanKindInternal),
			trace.WithTimestamp(end.Add(-e.Duration)), trace.WithAttributes(attrs...))
		if e.Result != nil && e.Result.Status == agent.ToolError {
			span.SetAttributes(attribute.String("error.type", "tool_error"))
			desc := "tool_error" // the result's text is content, recorded only on request
			if t.cfg.CaptureContent {
				desc = agent.Clip(resultText(e.Result), 512)
			}
			span.SetStatus(codes.Error, desc)
		}
		span.End(trace.WithTimestamp(end))
	}
}

// StoreSpan runs call, a request to the session store named name (such
// as session.commit) about the session id (none when ""), in a client span
// of its own against table; a decorator of the store (internal/app's) makes
// a span of each request this way. messages, when not negative, is how many
// messages the request writes. With tracing off it only runs call.
func (t *Tracing) StoreSpan(ctx context.Context, name, id, table string, messages int, call func(context.Context) error) error {
	if !t.On() {
		return call(ctx)
	}
	attrs := []attribute.KeyValue{
		attribute.String("db.system.name", "aws.dynamodb"),
		attribute.StringSlice("aws.dynamodb.table_names", []string{table}),
	}
	if id != "" {
		attrs = append(attrs, attribute.String("gen_ai.conversation.id", id))
	}
	if messages >= 0 {
		attrs = append(attrs, attribute.Int("lambda_agent.messages", messages))
	}
	ctx, span := t.tracer.Start(ctx, name, trace.WithSpanKind(trace.SpanKindClient), trace.WithAttributes(attrs...))
	defer span.End()
	err := call(ctx)
	if err != nil {
		span.SetAttributes(attribute.String("error.type", errorType(err)))
		span.SetStatus(codes.Error, err.Error())
	}
	return err
}

// MarkNewSession says, on the store span of ctx, that the session it
// loaded does not exist yet: how every new session starts, so no failure.
func MarkNewSession(ctx context.Context) {
	trace.SpanFromContext(ctx).SetAttributes(attribute.Bool("lambda_agent.session.new", true))
}

// errorType names the store's errors that a trace should tell apart.
func errorType(err error) string {
	switch {
	case errors.Is(err, ddbhistory.ErrConflict):
		return "conflict"
	case errors.Is(err, ddbhistory.ErrNotFound):
		return "not_found"
	case errors.Is(err, context.DeadlineExceeded):
		return "timeout"
	}
	return "error"
}

// part is a message part as the conventions record content.
type part struct {
	Type      string          `json:"type"`
	Content   string          `json:"content,omitempty"`
	ID        string          `json:"id,omitempty"`
	Name      string          `json:"name,omitempty"`
	Arguments json.RawMessage `json:"arguments,omitempty"`
	Response  string          `json:"response,omitempty"`
}

type chatMessage struct {
	Role         string `json:"role"`
	Parts        []part `json:"parts"`
	FinishReason string `json:"finish_reason,omitempty"`
}

// maxPart bounds the text of each part of recorded content, in bytes, and
// maxParts the parts of an attribute, the latest kept: the attribute stays
// valid JSON, of at most about 64 KB.
const (
	maxPart  = 4 << 10
	maxParts = 16
)

// messagesJSON is messages in the conventions' form, for
// gen_ai.input.messages and gen_ai.output.messages; a finish reason is
// the last message's.
func messagesJSON(messages []agent.Message, finish ...string) string {
	out := make([]chatMessage, len(messages))
	for i, msg := range messages {
		out[i] = chatMessage{Role: string(msg.Role), Parts: []part{}}
		for _, b := range msg.Content {
			switch {
			case b.Text != "":
				out[i].Parts = append(out[i].Parts, part{Type: "text", Content: agent.Clip(b.Text, maxPart)})
			case b.ToolUse != nil:
				p := part{Type: "tool_call", ID: b.ToolUse.ToolUseID, Name: b.ToolUse.Name}
				if len(b.ToolUse.Input) <= maxPart {
					p.Arguments = b.ToolUse.Input
				}
				out[i].Parts = append(out[i].Parts, p)
			case b.ToolResult != nil:
				out[i].Parts = append(out[i].Parts, part{Type: "tool_call_response", ID: b.ToolResult.ToolUseID, Response: agent.Clip(resultText(b.ToolResult), maxPart)})
			default:
				out[i].Parts = append(out[i].Parts, part{Type: "blob"}) // images and documents are not recorded
			}
		}
	}
	if len(out) > 0 && len(finish) > 0 {
		out[len(out)-1].FinishReason = finish[0]
	}
	if len(out) > maxParts {
		out = out[len(out)-maxParts:]
	}
	raw, _ := json.Marshal(out) // of strings and valid JSON: it always encodes
	return string(raw)
}

func contentJSON(parts []part) string {
	raw, _ := json.Marshal(parts)
	return string(raw)
}

func resultParts(r *agent.ToolResultBlock) []part {
	return []part{{Type: "text", Content: agent.Clip(resultText(r), maxPart)}}
}

// resultText is a tool result's text and JSON.
func resultText(r *agent.ToolResultBlock) string {
	var s []byte
	for _, c := range r.Content {
		switch {
		case c.Text != "":
			s = append(s, c.Text...)
		case c.JSON != nil:
			s = append(s, c.JSON...)
		}
	}
	return string(s)
}
