package httpapi_test

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/lambda-agent/lambda-agent/internal/agent"
	"github.com/lambda-agent/lambda-agent/internal/httpapi"
	"github.com/lambda-agent/lambda-agent/internal/testkit"
	"github.com/lambda-agent/lambda-agent/internal/testkit/conversetest"
)

// texts lists each message's text, tool uses and results as a name.
func texts(msgs []agent.Message) []string {
	out := make([]string, len(msgs))
	for i, m := range msgs {
		switch {
		case m.HasToolResults():
			out[i] = "result"
		case m.Text() == "" && len(m.Content) > 0 && m.Content[0].ToolUse != nil:
			out[i] = "use " + m.Content[0].ToolUse.Name
		default:
			out[i] = m.Text()
		}
	}
	return out
}

// lastPrompt is the text of the last user message the model saw.
func lastPrompt(t *testing.T, s *testkit.Stack) string {
	t.Helper()
	reqs := s.Model.Requests()
	msgs := reqs[len(reqs)-1].Messages
	var sb strings.Builder
	for _, c := range msgs[len(msgs)-1].Content {
		sb.WriteString(c.Text)
	}
	return sb.String()
}

// seedTurns runs a plain turn, then a tool turn, on session.
func seedTurns(t *testing.T, s *testkit.Stack, session string) {
	t.Helper()
	s.Model.Enqueue(conversetest.Text("hello"),
		conversetest.ToolUse("t1", "calculator", map[string]any{"expression": "6*7"}),
		conversetest.Text("42"))
	for _, msg := range []string{"hi", "what is 6*7?"} {
		if w := postJSON(t, s, "/chat", `{"session_id":"`+session+`","message":"`+msg+`"}`); w.Code != http.StatusOK {
			t.Fatalf("%s: %d %s", msg, w.Code, w.Body)
		}
	}
}

// TestRegenerateReplacesTheLastTurn regenerates a tool turn: the model sees
// the history up to the last user message, the new turn replaces the old
// one in one commit, and the next turn builds on the new one.
func TestRegenerateReplacesTheLastTurn(t *testing.T) {
	s := testkit.Start(t, testkit.Options{})
	seedTurns(t, s, "regen")
	if got, want := texts(transcriptOf(t, s, "", "regen")), []string{"hi", "hello", "what is 6*7?", "use calculator", "result", "42"}; !cmp.Equal(got, want) {
		t.Fatalf("before: %q", got)
	}
	s.Model.Enqueue(conversetest.Text("forty-two"))
	w := postJSON(t, s, "/chat", `{"session_id":"regen","regenerate":true}`)
	if w.Code != http.StatusOK {
		t.Fatalf("%d %s", w.Code, w.Body)
	}
	var a httpapi.ChatResponse
	if err := json.Unmarshal(w.Body.Bytes(), &a); err != nil {
		t.Fatal(err)
	}
	if a.Text != "forty-two" || a.RewoundTo == nil || *a.RewoundTo != 2 || len(a.Messages) != 2 {
		t.Errorf("answer: text %q rewound_to %v, %d messages", a.Text, a.RewoundTo, len(a.Messages))
	}
	if got := lastPrompt(t, s); got != "what is 6*7?" {
		t.Errorf("the model was asked %q", got)
	}
	if n := len(s.Model.Requests()[len(s.Model.Requests())-1].Messages); n != 3 {
		t.Errorf("the model saw %d messages, want 3: the old turn's answer is gone", n)
	}
	if got, want := texts(transcriptOf(t, s, "", "regen")), []string{"hi", "hello", "what is 6*7?", "forty-two"}; !cmp.Equal(got, want) {
		t.Errorf("after: %q, want %q", got, want)
	}
	s.Model.Enqueue(conversetest.Text("bye"))
	if w := postJSON(t, s, "/chat", `{"session_id":"regen","message":"thanks"}`); w.Code != http.StatusOK {
		t.Fatalf("next turn: %d %s", w.Code, w.Body)
	}
	if got, want := texts(transcriptOf(t, s, "", "regen")), []string{"hi", "hello", "what is 6*7?", "forty-two", "thanks", "bye"}; !cmp.Equal(got, want) {
		t.Errorf("next turn: %q, want %q", got, want)
	}
	if v := s.Model.Violations(); len(v) > 0 {
		t.Errorf("the model refused: %q", v)
	}
}

// TestEditRunsTheNewMessage edits the first user message: everything from
// it on is replaced by the edited turn.
func TestEditRunsTheNewMessage(t *testing.T) {
	s := testkit.Start(t, testkit.Options{})
	seedTurns(t, s, "edit")
	s.Model.Enqueue(conversetest.Text("hi there"))
	w := postJSON(t, s, "/chat", `{"session_id":"edit","edit":{"from":0,"message":"hello!"}}`)
	if w.Code != http.StatusOK {
		t.Fatalf("%d %s", w.Code, w.Body)
	}
	if got := lastPrompt(t, s); got != "hello!" {
		t.Errorf("the model was asked %q", got)
	}
	if got, want := texts(transcriptOf(t, s, "", "edit")), []string{"hello!", "hi there"}; !cmp.Equal(got, want) {
		t.Errorf("after: %q, want %q", got, want)
	}
	var list struct {
		Sessions []struct {
			ID    string `json:"session_id"`
			Title string `json:"title"`
		} `json:"sessions"`
	}
	lw := s.Serve(httptest.NewRequestWithContext(t.Context(), http.MethodGet, "/sessions", nil))
	if err := json.Unmarshal(lw.Body.Bytes(), &list); err != nil || len(list.Sessions) != 1 || list.Sessions[0].Title != "hello!" {
		t.Errorf("the title follows the edited first message: %s", lw.Body)
	}
}

// TestRewindDiscards rewinds to the start of the second turn: GET no longer
// returns the discarded messages, the model never sees them again, and a
// retry of the rewound turn's request finds it gone.
func TestRewindDiscards(t *testing.T) {
	s := testkit.Start(t, testkit.Options{})
	s.Model.Enqueue(conversetest.Text("hello"), conversetest.Text("second answer"))
	postJSON(t, s, "/chat", `{"session_id":"rw","message":"hi"}`)
	keyed := func() *httptest.ResponseRecorder {
		r := httptest.NewRequestWithContext(t.Context(), http.MethodPost, "/chat", strings.NewReader(`{"session_id":"rw","message":"second"}`))
		r.Header.Set("Idempotency-Key", "k-second")
		return s.Serve(r)
	}
	if w := keyed(); w.Code != http.StatusOK {
		t.Fatalf("%d %s", w.Code, w.Body)
	}
	w := postJSON(t, s, "/sessions/rw/rewind", `{"to":2}`)
	if w.Code != http.StatusOK {
		t.Fatalf("rewind: %d %s", w.Code, w.Body)
	}
	var a httpapi.RewindResponse
	if err := json.Unmarshal(w.Body.Bytes(), &a); err != nil || a.MessageCount != 2 || a.Discarded != 2 || a.SessionID != "rw" {
		t.Errorf("rewind answer %s", w.Body)
	}
	if got, want := texts(transcriptOf(t, s, "", "rw")), []string{"hi", "hello"}; !cmp.Equal(got, want) {
		t.Errorf("after: %q, want %q", got, want)
	}
	if w := keyed(); w.Code != http.StatusNotFound {
		t.Errorf("a retry of the rewound turn: %d %s, want 404", w.Code, w.Body)
	}
	// Each page says the index of its first message, as rewinds name them.
	var page struct {
		First      int    `json:"first"`
		NextCursor string `json:"next_cursor"`
	}
	for i, cursor := 0, ""; i < 2; i++ {
		w := s.Serve(httptest.NewRequestWithContext(t.Context(), http.MethodGet, "/sessions/rw?limit=1&cursor="+cursor, nil))
		if err := json.Unmarshal(w.Body.Bytes(), &page); err != nil || page.First != i {
			t.Errorf("page %d: %s", i, w.Body)
		}
		cursor = page.NextCursor
	}
	s.Model.Enqueue(conversetest.Text("third answer"))
	postJSON(t, s, "/chat", `{"session_id":"rw","message":"third"}`)
	reqs := s.Model.Requests()
	for _, m := range reqs[len(reqs)-1].Messages {
		for _, c := range m.Content {
			if strings.Contains(c.Text, "second") {
				t.Errorf("the model saw a discarded message: %q", c.Text)
			}
		}
	}
}

// TestRewindRefusals: a rewind that would split a turn, or that names no
// message, is a 400 that changes nothing; another owner's session is a 404.
func TestRewindRefusals(t *testing.T) {
	s := testkit.Start(t, testkit.Options{})
	seedTurns(t, s, "refuse")
	before := transcriptOf(t, s, "", "refuse")
	for _, tt := range []struct {
		path, body, owner string
		status            int
		code              string
	}{
		{"/sessions/refuse/rewind", `{"to":1}`, "", 400, "invalid_rewind"},   // an assistant message
		{"/sessions/refuse/rewind", `{"to":4}`, "", 400, "invalid_rewind"},   // a tool result
		{"/sessions/refuse/rewind", `{"to":6}`, "", 400, "invalid_rewind"},   // past the end
		{"/sessions/refuse/rewind", `{"to":-1}`, "", 400, "invalid_rewind"},  // negative
		{"/sessions/refuse/rewind", `{}`, "", 400, "invalid_request"},        // no to
		{"/sessions/refuse/rewind", `{"to":"2"}`, "", 400, "invalid_json"},   // wrong type
		{"/sessions/refuse/rewind", `{"to":2}`, "mallory", 404, "not_found"}, // another owner
		{"/sessions/nobody/rewind", `{"to":0}`, "", 404, "not_found"},        // no session
		{"/chat", `{"session_id":"refuse","edit":{"from":3,"message":"x"}}`, "", 400, "invalid_rewind"},
		{"/chat", `{"session_id":"refuse","edit":{"message":"x"}}`, "", 400, "invalid_request"},
		{"/chat", `{"session_id":"refuse","edit":{"from":0}}`, "", 400, "invalid_request"},
		{"/chat", `{"session_id":"refuse","regenerate":true,"message":"x"}`, "", 400, "invalid_request"},
		{"/chat", `{"regenerate":true}`, "", 400, "invalid_request"},
		{"/chat", `{"session_id":"nobody","regenerate":true}`, "", 404, "not_found"},
		{"/chat", `{"session_id":"refuse","regenerate":true}`, "mallory", 404, "not_found"},
	} {
		r := httptest.NewRequestWithContext(t.Context(), http.MethodPost, tt.path, strings.NewReader(tt.body))
		w := s.Serve(testkit.As(r, tt.owner))
		if w.Code != tt.status || !strings.Contains(w.Body.String(), `"code":"`+tt.code+`"`) {
			t.Errorf("%s %s as %q: %d %s, want %d %s", tt.path, tt.body, tt.owner, w.Code, w.Body, tt.status, tt.code)
		}
	}
	if after := transcriptOf(t, s, "", "refuse"); !cmp.Equal(texts(after), texts(before)) {
		t.Errorf("a refused request changed the session: %q", texts(after))
	}
	if s.Model.Pending() != 0 {
		t.Errorf("a refused request called the model")
	}
}

// TestRewindPastASummaryDropsIt: with a summarizing manager, a rewind to a
// message the summary covered drops the summary and restarts the window at
// the first message; the next turn's model call sees the kept messages, or
// a new summary of them, and never a discarded one.
func TestRewindPastASummaryDropsIt(t *testing.T) {
	s := testkit.Start(t, testkit.Options{Env: map[string]string{
		"CONVERSATION_MANAGER": "summarizing", "WINDOW_SIZE": "4", "PRESERVE_RECENT_MESSAGES": "2",
	}})
	var summaries atomic.Int32
	s.Model.Responder = func(req *conversetest.Request) conversetest.Reply {
		if len(req.System) > 0 && strings.Contains(req.System[0].Text, "summarize") {
			summaries.Add(1)
			return conversetest.Text("SUMMARY of earlier lines")
		}
		return conversetest.Text("answer")
	}
	for i := range 5 {
		body := `{"session_id":"sum","message":"message ` + string(rune('a'+i)) + `"}`
		if w := postJSON(t, s, "/chat", body); w.Code != http.StatusOK {
			t.Fatalf("turn %d: %d %s", i, w.Code, w.Body)
		}
	}
	var sess struct {
		Summary *string `json:"summary"`
		W       struct {
			Removed    int  `json:"removed"`
			Summarized bool `json:"summarized"`
		} `json:"window"`
	}
	read := func() {
		w := s.Serve(httptest.NewRequestWithContext(t.Context(), http.MethodGet, "/sessions/sum", nil))
		if err := json.Unmarshal(w.Body.Bytes(), &sess); err != nil {
			t.Fatal(err)
		}
	}
	read()
	if summaries.Load() == 0 || !sess.W.Summarized || sess.W.Removed < 2 {
		t.Fatalf("no summary to drop: %d summaries, window %+v", summaries.Load(), sess.W)
	}
	w := postJSON(t, s, "/sessions/sum/rewind", `{"to":2}`)
	if w.Code != http.StatusOK || !strings.Contains(w.Body.String(), `"window":{"removed":0,"summarized":false}`) {
		t.Fatalf("rewind: %d %s", w.Code, w.Body)
	}
	read()
	if sess.Summary != nil || sess.W.Removed != 0 {
		t.Errorf("after the rewind: summary %v, window %+v; want none, from message 0", sess.Summary, sess.W)
	}
	if w := postJSON(t, s, "/chat", `{"session_id":"sum","message":"message z"}`); w.Code != http.StatusOK {
		t.Fatalf("next turn: %d %s", w.Code, w.Body)
	}
	reqs := s.Model.Requests()
	last := reqs[len(reqs)-1]
	var seen []string
	for _, m := range last.Messages {
		for _, c := range m.Content {
			seen = append(seen, c.Text)
		}
	}
	joined := strings.Join(seen, "|")
	for _, gone := range []string{"message b", "message c", "message d", "message e", "SUMMARY"} {
		if strings.Contains(joined, gone) {
			t.Errorf("the next turn's model saw %q: %q", gone, joined)
		}
	}
	if !strings.Contains(joined, "message a") || !strings.Contains(joined, "message z") {
		t.Errorf("the next turn's model did not see the kept message and the new one: %q", joined)
	}
	if v := s.Model.Violations(); len(v) > 0 {
		t.Errorf("the model refused: %q", v)
	}
}

// TestStreamRegenerateAndEdit: the stream takes regenerate and edit. The
// new answer streams; done comes after the commit, whose history replaces
// the old turn.
func TestStreamRegenerateAndEdit(t *testing.T) {
	a := newAPI(t, nil)
	srv := a.streamServer(t)
	a.model.Enqueue(conversetest.Text("first"), conversetest.Text("second"))
	a.chat(t, "", "st", "one")
	a.chat(t, "", "st", "two")
	a.model.Enqueue(conversetest.Text("second, again").WithChunking(4, 0))
	evs := streamAll(t, srv, map[string]any{"session_id": "st", "regenerate": true}, nil)
	done := evs[len(evs)-1].data
	if got := names(evs); got != "start text done" || done["text"] != "second, again" || done["rewound_to"] != 2.0 {
		t.Fatalf("regenerate: events %s, done %v", got, done)
	}
	if strings.Join(deltas(evs), "") != "second, again" {
		t.Errorf("deltas %q", deltas(evs))
	}
	if got, want := storedTexts(t, a, "st"), []string{"one", "first", "two", "second, again"}; !cmp.Equal(got, want) {
		t.Errorf("after regenerate: %q, want %q", got, want)
	}
	a.model.Enqueue(conversetest.Text("edited answer"))
	evs = streamAll(t, srv, map[string]any{"session_id": "st", "edit": map[string]any{"from": 0, "message": "uno"}}, nil)
	if done := evs[len(evs)-1].data; done["text"] != "edited answer" || done["rewound_to"] != 0.0 {
		t.Fatalf("edit: done %v", done)
	}
	if got, want := storedTexts(t, a, "st"), []string{"uno", "edited answer"}; !cmp.Equal(got, want) {
		t.Errorf("after edit: %q, want %q", got, want)
	}
	resp := stream(t, srv, map[string]any{"session_id": "st", "edit": map[string]any{"from": 1, "message": "x"}}, nil)
	if resp.StatusCode != http.StatusBadRequest {
		t.Errorf("an edit of an answer: %d, want 400 before the stream", resp.StatusCode)
	}
}

// storedTexts lists the texts of a session's stored messages.
func storedTexts(t *testing.T, a *api, session string) []string {
	t.Helper()
	var out []string
	for _, m := range messagesOf(a.transcript(t, "", session)) {
		var msg agent.Message
		raw, _ := json.Marshal(m)
		if err := json.Unmarshal(raw, &msg); err != nil {
			t.Fatal(err)
		}
		out = append(out, msg.Text())
	}
	return out
}
