package app

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"time"

	awsconfig "github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/bedrockruntime"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/lambda-agent/lambda-agent/internal/agent"
	"github.com/lambda-agent/lambda-agent/internal/ddbhistory"
	"github.com/lambda-agent/lambda-agent/internal/httpapi"
	"github.com/lambda-agent/lambda-agent/internal/sdkhttp"
	"github.com/lambda-agent/lambda-agent/internal/tools"
)

// New builds the HTTP handler from cfg, calling Bedrock and DynamoDB
// through the given clients. compile compiles structured requests' schemas:
// schema.Compile for a handler that serves them, nil for one that does not.
func New(cfg *Config, bedrock agent.ConverseAPI, ddb ddbhistory.DynamoDBAPI, compile SchemaCompiler, logger *slog.Logger) (*httpapi.Handler, error) {
	a, err := NewAgent(cfg, bedrock)
	if err != nil {
		return nil, err
	}
	store, err := ddbhistory.New(ddb, ddbhistory.Config{
		Table: cfg.TableName,
		TTL:   time.Duration(cfg.SessionTTLDays) * 24 * time.Hour,
		// The window after a turn: the manager's size, plus the turn's
		// input and answer.
		WindowHint: cfg.WindowSize + 2,
	})
	if err != nil {
		return nil, err
	}
	return httpapi.New(httpapi.Config{
		Agent:           a,
		Store:           store,
		CompileSchema:   compile,
		RequireAuth:     cfg.RequireAuth,
		MaxMessageBytes: cfg.MaxMessageBytes,
		Logger:          logger,
	})
}

// SchemaCompiler compiles a JSON Schema that a caller supplies, as
// schema.Compile does.
type SchemaCompiler = func(json.RawMessage) (agent.Schema, error)

// NewAgent builds the agent from cfg, calling Bedrock through client.
func NewAgent(cfg *Config, client agent.ConverseAPI) (*agent.Agent, error) {
	bc := agent.BedrockConfig{ModelID: cfg.ModelID, MaxTokens: cfg.MaxTokens, Temperature: cfg.Temperature}
	if cfg.GuardrailID != "" {
		bc.Guardrail = &agent.Guardrail{ID: cfg.GuardrailID, Version: cfg.GuardrailVersion}
	}
	model, err := agent.NewBedrock(client, bc)
	if err != nil {
		return nil, err
	}
	var manager agent.ConversationManager
	switch cfg.Manager {
	case "none":
		manager = agent.NoManager{}
	case "summarizing":
		summarizer := model
		if cfg.SummarizerModelID != "" {
			bc.ModelID = cfg.SummarizerModelID
			bc.Guardrail = nil // the summary is of text the guardrail already saw
			if summarizer, err = agent.NewBedrock(client, bc); err != nil {
				return nil, err
			}
		}
		manager = agent.Summarizing{
			Model:          agent.Retrying(summarizer, agent.RetryPolicy{MaxAttempts: 3}),
			Ratio:          cfg.SummaryRatio,
			PreserveRecent: cfg.PreserveRecent,
			MaxMessages:    cfg.WindowSize,
		}
	default:
		manager = agent.SlidingWindow{Size: cfg.WindowSize}
	}
	builtins, err := tools.ByName(cfg.Tools)
	if err != nil {
		return nil, err
	}
	return agent.New(agent.Config{
		Model:               model,
		System:              cfg.SystemPrompt,
		Tools:               builtins,
		Manager:             manager,
		MaxCycles:           cfg.MaxCycles,
		ContextWindowTokens: cfg.ContextWindowTokens,
	})
}

// FromEnvironment reads the configuration and the AWS settings from the
// environment and builds the handler: what a function does at init. The
// clients' endpoints come from the SDK's standard settings, so
// AWS_ENDPOINT_URL_DYNAMODB and AWS_ENDPOINT_URL_BEDROCK_RUNTIME redirect them
// without any setting of ours.
func FromEnvironment(ctx context.Context, getenv func(string) string, compile SchemaCompiler, logger *slog.Logger) (*httpapi.Handler, error) {
	cfg, err := FromEnv(getenv)
	if err != nil {
		return nil, err
	}
	awsCfg, err := awsconfig.LoadDefaultConfig(ctx)
	if err != nil {
		return nil, fmt.Errorf("load AWS configuration: %w", err)
	}
	awsCfg.HTTPClient = sdkhttp.Wrap(awsCfg.HTTPClient)
	return New(cfg, bedrockruntime.NewFromConfig(awsCfg), dynamodb.NewFromConfig(awsCfg), compile, logger)
}
