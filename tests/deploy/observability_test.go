package deploy

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/lambda-agent/lambda-agent/internal/telemetry"
	"github.com/lambda-agent/lambda-agent/internal/testkit"
	"gopkg.in/yaml.v3"
)

// emfMetrics are the metrics the functions write in the CloudWatch Embedded
// Metric Format, in the MetricsNamespace namespace, by dimension set (its
// names sorted and comma-joined). The dashboard and the alarms may read these
// and no others.
var emfMetrics = map[string][]string{
	"FunctionName,Model": {
		"Requests", "ServerErrors", "ClientErrors", "ColdStart",
		"Turns", "InputTokens", "OutputTokens", "CacheReadTokens", "CacheWriteTokens",
		"ModelCalls", "ToolCalls", "ModelRetries", "ModelThrottles",
		"ModelLatency", "TurnDuration", "EstimatedCost",
		// The audit record's, one line per turn that wrote records.
		"AuditRecords", "AuditBytes", "AuditWriteFailures", "AuditWriteDuration",
	},
	"ErrorCode,FunctionName,Model": {"Errors"},
	"FunctionName,Model,ToolName":  {"ToolCalls", "ToolErrors", "ToolDuration"},
	"AgentName,FunctionName,Model": {"InputTokens", "OutputTokens", "CacheReadTokens", "CacheWriteTokens", "EstimatedCost"},
	// The memory function's, one line per batch of stream records.
	"FunctionName": {"StreamRecords", "StreamRecordsFailed", "AgentCoreEvents", "AgentCoreEventsDeleted", "AgentCoreRecordsDeleted"},
}

// lambdaMetrics are the AWS/Lambda metrics they may read, with the
// dimension set [FunctionName].
var lambdaMetrics = []string{"Throttles", "Errors"}

// pseudo are the pseudo parameters' values in these tests.
var pseudo = map[string]string{
	"AWS::Region":    "eu-west-1",
	"AWS::StackName": "agent-stack",
	"AWS::Partition": "aws",
	"AWS::AccountId": "123456789012",
	"AWS::URLSuffix": "amazonaws.com",
}

// functionNames are the FunctionName dimension values of the three
// functions, as the resolver names them.
func functionNames() map[string]string {
	out := map[string]string{}
	for id := range functions {
		out["resource-"+id] = id
	}
	return out
}

const (
	collectorLayer = "arn:aws:lambda:eu-west-1:901920570463:layer:aws-otel-collector-arm64-ver-0-117-0:1"
	alarmTopic     = "arn:aws:sns:eu-west-1:123456789012:agent-alarms"
)

func TestObservabilityParameters(t *testing.T) {
	tp := loadTemplate(t)
	tests := []struct {
		name      string
		def       string
		allowed   []string
		forbidden []string
	}{
		{
			name:    "MetricsNamespace",
			def:     "LambdaAgent",
			allowed: []string{"LambdaAgent", "My/Agent", "a.b_c#d:e-f", "AWS", "AWSAgent", "My/AWS/x", strings.Repeat("n", 64)},
			// AWS/ is reserved for AWS's namespaces. CloudWatch takes 255
			// characters, the template 64, to keep the functions'
			// variables within Lambda's 4 KB (TestEnvironmentFitsLambda).
			forbidden: []string{"", "AWS/Lambda", "AWS/", "my agent", "agent*", "ågent", strings.Repeat("n", 65)},
		},
		{name: "Tracing", def: "Disabled", allowed: []string{"Active", "Disabled"}, forbidden: []string{"PassThrough", "", "active"}},
		{
			name:    "OtlpEndpoint",
			allowed: []string{"", "http://localhost:4318", "https://otlp.example.com:4318/agent", "https://" + strings.Repeat("o", 56)},
			// 64 characters, to keep the functions' variables within
			// Lambda's 4 KB (TestEnvironmentFitsLambda).
			forbidden: []string{"localhost:4318", "grpc://localhost:4317", "http://", "http://a b", "https://" + strings.Repeat("o", 57)},
		},
		{
			name:      "CollectorLayerArn",
			allowed:   []string{"", collectorLayer, "arn:aws-cn:lambda:cn-north-1:123456789012:layer:collector:12"},
			forbidden: []string{"aws-otel-collector", "arn:aws:lambda:eu-west-1:901920570463:layer:aws-otel-collector", "arn:aws:lambda:eu-west-1:123456789012:function:f:1"},
		},
		{name: "TraceMessageContent", def: "false", allowed: []string{"false", "true"}, forbidden: []string{"", "yes", "1"}},
		{
			name:      "AlarmTopicArn",
			allowed:   []string{"", alarmTopic, "arn:aws-us-gov:sns:us-gov-west-1:123456789012:ops_team-1"},
			forbidden: []string{"agent-alarms", "arn:aws:sqs:eu-west-1:123456789012:q", "arn:aws:sns:eu-west-1:123456789012:t.fifo"},
		},
		{name: "ServerErrorRateThreshold", def: "5", allowed: []string{"0", "0.5", "5", "100"}, forbidden: []string{"-1", "101", "x"}},
		{name: "ThrottleAlarmThreshold", def: "5", allowed: []string{"1", "5", "1000"}, forbidden: []string{"0", "x"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, ok := tp.Parameters[tt.name]
			if !ok {
				t.Fatalf("no parameter %s", tt.name)
			}
			if p.Default == nil || *p.Default != tt.def {
				t.Errorf("Default = %v, want %q", p.Default, tt.def)
			}
			accepts := func(v string) bool {
				if p.Type == "Number" {
					return numberInRange(p, v)
				}
				return p.allowed(t, v)
			}
			for _, v := range tt.allowed {
				if !accepts(v) {
					t.Errorf("refuses %q", v)
				}
			}
			for _, v := range tt.forbidden {
				if accepts(v) {
					t.Errorf("accepts %q", v)
				}
			}
		})
	}
}

// TestObservabilitySettings: the parameters reach every function, as
// environment variables, its tracing mode and its layers.
func TestObservabilitySettings(t *testing.T) {
	tp := loadTemplate(t)
	tests := []struct {
		name   string
		params map[string]string
		env    map[string]string
		layers []any
	}{
		{
			name: "defaults",
			env: map[string]string{
				"METRICS_NAMESPACE":                                  "LambdaAgent",
				"OTEL_EXPORTER_OTLP_ENDPOINT":                        "",
				"OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT": "false",
			},
			layers: []any{},
		},
		{
			name: "collector",
			params: map[string]string{
				"MetricsNamespace":    "Team/Agent",
				"Tracing":             "Active",
				"OtlpEndpoint":        "http://localhost:4318",
				"CollectorLayerArn":   collectorLayer,
				"TraceMessageContent": "true",
			},
			env: map[string]string{
				"METRICS_NAMESPACE":                                  "Team/Agent",
				"OTEL_EXPORTER_OTLP_ENDPOINT":                        "http://localhost:4318",
				"OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT": "true",
			},
			layers: []any{collectorLayer},
		},
		{
			name:   "remote collector",
			params: map[string]string{"OtlpEndpoint": "https://otlp.example.com"},
			env: map[string]string{
				"METRICS_NAMESPACE":                                  "LambdaAgent",
				"OTEL_EXPORTER_OTLP_ENDPOINT":                        "https://otlp.example.com",
				"OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT": "false",
			},
			layers: []any{},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := newResolver(t, tp, tt.params)
			r.deployable(t)
			for id := range functions {
				env := r.environment(t, id)
				got := map[string]string{}
				for k := range tt.env {
					got[k] = env[k]
				}
				if diff := cmp.Diff(tt.env, got); diff != "" {
					t.Errorf("%s: environment (-want +got):\n%s", id, diff)
				}
				fp := tp.functionProperties(id)
				props, _, err := r.resolve(map[string]any{"Tracing": fp["Tracing"], "Layers": fp["Layers"]})
				if err != nil {
					t.Fatal(err)
				}
				if got, want := get(props, "Tracing"), r.params["Tracing"]; got != want {
					t.Errorf("%s: Tracing = %v, want %s", id, got, want)
				}
				if diff := cmp.Diff(tt.layers, get(props, "Layers")); diff != "" {
					t.Errorf("%s: Layers (-want +got):\n%s", id, diff)
				}
			}
		})
	}
	// A collector needs the functions to send it something.
	refused, err := newResolver(t, tp, map[string]string{"CollectorLayerArn": collectorLayer}).refusals()
	if err != nil {
		t.Fatal(err)
	}
	if len(refused) == 0 {
		t.Error("the Rules accept CollectorLayerArn without OtlpEndpoint")
	}
}

// TestTracingPermissions runs the SAM transform, which is what grants X-Ray
// permissions: with Tracing Active it adds its X-Ray managed policy to the
// functions' roles, and with Disabled it adds nothing and sets no
// TracingConfig, as before tracing was a parameter. The policy,
// AWSXrayWriteOnlyAccess, allows xray:PutTraceSegments and
// xray:PutTelemetryRecords, which Lambda's tracing needs, and the
// xray:GetSampling* reads, which SAM offers no way to leave out.
func TestTracingPermissions(t *testing.T) {
	python := samPython(t)
	doc := loadGeneric(t)
	for _, id := range slices.Sorted(maps.Keys(functions)) {
		// The transform wants code in S3, as sam deploy leaves it.
		get(doc, "Resources", id, "Properties").(map[string]any)["CodeUri"] = "s3://bucket/key"
	}
	input, err := json.Marshal(doc)
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		tracing  string
		config   any
		policies []string
	}{
		{tracing: "Disabled", policies: []string{"service-role/AWSLambdaBasicExecutionRole"}},
		{tracing: "Active", config: map[string]any{"Mode": ref("Tracing")}, policies: []string{"AWSXrayWriteOnlyAccess", "service-role/AWSLambdaBasicExecutionRole"}},
	} {
		t.Run(tt.tracing, func(t *testing.T) {
			out := samTransform(t, python, input, map[string]string{"Tracing": tt.tracing})
			for id := range functions {
				fn := get(out, "Resources", id)
				if got := get(fn, "Type"); got != "AWS::Lambda::Function" {
					t.Fatalf("%s: Type = %v", id, got)
				}
				if diff := cmp.Diff(tt.config, get(fn, "Properties", "TracingConfig")); diff != "" {
					t.Errorf("%s: TracingConfig (-want +got):\n%s", id, diff)
				}
				role, _ := get(fn, "Properties", "Role", "Fn::GetAtt").([]any)
				if len(role) != 2 {
					t.Fatalf("%s: Role = %v, want the role SAM generates", id, get(fn, "Properties", "Role"))
				}
				var managed []string
				for _, arn := range branches(get(out, "Resources", role[0].(string), "Properties", "ManagedPolicyArns")) {
					if s, ok := arn.(string); ok {
						_, name, _ := strings.Cut(s, ":iam::aws:policy/")
						managed = append(managed, name)
					}
				}
				slices.Sort(managed)
				if diff := cmp.Diff(tt.policies, managed); diff != "" {
					t.Errorf("%s: AWS managed policies (-want +got):\n%s", id, diff)
				}
			}
		})
	}
}

// loadGeneric reads template.yaml as generic values, with its numbers and
// booleans typed, for SAM's transform.
func loadGeneric(t *testing.T) map[string]any {
	t.Helper()
	b, err := os.ReadFile(templatePath)
	if err != nil {
		t.Fatal(err)
	}
	var n yaml.Node
	if err := yaml.Unmarshal(b, &n); err != nil {
		t.Fatal(err)
	}
	v, err := fromTypedNode(&n)
	if err != nil {
		t.Fatal(err)
	}
	return v.(map[string]any)
}

// samTransform runs the SAM transform on a template with parameter values,
// as CloudFormation does at deploy time.
// samPython returns the python3 that runs the SAM transform, and skips t
// where there is none, or it cannot import samtranslator.
func samPython(t *testing.T) string {
	t.Helper()
	python, err := exec.LookPath("python3")
	if err != nil {
		t.Skip("python3 is not on PATH; it runs the SAM transform (pip install aws-sam-translator)")
	}
	if err := exec.CommandContext(t.Context(), python, "-c", "import samtranslator").Run(); err != nil {
		t.Skip("python3 cannot import samtranslator (pip install aws-sam-translator, which cfn-lint installs too)")
	}
	return python
}

func samTransform(t *testing.T, python string, template []byte, params map[string]string) map[string]any {
	t.Helper()
	const script = `
import json, sys
from samtranslator.translator.transform import transform
class NoManagedPolicies:
    def load(self):
        return {}
json.dump(transform(json.load(sys.stdin), json.loads(sys.argv[1]), NoManagedPolicies()), sys.stdout)
`
	p, err := json.Marshal(params)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	var stdout, stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, python, "-c", script, string(p))
	cmd.Env = append(os.Environ(), "AWS_DEFAULT_REGION="+pseudo["AWS::Region"])
	cmd.Stdin, cmd.Stdout, cmd.Stderr = bytes.NewReader(template), &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("SAM transform: %v\n%s", err, stderr.String())
	}
	var out map[string]any
	if err := json.Unmarshal(stdout.Bytes(), &out); err != nil {
		t.Fatalf("SAM transform output: %v", err)
	}
	return out
}

// subValue resolves an Fn::Sub string as CloudFormation would: ${Param} is
// the parameter's value, ${Resource} "resource-Resource", ${Resource.Attr}
// "resource-Resource.Attr", and ${!x} the literal ${x}.
func (r *resolver) subValue(t *testing.T, v any) string {
	t.Helper()
	s := sub(v)
	if s == "" {
		t.Fatalf("%v is not an Fn::Sub of a string", v)
	}
	var b strings.Builder
	for {
		before, after, found := strings.Cut(s, "${")
		b.WriteString(before)
		if !found {
			return b.String()
		}
		name, rest, ok := strings.Cut(after, "}")
		if !ok {
			t.Fatalf("Fn::Sub: unterminated ${%s", after)
		}
		s = rest
		if lit, ok := strings.CutPrefix(name, "!"); ok {
			b.WriteString("${" + lit + "}")
			continue
		}
		if p, ok := pseudo[name]; ok {
			b.WriteString(p)
			continue
		}
		if p, ok := r.params[name]; ok {
			b.WriteString(p)
			continue
		}
		res, _, _ := strings.Cut(name, ".")
		if _, ok := r.tp.Resources[res]; !ok {
			t.Fatalf("Fn::Sub names ${%s}, which is no parameter or resource", name)
		}
		if exists, err := r.exists(res); err != nil || !exists {
			t.Fatalf("Fn::Sub names ${%s}, which this deployment does not create (%v)", name, err)
		}
		b.WriteString("resource-" + name)
	}
}

// widget is one widget of a CloudWatch dashboard body.
type widget struct {
	Type                string
	X, Y, Width, Height int
	Properties          struct {
		Title   string
		Region  string
		Stat    string
		Period  int
		Metrics [][]any
		Alarms  []string
	}
}

// series is one row of a metric widget's metrics: a metric, or an
// expression.
type series struct {
	Namespace, Name string
	Dims            map[string]string
	Expression      string
	Options         map[string]any
}

func (s series) id() string { id, _ := s.Options["id"].(string); return id }

func parseSeries(row []any) (series, error) {
	var s series
	if n := len(row); n > 0 {
		if o, ok := row[n-1].(map[string]any); ok {
			s.Options, row = o, row[:n-1]
		}
	}
	if len(row) == 0 {
		s.Expression, _ = s.Options["expression"].(string)
		if s.Expression == "" {
			return s, fmt.Errorf("%v is neither a metric nor an expression", s.Options)
		}
		return s, nil
	}
	if len(row) < 2 || len(row)%2 != 0 {
		return s, fmt.Errorf("metric %v: want namespace, name and dimension pairs", row)
	}
	var strs []string
	for _, v := range row {
		str, ok := v.(string)
		if !ok {
			return s, fmt.Errorf("metric %v: %v is not a string", row, v)
		}
		strs = append(strs, str)
	}
	s.Namespace, s.Name, s.Dims = strs[0], strs[1], map[string]string{}
	for i := 2; i < len(strs); i += 2 {
		s.Dims[strs[i]] = strs[i+1]
	}
	return s, nil
}

// dimSet returns a metric's dimension set as emfMetrics names it.
func dimSet(dims map[string]string) string {
	return strings.Join(slices.Sorted(maps.Keys(dims)), ",")
}

// searchExpr is how the dashboard searches for the metrics whose dimension
// values it cannot know: the error codes and the tool names.
var searchExpr = regexp.MustCompile(`^SEARCH\('\{"([^"]+)",([A-Za-z,]+)\} MetricName="([A-Za-z]+)" Model="([^"]+)" \(([^)]+)\)', 'Sum', 300\)$`)

// TestDashboard resolves the dashboard's body for several sets of
// parameters and checks that it is valid JSON whose widgets read the
// functions' metrics: names they write, in MetricsNamespace, for ModelId
// and each of the three functions.
func TestDashboard(t *testing.T) {
	tp := loadTemplate(t)
	d := tp.Resources["Dashboard"]
	if d.Type != "AWS::CloudWatch::Dashboard" || d.Condition != "" {
		t.Fatalf("Dashboard: Type %q, Condition %q; want an AWS::CloudWatch::Dashboard, always", d.Type, d.Condition)
	}
	if got := sub(d.Properties["DashboardName"]); got != "${AWS::StackName}-agent" {
		t.Errorf("DashboardName = %q, want ${AWS::StackName}-agent", got)
	}
	if got, want := sub(tp.Outputs["DashboardUrl"].Value), "https://${AWS::Region}.console.aws.amazon.com/cloudwatch/home?region=${AWS::Region}#dashboards:name=${Dashboard}"; got != want {
		t.Errorf("output DashboardUrl = %q, want %q", got, want)
	}
	for _, tt := range []struct {
		name   string
		params map[string]string
	}{
		{name: "defaults"},
		// Every character a namespace may have must keep the body JSON
		// and the SEARCH expressions whole.
		{name: "namespace", params: map[string]string{"MetricsNamespace": "Team/Agent#2:x.y_z-1", "ModelId": "amazon.nova-pro-v1:0", "FoundationModelId": ""}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			r := newResolver(t, tp, tt.params)
			r.deployable(t)
			body := r.subValue(t, d.Properties["DashboardBody"])
			var dash struct{ Widgets []widget }
			if err := json.Unmarshal([]byte(body), &dash); err != nil {
				t.Fatalf("DashboardBody is not JSON: %v\n%s", err, body)
			}
			read := checkWidgets(t, r, dash.Widgets)
			// What the dashboard must show: turns, errors by code, tokens,
			// cost, p50 and p99 turn duration and model latency, throttles.
			for _, m := range []string{
				"Turns Sum", "Requests Sum", "Errors Sum",
				"InputTokens Sum", "OutputTokens Sum", "CacheReadTokens Sum", "CacheWriteTokens Sum",
				"EstimatedCost Sum", "TurnDuration p50", "TurnDuration p99", "ModelLatency p50", "ModelLatency p99",
				"ModelThrottles Sum", "AWS/Lambda Throttles Sum", "ToolCalls Sum", "ToolErrors Sum",
			} {
				if !read[m] {
					t.Errorf("no widget shows %s", m)
				}
			}
		})
	}
}

// checkWidgets checks a dashboard's widgets, and returns the metrics they
// show as "Name Stat" ("AWS/Lambda Name Stat" for Lambda's), for every
// function.
func checkWidgets(t *testing.T, r *resolver, widgets []widget) map[string]bool {
	t.Helper()
	ns, model := r.params["MetricsNamespace"], r.params["ModelId"]
	fnNames := functionNames()
	type cell struct{ x, y int }
	used := map[cell]string{}
	// shown[metric][function] for every metric a widget shows.
	shown := map[string]map[string]bool{}
	show := func(m, fn string) {
		if shown[m] == nil {
			shown[m] = map[string]bool{}
		}
		shown[m][fn] = true
	}
	alarms := 0
	for _, w := range widgets {
		p := w.Properties
		t.Run(p.Title, func(t *testing.T) {
			if w.Width < 1 || w.Height < 1 || w.X < 0 || w.Y < 0 || w.X+w.Width > 24 {
				t.Errorf("position x %d, y %d, width %d, height %d is off the 24-column grid", w.X, w.Y, w.Width, w.Height)
			}
			for x := w.X; x < w.X+w.Width; x++ {
				for y := w.Y; y < w.Y+w.Height; y++ {
					if other, ok := used[cell{x, y}]; ok {
						t.Fatalf("overlaps %q", other)
					}
					used[cell{x, y}] = p.Title
				}
			}
			if w.Type == "alarm" {
				alarms++
				want := []string{"resource-ServerErrorRateAlarm.Arn", "resource-ThrottleAlarm.Arn"}
				if diff := cmp.Diff(want, p.Alarms); diff != "" {
					t.Errorf("alarms (-want +got):\n%s", diff)
				}
				return
			}
			if w.Type != "metric" {
				t.Fatalf("type %q", w.Type)
			}
			if p.Title == "" || p.Region != pseudo["AWS::Region"] || p.Period != 300 {
				t.Errorf("title %q, region %q, period %d; want a title, the stack's region, 300", p.Title, p.Region, p.Period)
			}
			// The functions each metric of this widget is shown for.
			fns := map[string]map[string]bool{}
			add := func(m, fn string) {
				if fns[m] == nil {
					fns[m] = map[string]bool{}
				}
				fns[m][fn] = true
				show(m, fn)
			}
			rows := map[string]series{}
			var exprs []series
			for _, row := range p.Metrics {
				s, err := parseSeries(row)
				if err != nil {
					t.Error(err)
					continue
				}
				if id := s.id(); id != "" {
					if _, dup := rows[id]; dup {
						t.Errorf("id %s is used twice", id)
					}
					rows[id] = s
				}
				if s.Expression != "" {
					if m := searchExpr.FindStringSubmatch(s.Expression); m != nil {
						checkSearch(t, ns, model, m, add)
					} else {
						exprs = append(exprs, s)
					}
					continue
				}
				stat, _ := s.Options["stat"].(string)
				if stat == "" {
					stat = p.Stat
				}
				fn, ok := fnNames[s.Dims["FunctionName"]]
				if !ok {
					t.Errorf("%s: FunctionName %q is none of the functions", s.Name, s.Dims["FunctionName"])
				}
				switch s.Namespace {
				case ns:
					if set := dimSet(s.Dims); !slices.Contains(emfMetrics[set], s.Name) || s.Dims["Model"] != model {
						t.Errorf("metric %s with dimensions %v: the functions write no such metric for model %s", s.Name, s.Dims, model)
					}
					add(s.Name+" "+stat, fn)
				case "AWS/Lambda":
					if !slices.Contains(lambdaMetrics, s.Name) || dimSet(s.Dims) != "FunctionName" {
						t.Errorf("AWS/Lambda metric %s with dimensions %v", s.Name, s.Dims)
					}
					add("AWS/Lambda "+s.Name+" "+stat, fn)
				default:
					t.Errorf("metric %s in namespace %q, want %q (MetricsNamespace)", s.Name, s.Namespace, ns)
				}
			}
			// Each total adds up one metric of the three functions.
			for _, e := range exprs {
				checkTotal(t, e, rows, fnNames)
			}
			for m, got := range fns {
				if len(got) != len(functions) {
					t.Errorf("%s is shown for %v, want every function", m, slices.Sorted(maps.Keys(got)))
				}
			}
		})
	}
	if alarms != 1 {
		t.Errorf("%d alarm widgets, want 1", alarms)
	}
	read := map[string]bool{}
	for m, fns := range shown {
		read[m] = len(fns) == len(functions)
	}
	return read
}

// checkSearch checks a SEARCH expression's match m: it searches the
// namespace, for a metric the functions write with those dimensions, the
// model and the three functions.
func checkSearch(t *testing.T, ns, model string, m []string, add func(metric, fn string)) {
	t.Helper()
	gotNS, dims, name, gotModel, filter := m[1], strings.Split(m[2], ","), m[3], m[4], m[5]
	slices.Sort(dims)
	if gotNS != ns || gotModel != model {
		t.Errorf("SEARCH %s in namespace %q for model %q, want %q, %q", name, gotNS, gotModel, ns, model)
	}
	if !slices.Contains(emfMetrics[strings.Join(dims, ",")], name) {
		t.Errorf("SEARCH for %s with dimensions %v: the functions write no such metric", name, dims)
	}
	fnNames := functionNames()
	for _, f := range strings.Split(filter, " OR ") {
		v, ok := strings.CutPrefix(f, `FunctionName="`)
		v, ok2 := strings.CutSuffix(v, `"`)
		fn, known := fnNames[v]
		if !ok || !ok2 || !known {
			t.Errorf("SEARCH for %s: filter %q is not one of the functions", name, f)
			continue
		}
		add(name+" Sum", fn)
	}
}

// checkTotal checks that expression e adds up the values of one metric of
// the three functions, hidden rows of the widget, and that a function
// without data counts as 0.
func checkTotal(t *testing.T, e series, rows map[string]series, fnNames map[string]string) {
	t.Helper()
	// Each function's value is a different power of ten, so the total
	// shows which were added; the stream function has no data.
	values := map[string]float64{"ChatFunction": 1, "StructuredFunction": 10}
	var names []string
	refs := map[string]bool{}
	got, err := evalMath(e.Expression, func(id string) (*float64, error) {
		refs[id] = true
		s, ok := rows[id]
		if !ok || s.Expression != "" {
			return nil, fmt.Errorf("%s is not a metric of the widget", id)
		}
		names = append(names, s.Name)
		if v, ok := values[fnNames[s.Dims["FunctionName"]]]; ok {
			return &v, nil
		}
		return nil, nil
	})
	if err != nil {
		t.Errorf("expression %q: %v", e.Expression, err)
		return
	}
	if got == nil || *got != 11 || len(refs) != len(functions) || len(slices.Compact(names)) != 1 {
		t.Errorf("expression %q (%s) = %v over %v; want the total of one metric of the three functions", e.Expression, e.Options["label"], got, names)
	}
	for id := range refs {
		if rows[id].Options["visible"] != false {
			t.Errorf("%s: the total's inputs are hidden", id)
		}
	}
}

// TestAlarms checks the alarms' metric math by evaluating it on sample
// values, their thresholds and their actions.
func TestAlarms(t *testing.T) {
	tp := loadTemplate(t)
	if got, want := tp.ofType("AWS::CloudWatch::Alarm"), []string{"MemoryFailuresAlarm", "ServerErrorRateAlarm", "ThrottleAlarm"}; !slices.Equal(got, want) {
		t.Fatalf("alarms = %v, want %v", got, want)
	}
	ns := *tp.Parameters["MetricsNamespace"].Default
	// values["Metric Function"] is a function's value in five minutes; absent
	// means it had no data.
	type sample struct {
		values map[string]float64
		want   float64
	}
	tests := []struct {
		id         string
		comparison string
		threshold  string
		inputs     []string
		samples    []sample
	}{
		{
			id:         "ServerErrorRateAlarm",
			comparison: "GreaterThanThreshold",
			threshold:  "ServerErrorRateThreshold",
			inputs:     []string{ns + " ServerErrors", ns + " Requests", "AWS/Lambda Errors"},
			samples: []sample{
				{values: map[string]float64{
					"ServerErrors ChatFunction": 1, "ServerErrors StructuredFunction": 0, "ServerErrors ChatStreamFunction": 1,
					"Requests ChatFunction": 10, "Requests StructuredFunction": 10, "Requests ChatStreamFunction": 20,
				}, want: 5},
				{values: map[string]float64{
					"ServerErrors ChatFunction": 2, "Requests ChatFunction": 10,
					"ServerErrors ChatStreamFunction": 0, "Requests ChatStreamFunction": 10,
				}, want: 10},
				{values: map[string]float64{"ServerErrors ChatStreamFunction": 3, "Requests ChatStreamFunction": 3, "Requests ChatFunction": 3}, want: 50},
				{values: map[string]float64{"Requests StructuredFunction": 7}, want: 0},
				// Invocations that crashed or timed out wrote no line:
				// Lambda's Errors add them, to both sides.
				{values: map[string]float64{"Errors ChatFunction": 2, "Requests ChatFunction": 8}, want: 20},
				{values: map[string]float64{"Errors ChatStreamFunction": 1}, want: 100},
				// No requests is no error rate to alarm on.
				{values: map[string]float64{}, want: 0},
			},
		},
		{
			id:         "ThrottleAlarm",
			comparison: "GreaterThanOrEqualToThreshold",
			threshold:  "ThrottleAlarmThreshold",
			inputs:     []string{ns + " ModelThrottles", "AWS/Lambda Throttles"},
			samples: []sample{
				{values: map[string]float64{
					"ModelThrottles ChatFunction": 1, "ModelThrottles ChatStreamFunction": 2,
					"Throttles StructuredFunction": 3,
				}, want: 6},
				{values: map[string]float64{"Throttles ChatFunction": 1, "Throttles StructuredFunction": 1, "Throttles ChatStreamFunction": 1}, want: 3},
				{values: map[string]float64{}, want: 0},
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.id, func(t *testing.T) {
			a := tp.Resources[tt.id]
			if a.Condition != "" {
				t.Errorf("Condition %s; the alarms always exist", a.Condition)
			}
			got := map[string]any{
				"ComparisonOperator": a.Properties["ComparisonOperator"],
				"Threshold":          a.Properties["Threshold"],
				"TreatMissingData":   a.Properties["TreatMissingData"],
				"EvaluationPeriods":  a.Properties["EvaluationPeriods"],
			}
			want := map[string]any{
				"ComparisonOperator": tt.comparison,
				"Threshold":          ref(tt.threshold),
				"TreatMissingData":   "notBreaching",
				"EvaluationPeriods":  "1",
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
			for _, k := range []string{"MetricName", "Namespace", "Statistic", "Period"} {
				if v, ok := a.Properties[k]; ok {
					t.Errorf("%s = %v; the alarm watches metric math", k, v)
				}
			}
			r := newResolver(t, tp, nil)
			props, _, err := r.resolve(a.Properties)
			if err != nil {
				t.Fatal(err)
			}
			alarm := checkAlarmMetrics(t, props)
			var gotInputs []string
			for _, m := range alarm.metrics {
				gotInputs = append(gotInputs, m.Namespace+" "+m.Name+" "+m.fn)
			}
			var wantInputs []string
			for _, in := range tt.inputs {
				for id := range functions {
					wantInputs = append(wantInputs, in+" "+id)
				}
			}
			slices.Sort(gotInputs)
			slices.Sort(wantInputs)
			if diff := cmp.Diff(wantInputs, gotInputs); diff != "" {
				t.Errorf("metrics (-want +got):\n%s", diff)
			}
			for i, s := range tt.samples {
				got, refs, err := alarm.eval(s.values)
				if err != nil {
					t.Fatal(err)
				}
				if got == nil || math.Abs(*got-s.want) > 1e-9 {
					t.Errorf("sample %d %v: the alarm sees %v, want %v", i, s.values, got, s.want)
				}
				if len(refs) != len(alarm.metrics) {
					t.Errorf("the alarm's expression reads %d of its %d metrics", len(refs), len(alarm.metrics))
				}
			}
		})
	}

	// The alarms notify the topic, when there is one.
	for _, topic := range []string{"", alarmTopic} {
		t.Run("AlarmTopicArn="+topic, func(t *testing.T) {
			r := newResolver(t, tp, map[string]string{"AlarmTopicArn": topic})
			var want any
			if topic != "" {
				want = []any{topic}
			}
			for _, id := range tp.ofType("AWS::CloudWatch::Alarm") {
				props, _, err := r.resolve(tp.Resources[id].Properties)
				if err != nil {
					t.Fatal(err)
				}
				for _, k := range []string{"AlarmActions", "OKActions"} {
					if diff := cmp.Diff(want, get(props, k)); diff != "" {
						t.Errorf("%s: %s (-want +got):\n%s", id, k, diff)
					}
				}
				if v := get(props, "InsufficientDataActions"); v != nil {
					t.Errorf("%s: InsufficientDataActions = %v", id, v)
				}
			}
		})
	}
	// With either memory, a record left in the memory function's
	// on-failure queue sets off an alarm of its own.
	t.Run("MemoryFailuresAlarm", func(t *testing.T) {
		a := tp.Resources["MemoryFailuresAlarm"]
		got := map[string]any{"Condition": a.Condition}
		for _, k := range []string{"Namespace", "MetricName", "Statistic", "Period", "EvaluationPeriods", "DatapointsToAlarm", "ComparisonOperator", "Threshold", "TreatMissingData", "Dimensions"} {
			got[k] = a.Properties[k]
		}
		want := map[string]any{
			"Condition": "MemoryFunctionOn", "Namespace": "AWS/SQS", "MetricName": "ApproximateNumberOfMessagesVisible",
			"Statistic": "Maximum", "Period": "300", "EvaluationPeriods": "1", "DatapointsToAlarm": "1",
			"ComparisonOperator": "GreaterThanOrEqualToThreshold", "Threshold": "1", "TreatMissingData": "notBreaching",
			"Dimensions": []any{map[string]any{"Name": "QueueName", "Value": map[string]any{"Fn::GetAtt": []any{"MemoryFailureQueue", "QueueName"}}}},
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("(-want +got):\n%s", diff)
		}
		if q := tp.Resources["MemoryFailureQueue"]; q.Type != "AWS::SQS::Queue" || q.Condition != "MemoryFunctionOn" {
			t.Errorf("the queue the alarm watches: %+v", q)
		}
	})
	for output, id := range map[string]string{"ServerErrorRateAlarmName": "ServerErrorRateAlarm", "ThrottleAlarmName": "ThrottleAlarm"} {
		if got := refName(tp.Outputs[output].Value); got != id {
			t.Errorf("output %s = %v, want Ref %s", output, tp.Outputs[output].Value, id)
		}
	}
}

// alarmMath is an alarm's metric math: its metrics, by id, and its
// expressions.
type alarmMath struct {
	metrics     map[string]alarmMetric
	expressions map[string]string
	returned    string
}

type alarmMetric struct {
	series
	fn string // the function's logical id
}

// checkAlarmMetrics reads and checks the Metrics of an alarm's resolved
// properties: metrics that the functions or Lambda write, summed over
// 5 minutes, and one expression that the alarm watches.
func checkAlarmMetrics(t *testing.T, props any) alarmMath {
	t.Helper()
	a := alarmMath{metrics: map[string]alarmMetric{}, expressions: map[string]string{}}
	fnNames := functionNames()
	for _, q := range branches(get(props, "Metrics")) {
		id, _ := get(q, "Id").(string)
		if !regexp.MustCompile(`^[a-z][A-Za-z0-9_]*$`).MatchString(id) {
			t.Errorf("Id %q", id)
		}
		if _, dup := a.metrics[id]; dup || a.expressions[id] != "" {
			t.Errorf("Id %s is used twice", id)
		}
		if get(q, "ReturnData") == "true" {
			if a.returned != "" {
				t.Errorf("%s and %s both return data; an alarm watches one expression", a.returned, id)
			}
			a.returned = id
		} else if get(q, "ReturnData") != "false" {
			t.Errorf("%s: ReturnData = %v, want true or false", id, get(q, "ReturnData"))
		}
		if e, ok := get(q, "Expression").(string); ok {
			a.expressions[id] = e
			continue
		}
		ms := get(q, "MetricStat")
		s := series{Dims: map[string]string{}}
		s.Namespace, _ = get(ms, "Metric", "Namespace").(string)
		s.Name, _ = get(ms, "Metric", "MetricName").(string)
		for _, d := range branches(get(ms, "Metric", "Dimensions")) {
			name, _ := get(d, "Name").(string)
			s.Dims[name], _ = get(d, "Value").(string)
		}
		if get(ms, "Period") != "300" || get(ms, "Stat") != "Sum" {
			t.Errorf("%s: Period %v, Stat %v; want 300, Sum", id, get(ms, "Period"), get(ms, "Stat"))
		}
		if get(q, "ReturnData") != "false" {
			t.Errorf("%s: a metric input returns data", id)
		}
		fn, ok := fnNames[s.Dims["FunctionName"]]
		switch {
		case !ok:
			t.Errorf("%s: FunctionName %q is none of the functions", id, s.Dims["FunctionName"])
		case s.Namespace == "AWS/Lambda":
			if !slices.Contains(lambdaMetrics, s.Name) || dimSet(s.Dims) != "FunctionName" {
				t.Errorf("%s: AWS/Lambda metric %s with dimensions %v", id, s.Name, s.Dims)
			}
		default:
			if !slices.Contains(emfMetrics[dimSet(s.Dims)], s.Name) {
				t.Errorf("%s: the functions write no metric %s with dimensions %v", id, s.Name, s.Dims)
			}
		}
		a.metrics[id] = alarmMetric{series: s, fn: fn}
	}
	if a.returned == "" || a.expressions[a.returned] == "" {
		t.Fatalf("the alarm watches %q, want one of its expressions", a.returned)
	}
	if n := len(a.metrics); n > 10 {
		t.Errorf("%d metrics; a metric math alarm reads at most 10", n)
	}
	return a
}

// eval evaluates the alarm's expression on a five-minute sample, where
// values["Metric Function"] is a function's value. It returns the value the
// alarm sees and the metrics it read.
func (a alarmMath) eval(values map[string]float64) (*float64, map[string]bool, error) {
	refs := map[string]bool{}
	var env func(id string) (*float64, error)
	env = func(id string) (*float64, error) {
		if e, ok := a.expressions[id]; ok {
			return evalMath(e, env)
		}
		m, ok := a.metrics[id]
		if !ok {
			return nil, fmt.Errorf("no metric or expression %s", id)
		}
		refs[id] = true
		if v, ok := values[m.Name+" "+m.fn]; ok {
			return &v, nil
		}
		return nil, nil
	}
	v, err := evalMath(a.expressions[a.returned], env)
	return v, refs, err
}

// evalMath evaluates a CloudWatch metric math expression at one point in
// time, with the few functions the template uses: arithmetic, comparison,
// IF, FILL and SUM over a list. nil is a missing value: arithmetic on it is
// missing, FILL replaces it, and SUM leaves it out (SUM of nothing is
// missing). env gives the value of an id.
func evalMath(expr string, env func(id string) (*float64, error)) (*float64, error) {
	toks := mathToken.FindAllString(expr, -1)
	if strings.Join(toks, "") != strings.Join(strings.Fields(expr), "") {
		return nil, fmt.Errorf("cannot read %q", expr)
	}
	p := &mathParser{toks: toks, env: env}
	v, err := p.expr()
	if err == nil && p.pos < len(p.toks) {
		err = fmt.Errorf("unexpected %q", p.toks[p.pos])
	}
	return v, err
}

var (
	mathToken = regexp.MustCompile(`[0-9]+(?:\.[0-9]+)?|[A-Za-z_][A-Za-z0-9_]*|[><]=?|[-+*/(),\[\]]`)
	mathIdent = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)
)

type mathParser struct {
	toks []string
	pos  int
	env  func(id string) (*float64, error)
}

func (p *mathParser) peek() string {
	if p.pos < len(p.toks) {
		return p.toks[p.pos]
	}
	return ""
}

func (p *mathParser) next() string { s := p.peek(); p.pos++; return s }

func (p *mathParser) expect(tok string) error {
	if got := p.next(); got != tok {
		return fmt.Errorf("got %q, want %q", got, tok)
	}
	return nil
}

// binary applies op to a and b, which are missing if either is.
func binary(a, b *float64, op func(x, y float64) float64) *float64 {
	if a == nil || b == nil {
		return nil
	}
	v := op(*a, *b)
	if math.IsInf(v, 0) || math.IsNaN(v) {
		return nil
	}
	return &v
}

func boolValue(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

func (p *mathParser) expr() (*float64, error) {
	a, err := p.sum()
	if err != nil {
		return nil, err
	}
	op := p.peek()
	cmps := map[string]func(x, y float64) float64{
		">":  func(x, y float64) float64 { return boolValue(x > y) },
		">=": func(x, y float64) float64 { return boolValue(x >= y) },
		"<":  func(x, y float64) float64 { return boolValue(x < y) },
		"<=": func(x, y float64) float64 { return boolValue(x <= y) },
	}
	f, ok := cmps[op]
	if !ok {
		return a, nil
	}
	p.next()
	b, err := p.sum()
	return binary(a, b, f), err
}

func (p *mathParser) sum() (*float64, error) {
	a, err := p.product()
	for err == nil && (p.peek() == "+" || p.peek() == "-") {
		op := p.next()
		var b *float64
		b, err = p.product()
		a = binary(a, b, func(x, y float64) float64 {
			if op == "-" {
				return x - y
			}
			return x + y
		})
	}
	return a, err
}

func (p *mathParser) product() (*float64, error) {
	a, err := p.operand()
	for err == nil && (p.peek() == "*" || p.peek() == "/") {
		op := p.next()
		var b *float64
		b, err = p.operand()
		a = binary(a, b, func(x, y float64) float64 {
			if op == "/" {
				return x / y
			}
			return x * y
		})
	}
	return a, err
}

func (p *mathParser) operand() (*float64, error) {
	tok := p.next()
	switch {
	case tok == "(":
		v, err := p.expr()
		if err != nil {
			return nil, err
		}
		return v, p.expect(")")
	case tok != "" && tok[0] >= '0' && tok[0] <= '9':
		v, err := strconv.ParseFloat(tok, 64)
		return &v, err
	case mathIdent.MatchString(tok) && p.peek() == "(":
		p.next()
		return p.call(tok)
	case mathIdent.MatchString(tok):
		return p.env(tok)
	}
	return nil, fmt.Errorf("unexpected %q", tok)
}

// call evaluates a function's arguments, after its opening parenthesis.
func (p *mathParser) call(name string) (*float64, error) {
	var args []*float64
	list := name == "SUM"
	if list {
		if err := p.expect("["); err != nil {
			return nil, err
		}
	}
	for {
		v, err := p.expr()
		if err != nil {
			return nil, err
		}
		args = append(args, v)
		if p.peek() != "," {
			break
		}
		p.next()
	}
	if list {
		if err := p.expect("]"); err != nil {
			return nil, err
		}
	}
	if err := p.expect(")"); err != nil {
		return nil, err
	}
	switch {
	case name == "SUM":
		var total *float64
		for _, a := range args {
			if a != nil {
				t := *a
				if total != nil {
					t += *total
				}
				total = &t
			}
		}
		return total, nil
	case name == "FILL" && len(args) == 2:
		if args[0] == nil {
			return args[1], nil
		}
		return args[0], nil
	case name == "IF" && len(args) == 3:
		switch {
		case args[0] == nil:
			return nil, nil
		case *args[0] != 0:
			return args[1], nil
		}
		return args[2], nil
	}
	return nil, fmt.Errorf("%s with %d arguments is not a function these tests know", name, len(args))
}

// TestDashboardReadsTheDocsMetrics ties emfMetrics, which the dashboard
// and the alarms are checked against, to the table of metrics of
// docs/observability.md, which internal/telemetry's TestDocsListTheMetrics
// ties to the lines the functions write.
func TestDashboardReadsTheDocsMetrics(t *testing.T) {
	section, err := testkit.DocSection("docs/observability.md", "## Metrics")
	if err != nil {
		t.Fatal(err)
	}
	got := map[string][]string{}
	for line := range strings.Lines(section) {
		cells := strings.Split(line, "|")
		if len(cells) < 5 || !strings.HasPrefix(strings.TrimSpace(cells[1]), "`") {
			continue
		}
		dims := strings.Split(strings.ReplaceAll(strings.Trim(strings.TrimSpace(cells[3]), "`"), " ", ""), ",")
		slices.Sort(dims)
		set := strings.Join(dims, ",")
		got[set] = append(got[set], strings.Trim(strings.TrimSpace(cells[1]), "`"))
	}
	want := map[string][]string{}
	for set, names := range emfMetrics {
		want[set] = slices.Sorted(slices.Values(names))
	}
	for set := range got {
		slices.Sort(got[set])
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("metrics by dimension set: emfMetrics (-) and docs/observability.md (+):\n%s", diff)
	}
}

// TestLogLevelKeepsTheMetrics checks that no log level the template allows
// makes Lambda drop the metrics lines, which carry no level and count as
// INFO: the functions log JSON, which Lambda filters.
func TestLogLevelKeepsTheMetrics(t *testing.T) {
	p := loadTemplate(t).Parameters["LogLevel"]
	if len(p.AllowedValues) == 0 {
		t.Fatal("LogLevel allows any value")
	}
	for _, v := range p.AllowedValues {
		env := map[string]string{"AWS_LAMBDA_LOG_FORMAT": "JSON", "AWS_LAMBDA_LOG_LEVEL": v}
		if telemetry.MetricsDropped(func(k string) string { return env[k] }) {
			t.Errorf("LogLevel=%s drops the metrics", v)
		}
	}
}
