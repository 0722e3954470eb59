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
// function URL's IAM caller, the REST API event's caller (see
// proxyAuthorizer), or what WithAuthorizer set; nil for none.
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
	if ev, ok := lambdahttp.ProxyRequestFromContext(ctx); ok {
		return proxyAuthorizer(ev)
	}
	return nil
}

// proxyAuthorizer returns the caller of a REST API event in the shape an
// HTTP API's authorizer has, so that each maps to the owner it has there:
//   - a Cognito user pool authorizer's claims (requestContext.authorizer.claims)
//     are a JWT's, whose subject owns the sessions;
//   - a Lambda authorizer (one that gave a principalId) is ours, which puts
//     the verified token's subject in its context as sub: a JWT's too;
//   - an IAM-signed request (requestContext.identity, with its access key,
//     caller and ARN) is the principal's.
//
// A caller that names nobody (claims or a context without a subject, a
// signature without an ARN) keeps an empty subject or ARN, which the owner
// refuses rather than take for anonymous. With no authorizer and no
// signature, the request names no caller.
func proxyAuthorizer(ev *events.APIGatewayProxyRequest) *events.APIGatewayV2HTTPRequestContextAuthorizerDescription {
	a := ev.RequestContext.Authorizer
	if claims, ok := a["claims"]; ok {
		m, _ := claims.(map[string]any)
		sub, _ := m["sub"].(string)
		iss, _ := m["iss"].(string)
		return jwtSubject(sub, iss)
	}
	if _, ok := a["principalId"]; ok {
		sub, _ := a["sub"].(string)
		iss, _ := a["iss"].(string)
		return jwtSubject(sub, iss)
	}
	if id := ev.RequestContext.Identity; id.UserArn != "" || id.AccessKey != "" || id.Caller != "" {
		return &events.APIGatewayV2HTTPRequestContextAuthorizerDescription{
			IAM: &events.APIGatewayV2HTTPRequestContextAuthorizerIAMDescription{
				AccessKey: id.AccessKey, AccountID: id.AccountID, CallerID: id.Caller,
				UserARN: id.UserArn, UserID: id.User,
			},
		}
	}
	return nil
}

func jwtSubject(sub, iss string) *events.APIGatewayV2HTTPRequestContextAuthorizerDescription {
	claims := map[string]string{"sub": sub}
	if iss != "" {
		claims["iss"] = iss
	}
	return &events.APIGatewayV2HTTPRequestContextAuthorizerDescription{
		JWT: &events.APIGatewayV2HTTPRequestContextAuthorizerJWTDescription{Claims: claims},
	}
}
