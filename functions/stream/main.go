// Command stream is the streaming chat function, behind a Lambda function URL
// in RESPONSE_STREAM mode and a REST API whose methods stream: POST (on any
// path of the URL) streams a chat turn as Server-Sent Events, and the
// session routes serve the callers the URL or the REST API authenticates.
// It only wires things up: the configuration is read and checked, and the
// AWS clients are built, once at init; the handler lives in
// internal/httpapi, and internal/lambdahttp tells the two kinds of events
// apart and streams what the handler writes to either, through aws-lambda-go's
// lambdaurl for the URL.
package main

import (
	"context"
	"encoding/json"
	"io"
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
	lambda.StartHandlerFunc(handler(a))
}

// handler is the function's Lambda handler: a's HTTP handler, served to
// function URL events and REST API events alike.
func handler(a *app.App) func(context.Context, json.RawMessage) (io.Reader, error) {
	return lambdahttp.WrapStream(a.Handler, lambdahttp.StreamOptions{AllowedOrigins: a.Config.AllowedOrigins})
}
