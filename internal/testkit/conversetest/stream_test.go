package conversetest_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/bedrockruntime"
	"github.com/aws/aws-sdk-go-v2/service/bedrockruntime/types"

	"github.com/lambda-agent/lambda-agent/internal/testkit/conversetest"
)

// streamed is what a ConverseStream answer decoded to, event by event.
type streamed struct {
	kinds      []string
	texts      []string // text deltas, in order
	toolInputs map[string]string
	toolNames  map[string]string
	reasoning  string
	signature  string
	stop       types.StopReason
	usage      *types.TokenUsage
	trace      *types.ConverseStreamTrace
	err        error
}

func converseStream(t *testing.T, client *bedrockruntime.Client, in *bedrockruntime.ConverseStreamInput) *streamed {
	t.Helper()
	out, err := client.ConverseStream(t.Context(), in)
	if err != nil {
		return &streamed{err: err}
	}
	stream := out.GetStream()
	defer stream.Close()
	got := &streamed{toolInputs: map[string]string{}, toolNames: map[string]string{}}
	ids := map[int32]string{}
	for ev := range stream.Events() {
		switch e := ev.(type) {
		case *types.ConverseStreamOutputMemberMessageStart:
			got.kinds = append(got.kinds, "messageStart")
		case *types.ConverseStreamOutputMemberContentBlockStart:
			got.kinds = append(got.kinds, "contentBlockStart")
			if tu, ok := e.Value.Start.(*types.ContentBlockStartMemberToolUse); ok {
				ids[*e.Value.ContentBlockIndex] = *tu.Value.ToolUseId
				got.toolNames[*tu.Value.ToolUseId] = *tu.Value.Name
			}
		case *types.ConverseStreamOutputMemberContentBlockDelta:
			got.kinds = append(got.kinds, "contentBlockDelta")
			switch d := e.Value.Delta.(type) {
			case *types.ContentBlockDeltaMemberText:
				got.texts = append(got.texts, d.Value)
			case *types.ContentBlockDeltaMemberToolUse:
				got.toolInputs[ids[*e.Value.ContentBlockIndex]] += *d.Value.Input
			case *types.ContentBlockDeltaMemberReasoningContent:
				switch r := d.Value.(type) {
				case *types.ReasoningContentBlockDeltaMemberText:
					got.reasoning += r.Value
				case *types.ReasoningContentBlockDeltaMemberSignature:
					got.signature = r.Value
				}
			}
		case *types.ConverseStreamOutputMemberContentBlockStop:
			got.kinds = append(got.kinds, "contentBlockStop")
		case *types.ConverseStreamOutputMemberMessageStop:
			got.kinds = append(got.kinds, "messageStop")
			got.stop = e.Value.StopReason
		case *types.ConverseStreamOutputMemberMetadata:
			got.kinds = append(got.kinds, "metadata")
			got.usage = e.Value.Usage
			got.trace = e.Value.Trace
		default:
			t.Errorf("unexpected event %T", ev)
		}
	}
	got.err = stream.Err()
	return got
}

func streamInput(messages ...types.Message) *bedrockruntime.ConverseStreamInput {
	return &bedrockruntime.ConverseStreamInput{ModelId: aws.String(modelID), Messages: messages}
}

func TestConverseStreamText(t *testing.T) {
	srv := newServer(t)
	const answer = "Olá! The weather in Lisbon is sunny — 24 °C."
	srv.Enqueue(conversetest.Text(answer).WithUsage(12, 7).WithChunking(5, 0))
	got := converseStream(t, srv.Client(), streamInput(user(text("Hello"))))
	if got.err != nil {
		t.Fatal(got.err)
	}
	if len(got.texts) < 5 {
		t.Errorf("%d text deltas, want the answer in pieces of at most 5 bytes", len(got.texts))
	}
	for _, piece := range got.texts {
		if len(piece) > 5+3 { // a rune is never cut, so a piece may run 3 bytes over
			t.Errorf("delta %q is longer than the chunk", piece)
		}
	}
	if joined := strings.Join(got.texts, ""); joined != answer {
		t.Errorf("deltas join to %q, want %q", joined, answer)
	}
	wantKinds := "messageStart " + strings.Repeat("contentBlockDelta ", len(got.texts)) + "contentBlockStop messageStop metadata"
	if kinds := strings.Join(got.kinds, " "); kinds != wantKinds {
		t.Errorf("events %s, want %s", kinds, wantKinds)
	}
	if got.stop != types.StopReasonEndTurn {
		t.Errorf("stop reason %q", got.stop)
	}
	if got.usage == nil || *got.usage.InputTokens != 12 || *got.usage.OutputTokens != 7 || *got.usage.TotalTokens != 19 {
		t.Errorf("usage %+v, want 12 in, 7 out", got.usage)
	}
	if r := srv.Requests(); len(r) != 1 || r[0].Operation != "ConverseStream" || !r[0].Valid {
		t.Errorf("recorded %+v", r)
	}
}

func TestConverseStreamToolUseAndReasoning(t *testing.T) {
	srv := newServer(t)
	srv.Enqueue(conversetest.Text("Let me add.").
		WithToolUse("t1", "calculator", map[string]any{"expression": "19 * 23 + 4"}).
		WithToolUse("t2", "current_time", map[string]any{"zone": "Europe/Lisbon"}).
		WithReasoning("The user wants arithmetic.", "sig-1"))
	got := converseStream(t, srv.Client(), &bedrockruntime.ConverseStreamInput{
		ModelId:    aws.String(modelID),
		Messages:   []types.Message{user(text("What is 19*23+4?"))},
		ToolConfig: tools("calculator", "current_time"),
	})
	if got.err != nil {
		t.Fatal(got.err)
	}
	if got.stop != types.StopReasonToolUse {
		t.Errorf("stop reason %q, want tool_use", got.stop)
	}
	if got.toolNames["t1"] != "calculator" || got.toolNames["t2"] != "current_time" {
		t.Errorf("tool names %v", got.toolNames)
	}
	if got.toolInputs["t1"] != `{"expression":"19 * 23 + 4"}` || got.toolInputs["t2"] != `{"zone":"Europe/Lisbon"}` {
		t.Errorf("tool inputs %v", got.toolInputs)
	}
	if got.reasoning != "The user wants arithmetic." || got.signature != "sig-1" {
		t.Errorf("reasoning %q, signature %q", got.reasoning, got.signature)
	}
	if strings.Join(got.texts, "") != "Let me add." {
		t.Errorf("text %q", strings.Join(got.texts, ""))
	}
}

func TestConverseStreamErrors(t *testing.T) {
	t.Run("a violation is refused before the stream", func(t *testing.T) {
		srv := conversetest.NewServer()
		defer srv.Close()
		got := converseStream(t, srv.Client(), streamInput(assistant(text("I speak first"))))
		var ve *types.ValidationException
		if !errors.As(got.err, &ve) {
			t.Fatalf("err = %v, want a ValidationException", got.err)
		}
		if len(srv.Violations()) != 1 {
			t.Errorf("violations %q", srv.Violations())
		}
	})
	t.Run("overflow before the stream", func(t *testing.T) {
		srv := newServer(t)
		srv.Enqueue(conversetest.Overflow())
		got := converseStream(t, srv.Client(), streamInput(user(text("Hello"))))
		var ve *types.ValidationException
		if !errors.As(got.err, &ve) || !strings.Contains(ve.ErrorMessage(), conversetest.OverflowMessage) {
			t.Fatalf("err = %v, want the overflow ValidationException", got.err)
		}
	})
	t.Run("throttling mid-stream", func(t *testing.T) {
		srv := newServer(t)
		srv.Enqueue(conversetest.Text("This answer is cut short.").WithChunking(4, 0).WithStreamError(3, conversetest.CodeThrottling, "slow down"))
		got := converseStream(t, srv.Client(), streamInput(user(text("Hello"))))
		var te *types.ThrottlingException
		if !errors.As(got.err, &te) || te.ErrorMessage() != "slow down" {
			t.Fatalf("err = %v, want a ThrottlingException", got.err)
		}
		if strings.Join(got.kinds, " ") != "messageStart contentBlockDelta contentBlockDelta" {
			t.Errorf("events before the exception: %v", got.kinds)
		}
	})
	t.Run("model stream error", func(t *testing.T) {
		srv := newServer(t)
		srv.Enqueue(conversetest.Text("x").WithStreamError(1, conversetest.CodeModelStreamError, "the model failed"))
		got := converseStream(t, srv.Client(), streamInput(user(text("Hello"))))
		var me *types.ModelStreamErrorException
		if !errors.As(got.err, &me) {
			t.Fatalf("err = %v, want a ModelStreamErrorException", got.err)
		}
	})
	t.Run("bad stream processing mode", func(t *testing.T) {
		srv := conversetest.NewServer()
		defer srv.Close()
		in := streamInput(user(text("Hello")))
		in.GuardrailConfig = &types.GuardrailStreamConfiguration{
			GuardrailIdentifier: aws.String("g"), GuardrailVersion: aws.String("1"),
			StreamProcessingMode: "sometimes",
		}
		got := converseStream(t, srv.Client(noClientValidation), in)
		if got.err == nil || !strings.Contains(got.err.Error(), "streamProcessingMode") {
			t.Fatalf("err = %v, want a violation naming streamProcessingMode", got.err)
		}
	})
}

func TestConverseStreamChunkDelay(t *testing.T) {
	srv := newServer(t)
	srv.Enqueue(conversetest.Text("one two three").WithChunking(4, 20*time.Millisecond))
	out, err := srv.Client().ConverseStream(t.Context(), streamInput(user(text("Hello"))))
	if err != nil {
		t.Fatal(err)
	}
	stream := out.GetStream()
	defer stream.Close()
	var gaps []time.Duration
	last := time.Now()
	for ev := range stream.Events() {
		if _, ok := ev.(*types.ConverseStreamOutputMemberContentBlockDelta); ok {
			gaps = append(gaps, time.Since(last))
		}
		last = time.Now()
	}
	if err := stream.Err(); err != nil {
		t.Fatal(err)
	}
	if len(gaps) != 4 {
		t.Fatalf("%d deltas, want 4", len(gaps))
	}
	for i, g := range gaps {
		if g < 15*time.Millisecond {
			t.Errorf("delta %d came %v after the event before it: the events were not paced", i, g)
		}
	}
}
