// Command structured is the structured function: POST /structured, which
// answers with an object valid against the caller's JSON Schema, behind API
// Gateway's HTTP API. It only wires things up; the handler lives in
// internal/httpapi, and internal/lambdahttp serves API Gateway's events with
// it.
package main

import (
	"context"
	"log/slog"
	"os"

	"github.com/aws/aws-lambda-go/lambda"
	"github.com/lambda-agent/lambda-agent/internal/app"
	"github.com/lambda-agent/lambda-agent/internal/httpapi"
	"github.com/lambda-agent/lambda-agent/internal/lambdahttp"
	"github.com/lambda-agent/lambda-agent/internal/schema"
	"github.com/lambda-agent/lambda-agent/internal/telemetry"
)

func main() {
	logger := slog.New(telemetry.NewLogHandler(os.Stdout, os.Getenv))
	a, err := app.NewFromEnv(context.Background(), os.Getenv, app.Options{Routes: httpapi.StructuredRoutes, CompileSchema: schema.Compile, Logger: logger, Metrics: os.Stdout})
	if err != nil {
		logger.Error("init failed", "error", err)
		os.Exit(1)
	}
	lambda.Start(lambdahttp.Wrap(a.Handler))
}
