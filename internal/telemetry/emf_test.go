package telemetry_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/lambda-agent/lambda-agent/internal/agent"
	"github.com/lambda-agent/lambda-agent/internal/pricing"
	"github.com/lambda-agent/lambda-agent/internal/telemetry"
	"github.com/lambda-agent/lambda-agent/internal/testkit"
	"github.com/lambda-agent/lambda-agent/internal/testkit/conversetest"
)

// emfUnits are the units the Embedded Metric Format allows.
var emfUnits = []string{
	"Seconds", "Microseconds", "Milliseconds", "Bytes", "Kilobytes", "Megabytes", "Gigabytes", "Terabytes",
	"Bits", "Kilobits", "Megabits", "Gigabits", "Terabits", "Percent", "Count", "Bytes/Second",
	"Kilobytes/Second", "Megabytes/Second", "Gigabytes/Second", "Terabytes/Second", "Bits/Second",
	"Kilobits/Second", "Megabits/Second", "Gigabits/Second", "Terabits/Second", "Count/Second", "None",
}

// emfLine is one line of the format, parsed: its directives, and the
// values of its metrics and dimensions.
type emfLine struct {
	root       map[string]any
	directives []emfDirective
}

type emfDirective struct {
	Namespace  string     `json:"Namespace"`
	Dimensions [][]string `json:"Dimensions"`
	Metrics    []struct {
		Name              string `json:"Name"`
		Unit              string `json:"Unit"`
		StorageResolution *int   `json:"StorageResolution"`
	} `json:"Metrics"`
}

// parseEMF checks line against the Embedded Metric Format's specification
// and returns it parsed. The rules: one JSON object with an _aws member
// holding a Timestamp in epoch milliseconds and a list of metric
// directives; each directive names a namespace, dimension sets of at most
// 30 dimensions and at most 100 metrics, each with a unit from the
// format's list and a storage resolution of 1 or 60 if any; every
// dimension is a root member with a string value, and every metric one with
// a number or a list of at most 100 numbers.
func parseEMF(t *testing.T, line []byte) emfLine {
	t.Helper()
	var root map[string]any
	if err := json.Unmarshal(line, &root); err != nil {
		t.Fatalf("not a JSON object: %v: %s", err, line)
	}
	aws, ok := root["_aws"].(map[string]any)
	if !ok {
		t.Fatalf("no _aws object: %s", line)
	}
	ts, ok := aws["Timestamp"].(float64)
	if !ok || ts != float64(int64(ts)) || ts < float64(time.Date(2020, 1, 1, 0, 0, 0, 0, time.UTC).UnixMilli()) {
		t.Errorf("Timestamp %v is not epoch milliseconds: %s", aws["Timestamp"], line)
	}
	raw, _ := json.Marshal(aws["CloudWatchMetrics"])
	var directives []emfDirective
	if err := json.Unmarshal(raw, &directives); err != nil || len(directives) == 0 {
		t.Fatalf("CloudWatchMetrics is not a list of directives (%v): %s", err, line)
	}
	for _, d := range directives {
		if n := len(d.Namespace); n == 0 || n > 255 || strings.HasPrefix(d.Namespace, "AWS/") {
			t.Errorf("namespace %q: %s", d.Namespace, line)
		}
		if len(d.Metrics) == 0 || len(d.Metrics) > 100 {
			t.Errorf("%d metrics in a directive: %s", len(d.Metrics), line)
		}
		for _, set := range d.Dimensions {
			if len(set) == 0 || len(set) > 30 {
				t.Errorf("a dimension set of %d dimensions: %s", len(set), line)
			}
			for _, name := range set {
				v, ok := root[name].(string)
				if !ok || v == "" || len(v) > 1024 {
					t.Errorf("dimension %s is %v, not a string member: %s", name, root[name], line)
				}
			}
		}
		for _, m := range d.Metrics {
			if m.Name == "" || len(m.Name) > 1024 {
				t.Errorf("metric name %q: %s", m.Name, line)
			}
			if m.Unit != "" && !slices.Contains(emfUnits, m.Unit) {
				t.Errorf("metric %s: unit %q is not one of the format's: %s", m.Name, m.Unit, line)
			}
			if r := m.StorageResolution; r != nil && *r != 1 && *r != 60 {
				t.Errorf("metric %s: storage resolution %d: %s", m.Name, *r, line)
			}
			switch v := root[m.Name].(type) {
			case float64:
			case []any:
				if len(v) == 0 || len(v) > 100 {
					t.Errorf("metric %s has %d values: %s", m.Name, len(v), line)
				}
				for _, x := range v {
					if _, ok := x.(float64); !ok {
						t.Errorf("metric %s has a value %v: %s", m.Name, x, line)
					}
				}
			default:
				t.Errorf("metric %s is %v, not a number or a list of numbers: %s", m.Name, root[m.Name], line)
			}
		}
	}
	return emfLine{root: root, directives: directives}
}

// parseEMFLines parses every line of out.
func parseEMFLines(t *testing.T, out []byte) []emfLine {
	t.Helper()
	var lines []emfLine
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		lines = append(lines, parseEMF(t, sc.Bytes()))
	}
	return lines
}

// dimensionSets returns the line's dimension sets, as "A,B" strings.
func (l emfLine) dimensionSets() []string {
	var out []string
	for _, d := range l.directives {
		for _, set := range d.Dimensions {
			out = append(out, strings.Join(set, ","))
		}
	}
	return out
}

// metric returns the values of a metric the line defines.
func (l emfLine) metric(name string) []float64 {
	for _, d := range l.directives {
		for _, m := range d.Metrics {
			if m.Name != name {
				continue
			}
			switch v := l.root[name].(type) {
			case float64:
				return []float64{v}
			case []any:
				out := make([]float64, len(v))
				for i, x := range v {
					out[i] = x.(float64)
				}
				return out
			}
		}
	}
	return nil
}

// The only dimension sets a line may use: fixed, and of values that the
// deployment bounds.
var allowedSets = []string{"FunctionName,Model", "FunctionName,Model,ErrorCode", "FunctionName,Model,ToolName", "FunctionName,Model,AgentName"}

func TestMetricsOfATurn(t *testing.T) {
	var out bytes.Buffer
	prices := pricing.Prices{Input: 3, Output: 15}
	m := &telemetry.Metrics{Namespace: "Agents", Function: "chat-fn", Model: "m1", Prices: pricing.Table{Main: &prices}, Out: &out,
		Now: func() time.Time { return time.UnixMilli(1_800_000_000_000) }}
	latencies := make([]time.Duration, 130) // more than a line may carry
	for i := range latencies {
		latencies[i] = time.Duration(i+1) * time.Millisecond
	}
	res := &agent.Result{
		StopReason: agent.StopEndTurn,
		Usage:      agent.Usage{InputTokens: 1000, OutputTokens: 200, CacheReadInputTokens: 5000, CacheWriteInputTokens: 70},
		Metrics: agent.Metrics{
			ModelCalls: 130, ToolCalls: 4, Retries: 2, Throttles: 3, ModelLatencies: latencies,
			Tools: []agent.ToolRun{
				{Name: "calculator", Duration: 2 * time.Millisecond},
				{Name: "orders_find", Duration: 40 * time.Millisecond, Failed: true},
				{Name: "calculator", Duration: 4 * time.Millisecond, Failed: true},
			},
		},
	}
	m.Record(t.Context(), telemetry.Request{Route: "POST /chat", Turn: true, Status: 200, Code: "ok", SessionID: "s-1", Result: res, Duration: 1500 * time.Millisecond})
	lines := parseEMFLines(t, out.Bytes())
	if len(lines) != 4 {
		t.Fatalf("%d lines, want the turn's, its latencies' continuation and one per tool:\n%s", len(lines), out.String())
	}
	turn := lines[0]
	for name, want := range map[string][]float64{
		"Requests": {1}, "ServerErrors": {0}, "ClientErrors": {0}, "ColdStart": {1}, "Turns": {1},
		"InputTokens": {1000}, "OutputTokens": {200}, "CacheReadTokens": {5000}, "CacheWriteTokens": {70},
		"ModelCalls": {130}, "ToolCalls": {4}, "ModelRetries": {2}, "ModelThrottles": {3}, "TurnDuration": {1500},
		"EstimatedCost": {prices.Cost(res.Usage)},
	} {
		if diff := cmp.Diff(want, turn.metric(name)); diff != "" {
			t.Errorf("%s (-want +got):\n%s", name, diff)
		}
	}
	got := append(turn.metric("ModelLatency"), lines[1].metric("ModelLatency")...)
	if len(turn.metric("ModelLatency")) != 100 || len(got) != 130 || got[0] != 1 || got[129] != 130 {
		t.Errorf("ModelLatency: %d values in the first line, %d in all, %v", len(turn.metric("ModelLatency")), len(got), got)
	}
	if turn.root["session_id"] != "s-1" || turn.root["FunctionName"] != "chat-fn" || turn.root["Model"] != "m1" || turn.directives[0].Namespace != "Agents" {
		t.Errorf("the turn's line: %v", turn.root)
	}
	if turn.root["_aws"].(map[string]any)["Timestamp"] != 1_800_000_000_000.0 {
		t.Errorf("Timestamp: %v", turn.root["_aws"])
	}
	tools := map[string]emfLine{}
	for _, l := range lines[2:] {
		tools[l.root["ToolName"].(string)] = l
	}
	for name, want := range map[string][3][]float64{
		"calculator":  {{2}, {1}, {2, 4}},
		"orders_find": {{1}, {1}, {40}},
	} {
		l := tools[name]
		if diff := cmp.Diff(want, [3][]float64{l.metric("ToolCalls"), l.metric("ToolErrors"), l.metric("ToolDuration")}); diff != "" {
			t.Errorf("%s: calls, errors, durations (-want +got):\n%s", name, diff)
		}
	}
	for _, l := range lines {
		for _, set := range l.dimensionSets() {
			if !slices.Contains(allowedSets, set) {
				t.Errorf("dimension set %s", set)
			}
		}
	}

	// A turn that delegated has a line per agent.
	out.Reset()
	delegated := *res
	delegated.AgentUsage = map[string]agent.Usage{
		agent.MainAgent: {InputTokens: 600, OutputTokens: 150, CacheReadInputTokens: 5000},
		"researcher":    {InputTokens: 400, OutputTokens: 50, CacheWriteInputTokens: 70},
	}
	delegated.Metrics.Tools = nil
	m.Record(t.Context(), telemetry.Request{Route: "POST /chat", Turn: true, Status: 200, Code: "ok", SessionID: "s-2", Result: &delegated})
	lines = parseEMFLines(t, out.Bytes())
	agents := map[string]emfLine{}
	for _, l := range lines {
		if name, ok := l.root["AgentName"].(string); ok {
			agents[name] = l
			if diff := cmp.Diff([]string{"FunctionName,Model,AgentName"}, l.dimensionSets()); diff != "" || l.root["session_id"] != "s-2" {
				t.Errorf("%s's line: %v (-want +got):\n%s", name, l.root, diff)
			}
		}
	}
	for name, u := range delegated.AgentUsage {
		l := agents[name]
		got := [5][]float64{l.metric("InputTokens"), l.metric("OutputTokens"), l.metric("CacheReadTokens"), l.metric("CacheWriteTokens"), l.metric("EstimatedCost")}
		want := [5][]float64{{float64(u.InputTokens)}, {float64(u.OutputTokens)}, {float64(u.CacheReadInputTokens)}, {float64(u.CacheWriteInputTokens)}, {prices.Cost(u)}}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("%s: tokens and cost (-want +got):\n%s", name, diff)
		}
	}
	if len(agents) != 2 {
		t.Errorf("%d agent lines:\n%s", len(agents), out.String())
	}

	// The next request is warm, failed, and a replay counts no turn.
	out.Reset()
	m.Record(t.Context(), telemetry.Request{Route: "POST /chat", Turn: true, Status: 409, Code: "conflict", SessionID: "s-1", Result: res, Replayed: true})
	lines = parseEMFLines(t, out.Bytes())
	if len(lines) != 1 {
		t.Fatalf("%d lines for a replay:\n%s", len(lines), out.String())
	}
	l := lines[0]
	if l.metric("ColdStart") != nil || l.metric("Turns") != nil || l.metric("InputTokens") != nil {
		t.Errorf("a warm replay's line: %v", l.root)
	}
	if diff := cmp.Diff([]float64{1}, l.metric("Errors")); diff != "" || l.root["ErrorCode"] != "conflict" || l.metric("ClientErrors")[0] != 1 {
		t.Errorf("the error: Errors %v, ErrorCode %v, ClientErrors %v", l.metric("Errors"), l.root["ErrorCode"], l.metric("ClientErrors"))
	}
	if diff := cmp.Diff([]string{"FunctionName,Model", "FunctionName,Model,ErrorCode"}, l.dimensionSets()); diff != "" {
		t.Errorf("dimension sets (-want +got):\n%s", diff)
	}
}

// TestMetricsThroughTheHandler runs turns through the real handler and
// checks every line it writes against the format: a plain turn, a tool
// turn, a model that refuses, and a request the API refuses.
func TestMetricsThroughTheHandler(t *testing.T) {
	var out testkit.Buffer
	s := testkit.Start(t, testkit.Options{Env: map[string]string{"TOOLS": "calculator", "METRICS_NAMESPACE": "Test/Agent"}, Metrics: &out})
	s.Model.Enqueue(
		conversetest.Text("hello"),
		conversetest.ToolUse("c1", "calculator", map[string]any{"expression": "6*7"}),
		conversetest.Text("42"),
		conversetest.AccessDenied(),
	)
	post := func(body string) int {
		r := httptest.NewRequest(http.MethodPost, "/chat", strings.NewReader(body))
		r.Header.Set("Content-Type", "application/json")
		return s.Serve(r).Code
	}
	statuses := []int{
		post(`{"session_id":"emf-1","message":"hi"}`),
		post(`{"session_id":"emf-1","message":"what is 6*7?"}`),
		post(`{"session_id":"emf-1","message":"again"}`),
		post(`{"session_id":"emf-1","message":`),
	}
	if statuses[0] != 200 || statuses[1] != 200 || statuses[2] < 400 || statuses[3] != 400 {
		t.Fatalf("statuses %v", statuses)
	}
	lines := parseEMFLines(t, []byte(out.String()))
	var requests, tools []emfLine
	for _, l := range lines {
		if _, ok := l.root["ToolName"]; ok {
			tools = append(tools, l)
		} else {
			requests = append(requests, l)
		}
		for _, set := range l.dimensionSets() {
			if !slices.Contains(allowedSets, set) {
				t.Errorf("dimension set %s", set)
			}
		}
		if l.root["FunctionName"] != "local" || l.root["Model"] != "test-model" || l.directives[0].Namespace != "Test/Agent" {
			t.Errorf("dimensions: %v", l.root)
		}
		if l.root["session_id"] != nil && l.root["session_id"] != "emf-1" {
			t.Errorf("session_id %v", l.root["session_id"])
		}
	}
	if len(requests) != 4 || len(tools) != 1 {
		t.Fatalf("%d request lines and %d tool lines:\n%s", len(requests), len(tools), out.String())
	}
	summary := func(l emfLine) string {
		return fmt.Sprintf("turns=%v model_calls=%v tool_calls=%v errors=%v code=%v cold=%v",
			l.metric("Turns"), l.metric("ModelCalls"), l.metric("ToolCalls"), l.metric("Errors"), l.root["ErrorCode"], l.metric("ColdStart"))
	}
	code := requests[2].root["ErrorCode"]
	want := []string{
		"turns=[1] model_calls=[1] tool_calls=[0] errors=[] code=<nil> cold=[1]",
		"turns=[1] model_calls=[2] tool_calls=[1] errors=[] code=<nil> cold=[]",
		fmt.Sprintf("turns=[1] model_calls=[1] tool_calls=[0] errors=[1] code=%v cold=[]", code),
		"turns=[] model_calls=[] tool_calls=[] errors=[1] code=invalid_json cold=[]",
	}
	var got []string
	for _, l := range requests {
		got = append(got, summary(l))
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("request lines (-want +got):\n%s", diff)
	}
	if code == nil || code == "ok" {
		t.Errorf("the refused model call's line has ErrorCode %v", code)
	}
	if l := tools[0]; l.root["ToolName"] != "calculator" || l.metric("ToolCalls")[0] != 1 || l.metric("ToolErrors")[0] != 0 {
		t.Errorf("the tool's line: %v", l.root)
	}
	if len(requests[0].metric("EstimatedCost")) != 0 {
		t.Errorf("EstimatedCost for a model the price table does not know: %v", requests[0].metric("EstimatedCost"))
	}
}
