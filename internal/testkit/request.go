package testkit

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

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

// Call serves a request as the JWT subject sub ("" for anonymous), with
// body as JSON unless it is empty, and returns the status and body.
func (s *Stack) Call(method, path, sub, body string) (int, string) {
	r := httptest.NewRequest(method, path, strings.NewReader(body))
	if body != "" {
		r.Header.Set("Content-Type", "application/json")
	}
	w := s.Serve(As(r, sub))
	return w.Code, w.Body.String()
}

// Drained waits until the memory function has handled every stream record
// so far, and fails t if one went to the on-failure destination. It needs
// a Stack with a Stream.
func (s *Stack) Drained(t testing.TB) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	if err := s.Stream.Drain(ctx); err != nil {
		t.Fatal(err)
	}
	if f := s.Stream.Failed(); len(f) > 0 {
		t.Fatalf("%d stream records went to the on-failure destination; logs:\n%s", len(f), s.Logs)
	}
}

// Chat runs a turn of sub's on session, fails t unless it answers 200, and
// waits until the memory function has handled what it wrote, when the
// Stack has one.
func (s *Stack) Chat(t testing.TB, sub, session, message string) {
	t.Helper()
	body, err := json.Marshal(map[string]string{"session_id": session, "message": message})
	if err != nil {
		t.Fatal(err)
	}
	if code, out := s.Call(http.MethodPost, "/chat", sub, string(body)); code != http.StatusOK {
		t.Fatalf("chat: %d %s", code, out)
	}
	if s.Stream != nil {
		s.Drained(t)
	}
}
