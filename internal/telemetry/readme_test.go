package telemetry_test

import (
	"bytes"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/lambda-agent/lambda-agent/internal/agent"
	"github.com/lambda-agent/lambda-agent/internal/agentcore"
	"github.com/lambda-agent/lambda-agent/internal/memory"
	"github.com/lambda-agent/lambda-agent/internal/pricing"
	"github.com/lambda-agent/lambda-agent/internal/telemetry"
	"github.com/lambda-agent/lambda-agent/internal/testkit"
)

// docSection returns a section of docs/observability.md.
func docSection(t *testing.T, heading string) string {
	t.Helper()
	section, err := testkit.DocSection("docs/observability.md", heading)
	if err != nil {
		t.Fatal(err)
	}
	return section
}

// TestDocsListTheMetrics checks the table of metrics of
// docs/observability.md against
// the lines the functions write: every metric with its unit and dimension
// set, and no other.
func TestDocsListTheMetrics(t *testing.T) {
	var want []string
	for line := range strings.Lines(docSection(t, "## Metrics")) {
		cells := strings.Split(strings.TrimSpace(line), "|")
		if len(cells) < 5 || !strings.HasPrefix(strings.TrimSpace(cells[1]), "`") {
			continue
		}
		name := strings.Trim(strings.TrimSpace(cells[1]), "`")
		dims := strings.ReplaceAll(strings.Trim(strings.TrimSpace(cells[3]), "`"), " ", "")
		want = append(want, name+" "+strings.TrimSpace(cells[2])+" "+dims)
	}
	if len(want) == 0 {
		t.Fatal("no metrics in the table of docs/observability.md")
	}

	var out bytes.Buffer
	prices := pricing.Prices{Input: 3, Output: 15}
	m := &telemetry.Metrics{Function: "f", Model: "m", Prices: pricing.Table{Main: &prices}, Out: &out}
	res := &agent.Result{
		Metrics:    agent.Metrics{ModelCalls: 1, ModelLatencies: []time.Duration{time.Millisecond}, Tools: []agent.ToolRun{{Name: "calculator"}}},
		AgentUsage: map[string]agent.Usage{agent.MainAgent: {InputTokens: 1}}, // a turn that delegated
	}
	m.Record(t.Context(), telemetry.Request{Route: "POST /chat", Turn: true, Status: 504, Code: "timeout", Result: res})
	// The memory function's line of a batch: the mirror's counts, which
	// include the extractor's.
	counts := map[string]int{}
	for _, name := range []string{memory.MetricRecords, memory.MetricFailed, agentcore.MetricEvents, agentcore.MetricEventsDeleted, agentcore.MetricRecordsDeleted} {
		counts[name] = 1
	}
	m.Counts(t.Context(), counts)
	m.RecordAudit(t.Context(), telemetry.AuditWrite{SessionID: "s", Records: 1, Bytes: 10, Duration: time.Millisecond})
	var got []string
	for _, l := range parseEMFLines(t, out.Bytes()) {
		for _, d := range l.directives {
			for _, mt := range d.Metrics {
				got = append(got, mt.Name+" "+mt.Unit+" "+strings.Join(d.Dimensions[0], ","))
			}
		}
	}
	slices.Sort(want)
	slices.Sort(got)
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("metrics: docs/observability.md (-) and the lines (+):\n%s", diff)
	}
}
