package bedrock_test

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/lambda-agent/lambda-agent/internal/agent"
	"github.com/lambda-agent/lambda-agent/internal/agent/bedrock"
	"github.com/lambda-agent/lambda-agent/internal/testkit/conversetest"
)

// TestGuardrailTrace: the response says what the guardrail blocked, as its
// trace tells, through Converse and ConverseStream alike; and nothing when
// no trace was asked for.
func TestGuardrailTrace(t *testing.T) {
	const blockedText = "Sorry, the model cannot answer this question."
	in, out := conversetest.GuardrailInput(blockedText), conversetest.GuardrailOutput(blockedText)
	tests := []struct {
		name  string
		trace bool
		reply conversetest.Reply
		want  *agent.GuardrailTrace
	}{
		{"input blocked", true, in, &agent.GuardrailTrace{Input: true}},
		{"answer blocked", true, out, &agent.GuardrailTrace{Output: true}},
		{"no trace asked for", false, in, nil},
		{"a topic", true, in.WithAssessment(`{"topicPolicy":{"topics":[{"name":"Weapons","type":"DENY","action":"BLOCKED","detected":true}]}}`), &agent.GuardrailTrace{Input: true}},
		{"a custom word", true, out.WithAssessment(`{"wordPolicy":{"customWords":[{"match":"darn","action":"BLOCKED","detected":true}],"managedWordLists":[]}}`), &agent.GuardrailTrace{Output: true}},
		{"profanity", true, in.WithAssessment(`{"wordPolicy":{"customWords":[],"managedWordLists":[{"match":"heck","type":"PROFANITY","action":"BLOCKED"}]}}`), &agent.GuardrailTrace{Input: true}},
		{"a PII entity", true, in.WithAssessment(`{"sensitiveInformationPolicy":{"piiEntities":[{"match":"4111","type":"CREDIT_DEBIT_CARD_NUMBER","action":"BLOCKED","detected":true}],"regexes":[]}}`), &agent.GuardrailTrace{Input: true}},
		{"a regex", true, in.WithAssessment(`{"sensitiveInformationPolicy":{"piiEntities":[],"regexes":[{"name":"id","regex":"X-\\d+","match":"X-1","action":"BLOCKED","detected":true}]}}`), &agent.GuardrailTrace{Input: true}},
		{"grounding", true, out.WithAssessment(`{"contextualGroundingPolicy":{"filters":[{"type":"GROUNDING","threshold":0.8,"score":0.1,"action":"BLOCKED","detected":true}]}}`), &agent.GuardrailTrace{Output: true}},
		// Policies that acted without blocking.
		{"a masked PII entity", true, in.WithAssessment(`{"sensitiveInformationPolicy":{"piiEntities":[{"match":"a@b.c","type":"EMAIL","action":"ANONYMIZED","detected":true}],"regexes":[]}}`), &agent.GuardrailTrace{}},
		{"detect mode", true, in.WithAssessment(`{"contentPolicy":{"filters":[{"type":"HATE","confidence":"HIGH","action":"NONE","detected":true}]}}`), &agent.GuardrailTrace{}},
		{"blocking, not detected", true, in.WithAssessment(`{"contentPolicy":{"filters":[{"type":"HATE","confidence":"NONE","action":"BLOCKED","detected":false}]}}`), &agent.GuardrailTrace{}},
		{"an empty assessment", true, in.WithAssessment(`{}`), &agent.GuardrailTrace{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := newServer(t)
			m, err := bedrock.New(s.Client(), bedrock.Config{ModelID: "m", Guardrail: &bedrock.Guardrail{ID: "gr-1", Version: "1", Trace: tt.trace}})
			if err != nil {
				t.Fatal(err)
			}
			req := &agent.ModelRequest{Messages: []agent.Message{agent.UserText("hi")}}
			s.Enqueue(tt.reply, tt.reply)
			resp, err := m.Converse(t.Context(), req)
			if err != nil {
				t.Fatal(err)
			}
			streamed, err := m.ConverseStream(t.Context(), req, func(agent.Delta) {})
			if err != nil {
				t.Fatal(err)
			}
			for op, resp := range map[string]*agent.ModelResponse{"Converse": resp, "ConverseStream": streamed} {
				if resp.StopReason != agent.StopGuardrailIntervened || resp.Message.Text() != blockedText {
					t.Errorf("%s: stop %q, answer %q", op, resp.StopReason, resp.Message.Text())
				}
				if diff := cmp.Diff(tt.want, resp.Guardrail); diff != "" {
					t.Errorf("%s: guardrail (-want +got):\n%s", op, diff)
				}
			}
		})
	}
}
