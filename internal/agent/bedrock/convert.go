package bedrock

// This file is the one place where the agent's message model meets Bedrock's
// bedrockruntime/types. Bedrock's unions do not survive encoding/json, so they
// exist only for the length of a call.

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"slices"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/bedrockruntime/document"
	"github.com/aws/aws-sdk-go-v2/service/bedrockruntime/types"
	smithydocument "github.com/aws/smithy-go/document"
	"github.com/lambda-agent/lambda-agent/internal/agent"
)

// ErrUnsupportedContent is returned for a content block that the agent's
// message model cannot carry, such as video or an unknown union member from a
// newer API. Model returns it wrapped in a *agent.ModelError.
var ErrUnsupportedContent = errors.New("unsupported content block")

func toBedrockMessages(msgs []agent.Message) ([]types.Message, error) {
	out := make([]types.Message, len(msgs))
	for i, m := range msgs {
		bm, err := toBedrockMessage(m)
		if err != nil {
			return nil, fmt.Errorf("message %d: %w", i, err)
		}
		out[i] = bm
	}
	return out, nil
}

func toBedrockMessage(m agent.Message) (types.Message, error) {
	content := make([]types.ContentBlock, len(m.Content))
	for i, b := range m.Content {
		cb, err := toBedrockBlock(b)
		if err != nil {
			return types.Message{}, fmt.Errorf("block %d: %w", i, err)
		}
		content[i] = cb
	}
	return types.Message{Role: types.ConversationRole(m.Role), Content: content}, nil
}

func toBedrockBlock(b agent.ContentBlock) (types.ContentBlock, error) {
	switch {
	case b.Image != nil:
		img, err := toBedrockImage(b.Image)
		return &types.ContentBlockMemberImage{Value: img}, err
	case b.Document != nil:
		doc, err := toBedrockDocument(b.Document)
		return &types.ContentBlockMemberDocument{Value: doc}, err
	case b.ToolUse != nil:
		input, err := toDocument(b.ToolUse.Input, true)
		if err != nil {
			return nil, fmt.Errorf("tool use %s: %w", b.ToolUse.ToolUseID, err)
		}
		return &types.ContentBlockMemberToolUse{Value: types.ToolUseBlock{
			ToolUseId: aws.String(b.ToolUse.ToolUseID),
			Name:      aws.String(b.ToolUse.Name),
			Input:     input,
		}}, nil
	case b.ToolResult != nil:
		r, err := toBedrockToolResult(b.ToolResult)
		return &types.ContentBlockMemberToolResult{Value: r}, err
	case b.Reasoning != nil:
		if b.Reasoning.Redacted != nil {
			return &types.ContentBlockMemberReasoningContent{
				Value: &types.ReasoningContentBlockMemberRedactedContent{Value: b.Reasoning.Redacted},
			}, nil
		}
		rt := types.ReasoningTextBlock{Text: aws.String(b.Reasoning.Text)}
		if b.Reasoning.Signature != "" {
			rt.Signature = aws.String(b.Reasoning.Signature)
		}
		return &types.ContentBlockMemberReasoningContent{
			Value: &types.ReasoningContentBlockMemberReasoningText{Value: rt},
		}, nil
	case b.Text != "":
		return &types.ContentBlockMemberText{Value: b.Text}, nil
	default:
		return nil, fmt.Errorf("%w: empty block", ErrUnsupportedContent)
	}
}

func toBedrockImage(img *agent.ImageBlock) (types.ImageBlock, error) {
	out := types.ImageBlock{Format: types.ImageFormat(img.Format)}
	switch s := img.Source; {
	case s.Bytes != nil:
		out.Source = &types.ImageSourceMemberBytes{Value: s.Bytes}
	case s.S3 != nil:
		out.Source = &types.ImageSourceMemberS3Location{Value: toBedrockS3(s.S3)}
	default:
		return out, fmt.Errorf("%w: image without bytes or s3Location", ErrUnsupportedContent)
	}
	return out, nil
}

func toBedrockDocument(d *agent.DocumentBlock) (types.DocumentBlock, error) {
	out := types.DocumentBlock{Format: types.DocumentFormat(d.Format), Name: aws.String(d.Name)}
	switch s := d.Source; {
	case s.Bytes != nil:
		out.Source = &types.DocumentSourceMemberBytes{Value: s.Bytes}
	case s.S3 != nil:
		out.Source = &types.DocumentSourceMemberS3Location{Value: toBedrockS3(s.S3)}
	case s.Text != "":
		out.Source = &types.DocumentSourceMemberText{Value: s.Text}
	default:
		return out, fmt.Errorf("%w: document without a source", ErrUnsupportedContent)
	}
	return out, nil
}

func toBedrockS3(l *agent.S3Location) types.S3Location {
	out := types.S3Location{Uri: aws.String(l.URI)}
	if l.BucketOwner != "" {
		out.BucketOwner = aws.String(l.BucketOwner)
	}
	return out
}

func toBedrockToolResult(r *agent.ToolResultBlock) (types.ToolResultBlock, error) {
	out := types.ToolResultBlock{
		ToolUseId: aws.String(r.ToolUseID),
		Status:    types.ToolResultStatus(r.Status),
		Content:   make([]types.ToolResultContentBlock, len(r.Content)),
	}
	for i, c := range r.Content {
		switch {
		case c.JSON != nil:
			doc, err := toDocument(c.JSON, false)
			switch {
			case errors.Is(err, errEmptyKey):
				out.Content[i] = &types.ToolResultContentBlockMemberText{Value: string(c.JSON)}
			case err != nil:
				return out, fmt.Errorf("tool result %s: %w", r.ToolUseID, err)
			default:
				out.Content[i] = &types.ToolResultContentBlockMemberJson{Value: doc}
			}
		case c.Image != nil:
			img, err := toBedrockImage(c.Image)
			if err != nil {
				return out, err
			}
			out.Content[i] = &types.ToolResultContentBlockMemberImage{Value: img}
		case c.Document != nil:
			doc, err := toBedrockDocument(c.Document)
			if err != nil {
				return out, err
			}
			out.Content[i] = &types.ToolResultContentBlockMemberDocument{Value: doc}
		default:
			out.Content[i] = &types.ToolResultContentBlockMemberText{Value: c.Text}
		}
	}
	return out, nil
}

func fromBedrockMessage(m types.Message) (agent.Message, error) {
	out := agent.Message{Role: agent.Role(m.Role), Content: make([]agent.ContentBlock, 0, len(m.Content))}
	for i, cb := range m.Content {
		b, err := fromBedrockBlock(cb)
		if err != nil {
			return agent.Message{}, fmt.Errorf("block %d: %w", i, err)
		}
		out.Content = append(out.Content, b)
	}
	return out, nil
}

func fromBedrockBlock(cb types.ContentBlock) (agent.ContentBlock, error) {
	switch v := cb.(type) {
	case *types.ContentBlockMemberText:
		return agent.ContentBlock{Text: v.Value}, nil
	case *types.ContentBlockMemberImage:
		img, err := fromBedrockImage(v.Value)
		return agent.ContentBlock{Image: img}, err
	case *types.ContentBlockMemberDocument:
		doc, err := fromBedrockDocument(v.Value)
		return agent.ContentBlock{Document: doc}, err
	case *types.ContentBlockMemberToolUse:
		input, err := fromDocument(v.Value.Input)
		if err != nil {
			return agent.ContentBlock{}, fmt.Errorf("tool use %s: %w", aws.ToString(v.Value.ToolUseId), err)
		}
		return agent.ContentBlock{ToolUse: &agent.ToolUseBlock{
			ToolUseID: aws.ToString(v.Value.ToolUseId),
			Name:      aws.ToString(v.Value.Name),
			Input:     input,
		}}, nil
	case *types.ContentBlockMemberToolResult:
		r, err := fromBedrockToolResult(v.Value)
		return agent.ContentBlock{ToolResult: r}, err
	case *types.ContentBlockMemberReasoningContent:
		switch r := v.Value.(type) {
		case *types.ReasoningContentBlockMemberReasoningText:
			return agent.ContentBlock{Reasoning: &agent.ReasoningBlock{
				Text:      aws.ToString(r.Value.Text),
				Signature: aws.ToString(r.Value.Signature),
			}}, nil
		case *types.ReasoningContentBlockMemberRedactedContent:
			return agent.ContentBlock{Reasoning: &agent.ReasoningBlock{Redacted: r.Value}}, nil
		default:
			return agent.ContentBlock{}, fmt.Errorf("%w: reasoning %T", ErrUnsupportedContent, r)
		}
	case *types.UnknownUnionMember:
		return agent.ContentBlock{}, fmt.Errorf("%w: unknown member %q", ErrUnsupportedContent, v.Tag)
	default:
		return agent.ContentBlock{}, fmt.Errorf("%w: %T", ErrUnsupportedContent, v)
	}
}

func fromBedrockImage(img types.ImageBlock) (*agent.ImageBlock, error) {
	out := &agent.ImageBlock{Format: string(img.Format)}
	switch s := img.Source.(type) {
	case *types.ImageSourceMemberBytes:
		out.Source.Bytes = s.Value
	case *types.ImageSourceMemberS3Location:
		out.Source.S3 = fromBedrockS3(s.Value)
	default:
		return nil, fmt.Errorf("%w: image source %T", ErrUnsupportedContent, s)
	}
	return out, nil
}

func fromBedrockDocument(d types.DocumentBlock) (*agent.DocumentBlock, error) {
	out := &agent.DocumentBlock{Format: string(d.Format), Name: aws.ToString(d.Name)}
	switch s := d.Source.(type) {
	case *types.DocumentSourceMemberBytes:
		out.Source.Bytes = s.Value
	case *types.DocumentSourceMemberS3Location:
		out.Source.S3 = fromBedrockS3(s.Value)
	case *types.DocumentSourceMemberText:
		out.Source.Text = s.Value
	default:
		return nil, fmt.Errorf("%w: document source %T", ErrUnsupportedContent, s)
	}
	return out, nil
}

func fromBedrockS3(l types.S3Location) *agent.S3Location {
	return &agent.S3Location{URI: aws.ToString(l.Uri), BucketOwner: aws.ToString(l.BucketOwner)}
}

func fromBedrockToolResult(r types.ToolResultBlock) (*agent.ToolResultBlock, error) {
	out := &agent.ToolResultBlock{
		ToolUseID: aws.ToString(r.ToolUseId),
		Status:    agent.ToolResultStatus(r.Status),
		Content:   make([]agent.ToolResultContent, len(r.Content)),
	}
	for i, c := range r.Content {
		switch v := c.(type) {
		case *types.ToolResultContentBlockMemberText:
			out.Content[i].Text = v.Value
		case *types.ToolResultContentBlockMemberJson:
			raw, err := fromDocument(v.Value)
			if err != nil {
				return nil, fmt.Errorf("tool result %s: %w", out.ToolUseID, err)
			}
			out.Content[i].JSON = raw
		case *types.ToolResultContentBlockMemberImage:
			img, err := fromBedrockImage(v.Value)
			if err != nil {
				return nil, err
			}
			out.Content[i].Image = img
		case *types.ToolResultContentBlockMemberDocument:
			doc, err := fromBedrockDocument(v.Value)
			if err != nil {
				return nil, err
			}
			out.Content[i].Document = doc
		default:
			return nil, fmt.Errorf("%w: tool result content %T", ErrUnsupportedContent, v)
		}
	}
	return out, nil
}

func toBedrockTools(specs []agent.ToolSpec, choice agent.ToolChoice) (*types.ToolConfiguration, error) {
	if len(specs) == 0 {
		return nil, nil
	}
	cfg := &types.ToolConfiguration{Tools: make([]types.Tool, len(specs))}
	for i, s := range specs {
		schema, err := toDocument(s.InputSchema, false)
		if err != nil {
			return nil, fmt.Errorf("tool %s: schema: %w", s.Name, err)
		}
		spec := types.ToolSpecification{
			Name:        aws.String(s.Name),
			InputSchema: &types.ToolInputSchemaMemberJson{Value: schema},
		}
		if s.Description != "" {
			spec.Description = aws.String(s.Description)
		}
		cfg.Tools[i] = &types.ToolMemberToolSpec{Value: spec}
	}
	switch {
	case choice.Tool != "":
		cfg.ToolChoice = &types.ToolChoiceMemberTool{Value: types.SpecificToolChoice{Name: aws.String(choice.Tool)}}
	case choice.Any:
		cfg.ToolChoice = &types.ToolChoiceMemberAny{}
	}
	return cfg, nil
}

// toDocument turns JSON into a smithy document. Numbers stay exact: they go
// through json.Number and smithy's document.Number rather than float64. Empty
// input becomes an empty object, which is what Bedrock expects of a tool input
// the model sent without arguments.
//
// The SDK cannot send an object with an empty key: its encoder refuses one,
// and the request serializer drops the error and sends invalid JSON. Such a
// key is errEmptyKey here, or, with renameEmpty, is sent as emptyKeyName.
func toDocument(raw json.RawMessage, renameEmpty bool) (document.Interface, error) {
	if len(bytes.TrimSpace(raw)) == 0 {
		return document.NewLazyDocument(map[string]any{}), nil
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, fmt.Errorf("decode JSON: %w", err)
	}
	v, err := forDocument(v, renameEmpty)
	if err != nil {
		return nil, err
	}
	return document.NewLazyDocument(v), nil
}

var errEmptyKey = errors.New("an object key is empty, which the AWS SDK cannot send")

// emptyKeyName stands for an empty key in what is sent.
const emptyKeyName = "(empty key)"

// forDocument prepares a decoded JSON value for the SDK's document encoder:
// exact numbers, and no empty keys.
func forDocument(v any, renameEmpty bool) (any, error) {
	switch v := v.(type) {
	case json.Number:
		return smithydocument.Number(v), nil
	case map[string]any:
		if e, ok := v[""]; ok {
			if !renameEmpty {
				return nil, errEmptyKey
			}
			delete(v, "")
			v[emptyKeyName] = e
		}
		for k, e := range v {
			var err error
			if v[k], err = forDocument(e, renameEmpty); err != nil {
				return nil, err
			}
		}
	case []any:
		for i, e := range v {
			var err error
			if v[i], err = forDocument(e, renameEmpty); err != nil {
				return nil, err
			}
		}
	}
	return v, nil
}

func fromDocument(d document.Interface) (json.RawMessage, error) {
	if d == nil {
		return json.RawMessage("{}"), nil
	}
	b, err := d.MarshalSmithyDocument()
	if err != nil {
		return nil, fmt.Errorf("encode document: %w", err)
	}
	return b, nil
}

// streamedMessage assembles the assistant message of a ConverseStream answer
// from its content-block events, which name their block by index.
type streamedMessage struct {
	blocks map[int32]*streamedBlock
}

type streamedBlock struct {
	text      bytes.Buffer
	toolUse   *agent.ToolUseBlock // set by the block's start event
	input     bytes.Buffer
	reasoning *agent.ReasoningBlock
}

func (s *streamedMessage) block(index *int32) *streamedBlock {
	if s.blocks == nil {
		s.blocks = map[int32]*streamedBlock{}
	}
	i := aws.ToInt32(index)
	b := s.blocks[i]
	if b == nil {
		b = &streamedBlock{}
		s.blocks[i] = b
	}
	return b
}

// start records a contentBlockStart event.
func (s *streamedMessage) start(e types.ContentBlockStartEvent) error {
	switch st := e.Start.(type) {
	case *types.ContentBlockStartMemberToolUse:
		s.block(e.ContentBlockIndex).toolUse = &agent.ToolUseBlock{
			ToolUseID: aws.ToString(st.Value.ToolUseId),
			Name:      aws.ToString(st.Value.Name),
		}
		return nil
	default:
		return fmt.Errorf("%w: content block start %T", ErrUnsupportedContent, st)
	}
}

// delta records a contentBlockDelta event and returns the text it added to
// a text block, if any.
func (s *streamedMessage) delta(e types.ContentBlockDeltaEvent) (string, error) {
	b := s.block(e.ContentBlockIndex)
	switch d := e.Delta.(type) {
	case *types.ContentBlockDeltaMemberText:
		b.text.WriteString(d.Value)
		return d.Value, nil
	case *types.ContentBlockDeltaMemberToolUse:
		b.input.WriteString(aws.ToString(d.Value.Input))
	case *types.ContentBlockDeltaMemberReasoningContent:
		if b.reasoning == nil {
			b.reasoning = &agent.ReasoningBlock{}
		}
		switch r := d.Value.(type) {
		case *types.ReasoningContentBlockDeltaMemberText:
			b.reasoning.Text += r.Value
		case *types.ReasoningContentBlockDeltaMemberSignature:
			b.reasoning.Signature += r.Value
		case *types.ReasoningContentBlockDeltaMemberRedactedContent:
			b.reasoning.Redacted = append(b.reasoning.Redacted, r.Value...)
		default:
			return "", fmt.Errorf("%w: reasoning delta %T", ErrUnsupportedContent, r)
		}
	default:
		return "", fmt.Errorf("%w: content block delta %T", ErrUnsupportedContent, d)
	}
	return "", nil
}

// message returns the assembled message, its blocks in index order.
func (s *streamedMessage) message() (agent.Message, error) {
	indexes := make([]int32, 0, len(s.blocks))
	for i := range s.blocks {
		indexes = append(indexes, i)
	}
	slices.Sort(indexes)
	m := agent.Message{Role: agent.RoleAssistant, Content: make([]agent.ContentBlock, 0, len(indexes))}
	for _, i := range indexes {
		b := s.blocks[i]
		switch {
		case b.toolUse != nil:
			input := bytes.TrimSpace(b.input.Bytes())
			if len(input) == 0 {
				input = []byte("{}")
			}
			var compact bytes.Buffer
			if err := json.Compact(&compact, input); err != nil || compact.Bytes()[0] != '{' {
				return agent.Message{}, fmt.Errorf("block %d: the input of tool use %s is not a JSON object", i, b.toolUse.ToolUseID)
			}
			u := *b.toolUse
			u.Input = compact.Bytes()
			m.Content = append(m.Content, agent.ContentBlock{ToolUse: &u})
		case b.reasoning != nil:
			m.Content = append(m.Content, agent.ContentBlock{Reasoning: b.reasoning})
		default:
			m.Content = append(m.Content, agent.Text(b.text.String()))
		}
	}
	return m, nil
}
