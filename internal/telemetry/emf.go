package telemetry

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"io"
	"maps"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/aws/aws-lambda-go/lambdacontext"
	"github.com/lambda-agent/lambda-agent/internal/agent"
	"github.com/lambda-agent/lambda-agent/internal/pricing"
)

// DefaultNamespace is the metrics' CloudWatch namespace unless configured.
const DefaultNamespace = "LambdaAgent"

// The metrics' dimensions. Each line has one of three fixed sets, of values
// the deployment bounds: the function, its model, and a tool's name or an
// error code. Session ids, owners and request ids are properties of a line,
// never dimensions, which would make a billed metric of each.
const (
	dimFunction  = "FunctionName"
	dimModel     = "Model"
	dimErrorCode = "ErrorCode"
	dimTool      = "ToolName"
	dimAgent     = "AgentName"
)

// maxValues is the most values one metric may carry in a line.
const maxValues = 100

// Metrics writes the metrics of each request to Out, as lines of
// CloudWatch's Embedded Metric Format: on Lambda, a line on stdout is all
// it takes for CloudWatch to extract them. A request's line counts it and
// its outcome, with its turn's tokens, calls, latencies and cost when one
// ran; each tool the turn used gets a line of its own. It is safe for
// concurrent use.
type Metrics struct {
	// Namespace is the metrics' namespace; empty means DefaultNamespace.
	Namespace string
	// Function and Model are the values of the FunctionName and Model
	// dimensions.
	Function, Model string
	// Prices, when known, give each turn's EstimatedCost, and each
	// agent's.
	Prices pricing.Table
	// AgentModels are the models of the sub-agents that call one of their
	// own, by name: the Model dimension of their lines.
	AgentModels map[string]string
	Out         io.Writer
	// Now stamps the lines; nil means time.Now.
	Now func() time.Time

	mu   sync.Mutex
	warm atomic.Bool
}

// Request is what the edge knows of a request once it was answered.
type Request struct {
	// Method is the request's method, and Route the pattern of the route
	// it matched, such as "POST /chat", or "" when it matched none.
	Method, Route string
	// Turn says that the route runs turns.
	Turn bool
	// Status is the answer's status; for a stream that failed after it
	// began with 200, the failure's.
	Status int
	// Code is "ok", or the error code of the answer.
	Code      string
	SessionID string
	// Result is the work of the turn the request ran, failed or not; nil
	// when none ran.
	Result *agent.Result
	// Replayed says that the answer was a stored one: no turn ran.
	Replayed bool
	Duration time.Duration
}

// metric is one metric of a line: its name, unit and values.
type metric struct {
	name   string
	unit   string
	values []float64
}

// The units the metrics use, from the format's list.
const (
	unitCount = "Count"
	unitMs    = "Milliseconds"
	unitNone  = "None"
)

func count(name string, n int) metric { return metric{name, unitCount, []float64{float64(n)}} }

func millis(name string, ds ...time.Duration) metric {
	m := metric{name: name, unit: unitMs, values: make([]float64, len(ds))}
	for i, d := range ds {
		m.values[i] = float64(d.Microseconds()) / 1000
	}
	return m
}

// Record writes r's lines. A nil Metrics, or one without Out, records
// nothing.
func (m *Metrics) Record(ctx context.Context, r Request) {
	if m == nil || m.Out == nil {
		return
	}
	props := map[string]any{"route": cmp.Or(r.Route, "unmatched"), "status": r.Status}
	if r.SessionID != "" {
		props["session_id"] = r.SessionID
	}
	if id := TraceID(ctx); id != "" {
		props["trace_id"] = id
	}
	if lc, ok := lambdacontext.FromContext(ctx); ok {
		props["requestId"] = lc.AwsRequestID
	}

	metrics := []metric{
		count("Requests", 1),
		count("ServerErrors", b2i(r.Status >= 500)),
		count("ClientErrors", b2i(r.Status >= 400 && r.Status < 500)),
	}
	if !m.warm.Swap(true) {
		metrics = append(metrics, count("ColdStart", 1))
	}
	res := r.Result
	if r.Replayed {
		res = nil // the turn ran, and was counted, before
	}
	if res != nil {
		u, w := res.Usage, res.Metrics
		if r.Turn { // a direct tool call did its work without a turn
			metrics = append(metrics, count("Turns", 1))
		}
		metrics = append(metrics,
			count("InputTokens", u.InputTokens),
			count("OutputTokens", u.OutputTokens),
			count("CacheReadTokens", u.CacheReadInputTokens),
			count("CacheWriteTokens", u.CacheWriteInputTokens),
			count("ModelCalls", w.ModelCalls),
			count("ToolCalls", w.ToolCalls),
			count("ModelRetries", w.Retries),
			count("ModelThrottles", w.Throttles),
			millis("TurnDuration", r.Duration),
		)
		if len(w.ModelLatencies) > 0 {
			metrics = append(metrics, millis("ModelLatency", w.ModelLatencies...))
		}
		if cost, ok := m.Prices.Cost(u, res.AgentUsage); ok {
			metrics = append(metrics, metric{"EstimatedCost", unitNone, []float64{cost}})
		}
		if sr := res.StopReason; sr != "" {
			props["stop_reason"] = sr
		}
	}
	sets := []dimensionSet{{names: []string{dimFunction, dimModel}, metrics: metrics}}
	if r.Code != "" && r.Code != "ok" {
		props[dimErrorCode] = r.Code
		sets = append(sets, dimensionSet{names: []string{dimFunction, dimModel, dimErrorCode}, metrics: []metric{count("Errors", 1)}})
	}

	var buf bytes.Buffer
	now := m.now()
	m.encode(&buf, now, props, sets)
	if res != nil {
		// One line per tool and, for a turn that delegated, per agent: the
		// configuration names both, so their dimensions stay bounded.
		ids := func(dim, value string) map[string]any {
			p := map[string]any{dim: value}
			for _, k := range []string{"session_id", "trace_id", "requestId"} {
				if v, ok := props[k]; ok {
					p[k] = v
				}
			}
			return p
		}
		for _, t := range byTool(res.Metrics.Tools) {
			metrics := []metric{count("ToolCalls", len(t.durations)), count("ToolErrors", t.failed), millis("ToolDuration", t.durations...)}
			m.encode(&buf, now, ids(dimTool, t.name), []dimensionSet{{names: []string{dimFunction, dimModel, dimTool}, metrics: metrics}})
		}
		for _, name := range slices.Sorted(maps.Keys(res.AgentUsage)) {
			u := res.AgentUsage[name]
			metrics := []metric{
				count("InputTokens", u.InputTokens),
				count("OutputTokens", u.OutputTokens),
				count("CacheReadTokens", u.CacheReadInputTokens),
				count("CacheWriteTokens", u.CacheWriteInputTokens),
			}
			if p := m.Prices.For(name); p != nil {
				metrics = append(metrics, metric{"EstimatedCost", unitNone, []float64{p.Cost(u)}})
			}
			line := ids(dimAgent, name)
			if model, own := m.AgentModels[name]; own {
				line[dimModel] = model
			}
			m.encode(&buf, now, line, []dimensionSet{{names: []string{dimFunction, dimModel, dimAgent}, metrics: metrics}})
		}
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	_, _ = m.Out.Write(buf.Bytes()) // a metric that cannot be written is not worth failing a request for
}

// Counts writes a line of counts, by metric name, with the FunctionName
// dimension alone: the memory function's, for each batch of stream
// records. A nil Metrics, or one without Out, records nothing.
func (m *Metrics) Counts(ctx context.Context, counts map[string]int) {
	if m == nil || m.Out == nil || len(counts) == 0 {
		return
	}
	props := map[string]any{}
	if lc, ok := lambdacontext.FromContext(ctx); ok {
		props["requestId"] = lc.AwsRequestID
	}
	var metrics []metric
	for _, name := range slices.Sorted(maps.Keys(counts)) {
		metrics = append(metrics, count(name, counts[name]))
	}
	var buf bytes.Buffer
	m.encode(&buf, m.now(), props, []dimensionSet{{names: []string{dimFunction}, metrics: metrics}})
	m.mu.Lock()
	defer m.mu.Unlock()
	_, _ = m.Out.Write(buf.Bytes())
}

func (m *Metrics) now() time.Time {
	if m.Now != nil {
		return m.Now()
	}
	return time.Now()
}

// toolRuns are one tool's runs in a request.
type toolRuns struct {
	name      string
	durations []time.Duration
	failed    int
}

// byTool groups runs by tool, in the order of each tool's first run.
func byTool(runs []agent.ToolRun) []*toolRuns {
	var out []*toolRuns
	index := map[string]*toolRuns{}
	for _, r := range runs {
		t, ok := index[r.Name]
		if !ok {
			t = &toolRuns{name: r.Name}
			index[r.Name] = t
			out = append(out, t)
		}
		t.durations = append(t.durations, r.Duration)
		t.failed += b2i(r.Failed)
	}
	return out
}

// dimensionSet is one directive of a line: the metrics, by these
// dimensions.
type dimensionSet struct {
	names   []string
	metrics []metric
}

// directive is the format's metric directive.
type directive struct {
	Namespace  string       `json:"Namespace"`
	Dimensions [][]string   `json:"Dimensions"`
	Metrics    []definition `json:"Metrics"`
}

type definition struct {
	Name string `json:"Name"`
	Unit string `json:"Unit"`
}

// encode appends to buf the lines of sets, with props as their
// properties. A metric may carry at most maxValues values in a line, so
// one with more continues in lines of its own.
func (m *Metrics) encode(buf *bytes.Buffer, now time.Time, props map[string]any, sets []dimensionSet) {
	for len(sets) > 0 {
		root := make(map[string]any, len(props)+8)
		for k, v := range props {
			root[k] = v
		}
		root[dimFunction] = m.Function
		if _, set := root[dimModel]; !set {
			root[dimModel] = m.Model // a sub-agent's line may have its own
		}
		directives := make([]directive, 0, len(sets))
		var rest []dimensionSet
		for _, s := range sets {
			d := directive{Namespace: m.namespace(), Dimensions: [][]string{s.names}}
			var more []metric
			for _, mt := range s.metrics {
				d.Metrics = append(d.Metrics, definition{Name: mt.name, Unit: mt.unit})
				values := mt.values
				if len(values) > maxValues {
					more = append(more, metric{mt.name, mt.unit, values[maxValues:]})
					values = values[:maxValues]
				}
				if len(values) == 1 {
					root[mt.name] = values[0]
				} else {
					root[mt.name] = values
				}
			}
			directives = append(directives, d)
			if len(more) > 0 {
				rest = append(rest, dimensionSet{names: s.names, metrics: more})
			}
		}
		root["_aws"] = map[string]any{"Timestamp": now.UnixMilli(), "CloudWatchMetrics": directives}
		line, err := json.Marshal(root)
		if err != nil {
			return // the values are numbers and strings; this cannot happen
		}
		buf.Write(line)
		buf.WriteByte('\n')
		sets = rest
	}
}

func (m *Metrics) namespace() string {
	if m.Namespace == "" {
		return DefaultNamespace
	}
	return m.Namespace
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}
