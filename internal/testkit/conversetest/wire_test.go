package conversetest_test

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/lambda-agent/lambda-agent/internal/testkit/conversetest"
)

// wireAnswer is what a raw HTTP call returned.
type wireAnswer struct {
	status    int
	errorType string
	body      map[string]any
}

// post sends body to path on srv without the SDK, for requests the SDK
// cannot build.
func post(t *testing.T, srv *conversetest.Server, method, path, body string) wireAnswer {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), method, srv.URL+path, strings.NewReader(body))
	if err != nil {
		t.Fatalf("new request: %v", err)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("read body: %v", err)
	}
	if got, want := resp.Header.Get("Content-Type"), "application/json"; got != want {
		t.Errorf("Content-Type = %q, want %q", got, want)
	}
	if resp.Header.Get("X-Amzn-Requestid") == "" {
		t.Error("X-Amzn-Requestid header is missing")
	}
	a := wireAnswer{status: resp.StatusCode, errorType: resp.Header.Get("X-Amzn-ErrorType")}
	if err := json.Unmarshal(data, &a.body); err != nil {
		t.Fatalf("body %s is not a JSON object: %v", data, err)
	}
	return a
}

const converseUser = `{"role":"user","content":[{"text":"hi"}]}`

func TestWireRejects(t *testing.T) {
	tool := `{"toolSpec":{"name":"get_weather","inputSchema":{"json":{"type":"object"}}}}`
	tests := []struct {
		name string
		path string
		body string
		want string
	}{
		{
			name: "block with no member",
			body: `{"messages":[{"role":"user","content":[{}]}]}`,
			want: "messages[0].content[0]: content block must have exactly one member set, got none",
		},
		{
			name: "block with two members",
			body: `{"messages":[{"role":"user","content":[{"text":"a","image":{"format":"png","source":{"bytes":"cG5n"}}}]}]}`,
			want: "messages[0].content[0]: content block must have exactly one member set, got text, image",
		},
		{
			name: "unknown block member",
			body: `{"messages":[{"role":"user","content":[{"text":"a"},{"bogus":{}}]}]}`,
			want: `messages[0].content[1]: unknown content block member "bogus"`,
		},
		{
			name: "empty text",
			body: `{"messages":[{"role":"user","content":[{"text":""}]}]}`,
			want: "messages[0].content[0]: text must not be blank",
		},
		{
			name: "empty text beside another member",
			body: `{"messages":[{"role":"user","content":[{"text":"","cachePoint":{"type":"default"}}]}]}`,
			want: "messages[0].content[0]: content block must have exactly one member set, got cachePoint, text",
		},
		{
			name: "system block with no member",
			body: `{"messages":[` + converseUser + `],"system":[{}]}`,
			want: "system[0]: system block must have exactly one member set, got none",
		},
		{
			name: "empty system text",
			body: `{"messages":[` + converseUser + `],"system":[{"text":""}]}`,
			want: "system[0]: text must not be blank",
		},
		{
			name: "toolResult content with no member",
			body: `{"messages":[{"role":"user","content":[{"text":"a"}]},` +
				`{"role":"assistant","content":[{"toolUse":{"toolUseId":"t1","name":"get_weather","input":{}}}]},` +
				`{"role":"user","content":[{"toolResult":{"toolUseId":"t1","content":[{}]}}]}],` +
				`"toolConfig":{"tools":[` + tool + `]}}`,
			want: "messages[2].content[0].toolResult.content[0]: toolResult content block must have exactly one member set, got none",
		},
		{
			name: "toolUse input missing",
			body: `{"messages":[{"role":"user","content":[{"text":"a"}]},` +
				`{"role":"assistant","content":[{"toolUse":{"toolUseId":"t1","name":"get_weather"}}]},` +
				`{"role":"user","content":[{"toolResult":{"toolUseId":"t1","content":[{"text":"ok"}]}}]}],` +
				`"toolConfig":{"tools":[` + tool + `]}}`,
			want: "messages[1].content[0].toolUse.input: must be a JSON object, got nothing",
		},
		{
			name: "toolChoice with two members",
			body: `{"messages":[` + converseUser + `],"toolConfig":{"tools":[` + tool + `],"toolChoice":{"auto":{},"any":{}}}}`,
			want: "toolConfig.toolChoice: toolChoice must have exactly one member set, got auto, any",
		},
		{
			name: "tool with two members",
			body: `{"messages":[` + converseUser + `],"toolConfig":{"tools":[{"toolSpec":{"name":"a","inputSchema":{"json":{}}},"cachePoint":{"type":"default"}}]}}`,
			want: "toolConfig.tools[0]: tool must have exactly one member set, got toolSpec, cachePoint",
		},
		{
			name: "reasoning in a user message",
			body: `{"messages":[{"role":"user","content":[{"text":"a"},{"reasoningContent":{"reasoningText":{"text":"hm"}}}]}]}`,
			want: "messages[0].content[1]: reasoningContent blocks are only allowed in assistant messages",
		},
		{
			name: "reasoning with two members",
			body: `{"messages":[{"role":"user","content":[{"text":"a"}]},` +
				`{"role":"assistant","content":[{"reasoningContent":{"reasoningText":{"text":"hm"},"redactedContent":"eA=="}},{"text":"b"}]},` +
				`{"role":"user","content":[{"text":"c"}]}]}`,
			want: "messages[1].content[0].reasoningContent: reasoningContent must have exactly one member set, got reasoningText, redactedContent",
		},
		{
			name: "cachePoint type",
			body: `{"messages":[{"role":"user","content":[{"text":"a"},{"cachePoint":{"type":"ephemeral"}}]}]}`,
			want: `messages[0].content[1].cachePoint.type: "ephemeral" is not default`,
		},
		{
			name: "missing modelId",
			path: "/model//converse",
			body: `{"messages":[` + converseUser + `]}`,
			want: "modelId: must not be empty",
		},
		{
			name: "malformed JSON",
			body: `{"messages":[`,
			want: "malformed request body: ",
		},
		{
			name: "messages of the wrong type",
			body: `{"messages":"hi"}`,
			want: "malformed request body: ",
		},
	}
	srv := newServer(t)
	srv.Enqueue(conversetest.Text("unused"))
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := tt.path
			if path == "" {
				path = "/model/" + modelID + "/converse"
			}
			got := post(t, srv, http.MethodPost, path, tt.body)
			if got.status != http.StatusBadRequest || got.errorType != "ValidationException" {
				t.Errorf("status, error type = %d, %q; want 400, ValidationException", got.status, got.errorType)
			}
			msg, _ := got.body["message"].(string)
			if !strings.Contains(msg, tt.want) {
				t.Errorf("message = %q, want it to contain %q", msg, tt.want)
			}
		})
	}
	if got, want := srv.Pending(), 1; got != want {
		t.Errorf("Pending() = %d, want %d: invalid requests must not consume the queue", got, want)
	}
	if got, want := len(srv.Violations()), len(tests); got != want {
		t.Errorf("len(Violations()) = %d, want %d", got, want)
	}
}

// accepted is a request body Bedrock takes, and its name.
type accepted struct{ name, body string }

func TestWireAccepts(t *testing.T) {
	tests := []accepted{
		{"null members are absent", `{"messages":[{"role":"user","content":[{"text":"hi","image":null}]}]}`},
		{"unmodelled Bedrock member", `{"messages":[{"role":"user","content":[{"text":"hi"},{"video":{"format":"mp4","source":{"bytes":"eA=="}}}]}]}`},
		{"loose top-level members", `{"messages":[` + converseUser + `],"outputConfig":{"textFormat":{"type":"json_schema"}},"additionalModelRequestFields":{"k":1},"requestMetadata":{"a":"b"}}`},
		{"guard content and cache points", `{"messages":[{"role":"user","content":[{"guardContent":{"text":{"text":"hi"}}},{"cachePoint":{"type":"default"}}]}],"system":[{"text":"s"},{"cachePoint":{"type":"default"}}]}`},
		{"document with text", `{"messages":[{"role":"user","content":[{"document":{"format":"pdf","name":"Q3 report (final)","source":{"bytes":"JVBERi0xLjc="}}},{"text":"summarise"}]}]}`},
	}
	wantAccepted(t, newServer(t), tests)
}

// wantAccepted posts each body to srv's Converse and wants a 200 for each,
// and no violation.
func wantAccepted(t *testing.T, srv *conversetest.Server, tests []accepted) {
	t.Helper()
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := post(t, srv, http.MethodPost, "/model/"+modelID+"/converse", tt.body)
			if got.status != http.StatusOK {
				t.Errorf("status = %d (%v), want 200", got.status, got.body)
			}
		})
	}
	if got := srv.Violations(); len(got) != 0 {
		t.Errorf("Violations() = %q, want none", got)
	}
}

func TestWireResponseShape(t *testing.T) {
	srv := newServer(t)
	srv.Enqueue(conversetest.Text("hello").WithUsage(3, 4))
	got := post(t, srv, http.MethodPost, "/model/"+modelID+"/converse", `{"messages":[`+converseUser+`]}`)
	if got.status != http.StatusOK || got.errorType != "" {
		t.Fatalf("status, error type = %d, %q; want 200 and none", got.status, got.errorType)
	}
	metrics, _ := got.body["metrics"].(map[string]any)
	if _, ok := metrics["latencyMs"].(float64); !ok {
		t.Errorf("metrics.latencyMs missing in %v", got.body)
	}
	delete(got.body, "metrics")
	want := map[string]any{
		"output": map[string]any{"message": map[string]any{
			"role":    "assistant",
			"content": []any{map[string]any{"text": "hello"}},
		}},
		"stopReason": "end_turn",
		"usage":      map[string]any{"inputTokens": 3.0, "outputTokens": 4.0, "totalTokens": 7.0},
	}
	if diff := cmp.Diff(want, got.body); diff != "" {
		t.Errorf("response body mismatch (-want +got):\n%s", diff)
	}
}

func TestWireModelIDIsUnescaped(t *testing.T) {
	srv := newServer(t)
	got := post(t, srv, http.MethodPost,
		"/model/arn%3Aaws%3Abedrock%3Aus-east-1%3A123456789012%3Ainference-profile%2Fus.amazon.nova-pro-v1%3A0/converse",
		`{"messages":[`+converseUser+`]}`)
	if got.status != http.StatusOK {
		t.Fatalf("status = %d (%v), want 200", got.status, got.body)
	}
	if got, want := srv.Requests()[0].ModelID, "arn:aws:bedrock:us-east-1:123456789012:inference-profile/us.amazon.nova-pro-v1:0"; got != want {
		t.Errorf("ModelID = %q, want %q", got, want)
	}
}

func TestWireUnknownOperations(t *testing.T) {
	tests := []struct {
		name, method, path string
	}{
		{"GET", http.MethodGet, "/model/" + modelID + "/converse"},
		{"invoke", http.MethodPost, "/model/" + modelID + "/invoke"},
		{"root", http.MethodPost, "/"},
	}
	srv := newServer(t)
	srv.Enqueue(conversetest.Text("unused"))
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := post(t, srv, tt.method, tt.path, `{"messages":[`+converseUser+`]}`)
			if got.status != http.StatusNotFound || got.errorType != "UnknownOperationException" {
				t.Errorf("status, error type = %d, %q; want 404, UnknownOperationException", got.status, got.errorType)
			}
		})
	}
	if got := [2]int{srv.Calls(), srv.Pending()}; got != [2]int{0, 1} {
		t.Errorf("Calls, Pending = %v, want [0 1]: unknown operations are neither recorded nor scripted", got)
	}
}
