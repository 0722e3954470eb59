package memory_test

import (
	"net/http"
	"slices"
	"testing"

	"github.com/lambda-agent/lambda-agent/internal/testkit"
	"github.com/lambda-agent/lambda-agent/internal/testkit/conversetest"
)

// recordTexts are the texts of sub's records, sorted.
func recordTexts(t *testing.T, s *testkit.Stack, sub string) []string {
	t.Helper()
	var out []string
	for _, r := range records(t, s, sub).Records {
		out = append(out, r.Text)
	}
	slices.Sort(out)
	return out
}

// TestDiscardedMessagesLeaveMemory: a regeneration, an edit, a rewind and
// a delete each remove what the messages they discard taught, and keep
// what the others did; what a redone turn teaches is learned anew.
func TestDiscardedMessagesLeaveMemory(t *testing.T) {
	s := start(t, nil)
	step := func(name, body string, status int, want ...string) {
		t.Helper()
		code, out := s.Call(http.MethodPost, "/chat", "alice", body)
		if code != status {
			t.Fatalf("%s: %d %s", name, code, out)
		}
		s.Drained(t)
		if got := recordTexts(t, s, "alice"); !slices.Equal(got, want) {
			t.Fatalf("after %s, memory holds %q, want %q", name, got, want)
		}
	}
	s.Model.Enqueue(conversetest.Text("Noted."))
	learns(s, add("fact", "The person lives in Lyon."))
	step("the first turn", `{"session_id":"s","message":"I live in Lyon."}`, 200, "The person lives in Lyon.")

	s.Model.Enqueue(conversetest.Text("Noted."))
	learns(s, add("fact", "The person has a dog."))
	step("the second turn", `{"session_id":"s","message":"I have a dog."}`, 200, "The person has a dog.", "The person lives in Lyon.")

	// Regenerating the second turn discards what it taught; its new
	// answer teaches nothing.
	s.Model.Enqueue(conversetest.Text("Noted again."))
	learns(s)
	step("a regeneration", `{"session_id":"s","regenerate":true}`, 200, "The person lives in Lyon.")

	// Editing the first message discards both turns' lessons, and learns
	// the edit's.
	s.Model.Enqueue(conversetest.Text("Noted."))
	learns(s, add("fact", "The person lives in Nantes."))
	step("an edit", `{"session_id":"s","edit":{"from":0,"message":"I live in Nantes."}}`, 200, "The person lives in Nantes.")

	// A rewind to the start discards it all.
	if code, out := s.Call(http.MethodPost, "/sessions/s/rewind", "alice", `{"to":0}`); code != http.StatusOK {
		t.Fatalf("rewind: %d %s", code, out)
	}
	s.Drained(t)
	if got := recordTexts(t, s, "alice"); len(got) != 0 {
		t.Fatalf("after a rewind to 0, memory holds %q", got)
	}

	// What another session taught outlives this one's delete.
	s.Model.Enqueue(conversetest.Text("Noted."), conversetest.Text("Noted."))
	learns(s, add("fact", "The person plays chess."))
	learns(s, add("fact", "The person is a nurse."))
	s.Chat(t, "alice", "s", "I play chess.")
	s.Chat(t, "alice", "other", "I am a nurse.")
	if code, out := s.Call(http.MethodDelete, "/sessions/s", "alice", ""); code != http.StatusNoContent {
		t.Fatalf("delete: %d %s", code, out)
	}
	s.Drained(t)
	if got := recordTexts(t, s, "alice"); !slices.Equal(got, []string{"The person is a nurse."}) {
		t.Fatalf("after the session's delete, memory holds %q", got)
	}
}
