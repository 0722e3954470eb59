package agent

import (
	"encoding/json"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// everyBlock is a conversation that uses every kind of block our model has.
// internal/agent/bedrock keeps a copy for its round trip through Bedrock's
// types; a new kind of block goes into both.
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

func TestClip(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"short", "short"},
		{"exactly10!", "exactly10!"},
		{"eleven byte", "eleven byt…"},
		{"123456789é", "123456789…"}, // é is two bytes: not cut in half
	} {
		if got := Clip(c.in, 10); got != c.want {
			t.Errorf("Clip(%q, 10) = %q, want %q", c.in, got, c.want)
		}
	}
}
