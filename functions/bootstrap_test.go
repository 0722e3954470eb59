// Package functions_test builds the Lambda functions as real bootstrap
// binaries and invokes them with every sample event, the way sam local
// invoke does, without Docker: through a Lambda Runtime API emulator, with
// the SDK's endpoints pointed at in-test servers.
package functions_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/lambda-agent/lambda-agent/internal/devrun/offline"
	"github.com/lambda-agent/lambda-agent/internal/testkit"
	"github.com/lambda-agent/lambda-agent/internal/testkit/runtimetest"
)

// build compiles each function once per test binary.
var build = sync.OnceValues(func() (map[string]string, error) {
	dir, err := os.MkdirTemp("", "functions-*")
	if err != nil {
		return nil, err
	}
	bins := map[string]string{}
	for _, name := range []string{"chat", "structured", "stream"} {
		out := filepath.Join(dir, name)
		if err := os.MkdirAll(out, 0o755); err != nil {
			return nil, err
		}
		bin, err := runtimetest.Build(context.Background(), "./"+name, out)
		if err != nil {
			return nil, err
		}
		bins[name] = bin
	}
	return bins, nil
})

// deployment is the functions running against in-test DynamoDB and
// Bedrock, reached only through the SDK's standard endpoint variables.
type deployment struct {
	fns map[string]*runtimetest.Function
}

// logs returns what the functions logged.
func (d *deployment) logs() string {
	return d.fns["chat"].Logs() + d.fns["structured"].Logs() + d.fns["stream"].Logs()
}

// deploy runs the functions on the offline model and a DynamoDB with the
// session table, with extraEnv over their usual settings.
func deploy(t *testing.T, extraEnv ...string) *deployment {
	t.Helper()
	return deployOn(t, testkit.StartBackends(t, testkit.BackendOptions{Model: offline.NewServer}), extraEnv...)
}

// deployOn runs the functions on backends.
func deployOn(t *testing.T, backends *testkit.Backends, extraEnv ...string) *deployment {
	t.Helper()
	bins, err := build()
	if err != nil {
		t.Fatal(err)
	}
	env := slices.Concat(backends.Env, []string{
		"MODEL_ID=us.anthropic.claude-sonnet-4-5-20250929-v1:0",
		"AWS_LAMBDA_LOG_FORMAT=JSON",
	}, extraEnv)
	d := &deployment{fns: map[string]*runtimetest.Function{}}
	for name, bin := range bins {
		fn, err := runtimetest.Start(t.Context(), bin, runtimetest.Config{Name: name, Env: env})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = fn.Close() })
		d.fns[name] = fn
	}
	return d
}

// invoke sends an event file to a function and decodes its HTTP response.
func (d *deployment) invoke(t *testing.T, fn, eventFile string) (events.APIGatewayV2HTTPResponse, map[string]any) {
	t.Helper()
	event, err := os.ReadFile(filepath.Join("..", "events", eventFile))
	if err != nil {
		t.Fatal(err)
	}
	out, err := d.fns[fn].Invoke(t.Context(), event, 30*time.Second)
	if err != nil {
		t.Fatalf("%s with %s: %v\nlogs:\n%s", fn, eventFile, err, d.fns[fn].Logs())
	}
	var resp events.APIGatewayV2HTTPResponse
	if err := json.Unmarshal(out, &resp); err != nil {
		t.Fatalf("%s: not an HTTP API response: %s", eventFile, out)
	}
	var body map[string]any
	if resp.Body != "" {
		if err := json.Unmarshal([]byte(resp.Body), &body); err != nil {
			t.Fatalf("%s: body is not JSON: %q", eventFile, resp.Body)
		}
	}
	return resp, body
}

func TestEveryEventThroughTheBuiltFunctions(t *testing.T) {
	d := deploy(t)
	steps := []struct {
		fn, event string
		status    int
		check     func(body map[string]any) bool
	}{
		{"chat", "chat-new.json", 200, func(b map[string]any) bool {
			return strings.HasPrefix(b["session_id"].(string), "s-") && strings.Contains(b["text"].(string), "Hello! What can you do?")
		}},
		{"chat", "chat-continue.json", 200, func(b map[string]any) bool {
			return b["session_id"] == "demo-session" && strings.Contains(b["text"].(string), "seen 1 message in this conversation")
		}},
		{"chat", "chat-tool.json", 200, func(b map[string]any) bool {
			return strings.Contains(b["text"].(string), "25*48 = 1200") && b["metrics"].(map[string]any)["tool_calls"] == 1.0
		}},
		{"chat", "chat-jwt.json", 200, func(b map[string]any) bool {
			return b["session_id"] == "jwt-session" && len(b["messages"].([]any)) == 4 // remember tool round trip
		}},
		{"structured", "structured.json", 200, func(b map[string]any) bool {
			data, _ := b["data"].(map[string]any)
			return data["name"] != nil && data["born"] != nil && b["attempts"] == 1.0
		}},
		{"chat", "tool-call.json", 200, func(b map[string]any) bool {
			content, _ := b["content"].([]any)
			return b["session_id"] == "demo-session" && b["recorded"] == true && len(content) == 1 &&
				content[0].(map[string]any)["json"].(map[string]any)["result"] == 437.0
		}},
		{"chat", "sessions-list.json", 200, func(b map[string]any) bool {
			ids := map[string]bool{}
			for _, s := range b["sessions"].([]any) {
				ids[s.(map[string]any)["session_id"].(string)] = true
			}
			return ids["demo-session"] && !ids["jwt-session"] // the JWT's is its subject's
		}},
		{"chat", "session-get.json", 200, func(b map[string]any) bool {
			return b["session_id"] == "demo-session" && len(b["messages"].([]any)) == 6 // a turn and a direct call
		}},
		{"chat", "session-rewind.json", 200, func(b map[string]any) bool {
			return b["message_count"] == 2.0 && b["discarded"] == 4.0 // the direct call's four
		}},
		{"chat", "session-get.json", 200, func(b map[string]any) bool {
			return len(b["messages"].([]any)) == 2
		}},
		{"chat", "session-delete.json", 204, func(b map[string]any) bool { return b == nil }},
		{"chat", "session-get.json", 404, func(b map[string]any) bool {
			return b["error"].(map[string]any)["code"] == "not_found"
		}},
	}
	for _, s := range steps {
		resp, body := d.invoke(t, s.fn, s.event)
		if resp.StatusCode != s.status || !s.check(body) {
			t.Errorf("%s → %d %s; want %d", s.event, resp.StatusCode, resp.Body, s.status)
		}
	}
	// The JWT event's session belongs to its subject, not to anonymous.
	resp, _ := d.invoke(t, "chat", "chat-continue.json")
	if resp.StatusCode != 200 {
		t.Errorf("continue again: %d", resp.StatusCode)
	}
	// One JSON log line per request, with Lambda's request id. The lines
	// travel through the processes' stdout pipes, so they may trail the
	// responses by a moment.
	want := len(steps) + 1
	var lines []string
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		lines = requestLines(d.logs())
		if len(lines) >= want || time.Now().After(deadline) {
			break
		}
	}
	if len(lines) != want {
		t.Errorf("%d request log lines for %d invocations:\n%s", len(lines), want, d.logs())
	}
	for _, l := range lines {
		var rec map[string]any
		_ = json.Unmarshal([]byte(l), &rec)
		if rec["requestId"] == "" || rec["route"] == nil || rec["status"] == nil || rec["duration_ms"] == nil || rec["level"] == nil {
			t.Errorf("log line lacks fields: %s", l)
		}
		// Lambda gives every invocation an X-Ray trace id, which the line
		// carries in the W3C form.
		if id, _ := rec["trace_id"].(string); len(id) != 32 {
			t.Errorf("log line has no trace id: %s", l)
		}
	}
	// And a metrics line per request, with the function's name, on the same
	// stdout. The tool runs of chat-tool.json (calculator), chat-jwt.json
	// (remember) and tool-call.json (calculator) add a line each.
	emf := metricLines(d.logs())
	if len(emf) != want+3 {
		t.Errorf("%d metrics lines for %d invocations and 3 tool runs:\n%s", len(emf), want, strings.Join(emf, "\n"))
	}
	byFunction := map[string]int{}
	for _, l := range emf {
		var rec map[string]any
		_ = json.Unmarshal([]byte(l), &rec)
		if rec["Model"] == nil || rec["requestId"] == nil {
			t.Errorf("metrics line lacks fields: %s", l)
		}
		if rec["ToolName"] == nil {
			byFunction[rec["FunctionName"].(string)]++
		}
	}
	if byFunction["chat"] != want-1 || byFunction["structured"] != 1 {
		t.Errorf("request metrics lines by function: %v", byFunction)
	}
}

// metricLines returns the lines in CloudWatch's Embedded Metric Format.
func metricLines(logs string) []string {
	var out []string
	for _, l := range strings.Split(logs, "\n") {
		var rec map[string]any
		if json.Unmarshal([]byte(l), &rec) == nil && rec["_aws"] != nil {
			out = append(out, l)
		}
	}
	return out
}

// requestLines returns the JSON log lines that report a request.
func requestLines(logs string) []string {
	var out []string
	for _, l := range strings.Split(logs, "\n") {
		var rec map[string]any
		if json.Unmarshal([]byte(l), &rec) == nil && rec["message"] == "request" {
			out = append(out, l)
		}
	}
	return out
}

func TestBadConfigurationFailsAtInit(t *testing.T) {
	bins, err := build()
	if err != nil {
		t.Fatal(err)
	}
	fn, err := runtimetest.Start(t.Context(), bins["chat"], runtimetest.Config{Env: []string{"AWS_REGION=us-east-1", "CONVERSATION_MANAGER=fancy"}})
	if err != nil {
		t.Fatal(err)
	}
	defer fn.Close()
	_, err = fn.Invoke(t.Context(), []byte(`{}`), 5*time.Second)
	var exit *runtimetest.ExitError
	if !errors.As(err, &exit) {
		t.Fatalf("err = %v, want the process to exit at init", err)
	}
	for _, want := range []string{"TABLE_NAME is required", "MODEL_ID is required", "CONVERSATION_MANAGER=", "fancy"} {
		if !strings.Contains(fn.Logs(), want) {
			t.Errorf("init failure does not say %s:\n%s", want, fn.Logs())
		}
	}
}

// TestStreamEventThroughTheBuiltFunction invokes the stream function with
// its function URL event and with a REST API's event, the two it is invoked
// with; one handler tells them apart. The runtime streams each answer to
// the emulator as Lambda's HTTP integration response: a JSON prelude,
// eight NUL bytes, then the body, here Server-Sent Events.
func TestStreamEventThroughTheBuiltFunction(t *testing.T) {
	d := deploy(t)
	for _, tt := range []struct{ file, session string }{
		{"stream-chat.json", "stream-session"},
		{"stream-chat-rest.json", "rest-session"},
	} {
		event, err := os.ReadFile(filepath.Join("..", "events", tt.file))
		if err != nil {
			t.Fatal(err)
		}
		out, err := d.fns["stream"].Invoke(t.Context(), event, 30*time.Second)
		if err != nil {
			t.Fatalf("%s: %v\nlogs:\n%s", tt.file, err, d.fns["stream"].Logs())
		}
		preludeJSON, body, ok := bytes.Cut(out, make([]byte, 8))
		if !ok {
			t.Fatalf("%s: no prelude separator in %q", tt.file, out)
		}
		var prelude struct {
			StatusCode int               `json:"statusCode"`
			Headers    map[string]string `json:"headers"`
		}
		if err := json.Unmarshal(preludeJSON, &prelude); err != nil || prelude.StatusCode != 200 || prelude.Headers["Content-Type"] != "text/event-stream" {
			t.Fatalf("%s: prelude %s (%v)", tt.file, preludeJSON, err)
		}
		var names []string
		var done map[string]any
		for _, block := range strings.Split(strings.TrimSpace(string(body)), "\n\n") {
			name, data, _ := strings.Cut(block, "\n")
			name = strings.TrimPrefix(name, "event: ")
			if len(names) == 0 || name != "text" || names[len(names)-1] != "text" {
				names = append(names, name)
			}
			if name == "done" {
				_ = json.Unmarshal([]byte(strings.TrimPrefix(data, "data: ")), &done)
			}
		}
		if got, want := strings.Join(names, " "), "start text tool_use tool_result text done"; got != want {
			t.Errorf("%s: events %s, want %s\n%s\nlogs:\n%s", tt.file, got, want, body, d.fns["stream"].Logs())
		}
		if done["session_id"] != tt.session || !strings.Contains(done["text"].(string), "1200") {
			t.Errorf("%s: done %v", tt.file, done)
		}
	}
	// Anything else fails the invocation, rather than be served as one of
	// them.
	_, err := d.fns["stream"].Invoke(t.Context(), []byte(`{"hello":"world"}`), 30*time.Second)
	var ierr *runtimetest.InvokeError
	if !errors.As(err, &ierr) || !strings.Contains(ierr.Message, "neither a function URL's") {
		t.Errorf("an event of neither kind: %v", err)
	}
}

// TestHostilePathsThroughTheBuiltFunctions invokes the built chat and
// stream functions with sample events whose path parameters or raw paths
// would move them to another route if pasted or cleaned: each gets its 400
// or 404 with an error body, never a redirect or a failed invocation.
func TestHostilePathsThroughTheBuiltFunctions(t *testing.T) {
	d := deploy(t)
	apiEvent := func(file string, change func(*events.APIGatewayV2HTTPRequest)) []byte {
		t.Helper()
		ev, err := testkit.Event(file)
		if err != nil {
			t.Fatal(err)
		}
		change(&ev)
		raw, err := json.Marshal(ev)
		if err != nil {
			t.Fatal(err)
		}
		return raw
	}
	urlEvent := func(method, path string) []byte {
		t.Helper()
		var ev events.LambdaFunctionURLRequest
		readJSON(t, filepath.Join("..", "events", "stream-chat.json"), &ev)
		ev.RawPath, ev.RequestContext.HTTP.Method, ev.RequestContext.HTTP.Path = path, method, path
		raw, err := json.Marshal(ev)
		if err != nil {
			t.Fatal(err)
		}
		return raw
	}
	restEvent := func(param string) []byte {
		t.Helper()
		ev, err := testkit.ProxyEvent("session-get-rest.json")
		if err != nil {
			t.Fatal(err)
		}
		ev.PathParameters["sessionId"] = param
		raw, err := json.Marshal(ev)
		if err != nil {
			t.Fatal(err)
		}
		return raw
	}
	tests := []struct {
		name, fn string
		event    []byte
		status   int
		code     string
	}{
		{"the REST API with GET /sessions/{sessionId} of ..", "stream", restEvent(".."), 400, "invalid_session_id"},
		{"the REST API with a session id of rest-session%2Fexport", "stream", restEvent("rest-session%2Fexport"), 400, "invalid_session_id"},
		{"the REST API with a session id of ../../chat", "stream", restEvent("../../chat"), 400, "invalid_session_id"},
		{"a tool named ..", "chat", apiEvent("tool-call.json", func(e *events.APIGatewayV2HTTPRequest) { e.PathParameters["name"] = ".." }), 404, "unknown_tool"},
		{"a tool named calc/../../x", "chat", apiEvent("tool-call.json", func(e *events.APIGatewayV2HTTPRequest) { e.PathParameters["name"] = "calc/../../x" }), 404, "unknown_tool"},
		{"a session id of <id>/export", "chat", apiEvent("session-get.json", func(e *events.APIGatewayV2HTTPRequest) { e.PathParameters["sessionId"] = "demo-session/export" }), 400, "invalid_session_id"},
		{"a DELETE of <id>/tools/calculator", "chat", apiEvent("session-delete.json", func(e *events.APIGatewayV2HTTPRequest) {
			e.PathParameters["sessionId"] = "demo-session/tools/calculator"
		}), 400, "invalid_session_id"},
		{"the $default route with /sessions/../etc", "chat", apiEvent("session-get.json", func(e *events.APIGatewayV2HTTPRequest) {
			e.RouteKey, e.RawPath, e.PathParameters = "$default", "/sessions/../etc", nil
		}), 400, "invalid_path"},
		{"the URL with GET /sessions/../etc", "stream", urlEvent("GET", "/sessions/../etc"), 400, "invalid_path"},
		{"the URL with POST /sessions/../chat", "stream", urlEvent("POST", "/sessions/../chat"), 400, "invalid_path"},
		{"the URL with GET /sessions/demo-session%2Fexport", "stream", urlEvent("GET", "/sessions/demo-session%2Fexport"), 400, "invalid_session_id"},
		{"the URL with GET /sessions/100%", "stream", urlEvent("GET", "/sessions/100%"), 400, "invalid_session_id"},
	}
	for _, tt := range tests {
		out, err := d.fns[tt.fn].Invoke(t.Context(), tt.event, 30*time.Second)
		if err != nil {
			t.Errorf("%s: the invocation failed: %v", tt.name, err)
			continue
		}
		var resp struct {
			StatusCode int               `json:"statusCode"`
			Headers    map[string]string `json:"headers"`
			Body       string            `json:"body"`
		}
		body := out
		if tt.fn == "stream" { // a prelude, eight NUL bytes, then the body
			var ok bool
			if out, body, ok = bytes.Cut(out, make([]byte, 8)); !ok {
				t.Errorf("%s: no prelude in %q", tt.name, out)
				continue
			}
		}
		if err := json.Unmarshal(out, &resp); err != nil {
			t.Errorf("%s: not an HTTP response: %q", tt.name, out)
			continue
		}
		if tt.fn == "chat" {
			body = []byte(resp.Body)
		}
		var e struct {
			Error struct{ Code, Message string }
		}
		_ = json.Unmarshal(body, &e)
		if resp.StatusCode != tt.status || e.Error.Code != tt.code || e.Error.Message == "" {
			t.Errorf("%s: %d %s %s; want %d %s", tt.name, resp.StatusCode, resp.Headers["Location"], body, tt.status, tt.code)
		}
	}
}
