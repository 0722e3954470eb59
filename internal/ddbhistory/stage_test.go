package ddbhistory_test

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/lambda-agent/lambda-agent/internal/agent"
	"github.com/lambda-agent/lambda-agent/internal/ddbhistory"
)

// TestStagedSessionAppearsWhole stages a session in parts and commits its
// last part, one large enough to be written in parts itself: until the
// commit no reader sees any of it, and then all of it.
func TestStagedSessionAppearsWhole(t *testing.T) {
	runBackends(t, func(t *testing.T, b backend) {
		e := newEnv(t, b, ddbhistory.Config{})
		key := ddbhistory.Key{Owner: "alice", ID: "staged"}
		var want []agent.Message
		for i := range 60 {
			want = append(want, turn(i)...)
		}
		header := json.RawMessage(`{"any":"thing"}`)
		st, err := e.store.Stage(t.Context(), key, "tok", 0, want[:50], header)
		if err != nil {
			t.Fatal(err)
		}
		if st.Count != 50 || st.Title != "question 0" || string(st.Header) != string(header) || st.Last == nil || st.Last.Text() != want[49].Text() {
			t.Fatalf("staging after the first part: %+v", st)
		}
		// A part sent again is not written twice.
		if again, err := e.store.Stage(t.Context(), key, "tok", 0+30, want[30:50], nil); err != nil || again.Count != 50 {
			t.Errorf("a part sent again: %+v, %v", again, err)
		}
		if st, err = e.store.Stage(t.Context(), key, "tok", 50, want[50:120], nil); err != nil || st.Count != 120 {
			t.Fatalf("second part: %+v, %v", st, err)
		}
		if _, err := e.store.Load(t.Context(), key, ""); !errors.Is(err, ddbhistory.ErrNotFound) {
			t.Errorf("load before the commit: %v, want ErrNotFound", err)
		}
		if _, err := e.store.Stage(t.Context(), key, "other", 120, turn(999), nil); !errors.Is(err, ddbhistory.ErrNotFound) {
			t.Errorf("a part under another token: %v, want ErrNotFound", err)
		}
		last := heavyTurn("last", 10) // about 2.3 MB of tool results: in parts
		want = append(want, last...)
		sess := ddbhistory.NewSession(key)
		if err := e.store.Commit(t.Context(), sess, ddbhistory.Turn{Messages: last, Staging: st}); err != nil {
			t.Fatal(err)
		}
		checkStored(t, e.store, key, want, 0)
		if got := mustLoad(t, e.store, key, ""); got.Title != "question 0" || got.Version != 1 {
			t.Errorf("title %q, version %d", got.Title, got.Version)
		}
		if _, err := e.store.Staged(t.Context(), key, "tok"); !errors.Is(err, ddbhistory.ErrNotFound) {
			t.Errorf("the staging after its commit: %v, want ErrNotFound", err)
		}
		// A session, and another owner's claim on its id, refuse a staging.
		if _, err := e.store.Stage(t.Context(), key, "again", 0, want[:2], header); !errors.Is(err, ddbhistory.ErrConflict) {
			t.Errorf("staging onto a session: %v, want ErrConflict", err)
		}
		if _, err := e.store.Stage(t.Context(), ddbhistory.Key{Owner: "bob", ID: "staged"}, "bob", 0, want[:2], header); !errors.Is(err, ddbhistory.ErrIDTaken) {
			t.Errorf("staging under another owner's id: %v, want ErrIDTaken", err)
		}
		checkStored(t, e.store, key, want, 0)
	})
}

// TestStagingThatIsNeverCommitted leaves nothing a reader sees, and a
// session under its id starts as if it were not there.
func TestStagingThatIsNeverCommitted(t *testing.T) {
	runBackends(t, func(t *testing.T, b backend) {
		e := newEnv(t, b, ddbhistory.Config{})
		key := ddbhistory.Key{Owner: "alice", ID: "abandoned"}
		var staged []agent.Message
		for i := range 10 {
			staged = append(staged, turn(100+i)...)
		}
		if _, err := e.store.Stage(t.Context(), key, "tok", 0, staged, json.RawMessage(`{}`)); err != nil {
			t.Fatal(err)
		}
		if list, err := e.store.List(t.Context(), "alice", "", 10); err != nil || len(list.Sessions) != 0 {
			t.Errorf("listed: %+v, %v", list, err)
		}
		sess := ddbhistory.NewSession(key)
		if err := e.store.Commit(t.Context(), sess, ddbhistory.Turn{Messages: turn(0)}); err != nil {
			t.Fatal(err)
		}
		checkStored(t, e.store, key, turn(0), 0)
		if _, err := e.store.Staged(t.Context(), key, "tok"); !errors.Is(err, ddbhistory.ErrNotFound) {
			t.Errorf("the staging after a session took the id: %v", err)
		}
	})
}

// TestStagedPartThatFailsHalfWay: a part whose messages span several
// transactions, one message's items split between two, fails after its
// first transaction. The staging counts only whole messages, and the part
// sent again completes it.
func TestStagedPartThatFailsHalfWay(t *testing.T) {
	runBackends(t, func(t *testing.T, b backend) {
		e := newEnv(t, b, ddbhistory.Config{})
		key := ddbhistory.Key{Owner: "alice", ID: "split"}
		big := func(role agent.Role) agent.Message {
			// About 2 MB of JSON that barely compresses: several items.
			return agent.Message{Role: role, Content: []agent.ContentBlock{{Text: base64.StdEncoding.EncodeToString(randomBytes(1_500_000))}}}
		}
		msgs := []agent.Message{agent.UserText("q"), agent.AssistantText("a"), big(agent.RoleUser), big(agent.RoleAssistant), big(agent.RoleUser)}
		if _, err := e.store.Stage(t.Context(), key, "tok", 0, msgs[:2], json.RawMessage(`{}`)); err != nil {
			t.Fatal(err)
		}
		var mu sync.Mutex
		n := 0
		e.count.setFault(func(op string, _ []byte) *http.Response {
			mu.Lock()
			defer mu.Unlock()
			if op == "TransactWriteItems" {
				if n++; n >= 2 {
					return throttle()
				}
			}
			return nil
		})
		if _, err := e.store.Stage(t.Context(), key, "tok", 2, msgs[2:], nil); !errors.Is(err, ddbhistory.ErrThrottled) {
			t.Fatalf("the part, throttled after its first transaction: %v", err)
		}
		e.count.setFault(nil)
		st, err := e.store.Staged(t.Context(), key, "tok")
		if err != nil || st.Count < 2 || st.Count >= 5 || st.Last == nil || st.Last.Role != msgs[st.Count-1].Role {
			t.Fatalf("after the failure: %+v, %v", st, err)
		}
		if st, err = e.store.Stage(t.Context(), key, "tok", 2, msgs[2:], nil); err != nil || st.Count != 5 {
			t.Fatalf("the part again: %+v, %v", st, err)
		}
		if err := e.store.Commit(t.Context(), ddbhistory.NewSession(key), ddbhistory.Turn{Messages: []agent.Message{agent.AssistantText("end")}, Staging: st}); err != nil {
			t.Fatal(err)
		}
		checkStored(t, e.store, key, append(msgs, agent.AssistantText("end")), 0)
	})
}

// TestTranscriptSaysWhereItBegins: once a long-lived session's oldest
// messages expire, a transcript page says the index of its first message,
// so that a client can name a message by its stored index (to edit it).
func TestTranscriptSaysWhereItBegins(t *testing.T) {
	runBackends(t, func(t *testing.T, b backend) {
		e := newEnv(t, b, ddbhistory.Config{TTL: 48 * time.Hour})
		key := ddbhistory.Key{Owner: "alice", ID: "old"}
		sess := ddbhistory.NewSession(key)
		if err := e.store.Commit(t.Context(), sess, ddbhistory.Turn{Messages: turn(0)}); err != nil {
			t.Fatal(err)
		}
		e.now.Advance(36 * time.Hour)
		if err := e.store.Commit(t.Context(), sess, ddbhistory.Turn{Messages: turn(1)}); err != nil {
			t.Fatal(err)
		}
		e.now.Advance(36 * time.Hour) // turn 0's messages have expired, turn 1's not
		page, err := e.store.Transcript(t.Context(), key, "", 10)
		if err != nil {
			t.Fatal(err)
		}
		if page.First != 2 || len(page.Messages) != 2 || page.Messages[0].Text() != turn(1)[0].Text() {
			t.Errorf("first %d, %d messages", page.First, len(page.Messages))
		}
		if page, err = e.store.Transcript(t.Context(), key, ddbhistory.CursorAt(3), 10); err != nil || page.First != 3 {
			t.Errorf("a page from message 3: first %d, %v", page.First, err)
		}
	})
}

// TestStagedAgentInParts stages a sub-agent's conversation too large for
// one transaction, a message of several items among its messages: each
// transaction counts the messages it completes, so the staging's count
// never takes in a message that is not whole; the commit makes it
// visible whole. A header too large for the staging's reservation is
// refused before anything is written.
func TestStagedAgentInParts(t *testing.T) {
	runBackends(t, func(t *testing.T, b backend) {
		e := newEnv(t, b, ddbhistory.Config{})
		key := ddbhistory.Key{Owner: "alice", ID: "staged"}
		if _, err := e.store.Stage(t.Context(), key, "tok", 0, turn(0), json.RawMessage(`{}`)); err != nil {
			t.Fatal(err)
		}
		var want []agent.Message
		for i := range 49 {
			want = append(want, agentTurn(i)...)
		}
		// Message 98 takes three items, the first of which ends the first
		// transaction (98 messages, then it, and the condition check).
		big := agent.Message{Role: agent.RoleUser, Content: []agent.ContentBlock{agent.Text("look"), {Image: &agent.ImageBlock{Format: "png", Source: agent.Source{Bytes: randomBytes(1_000_000)}}}}}
		want = append(want, big, agent.AssistantText("seen"))
		for i := range 10 {
			want = append(want, agentTurn(100+i)...)
		}
		e.count.reset()
		if err := e.store.StageAgent(t.Context(), key, "tok", "reader", 0, want[:110]); err != nil {
			t.Fatal(err)
		}
		if n := e.count.reset().Requests; n != 2 {
			t.Errorf("110 messages, one of 1 MB, staged in %d requests, want 2 transactions", n)
		}
		if err := e.store.StageAgent(t.Context(), key, "tok", "reader", 110, want[110:]); err != nil {
			t.Fatal(err)
		}
		st, err := e.store.Staged(t.Context(), key, "tok")
		if err != nil || st.Agents["reader"].Count != 120 || st.Agents["reader"].Last.Text() != want[119].Text() {
			t.Fatalf("staged: %+v, %v", st, err)
		}
		sess := ddbhistory.NewSession(key)
		if err := e.store.Commit(t.Context(), sess, ddbhistory.Turn{Messages: turn(1), Staging: st, Agents: []ddbhistory.AgentTurn{{Name: "reader", First: 120}}}); err != nil {
			t.Fatal(err)
		}
		var got []agent.Message
		for cursor := "start"; cursor != ""; {
			if cursor == "start" {
				cursor = ""
			}
			page, err := e.store.AgentTranscript(t.Context(), key, "reader", cursor, 1000)
			if err != nil {
				t.Fatal(err)
			}
			got, cursor = append(got, page.Messages...), page.NextCursor
		}
		wantJSON, _ := json.Marshal(want)
		gotJSON, _ := json.Marshal(got)
		if string(wantJSON) != string(gotJSON) {
			t.Errorf("the reader's conversation: %d messages, %d bytes; want %d, %d", len(got), len(gotJSON), len(want), len(wantJSON))
		}

		other := ddbhistory.Key{Owner: "alice", ID: "too-big"}
		header, _ := json.Marshal(map[string]string{"state": base64.StdEncoding.EncodeToString(randomBytes(450_000))})
		var tooLarge *ddbhistory.TooLargeError
		if _, err := e.store.Stage(t.Context(), other, "tok", 0, turn(0), header); !errors.As(err, &tooLarge) {
			t.Errorf("a header of %d bytes: %v, want a *TooLargeError", len(header), err)
		}
		if n := countItems(t, e, "s#alice#too-big"); n != 0 {
			t.Errorf("%d items written for a refused staging", n)
		}
	})
}
