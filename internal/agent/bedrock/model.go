package bedrock

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/bedrockruntime"
	"github.com/aws/aws-sdk-go-v2/service/bedrockruntime/types"
	"github.com/lambda-agent/lambda-agent/internal/agent"
)

// ConverseAPI is the part of *bedrockruntime.Client that Model uses. Its
// methods return the SDK's errors, which Model classifies, and must be safe
// for concurrent use, as the SDK's client is.
type ConverseAPI interface {
	Converse(ctx context.Context, in *bedrockruntime.ConverseInput, optFns ...func(*bedrockruntime.Options)) (*bedrockruntime.ConverseOutput, error)
	ConverseStream(ctx context.Context, in *bedrockruntime.ConverseStreamInput, optFns ...func(*bedrockruntime.Options)) (*bedrockruntime.ConverseStreamOutput, error)
}

// Config configures a Model.
type Config struct {
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
	// Trace asks Bedrock to return the guardrail's trace, from which the
	// response says what the guardrail blocked (agent.GuardrailTrace).
	Trace bool
}

// Model is an agent.Model served by Amazon Bedrock's Converse API. It is
// safe for concurrent use.
type Model struct {
	client ConverseAPI
	cfg    Config
}

var _ agent.StreamingModel = (*Model)(nil)

// New returns a Model that calls client. It does not retry: the SDK's
// retryer is turned off for its calls because the agent retries within the
// invocation's deadline, which the SDK does not know.
func New(client ConverseAPI, cfg Config) (*Model, error) {
	if client == nil {
		return nil, errors.New("bedrock: nil client")
	}
	if cfg.ModelID == "" {
		return nil, errors.New("bedrock: ModelID is required")
	}
	if cfg.MaxTokens < 0 {
		return nil, fmt.Errorf("bedrock: MaxTokens %d is negative", cfg.MaxTokens)
	}
	for name, v := range map[string]*float64{"Temperature": cfg.Temperature, "TopP": cfg.TopP} {
		if v != nil && (*v < 0 || *v > 1) {
			return nil, fmt.Errorf("bedrock: %s %v is outside [0, 1]", name, *v)
		}
	}
	if g := cfg.Guardrail; g != nil && (g.ID == "" || g.Version == "") {
		return nil, errors.New("bedrock: a guardrail needs both an id and a version")
	}
	return &Model{client: client, cfg: cfg}, nil
}

// ModelID returns the model the calls go to.
func (m *Model) ModelID() string { return m.cfg.ModelID }

// Converse sends req to Bedrock. Failures are *agent.ModelError, except for
// the context's own errors, which are returned as they are.
func (m *Model) Converse(ctx context.Context, req *agent.ModelRequest) (*agent.ModelResponse, error) {
	in, err := m.input(req)
	if err != nil {
		return nil, &agent.ModelError{Kind: agent.KindInvalid, Message: err.Error(), Err: err}
	}
	start := time.Now()
	resp, err := m.converse(ctx, in)
	m.record(ctx, in, false, start, resp, err)
	return resp, err
}

// converse makes the call of Converse.
func (m *Model) converse(ctx context.Context, in *bedrockruntime.ConverseInput) (*agent.ModelResponse, error) {
	out, err := m.client.Converse(ctx, in, func(o *bedrockruntime.Options) { o.Retryer = aws.NopRetryer{} })
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, classify(m.cfg.ModelID, err)
	}
	msg, ok := out.Output.(*types.ConverseOutputMemberMessage)
	if !ok {
		return nil, &agent.ModelError{Kind: agent.KindOther, Message: fmt.Sprintf("unexpected output %T", out.Output)}
	}
	answer, err := fromBedrockMessage(msg.Value)
	if err != nil {
		return nil, &agent.ModelError{Kind: agent.KindOther, Message: "decode answer: " + err.Error(), Err: err}
	}
	resp := &agent.ModelResponse{Message: answer, StopReason: agent.StopReason(out.StopReason)}
	if u := out.Usage; u != nil {
		resp.Usage = usage(u)
	}
	if out.Metrics != nil {
		resp.Latency = time.Duration(aws.ToInt64(out.Metrics.LatencyMs)) * time.Millisecond
	}
	if out.Trace != nil {
		resp.Guardrail = guardrailTrace(out.Trace.Guardrail)
	}
	return resp, nil
}

// usage converts Bedrock's token counts.
func usage(u *types.TokenUsage) agent.Usage {
	return agent.Usage{
		InputTokens:           int(aws.ToInt32(u.InputTokens)),
		OutputTokens:          int(aws.ToInt32(u.OutputTokens)),
		TotalTokens:           int(aws.ToInt32(u.TotalTokens)),
		CacheReadInputTokens:  int(aws.ToInt32(u.CacheReadInputTokens)),
		CacheWriteInputTokens: int(aws.ToInt32(u.CacheWriteInputTokens)),
	}
}

func (m *Model) input(req *agent.ModelRequest) (*bedrockruntime.ConverseInput, error) {
	msgs, err := toBedrockMessages(req.Messages)
	if err != nil {
		return nil, err
	}
	tools, err := toBedrockTools(req.Tools, req.ToolChoice)
	if err != nil {
		return nil, err
	}
	in := &bedrockruntime.ConverseInput{
		ModelId:    aws.String(m.cfg.ModelID),
		Messages:   msgs,
		ToolConfig: tools,
	}
	if req.System != "" {
		in.System = []types.SystemContentBlock{&types.SystemContentBlockMemberText{Value: req.System}}
	}
	m.addCachePoints(in, req)
	if c := m.cfg; c.MaxTokens > 0 || c.Temperature != nil || c.TopP != nil || len(c.StopSequences) > 0 {
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
	if g := m.cfg.Guardrail; g != nil {
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
