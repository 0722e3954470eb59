package jwtauth

import (
	"context"
	"errors"
	"fmt"
	"log/slog"

	"github.com/aws/aws-lambda-go/events"
)

// errUnauthorized is the error API Gateway answers with 401: a Lambda
// authorizer refuses a token by failing with exactly this message. Any
// other error it answers with 500.
var errUnauthorized = errors.New("Unauthorized")

// Handler returns a Lambda handler for API Gateway's TOKEN authorizer
// events: it verifies the event's token with v, and allows the method the
// event is for to a caller whose token verifies, naming the token's
// subject as the principal and as sub in the context, where the stream
// function reads it. A token that does not verify is refused (401); an
// issuer that cannot be asked fails the authorization (500), so that no
// token passes unchecked. Each authorization is logged once, with its
// outcome, never with the token.
//
// The policy allows the event's method only, so the authorizer's results
// must not be cached for the whole API: the template turns caching off,
// which also keeps exp exact.
func Handler(v *Verifier, logger *slog.Logger) func(context.Context, events.APIGatewayCustomAuthorizerRequest) (events.APIGatewayCustomAuthorizerResponse, error) {
	return func(ctx context.Context, ev events.APIGatewayCustomAuthorizerRequest) (events.APIGatewayCustomAuthorizerResponse, error) {
		claims, err := v.Verify(ctx, ev.AuthorizationToken)
		switch {
		case errors.Is(err, ErrInvalidToken):
			logger.InfoContext(ctx, "authorization", "outcome", "refused", "reason", err.Error(), "method", ev.MethodArn)
			return events.APIGatewayCustomAuthorizerResponse{}, errUnauthorized
		case err != nil:
			logger.ErrorContext(ctx, "authorization", "outcome", "failed", "error", err.Error(), "method", ev.MethodArn)
			return events.APIGatewayCustomAuthorizerResponse{}, fmt.Errorf("jwtauth: the token could not be checked: %w", err)
		}
		logger.InfoContext(ctx, "authorization", "outcome", "allowed", "method", ev.MethodArn)
		return events.APIGatewayCustomAuthorizerResponse{
			PrincipalID: claims.Subject,
			PolicyDocument: events.APIGatewayCustomAuthorizerPolicy{
				Version: "2012-10-17",
				Statement: []events.IAMPolicyStatement{{
					Action:   []string{"execute-api:Invoke"},
					Effect:   "Allow",
					Resource: []string{ev.MethodArn},
				}},
			},
			Context: map[string]any{"sub": claims.Subject, "iss": claims.Issuer},
		}, nil
	}
}
