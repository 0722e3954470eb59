package telemetry

import (
	"context"
	"encoding/json"
	"errors"
	"sync"

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
	m.end(ctx, span, resp, err)
	return resp, err
}

// ConverseStream streams when the model does, and otherwise emits the
// answer's text once it has it, as the agent would.
func (m *tracedModel) ConverseStream(ctx context.Context, req *agent.ModelRequest, emit func(agent.Delta)) (*agent.ModelResponse, error) {
	ctx, span := m.start(ctx, req)
	resp, err := agent.ConverseStream(ctx, m.model, req, emit)
	m.end(ctx, span, resp, err)
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

// end ends the span of a call in ctx, and counts the call's usage in the
// invoke_agent span of the sub-agent that made it.
func (m *tracedModel) end(ctx context.Context, span trace.Span, resp *agent.ModelResponse, err error) {
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
	if a, ok := ctx.Value(agentKey{}).(*agentSpan); ok {
		a.called(m.id, resp)
	}
	span.SetAttributes(attribute.StringSlice("gen_ai.response.finish_reasons", []string{string(resp.StopReason)}))
	span.SetAttributes(usageAttrs(resp.Usage)...)
	if m.t.cfg.CaptureContent {
		span.SetAttributes(attribute.String("gen_ai.output.messages", messagesJSON([]agent.Message{resp.Message}, string(resp.StopReason))))
	}
}

// TraceTools adds to h the hooks that make each tool call an execute_tool
// span, which the tool runs in, and each delegation to a sub-agent an
// invoke_agent span within it, under which the sub-agent's model calls and
// tool calls are. Its AfterToolCall hook goes first, so that it runs last:
// the spans end with the result the model receives. With tracing off it
// adds nothing.
func (t *Tracing) TraceTools(h *agent.Hooks) {
	if !t.On() {
		return
	}
	h.ToolContext = append([]func(context.Context, *agent.ToolContextEvent) context.Context{t.startTool}, h.ToolContext...)
	h.AfterToolCall = append([]func(context.Context, *agent.AfterToolCallEvent){t.endTool}, h.AfterToolCall...)
}

// toolKey keys the toolSpan of a tool call's context.
type toolKey struct{}

// toolSpan is a tool call's execute_tool span, and the invoke_agent span
// of the sub-agent it runs, when it delegates.
type toolSpan struct {
	use   *agent.ToolUseBlock // the call's, told apart from its parent's
	span  trace.Span
	agent *agentSpan
}

// startTool starts the spans of a tool call, and returns the context it
// runs in.
func (t *Tracing) startTool(ctx context.Context, e *agent.ToolContextEvent) context.Context {
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
	}
	ctx, span := t.tracer.Start(ctx, name, trace.WithSpanKind(trace.SpanKindInternal), trace.WithAttributes(attrs...))
	ts := &toolSpan{use: e.Use, span: span}
	if e.Delegation {
		ctx, ts.agent = t.startAgent(ctx, e.Tool.Spec())
	}
	return context.WithValue(ctx, toolKey{}, ts)
}

// endTool ends the spans of a tool call with its result.
func (t *Tracing) endTool(ctx context.Context, e *agent.AfterToolCallEvent) {
	ts, ok := ctx.Value(toolKey{}).(*toolSpan)
	if !ok || ts.use != e.Use {
		return
	}
	if ts.agent != nil {
		t.endAgent(ts.agent, e.Result)
	}
	if t.cfg.CaptureContent && e.Result != nil {
		ts.span.SetAttributes(attribute.String("gen_ai.tool.call.result", contentJSON(resultParts(e.Result))))
	}
	t.setResultStatus(ts.span, e.Result, "tool_error")
	ts.span.End()
}

// setResultStatus gives span an error status, with error.type errType,
// when result is an error.
func (t *Tracing) setResultStatus(span trace.Span, result *agent.ToolResultBlock, errType string) {
	if result == nil || result.Status != agent.ToolError {
		return
	}
	span.SetAttributes(attribute.String("error.type", errType))
	desc := errType // the result's text is content, recorded only on request
	if t.cfg.CaptureContent {
		desc = agent.Clip(resultText(result), 512)
	}
	span.SetStatus(codes.Error, desc)
}

// agentKey keys the agentSpan of the sub-agent a context runs in.
type agentKey struct{}

// agentSpan is the invoke_agent span of a delegation, and the sum of the
// model calls under it, which the sub-agent's own calls add to as they end
// and nested delegations as they end.
type agentSpan struct {
	span   trace.Span
	parent *agentSpan // the delegation this one runs in, nil for the main agent's

	mu     sync.Mutex
	usage  agent.Usage
	model  string // of its own latest call
	finish string
}

// startAgent starts the invoke_agent span of a delegation to the
// sub-agent that spec describes, within the span of ctx.
func (t *Tracing) startAgent(ctx context.Context, spec agent.ToolSpec) (context.Context, *agentSpan) {
	// In-process, the conventions' INTERNAL kind. gen_ai.agent.id is left
	// out: a sub-agent has no id but its name.
	attrs := []attribute.KeyValue{
		attribute.String("gen_ai.operation.name", "invoke_agent"),
		attribute.String("gen_ai.provider.name", providerName),
		attribute.String("gen_ai.agent.name", spec.Name),
	}
	if spec.Description != "" {
		attrs = append(attrs, attribute.String("gen_ai.agent.description", spec.Description))
	}
	parent, _ := ctx.Value(agentKey{}).(*agentSpan)
	ctx, span := t.tracer.Start(ctx, "invoke_agent "+spec.Name, trace.WithSpanKind(trace.SpanKindInternal), trace.WithAttributes(attrs...))
	a := &agentSpan{span: span, parent: parent}
	return context.WithValue(ctx, agentKey{}, a), a
}

// endAgent ends a's span with the usage of the model calls under it, and
// adds that usage to the delegation a runs in. result is the delegation's,
// as the model receives it.
func (t *Tracing) endAgent(a *agentSpan, result *agent.ToolResultBlock) {
	a.mu.Lock()
	u, model, finish := a.usage, a.model, a.finish
	a.mu.Unlock()
	if a.parent != nil {
		a.parent.add(u)
	}
	attrs := usageAttrs(u)
	if model != "" {
		attrs = append(attrs, attribute.String("gen_ai.request.model", model))
	}
	if finish != "" {
		attrs = append(attrs, attribute.StringSlice("gen_ai.response.finish_reasons", []string{finish}))
	}
	a.span.SetAttributes(attrs...)
	t.setResultStatus(a.span, result, "agent_error")
	a.span.End()
}

// add counts u, a nested delegation's usage, in a's.
func (a *agentSpan) add(u agent.Usage) {
	a.mu.Lock()
	defer a.mu.Unlock()
	addUsage(&a.usage, u)
}

// called counts a model call of a's sub-agent, of model, that answered
// resp.
func (a *agentSpan) called(model string, resp *agent.ModelResponse) {
	a.mu.Lock()
	defer a.mu.Unlock()
	addUsage(&a.usage, resp.Usage)
	a.model, a.finish = model, string(resp.StopReason)
}

func addUsage(sum *agent.Usage, u agent.Usage) {
	sum.InputTokens += u.InputTokens
	sum.OutputTokens += u.OutputTokens
	sum.TotalTokens += u.TotalTokens
	sum.CacheReadInputTokens += u.CacheReadInputTokens
	sum.CacheWriteInputTokens += u.CacheWriteInputTokens
}

// usageAttrs are the conventions' usage attributes of u. They count cached
// tokens in the input tokens; Bedrock's inputTokens are only the rest.
func usageAttrs(u agent.Usage) []attribute.KeyValue {
	return []attribute.KeyValue{
		attribute.Int("gen_ai.usage.input_tokens", u.InputTokens+u.CacheReadInputTokens+u.CacheWriteInputTokens),
		attribute.Int("gen_ai.usage.output_tokens", u.OutputTokens),
		attribute.Int("gen_ai.usage.cache_read.input_tokens", u.CacheReadInputTokens),
		attribute.Int("gen_ai.usage.cache_creation.input_tokens", u.CacheWriteInputTokens),
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
