package bedrock

import (
	"context"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/bedrockruntime"
	"github.com/aws/aws-sdk-go-v2/service/bedrockruntime/schemas"
	"github.com/aws/aws-sdk-go-v2/service/bedrockruntime/types"
	"github.com/aws/smithy-go/transport/http/protocol/restjson1"
	"github.com/lambda-agent/lambda-agent/internal/agent"
)

// ConverseStream sends req to Bedrock's ConverseStream and decodes the event
// stream: text deltas are emitted as they arrive; tool-use input, reasoning,
// the stop reason, the usage and the guardrail's trace are assembled into
// the response. Failures
// are classified as Converse's are, whether Bedrock reports them before the
// first event or as an exception in the stream.
func (m *Model) ConverseStream(ctx context.Context, req *agent.ModelRequest, emit func(agent.Delta)) (*agent.ModelResponse, error) {
	in, err := m.input(req)
	if err != nil {
		return nil, &agent.ModelError{Kind: agent.KindInvalid, Message: err.Error(), Err: err}
	}
	start := time.Now()
	resp, err := m.converseStream(ctx, in, emit)
	m.record(ctx, in, true, start, resp, err)
	return resp, err
}

// converseStream makes the call of ConverseStream.
func (m *Model) converseStream(ctx context.Context, in *bedrockruntime.ConverseInput, emit func(agent.Delta)) (*agent.ModelResponse, error) {
	out, err := m.client.ConverseStream(ctx, streamInput(in), func(o *bedrockruntime.Options) {
		o.Retryer = aws.NopRetryer{}
		// The client's protocol holds one event-stream decoder, with its
		// buffer, for all its streams (smithy-go v1.28.8): two streams at
		// once would decode into each other's buffer. Each stream gets its
		// own, which costs a few small allocations.
		o.Protocol = restjson1.New(schemas.AmazonBedrockFrontendService)
	})
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, classify(m.cfg.ModelID, err)
	}
	stream := out.GetStream()
	defer stream.Close()

	var msg streamedMessage
	resp := &agent.ModelResponse{}
	for ev := range stream.Events() {
		switch e := ev.(type) {
		case *types.ConverseStreamOutputMemberContentBlockStart:
			err = msg.start(e.Value)
		case *types.ConverseStreamOutputMemberContentBlockDelta:
			var text string
			if text, err = msg.delta(e.Value); text != "" {
				emit(agent.Delta{Text: text})
			}
		case *types.ConverseStreamOutputMemberMessageStop:
			resp.StopReason = agent.StopReason(e.Value.StopReason)
		case *types.ConverseStreamOutputMemberMetadata:
			if u := e.Value.Usage; u != nil {
				resp.Usage = usage(u)
			}
			if mt := e.Value.Metrics; mt != nil {
				resp.Latency = time.Duration(aws.ToInt64(mt.LatencyMs)) * time.Millisecond
			}
			if tr := e.Value.Trace; tr != nil {
				resp.Guardrail = guardrailTrace(tr.Guardrail)
			}
		}
		// messageStart, contentBlockStop and members newer than this code
		// carry nothing the answer needs.
		if err != nil {
			return nil, &agent.ModelError{Kind: agent.KindOther, Message: "decode answer: " + err.Error(), Err: err}
		}
	}
	if err := stream.Err(); err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, classify(m.cfg.ModelID, err)
	}
	if ctx.Err() != nil {
		return nil, ctx.Err() // the stream ended because the request was cancelled
	}
	if resp.StopReason == "" {
		return nil, &agent.ModelError{Kind: agent.KindUnavailable, Message: "the answer stream ended before its messageStop event"}
	}
	if resp.Message, err = msg.message(); err != nil {
		return nil, &agent.ModelError{Kind: agent.KindOther, Message: "decode answer: " + err.Error(), Err: err}
	}
	return resp, nil
}

// streamInput is in, for ConverseStream. A guardrail checks the answer
// before it is streamed (sync mode), so that nothing it would block is
// emitted first.
func streamInput(in *bedrockruntime.ConverseInput) *bedrockruntime.ConverseStreamInput {
	out := &bedrockruntime.ConverseStreamInput{
		ModelId:         in.ModelId,
		Messages:        in.Messages,
		System:          in.System,
		InferenceConfig: in.InferenceConfig,
		ToolConfig:      in.ToolConfig,
	}
	if g := in.GuardrailConfig; g != nil {
		out.GuardrailConfig = &types.GuardrailStreamConfiguration{
			GuardrailIdentifier:  g.GuardrailIdentifier,
			GuardrailVersion:     g.GuardrailVersion,
			Trace:                g.Trace,
			StreamProcessingMode: types.GuardrailStreamProcessingModeSync,
		}
	}
	return out
}
