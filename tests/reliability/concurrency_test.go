package reliability_test

import (
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/lambda-agent/lambda-agent/internal/agent"
	"github.com/lambda-agent/lambda-agent/internal/testkit/conversetest"
)

// TestConcurrentTurns sends 20 turns at once to one session, through the real
// handler, several times over. Every answer must be 200 or 409, and the
// stored transcript must be exactly the turns that got 200, each whole, with
// the roles alternating.
func TestConcurrentTurns(t *testing.T) {
	const rounds, racers = 5, 20
	s := newSystem(t, nil)
	if r := s.chat(t, "", "race", "opening"); r.status != 200 {
		t.Fatal(r.raw)
	}
	s.Model.Responder = func(r *conversetest.Request) conversetest.Reply {
		// A little model time makes the turns overlap.
		return conversetest.Text("reply to " + r.Messages[len(r.Messages)-1].Text()).WithDelay(20 * time.Millisecond)
	}
	won := map[string]bool{}
	var committed, conflicts, other int
	for round := range rounds {
		var wg sync.WaitGroup
		var mu sync.Mutex
		start := make(chan struct{})
		for i := range racers {
			wg.Go(func() {
				<-start
				msg := fmt.Sprintf("round %d racer %d", round, i)
				r := s.chat(t, "", "race", msg)
				mu.Lock()
				defer mu.Unlock()
				switch r.status {
				case 200:
					won[msg] = true
					committed++
				case 409:
					conflicts++
				default:
					other++
					t.Errorf("%s: %d %s", msg, r.status, r.raw)
				}
			})
		}
		close(start)
		wg.Wait()
	}

	st := s.stored(t, "", "race")
	lost := 0
	if st == nil {
		t.Fatal("the session is gone")
	}
	if want := 2 + 2*committed; len(st.messages) != want {
		t.Errorf("%d messages stored for %d committed turns; want %d", len(st.messages), committed, want)
		lost = abs(want - len(st.messages))
	}
	seen := map[string]bool{}
	for i := 2; i+1 < len(st.messages); i += 2 {
		q, a := st.messages[i], st.messages[i+1]
		if q.Role != agent.RoleUser || a.Role != agent.RoleAssistant {
			t.Fatalf("messages %d and %d are %s and %s: turns interleaved", i, i+1, q.Role, a.Role)
		}
		if !won[q.Text()] || seen[q.Text()] || a.Text() != "reply to "+q.Text() {
			t.Errorf("stored turn %q / %q is not exactly one committed turn", q.Text(), a.Text())
		}
		seen[q.Text()] = true
	}
	for msg := range won {
		if !seen[msg] {
			lost++
			t.Errorf("committed turn %q is not stored", msg)
		}
	}
	validHistory(t, st.messages)
	if committed < rounds || other > 0 {
		t.Errorf("%d committed, %d other answers", committed, other)
	}

	// Then 20 clients that retry on 409, as the API asks them to: every one
	// of their turns must end up stored, once.
	retries := 0
	var wg sync.WaitGroup
	var mu sync.Mutex
	for i := range racers {
		wg.Go(func() {
			msg := fmt.Sprintf("persistent racer %d", i)
			for {
				r := s.chat(t, "", "race", msg)
				if r.status == 200 {
					return
				}
				if r.status != 409 {
					t.Errorf("%s: %d %s", msg, r.status, r.raw)
					return
				}
				mu.Lock()
				retries++
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	st = s.stored(t, "", "race")
	count := map[string]int{}
	for _, m := range st.messages {
		count[m.Text()]++
	}
	for i := range racers {
		if n := count[fmt.Sprintf("persistent racer %d", i)]; n != 1 {
			lost++
			t.Errorf("persistent racer %d's turn is stored %d times", i, n)
		}
	}
	validHistory(t, st.messages)
	report(t, "Concurrent turns on one session: each is committed whole or answered 409; none is lost, duplicated or interleaved",
		fmt.Sprintf("%d rounds of %d turns at once (%d committed, %d answered 409), then %d clients retrying on 409 (%d retries, all %d stored once)",
			rounds, racers, committed, conflicts, racers, retries, racers), lost)
}

func abs(n int) int {
	if n < 0 {
		return -n
	}
	return n
}

// TestIsolationProperty runs random requests from random owners on random
// session ids and checks, after each, that nobody reached a session that is
// not theirs: another owner gets 404 on GET, DELETE and POST, and every
// stored message was written by the session's owner.
func TestIsolationProperty(t *testing.T) {
	s := newSystem(t, nil)
	owners := []string{"", "alice", "bob", "carol@example.com", "user#with#hashes"}
	ids := []string{"shared-1", "shared-2", "a.b:c-d", "x"}
	owner := map[string]string{} // id -> owner holding it
	rng := newRand(42)
	const steps = 400
	leaks := 0
	for step := range steps {
		who, id := owners[rng.IntN(len(owners))], ids[rng.IntN(len(ids))]
		holder, taken := owner[id]
		switch op := rng.IntN(4); op {
		case 0: // POST
			r := s.chat(t, who, id, fmt.Sprintf("from %q step %d", who, step))
			switch {
			case taken && holder != who:
				if r.status != 404 {
					leaks++
					t.Errorf("step %d: %q posted to %q's session %s: %d", step, who, holder, id, r.status)
				}
			case r.status != 200:
				t.Errorf("step %d: %q posting to %s: %d %s", step, who, id, r.status, r.raw)
			default:
				owner[id] = who
			}
		case 1: // GET
			r := s.serve(t, call("GET", "/sessions/"+id, who, nil), 30*time.Second)
			switch {
			case taken && holder == who:
				if r.status != 200 {
					t.Errorf("step %d: owner %q reading %s: %d", step, who, id, r.status)
				}
			case r.status != 404:
				leaks++
				t.Errorf("step %d: %q read %s, which is %q's (taken %v): %d", step, who, id, holder, taken, r.status)
			}
		case 3: // GET /sessions lists exactly the caller's sessions
			r := s.serve(t, call("GET", "/sessions", who, nil), 30*time.Second)
			listed, _ := r.body["sessions"].([]any)
			got := map[string]bool{}
			for _, l := range listed {
				got[l.(map[string]any)["session_id"].(string)] = true
			}
			for _, i := range ids {
				h, held := owner[i]
				switch mine := held && h == who; {
				case got[i] && !mine:
					leaks++
					t.Errorf("step %d: %q's list shows %s, which is %q's (held %v)", step, who, i, h, held)
				case mine && !got[i]:
					t.Errorf("step %d: %q's list lacks its session %s", step, who, i)
				}
			}
			if r.status != 200 {
				t.Errorf("step %d: %q listing: %d %s", step, who, r.status, r.raw)
			}
		case 2: // DELETE
			r := s.serve(t, call("DELETE", "/sessions/"+id, who, nil), 30*time.Second)
			switch {
			case taken && holder == who:
				if r.status != 204 {
					t.Errorf("step %d: owner %q deleting %s: %d", step, who, id, r.status)
				}
				delete(owner, id)
			case r.status != 404:
				leaks++
				t.Errorf("step %d: %q deleted %s, which is %q's (taken %v): %d", step, who, id, holder, taken, r.status)
			}
		}
	}
	// Every stored message of a session comes from its owner, or is the
	// model's answer.
	for id, who := range owner {
		st := s.stored(t, who, id)
		if st == nil {
			t.Errorf("%q's session %s is gone", who, id)
			continue
		}
		for _, m := range st.messages {
			if m.Role == agent.RoleUser && !strings.HasPrefix(m.Text(), fmt.Sprintf("from %q ", who)) {
				leaks++
				t.Errorf("%q's session %s holds %q", who, id, m.Text())
			}
		}
	}
	report(t, "Owner isolation: no owner can read, write, list or delete another's session",
		fmt.Sprintf("%d random requests (POST, GET, DELETE and list) from %d owners on %d session ids", steps, len(owners), len(ids)), leaks)
}
