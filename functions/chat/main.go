// Command chat is the chat function, behind API Gateway's HTTP API: POST
// /chat and the session routes (httpapi.ChatRoutes: list, read, delete,
// direct tool calls, rewinds, export and import). It only wires things
// up: the configuration is read and checked, and the AWS clients are built,
// once at init; the handler lives in internal/httpapi, and internal/lambdahttp
// serves API Gateway's events with it. It takes no schemas, so it does
// without a schema compiler and the start-up cost of one.
package main

import (
	"context"
	"log/slog"
	"os"

	"github.com/aws/aws-lambda-go/lambda"
	"github.com/lambda-agent/lambda-agent/internal/app"
	"github.com/lambda-agent/lambda-agent/internal/httpapi"
	"github.com/lambda-agent/lambda-agent/internal/lambdahttp"
	"github.com/lambda-agent/lambda-agent/internal/telemetry"
)

func main() {
	logger := slog.New(telemetry.NewLogHandler(os.Stdout, os.Getenv))
	a, err := app.NewFromEnv(context.Background(), os.Getenv, app.Options{Routes: httpapi.ChatRoutes, Logger: logger, Metrics: os.Stdout})
	if err != nil {
		logger.Error("init failed", "error", err)
		os.Exit(1)
	}
	lambda.Start(lambdahttp.Wrap(a.Handler))
}
