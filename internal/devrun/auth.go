package devrun

import (
	"encoding/base64"
	"encoding/json"
	"net/http"
	"strings"

	"github.com/aws/aws-lambda-go/events"
	"github.com/lambda-agent/lambda-agent/internal/httpapi"
)

// Authorize gives a request the identity its bearer JWT claims, decoded but
// not verified: locally, as with sam local, there is no authorizer. A
// request without a token has no identity.
func Authorize(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if claims := bearerClaims(r.Header.Get("Authorization")); claims != nil {
			r = r.WithContext(httpapi.WithAuthorizer(r.Context(), &events.APIGatewayV2HTTPRequestContextAuthorizerDescription{
				JWT: &events.APIGatewayV2HTTPRequestContextAuthorizerJWTDescription{Claims: claims},
			}))
		}
		h.ServeHTTP(w, r)
	})
}

// bearerClaims decodes the claims of a bearer JWT, unverified, as strings,
// the way API Gateway passes them to the function.
func bearerClaims(auth string) map[string]string {
	token, ok := strings.CutPrefix(auth, "Bearer ")
	if !ok {
		return nil
	}
	parts := strings.Split(strings.TrimSpace(token), ".")
	if len(parts) != 3 {
		return nil
	}
	payload, err := base64.RawURLEncoding.DecodeString(strings.TrimRight(parts[1], "="))
	if err != nil {
		return nil
	}
	var raw map[string]any
	if json.Unmarshal(payload, &raw) != nil {
		return nil
	}
	claims := make(map[string]string, len(raw))
	for k, v := range raw {
		if s, ok := v.(string); ok {
			claims[k] = s
		} else {
			b, _ := json.Marshal(v)
			claims[k] = string(b)
		}
	}
	return claims
}
