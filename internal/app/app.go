package app

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awsconfig "github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/bedrockruntime"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/lambda-agent/lambda-agent/internal/agent"
	"github.com/lambda-agent/lambda-agent/internal/ddbhistory"
	"github.com/lambda-agent/lambda-agent/internal/httpapi"
	"github.com/lambda-agent/lambda-agent/internal/tools"
)

// New builds the HTTP handler from cfg, with AWS clients made from awsCfg.
// Endpoints come from awsCfg, so AWS_ENDPOINT_URL_DYNAMODB and
// AWS_ENDPOINT_URL_BEDROCK_RUNTIME redirect the clients without any flag of
// ours.
func New(cfg *Config, awsCfg aws.Config, logger *slog.Logger) (*httpapi.Handler, error) {
	bedrock := bedrockruntime.NewFromConfig(awsCfg)
	a, err := NewAgent(cfg, bedrock)
	if err != nil {
		return nil, err
	}
	store, err := ddbhistory.New(dynamodb.NewFromConfig(awsCfg), ddbhistory.Config{
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
		RequireAuth:     cfg.RequireAuth,
		MaxMessageBytes: cfg.MaxMessageBytes,
		Logger:          logger,
	})
}

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
// environment and builds the handler: what a function does at init.
func FromEnvironment(ctx context.Context, getenv func(string) string, logger *slog.Logger) (*httpapi.Handler, error) {
	cfg, err := FromEnv(getenv)
	if err != nil {
		return nil, err
	}
	awsCfg, err := LoadAWSConfig(ctx)
	if err != nil {
		return nil, err
	}
	return New(cfg, awsCfg, logger)
}

// LoadAWSConfig loads the SDK's standard configuration: region, credentials
// and endpoint settings from the environment and shared files.
func LoadAWSConfig(ctx context.Context) (aws.Config, error) {
	cfg, err := awsconfig.LoadDefaultConfig(ctx)
	if err != nil {
		return aws.Config{}, fmt.Errorf("load AWS configuration: %w", err)
	}
	return cfg, nil
}
