package turn_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/lambda-agent/lambda-agent/internal/agent"
	"github.com/lambda-agent/lambda-agent/internal/ddbhistory"
	"github.com/lambda-agent/lambda-agent/internal/turn"
)

// conversation is n plain turns: "question 0", "answer 0", and on.
func conversation(n int) []agent.Message {
	var msgs []agent.Message
	for i := range n {
		msgs = append(msgs, agent.UserText(fmt.Sprintf("question %d", i)), agent.AssistantText(fmt.Sprintf("answer %d", i)))
	}
	return msgs
}

// document is a session document of count messages, whose first are msgs,
// and whose window starts at message 2; next makes it the first page of an
// import in pages.
func document(msgs []agent.Message, count int, next string) *turn.Document {
	return &turn.Document{
		Format: turn.DocumentFormat, FormatVersion: turn.DocumentVersion, SessionID: "exported",
		MessageCount: count,
		State:        map[string]json.RawMessage{"memory": json.RawMessage(`{"colour": "teal"}`)},
		Window:       agent.WindowState{Removed: 2},
		NextCursor:   next,
		Messages:     msgs,
	}
}

// page is a later page of a session document.
func page(first int, msgs []agent.Message, next string) *turn.DocumentPage {
	return &turn.DocumentPage{Format: turn.DocumentFormat, FormatVersion: turn.DocumentVersion, SessionID: "exported", First: &first, NextCursor: next, Messages: msgs}
}

// checkImported fails the test unless session id holds msgs, with
// document's state, compacted, and window.
func checkImported(t *testing.T, store *fakeStore, id string, msgs []agent.Message) {
	t.Helper()
	st := store.session(t, id)
	if diff := cmp.Diff(msgs, st.messages); diff != "" {
		t.Errorf("the imported messages (-want +got):\n%s", diff)
	}
	if string(st.state["memory"]) != `{"colour":"teal"}` || st.window.Removed != 2 || st.title != "question 0" || st.version != 1 {
		t.Errorf("the imported session: state %s, window %+v, title %q, version %d", st.state, st.window, st.title, st.version)
	}
}

// TestImport imports a whole document as a new session, in one commit,
// with the idempotency of a turn; never over a session, the caller's or
// another owner's.
func TestImport(t *testing.T) {
	store, model := newFakeStore(), &fakeAgent{}
	svc, _ := turn.New(store, model)
	msgs := conversation(3)
	req := turn.Import{Request: turn.Request{Owner: owner, SessionID: "imp", IdempotencyKey: "i1", Fingerprint: "fp-i1"}, Document: document(msgs, 6, "")}
	out, err := svc.Import(t.Context(), req)
	if err != nil {
		t.Fatal(err)
	}
	if want := (turn.ImportAnswer{SessionID: "imp", MessageCount: 6}); out.Answer != want || !out.Answer.Complete() || out.Replayed {
		t.Errorf("the answer: %+v, replayed %v; want %+v", out.Answer, out.Replayed, want)
	}
	checkImported(t, store, "imp", msgs)
	if n := store.commitCount(); n != 1 {
		t.Errorf("%d commits, want 1", n)
	}

	again, err := svc.Import(t.Context(), req)
	if err != nil || !again.Replayed || again.Answer != out.Answer || store.commitCount() != 1 {
		t.Errorf("a retry: %v, %+v, %d commits; want the replay, and no commit", err, again, store.commitCount())
	}
	for _, who := range []string{owner, "bob"} {
		_, err := svc.Import(t.Context(), turn.Import{Request: turn.Request{Owner: who, SessionID: "imp"}, Document: document(msgs, 6, "")})
		var exists *turn.SessionExistsError
		if !errors.Is(err, turn.ErrSessionExists) || !errors.As(err, &exists) || exists.ID != "imp" {
			t.Errorf("an import of %s's over the session: %v, want a *SessionExistsError", who, err)
		}
	}
	bad := document(msgs, 5, "")
	var docErr *turn.DocumentError
	if _, err := svc.Import(t.Context(), turn.Import{Request: turn.Request{Owner: owner, SessionID: "bad"}, Document: bad}); !errors.As(err, &docErr) || docErr.Kind != turn.ErrInvalidDocument {
		t.Errorf("a document whose count is wrong: %v, want a *DocumentError", err)
	}
	if store.commitCount() != 1 || model.calls() != 0 {
		t.Errorf("the refused imports committed %d turns, ran %d", store.commitCount()-1, model.calls())
	}
	checkImported(t, store, "imp", msgs)

	// Without a session id, a retry finds the session its key named.
	keyed := turn.Import{Request: turn.Request{Owner: owner, IdempotencyKey: "i2", Fingerprint: "fp-i2"}, Document: document(msgs, 6, "")}
	first, err := svc.Import(t.Context(), keyed)
	if err != nil {
		t.Fatal(err)
	}
	if retry, err := svc.Import(t.Context(), keyed); err != nil || !retry.Replayed || retry.Answer.SessionID != first.Answer.SessionID {
		t.Errorf("a retry without a session id: %v, %+v; want the replay of %s", err, retry, first.Answer.SessionID)
	}
}

// TestImportWithPendingInterrupts: a document's pending interrupts come
// with it, and the session waits for them.
func TestImportWithPendingInterrupts(t *testing.T) {
	store, model := newFakeStore(), &fakeAgent{}
	svc, _ := turn.New(store, model)
	in := refund()
	msgs := append(conversation(1), agent.UserText("refund my order"), agent.Message{Role: agent.RoleAssistant, Content: []agent.ContentBlock{
		{ToolUse: &agent.ToolUseBlock{ToolUseID: "u1", Name: "refund", Input: in.Input}},
		{ToolUse: &agent.ToolUseBlock{ToolUseID: "kept", Name: "lookup", Input: json.RawMessage(`{}`)}},
	}})
	doc := document(msgs, 4, "")
	doc.Pending = &agent.Pending{Interrupts: []agent.Interrupt{in}, Results: []*agent.ToolResultBlock{agent.TextResult("kept", agent.ToolSuccess, "looked up")}}
	if _, err := svc.Import(t.Context(), turn.Import{Request: turn.Request{Owner: owner, SessionID: "s1"}, Document: doc}); err != nil {
		t.Fatal(err)
	}
	var pending *turn.PendingError
	if _, err := svc.Chat(t.Context(), chat("s1", "", "hello?")); !errors.As(err, &pending) || len(pending.Interrupts) != 1 || pending.Interrupts[0].ID != "u1" {
		t.Errorf("a message on the imported session: %v, want a *PendingError of u1", err)
	}
	out, err := svc.Chat(t.Context(), resume("s1", "", true))
	if err != nil {
		t.Fatalf("the resume of the imported interrupt: %v", err)
	}
	if diff := cmp.Diff([]agent.Message{results, final}, out.Answer.Messages); diff != "" || out.First != 4 || len(model.ran) != 1 {
		t.Errorf("the resume: first %d, ran %v (-want +got):\n%s", out.First, model.ran, diff)
	}
	if st := store.session(t, "s1"); len(st.messages) != 6 || st.pending != nil {
		t.Errorf("after the resume: %d messages, pending %+v; want 6, none", len(st.messages), st.pending)
	}
}

// TestImportInPages stages a document page by page, where no reader sees
// it, and the last page commits the session, which appears whole. A page
// sent again is not stored twice, one that does not follow the import is
// refused with where the import stands, and a token that names no import
// under way is ErrImportNotFound.
func TestImportInPages(t *testing.T) {
	store, model := newFakeStore(), &fakeAgent{}
	svc, _ := turn.New(store, model)
	msgs := conversation(6)[:10]
	out, err := svc.Import(t.Context(), turn.Import{Request: turn.Request{Owner: owner, SessionID: "paged"}, Document: document(msgs[:4], 10, "c1")})
	if err != nil {
		t.Fatal(err)
	}
	token := out.Answer.ImportToken
	if want := (turn.ImportAnswer{SessionID: "paged", ImportToken: token, Received: 4, MessageCount: 10}); out.Answer != want || token == "" || out.Answer.Complete() {
		t.Errorf("the first page's answer: %+v, want %+v", out.Answer, want)
	}
	invisible := func(when string) {
		t.Helper()
		if _, err := svc.Transcript(t.Context(), owner, "paged", "", 10); !errors.Is(err, turn.ErrNotFound) {
			t.Errorf("the transcript %s: %v, want ErrNotFound", when, err)
		}
		if list, err := svc.List(t.Context(), owner, "", 10); err != nil || len(list.Sessions) != 0 {
			t.Errorf("the list %s: %+v, %v; want none", when, list, err)
		}
	}
	invisible("after the first page")
	staged := func() int {
		t.Helper()
		st, err := store.Staged(t.Context(), ddbhistory.Key{Owner: owner, ID: "paged"}, token)
		if err != nil {
			t.Fatal(err)
		}
		return st.Count
	}
	send := func(p *turn.DocumentPage) (*turn.Outcome[turn.ImportAnswer], error) {
		return svc.ImportPage(t.Context(), turn.ImportPage{Request: turn.Request{Owner: owner, SessionID: "paged"}, Token: token, Page: p})
	}
	progress := func(what string, p *turn.DocumentPage, received int) {
		t.Helper()
		out, err := send(p)
		want := turn.ImportAnswer{SessionID: "paged", ImportToken: token, Received: received, MessageCount: 10}
		if err != nil || out.Answer != want {
			t.Fatalf("%s: %v, %+v; want %+v", what, err, out, want)
		}
		if n := staged(); n != received {
			t.Errorf("%s: %d messages staged, want %d", what, n, received)
		}
	}
	progress("the second page", page(4, msgs[4:7], "c2"), 7)
	progress("the second page, sent again", page(4, msgs[4:7], "c2"), 7)
	for _, p := range []struct {
		name string
		page *turn.DocumentPage
	}{
		{"a negative first", page(-1, msgs[:2], "x")},
		{"a first ahead of the import", page(8, msgs[8:], "")},
		{"a page behind that is not the last sent", page(2, msgs[2:5], "x")},
		{"the last page sent, cut short", page(4, msgs[4:6], "x")},
		{"another page where the last ends", page(4, conversation(6)[6:9], "x")},
		{"a last page short of message_count", page(7, msgs[7:9], "")},
		{"a page past message_count", page(7, conversation(6)[7:11], "x")},
	} {
		_, err := send(p.page)
		var docErr *turn.DocumentError
		if !errors.As(err, &docErr) || docErr.Kind != turn.ErrInvalidDocument {
			t.Errorf("%s: %v, want a *DocumentError", p.name, err)
		}
		if n := staged(); n != 7 {
			t.Errorf("%s: %d messages staged, want 7", p.name, n)
		}
	}
	// A page whose first part was stored goes on from there.
	progress("a page that overlaps the import's end", page(4, msgs[4:9], "c3"), 9)
	invisible("before the last page")

	out, err = send(page(9, msgs[9:], ""))
	if err != nil {
		t.Fatal(err)
	}
	if want := (turn.ImportAnswer{SessionID: "paged", MessageCount: 10}); out.Answer != want || !out.Answer.Complete() {
		t.Errorf("the last page's answer: %+v, want %+v", out.Answer, want)
	}
	checkImported(t, store, "paged", msgs)
	if tr, err := svc.Transcript(t.Context(), owner, "paged", "", 100); err != nil || len(tr.Messages) != 10 {
		t.Errorf("the transcript after the import: %v", err)
	}
	if _, err := send(page(9, msgs[9:], "")); !errors.Is(err, turn.ErrImportNotFound) {
		t.Errorf("the last page sent again: %v, want ErrImportNotFound", err)
	}
	if model.calls() != 0 || store.commitCount() != 1 {
		t.Errorf("the import ran %d turns and committed %d; want none and one", model.calls(), store.commitCount())
	}
}

// TestImportInPagesRefused: an import in pages takes no key; a first page
// sent again starts again, and the import it replaced is not found; an id
// in use is refused before anything is staged.
func TestImportInPagesRefused(t *testing.T) {
	store, model := newFakeStore(), &fakeAgent{}
	svc, _ := turn.New(store, model)
	msgs := conversation(3)
	first := func(who, id string) (*turn.Outcome[turn.ImportAnswer], error) {
		return svc.Import(t.Context(), turn.Import{Request: turn.Request{Owner: who, SessionID: id}, Document: document(msgs[:2], 6, "c")})
	}
	if _, err := svc.Import(t.Context(), turn.Import{Request: turn.Request{Owner: owner, SessionID: "p", IdempotencyKey: "k"}, Document: document(msgs[:2], 6, "c")}); !errors.Is(err, turn.ErrKeyOnPagedImport) {
		t.Errorf("a first page with a key: %v, want ErrKeyOnPagedImport", err)
	}
	old, err := first(owner, "p")
	if err != nil {
		t.Fatal(err)
	}
	restart, err := first(owner, "p")
	if err != nil || restart.Answer.ImportToken == old.Answer.ImportToken {
		t.Fatalf("the first page again: %v, %+v; want a new import", err, restart)
	}
	next := func(token, key string) error {
		_, err := svc.ImportPage(t.Context(), turn.ImportPage{Request: turn.Request{Owner: owner, SessionID: "p", IdempotencyKey: key}, Token: token, Page: page(2, msgs[2:4], "c")})
		return err
	}
	if err := next(old.Answer.ImportToken, ""); !errors.Is(err, turn.ErrImportNotFound) {
		t.Errorf("a page of the replaced import: %v, want ErrImportNotFound", err)
	}
	if err := next("unknown", ""); !errors.Is(err, turn.ErrImportNotFound) {
		t.Errorf("a page with an unknown token: %v, want ErrImportNotFound", err)
	}
	if err := next(restart.Answer.ImportToken, "k"); !errors.Is(err, turn.ErrKeyOnPagedImport) {
		t.Errorf("a page with a key: %v, want ErrKeyOnPagedImport", err)
	}
	if err := next(restart.Answer.ImportToken, ""); err != nil {
		t.Errorf("a page of the import under way: %v", err)
	}

	mustChat(t, svc, chat("s1", "", "hi"))
	for _, who := range []string{owner, "bob"} {
		if _, err := first(who, "s1"); !errors.Is(err, turn.ErrSessionExists) {
			t.Errorf("a paged import of %s's over a session: %v, want ErrSessionExists", who, err)
		}
	}
	if _, err := store.Staged(t.Context(), ddbhistory.Key{Owner: "bob", ID: "s1"}, "x"); !errors.Is(err, ddbhistory.ErrNotFound) {
		t.Errorf("bob's staging: %v", err)
	}
	if st := store.session(t, "s1"); len(st.messages) != 2 || st.version != 1 {
		t.Errorf("the session after the refused imports: %d messages, version %d", len(st.messages), st.version)
	}
}
