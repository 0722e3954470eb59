package turn_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"

	"github.com/lambda-agent/lambda-agent/internal/agent"
	"github.com/lambda-agent/lambda-agent/internal/turn"
)

// recorder is a context provider that gives one entry, or fails, and
// records what it was told.
type recorder struct {
	mu        sync.Mutex
	fail      error
	provided  []turn.Provision
	committed []turn.Committed
}

var _ turn.Provider = (*recorder)(nil)

func (r *recorder) Provide(_ context.Context, p turn.Provision) ([]agent.ContextEntry, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.provided = append(r.provided, p)
	if r.fail != nil {
		return nil, r.fail
	}
	return []agent.ContextEntry{{Description: "what " + p.Owner + " likes", Value: "teal"}}, nil
}

func (r *recorder) Committed(ctx context.Context, c turn.Committed) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if ctx.Err() == nil {
		r.committed = append(r.committed, c)
	}
}

// TestProviders: a provider's context reaches the turn's conversation
// after the caller's, knowing whose session it is, and is not stored;
// Committed hears what each commit stored and where, a resume's
// checkpoint included; a provider's error ends the turn before it runs,
// with nothing stored.
func TestProviders(t *testing.T) {
	store, model := newFakeStore(), &fakeAgent{}
	p := &recorder{}
	svc, _ := turn.New(store, model, turn.WithProviders(p))
	c := chat("s1", "", "hi")
	c.Context = []agent.ContextEntry{{Description: "page", Value: "checkout"}}
	mustChat(t, svc, c)
	given := model.given[0].Context
	if len(given) != 2 || given[0].Value != "checkout" || given[1].Description != "what "+owner+" likes" || given[1].Value != "teal" {
		t.Errorf("the turn's context %+v", given)
	}
	if room := agent.MaxContextBytes - len("page") - len("checkout"); len(p.provided) == 1 && p.provided[0].Room != room {
		t.Errorf("the provider was given %d bytes of room, want %d", p.provided[0].Room, room)
	}
	if len(p.provided) != 1 || p.provided[0].SessionID != "s1" || p.provided[0].Owner != owner || p.provided[0].Input[0].Text != "hi" {
		t.Errorf("provided %+v", p.provided)
	}
	if len(p.committed) != 1 || p.committed[0].First != 0 || len(p.committed[0].Messages) != 2 || p.committed[0].SessionID != "s1" {
		t.Fatalf("committed %+v", p.committed)
	}
	for _, m := range store.session(t, "s1").messages {
		if m.Text() == "teal" {
			t.Errorf("the provider's context was stored: %+v", m)
		}
	}

	// A resume: its checkpoint, then its end.
	pause(t, svc, model, "s2")
	p.provided, p.committed = nil, nil
	if _, err := svc.Chat(t.Context(), resume("s2", "", true)); err != nil {
		t.Fatal(err)
	}
	if len(p.provided) != 1 || p.provided[0].Input != nil {
		t.Errorf("a resume's provision %+v", p.provided)
	}
	if len(p.committed) != 2 || p.committed[0].First != 2 || p.committed[1].First != 3 {
		t.Errorf("a resume's commits %+v", p.committed)
	}

	p.fail = errors.New("memory is down")
	n := store.commitCount()
	if _, err := svc.Chat(t.Context(), chat("s3", "", "hi")); err == nil || !errors.Is(err, p.fail) {
		t.Errorf("a provider's failure: %v", err)
	}
	if store.commitCount() != n {
		t.Error("a turn whose provider failed committed")
	}
}

// hoarder gives more context than a turn may take.
type hoarder struct{ recorder }

func (h *hoarder) Provide(context.Context, turn.Provision) ([]agent.ContextEntry, error) {
	return []agent.ContextEntry{{Value: strings.Repeat("x", agent.MaxContextBytes+1)}}, nil
}

// TestProviderPastTheBound: context past agent.MaxContextBytes from a
// provider ends the turn with an error that is not the caller's input
// error, and nothing is stored.
func TestProviderPastTheBound(t *testing.T) {
	store, model := newFakeStore(), &fakeAgent{}
	svc, _ := turn.New(store, model, turn.WithProviders(&hoarder{}))
	_, err := svc.Chat(t.Context(), chat("s1", "", "hi"))
	var ie *agent.InputError
	if err == nil || errors.As(err, &ie) || errors.Is(err, turn.ErrInvalidRequest) || store.commitCount() != 0 || model.runs != 0 {
		t.Errorf("%v; %d commits, %d runs", err, store.commitCount(), model.runs)
	}
}
