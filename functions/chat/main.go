// Command chat is the chat function: POST /chat, and GET and DELETE
// /sessions/{sessionId}, behind API Gateway's HTTP API. It only wires things
// up: the configuration is read and checked, and the AWS clients are built,
// once at init; the handler lives in internal/httpapi. It takes no schemas,
// so it does without a schema compiler and the start-up cost of one.
package main

import (
	"context"
	"os"

	"github.com/aws/aws-lambda-go/lambda"
	"github.com/aws/aws-lambda-go/lambdacontext"
	"github.com/lambda-agent/lambda-agent/internal/app"
)

func main() {
	logger := lambdacontext.NewLogger()
	h, err := app.FromEnvironment(context.Background(), os.Getenv, nil, logger)
	if err != nil {
		logger.Error("init failed", "error", err)
		os.Exit(1)
	}
	lambda.Start(h.Chat)
}
