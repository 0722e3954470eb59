package httpapi_test

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/lambda-agent/lambda-agent/internal/testkit/conversetest"
)

func TestMultiTurnChatKeepsHistory(t *testing.T) {
	a := newAPI(t, nil)
	first := a.chat(t, "", "", "Hello")
	if first.status != 200 {
		t.Fatalf("first turn: %d %s", first.status, first.raw)
	}
	id, _ := first.body["session_id"].(string)
	if !strings.HasPrefix(id, "s-") || first.body["text"] != "seen 1 messages" || first.body["stop_reason"] != "end_turn" {
		t.Errorf("first answer: %s", first.raw)
	}
	usage, _ := first.body["usage"].(map[string]any)
	metrics, _ := first.body["metrics"].(map[string]any)
	if usage["total_tokens"].(float64) <= 0 || metrics["cycles"].(float64) != 1 || metrics["duration_ms"] == nil {
		t.Errorf("usage %v, metrics %v", usage, metrics)
	}

	second := a.chat(t, "", id, "Again")
	if second.status != 200 || second.body["text"] != "seen 3 messages" {
		t.Fatalf("second turn did not see the first: %d %s", second.status, second.raw)
	}
	if got := len(messagesOf(second)); got != 2 {
		t.Errorf("second turn returned %d messages, want the 2 it added", got)
	}
	tr := a.transcript(t, "", id)
	if tr.status != 200 || len(messagesOf(tr)) != 4 || tr.body["session_id"] != id {
		t.Errorf("transcript: %d %s", tr.status, tr.raw)
	}
}

func TestModelSeesABoundedWindowWhileGETReturnsEverything(t *testing.T) {
	a := newAPI(t, map[string]string{"WINDOW_SIZE": "4"})
	for i := range 6 {
		if r := a.chat(t, "", "bounded", fmt.Sprintf("message %d", i)); r.status != 200 {
			t.Fatalf("turn %d: %d %s", i, r.status, r.raw)
		}
	}
	reqs := a.model.Requests()
	if got := len(reqs[len(reqs)-1].Messages); got > 4 {
		t.Errorf("the model saw %d messages; the window is 4", got)
	}
	tr := a.transcript(t, "", "bounded")
	if got := len(messagesOf(tr)); got != 12 {
		t.Errorf("GET returned %d messages, want all 12", got)
	}
	window, _ := tr.body["window"].(map[string]any)
	if window["removed"].(float64) < 8 {
		t.Errorf("window %v", window)
	}
}

func TestCalculatorRoundTrip(t *testing.T) {
	a := newAPI(t, nil)
	a.model.Enqueue(
		conversetest.Text("Let me compute that.").WithToolUse("calc-1", "calculator", map[string]string{"expression": "25*48"}),
		conversetest.Text("25 × 48 = 1200."),
	)
	r := a.invoke(t, request{route: "chat-tool.json"})
	if r.status != 200 || r.body["text"] != "25 × 48 = 1200." {
		t.Fatalf("%d %s", r.status, r.raw)
	}
	msgs := messagesOf(r)
	result := msgs[2].(map[string]any)["content"].([]any)[0].(map[string]any)["toolResult"].(map[string]any)
	if got := result["content"].([]any)[0].(map[string]any)["json"].(map[string]any)["result"]; got != 1200.0 {
		t.Errorf("calculator result %v, want 1200", got)
	}
	if r.body["metrics"].(map[string]any)["tool_calls"] != 1.0 {
		t.Errorf("metrics %v", r.body["metrics"])
	}
}

func TestParallelToolUses(t *testing.T) {
	a := newAPI(t, nil)
	a.model.Enqueue(
		conversetest.ToolUse("a", "calculator", map[string]string{"expression": "2^10"}).
			WithToolUse("b", "current_time", map[string]string{"timezone": "Asia/Tokyo"}).
			WithToolUse("c", "calculator", map[string]string{"expression": "7 % 4"}),
		conversetest.Text("Done."),
	)
	r := a.chat(t, "", "parallel", "Do three things")
	if r.status != 200 {
		t.Fatalf("%d %s", r.status, r.raw)
	}
	results := messagesOf(r)[2].(map[string]any)["content"].([]any)
	var ids []string
	for _, b := range results {
		tr := b.(map[string]any)["toolResult"].(map[string]any)
		ids = append(ids, tr["toolUseId"].(string))
		if tr["status"] != "success" {
			t.Errorf("result %v", tr)
		}
	}
	if strings.Join(ids, ",") != "a,b,c" {
		t.Errorf("results in order %v", ids)
	}
}

func TestRememberThenRecallInTheNextInvocation(t *testing.T) {
	a := newAPI(t, nil)
	a.model.Enqueue(
		conversetest.ToolUse("r1", "remember", map[string]string{"key": "colour", "value": "teal"}),
		conversetest.Text("I'll remember."),
	)
	if r := a.invoke(t, request{route: "chat-jwt.json", owner: "ada"}); r.status != 200 {
		t.Fatalf("%d %s", r.status, r.raw)
	}
	a.model.Enqueue(
		conversetest.ToolUse("r2", "recall", map[string]string{"key": "colour"}),
		conversetest.Text("Teal."),
	)
	r := a.chat(t, "ada", "jwt-session", "What is my favourite colour?")
	if r.status != 200 {
		t.Fatalf("%d %s", r.status, r.raw)
	}
	tr := messagesOf(r)[2].(map[string]any)["content"].([]any)[0].(map[string]any)["toolResult"].(map[string]any)
	if got := tr["content"].([]any)[0].(map[string]any)["text"]; got != "teal" {
		t.Errorf("recall gave %v", got)
	}
	state := a.transcript(t, "ada", "jwt-session").body["state"].(map[string]any)
	if state["memory:colour"] != "teal" {
		t.Errorf("state %v", state)
	}
}

func TestStructuredOutput(t *testing.T) {
	a := newAPI(t, nil)
	a.model.Enqueue(
		conversetest.ToolUse("p1", "person", map[string]any{"name": "Ada Lovelace", "born": "1815"}),
		conversetest.ToolUse("p2", "person", map[string]any{"name": "Ada Lovelace", "born": 1815, "city": "London"}),
	)
	r := a.invoke(t, request{route: "structured.json"})
	if r.status != 200 {
		t.Fatalf("%d %s", r.status, r.raw)
	}
	data := r.body["data"].(map[string]any)
	if data["name"] != "Ada Lovelace" || data["born"] != 1815.0 || r.body["attempts"] != 2.0 || r.body["session_id"] != "demo-structured" {
		t.Errorf("answer %s", r.raw)
	}
	// The exchange is in the session, so a chat can follow up on it.
	follow := a.chat(t, "", "demo-structured", "Where was she born?")
	if follow.status != 200 {
		t.Fatalf("follow-up: %d %s", follow.status, follow.raw)
	}
	last := a.model.Requests()[2]
	if got := last.Messages[1].Text(); !strings.Contains(got, `"born":1815`) {
		t.Errorf("the follow-up did not see the object: %q", got)
	}
}

func TestStructuredOutputFailure(t *testing.T) {
	a := newAPI(t, nil)
	a.model.Responder = func(*conversetest.Request) conversetest.Reply {
		return conversetest.ToolUse(fmt.Sprintf("p%d", a.model.Calls()), "person", map[string]any{"born": -5})
	}
	r := a.invoke(t, request{route: "structured.json"})
	if r.status != 422 || r.errorCode() != "structured_output_failed" {
		t.Fatalf("%d %s", r.status, r.raw)
	}
	details := r.body["error"].(map[string]any)["details"].(map[string]any)
	errs := fmt.Sprint(details["errors"])
	if details["attempts"] != 3.0 || !strings.Contains(errs, "name") || !strings.Contains(errs, "minimum") {
		t.Errorf("details %v", details)
	}
	if tr := a.transcript(t, "", "demo-structured"); tr.status != 404 {
		t.Errorf("a failed structured turn was stored: %d %s", tr.status, tr.raw)
	}
	// The failed turn's tokens are billed, so its log line reports them.
	lines := strings.Split(strings.TrimSpace(a.logs.String()), "\n")
	var failed map[string]any
	if err := json.Unmarshal([]byte(lines[0]), &failed); err != nil {
		t.Fatal(err)
	}
	if failed["status"] != 422.0 || failed["input_tokens"] == nil || failed["model_calls"] != 3.0 {
		t.Errorf("log line of the failed turn: %s", lines[0])
	}
}

func TestRacingTurnsGet409AndLoseNothing(t *testing.T) {
	a := newAPI(t, nil)
	if r := a.chat(t, "", "race", "first"); r.status != 200 {
		t.Fatal(r.raw)
	}
	a.model.Responder = func(r *conversetest.Request) conversetest.Reply {
		return conversetest.Text("reply to " + r.Messages[len(r.Messages)-1].Text()).WithDelay(50 * time.Millisecond)
	}
	var (
		wg     sync.WaitGroup
		mu     sync.Mutex
		won    = map[string]bool{}
		others []int
	)
	for i := range 8 {
		wg.Go(func() {
			msg := fmt.Sprintf("racer %d", i)
			r := a.chat(t, "", "race", msg)
			mu.Lock()
			defer mu.Unlock()
			switch r.status {
			case 200:
				won[msg] = true
			case 409:
				if r.errorCode() != "conflict" {
					t.Errorf("409 with code %q", r.errorCode())
				}
			default:
				others = append(others, r.status)
			}
		})
	}
	wg.Wait()
	if len(others) > 0 || len(won) == 0 {
		t.Fatalf("statuses other than 200/409: %v; %d won", others, len(won))
	}
	msgs := messagesOf(a.transcript(t, "", "race"))
	if len(msgs) != 2+2*len(won) {
		t.Fatalf("%d messages stored for %d successful turns", len(msgs), len(won))
	}
	for i := 2; i < len(msgs); i += 2 {
		q := msgs[i].(map[string]any)["content"].([]any)[0].(map[string]any)["text"].(string)
		ans := msgs[i+1].(map[string]any)["content"].([]any)[0].(map[string]any)["text"].(string)
		if !won[q] || ans != "reply to "+q {
			t.Errorf("stored turn %q / %q is not one that succeeded", q, ans)
		}
	}
}

func TestOwnerIsolation(t *testing.T) {
	a := newAPI(t, nil)
	if r := a.chat(t, "alice", "alices-chat", "secret plans"); r.status != 200 {
		t.Fatal(r.raw)
	}
	calls := a.model.Calls()
	for _, owner := range []string{"bob", ""} {
		if r := a.transcript(t, owner, "alices-chat"); r.status != 404 {
			t.Errorf("%q GET: %d %s", owner, r.status, r.raw)
		}
		if r := a.invoke(t, request{route: "session-delete.json", session: "alices-chat", owner: owner}); r.status != 404 {
			t.Errorf("%q DELETE: %d %s", owner, r.status, r.raw)
		}
		if r := a.chat(t, owner, "alices-chat", "let me in"); r.status != 404 || r.errorCode() != "not_found" {
			t.Errorf("%q POST: %d %s", owner, r.status, r.raw)
		}
	}
	tr := a.transcript(t, "alice", "alices-chat")
	if tr.status != 200 || len(messagesOf(tr)) != 2 {
		t.Errorf("alice's session changed: %s", tr.raw)
	}
	if a.model.Calls() != calls {
		t.Errorf("posts to another owner's session called the model %d times", a.model.Calls()-calls)
	}
}

func TestDeleteSession(t *testing.T) {
	a := newAPI(t, nil)
	if r := a.invoke(t, request{route: "chat-continue.json"}); r.status != 200 {
		t.Fatal(r.raw)
	}
	r := a.invoke(t, request{route: "session-delete.json"})
	if r.status != 204 || r.raw != "" {
		t.Fatalf("DELETE: %d %q", r.status, r.raw)
	}
	if r := a.invoke(t, request{route: "session-get.json"}); r.status != 404 {
		t.Errorf("GET after DELETE: %d", r.status)
	}
	if r := a.invoke(t, request{route: "session-delete.json"}); r.status != 404 {
		t.Errorf("second DELETE: %d", r.status)
	}
}

func TestTranscriptPages(t *testing.T) {
	a := newAPI(t, nil)
	for i := range 3 {
		a.chat(t, "", "paged", fmt.Sprintf("m%d", i))
	}
	var all []any
	cursor := ""
	for pages := 0; ; pages++ {
		q := map[string]string{"limit": "4"}
		if cursor != "" {
			q["cursor"] = cursor
		}
		r := a.invoke(t, request{route: "session-get.json", session: "paged", query: q})
		if r.status != 200 || pages > 3 {
			t.Fatalf("page %d: %d %s", pages, r.status, r.raw)
		}
		all = append(all, messagesOf(r)...)
		c, _ := r.body["next_cursor"].(string)
		if c == "" {
			break
		}
		cursor = c
	}
	if len(all) != 6 {
		t.Errorf("%d messages over the pages, want 6", len(all))
	}
}

func TestIdempotentReplayDoesNotCallTheModel(t *testing.T) {
	for _, session := range []string{"idem-session", ""} {
		t.Run(fmt.Sprintf("session %q", session), func(t *testing.T) {
			a := newAPI(t, nil)
			body := map[string]any{"message": "charge my card once"}
			if session != "" {
				body["session_id"] = session
			}
			req := request{route: "chat-new.json", body: body, headers: map[string]string{"Idempotency-Key": "order-42"}}
			first := a.invoke(t, req)
			if first.status != 200 {
				t.Fatal(first.raw)
			}
			calls := a.model.Calls()
			again := a.invoke(t, req)
			if again.status != 200 || again.raw != first.raw || again.headers["Idempotent-Replayed"] != "true" {
				t.Errorf("replay: %d %s", again.status, again.raw)
			}
			if a.model.Calls() != calls {
				t.Errorf("the replay called the model")
			}
			id := first.body["session_id"].(string)
			if got := len(messagesOf(a.transcript(t, "", id))); got != 2 {
				t.Errorf("%d messages stored, want 2", got)
			}
		})
	}
}

func TestLogsOneLinePerRequest(t *testing.T) {
	a := newAPI(t, nil)
	a.invoke(t, request{route: "chat-continue.json"})
	a.invoke(t, request{route: "session-get.json", session: "bad id!"})
	lines := strings.Split(strings.TrimSpace(a.logs.String()), "\n")
	if len(lines) != 2 {
		t.Fatalf("%d log lines for 2 requests:\n%s", len(lines), a.logs.String())
	}
	var ok, bad map[string]any
	if err := json.Unmarshal([]byte(lines[0]), &ok); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal([]byte(lines[1]), &bad); err != nil {
		t.Fatal(err)
	}
	if ok["session_id"] != "demo-session" || ok["status"] != 200.0 || ok["outcome"] != "ok" || ok["input_tokens"] == nil || ok["duration_ms"] == nil || ok["route"] != "POST /chat" {
		t.Errorf("success line: %s", lines[0])
	}
	if bad["status"] != 400.0 || bad["outcome"] != "invalid_session_id" || bad["level"] != "WARN" {
		t.Errorf("failure line: %s", lines[1])
	}
}

func TestIdempotencyKeyWhileTheFirstRequestRuns(t *testing.T) {
	a := newAPI(t, nil)
	a.model.Enqueue(conversetest.Text("slow answer").WithDelay(300 * time.Millisecond))
	req := request{route: "chat-new.json", body: map[string]any{"session_id": "held", "message": "once"}, headers: map[string]string{"Idempotency-Key": "k-1"}}
	first := make(chan response, 1)
	go func() { first <- a.invoke(t, req) }()
	for a.model.Calls() == 0 {
		time.Sleep(5 * time.Millisecond)
	}
	// A retry while the first runs must not run the turn again.
	retry := a.invoke(t, req)
	if retry.status != 409 || retry.errorCode() != "in_progress" || retry.headers["Retry-After"] == "" {
		t.Errorf("retry while running: %d %s", retry.status, retry.raw)
	}
	got := <-first
	if got.status != 200 {
		t.Fatalf("first: %d %s", got.status, got.raw)
	}
	if a.model.Calls() != 1 {
		t.Errorf("the model was called %d times", a.model.Calls())
	}
	// Once it has committed, the retry gets its response.
	if again := a.invoke(t, req); again.raw != got.raw || again.headers["Idempotent-Replayed"] != "true" {
		t.Errorf("retry after commit: %d %s", again.status, again.raw)
	}
	// The key for another request is refused, whatever it asks.
	other := request{route: "chat-new.json", body: map[string]any{"session_id": "held", "message": "something else"}, headers: map[string]string{"Idempotency-Key": "k-1"}}
	if r := a.invoke(t, other); r.status != 422 || r.errorCode() != "idempotency_key_reused" {
		t.Errorf("key reused for another request: %d %s", r.status, r.raw)
	}
	structured := request{route: "structured.json", body: map[string]any{"session_id": "held", "prompt": "once", "schema": map[string]any{"type": "object"}}, headers: map[string]string{"Idempotency-Key": "k-1"}}
	if r := a.invoke(t, structured); r.status != 422 {
		t.Errorf("key reused on another route: %d %s", r.status, r.raw)
	}
}

func TestFailedTurnReleasesItsIdempotencyKey(t *testing.T) {
	a := newAPI(t, nil)
	a.model.Enqueue(conversetest.AccessDenied())
	req := request{route: "chat-new.json", body: map[string]any{"session_id": "retry-me", "message": "hello"}, headers: map[string]string{"Idempotency-Key": "k-2"}}
	if r := a.invoke(t, req); r.status != 500 {
		t.Fatalf("first attempt: %d %s", r.status, r.raw)
	}
	if r := a.invoke(t, req); r.status != 200 {
		t.Errorf("retry after a failure: %d %s", r.status, r.raw)
	}
}

func TestBigTurnWithIdempotencyKey(t *testing.T) {
	a := newAPI(t, nil)
	png := append([]byte("\x89PNG\r\n\x1a\n"), bytes.Repeat([]byte{1, 2, 3, 4, 5, 6, 7, 8}, 30_000)...) // 240 KB
	img := base64.StdEncoding.EncodeToString(png)
	req := request{route: "chat-new.json", headers: map[string]string{"Idempotency-Key": "k-3"},
		body: `{"session_id":"pictures","content":[{"text":"what is this?"},{"image":{"format":"png","source":{"bytes":"` + img + `"}}}]}`}
	first := a.invoke(t, req)
	if first.status != 200 {
		t.Fatalf("%d %s", first.status, first.raw)
	}
	if again := a.invoke(t, req); again.raw != first.raw {
		t.Errorf("the replay of a big turn differs: %d, %d bytes", again.status, len(again.raw))
	}
}

func TestListSessions(t *testing.T) {
	a := newAPI(t, nil)
	for _, s := range []struct{ owner, id, first string }{
		{"alice", "a1", "Plan a trip to Lisbon"},
		{"bob", "b1", "bob's"},
		{"alice", "a2", "What is 2+2?"},
		{"alice", "a3", "Tell me a story"},
	} {
		if r := a.chat(t, s.owner, s.id, s.first); r.status != 200 {
			t.Fatalf("chat: %d", r.status)
		}
		time.Sleep(2 * time.Millisecond) // the list is in order of creation, to the millisecond
	}
	a.chat(t, "alice", "a1", "a second turn does not move it")

	var ids, titles []string
	cursor := ""
	for pages := 0; ; pages++ {
		q := map[string]string{"limit": "2"}
		if cursor != "" {
			q["cursor"] = cursor
		}
		r := a.invoke(t, request{route: "sessions-list.json", owner: "alice", query: q})
		if r.status != 200 || pages > 3 {
			t.Fatalf("page %d: %d %s", pages, r.status, r.raw)
		}
		for _, s := range r.body["sessions"].([]any) {
			m := s.(map[string]any)
			ids = append(ids, m["session_id"].(string))
			titles = append(titles, m["title"].(string))
			if _, err := time.Parse(time.RFC3339, m["created_at"].(string)); err != nil {
				t.Errorf("created_at %v", m["created_at"])
			}
		}
		c, _ := r.body["next_cursor"].(string)
		if c == "" {
			break
		}
		cursor = c
	}
	if strings.Join(ids, " ") != "a3 a2 a1" || titles[2] != "Plan a trip to Lisbon" {
		t.Errorf("alice's sessions %v %q, want a3 a2 a1, newest first, titled by their first message", ids, titles)
	}
	if r := a.invoke(t, request{route: "sessions-list.json", owner: "bob"}); len(r.body["sessions"].([]any)) != 1 {
		t.Errorf("bob sees %v", r.body["sessions"])
	}
	if r := a.invoke(t, request{route: "sessions-list.json", owner: "carol"}); r.status != 200 || len(r.body["sessions"].([]any)) != 0 {
		t.Errorf("an owner without sessions: %d %s", r.status, r.raw)
	}
	// The transcript carries the title too.
	if r := a.transcript(t, "alice", "a2"); r.body["title"] != "What is 2+2?" {
		t.Errorf("GET /sessions/a2 title %v", r.body["title"])
	}
	for _, q := range []map[string]string{{"limit": "0"}, {"limit": "101"}, {"cursor": "garbage"}} {
		if r := a.invoke(t, request{route: "sessions-list.json", owner: "alice", query: q}); r.status != 400 {
			t.Errorf("%v: %d, want 400", q, r.status)
		}
	}
}
