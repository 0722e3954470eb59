package httpapi_test

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-lambda-go/lambdaurl"
	"github.com/lambda-agent/lambda-agent/internal/httpapi"
	"github.com/lambda-agent/lambda-agent/internal/lambdahttp"
	"github.com/lambda-agent/lambda-agent/internal/testkit"
)

// card is what an agent card says of where and how to call the agent.
type card struct {
	Description         string `json:"description"`
	SupportedInterfaces []struct {
		URL             string `json:"url"`
		ProtocolBinding string `json:"protocolBinding"`
		ProtocolVersion string `json:"protocolVersion"`
	} `json:"supportedInterfaces"`
	SecuritySchemes map[string]struct {
		OpenIDConnect *struct {
			URL string `json:"openIdConnectUrl"`
		} `json:"openIdConnectSecurityScheme"`
	} `json:"securitySchemes"`
}

func decodeCard(t *testing.T, status int, body io.Reader) card {
	t.Helper()
	raw, _ := io.ReadAll(body)
	var c card
	if status != http.StatusOK || json.Unmarshal(raw, &c) != nil || len(c.SupportedInterfaces) != 1 {
		t.Fatalf("%d %s", status, raw)
	}
	return c
}

// TestAgentCardSaysHowToCall: the card names POST /a2a where the request
// for it came, through the function URL or under the REST API's stage, or
// A2A_PUBLIC_URL; and the way its callers authenticate, as that request
// did: SigV4 for lambda through the URL, an OpenID Connect scheme of the
// token's issuer through the REST API, SigV4 for execute-api there.
func TestAgentCardSaysHowToCall(t *testing.T) {
	a := newAPI(t, nil)
	url := lambdaurl.Wrap(a.handler(t, httpapi.FunctionURLRoutes))
	resp, err := url(t.Context(), &events.LambdaFunctionURLRequest{
		Version: "2.0", RawPath: "/.well-known/agent-card.json",
		Headers: map[string]string{"host": "abc.lambda-url.us-east-1.on.aws"},
		RequestContext: events.LambdaFunctionURLRequestContext{
			RequestID: "r1", DomainName: "abc.lambda-url.us-east-1.on.aws",
			HTTP:       events.LambdaFunctionURLRequestContextHTTPDescription{Method: http.MethodGet, Path: "/.well-known/agent-card.json"},
			Authorizer: &events.LambdaFunctionURLRequestContextAuthorizerDescription{IAM: &events.LambdaFunctionURLRequestContextAuthorizerIAMDescription{UserARN: "arn:aws:iam::123456789012:user/alice", AccountID: "123456789012"}},
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	c := decodeCard(t, resp.StatusCode, resp.Body)
	if c.SupportedInterfaces[0].URL != "https://abc.lambda-url.us-east-1.on.aws/a2a" || len(c.SecuritySchemes) != 0 || !strings.Contains(c.Description, "for the service lambda") {
		t.Errorf("through the function URL: %+v", c)
	}

	rest := lambdahttp.WrapProxyStream(a.handler(t, httpapi.FunctionURLRoutes), lambdahttp.StreamOptions{})
	restCard := func(t *testing.T, authorizer map[string]any, identity bool) card {
		t.Helper()
		ev, err := testkit.ProxyEvent("agui-rest.json")
		if err != nil {
			t.Fatal(err)
		}
		ev.HTTPMethod, ev.Path, ev.Resource, ev.Body = http.MethodGet, "/.well-known/agent-card.json", "/.well-known/agent-card.json", ""
		ev.RequestContext.HTTPMethod, ev.RequestContext.ResourcePath = http.MethodGet, "/.well-known/agent-card.json"
		ev.RequestContext.Authorizer = authorizer
		if identity {
			ev.RequestContext.Identity = events.APIGatewayRequestIdentity{UserArn: "arn:aws:iam::123456789012:user/bob", AccountID: "123456789012", Caller: "AIDA"}
		}
		resp, err := rest(t.Context(), &ev)
		if err != nil {
			t.Fatal(err)
		}
		return decodeCard(t, resp.StatusCode, resp.Body)
	}
	const issuer = "https://cognito-idp.us-east-1.amazonaws.com/us-east-1_AbC"
	c = restCard(t, map[string]any{"claims": map[string]any{"sub": "u-1", "iss": issuer}}, false)
	if c.SupportedInterfaces[0].URL != "https://r3st4p1id0.execute-api.us-east-1.amazonaws.com/stream/a2a" || c.SecuritySchemes["jwt"].OpenIDConnect == nil ||
		c.SecuritySchemes["jwt"].OpenIDConnect.URL != issuer+"/.well-known/openid-configuration" {
		t.Errorf("through the REST API, with a JWT: %+v", c)
	}
	c = restCard(t, map[string]any{"principalId": "u-2", "sub": "u-2", "iss": "https://login.example.com/"}, false)
	if c.SecuritySchemes["jwt"].OpenIDConnect == nil || c.SecuritySchemes["jwt"].OpenIDConnect.URL != "https://login.example.com/.well-known/openid-configuration" {
		t.Errorf("through the REST API, with the Lambda authorizer's JWT: %+v", c)
	}
	c = restCard(t, nil, true)
	if len(c.SecuritySchemes) != 0 || !strings.Contains(c.Description, "for the service execute-api") {
		t.Errorf("through the REST API, signed: %+v", c)
	}

	pub := newAPI(t, map[string]string{"A2A_PUBLIC_URL": "https://agents.example.com/support/a2a", "A2A_NAME": "support"})
	w := httptest.NewRecorder()
	pub.h.ServeHTTP(w, httptest.NewRequest(http.MethodGet, "/.well-known/agent-card.json", nil))
	if c := decodeCard(t, w.Code, w.Body); c.SupportedInterfaces[0].URL != "https://agents.example.com/support/a2a" {
		t.Errorf("with A2A_PUBLIC_URL: %+v", c)
	}
}
