package functions_test

import (
	"crypto"
	"crypto/rand"
	"crypto/rsa"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"errors"
	"math/big"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/lambda-agent/lambda-agent/internal/testkit/runtimetest"
)

// TestAuthorizerThroughTheBuiltFunction builds the REST API's Lambda
// authorizer and invokes it as API Gateway does, with TOKEN events, against
// an issuer on a TLS server that the process trusts through SSL_CERT_FILE,
// as it trusts a real issuer through the system's roots: a token signed by
// the issuer's key is allowed for the event's method with its subject, an
// expired one is refused with the error API Gateway answers 401 for, and a
// missing issuer fails the function at init.
func TestAuthorizerThroughTheBuiltFunction(t *testing.T) {
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	var issuer string
	mux := http.NewServeMux()
	mux.HandleFunc("GET /.well-known/openid-configuration", func(w http.ResponseWriter, r *http.Request) {
		_ = json.NewEncoder(w).Encode(map[string]string{"issuer": issuer, "jwks_uri": issuer + "/keys"})
	})
	mux.HandleFunc("GET /keys", func(w http.ResponseWriter, r *http.Request) {
		_ = json.NewEncoder(w).Encode(map[string]any{"keys": []map[string]string{{
			"kty": "RSA", "kid": "k1", "use": "sig", "alg": "RS256",
			"n": base64.RawURLEncoding.EncodeToString(key.N.Bytes()),
			"e": base64.RawURLEncoding.EncodeToString(big.NewInt(int64(key.E)).Bytes()),
		}}})
	})
	srv := httptest.NewTLSServer(mux)
	defer srv.Close()
	issuer = srv.URL
	dir := t.TempDir()
	roots := filepath.Join(dir, "roots.pem")
	if err := os.WriteFile(roots, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw}), 0o600); err != nil {
		t.Fatal(err)
	}
	bin, err := runtimetest.Build(t.Context(), "./authorizer", filepath.Join(dir, "authorizer"))
	if err != nil {
		t.Fatal(err)
	}
	fn, err := runtimetest.Start(t.Context(), bin, runtimetest.Config{Name: "authorizer", Env: []string{
		"JWT_ISSUER=" + issuer, "JWT_AUDIENCE=client-a, client-b", "SSL_CERT_FILE=" + roots, "AWS_LAMBDA_LOG_FORMAT=JSON",
	}})
	if err != nil {
		t.Fatal(err)
	}
	defer fn.Close()

	token := func(exp time.Time) string {
		part := func(v any) string {
			b, _ := json.Marshal(v)
			return base64.RawURLEncoding.EncodeToString(b)
		}
		signing := part(map[string]string{"alg": "RS256", "kid": "k1"}) + "." +
			part(map[string]any{"iss": issuer, "aud": "client-b", "sub": "user-42", "exp": exp.Unix(), "iat": time.Now().Add(-time.Minute).Unix()})
		h := crypto.SHA256.New()
		h.Write([]byte(signing))
		sig, err := rsa.SignPKCS1v15(rand.Reader, key, crypto.SHA256, h.Sum(nil))
		if err != nil {
			t.Fatal(err)
		}
		return signing + "." + base64.RawURLEncoding.EncodeToString(sig)
	}
	const method = "arn:aws:execute-api:us-east-1:123456789012:r3st4p1id0/stream/POST/agui"
	invoke := func(tok string) ([]byte, error) {
		ev, _ := json.Marshal(events.APIGatewayCustomAuthorizerRequest{Type: "TOKEN", AuthorizationToken: tok, MethodArn: method})
		return fn.Invoke(t.Context(), ev, 10*time.Second)
	}

	out, err := invoke("Bearer " + token(time.Now().Add(time.Hour)))
	if err != nil {
		t.Fatalf("a valid token: %v\nlogs:\n%s", err, fn.Logs())
	}
	var resp events.APIGatewayCustomAuthorizerResponse
	if err := json.Unmarshal(out, &resp); err != nil {
		t.Fatalf("%s: %v", out, err)
	}
	if resp.PrincipalID != "user-42" || resp.Context["sub"] != "user-42" || len(resp.PolicyDocument.Statement) != 1 ||
		resp.PolicyDocument.Statement[0].Effect != "Allow" || strings.Join(resp.PolicyDocument.Statement[0].Resource, ",") != method {
		t.Errorf("a valid token: %s", out)
	}

	_, err = invoke(token(time.Now().Add(-time.Minute)))
	var ierr *runtimetest.InvokeError
	if !errors.As(err, &ierr) || ierr.Message != "Unauthorized" {
		t.Errorf("an expired token: %v; want the function error Unauthorized", err)
	}
	// The function's output reaches its log through a pipe: what it wrote
	// is all there once it has exited.
	_ = fn.Close()
	if logs := fn.Logs(); !strings.Contains(logs, `"outcome":"refused"`) || strings.Contains(logs, token(time.Now())[:40]) {
		t.Errorf("logs:\n%s", logs)
	}

	noIssuer, err := runtimetest.Start(t.Context(), bin, runtimetest.Config{Name: "authorizer", Env: []string{"JWT_AUDIENCE=client-a"}})
	if err != nil {
		t.Fatal(err)
	}
	defer noIssuer.Close()
	ev, _ := json.Marshal(events.APIGatewayCustomAuthorizerRequest{Type: "TOKEN", AuthorizationToken: "x", MethodArn: method})
	_, err = noIssuer.Invoke(t.Context(), ev, 10*time.Second)
	var exit *runtimetest.ExitError
	if !errors.As(err, &exit) || !strings.Contains(noIssuer.Logs(), "JWT_ISSUER") {
		t.Errorf("no JWT_ISSUER: %v\nlogs:\n%s", err, noIssuer.Logs())
	}
}
