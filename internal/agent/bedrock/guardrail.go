package bedrock

import (
	"github.com/aws/aws-sdk-go-v2/service/bedrockruntime/types"
	"github.com/lambda-agent/lambda-agent/internal/agent"
)

// guardrailTrace reads what a guardrail blocked from its trace, which
// Bedrock sends when the request asked for it (Guardrail.Trace): nil when
// there is none. The input was blocked when a policy of an assessment
// under inputAssessment blocked it, the answer when one under
// outputAssessments did.
func guardrailTrace(t *types.GuardrailTraceAssessment) *agent.GuardrailTrace {
	if t == nil {
		return nil
	}
	g := &agent.GuardrailTrace{}
	for _, a := range t.InputAssessment {
		g.Input = g.Input || blocked(a)
	}
	for _, as := range t.OutputAssessments {
		for _, a := range as {
			g.Output = g.Output || blocked(a)
		}
	}
	return g
}

// blocked reports whether a policy of the assessment blocked what it
// assessed: a filter, topic, word, PII entity or regex whose action is
// BLOCKED. A policy in detect mode reports its finding with the action
// NONE, and a masked PII entity ANONYMIZED: neither blocked anything. One
// whose detected flag is false did not act; Bedrock's older traces have no
// flag, and their action says it all. Automated reasoning reports findings
// without an action, and blocks nothing by itself.
func blocked(a types.GuardrailAssessment) bool {
	acted := func(action string, detected *bool) bool {
		return action == "BLOCKED" && (detected == nil || *detected)
	}
	if p := a.ContentPolicy; p != nil {
		for _, f := range p.Filters {
			if acted(string(f.Action), f.Detected) {
				return true
			}
		}
	}
	if p := a.TopicPolicy; p != nil {
		for _, f := range p.Topics {
			if acted(string(f.Action), f.Detected) {
				return true
			}
		}
	}
	if p := a.WordPolicy; p != nil {
		for _, f := range p.CustomWords {
			if acted(string(f.Action), f.Detected) {
				return true
			}
		}
		for _, f := range p.ManagedWordLists {
			if acted(string(f.Action), f.Detected) {
				return true
			}
		}
	}
	if p := a.SensitiveInformationPolicy; p != nil {
		for _, f := range p.PiiEntities {
			if acted(string(f.Action), f.Detected) {
				return true
			}
		}
		for _, f := range p.Regexes {
			if acted(string(f.Action), f.Detected) {
				return true
			}
		}
	}
	if p := a.ContextualGroundingPolicy; p != nil {
		for _, f := range p.Filters {
			if acted(string(f.Action), f.Detected) {
				return true
			}
		}
	}
	return false
}
