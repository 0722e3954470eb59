package bedrock

import (
	"context"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/bedrockruntime"
	"github.com/aws/aws-sdk-go-v2/service/bedrockruntime/types"
	"github.com/lambda-agent/lambda-agent/internal/agent"
	"github.com/lambda-agent/lambda-agent/internal/audit"
)

// record adds the call of in to the audit log of ctx, if it has one: the
// request as the SDK sent it, cache points and all, and the answer resp, or
// the failure err. It is read back from in, not from the agent's request,
// so that the record is what went over the wire.
func (m *Model) record(ctx context.Context, in *bedrockruntime.ConverseInput, stream bool, start time.Time, resp *agent.ModelResponse, err error) {
	log := audit.From(ctx)
	if log == nil {
		return
	}
	r := audit.Record{
		ModelID:    aws.ToString(in.ModelId),
		Stream:     stream,
		Started:    start.UTC(),
		DurationMS: time.Since(start).Milliseconds(),
		Request:    auditRequest(in),
	}
	switch {
	case err != nil:
		r.Error = err.Error()
	case resp != nil:
		r.Response = &audit.Response{
			Message:    resp.Message,
			StopReason: resp.StopReason,
			Usage:      resp.Usage,
			LatencyMS:  resp.Latency.Milliseconds(),
			Guardrail:  resp.Guardrail,
		}
	}
	log.Add(r)
}

// auditRequest is in in the audit record's terms. A block that cannot be
// read back is recorded as a text block that names it, so that a record is
// never lost to a block type newer than this code.
func auditRequest(in *bedrockruntime.ConverseInput) audit.Request {
	var req audit.Request
	var points audit.CachePoints
	for _, b := range in.System {
		switch v := b.(type) {
		case *types.SystemContentBlockMemberText:
			req.System = append(req.System, v.Value)
		case *types.SystemContentBlockMemberCachePoint:
			points.System = true
		default:
			req.System = append(req.System, fmt.Sprintf("[system block %T]", v))
		}
	}
	req.Messages = make([]agent.Message, len(in.Messages))
	for i, msg := range in.Messages {
		out := agent.Message{Role: agent.Role(msg.Role), Content: make([]agent.ContentBlock, 0, len(msg.Content))}
		for _, cb := range msg.Content {
			if _, ok := cb.(*types.ContentBlockMemberCachePoint); ok {
				points.Messages = append(points.Messages, i)
				continue
			}
			b, err := fromBedrockBlock(cb)
			if err != nil {
				b = agent.Text(fmt.Sprintf("[unrecorded block: %v]", err))
			}
			out.Content = append(out.Content, b)
		}
		req.Messages[i] = out
	}
	if tc := in.ToolConfig; tc != nil {
		for _, t := range tc.Tools {
			switch v := t.(type) {
			case *types.ToolMemberToolSpec:
				tool := audit.Tool{Name: aws.ToString(v.Value.Name), Description: aws.ToString(v.Value.Description)}
				if s, ok := v.Value.InputSchema.(*types.ToolInputSchemaMemberJson); ok {
					tool.InputSchema, _ = fromDocument(s.Value)
				}
				req.Tools = append(req.Tools, tool)
			case *types.ToolMemberCachePoint:
				points.Tools = true
			default:
				req.Tools = append(req.Tools, audit.Tool{Name: fmt.Sprintf("[tool %T]", v)})
			}
		}
		switch c := tc.ToolChoice.(type) {
		case nil, *types.ToolChoiceMemberAuto:
			req.ToolChoice = "auto"
		case *types.ToolChoiceMemberAny:
			req.ToolChoice = "any"
		case *types.ToolChoiceMemberTool:
			req.ToolChoice = "tool:" + aws.ToString(c.Value.Name)
		default:
			req.ToolChoice = fmt.Sprintf("%T", c)
		}
	}
	if points.System || points.Tools || len(points.Messages) > 0 {
		req.CachePoints = &points
	}
	if ic := in.InferenceConfig; ic != nil {
		req.Inference = &audit.Inference{MaxTokens: ic.MaxTokens, Temperature: ic.Temperature, TopP: ic.TopP, StopSequences: ic.StopSequences}
	}
	if g := in.GuardrailConfig; g != nil {
		req.Guardrail = &audit.Guardrail{
			ID:      aws.ToString(g.GuardrailIdentifier),
			Version: aws.ToString(g.GuardrailVersion),
			Trace:   g.Trace == types.GuardrailTraceEnabled,
		}
	}
	return req
}
