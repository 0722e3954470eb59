package conversetest_test

import (
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/bedrockruntime"
	"github.com/aws/aws-sdk-go-v2/service/bedrockruntime/types"
	"github.com/google/go-cmp/cmp"

	"github.com/lambda-agent/lambda-agent/internal/testkit/conversetest"
)

const blockedText = "Sorry, the model cannot answer this question."

// guarded is a Converse input with guardrail gr-1, whose trace is asked
// for when trace is not empty.
func guarded(trace types.GuardrailTrace) *bedrockruntime.ConverseInput {
	return &bedrockruntime.ConverseInput{
		ModelId:         aws.String(modelID),
		Messages:        []types.Message{user(text("How do I hurt someone?"))},
		GuardrailConfig: &types.GuardrailConfiguration{GuardrailIdentifier: aws.String("gr-1"), GuardrailVersion: aws.String("1"), Trace: trace},
	}
}

// guardedStream is guarded, for ConverseStream.
func guardedStream(trace types.GuardrailTrace) *bedrockruntime.ConverseStreamInput {
	in := guarded(trace)
	return &bedrockruntime.ConverseStreamInput{
		ModelId:  in.ModelId,
		Messages: in.Messages,
		GuardrailConfig: &types.GuardrailStreamConfiguration{
			GuardrailIdentifier:  in.GuardrailConfig.GuardrailIdentifier,
			GuardrailVersion:     in.GuardrailConfig.GuardrailVersion,
			Trace:                trace,
			StreamProcessingMode: types.GuardrailStreamProcessingModeSync,
		},
	}
}

// blocked summarizes the policies of an assessment as the SDK decoded
// them: "kind:name:action:detected" for each.
func blocked(a types.GuardrailAssessment) []string {
	var out []string
	add := func(kind, name, action string, detected *bool) {
		d := "?"
		if detected != nil {
			d = map[bool]string{true: "detected", false: "not detected"}[*detected]
		}
		out = append(out, kind+":"+name+":"+action+":"+d)
	}
	if p := a.ContentPolicy; p != nil {
		for _, f := range p.Filters {
			add("content", string(f.Type), string(f.Action), f.Detected)
		}
	}
	if p := a.TopicPolicy; p != nil {
		for _, f := range p.Topics {
			add("topic", aws.ToString(f.Name), string(f.Action), f.Detected)
		}
	}
	return out
}

// TestGuardrailInputThroughTheSDK: an intervention on the input reaches the
// real client as Bedrock's does, the trace with it when it was asked for,
// for both operations.
func TestGuardrailInputThroughTheSDK(t *testing.T) {
	srv := newServer(t)
	client := srv.Client()
	wantInput := []string{"content:VIOLENCE:BLOCKED:detected"}

	srv.Enqueue(conversetest.GuardrailInput(blockedText))
	out, err := client.Converse(t.Context(), guarded(types.GuardrailTraceEnabled))
	if err != nil {
		t.Fatal(err)
	}
	if got := replyText(t, out); got != blockedText || out.StopReason != types.StopReasonGuardrailIntervened {
		t.Errorf("answer %q, stop %q", got, out.StopReason)
	}
	if out.Trace == nil || out.Trace.Guardrail == nil {
		t.Fatalf("trace %+v, want the guardrail's", out.Trace)
	}
	g := out.Trace.Guardrail
	if diff := cmp.Diff(wantInput, blocked(g.InputAssessment["gr-1"])); diff != "" || len(g.InputAssessment) != 1 || g.OutputAssessments != nil {
		t.Errorf("input assessment %+v, output %+v (-want +got):\n%s", g.InputAssessment, g.OutputAssessments, diff)
	}

	srv.Enqueue(conversetest.GuardrailInput(blockedText).WithChunking(6, 0))
	got := converseStream(t, client, guardedStream(types.GuardrailTraceEnabledFull))
	if got.err != nil {
		t.Fatal(got.err)
	}
	if strings.Join(got.texts, "") != blockedText || got.stop != types.StopReasonGuardrailIntervened {
		t.Errorf("streamed %q, stop %q", got.texts, got.stop)
	}
	if got.trace == nil || got.trace.Guardrail == nil {
		t.Fatalf("metadata trace %+v, want the guardrail's", got.trace)
	}
	if diff := cmp.Diff(wantInput, blocked(got.trace.Guardrail.InputAssessment["gr-1"])); diff != "" {
		t.Errorf("streamed input assessment (-want +got):\n%s", diff)
	}

	// Without the trace asked for, there is none.
	srv.Enqueue(conversetest.GuardrailInput(blockedText), conversetest.GuardrailInput(blockedText))
	if out, err := client.Converse(t.Context(), guarded(types.GuardrailTraceDisabled)); err != nil || out.Trace != nil || out.StopReason != types.StopReasonGuardrailIntervened {
		t.Errorf("without a trace: %+v, %v", out, err)
	}
	if got := converseStream(t, client, guardedStream("")); got.err != nil || got.trace != nil || got.stop != types.StopReasonGuardrailIntervened {
		t.Errorf("streamed without a trace: trace %+v, stop %q, %v", got.trace, got.stop, got.err)
	}
}

// TestGuardrailOutputAndAssessmentThroughTheSDK: an intervention on the
// answer puts its assessment under outputAssessments, the input's being
// empty, and a scripted assessment is sent as it is.
func TestGuardrailOutputAndAssessmentThroughTheSDK(t *testing.T) {
	srv := newServer(t)
	client := srv.Client()
	srv.Enqueue(conversetest.GuardrailOutput(blockedText))
	out, err := client.Converse(t.Context(), guarded(types.GuardrailTraceEnabled))
	if err != nil {
		t.Fatal(err)
	}
	g := out.Trace.Guardrail
	if in, ok := g.InputAssessment["gr-1"]; !ok || len(blocked(in)) != 0 {
		t.Errorf("input assessment %+v, want an empty one", g.InputAssessment)
	}
	if a := g.OutputAssessments["gr-1"]; len(a) != 1 || !cmp.Equal(blocked(a[0]), []string{"content:VIOLENCE:BLOCKED:detected"}) {
		t.Errorf("output assessments %+v", g.OutputAssessments)
	}

	const topic = `{"topicPolicy":{"topics":[{"name":"Weapons","type":"DENY","action":"NONE","detected":true}]}}`
	srv.Enqueue(conversetest.GuardrailOutput(blockedText).WithAssessment(topic).WithChunking(100, 0))
	got := converseStream(t, client, guardedStream(types.GuardrailTraceEnabled))
	if got.err != nil || got.trace == nil {
		t.Fatalf("stream: trace %+v, %v", got.trace, got.err)
	}
	if a := got.trace.Guardrail.OutputAssessments["gr-1"]; len(a) != 1 || !cmp.Equal(blocked(a[0]), []string{"topic:Weapons:NONE:detected"}) {
		t.Errorf("streamed output assessments %+v", got.trace.Guardrail.OutputAssessments)
	}
}

// TestGuardrailScriptedWithoutAGuardrail: a request that names no
// guardrail cannot be answered with an intervention; the test is told.
func TestGuardrailScriptedWithoutAGuardrail(t *testing.T) {
	srv := newServer(t)
	srv.Enqueue(conversetest.GuardrailInput(blockedText))
	_, err := srv.Client().Converse(t.Context(), &bedrockruntime.ConverseInput{
		ModelId: aws.String(modelID), Messages: []types.Message{user(text("hi"))},
	})
	if !isA[*types.InternalServerException](err) || !strings.Contains(err.Error(), "without guardrailConfig") {
		t.Errorf("err = %v, want the script's mistake", err)
	}
	if v := srv.Violations(); len(v) != 0 {
		t.Errorf("violations %q: the request was valid", v)
	}
}
