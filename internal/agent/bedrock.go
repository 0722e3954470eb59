package agent

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/service/bedrockruntime"
	"github.com/aws/aws-sdk-go-v2/service/bedrockruntime/types"
	"github.com/aws/smithy-go"
	smithyhttp "github.com/aws/smithy-go/transport/http"
)

// ConverseAPI is the part of *bedrockruntime.Client that Bedrock uses.
type ConverseAPI interface {
	Converse(ctx context.Context, in *bedrockruntime.ConverseInput, optFns ...func(*bedrockruntime.Options)) (*bedrockruntime.ConverseOutput, error)
	ConverseStream(ctx context.Context, in *bedrockruntime.ConverseStreamInput, optFns ...func(*bedrockruntime.Options)) (*bedrockruntime.ConverseStreamOutput, error)
}

// BedrockConfig configures a Bedrock model.
type BedrockConfig struct {
	// ModelID is a model id, an inference profile id, or an ARN. Required.
	ModelID string
	// MaxTokens caps the tokens of each answer; 0 leaves the model's default.
	MaxTokens int
	// Temperature and TopP are sampling settings in [0, 1]; nil leaves the
	// model's default.
	Temperature *float64
	TopP        *float64
	// StopSequences end an answer early.
	StopSequences []string
	// Guardrail, if set, applies a Bedrock guardrail to every call.
	Guardrail *Guardrail
}

// Guardrail names a Bedrock guardrail.
type Guardrail struct {
	ID      string
	Version string
	// Trace asks Bedrock to return the guardrail's trace.
	Trace bool
}

// Bedrock is a Model served by Amazon Bedrock's Converse API.
type Bedrock struct {
	client ConverseAPI
	cfg    BedrockConfig
}

var _ StreamingModel = (*Bedrock)(nil)

// NewBedrock returns a Model that calls client. It does not retry: the SDK's
// retryer is turned off for its calls because the agent retries within the
// invocation's deadline, which the SDK does not know.
func NewBedrock(client ConverseAPI, cfg BedrockConfig) (*Bedrock, error) {
	if client == nil {
		return nil, errors.New("agent: bedrock: nil client")
	}
	if cfg.ModelID == "" {
		return nil, errors.New("agent: bedrock: ModelID is required")
	}
	if cfg.MaxTokens < 0 {
		return nil, fmt.Errorf("agent: bedrock: MaxTokens %d is negative", cfg.MaxTokens)
	}
	for name, v := range map[string]*float64{"Temperature": cfg.Temperature, "TopP": cfg.TopP} {
		if v != nil && (*v < 0 || *v > 1) {
			return nil, fmt.Errorf("agent: bedrock: %s %v is outside [0, 1]", name, *v)
		}
	}
	if g := cfg.Guardrail; g != nil && (g.ID == "" || g.Version == "") {
		return nil, errors.New("agent: bedrock: a guardrail needs both an id and a version")
	}
	return &Bedrock{client: client, cfg: cfg}, nil
}

// ModelID returns the model the calls go to.
func (b *Bedrock) ModelID() string { return b.cfg.ModelID }

// Converse sends req to Bedrock. Failures are *ModelError, except for the
// context's own errors, which are returned as they are.
func (b *Bedrock) Converse(ctx context.Context, req *ModelRequest) (*ModelResponse, error) {
	in, err := b.input(req)
	if err != nil {
		return nil, &ModelError{Kind: KindInvalid, Message: err.Error(), Err: err}
	}
	out, err := b.client.Converse(ctx, in, func(o *bedrockruntime.Options) { o.Retryer = aws.NopRetryer{} })
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, classify(err)
	}
	msg, ok := out.Output.(*types.ConverseOutputMemberMessage)
	if !ok {
		return nil, &ModelError{Kind: KindOther, Message: fmt.Sprintf("unexpected output %T", out.Output)}
	}
	m, err := fromBedrockMessage(msg.Value)
	if err != nil {
		return nil, &ModelError{Kind: KindOther, Message: "decode answer: " + err.Error(), Err: err}
	}
	resp := &ModelResponse{Message: m, StopReason: StopReason(out.StopReason)}
	if u := out.Usage; u != nil {
		resp.Usage = Usage{
			InputTokens:  int(aws.ToInt32(u.InputTokens)),
			OutputTokens: int(aws.ToInt32(u.OutputTokens)),
			TotalTokens:  int(aws.ToInt32(u.TotalTokens)),
		}
	}
	if out.Metrics != nil {
		resp.Latency = time.Duration(aws.ToInt64(out.Metrics.LatencyMs)) * time.Millisecond
	}
	return resp, nil
}

func (b *Bedrock) input(req *ModelRequest) (*bedrockruntime.ConverseInput, error) {
	msgs, err := toBedrockMessages(req.Messages)
	if err != nil {
		return nil, err
	}
	tools, err := toBedrockTools(req.Tools, req.ToolChoice)
	if err != nil {
		return nil, err
	}
	in := &bedrockruntime.ConverseInput{
		ModelId:    aws.String(b.cfg.ModelID),
		Messages:   msgs,
		ToolConfig: tools,
	}
	if req.System != "" {
		in.System = []types.SystemContentBlock{&types.SystemContentBlockMemberText{Value: req.System}}
	}
	if c := b.cfg; c.MaxTokens > 0 || c.Temperature != nil || c.TopP != nil || len(c.StopSequences) > 0 {
		ic := &types.InferenceConfiguration{StopSequences: c.StopSequences}
		if c.MaxTokens > 0 {
			ic.MaxTokens = aws.Int32(int32(min(c.MaxTokens, 1<<31-1)))
		}
		if c.Temperature != nil {
			ic.Temperature = aws.Float32(float32(*c.Temperature))
		}
		if c.TopP != nil {
			ic.TopP = aws.Float32(float32(*c.TopP))
		}
		in.InferenceConfig = ic
	}
	if g := b.cfg.Guardrail; g != nil {
		in.GuardrailConfig = &types.GuardrailConfiguration{
			GuardrailIdentifier: aws.String(g.ID),
			GuardrailVersion:    aws.String(g.Version),
		}
		if g.Trace {
			in.GuardrailConfig.Trace = types.GuardrailTraceEnabled
		}
	}
	return in, nil
}

// overflowMessages are the texts of the ValidationExceptions with which Bedrock
// and the models behind it report a request larger than the context window.
var overflowMessages = []string{
	"Input is too long for requested model",
	"input length and `max_tokens` exceed context limit",
	"too many total text bytes",
	"prompt is too long",
}

// toolChoiceMessages mark a ValidationException about forcing a tool on a
// model that only accepts "auto".
var toolChoiceMessages = []string{"toolChoice", "tool_choice", "tool choice"}

// contentMessages mark a ValidationException about an image or a document in
// the request. Bedrock passes on the model's own words after "The model
// returned the following errors:", often behind the block's path, such as
// "messages.0.content.1.image.source.bytes:". They are matched ignoring
// case.
var contentMessages = []string{
	// Claude: "The image was specified using the image/jpeg media type, but
	// the image appears to be a image/png image".
	"but the image appears to be",
	// Llama: "The provided image does not match the specified image format."
	"does not match the specified image format",
	// Claude, for an image it cannot decode.
	"could not process image",
	// Claude, for a PDF it cannot read.
	"the pdf specified was not valid",
	// Claude: "The document source bytes could not be parsed as the
	// specified format."
	"source bytes could not be parsed",
	// A model that takes no images: "This model doesn't support the image
	// field for user messages."
	"doesn't support the image field",
	// The path of an image's or a document's bytes.
	"image.source", "source.bytes",
}

// classify maps an SDK error to a *ModelError. It is the only place that
// looks at Bedrock's error codes and texts.
func classify(err error) *ModelError {
	me := &ModelError{Kind: KindOther, Message: err.Error(), Err: err}
	var re *awshttp.ResponseError
	if errors.As(err, &re) {
		me.Status = re.HTTPStatusCode()
	}
	var api smithy.APIError
	if !errors.As(err, &api) {
		var send *smithyhttp.RequestSendError
		if errors.As(err, &send) {
			me.Kind = KindUnavailable // the request never reached Bedrock or its answer was lost
		}
		return me
	}
	me.Code, me.Message = api.ErrorCode(), api.ErrorMessage()
	switch me.Code {
	case "ThrottlingException":
		me.Kind = KindThrottled
	case "ModelNotReadyException", "ServiceUnavailableException", "InternalServerException", "ModelTimeoutException",
		"ModelStreamErrorException": // a stream that broke off: "retry your request"
		me.Kind = KindUnavailable
	case "ValidationException":
		switch {
		case containsAny(me.Message, overflowMessages):
			me.Kind = KindOverflow
		case containsAny(strings.ToLower(me.Message), contentMessages):
			me.Kind = KindInvalidContent
		case containsAny(me.Message, toolChoiceMessages):
			me.Kind = KindToolChoiceUnsupported
		default:
			me.Kind = KindInvalid
		}
	case "AccessDeniedException":
		me.Kind = KindDenied
	case "ResourceNotFoundException":
		me.Kind = KindNotFound
	default:
		switch {
		case me.Status == 429:
			me.Kind = KindThrottled
		case me.Status >= 500:
			me.Kind = KindUnavailable
		}
	}
	return me
}

func containsAny(s string, subs []string) bool {
	for _, sub := range subs {
		if strings.Contains(s, sub) {
			return true
		}
	}
	return false
}
