package reliability_test

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/lambda-agent/lambda-agent/internal/testkit/conversetest"
)

func newRand(seed uint64) *rand.Rand { return rand.New(rand.NewPCG(seed, seed)) }

// TestTransientFaultsAreRetried injects faults that pass: DynamoDB throttling
// absorbed by the SDK's retries, and Bedrock's 429, 503 and 500 absorbed by
// the agent's. Every turn must succeed, whole.
func TestTransientFaultsAreRetried(t *testing.T) {
	s := newSystem(t, nil)
	const turns = 8
	bedrockFaults := 0
	for i := range turns {
		// Two DynamoDB throttles on every turn, at its load or its commit.
		s.faults.left.Store(2)
		// And two Bedrock faults before the answer.
		faults := [][2]conversetest.Reply{
			{conversetest.Throttle(), conversetest.Unavailable()},
			{conversetest.InternalError(), conversetest.Throttle()},
			{conversetest.ModelNotReady(), conversetest.ModelTimeout()},
			{conversetest.Unavailable(), conversetest.InternalError()},
		}[i%4]
		s.Model.Enqueue(faults[0], faults[1], conversetest.Text(fmt.Sprintf("answer %d", i)))
		bedrockFaults += 2
		r := s.chat(t, "", "weather", fmt.Sprintf("question %d", i))
		if r.status != 200 || r.body["text"] != fmt.Sprintf("answer %d", i) {
			t.Errorf("turn %d through transient faults: %d %s", i, r.status, r.raw)
		}
	}
	st := s.stored(t, "", "weather")
	lost := 2*turns - len(st.messages)
	if lost != 0 {
		t.Errorf("%d messages stored for %d turns", len(st.messages), turns)
	}
	validHistory(t, st.messages)
	report(t, "Transient faults are retried to success",
		fmt.Sprintf("%d turns; %d DynamoDB throttles and %d Bedrock faults (429, 503, 500, 408) injected", turns, s.faults.injected.Load(), bedrockFaults), abs(lost))
}

// TestPersistentFaultsLeaveTheSessionUnchanged injects faults that do not
// pass. The answer must be 429 (throttling) or 502 (a failing model), and the
// session exactly as it was.
func TestPersistentFaultsLeaveTheSessionUnchanged(t *testing.T) {
	tests := []struct {
		name   string
		inject func(*system)
		status int
		code   string
	}{
		{"DynamoDB throttling", func(s *system) { s.faults.left.Store(-1) }, 429, "throttled"},
		{"Bedrock 429", func(s *system) { s.Model.Responder = always(conversetest.Throttle()) }, 429, "throttled"},
		{"Bedrock 503", func(s *system) { s.Model.Responder = always(conversetest.Unavailable()) }, 502, "model_error"},
		{"Bedrock 500", func(s *system) { s.Model.Responder = always(conversetest.InternalError()) }, 502, "model_error"},
	}
	changed := 0
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := newSystem(t, nil)
			for i := range 3 {
				if r := s.chat(t, "", "steady", fmt.Sprintf("before %d", i)); r.status != 200 {
					t.Fatal(r.raw)
				}
			}
			before := s.stored(t, "", "steady")
			tt.inject(s)
			// A short deadline keeps the agent's retries, bounded by it, short.
			r := s.serve(t, call("POST", "/chat", "", map[string]any{"session_id": "steady", "message": "during"}), 5*time.Second)
			if r.status != tt.status || r.code() != tt.code {
				t.Errorf("got %d %s, want %d %s", r.status, r.code(), tt.status, tt.code)
			}
			if tt.status == 429 && r.headers.Get("Retry-After") == "" {
				t.Error("a 429 without Retry-After")
			}
			s.faults.left.Store(0)
			if after := s.stored(t, "", "steady"); !after.sameAs(before) {
				changed++
				t.Errorf("the failed turn changed the session")
			}
		})
	}
	report(t, "Persistent faults answer 429 or 502 and leave the session unchanged",
		fmt.Sprintf("%d fault kinds (DynamoDB throttling; Bedrock 429, 503, 500) on every attempt", len(tests)), changed)
}

func always(r conversetest.Reply) func(*conversetest.Request) conversetest.Reply {
	return func(*conversetest.Request) conversetest.Reply { return r }
}
