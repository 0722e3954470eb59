package ddbhistory_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/lambda-agent/lambda-agent/internal/agent"
	"github.com/lambda-agent/lambda-agent/internal/ddbhistory"
)

// agentTurn is a delegation's messages: the task, and the answer.
func agentTurn(i int) []agent.Message {
	return []agent.Message{agent.UserText(fmt.Sprintf("task %d", i)), agent.AssistantText(fmt.Sprintf("result %d", i))}
}

func TestAgentConversations(t *testing.T) {
	runBackends(t, func(t *testing.T, b backend) {
		e := newEnv(t, b, ddbhistory.Config{})
		sess := ddbhistory.NewSession(alice)
		if got, err := e.store.LoadAgent(t.Context(), sess, "researcher"); err != nil || got.Count != 0 || len(got.Conversation.Messages) != 0 {
			t.Fatalf("a new session's agent: %+v, %v", got, err)
		}
		state := map[string]json.RawMessage{"notes": json.RawMessage(`["a"]`)}
		if err := e.store.Commit(t.Context(), sess, ddbhistory.Turn{
			Messages: turn(0),
			Agents: []ddbhistory.AgentTurn{
				{Name: "researcher", Messages: agentTurn(0), State: state},
				{Name: "writer", Messages: agentTurn(100)},
			},
		}); err != nil {
			t.Fatal(err)
		}
		sess, err := e.store.Load(t.Context(), alice, "")
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(turn(0), sess.Conversation.Messages); diff != "" {
			t.Errorf("the main window holds the sub-agents' messages (-want +got):\n%s", diff)
		}
		got, err := e.store.LoadAgent(t.Context(), sess, "researcher")
		if err != nil {
			t.Fatal(err)
		}
		want := agent.Conversation{Messages: agentTurn(0), State: state}
		if diff := cmp.Diff(want, got.Conversation); diff != "" || got.Count != 2 {
			t.Errorf("researcher: count %d (-want +got):\n%s", got.Count, diff)
		}

		// The next delegation appends, and the window state says what is
		// loaded, as for the main agent.
		if err := e.store.Commit(t.Context(), sess, ddbhistory.Turn{
			Messages: turn(1),
			Agents:   []ddbhistory.AgentTurn{{Name: "researcher", First: got.Count, Messages: agentTurn(1), Window: agent.WindowState{Removed: 2, Summary: "task 0 done"}, State: state}},
		}); err != nil {
			t.Fatal(err)
		}
		got, err = e.store.LoadAgent(t.Context(), sess, "researcher")
		if err != nil {
			t.Fatal(err)
		}
		want = agent.Conversation{Messages: agentTurn(1), Window: agent.WindowState{Removed: 2, Summary: "task 0 done"}, State: state}
		if diff := cmp.Diff(want, got.Conversation); diff != "" || got.Count != 4 {
			t.Errorf("researcher after its second turn: count %d (-want +got):\n%s", got.Count, diff)
		}
		writer, err := e.store.LoadAgent(t.Context(), sess, "writer")
		if err != nil || writer.Count != 2 || writer.Conversation.Messages[0].Text() != "task 100" {
			t.Errorf("writer, which the second turn left alone: %+v, %v", writer, err)
		}
		if none, err := e.store.LoadAgent(t.Context(), sess, "critic"); err != nil || none.Count != 0 {
			t.Errorf("an agent never delegated to: %+v, %v", none, err)
		}
		for _, name := range []string{"main", "a#b", "", "with space"} {
			if _, err := e.store.LoadAgent(t.Context(), sess, name); !errors.Is(err, ddbhistory.ErrInvalid) {
				t.Errorf("LoadAgent(%q) = %v, want ErrInvalid", name, err)
			}
		}
		err = e.store.Commit(t.Context(), sess, ddbhistory.Turn{Messages: turn(2), Agents: []ddbhistory.AgentTurn{{Name: "main", Messages: agentTurn(2)}}})
		if !errors.Is(err, ddbhistory.ErrInvalid) {
			t.Errorf("a commit to an agent named main: %v, want ErrInvalid", err)
		}
	})
}

// TestWindowQueryIgnoresAgents holds that a session's sub-agents cost its
// main window's load nothing: the window's Query, over m# to meta, reads
// exactly the bytes it reads from a session without them, however long
// their conversations.
func TestWindowQueryIgnoresAgents(t *testing.T) {
	runBackends(t, func(t *testing.T, b backend) {
		e := newEnv(t, b, ddbhistory.Config{WindowHint: 10})
		plain, withAgents := ddbhistory.Key{Owner: "alice", ID: "chat-a"}, ddbhistory.Key{Owner: "alice", ID: "chat-b"}
		for _, key := range []ddbhistory.Key{plain, withAgents} {
			sess := ddbhistory.NewSession(key)
			agentCount := 0
			for i := range 6 {
				var agents []ddbhistory.AgentTurn
				if key == withAgents {
					// More agent messages than the hint, under names that
					// sort before and after "m#" and "meta" once prefixed.
					var msgs []agent.Message
					for j := range 10 {
						msgs = append(msgs, agentTurn(10*i+j)...)
					}
					for _, name := range []string{"a", "m", "meta", "zz"} {
						agents = append(agents, ddbhistory.AgentTurn{Name: name, First: agentCount, Messages: msgs})
					}
					agentCount += len(msgs)
				}
				if err := e.store.Commit(t.Context(), sess, ddbhistory.Turn{Messages: sizedTurn(i), Window: agent.WindowState{Removed: max(0, sess.Count-8)}, Agents: agents}); err != nil {
					t.Fatal(err)
				}
			}
		}
		// The two sessions' items differ only in their random incarnations,
		// which are of one length.
		e.now.Advance(time.Second)
		load := func(key ddbhistory.Key) (*ddbhistory.Session, int, int) {
			e.count.reset()
			sess, err := e.store.Load(t.Context(), key, "")
			if err != nil {
				t.Fatal(err)
			}
			u := e.count.reset()
			return sess, u.Requests, u.Received
		}
		a, aRequests, aBytes := load(plain)
		b2, bRequests, bBytes := load(withAgents)
		if aRequests != 1 || bRequests != 1 || aBytes != bBytes {
			t.Errorf("loading the window: %d requests and %d bytes without agents, %d and %d with", aRequests, aBytes, bRequests, bBytes)
		}
		if diff := cmp.Diff(a.Conversation, b2.Conversation); diff != "" || a.Count != b2.Count {
			t.Errorf("the windows differ (-plain +with agents):\n%s", diff)
		}
	})
}

func TestAgentConversationOfALaterCommit(t *testing.T) {
	runBackends(t, func(t *testing.T, b backend) {
		e := newEnv(t, b, ddbhistory.Config{})
		sess := ddbhistory.NewSession(alice)
		if err := e.store.Commit(t.Context(), sess, ddbhistory.Turn{Messages: turn(0), Agents: []ddbhistory.AgentTurn{{Name: "researcher", Messages: agentTurn(0)}}}); err != nil {
			t.Fatal(err)
		}
		first, err := e.store.Load(t.Context(), alice, "")
		if err != nil {
			t.Fatal(err)
		}
		second, err := e.store.Load(t.Context(), alice, "")
		if err != nil {
			t.Fatal(err)
		}
		if err := e.store.Commit(t.Context(), second, ddbhistory.Turn{Messages: turn(1), Agents: []ddbhistory.AgentTurn{{Name: "researcher", First: 2, Messages: agentTurn(1)}}}); err != nil {
			t.Fatal(err)
		}
		// The first turn delegates after the second committed: its view of
		// the agent would be newer than its session's, and it cannot commit.
		if _, err := e.store.LoadAgent(t.Context(), first, "researcher"); !errors.Is(err, ddbhistory.ErrConflict) {
			t.Errorf("LoadAgent after a later commit: %v, want ErrConflict", err)
		}
		err = e.store.Commit(t.Context(), first, ddbhistory.Turn{Messages: turn(2), Agents: []ddbhistory.AgentTurn{{Name: "researcher", First: 2, Messages: agentTurn(2)}}})
		if !errors.Is(err, ddbhistory.ErrConflict) {
			t.Fatalf("the losing commit: %v, want ErrConflict", err)
		}
		got, err := e.store.LoadAgent(t.Context(), second, "researcher")
		if err != nil || got.Count != 4 || got.Conversation.Messages[3].Text() != "result 1" {
			t.Errorf("after the lost race: %+v, %v", got, err)
		}
	})
}

// TestBigAgentTurn: a turn whose sub-agents' messages do not fit one
// transaction is stored in parts, whole or not at all.
func TestBigAgentTurn(t *testing.T) {
	runBackends(t, func(t *testing.T, b backend) {
		e := newEnv(t, b, ddbhistory.Config{})
		sess := fill(t, e.store, alice, 4, 40)
		var many []agent.Message
		for i := range 60 {
			many = append(many, agentTurn(i)...)
		}
		big := []agent.Message{
			{Role: agent.RoleUser, Content: []agent.ContentBlock{agent.Text("look"), {Image: &agent.ImageBlock{Format: "png", Source: agent.Source{Bytes: randomBytes(3_000_000)}}}}},
			agent.AssistantText("seen"),
		}
		agents := []ddbhistory.AgentTurn{{Name: "reader", Messages: many}, {Name: "looker", Messages: big}}

		// A commit that loses its race in the last transaction stores
		// nothing of any agent.
		stale := *sess
		if err := e.store.Commit(t.Context(), sess, ddbhistory.Turn{Messages: turn(7)}); err != nil {
			t.Fatal(err)
		}
		if err := e.store.Commit(t.Context(), &stale, ddbhistory.Turn{Messages: turn(8), Agents: agents}); !errors.Is(err, ddbhistory.ErrConflict) {
			t.Fatalf("a stale big commit: %v, want ErrConflict", err)
		}
		for _, name := range []string{"reader", "looker"} {
			if got, err := e.store.LoadAgent(t.Context(), sess, name); err != nil || got.Count != 0 {
				t.Errorf("%s after the lost commit: %+v, %v", name, got, err)
			}
		}

		e.count.reset()
		if err := e.store.Commit(t.Context(), sess, ddbhistory.Turn{Messages: turn(9), Agents: agents}); err != nil {
			t.Fatal(err)
		}
		if n := e.count.reset().Requests; n < 3 {
			t.Errorf("a commit of 120 agent messages and a 3 MB image in %d requests: it should not fit one", n)
		}
		reader, err := e.store.LoadAgent(t.Context(), sess, "reader")
		if err != nil || reader.Count != 120 || len(reader.Conversation.Messages) != 120 {
			t.Fatalf("reader: %d stored, %d loaded, %v", reader.Count, len(reader.Conversation.Messages), err)
		}
		looker, err := e.store.LoadAgent(t.Context(), sess, "looker")
		if err != nil {
			t.Fatal(err)
		}
		wantJSON, _ := json.Marshal(big)
		gotJSON, _ := json.Marshal(looker.Conversation.Messages)
		if !bytes.Equal(wantJSON, gotJSON) {
			t.Errorf("looker's big message did not round-trip: %d bytes, want %d", len(gotJSON), len(wantJSON))
		}

		if err := e.store.Delete(t.Context(), alice); err != nil {
			t.Fatal(err)
		}
		if n := countItems(t, e, "s#alice#chat-1"); n != 0 {
			t.Errorf("%d items left behind by Delete, sub-agents' among them", n)
		}
	})
}

func TestAgentConversationExpires(t *testing.T) {
	runBackends(t, func(t *testing.T, b backend) {
		e := newEnv(t, b, ddbhistory.Config{TTL: time.Hour})
		sess := ddbhistory.NewSession(alice)
		if err := e.store.Commit(t.Context(), sess, ddbhistory.Turn{Messages: turn(0), Agents: []ddbhistory.AgentTurn{{Name: "researcher", Messages: agentTurn(0)}}}); err != nil {
			t.Fatal(err)
		}
		// The main conversation lives on; the agent's was not written since.
		for i := range 3 {
			e.now.Advance(30 * time.Minute)
			if err := e.store.Commit(t.Context(), sess, ddbhistory.Turn{Messages: turn(i + 1)}); err != nil {
				t.Fatal(err)
			}
		}
		got, err := e.store.LoadAgent(t.Context(), sess, "researcher")
		if err != nil || got.Count != 0 || len(got.Conversation.Messages) != 0 {
			t.Errorf("an expired agent conversation: %+v, %v; want an empty one", got, err)
		}
	})
}

// TestAgentTranscript: a sub-agent's transcript reads in pages, as the
// main agent's does, with the same bounds (a limit, and MaxPageBytes of
// message JSON), its own count, window and state, and the session item
// beside them; a sub-agent with nothing stored has an empty transcript;
// only the owner of a live session reads it.
func TestAgentTranscript(t *testing.T) {
	runBackends(t, func(t *testing.T, b backend) {
		e := newEnv(t, b, ddbhistory.Config{})
		sess := ddbhistory.NewSession(alice)
		var msgs []agent.Message
		for i := range 6 {
			msgs = append(msgs, agentTurn(i)...)
		}
		// Messages of 1.5 MB of JSON: the page from 10 ends before the third
		// of them, within MaxPageBytes (4 MB), with 4 messages of its 5.
		huge := strings.Repeat("x", 1_500_000)
		msgs = append(msgs, agent.UserText(huge), agent.AssistantText(huge), agent.UserText(huge), agent.AssistantText("done"))
		state := map[string]json.RawMessage{"notes": json.RawMessage(`["a"]`)}
		window := agent.WindowState{Removed: 4, Summary: "two tasks"}
		if err := e.store.Commit(t.Context(), sess, ddbhistory.Turn{Messages: turn(0), Agents: []ddbhistory.AgentTurn{
			{Name: "researcher", Messages: msgs, Window: window, State: state},
		}}); err != nil {
			t.Fatal(err)
		}
		var got []agent.Message
		cursor := ""
		var firsts []int
		for pages := 0; pages == 0 || cursor != ""; pages++ {
			if pages > 5 {
				t.Fatal("too many pages")
			}
			page, err := e.store.AgentTranscript(t.Context(), alice, "researcher", cursor, 5)
			if err != nil {
				t.Fatal(err)
			}
			a := page.Agent
			if a == nil || a.Name != "researcher" || a.Count != 16 || !cmp.Equal(window, a.Conversation.Window) || !cmp.Equal(state, a.Conversation.State) || a.Conversation.Messages != nil {
				t.Errorf("page %d: the agent's conversation %+v", pages, a)
			}
			if ps := page.Session; ps.Title != "question 0" || ps.Count != 2 {
				t.Errorf("page %d: the session: title %q, count %d", pages, ps.Title, ps.Count)
			}
			firsts = append(firsts, page.First)
			got = append(got, page.Messages...)
			cursor = page.NextCursor
		}
		if diff := cmp.Diff([]int{0, 5, 10, 14}, firsts); diff != "" {
			t.Errorf("pages of 5, each within MaxPageBytes, start at (-want +got):\n%s", diff)
		}
		if len(got) != len(msgs) || got[5].Text() != msgs[5].Text() || got[15].Text() != "done" {
			t.Errorf("the pages hold %d messages, want %d", len(got), len(msgs))
		}
		// The main transcript is the main agent's alone.
		if page, err := e.store.Transcript(t.Context(), alice, "", 100); err != nil || len(page.Messages) != 2 || page.Agent != nil {
			t.Errorf("the main transcript: %+v, %v", page, err)
		}

		if page, err := e.store.AgentTranscript(t.Context(), alice, "writer", "", 10); err != nil || len(page.Messages) != 0 || page.Agent.Count != 0 || page.NextCursor != "" || page.Session.Title != "question 0" {
			t.Errorf("an agent with nothing stored: %+v, %v", page, err)
		}
		for _, key := range []ddbhistory.Key{{Owner: "bob", ID: alice.ID}, {Owner: alice.Owner, ID: "none"}} {
			if _, err := e.store.AgentTranscript(t.Context(), key, "researcher", "", 10); !errors.Is(err, ddbhistory.ErrNotFound) {
				t.Errorf("%+v: %v, want ErrNotFound", key, err)
			}
		}
		for _, name := range []string{"main", "a#b", ""} {
			if _, err := e.store.AgentTranscript(t.Context(), alice, name, "", 10); !errors.Is(err, ddbhistory.ErrInvalid) {
				t.Errorf("AgentTranscript(%q): %v, want ErrInvalid", name, err)
			}
		}
		if _, err := e.store.AgentTranscript(t.Context(), alice, "researcher", "", 0); !errors.Is(err, ddbhistory.ErrInvalid) {
			t.Errorf("limit 0: %v, want ErrInvalid", err)
		}
		if err := e.store.Delete(t.Context(), alice); err != nil {
			t.Fatal(err)
		}
		if _, err := e.store.AgentTranscript(t.Context(), alice, "researcher", "", 10); !errors.Is(err, ddbhistory.ErrNotFound) {
			t.Errorf("after the delete: %v, want ErrNotFound", err)
		}
	})
}

// TestAgentTranscriptOfOneVersion: a page of a sub-agent's transcript
// whose conversation item a commit wrote after its session item was read
// is read again, so that the page's session and conversation are of one
// version of the session, as an export's pages need.
func TestAgentTranscriptOfOneVersion(t *testing.T) {
	runBackends(t, func(t *testing.T, b backend) {
		e := newEnv(t, b, ddbhistory.Config{})
		sess := ddbhistory.NewSession(alice)
		if err := e.store.Commit(t.Context(), sess, ddbhistory.Turn{Messages: turn(0), Agents: []ddbhistory.AgentTurn{{Name: "researcher", Messages: agentTurn(0)}}}); err != nil {
			t.Fatal(err)
		}
		// The first read of the conversation's item waits until a commit
		// has written it again: the session item was read before.
		reached, release := make(chan struct{}), make(chan struct{})
		var once sync.Once
		e.count.setFault(func(op string, body []byte) *http.Response {
			if op == "GetItem" && bytes.Contains(body, []byte("a#researcher#meta")) {
				once.Do(func() {
					close(reached)
					<-release
				})
			}
			return nil
		})
		type result struct {
			page *ddbhistory.Page
			err  error
		}
		done := make(chan result, 1)
		go func() {
			page, err := e.store.AgentTranscript(context.Background(), alice, "researcher", "", 100)
			done <- result{page, err}
		}()
		<-reached
		if err := e.store.Commit(t.Context(), sess, ddbhistory.Turn{Messages: turn(1), Agents: []ddbhistory.AgentTurn{{Name: "researcher", First: 2, Messages: agentTurn(1)}}}); err != nil {
			t.Fatal(err)
		}
		close(release)
		r := <-done
		e.count.setFault(nil)
		if r.err != nil {
			t.Fatal(r.err)
		}
		// The two items are of one version. The page's messages may end
		// early, where a query that ran beside the commit stopped seeing
		// them; its cursor then names the next, which the next page holds.
		got := len(r.page.Messages)
		if v, n := r.page.Session.Version, r.page.Agent.Count; v != 2 || n != 4 || got == 0 {
			t.Fatalf("the page: session version %d, agent count %d, %d messages; want 2, 4: of one version", v, n, got)
		}
		if got < 4 {
			if r.page.NextCursor != ddbhistory.CursorAt(got) {
				t.Fatalf("a page of %d messages goes on at %q, want at %d", got, r.page.NextCursor, got)
			}
			next, err := e.store.AgentTranscript(t.Context(), alice, "researcher", r.page.NextCursor, 100)
			if err != nil || got+len(next.Messages) != 4 || next.NextCursor != "" {
				t.Errorf("the next page: %v, %d messages, cursor %q; want the other %d", err, len(next.Messages), next.NextCursor, 4-got)
			}
		}
	})
}
