package ddbhistory_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/lambda-agent/lambda-agent/internal/agent"
	"github.com/lambda-agent/lambda-agent/internal/ddbhistory"
)

// The tests in this file hold rewinding commits (Turn.Rewind) to what
// issue 17 asks: one atomic, version-checked change, that readers see
// whole or not at all, even when it takes several transactions, and that
// replays of the turns it discarded no longer answer.

// heavyTurn is a tool turn whose n tool results are each about 300 KB of
// text that barely compresses, so that each message is one item of some
// 230 KB: a question, n tool uses and results, and an answer.
func heavyTurn(tag string, n int) []agent.Message {
	msgs := []agent.Message{agent.UserText(tag + " question")}
	for i := range n {
		id := fmt.Sprintf("%s-%d", tag, i)
		msgs = append(msgs,
			agent.Message{Role: agent.RoleAssistant, Content: []agent.ContentBlock{{ToolUse: &agent.ToolUseBlock{ToolUseID: id, Name: "read", Input: json.RawMessage(`{}`)}}}},
			agent.Message{Role: agent.RoleUser, Content: []agent.ContentBlock{{ToolResult: agent.TextResult(id, agent.ToolSuccess, base64.StdEncoding.EncodeToString(randomBytes(225_000)))}}},
		)
	}
	return append(msgs, agent.AssistantText(tag+" answer"))
}

// mustLoad loads key, or fails the test.
func mustLoad(t *testing.T, s *ddbhistory.Store, key ddbhistory.Key, idempotencyKey string) *ddbhistory.Session {
	t.Helper()
	sess, err := s.Load(t.Context(), key, idempotencyKey)
	if err != nil {
		t.Fatalf("load %s: %v", key.ID, err)
	}
	return sess
}

// checkStored fails the test unless key's session holds exactly want, as
// Load (whose window starts at message removed) and Transcript read it.
func checkStored(t *testing.T, s *ddbhistory.Store, key ddbhistory.Key, want []agent.Message, removed int) {
	t.Helper()
	got := mustLoad(t, s, key, "")
	if got.Count != len(want) || got.Conversation.Window.Removed != removed || !sameJSON(got.Conversation.Messages, want[removed:]) {
		t.Errorf("load: count %d, window from %d of %d messages; want count %d, the %d from %d", got.Count, got.Conversation.Window.Removed, len(got.Conversation.Messages), len(want), len(want)-removed, removed)
	}
	if all := transcript(t, s, key); !sameJSON(all, want) {
		t.Errorf("transcript: %d messages, not the %d wanted", len(all), len(want))
	}
}

func TestRewindReplacesMessages(t *testing.T) {
	runBackends(t, func(t *testing.T, b backend) {
		e := newEnv(t, b, ddbhistory.Config{})
		sess := fill(t, e.store, alice, 8, 40)
		before := messagesOf(8)

		// Regenerate the last turn: its two messages are replaced.
		redo := []agent.Message{agent.UserText("question 000003"), agent.AssistantText("answer, again")}
		if err := e.store.Commit(t.Context(), sess, ddbhistory.Turn{Rewind: true, From: 6, Messages: redo}); err != nil {
			t.Fatal(err)
		}
		want := slices.Concat(before[:6], redo)
		if sess.Count != 8 || sess.Version != 2 {
			t.Errorf("after the rewind the session says count %d, version %d; want 8, 2", sess.Count, sess.Version)
		}
		checkStored(t, e.store, alice, want, 0)

		// Discard two turns, adding nothing: the count shrinks.
		sess = mustLoad(t, e.store, alice, "")
		if err := e.store.Commit(t.Context(), sess, ddbhistory.Turn{Rewind: true, From: 2}); err != nil {
			t.Fatal(err)
		}
		want = want[:2]
		checkStored(t, e.store, alice, want, 0)
		if got := mustLoad(t, e.store, alice, ""); got.Title != "question 000000" {
			t.Errorf("a rewind that keeps message 0 changed the title to %q", got.Title)
		}

		// The next plain turn appends after the kept messages, over what
		// the rewind discarded, which never shows again.
		sess = mustLoad(t, e.store, alice, "")
		if err := e.store.Commit(t.Context(), sess, ddbhistory.Turn{Messages: turn(40)}); err != nil {
			t.Fatal(err)
		}
		want = append(want, turn(40)...)
		checkStored(t, e.store, alice, want, 0)

		// Replacing every message gives the session its new first
		// message's title.
		sess = mustLoad(t, e.store, alice, "")
		if err := e.store.Commit(t.Context(), sess, ddbhistory.Turn{Rewind: true, From: 0, Messages: turn(77)}); err != nil {
			t.Fatal(err)
		}
		checkStored(t, e.store, alice, turn(77), 0)
		if got := mustLoad(t, e.store, alice, ""); got.Title != "question 77" || got.Count != 2 {
			t.Errorf("after replacing every message: title %q, count %d; want %q, 2", got.Title, got.Count, "question 77")
		}
		list, err := e.store.List(t.Context(), alice.Owner, "", 10)
		if err != nil || len(list.Sessions) != 1 || list.Sessions[0].Title != "question 77" {
			t.Errorf("the list after the rewind: %+v, %v", list, err)
		}

		// A rewind to the end appends, like a plain turn.
		sess = mustLoad(t, e.store, alice, "")
		if err := e.store.Commit(t.Context(), sess, ddbhistory.Turn{Rewind: true, From: 2, Messages: turn(78)}); err != nil {
			t.Fatal(err)
		}
		checkStored(t, e.store, alice, slices.Concat(turn(77), turn(78)), 0)

		// A rewind past the end, or with checkpointed messages, is refused.
		sess = mustLoad(t, e.store, alice, "")
		for _, bad := range []ddbhistory.Turn{
			{Rewind: true, From: 5, Messages: turn(1)},
			{Rewind: true, From: -1},
			{Rewind: true, From: 2, Earlier: 1, Messages: turn(1)},
		} {
			if err := e.store.Commit(t.Context(), sess, bad); !errors.Is(err, ddbhistory.ErrInvalid) {
				t.Errorf("rewind from %d with %d earlier: %v, want ErrInvalid", bad.From, bad.Earlier, err)
			}
		}
		checkStored(t, e.store, alice, slices.Concat(turn(77), turn(78)), 0)
	})
}

// TestRewindOfALongSessionToAShortOne: the discarded messages stay in the
// table past the session's count until overwritten; a load reads past them
// to the window, and they never show.
func TestRewindOfALongSessionToAShortOne(t *testing.T) {
	runBackends(t, func(t *testing.T, b backend) {
		e := newEnv(t, b, ddbhistory.Config{WindowHint: 4})
		sess := fill(t, e.store, alice, 120, 200)
		if err := e.store.Commit(t.Context(), sess, ddbhistory.Turn{Rewind: true, From: 4, Messages: turn(500)}); err != nil {
			t.Fatal(err)
		}
		want := slices.Concat(messagesOf(4), turn(500))
		checkStored(t, e.store, alice, want, 0)
		sess = mustLoad(t, e.store, alice, "")
		if err := e.store.Commit(t.Context(), sess, ddbhistory.Turn{Messages: turn(501), Window: agent.WindowState{Removed: 2}}); err != nil {
			t.Fatal(err)
		}
		want = append(want, turn(501)...)
		checkStored(t, e.store, alice, want, 2)
	})
}

// TestRewindOverAMessageOfSeveralItems replaces a message stored as
// several items (its body is larger than one item holds) with a smaller
// one, as a regenerate whose new tool result is short does. The old
// message's later parts stay under its index with their old version; only
// the parts the first item counts are the message's, so reads must not
// take the leftovers for a message written before the rewind.
func TestRewindOverAMessageOfSeveralItems(t *testing.T) {
	runBackends(t, func(t *testing.T, b backend) {
		e := newEnv(t, b, ddbhistory.Config{})
		long := base64.StdEncoding.EncodeToString(randomBytes(600_000)) // about 450 KB compressed: 2 items
		tool := func(result string) []agent.Message {
			return []agent.Message{
				agent.UserText("read it"),
				{Role: agent.RoleAssistant, Content: []agent.ContentBlock{{ToolUse: &agent.ToolUseBlock{ToolUseID: "t1", Name: "read", Input: json.RawMessage(`{}`)}}}},
				{Role: agent.RoleUser, Content: []agent.ContentBlock{{ToolResult: agent.TextResult("t1", agent.ToolSuccess, result)}}},
				agent.AssistantText("read"),
			}
		}
		sess := ddbhistory.NewSession(alice)
		if err := e.store.Commit(t.Context(), sess, ddbhistory.Turn{Messages: tool(long)}); err != nil {
			t.Fatal(err)
		}
		checkStored(t, e.store, alice, tool(long), 0)
		if err := e.store.Commit(t.Context(), sess, ddbhistory.Turn{Rewind: true, From: 0, Messages: tool("short")}); err != nil {
			t.Fatal(err)
		}
		checkStored(t, e.store, alice, tool("short"), 0)
	})
}

func TestRewindRacingATurn(t *testing.T) {
	runBackends(t, func(t *testing.T, b backend) {
		for round := range 6 {
			t.Run(fmt.Sprint(round), func(t *testing.T) {
				e := newEnv(t, b, ddbhistory.Config{})
				fill(t, e.store, alice, 8, 40)
				rewinder, turner := mustLoad(t, e.store, alice, ""), mustLoad(t, e.store, alice, "")
				redo := []agent.Message{agent.UserText("question 000002"), agent.AssistantText("answer, again")}
				rewound := slices.Concat(messagesOf(4), redo)
				appended := slices.Concat(messagesOf(8), turn(9))
				var errRewind, errTurn error
				// Even rounds race freely; odd rounds let one side go first,
				// alternately, so that each order is seen whatever the
				// scheduler does.
				switch round % 4 {
				case 1:
					errRewind = e.store.Commit(t.Context(), rewinder, ddbhistory.Turn{Rewind: true, From: 4, Messages: redo})
					errTurn = e.store.Commit(t.Context(), turner, ddbhistory.Turn{Messages: turn(9)})
				case 3:
					errTurn = e.store.Commit(t.Context(), turner, ddbhistory.Turn{Messages: turn(9)})
					errRewind = e.store.Commit(t.Context(), rewinder, ddbhistory.Turn{Rewind: true, From: 4, Messages: redo})
				default:
					var wg sync.WaitGroup
					wg.Go(func() {
						errRewind = e.store.Commit(context.Background(), rewinder, ddbhistory.Turn{Rewind: true, From: 4, Messages: redo})
					})
					wg.Go(func() { errTurn = e.store.Commit(context.Background(), turner, ddbhistory.Turn{Messages: turn(9)}) })
					wg.Wait()
				}
				switch {
				case errRewind == nil && errors.Is(errTurn, ddbhistory.ErrConflict):
					checkStored(t, e.store, alice, rewound, 0)
				case errTurn == nil && errors.Is(errRewind, ddbhistory.ErrConflict):
					checkStored(t, e.store, alice, appended, 0)
				default:
					t.Fatalf("rewind: %v; turn: %v; want one nil and one ErrConflict", errRewind, errTurn)
				}
				if got := mustLoad(t, e.store, alice, ""); got.Version != 2 {
					t.Errorf("version %d after the race, want 2: one commit", got.Version)
				}
			})
		}
	})
}

// TestRewindInParts rewinds the last turn of a session and replaces it
// with a turn too large for one transaction, whose writes over visible
// messages fit the last one: it commits in parts; until the last lands,
// readers see the old session whole; a commit stopped between its writes
// leaves the old session, and the next commit works.
func TestRewindInParts(t *testing.T) {
	runBackends(t, func(t *testing.T, b backend) {
		e := newEnv(t, b, ddbhistory.Config{})
		fill(t, e.store, alice, 8, 40)
		old := messagesOf(8)
		heavy := heavyTurn("heavy", 10) // 22 messages, about 2.3 MB
		heavier := heavyTurn("heavier", 20)

		// Stopped between its writes: the process dies while the last
		// transaction waits to be sent.
		sess := mustLoad(t, e.store, alice, "")
		fault, reached, release := pause("TransactWriteItems", 2)
		e.count.setFault(fault)
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan error, 1)
		go func() {
			done <- e.store.Commit(ctx, sess, ddbhistory.Turn{Rewind: true, From: 6, Messages: heavier})
		}()
		reach(t, reached)
		checkStored(t, e.store, alice, old, 0)
		cancel()
		close(release)
		if err := <-done; err == nil {
			t.Fatal("the rewind succeeded without its last write")
		}
		e.count.setFault(nil)
		checkStored(t, e.store, alice, old, 0)
		if got := mustLoad(t, e.store, alice, ""); got.Version != 1 {
			t.Errorf("version %d after the dead rewind, want 1", got.Version)
		}

		// The same rewind again, held before its last write: readers see
		// the old session, never a mix.
		sess = mustLoad(t, e.store, alice, "")
		hold := mustBegin(t, e.store, sess, "heavy-1")
		fault, reached, release = pause("TransactWriteItems", 2)
		e.count.setFault(fault)
		e.count.reset()
		go func() {
			done <- e.store.Commit(context.Background(), sess, ddbhistory.Turn{Rewind: true, From: 6, Messages: heavier, Hold: hold, Response: json.RawMessage(`{"heavier":true}`)})
		}()
		reach(t, reached)
		checkStored(t, e.store, alice, old, 0)
		if got := mustLoad(t, e.store, alice, "heavy-1"); got.Replay != nil {
			t.Errorf("between the writes the key replays %+v", got.Replay)
		}
		close(release)
		if err := <-done; err != nil {
			t.Fatalf("a rewind of %d messages in parts: %v", len(heavier), err)
		}
		e.count.setFault(nil)
		if u := e.count.reset(); u.ByOperation["UpdateItem"] != 1 || u.ByOperation["TransactWriteItems"] != 2 {
			t.Errorf("the commit's writes: %v; want a reservation and 2 transactions", u.ByOperation)
		}
		want := slices.Concat(old[:6], heavier)
		checkStored(t, e.store, alice, want, 0)
		if got := mustLoad(t, e.store, alice, "heavy-1"); got.Replay == nil || string(got.Replay.Response) != `{"heavier":true}` || got.Replay.First != 6 || got.Replay.Count != len(heavier) {
			t.Errorf("the rewind's replay: %+v", got.Replay)
		}

		// A smaller rewind over the big one, from the start of its turn,
		// fits one transaction: the messages past its end are left unseen.
		sess = mustLoad(t, e.store, alice, "")
		if err := e.store.Commit(t.Context(), sess, ddbhistory.Turn{Rewind: true, From: 6, Messages: heavy}); err != nil {
			t.Fatalf("the second rewind: %v", err)
		}
		checkStored(t, e.store, alice, slices.Concat(old[:6], heavy), 0)

		// A plain turn after it works as ever.
		sess = mustLoad(t, e.store, alice, "")
		if err := e.store.Commit(t.Context(), sess, ddbhistory.Turn{Messages: turn(99)}); err != nil {
			t.Fatal(err)
		}
		checkStored(t, e.store, alice, slices.Concat(old[:6], heavy, turn(99)), 0)
	})
}

// TestRewindInPartsRacingATurn holds a rewind in parts between its writes
// while a small turn commits: the rewind loses, and removes what it wrote.
func TestRewindInPartsRacingATurn(t *testing.T) {
	runBackends(t, func(t *testing.T, b backend) {
		e := newEnv(t, b, ddbhistory.Config{})
		fill(t, e.store, alice, 8, 40)
		big, small := mustLoad(t, e.store, alice, ""), mustLoad(t, e.store, alice, "")
		fault, reached, release := pause("TransactWriteItems", 2)
		e.count.setFault(fault)
		done := make(chan error, 1)
		go func() {
			done <- e.store.Commit(context.Background(), big, ddbhistory.Turn{Rewind: true, From: 4, Messages: heavyTurn("lost", 20)})
		}()
		reach(t, reached)
		e.count.setFault(nil)
		if err := e.store.Commit(t.Context(), small, ddbhistory.Turn{Messages: turn(9)}); err != nil {
			t.Fatalf("the small turn: %v", err)
		}
		close(release)
		if err := <-done; !errors.Is(err, ddbhistory.ErrConflict) {
			t.Errorf("the rewind: %v, want ErrConflict", err)
		}
		want := slices.Concat(messagesOf(8), turn(9))
		checkStored(t, e.store, alice, want, 0)
		if n := countItems(t, e, "s#alice#chat-1"); n != len(want)+1 {
			t.Errorf("%d items under the session, want %d: the loser's leftovers stayed", n, len(want)+1)
		}
	})
}

// TestRewindWhoseReplacingWritesDoNotFit: a rewind whose writes over
// visible messages cannot all go in the last transaction, by bytes or by
// items, is refused before anything is written.
func TestRewindWhoseReplacingWritesDoNotFit(t *testing.T) {
	runBackends(t, func(t *testing.T, b backend) {
		for _, tc := range []struct {
			name        string
			first, redo []agent.Message
		}{
			{"bytes", heavyTurn("first", 20), heavyTurn("redo", 20)},
			{"items", bigTurn("first", 120), bigTurn("redo", 120)},
		} {
			t.Run(tc.name, func(t *testing.T) {
				e := newEnv(t, b, ddbhistory.Config{})
				sess := ddbhistory.NewSession(alice)
				if err := e.store.Commit(t.Context(), sess, ddbhistory.Turn{Messages: tc.first}); err != nil {
					t.Fatal(err)
				}
				items := countItems(t, e, "s#alice#chat-1")
				sess = mustLoad(t, e.store, alice, "")
				hold := mustBegin(t, e.store, sess, "too-large")
				e.count.reset()
				var tl *ddbhistory.TooLargeError
				err := e.store.Commit(t.Context(), sess, ddbhistory.Turn{Rewind: true, From: 0, Messages: tc.redo, Hold: hold, Response: json.RawMessage(`{}`)})
				if !errors.As(err, &tl) || !errors.Is(err, ddbhistory.ErrTooLarge) {
					t.Fatalf("err = %v, want a *TooLargeError", err)
				}
				if u := e.count.reset(); u.Requests != 0 {
					t.Errorf("%d requests for a refused rewind: %v", u.Requests, u.ByOperation)
				}
				if n := countItems(t, e, "s#alice#chat-1"); n != items {
					t.Errorf("%d items under the session, %d before", n, items)
				}
				checkStored(t, e.store, alice, tc.first, 0)
				if sess.Version != 1 {
					t.Errorf("the refused commit moved the loaded session to version %d", sess.Version)
				}
				// A rewind of the same turn from a later message, whose
				// replacing writes fit, goes through.
				if err := e.store.Commit(t.Context(), sess, ddbhistory.Turn{Rewind: true, From: len(tc.first) - 2, Messages: tc.redo[len(tc.redo)-2:], Hold: hold, Response: json.RawMessage(`{}`)}); err != nil {
					t.Fatalf("a smaller rewind: %v", err)
				}
				checkStored(t, e.store, alice, slices.Concat(tc.first[:len(tc.first)-2], tc.redo[len(tc.redo)-2:]), 0)
			})
		}
	})
}

// TestReplayOfARewoundTurn: a keyed turn that a rewind discarded, or
// rewrote, no longer replays its answer; one that a rewind kept still
// does, where it is; and a keyed turn after a rewind replays as usual.
func TestReplayOfARewoundTurn(t *testing.T) {
	runBackends(t, func(t *testing.T, b backend) {
		keyed := func(t *testing.T, e *env, key string) *ddbhistory.Session {
			t.Helper()
			sess := mustLoad(t, e.store, alice, "")
			if err := e.store.Commit(t.Context(), sess, ddbhistory.Turn{Messages: turn(sess.Count), Hold: mustBegin(t, e.store, sess, key), Response: json.RawMessage(`"` + key + `"`)}); err != nil {
				t.Fatal(err)
			}
			return sess
		}
		rewind := func(t *testing.T, e *env, from int, msgs []agent.Message) {
			t.Helper()
			sess := mustLoad(t, e.store, alice, "")
			if err := e.store.Commit(t.Context(), sess, ddbhistory.Turn{Rewind: true, From: from, Messages: msgs}); err != nil {
				t.Fatal(err)
			}
		}
		replay := func(t *testing.T, e *env, key string) *ddbhistory.Replay {
			t.Helper()
			r := mustLoad(t, e.store, alice, key).Replay
			if r == nil {
				t.Fatalf("%s: no replay", key)
			}
			return r
		}
		t.Run("discarded", func(t *testing.T) {
			e := newEnv(t, b, ddbhistory.Config{})
			fill(t, e.store, alice, 4, 40)
			keyed(t, e, "k")
			rewind(t, e, 4, nil)
			if r := replay(t, e, "k"); r.Response != nil || r.Fingerprint != "fp" || r.SessionID != alice.ID {
				t.Errorf("replay of a discarded turn: %+v; want its record with no response", r)
			}
		})
		t.Run("rewritten", func(t *testing.T) {
			e := newEnv(t, b, ddbhistory.Config{})
			fill(t, e.store, alice, 4, 40)
			keyed(t, e, "k")
			rewind(t, e, 4, turn(50)) // the same count, other messages
			if r := replay(t, e, "k"); r.Response != nil {
				t.Errorf("replay of a rewritten turn: %+v; want no response", r)
			}
			// Another turn refills the index: still no replay.
			keyed(t, e, "later")
			rewind(t, e, 4, nil)
			keyed(t, e, "again")
			if r := replay(t, e, "k"); r.Response != nil {
				t.Errorf("replay of a turn whose messages were written over twice: %+v; want no response", r)
			}
		})
		t.Run("kept", func(t *testing.T) {
			e := newEnv(t, b, ddbhistory.Config{})
			fill(t, e.store, alice, 4, 40)
			keyed(t, e, "k")
			keyed(t, e, "next")
			rewind(t, e, 6, turn(60)) // rewrites the turn after it
			if r := replay(t, e, "k"); string(r.Response) != `"k"` || r.First != 4 || r.Count != 2 {
				t.Errorf("replay of a kept turn: %+v; want its response, first 4, count 2", r)
			}
			if r := replay(t, e, "next"); r.Response != nil {
				t.Errorf("replay of the rewritten turn after it: %+v; want no response", r)
			}
			rewind(t, e, 6, nil) // discards the turn after it
			if r := replay(t, e, "k"); string(r.Response) != `"k"` || r.First != 4 || r.Count != 2 {
				t.Errorf("replay of a kept turn after a second rewind: %+v", r)
			}
		})
		t.Run("after the rewind", func(t *testing.T) {
			e := newEnv(t, b, ddbhistory.Config{})
			fill(t, e.store, alice, 8, 40)
			rewind(t, e, 2, nil)
			keyed(t, e, "k")
			if r := replay(t, e, "k"); string(r.Response) != `"k"` || r.First != 2 || r.Count != 2 {
				t.Errorf("replay of a turn written after a rewind: %+v; want its response, first 2, count 2", r)
			}
		})
	})
}

// readTranscript reads key's whole transcript, without failing the test,
// so that it can run on a goroutine of its own.
func readTranscript(ctx context.Context, s *ddbhistory.Store) ([]agent.Message, error) {
	var all []agent.Message
	for cursor := ""; ; {
		p, err := s.Transcript(ctx, alice, cursor, ddbhistory.MaxPageSize)
		if err != nil {
			return nil, err
		}
		all = append(all, p.Messages...)
		if cursor = p.NextCursor; cursor == "" {
			return all, nil
		}
	}
}

// gate is a transport that lets a test hold a reader's requests, by
// operation, before they are sent (before) and after they are answered
// (after).
type gate struct {
	next          http.RoundTripper
	before, after func(op string)
	queries       atomic.Int32
}

func (g *gate) RoundTrip(r *http.Request) (*http.Response, error) {
	target := r.Header.Get("X-Amz-Target")
	op := target[strings.LastIndex(target, ".")+1:]
	if op == "Query" {
		g.queries.Add(1)
	}
	if g.before != nil {
		g.before(op)
	}
	resp, err := g.next.RoundTrip(r)
	if g.after != nil {
		g.after(op)
	}
	return resp, err
}

// readerWith returns a store on e's table whose requests go through g.
func readerWith(t *testing.T, e *env, g *gate) *ddbhistory.Store {
	t.Helper()
	opts := e.client.Options()
	g.next = opts.HTTPClient.(*http.Client).Transport
	opts.HTTPClient = &http.Client{Transport: g}
	s, err := ddbhistory.New(dynamodb.New(opts), ddbhistory.Config{Table: e.table, Now: e.now.Now, WindowHint: 2})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// TestReadsBesideARewind lands a rewind between the requests of one read,
// so that the read sees the session item from one side of the commit and
// messages from the other, as a read that overlaps a transaction can:
// messageSet.current makes it read again, and it returns the new session
// whole, never a mix.
func TestReadsBesideARewind(t *testing.T) {
	runBackends(t, func(t *testing.T, b backend) {
		redo := []agent.Message{agent.UserText("question 000002"), agent.AssistantText("answer, again")}
		for _, tc := range []struct {
			name string
			// hold returns the gate's hooks: they let the first read's
			// request go when landed is closed, and close ready once the
			// commit may land.
			hold func(ready, landed chan struct{}) (before, after func(string))
			read func(ctx context.Context, s *ddbhistory.Store) ([]agent.Message, error)
		}{
			{
				// Load's second query (the window is longer than the hint
				// of 2) runs after the rewind: the messages it finds were
				// written after the session item of its first.
				name: "load, messages newer than the session item",
				hold: func(ready, landed chan struct{}) (func(string), func(string)) {
					var n atomic.Int32
					return func(op string) {
						if op == "Query" && n.Add(1) == 2 {
							close(ready)
							<-landed
						}
					}, nil
				},
				read: func(ctx context.Context, s *ddbhistory.Store) ([]agent.Message, error) {
					sess, err := s.Load(ctx, alice, "")
					if err != nil {
						return nil, err
					}
					return sess.Conversation.Messages, nil
				},
			},
			{
				// Transcript's query runs before the rewind, its read of
				// the session item after: the messages it found were
				// written before the rewind that covered them.
				name: "transcript, messages older than the rewind",
				hold: func(ready, landed chan struct{}) (func(string), func(string)) {
					var held, queried atomic.Bool
					return func(op string) {
							if op == "GetItem" && held.CompareAndSwap(false, true) {
								<-landed
							}
						}, func(op string) {
							if op == "Query" && queried.CompareAndSwap(false, true) {
								close(ready)
							}
						}
				},
				read: readTranscript,
			},
			{
				// Transcript's read of the session item runs before the
				// rewind, its query after: the messages are newer than the
				// session item.
				name: "transcript, messages newer than the session item",
				hold: func(ready, landed chan struct{}) (func(string), func(string)) {
					var held atomic.Bool
					var metaRead = make(chan struct{})
					var once sync.Once
					return func(op string) {
							if op == "Query" && held.CompareAndSwap(false, true) {
								<-metaRead
								close(ready)
								<-landed
							}
						}, func(op string) {
							if op == "GetItem" {
								once.Do(func() { close(metaRead) })
							}
						}
				},
				read: readTranscript,
			},
		} {
			t.Run(tc.name, func(t *testing.T) {
				e := newEnv(t, b, ddbhistory.Config{})
				fill(t, e.store, alice, 8, 40)
				sess := mustLoad(t, e.store, alice, "")
				ready, landed := make(chan struct{}), make(chan struct{})
				g := &gate{}
				g.before, g.after = tc.hold(ready, landed)
				reader := readerWith(t, e, g)
				var (
					msgs []agent.Message
					err  error
				)
				done := make(chan struct{})
				go func() {
					defer close(done)
					msgs, err = tc.read(t.Context(), reader)
				}()
				reach(t, ready)
				if err := e.store.Commit(t.Context(), sess, ddbhistory.Turn{Rewind: true, From: 2, Messages: redo}); err != nil {
					t.Fatal(err)
				}
				close(landed)
				want := slices.Concat(messagesOf(2), redo)
				<-done
				if err != nil {
					t.Fatalf("the read beside the rewind: %v", err)
				}
				if !sameJSON(msgs, want) {
					t.Errorf("the read beside the rewind got %d messages, not the %d of the rewound session", len(msgs), len(want))
				}
				if q := g.queries.Load(); q < 2 {
					t.Errorf("%d queries: the read was not made again", q)
				}
			})
		}
	})
}

// TestRewindDropsWhatItDiscarded: a rewind that shrinks a session removes
// the discarded items, so that loading it costs what loading a session of
// its new length does, not what reading through them would.
func TestRewindDropsWhatItDiscarded(t *testing.T) {
	runBackends(t, func(t *testing.T, b backend) {
		e := newEnv(t, b, ddbhistory.Config{})
		key := ddbhistory.Key{Owner: "alice", ID: "big"}
		sess := ddbhistory.NewSession(key)
		var msgs []agent.Message
		for i := range 150 {
			msgs = append(msgs, agent.UserText(fmt.Sprintf("q%d %s", i, base64.StdEncoding.EncodeToString(randomBytes(6000)))), agent.AssistantText(fmt.Sprintf("a%d", i)))
		}
		for i := 0; i < len(msgs); i += 90 {
			if err := e.store.Commit(t.Context(), sess, ddbhistory.Turn{Messages: msgs[i:min(i+90, len(msgs))]}); err != nil {
				t.Fatal(err)
			}
		}
		fresh := ddbhistory.Key{Owner: "alice", ID: "fresh"}
		if err := e.store.Commit(t.Context(), ddbhistory.NewSession(fresh), ddbhistory.Turn{Messages: msgs[:2]}); err != nil {
			t.Fatal(err)
		}
		sess = mustLoad(t, e.store, key, "")
		if err := e.store.Commit(t.Context(), sess, ddbhistory.Turn{Rewind: true, From: 2}); err != nil {
			t.Fatal(err)
		}
		checkStored(t, e.store, key, msgs[:2], 0)
		e.count.reset()
		mustLoad(t, e.store, key, "")
		rewound := e.count.reset()
		mustLoad(t, e.store, fresh, "")
		want := e.count.reset()
		if rewound.RCU > want.RCU || rewound.Requests > want.Requests {
			t.Errorf("a load after the rewind: %d requests, %.0f RCU; a fresh session of 2 messages: %d, %.0f", rewound.Requests, rewound.RCU, want.Requests, want.RCU)
		}
	})
}
