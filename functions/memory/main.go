// Command memory is the memory function: it learns long-term memory from
// the sessions table's stream, or mirrors it into AgentCore Memory when
// AGENTCORE_MEMORY_ID is set (docs/memory.md). An event source mapping
// delivers the records of session items, which mark commits, and of forget
// markers; the handler, internal/memory's Extractor or internal/agentcore's
// Mirror, reports partial batch failures. It only wires things up: the
// configuration is read and checked, and the AWS clients are built, once
// at init.
package main

import (
	"context"
	"log/slog"
	"os"

	"github.com/aws/aws-lambda-go/lambda"
	"github.com/lambda-agent/lambda-agent/internal/app"
	"github.com/lambda-agent/lambda-agent/internal/telemetry"
)

func main() {
	logger := slog.New(telemetry.NewLogHandler(os.Stdout, os.Getenv))
	h, err := app.NewStreamHandlerFromEnv(context.Background(), os.Getenv, app.Options{Logger: logger, Metrics: os.Stdout})
	if err != nil {
		logger.Error("init failed", "error", err)
		os.Exit(1)
	}
	lambda.Start(h)
}
