package conversetest

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
)

// Request is a decoded Converse request body, plus what the server learnt
// while handling it.
//
// The JSON-tagged fields mirror Bedrock's wire format. Members that the agent
// never sends are kept raw (json.RawMessage) so that they stay visible to
// tests without this package having to model them.
//
// Requests returned by [Server.Requests] are shared: treat them as read-only.
type Request struct {
	// ModelID is the path-unescaped {modelId} of the URL. It may be a model
	// ID, an inference profile ID or an ARN.
	ModelID string `json:"-"`
	// Operation is the Bedrock operation the request was sent to, such as
	// "Converse".
	Operation string `json:"-"`
	// Valid reports whether the request obeyed Bedrock's rules (see
	// [Validate]). A valid request can still be refused for context overflow.
	Valid bool `json:"-"`
	// Err is the error the server answered with before consulting the script:
	// a *[APIError] for a rule violation, a malformed body or a context
	// overflow. It is nil when the request reached the script, whose reply may
	// itself be an error.
	Err error `json:"-"`

	Messages        []Message        `json:"messages"`
	System          []SystemBlock    `json:"system,omitempty"`
	InferenceConfig *InferenceConfig `json:"inferenceConfig,omitempty"`
	ToolConfig      *ToolConfig      `json:"toolConfig,omitempty"`
	GuardrailConfig *GuardrailConfig `json:"guardrailConfig,omitempty"`

	// The members below are decoded loosely: they are recorded, not checked.
	OutputConfig                      json.RawMessage   `json:"outputConfig,omitempty"`
	AdditionalModelRequestFields      json.RawMessage   `json:"additionalModelRequestFields,omitempty"`
	AdditionalModelResponseFieldPaths []string          `json:"additionalModelResponseFieldPaths,omitempty"`
	PromptVariables                   json.RawMessage   `json:"promptVariables,omitempty"`
	RequestMetadata                   map[string]string `json:"requestMetadata,omitempty"`
	PerformanceConfig                 json.RawMessage   `json:"performanceConfig,omitempty"`
	ServiceTier                       json.RawMessage   `json:"serviceTier,omitempty"`
}

// DecodeRequest decodes a Converse request body. It fails only when body is
// not JSON of the right shape; it does not apply Bedrock's rules, which is
// [Validate]'s job. ModelID and Operation are left empty because they come
// from the URL, not the body.
func DecodeRequest(body []byte) (*Request, error) {
	var req Request
	if err := json.Unmarshal(body, &req); err != nil {
		return nil, fmt.Errorf("conversetest: decode request: %w", err)
	}
	return &req, nil
}

// Message is one conversation turn.
type Message struct {
	// Role is "user" or "assistant" in a valid request.
	Role    string         `json:"role"`
	Content []ContentBlock `json:"content"`
}

// Text returns the message's text blocks joined by newlines, which is what
// most assertions about a turn want to look at.
func (m Message) Text() string {
	var parts []string
	for _, b := range m.Content {
		if b.Text != "" {
			parts = append(parts, b.Text)
		}
	}
	return strings.Join(parts, "\n")
}

// ContentBlock is Bedrock's ContentBlock union. In a valid block exactly one
// member is set.
//
// Union members that this package does not model (video, audio,
// citationsContent, searchResult, …, as well as names Bedrock does not know)
// are kept raw in Other, so that a block with zero or several members, or an
// unknown member, stays detectable. A text member whose value is the empty
// string also lands in Other under "text", because the Text field cannot tell
// it from an absent member; [Validate] reports it as a blank text block.
type ContentBlock struct {
	Text             string                     `json:"text,omitempty"`
	Image            *ImageBlock                `json:"image,omitempty"`
	Document         *DocumentBlock             `json:"document,omitempty"`
	ToolUse          *ToolUseBlock              `json:"toolUse,omitempty"`
	ToolResult       *ToolResultBlock           `json:"toolResult,omitempty"`
	ReasoningContent *ReasoningBlock            `json:"reasoningContent,omitempty"`
	CachePoint       *CachePointBlock           `json:"cachePoint,omitempty"`
	GuardContent     json.RawMessage            `json:"guardContent,omitempty"`
	Other            map[string]json.RawMessage `json:"-"`
}

// contentBlockJSON has ContentBlock's fields without its methods, so that
// MarshalJSON can reuse encoding/json for the modelled members.
type contentBlockJSON ContentBlock

// UnmarshalJSON decodes the union, keeping unmodelled members in Other.
func (b *ContentBlock) UnmarshalJSON(data []byte) error {
	*b = ContentBlock{}
	return decodeUnion(data, func(name string, v json.RawMessage) (bool, error) {
		switch name {
		case "text":
			return decodeText(&b.Text, v)
		case "image":
			return true, decodeMember(&b.Image, v)
		case "document":
			return true, decodeMember(&b.Document, v)
		case "toolUse":
			return true, decodeMember(&b.ToolUse, v)
		case "toolResult":
			return true, decodeMember(&b.ToolResult, v)
		case "reasoningContent":
			return true, decodeMember(&b.ReasoningContent, v)
		case "cachePoint":
			return true, decodeMember(&b.CachePoint, v)
		case "guardContent":
			b.GuardContent = v
			return true, nil
		default:
			return false, nil
		}
	}, &b.Other)
}

// MarshalJSON encodes the union including the members in Other, so that a
// block survives a decode/encode round trip unchanged.
func (b ContentBlock) MarshalJSON() ([]byte, error) {
	return encodeUnion(contentBlockJSON(b), b.Other)
}

// appendMembers appends the names of the union members that are set to m,
// in a fixed order. Taking m lets callers use a stack buffer.
func (b *ContentBlock) appendMembers(m []string) []string {
	if b.Text != "" {
		m = append(m, "text")
	}
	if b.Image != nil {
		m = append(m, "image")
	}
	if b.Document != nil {
		m = append(m, "document")
	}
	if b.ToolUse != nil {
		m = append(m, "toolUse")
	}
	if b.ToolResult != nil {
		m = append(m, "toolResult")
	}
	if b.ReasoningContent != nil {
		m = append(m, "reasoningContent")
	}
	if b.CachePoint != nil {
		m = append(m, "cachePoint")
	}
	if b.GuardContent != nil {
		m = append(m, "guardContent")
	}
	return appendOther(m, b.Other)
}

// ImageBlock is an image content block.
type ImageBlock struct {
	// Format is png, jpeg, gif or webp in a valid request.
	Format string      `json:"format"`
	Source ImageSource `json:"source"`
}

// ImageSource is the ImageSource union.
type ImageSource struct {
	// Bytes is the decoded image; on the wire it is base64. It is nil when
	// the member is absent and empty (not nil) when it was sent empty.
	Bytes      []byte      `json:"bytes,omitempty"`
	S3Location *S3Location `json:"s3Location,omitempty"`
}

// S3Location points at an object in Amazon S3.
type S3Location struct {
	URI         string `json:"uri"`
	BucketOwner string `json:"bucketOwner,omitempty"`
}

// DocumentBlock is a document content block.
type DocumentBlock struct {
	// Format is pdf, csv, doc, docx, xls, xlsx, html, txt or md in a valid
	// request.
	Format string         `json:"format,omitempty"`
	Name   string         `json:"name"`
	Source DocumentSource `json:"source"`
	// Context and Citations are recorded, not checked.
	Context   string          `json:"context,omitempty"`
	Citations json.RawMessage `json:"citations,omitempty"`
}

// DocumentSource is the DocumentSource union.
type DocumentSource struct {
	// Bytes is the decoded document; nil when absent, empty when sent empty.
	Bytes      []byte          `json:"bytes,omitempty"`
	S3Location *S3Location     `json:"s3Location,omitempty"`
	Text       string          `json:"text,omitempty"`
	Content    json.RawMessage `json:"content,omitempty"`
}

// ToolUseBlock is a tool call made by the model.
type ToolUseBlock struct {
	ToolUseID string `json:"toolUseId"`
	Name      string `json:"name"`
	// Input is the tool input as sent; a JSON object in a valid request.
	Input json.RawMessage `json:"input"`
	// Type is recorded, not checked (it marks server-side tool calls).
	Type string `json:"type,omitempty"`
}

// ToolResultBlock answers the toolUse with the same ToolUseID.
type ToolResultBlock struct {
	ToolUseID string              `json:"toolUseId"`
	Content   []ToolResultContent `json:"content"`
	// Status is "", "success" or "error" in a valid request.
	Status string `json:"status,omitempty"`
	// Type is recorded, not checked.
	Type string `json:"type,omitempty"`
}

// ToolResultContent is the ToolResultContentBlock union. As in ContentBlock,
// unmodelled members and an empty text member are kept in Other.
type ToolResultContent struct {
	Text     string                     `json:"text,omitempty"`
	JSON     json.RawMessage            `json:"json,omitempty"`
	Image    *ImageBlock                `json:"image,omitempty"`
	Document *DocumentBlock             `json:"document,omitempty"`
	Other    map[string]json.RawMessage `json:"-"`
}

type toolResultContentJSON ToolResultContent

// UnmarshalJSON decodes the union, keeping unmodelled members in Other.
func (c *ToolResultContent) UnmarshalJSON(data []byte) error {
	*c = ToolResultContent{}
	return decodeUnion(data, func(name string, v json.RawMessage) (bool, error) {
		switch name {
		case "text":
			return decodeText(&c.Text, v)
		case "json":
			c.JSON = v
			return true, nil
		case "image":
			return true, decodeMember(&c.Image, v)
		case "document":
			return true, decodeMember(&c.Document, v)
		default:
			return false, nil
		}
	}, &c.Other)
}

// MarshalJSON encodes the union including the members in Other.
func (c ToolResultContent) MarshalJSON() ([]byte, error) {
	return encodeUnion(toolResultContentJSON(c), c.Other)
}

func (c *ToolResultContent) appendMembers(m []string) []string {
	if c.Text != "" {
		m = append(m, "text")
	}
	if c.JSON != nil {
		m = append(m, "json")
	}
	if c.Image != nil {
		m = append(m, "image")
	}
	if c.Document != nil {
		m = append(m, "document")
	}
	return appendOther(m, c.Other)
}

// ReasoningBlock is the ReasoningContentBlock union: the model's visible
// reasoning with its signature, or reasoning that was redacted.
type ReasoningBlock struct {
	ReasoningText   *ReasoningText `json:"reasoningText,omitempty"`
	RedactedContent []byte         `json:"redactedContent,omitempty"`
}

// ReasoningText is reasoning text and the signature that lets the model
// verify it was not altered when it is sent back.
type ReasoningText struct {
	Text      string `json:"text"`
	Signature string `json:"signature,omitempty"`
}

// CachePointBlock marks a prompt-cache checkpoint: everything before it, in
// the order tools, system, messages, is a prefix Bedrock may cache.
//
// Members Bedrock does not know are kept in Other, so that [Validate] can
// refuse them instead of decoding dropping them silently.
type CachePointBlock struct {
	// Type is "default" in a valid request.
	Type string `json:"type"`
	// TTL is "", "5m" or "1h" in a valid request; "" means five minutes.
	TTL   string                     `json:"ttl,omitempty"`
	Other map[string]json.RawMessage `json:"-"`
}

type cachePointJSON CachePointBlock

// UnmarshalJSON decodes the block, keeping unknown members in Other.
func (c *CachePointBlock) UnmarshalJSON(data []byte) error {
	*c = CachePointBlock{}
	return decodeUnion(data, func(name string, v json.RawMessage) (bool, error) {
		switch name {
		case "type":
			return true, json.Unmarshal(v, &c.Type)
		case "ttl":
			return true, json.Unmarshal(v, &c.TTL)
		default:
			return false, nil
		}
	}, &c.Other)
}

// MarshalJSON encodes the block including the members in Other.
func (c CachePointBlock) MarshalJSON() ([]byte, error) {
	return encodeUnion(cachePointJSON(c), c.Other)
}

// SystemBlock is the SystemContentBlock union. As in ContentBlock,
// unmodelled members and an empty text member are kept in Other.
type SystemBlock struct {
	Text         string                     `json:"text,omitempty"`
	GuardContent json.RawMessage            `json:"guardContent,omitempty"`
	CachePoint   *CachePointBlock           `json:"cachePoint,omitempty"`
	Other        map[string]json.RawMessage `json:"-"`
}

type systemBlockJSON SystemBlock

// UnmarshalJSON decodes the union, keeping unmodelled members in Other.
func (s *SystemBlock) UnmarshalJSON(data []byte) error {
	*s = SystemBlock{}
	return decodeUnion(data, func(name string, v json.RawMessage) (bool, error) {
		switch name {
		case "text":
			return decodeText(&s.Text, v)
		case "guardContent":
			s.GuardContent = v
			return true, nil
		case "cachePoint":
			return true, decodeMember(&s.CachePoint, v)
		default:
			return false, nil
		}
	}, &s.Other)
}

// MarshalJSON encodes the union including the members in Other.
func (s SystemBlock) MarshalJSON() ([]byte, error) {
	return encodeUnion(systemBlockJSON(s), s.Other)
}

func (s *SystemBlock) appendMembers(m []string) []string {
	if s.Text != "" {
		m = append(m, "text")
	}
	if s.GuardContent != nil {
		m = append(m, "guardContent")
	}
	if s.CachePoint != nil {
		m = append(m, "cachePoint")
	}
	return appendOther(m, s.Other)
}

// InferenceConfig holds the inference parameters. Nil pointers are absent
// members.
type InferenceConfig struct {
	MaxTokens     *int     `json:"maxTokens,omitempty"`
	Temperature   *float64 `json:"temperature,omitempty"`
	TopP          *float64 `json:"topP,omitempty"`
	StopSequences []string `json:"stopSequences,omitempty"`
}

// ToolNames returns the names of the tools r offers, in their order.
func (r *Request) ToolNames() []string {
	var names []string
	if r.ToolConfig != nil {
		for _, t := range r.ToolConfig.Tools {
			if t.ToolSpec != nil {
				names = append(names, t.ToolSpec.Name)
			}
		}
	}
	return names
}

// ToolConfig declares the tools the model may call.
type ToolConfig struct {
	Tools      []Tool      `json:"tools"`
	ToolChoice *ToolChoice `json:"toolChoice,omitempty"`
}

// Tool is the Tool union; the agent only uses ToolSpec.
type Tool struct {
	ToolSpec   *ToolSpec        `json:"toolSpec,omitempty"`
	SystemTool json.RawMessage  `json:"systemTool,omitempty"`
	CachePoint *CachePointBlock `json:"cachePoint,omitempty"`
}

// ToolSpec describes one tool.
type ToolSpec struct {
	Name        string          `json:"name"`
	Description string          `json:"description,omitempty"`
	InputSchema ToolInputSchema `json:"inputSchema"`
	Strict      *bool           `json:"strict,omitempty"`
}

// ToolInputSchema is the ToolInputSchema union; JSON holds a JSON Schema
// object in a valid request.
type ToolInputSchema struct {
	JSON json.RawMessage `json:"json,omitempty"`
}

// ToolChoice is the ToolChoice union. In a valid request exactly one member
// is set.
type ToolChoice struct {
	Auto *AutoToolChoice     `json:"auto,omitempty"`
	Any  *AnyToolChoice      `json:"any,omitempty"`
	Tool *SpecificToolChoice `json:"tool,omitempty"`
}

// AutoToolChoice lets the model decide whether to call a tool.
type AutoToolChoice struct{}

// AnyToolChoice makes the model call some tool.
type AnyToolChoice struct{}

// SpecificToolChoice makes the model call the named tool.
type SpecificToolChoice struct {
	Name string `json:"name"`
}

// GuardrailConfig selects a guardrail.
type GuardrailConfig struct {
	GuardrailIdentifier string `json:"guardrailIdentifier"`
	GuardrailVersion    string `json:"guardrailVersion"`
	Trace               string `json:"trace,omitempty"`
	// StreamProcessingMode is ConverseStream's: "sync" or "async".
	StreamProcessingMode string `json:"streamProcessingMode,omitempty"`
}

// decodeUnion decodes the JSON object data as a union: it calls set for
// each member that is not null, and stores the members set did not take in
// *other. Decoding member by member keeps each value to a single
// json.Unmarshal, which matters for large base64 images.
func decodeUnion(data []byte, set func(name string, v json.RawMessage) (bool, error), other *map[string]json.RawMessage) error {
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(data, &raw); err != nil {
		return err
	}
	if raw == nil {
		return errors.New("union must be a JSON object, got null")
	}
	for name, v := range raw {
		if bytes.Equal(v, []byte("null")) {
			continue
		}
		taken, err := set(name, v)
		if err != nil {
			return fmt.Errorf("member %s: %w", name, err)
		}
		if !taken {
			if *other == nil {
				*other = make(map[string]json.RawMessage)
			}
			(*other)[name] = v
		}
	}
	return nil
}

// decodeText decodes a text member. An empty string is not taken, so that
// it lands in Other, where Validate finds it.
func decodeText(dst *string, v json.RawMessage) (bool, error) {
	if err := json.Unmarshal(v, dst); err != nil {
		return true, err
	}
	return *dst != "", nil
}

// decodeMember decodes v into a new T stored in *dst.
func decodeMember[T any](dst **T, v json.RawMessage) error {
	*dst = new(T)
	return json.Unmarshal(v, *dst)
}

// encodeUnion encodes v (a struct without custom marshalers) and adds the
// raw members in other.
func encodeUnion(v any, other map[string]json.RawMessage) ([]byte, error) {
	data, err := json.Marshal(v)
	if err != nil || len(other) == 0 {
		return data, err
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(data, &m); err != nil {
		return nil, err
	}
	for k, raw := range other {
		m[k] = raw
	}
	return json.Marshal(m)
}

// appendOther appends the names in other, sorted, to m.
func appendOther(m []string, other map[string]json.RawMessage) []string {
	start := len(m)
	for name := range other {
		m = append(m, name)
	}
	slices.Sort(m[start:])
	return m
}
