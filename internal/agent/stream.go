package agent

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/bedrockruntime"
	"github.com/aws/aws-sdk-go-v2/service/bedrockruntime/types"
)

// StreamingModel is a Model that can also hand over its answer as the model
// writes it.
type StreamingModel interface {
	Model
	// ConverseStream is Converse that calls emit with each piece of the
	// answer as it arrives, in order, on the calling goroutine. It returns
	// the whole answer, as Converse would. Once it has called emit, it
	// must not retry: what was emitted may already be on its way to a user.
	ConverseStream(ctx context.Context, req *ModelRequest, emit func(Delta)) (*ModelResponse, error)
}

// Delta is a piece of a streamed answer.
type Delta struct {
	// Text is a piece of a text block.
	Text string
}

// converseStream calls m's ConverseStream, or, for a model that cannot
// stream, Converse, emitting each text block of the answer whole.
func converseStream(ctx context.Context, m Model, req *ModelRequest, emit func(Delta)) (*ModelResponse, error) {
	if sm, ok := m.(StreamingModel); ok {
		return sm.ConverseStream(ctx, req, emit)
	}
	resp, err := m.Converse(ctx, req)
	if err != nil {
		return nil, err
	}
	for _, b := range resp.Message.Content {
		if b.Text != "" {
			emit(Delta{Text: b.Text})
		}
	}
	return resp, nil
}

// ConverseStream sends req to Bedrock's ConverseStream and decodes the event
// stream: text deltas are emitted as they arrive; tool-use input, reasoning,
// the stop reason and the usage are assembled into the response. Failures
// are classified as Converse's are, whether Bedrock reports them before the
// first event or as an exception in the stream.
func (b *Bedrock) ConverseStream(ctx context.Context, req *ModelRequest, emit func(Delta)) (*ModelResponse, error) {
	in, err := b.input(req)
	if err != nil {
		return nil, &ModelError{Kind: KindInvalid, Message: err.Error(), Err: err}
	}
	out, err := b.client.ConverseStream(ctx, streamInput(in), func(o *bedrockruntime.Options) { o.Retryer = aws.NopRetryer{} })
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, classify(err)
	}
	stream := out.GetStream()
	defer stream.Close()

	var msg streamedMessage
	resp := &ModelResponse{}
	for ev := range stream.Events() {
		switch e := ev.(type) {
		case *types.ConverseStreamOutputMemberContentBlockStart:
			err = msg.start(e.Value)
		case *types.ConverseStreamOutputMemberContentBlockDelta:
			var text string
			if text, err = msg.delta(e.Value); text != "" {
				emit(Delta{Text: text})
			}
		case *types.ConverseStreamOutputMemberMessageStop:
			resp.StopReason = StopReason(e.Value.StopReason)
		case *types.ConverseStreamOutputMemberMetadata:
			if u := e.Value.Usage; u != nil {
				resp.Usage = Usage{
					InputTokens:  int(aws.ToInt32(u.InputTokens)),
					OutputTokens: int(aws.ToInt32(u.OutputTokens)),
					TotalTokens:  int(aws.ToInt32(u.TotalTokens)),
				}
			}
			if m := e.Value.Metrics; m != nil {
				resp.Latency = time.Duration(aws.ToInt64(m.LatencyMs)) * time.Millisecond
			}
		}
		// messageStart, contentBlockStop and members newer than this code
		// carry nothing the answer needs.
		if err != nil {
			return nil, &ModelError{Kind: KindOther, Message: "decode answer: " + err.Error(), Err: err}
		}
	}
	if err := stream.Err(); err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, classify(err)
	}
	if ctx.Err() != nil {
		return nil, ctx.Err() // the stream ended because the request was cancelled
	}
	if resp.StopReason == "" {
		return nil, &ModelError{Kind: KindUnavailable, Message: "the answer stream ended before its messageStop event"}
	}
	if resp.Message, err = msg.message(); err != nil {
		return nil, &ModelError{Kind: KindOther, Message: "decode answer: " + err.Error(), Err: err}
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

// ConverseStream retries as Converse does, but only until the first piece
// of the answer was emitted: after that a retry would repeat it.
func (r *retrying) ConverseStream(ctx context.Context, req *ModelRequest, emit func(Delta)) (*ModelResponse, error) {
	emitted := false
	return r.retry(ctx, func() (*ModelResponse, error) {
		return converseStream(ctx, r.model, req, func(d Delta) {
			emitted = true
			emit(d)
		})
	}, func() bool { return !emitted })
}

// ErrStreamInterrupted wraps a model failure that came after part of the
// answer had been streamed, and so was not retried.
var ErrStreamInterrupted = errors.New("the answer broke off after part of it was sent")

// Event is something that happened in a streamed turn. Exactly one field is
// set.
type Event struct {
	// Text is a piece of the model's text, as it arrives. The turn's final
	// text is Result.Text: the text of its last answer, which notes the
	// agent adds may complete.
	Text string
	// ToolUse is a tool call the model asked for, emitted before it runs.
	ToolUse *ToolUseBlock
	// ToolResult is a tool call's result, emitted when the tool finished.
	ToolResult *ToolResultBlock
}

// Stream runs a turn as Run does and calls emit with what happens as it
// happens: the model's text as it writes it, each tool call before it runs
// and each result when its tool finished. emit is never called concurrently,
// and not after Stream returned. What Stream returns is what Run would; a
// retryable model failure is retried only if it came before the model's
// answer had begun to stream.
func (a *Agent) Stream(ctx context.Context, conv *Conversation, input []ContentBlock, emit func(Event)) (*Result, error) {
	if emit == nil {
		return nil, errors.New("agent: Stream needs an emit function")
	}
	before(ctx, a.cfg.Hooks.BeforeInvocation, &BeforeInvocationEvent{Conversation: conv, Input: input})
	var mu sync.Mutex
	res, err := a.run(ctx, conv, input, func(e Event) {
		mu.Lock()
		defer mu.Unlock()
		emit(e)
	})
	after(ctx, a.cfg.Hooks.AfterInvocation, &AfterInvocationEvent{Result: res, Err: err})
	return res, err
}

// streamInterrupted reports a failure of a call whose answer had begun to stream.
func streamInterrupted(err error) error {
	return fmt.Errorf("%w: %w", ErrStreamInterrupted, err)
}
