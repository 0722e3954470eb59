package ddbhistory_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/google/go-cmp/cmp"
	"github.com/lambda-agent/lambda-agent/internal/agent"
	"github.com/lambda-agent/lambda-agent/internal/ddbhistory"
)

var alice = ddbhistory.Key{Owner: "alice", ID: "chat-1"}

func TestLoadMissing(t *testing.T) {
	runBackends(t, func(t *testing.T, b backend) {
		e := newEnv(t, b, ddbhistory.Config{})
		if _, err := e.store.Load(t.Context(), alice, ""); !errors.Is(err, ddbhistory.ErrNotFound) {
			t.Errorf("err = %v, want ErrNotFound", err)
		}
	})
}

func TestCommitAndLoad(t *testing.T) {
	runBackends(t, func(t *testing.T, b backend) {
		e := newEnv(t, b, ddbhistory.Config{TTL: 30 * 24 * time.Hour})
		sess := ddbhistory.NewSession(alice)
		state := map[string]json.RawMessage{"memory:colour": json.RawMessage(`"teal"`)}
		window := agent.WindowState{Summary: "earlier: nothing", LastInputTokens: 1234}
		msgs := []agent.Message{
			{Role: agent.RoleUser, Content: []agent.ContentBlock{agent.Text("look"), {Image: &agent.ImageBlock{Format: "png", Source: agent.Source{Bytes: []byte{0x89, 'P', 'N', 'G', 0}}}}}},
			{Role: agent.RoleAssistant, Content: []agent.ContentBlock{{ToolUse: &agent.ToolUseBlock{ToolUseID: "t1", Name: "calculator", Input: json.RawMessage(`{"expression":"1+1"}`)}}}},
			{Role: agent.RoleUser, Content: []agent.ContentBlock{{ToolResult: &agent.ToolResultBlock{ToolUseID: "t1", Status: agent.ToolSuccess, Content: []agent.ToolResultContent{{JSON: json.RawMessage(`{"result":2}`)}}}}}},
			agent.AssistantText("It is 2."),
		}
		if err := e.store.Commit(t.Context(), sess, ddbhistory.Turn{Messages: msgs, Window: window, State: state}); err != nil {
			t.Fatal(err)
		}
		if sess.Version != 1 || sess.Count != 4 {
			t.Errorf("after commit: version %d, count %d", sess.Version, sess.Count)
		}
		got, err := e.store.Load(t.Context(), alice, "")
		if err != nil {
			t.Fatal(err)
		}
		want := agent.Conversation{Messages: msgs, Window: window, State: state}
		if diff := cmp.Diff(want, got.Conversation); diff != "" {
			t.Errorf("loaded conversation (-want +got):\n%s", diff)
		}
		now := e.now.Now()
		if got.Version != 1 || got.Count != 4 || !got.CreatedAt.Equal(now.Truncate(time.Millisecond)) ||
			!got.ExpiresAt.Equal(now.Add(30*24*time.Hour).Truncate(time.Second)) {
			t.Errorf("loaded %+v", got)
		}

		// A second turn appends, and the window state says what is loaded.
		e.now.Advance(time.Minute)
		if err := e.store.Commit(t.Context(), got, ddbhistory.Turn{Messages: turn(9), Window: agent.WindowState{Removed: 4}, State: state}); err != nil {
			t.Fatal(err)
		}
		got, err = e.store.Load(t.Context(), alice, "")
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(turn(9), got.Conversation.Messages); diff != "" {
			t.Errorf("window after Removed=4 (-want +got):\n%s", diff)
		}
		if got.Version != 2 || got.Count != 6 || !got.UpdatedAt.After(got.CreatedAt) {
			t.Errorf("after second commit: %+v", got)
		}
	})
}

func TestLoadCostDoesNotGrowWithHistory(t *testing.T) {
	runBackends(t, func(t *testing.T, b backend) {
		e := newEnv(t, b, ddbhistory.Config{})
		type cost struct{ requests, bytes int64 }
		measure := func(stored int) cost {
			key := ddbhistory.Key{Owner: "alice", ID: fmt.Sprintf("s%d", stored)}
			fill(t, e.store, key, stored, 40)
			e.count.reset()
			sess, err := e.store.Load(t.Context(), key, "")
			if err != nil {
				t.Fatal(err)
			}
			u := e.count.reset()
			requests, sent, received := int64(u.Requests), int64(u.Sent), int64(u.Received)
			if len(sess.Conversation.Messages) != 40 || sess.Conversation.Window.Removed != stored-40 {
				t.Fatalf("stored %d: window of %d from %d", stored, len(sess.Conversation.Messages), sess.Conversation.Window.Removed)
			}
			return cost{requests, sent + received}
		}
		// moto copies the whole table on every transaction, so filling it
		// takes quadratic time; 1,000 messages make the point there.
		stored := 10_000
		if b.name != "minidyn" {
			stored = 1_000
		}
		small, large := measure(40), measure(stored)
		if small.requests != 1 || large.requests != 1 {
			t.Errorf("requests: %d for 40 messages, %d for %d; want 1", small.requests, large.requests, stored)
		}
		if ratio := float64(large.bytes) / float64(small.bytes); ratio > 1.2 {
			t.Errorf("bytes: %d for 40 messages, %d for %d (%.2fx)", small.bytes, large.bytes, stored, ratio)
		} else {
			t.Logf("bytes: %d for 40 messages, %d for %d (%.2fx)", small.bytes, large.bytes, stored, ratio)
		}
	})
}

func TestWindowLongerThanTheHint(t *testing.T) {
	runBackends(t, func(t *testing.T, b backend) {
		e := newEnv(t, b, ddbhistory.Config{WindowHint: 5})
		fill(t, e.store, alice, 60, 30)
		e.count.reset()
		sess, err := e.store.Load(t.Context(), alice, "")
		if err != nil {
			t.Fatal(err)
		}
		if requests := e.count.reset().Requests; requests != 2 {
			t.Errorf("%d requests, want 2", requests)
		}
		msgs := sess.Conversation.Messages
		if len(msgs) != 30 || msgs[0].Text() != "question 000015" || msgs[29].Text() != "answer 000029" {
			t.Errorf("window of %d: %q ... %q", len(msgs), msgs[0].Text(), msgs[len(msgs)-1].Text())
		}
	})
}

func TestConcurrentCommits(t *testing.T) {
	runBackends(t, func(t *testing.T, b backend) {
		e := newEnv(t, b, ddbhistory.Config{})
		fill(t, e.store, alice, 2, 40)
		const writers = 50
		var (
			wg, loaded sync.WaitGroup
			start      = make(chan struct{})
			mu         sync.Mutex
			won        []int
			conflict   int
		)
		loaded.Add(writers)
		for w := range writers {
			wg.Go(func() {
				sess, err := e.store.Load(context.Background(), alice, "")
				loaded.Done()
				if err != nil {
					t.Error(err)
					return
				}
				<-start
				err = e.store.Commit(context.Background(), sess, ddbhistory.Turn{Messages: turn(1000 + w)})
				mu.Lock()
				defer mu.Unlock()
				switch {
				case err == nil:
					won = append(won, w)
				case errors.Is(err, ddbhistory.ErrConflict):
					conflict++
				default:
					t.Errorf("writer %d: %v", w, err)
				}
			})
		}
		loaded.Wait() // every writer holds version 1
		close(start)
		wg.Wait()
		if len(won)+conflict != writers || len(won) < 1 {
			t.Fatalf("%d commits and %d conflicts of %d", len(won), conflict, writers)
		}
		page, err := e.store.Transcript(t.Context(), alice, "", 1000)
		if err != nil {
			t.Fatal(err)
		}
		want := sizedTurn(0)
		for _, w := range won {
			want = append(want, turn(1000+w)...)
		}
		// Each winner loaded the same version, so exactly one can win.
		if len(won) != 1 {
			t.Errorf("%d writers committed on the same version", len(won))
		}
		if diff := cmp.Diff(want, page.Messages); diff != "" {
			t.Errorf("transcript (-want +got):\n%s", diff)
		}
		if page.Session.Version != 2 || page.Session.Count != len(want) {
			t.Errorf("session %+v", page.Session)
		}
	})
}

func TestRacingTurnsLoseNothing(t *testing.T) {
	runBackends(t, func(t *testing.T, b backend) {
		e := newEnv(t, b, ddbhistory.Config{})
		fill(t, e.store, alice, 2, 40)
		// 20 writers each retry on conflict until their turn is in.
		var wg sync.WaitGroup
		for w := range 20 {
			wg.Go(func() {
				for {
					sess, err := e.store.Load(context.Background(), alice, "")
					if err != nil {
						t.Error(err)
						return
					}
					err = e.store.Commit(context.Background(), sess, ddbhistory.Turn{Messages: turn(100 + w)})
					if err == nil {
						return
					}
					if !errors.Is(err, ddbhistory.ErrConflict) {
						t.Error(err)
						return
					}
				}
			})
		}
		wg.Wait()
		page, err := e.store.Transcript(t.Context(), alice, "", 1000)
		if err != nil {
			t.Fatal(err)
		}
		if len(page.Messages) != 42 {
			t.Fatalf("%d messages, want 42", len(page.Messages))
		}
		seen := map[string]bool{}
		for i, m := range page.Messages {
			wantRole := agent.RoleUser
			if i%2 == 1 {
				wantRole = agent.RoleAssistant
			}
			if m.Role != wantRole {
				t.Fatalf("message %d is %s: turns interleaved", i, m.Role)
			}
			if i%2 == 1 && strings.TrimPrefix(m.Text(), "answer ") != strings.TrimPrefix(page.Messages[i-1].Text(), "question ") {
				t.Fatalf("message %d %q does not answer %q", i, m.Text(), page.Messages[i-1].Text())
			}
			if seen[m.Text()] {
				t.Fatalf("message %q stored twice", m.Text())
			}
			seen[m.Text()] = true
		}
	})
}

func TestCancelledCommitChangesNothing(t *testing.T) {
	runBackends(t, func(t *testing.T, b backend) {
		e := newEnv(t, b, ddbhistory.Config{})
		before := fill(t, e.store, alice, 4, 40)
		sess, err := e.store.Load(t.Context(), alice, "")
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(t.Context())
		cancel()
		if err := e.store.Commit(ctx, sess, ddbhistory.Turn{Messages: turn(7)}); !errors.Is(err, context.Canceled) {
			t.Errorf("err = %v, want context.Canceled", err)
		}
		after, err := e.store.Load(t.Context(), alice, "")
		if err != nil {
			t.Fatal(err)
		}
		if after.Version != before.Version || after.Count != 4 || len(after.Conversation.Messages) != 4 {
			t.Errorf("session changed: version %d, count %d", after.Version, after.Count)
		}
	})
}

func TestIdempotentReplay(t *testing.T) {
	runBackends(t, func(t *testing.T, b backend) {
		e := newEnv(t, b, ddbhistory.Config{})
		sess := fill(t, e.store, alice, 4, 40)
		response := json.RawMessage(`{"text":"answer 9"}`)
		hold, err := e.store.Begin(t.Context(), sess, "req-1", "fp-1")
		if err != nil {
			t.Fatal(err)
		}
		if err := e.store.Commit(t.Context(), sess, ddbhistory.Turn{Messages: turn(9), Hold: hold, Response: response}); err != nil {
			t.Fatal(err)
		}
		e.count.reset()
		got, err := e.store.Load(t.Context(), alice, "req-1")
		if err != nil {
			t.Fatal(err)
		}
		want := &ddbhistory.Replay{Response: response, Fingerprint: "fp-1", SessionID: alice.ID, First: 4, Count: 2}
		if diff := cmp.Diff(want, got.Replay); diff != "" {
			t.Errorf("replay (-want +got):\n%s", diff)
		}
		// The window and the key's record in parallel, then the response.
		if requests := e.count.reset().Requests; requests != 3 {
			t.Errorf("a replaying load took %d requests, want 3", requests)
		}
		other, err := e.store.Load(t.Context(), alice, "req-2")
		if err != nil || other.Replay != nil {
			t.Errorf("another key: replay %v, err %v", other.Replay, err)
		}
		if requests := e.count.reset().Requests; requests != 2 {
			t.Errorf("a load with an unused key took %d requests, want 2", requests)
		}
		// A retry that runs anyway can neither hold the key nor store a turn.
		var inUse *ddbhistory.KeyInUseError
		if _, err := e.store.Begin(t.Context(), other, "req-1", "fp-1"); !errors.As(err, &inUse) || !inUse.Committed || inUse.Fingerprint != "fp-1" {
			t.Errorf("Begin on a used key: %v", err)
		}
		if err := e.store.Commit(t.Context(), other, ddbhistory.Turn{Messages: turn(1), Hold: hold, Response: json.RawMessage(`{}`)}); !errors.Is(err, ddbhistory.ErrConflict) {
			t.Errorf("second commit with the spent hold: %v, want ErrConflict", err)
		}
		page, err := e.store.Transcript(t.Context(), alice, "", 100)
		if err != nil {
			t.Fatal(err)
		}
		if len(page.Messages) != 6 || page.Session.Version != 2 {
			t.Errorf("replaying wrote something: %d messages, version %d", len(page.Messages), page.Session.Version)
		}
	})
}

func TestIdempotencyHolds(t *testing.T) {
	runBackends(t, func(t *testing.T, b backend) {
		e := newEnv(t, b, ddbhistory.Config{})
		first, second := ddbhistory.NewSession(alice), ddbhistory.NewSession(alice)
		firstHold, err := e.store.Begin(t.Context(), first, "k", "fp-a")
		if err != nil {
			t.Fatal(err)
		}
		// While the first request runs, a retry is refused, and told whose.
		var inUse *ddbhistory.KeyInUseError
		if _, err := e.store.Begin(t.Context(), second, "k", "fp-b"); !errors.As(err, &inUse) || inUse.Committed || inUse.Fingerprint != "fp-a" {
			t.Errorf("Begin on a held key: %v", err)
		}
		// A failed turn releases the key, and the retry may run.
		if err := e.store.Release(t.Context(), firstHold); err != nil {
			t.Fatal(err)
		}
		if _, err := e.store.Begin(t.Context(), second, "k", "fp-b"); err != nil {
			t.Errorf("Begin after Release: %v", err)
		}
		// Releasing a hold that is not ours does nothing.
		if err := e.store.Release(t.Context(), firstHold); err != nil {
			t.Errorf("second Release: %v", err)
		}
		if _, err := e.store.Begin(t.Context(), first, "k", "fp-a"); !errors.Is(err, ddbhistory.ErrKeyInUse) {
			t.Errorf("the other hold was freed: %v", err)
		}
		// A hold whose process died expires.
		e.now.Advance(ddbhistory.DefaultHoldTTL + time.Second)
		hold, err := e.store.Begin(t.Context(), first, "k", "fp-a")
		if err != nil {
			t.Fatalf("Begin after the hold expired: %v", err)
		}
		// A hold is for the session it was taken for.
		if err := e.store.Commit(t.Context(), ddbhistory.NewSession(ddbhistory.Key{Owner: "bob", ID: alice.ID}), ddbhistory.Turn{Messages: turn(0), Hold: hold}); !errors.Is(err, ddbhistory.ErrInvalid) {
			t.Errorf("Commit with another session's hold: %v", err)
		}
		if err := e.store.Commit(t.Context(), first, ddbhistory.Turn{Messages: turn(0), Hold: hold, Response: json.RawMessage(`1`)}); err != nil {
			t.Errorf("Commit replacing its own hold: %v", err)
		}
	})
}

func TestIdempotencyKeyExpires(t *testing.T) {
	runBackends(t, func(t *testing.T, b backend) {
		e := newEnv(t, b, ddbhistory.Config{IdempotencyTTL: time.Hour})
		sess := ddbhistory.NewSession(alice)
		if err := e.store.Commit(t.Context(), sess, ddbhistory.Turn{Messages: turn(0), Hold: mustBegin(t, e.store, sess, "k"), Response: json.RawMessage(`1`)}); err != nil {
			t.Fatal(err)
		}
		e.now.Advance(2 * time.Hour)
		got, err := e.store.Load(t.Context(), alice, "k")
		if err != nil {
			t.Fatal(err)
		}
		if got.Replay != nil {
			t.Errorf("expired key replayed %s", got.Replay.Response)
		}
		// And the key may be used again.
		if err := e.store.Commit(t.Context(), got, ddbhistory.Turn{Messages: turn(1), Hold: mustBegin(t, e.store, got, "k"), Response: json.RawMessage(`2`)}); err != nil {
			t.Errorf("reusing an expired key: %v", err)
		}
	})
}

func TestExpiry(t *testing.T) {
	runBackends(t, func(t *testing.T, b backend) {
		e := newEnv(t, b, ddbhistory.Config{TTL: time.Hour})
		sess := ddbhistory.NewSession(alice)
		if err := e.store.Commit(t.Context(), sess, ddbhistory.Turn{Messages: turn(0), Hold: mustBegin(t, e.store, sess, "k"), Response: json.RawMessage(`"old"`)}); err != nil {
			t.Fatal(err)
		}
		// Messages are kept an hour after they were written; each commit
		// moves the session's own expiry on.
		e.now.Advance(50 * time.Minute)
		if err := e.store.Commit(t.Context(), sess, ddbhistory.Turn{Messages: turn(1)}); err != nil {
			t.Fatal(err)
		}
		e.now.Advance(20 * time.Minute)
		got, err := e.store.Load(t.Context(), alice, "")
		if err != nil {
			t.Fatalf("the session expired although its last commit was 20 minutes ago: %v", err)
		}
		if diff := cmp.Diff(turn(1), got.Conversation.Messages); diff != "" {
			t.Errorf("window after the first turn expired (-want +got):\n%s", diff)
		}
		if got.Conversation.Window.Removed != 2 {
			t.Errorf("Removed = %d, want 2: the window starts after the expired messages", got.Conversation.Window.Removed)
		}
		page, err := e.store.Transcript(t.Context(), alice, "", 100)
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(turn(1), page.Messages); diff != "" {
			t.Errorf("transcript shows expired messages (-want +got):\n%s", diff)
		}

		// An hour after the last commit the session is gone, though no TTL
		// process has deleted anything.
		e.now.Advance(time.Hour)
		if _, err := e.store.Load(t.Context(), alice, ""); !errors.Is(err, ddbhistory.ErrNotFound) {
			t.Errorf("Load of an expired session: %v", err)
		}
		if _, err := e.store.Transcript(t.Context(), alice, "", 10); !errors.Is(err, ddbhistory.ErrNotFound) {
			t.Errorf("Transcript of an expired session: %v", err)
		}
		// The id can be used again, and the old session's key does not replay.
		fresh := ddbhistory.NewSession(alice)
		if err := e.store.Commit(t.Context(), fresh, ddbhistory.Turn{Messages: turn(5)}); err != nil {
			t.Fatalf("re-creating an expired session: %v", err)
		}
		got, err = e.store.Load(t.Context(), alice, "k")
		if err != nil {
			t.Fatal(err)
		}
		if got.Replay == nil || got.Replay.Response != nil || len(got.Conversation.Messages) != 2 || got.Conversation.Messages[0].Text() != "question 5" {
			t.Errorf("re-created session: replay %+v, messages %+v; want the key known, with nothing to replay", got.Replay, got.Conversation.Messages)
		}
	})
}

func TestDeleteRemovesEverything(t *testing.T) {
	runBackends(t, func(t *testing.T, b backend) {
		e := newEnv(t, b, ddbhistory.Config{})
		sess := fill(t, e.store, alice, 60, 40) // more items than one batch
		big := []agent.Message{
			{Role: agent.RoleUser, Content: []agent.ContentBlock{agent.Text("a big one"), {Image: &agent.ImageBlock{Format: "png", Source: agent.Source{Bytes: randomBytes(900_000)}}}}},
			agent.AssistantText("seen"),
		}
		if err := e.store.Commit(t.Context(), sess, ddbhistory.Turn{Messages: big, Hold: mustBegin(t, e.store, sess, "k"), Response: json.RawMessage(`{}`)}); err != nil {
			t.Fatal(err)
		}
		bob := ddbhistory.Key{Owner: "bob", ID: "chat-2"}
		fill(t, e.store, bob, 2, 40)

		if err := e.store.Delete(t.Context(), alice); err != nil {
			t.Fatal(err)
		}
		if n := countItems(t, e, "s#alice#chat-1") + countItems(t, e, "id#chat-1"); n != 0 {
			t.Errorf("%d items left behind", n)
		}
		if _, err := e.store.Load(t.Context(), alice, ""); !errors.Is(err, ddbhistory.ErrNotFound) {
			t.Errorf("Load after Delete: %v", err)
		}
		if err := e.store.Delete(t.Context(), alice); !errors.Is(err, ddbhistory.ErrNotFound) {
			t.Errorf("second Delete: %v", err)
		}
		if _, err := e.store.Load(t.Context(), bob, ""); err != nil {
			t.Errorf("deleting alice's session touched bob's: %v", err)
		}
	})
}

func TestBigContent(t *testing.T) {
	runBackends(t, func(t *testing.T, b backend) {
		e := newEnv(t, b, ddbhistory.Config{})
		// Random bytes do not compress: the message needs several items.
		img := randomBytes(1_500_000)
		result := strings.Repeat("a line of a very long tool result\n", 40_000) // 1.4 MB of text
		msgs := []agent.Message{
			{Role: agent.RoleUser, Content: []agent.ContentBlock{agent.Text("describe"), {Image: &agent.ImageBlock{Format: "jpeg", Source: agent.Source{Bytes: img}}}}},
			{Role: agent.RoleAssistant, Content: []agent.ContentBlock{{ToolUse: &agent.ToolUseBlock{ToolUseID: "t", Name: "read", Input: json.RawMessage(`{}`)}}}},
			{Role: agent.RoleUser, Content: []agent.ContentBlock{{ToolResult: agent.TextResult("t", agent.ToolSuccess, result)}}},
			agent.AssistantText("done"),
		}
		sess := ddbhistory.NewSession(alice)
		if err := e.store.Commit(t.Context(), sess, ddbhistory.Turn{Messages: msgs}); err != nil {
			t.Fatal(err)
		}
		got, err := e.store.Load(t.Context(), alice, "")
		if err != nil {
			t.Fatal(err)
		}
		// go-cmp walks byte slices an element at a time; compare encodings.
		want, _ := json.Marshal(msgs)
		gotJSON, _ := json.Marshal(got.Conversation.Messages)
		if !bytes.Equal(want, gotJSON) {
			t.Errorf("big messages did not round-trip: %d messages, %d bytes of JSON; want %d bytes", len(got.Conversation.Messages), len(gotJSON), len(want))
		}

		// A turn beyond one transaction, in bytes or in items, is stored
		// whole, in several writes.
		huge := []agent.Message{
			{Role: agent.RoleUser, Content: []agent.ContentBlock{agent.Text("more"), {Image: &agent.ImageBlock{Format: "png", Source: agent.Source{Bytes: randomBytes(3_000_000)}}}}},
			{Role: agent.RoleAssistant, Content: []agent.ContentBlock{{ToolUse: &agent.ToolUseBlock{ToolUseID: "u", Name: "read", Input: json.RawMessage(`{}`)}}}},
			{Role: agent.RoleUser, Content: []agent.ContentBlock{{ToolResult: &agent.ToolResultBlock{ToolUseID: "u", Content: []agent.ToolResultContent{{Image: &agent.ImageBlock{Format: "png", Source: agent.Source{Bytes: randomBytes(2_000_000)}}}}}}}},
			agent.AssistantText("done"),
		}
		if err := e.store.Commit(t.Context(), got, ddbhistory.Turn{Messages: huge}); err != nil {
			t.Fatalf("a 5 MB turn: %v", err)
		}
		var many []agent.Message
		for i := range 60 {
			many = append(many, turn(i)...)
		}
		if err := e.store.Commit(t.Context(), got, ddbhistory.Turn{Messages: many}); err != nil {
			t.Fatalf("a turn of 120 messages: %v", err)
		}
		var tl *ddbhistory.TooLargeError
		e.count.reset()
		// State too big for the session item.
		big := map[string]json.RawMessage{"x": json.RawMessage(`"` + strings.Repeat("x", 500_000) + `"`)}
		if err := e.store.Commit(t.Context(), got, ddbhistory.Turn{Messages: turn(1), State: big}); !errors.As(err, &tl) || tl.Limit != ddbhistory.MaxItemBytes {
			t.Errorf("500 KB state: err = %v, want ErrTooLarge for 400 KB", err)
		}
		if requests := e.count.reset().Requests; requests != 0 {
			t.Errorf("%d requests were sent for a refused turn", requests)
		}
		page, err := e.store.Transcript(t.Context(), alice, "", ddbhistory.MaxPageSize)
		if err != nil || page.Session.Version != 3 || page.Session.Count != 128 {
			t.Fatalf("after the big turns: %+v, %v", page, err)
		}
		want, _ = json.Marshal(slices.Concat(msgs, huge, many))
		var all []agent.Message
		for cursor := ""; ; {
			p, err := e.store.Transcript(t.Context(), alice, cursor, ddbhistory.MaxPageSize)
			if err != nil {
				t.Fatal(err)
			}
			all = append(all, p.Messages...)
			if cursor = p.NextCursor; cursor == "" {
				break
			}
		}
		if gotJSON, _ = json.Marshal(all); !bytes.Equal(want, gotJSON) {
			t.Errorf("the transcript is not the three turns: %d messages", len(all))
		}
	})
}

func TestOwnersAreIsolated(t *testing.T) {
	runBackends(t, func(t *testing.T, b backend) {
		e := newEnv(t, b, ddbhistory.Config{})
		fill(t, e.store, alice, 4, 40)
		for _, owner := range []string{"bob", "ALICE", "alice#chat-1", "alice ", "s#alice"} {
			k := ddbhistory.Key{Owner: owner, ID: alice.ID}
			if _, err := e.store.Load(t.Context(), k, ""); !errors.Is(err, ddbhistory.ErrNotFound) {
				t.Errorf("%q loads alice's session: %v", owner, err)
			}
			if _, err := e.store.Transcript(t.Context(), k, "", 10); !errors.Is(err, ddbhistory.ErrNotFound) {
				t.Errorf("%q reads alice's transcript: %v", owner, err)
			}
			if err := e.store.Delete(t.Context(), k); !errors.Is(err, ddbhistory.ErrNotFound) {
				t.Errorf("%q deletes alice's session: %v", owner, err)
			}
		}
		// The id is alice's: bob cannot start a session under it, and is
		// told only that it does not exist.
		bob := ddbhistory.Key{Owner: "bob", ID: alice.ID}
		if _, err := e.store.Load(t.Context(), bob, ""); !errors.Is(err, ddbhistory.ErrNotFound) || !errors.Is(err, ddbhistory.ErrIDTaken) {
			t.Errorf("bob's load: %v, want ErrNotFound and ErrIDTaken", err)
		}
		if _, err := e.store.Load(t.Context(), ddbhistory.Key{Owner: "bob", ID: "free"}, ""); errors.Is(err, ddbhistory.ErrIDTaken) || !errors.Is(err, ddbhistory.ErrNotFound) {
			t.Errorf("bob's load of a free id: %v, want ErrNotFound only", err)
		}
		if err := e.store.Commit(t.Context(), ddbhistory.NewSession(bob), ddbhistory.Turn{Messages: turn(99)}); !errors.Is(err, ddbhistory.ErrNotFound) {
			t.Errorf("bob's first commit under alice's id: %v, want ErrNotFound", err)
		}
		got, err := e.store.Load(t.Context(), alice, "")
		if err != nil || got.Count != 4 || got.Conversation.Messages[0].Text() != "question 000000" {
			t.Errorf("alice's session after bob's attempt: %+v, %v", got, err)
		}
		if n := countItems(t, e, "s#bob#chat-1"); n != 0 {
			t.Errorf("bob's failed commit left %d items", n)
		}
		// Once alice deletes it, the id is free.
		if err := e.store.Delete(t.Context(), alice); err != nil {
			t.Fatal(err)
		}
		if err := e.store.Commit(t.Context(), ddbhistory.NewSession(bob), ddbhistory.Turn{Messages: turn(99)}); err != nil {
			t.Errorf("bob's commit after alice deleted the session: %v", err)
		}
	})
}

func TestIDClaimOutlivesAQuietSession(t *testing.T) {
	runBackends(t, func(t *testing.T, b backend) {
		e := newEnv(t, b, ddbhistory.Config{TTL: time.Hour})
		bob := ddbhistory.Key{Owner: "bob", ID: alice.ID}
		sess := ddbhistory.NewSession(alice)
		if err := e.store.Commit(t.Context(), sess, ddbhistory.Turn{Messages: turn(0)}); err != nil {
			t.Fatal(err)
		}
		e.now.Advance(25 * time.Minute)
		if err := e.store.Commit(t.Context(), sess, ddbhistory.Turn{Messages: turn(1)}); err != nil {
			t.Fatal(err)
		}
		// 65 minutes in, the session (last commit at 25) has 20 minutes left.
		e.now.Advance(40 * time.Minute)
		if err := e.store.Commit(t.Context(), ddbhistory.NewSession(bob), ddbhistory.Turn{Messages: turn(9)}); !errors.Is(err, ddbhistory.ErrNotFound) {
			t.Errorf("bob took the id of a live session: %v", err)
		}
		e.now.Advance(time.Minute)
		if err := e.store.Commit(t.Context(), sess, ddbhistory.Turn{Messages: turn(2)}); err != nil {
			t.Errorf("alice's commit on her live session: %v", err)
		}
	})
}

func TestIDClaimFollowsTheSession(t *testing.T) {
	runBackends(t, func(t *testing.T, b backend) {
		e := newEnv(t, b, ddbhistory.Config{TTL: time.Hour})
		bob := ddbhistory.Key{Owner: "bob", ID: alice.ID}
		sess := ddbhistory.NewSession(alice)
		if err := e.store.Commit(t.Context(), sess, ddbhistory.Turn{Messages: turn(0)}); err != nil {
			t.Fatal(err)
		}
		// Commits keep the session, and its claim, alive past the first hour.
		for range 4 {
			e.now.Advance(25 * time.Minute)
			e.count.reset()
			if err := e.store.Commit(t.Context(), sess, ddbhistory.Turn{Messages: turn(1)}); err != nil {
				t.Fatal(err)
			}
		}
		if err := e.store.Commit(t.Context(), ddbhistory.NewSession(bob), ddbhistory.Turn{Messages: turn(9)}); !errors.Is(err, ddbhistory.ErrNotFound) {
			t.Errorf("after 100 minutes of activity the id was free: %v", err)
		}
		// Once the session and its claim have expired, the id is free.
		e.now.Advance(3 * time.Hour)
		if err := e.store.Commit(t.Context(), ddbhistory.NewSession(bob), ddbhistory.Turn{Messages: turn(9)}); err != nil {
			t.Errorf("bob's commit on an expired id: %v", err)
		}
	})
}

func TestTranscriptPages(t *testing.T) {
	runBackends(t, func(t *testing.T, b backend) {
		e := newEnv(t, b, ddbhistory.Config{})
		fill(t, e.store, alice, 24, 4)
		var all []agent.Message
		cursor := ""
		pages := 0
		for {
			page, err := e.store.Transcript(t.Context(), alice, cursor, 10)
			if err != nil {
				t.Fatal(err)
			}
			pages++
			all = append(all, page.Messages...)
			if page.Session.Conversation.Window.Removed != 20 {
				t.Errorf("page %d: window state %+v", pages, page.Session.Conversation.Window)
			}
			if cursor = page.NextCursor; cursor == "" {
				break
			}
		}
		var want []agent.Message
		for i := range 12 {
			want = append(want, sizedTurn(i)...)
		}
		if diff := cmp.Diff(want, all); diff != "" || pages != 3 {
			t.Errorf("%d pages (-want +got):\n%s", pages, diff)
		}
		for _, bad := range []string{"!!", "LTE", "eA"} {
			if _, err := e.store.Transcript(t.Context(), alice, bad, 10); !errors.Is(err, ddbhistory.ErrInvalid) {
				t.Errorf("cursor %q: %v", bad, err)
			}
		}
		for _, limit := range []int{0, -1, 1001} {
			if _, err := e.store.Transcript(t.Context(), alice, "", limit); !errors.Is(err, ddbhistory.ErrInvalid) {
				t.Errorf("limit %d: %v", limit, err)
			}
		}
	})
}

func TestTail(t *testing.T) {
	runBackends(t, func(t *testing.T, b backend) {
		e := newEnv(t, b, ddbhistory.Config{})
		fill(t, e.store, alice, 200, 40)
		var want []agent.Message
		for i := range 100 {
			want = append(want, sizedTurn(i)...)
		}
		e.count.reset()
		page, err := e.store.Tail(t.Context(), alice, 64)
		if err != nil {
			t.Fatal(err)
		}
		if u := e.count.reset(); u.Requests != 1 {
			t.Errorf("the last 64 of 200 messages took %d requests, want 1", u.Requests)
		}
		if diff := cmp.Diff(want[136:], page.Messages); diff != "" || page.First != 136 || page.Session.Count != 200 || page.NextCursor != "" {
			t.Errorf("first %d of %d, next %q (-want +got):\n%s", page.First, page.Session.Count, page.NextCursor, diff)
		}
		if page.Session.Conversation.Window.Removed != 160 {
			t.Errorf("window state %+v", page.Session.Conversation.Window)
		}
		// A session shorter than n is read whole.
		short := ddbhistory.Key{Owner: alice.Owner, ID: "short"}
		fill(t, e.store, short, 6, 40)
		if page, err := e.store.Tail(t.Context(), short, 64); err != nil || page.First != 0 || !cmp.Equal(want[:6], page.Messages) {
			t.Errorf("a 6-message session's tail: %v, first %d, %d messages", err, page.First, len(page.Messages))
		}
		for _, n := range []int{0, -1, 1001} {
			if _, err := e.store.Tail(t.Context(), alice, n); !errors.Is(err, ddbhistory.ErrInvalid) {
				t.Errorf("n %d: %v", n, err)
			}
		}
		if _, err := e.store.Tail(t.Context(), ddbhistory.Key{Owner: alice.Owner, ID: "none"}, 10); !errors.Is(err, ddbhistory.ErrNotFound) {
			t.Errorf("a session that does not exist: %v", err)
		}
		if _, err := e.store.Tail(t.Context(), ddbhistory.Key{Owner: "bob", ID: alice.ID}, 10); !errors.Is(err, ddbhistory.ErrNotFound) {
			t.Errorf("another owner's session: %v", err)
		}
	})
}

// A message stored in several items is read whole, or not at all, when
// the tail's first request ends among its items.
func TestTailOfBigMessages(t *testing.T) {
	runBackends(t, func(t *testing.T, b backend) {
		e := newEnv(t, b, ddbhistory.Config{})
		big := func(i int) agent.Message {
			return agent.Message{Role: agent.RoleUser, Content: []agent.ContentBlock{agent.Text(fmt.Sprint("big ", i)), {Image: &agent.ImageBlock{Format: "png", Source: agent.Source{Bytes: randomBytes(900_000)}}}}}
		}
		msgs := []agent.Message{big(0), agent.AssistantText("a0"), big(1), agent.AssistantText("a1")}
		if err := e.store.Commit(t.Context(), ddbhistory.NewSession(alice), ddbhistory.Turn{Messages: msgs}); err != nil {
			t.Fatal(err)
		}
		for n := 1; n <= 4; n++ {
			page, err := e.store.Tail(t.Context(), alice, n)
			if err != nil {
				t.Fatal(err)
			}
			want, _ := json.Marshal(msgs[4-n:])
			got, _ := json.Marshal(page.Messages)
			if !bytes.Equal(want, got) || page.First != 4-n {
				t.Errorf("n %d: first %d, %d messages, %d bytes; want first %d, %d bytes", n, page.First, len(page.Messages), len(got), 4-n, len(want))
			}
		}
	})
}

func TestThrottling(t *testing.T) {
	runBackends(t, func(t *testing.T, b backend) {
		e := newEnv(t, b, ddbhistory.Config{MaxAttempts: 3})
		sess := fill(t, e.store, alice, 2, 40)

		// Two throttles, then success: the SDK's retries absorb them.
		var mu sync.Mutex
		left := 2
		e.count.setFault(func(string, []byte) *http.Response {
			mu.Lock()
			defer mu.Unlock()
			if left > 0 {
				left--
				return throttle()
			}
			return nil
		})
		if err := e.store.Commit(t.Context(), sess, ddbhistory.Turn{Messages: turn(1)}); err != nil {
			t.Fatalf("commit through two throttles: %v", err)
		}
		// Throttled on every attempt: a typed error, and nothing written.
		attempts := 0
		e.count.setFault(func(string, []byte) *http.Response {
			mu.Lock()
			defer mu.Unlock()
			attempts++
			return throttle()
		})
		err := e.store.Commit(t.Context(), sess, ddbhistory.Turn{Messages: turn(2)})
		if !errors.Is(err, ddbhistory.ErrThrottled) {
			t.Errorf("err = %v, want ErrThrottled", err)
		}
		mu.Lock()
		if attempts != 3 {
			t.Errorf("%d attempts, want 3", attempts)
		}
		mu.Unlock()
		if _, err := e.store.Load(t.Context(), alice, ""); !errors.Is(err, ddbhistory.ErrThrottled) {
			t.Errorf("load: %v, want ErrThrottled", err)
		}
		e.count.setFault(nil)
		got, err := e.store.Load(t.Context(), alice, "")
		if err != nil || got.Count != 4 || got.Version != sess.Version {
			t.Errorf("after throttling: %+v, %v", got, err)
		}
	})
}

func TestInvalidArguments(t *testing.T) {
	e := newEnv(t, backends()[0], ddbhistory.Config{})
	for _, k := range []ddbhistory.Key{
		{Owner: "", ID: "a"},
		{Owner: "alice", ID: ""},
		{Owner: "alice", ID: "has#hash"},
		{Owner: "alice", ID: "-leading"},
		{Owner: "alice", ID: strings.Repeat("x", 129)},
		{Owner: strings.Repeat("o", 1025), ID: "a"},
		{Owner: "\xff", ID: "a"},
	} {
		if _, err := e.store.Load(t.Context(), k, ""); !errors.Is(err, ddbhistory.ErrInvalid) {
			t.Errorf("Load(%q, %q): %v", k.Owner, k.ID, err)
		}
		if err := e.store.Commit(t.Context(), ddbhistory.NewSession(k), ddbhistory.Turn{Messages: turn(0)}); !errors.Is(err, ddbhistory.ErrInvalid) {
			t.Errorf("Commit(%q, %q): %v", k.Owner, k.ID, err)
		}
	}
	if err := e.store.Commit(t.Context(), ddbhistory.NewSession(alice), ddbhistory.Turn{Messages: turn(0), Window: agent.WindowState{Removed: 3}}); !errors.Is(err, ddbhistory.ErrInvalid) {
		t.Errorf("window past the end: %v", err)
	}
	if requests := e.count.reset().Requests; requests != 0 {
		t.Errorf("%d requests for invalid arguments", requests)
	}
}

func randomBytes(n int) []byte {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return b
}

// countItems counts every item under a partition key, expired or not.
func countItems(t *testing.T, e *env, pk string) int {
	t.Helper()
	p := dynamodb.NewQueryPaginator(e.client, &dynamodb.QueryInput{
		TableName:                 aws.String(e.table),
		KeyConditionExpression:    aws.String("pk = :pk"),
		ExpressionAttributeValues: map[string]types.AttributeValue{":pk": &types.AttributeValueMemberS{Value: pk}},
		ConsistentRead:            aws.Bool(true),
	})
	n := 0
	for p.HasMorePages() {
		out, err := p.NextPage(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		n += len(out.Items)
	}
	return n
}

func TestZeroTTLNeverExpires(t *testing.T) {
	runBackends(t, func(t *testing.T, b backend) {
		e := newEnv(t, b, ddbhistory.Config{}) // TTL 0
		fill(t, e.store, alice, 4, 40)
		e.now.Advance(10 * 365 * 24 * time.Hour)
		got, err := e.store.Load(t.Context(), alice, "")
		if err != nil || len(got.Conversation.Messages) != 4 || !got.ExpiresAt.IsZero() {
			t.Errorf("after ten years: %+v, %v", got, err)
		}
	})
}

func TestDeleteWaitsForACommitInFlight(t *testing.T) {
	conflict := func() *http.Response {
		return &http.Response{
			StatusCode: 400,
			Header:     http.Header{"Content-Type": {"application/x-amz-json-1.0"}},
			Body:       io.NopCloser(strings.NewReader(`{"__type":"com.amazonaws.dynamodb.v20120810#TransactionConflictException","message":"Transaction is ongoing for the item"}`)),
		}
	}
	runBackends(t, func(t *testing.T, b backend) {
		e := newEnv(t, b, ddbhistory.Config{})
		fill(t, e.store, alice, 4, 40)
		// DynamoDB refuses a write to an item that a transaction is writing.
		// While a commit keeps the session item busy, the delete changes
		// nothing and says so.
		e.count.setFault(func(op string, _ []byte) *http.Response {
			if op == "UpdateItem" {
				return conflict()
			}
			return nil
		})
		if err := e.store.Delete(t.Context(), alice); !errors.Is(err, ddbhistory.ErrConflict) {
			t.Errorf("err = %v, want ErrConflict", err)
		}
		e.count.setFault(nil)
		if got, err := e.store.Load(t.Context(), alice, ""); err != nil || got.Count != 4 {
			t.Errorf("the session after a conflicting delete: %+v, %v", got, err)
		}
		// Once the commit is done, the delete goes ahead.
		var once sync.Once
		e.count.setFault(func(op string, _ []byte) *http.Response {
			var resp *http.Response
			if op == "UpdateItem" {
				once.Do(func() { resp = conflict() })
			}
			return resp
		})
		if err := e.store.Delete(t.Context(), alice); err != nil {
			t.Errorf("a delete after a passing conflict: %v", err)
		}
		if n := countItems(t, e, "s#alice#chat-1"); n != 0 {
			t.Errorf("%d items left behind", n)
		}
	})
}

func TestAMessageMissingFromTheWindow(t *testing.T) {
	runBackends(t, func(t *testing.T, b backend) {
		e := newEnv(t, b, ddbhistory.Config{})
		fill(t, e.store, alice, 10, 40)
		// Message 7 disappears (deleted by hand): loads read again, in case
		// a commit was landing, then start the window after it.
		if _, err := e.client.DeleteItem(t.Context(), &dynamodb.DeleteItemInput{
			TableName: aws.String(e.table),
			Key: map[string]types.AttributeValue{
				"pk": &types.AttributeValueMemberS{Value: "s#alice#chat-1"},
				"sk": &types.AttributeValueMemberS{Value: "m#0000000007"},
			},
		}); err != nil {
			t.Fatal(err)
		}
		e.count.reset()
		got, err := e.store.Load(t.Context(), alice, "")
		if err != nil {
			t.Fatalf("a session missing a message cannot load: %v", err)
		}
		if requests := e.count.reset().Requests; requests != 3 {
			t.Errorf("%d requests; want 3, two reads and a third that skips the gap", requests)
		}
		if got.Conversation.Window.Removed != 8 || len(got.Conversation.Messages) != 2 {
			t.Errorf("window from %d, %d messages; want from 8, 2", got.Conversation.Window.Removed, len(got.Conversation.Messages))
		}
		// The transcript skips it, and its pages still move on.
		var all []agent.Message
		for cursor := ""; ; {
			page, err := e.store.Transcript(t.Context(), alice, cursor, 3)
			if err != nil {
				t.Fatal(err)
			}
			all = append(all, page.Messages...)
			if cursor = page.NextCursor; cursor == "" {
				break
			}
		}
		if len(all) != 9 {
			t.Errorf("%d messages over the pages, want 9", len(all))
		}
	})
}

func TestTranscriptPagesStayUnderLambdasResponseLimit(t *testing.T) {
	e := newEnv(t, backends()[0], ddbhistory.Config{})
	sess := ddbhistory.NewSession(alice)
	// Six messages of about 1.3 MB of JSON each (1 MB images, base64).
	for i := range 3 {
		msgs := []agent.Message{
			{Role: agent.RoleUser, Content: []agent.ContentBlock{agent.Text(fmt.Sprint("picture ", i)), {Image: &agent.ImageBlock{Format: "png", Source: agent.Source{Bytes: randomBytes(1_000_000)}}}}},
			{Role: agent.RoleAssistant, Content: []agent.ContentBlock{agent.Text(strings.Repeat("a long description ", 70_000))}},
		}
		if err := e.store.Commit(t.Context(), sess, ddbhistory.Turn{Messages: msgs}); err != nil {
			t.Fatal(err)
		}
	}
	var pages, total int
	for cursor := ""; ; pages++ {
		page, err := e.store.Transcript(t.Context(), alice, cursor, 100)
		if err != nil {
			t.Fatal(err)
		}
		raw, _ := json.Marshal(page.Messages)
		if len(raw) > 5<<20 {
			t.Errorf("page %d is %d bytes of JSON", pages, len(raw))
		}
		total += len(page.Messages)
		if cursor = page.NextCursor; cursor == "" {
			break
		}
	}
	if total != 6 || pages < 1 {
		t.Errorf("%d messages over %d pages", total, pages+1)
	}
}

func TestListSessions(t *testing.T) {
	runBackends(t, func(t *testing.T, b backend) {
		e := newEnv(t, b, ddbhistory.Config{})
		start := func(owner, id, first string) {
			t.Helper()
			e.now.Advance(time.Second) // the list is ordered by creation
			sess := ddbhistory.NewSession(ddbhistory.Key{Owner: owner, ID: id})
			msgs := []agent.Message{agent.UserText(first), agent.AssistantText("ok")}
			if err := e.store.Commit(t.Context(), sess, ddbhistory.Turn{Messages: msgs}); err != nil {
				t.Fatal(err)
			}
		}
		long := strings.Repeat("word ", 40)
		start("alice", "a1", "  What is\n the weather\tin Lisbon?  ")
		start("bob", "b1", "bob's first")
		start("alice", "a2", long)
		start("alice", "a3", "third")
		start("bob", "b2", "bob's second")
		start("alice", "a4", "fourth")
		// A later turn keeps the title and the place in the list.
		sess, err := e.store.Load(t.Context(), ddbhistory.Key{Owner: "alice", ID: "a1"}, "")
		if err != nil {
			t.Fatal(err)
		}
		e.now.Advance(time.Hour)
		if err := e.store.Commit(t.Context(), sess, ddbhistory.Turn{Messages: turn(2)}); err != nil {
			t.Fatal(err)
		}

		var got []ddbhistory.Summary
		cursor, pages := "", 0
		for {
			page, err := e.store.List(t.Context(), "alice", cursor, 3)
			if err != nil {
				t.Fatal(err)
			}
			got = append(got, page.Sessions...)
			pages++
			if cursor = page.NextCursor; cursor == "" || pages > 5 {
				break
			}
		}
		var ids []string
		for _, s := range got {
			ids = append(ids, s.ID)
		}
		if strings.Join(ids, " ") != "a4 a3 a2 a1" {
			t.Fatalf("alice's sessions %v, want a4 a3 a2 a1, newest first", ids)
		}
		titles := map[string]string{}
		for _, s := range got {
			titles[s.ID] = s.Title
		}
		if titles["a1"] != "What is the weather in Lisbon?" || titles["a3"] != "third" {
			t.Errorf("titles %q", titles)
		}
		if a2 := titles["a2"]; utf8.RuneCountInString(a2) != 80 || !strings.HasSuffix(a2, "…") || !strings.HasPrefix(long, strings.TrimSuffix(a2, "…")) {
			t.Errorf("long title %q", a2)
		}
		if !got[0].CreatedAt.After(got[1].CreatedAt) {
			t.Errorf("created %v, %v", got[0].CreatedAt, got[1].CreatedAt)
		}

		// A deleted session leaves the list.
		if err := e.store.Delete(t.Context(), ddbhistory.Key{Owner: "alice", ID: "a3"}); err != nil {
			t.Fatal(err)
		}
		page, err := e.store.List(t.Context(), "alice", "", 10)
		if err != nil || len(page.Sessions) != 3 || page.NextCursor != "" {
			t.Errorf("after a delete: %+v, %v", page, err)
		}

		// A cursor is the owner's own.
		bobs, err := e.store.List(t.Context(), "bob", "", 1)
		if err != nil || len(bobs.Sessions) != 1 || bobs.NextCursor == "" {
			t.Fatalf("bob's first page: %+v, %v", bobs, err)
		}
		for _, c := range []string{bobs.NextCursor, "not base64!", "e30"} {
			if _, err := e.store.List(t.Context(), "alice", c, 10); !errors.Is(err, ddbhistory.ErrInvalid) {
				t.Errorf("cursor %q: %v, want ErrInvalid", c, err)
			}
		}
		for _, n := range []int{0, ddbhistory.MaxListSize + 1} {
			if _, err := e.store.List(t.Context(), "alice", "", n); !errors.Is(err, ddbhistory.ErrInvalid) {
				t.Errorf("limit %d: %v, want ErrInvalid", n, err)
			}
		}
		if page, err := e.store.List(t.Context(), "carol", "", 10); err != nil || len(page.Sessions) != 0 {
			t.Errorf("an owner without sessions: %+v, %v", page, err)
		}
	})
}

// TestMissingTable: every operation on a table that does not exist is a
// *TableError that names it, so the caller can tell a setting to fix from
// a store that is down.
func TestMissingTable(t *testing.T) {
	runBackends(t, func(t *testing.T, b backend) {
		e := newEnv(t, b, ddbhistory.Config{})
		s, err := ddbhistory.New(e.client, ddbhistory.Config{Table: "no-such-table"})
		if err != nil {
			t.Fatal(err)
		}
		key := ddbhistory.Key{Owner: "alice", ID: "s1"}
		sess := ddbhistory.NewSession(key)
		ops := map[string]func() error{
			"load": func() error { _, err := s.Load(t.Context(), key, ""); return err },
			"commit": func() error {
				return s.Commit(t.Context(), sess, ddbhistory.Turn{Messages: turn(0)})
			},
			"list":       func() error { _, err := s.List(t.Context(), "alice", "", 10); return err },
			"transcript": func() error { _, err := s.Transcript(t.Context(), key, "", 10); return err },
			"delete":     func() error { return s.Delete(t.Context(), key) },
		}
		for name, op := range ops {
			var te *ddbhistory.TableError
			if err := op(); !errors.Is(err, ddbhistory.ErrMisconfigured) || !errors.As(err, &te) || !te.Missing || te.Table != "no-such-table" {
				t.Errorf("%s: %v; want a *TableError for the missing table", name, err)
			}
		}
	})
}
