// Package storetest is the conformance suite of turn.Store: what the turn
// service relies on of its session store, checked through the interface
// alone, so that every implementation is held to one contract, as adk-go's
// sessiontestsuite holds its session services. *ddbhistory.Store runs it on
// minidyn and moto_server, and so does the hand-written fake of turn's
// tests, which can then stand in for the real store there.
//
// The suite checks behaviour, never a layout: loads, commits and their
// version check, holds on idempotency keys and their replays, checkpoints
// (Turn.Earlier), rewinds, pending interrupts and their claims, transcript
// pages, windows, lists, deletes, staged sessions, and owners. Errors are
// ddbhistory's sentinels and types, which the service tells apart with
// errors.Is and errors.As.
package storetest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/lambda-agent/lambda-agent/internal/agent"
	"github.com/lambda-agent/lambda-agent/internal/ddbhistory"
	"github.com/lambda-agent/lambda-agent/internal/turn"
)

// Run runs the suite against the stores newStore returns: one for each
// subtest, empty, and whose clock moves on from one call to the next, so
// that sessions created one after the other are listed in that order.
// Subtests run one at a time; some of them call the store from several
// goroutines at once.
func Run(t *testing.T, newStore func(t *testing.T) turn.Store) {
	tests := []struct {
		name string
		run  func(t *testing.T, s turn.Store)
	}{
		{"LoadMissing", testLoadMissing},
		{"CommitAndLoad", testCommitAndLoad},
		{"VersionCheck", testVersionCheck},
		{"RacingCommits", testRacingCommits},
		{"Owners", testOwners},
		{"Holds", testHolds},
		{"RacingHolds", testRacingHolds},
		{"Pending", testPending},
		{"Claims", testClaims},
		{"Checkpoint", testCheckpoint},
		{"Rewind", testRewind},
		{"Transcript", testTranscript},
		{"Tail", testTail},
		{"Agents", testAgents},
		{"AgentTranscript", testAgentTranscript},
		{"WindowBefore", testWindowBefore},
		{"List", testList},
		{"Delete", testDelete},
		{"Stage", testStage},
		{"StagingReplaced", testStagingReplaced},
		{"StageAgents", testStageAgents},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) { tt.run(t, newStore(t)) })
	}
}

var (
	alice = ddbhistory.Key{Owner: "alice", ID: "chat-1"}
	// bob's key names alice's session id.
	bob = ddbhistory.Key{Owner: "bob", ID: alice.ID}
)

// exchange is a plain turn: a question and its answer.
func exchange(i int) []agent.Message {
	return []agent.Message{agent.UserText(fmt.Sprintf("question %d", i)), agent.AssistantText(fmt.Sprintf("answer %d", i))}
}

// exchanges are the turns from, from+1, ..., from+n-1, in order.
func exchanges(from, n int) []agent.Message {
	var msgs []agent.Message
	for i := range n {
		msgs = append(msgs, exchange(from+i)...)
	}
	return msgs
}

// pausedTurn is a turn that waits for a person: the question, and an answer
// with two tool uses, u1, which waits for approval, and u2, which ran.
func pausedTurn() ([]agent.Message, *agent.Pending) {
	use := &agent.ToolUseBlock{ToolUseID: "u1", Name: "refund", Input: json.RawMessage(`{"n":1}`)}
	ran := &agent.ToolUseBlock{ToolUseID: "u2", Name: "lookup", Input: json.RawMessage(`{}`)}
	msgs := []agent.Message{
		agent.UserText("refund my order"),
		{Role: agent.RoleAssistant, Content: []agent.ContentBlock{{ToolUse: use}, {ToolUse: ran}}},
	}
	return msgs, &agent.Pending{
		Interrupts: []agent.Interrupt{{
			ID: "u1", Kind: agent.KindApproval, Name: "approval", Tool: "refund", Input: use.Input,
			Reason: "refund needs your approval to run.", Payload: json.RawMessage(`{"amount":1}`),
			ExpiresAt: time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC),
		}},
		Results: []*agent.ToolResultBlock{agent.TextResult("u2", agent.ToolSuccess, "found it")},
	}
}

// answered is the user message that answers pausedTurn's tool uses.
func answered() agent.Message {
	return agent.Message{Role: agent.RoleUser, Content: []agent.ContentBlock{
		{ToolResult: agent.TextResult("u1", agent.ToolSuccess, "refunded")},
		{ToolResult: agent.TextResult("u2", agent.ToolSuccess, "found it")},
	}}
}

// empty treats nil and empty slices and maps alike: a store may return
// either for none.
var empty = cmpopts.EquateEmpty()

func commit(t *testing.T, s turn.Store, sess *ddbhistory.Session, tu ddbhistory.Turn) {
	t.Helper()
	if err := s.Commit(t.Context(), sess, tu); err != nil {
		t.Fatalf("commit to %s at version %d: %v", sess.ID, sess.Version, err)
	}
}

func load(t *testing.T, s turn.Store, key ddbhistory.Key, idempotencyKey string) *ddbhistory.Session {
	t.Helper()
	sess, err := s.Load(t.Context(), key, idempotencyKey)
	if err != nil {
		t.Fatalf("load %s of %s: %v", key.ID, key.Owner, err)
	}
	return sess
}

// create commits msgs as a new session under key, and returns it.
func create(t *testing.T, s turn.Store, key ddbhistory.Key, msgs []agent.Message) *ddbhistory.Session {
	t.Helper()
	sess := ddbhistory.NewSession(key)
	commit(t, s, sess, ddbhistory.Turn{Messages: msgs})
	return sess
}

// transcript reads key's whole transcript, page after page.
func transcript(t *testing.T, s turn.Store, key ddbhistory.Key) []agent.Message {
	t.Helper()
	var all []agent.Message
	cursor := ""
	for range 100 {
		page, err := s.Transcript(t.Context(), key, cursor, ddbhistory.MaxPageSize)
		if err != nil {
			t.Fatalf("transcript of %s: %v", key.ID, err)
		}
		all = append(all, page.Messages...)
		if cursor = page.NextCursor; cursor == "" {
			return all
		}
	}
	t.Fatalf("the transcript of %s does not end", key.ID)
	return nil
}

// checkMessages fails the test unless key's session holds want, as
// Transcript reads it.
func checkMessages(t *testing.T, s turn.Store, key ddbhistory.Key, want []agent.Message) {
	t.Helper()
	if diff := cmp.Diff(want, transcript(t, s, key), empty); diff != "" {
		t.Errorf("the transcript of %s (-want +got):\n%s", key.ID, diff)
	}
}

func wantErr(t *testing.T, what string, err, want error) {
	t.Helper()
	if !errors.Is(err, want) {
		t.Errorf("%s: %v, want %v", what, err, want)
	}
}

func wantArgumentError(t *testing.T, what string, err error) {
	t.Helper()
	var arg *ddbhistory.ArgumentError
	if !errors.As(err, &arg) {
		t.Errorf("%s: %v, want a *ddbhistory.ArgumentError", what, err)
	}
}

// testLoadMissing: a session that does not exist is ErrNotFound, which a
// turn takes for a new session: so it must not be ErrIDTaken.
func testLoadMissing(t *testing.T, s turn.Store) {
	for _, key := range []string{"", "k"} {
		_, err := s.Load(t.Context(), alice, key)
		if !errors.Is(err, ddbhistory.ErrNotFound) || errors.Is(err, ddbhistory.ErrIDTaken) {
			t.Errorf("load of a missing session (idempotency key %q): %v, want ErrNotFound alone", key, err)
		}
	}
	if _, err := s.Transcript(t.Context(), alice, "", 10); !errors.Is(err, ddbhistory.ErrNotFound) {
		t.Errorf("transcript of a missing session: %v, want ErrNotFound", err)
	}
}

// testCommitAndLoad: a first commit creates the session, a commit moves
// the Session it was given on (the service commits twice on one Session),
// and a load returns the window (from Window.Removed on), the agent state
// and the manager's state as committed, with the title of the first
// message.
func testCommitAndLoad(t *testing.T, s turn.Store) {
	state := map[string]json.RawMessage{"memory:colour": json.RawMessage(`"teal"`)}
	sess := ddbhistory.NewSession(alice)
	commit(t, s, sess, ddbhistory.Turn{Messages: exchange(0), State: state, Window: agent.WindowState{LastInputTokens: 12}})
	if sess.Version != 1 || sess.Count != 2 || sess.Resuming {
		t.Errorf("the session after its first commit: version %d, count %d, resuming %v; want 1, 2, false", sess.Version, sess.Count, sess.Resuming)
	}
	got := load(t, s, alice, "")
	want := agent.Conversation{Messages: exchange(0), State: state, Window: agent.WindowState{LastInputTokens: 12}}
	if diff := cmp.Diff(want, got.Conversation, empty); diff != "" {
		t.Errorf("the loaded conversation (-want +got):\n%s", diff)
	}
	if got.Key != alice || got.Version != 1 || got.Count != 2 || got.Title != "question 0" || got.Resuming || got.Replay != nil || got.CreatedAt.IsZero() {
		t.Errorf("loaded: key %v, version %d, count %d, title %q, resuming %v, replay %+v, created %v", got.Key, got.Version, got.Count, got.Title, got.Resuming, got.Replay, got.CreatedAt)
	}

	// The next commit appends; the window starts where the manager says.
	state2 := map[string]json.RawMessage{"memory:colour": json.RawMessage(`"red"`)}
	commit(t, s, got, ddbhistory.Turn{Messages: exchange(1), State: state2, Window: agent.WindowState{Removed: 2, Summary: "a question"}})
	if got.Version != 2 || got.Count != 4 {
		t.Errorf("after the second commit: version %d, count %d; want 2, 4", got.Version, got.Count)
	}
	got = load(t, s, alice, "")
	want = agent.Conversation{Messages: exchange(1), State: state2, Window: agent.WindowState{Removed: 2, Summary: "a question"}}
	if diff := cmp.Diff(want, got.Conversation, empty); diff != "" {
		t.Errorf("the window after a commit with Removed 2 (-want +got):\n%s", diff)
	}
	if got.Version != 2 || got.Count != 4 || got.Title != "question 0" {
		t.Errorf("after the second commit: version %d, count %d, title %q", got.Version, got.Count, got.Title)
	}
	checkMessages(t, s, alice, exchanges(0, 2))
}

// testVersionCheck: a commit from a session that another commit moved on
// is ErrConflict, and writes nothing; so is a new session's first commit
// under an id that already names one of the owner's.
func testVersionCheck(t *testing.T, s turn.Store) {
	create(t, s, alice, exchange(0))
	first, stale := load(t, s, alice, ""), load(t, s, alice, "")
	commit(t, s, first, ddbhistory.Turn{Messages: exchange(1)})
	wantErr(t, "a commit from a stale session", s.Commit(t.Context(), stale, ddbhistory.Turn{Messages: exchange(2)}), ddbhistory.ErrConflict)
	wantErr(t, "a second first commit", s.Commit(t.Context(), ddbhistory.NewSession(alice), ddbhistory.Turn{Messages: exchange(3)}), ddbhistory.ErrConflict)
	if got := load(t, s, alice, ""); got.Version != 2 || got.Count != 4 {
		t.Errorf("after the refused commits: version %d, count %d; want 2, 4", got.Version, got.Count)
	}
	checkMessages(t, s, alice, exchanges(0, 2))
}

// testRacingCommits: of commits racing from one version, one lands and the
// others are ErrConflict.
func testRacingCommits(t *testing.T, s turn.Store) {
	create(t, s, alice, exchange(0))
	const n = 4
	sessions := make([]*ddbhistory.Session, n)
	for i := range sessions {
		sessions[i] = load(t, s, alice, "")
	}
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i, sess := range sessions {
		wg.Go(func() { errs[i] = s.Commit(t.Context(), sess, ddbhistory.Turn{Messages: exchange(10 + i)}) })
	}
	wg.Wait()
	won := -1
	for i, err := range errs {
		switch {
		case err == nil && won >= 0:
			t.Errorf("commits %d and %d both landed", won, i)
		case err == nil:
			won = i
		case !errors.Is(err, ddbhistory.ErrConflict):
			t.Errorf("commit %d: %v, want ErrConflict", i, err)
		}
	}
	if won < 0 {
		t.Fatal("no commit landed")
	}
	checkMessages(t, s, alice, append(exchange(0), exchange(10+won)...))
}

// testOwners: a session is its owner's. To another owner it does not
// exist, and its id is taken: no session of theirs can start under it.
func testOwners(t *testing.T, s turn.Store) {
	create(t, s, alice, exchange(0))
	_, err := s.Load(t.Context(), bob, "")
	if !errors.Is(err, ddbhistory.ErrNotFound) || !errors.Is(err, ddbhistory.ErrIDTaken) {
		t.Errorf("another owner's load: %v, want ErrNotFound and ErrIDTaken", err)
	}
	_, err = s.Load(t.Context(), ddbhistory.Key{Owner: "bob", ID: "free"}, "")
	if !errors.Is(err, ddbhistory.ErrNotFound) || errors.Is(err, ddbhistory.ErrIDTaken) {
		t.Errorf("a load of a free id: %v, want ErrNotFound alone", err)
	}
	_, err = s.Transcript(t.Context(), bob, "", 10)
	wantErr(t, "another owner's transcript", err, ddbhistory.ErrNotFound)
	wantErr(t, "another owner's first commit under the id", s.Commit(t.Context(), ddbhistory.NewSession(bob), ddbhistory.Turn{Messages: exchange(9)}), ddbhistory.ErrNotFound)
	wantErr(t, "another owner's delete", s.Delete(t.Context(), bob), ddbhistory.ErrNotFound)
	_, err = s.Stage(t.Context(), bob, "tok", 0, exchange(9), json.RawMessage(`{}`))
	wantErr(t, "another owner's staging under the id", err, ddbhistory.ErrIDTaken)
	if list, err := s.List(t.Context(), "bob", "", 10); err != nil || len(list.Sessions) != 0 {
		t.Errorf("another owner's list: %+v, %v; want none", list, err)
	}
	got := load(t, s, alice, "")
	if got.Version != 1 || got.Count != 2 {
		t.Errorf("the owner's session after the others' attempts: version %d, count %d; want 1, 2", got.Version, got.Count)
	}
	checkMessages(t, s, alice, exchange(0))
}

// testHolds: an idempotency key is held by one request of its owner at a
// time, on any session; the commit that carries the hold records the
// response, which a load with the key replays with where the turn's
// messages are; a release frees a key whose turn failed.
func testHolds(t *testing.T, s turn.Store) {
	sess := create(t, s, alice, exchange(0))
	other := create(t, s, ddbhistory.Key{Owner: "alice", ID: "chat-2"}, exchange(5))
	hold, err := s.Begin(t.Context(), sess, "k", "fp-a")
	if err != nil {
		t.Fatal(err)
	}
	if hold.Key != "k" || hold.Fingerprint != "fp-a" {
		t.Errorf("hold: key %q, fingerprint %q", hold.Key, hold.Fingerprint)
	}
	// While it runs, a retry is refused, on any of the owner's sessions,
	// and told whose the key is.
	for _, on := range []*ddbhistory.Session{sess, other} {
		var inUse *ddbhistory.KeyInUseError
		_, err := s.Begin(t.Context(), on, "k", "fp-b")
		if !errors.As(err, &inUse) || !errors.Is(err, ddbhistory.ErrKeyInUse) || inUse.Committed || inUse.Fingerprint != "fp-a" {
			t.Errorf("Begin of a held key on %s: %v; want a *KeyInUseError of fp-a, not committed", on.ID, err)
		}
	}
	if got := load(t, s, alice, "k"); got.Replay != nil {
		t.Errorf("a held key replays %+v", got.Replay)
	}
	// Another owner's key of the same name is another key.
	if _, err := s.Begin(t.Context(), ddbhistory.NewSession(ddbhistory.Key{Owner: "bob", ID: "chat-9"}), "k", "fp-bob"); err != nil {
		t.Errorf("another owner's key of the same name: %v", err)
	}

	response := json.RawMessage(`{"answer":1}`)
	commit(t, s, sess, ddbhistory.Turn{Messages: exchange(1), Hold: hold, Response: response})
	want := &ddbhistory.Replay{Fingerprint: "fp-a", SessionID: alice.ID, Response: response, First: 2, Count: 2}
	if diff := cmp.Diff(want, load(t, s, alice, "k").Replay); diff != "" {
		t.Errorf("the replay (-want +got):\n%s", diff)
	}
	for _, key := range []string{"", "unused"} {
		if got := load(t, s, alice, key); got.Replay != nil {
			t.Errorf("a load with key %q replays %+v", key, got.Replay)
		}
	}
	// The key is spent: a retry that runs anyway cannot hold it, and on
	// another session the key replays nothing.
	var inUse *ddbhistory.KeyInUseError
	if _, err := s.Begin(t.Context(), sess, "k", "fp-a"); !errors.As(err, &inUse) || !inUse.Committed || inUse.Fingerprint != "fp-a" {
		t.Errorf("Begin of a committed key: %v; want a *KeyInUseError of fp-a, committed", err)
	}
	want = &ddbhistory.Replay{Fingerprint: "fp-a", SessionID: alice.ID}
	if diff := cmp.Diff(want, load(t, s, other.Key, "k").Replay, empty); diff != "" {
		t.Errorf("the key on another session (-want +got):\n%s", diff)
	}
	// Releasing a committed hold does nothing.
	if err := s.Release(t.Context(), hold); err != nil {
		t.Errorf("release after the commit: %v", err)
	}
	if got := load(t, s, alice, "k"); got.Replay == nil || string(got.Replay.Response) != string(response) {
		t.Errorf("after a release of the committed hold: replay %+v", got.Replay)
	}

	// A released key can be held again; a release of the old hold then
	// leaves the new one alone, and a commit with it is ErrConflict.
	failed, err := s.Begin(t.Context(), sess, "r", "fp-1")
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Release(t.Context(), failed); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Begin(t.Context(), sess, "r", "fp-2"); err != nil {
		t.Fatalf("Begin after the release: %v", err)
	}
	if err := s.Release(t.Context(), failed); err != nil {
		t.Errorf("a second release: %v", err)
	}
	if _, err := s.Begin(t.Context(), sess, "r", "fp-3"); !errors.As(err, &inUse) || inUse.Fingerprint != "fp-2" {
		t.Errorf("a release of an old hold freed the new one: %v", err)
	}
	err = s.Commit(t.Context(), sess, ddbhistory.Turn{Messages: exchange(2), Hold: failed, Response: json.RawMessage(`{}`)})
	wantErr(t, "a commit with a hold that another has replaced", err, ddbhistory.ErrConflict)
	checkMessages(t, s, alice, exchanges(0, 2))
}

// testRacingHolds: of requests racing to hold one key, on several
// sessions, one holds it.
func testRacingHolds(t *testing.T, s turn.Store) {
	const n = 4
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			sess := ddbhistory.NewSession(ddbhistory.Key{Owner: "alice", ID: fmt.Sprintf("race-%d", i)})
			_, errs[i] = s.Begin(t.Context(), sess, "shared", fmt.Sprintf("fp-%d", i))
		})
	}
	wg.Wait()
	held := 0
	for i, err := range errs {
		switch {
		case err == nil:
			held++
		case !errors.Is(err, ddbhistory.ErrKeyInUse):
			t.Errorf("Begin %d: %v, want ErrKeyInUse", i, err)
		}
	}
	if held != 1 {
		t.Errorf("%d of %d racing requests hold the key, want 1", held, n)
	}
}

// testPending: a paused turn's interrupts and kept results come back with
// the session, from Load and from Transcript, and the next commit replaces
// them.
func testPending(t *testing.T, s turn.Store) {
	msgs, pending := pausedTurn()
	sess := ddbhistory.NewSession(alice)
	commit(t, s, sess, ddbhistory.Turn{Messages: msgs, Pending: pending})
	got := load(t, s, alice, "")
	if diff := cmp.Diff(pending, got.Conversation.Pending); diff != "" {
		t.Errorf("pending, loaded (-committed +got):\n%s", diff)
	}
	if got.Resuming {
		t.Error("Resuming before any claim")
	}
	page, err := s.Transcript(t.Context(), alice, "", 10)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(pending, page.Session.Conversation.Pending); diff != "" {
		t.Errorf("pending, with the transcript (-committed +got):\n%s", diff)
	}
	commit(t, s, got, ddbhistory.Turn{Messages: []agent.Message{answered(), agent.AssistantText("done")}})
	if got := load(t, s, alice, ""); got.Conversation.Pending != nil || got.Count != 4 {
		t.Errorf("after the answer: pending %+v, count %d; want none, 4", got.Conversation.Pending, got.Count)
	}
}

// testClaims: of two requests that would resume one turn, one claims its
// interrupts, and the other is ErrConflict; the claim moves the session on,
// so that a turn loaded before it cannot commit; loads see it (Resuming);
// a checkpoint keeps it (Turn.Resuming), ReleaseClaim or a commit that
// does not keep it ends it.
func testClaims(t *testing.T, s turn.Store) {
	msgs, pending := pausedTurn()
	commit(t, s, ddbhistory.NewSession(alice), ddbhistory.Turn{Messages: msgs, Pending: pending})
	first, second := load(t, s, alice, ""), load(t, s, alice, "")
	if err := s.ClaimPending(t.Context(), first); err != nil {
		t.Fatalf("claim: %v", err)
	}
	if !first.Resuming || first.Version != second.Version+1 {
		t.Errorf("after the claim: resuming %v, version %d (loaded at %d); want true, %d", first.Resuming, first.Version, second.Version, second.Version+1)
	}
	wantErr(t, "a second claim from the same version", s.ClaimPending(t.Context(), second), ddbhistory.ErrConflict)
	wantErr(t, "a commit loaded before the claim", s.Commit(t.Context(), second, ddbhistory.Turn{Messages: []agent.Message{answered()}}), ddbhistory.ErrConflict)
	during := load(t, s, alice, "")
	if !during.Resuming || during.Version != first.Version {
		t.Errorf("a load during the claim: resuming %v, version %d; want true, %d", during.Resuming, during.Version, first.Version)
	}
	wantErr(t, "a claim while another lasts", s.ClaimPending(t.Context(), during), ddbhistory.ErrConflict)

	// The checkpoint keeps the claim; a release ends it.
	commit(t, s, first, ddbhistory.Turn{Messages: []agent.Message{answered()}, Resuming: true})
	if !first.Resuming {
		t.Error("the checkpoint dropped the claim from its session")
	}
	if got := load(t, s, alice, ""); !got.Resuming || got.Conversation.Pending != nil || got.Count != 3 {
		t.Errorf("after the checkpoint: resuming %v, pending %+v, count %d; want true, none, 3", got.Resuming, got.Conversation.Pending, got.Count)
	}
	if err := s.ReleaseClaim(t.Context(), first); err != nil || first.Resuming {
		t.Fatalf("release: %v, resuming %v", err, first.Resuming)
	}
	released := load(t, s, alice, "")
	if released.Resuming {
		t.Error("Resuming after the release")
	}
	if err := s.ReleaseClaim(t.Context(), released); err != nil {
		t.Errorf("a release of a session with no claim: %v", err)
	}
	if err := s.ClaimPending(t.Context(), released); err == nil {
		t.Error("a claim of a session with nothing pending")
	}
	commit(t, s, released, ddbhistory.Turn{Messages: []agent.Message{agent.AssistantText("done")}})
	if got := load(t, s, alice, ""); got.Resuming || got.Count != 4 {
		t.Errorf("after a turn: resuming %v, count %d; want false, 4", got.Resuming, got.Count)
	}

	// A commit that answers the interrupts without keeping the claim ends it.
	key := ddbhistory.Key{Owner: "alice", ID: "chat-2"}
	commit(t, s, ddbhistory.NewSession(key), ddbhistory.Turn{Messages: msgs, Pending: pending})
	sess := load(t, s, key, "")
	if err := s.ClaimPending(t.Context(), sess); err != nil {
		t.Fatal(err)
	}
	commit(t, s, sess, ddbhistory.Turn{Messages: []agent.Message{answered(), agent.AssistantText("done")}})
	if sess.Resuming {
		t.Error("the session keeps the claim after a commit that ended it")
	}
	if got := load(t, s, key, ""); got.Resuming || got.Conversation.Pending != nil || got.Count != 4 {
		t.Errorf("after the resume: resuming %v, pending %+v, count %d; want false, none, 4", got.Resuming, got.Conversation.Pending, got.Count)
	}
}

// testCheckpoint: a resume commits twice under one hold: the checkpoint,
// which keeps the claim, then the rest of the turn with Earlier, whose
// replay names the messages of both.
func testCheckpoint(t *testing.T, s turn.Store) {
	msgs, pending := pausedTurn()
	commit(t, s, ddbhistory.NewSession(alice), ddbhistory.Turn{Messages: msgs, Pending: pending})
	sess := load(t, s, alice, "k")
	hold, err := s.Begin(t.Context(), sess, "k", "fp")
	if err != nil {
		t.Fatal(err)
	}
	if err := s.ClaimPending(t.Context(), sess); err != nil {
		t.Fatal(err)
	}
	commit(t, s, sess, ddbhistory.Turn{Messages: []agent.Message{answered()}, Resuming: true})
	if sess.Count != 3 || !sess.Resuming {
		t.Errorf("after the checkpoint: count %d, resuming %v; want 3, true", sess.Count, sess.Resuming)
	}
	if got := load(t, s, alice, "k"); got.Replay != nil || !got.Resuming {
		t.Errorf("between the commits: replay %+v, resuming %v; want none, true", got.Replay, got.Resuming)
	}
	final := agent.AssistantText("refunded, and found it")
	response := json.RawMessage(`{"text":"done"}`)
	commit(t, s, sess, ddbhistory.Turn{Messages: []agent.Message{final}, Hold: hold, Response: response, Earlier: 1})
	got := load(t, s, alice, "k")
	want := &ddbhistory.Replay{Fingerprint: "fp", SessionID: alice.ID, Response: response, First: 2, Count: 2}
	if diff := cmp.Diff(want, got.Replay); diff != "" {
		t.Errorf("the replay of a turn committed in two (-want +got):\n%s", diff)
	}
	if got.Resuming || got.Count != 4 {
		t.Errorf("after the turn: resuming %v, count %d; want false, 4", got.Resuming, got.Count)
	}
	page, err := s.Transcript(t.Context(), alice, ddbhistory.CursorAt(got.Replay.First), got.Replay.Count)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]agent.Message{answered(), final}, page.Messages); diff != "" {
		t.Errorf("the replayed messages (-want +got):\n%s", diff)
	}
}

// testRewind: a rewinding commit replaces the messages from From on, under
// the version check; the next commit appends after what it kept; a replay
// of a turn it discarded or rewrote has no response, and one of a turn it
// kept still has.
func testRewind(t *testing.T, s turn.Store) {
	keyed := func(i int, key string) {
		t.Helper()
		sess := load(t, s, alice, "")
		hold, err := s.Begin(t.Context(), sess, key, "fp-"+key)
		if err != nil {
			t.Fatal(err)
		}
		commit(t, s, sess, ddbhistory.Turn{Messages: exchange(i), Hold: hold, Response: json.RawMessage(`"` + key + `"`)})
	}
	replay := func(key string) *ddbhistory.Replay {
		t.Helper()
		r := load(t, s, alice, key).Replay
		if r == nil {
			t.Fatalf("%s replays nothing", key)
		}
		return r
	}
	create(t, s, alice, exchange(0))
	keyed(1, "k1") // messages 2 and 3
	keyed(2, "k2") // 4 and 5
	keyed(3, "k3") // 6 and 7

	// Regenerate the last turn: its two messages are replaced.
	sess := load(t, s, alice, "")
	redo := []agent.Message{agent.UserText("question 3"), agent.AssistantText("answer 3, again")}
	stale := load(t, s, alice, "")
	commit(t, s, sess, ddbhistory.Turn{Rewind: true, From: 6, Messages: redo})
	if sess.Count != 8 || sess.Version != stale.Version+1 {
		t.Errorf("after the rewind: count %d, version %d; want 8, %d", sess.Count, sess.Version, stale.Version+1)
	}
	checkMessages(t, s, alice, append(exchanges(0, 3), redo...))
	if r := replay("k3"); r.Response != nil || r.Fingerprint != "fp-k3" || r.SessionID != alice.ID {
		t.Errorf("the replay of a rewritten turn: %+v; want its record with no response", r)
	}
	if r := replay("k2"); string(r.Response) != `"k2"` || r.First != 4 || r.Count != 2 {
		t.Errorf("the replay of a kept turn: %+v; want its response, first 4, count 2", r)
	}
	wantErr(t, "a rewind from a stale session", s.Commit(t.Context(), stale, ddbhistory.Turn{Rewind: true, From: 2}), ddbhistory.ErrConflict)

	// Discard two turns, adding nothing, then a turn appends after the
	// kept messages; the discarded never show again.
	sess = load(t, s, alice, "")
	commit(t, s, sess, ddbhistory.Turn{Rewind: true, From: 4})
	if sess.Count != 4 {
		t.Errorf("after a rewind that adds nothing: count %d, want 4", sess.Count)
	}
	if r := replay("k2"); r.Response != nil {
		t.Errorf("the replay of a discarded turn: %+v; want no response", r)
	}
	if got := load(t, s, alice, ""); got.Count != 4 || len(got.Conversation.Messages) != 4 {
		t.Errorf("loaded after the rewind: count %d, %d messages; want 4, 4", got.Count, len(got.Conversation.Messages))
	}
	commit(t, s, sess, ddbhistory.Turn{Messages: exchange(40)})
	checkMessages(t, s, alice, append(exchanges(0, 2), exchange(40)...))
	if r := replay("k1"); string(r.Response) != `"k1"` || r.First != 2 || r.Count != 2 {
		t.Errorf("the replay of a turn before the rewinds: %+v; want its response, first 2, count 2", r)
	}

	// Replacing every message gives the session its new first message's
	// title.
	sess = load(t, s, alice, "")
	commit(t, s, sess, ddbhistory.Turn{Rewind: true, From: 0, Messages: exchange(77)})
	checkMessages(t, s, alice, exchange(77))
	if got := load(t, s, alice, ""); got.Title != "question 77" || got.Count != 2 {
		t.Errorf("after replacing every message: title %q, count %d; want %q, 2", got.Title, got.Count, "question 77")
	}
	if r := replay("k1"); r.Response != nil {
		t.Errorf("the replay of a turn rewound away: %+v; want no response", r)
	}
}

// testAgents: a turn stores what it adds to its sub-agents' conversations
// with the rest of it, or not at all; LoadAgent reads a sub-agent's
// window, as Load reads the main agent's, and refuses one written after
// the session it is given; a delete removes them; the main agent's window
// never holds their messages; names that cannot name a sub-agent are
// *ArgumentErrors.
func testAgents(t *testing.T, s turn.Store) {
	loadAgent := func(sess *ddbhistory.Session, name string) *ddbhistory.AgentConversation {
		t.Helper()
		c, err := s.LoadAgent(t.Context(), sess, name)
		if err != nil {
			t.Fatalf("LoadAgent %s: %v", name, err)
		}
		return c
	}
	sess := ddbhistory.NewSession(alice)
	if c := loadAgent(sess, "helper"); c.Count != 0 || len(c.Conversation.Messages) != 0 {
		t.Errorf("a new session's sub-agent: %+v", c)
	}
	state := map[string]json.RawMessage{"n": json.RawMessage(`1`)}
	commit(t, s, sess, ddbhistory.Turn{Messages: exchange(0), Agents: []ddbhistory.AgentTurn{{Name: "helper", Messages: exchanges(100, 3), State: state}}})
	stale := load(t, s, alice, "")
	if diff := cmp.Diff(exchange(0), stale.Conversation.Messages); diff != "" {
		t.Errorf("the main window (-want +got):\n%s", diff)
	}
	c := loadAgent(stale, "helper")
	if diff := cmp.Diff(agent.Conversation{Messages: exchanges(100, 3), State: state}, c.Conversation, empty); diff != "" || c.Count != 6 {
		t.Errorf("helper: count %d (-want +got):\n%s", c.Count, diff)
	}
	if c := loadAgent(stale, "other"); c.Count != 0 {
		t.Errorf("an agent no turn delegated to: %+v", c)
	}

	commit(t, s, sess, ddbhistory.Turn{Messages: exchange(1), Agents: []ddbhistory.AgentTurn{{Name: "helper", First: 6, Messages: exchange(103), Window: agent.WindowState{Removed: 4}, State: state}}})
	c = loadAgent(sess, "helper")
	if diff := cmp.Diff(agent.Conversation{Messages: append(exchanges(102, 1), exchange(103)...), Window: agent.WindowState{Removed: 4}, State: state}, c.Conversation, empty); diff != "" || c.Count != 8 {
		t.Errorf("helper after its second turn: count %d (-want +got):\n%s", c.Count, diff)
	}
	_, err := s.LoadAgent(t.Context(), stale, "helper")
	wantErr(t, "LoadAgent from a session a later commit wrote", err, ddbhistory.ErrConflict)
	err = s.Commit(t.Context(), stale, ddbhistory.Turn{Messages: exchange(2), Agents: []ddbhistory.AgentTurn{{Name: "helper", First: 6, Messages: exchange(200)}}})
	wantErr(t, "a stale commit", err, ddbhistory.ErrConflict)
	if c := loadAgent(sess, "helper"); c.Count != 8 {
		t.Errorf("a failed commit changed the agent: %+v", c)
	}
	for _, name := range []string{"main", "a#b", ""} {
		_, err := s.LoadAgent(t.Context(), sess, name)
		wantArgumentError(t, "LoadAgent "+name, err)
		wantArgumentError(t, "a commit to agent "+name, s.Commit(t.Context(), sess, ddbhistory.Turn{Messages: exchange(3), Agents: []ddbhistory.AgentTurn{{Name: name, Messages: exchange(3)}}}))
	}
	// A commit leaves what the caller set on the session that the store
	// does not keep, such as the sub-agents' loader: the next step of a
	// resume goes on with it.
	sess.Conversation.Context = []agent.ContextEntry{{Description: "page", Value: "orders"}}
	sess.Conversation.Agents = func(context.Context, string) (*agent.Conversation, int, error) { return nil, 0, nil }
	commit(t, s, sess, ddbhistory.Turn{Messages: exchange(6), Window: agent.WindowState{LastInputTokens: 13}})
	if c := sess.Conversation; c.Messages != nil || c.Window.LastInputTokens != 13 || len(c.Context) != 1 || c.Agents == nil {
		t.Errorf("the session after a commit: %d messages, window %+v, context %v, a loader %v; want none, the commit's, and the caller's", len(c.Messages), c.Window, c.Context, c.Agents != nil)
	}

	if err := s.Delete(t.Context(), alice); err != nil {
		t.Fatal(err)
	}
	if c := loadAgent(create(t, s, alice, exchange(5)), "helper"); c.Count != 0 {
		t.Errorf("a new session under a deleted one's id has its agent: %+v", c)
	}
}

// testAgentTranscript: a sub-agent's transcript reads in pages, as the
// main agent's does, with the sub-agent's count, window and state beside
// the session item; one with nothing stored has no messages; another
// owner's session, and a missing one, are ErrNotFound; a name that cannot
// name a sub-agent, a malformed cursor or limit, an *ArgumentError.
func testAgentTranscript(t *testing.T, s turn.Store) {
	want := exchanges(100, 6)
	state := map[string]json.RawMessage{"n": json.RawMessage(`1`)}
	window := agent.WindowState{Removed: 4, Summary: "two tasks"}
	sess := ddbhistory.NewSession(alice)
	commit(t, s, sess, ddbhistory.Turn{Messages: exchange(0), Agents: []ddbhistory.AgentTurn{{Name: "helper", Messages: want[:8]}}})
	commit(t, s, sess, ddbhistory.Turn{Messages: exchange(1), Agents: []ddbhistory.AgentTurn{{Name: "helper", First: 8, Messages: want[8:], Window: window, State: state}}})

	var got []agent.Message
	cursor := ""
	for i, first := range []int{0, 5, 10} {
		page, err := s.AgentTranscript(t.Context(), alice, "helper", cursor, 5)
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, page.Messages...)
		if page.First != first || len(page.Messages) != min(5, 12-first) || (page.NextCursor == "") != (i == 2) {
			t.Errorf("page %d: first %d, %d messages, next cursor %q", i, page.First, len(page.Messages), page.NextCursor)
		}
		if a := page.Agent; a == nil || a.Name != "helper" || a.Count != 12 || !cmp.Equal(window, a.Conversation.Window) || !cmp.Equal(state, a.Conversation.State) {
			t.Errorf("page %d: the agent's conversation %+v", i, a)
		}
		if ps := page.Session; ps.ID != alice.ID || ps.Count != 4 || ps.Title != "question 0" || ps.Version != 2 {
			t.Errorf("page %d: the session: id %s, count %d, title %q, version %d", i, ps.ID, ps.Count, ps.Title, ps.Version)
		}
		cursor = page.NextCursor
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("the pages (-want +got):\n%s", diff)
	}
	if page, err := s.AgentTranscript(t.Context(), alice, "helper", ddbhistory.CursorAt(7), 2); err != nil || page.First != 7 || !cmp.Equal(want[7:9], page.Messages) {
		t.Errorf("a page at CursorAt(7): %+v, %v", page, err)
	}
	if diff := cmp.Diff(exchanges(0, 2), transcript(t, s, alice)); diff != "" {
		t.Errorf("the main transcript (-want +got):\n%s", diff)
	}
	page, err := s.AgentTranscript(t.Context(), alice, "other", "", 10)
	if err != nil || len(page.Messages) != 0 || page.NextCursor != "" || page.Agent == nil || page.Agent.Count != 0 || page.Session.Title != "question 0" {
		t.Errorf("an agent with nothing stored: %+v, %v", page, err)
	}
	for _, key := range []ddbhistory.Key{bob, {Owner: alice.Owner, ID: "none"}} {
		_, err := s.AgentTranscript(t.Context(), key, "helper", "", 10)
		wantErr(t, fmt.Sprintf("the agent transcript of %+v", key), err, ddbhistory.ErrNotFound)
	}
	for _, name := range []string{"main", "a#b", ""} {
		_, err := s.AgentTranscript(t.Context(), alice, name, "", 10)
		wantArgumentError(t, "AgentTranscript "+name, err)
	}
	_, err = s.AgentTranscript(t.Context(), alice, "helper", "!!", 10)
	wantArgumentError(t, "a malformed cursor", err)
	for _, limit := range []int{0, ddbhistory.MaxPageSize + 1} {
		_, err := s.AgentTranscript(t.Context(), alice, "helper", "", limit)
		wantArgumentError(t, fmt.Sprintf("limit %d", limit), err)
	}
	if err := s.Delete(t.Context(), alice); err != nil {
		t.Fatal(err)
	}
	_, err = s.AgentTranscript(t.Context(), alice, "helper", "", 10)
	wantErr(t, "the agent transcript of a deleted session", err, ddbhistory.ErrNotFound)
}

// testTail: a tail is the transcript's last n messages, at most, with the
// session item.
func testTail(t *testing.T, s turn.Store) {
	want := exchanges(0, 12)
	commit(t, s, ddbhistory.NewSession(alice), ddbhistory.Turn{Messages: want, Window: agent.WindowState{Removed: 20}})
	for _, n := range []int{1, 5, 24, 100} {
		page, err := s.Tail(t.Context(), alice, n)
		if err != nil {
			t.Fatal(err)
		}
		first := max(24-n, 0)
		if diff := cmp.Diff(want[first:], page.Messages); diff != "" || page.First != first || page.NextCursor != "" {
			t.Errorf("n %d: first %d, next cursor %q (-want +got):\n%s", n, page.First, page.NextCursor, diff)
		}
		if ps := page.Session; ps.Count != 24 || ps.Conversation.Window.Removed != 20 || ps.Title != "question 0" {
			t.Errorf("n %d: the session: count %d, window %+v, title %q", n, ps.Count, ps.Conversation.Window, ps.Title)
		}
	}
	for _, n := range []int{0, ddbhistory.MaxPageSize + 1} {
		_, err := s.Tail(t.Context(), alice, n)
		wantArgumentError(t, fmt.Sprint("a tail of ", n), err)
	}
	_, err := s.Tail(t.Context(), ddbhistory.Key{Owner: alice.Owner, ID: "none"}, 5)
	wantErr(t, "the tail of a missing session", err, ddbhistory.ErrNotFound)
	_, err = s.Tail(t.Context(), bob, 5)
	wantErr(t, "the tail of another owner's session", err, ddbhistory.ErrNotFound)
}

// testTranscript: a transcript reads in pages, oldest first, each page
// saying where it starts and how to go on; CursorAt starts a page at any
// message; a malformed cursor or limit is an *ArgumentError.
func testTranscript(t *testing.T, s turn.Store) {
	want := exchanges(0, 12)
	sess := ddbhistory.NewSession(alice)
	commit(t, s, sess, ddbhistory.Turn{Messages: want[:12]})
	state := map[string]json.RawMessage{"n": json.RawMessage(`2`)}
	commit(t, s, sess, ddbhistory.Turn{Messages: want[12:], Window: agent.WindowState{Removed: 20}, State: state})

	var got []agent.Message
	cursor := ""
	for i, first := range []int{0, 10, 20} {
		page, err := s.Transcript(t.Context(), alice, cursor, 10)
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, page.Messages...)
		if page.First != first || len(page.Messages) != min(10, 24-first) || (page.NextCursor == "") != (i == 2) {
			t.Errorf("page %d: first %d, %d messages, next cursor %q", i, page.First, len(page.Messages), page.NextCursor)
		}
		ps := page.Session
		if ps.ID != alice.ID || ps.Version != 2 || ps.Count != 24 || ps.Title != "question 0" || ps.Conversation.Window.Removed != 20 || string(ps.Conversation.State["n"]) != "2" {
			t.Errorf("page %d's session: id %s, version %d, count %d, title %q, window %+v, state %s", i, ps.ID, ps.Version, ps.Count, ps.Title, ps.Conversation.Window, ps.Conversation.State)
		}
		cursor = page.NextCursor
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("the pages (-want +got):\n%s", diff)
	}

	page, err := s.Transcript(t.Context(), alice, ddbhistory.CursorAt(5), 3)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want[5:8], page.Messages); diff != "" || page.First != 5 {
		t.Errorf("a page at CursorAt(5): first %d (-want +got):\n%s", page.First, diff)
	}
	next, err := s.Transcript(t.Context(), alice, page.NextCursor, 3)
	if err != nil || next.First != 8 || len(next.Messages) != 3 || next.Messages[0].Text() != want[8].Text() {
		t.Errorf("the page after it: %+v, %v; want 3 messages from 8", next, err)
	}
	end, err := s.Transcript(t.Context(), alice, ddbhistory.CursorAt(24), 10)
	if err != nil || len(end.Messages) != 0 || end.NextCursor != "" {
		t.Errorf("a page at the end: %+v, %v; want an empty last page", end, err)
	}
	for _, bad := range []string{"!!", "LTE"} {
		_, err := s.Transcript(t.Context(), alice, bad, 10)
		wantArgumentError(t, fmt.Sprintf("cursor %q", bad), err)
	}
	for _, limit := range []int{0, ddbhistory.MaxPageSize + 1} {
		_, err := s.Transcript(t.Context(), alice, "", limit)
		wantArgumentError(t, fmt.Sprintf("limit %d", limit), err)
	}
}

// testWindowBefore: WindowBefore reads the stored messages from..to-1 of a
// session, which a rewind restarts its window with.
func testWindowBefore(t *testing.T, s turn.Store) {
	want := exchanges(0, 5)
	sess := ddbhistory.NewSession(alice)
	commit(t, s, sess, ddbhistory.Turn{Messages: want, Window: agent.WindowState{Removed: 8, Summary: "the first four turns"}})
	sess = load(t, s, alice, "")
	for _, r := range [][2]int{{2, 6}, {0, 10}, {0, 8}, {9, 10}} {
		msgs, start, err := s.WindowBefore(t.Context(), sess, r[0], r[1])
		if err != nil {
			t.Errorf("WindowBefore(%d, %d): %v", r[0], r[1], err)
			continue
		}
		if diff := cmp.Diff(want[r[0]:r[1]], msgs); diff != "" || start != r[0] {
			t.Errorf("WindowBefore(%d, %d): start %d (-want +got):\n%s", r[0], r[1], start, diff)
		}
	}
	if msgs, start, err := s.WindowBefore(t.Context(), sess, 4, 4); err != nil || len(msgs) != 0 || start != 4 {
		t.Errorf("WindowBefore(4, 4): %d messages from %d, %v; want none from 4", len(msgs), start, err)
	}
	for _, r := range [][2]int{{6, 2}, {0, 11}, {-1, 2}} {
		_, _, err := s.WindowBefore(t.Context(), sess, r[0], r[1])
		wantArgumentError(t, fmt.Sprintf("WindowBefore(%d, %d)", r[0], r[1]), err)
	}
}

// testList: an owner's sessions, newest first, in pages; never another
// owner's, nor a deleted one, and a later turn keeps a session's place.
func testList(t *testing.T, s turn.Store) {
	start := func(owner, id string) {
		t.Helper()
		msgs := []agent.Message{agent.UserText("  first of " + id + "\n "), agent.AssistantText("ok")}
		create(t, s, ddbhistory.Key{Owner: owner, ID: id}, msgs)
	}
	start("alice", "a1")
	start("bob", "b1")
	start("alice", "a2")
	start("alice", "a3")
	start("alice", "a4")
	commit(t, s, load(t, s, ddbhistory.Key{Owner: "alice", ID: "a1"}, ""), ddbhistory.Turn{Messages: exchange(1)})
	if err := s.Delete(t.Context(), ddbhistory.Key{Owner: "alice", ID: "a3"}); err != nil {
		t.Fatal(err)
	}

	var got []ddbhistory.Summary
	cursor := ""
	for pages := 0; ; pages++ {
		list, err := s.List(t.Context(), "alice", cursor, 2)
		if err != nil {
			t.Fatal(err)
		}
		if pages == 0 && len(list.Sessions) != 2 {
			t.Errorf("the first page of 2 holds %d sessions", len(list.Sessions))
		}
		got = append(got, list.Sessions...)
		if cursor = list.NextCursor; cursor == "" || pages > 5 {
			break
		}
	}
	var ids, titles []string
	for _, sum := range got {
		ids, titles = append(ids, sum.ID), append(titles, sum.Title)
	}
	if diff := cmp.Diff([]string{"a4", "a2", "a1"}, ids); diff != "" {
		t.Fatalf("alice's sessions, newest first (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"first of a4", "first of a2", "first of a1"}, titles); diff != "" {
		t.Errorf("titles (-want +got):\n%s", diff)
	}
	for i := 1; i < len(got); i++ {
		if got[i].CreatedAt.After(got[i-1].CreatedAt) || got[i].CreatedAt.IsZero() {
			t.Errorf("created %v, then %v: not newest first", got[i-1].CreatedAt, got[i].CreatedAt)
		}
	}
	if list, err := s.List(t.Context(), "bob", "", 10); err != nil || len(list.Sessions) != 1 || list.Sessions[0].ID != "b1" || list.NextCursor != "" {
		t.Errorf("bob's list: %+v, %v; want b1 alone", list, err)
	}
	if list, err := s.List(t.Context(), "carol", "", 10); err != nil || len(list.Sessions) != 0 || list.NextCursor != "" {
		t.Errorf("an owner with no sessions: %+v, %v; want none", list, err)
	}
	_, err := s.List(t.Context(), "alice", "not a cursor!", 10)
	wantArgumentError(t, "a malformed cursor", err)
	for _, limit := range []int{0, ddbhistory.MaxListSize + 1} {
		_, err := s.List(t.Context(), "alice", "", limit)
		wantArgumentError(t, fmt.Sprintf("limit %d", limit), err)
	}
}

// testDelete: a deleted session is gone for every read, a second delete is
// ErrNotFound, the key of a turn it held stays spent with nothing to
// replay (even on a new session under its id), and its id is free.
func testDelete(t *testing.T, s turn.Store) {
	sess := create(t, s, alice, exchange(0))
	hold, err := s.Begin(t.Context(), sess, "k", "fp")
	if err != nil {
		t.Fatal(err)
	}
	commit(t, s, sess, ddbhistory.Turn{Messages: exchange(1), Hold: hold, Response: json.RawMessage(`{}`)})
	if err := s.Delete(t.Context(), alice); err != nil {
		t.Fatal(err)
	}
	for _, key := range []string{"", "k"} {
		_, err := s.Load(t.Context(), alice, key)
		wantErr(t, fmt.Sprintf("a load (key %q) after the delete", key), err, ddbhistory.ErrNotFound)
	}
	_, err = s.Transcript(t.Context(), alice, "", 10)
	wantErr(t, "a transcript after the delete", err, ddbhistory.ErrNotFound)
	wantErr(t, "a second delete", s.Delete(t.Context(), alice), ddbhistory.ErrNotFound)
	wantErr(t, "a commit from the deleted session", s.Commit(t.Context(), sess, ddbhistory.Turn{Messages: exchange(2)}), ddbhistory.ErrConflict)
	if list, err := s.List(t.Context(), "alice", "", 10); err != nil || len(list.Sessions) != 0 {
		t.Errorf("the list after the delete: %+v, %v; want none", list, err)
	}
	var inUse *ddbhistory.KeyInUseError
	if _, err := s.Begin(t.Context(), ddbhistory.NewSession(alice), "k", "fp"); !errors.As(err, &inUse) || !inUse.Committed {
		t.Errorf("Begin of the key of a deleted session's turn: %v; want a committed *KeyInUseError", err)
	}

	// A new session under the id is another session: the key replays
	// nothing there.
	create(t, s, alice, exchange(5))
	want := &ddbhistory.Replay{Fingerprint: "fp", SessionID: alice.ID}
	if diff := cmp.Diff(want, load(t, s, alice, "k").Replay, empty); diff != "" {
		t.Errorf("the key on a new session under the id (-want +got):\n%s", diff)
	}
	checkMessages(t, s, alice, exchange(5))

	// Once deleted, the id is free for anyone.
	if err := s.Delete(t.Context(), alice); err != nil {
		t.Fatal(err)
	}
	create(t, s, bob, exchange(6))
	checkMessages(t, s, bob, exchange(6))
}

// testStage: an import in pages stages its messages, part by part, where
// no reader sees them; the commit whose Turn.Staging names the staging
// makes the whole session visible at once.
func testStage(t *testing.T, s turn.Store) {
	msgs := exchanges(0, 6)
	header := json.RawMessage(`{"header":1}`)
	st, err := s.Stage(t.Context(), alice, "tok", 0, msgs[:4], header)
	if err != nil {
		t.Fatal(err)
	}
	want := &ddbhistory.Staging{Token: "tok", Count: 4, Last: &msgs[3], Header: header, Title: "question 0"}
	if diff := cmp.Diff(want, st); diff != "" {
		t.Errorf("the first part (-want +got):\n%s", diff)
	}
	if got, err := s.Staged(t.Context(), alice, "tok"); err != nil || !cmp.Equal(want, got) {
		t.Errorf("staged after the first part: %+v, %v; want %+v", got, err, want)
	}
	invisible := func(when string) {
		t.Helper()
		_, err := s.Load(t.Context(), alice, "")
		wantErr(t, "a load "+when, err, ddbhistory.ErrNotFound)
		_, err = s.Transcript(t.Context(), alice, "", 10)
		wantErr(t, "a transcript "+when, err, ddbhistory.ErrNotFound)
		if list, err := s.List(t.Context(), "alice", "", 10); err != nil || len(list.Sessions) != 0 {
			t.Errorf("the list %s: %+v, %v; want none", when, list, err)
		}
	}
	invisible("of a staging")

	st, err = s.Stage(t.Context(), alice, "tok", 4, msgs[4:8], nil)
	want = &ddbhistory.Staging{Token: "tok", Count: 8, Last: &msgs[7], Header: header, Title: "question 0"}
	if err != nil || st.Count != 8 || !cmp.Equal(st.Last, &msgs[7]) {
		t.Errorf("the second part: %+v, %v; want 8 staged, the last message 7", st, err)
	}
	if got, err := s.Staged(t.Context(), alice, "tok"); err != nil || !cmp.Equal(want, got) {
		t.Errorf("staged after the second part: %+v, %v; want %+v", got, err, want)
	}
	// A part sent again is not written twice; one that does not start at
	// the staging's end, or under an unknown token, is refused.
	if again, err := s.Stage(t.Context(), alice, "tok", 4, msgs[4:8], nil); err != nil || again.Count != 8 {
		t.Errorf("a part sent again: %+v, %v; want 8 staged", again, err)
	}
	_, err = s.Stage(t.Context(), alice, "tok", 10, msgs[10:], nil)
	wantErr(t, "a part past the staging's end", err, ddbhistory.ErrConflict)
	_, err = s.Stage(t.Context(), alice, "unknown", 8, msgs[8:], nil)
	wantErr(t, "a part under an unknown token", err, ddbhistory.ErrNotFound)
	for _, tok := range []string{"unknown", ""} {
		_, err := s.Staged(t.Context(), alice, tok)
		wantErr(t, fmt.Sprintf("Staged(%q)", tok), err, ddbhistory.ErrNotFound)
	}
	_, err = s.Staged(t.Context(), ddbhistory.Key{Owner: "bob", ID: alice.ID}, "tok")
	wantErr(t, "another owner's Staged", err, ddbhistory.ErrNotFound)
	invisible("of a staging of two parts")

	st, err = s.Staged(t.Context(), alice, "tok")
	if err != nil {
		t.Fatal(err)
	}
	sess := ddbhistory.NewSession(alice)
	state := map[string]json.RawMessage{"imported": json.RawMessage(`true`)}
	commit(t, s, sess, ddbhistory.Turn{Messages: msgs[8:], Staging: st, State: state, Window: agent.WindowState{Removed: 10}})
	if sess.Version != 1 || sess.Count != 12 {
		t.Errorf("the committed session: version %d, count %d; want 1, 12", sess.Version, sess.Count)
	}
	checkMessages(t, s, alice, msgs)
	got := load(t, s, alice, "")
	if got.Title != "question 0" || got.Count != 12 || string(got.Conversation.State["imported"]) != "true" || !cmp.Equal(msgs[10:], got.Conversation.Messages) {
		t.Errorf("loaded: title %q, count %d, state %s, window %d messages", got.Title, got.Count, got.Conversation.State, len(got.Conversation.Messages))
	}
	if list, err := s.List(t.Context(), "alice", "", 10); err != nil || len(list.Sessions) != 1 || list.Sessions[0].Title != "question 0" {
		t.Errorf("the list after the commit: %+v, %v", list, err)
	}
	_, err = s.Staged(t.Context(), alice, "tok")
	wantErr(t, "the staging after its commit", err, ddbhistory.ErrNotFound)

	// A session, and another owner's claim on its id, refuse a staging.
	_, err = s.Stage(t.Context(), alice, "again", 0, msgs[:2], header)
	wantErr(t, "a staging onto a session", err, ddbhistory.ErrConflict)
	_, err = s.Stage(t.Context(), bob, "bob", 0, msgs[:2], header)
	wantErr(t, "a staging under another owner's id", err, ddbhistory.ErrIDTaken)
	checkMessages(t, s, alice, msgs)
}

// testStagingReplaced: a new staging under the key replaces the old one,
// which can neither be read nor committed; a commit with a staging as it
// was before its last part is ErrConflict, and shows nothing.
func testStagingReplaced(t *testing.T, s turn.Store) {
	msgs := exchanges(0, 4)
	old, err := s.Stage(t.Context(), alice, "one", 0, msgs[:4], json.RawMessage(`1`))
	if err != nil {
		t.Fatal(err)
	}
	st, err := s.Stage(t.Context(), alice, "two", 0, msgs[:2], json.RawMessage(`2`))
	if err != nil {
		t.Fatal(err)
	}
	_, err = s.Staged(t.Context(), alice, "one")
	wantErr(t, "the replaced staging", err, ddbhistory.ErrNotFound)
	if got, err := s.Staged(t.Context(), alice, "two"); err != nil || got.Count != 2 || string(got.Header) != "2" {
		t.Errorf("the new staging: %+v, %v; want 2 staged, header 2", got, err)
	}
	err = s.Commit(t.Context(), ddbhistory.NewSession(alice), ddbhistory.Turn{Messages: msgs[4:6], Staging: old})
	wantErr(t, "a commit of the replaced staging", err, ddbhistory.ErrConflict)

	if _, err := s.Stage(t.Context(), alice, "two", 2, msgs[2:4], nil); err != nil {
		t.Fatal(err)
	}
	err = s.Commit(t.Context(), ddbhistory.NewSession(alice), ddbhistory.Turn{Messages: msgs[4:6], Staging: st})
	wantErr(t, "a commit of a staging as it was before its last part", err, ddbhistory.ErrConflict)
	_, err = s.Load(t.Context(), alice, "")
	wantErr(t, "a load after the refused commits", err, ddbhistory.ErrNotFound)

	st, err = s.Staged(t.Context(), alice, "two")
	if err != nil {
		t.Fatal(err)
	}
	commit(t, s, ddbhistory.NewSession(alice), ddbhistory.Turn{Messages: msgs[4:], Staging: st})
	checkMessages(t, s, alice, msgs)
}

// testStageAgents: an import in pages stages its sub-agents' messages
// too, each conversation part by part, where no reader sees them; the
// commit that names the staging makes each visible with its agent's
// turn, which starts where the staged messages end, and only while the
// staging is as it was read.
func testStageAgents(t *testing.T, s turn.Store) {
	msgs, helper, other := exchanges(0, 2), exchanges(100, 4), exchanges(200, 1)
	if _, err := s.Stage(t.Context(), alice, "tok", 0, msgs[:2], json.RawMessage(`{}`)); err != nil {
		t.Fatal(err)
	}
	stageAgent := func(name string, first int, part []agent.Message) {
		t.Helper()
		if err := s.StageAgent(t.Context(), alice, "tok", name, first, part); err != nil {
			t.Fatalf("StageAgent %s from %d: %v", name, first, err)
		}
	}
	stageAgent("helper", 0, helper[:4])
	wantErr(t, "a part that does not start at the agent's end", s.StageAgent(t.Context(), alice, "tok", "helper", 2, helper[2:6]), ddbhistory.ErrConflict)
	wantErr(t, "a part past the agent's end", s.StageAgent(t.Context(), alice, "tok", "helper", 5, helper[5:6]), ddbhistory.ErrConflict)
	wantErr(t, "a part under an unknown token", s.StageAgent(t.Context(), alice, "nope", "helper", 4, helper[4:6]), ddbhistory.ErrNotFound)
	wantErr(t, "another owner's part", s.StageAgent(t.Context(), bob, "tok", "helper", 4, helper[4:6]), ddbhistory.ErrNotFound)
	for _, name := range []string{"main", "a#b", ""} {
		wantArgumentError(t, "StageAgent "+name, s.StageAgent(t.Context(), alice, "tok", name, 0, helper[:2]))
	}
	stageAgent("helper", 4, helper[4:6])
	stageAgent("other", 0, other)
	st, err := s.Staged(t.Context(), alice, "tok")
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]ddbhistory.StagedAgent{"helper": {Count: 6, Last: &helper[5]}, "other": {Count: 2, Last: &other[1]}}
	if diff := cmp.Diff(want, st.Agents); diff != "" || st.Count != 2 {
		t.Errorf("the staging: %d messages; its agents (-want +got):\n%s", st.Count, diff)
	}
	_, err = s.Load(t.Context(), alice, "")
	wantErr(t, "a load of the staging", err, ddbhistory.ErrNotFound)
	_, err = s.AgentTranscript(t.Context(), alice, "helper", "", 10)
	wantErr(t, "an agent transcript of the staging", err, ddbhistory.ErrNotFound)

	// A commit of the staging as it was before a later part conflicts.
	stageAgent("helper", 6, helper[6:7])
	window := agent.WindowState{Removed: 4}
	state := map[string]json.RawMessage{"n": json.RawMessage(`1`)}
	stale := ddbhistory.Turn{Messages: msgs[2:], Staging: st, Agents: []ddbhistory.AgentTurn{{Name: "helper", First: 6, Messages: helper[6:], Window: window, State: state}, {Name: "other", First: 2}}}
	wantErr(t, "a commit of a staging as it was before an agent's part", s.Commit(t.Context(), ddbhistory.NewSession(alice), stale), ddbhistory.ErrConflict)
	if st, err = s.Staged(t.Context(), alice, "tok"); err != nil {
		t.Fatal(err)
	}
	bad := ddbhistory.Turn{Messages: msgs[2:], Staging: st, Agents: []ddbhistory.AgentTurn{{Name: "helper", First: 0, Messages: helper}}}
	wantArgumentError(t, "an agent's turn that does not start after its staged messages", s.Commit(t.Context(), ddbhistory.NewSession(alice), bad))

	sess := ddbhistory.NewSession(alice)
	commit(t, s, sess, ddbhistory.Turn{Messages: msgs[2:], Staging: st, Agents: []ddbhistory.AgentTurn{
		{Name: "helper", First: 7, Messages: helper[7:], Window: window, State: state},
		{Name: "other", First: 2},
		{Name: "fresh", Messages: exchange(300)},
	}})
	checkMessages(t, s, alice, msgs)
	for name, want := range map[string][]agent.Message{"helper": helper, "other": other, "fresh": exchange(300)} {
		page, err := s.AgentTranscript(t.Context(), alice, name, "", 100)
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(want, page.Messages); diff != "" || page.Agent.Count != len(want) {
			t.Errorf("%s: count %d (-want +got):\n%s", name, page.Agent.Count, diff)
		}
	}
	c, err := s.LoadAgent(t.Context(), sess, "helper")
	if err != nil || c.Count != 8 || !cmp.Equal(helper[4:], c.Conversation.Messages) || !cmp.Equal(state, c.Conversation.State) {
		t.Errorf("the helper's conversation, loaded: %+v, %v", c, err)
	}

	// A new staging under a key starts with no agent's messages.
	key := ddbhistory.Key{Owner: alice.Owner, ID: "chat-2"}
	for _, tok := range []string{"one", "two"} {
		if _, err := s.Stage(t.Context(), key, tok, 0, msgs[:2], json.RawMessage(`{}`)); err != nil {
			t.Fatal(err)
		}
		if tok == "one" {
			if err := s.StageAgent(t.Context(), key, tok, "helper", 0, helper[:2]); err != nil {
				t.Fatal(err)
			}
		}
	}
	if st, err := s.Staged(t.Context(), key, "two"); err != nil || len(st.Agents) != 0 {
		t.Errorf("a staging that replaced one with an agent's messages: %+v, %v", st, err)
	}
	wantErr(t, "a part of the replaced staging", s.StageAgent(t.Context(), key, "one", "helper", 2, helper[2:4]), ddbhistory.ErrNotFound)
}
