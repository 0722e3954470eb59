package httpapi

import (
	"context"

	"github.com/aws/aws-lambda-go/events"
	"github.com/lambda-agent/lambda-agent/internal/lambdahttp"
)

type authorizerKey struct{}

// WithAuthorizer returns ctx carrying what an authorizer verified about the
// caller, for requests that no Lambda event brought: the local run, which
// decodes bearer tokens as sam local does.
func WithAuthorizer(ctx context.Context, a *events.APIGatewayV2HTTPRequestContextAuthorizerDescription) context.Context {
	return context.WithValue(ctx, authorizerKey{}, a)
}

// authorizer returns what the platform verified about the caller of the
// request whose context is ctx: the API Gateway event's authorizer, the
// function URL's IAM caller, or what WithAuthorizer set; nil for none.
func authorizer(ctx context.Context) *events.APIGatewayV2HTTPRequestContextAuthorizerDescription {
	if a, ok := ctx.Value(authorizerKey{}).(*events.APIGatewayV2HTTPRequestContextAuthorizerDescription); ok {
		return a
	}
	if ev, ok := lambdahttp.RequestFromContext(ctx); ok {
		return ev.RequestContext.Authorizer
	}
	if u, ok := lambdahttp.URLRequestFromContext(ctx); ok && u.RequestContext.Authorizer != nil && u.RequestContext.Authorizer.IAM != nil {
		iam := u.RequestContext.Authorizer.IAM
		return &events.APIGatewayV2HTTPRequestContextAuthorizerDescription{
			IAM: &events.APIGatewayV2HTTPRequestContextAuthorizerIAMDescription{
				AccessKey: iam.AccessKey, AccountID: iam.AccountID, CallerID: iam.CallerID,
				UserARN: iam.UserARN, UserID: iam.UserID,
			},
		}
	}
	return nil
}
