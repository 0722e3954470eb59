package bedrock_test

import (
	"encoding/json"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/lambda-agent/lambda-agent/internal/agent"
	"github.com/lambda-agent/lambda-agent/internal/agent/bedrock"
	"github.com/lambda-agent/lambda-agent/internal/testkit"
	"github.com/lambda-agent/lambda-agent/internal/testkit/conversetest"
)

// newServer starts a strict Converse stand-in. A test fails if the model ever
// sent it a request that Bedrock would reject.
func newServer(t *testing.T) *conversetest.Server { return testkit.ConverseServer(t) }

// newModel returns a Model that calls the stand-in s.
func newModel(t *testing.T, s *conversetest.Server, modelID string) *bedrock.Model {
	t.Helper()
	return testkit.BedrockModel(t, s, modelID)
}

// Real first bytes of each kind of file.
var jpegHead, pdfHead = conversetest.JPEGStart, conversetest.PDFStart

func withImage(format string, b []byte) []agent.ContentBlock {
	return []agent.ContentBlock{agent.Text("look"), {Image: &agent.ImageBlock{Format: format, Source: agent.Source{Bytes: b}}}}
}

func withDocument(format string, b []byte) []agent.ContentBlock {
	return []agent.ContentBlock{agent.Text("read"), {Document: &agent.DocumentBlock{Format: format, Name: "file", Source: agent.Source{Bytes: b}}}}
}

func TestSendsSettings(t *testing.T) {
	s := newServer(t)
	m, err := bedrock.New(s.Client(), bedrock.Config{
		ModelID:       "arn:aws:bedrock:us-east-1:123456789012:inference-profile/us.anthropic.claude-sonnet-4-v1:0",
		MaxTokens:     1000,
		Temperature:   aws.Float64(0.2),
		TopP:          aws.Float64(0.9),
		StopSequences: []string{"END"},
		Guardrail:     &bedrock.Guardrail{ID: "gr-123", Version: "2", Trace: true},
	})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := m.ModelID(), "arn:aws:bedrock:us-east-1:123456789012:inference-profile/us.anthropic.claude-sonnet-4-v1:0"; got != want {
		t.Errorf("ModelID() = %q, want %q", got, want)
	}
	_, err = m.Converse(t.Context(), &agent.ModelRequest{
		System:     "sys",
		Messages:   []agent.Message{agent.UserText("hi")},
		Tools:      []agent.ToolSpec{{Name: "t", Description: "d", InputSchema: json.RawMessage(`{"type":"object","properties":{"n":{"type":"integer","maximum":12345678901234567890}}}`)}},
		ToolChoice: agent.ToolChoice{Any: true},
	})
	if err != nil {
		t.Fatal(err)
	}
	req := s.Requests()[0]
	ic := req.InferenceConfig
	switch {
	case req.ModelID != "arn:aws:bedrock:us-east-1:123456789012:inference-profile/us.anthropic.claude-sonnet-4-v1:0":
		t.Errorf("model id %q", req.ModelID)
	case ic == nil || *ic.MaxTokens != 1000 || float32(*ic.Temperature) != float32(0.2) || float32(*ic.TopP) != float32(0.9) || ic.StopSequences[0] != "END":
		t.Errorf("inference config %+v", ic)
	case req.GuardrailConfig == nil || req.GuardrailConfig.GuardrailIdentifier != "gr-123" || req.GuardrailConfig.GuardrailVersion != "2" || req.GuardrailConfig.Trace != "enabled":
		t.Errorf("guardrail %+v", req.GuardrailConfig)
	case req.ToolConfig.ToolChoice.Any == nil:
		t.Errorf("tool choice %+v", req.ToolConfig.ToolChoice)
	case string(req.ToolConfig.Tools[0].ToolSpec.InputSchema.JSON) != `{"properties":{"n":{"maximum":12345678901234567890,"type":"integer"}},"type":"object"}`:
		t.Errorf("schema on the wire: %s", req.ToolConfig.Tools[0].ToolSpec.InputSchema.JSON)
	}
}

func TestNewValidates(t *testing.T) {
	s := newServer(t)
	for name, cfg := range map[string]bedrock.Config{
		"no model":         {},
		"negative tokens":  {ModelID: "m", MaxTokens: -1},
		"temperature":      {ModelID: "m", Temperature: aws.Float64(1.5)},
		"top p":            {ModelID: "m", TopP: aws.Float64(-0.1)},
		"half a guardrail": {ModelID: "m", Guardrail: &bedrock.Guardrail{ID: "g"}},
	} {
		if _, err := bedrock.New(s.Client(), cfg); err == nil {
			t.Errorf("%s: New succeeded", name)
		}
	}
	if _, err := bedrock.New(nil, bedrock.Config{ModelID: "m"}); err == nil {
		t.Error("nil client: New succeeded")
	}
}

func TestErrorClassification(t *testing.T) {
	tests := []struct {
		reply conversetest.Reply
		want  agent.ErrorKind
	}{
		{conversetest.Throttle(), agent.KindThrottled},
		{conversetest.ModelNotReady(), agent.KindUnavailable},
		{conversetest.Unavailable(), agent.KindUnavailable},
		{conversetest.InternalError(), agent.KindUnavailable},
		{conversetest.ModelTimeout(), agent.KindUnavailable},
		{conversetest.Error(502, "BadGatewayException", "upstream"), agent.KindUnavailable},
		{conversetest.Error(429, "SomeNewThrottle", "slow"), agent.KindThrottled},
		{conversetest.Overflow(), agent.KindOverflow},
		{conversetest.Error(400, conversetest.CodeValidation, "input length and `max_tokens` exceed context limit: 190000 + 20000 > 200000"), agent.KindOverflow},
		{conversetest.Error(400, conversetest.CodeValidation, "Request failed: too many total text bytes: 9000000 > 8000000"), agent.KindOverflow},
		{conversetest.Error(400, conversetest.CodeValidation, "prompt is too long: 210000 tokens > 200000 maximum"), agent.KindOverflow},
		{conversetest.Error(400, conversetest.CodeValidation, "This model doesn't support the toolChoice field."), agent.KindToolChoiceUnsupported},
		{conversetest.Error(400, conversetest.CodeValidation, "messages.1: bad"), agent.KindInvalid},
		{conversetest.Error(400, conversetest.CodeValidation, "The provided model identifier is invalid."), agent.KindNotFound},
		{conversetest.Error(400, conversetest.CodeValidation, "Invocation of model ID anthropic.claude-sonnet-4-5-20250929-v1:0 with on-demand throughput isn’t supported. Retry your request with the ID or ARN of an inference profile that contains this model."), agent.KindNotFound},
		{conversetest.Error(400, conversetest.CodeValidation, "Malformed input request: #: extraneous key [top_k] is not permitted, please reformat your input and try again."), agent.KindInvalid},
		{conversetest.UnreadableImage(), agent.KindInvalidContent},
		{conversetest.Error(400, conversetest.CodeValidation, "The model returned the following errors: messages.0.content.0.image.source.bytes: The image was specified using the image/jpeg media type, but the image appears to be a image/png image"), agent.KindInvalidContent},
		{conversetest.Error(400, conversetest.CodeValidation, "The model returned the following errors: The provided image does not match the specified image format."), agent.KindInvalidContent},
		{conversetest.Error(400, conversetest.CodeValidation, "The model returned the following errors: The PDF specified was not valid"), agent.KindInvalidContent},
		{conversetest.Error(400, conversetest.CodeValidation, "The model returned the following errors: messages.0.content.1.source.bytes: The document source bytes could not be parsed as the specified format."), agent.KindInvalidContent},
		{conversetest.Error(400, conversetest.CodeValidation, "This model doesn't support the image field for user messages."), agent.KindInvalidContent},
		{conversetest.Error(400, conversetest.CodeValidation, "messages.2.content.0.image.source: Field required"), agent.KindInvalidContent},
		{conversetest.AccessDenied(), agent.KindDenied},
		{conversetest.ResourceNotFound(), agent.KindNotFound},
	}
	s := newServer(t)
	m := newModel(t, s, "m")
	for _, tt := range tests {
		s.Enqueue(tt.reply)
		_, err := m.Converse(t.Context(), &agent.ModelRequest{Messages: []agent.Message{agent.UserText("hi")}})
		if !agent.IsModelError(err, tt.want) {
			t.Errorf("%s %q: err = %v, want kind %s", tt.reply.Err.Code, tt.reply.Err.Message, err, tt.want)
		}
		if tt.want.Retryable() != (tt.want == agent.KindThrottled || tt.want == agent.KindUnavailable) {
			t.Errorf("%s retryable = %v", tt.want, tt.want.Retryable())
		}
	}
	// Bedrock unreachable is transient too.
	s.Close()
	_, err := m.Converse(t.Context(), &agent.ModelRequest{Messages: []agent.Message{agent.UserText("hi")}})
	if !agent.IsModelError(err, agent.KindUnavailable) {
		t.Errorf("closed server: err = %v, want unavailable", err)
	}
}

func TestStandInRefusalOfMislabelledMediaIsInvalidContent(t *testing.T) {
	// The stand-in refuses such a request as Bedrock does, which the agent
	// never sends (agent.ValidateInput stops it); its own server, because
	// the refusal is recorded as a violation.
	s := conversetest.NewServer()
	defer s.Close()
	m := newModel(t, s, "m")
	for _, content := range [][]agent.ContentBlock{withImage("png", jpegHead), withImage("gif", []byte("garbage")), withDocument("docx", pdfHead)} {
		msgs := []agent.Message{{Role: agent.RoleUser, Content: content}}
		if _, err := m.Converse(t.Context(), &agent.ModelRequest{Messages: msgs}); !agent.IsModelError(err, agent.KindInvalidContent) {
			t.Errorf("Converse: err = %v, want kind invalid content", err)
		}
		if _, err := m.ConverseStream(t.Context(), &agent.ModelRequest{Messages: msgs}, func(agent.Delta) {}); !agent.IsModelError(err, agent.KindInvalidContent) {
			t.Errorf("ConverseStream: err = %v, want kind invalid content", err)
		}
	}
	if got := len(s.Violations()); got != 6 {
		t.Errorf("%d violations, want the 6 refusals", got)
	}
}
