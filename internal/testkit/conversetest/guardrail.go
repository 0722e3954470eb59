package conversetest

import (
	"encoding/json"
	"net/http"
)

// StopGuardrailIntervened is the stop reason of an answer a guardrail
// replaced with its blocked message.
const StopGuardrailIntervened = "guardrail_intervened"

// BlockedAssessment is the assessment a scripted intervention's trace
// carries unless [Reply.WithAssessment] sets another: a GuardrailAssessment,
// in Bedrock's JSON, whose content filter detected violence and blocked it.
const BlockedAssessment = `{"contentPolicy":{"filters":[{"type":"VIOLENCE","confidence":"HIGH","filterStrength":"HIGH","action":"BLOCKED","detected":true}]}}`

// Intervention is a guardrail's intervention that a reply stands for:
// see [GuardrailInput] and [GuardrailOutput].
type Intervention struct {
	// Output says that the guardrail blocked the model's answer. Otherwise
	// it blocked the request's input, and the model never saw it.
	Output bool
	// Assessment is the guardrail's assessment of what it blocked, a
	// GuardrailAssessment in Bedrock's JSON, for the trace; empty means
	// [BlockedAssessment].
	Assessment json.RawMessage
}

// GuardrailInput returns the reply Bedrock sends when the request's
// guardrail blocks its input: the guardrail's blocked-input message as the
// answer's one text block, and stop reason guardrail_intervened. When the
// request asked for the guardrail's trace, the answer carries it, with the
// assessment under inputAssessment (see the package documentation).
func GuardrailInput(blocked string) Reply {
	return Text(blocked).WithStop(StopGuardrailIntervened).withIntervention(Intervention{})
}

// GuardrailOutput returns the reply Bedrock sends when the request's
// guardrail blocks the model's answer: as [GuardrailInput], with the
// guardrail's blocked-output message, and the assessment under
// outputAssessments.
func GuardrailOutput(blocked string) Reply {
	return Text(blocked).WithStop(StopGuardrailIntervened).withIntervention(Intervention{Output: true})
}

// WithAssessment returns r, an intervention, with the assessment its trace
// carries: a GuardrailAssessment in Bedrock's JSON, such as one of a topic
// policy. It panics if r is not an intervention or assessment is not JSON,
// which are mistakes in the test's script.
func (r Reply) WithAssessment(assessment string) Reply {
	if r.Guardrail == nil || !json.Valid([]byte(assessment)) {
		panic("conversetest: WithAssessment needs an intervention and a JSON assessment")
	}
	g := *r.Guardrail
	g.Assessment = json.RawMessage(assessment)
	return r.withIntervention(g)
}

func (r Reply) withIntervention(g Intervention) Reply {
	r.Guardrail = &g
	return r
}

// scriptError is the answer to a request that r cannot answer as
// scripted: an intervention of a guardrail the request does not name, which
// Bedrock never sends, or an assessment that is not JSON. Either is a
// mistake in the test's script, and the test is told.
func (r Reply) scriptError(req *Request) *APIError {
	g := r.Guardrail
	msg := ""
	switch {
	case g == nil:
		return nil
	case req.GuardrailConfig == nil:
		msg = "conversetest: a guardrail intervention was scripted for a request without guardrailConfig"
	case len(g.Assessment) > 0 && !json.Valid(g.Assessment):
		msg = "conversetest: the scripted guardrail assessment is not JSON"
	default:
		return nil
	}
	return &APIError{Status: http.StatusInternalServerError, Code: CodeInternalServer, Message: msg}
}

// guardrailTrace is the trace of a guardrail, in Bedrock's JSON
// (GuardrailTraceAssessment), as far as the stand-in sends it.
type guardrailTrace struct {
	InputAssessment   map[string]json.RawMessage   `json:"inputAssessment"`
	OutputAssessments map[string][]json.RawMessage `json:"outputAssessments,omitempty"`
}

// trace is the trace member of the answer to req (ConverseTrace, or
// ConverseStreamTrace): the guardrail's, for an intervention, when req
// asked for it; nil otherwise. The assessments are keyed by the guardrail
// identifier the request gave.
func (r Reply) trace(req *Request) any {
	g, cfg := r.Guardrail, req.GuardrailConfig
	if g == nil || cfg == nil || (cfg.Trace != "enabled" && cfg.Trace != "enabled_full") {
		return nil
	}
	assessment := g.Assessment
	if len(assessment) == 0 {
		assessment = json.RawMessage(BlockedAssessment)
	}
	id := cfg.GuardrailIdentifier
	var t guardrailTrace
	if g.Output {
		// The input passed: its assessment found nothing.
		t.InputAssessment = map[string]json.RawMessage{id: json.RawMessage(`{}`)}
		t.OutputAssessments = map[string][]json.RawMessage{id: {assessment}}
	} else {
		t.InputAssessment = map[string]json.RawMessage{id: assessment}
	}
	return map[string]any{"guardrail": t}
}
