package reliability_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/lambda-agent/lambda-agent/internal/agent"
	"github.com/lambda-agent/lambda-agent/internal/httpapi"
	"github.com/lambda-agent/lambda-agent/internal/testkit/conversetest"
	"github.com/lambda-agent/lambda-agent/internal/turn"
)

// sessionDocument is a valid session document of turns turns, whose texts
// start with tag: a question and an answer, with a calculator use and its
// result in every fifth turn, or in every turn when resultBytes is not 0,
// each result then resultBytes of noise.
func sessionDocument(tag string, turns, resultBytes int) httpapi.SessionDocument {
	var msgs []agent.Message
	for k := range turns {
		msgs = append(msgs, agent.UserText(fmt.Sprintf("%s question %d", tag, k)))
		if resultBytes > 0 || k%5 == 4 {
			id := fmt.Sprintf("%s-u%d", tag, k)
			result := fmt.Sprint(k + 1)
			if resultBytes > 0 {
				result = noise(uint64(k), resultBytes)
			}
			msgs = append(msgs,
				agent.Message{Role: agent.RoleAssistant, Content: []agent.ContentBlock{{ToolUse: &agent.ToolUseBlock{ToolUseID: id, Name: "calculator", Input: json.RawMessage(fmt.Sprintf(`{"expression":"%d+1"}`, k))}}}},
				agent.Message{Role: agent.RoleUser, Content: []agent.ContentBlock{{ToolResult: agent.TextResult(id, agent.ToolSuccess, result)}}},
			)
		}
		msgs = append(msgs, agent.AssistantText(fmt.Sprintf("%s answer %d", tag, k)))
	}
	return httpapi.SessionDocument{
		Format: httpapi.DocumentFormat, FormatVersion: httpapi.DocumentVersion, SessionID: "elsewhere-" + tag,
		MessageCount: len(msgs), Messages: msgs,
		State: map[string]json.RawMessage{"memory:tag": json.RawMessage(fmt.Sprintf("%q", tag))},
	}
}

// noise is n bytes of text that flate, which the store compresses
// messages with, cannot shrink much, and that JSON carries unescaped.
func noise(seed uint64, n int) string {
	const alphabet = " !#$%'()*+,-./0123456789:;=?@ABCDEFGHIJKLMNOPQRSTUVWXYZ[]^_`abcdefghijklmnopqrstuvwxyz{|}~"
	rng := newRand(seed)
	b := make([]byte, n)
	for i := range b {
		b[i] = alphabet[rng.IntN(len(alphabet))]
	}
	return string(b)
}

// importBody is the body of POST /sessions/import of doc, under id unless
// it is "".
func importBody(doc httpapi.SessionDocument, id string) httpapi.ImportRequest {
	in := httpapi.ImportRequest{SessionDocument: doc}
	if id != "" {
		in.NewSessionID = &id
	}
	return in
}

// importCall is an import of doc by owner, under id unless it is "".
func importCall(owner string, doc httpapi.SessionDocument, id string) request {
	return call("POST", "/sessions/import", owner, importBody(doc, id))
}

// exportCall is a page of owner's export of session id.
func exportCall(owner, id, cursor string) request {
	path := "/sessions/" + id + "/export"
	if cursor != "" {
		path += "?cursor=" + url.QueryEscape(cursor)
	}
	return call("GET", path, owner, nil)
}

// exported is owner's export of session id, its pages put together, or
// the refusal of its first page.
func (s *system) exported(t *testing.T, owner, id string) (*httpapi.SessionDocument, reply) {
	t.Helper()
	r := s.serve(t, exportCall(owner, id, ""), 30*time.Second)
	if r.status != 200 {
		return nil, r
	}
	var doc httpapi.SessionDocument
	if err := json.Unmarshal([]byte(r.raw), &doc); err != nil {
		t.Fatalf("export %s: %v", id, err)
	}
	for cursor := doc.NextCursor; cursor != ""; {
		p := s.serve(t, exportCall(owner, id, cursor), 30*time.Second)
		var page httpapi.SessionDocumentPage
		if err := json.Unmarshal([]byte(p.raw), &page); p.status != 200 || err != nil {
			t.Fatalf("export %s, the page after %d messages: %d %s", id, len(doc.Messages), p.status, p.raw)
		}
		doc.Messages = append(doc.Messages, page.Messages...)
		cursor = page.NextCursor
	}
	doc.NextCursor = ""
	return &doc, r
}

// documentDiff describes how the export got differs from the imported
// document want in what an import carries over, or is "" when it does not.
func documentDiff(want httpapi.SessionDocument, got *httpapi.SessionDocument) string {
	if got == nil {
		return "no session"
	}
	return cmp.Diff(want, *got, cmpopts.EquateEmpty(),
		cmpopts.IgnoreFields(httpapi.SessionDocument{}, "SessionID", "Title", "CreatedAt", "UpdatedAt", "ExpiresAt", "NextCursor"))
}

// meetAtFirstWrite holds the first write of each of n requests at
// DynamoDB until all n have reached theirs, for at most wait: requests that
// meet have all loaded the session before any of them writes. A request's
// writes are sequential, so the first n writes are n requests'. It returns
// whether they met.
func meetAtFirstWrite(s *system, n int, wait time.Duration) (met func() bool) {
	var arrived atomic.Int32
	all := make(chan struct{})
	s.faults.setHold(func(op string) {
		if op != "PutItem" && op != "UpdateItem" && op != "TransactWriteItems" {
			return
		}
		switch k := int(arrived.Add(1)); {
		case k == n:
			close(all)
		case k < n:
			select {
			case <-all:
			case <-time.After(wait):
			}
		}
	})
	return func() bool { return int(arrived.Load()) >= n }
}

// TestImportsRacing races two imports of different documents under one
// new_session_id, small ones and ones that are written in parts, and an
// import against a chat turn that creates the same id. Exactly one wins:
// the other import gets 409 session_exists, and the session is the
// winner's, exactly, never a mix.
func TestImportsRacing(t *testing.T) {
	s := newSystem(t, nil)
	var delay atomic.Int64
	s.Model.Responder = func(*conversetest.Request) conversetest.Reply {
		return conversetest.Text("noted").WithDelay(time.Duration(delay.Load()))
	}
	rng := newRand(23)
	lost := 0
	sizes := []struct {
		name  string
		turns [2]int
	}{
		{"small", [2]int{3, 4}},
		{"large", [2]int{80, 90}}, // 192 and 216 messages: more than a transaction holds
		{"mixed", [2]int{3, 90}},
	}
	const rounds = 12
	met, wins := 0, [2]int{}
	for round := range rounds {
		size := sizes[round%len(sizes)]
		id := fmt.Sprintf("race-%d", round)
		var docs [2]httpapi.SessionDocument
		for i := range docs {
			docs[i] = sessionDocument(fmt.Sprintf("r%d-%c", round, 'a'+i), size.turns[i], 0)
		}
		held := round%2 == 0
		var together func() bool
		if held {
			together = meetAtFirstWrite(s, 2, 2*time.Second)
		}
		var after time.Duration // drawn here: rng is not safe for goroutines
		if !held {
			after = time.Duration(rng.IntN(3000)) * time.Microsecond
		}
		var got [2]reply
		var wg sync.WaitGroup
		for i := range docs {
			wg.Go(func() {
				if i == 1 {
					time.Sleep(after)
				}
				got[i] = s.serve(t, importCall("alice", docs[i], id), 30*time.Second)
			})
		}
		wg.Wait()
		s.faults.setHold(nil)
		if held && together() {
			met++
		}
		winner := -1
		for i, r := range got {
			switch {
			case r.status == 201 && winner == -1:
				winner = i
			case r.status == 409 && r.code() == "session_exists":
			default:
				lost++
				t.Errorf("round %d (%s): import %d: %d %s", round, size.name, i, r.status, r.raw)
			}
		}
		if winner == -1 || got[1-winner].status != 409 {
			lost++
			t.Errorf("round %d (%s): answers %d and %d; want one 201 and one 409", round, size.name, got[0].status, got[1].status)
			continue
		}
		wins[winner]++
		doc, r := s.exported(t, "alice", id)
		if diff := documentDiff(docs[winner], doc); diff != "" {
			lost++
			t.Errorf("round %d (%s): the session is not the winner's document (%d %s):\n%s", round, size.name, r.status, r.raw[:min(len(r.raw), 200)], diff)
		}
		validHistory(t, s.stored(t, "alice", id).messages)
	}

	// An import against a chat turn that creates the id.
	const chats = 10
	outcomes := map[string]int{}
	for round := range chats {
		id := fmt.Sprintf("race-chat-%d", round)
		doc := sessionDocument(fmt.Sprintf("c%d", round), 3, 0)
		held := round%2 == 0
		delay.Store(int64(rng.IntN(10)) * int64(time.Millisecond))
		if held {
			meetAtFirstWrite(s, 2, 2*time.Second)
		}
		var after time.Duration
		if !held {
			after = time.Duration(rng.IntN(12)) * time.Millisecond
		}
		var imp, turn reply
		var wg sync.WaitGroup
		wg.Go(func() { turn = s.chat(t, "alice", id, "hello") })
		wg.Go(func() {
			time.Sleep(after)
			imp = s.serve(t, importCall("alice", doc, id), 30*time.Second)
		})
		wg.Wait()
		s.faults.setHold(nil)
		st := s.stored(t, "alice", id)
		if st == nil {
			lost++
			t.Errorf("round %d: no session after a turn (%d) and an import (%d)", round, turn.status, imp.status)
			continue
		}
		var want []agent.Message
		switch {
		case imp.status == 201 && turn.status == 409 && turn.code() == "conflict":
			outcomes["the import won"]++
			want = doc.Messages
		case turn.status == 200 && imp.status == 409 && imp.code() == "session_exists":
			outcomes["the turn won"]++
			want = []agent.Message{agent.UserText("hello"), agent.AssistantText("noted")}
		case imp.status == 201 && turn.status == 200 && !held:
			// The import landed before the turn loaded: the turn goes on
			// from it.
			outcomes["the turn followed the import"]++
			want = append(append([]agent.Message(nil), doc.Messages...), agent.UserText("hello"), agent.AssistantText("noted"))
		default:
			lost++
			t.Errorf("round %d: the turn %d %s, the import %d %s", round, turn.status, turn.raw, imp.status, imp.raw)
			continue
		}
		if diff := cmp.Diff(said(want), said(st.messages)); diff != "" {
			lost++
			t.Errorf("round %d: the session is not the winner's (-want +got):\n%s", round, diff)
		}
		validHistory(t, st.messages)
	}
	report(t, "Two imports under one new_session_id, or an import and a turn creating the id, racing: exactly one creates the session, the other import gets 409 session_exists, and the session is exactly the winner's",
		fmt.Sprintf("%d races of two imports (small ones, ones of 192 and 216 messages written in parts, and one of each; %d held until both were about to write), won %d and %d; %d races of an import and a turn: %d won by the import, %d by the turn, %d with the turn after the import",
			rounds, met, wins[0], wins[1], chats, outcomes["the import won"], outcomes["the turn won"], outcomes["the turn followed the import"]), lost)
}

// TestImportRetriedWithItsKey sends an import again with its
// Idempotency-Key, one after another and at once: one session is created,
// and every answer is the first, replayed. The key with another document,
// or under another id, is 422 and creates nothing.
func TestImportRetriedWithItsKey(t *testing.T) {
	s := newSystem(t, nil)
	lost := 0
	sessions := func() int {
		t.Helper()
		r := s.serve(t, call("GET", "/sessions?limit=100", "alice", nil), 30*time.Second)
		var list struct {
			Sessions []struct {
				ID string `json:"session_id"`
			} `json:"sessions"`
		}
		if err := json.Unmarshal([]byte(r.raw), &list); r.status != 200 || err != nil {
			t.Fatalf("GET /sessions: %d %s", r.status, r.raw)
		}
		return len(list.Sessions)
	}

	// One after another, with the id derived from the key.
	doc := sessionDocument("keyed", 4, 0)
	first := s.serve(t, importCall("alice", doc, "").withKey("imp-1"), 30*time.Second)
	if first.status != 201 || first.headers.Get("Idempotent-Replayed") != "" {
		t.Fatalf("the import: %d %s", first.status, first.raw)
	}
	var a turn.ImportAnswer
	_ = json.Unmarshal([]byte(first.raw), &a)
	const retries = 5
	for range retries {
		again := s.serve(t, importCall("alice", doc, "").withKey("imp-1"), 30*time.Second)
		if again.status != 201 || again.raw != first.raw || again.headers.Get("Idempotent-Replayed") != "true" {
			lost++
			t.Errorf("retry: %d %s (replayed %q)", again.status, again.raw, again.headers.Get("Idempotent-Replayed"))
		}
	}

	// At once, and spread over the time one import takes, under a
	// new_session_id, with DynamoDB slow enough for the requests to
	// overlap. A request that finds the key held gets 409 in_progress,
	// which says to retry shortly.
	const together = 6
	named := sessionDocument("named", 90, 0) // 216 messages, in parts
	s.faults.setHold(func(op string) {
		if op == "TransactWriteItems" || op == "PutItem" {
			time.Sleep(10 * time.Millisecond)
		}
	})
	rng := newRand(29)
	fresh, replayed, inProgress := 0, 0, 0
	for w, spread := range []int{0, 150} {
		id, key := fmt.Sprintf("named-%d", w), fmt.Sprintf("imp-%d", w+2)
		var answers [together]reply
		var wg sync.WaitGroup
		for i := range together {
			var after time.Duration // drawn here: rng is not safe for goroutines
			if spread > 0 {
				after = time.Duration(rng.IntN(spread)) * time.Millisecond
			}
			wg.Go(func() {
				time.Sleep(after)
				answers[i] = s.serve(t, importCall("alice", named, id).withKey(key), 30*time.Second)
			})
		}
		wg.Wait()
		created := 0
		var body string
		for _, r := range answers {
			switch {
			case r.status == 201 && r.headers.Get("Idempotent-Replayed") == "true":
				replayed++
			case r.status == 201:
				created++
			case r.status == 409 && r.code() == "in_progress":
				inProgress++
				continue
			default:
				lost++
				t.Errorf("%s, one of %d: %d %s", id, together, r.status, r.raw)
				continue
			}
			if body == "" {
				body = r.raw
			} else if r.raw != body {
				lost++
				t.Errorf("%s: the answers differ: %s and %s", id, body, r.raw)
			}
		}
		fresh += created
		last := s.serve(t, importCall("alice", named, id).withKey(key), 30*time.Second)
		if created != 1 || last.status != 201 || last.headers.Get("Idempotent-Replayed") != "true" || last.raw != body {
			lost++
			t.Errorf("%s: %d of %d created it; the retry after: %d %s", id, created, together, last.status, last.raw)
		}
		if doc, _ := s.exported(t, "alice", id); documentDiff(named, doc) != "" {
			lost++
			t.Errorf("%s is not the document: %s", id, documentDiff(named, doc))
		}
	}
	s.faults.setHold(nil)

	// The key with something else: 422, and nothing more stored.
	n := sessions()
	for _, c := range []request{
		importCall("alice", sessionDocument("other", 4, 0), "").withKey("imp-1"),
		importCall("alice", doc, "elsewhere").withKey("imp-1"),
		importCall("alice", doc, "").withKey("imp-2"),
	} {
		if r := s.serve(t, c, 30*time.Second); r.status != 422 || r.code() != "idempotency_key_reused" {
			lost++
			t.Errorf("the key with another import: %d %s", r.status, r.raw)
		}
	}
	if got := sessions(); got != n || n != 3 {
		lost++
		t.Errorf("alice has %d sessions, then %d; want 3: one per key", n, got)
	}
	if st := s.stored(t, "alice", a.SessionID); st == nil || len(st.messages) != len(doc.Messages) {
		lost++
		t.Errorf("the keyed import's session %s: %v", a.SessionID, st)
	}
	report(t, "An import sent again with its Idempotency-Key, one after another or at once, creates one session and answers the first 201, replayed; the key with another import is 422",
		fmt.Sprintf("1 import and %d retries; 2 × %d identical imports of 216 messages, at once and spread over 150 ms (%d created, %d replayed, %d answered 409 in_progress), each followed by a retry; 3 other imports under the keys", retries, together, fresh, replayed, inProgress), lost)
}

// TestCrashDuringALargeImport kills the chat function while it writes an
// import too large for one transaction: before its reservation, and before
// each of its transactions, the last included. The session must not exist
// afterwards, not even in part, and the same import under the same id must
// then succeed, with or without an Idempotency-Key.
func TestCrashDuringALargeImport(t *testing.T) {
	t.Parallel()
	b := newSandbox(t)
	send := func(ev []byte, timeout time.Duration) (int, string) {
		t.Helper()
		status, _, raw := b.send(t, ev, timeout)
		return status, raw
	}
	gone := func(id, what string) bool {
		t.Helper()
		ok := storedIn(t, b.store, "", id) == nil
		for _, path := range []string{"/sessions/" + id, "/sessions/" + id + "/export"} {
			if status, raw := send(sandboxEvent(t, "GET", path, nil, ""), 10*time.Second); status != 404 {
				ok = false
				t.Errorf("%s: GET %s: %d %.200s", what, path, status, raw)
			}
		}
		return ok
	}
	// write counts the writes of an import of doc, which succeeds.
	writes := func(doc httpapi.SessionDocument, id string) map[string]int {
		t.Helper()
		var mu sync.Mutex
		seen := map[string]int{}
		b.ddb.SetHook(func(op string, _ *http.Request) {
			mu.Lock()
			seen[op]++
			mu.Unlock()
		})
		defer b.ddb.SetHook(nil)
		if status, raw := send(sandboxEvent(t, "POST", "/sessions/import", importBody(doc, id), ""), 20*time.Second); status != 201 {
			t.Fatalf("import %s: %d %.300s", id, status, raw)
		}
		return seen
	}
	damaged, kills := 0, 0
	// crash kills an import of doc under id, with the key unless "", while
	// DynamoDB holds its nth write op.
	crash := func(doc httpapi.SessionDocument, id, key, op string, nth int, timeout time.Duration) time.Time {
		t.Helper()
		what := fmt.Sprintf("%s, killed before %s %d", id, op, nth)
		reached := b.holdWrite(op, nth)
		start := time.Now()
		inv, err := b.fn.InvokeAsync(t.Context(), sandboxEvent(t, "POST", "/sessions/import", importBody(doc, id), key), timeout)
		if err != nil {
			t.Fatal(err)
		}
		select {
		case <-reached:
		case <-time.After(15 * time.Second):
			t.Fatalf("%s: the import never reached it:\n%s", what, b.fn.Logs())
		}
		b.kill(t, inv, what)
		kills++
		b.ddb.SetHook(nil)
		if err := b.fn.Restart(t.Context()); err != nil {
			t.Fatal(err)
		}
		if !gone(id, what) {
			damaged++
			t.Errorf("%s: the session exists", what)
		}
		return start
	}
	imports := func(doc httpapi.SessionDocument, id, what string) {
		t.Helper()
		status, raw := send(sandboxEvent(t, "POST", "/sessions/import", importBody(doc, id), ""), 20*time.Second)
		if status != 201 {
			damaged++
			t.Errorf("%s: the import again: %d %.300s", what, status, raw)
			return
		}
		st := storedIn(t, b.store, "", id)
		if st == nil || !sameMessages(st.messages, doc.Messages) {
			damaged++
			t.Errorf("%s: the import again stored something else", what)
			return
		}
		validHistory(t, st.messages)
	}

	docs := []struct {
		tag, what string
		doc       httpapi.SessionDocument
	}{
		{"many", "messages", sessionDocument("many", 100, 0)},
		{"bulky", "messages with 16 tool results of 330 KB", sessionDocument("bulky", 16, 330<<10)},
	}
	var tried []string
	for _, d := range docs {
		parts := writes(d.doc, "probe-"+d.tag)["TransactWriteItems"]
		if parts < 2 {
			t.Fatalf("%s: written in %d transaction; the test needs an import written in parts", d.tag, parts)
		}
		id := "crashy-" + d.tag
		crash(d.doc, id, "", "PutItem", 1, 20*time.Second)
		for nth := 1; nth <= parts; nth++ {
			crash(d.doc, id, "", "TransactWriteItems", nth, 20*time.Second)
		}
		imports(d.doc, id, d.tag)
		tried = append(tried, fmt.Sprintf("an import of %d %s (a reservation and %d transactions), killed before each write", len(d.doc.Messages), d.what, parts))
	}

	// With a key: the retry is refused while the dead invocation could
	// still commit, then creates the session once.
	const timeout = 5 * time.Second
	doc := docs[0].doc
	start := crash(doc, "crashy-keyed", "crash-import", "TransactWriteItems", 2, timeout)
	ev := sandboxEvent(t, "POST", "/sessions/import", importBody(doc, "crashy-keyed"), "crash-import")
	freeBy := start.Add(timeout + 2*time.Second + 2*time.Second)
	var status int
	var raw string
	for {
		status, raw = send(ev, 20*time.Second)
		if status != 409 || !strings.Contains(raw, `"in_progress"`) || time.Now().After(freeBy) {
			break
		}
		time.Sleep(250 * time.Millisecond)
	}
	if status != 201 {
		damaged++
		t.Errorf("the keyed import again, %s after the crash: %d %.300s", time.Since(start).Round(time.Second), status, raw)
	}
	if again, raw2 := send(ev, 20*time.Second); again != 201 || raw2 != raw {
		damaged++
		t.Errorf("the keyed import's retry: %d %.300s", again, raw2)
	}
	if st := storedIn(t, b.store, "", "crashy-keyed"); st == nil || !sameMessages(st.messages, doc.Messages) {
		damaged++
		t.Error("the keyed import stored something else")
	}
	report(t, "A crash (SIGKILL) during an import written in parts leaves no session at all, never part of one; the same import under the same id then succeeds",
		fmt.Sprintf("%d SIGKILLs of the chat bootstrap: %s; and a keyed import killed before its second transaction, retried until its key was free", kills, strings.Join(tried, "; ")), damaged)
}

// TestExportImportAreTheOwners: another owner cannot export a session, its
// pages included, and an import under its id gets the same 409 as under
// the caller's own; the session is unchanged. An import of another owner's
// export is the importer's.
func TestExportImportAreTheOwners(t *testing.T) {
	s := newSystem(t, nil)
	s.Model.Responder = always(conversetest.Text("noted"))
	lost := 0
	for _, id := range []string{"alices", "bobs"} {
		owner := strings.TrimSuffix(id, "s")
		if r := s.chat(t, owner, id, "hello"); r.status != 200 {
			t.Fatalf("%s: %d %s", id, r.status, r.raw)
		}
	}
	long := sessionDocument("long", 450, 0) // 1,080 messages: two pages
	if r := s.serve(t, importCall("alice", long, "alices-long"), 30*time.Second); r.status != 201 {
		t.Fatalf("the long import: %d %s", r.status, r.raw)
	}
	head := s.serve(t, exportCall("alice", "alices-long", ""), 30*time.Second)
	cursor, _ := head.body["next_cursor"].(string)
	if head.status != 200 || cursor == "" {
		t.Fatalf("alice's export of her long session: %d, cursor %q", head.status, cursor)
	}
	before := map[string]*stored{"alices": s.stored(t, "alice", "alices"), "alices-long": s.stored(t, "alice", "alices-long")}

	// Exports.
	exports := 0
	for _, q := range []request{
		exportCall("bob", "alices", ""),
		exportCall("bob", "alices-long", ""),
		exportCall("bob", "alices-long", cursor),
		exportCall("", "alices", ""),
	} {
		exports++
		if r := s.serve(t, q, 30*time.Second); r.status != 404 || r.code() != "not_found" {
			lost++
			t.Errorf("%s as %q: %d %.200s", q.path, q.owner, r.status, r.raw)
		}
	}

	// Imports under alice's ids, and under bob's own for comparison.
	doc := sessionDocument("bobs-doc", 3, 0)
	messages := map[string]int{}
	imports := 0
	for _, tt := range []struct{ owner, id, key string }{
		{"bob", "bobs", ""},
		{"bob", "alices", ""},
		{"bob", "alices", "bob-key"},
		{"bob", "alices-long", ""},
		{"", "alices", ""},
	} {
		imports++
		r := s.serve(t, importCall(tt.owner, doc, tt.id).withKey(tt.key), 30*time.Second)
		if r.status != 409 || r.code() != "session_exists" {
			lost++
			t.Errorf("%q imports under %s (key %q): %d %s", tt.owner, tt.id, tt.key, r.status, r.raw)
		}
		e, _ := r.body["error"].(map[string]any)
		msg, _ := e["message"].(string)
		messages[strings.ReplaceAll(msg, `"`+tt.id+`"`, "ID")]++
	}
	if len(messages) != 1 {
		lost++
		t.Errorf("the answers tell the caller's session from another's: %v", messages)
	}
	for id, st := range before {
		if after := s.stored(t, "alice", id); !after.sameAs(st) {
			lost++
			t.Errorf("%s changed: %s", id, st.diff(after))
		}
	}

	// Bob imports alice's export: his session, not hers.
	alices, _ := s.exported(t, "alice", "alices")
	r := s.serve(t, call("POST", "/sessions/import", "bob", alices), 30*time.Second)
	var got turn.ImportAnswer
	if err := json.Unmarshal([]byte(r.raw), &got); r.status != 201 || err != nil || got.SessionID == "alices" {
		t.Fatalf("bob imports alice's export: %d %s", r.status, r.raw)
	}
	if st := s.stored(t, "bob", got.SessionID); st == nil || !sameMessages(st.messages, alices.Messages) {
		lost++
		t.Errorf("bob's import %s: %v", got.SessionID, st)
	}
	if st := s.stored(t, "alice", got.SessionID); st != nil {
		lost++
		t.Errorf("bob's import %s is stored under alice", got.SessionID)
	}
	if r := s.serve(t, call("GET", "/sessions/"+got.SessionID, "alice", nil), 30*time.Second); r.status != 404 {
		lost++
		t.Errorf("alice reads bob's import: %d", r.status)
	}
	if r := s.chat(t, "alice", got.SessionID, "mine?"); r.status != 404 {
		lost++
		t.Errorf("alice writes to bob's import: %d %s", r.status, r.raw)
	}
	if r := s.chat(t, "bob", got.SessionID, "mine now"); r.status != 200 {
		lost++
		t.Errorf("bob's turn on his import: %d %s", r.status, r.raw)
	}
	if doc, _ := s.exported(t, "bob", got.SessionID); doc == nil || len(doc.Messages) != len(alices.Messages)+2 {
		lost++
		t.Errorf("bob's export of his import: %v", doc)
	}
	if after := s.stored(t, "alice", "alices"); !after.sameAs(before["alices"]) {
		lost++
		t.Errorf("alice's session changed with bob's turn on his copy: %s", before["alices"].diff(after))
	}
	report(t, "Another owner cannot export a session (404, its pages included), and an import under its id is 409 session_exists, worded as for the caller's own id, changing nothing; an import of another owner's export is the importer's",
		fmt.Sprintf("%d exports and %d imports by another owner and the anonymous caller; 1 import of another owner's export, then a turn on it", exports, imports), lost)
}

// TestCrashDuringAnImportInPages kills the function while it writes a page
// of an import in pages, and while it commits the last: the session never
// exists before its last page is committed, and the page sent again goes
// on where the import stands.
func TestCrashDuringAnImportInPages(t *testing.T) {
	t.Parallel()
	b := newSandbox(t)
	doc := sessionDocument("paged", 60, 0)
	n := len(doc.Messages)
	cut := []int{0, 60, 120, n} // where the pages start, wherever that falls
	pageOf := func(k int) any {
		first, msgs := cut[k], doc.Messages[cut[k]:cut[k+1]]
		next := ""
		if k+1 < len(cut)-1 {
			next = "more"
		}
		if k == 0 {
			d := doc
			d.Messages, d.NextCursor = msgs, next
			return importBody(d, "paged")
		}
		return httpapi.SessionDocumentPage{Format: httpapi.DocumentFormat, FormatVersion: httpapi.DocumentVersion, First: &first, Messages: msgs, NextCursor: next}
	}
	status, _, raw := b.send(t, sandboxEvent(t, "POST", "/sessions/import", pageOf(0), ""), 20*time.Second)
	var progress turn.ImportAnswer
	if status != 202 || json.Unmarshal([]byte(raw), &progress) != nil || progress.Received != cut[1] {
		t.Fatalf("first page: %d %.300s", status, raw)
	}
	pagePath := "/sessions/paged/import?token=" + progress.ImportToken
	damaged, kills := 0, 0
	absent := func(what string) {
		t.Helper()
		if storedIn(t, b.store, "", "paged") != nil {
			damaged++
			t.Errorf("%s: the session exists before its last page", what)
		}
	}
	// kill sends page k and kills the function while DynamoDB holds its
	// nth transaction.
	kill := func(k, nth int) {
		t.Helper()
		what := fmt.Sprintf("page %d, killed at its transaction %d", k+1, nth)
		reached := b.holdWrite("TransactWriteItems", nth)
		inv, err := b.fn.InvokeAsync(t.Context(), sandboxEvent(t, "POST", pagePath, pageOf(k), ""), 20*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		select {
		case <-reached:
		case <-time.After(15 * time.Second):
			t.Fatalf("%s: never reached:\n%s", what, b.fn.Logs())
		}
		b.kill(t, inv, what)
		kills++
		b.ddb.SetHook(nil)
		if err := b.fn.Restart(t.Context()); err != nil {
			t.Fatal(err)
		}
		absent(what)
	}
	kill(1, 1)
	if status, _, raw := b.send(t, sandboxEvent(t, "POST", pagePath, pageOf(1), ""), 20*time.Second); status != 202 || !strings.Contains(raw, fmt.Sprintf(`"received":%d`, cut[2])) {
		damaged++
		t.Errorf("page 2 again: %d %.300s", status, raw)
	}
	absent("after page 2")
	kill(2, 1)
	status, _, raw = b.send(t, sandboxEvent(t, "POST", pagePath, pageOf(2), ""), 20*time.Second)
	if status != 201 {
		damaged++
		t.Errorf("the last page again: %d %.300s", status, raw)
	}
	st := storedIn(t, b.store, "", "paged")
	if st == nil || !sameMessages(st.messages, doc.Messages) {
		damaged++
		t.Fatal("the import stored something else")
	}
	validHistory(t, st.messages)
	report(t, "A crash (SIGKILL) during an import in pages leaves no session until its last page commits; each page sent again goes on where the import stands",
		fmt.Sprintf("an import of %d messages in 3 pages: %d SIGKILLs of the chat bootstrap, while page 2 was written and while the last was committed, each page then sent again", n, kills), damaged)
}
