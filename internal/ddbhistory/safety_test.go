package ddbhistory_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/lambda-agent/lambda-agent/internal/agent"
	"github.com/lambda-agent/lambda-agent/internal/ddbhistory"
)

// The tests in this file hold the store to what issue 10's attacks broke:
// deletes racing turns, idempotency keys shared across sessions, holds that
// outlive a crash, turns larger than a transaction, and commits whose answer
// never arrives.

// bigTurn is a turn of n messages (n even, at least 2): a question, tool
// uses and their results, and an answer, each message one item.
func bigTurn(tag string, n int) []agent.Message {
	msgs := []agent.Message{agent.UserText(tag + " question")}
	for i := 0; len(msgs) < n-1; i++ {
		id := fmt.Sprintf("%s-%d", tag, i)
		msgs = append(msgs,
			agent.Message{Role: agent.RoleAssistant, Content: []agent.ContentBlock{{ToolUse: &agent.ToolUseBlock{ToolUseID: id, Name: "calculator", Input: json.RawMessage(`{"expression":"1+1"}`)}}}},
			agent.Message{Role: agent.RoleUser, Content: []agent.ContentBlock{{ToolResult: agent.TextResult(id, agent.ToolSuccess, "2")}}},
		)
	}
	return append(msgs, agent.AssistantText(tag+" answer"))
}

// reach waits for a paused request to be reached, or fails the test.
func reach(t *testing.T, reached <-chan struct{}) {
	t.Helper()
	select {
	case <-reached:
	case <-time.After(10 * time.Second):
		t.Fatal("the request to pause was never sent")
	}
}

// transcript reads a session's whole transcript, or fails the test.
func transcript(t *testing.T, s *ddbhistory.Store, key ddbhistory.Key) []agent.Message {
	t.Helper()
	var all []agent.Message
	for cursor := ""; ; {
		p, err := s.Transcript(t.Context(), key, cursor, ddbhistory.MaxPageSize)
		if err != nil {
			t.Fatalf("transcript of %s: %v", key.ID, err)
		}
		all = append(all, p.Messages...)
		if cursor = p.NextCursor; cursor == "" {
			return all
		}
	}
}

func sameJSON(a, b any) bool {
	x, _ := json.Marshal(a)
	y, _ := json.Marshal(b)
	return bytes.Equal(x, y)
}

// messagesOf is every message a fill of n messages committed.
func messagesOf(n int) []agent.Message {
	var out []agent.Message
	for i := 0; len(out) < n; i++ {
		out = append(out, sizedTurn(i)...)
	}
	return out
}

func TestTurnLargerThanATransaction(t *testing.T) {
	runBackends(t, func(t *testing.T, b backend) {
		e := newEnv(t, b, ddbhistory.Config{})
		fill(t, e.store, alice, 4, 40)
		sess, err := e.store.Load(t.Context(), alice, "")
		if err != nil {
			t.Fatal(err)
		}
		big := bigTurn("big", 150)
		// Hold the last write, and look at the session meanwhile: readers
		// see none of the turn until it lands.
		fault, reached, release := pause("TransactWriteItems", 2)
		e.count.setFault(fault)
		e.count.reset()
		done := make(chan error, 1)
		go func() {
			done <- e.store.Commit(context.Background(), sess, ddbhistory.Turn{Messages: big, Window: agent.WindowState{Removed: 114}, Hold: mustBegin(t, e.store, sess, "big-1"), Response: json.RawMessage(`{}`)})
		}()
		reach(t, reached)
		if got := transcript(t, e.store, alice); !sameJSON(got, messagesOf(4)) {
			t.Errorf("between the writes the transcript has %d messages, want the 4 from before", len(got))
		}
		if got, err := e.store.Load(t.Context(), alice, ""); err != nil || got.Count != 4 || len(got.Conversation.Messages) != 4 {
			t.Errorf("between the writes a load sees %+v, %v", got, err)
		}
		close(release)
		if err := <-done; err != nil {
			t.Fatalf("a turn of 150 items: %v", err)
		}
		e.count.setFault(nil)
		u := e.count.reset()
		// A reservation, one transaction of messages, and the last one,
		// beside the reads above.
		if u.ByOperation["UpdateItem"] != 1 || u.ByOperation["TransactWriteItems"] != 2 {
			t.Errorf("the commit's writes: %v; want 1 UpdateItem and 2 TransactWriteItems", u.ByOperation)
		}
		want := slices.Concat(messagesOf(4), big)
		if got := transcript(t, e.store, alice); !sameJSON(got, want) {
			t.Errorf("after the commit the transcript has %d messages, want %d", len(got), len(want))
		}
		got, err := e.store.Load(t.Context(), alice, "big-1")
		if err != nil {
			t.Fatal(err)
		}
		if got.Count != 154 || !sameJSON(got.Conversation.Messages, want[114:]) || got.Replay == nil || got.Replay.First != 4 || got.Replay.Count != 150 {
			t.Errorf("loaded: count %d, %d messages in the window, replay %+v", got.Count, len(got.Conversation.Messages), got.Replay)
		}
		// A new session's first turn may be as big.
		bob := ddbhistory.Key{Owner: "bob", ID: "big-first"}
		if err := e.store.Commit(t.Context(), ddbhistory.NewSession(bob), ddbhistory.Turn{Messages: bigTurn("first", 150)}); err != nil {
			t.Fatalf("a first turn of 150 items: %v", err)
		}
		if got := transcript(t, e.store, bob); !sameJSON(got, bigTurn("first", 150)) {
			t.Errorf("the first big turn reads back as %d messages", len(got))
		}
		list, err := e.store.List(t.Context(), "bob", "", 10)
		if err != nil || len(list.Sessions) != 1 || list.Sessions[0].Title != "first question" {
			t.Errorf("bob's list: %+v, %v", list, err)
		}
	})
}

func TestLargeTurnStoppedBetweenWrites(t *testing.T) {
	runBackends(t, func(t *testing.T, b backend) {
		e := newEnv(t, b, ddbhistory.Config{})
		fill(t, e.store, alice, 4, 40)
		sess, err := e.store.Load(t.Context(), alice, "")
		if err != nil {
			t.Fatal(err)
		}
		// The process dies after the first transaction of messages: its
		// context ends while the last write waits to be sent.
		fault, reached, release := pause("TransactWriteItems", 2)
		e.count.setFault(fault)
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan error, 1)
		go func() { done <- e.store.Commit(ctx, sess, ddbhistory.Turn{Messages: bigTurn("dead", 150)}) }()
		reach(t, reached)
		cancel()
		close(release)
		if err := <-done; err == nil {
			t.Fatal("the commit succeeded without its last write")
		}
		e.count.setFault(nil)
		if n := countItems(t, e, "s#alice#chat-1"); n <= 5 {
			t.Fatalf("%d items: the test needs the dead turn's leftovers", n)
		}
		// Nobody sees the leftovers; loading past them costs one more query.
		e.count.reset()
		got, err := e.store.Load(t.Context(), alice, "")
		if err != nil || got.Count != 4 || !sameJSON(got.Conversation.Messages, messagesOf(4)) {
			t.Fatalf("after the dead turn: %+v, %v", got, err)
		}
		if q := e.count.reset().ByOperation["Query"]; q > 2 {
			t.Errorf("the load past the leftovers took %d queries, want at most 2", q)
		}
		if got := transcript(t, e.store, alice); !sameJSON(got, messagesOf(4)) {
			t.Errorf("the transcript shows %d messages, want 4", len(got))
		}
		// The next turns overwrite them.
		next := bigTurn("next", 6)
		if err := e.store.Commit(t.Context(), got, ddbhistory.Turn{Messages: next}); err != nil {
			t.Fatal(err)
		}
		if err := e.store.Commit(t.Context(), got, ddbhistory.Turn{Messages: bigTurn("again", 150)}); err != nil {
			t.Fatal(err)
		}
		want := slices.Concat(messagesOf(4), next, bigTurn("again", 150))
		if got := transcript(t, e.store, alice); !sameJSON(got, want) {
			t.Errorf("after two more turns the transcript has %d messages, want %d", len(got), len(want))
		}
		// And a delete removes whatever is left.
		if err := e.store.Delete(t.Context(), alice); err != nil {
			t.Fatal(err)
		}
		if n := countItems(t, e, "s#alice#chat-1"); n != 0 {
			t.Errorf("%d items left after the delete", n)
		}
	})
}

func TestLargeTurnsRacing(t *testing.T) {
	runBackends(t, func(t *testing.T, b backend) {
		for _, tc := range []struct {
			name string
			key  ddbhistory.Key
			prev int // messages before the race
		}{
			{"existing session", ddbhistory.Key{Owner: "alice", ID: "existing"}, 4},
			{"new session", ddbhistory.Key{Owner: "alice", ID: "new"}, 0},
		} {
			t.Run(tc.name, func(t *testing.T) {
				e := newEnv(t, b, ddbhistory.Config{})
				load := func() *ddbhistory.Session {
					s, err := e.store.Load(t.Context(), tc.key, "")
					if errors.Is(err, ddbhistory.ErrNotFound) {
						return ddbhistory.NewSession(tc.key)
					}
					if err != nil {
						t.Fatal(err)
					}
					return s
				}
				if tc.prev > 0 {
					fill(t, e.store, tc.key, tc.prev, 40)
				}
				pk := "s#" + tc.key.Owner + "#" + tc.key.ID

				// A reserves and is held at its first write; C reserves over
				// it and is held too; A then finds its reservation gone.
				a, c := load(), load()
				fault, reachedA, releaseA := pause("TransactWriteItems", 1)
				e.count.setFault(fault)
				doneA := make(chan error, 1)
				go func() { doneA <- e.store.Commit(context.Background(), a, ddbhistory.Turn{Messages: bigTurn("A", 150)}) }()
				reach(t, reachedA)
				faultC, reachedC, releaseC := pause("TransactWriteItems", 1)
				e.count.setFault(faultC)
				doneC := make(chan error, 1)
				go func() { doneC <- e.store.Commit(context.Background(), c, ddbhistory.Turn{Messages: bigTurn("C", 150)}) }()
				reach(t, reachedC)
				close(releaseA)
				if err := <-doneA; !errors.Is(err, ddbhistory.ErrConflict) {
					t.Errorf("the overtaken turn: %v, want ErrConflict", err)
				}
				close(releaseC)
				if err := <-doneC; err != nil {
					t.Fatalf("the turn that overtook: %v", err)
				}
				e.count.setFault(nil)
				want := slices.Concat(messagesOf(tc.prev), bigTurn("C", 150))
				if got := transcript(t, e.store, tc.key); !sameJSON(got, want) {
					t.Fatalf("after the race the transcript has %d messages, not exactly C's turn after the %d before", len(got), tc.prev)
				}

				// A small turn commits while a big one is held between its
				// writes: the big one loses, and takes its leftovers away.
				big, small := load(), load()
				fault, reached, release := pause("TransactWriteItems", 2)
				e.count.setFault(fault)
				done := make(chan error, 1)
				go func() {
					done <- e.store.Commit(context.Background(), big, ddbhistory.Turn{Messages: bigTurn("B", 150)})
				}()
				reach(t, reached)
				e.count.setFault(nil)
				if err := e.store.Commit(t.Context(), small, ddbhistory.Turn{Messages: turn(99)}); err != nil {
					t.Fatalf("the small turn: %v", err)
				}
				close(release)
				if err := <-done; !errors.Is(err, ddbhistory.ErrConflict) {
					t.Errorf("the big turn: %v, want ErrConflict", err)
				}
				want = append(want, turn(99)...)
				if got := transcript(t, e.store, tc.key); !sameJSON(got, want) {
					t.Errorf("the transcript has %d messages, not exactly the small turn after C's", len(got))
				}
				if n, wantN := countItems(t, e, pk), len(want)+1; n != wantN {
					t.Errorf("%d items under the session, want %d: the loser's leftovers stayed", n, wantN)
				}
			})
		}
	})
}

func TestDeleteRacingATurn(t *testing.T) {
	runBackends(t, func(t *testing.T, b backend) {
		e := newEnv(t, b, ddbhistory.Config{})
		fill(t, e.store, alice, 4, 40)
		loaded, err := e.store.Load(t.Context(), alice, "")
		if err != nil {
			t.Fatal(err)
		}
		// The delete wins: the turn that loaded before it cannot commit.
		if err := e.store.Delete(t.Context(), alice); err != nil {
			t.Fatal(err)
		}
		if err := e.store.Commit(t.Context(), loaded, ddbhistory.Turn{Messages: turn(9)}); !errors.Is(err, ddbhistory.ErrConflict) {
			t.Errorf("a commit after the delete: %v, want ErrConflict", err)
		}
		if n := countItems(t, e, "s#alice#chat-1") + countItems(t, e, "id#chat-1"); n != 0 {
			t.Errorf("%d items left", n)
		}

		// The turn wins: the delete that follows removes it too.
		sess := fill(t, e.store, alice, 4, 40)
		if err := e.store.Commit(t.Context(), sess, ddbhistory.Turn{Messages: turn(9), Hold: mustBegin(t, e.store, sess, "k"), Response: json.RawMessage(`1`)}); err != nil {
			t.Fatal(err)
		}
		if err := e.store.Delete(t.Context(), alice); err != nil {
			t.Fatal(err)
		}
		if n := countItems(t, e, "s#alice#chat-1") + countItems(t, e, "id#chat-1"); n != 0 {
			t.Errorf("%d items left", n)
		}
		if _, err := e.store.Transcript(t.Context(), alice, "", 10); !errors.Is(err, ddbhistory.ErrNotFound) {
			t.Errorf("transcript after the delete: %v", err)
		}
	})
}

func TestDeleteStoppedMidway(t *testing.T) {
	runBackends(t, func(t *testing.T, b backend) {
		e := newEnv(t, b, ddbhistory.Config{})
		loaded := fill(t, e.store, alice, 120, 40)
		// The delete dies after its tombstone, as the first of its cleanup
		// transactions waits to be sent.
		fault, reached, release := pause("TransactWriteItems", 1)
		e.count.setFault(fault)
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan error, 1)
		go func() { done <- e.store.Delete(ctx, alice) }()
		reach(t, reached)
		cancel()
		close(release)
		if err := <-done; !errors.Is(err, ddbhistory.ErrDeleteUnfinished) {
			t.Fatalf("err = %v, want ErrDeleteUnfinished", err)
		}
		e.count.setFault(nil)

		// Deleted to every reader, and to every writer.
		if _, err := e.store.Load(t.Context(), alice, ""); !errors.Is(err, ddbhistory.ErrDeleting) {
			t.Errorf("Load: %v, want ErrDeleting", err)
		}
		if _, err := e.store.Transcript(t.Context(), alice, "", 10); !errors.Is(err, ddbhistory.ErrNotFound) {
			t.Errorf("Transcript: %v, want ErrNotFound", err)
		}
		// The tombstone has no owner, so it leaves the owner index. minidyn
		// keeps an item in a sparse index when an update removes its key
		// (see dynamodbtest); DynamoDB and moto drop it.
		if list, err := e.store.List(t.Context(), "alice", "", 10); b.name != "minidyn" && (err != nil || len(list.Sessions) != 0) {
			t.Errorf("List: %+v, %v", list, err)
		}
		if err := e.store.Commit(t.Context(), loaded, ddbhistory.Turn{Messages: turn(1)}); !errors.Is(err, ddbhistory.ErrConflict) {
			t.Errorf("a commit of the session as loaded: %v, want ErrConflict", err)
		}
		if err := e.store.Commit(t.Context(), ddbhistory.NewSession(alice), ddbhistory.Turn{Messages: turn(1)}); !errors.Is(err, ddbhistory.ErrConflict) {
			t.Errorf("a new session under the id: %v, want ErrConflict", err)
		}
		// The id is still alice's: nobody else can take it meanwhile.
		bob := ddbhistory.Key{Owner: "bob", ID: alice.ID}
		if err := e.store.Commit(t.Context(), ddbhistory.NewSession(bob), ddbhistory.Turn{Messages: turn(1)}); !errors.Is(err, ddbhistory.ErrNotFound) {
			t.Errorf("bob taking the id: %v, want ErrNotFound", err)
		}

		// Deleting again finishes the job, and the id is free.
		if err := e.store.Delete(t.Context(), alice); err != nil {
			t.Fatalf("the second delete: %v", err)
		}
		if n := countItems(t, e, "s#alice#chat-1") + countItems(t, e, "id#chat-1"); n != 0 {
			t.Errorf("%d items left", n)
		}
		if err := e.store.Commit(t.Context(), ddbhistory.NewSession(bob), ddbhistory.Turn{Messages: turn(1)}); err != nil {
			t.Errorf("bob taking the freed id: %v", err)
		}
	})
}

func TestStaleDeleteCannotTouchANewSession(t *testing.T) {
	runBackends(t, func(t *testing.T, b backend) {
		e := newEnv(t, b, ddbhistory.Config{})
		fill(t, e.store, alice, 4, 40)
		// One delete is held at its first cleanup transaction; another
		// finishes the job; a new session starts under the id; then the
		// first goes on, with its list of the old session's keys.
		fault, reached, release := pause("TransactWriteItems", 1)
		e.count.setFault(fault)
		done := make(chan error, 1)
		go func() { done <- e.store.Delete(context.Background(), alice) }()
		reach(t, reached)
		if err := e.store.Delete(t.Context(), alice); err != nil {
			t.Fatalf("the second delete: %v", err)
		}
		fresh := ddbhistory.NewSession(alice)
		if err := e.store.Commit(t.Context(), fresh, ddbhistory.Turn{Messages: turn(7)}); err != nil {
			t.Fatal(err)
		}
		close(release)
		if err := <-done; err != nil {
			t.Errorf("the stale delete: %v", err)
		}
		e.count.setFault(nil)
		if got := transcript(t, e.store, alice); !sameJSON(got, turn(7)) {
			t.Errorf("the new session has %d messages after the stale delete, want its 2", len(got))
		}
		bob := ddbhistory.Key{Owner: "bob", ID: alice.ID}
		if err := e.store.Commit(t.Context(), ddbhistory.NewSession(bob), ddbhistory.Turn{Messages: turn(1)}); !errors.Is(err, ddbhistory.ErrNotFound) {
			t.Errorf("the stale delete freed the new session's id: bob's commit got %v", err)
		}
	})
}

func TestIdempotencyKeyBelongsToTheOwner(t *testing.T) {
	runBackends(t, func(t *testing.T, b backend) {
		e := newEnv(t, b, ddbhistory.Config{})
		a := fill(t, e.store, alice, 2, 40)
		hold, err := e.store.Begin(t.Context(), a, "k", "fp-a")
		if err != nil {
			t.Fatal(err)
		}
		if err := e.store.Commit(t.Context(), a, ddbhistory.Turn{Messages: turn(1), Hold: hold, Response: json.RawMessage(`"a"`)}); err != nil {
			t.Fatal(err)
		}
		// On another session of the same owner the key is known, used, and
		// has nothing to replay.
		other := ddbhistory.Key{Owner: "alice", ID: "chat-2"}
		fill(t, e.store, other, 2, 40)
		got, err := e.store.Load(t.Context(), other, "k")
		if err != nil {
			t.Fatal(err)
		}
		if r := got.Replay; r == nil || r.Fingerprint != "fp-a" || r.SessionID != alice.ID || r.Response != nil {
			t.Errorf("the key on another session: replay %+v", r)
		}
		var inUse *ddbhistory.KeyInUseError
		if _, err := e.store.Begin(t.Context(), got, "k", "fp-b"); !errors.As(err, &inUse) || !inUse.Committed || inUse.Fingerprint != "fp-a" {
			t.Errorf("Begin with the key on another session: %v", err)
		}
		if err := e.store.Commit(t.Context(), got, ddbhistory.Turn{Messages: turn(2), Hold: hold, Response: json.RawMessage(`"b"`)}); !errors.Is(err, ddbhistory.ErrInvalid) {
			t.Errorf("Commit on another session with the first session's hold: %v, want ErrInvalid", err)
		}
		// Another owner's key of the same name is another key.
		bob := ddbhistory.NewSession(ddbhistory.Key{Owner: "bob", ID: "chat-9"})
		if _, err := e.store.Begin(t.Context(), bob, "k", "fp-bob"); err != nil {
			t.Errorf("bob's key k: %v", err)
		}

		// Concurrent uses on four sessions: one holds the key.
		var (
			wg   sync.WaitGroup
			mu   sync.Mutex
			held int
		)
		for i := range 4 {
			wg.Go(func() {
				s := ddbhistory.NewSession(ddbhistory.Key{Owner: "alice", ID: fmt.Sprintf("race-%d", i)})
				_, err := e.store.Begin(context.Background(), s, "shared", fmt.Sprintf("fp-%d", i))
				mu.Lock()
				defer mu.Unlock()
				switch {
				case err == nil:
					held++
				case !errors.Is(err, ddbhistory.ErrKeyInUse):
					t.Errorf("Begin %d: %v", i, err)
				}
			})
		}
		wg.Wait()
		if held != 1 {
			t.Errorf("%d of 4 concurrent uses of one key hold it, want 1", held)
		}
	})
}

func TestHoldExpiresAtTheInvocationDeadline(t *testing.T) {
	runBackends(t, func(t *testing.T, b backend) {
		e := newEnv(t, b, ddbhistory.Config{})
		ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
		defer cancel()
		first := ddbhistory.NewSession(alice)
		firstHold, err := e.store.Begin(ctx, first, "k", "fp")
		if err != nil {
			t.Fatal(err)
		}
		// The process dies holding the key. Until its invocation would have
		// timed out, a retry is refused; soon after, it runs.
		retry := ddbhistory.NewSession(alice)
		e.now.Advance(10 * time.Second)
		if _, err := e.store.Begin(t.Context(), retry, "k", "fp"); !errors.Is(err, ddbhistory.ErrKeyInUse) {
			t.Errorf("at the deadline: %v, want ErrKeyInUse", err)
		}
		e.now.Advance(ddbhistory.HoldMargin + time.Second)
		if _, err := e.store.Begin(t.Context(), retry, "k", "fp"); err != nil {
			t.Errorf("after the deadline and the margin: %v", err)
		}
		// The dead invocation could not commit over the retry's hold.
		if err := e.store.Commit(t.Context(), first, ddbhistory.Turn{Messages: turn(1), Hold: firstHold, Response: json.RawMessage(`1`)}); !errors.Is(err, ddbhistory.ErrConflict) {
			t.Errorf("the first turn's late commit: %v, want ErrConflict", err)
		}
		// Without a deadline, a hold lasts DefaultHoldTTL.
		other := ddbhistory.NewSession(alice)
		if _, err := e.store.Begin(t.Context(), other, "k2", "fp"); err != nil {
			t.Fatal(err)
		}
		e.now.Advance(ddbhistory.DefaultHoldTTL - time.Second)
		if _, err := e.store.Begin(t.Context(), retry, "k2", "fp"); !errors.Is(err, ddbhistory.ErrKeyInUse) {
			t.Errorf("a hold without a deadline, before DefaultHoldTTL: %v", err)
		}
	})
}

func TestCommitWhoseAnswerIsLost(t *testing.T) {
	runBackends(t, func(t *testing.T, b backend) {
		e := newEnv(t, b, ddbhistory.Config{})
		sess := fill(t, e.store, alice, 2, 40)
		hold, err := e.store.Begin(t.Context(), sess, "k", "fp")
		if err != nil {
			t.Fatal(err)
		}
		// The transaction lands, and the invocation's time runs out before
		// its answer arrives.
		e.count.setLose(func(op string, r *http.Request) error {
			if op != "TransactWriteItems" {
				return nil
			}
			<-r.Context().Done()
			return r.Context().Err()
		})
		ctx, cancel := context.WithTimeout(t.Context(), 200*time.Millisecond)
		defer cancel()
		err = e.store.Commit(ctx, sess, ddbhistory.Turn{Messages: turn(1), Hold: hold, Response: json.RawMessage(`"stored"`)})
		e.count.setLose(nil)
		if !errors.Is(err, ddbhistory.ErrOutcomeUnknown) {
			t.Fatalf("err = %v, want ErrOutcomeUnknown", err)
		}
		// In fact it was stored, and the key replays it.
		got, err := e.store.Load(t.Context(), alice, "k")
		if err != nil {
			t.Fatal(err)
		}
		if got.Count != 4 || got.Replay == nil || string(got.Replay.Response) != `"stored"` {
			t.Errorf("after the lost answer: count %d, replay %+v", got.Count, got.Replay)
		}
		// A context that ended before anything was sent is not unknown.
		done, cancelDone := context.WithCancel(t.Context())
		cancelDone()
		if err := e.store.Commit(done, got, ddbhistory.Turn{Messages: turn(2)}); !errors.Is(err, context.Canceled) || errors.Is(err, ddbhistory.ErrOutcomeUnknown) {
			t.Errorf("a commit whose context ended first: %v", err)
		}
	})
}

// TestDeleteWhoseAnswerIsLost: a delete whose tombstone lands after its
// context ended says that its outcome is unknown, not that nothing changed,
// and a second delete finishes it.
func TestDeleteWhoseAnswerIsLost(t *testing.T) {
	runBackends(t, func(t *testing.T, b backend) {
		e := newEnv(t, b, ddbhistory.Config{})
		fill(t, e.store, alice, 4, 40)
		e.count.setLose(func(op string, r *http.Request) error {
			if op != "UpdateItem" {
				return nil
			}
			<-r.Context().Done()
			return r.Context().Err()
		})
		ctx, cancel := context.WithTimeout(t.Context(), 200*time.Millisecond)
		defer cancel()
		err := e.store.Delete(ctx, alice)
		e.count.setLose(nil)
		if !errors.Is(err, ddbhistory.ErrOutcomeUnknown) {
			t.Fatalf("err = %v, want ErrOutcomeUnknown", err)
		}
		if _, err := e.store.Load(t.Context(), alice, ""); !errors.Is(err, ddbhistory.ErrDeleting) {
			t.Errorf("after the lost answer the session is %v, want ErrDeleting: the tombstone landed", err)
		}
		if err := e.store.Delete(t.Context(), alice); err != nil {
			t.Errorf("the second delete: %v", err)
		}
		if n := countItems(t, e, "s#alice#chat-1"); n != 0 {
			t.Errorf("%d items left", n)
		}
	})
}

func TestTranscriptCursorPastTheEnd(t *testing.T) {
	runBackends(t, func(t *testing.T, b backend) {
		e := newEnv(t, b, ddbhistory.Config{})
		fill(t, e.store, alice, 4, 40)
		for _, at := range []int{4, 5, 9_999_999_900, 9_999_999_999} {
			for _, limit := range []int{1, ddbhistory.MaxPageSize} {
				page, err := e.store.Transcript(t.Context(), alice, ddbhistory.CursorAt(at), limit)
				if err != nil || len(page.Messages) != 0 || page.NextCursor != "" {
					t.Errorf("cursor at %d, limit %d: %+v, %v; want an empty last page", at, limit, page, err)
				}
			}
		}
	})
}
