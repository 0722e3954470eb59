package testkit

import (
	"net/http"
	"net/http/httptest"

	"github.com/aws/aws-lambda-go/events"
	"github.com/lambda-agent/lambda-agent/internal/httpapi"
)

// As returns r as a request from the caller whom a JWT authorizer verified
// with subject sub. An empty sub leaves r anonymous.
func As(r *http.Request, sub string) *http.Request {
	if sub == "" {
		return r
	}
	return r.WithContext(httpapi.WithAuthorizer(r.Context(), &events.APIGatewayV2HTTPRequestContextAuthorizerDescription{
		JWT: &events.APIGatewayV2HTTPRequestContextAuthorizerJWTDescription{Claims: map[string]string{"sub": sub}},
	}))
}

// Serve serves r with the stack's handler and returns what it answered.
func (s *Stack) Serve(r *http.Request) *httptest.ResponseRecorder {
	w := httptest.NewRecorder()
	s.Handler.ServeHTTP(w, r)
	return w
}
