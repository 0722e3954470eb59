package telemetry_test

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/lambda-agent/lambda-agent/internal/agent"
	"github.com/lambda-agent/lambda-agent/internal/httpapi"
	"github.com/lambda-agent/lambda-agent/internal/telemetry"
	"github.com/lambda-agent/lambda-agent/internal/testkit"
	"github.com/lambda-agent/lambda-agent/internal/testkit/conversetest"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
)

// These tests run the real handler (testkit: app.New's wiring, the real
// agent, the Bedrock client on the strict Converse stand-in, the store on
// an in-process DynamoDB) with OTEL_EXPORTER_OTLP_ENDPOINT pointing at an
// in-test collector, and read what arrives there. They read it as soon as
// the handler returns, without waiting: an invocation's spans are flushed
// before it returns, since Lambda freezes the sandbox right after.

// tracedStack starts the application with its traces going to a
// collector, and env over the defaults.
func tracedStack(t *testing.T, env map[string]string) (*testkit.Stack, *telemetry.Collector) {
	t.Helper()
	c := telemetry.StartCollector(t, telemetry.CollectorOptions{})
	vars := map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": c.URL, "OTEL_SERVICE_NAME": "chat-fn"}
	for k, v := range env {
		vars[k] = v
	}
	return startStack(t, vars), c
}

// startStack starts the application on env, and shuts its tracing down
// when the test ends.
func startStack(t *testing.T, env map[string]string) *testkit.Stack {
	t.Helper()
	s := testkit.Start(t, testkit.Options{Env: env})
	t.Cleanup(func() { _ = s.Tracing.Shutdown(context.Background()) })
	return s
}

// postChat posts body to /chat with ctx and returns the answer. It does
// not fail the test, so that a model's Responder may call it.
func postChat(ctx context.Context, s *testkit.Stack, body string) *httptest.ResponseRecorder {
	r := httptest.NewRequestWithContext(ctx, http.MethodPost, "/chat", strings.NewReader(body))
	r.Header.Set("Content-Type", "application/json")
	return s.Serve(r)
}

// seedSession runs a first turn on session id, so that the turn a test
// traces continues a stored session, and forgets its spans.
func seedSession(t *testing.T, s *testkit.Stack, c *telemetry.Collector, id string) {
	t.Helper()
	if w := postChat(t.Context(), s, `{"session_id":"`+id+`","message":"hello"}`); w.Code != http.StatusOK {
		t.Fatalf("the first turn: %d %s", w.Code, w.Body)
	}
	c.Reset()
}

// errorCode is the code of an error answer.
func errorCode(t *testing.T, w *httptest.ResponseRecorder) string {
	t.Helper()
	var body struct {
		Error struct{ Code string } `json:"error"`
	}
	if err := json.Unmarshal(w.Body.Bytes(), &body); err != nil {
		t.Fatalf("%d %q: %v", w.Code, w.Body, err)
	}
	return body.Error.Code
}

// traceOf is one invocation's trace: its root span and the spans under it.
type traceOf struct {
	root     telemetry.Span
	children map[string][]telemetry.Span // by parent span id, in start order
	byID     map[string]telemetry.Span
	all      []telemetry.Span
}

// traces groups spans into the traces of their invocations, in the order
// their roots arrived. It fails t unless each trace has exactly one root,
// the invoke_agent span or a route's, whose parent is outside the trace.
func traces(t *testing.T, spans []telemetry.Span) []*traceOf {
	t.Helper()
	byTrace := map[string]*traceOf{}
	var order []string
	ids := map[string]bool{}
	for _, s := range spans {
		ids[hex.EncodeToString(s.SpanId)] = true
	}
	for _, s := range spans {
		tid := hex.EncodeToString(s.TraceId)
		tr, ok := byTrace[tid]
		if !ok {
			tr = &traceOf{children: map[string][]telemetry.Span{}, byID: map[string]telemetry.Span{}}
			byTrace[tid] = tr
			order = append(order, tid)
		}
		tr.all = append(tr.all, s)
		tr.byID[hex.EncodeToString(s.SpanId)] = s
		if parent := hex.EncodeToString(s.ParentSpanId); ids[parent] {
			tr.children[parent] = append(tr.children[parent], s)
		} else if tr.root.Span != nil {
			t.Fatalf("trace %s has two roots: %q and %q", tid, tr.root.Name, s.Name)
		} else {
			tr.root = s
		}
	}
	var out []*traceOf
	for _, tid := range order {
		tr := byTrace[tid]
		if tr.root.Span == nil {
			t.Fatalf("trace %s has no root", tid)
		}
		for _, kids := range tr.children {
			slices.SortStableFunc(kids, func(a, b telemetry.Span) int {
				return cmpUint(a.StartTimeUnixNano, b.StartTimeUnixNano)
			})
		}
		out = append(out, tr)
	}
	return out
}

func cmpUint(a, b uint64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// oneTrace is the only trace among spans.
func oneTrace(t *testing.T, spans []telemetry.Span) *traceOf {
	t.Helper()
	trs := traces(t, spans)
	if len(trs) != 1 {
		var names []string
		for _, s := range spans {
			names = append(names, s.Name)
		}
		t.Fatalf("%d traces, want 1: spans %q", len(trs), names)
	}
	return trs[0]
}

// node is a span in a tree drawn for comparison: its name and kind, and
// the spans under it in the order they started.
type node struct {
	Name, Kind string
	Children   []node
}

// tree draws tr.
func (tr *traceOf) tree() node {
	var draw func(telemetry.Span) node
	draw = func(s telemetry.Span) node {
		n := node{Name: s.Name, Kind: strings.TrimPrefix(s.Kind.String(), "SPAN_KIND_")}
		for _, c := range tr.children[hex.EncodeToString(s.SpanId)] {
			n.Children = append(n.Children, draw(c))
		}
		return n
	}
	return draw(tr.root)
}

// named returns the spans of tr called name, in the order they started.
func (tr *traceOf) named(name string) []telemetry.Span {
	var out []telemetry.Span
	for _, s := range tr.all {
		if s.Name == name {
			out = append(out, s)
		}
	}
	slices.SortStableFunc(out, func(a, b telemetry.Span) int { return cmpUint(a.StartTimeUnixNano, b.StartTimeUnixNano) })
	return out
}

// one returns the one span of tr called name.
func (tr *traceOf) one(t *testing.T, name string) telemetry.Span {
	t.Helper()
	spans := tr.named(name)
	if len(spans) != 1 {
		t.Fatalf("%d spans %q, want 1; the trace: %+v", len(spans), name, tr.tree())
	}
	return spans[0]
}

// attrs are a span's attributes as Go values: string, bool, int64,
// float64, or []any of them.
func attrs(kvs []*commonpb.KeyValue) map[string]any {
	out := map[string]any{}
	for _, kv := range kvs {
		out[kv.Key] = goValue(kv.Value)
	}
	return out
}

func goValue(v *commonpb.AnyValue) any {
	switch x := v.GetValue().(type) {
	case *commonpb.AnyValue_StringValue:
		return x.StringValue
	case *commonpb.AnyValue_BoolValue:
		return x.BoolValue
	case *commonpb.AnyValue_IntValue:
		return x.IntValue
	case *commonpb.AnyValue_DoubleValue:
		return x.DoubleValue
	case *commonpb.AnyValue_ArrayValue:
		out := []any{}
		for _, e := range x.ArrayValue.GetValues() {
			out = append(out, goValue(e))
		}
		return out
	default:
		return v.String()
	}
}

// subset returns the attributes of got that want names, for comparing
// only those.
func subset(got, want map[string]any) map[string]any {
	out := map[string]any{}
	for k := range want {
		if v, ok := got[k]; ok {
			out[k] = v
		}
	}
	return out
}

// contentKeys are the attributes that record what users and tools wrote,
// which only CaptureContent turns on.
var contentKeys = []string{"gen_ai.input.messages", "gen_ai.output.messages", "gen_ai.system_instructions", "gen_ai.tool.call.arguments", "gen_ai.tool.call.result"}

// checkWithin fails t unless inner ran within outer, by their timestamps.
func checkWithin(t *testing.T, inner, outer telemetry.Span) {
	t.Helper()
	if inner.StartTimeUnixNano < outer.StartTimeUnixNano || inner.EndTimeUnixNano > outer.EndTimeUnixNano || inner.StartTimeUnixNano > inner.EndTimeUnixNano {
		t.Errorf("span %q [%d, %d] is not within %q [%d, %d]", inner.Name, inner.StartTimeUnixNano, inner.EndTimeUnixNano, outer.Name, outer.StartTimeUnixNano, outer.EndTimeUnixNano)
	}
}

// checkStatus fails t unless s has status code and, for an error, the
// error.type errType.
func checkStatus(t *testing.T, s telemetry.Span, code tracepb.Status_StatusCode, errType string) {
	t.Helper()
	if got := s.GetStatus().GetCode(); got != code {
		t.Errorf("span %q: status %v, want %v", s.Name, got, code)
	}
	got, _ := attrs(s.Attributes)["error.type"].(string)
	if got != errType {
		t.Errorf("span %q: error.type %q, want %q", s.Name, got, errType)
	}
}

// storeAttrs are the attributes of a store span on session id.
func storeAttrs(id string) map[string]any {
	return map[string]any{
		"db.system.name":           "aws.dynamodb",
		"aws.dynamodb.table_names": []any{testkit.Table},
		"gen_ai.conversation.id":   id,
	}
}

// TestTraceOfAPlainTurn checks the trace of a turn without tools against
// the GenAI conventions: its tree, every attribute of every span, the
// resource and scope, and that it arrived before the handler returned.
func TestTraceOfAPlainTurn(t *testing.T) {
	s, c := tracedStack(t, map[string]string{"AWS_LAMBDA_FUNCTION_NAME": "chat-fn-lambda", "AWS_REGION": "eu-west-1"})
	seedSession(t, s, c, "plain-1")
	s.Model.Enqueue(conversetest.Text("Hello there").WithCacheUsage(10, 20, 30, 5))

	w := postChat(t.Context(), s, `{"session_id":"plain-1","message":"hi again"}`)
	if w.Code != http.StatusOK {
		t.Fatalf("%d %s", w.Code, w.Body)
	}
	// No waiting: the flush happened before the handler returned.
	tr := oneTrace(t, c.Spans())

	want := node{Name: "invoke_agent chat-fn", Kind: "INTERNAL", Children: []node{
		{Name: "session.load", Kind: "CLIENT"},
		{Name: "chat test-model", Kind: "CLIENT"},
		{Name: "session.commit", Kind: "CLIENT"},
	}}
	if diff := cmp.Diff(want, tr.tree()); diff != "" {
		t.Fatalf("span tree (-want +got):\n%s", diff)
	}
	if len(tr.root.ParentSpanId) != 0 {
		t.Errorf("the root has a parent, %x, with no X-Ray header", tr.root.ParentSpanId)
	}

	// Bedrock's inputTokens are the uncached rest; the conventions' input
	// tokens count the cached ones too: 10 + 20 + 30.
	usage := map[string]any{
		"gen_ai.usage.input_tokens":                int64(60),
		"gen_ai.usage.output_tokens":               int64(5),
		"gen_ai.usage.cache_read.input_tokens":     int64(20),
		"gen_ai.usage.cache_creation.input_tokens": int64(30),
		"gen_ai.response.finish_reasons":           []any{"end_turn"},
	}
	wantAttrs := map[string]map[string]any{
		"invoke_agent chat-fn": {
			"gen_ai.operation.name":     "invoke_agent",
			"gen_ai.provider.name":      "aws.bedrock",
			"gen_ai.agent.name":         "chat-fn",
			"gen_ai.conversation.id":    "plain-1",
			"http.request.method":       "POST",
			"http.route":                httpapi.RouteChat,
			"http.response.status_code": int64(200),
		},
		"chat test-model": {
			"gen_ai.operation.name": "chat",
			"gen_ai.provider.name":  "aws.bedrock",
			"gen_ai.request.model":  "test-model",
		},
		"session.load":   storeAttrs("plain-1"),
		"session.commit": storeAttrs("plain-1"),
	}
	for k, v := range usage {
		wantAttrs["invoke_agent chat-fn"][k] = v
		wantAttrs["chat test-model"][k] = v
	}
	wantAttrs["session.commit"]["lambda_agent.messages"] = int64(2) // the turn's, not the session's
	for _, sp := range tr.all {
		if diff := cmp.Diff(wantAttrs[sp.Name], attrs(sp.Attributes)); diff != "" {
			t.Errorf("attributes of %q (-want +got):\n%s", sp.Name, diff)
		}
		checkStatus(t, sp, tracepb.Status_STATUS_CODE_UNSET, "")
		if sp != tr.root {
			checkWithin(t, sp, tr.root)
		}
		if !slices.Equal(sp.TraceId, tr.root.TraceId) {
			t.Errorf("span %q is in trace %x, the root in %x", sp.Name, sp.TraceId, tr.root.TraceId)
		}
	}

	res := attrs(tr.root.Resource.GetAttributes())
	for k, v := range map[string]any{
		"service.name":           "chat-fn",
		"telemetry.sdk.language": "go",
		"cloud.provider":         "aws",
		"cloud.platform":         "aws_lambda",
		"cloud.region":           "eu-west-1",
		"faas.name":              "chat-fn-lambda",
	} {
		if res[k] != v {
			t.Errorf("resource %s = %v, want %v", k, res[k], v)
		}
	}
	if got, want := tr.root.Scope.GetName(), "github.com/lambda-agent/lambda-agent"; got != want {
		t.Errorf("scope %q, want %q", got, want)
	}
	if got, want := tr.root.ScopeSchemaURL, "https://opentelemetry.io/schemas/"+telemetry.SemconvVersion; got != want {
		t.Errorf("scope schema URL %q, want %q", got, want)
	}
}

// TestTraceOfAToolTurn checks a turn in which the model calls a tool: a
// chat span for each model call, and between them an execute_tool span
// that names the tool and the call, placed in time where the tool ran.
func TestTraceOfAToolTurn(t *testing.T) {
	s, c := tracedStack(t, map[string]string{"TOOLS": "calculator"})
	s.Model.Enqueue(
		conversetest.ToolUse("calc-1", "calculator", map[string]any{"expression": "6*7"}),
		conversetest.Text("42"),
	)
	w := postChat(t.Context(), s, `{"session_id":"tool-1","message":"what is 6*7?"}`)
	if w.Code != http.StatusOK {
		t.Fatalf("%d %s", w.Code, w.Body)
	}
	tr := oneTrace(t, c.Spans())
	want := node{Name: "invoke_agent chat-fn", Kind: "INTERNAL", Children: []node{
		{Name: "session.load", Kind: "CLIENT"},
		{Name: "chat test-model", Kind: "CLIENT"},
		{Name: "execute_tool calculator", Kind: "INTERNAL"},
		{Name: "chat test-model", Kind: "CLIENT"},
		{Name: "session.commit", Kind: "CLIENT"},
	}}
	if diff := cmp.Diff(want, tr.tree()); diff != "" {
		t.Fatalf("span tree (-want +got):\n%s", diff)
	}

	tool := tr.one(t, "execute_tool calculator")
	wantTool := map[string]any{
		"gen_ai.operation.name": "execute_tool",
		"gen_ai.tool.name":      "calculator",
		"gen_ai.tool.call.id":   "calc-1",
		"gen_ai.tool.type":      "function",
	}
	if diff := cmp.Diff(wantTool, attrs(tool.Attributes)); diff != "" {
		t.Errorf("attributes of the tool span (-want +got):\n%s", diff)
	}
	checkStatus(t, tool, tracepb.Status_STATUS_CODE_UNSET, "")
	checkWithin(t, tool, tr.root)
	chats := tr.named("chat test-model")
	if chats[0].EndTimeUnixNano > tool.StartTimeUnixNano || tool.EndTimeUnixNano > chats[1].StartTimeUnixNano {
		t.Errorf("the tool ran [%d, %d], not between the model calls (the first ended %d, the second started %d)",
			tool.StartTimeUnixNano, tool.EndTimeUnixNano, chats[0].EndTimeUnixNano, chats[1].StartTimeUnixNano)
	}
	for i, reason := range []string{"tool_use", "end_turn"} {
		if got := attrs(chats[i].Attributes)["gen_ai.response.finish_reasons"]; !cmp.Equal(got, []any{reason}) {
			t.Errorf("model call %d: finish reasons %v, want [%s]", i+1, got, reason)
		}
	}
	root := attrs(tr.root.Attributes)
	var sum int64
	for _, ch := range chats {
		sum += attrs(ch.Attributes)["gen_ai.usage.output_tokens"].(int64)
	}
	if root["gen_ai.usage.output_tokens"] != sum || sum == 0 {
		t.Errorf("the turn's output tokens %v are not the sum of its calls', %d", root["gen_ai.usage.output_tokens"], sum)
	}
}

// TestTraceOfAFailedToolRun checks that a tool run that fails is an
// execute_tool span with status Error and error.type tool_error, while the
// turn, which gives the error to the model, succeeds.
func TestTraceOfAFailedToolRun(t *testing.T) {
	s, c := tracedStack(t, map[string]string{"TOOLS": "calculator"})
	s.Model.Enqueue(
		conversetest.ToolUse("calc-0", "calculator", map[string]any{"expression": "1/0"}),
		conversetest.Text("It cannot be done."),
	)
	if w := postChat(t.Context(), s, `{"session_id":"tool-2","message":"what is 1/0?"}`); w.Code != http.StatusOK {
		t.Fatalf("%d %s", w.Code, w.Body)
	}
	tr := oneTrace(t, c.Spans())
	tool := tr.one(t, "execute_tool calculator")
	checkStatus(t, tool, tracepb.Status_STATUS_CODE_ERROR, "tool_error")
	// The tool's error is content, which is recorded only on request.
	if msg := tool.GetStatus().GetMessage(); msg != "tool_error" {
		t.Errorf("status message %q, want tool_error", msg)
	}
	checkStatus(t, tr.root, tracepb.Status_STATUS_CODE_UNSET, "")
}

// TestTraceOfAFailedModelCall checks the traces of model calls that fail:
// every attempt is a chat span, a failed one with status Error and the
// service's error code as error.type, and a turn that fails has the error
// code of its answer on its root.
func TestTraceOfAFailedModelCall(t *testing.T) {
	throttles := make([]conversetest.Reply, agent.DefaultMaxAttempts)
	for i := range throttles {
		throttles[i] = conversetest.Throttle()
	}
	tests := []struct {
		name    string
		replies []conversetest.Reply
		// wantStatus and wantCode are the answer's; wantCalls are the
		// error.type of each chat span, "" for a success.
		wantStatus int
		wantCode   string
		wantCalls  []string
	}{
		{
			name:       "denied, not retried",
			replies:    []conversetest.Reply{conversetest.AccessDenied()},
			wantStatus: http.StatusInternalServerError, wantCode: "misconfigured",
			wantCalls: []string{conversetest.CodeAccessDenied},
		},
		{
			name:       "throttled, then answered",
			replies:    []conversetest.Reply{conversetest.Throttle(), conversetest.Text("at last")},
			wantStatus: http.StatusOK,
			wantCalls:  []string{conversetest.CodeThrottling, ""},
		},
		{
			name:       "throttled on every attempt",
			replies:    throttles,
			wantStatus: http.StatusTooManyRequests, wantCode: "throttled",
			wantCalls: slices.Repeat([]string{conversetest.CodeThrottling}, agent.DefaultMaxAttempts),
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, c := tracedStack(t, nil)
			s.Model.Enqueue(tt.replies...)
			w := postChat(t.Context(), s, `{"session_id":"fail-1","message":"hi"}`)
			if w.Code != tt.wantStatus {
				t.Fatalf("%d %s, want %d", w.Code, w.Body, tt.wantStatus)
			}
			tr := oneTrace(t, c.Spans())

			want := node{Name: "invoke_agent chat-fn", Kind: "INTERNAL", Children: []node{{Name: "session.load", Kind: "CLIENT"}}}
			for range tt.wantCalls {
				want.Children = append(want.Children, node{Name: "chat test-model", Kind: "CLIENT"})
			}
			if tt.wantCode == "" {
				want.Children = append(want.Children, node{Name: "session.commit", Kind: "CLIENT"})
			}
			if diff := cmp.Diff(want, tr.tree()); diff != "" {
				t.Fatalf("span tree (-want +got):\n%s", diff)
			}
			for i, call := range tr.named("chat test-model") {
				if tt.wantCalls[i] == "" {
					checkStatus(t, call, tracepb.Status_STATUS_CODE_UNSET, "")
					continue
				}
				checkStatus(t, call, tracepb.Status_STATUS_CODE_ERROR, tt.wantCalls[i])
				if a := attrs(call.Attributes); a["gen_ai.usage.output_tokens"] != nil {
					t.Errorf("failed call %d has usage: %v", i+1, a)
				}
			}
			if tt.wantCode == "" {
				checkStatus(t, tr.root, tracepb.Status_STATUS_CODE_UNSET, "")
			} else {
				if got := errorCode(t, w); got != tt.wantCode {
					t.Fatalf("error code %q, want %q", got, tt.wantCode)
				}
				checkStatus(t, tr.root, tracepb.Status_STATUS_CODE_ERROR, tt.wantCode)
			}
			if got := attrs(tr.root.Attributes)["http.response.status_code"]; got != int64(tt.wantStatus) {
				t.Errorf("http.response.status_code %v, want %d", got, tt.wantStatus)
			}
		})
	}
}

// TestTraceOfAConflict checks the trace of a turn that loses a race: while
// its model call runs, another turn on the same session commits, so its
// own commit fails. Its session.commit span and its root say conflict;
// the winner's trace is whole and clean.
func TestTraceOfAConflict(t *testing.T) {
	s, c := tracedStack(t, nil)
	seedSession(t, s, c, "race-1")
	var winner *httptest.ResponseRecorder
	s.Model.Responder = func(r *conversetest.Request) conversetest.Reply {
		if r.Messages[len(r.Messages)-1].Text() == "loser" {
			// The loser has loaded the session; the winner commits first.
			winner = postChat(context.Background(), s, `{"session_id":"race-1","message":"winner"}`)
		}
		return conversetest.EchoResponder(r)
	}
	loser := postChat(t.Context(), s, `{"session_id":"race-1","message":"loser"}`)
	if winner == nil || winner.Code != http.StatusOK {
		t.Fatalf("the winner did not win: %v", winner)
	}
	if loser.Code != http.StatusConflict || errorCode(t, loser) != "conflict" {
		t.Fatalf("the loser: %d %s, want 409 conflict", loser.Code, loser.Body)
	}

	trs := traces(t, c.Spans())
	if len(trs) != 2 {
		t.Fatalf("%d traces, want the winner's and the loser's", len(trs))
	}
	byStatus := map[int64]*traceOf{}
	for _, tr := range trs {
		byStatus[attrs(tr.root.Attributes)["http.response.status_code"].(int64)] = tr
	}
	lost, won := byStatus[http.StatusConflict], byStatus[http.StatusOK]
	if lost == nil || won == nil {
		t.Fatalf("traces by status: %v", byStatus)
	}
	want := node{Name: "invoke_agent chat-fn", Kind: "INTERNAL", Children: []node{
		{Name: "session.load", Kind: "CLIENT"},
		{Name: "chat test-model", Kind: "CLIENT"},
		{Name: "session.commit", Kind: "CLIENT"},
	}}
	for name, tr := range map[string]*traceOf{"loser": lost, "winner": won} {
		if diff := cmp.Diff(want, tr.tree()); diff != "" {
			t.Errorf("the %s's span tree (-want +got):\n%s", name, diff)
		}
	}
	checkStatus(t, lost.root, tracepb.Status_STATUS_CODE_ERROR, "conflict")
	checkStatus(t, lost.one(t, "session.commit"), tracepb.Status_STATUS_CODE_ERROR, "conflict")
	checkStatus(t, lost.one(t, "session.load"), tracepb.Status_STATUS_CODE_UNSET, "")
	checkStatus(t, won.root, tracepb.Status_STATUS_CODE_UNSET, "")
	checkStatus(t, won.one(t, "session.commit"), tracepb.Status_STATUS_CODE_UNSET, "")
	if got := attrs(lost.root.Attributes)["gen_ai.conversation.id"]; got != "race-1" {
		t.Errorf("the loser's conversation id %v", got)
	}
}

// TestTraceRecordsContentOnlyWhenAsked checks the switch for message
// content, which can hold anything a user wrote: off, no span holds any;
// on, the chat spans hold the conversation and the tool span the call's
// arguments and result, each as valid JSON in the conventions' form.
func TestTraceRecordsContentOnlyWhenAsked(t *testing.T) {
	for _, capture := range []bool{false, true} {
		t.Run(map[bool]string{false: "off", true: "on"}[capture], func(t *testing.T) {
			env := map[string]string{"TOOLS": "calculator", "SYSTEM_PROMPT": "You are terse."}
			if capture {
				env["OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT"] = "true"
			}
			s, c := tracedStack(t, env)
			s.Model.Enqueue(
				conversetest.Text("Let me compute.").WithToolUse("calc-1", "calculator", map[string]any{"expression": "6*7"}),
				conversetest.Text("It is 42."),
			)
			if w := postChat(t.Context(), s, `{"session_id":"content-1","message":"what is 6*7?"}`); w.Code != http.StatusOK {
				t.Fatalf("%d %s", w.Code, w.Body)
			}
			tr := oneTrace(t, c.Spans())
			if !capture {
				for _, sp := range tr.all {
					for _, k := range contentKeys {
						if v, ok := attrs(sp.Attributes)[k]; ok {
							t.Errorf("span %q records %s = %v, with content off", sp.Name, k, v)
						}
					}
				}
				return
			}

			type part struct {
				Type      string          `json:"type"`
				Content   string          `json:"content,omitempty"`
				ID        string          `json:"id,omitempty"`
				Name      string          `json:"name,omitempty"`
				Arguments json.RawMessage `json:"arguments,omitempty"`
				Response  string          `json:"response,omitempty"`
			}
			type message struct {
				Role         string `json:"role"`
				Parts        []part `json:"parts"`
				FinishReason string `json:"finish_reason,omitempty"`
			}
			decode := func(sp telemetry.Span, key string, v any) {
				t.Helper()
				raw, ok := attrs(sp.Attributes)[key].(string)
				if !ok {
					t.Fatalf("span %q has no %s", sp.Name, key)
				}
				if err := json.Unmarshal([]byte(raw), v); err != nil {
					t.Fatalf("span %q: %s is not JSON: %v: %s", sp.Name, key, err, raw)
				}
			}
			chats := tr.named("chat test-model")
			if len(chats) != 2 {
				t.Fatalf("%d chat spans, want 2", len(chats))
			}
			var in, out []message
			decode(chats[0], "gen_ai.input.messages", &in)
			decode(chats[0], "gen_ai.output.messages", &out)
			wantIn := []message{{Role: "user", Parts: []part{{Type: "text", Content: "what is 6*7?"}}}}
			if diff := cmp.Diff(wantIn, in); diff != "" {
				t.Errorf("the first call's input (-want +got):\n%s", diff)
			}
			wantOut := []message{{Role: "assistant", FinishReason: "tool_use", Parts: []part{
				{Type: "text", Content: "Let me compute."},
				{Type: "tool_call", ID: "calc-1", Name: "calculator", Arguments: json.RawMessage(`{"expression":"6*7"}`)},
			}}}
			if diff := cmp.Diff(wantOut, out); diff != "" {
				t.Errorf("the first call's output (-want +got):\n%s", diff)
			}
			var system []part
			decode(chats[0], "gen_ai.system_instructions", &system)
			if diff := cmp.Diff([]part{{Type: "text", Content: "You are terse."}}, system); diff != "" {
				t.Errorf("system instructions (-want +got):\n%s", diff)
			}
			in = nil
			decode(chats[1], "gen_ai.input.messages", &in)
			if len(in) != 3 || in[2].Role != "user" || len(in[2].Parts) != 1 || in[2].Parts[0].Type != "tool_call_response" || in[2].Parts[0].ID != "calc-1" || !strings.Contains(in[2].Parts[0].Response, "42") {
				t.Errorf("the second call's input does not end with the tool's result: %+v", in)
			}

			tool := tr.one(t, "execute_tool calculator")
			var args map[string]any
			decode(tool, "gen_ai.tool.call.arguments", &args)
			if diff := cmp.Diff(map[string]any{"expression": "6*7"}, args); diff != "" {
				t.Errorf("tool arguments (-want +got):\n%s", diff)
			}
			var result []part
			decode(tool, "gen_ai.tool.call.result", &result)
			if len(result) != 1 || !strings.Contains(result[0].Content, "42") {
				t.Errorf("tool result %+v does not hold 42", result)
			}
		})
	}
}

// xrayHeader is the trace header Lambda gives an invocation, which
// aws-lambda-go puts in its context under "x-amzn-trace-id". Sampled=0:
// whether to trace is the OTLP endpoint's decision.
const xrayHeader = "Root=1-5759e988-bd862e3fe1be46a994272793;Parent=53995c3f42cd8ad8;Sampled=0"

// TestTraceContinuesXRayAndNamesTheLogLine checks that an invocation's
// spans continue its X-Ray trace, and that the request's log line names
// the trace it belongs to, traced or not, so a line leads to its trace.
func TestTraceContinuesXRayAndNamesTheLogLine(t *testing.T) {
	tests := []struct {
		name          string
		traced, xray  bool
		sampled       bool   // X-Ray sampled the invocation, and recorded its segment
		wantLogTrace  string // "" for none, "spans" for the spans' trace id
		wantRootTrace string
	}{
		{name: "traced, on Lambda, sampled by X-Ray", traced: true, xray: true, sampled: true, wantLogTrace: "5759e988bd862e3fe1be46a994272793", wantRootTrace: "5759e988bd862e3fe1be46a994272793"},
		{name: "traced, on Lambda", traced: true, xray: true, wantLogTrace: "5759e988bd862e3fe1be46a994272793", wantRootTrace: "5759e988bd862e3fe1be46a994272793"},
		{name: "traced, no X-Ray header", traced: true, wantLogTrace: "spans"},
		{name: "not traced, on Lambda", xray: true, wantLogTrace: "5759e988bd862e3fe1be46a994272793"},
		{name: "not traced, no X-Ray header"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var s *testkit.Stack
			var c *telemetry.Collector
			if tt.traced {
				s, c = tracedStack(t, nil)
			} else {
				s = startStack(t, nil)
			}
			ctx := t.Context()
			if tt.xray {
				header := xrayHeader
				if tt.sampled {
					header = strings.Replace(header, "Sampled=0", "Sampled=1", 1)
				}
				//lint:ignore SA1029 the key aws-lambda-go uses
				ctx = context.WithValue(ctx, "x-amzn-trace-id", header)
			}
			if w := postChat(ctx, s, `{"session_id":"xray-1","message":"hi"}`); w.Code != http.StatusOK {
				t.Fatalf("%d %s", w.Code, w.Body)
			}

			var logTrace string
			lines := 0
			for line := range strings.Lines(s.Logs.String()) {
				var rec map[string]any
				if err := json.Unmarshal([]byte(line), &rec); err != nil {
					t.Fatalf("log line %q: %v", line, err)
				}
				if rec["msg"] == "request" {
					lines++
					logTrace, _ = rec["trace_id"].(string)
				}
			}
			if lines != 1 {
				t.Fatalf("%d request lines in the log:\n%s", lines, s.Logs)
			}
			if !tt.traced {
				if logTrace != tt.wantLogTrace {
					t.Errorf("the log line's trace_id %q, want %q", logTrace, tt.wantLogTrace)
				}
				return
			}

			tr := oneTrace(t, c.Spans())
			spanTrace := hex.EncodeToString(tr.root.TraceId)
			wantLog := tt.wantLogTrace
			if wantLog == "spans" {
				wantLog = spanTrace
			}
			if logTrace != wantLog {
				t.Errorf("the log line's trace_id %q, want %q", logTrace, wantLog)
			}
			if tt.wantRootTrace != "" && spanTrace != tt.wantRootTrace {
				t.Errorf("trace id %s, want the X-Ray trace's %s", spanTrace, tt.wantRootTrace)
			}
			parent := hex.EncodeToString(tr.root.ParentSpanId)
			remote := tr.root.Flags&uint32(tracepb.SpanFlags_SPAN_FLAGS_CONTEXT_IS_REMOTE_MASK) != 0
			// The X-Ray segment is the parent only when X-Ray recorded it.
			if tt.sampled && (parent != "53995c3f42cd8ad8" || !remote) {
				t.Errorf("the root's parent %q (remote %v), want the X-Ray segment 53995c3f42cd8ad8, remote", parent, remote)
			}
			if !tt.sampled && (parent != "" || remote) {
				t.Errorf("the root's parent %q (remote %v), want none", parent, remote)
			}
		})
	}
}

// TestTraceExportFailureDoesNotFailTheRequest checks that a collector that
// never answers, or is not there, costs the request nothing but the flush's
// bounded wait: the answer is 200, the handler returns, and the loss is a
// warning in the log.
func TestTraceExportFailureDoesNotFailTheRequest(t *testing.T) {
	tests := []struct {
		name     string
		endpoint func(t *testing.T) (url string, attempts func() int)
	}{
		{"collector never answers", func(t *testing.T) (string, func() int) {
			c := telemetry.StartCollector(t, telemetry.CollectorOptions{Hang: true})
			return c.URL, c.Attempts
		}},
		{"collector down", func(t *testing.T) (string, func() int) {
			down := httptest.NewServer(http.NotFoundHandler())
			down.Close()
			return down.URL, nil
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			url, attempts := tt.endpoint(t)
			s := startStack(t, map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": url})
			if w := postChat(t.Context(), s, `{"session_id":"lost-1","message":"hi"}`); w.Code != http.StatusOK {
				t.Fatalf("%d %s", w.Code, w.Body)
			}
			if attempts != nil && attempts() == 0 {
				t.Fatal("no export reached the collector")
			}
			var warned []map[string]any
			for line := range strings.Lines(s.Logs.String()) {
				var rec map[string]any
				if err := json.Unmarshal([]byte(line), &rec); err != nil {
					t.Fatalf("log line %q: %v", line, err)
				}
				if rec["msg"] == "traces not exported" {
					warned = append(warned, rec)
				}
			}
			if len(warned) != 1 || warned[0]["level"] != "WARN" || warned[0]["error"] == "" || warned[0]["trace_id"] == nil {
				t.Errorf("want one warning that names the error and the trace, got %v; the log:\n%s", warned, s.Logs)
			}
		})
	}
}

// TestTraceOfASessionRequest checks that a request that runs no turn, a
// GET of a session, is a span named after its route, not an agent's
// invocation.
func TestTraceOfASessionRequest(t *testing.T) {
	s, c := tracedStack(t, nil)
	if w := postChat(t.Context(), s, `{"session_id":"get-1","message":"hi"}`); w.Code != http.StatusOK {
		t.Fatalf("%d %s", w.Code, w.Body)
	}
	c.Reset()
	w := s.Serve(httptest.NewRequestWithContext(t.Context(), http.MethodGet, "/sessions/get-1", nil))
	if w.Code != http.StatusOK {
		t.Fatalf("GET: %d %s", w.Code, w.Body)
	}
	tr := oneTrace(t, c.Spans())
	if tr.root.Name != httpapi.RouteGetSession || tr.root.Kind != tracepb.Span_SPAN_KIND_INTERNAL {
		t.Errorf("the GET's span is %q, %v; want %q, INTERNAL", tr.root.Name, tr.root.Kind, httpapi.RouteGetSession)
	}
	got := attrs(tr.root.Attributes)
	for _, k := range []string{"gen_ai.operation.name", "gen_ai.provider.name", "gen_ai.agent.name", "gen_ai.usage.input_tokens"} {
		if v, ok := got[k]; ok {
			t.Errorf("the GET's span has %s = %v", k, v)
		}
	}
	wantAttrs := map[string]any{"http.route": httpapi.RouteGetSession, "http.response.status_code": int64(200), "gen_ai.conversation.id": "get-1"}
	if diff := cmp.Diff(wantAttrs, subset(got, wantAttrs)); diff != "" {
		t.Errorf("attributes of the GET's span (-want +got):\n%s", diff)
	}
	// The session routes' store requests are spans too.
	if diff := cmp.Diff(node{Name: httpapi.RouteGetSession, Kind: "INTERNAL", Children: []node{{Name: "session.transcript", Kind: "CLIENT"}}}, tr.tree()); diff != "" {
		t.Errorf("the GET's span tree (-want +got):\n%s", diff)
	}
	c.Reset()
	if w := s.Serve(httptest.NewRequestWithContext(t.Context(), http.MethodDelete, "/sessions/get-1", nil)); w.Code != http.StatusNoContent {
		t.Fatalf("DELETE: %d %s", w.Code, w.Body)
	}
	tr = oneTrace(t, c.Spans())
	if diff := cmp.Diff(node{Name: httpapi.RouteDeleteSession, Kind: "INTERNAL", Children: []node{{Name: "session.delete", Kind: "CLIENT"}}}, tr.tree()); diff != "" {
		t.Errorf("the DELETE's span tree (-want +got):\n%s", diff)
	}
}

// TestTraceOfANewSession checks that the load of a session that does not
// exist yet, which is how every conversation starts, is not a failed span.
func TestTraceOfANewSession(t *testing.T) {
	s, c := tracedStack(t, nil)
	if w := postChat(t.Context(), s, `{"session_id":"brand-new","message":"hi"}`); w.Code != http.StatusOK {
		t.Fatalf("%d %s", w.Code, w.Body)
	}
	load := oneTrace(t, c.Spans()).one(t, "session.load")
	checkStatus(t, load, tracepb.Status_STATUS_CODE_UNSET, "")
	if got := attrs(load.Attributes)["lambda_agent.session.new"]; got != true {
		t.Errorf("lambda_agent.session.new = %v, want true", got)
	}
}

// TestTraceOfADelegatingTurn pins what docs/subagents.md and
// docs/observability.md say of traces: each delegation's execute_tool span
// holds an invoke_agent span of the sub-agent, named after it, under which
// are the sub-agent's model calls, its tool runs and its own delegations
// (here the researcher's to the analyst, two deep); each invoke_agent
// span's usage is the sum of the chat spans under it, and the root's
// counts every agent's calls.
func TestTraceOfADelegatingTurn(t *testing.T) {
	s, c := tracedStack(t, map[string]string{
		"TOOLS": "calculator",
		"AGENTS": `[{"name":"researcher","description":"Researches.","system_prompt":"You research.","tools":["analyst"]},
			{"name":"analyst","description":"Computes.","system_prompt":"You compute.","tools":["calculator"]}]`,
	})
	s.Model.Enqueue(
		conversetest.ToolUse("d-1", "researcher", map[string]any{"task": "Find it."}).WithCacheUsage(10, 1, 2, 3),
		conversetest.ToolUse("d-2", "analyst", map[string]any{"task": "Compute 6*7."}).WithCacheUsage(20, 2, 4, 5), // the researcher's
		conversetest.ToolUse("c-1", "calculator", map[string]any{"expression": "6*7"}).WithCacheUsage(30, 3, 6, 7), // the analyst's
		conversetest.Text("42.").WithCacheUsage(40, 4, 8, 11),
		conversetest.Text("Found 42.").WithCacheUsage(50, 5, 10, 13),
		conversetest.Text("The researcher found 42.").WithCacheUsage(60, 6, 12, 17),
	)
	w := postChat(t.Context(), s, `{"session_id":"deleg-1","message":"ask the researcher"}`)
	if w.Code != http.StatusOK {
		t.Fatalf("%d %s", w.Code, w.Body)
	}
	tr := oneTrace(t, c.Spans())
	chat := node{Name: "chat test-model", Kind: "CLIENT"}
	want := node{Name: "invoke_agent chat-fn", Kind: "INTERNAL", Children: []node{
		{Name: "session.load", Kind: "CLIENT"},
		chat,
		{Name: "execute_tool researcher", Kind: "INTERNAL", Children: []node{
			{Name: "invoke_agent researcher", Kind: "INTERNAL", Children: []node{
				chat,
				{Name: "execute_tool analyst", Kind: "INTERNAL", Children: []node{
					{Name: "invoke_agent analyst", Kind: "INTERNAL", Children: []node{
						chat,
						{Name: "execute_tool calculator", Kind: "INTERNAL"},
						chat,
					}},
				}},
				chat,
			}},
		}},
		chat,
		{Name: "session.commit", Kind: "CLIENT"},
	}}
	if diff := cmp.Diff(want, tr.tree()); diff != "" {
		t.Fatalf("span tree (-want +got):\n%s", diff)
	}
	for _, sp := range tr.all {
		if parent, ok := tr.byID[hex.EncodeToString(sp.ParentSpanId)]; ok {
			checkWithin(t, sp, parent)
		}
	}

	// The delegation's tool span is as any tool's.
	wantTool := map[string]any{
		"gen_ai.operation.name": "execute_tool",
		"gen_ai.tool.name":      "researcher",
		"gen_ai.tool.call.id":   "d-1",
		"gen_ai.tool.type":      "function",
	}
	if diff := cmp.Diff(wantTool, attrs(tr.one(t, "execute_tool researcher").Attributes)); diff != "" {
		t.Errorf("attributes of the delegation's tool span (-want +got):\n%s", diff)
	}
	// The analyst's calls: 30+3+6 and 40+4+8 input tokens, 7 and 11 output.
	analyst := tr.one(t, "invoke_agent analyst")
	wantAgent := map[string]any{
		"gen_ai.operation.name":                    "invoke_agent",
		"gen_ai.provider.name":                     "aws.bedrock",
		"gen_ai.agent.name":                        "analyst",
		"gen_ai.agent.description":                 "Computes.",
		"gen_ai.request.model":                     "test-model",
		"gen_ai.response.finish_reasons":           []any{"end_turn"},
		"gen_ai.usage.input_tokens":                int64(91),
		"gen_ai.usage.output_tokens":               int64(18),
		"gen_ai.usage.cache_read.input_tokens":     int64(7),
		"gen_ai.usage.cache_creation.input_tokens": int64(14),
	}
	if diff := cmp.Diff(wantAgent, attrs(analyst.Attributes)); diff != "" {
		t.Errorf("attributes of the analyst's span (-want +got):\n%s", diff)
	}
	for _, sp := range tr.all {
		checkStatus(t, sp, tracepb.Status_STATUS_CODE_UNSET, "")
	}
	checkUsageOfChats(t, tr, analyst, 2)
	checkUsageOfChats(t, tr, tr.one(t, "invoke_agent researcher"), 4) // the analyst's too
	checkUsageOfChats(t, tr, tr.root, 6)
}

// TestTraceOfParallelDelegations checks the spans of tools that run at
// once, in one answer: two delegations and a tool. Each call has its own
// execute_tool span under the root, each sub-agent's invoke_agent span is
// under its own delegation's, while they overlap, and each sub-agent's
// model calls and tool run are under its invoke_agent span.
func TestTraceOfParallelDelegations(t *testing.T) {
	s, c := tracedStack(t, map[string]string{
		"TOOLS": "calculator",
		"AGENTS": `[{"name":"researcher","description":"Researches.","system_prompt":"You research.","tools":["calculator"]},
			{"name":"editor","description":"Edits.","system_prompt":"You edit.","tools":["calculator"]}]`,
	})
	// Each sub-agent's first answer waits, so that the delegations run at
	// once.
	const wait = 50 * time.Millisecond
	s.Model.Responder = func(r *conversetest.Request) conversetest.Reply {
		first := len(r.Messages) == 1
		switch sys := systemOf(r); {
		case sys == "You research." && first:
			return conversetest.ToolUse("r-1", "calculator", map[string]any{"expression": "2+2"}).WithCacheUsage(20, 2, 4, 5).WithDelay(wait)
		case sys == "You research.":
			return conversetest.Text("Researched.").WithCacheUsage(21, 3, 5, 6)
		case sys == "You edit." && first:
			return conversetest.ToolUse("e-1", "calculator", map[string]any{"expression": "3+3"}).WithCacheUsage(30, 4, 6, 7).WithDelay(wait)
		case sys == "You edit.":
			return conversetest.Text("Edited.").WithCacheUsage(31, 5, 7, 8)
		case first:
			return conversetest.ToolUse("p-1", "researcher", map[string]any{"task": "Research."}).
				WithToolUse("p-2", "editor", map[string]any{"task": "Edit."}).
				WithToolUse("p-3", "calculator", map[string]any{"expression": "1+1"})
		default:
			return conversetest.Text("Done.")
		}
	}
	if w := postChat(t.Context(), s, `{"session_id":"deleg-par","message":"do both"}`); w.Code != http.StatusOK {
		t.Fatalf("%d %s", w.Code, w.Body)
	}
	tr := oneTrace(t, c.Spans())
	// Siblings that ran at once start in any order: the tree is compared
	// with each span's children sorted by name.
	subAgent := func(name string) node {
		return node{Name: "execute_tool " + name, Kind: "INTERNAL", Children: []node{
			{Name: "invoke_agent " + name, Kind: "INTERNAL", Children: []node{
				{Name: "chat test-model", Kind: "CLIENT"},
				{Name: "chat test-model", Kind: "CLIENT"},
				{Name: "execute_tool calculator", Kind: "INTERNAL"},
			}},
		}}
	}
	want := node{Name: "invoke_agent chat-fn", Kind: "INTERNAL", Children: []node{
		{Name: "chat test-model", Kind: "CLIENT"},
		{Name: "chat test-model", Kind: "CLIENT"},
		{Name: "execute_tool calculator", Kind: "INTERNAL"},
		subAgent("editor"),
		subAgent("researcher"),
		{Name: "session.commit", Kind: "CLIENT"},
		{Name: "session.load", Kind: "CLIENT"},
	}}
	if diff := cmp.Diff(want, byName(tr.tree())); diff != "" {
		t.Fatalf("span tree, children by name (-want +got):\n%s", diff)
	}
	// Each calculator span is of the call its own agent made.
	for _, tt := range []struct{ parent, call string }{
		{tr.root.Name, "p-3"},
		{"invoke_agent researcher", "r-1"},
		{"invoke_agent editor", "e-1"},
	} {
		parent := tr.root
		if tt.parent != tr.root.Name {
			parent = tr.one(t, tt.parent)
		}
		var calls []any
		for _, sp := range tr.children[hex.EncodeToString(parent.SpanId)] {
			if sp.Name == "execute_tool calculator" {
				calls = append(calls, attrs(sp.Attributes)["gen_ai.tool.call.id"])
			}
		}
		if diff := cmp.Diff([]any{tt.call}, calls); diff != "" {
			t.Errorf("the calculator calls under %q (-want +got):\n%s", tt.parent, diff)
		}
	}
	researcher, editor := tr.one(t, "invoke_agent researcher"), tr.one(t, "invoke_agent editor")
	if max(researcher.StartTimeUnixNano, editor.StartTimeUnixNano) >= min(researcher.EndTimeUnixNano, editor.EndTimeUnixNano) {
		t.Errorf("the delegations did not run at once: [%d, %d] and [%d, %d]",
			researcher.StartTimeUnixNano, researcher.EndTimeUnixNano, editor.StartTimeUnixNano, editor.EndTimeUnixNano)
	}
	for _, sp := range []telemetry.Span{researcher, editor} {
		checkUsageOfChats(t, tr, sp, 2)
	}
	checkUsageOfChats(t, tr, tr.root, 6)
}

// TestTraceOfAFailedDelegation checks that a sub-agent that fails, here
// by running out of model calls, is an invoke_agent span with status Error
// and error.type agent_error, within its delegation's execute_tool span,
// which fails as any tool's does, while the turn goes on and succeeds.
func TestTraceOfAFailedDelegation(t *testing.T) {
	s, c := tracedStack(t, map[string]string{
		"TOOLS":  "calculator",
		"AGENTS": `[{"name":"researcher","description":"Researches.","system_prompt":"You research.","tools":["calculator"],"max_cycles":1}]`,
	})
	s.Model.Enqueue(
		conversetest.ToolUse("d-1", "researcher", map[string]any{"task": "Find it."}),
		conversetest.ToolUse("c-1", "calculator", map[string]any{"expression": "6*7"}).WithCacheUsage(20, 2, 4, 5), // its one call
		conversetest.Text("The researcher could not."),
	)
	if w := postChat(t.Context(), s, `{"session_id":"deleg-fail","message":"ask the researcher"}`); w.Code != http.StatusOK {
		t.Fatalf("%d %s", w.Code, w.Body)
	}
	tr := oneTrace(t, c.Spans())
	tool, sub := tr.one(t, "execute_tool researcher"), tr.one(t, "invoke_agent researcher")
	if !slices.Equal(sub.ParentSpanId, tool.SpanId) {
		t.Fatalf("the sub-agent's span is not under its delegation's: %+v", tr.tree())
	}
	checkStatus(t, tool, tracepb.Status_STATUS_CODE_ERROR, "tool_error")
	checkStatus(t, sub, tracepb.Status_STATUS_CODE_ERROR, "agent_error")
	if msg := sub.GetStatus().GetMessage(); msg != "agent_error" {
		t.Errorf("status message %q, want agent_error: the result's text is content", msg)
	}
	checkUsageOfChats(t, tr, sub, 1)
	checkStatus(t, tr.root, tracepb.Status_STATUS_CODE_UNSET, "")
}

// usageKeys are the usage attributes of a chat or invoke_agent span.
var usageKeys = []string{"gen_ai.usage.input_tokens", "gen_ai.usage.output_tokens", "gen_ai.usage.cache_read.input_tokens", "gen_ai.usage.cache_creation.input_tokens"}

// checkUsageOfChats fails t unless the usage of span is the sum of that of
// the chats chat spans under it, at any depth.
func checkUsageOfChats(t *testing.T, tr *traceOf, span telemetry.Span, chats int) {
	t.Helper()
	sum := map[string]any{}
	n := 0
	var walk func(telemetry.Span)
	walk = func(s telemetry.Span) {
		for _, ch := range tr.children[hex.EncodeToString(s.SpanId)] {
			if strings.HasPrefix(ch.Name, "chat ") {
				n++
				got := attrs(ch.Attributes)
				for _, k := range usageKeys {
					v, _ := sum[k].(int64)
					sum[k] = v + got[k].(int64)
				}
			}
			walk(ch)
		}
	}
	walk(span)
	if n != chats {
		t.Errorf("%d chat spans under %q, want %d", n, span.Name, chats)
	}
	if sum["gen_ai.usage.output_tokens"] == int64(0) {
		t.Errorf("the chat spans under %q have no usage: the test proves nothing", span.Name)
	}
	got := attrs(span.Attributes)
	if diff := cmp.Diff(sum, subset(got, sum)); diff != "" {
		t.Errorf("the usage of %q is not the sum of the chat spans under it (-sum +got):\n%s", span.Name, diff)
	}
}

// byName is n with every span's children sorted by name, for spans that
// ran at once.
func byName(n node) node {
	kids := make([]node, len(n.Children))
	for i, k := range n.Children {
		kids[i] = byName(k)
	}
	slices.SortStableFunc(kids, func(a, b node) int { return strings.Compare(a.Name, b.Name) })
	if len(kids) == 0 {
		kids = nil
	}
	n.Children = kids
	return n
}

// systemOf is the system prompt of a request, which tells the agents
// apart on one stand-in.
func systemOf(r *conversetest.Request) string {
	var parts []string
	for _, b := range r.System {
		parts = append(parts, b.Text)
	}
	return strings.Join(parts, "")
}

// TestTraceOfAPausedDelegation: a delegation whose sub-agent waits for a
// person ends its spans when the turn pauses: its execute_tool span, not
// an error, with the sub-agent's invoke_agent span and its chat under it.
func TestTraceOfAPausedDelegation(t *testing.T) {
	s, c := tracedStack(t, map[string]string{
		"TOOLS":  "ask_user",
		"AGENTS": `[{"name":"researcher","description":"Researches.","system_prompt":"You research.","tools":["ask_user"]}]`,
	})
	s.Model.Enqueue(
		conversetest.ToolUse("d-1", "researcher", map[string]any{"task": "Find it."}),
		conversetest.ToolUse("q-1", "ask_user", map[string]any{"question": "Which?"}),
	)
	w := postChat(t.Context(), s, `{"session_id":"deleg-paused","message":"ask the researcher"}`)
	if w.Code != http.StatusOK || !strings.Contains(w.Body.String(), `"stop_reason":"interrupt"`) {
		t.Fatalf("%d %s", w.Code, w.Body)
	}
	tr := oneTrace(t, c.Spans())
	tool, sub := tr.one(t, "execute_tool researcher"), tr.one(t, "invoke_agent researcher")
	if !slices.Equal(sub.ParentSpanId, tool.SpanId) {
		t.Fatalf("the sub-agent's span is not under its delegation's: %+v", tr.tree())
	}
	checkStatus(t, tool, tracepb.Status_STATUS_CODE_UNSET, "")
	checkUsageOfChats(t, tr, sub, 1)

	// The resume runs the delegation again, in its two steps, each in an
	// execute_tool span with the sub-agent's invoke_agent span under it;
	// the sub-agent's model call is the second's.
	c.Reset()
	s.Model.Enqueue(conversetest.Text("It is teal."), conversetest.Text("The researcher says teal."))
	w = postChat(t.Context(), s, `{"session_id":"deleg-paused","responses":[{"interrupt_id":"q-1","answer":"teal"}]}`)
	if w.Code != http.StatusOK || !strings.Contains(w.Body.String(), "The researcher says teal.") {
		t.Fatalf("the resume: %d %s", w.Code, w.Body)
	}
	tr = oneTrace(t, c.Spans())
	tools, subs := tr.named("execute_tool researcher"), tr.named("invoke_agent researcher")
	if len(tools) != 2 || len(subs) != 2 {
		t.Fatalf("the resume's spans: %+v", tr.tree())
	}
	for i := range tools {
		if !slices.Equal(subs[i].ParentSpanId, tools[i].SpanId) {
			t.Errorf("step %d: the sub-agent's span is not under its delegation's", i+1)
		}
	}
	checkUsageOfChats(t, tr, subs[0], 0)
	checkUsageOfChats(t, tr, subs[1], 1)
}
