// Command structured is the structured function: POST /structured, which
// answers with an object valid against the caller's JSON Schema, behind API
// Gateway's HTTP API. It only wires things up; the handler lives in
// internal/httpapi, and internal/lambdahttp serves API Gateway's events with
// it.
package main

import (
	"context"
	"os"

	"github.com/aws/aws-lambda-go/lambda"
	"github.com/aws/aws-lambda-go/lambdacontext"
	"github.com/lambda-agent/lambda-agent/internal/app"
	"github.com/lambda-agent/lambda-agent/internal/httpapi"
	"github.com/lambda-agent/lambda-agent/internal/lambdahttp"
	"github.com/lambda-agent/lambda-agent/internal/schema"
)

func main() {
	logger := lambdacontext.NewLogger()
	a, err := app.NewFromEnv(context.Background(), os.Getenv, app.Options{Routes: httpapi.StructuredRoutes, CompileSchema: schema.Compile, Logger: logger})
	if err != nil {
		logger.Error("init failed", "error", err)
		os.Exit(1)
	}
	lambda.Start(lambdahttp.Wrap(a.Handler))
}
