package httpapi_test

import (
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/lambda-agent/lambda-agent/internal/agent"
	"github.com/lambda-agent/lambda-agent/internal/ddbhistory"
	"github.com/lambda-agent/lambda-agent/internal/httpapi"
	"github.com/lambda-agent/lambda-agent/internal/testkit"
	"github.com/lambda-agent/lambda-agent/internal/turn"
)

// twoAgents configures a researcher, to which delegating delegates, and a
// writer.
var twoAgents = map[string]string{
	"AGENTS": `[{"name":"researcher","description":"Researches.","system_prompt":"You research.","tools":[]},
		{"name":"writer","description":"Writes.","system_prompt":"You write.","tools":[]}]`,
}

// plain is n messages of plain turns, each of its text tagged.
func plain(n int, tag string) []agent.Message {
	var msgs []agent.Message
	for k := 0; len(msgs) < n; k++ {
		msgs = append(msgs, agent.UserText(fmt.Sprintf("%s question %d", tag, k)), agent.AssistantText(fmt.Sprintf("%s answer %d", tag, k)))
	}
	return msgs[:n]
}

// TestExportImportKeepsSubAgents exports a session whose researcher kept
// a conversation, imports it for another owner, and exports that: the
// same document, the researcher's conversation in it. The next delegation
// on the import goes on from the imported conversation, against the
// strict stand-in. A sub-agent with nothing stored is not in the
// document.
func TestExportImportKeepsSubAgents(t *testing.T) {
	s := testkit.Start(t, testkit.Options{Env: twoAgents})
	s.Model.Responder = delegating
	chatAs(t, s, "alice", "orig", "one")
	chatAs(t, s, "alice", "orig", "two")

	doc, pages := exportAll(t, s, "alice", "orig")
	if pages != 1 || len(doc.Messages) != 8 || doc.MessageCount != 8 {
		t.Fatalf("%d pages, %d messages of %d", pages, len(doc.Messages), doc.MessageCount)
	}
	if got := slices.Collect(maps.Keys(doc.Agents)); !slices.Equal(got, []string{"researcher"}) {
		t.Fatalf("the document's agents: %v, want the researcher alone", got)
	}
	r := doc.Agents["researcher"]
	want := []string{"Task one", "Task one, having seen 1 messages", "Task two", "Task two, having seen 3 messages"}
	if diff := cmp.Diff(want, texts(r.Messages)); diff != "" || r.MessageCount != 4 || r.State == nil || r.Window.Removed != 0 || r.Window.Summary != "" {
		t.Errorf("the researcher in the document: count %d, state %v, window %+v (-want +got):\n%s", r.MessageCount, r.State, r.Window, diff)
	}
	if diff := cmp.Diff(transcriptTexts(t, s, "alice", "orig", "researcher"), texts(r.Messages)); diff != "" {
		t.Errorf("the exported researcher differs from GET ?agent= (-get +export):\n%s", diff)
	}

	got := imported(t, importDoc(t, s, "bob", doc, ""))
	again, _ := exportAll(t, s, "bob", got.SessionID)
	if diff := cmp.Diff(doc, again, sameSession); diff != "" {
		t.Errorf("export of the import (-first +second):\n%s", diff)
	}
	chatAs(t, s, "bob", got.SessionID, "three")
	if texts := transcriptTexts(t, s, "bob", got.SessionID, "researcher"); len(texts) != 6 || texts[5] != "Task three, having seen 5 messages" {
		t.Errorf("the imported researcher after a delegation: %q", texts)
	}
	if n := len(transcriptTexts(t, s, "alice", "orig", "researcher")); n != 4 {
		t.Errorf("the original researcher has %d messages after a turn on its import", n)
	}
}

// TestImportRefusesBadSubAgents: a sub-agent's conversation is checked as
// strictly as the session's own, each problem named by its place under
// agents, and a sub-agent the agent does not have is refused; nothing is
// stored, of the session or of any agent.
func TestImportRefusesBadSubAgents(t *testing.T) {
	s := testkit.Start(t, testkit.Options{Env: twoAgents})
	base := func() httpapi.SessionDocument {
		d := document(history(6))
		msgs := history(12) // a tool use at 9, its result at 10
		d.Agents = map[string]*httpapi.AgentDocument{"researcher": {MessageCount: len(msgs), Messages: msgs, State: map[string]json.RawMessage{}}}
		return d
	}
	big := strings.Repeat("a", 4<<20)
	tests := []struct {
		name   string
		doc    func(d httpapi.SessionDocument) httpapi.SessionDocument
		status int
		code   string
		says   string
	}{
		{name: "an agent the agent does not have", doc: func(d httpapi.SessionDocument) httpapi.SessionDocument {
			d.Agents["critic"] = d.Agents["researcher"]
			return d
		}, code: "invalid_session_document", says: `agents.critic: there is no sub-agent "critic": the agent's sub-agents are researcher, writer`},
		{name: "roles do not alternate", doc: func(d httpapi.SessionDocument) httpapi.SessionDocument {
			d.Agents["researcher"].Messages[1] = agent.UserText("again")
			return d
		}, code: "invalid_session_document", says: `agents.researcher.messages[1].role: must be "assistant" after a user message`},
		{name: "unanswered tool use", doc: func(d httpapi.SessionDocument) httpapi.SessionDocument {
			d.Agents["researcher"].Messages[10] = agent.UserText("never mind")
			return d
		}, code: "invalid_session_document", says: `agents.researcher.messages[10].content: holds no toolResult for toolUse "u4" of messages[9]`},
		{name: "count", doc: func(d httpapi.SessionDocument) httpapi.SessionDocument {
			d.Agents["researcher"].MessageCount = 13
			return d
		}, code: "invalid_session_document", says: "agents.researcher.message_count is 13, but agents.researcher.messages holds 12"},
		{name: "no messages", doc: func(d httpapi.SessionDocument) httpapi.SessionDocument {
			d.Agents["researcher"] = &httpapi.AgentDocument{Messages: []agent.Message{}}
			return d
		}, code: "invalid_session_document", says: "agents.researcher.message_count is 0"},
		{name: "null", doc: func(d httpapi.SessionDocument) httpapi.SessionDocument {
			d.Agents["researcher"] = nil
			return d
		}, code: "invalid_session_document", says: "agents.researcher is null"},
		{name: "window past the messages", doc: func(d httpapi.SessionDocument) httpapi.SessionDocument {
			d.Agents["researcher"].Window.Removed = 13
			return d
		}, code: "invalid_session_document", says: "agents.researcher.window.removed is 13"},
		{name: "window inside a turn", doc: func(d httpapi.SessionDocument) httpapi.SessionDocument {
			d.Agents["researcher"].Window.Removed = 10
			return d
		}, code: "invalid_session_document", says: "agents.researcher.window.removed is 10, but messages[10] is not the start of a turn"},
		{name: "summary of nothing", doc: func(d httpapi.SessionDocument) httpapi.SessionDocument {
			d.Agents["researcher"].Window.Summary = "all of it"
			return d
		}, code: "invalid_session_document", says: "agents.researcher.window.summary is set"},
		{name: "state too large", doc: func(d httpapi.SessionDocument) httpapi.SessionDocument {
			d.Agents["researcher"].State = map[string]json.RawMessage{"notes": json.RawMessage(`"` + big[:70<<10] + `"`)}
			return d
		}, code: "invalid_session_document", says: "agents.researcher.state is 71"},
		{name: "message too large", doc: func(d httpapi.SessionDocument) httpapi.SessionDocument {
			d.Agents["researcher"].Messages[0] = agent.UserText(big)
			return d
		}, code: "invalid_session_document", says: "agents.researcher.messages[0] is 4194"},
		{name: "window past the conversation item", doc: func(d httpapi.SessionDocument) httpapi.SessionDocument {
			w := &d.Agents["researcher"].Window
			w.Removed, w.Summary = 4, strings.Repeat("a long summary ", 30_000) // 450 KB
			return d
		}, status: http.StatusRequestEntityTooLarge, code: "too_large", says: "agents.researcher: window and state are"},
		{name: "too many messages, the agents' included", doc: func(d httpapi.SessionDocument) httpapi.SessionDocument {
			msgs := plain(turn.MaxImportMessages, "r")
			d.Agents["researcher"] = &httpapi.AgentDocument{MessageCount: len(msgs), Messages: msgs, State: map[string]json.RawMessage{}}
			return d
		}, status: http.StatusRequestEntityTooLarge, code: "too_large", says: "its agents' included"},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			id := fmt.Sprintf("bad-agent-%d", i)
			w := importDoc(t, s, "", as(tt.doc(base()), id), "")
			status := tt.status
			if status == 0 {
				status = http.StatusBadRequest
			}
			if msg := errorMessageOf(t, w); w.Code != status || !strings.Contains(w.Body.String(), `"code":"`+tt.code+`"`) || !strings.Contains(msg, tt.says) {
				t.Errorf("%d %.400s\nwant %d %s saying %q", w.Code, w.Body, status, tt.code, tt.says)
			}
			if w := exportPage(t, s, "", id, ""); w.Code != http.StatusNotFound {
				t.Errorf("after a refused import, %s exports: %d", id, w.Code)
			}
			if n := agentItems(t, s); n != 0 {
				t.Errorf("%d items of agents stored by a refused import", n)
			}
		})
	}
	// An import in pages keeps the headers of the session and its agents
	// in one item until its last page: past it, its first page is a 413.
	paged := base()
	paged.MessageCount, paged.NextCursor = 20, "more"
	for _, name := range []string{"researcher", "writer"} {
		msgs := history(12)
		summary := base64.StdEncoding.EncodeToString(randomBytes(t, 220<<10)) // 300 KB that DEFLATE cannot shrink much
		paged.Agents[name] = &httpapi.AgentDocument{MessageCount: 12, Messages: msgs, State: map[string]json.RawMessage{}, Window: agent.WindowState{Removed: 4, Summary: summary}}
	}
	w := importDoc(t, s, "", as(paged, "big-headers"), "")
	if w.Code != http.StatusRequestEntityTooLarge || !strings.Contains(errorMessageOf(t, w), "the headers of the session and of its agents") {
		t.Errorf("a first page whose headers pass 400 KB: %d %.300s", w.Code, w.Body)
	}
	if w := exportPage(t, s, "", "big-headers", ""); w.Code != http.StatusNotFound || agentItems(t, s) != 0 {
		t.Errorf("after the refused first page: %d, %d items of agents", w.Code, agentItems(t, s))
	}
	// The document the cases break was valid.
	imported(t, importDoc(t, s, "", as(base(), "good"), ""))
	if got := transcriptTexts(t, s, "", "good", "researcher"); len(got) != 12 {
		t.Errorf("the researcher of the valid document: %q", got)
	}
}

// TestExportImportSubAgentsInPages exports a session whose conversations
// fill more than a page, the sub-agents' after the main agent's, and
// copies it page by page: each page holds at most MaxPageSize messages
// and goes on from one conversation to the next; a page full at the end
// of a conversation leaves its last message to the next, which so never
// starts with agents that may have nothing. The copy is invisible until
// its last page, a page sent again is not stored twice, one that does not
// follow an agent's conversation is named, and the copy exports as the
// source did.
func TestExportImportSubAgentsInPages(t *testing.T) {
	s := testkit.Start(t, testkit.Options{Env: twoAgents})
	doc := document(plain(1000, "main"))
	researcher, writer := history(1000)[:1000], plain(30, "writer")
	doc.Title = "main question 0"
	doc.Agents = map[string]*httpapi.AgentDocument{
		"researcher": {MessageCount: 1000, Messages: researcher, State: map[string]json.RawMessage{"n": json.RawMessage(`1`)}, Window: agent.WindowState{Removed: turnStart(t, researcher, 900)}},
		"writer":     {MessageCount: 30, Messages: writer, State: map[string]json.RawMessage{}},
	}
	imported(t, importDoc(t, s, "", as(doc, "source"), ""))

	w := exportPage(t, s, "", "source", "")
	var first httpapi.SessionDocument
	strictDecode(t, w.Body.Bytes(), &first)
	if len(first.Messages) != 999 || first.NextCursor == "" || len(first.Agents) != 2 || len(first.Agents["researcher"].Messages) != 0 || first.Agents["researcher"].MessageCount != 1000 || first.Agents["writer"].MessageCount != 30 {
		t.Fatalf("the first page: %d messages, next %q, agents %v", len(first.Messages), first.NextCursor, first.Agents)
	}
	var pages []httpapi.SessionDocumentPage
	for cursor := first.NextCursor; cursor != ""; {
		var page httpapi.SessionDocumentPage
		strictDecode(t, exportPage(t, s, "", "source", cursor).Body.Bytes(), &page)
		pages = append(pages, page)
		cursor = page.NextCursor
	}
	shape := func(p httpapi.SessionDocumentPage) string {
		out := fmt.Sprint(len(p.Messages))
		for _, name := range slices.Sorted(maps.Keys(p.Agents)) {
			out += fmt.Sprintf(" %s %d+%d", name, *p.Agents[name].First, len(p.Agents[name].Messages))
		}
		return out
	}
	var got []string
	for _, p := range pages {
		got = append(got, shape(p))
	}
	if diff := cmp.Diff([]string{"1 researcher 0+999", "0 researcher 999+1 writer 0+30"}, got); diff != "" {
		t.Errorf("the pages after the first (-want +got):\n%s", diff)
	}
	whole, _ := exportAll(t, s, "", "source")
	if diff := cmp.Diff(doc, whole, sameSession); diff != "" {
		t.Errorf("the reassembled export (-imported +exported):\n%s", diff)
	}

	// The copy, page by page.
	body := map[string]any{}
	if err := json.Unmarshal(w.Body.Bytes(), &body); err != nil {
		t.Fatal(err)
	}
	body["new_session_id"] = "copy"
	p := progress(t, importDoc(t, s, "bob", body, ""))
	if p.Received != 999 || p.MessageCount != 1000 {
		t.Fatalf("the first page's answer: %+v", p)
	}
	p = progress(t, importPage(t, s, "bob", "copy", p.ImportToken, pages[0]))
	if again := progress(t, importPage(t, s, "bob", "copy", p.ImportToken, pages[0])); again != p || p.Received != 1000 {
		t.Errorf("the second page, then again: %+v, %+v", p, again)
	}
	ahead := pages[1]
	ahead.Agents = map[string]*httpapi.AgentPart{"researcher": pages[1].Agents["researcher"], "writer": {First: new(5), Messages: writer[5:]}}
	if w := importPage(t, s, "bob", "copy", p.ImportToken, ahead); w.Code != http.StatusBadRequest || !strings.Contains(errorMessageOf(t, w), "agents.writer.first is 5, but the import holds 0 messages") {
		t.Errorf("a page ahead of the writer's conversation: %d %s", w.Code, w.Body)
	}
	short := pages[1]
	short.NextCursor, short.Agents = "", map[string]*httpapi.AgentPart{"researcher": pages[1].Agents["researcher"]}
	if w := importPage(t, s, "bob", "copy", p.ImportToken, short); w.Code != http.StatusBadRequest || !strings.Contains(errorMessageOf(t, w), "the import holds 0 messages of agents.writer, whose message_count is 30") {
		t.Errorf("a last page without the writer's: %d %s", w.Code, w.Body)
	}
	for _, path := range []string{"/sessions/copy", "/sessions/copy?agent=researcher"} {
		if w := getAs(t, s, "bob", path); w.Code != http.StatusNotFound {
			t.Errorf("%s before the last page: %d", path, w.Code)
		}
	}
	if done := imported(t, importPage(t, s, "bob", "copy", p.ImportToken, pages[1])); done.MessageCount != 1000 {
		t.Errorf("the last page's answer: %+v", done)
	}
	copied, _ := exportAll(t, s, "bob", "copy")
	if diff := cmp.Diff(doc, copied, sameSession); diff != "" {
		t.Errorf("the copy (-source +copy):\n%s", diff)
	}
}

// TestExportSubAgentsWithinLambdaLimits exports a sub-agent's messages
// whose JSON is mostly quotes, which take twice the room in Lambda's
// response event: pages are cut within a conversation to fit it, and
// still reassemble, and import page by page.
func TestExportSubAgentsWithinLambdaLimits(t *testing.T) {
	s := testkit.Start(t, testkit.Options{Env: twoAgents})
	quotes := strings.Repeat(`"`, 600<<10)
	var msgs []agent.Message
	for i := range 3 {
		msgs = append(msgs, agent.UserText(fmt.Sprintf("%d%s", i, quotes)), agent.AssistantText(fmt.Sprintf("%d%s", i, quotes)))
	}
	sess := ddbhistory.NewSession(ddbhistory.Key{Owner: "anonymous", ID: "quoted"})
	if err := s.DirectStore().Commit(t.Context(), sess, ddbhistory.Turn{Messages: plain(2, "main"), Agents: []ddbhistory.AgentTurn{{Name: "researcher", Messages: msgs}}}); err != nil {
		t.Fatal(err)
	}
	doc, pages := exportAll(t, s, "", "quoted") // checks each page's size
	if pages < 3 {
		t.Errorf("%d pages for %d bytes of quotes", pages, 6*len(quotes))
	}
	if diff := cmp.Diff(msgs, doc.Agents["researcher"].Messages); diff != "" {
		t.Errorf("the researcher's messages (-stored +exported):\n%s", diff)
	}

	w := exportPage(t, s, "", "quoted", "")
	body := map[string]any{}
	if err := json.Unmarshal(w.Body.Bytes(), &body); err != nil {
		t.Fatal(err)
	}
	body["new_session_id"] = "quoted-copy"
	p := progress(t, importDoc(t, s, "", body, ""))
	for cursor := body["next_cursor"].(string); cursor != ""; {
		var page httpapi.SessionDocumentPage
		strictDecode(t, exportPage(t, s, "", "quoted", cursor).Body.Bytes(), &page)
		w := importPage(t, s, "", "quoted-copy", p.ImportToken, page)
		if cursor = page.NextCursor; cursor != "" {
			progress(t, w)
		} else {
			imported(t, w)
		}
	}
	copied, _ := exportAll(t, s, "", "quoted-copy")
	if diff := cmp.Diff(doc, copied, sameSession); diff != "" {
		t.Errorf("the copy (-source +copy):\n%s", diff)
	}
}

// randomBytes is n random bytes.
func randomBytes(t *testing.T, n int) []byte {
	t.Helper()
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return b
}
