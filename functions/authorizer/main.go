// Command authorizer is the Lambda TOKEN authorizer of the stack's REST
// API, for JWTs of an issuer that is not a Cognito user pool: REST APIs
// have no JWT authorizer, so this checks what the HTTP API's checks (see
// internal/jwtauth) and hands the token's subject to the stream function.
// It only wires things up: JWT_ISSUER and JWT_AUDIENCE (comma-separated)
// are read and checked at init. The issuer's keys are fetched at the first
// token and kept for the life of the execution environment.
package main

import (
	"log/slog"
	"os"
	"strings"

	"github.com/aws/aws-lambda-go/lambda"
	"github.com/lambda-agent/lambda-agent/internal/jwtauth"
	"github.com/lambda-agent/lambda-agent/internal/telemetry"
)

func main() {
	logger := slog.New(telemetry.NewLogHandler(os.Stdout, os.Getenv))
	var audiences []string
	for a := range strings.SplitSeq(os.Getenv("JWT_AUDIENCE"), ",") {
		if a = strings.TrimSpace(a); a != "" {
			audiences = append(audiences, a)
		}
	}
	v, err := jwtauth.New(jwtauth.Config{Issuer: os.Getenv("JWT_ISSUER"), Audiences: audiences})
	if err != nil {
		logger.Error("init failed", "error", err, "JWT_ISSUER", os.Getenv("JWT_ISSUER"), "JWT_AUDIENCE", os.Getenv("JWT_AUDIENCE"))
		os.Exit(1)
	}
	lambda.Start(jwtauth.Handler(v, logger))
}
