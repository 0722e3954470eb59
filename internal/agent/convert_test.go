package agent

import (
	"bytes"
	"encoding/json"
	"errors"
	"github.com/lambda-agent/lambda-agent/internal/conversetest"
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/bedrockruntime/types"
	"github.com/google/go-cmp/cmp"
)

// everyBlock is a conversation that uses every kind of block our model has.
func everyBlock() []Message {
	png := []byte{0x89, 'P', 'N', 'G', 0, 1, 2, 0xff}
	return []Message{
		{Role: RoleUser, Content: []ContentBlock{
			Text("Look at this"),
			{Image: &ImageBlock{Format: "png", Source: Source{Bytes: png}}},
			{Image: &ImageBlock{Format: "jpeg", Source: Source{S3: &S3Location{URI: "s3://b/k.jpg", BucketOwner: "123456789012"}}}},
			{Document: &DocumentBlock{Format: "pdf", Name: "report (v2)", Source: Source{Bytes: []byte("%PDF-1.7\x00\x01")}}},
			{Document: &DocumentBlock{Format: "txt", Name: "notes", Source: Source{Text: "plain notes"}}},
		}},
		{Role: RoleAssistant, Content: []ContentBlock{
			{Reasoning: &ReasoningBlock{Text: "thinking", Signature: "sig=="}},
			{Reasoning: &ReasoningBlock{Redacted: []byte{1, 2, 3}}},
			Text("Let me compute."),
			{ToolUse: &ToolUseBlock{ToolUseID: "t1", Name: "calculator", Input: json.RawMessage(`{"expression":"2+2","n":12345678901234567890,"f":0.1,"nested":{"a":[1,true,null,"x"]}}`)}},
		}},
		{Role: RoleUser, Content: []ContentBlock{
			{ToolResult: &ToolResultBlock{ToolUseID: "t1", Status: ToolSuccess, Content: []ToolResultContent{
				{Text: "4"},
				{JSON: json.RawMessage(`{"value":4,"big":98765432109876543210}`)},
				{Image: &ImageBlock{Format: "gif", Source: Source{Bytes: []byte("GIF89a")}}},
				{Document: &DocumentBlock{Format: "csv", Name: "table", Source: Source{Bytes: []byte("a,b\n1,2\n")}}},
			}}},
			Text("thanks"),
		}},
		{Role: RoleAssistant, Content: []ContentBlock{Text("You're welcome.")}},
	}
}

// normalizeJSON re-encodes every raw JSON value so that comparisons ignore
// whitespace and key order, which a document round trip may change.
func normalizeJSON(t *testing.T, msgs []Message) []Message {
	t.Helper()
	norm := func(raw json.RawMessage) json.RawMessage {
		if raw == nil {
			return nil
		}
		var v any
		dec := json.NewDecoder(bytes.NewReader(raw))
		dec.UseNumber()
		if err := dec.Decode(&v); err != nil {
			t.Fatalf("invalid JSON %s: %v", raw, err)
		}
		out, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		return out
	}
	var out []Message
	for _, m := range msgs {
		m = m.clone()
		for i, b := range m.Content {
			if b.ToolUse != nil {
				u := *b.ToolUse
				u.Input = norm(u.Input)
				m.Content[i].ToolUse = &u
			}
			if b.ToolResult != nil {
				r := *b.ToolResult
				r.Content = append([]ToolResultContent(nil), r.Content...)
				for j := range r.Content {
					r.Content[j].JSON = norm(r.Content[j].JSON)
				}
				m.Content[i].ToolResult = &r
			}
		}
		out = append(out, m)
	}
	return out
}

func TestBedrockRoundTrip(t *testing.T) {
	want := everyBlock()
	bms, err := toBedrockMessages(want)
	if err != nil {
		t.Fatalf("toBedrockMessages: %v", err)
	}
	var got []Message
	for _, bm := range bms {
		m, err := fromBedrockMessage(bm)
		if err != nil {
			t.Fatalf("fromBedrockMessage: %v", err)
		}
		got = append(got, m)
	}
	if diff := cmp.Diff(normalizeJSON(t, want), normalizeJSON(t, got)); diff != "" {
		t.Errorf("round trip through Bedrock types (-want +got):\n%s", diff)
	}
}

func TestJSONRoundTrip(t *testing.T) {
	want := everyBlock()
	raw, err := json.Marshal(want)
	if err != nil {
		t.Fatal(err)
	}
	var got []Message
	if err := json.Unmarshal(raw, &got); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("JSON round trip (-want +got):\n%s", diff)
	}
	// Bytes travel as base64, in Bedrock's own shape.
	var wire []map[string]any
	if err := json.Unmarshal(raw, &wire); err != nil {
		t.Fatal(err)
	}
	img := wire[0]["content"].([]any)[1].(map[string]any)["image"].(map[string]any)
	if got, want := img["source"].(map[string]any)["bytes"], "iVBORwABAv8="; got != want {
		t.Errorf("image bytes in JSON = %v, want base64 %q", got, want)
	}
}

func TestExactNumbersSurviveDocuments(t *testing.T) {
	in := json.RawMessage(`{"big":12345678901234567890,"small":0.1,"neg":-3e-7}`)
	doc, err := toDocument(in, false)
	if err != nil {
		t.Fatal(err)
	}
	got, err := fromDocument(doc)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]json.Number
	if err := json.Unmarshal(got, &m); err != nil {
		t.Fatalf("decode %s: %v", got, err)
	}
	if m["big"] != "12345678901234567890" || m["small"] != "0.1" || m["neg"] != "-3e-7" {
		t.Errorf("numbers changed: %s", got)
	}
}

func TestUnknownUnionMembers(t *testing.T) {
	tests := []struct {
		name  string
		block types.ContentBlock
	}{
		{"unknown", &types.UnknownUnionMember{Tag: "hologram", Value: []byte("{}")}},
		{"video", &types.ContentBlockMemberVideo{}},
		{"cache point", &types.ContentBlockMemberCachePoint{}},
		{"unknown reasoning", &types.ContentBlockMemberReasoningContent{Value: &types.UnknownUnionMember{Tag: "x"}}},
		{"unknown image source", &types.ContentBlockMemberImage{Value: types.ImageBlock{Format: "png", Source: &types.UnknownUnionMember{Tag: "x"}}}},
		{"unknown tool result content", &types.ContentBlockMemberToolResult{Value: types.ToolResultBlock{Content: []types.ToolResultContentBlock{&types.UnknownUnionMember{Tag: "x"}}}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := fromBedrockMessage(types.Message{Role: types.ConversationRoleAssistant, Content: []types.ContentBlock{tt.block}})
			if !errors.Is(err, ErrUnsupportedContent) {
				t.Errorf("err = %v, want ErrUnsupportedContent", err)
			}
		})
	}
	if _, err := toBedrockMessage(Message{Role: RoleUser, Content: []ContentBlock{{}}}); !errors.Is(err, ErrUnsupportedContent) {
		t.Errorf("empty block: err = %v, want ErrUnsupportedContent", err)
	}
}

func TestEmptyKeysNeverReachTheSDK(t *testing.T) {
	// The SDK cannot encode an object with an empty key, and sends invalid
	// JSON if asked to: tool inputs rename it, tool results become text, and
	// schemas are refused.
	s := conversetest.NewServer()
	defer s.Close()
	m, err := NewBedrock(s.Client(), BedrockConfig{ModelID: "m"})
	if err != nil {
		t.Fatal(err)
	}
	msgs := []Message{
		UserText("go"),
		{Role: RoleAssistant, Content: []ContentBlock{{ToolUse: &ToolUseBlock{ToolUseID: "t", Name: "x", Input: json.RawMessage(`{"":1,"a":{"":[{"":2}]}}`)}}}},
		{Role: RoleUser, Content: []ContentBlock{{ToolResult: &ToolResultBlock{ToolUseID: "t", Content: []ToolResultContent{{JSON: json.RawMessage(`{"":"v"}`)}}}}}},
	}
	schema := json.RawMessage(`{"type":"object"}`)
	if _, err := m.Converse(t.Context(), &ModelRequest{Messages: msgs, Tools: []ToolSpec{{Name: "x", InputSchema: schema}}}); err != nil {
		t.Fatalf("Converse: %v", err)
	}
	req := s.Requests()[0]
	if got := string(req.Messages[1].Content[0].ToolUse.Input); got != `{"(empty key)":1,"a":{"(empty key)":[{"(empty key)":2}]}}` {
		t.Errorf("tool input sent as %s", got)
	}
	if got := req.Messages[2].Content[0].ToolResult.Content[0].Text; got != `{"":"v"}` {
		t.Errorf("tool result sent as %q", got)
	}
	if _, err := compileToolSchema(json.RawMessage(`{"type":"object","properties":{"":{"type":"string"}}}`)); !errors.Is(err, ErrInvalidSchema) {
		t.Errorf("a schema with an empty key: %v", err)
	}
}
