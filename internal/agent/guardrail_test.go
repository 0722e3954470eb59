package agent_test

import (
	"context"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/lambda-agent/lambda-agent/internal/agent"
	"github.com/lambda-agent/lambda-agent/internal/agent/bedrock"
	"github.com/lambda-agent/lambda-agent/internal/testkit/conversetest"
	"github.com/lambda-agent/lambda-agent/internal/tools"
)

const blockedText = "Sorry, I can't help with that."

// guardedModel is the Bedrock model on s with a guardrail, whose trace it
// asks for when trace is set.
func guardedModel(t *testing.T, s *conversetest.Server, trace bool) agent.Model {
	t.Helper()
	m, err := bedrock.New(s.Client(), bedrock.Config{ModelID: "test-model", Guardrail: &bedrock.Guardrail{ID: "gr-1", Version: "1", Trace: trace}})
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// texts lists the texts of msgs.
func texts(msgs []agent.Message) []string {
	var out []string
	for _, m := range msgs {
		out = append(out, m.Text())
	}
	return out
}

// TestGuardrailRedactsABlockedInput: a turn that a guardrail ended keeps
// the user's input as Config.RedactedInput when the guardrail blocked it,
// or when no trace says what it blocked; and as it is when it blocked the
// answer. The next turn sends what the turn kept. Run and Stream alike.
func TestGuardrailRedactsABlockedInput(t *testing.T) {
	const secret = "something the guardrail blocks"
	tests := []struct {
		name     string
		trace    bool
		reply    conversetest.Reply
		redacted string // the configured text; "" for the default
		want     string // the input kept
	}{
		{name: "input blocked", trace: true, reply: conversetest.GuardrailInput(blockedText), want: agent.DefaultRedactedInput},
		{name: "input blocked, the text configured", trace: true, reply: conversetest.GuardrailInput(blockedText), redacted: "[removed]", want: "[removed]"},
		{name: "answer blocked", trace: true, reply: conversetest.GuardrailOutput(blockedText), want: secret},
		{name: "no trace", reply: conversetest.GuardrailInput(blockedText), want: agent.DefaultRedactedInput},
		{name: "no trace, answer blocked", reply: conversetest.GuardrailOutput(blockedText), want: agent.DefaultRedactedInput},
		{
			name: "input masked, not blocked", trace: true, want: secret,
			reply: conversetest.GuardrailInput(blockedText).WithAssessment(`{"sensitiveInformationPolicy":{"piiEntities":[{"match":"a@b.c","type":"EMAIL","action":"ANONYMIZED","detected":true}],"regexes":[]}}`),
		},
	}
	for _, tt := range tests {
		for _, streamed := range []bool{false, true} {
			name := tt.name
			if streamed {
				name += ", streamed"
			}
			t.Run(name, func(t *testing.T) {
				s := newServer(t)
				a := newAgent(t, s, agent.Config{Model: guardedModel(t, s, tt.trace), RedactedInput: tt.redacted})
				run := a.Run
				if streamed {
					run = func(ctx context.Context, conv *agent.Conversation, in []agent.ContentBlock) (*agent.Result, error) {
						return a.Stream(ctx, conv, in, func(agent.Event) {})
					}
				}
				s.Enqueue(tt.reply)
				conv := &agent.Conversation{}
				res, err := run(t.Context(), conv, input(secret))
				if err != nil {
					t.Fatal(err)
				}
				if res.StopReason != agent.StopGuardrailIntervened || res.Text != blockedText {
					t.Errorf("stop %q, text %q", res.StopReason, res.Text)
				}
				if diff := cmp.Diff([]agent.Message{agent.UserText(tt.want), agent.AssistantText(blockedText)}, res.Messages); diff != "" {
					t.Errorf("the turn's messages (-want +got):\n%s", diff)
				}
				if got := sent(s, 0); !cmp.Equal(got, []string{secret}) {
					t.Errorf("the model was sent %q, want the input as written", got)
				}
				s.Enqueue(conversetest.Text("Hello."))
				if _, err := run(t.Context(), next(t, conv, res), input("hi")); err != nil {
					t.Fatal(err)
				}
				if diff := cmp.Diff([]string{tt.want, blockedText, "hi"}, sent(s, 1)); diff != "" {
					t.Errorf("the next turn sent (-want +got):\n%s", diff)
				}
			})
		}
	}
}

// sent lists the texts of the messages of the model's request i.
func sent(s *conversetest.Server, i int) []string {
	var out []string
	for _, m := range s.Requests()[i].Messages {
		out = append(out, m.Text())
	}
	return out
}

// TestGuardrailBlockedInputAfterATool: a guardrail that blocks the input
// on a later call of the turn still has it redacted; the tool use and its
// result stay, and the history is valid.
func TestGuardrailBlockedInputAfterATool(t *testing.T) {
	s := newServer(t)
	s.Enqueue(
		conversetest.Text("Let me calculate.").WithToolUse("c1", "calculator", map[string]string{"expression": "6*7"}),
		conversetest.GuardrailInput(blockedText),
	)
	a := newAgent(t, s, agent.Config{Model: guardedModel(t, s, true), Tools: []agent.Tool{tools.Calculator()}})
	conv := &agent.Conversation{}
	res, err := a.Run(t.Context(), conv, input("6*7, and something the guardrail blocks"))
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{agent.DefaultRedactedInput, "Let me calculate.", "", blockedText}, texts(res.Messages)); diff != "" {
		t.Errorf("the turn's messages (-want +got):\n%s", diff)
	}
	if len(res.Messages) != 4 || res.Messages[1].ToolUses() == nil || res.Messages[2].Content[0].ToolResult == nil {
		t.Fatalf("the tool use and its result are gone: %+v", res.Messages)
	}
	if diff := cmp.Diff(&agent.Redaction{Input: input("6*7, and something the guardrail blocks"), Text: agent.DefaultRedactedInput}, res.Redacted); diff != "" {
		t.Errorf("Result.Redacted, the input to scrub elsewhere (-want +got):\n%s", diff)
	}
	next(t, conv, res)
}

// TestGuardrailResumeHasNoInput: a resumed turn that a guardrail ends adds
// no input of its own, and changes none that is stored.
func TestGuardrailResumeHasNoInput(t *testing.T) {
	s := newServer(t)
	s.Enqueue(conversetest.GuardrailInput(blockedText))
	a := newAgent(t, s, agent.Config{Model: guardedModel(t, s, true)})
	conv := &agent.Conversation{Messages: []agent.Message{agent.UserText("first"), agent.AssistantText("one"), agent.UserText("second")}}
	res, err := a.Continue(t.Context(), conv, nil)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]agent.Message{agent.AssistantText(blockedText)}, res.Messages); diff != "" {
		t.Errorf("the turn's messages (-want +got):\n%s", diff)
	}
}

func TestBlankRedactedInputIsRefused(t *testing.T) {
	s := newServer(t)
	if _, err := agent.New(agent.Config{Model: guardedModel(t, s, true), RedactedInput: " \n"}); err == nil || !strings.Contains(err.Error(), "RedactedInput") {
		t.Errorf("err = %v", err)
	}
}
