package bedrock

import (
	"bytes"
	"encoding/json"
	"errors"
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/bedrockruntime/types"
	"github.com/google/go-cmp/cmp"
	"github.com/lambda-agent/lambda-agent/internal/agent"
	"github.com/lambda-agent/lambda-agent/internal/testkit/conversetest"
)

// everyBlock is a conversation that uses every kind of block the agent's
// message model has: a copy of internal/agent's, whose JSON round trip uses
// it. A new kind of block goes into both.
func everyBlock() []agent.Message {
	png := []byte{0x89, 'P', 'N', 'G', 0, 1, 2, 0xff}
	return []agent.Message{
		{Role: agent.RoleUser, Content: []agent.ContentBlock{
			agent.Text("Look at this"),
			{Image: &agent.ImageBlock{Format: "png", Source: agent.Source{Bytes: png}}},
			{Image: &agent.ImageBlock{Format: "jpeg", Source: agent.Source{S3: &agent.S3Location{URI: "s3://b/k.jpg", BucketOwner: "123456789012"}}}},
			{Document: &agent.DocumentBlock{Format: "pdf", Name: "report (v2)", Source: agent.Source{Bytes: []byte("%PDF-1.7\x00\x01")}}},
			{Document: &agent.DocumentBlock{Format: "txt", Name: "notes", Source: agent.Source{Text: "plain notes"}}},
		}},
		{Role: agent.RoleAssistant, Content: []agent.ContentBlock{
			{Reasoning: &agent.ReasoningBlock{Text: "thinking", Signature: "sig=="}},
			{Reasoning: &agent.ReasoningBlock{Redacted: []byte{1, 2, 3}}},
			agent.Text("Let me compute."),
			{ToolUse: &agent.ToolUseBlock{ToolUseID: "t1", Name: "calculator", Input: json.RawMessage(`{"expression":"2+2","n":12345678901234567890,"f":0.1,"nested":{"a":[1,true,null,"x"]}}`)}},
		}},
		{Role: agent.RoleUser, Content: []agent.ContentBlock{
			{ToolResult: &agent.ToolResultBlock{ToolUseID: "t1", Status: agent.ToolSuccess, Content: []agent.ToolResultContent{
				{Text: "4"},
				{JSON: json.RawMessage(`{"value":4,"big":98765432109876543210}`)},
				{Image: &agent.ImageBlock{Format: "gif", Source: agent.Source{Bytes: []byte("GIF89a")}}},
				{Document: &agent.DocumentBlock{Format: "csv", Name: "table", Source: agent.Source{Bytes: []byte("a,b\n1,2\n")}}},
			}}},
			agent.Text("thanks"),
		}},
		{Role: agent.RoleAssistant, Content: []agent.ContentBlock{agent.Text("You're welcome.")}},
	}
}

// normalizeJSON re-encodes every raw JSON value so that comparisons ignore
// whitespace and key order, which a document round trip may change.
func normalizeJSON(t *testing.T, msgs []agent.Message) []agent.Message {
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
	var out []agent.Message
	for _, m := range msgs {
		m.Content = append([]agent.ContentBlock(nil), m.Content...)
		for i, b := range m.Content {
			if b.ToolUse != nil {
				u := *b.ToolUse
				u.Input = norm(u.Input)
				m.Content[i].ToolUse = &u
			}
			if b.ToolResult != nil {
				r := *b.ToolResult
				r.Content = append([]agent.ToolResultContent(nil), r.Content...)
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
	var got []agent.Message
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
	if _, err := toBedrockMessage(agent.Message{Role: agent.RoleUser, Content: []agent.ContentBlock{{}}}); !errors.Is(err, ErrUnsupportedContent) {
		t.Errorf("empty block: err = %v, want ErrUnsupportedContent", err)
	}
}

func TestEmptyKeysNeverReachTheSDK(t *testing.T) {
	// The SDK cannot encode an object with an empty key, and sends invalid
	// JSON if asked to: tool inputs rename it, tool results become text, and
	// schemas are refused (by the agent, before any call).
	s := conversetest.NewServer()
	defer s.Close()
	m, err := New(s.Client(), Config{ModelID: "m"})
	if err != nil {
		t.Fatal(err)
	}
	msgs := []agent.Message{
		agent.UserText("go"),
		{Role: agent.RoleAssistant, Content: []agent.ContentBlock{{ToolUse: &agent.ToolUseBlock{ToolUseID: "t", Name: "x", Input: json.RawMessage(`{"":1,"a":{"":[{"":2}]}}`)}}}},
		{Role: agent.RoleUser, Content: []agent.ContentBlock{{ToolResult: &agent.ToolResultBlock{ToolUseID: "t", Content: []agent.ToolResultContent{{JSON: json.RawMessage(`{"":"v"}`)}}}}}},
	}
	schema := json.RawMessage(`{"type":"object"}`)
	if _, err := m.Converse(t.Context(), &agent.ModelRequest{Messages: msgs, Tools: []agent.ToolSpec{{Name: "x", InputSchema: schema}}}); err != nil {
		t.Fatalf("Converse: %v", err)
	}
	req := s.Requests()[0]
	if got := string(req.Messages[1].Content[0].ToolUse.Input); got != `{"(empty key)":1,"a":{"(empty key)":[{"(empty key)":2}]}}` {
		t.Errorf("tool input sent as %s", got)
	}
	if got := req.Messages[2].Content[0].ToolResult.Content[0].Text; got != `{"":"v"}` {
		t.Errorf("tool result sent as %q", got)
	}
	if err := agent.CheckSchemaDocument(map[string]any{"type": "object", "properties": map[string]any{"": map[string]any{"type": "string"}}}); !errors.Is(err, agent.ErrInvalidSchema) {
		t.Errorf("a schema with an empty key: %v", err)
	}
}
