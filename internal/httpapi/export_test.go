package httpapi_test

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/lambda-agent/lambda-agent/internal/agent"
	"github.com/lambda-agent/lambda-agent/internal/httpapi"
	"github.com/lambda-agent/lambda-agent/internal/testkit"
	"github.com/lambda-agent/lambda-agent/internal/testkit/conversetest"
	"github.com/lambda-agent/lambda-agent/internal/turn"
)

// exportPage gets one page of GET /sessions/{id}/export as owner.
func exportPage(t *testing.T, s *testkit.Stack, owner, id, cursor string) *httptest.ResponseRecorder {
	t.Helper()
	target := "/sessions/" + id + "/export"
	if cursor != "" {
		target += "?cursor=" + url.QueryEscape(cursor)
	}
	return s.Serve(testkit.As(httptest.NewRequestWithContext(t.Context(), http.MethodGet, target, nil), owner))
}

// exportAll exports a session whole, following its pages as a client
// does, and returns the document with every page's messages, its
// sub-agents' included, and the number of pages. Every page must fit a
// Lambda response, and hold messages.
func exportAll(t *testing.T, s *testkit.Stack, owner, id string) (httpapi.SessionDocument, int) {
	t.Helper()
	w := exportPage(t, s, owner, id, "")
	if w.Code != http.StatusOK {
		t.Fatalf("export %s: %d %s", id, w.Code, w.Body)
	}
	checkWireSize(t, w.Body.Bytes())
	var doc httpapi.SessionDocument
	strictDecode(t, w.Body.Bytes(), &doc)
	pages := 1
	for cursor := doc.NextCursor; cursor != ""; pages++ {
		w := exportPage(t, s, owner, id, cursor)
		if w.Code != http.StatusOK {
			t.Fatalf("export %s, page %d: %d %s", id, pages+1, w.Code, w.Body)
		}
		checkWireSize(t, w.Body.Bytes())
		var page httpapi.SessionDocumentPage
		strictDecode(t, w.Body.Bytes(), &page)
		if page.Format != httpapi.DocumentFormat || page.FormatVersion != 1 || page.SessionID != id || len(page.Messages)+len(page.Agents) == 0 ||
			(page.First == nil) != (len(page.Messages) == 0) || page.First != nil && *page.First != len(doc.Messages) {
			t.Fatalf("page %d: format %q %d, session %q, first %v, %d messages after %d", pages+1, page.Format, page.FormatVersion, page.SessionID, page.First, len(page.Messages), len(doc.Messages))
		}
		doc.Messages = append(doc.Messages, page.Messages...)
		for name, part := range page.Agents {
			a := doc.Agents[name]
			if a == nil || part.First == nil || *part.First != len(a.Messages) || len(part.Messages) == 0 {
				t.Fatalf("page %d: agents.%s from %v, %d messages, after %+v", pages+1, name, part.First, len(part.Messages), a)
			}
			a.Messages = append(a.Messages, part.Messages...)
		}
		cursor = page.NextCursor
	}
	doc.NextCursor = ""
	return doc, pages
}

// checkWireSize fails t when body, carried in Lambda's response event as
// a JSON string, would pass the 6 MB response limit, with room for the
// event around it.
func checkWireSize(t *testing.T, body []byte) {
	t.Helper()
	event, err := json.Marshal(string(body))
	if err != nil {
		t.Fatal(err)
	}
	if n := len(event); n > 6<<20-64<<10 {
		t.Errorf("the response is %d bytes in Lambda's event; Lambda carries 6 MB", n)
	}
}

// strictDecode decodes a JSON object into v, refusing fields v lacks.
func strictDecode(t *testing.T, raw []byte, v any) {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		t.Fatalf("%v: %.300s", err, raw)
	}
}

// importDoc posts body, encoded unless it is a string, to POST
// /sessions/import as owner, with the Idempotency-Key key unless "".
func importDoc(t *testing.T, s *testkit.Stack, owner string, body any, key string) *httptest.ResponseRecorder {
	t.Helper()
	raw, ok := body.(string)
	if !ok {
		b, err := json.Marshal(body)
		if err != nil {
			t.Fatal(err)
		}
		raw = string(b)
	}
	r := httptest.NewRequestWithContext(t.Context(), http.MethodPost, "/sessions/import", strings.NewReader(raw))
	r.Header.Set("Content-Type", "application/json")
	if key != "" {
		r.Header.Set("Idempotency-Key", key)
	}
	return s.Serve(testkit.As(r, owner))
}

// imported decodes a 201 from POST /sessions/import.
func imported(t *testing.T, w *httptest.ResponseRecorder) turn.ImportAnswer {
	t.Helper()
	if w.Code != http.StatusCreated {
		t.Fatalf("import: %d %s", w.Code, w.Body)
	}
	var out turn.ImportAnswer
	strictDecode(t, w.Body.Bytes(), &out)
	if loc := w.Header().Get("Location"); loc != "/sessions/"+out.SessionID {
		t.Errorf("Location %q for session %q", loc, out.SessionID)
	}
	return out
}

// as imports doc under id.
func as(doc httpapi.SessionDocument, id string) httpapi.ImportRequest {
	return httpapi.ImportRequest{SessionDocument: doc, NewSessionID: &id}
}

// chatAs posts a message to a session as owner, and fails t unless it is
// answered.
func chatAs(t *testing.T, s *testkit.Stack, owner, id, message string) {
	t.Helper()
	body, _ := json.Marshal(map[string]string{"session_id": id, "message": message})
	r := httptest.NewRequestWithContext(t.Context(), http.MethodPost, "/chat", bytes.NewReader(body))
	if w := s.Serve(testkit.As(r, owner)); w.Code != http.StatusOK {
		t.Fatalf("chat %s: %d %s", id, w.Code, w.Body)
	}
}

// sameSession ignores what an import does not carry over: the id and the
// timestamps.
var sameSession = cmpopts.IgnoreFields(httpapi.SessionDocument{}, "SessionID", "CreatedAt", "UpdatedAt", "ExpiresAt")

// lastRequest is the last request the model got, as Bedrock would see it.
func lastRequest(t *testing.T, s *testkit.Stack) *conversetest.Request {
	t.Helper()
	reqs := s.Model.Requests()
	if len(reqs) == 0 {
		t.Fatal("no model request")
	}
	return reqs[len(reqs)-1]
}

// toolUseIDs lists the tool use ids of msgs, in order.
func toolUseIDs[M any](msgs []M, uses func(M) []string) []string {
	var out []string
	for _, m := range msgs {
		out = append(out, uses(m)...)
	}
	return out
}

func agentUses(m agent.Message) []string {
	var ids []string
	for _, u := range m.ToolUses() {
		ids = append(ids, u.ToolUseID)
	}
	return ids
}

func wireUses(m conversetest.Message) []string {
	var ids []string
	for _, b := range m.Content {
		if b.ToolUse != nil {
			ids = append(ids, b.ToolUse.ToolUseID)
		}
	}
	return ids
}

// TestExportImportRoundTrip exports a tool-heavy session, imports it for
// another owner, and exports that: the same document apart from the id and
// the timestamps. The next turn on the import, against the strict
// stand-in, sends the whole history to the model.
func TestExportImportRoundTrip(t *testing.T) {
	s := testkit.Start(t, testkit.Options{})
	s.Model.Enqueue(
		conversetest.ToolUse("c1", "calculator", map[string]string{"expression": "6*7"}),
		conversetest.Text("42."),
		conversetest.Text("Both:").
			WithToolUse("c2", "calculator", map[string]string{"expression": "2^10"}).
			WithToolUse("c3", "calculator", map[string]string{"expression": "7 % 4"}),
		conversetest.ToolUse("r1", "remember", map[string]string{"key": "colour", "value": "teal"}),
		conversetest.Text("1024 and 3; teal is noted."),
	)
	chatAs(t, s, "alice", "tools-1", "what is 6*7?")
	chatAs(t, s, "alice", "tools-1", "2^10 and 7 mod 4, and remember teal")
	if w := toolCall(t, s, "alice", "tools-1", "calculator", `{"input":{"expression":"1+1"}}`, ""); w.Code != http.StatusOK {
		t.Fatalf("direct call: %d %s", w.Code, w.Body)
	}

	doc, pages := exportAll(t, s, "alice", "tools-1")
	if doc.Format != "lambda-agent/session" || doc.FormatVersion != 1 || doc.SessionID != "tools-1" || pages != 1 {
		t.Errorf("format %q %d, session %q, %d pages", doc.Format, doc.FormatVersion, doc.SessionID, pages)
	}
	if diff := cmp.Diff(transcriptOf(t, s, "alice", "tools-1"), doc.Messages); diff != "" {
		t.Errorf("exported messages differ from GET's (-get +export):\n%s", diff)
	}
	uses := toolUseIDs(doc.Messages, agentUses)
	if len(uses) != 5 || doc.MessageCount != len(doc.Messages) || doc.MessageCount != 14 {
		t.Errorf("%d messages (message_count %d), tool uses %v; want 14, and 5 uses", len(doc.Messages), doc.MessageCount, uses)
	}
	if len(doc.State) == 0 || doc.Title != "what is 6*7?" || doc.CreatedAt.IsZero() || doc.Pending != nil {
		t.Errorf("state %v, title %q, created %v, pending %v", doc.State, doc.Title, doc.CreatedAt, doc.Pending)
	}

	// Bob imports it, under a new id: he owns the copy.
	got := imported(t, importDoc(t, s, "bob", doc, ""))
	if got.SessionID == "tools-1" || !strings.HasPrefix(got.SessionID, "s-") || got.MessageCount != 14 {
		t.Fatalf("answer %+v", got)
	}
	again, _ := exportAll(t, s, "bob", got.SessionID)
	if diff := cmp.Diff(doc, again, sameSession); diff != "" {
		t.Errorf("export of the import (-first +second):\n%s", diff)
	}
	if again.SessionID != got.SessionID || !again.CreatedAt.After(doc.CreatedAt) {
		t.Errorf("the import is %q, created %v (the original %v)", again.SessionID, again.CreatedAt, doc.CreatedAt)
	}
	if w := exportPage(t, s, "alice", got.SessionID, ""); w.Code != http.StatusNotFound {
		t.Errorf("alice exports bob's import: %d", w.Code)
	}

	// The next turn: the model is sent the imported history, and the
	// agent state, which recall reads.
	s.Model.Enqueue(
		conversetest.ToolUse("r2", "recall", map[string]string{"key": "colour"}),
		conversetest.Text("Teal."),
	)
	chatAs(t, s, "bob", got.SessionID, "which colour?")
	req := lastRequest(t, s)
	if diff := cmp.Diff(append(uses, "r2"), toolUseIDs(req.Messages, wireUses)); diff != "" {
		t.Errorf("tool uses the model saw (-want +got):\n%s", diff)
	}
	if last := req.Messages[len(req.Messages)-1]; last.Content[0].ToolResult == nil || !strings.Contains(fmt.Sprint(last.Content[0].ToolResult.Content), "teal") {
		t.Errorf("recall on the import gave %+v", last)
	}
	if n := len(transcriptOf(t, s, "alice", "tools-1")); n != 14 {
		t.Errorf("the original has %d messages after a turn on its import", n)
	}
}

// TestExportImportPaused round-trips a session whose turn waits for an
// approval, with the result of a use that ran kept: the import can be
// resumed.
func TestExportImportPaused(t *testing.T) {
	s := testkit.Start(t, testkit.Options{Env: map[string]string{"APPROVAL_TOOLS": "calculator", "TOOLS": "calculator,current_time"}})
	s.Model.Enqueue(conversetest.Text("Checking.").
		WithToolUse("calc-a", "calculator", map[string]string{"expression": "6*7"}).
		WithToolUse("time-a", "current_time", map[string]string{"timezone": "UTC"}))
	chatAs(t, s, "", "paused-1", "compute")
	doc, _ := exportAll(t, s, "", "paused-1")
	if doc.Pending == nil || len(doc.Pending.Interrupts) != 1 || doc.Pending.Interrupts[0].ID != "calc-a" || len(doc.Pending.Results) != 1 {
		t.Fatalf("pending %+v", doc.Pending)
	}
	got := imported(t, importDoc(t, s, "", as(doc, "paused-2"), ""))
	again, _ := exportAll(t, s, "", got.SessionID)
	if diff := cmp.Diff(doc, again, sameSession); diff != "" {
		t.Errorf("export of the import (-first +second):\n%s", diff)
	}
	s.Model.Enqueue(conversetest.Text("42, at noon."))
	body := `{"session_id":"paused-2","responses":[{"interrupt_id":"calc-a","approve":true}]}`
	if w := postJSON(t, s, "/chat", body); w.Code != http.StatusOK {
		t.Fatalf("resume the import: %d %s", w.Code, w.Body)
	}
	last := lastRequest(t, s).Messages
	if results := last[len(last)-1].Content; len(results) != 2 || results[0].ToolResult == nil || results[1].ToolResult == nil {
		t.Errorf("the resumed turn sent %+v", last[len(last)-1])
	}
}

// history returns a valid history of at least n messages: turns of a
// question and an answer, every fifth with a tool use and its result.
func history(n int) []agent.Message {
	var msgs []agent.Message
	for k := 0; len(msgs) < n; k++ {
		msgs = append(msgs, agent.UserText(fmt.Sprintf("question %d", k)))
		if k%5 == 4 {
			id := fmt.Sprintf("u%d", k)
			msgs = append(msgs,
				agent.Message{Role: agent.RoleAssistant, Content: []agent.ContentBlock{{ToolUse: &agent.ToolUseBlock{ToolUseID: id, Name: "calculator", Input: json.RawMessage(fmt.Sprintf(`{"expression":"%d+1"}`, k))}}}},
				agent.Message{Role: agent.RoleUser, Content: []agent.ContentBlock{{ToolResult: agent.TextResult(id, agent.ToolSuccess, fmt.Sprint(k+1))}}},
			)
		}
		msgs = append(msgs, agent.AssistantText(fmt.Sprintf("answer %d", k)))
	}
	return msgs
}

// document returns a valid document of msgs.
func document(msgs []agent.Message) httpapi.SessionDocument {
	return httpapi.SessionDocument{
		Format: "lambda-agent/session", FormatVersion: 1, SessionID: "elsewhere",
		MessageCount: len(msgs), Messages: msgs, State: map[string]json.RawMessage{},
	}
}

// turnStart returns the index of the first turn start at or after i.
func turnStart(t *testing.T, msgs []agent.Message, i int) int {
	t.Helper()
	for ; i < len(msgs); i++ {
		if msgs[i].Role == agent.RoleUser && !msgs[i].HasToolResults() {
			return i
		}
	}
	t.Fatal("no turn start")
	return 0
}

// TestImportSummarized imports a summarized session: the window starts
// past removed messages, which a summary stands for, and tool results are
// cut to a limit. It exports as it was imported, and the next turn sends
// the model the summary and the window only.
func TestImportSummarized(t *testing.T) {
	s := testkit.Start(t, testkit.Options{})
	msgs := history(30)
	removed := turnStart(t, msgs, 20)
	doc := document(msgs)
	doc.Title = "question 0"
	doc.Window = agent.WindowState{Removed: removed, Summary: "The user asked questions 0 to 14; the assistant answered each.", ToolResultLimit: 512, LastInputTokens: 900}
	doc.State = map[string]json.RawMessage{"memory:colour": json.RawMessage(`"teal"`)}
	imported(t, importDoc(t, s, "", as(doc, "summarized"), ""))
	got, _ := exportAll(t, s, "", "summarized")
	if diff := cmp.Diff(doc, got, sameSession); diff != "" {
		t.Errorf("export of the import (-imported +exported):\n%s", diff)
	}

	s.Model.Enqueue(conversetest.Text("ok"))
	chatAs(t, s, "", "summarized", "go on")
	req := lastRequest(t, s)
	if first := req.Messages[0].Text(); !strings.Contains(first, doc.Window.Summary) {
		t.Errorf("the model's first message is %q, not the summary", first)
	}
	// The summary, a user message, joins the window's first.
	if want := len(msgs) - removed + 1; len(req.Messages) != want {
		t.Errorf("the model got %d messages, want %d: the window and the input", len(req.Messages), want)
	}
	sent := map[string]bool{}
	for _, m := range req.Messages {
		for _, line := range strings.Split(m.Text(), "\n") {
			sent[line] = true
		}
	}
	for i, m := range msgs {
		if text := m.Text(); text != "" && sent[text] != (i >= removed) {
			t.Errorf("messages[%d] %q: sent %v, removed at %d", i, text, sent[text], removed)
		}
	}
}

// TestImportLongSession imports a session of over 1,000 messages in one
// request and exports it in pages that reassemble into the document. A
// turn committed between two pages makes the next one 409, so that pages
// of two states of the session are never put together.
func TestImportLongSession(t *testing.T) {
	s := testkit.Start(t, testkit.Options{})
	msgs := history(1100)
	doc := document(msgs)
	doc.Title = "question 0"
	doc.Window.Removed = turnStart(t, msgs, len(msgs)-30)
	got := imported(t, importDoc(t, s, "", as(doc, "long"), ""))
	if got.MessageCount != len(msgs) || len(msgs) < 1100 {
		t.Fatalf("answer %+v for %d messages", got, len(msgs))
	}
	export, pages := exportAll(t, s, "", "long")
	if pages != 2 {
		t.Errorf("%d pages, want 2 (at most %d messages a page)", pages, httpapi.MaxPageSize)
	}
	if diff := cmp.Diff(doc, export, sameSession); diff != "" {
		t.Errorf("the reassembled export (-imported +exported):\n%s", diff)
	}

	first := exportPage(t, s, "", "long", "")
	var head httpapi.SessionDocument
	strictDecode(t, first.Body.Bytes(), &head)
	if len(head.Messages) != httpapi.MaxPageSize || head.NextCursor == "" || head.MessageCount != len(msgs) {
		t.Fatalf("first page: %d messages, next %q, message_count %d", len(head.Messages), head.NextCursor, head.MessageCount)
	}
	s.Model.Enqueue(conversetest.Text("ok"))
	chatAs(t, s, "", "long", "one more")
	w := exportPage(t, s, "", "long", head.NextCursor)
	if w.Code != http.StatusConflict || !strings.Contains(w.Body.String(), `"session_changed"`) {
		t.Errorf("a page after a turn: %d %s", w.Code, w.Body)
	}
	if after, _ := exportAll(t, s, "", "long"); after.MessageCount != len(msgs)+2 || len(after.Messages) != len(msgs)+2 {
		t.Errorf("a new export after the turn: message_count %d, %d messages", after.MessageCount, len(after.Messages))
	}
}

// TestExportWithinLambdaLimits exports messages whose JSON is mostly
// quotes, which take twice the room in Lambda's response event: pages are
// cut to fit it, and still reassemble.
func TestExportWithinLambdaLimits(t *testing.T) {
	s := testkit.Start(t, testkit.Options{})
	quotes := strings.Repeat(`"`, 600<<10)
	var msgs []agent.Message
	for i := range 2 {
		msgs = append(msgs, agent.UserText(fmt.Sprintf("%d%s", i, quotes)), agent.AssistantText(fmt.Sprintf("%d%s", i, quotes)))
	}
	doc := document(msgs)
	imported(t, importDoc(t, s, "", as(doc, "quoted"), ""))
	got, pages := exportAll(t, s, "", "quoted") // checks each page's size
	if pages < 2 {
		t.Errorf("%d page for %d bytes of quotes", pages, 4*len(quotes))
	}
	if diff := cmp.Diff(doc.Messages, got.Messages); diff != "" {
		t.Errorf("messages (-imported +exported):\n%s", diff)
	}
}

// TestImportRefusesBadDocuments: each rule has a document that breaks it,
// which is refused with a 400 that names the problem, and nothing is
// stored.
func TestImportRefusesBadDocuments(t *testing.T) {
	s := testkit.Start(t, testkit.Options{})
	base := func() httpapi.SessionDocument { return document(history(12)) }
	paused := func() httpapi.SessionDocument {
		msgs := append(history(4), agent.UserText("compute"), agent.Message{Role: agent.RoleAssistant, Content: []agent.ContentBlock{
			{ToolUse: &agent.ToolUseBlock{ToolUseID: "p1", Name: "calculator", Input: json.RawMessage(`{"expression":"1"}`)}},
		}})
		d := document(msgs)
		d.Pending = &agent.Pending{Interrupts: []agent.Interrupt{{ID: "p1", Kind: agent.KindApproval, Name: "approval", Tool: "calculator"}}}
		return d
	}
	big := strings.Repeat("a", httpapi.MaxImportBytes-100<<10)
	tests := []struct {
		name   string
		doc    func() httpapi.SessionDocument
		raw    string // sent instead of doc
		status int
		code   string
		says   string
	}{
		{name: "not JSON", raw: `{"format":`, code: "invalid_json", says: "truncated"},
		{name: "a reference in place of a message", raw: `{"format":"lambda-agent/session","format_version":1,"message_count":1,"messages":[{"role":"user","reference":{"index":0,"bytes":7000000,"cursor":"MA"}}]}`, code: "invalid_json", says: `unknown field "reference"`},
		{name: "unknown field", raw: `{"format":"lambda-agent/session","format_version":1,"colour":"teal"}`, code: "invalid_json", says: `"colour"`},
		{name: "messages not a list", raw: `{"format":"lambda-agent/session","format_version":1,"messages":{}}`, code: "invalid_json", says: "messages"},
		{name: "state value not JSON", raw: `{"format":"lambda-agent/session","format_version":1,"state":{"k":}}`, code: "invalid_json", says: "not valid JSON"},
		{name: "bad new_session_id", raw: `{"format":"lambda-agent/session","format_version":1,"new_session_id":"a#b"}`, code: "invalid_session_id", says: `"a#b"`},
		{name: "format", doc: func() httpapi.SessionDocument { d := base(); d.Format = "strands/session"; return d }, code: "invalid_session_document", says: `format is "strands/session"`},
		{name: "no format version", doc: func() httpapi.SessionDocument { d := base(); d.FormatVersion = 0; return d }, code: "unsupported_format_version", says: "format_version 0"},
		{name: "future format version", doc: func() httpapi.SessionDocument { d := base(); d.FormatVersion = 2; return d }, code: "unsupported_format_version", says: "format_version 2"},
		{name: "a first page", doc: func() httpapi.SessionDocument { d := base(); d.NextCursor = "MTI"; return d }, code: "invalid_session_document", says: "next_cursor"},
		{name: "pages missing", doc: func() httpapi.SessionDocument { d := base(); d.MessageCount = 1100; return d }, code: "invalid_session_document", says: "message_count is 1100"},
		{name: "assistant first", doc: func() httpapi.SessionDocument {
			d := base()
			d.Messages, d.MessageCount = d.Messages[1:], d.MessageCount-1
			return d
		}, code: "invalid_session_document", says: "messages[0].role: the history must start with a user message"},
		{name: "roles do not alternate", doc: func() httpapi.SessionDocument {
			d := base()
			d.Messages[3] = agent.UserText("again")
			return d
		}, code: "invalid_session_document", says: `messages[3].role: must be "assistant" after a user message`},
		{name: "unanswered tool use", doc: func() httpapi.SessionDocument {
			d := base() // messages 9 and 10 are u4's use and result
			d.Messages[10] = agent.UserText("never mind")
			return d
		}, code: "invalid_session_document", says: `messages[10].content: holds no toolResult for toolUse "u4" of messages[9]`},
		{name: "orphan tool result", doc: func() httpapi.SessionDocument {
			d := base()
			d.Messages[2] = agent.Message{Role: agent.RoleUser, Content: []agent.ContentBlock{{ToolResult: agent.TextResult("ghost", agent.ToolSuccess, "1")}}}
			return d
		}, code: "invalid_session_document", says: `messages[2].content[0].toolResult.toolUseId: "ghost" answers no toolUse`},
		{name: "tool use id twice", doc: func() httpapi.SessionDocument {
			d := document(history(24)) // u4 at 9 and 10, u9 at 21 and 22
			for _, i := range []int{21, 22} {
				for j := range d.Messages[i].Content {
					if b := d.Messages[i].Content[j]; b.ToolUse != nil {
						b.ToolUse.ToolUseID = "u4"
					} else if b.ToolResult != nil {
						b.ToolResult.ToolUseID = "u4"
					}
				}
			}
			return d
		}, code: "invalid_session_document", says: `messages[21].content[0].toolUse.toolUseId: "u4" was used before, at messages[9].content[0]`},
		{name: "blank text", doc: func() httpapi.SessionDocument { d := base(); d.Messages[4] = agent.UserText(" "); return d }, code: "invalid_session_document", says: "messages[4].content[0].text: is blank"},
		{name: "no content", doc: func() httpapi.SessionDocument { d := base(); d.Messages[1].Content = nil; return d }, code: "invalid_session_document", says: "messages[1].content: is empty"},
		{name: "tool input not an object", doc: func() httpapi.SessionDocument {
			d := base()
			d.Messages[9].Content[0].ToolUse.Input = json.RawMessage(`"4+1"`)
			return d
		}, code: "invalid_session_document", says: "messages[9].content[0].toolUse.input: must be a JSON object"},
		{name: "message too large", doc: func() httpapi.SessionDocument {
			d := base()
			d.Messages[0] = agent.UserText(big[:4<<20])
			return d
		}, code: "invalid_session_document", says: "messages[0] is 4194"},
		{name: "state too large", doc: func() httpapi.SessionDocument {
			d := base()
			d.State = map[string]json.RawMessage{"notes": json.RawMessage(`"` + big[:70<<10] + `"`)}
			return d
		}, code: "invalid_session_document", says: "state is 71"},
		{name: "window past the messages", doc: func() httpapi.SessionDocument { d := base(); d.Window.Removed = 13; return d }, code: "invalid_session_document", says: "window.removed is 13"},
		{name: "negative window", doc: func() httpapi.SessionDocument { d := base(); d.Window.Removed = -1; return d }, code: "invalid_session_document", says: "window.removed is -1"},
		{name: "window inside a turn", doc: func() httpapi.SessionDocument { d := base(); d.Window.Removed = 10; return d }, code: "invalid_session_document", says: "messages[10] is not the start of a turn"},
		{name: "summary of nothing", doc: func() httpapi.SessionDocument { d := base(); d.Window.Summary = "all of it"; return d }, code: "invalid_session_document", says: "window.summary is set, but window.removed is 0"},
		{name: "pending on no tool use", doc: func() httpapi.SessionDocument {
			d := paused()
			d.Pending.Interrupts[0].ID = "u4"
			return d
		}, code: "invalid_session_document", says: `pending.interrupts[0].id "u4" is no toolUse of messages[5]`},
		{name: "pending after an answer", doc: func() httpapi.SessionDocument {
			d := base() // cut after u4's result
			d.Messages, d.MessageCount = d.Messages[:11], 11
			d.Pending = &agent.Pending{Interrupts: []agent.Interrupt{{ID: "u4", Kind: agent.KindApproval}}}
			return d
		}, code: "invalid_session_document", says: "the last message is not the assistant's"},
		{name: "pending nothing", doc: func() httpapi.SessionDocument { d := paused(); d.Pending.Interrupts = nil; return d }, code: "invalid_session_document", says: "pending.interrupts is empty"},
		{name: "pending of an unknown kind", doc: func() httpapi.SessionDocument { d := paused(); d.Pending.Interrupts[0].Kind = "vote"; return d }, code: "invalid_session_document", says: `kind "vote"`},
		{name: "pending result twice", doc: func() httpapi.SessionDocument {
			d := paused()
			d.Pending.Results = []*agent.ToolResultBlock{agent.TextResult("p1", agent.ToolSuccess, "1")}
			return d
		}, code: "invalid_session_document", says: `pending.results[0].toolUseId "p1" is answered already, by pending.interrupts[0]`},
		{name: "tool result image not its format", doc: func() httpapi.SessionDocument {
			d := base() // messages 9 and 10 are u4's use and result
			d.Messages[10].Content[0].ToolResult.Content = []agent.ToolResultContent{{Image: &agent.ImageBlock{Format: "png", Source: agent.Source{Bytes: conversetest.JPEGStart}}}}
			return d
		}, code: "invalid_session_document", says: `messages[10].content[0].toolResult.content[0].image: the bytes are not a PNG image (they look like JPEG)`},
		{name: "tool result document not its format", doc: func() httpapi.SessionDocument {
			d := base()
			d.Messages[10].Content[0].ToolResult.Content = []agent.ToolResultContent{{Document: &agent.DocumentBlock{Format: "pdf", Name: "report", Source: agent.Source{Bytes: conversetest.PNGStart}}}}
			return d
		}, code: "invalid_session_document", says: `messages[10].content[0].toolResult.content[0].document: the bytes are not a PDF document (they look like PNG)`},
		{name: "tool result without content", doc: func() httpapi.SessionDocument {
			d := base()
			d.Messages[10].Content[0].ToolResult.Content = nil
			return d
		}, code: "invalid_session_document", says: "messages[10].content[0].toolResult.content: is empty"},
		{name: "pending result not its format", doc: func() httpapi.SessionDocument {
			d := paused()
			d.Messages[5].Content = append(d.Messages[5].Content, agent.ContentBlock{ToolUse: &agent.ToolUseBlock{ToolUseID: "p2", Name: "calculator", Input: json.RawMessage(`{}`)}})
			d.Pending.Results = []*agent.ToolResultBlock{{ToolUseID: "p2", Status: agent.ToolSuccess, Content: []agent.ToolResultContent{{Image: &agent.ImageBlock{Format: "gif", Source: agent.Source{Bytes: conversetest.PNGStart}}}}}}
			return d
		}, code: "invalid_session_document", says: "pending.results[0].content[0].image: the bytes are not a GIF image (they look like PNG)"},
		{name: "pending result without content", doc: func() httpapi.SessionDocument {
			d := paused()
			d.Messages[5].Content = append(d.Messages[5].Content, agent.ContentBlock{ToolUse: &agent.ToolUseBlock{ToolUseID: "p2", Name: "calculator", Input: json.RawMessage(`{}`)}})
			d.Pending.Results = []*agent.ToolResultBlock{{ToolUseID: "p2", Status: agent.ToolSuccess}}
			return d
		}, code: "invalid_session_document", says: "pending.results[0].content: is empty"},
		{name: "body too large", raw: `{"format":"` + big + strings.Repeat("a", 200<<10) + `"}`, status: http.StatusRequestEntityTooLarge, code: "message_too_large", says: fmt.Sprint(httpapi.MaxImportBytes)},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			id := fmt.Sprintf("bad-%d", i)
			var body any = tt.raw
			if tt.doc != nil {
				body = as(tt.doc(), id)
			} else if strings.HasPrefix(tt.raw, `{"format":"lambda-agent/session","format_version":1,`) && !strings.Contains(tt.raw, "new_session_id") {
				body = strings.Replace(tt.raw, `"format_version":1,`, `"format_version":1,"new_session_id":"`+id+`",`, 1)
			}
			w := importDoc(t, s, "", body, "")
			var got struct {
				Error httpapi.Error `json:"error"`
			}
			_ = json.Unmarshal(w.Body.Bytes(), &got)
			status := tt.status
			if status == 0 {
				status = http.StatusBadRequest
			}
			if w.Code != status || got.Error.Code != tt.code || !strings.Contains(got.Error.Message, tt.says) {
				t.Errorf("%d %s: %.400s\nwant %d %s saying %q", w.Code, got.Error.Code, got.Error.Message, status, tt.code, tt.says)
			}
			if w := exportPage(t, s, "", id, ""); w.Code != http.StatusNotFound {
				t.Errorf("after a refused import, %s exports: %d", id, w.Code)
			}
		})
	}
	// The documents the cases break were valid.
	imported(t, importDoc(t, s, "", as(base(), "good-base"), ""))
	imported(t, importDoc(t, s, "", as(paused(), "good-paused"), ""))
	imported(t, importDoc(t, s, "", as(document(history(24)), "good-24"), ""))
	if list := s.Serve(httptest.NewRequestWithContext(t.Context(), http.MethodGet, "/sessions?limit=100", nil)); strings.Count(list.Body.String(), `"session_id"`) != 3 {
		t.Errorf("sessions stored: %s", list.Body)
	}
}

// TestImportNeverOverwrites: an import under an id in use, the caller's or
// another owner's, is a 409 that does not say whose, and the session is
// unchanged.
func TestImportNeverOverwrites(t *testing.T) {
	s := testkit.Start(t, testkit.Options{})
	s.Model.Enqueue(conversetest.Text("hi alice"), conversetest.Text("hi bob"))
	chatAs(t, s, "alice", "alices", "hello")
	chatAs(t, s, "bob", "bobs", "hello")
	before := map[string][]agent.Message{"alices": transcriptOf(t, s, "alice", "alices"), "bobs": transcriptOf(t, s, "bob", "bobs")}
	doc := document(history(6))
	messages := map[string]string{}
	for _, id := range []string{"alices", "bobs"} {
		for _, key := range []string{"", "key-" + id} {
			w := importDoc(t, s, "alice", as(doc, id), key)
			var got struct {
				Error httpapi.Error `json:"error"`
			}
			_ = json.Unmarshal(w.Body.Bytes(), &got)
			if w.Code != http.StatusConflict || got.Error.Code != "session_exists" {
				t.Errorf("import onto %s (key %q): %d %s", id, key, w.Code, w.Body)
			}
			messages[id] = strings.ReplaceAll(got.Error.Message, id, "ID")
		}
	}
	if messages["alices"] != messages["bobs"] {
		t.Errorf("the answers tell the caller's session from another's:\n%s\n%s", messages["alices"], messages["bobs"])
	}
	after := map[string][]agent.Message{"alices": transcriptOf(t, s, "alice", "alices"), "bobs": transcriptOf(t, s, "bob", "bobs")}
	if diff := cmp.Diff(before, after); diff != "" {
		t.Errorf("sessions changed (-before +after):\n%s", diff)
	}
	if w := exportPage(t, s, "alice", "bobs", ""); w.Code != http.StatusNotFound {
		t.Errorf("alice exports bob's session: %d %s", w.Code, w.Body)
	}
}

// TestExportRefusals: another owner's session, one that does not exist, a
// bad id and a bad cursor.
func TestExportRefusals(t *testing.T) {
	s := testkit.Start(t, testkit.Options{})
	s.Model.Enqueue(conversetest.Text("hi"))
	chatAs(t, s, "alice", "mine", "hello")
	// A cursor as export writes it: the version, the document's first
	// message's index, and the store's cursor.
	wellFormed := base64.RawURLEncoding.EncodeToString([]byte("1.0." + base64.RawURLEncoding.EncodeToString([]byte("0"))))
	for _, tt := range []struct {
		owner, id, cursor string
		status            int
		code              string
	}{
		{"bob", "mine", "", 404, "not_found"},
		{"alice", "nobody", "", 404, "not_found"},
		{"alice", "a.b#c", "", 400, "invalid_session_id"},
		{"alice", "mine", "not-a-cursor", 400, "invalid_request"},
		{"bob", "mine", wellFormed, 404, "not_found"},
	} {
		w := exportPage(t, s, tt.owner, url.PathEscape(tt.id), tt.cursor)
		if w.Code != tt.status || !strings.Contains(w.Body.String(), `"code":"`+tt.code+`"`) {
			t.Errorf("%s exports %s (cursor %q): %d %s", tt.owner, tt.id, tt.cursor, w.Code, w.Body)
		}
	}
	if w := exportPage(t, s, "alice", "mine", ""); w.Code != 200 {
		t.Errorf("the owner's export: %d %s", w.Code, w.Body)
	}
}

// TestImportIdempotencyKey: a retry with the key and the same body gets
// the first answer, replayed, and creates nothing; the key with another
// body is refused; without a key, each import creates a session.
func TestImportIdempotencyKey(t *testing.T) {
	s := testkit.Start(t, testkit.Options{})
	doc := document(history(6))
	first := importDoc(t, s, "carol", doc, "import-1")
	a := imported(t, first)
	retry := importDoc(t, s, "carol", doc, "import-1")
	b := imported(t, retry)
	if a != b || retry.Header().Get("Idempotent-Replayed") != "true" || first.Header().Get("Idempotent-Replayed") != "" {
		t.Errorf("first %+v, retry %+v (replayed %q)", a, b, retry.Header().Get("Idempotent-Replayed"))
	}
	other := document(history(8))
	if w := importDoc(t, s, "carol", other, "import-1"); w.Code != http.StatusUnprocessableEntity || !strings.Contains(w.Body.String(), "idempotency_key_reused") {
		t.Errorf("the key with another document: %d %s", w.Code, w.Body)
	}
	// Another owner's key of the same name is another key.
	if c := imported(t, importDoc(t, s, "dave", doc, "import-1")); c.SessionID == a.SessionID {
		t.Errorf("dave's import got carol's id %s", c.SessionID)
	}
	x := imported(t, importDoc(t, s, "carol", doc, ""))
	y := imported(t, importDoc(t, s, "carol", doc, ""))
	if x.SessionID == y.SessionID {
		t.Errorf("two imports without a key share the id %s", x.SessionID)
	}
	list := s.Serve(testkit.As(httptest.NewRequestWithContext(t.Context(), http.MethodGet, "/sessions", nil), "carol"))
	if n := strings.Count(list.Body.String(), `"session_id"`); n != 3 {
		t.Errorf("carol has %d sessions, want 3: %s", n, list.Body)
	}
}

// TestExportImportEvents serves the sample events of the two routes, as
// API Gateway sends them, through the functions' adapter.
func TestExportImportEvents(t *testing.T) {
	a := newAPI(t, nil)
	doc := document(history(4))
	doc.Title = "question 0"
	if w := importDoc(t, a.Stack, "", as(doc, "demo-session"), ""); w.Code != http.StatusCreated {
		t.Fatalf("%d %s", w.Code, w.Body)
	}
	serve := func(name string) response {
		t.Helper()
		resp, err := a.chatFn(t.Context(), fixture(t, name))
		if err != nil {
			t.Fatal(err)
		}
		out := response{status: resp.StatusCode, headers: resp.Headers, raw: resp.Body}
		_ = json.Unmarshal([]byte(resp.Body), &out.body)
		return out
	}
	exp := serve("session-export.json")
	var got httpapi.SessionDocument
	strictDecode(t, []byte(exp.raw), &got)
	if diff := cmp.Diff(doc, got, sameSession); exp.status != 200 || diff != "" {
		t.Errorf("%d; export (-imported +exported):\n%s", exp.status, diff)
	}
	imp := serve("session-import.json")
	if imp.status != 201 || imp.body["session_id"] != "demo-import" || imp.body["message_count"] != 4.0 || imp.headers["Location"] != "/sessions/demo-import" {
		t.Errorf("%d %v %s", imp.status, imp.headers, imp.raw)
	}
	if again := serve("session-import.json"); again.status != 409 {
		t.Errorf("the sample again: %d %s", again.status, again.raw)
	}
}

// TestExportImportStateOnly round-trips a session that holds agent state
// and no messages, as an unrecorded direct call leaves it.
func TestExportImportStateOnly(t *testing.T) {
	s := testkit.Start(t, testkit.Options{})
	if w := toolCall(t, s, "", "state-only", "remember", `{"input":{"key":"colour","value":"teal"},"record":false}`, ""); w.Code != http.StatusOK {
		t.Fatalf("%d %s", w.Code, w.Body)
	}
	doc, _ := exportAll(t, s, "", "state-only")
	if len(doc.Messages) != 0 || doc.MessageCount != 0 || len(doc.State) != 1 {
		t.Fatalf("messages %v, message_count %d, state %v", doc.Messages, doc.MessageCount, doc.State)
	}
	got := imported(t, importDoc(t, s, "", doc, ""))
	again, _ := exportAll(t, s, "", got.SessionID)
	if diff := cmp.Diff(doc, again, sameSession); diff != "" {
		t.Errorf("export of the import (-first +second):\n%s", diff)
	}
	w := toolCall(t, s, "", got.SessionID, "recall", `{"input":{"key":"colour"},"record":false}`, "")
	if a := decodeAnswer(t, w); len(a.Content) != 1 || a.Content[0].Text != "teal" {
		t.Errorf("recall on the import: %s", w.Body)
	}
}

// importPage posts body to POST /sessions/{id}/import?token= as owner.
func importPage(t *testing.T, s *testkit.Stack, owner, id, token string, body any) *httptest.ResponseRecorder {
	t.Helper()
	raw, err := json.Marshal(body)
	if err != nil {
		t.Fatal(err)
	}
	r := httptest.NewRequestWithContext(t.Context(), http.MethodPost, "/sessions/"+id+"/import?token="+url.QueryEscape(token), bytes.NewReader(raw))
	return s.Serve(testkit.As(r, owner))
}

// progress decodes a 202 of an import in pages.
func progress(t *testing.T, w *httptest.ResponseRecorder) turn.ImportAnswer {
	t.Helper()
	if w.Code != http.StatusAccepted {
		t.Fatalf("page: %d %s", w.Code, w.Body)
	}
	var p turn.ImportAnswer
	strictDecode(t, w.Body.Bytes(), &p)
	return p
}

// TestImportInPages forwards the pages of an export of a long session to
// the import, one request each, as a session larger than one request is
// moved: the session appears whole with the last page, never before, and
// exports as it was.
func TestImportInPages(t *testing.T) {
	s := testkit.Start(t, testkit.Options{})
	msgs := history(2300)
	doc := document(msgs)
	doc.Title = "question 0"
	doc.Window.Removed = turnStart(t, msgs, len(msgs)-30)
	imported(t, importDoc(t, s, "", as(doc, "source"), ""))

	w := exportPage(t, s, "", "source", "")
	var first httpapi.SessionDocument
	strictDecode(t, w.Body.Bytes(), &first)
	body := map[string]any{}
	if err := json.Unmarshal(w.Body.Bytes(), &body); err != nil {
		t.Fatal(err)
	}
	body["new_session_id"] = "copy"
	p := progress(t, importDoc(t, s, "bob", body, ""))
	if p.SessionID != "copy" || p.ImportToken == "" || p.Received != httpapi.MaxPageSize || p.MessageCount != len(msgs) {
		t.Fatalf("first page: %+v", p)
	}
	var pages []httpapi.SessionDocumentPage
	for cursor := first.NextCursor; cursor != ""; {
		var page httpapi.SessionDocumentPage
		strictDecode(t, exportPage(t, s, "", "source", cursor).Body.Bytes(), &page)
		pages = append(pages, page)
		cursor = page.NextCursor
	}
	if len(pages) != 2 {
		t.Fatalf("%d pages after the first, want 2", len(pages))
	}
	if w := exportPage(t, s, "bob", "copy", ""); w.Code != http.StatusNotFound {
		t.Errorf("the session before its last page: %d %s", w.Code, w.Body)
	}
	p = progress(t, importPage(t, s, "bob", "copy", p.ImportToken, pages[0]))
	if p.Received != 2*httpapi.MaxPageSize {
		t.Errorf("after the second page: %+v", p)
	}
	// A page sent again is not stored twice; one that skips ahead is refused.
	if again := progress(t, importPage(t, s, "bob", "copy", p.ImportToken, pages[0])); again != p {
		t.Errorf("the second page again: %+v, want %+v", again, p)
	}
	skip := pages[1]
	far := *skip.First + 5
	skip.First = &far
	if w := importPage(t, s, "bob", "copy", p.ImportToken, skip); w.Code != http.StatusBadRequest || !strings.Contains(w.Body.String(), "invalid_session_document") {
		t.Errorf("a page past the end: %d %s", w.Code, w.Body)
	}
	if w := importPage(t, s, "mallory", "copy", p.ImportToken, pages[1]); w.Code != http.StatusNotFound {
		t.Errorf("another owner's page: %d %s", w.Code, w.Body)
	}
	got := imported(t, importPage(t, s, "bob", "copy", p.ImportToken, pages[1]))
	if got.SessionID != "copy" || got.MessageCount != len(msgs) {
		t.Errorf("last page: %+v", got)
	}
	copied, _ := exportAll(t, s, "bob", "copy")
	if diff := cmp.Diff(doc, copied, sameSession); diff != "" {
		t.Errorf("the imported session (-source +copy):\n%s", diff)
	}
	if w := importPage(t, s, "bob", "copy", p.ImportToken, pages[1]); w.Code != http.StatusNotFound || !strings.Contains(w.Body.String(), "import_not_found") {
		t.Errorf("the last page again: %d %s", w.Code, w.Body)
	}
	s.Model.Enqueue(conversetest.Text("ok"))
	chatAs(t, s, "bob", "copy", "one more")
}

// TestImportInPagesChecksAcrossPages: a page must follow the one before,
// a tool use split from its result by a page boundary included, and a
// staged import stays invisible and can be replaced.
func TestImportInPagesChecksAcrossPages(t *testing.T) {
	s := testkit.Start(t, testkit.Options{})
	msgs := history(10) // a tool use at 5, its result at 6
	zero, six := 0, 6
	start := func(id string) turn.ImportAnswer {
		doc := document(msgs[:6])
		doc.MessageCount, doc.NextCursor = len(msgs), "more"
		req := as(doc, id)
		return progress(t, importDoc(t, s, "", req, ""))
	}
	page := func(first int, m []agent.Message) httpapi.SessionDocumentPage {
		return httpapi.SessionDocumentPage{Format: httpapi.DocumentFormat, FormatVersion: 1, First: &first, Messages: m}
	}
	p := start("split")
	if w := importPage(t, s, "", "split", p.ImportToken, page(6, msgs[7:])); w.Code != http.StatusBadRequest || !strings.Contains(w.Body.String(), "messages[6]") {
		t.Errorf("a page that leaves the tool use unanswered: %d %s", w.Code, w.Body)
	}
	if w := importPage(t, s, "", "split", p.ImportToken, page(zero, msgs[:6])); w.Code != http.StatusAccepted {
		t.Errorf("the first page again, as a page: %d %s", w.Code, w.Body)
	}
	// A first that is not where the import stands, nor the page sent last
	// sent again, is named, and changes nothing.
	for _, tt := range []struct {
		first int
		msgs  []agent.Message
		says  string
	}{
		{-3, msgs[:6], "first is -3; a page's first is the index of its first message, from 0"},
		{-1, msgs[6:], "first is -1"},
		{2, append(slices.Clone(msgs[2:5]), agent.AssistantText("other")), "first is 2, but the import stands at 6, and the page is not the one sent last"},
		{0, msgs[:4], "first is 0, but the import stands at 6"},
		{7, msgs[7:], "first is 7, but the import holds 6 messages: send the page that starts at 6"},
	} {
		if w := importPage(t, s, "", "split", p.ImportToken, page(tt.first, tt.msgs)); w.Code != http.StatusBadRequest || !strings.Contains(w.Body.String(), tt.says) {
			t.Errorf("first %d: %d %s; want 400 saying %q", tt.first, w.Code, w.Body, tt.says)
		}
	}
	// A page that reaches the import's end, sent again, goes on from it.
	if w := importPage(t, s, "", "split", p.ImportToken, page(4, msgs[4:6])); w.Code != http.StatusAccepted {
		t.Errorf("the end of the first page again: %d %s", w.Code, w.Body)
	}
	if w := importPage(t, s, "", "split", "not-the-token", page(six, msgs[6:])); w.Code != http.StatusNotFound {
		t.Errorf("a wrong token: %d %s", w.Code, w.Body)
	}
	r := httptest.NewRequestWithContext(t.Context(), http.MethodPost, "/sessions/split/import?token="+p.ImportToken, strings.NewReader(`{"format":"lambda-agent/session","format_version":1,"first":6,"messages":[]}`))
	r.Header.Set("Idempotency-Key", "k")
	if w := s.Serve(r); w.Code != http.StatusBadRequest {
		t.Errorf("an Idempotency-Key on a page: %d %s", w.Code, w.Body)
	}
	// A second import under the id replaces the first, which can write
	// no more.
	q := start("split")
	if w := importPage(t, s, "", "split", p.ImportToken, page(six, msgs[6:])); w.Code != http.StatusNotFound {
		t.Errorf("the replaced import's last page: %d %s", w.Code, w.Body)
	}
	imported(t, importPage(t, s, "", "split", q.ImportToken, page(six, msgs[6:])))
	if got := transcriptOf(t, s, "", "split"); len(got) != len(msgs) {
		t.Errorf("%d messages stored, want %d", len(got), len(msgs))
	}
	// An import in pages never overwrites a session either.
	doc := document(msgs[:6])
	doc.MessageCount, doc.NextCursor = len(msgs), "more"
	if w := importDoc(t, s, "", as(doc, "split"), ""); w.Code != http.StatusConflict || !strings.Contains(w.Body.String(), "session_exists") {
		t.Errorf("a paged import onto a session: %d %s", w.Code, w.Body)
	}
	if got := transcriptOf(t, s, "", "split"); len(got) != len(msgs) {
		t.Errorf("after the refused import: %d messages", len(got))
	}
}

// TestImportRefusesWhatTheStoreCannotHold: more messages than one request
// may import, and a window, state and pending too large for the session
// item, are 413s before anything is written, for a whole document and the
// first page of one alike.
func TestImportRefusesWhatTheStoreCannotHold(t *testing.T) {
	s := testkit.Start(t, testkit.Options{})
	many := document(history(turn.MaxImportMessages + 1))
	summarized := func() httpapi.SessionDocument {
		msgs := history(12)
		d := document(msgs)
		d.Window.Removed = turnStart(t, msgs, 4)
		d.Window.Summary = strings.Repeat("a long summary ", 30_000) // 450 KB
		return d
	}
	paged := summarized()
	paged.MessageCount, paged.Messages, paged.NextCursor = len(paged.Messages), paged.Messages[:8], "more"
	for name, doc := range map[string]httpapi.SessionDocument{"too many messages": many, "a summary past the session item": summarized(), "a first page with it": paged} {
		w := importDoc(t, s, "", as(doc, "big"), "")
		if w.Code != http.StatusRequestEntityTooLarge || !strings.Contains(w.Body.String(), `"too_large"`) {
			t.Errorf("%s: %d %.300s", name, w.Code, w.Body)
		}
		if got := transcriptOf(t, s, "", "big"); got != nil {
			t.Errorf("%s: %d messages stored", name, len(got))
		}
	}
}

// TestImportInPagesWithAToolUseIDReused: a toolUse id used on two pages is
// stored, and the next turn's model, the strict stand-in, gets the reused
// id renamed.
func TestImportInPagesWithAToolUseIDReused(t *testing.T) {
	s := testkit.Start(t, testkit.Options{})
	use := func(k int) []agent.Message {
		return []agent.Message{
			agent.UserText(fmt.Sprintf("compute %d", k)),
			{Role: agent.RoleAssistant, Content: []agent.ContentBlock{{ToolUse: &agent.ToolUseBlock{ToolUseID: "same", Name: "calculator", Input: json.RawMessage(`{"expression":"1+1"}`)}}}},
			{Role: agent.RoleUser, Content: []agent.ContentBlock{{ToolResult: agent.TextResult("same", agent.ToolSuccess, "2")}}},
			agent.AssistantText("2"),
		}
	}
	msgs := append(use(1), use(2)...)
	if w := importDoc(t, s, "", as(document(msgs), "whole"), ""); w.Code != http.StatusBadRequest {
		t.Errorf("the reused id in one document: %d %s", w.Code, w.Body)
	}
	first := document(msgs[:4])
	first.MessageCount, first.NextCursor = len(msgs), "more"
	p := progress(t, importDoc(t, s, "", as(first, "reused"), ""))
	four := 4
	imported(t, importPage(t, s, "", "reused", p.ImportToken, httpapi.SessionDocumentPage{Format: httpapi.DocumentFormat, FormatVersion: 1, First: &four, Messages: msgs[4:]}))
	s.Model.Enqueue(conversetest.Text("ok"))
	chatAs(t, s, "", "reused", "and now?")
	if v := s.Model.Violations(); len(v) > 0 {
		t.Errorf("the model refused the history: %q", v)
	}
	seen := map[string]int{}
	for _, m := range lastRequest(t, s).Messages {
		for _, id := range wireUses(m) {
			seen[id]++
		}
	}
	if seen["same"] != 1 || len(seen) != 2 {
		t.Errorf("tool use ids the model saw: %v", seen)
	}
}
