package jwtauth_test

import (
	"bytes"
	"crypto"
	"log/slog"
	"strings"
	"testing"

	"github.com/aws/aws-lambda-go/events"
	"github.com/google/go-cmp/cmp"
	"github.com/lambda-agent/lambda-agent/internal/jwtauth"
)

const methodArn = "arn:aws:execute-api:us-east-1:123456789012:r3st4p1id0/stream/POST/agui"

// TestHandlerAllows: a token that verifies gets a policy that allows the
// event's method, and no other, with its subject as the principal and as
// sub in the context, which the stream function reads.
func TestHandlerAllows(t *testing.T) {
	is := newIssuer(t)
	var logs bytes.Buffer
	h := jwtauth.Handler(newVerifier(t, is, &clock{now: epoch}), slog.New(slog.NewJSONHandler(&logs, nil)))
	token := sign(t, keys()["k1"], crypto.SHA256, rs256("k1"), claims(is, nil))
	resp, err := h(t.Context(), events.APIGatewayCustomAuthorizerRequest{Type: "TOKEN", AuthorizationToken: "Bearer " + token, MethodArn: methodArn})
	if err != nil {
		t.Fatal(err)
	}
	want := events.APIGatewayCustomAuthorizerResponse{
		PrincipalID: "user-42",
		PolicyDocument: events.APIGatewayCustomAuthorizerPolicy{
			Version:   "2012-10-17",
			Statement: []events.IAMPolicyStatement{{Action: []string{"execute-api:Invoke"}, Effect: "Allow", Resource: []string{methodArn}}},
		},
		Context: map[string]any{"sub": "user-42", "iss": is.url},
	}
	if diff := cmp.Diff(want, resp); diff != "" {
		t.Errorf("response (-want +got):\n%s", diff)
	}
	if !strings.Contains(logs.String(), `"outcome":"allowed"`) || strings.Contains(logs.String(), token) {
		t.Errorf("log: %s", logs.String())
	}
}

// TestHandlerRefuses: a token that does not verify fails with exactly
// "Unauthorized", which API Gateway answers with 401; an issuer that cannot
// be asked fails with another error, which it answers with 500. Neither
// allows anything, and neither logs the token.
func TestHandlerRefuses(t *testing.T) {
	is := newIssuer(t)
	var logs bytes.Buffer
	h := jwtauth.Handler(newVerifier(t, is, &clock{now: epoch}), slog.New(slog.NewJSONHandler(&logs, nil)))
	expired := sign(t, keys()["k1"], crypto.SHA256, rs256("k1"), claims(is, map[string]any{"exp": epoch.Unix() - 1}))
	resp, err := h(t.Context(), events.APIGatewayCustomAuthorizerRequest{Type: "TOKEN", AuthorizationToken: expired, MethodArn: methodArn})
	if err == nil || err.Error() != "Unauthorized" || resp.PrincipalID != "" || len(resp.PolicyDocument.Statement) != 0 {
		t.Errorf("an expired token: %+v, %v; want the error Unauthorized", resp, err)
	}
	if !strings.Contains(logs.String(), `"outcome":"refused"`) || !strings.Contains(logs.String(), "expired") || strings.Contains(logs.String(), expired) {
		t.Errorf("log: %s", logs.String())
	}

	down := newIssuer(t)
	down.status = 503
	logs.Reset()
	h = jwtauth.Handler(newVerifier(t, down, &clock{now: epoch}), slog.New(slog.NewJSONHandler(&logs, nil)))
	token := sign(t, keys()["k1"], crypto.SHA256, rs256("k1"), claims(down, nil))
	resp, err = h(t.Context(), events.APIGatewayCustomAuthorizerRequest{Type: "TOKEN", AuthorizationToken: token, MethodArn: methodArn})
	if err == nil || err.Error() == "Unauthorized" || resp.PrincipalID != "" || len(resp.PolicyDocument.Statement) != 0 {
		t.Errorf("an issuer that answers 503: %+v, %v; want an error other than Unauthorized", resp, err)
	}
	if !strings.Contains(logs.String(), `"level":"ERROR"`) || !strings.Contains(logs.String(), "status 503") {
		t.Errorf("log: %s", logs.String())
	}
}
