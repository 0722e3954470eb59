package conversetest_test

import (
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/lambda-agent/lambda-agent/internal/testkit/conversetest"
)

// goRequest builds a valid request in Go, the way other packages' tests
// may call Validate without going through HTTP.
func goRequest() *conversetest.Request {
	return &conversetest.Request{
		ModelID: modelID,
		Messages: []conversetest.Message{
			{Role: "user", Content: []conversetest.ContentBlock{{Text: "weather?"}}},
			{Role: "assistant", Content: []conversetest.ContentBlock{{ToolUse: &conversetest.ToolUseBlock{
				ToolUseID: "t1", Name: "get_weather", Input: json.RawMessage(`{"city":"Oslo"}`),
			}}}},
			{Role: "user", Content: []conversetest.ContentBlock{{ToolResult: &conversetest.ToolResultBlock{
				ToolUseID: "t1", Status: "success", Content: []conversetest.ToolResultContent{{Text: "sunny"}},
			}}}},
		},
		ToolConfig: &conversetest.ToolConfig{Tools: []conversetest.Tool{{ToolSpec: &conversetest.ToolSpec{
			Name: "get_weather", InputSchema: conversetest.ToolInputSchema{JSON: json.RawMessage(`{"type":"object"}`)},
		}}}},
	}
}

func TestValidate(t *testing.T) {
	tests := []struct {
		name   string
		modify func(r *conversetest.Request)
		want   string // empty: valid
	}{
		{name: "valid", modify: func(*conversetest.Request) {}},
		{
			name:   "missing modelId",
			modify: func(r *conversetest.Request) { r.ModelID = "" },
			want:   "modelId: must not be empty",
		},
		{
			name: "block with no member",
			modify: func(r *conversetest.Request) {
				r.Messages[0].Content = append(r.Messages[0].Content, conversetest.ContentBlock{})
			},
			want: "messages[0].content[1]: content block must have exactly one member set, got none",
		},
		{
			name: "block with two members",
			modify: func(r *conversetest.Request) {
				r.Messages[2].Content[0].Text = "and text"
			},
			want: "messages[2].content[0]: content block must have exactly one member set, got text, toolResult",
		},
		{
			name: "toolResult json is any JSON",
			modify: func(r *conversetest.Request) {
				r.Messages[2].Content[0].ToolResult.Content[0] = conversetest.ToolResultContent{JSON: json.RawMessage(`[1,2]`)}
			},
		},
		{
			name: "toolResult without content",
			modify: func(r *conversetest.Request) {
				r.Messages[2].Content[0].ToolResult.Content = nil
			},
			want: "messages[2].content[0].toolResult.content: must not be empty",
		},
		{
			name: "temperature NaN-free bounds",
			modify: func(r *conversetest.Request) {
				one := 1.0
				r.InferenceConfig = &conversetest.InferenceConfig{Temperature: &one, TopP: new(float64)}
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req := goRequest()
			tt.modify(req)
			err := conversetest.Validate(req)
			if tt.want == "" {
				if err != nil {
					t.Fatalf("Validate() = %v, want nil", err)
				}
				return
			}
			var apiErr *conversetest.APIError
			if !errors.As(err, &apiErr) {
				t.Fatalf("Validate() = %v, want an *APIError", err)
			}
			if apiErr.Status != http.StatusBadRequest || apiErr.Code != conversetest.CodeValidation {
				t.Errorf("status, code = %d, %q; want 400, %q", apiErr.Status, apiErr.Code, conversetest.CodeValidation)
			}
			if !strings.Contains(apiErr.Message, tt.want) {
				t.Errorf("message = %q, want it to contain %q", apiErr.Message, tt.want)
			}
		})
	}
}

func TestDecodeRequestKeepsUnmodelledMembers(t *testing.T) {
	body := `{"messages":[{"role":"user","content":[` +
		`{"text":""},{"video":{"format":"mp4"}},{"text":"hi","bogus":1}` +
		`]}],"system":[{"text":""}]}`
	req, err := conversetest.DecodeRequest([]byte(body))
	if err != nil {
		t.Fatalf("DecodeRequest: %v", err)
	}
	got := req.Messages[0].Content
	want := []conversetest.ContentBlock{
		{Other: map[string]json.RawMessage{"text": json.RawMessage(`""`)}},
		{Other: map[string]json.RawMessage{"video": json.RawMessage(`{"format":"mp4"}`)}},
		{Text: "hi", Other: map[string]json.RawMessage{"bogus": json.RawMessage(`1`)}},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("content mismatch (-want +got):\n%s", diff)
	}
	if _, ok := req.System[0].Other["text"]; !ok {
		t.Errorf("System[0] = %+v, want the empty text kept in Other", req.System[0])
	}

	// Encoding puts the unmodelled members back, so nothing is lost.
	again, err := json.Marshal(req.Messages)
	if err != nil {
		t.Fatalf("Marshal: %v", err)
	}
	var gotJSON, wantJSON any
	if err := json.Unmarshal(again, &gotJSON); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal([]byte(body), &wantJSON); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(wantJSON.(map[string]any)["messages"], gotJSON); diff != "" {
		t.Errorf("round trip mismatch (-want +got):\n%s", diff)
	}
}

func TestDecodeRequestErrors(t *testing.T) {
	for _, body := range []string{``, `[]`, `{"messages":[{"content":[null]}]}`, `{"messages":[{"content":[{"image":{"source":{"bytes":"not base64!"}}}]}]}`} {
		t.Run(body, func(t *testing.T) {
			if got, err := conversetest.DecodeRequest([]byte(body)); err == nil {
				t.Errorf("DecodeRequest(%q) = %+v, want an error", body, got)
			}
		})
	}
}

// FuzzDecodeValidate checks that no body makes decoding or validation
// panic, and that whatever decodes can be validated and re-encoded.
func FuzzDecodeValidate(f *testing.F) {
	f.Add(`{"messages":[{"role":"user","content":[{"text":"hi"}]}]}`)
	f.Add(`{"messages":[{"role":"assistant","content":[{"toolUse":{"toolUseId":"t","name":"n","input":[]}}]},{"role":"user","content":[{"toolResult":{"toolUseId":"t","content":[{"json":null},{}]}}]}],"toolConfig":{"tools":[{}],"toolChoice":{"tool":{"name":"x"}}}}`)
	f.Add(`{"messages":[{"role":"user","content":[{"document":{"source":{}}},{"image":{"source":{"s3Location":{}}}}]}],"inferenceConfig":{"maxTokens":-1,"temperature":2}}`)
	f.Fuzz(func(t *testing.T, body string) {
		req, err := conversetest.DecodeRequest([]byte(body))
		if err != nil {
			return
		}
		req.ModelID = modelID
		_ = conversetest.Validate(req)
		_ = conversetest.EstimateInputBytes(req)
		if _, err := json.Marshal(req); err != nil {
			t.Errorf("re-encode decoded request: %v", err)
		}
	})
}
