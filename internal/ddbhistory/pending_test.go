package ddbhistory_test

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/lambda-agent/lambda-agent/internal/agent"
	"github.com/lambda-agent/lambda-agent/internal/ddbhistory"
)

// pausedTurn is a turn that waits for a person: the question, and an answer
// whose tool use waits.
func pausedTurn() ([]agent.Message, *agent.Pending) {
	use := &agent.ToolUseBlock{ToolUseID: "u1", Name: "refund", Input: json.RawMessage(`{"n":1}`)}
	kept := &agent.ToolUseBlock{ToolUseID: "u2", Name: "lookup", Input: json.RawMessage(`{}`)}
	msgs := []agent.Message{
		agent.UserText("refund my order"),
		{Role: agent.RoleAssistant, Content: []agent.ContentBlock{{ToolUse: use}, {ToolUse: kept}}},
	}
	return msgs, &agent.Pending{
		Interrupts: []agent.Interrupt{{
			ID: "u1", Kind: agent.KindApproval, Name: "approval", Tool: "refund", Input: use.Input,
			Reason: "refund needs your approval to run.", Payload: json.RawMessage(`{"amount":1}`),
			ExpiresAt: time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC),
		}},
		Results: []*agent.ToolResultBlock{agent.TextResult("u2", agent.ToolSuccess, "found it")},
	}
}

// TestPendingIsStoredWithTheSession: a paused turn's interrupts and kept
// results come back with the session, and the next commit replaces them.
func TestPendingIsStoredWithTheSession(t *testing.T) {
	runBackends(t, func(t *testing.T, b backend) {
		e := newEnv(t, b, ddbhistory.Config{})
		key := ddbhistory.Key{Owner: "alice", ID: "paused"}
		msgs, pending := pausedTurn()
		sess := ddbhistory.NewSession(key)
		if err := e.store.Commit(t.Context(), sess, ddbhistory.Turn{Messages: msgs, Pending: pending}); err != nil {
			t.Fatal(err)
		}
		got, err := e.store.Load(t.Context(), key, "")
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(pending, got.Conversation.Pending); diff != "" {
			t.Errorf("pending (-committed +loaded):\n%s", diff)
		}
		if got.Resuming {
			t.Error("Resuming before any claim")
		}
		page, err := e.store.Transcript(t.Context(), key, "", 10)
		if err != nil || page.Session.Conversation.Pending == nil {
			t.Errorf("the transcript's session has no pending interrupts: %v", err)
		}

		answer := agent.Message{Role: agent.RoleUser, Content: []agent.ContentBlock{
			{ToolResult: agent.TextResult("u1", agent.ToolSuccess, "refunded")},
			{ToolResult: pending.Results[0]},
		}}
		if err := e.store.Commit(t.Context(), got, ddbhistory.Turn{Messages: []agent.Message{answer}}); err != nil {
			t.Fatal(err)
		}
		after, err := e.store.Load(t.Context(), key, "")
		if err != nil {
			t.Fatal(err)
		}
		if after.Conversation.Pending != nil || len(after.Conversation.Messages) != 3 {
			t.Errorf("after the answer: pending %+v, %d messages", after.Conversation.Pending, len(after.Conversation.Messages))
		}
	})
}

// TestClaimPending: of two claims on one loaded session, one wins; a claim
// moves the version on, so that a turn loaded before it cannot commit;
// while it lasts, loads see Resuming and a second claim fails; once it
// has expired, the interrupts can be claimed again; the commit that
// answers them ends it.
func TestClaimPending(t *testing.T) {
	runBackends(t, func(t *testing.T, b backend) {
		e := newEnv(t, b, ddbhistory.Config{})
		key := ddbhistory.Key{Owner: "alice", ID: "claimed"}
		msgs, pending := pausedTurn()
		if err := e.store.Commit(t.Context(), ddbhistory.NewSession(key), ddbhistory.Turn{Messages: msgs, Pending: pending}); err != nil {
			t.Fatal(err)
		}
		load := func() *ddbhistory.Session {
			t.Helper()
			s, err := e.store.Load(t.Context(), key, "")
			if err != nil {
				t.Fatal(err)
			}
			return s
		}
		first, second := load(), load()
		ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second) // the claim lasts until then, on the store's clock
		defer cancel()
		if err := e.store.ClaimPending(ctx, first); err != nil {
			t.Fatalf("first claim: %v", err)
		}
		if !first.Resuming || first.Version != second.Version+1 {
			t.Errorf("after the claim: Resuming %v, version %d (loaded at %d)", first.Resuming, first.Version, second.Version)
		}
		if err := e.store.ClaimPending(ctx, second); !errors.Is(err, ddbhistory.ErrConflict) {
			t.Errorf("a second claim on the same load: %v, want ErrConflict", err)
		}
		if err := e.store.Commit(t.Context(), second, ddbhistory.Turn{Messages: turn(1)}); !errors.Is(err, ddbhistory.ErrConflict) {
			t.Errorf("a commit loaded before the claim: %v, want ErrConflict", err)
		}
		during := load()
		if !during.Resuming {
			t.Error("a load during the claim does not see Resuming")
		}
		if page, err := e.store.Transcript(t.Context(), key, "", 10); err != nil || !page.Session.Resuming {
			t.Errorf("a transcript during the claim: %v; it does not see Resuming", err)
		}
		if err := e.store.ClaimPending(ctx, during); !errors.Is(err, ddbhistory.ErrConflict) {
			t.Errorf("a claim while another lasts: %v, want ErrConflict", err)
		}

		// The claimer died: its claim ends HoldMargin after its deadline.
		e.now.Advance(10*time.Second + ddbhistory.HoldMargin + time.Second)
		later := load()
		if later.Resuming {
			t.Error("Resuming after the claim expired")
		}
		if page, err := e.store.Transcript(t.Context(), key, "", 10); err != nil || page.Session.Resuming {
			t.Errorf("a transcript after the claim expired: %v; it sees Resuming", err)
		}
		if err := e.store.ClaimPending(t.Context(), later); err != nil {
			t.Fatalf("a claim after the first expired: %v", err)
		}
		answer := agent.Message{Role: agent.RoleUser, Content: []agent.ContentBlock{
			{ToolResult: agent.TextResult("u1", agent.ToolError, "denied")},
			{ToolResult: pending.Results[0]},
		}}
		// A checkpoint keeps the claim; a release ends it.
		if err := e.store.Commit(t.Context(), later, ddbhistory.Turn{Messages: []agent.Message{answer}, Resuming: true}); err != nil {
			t.Fatalf("the claimer's checkpoint: %v", err)
		}
		if kept := load(); !kept.Resuming || kept.Conversation.Pending != nil {
			t.Errorf("after the checkpoint: Resuming %v, pending %+v", kept.Resuming, kept.Conversation.Pending)
		}
		if err := e.store.ReleaseClaim(t.Context(), later); err != nil || later.Resuming {
			t.Fatalf("release: %v, Resuming %v", err, later.Resuming)
		}
		released := load()
		if released.Resuming {
			t.Error("Resuming after the release")
		}
		if err := e.store.Commit(t.Context(), released, ddbhistory.Turn{Messages: turn(2)}); err != nil {
			t.Fatalf("a turn after the release: %v", err)
		}
		done := load()
		if done.Resuming || done.Conversation.Pending != nil || done.Count != 5 {
			t.Errorf("after the commit: Resuming %v, pending %+v, %d messages", done.Resuming, done.Conversation.Pending, done.Count)
		}
		if err := e.store.ClaimPending(t.Context(), done); err == nil {
			t.Error("claimed a session with nothing pending")
		}
	})
}

// TestReplayIncludesTheCheckpoint: a turn committed in two parts replays
// with the messages of both.
func TestReplayIncludesTheCheckpoint(t *testing.T) {
	runBackends(t, func(t *testing.T, b backend) {
		e := newEnv(t, b, ddbhistory.Config{})
		key := ddbhistory.Key{Owner: "alice", ID: "two-parts"}
		sess := fill(t, e.store, key, 4, 40)
		hold := mustBegin(t, e.store, sess, "k1")
		if err := e.store.Commit(t.Context(), sess, ddbhistory.Turn{Messages: []agent.Message{agent.UserText("checkpoint")}}); err != nil {
			t.Fatal(err)
		}
		if err := e.store.Commit(t.Context(), sess, ddbhistory.Turn{
			Messages: []agent.Message{agent.AssistantText("rest")}, Hold: hold, Response: json.RawMessage(`{}`), Earlier: 1,
		}); err != nil {
			t.Fatal(err)
		}
		got, err := e.store.Load(t.Context(), key, "k1")
		if err != nil {
			t.Fatal(err)
		}
		if got.Replay == nil || got.Replay.First != 4 || got.Replay.Count != 2 {
			t.Errorf("replay %+v; want the 2 messages from 4", got.Replay)
		}
		if err := e.store.Commit(t.Context(), got, ddbhistory.Turn{Messages: turn(9), Earlier: got.Count + 1}); err == nil {
			t.Error("a turn claimed more earlier messages than the session has")
		}
	})
}
