// Command stream is the streaming chat function, behind a Lambda function URL
// in RESPONSE_STREAM mode: POST (on any path) streams a chat turn as
// Server-Sent Events, and the session routes serve the callers the URL
// authenticates. It only wires things up: the configuration is read and
// checked, and the AWS clients are built, once at init; the handler lives in
// internal/httpapi, and aws-lambda-go's lambdaurl streams what it writes,
// through internal/lambdahttp, which escapes the raw paths lambdaurl cannot
// parse.
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
	a, err := app.NewFromEnv(context.Background(), os.Getenv, app.Options{Routes: httpapi.FunctionURLRoutes, Logger: logger, Metrics: os.Stdout})
	if err != nil {
		logger.Error("init failed", "error", err)
		os.Exit(1)
	}
	lambda.StartHandlerFunc(lambdahttp.WrapURL(a.Handler))
}
