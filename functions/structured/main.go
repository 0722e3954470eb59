// Command structured is the structured function: POST /structured, which
// answers with an object valid against the caller's JSON Schema. It only
// wires things up; the handler lives in internal/httpapi.
package main

import (
	"context"
	"os"

	"github.com/aws/aws-lambda-go/lambda"
	"github.com/aws/aws-lambda-go/lambdacontext"
	"github.com/lambda-agent/lambda-agent/internal/app"
	"github.com/lambda-agent/lambda-agent/internal/schema"
)

func main() {
	logger := lambdacontext.NewLogger()
	h, err := app.FromEnvironment(context.Background(), os.Getenv, schema.Compile, logger)
	if err != nil {
		logger.Error("init failed", "error", err)
		os.Exit(1)
	}
	lambda.Start(h.Structured)
}
