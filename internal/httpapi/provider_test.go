package httpapi_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/lambda-agent/lambda-agent/internal/agent"
	"github.com/lambda-agent/lambda-agent/internal/httpapi"
	"github.com/lambda-agent/lambda-agent/internal/testkit/conversetest"
	"github.com/lambda-agent/lambda-agent/internal/turn"
)

// likes is a context provider that knows what each owner likes.
type likes struct {
	mu   sync.Mutex
	seen []turn.Committed
}

func (l *likes) Provide(_ context.Context, p turn.Provision) ([]agent.ContextEntry, error) {
	return []agent.ContextEntry{{Description: "what the person likes", Value: p.Owner + " likes teal"}}, nil
}

func (l *likes) Committed(_ context.Context, c turn.Committed) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.seen = append(l.seen, c)
}

// TestProviderThroughTheHandler: with the real agent, store and strict
// stand-in, a context provider's entry reaches the model's request as
// marked context, beside the turn's message, and the session stores the
// message alone; Committed hears the stored turn.
func TestProviderThroughTheHandler(t *testing.T) {
	a := newAPI(t, nil)
	p := &likes{}
	svc, err := turn.New(a.store, a.Agent, turn.WithProviders(p))
	if err != nil {
		t.Fatal(err)
	}
	h, err := httpapi.New(httpapi.Config{Service: svc})
	if err != nil {
		t.Fatal(err)
	}
	var sent []string
	a.model.Responder = func(r *conversetest.Request) conversetest.Reply {
		sent = append(sent, r.Messages[len(r.Messages)-1].Text())
		return conversetest.Text("noted")
	}
	w := httptest.NewRecorder()
	r := httptest.NewRequest(http.MethodPost, "/chat", strings.NewReader(`{"session_id":"liked","message":"What do I like?"}`))
	r.Header.Set("Content-Type", "application/json")
	h.ServeHTTP(w, r)
	if w.Code != http.StatusOK {
		t.Fatalf("%d %s", w.Code, w.Body)
	}
	if len(sent) != 1 || !strings.Contains(sent[0], "anonymous likes teal") || !strings.Contains(sent[0], "What do I like?") {
		t.Errorf("the model's last message %q", sent)
	}
	w = httptest.NewRecorder()
	h.ServeHTTP(w, httptest.NewRequest(http.MethodGet, "/sessions/liked", nil))
	if w.Code != http.StatusOK || strings.Contains(w.Body.String(), "likes teal") || !strings.Contains(w.Body.String(), "What do I like?") {
		t.Errorf("the stored session: %d %s", w.Code, w.Body)
	}
	if len(p.seen) != 1 || p.seen[0].Owner != "anonymous" || p.seen[0].SessionID != "liked" || len(p.seen[0].Messages) != 2 {
		t.Errorf("committed %+v", p.seen)
	}
}
