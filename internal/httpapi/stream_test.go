package httpapi_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-lambda-go/lambdaurl"
	"github.com/lambda-agent/lambda-agent/internal/ddbhistory"
	"github.com/lambda-agent/lambda-agent/internal/httpapi"
	"github.com/lambda-agent/lambda-agent/internal/testkit/conversetest"
)

// sseEvent is one Server-Sent Event as a client reads it.
type sseEvent struct {
	name string
	data map[string]any
	at   time.Time
}

// readSSE reads events from r until it ends or each returns false.
func readSSE(t *testing.T, r io.Reader, each func(sseEvent) bool) {
	t.Helper()
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 8<<20)
	var ev sseEvent
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "event: "):
			ev.name = strings.TrimPrefix(line, "event: ")
		case strings.HasPrefix(line, "data: "):
			if err := json.Unmarshal([]byte(strings.TrimPrefix(line, "data: ")), &ev.data); err != nil {
				t.Fatalf("event %s: data is not a JSON object: %q", ev.name, line)
			}
		case line == "":
			ev.at = time.Now()
			if !each(ev) {
				return
			}
			ev = sseEvent{}
		default:
			t.Fatalf("not a Server-Sent Events line: %q", line)
		}
	}
}

// streamServer serves the handler over HTTP, as the local run does, with
// the stream at POST /chat/stream. Close waits for the handlers that are
// still running.
func (a *api) streamServer(t *testing.T) *httptest.Server {
	srv := httptest.NewServer(a.h)
	t.Cleanup(srv.Close)
	return srv
}

// stream posts body to the stream and returns the response, whose body the
// caller reads.
func stream(t *testing.T, srv *httptest.Server, body any, headers map[string]string) *http.Response {
	t.Helper()
	raw, _ := json.Marshal(body)
	req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, srv.URL+"/chat/stream", bytes.NewReader(raw))
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	resp, err := srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	return resp
}

// streamAll posts body and reads every event.
func streamAll(t *testing.T, srv *httptest.Server, body any, headers map[string]string) []sseEvent {
	t.Helper()
	resp := stream(t, srv, body, headers)
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "text/event-stream" {
		b, _ := io.ReadAll(resp.Body)
		t.Fatalf("status %d, %s: %s", resp.StatusCode, resp.Header.Get("Content-Type"), b)
	}
	var evs []sseEvent
	readSSE(t, resp.Body, func(e sseEvent) bool { evs = append(evs, e); return true })
	return evs
}

// names lists the events, runs of text as one.
func names(evs []sseEvent) string {
	var out []string
	for _, e := range evs {
		if len(out) > 0 && e.name == "text" && out[len(out)-1] == "text" {
			continue
		}
		out = append(out, e.name)
	}
	return strings.Join(out, " ")
}

func deltas(evs []sseEvent) (pieces []string) {
	for _, e := range evs {
		if e.name == httpapi.EventText {
			pieces = append(pieces, e.data["delta"].(string))
		}
	}
	return pieces
}

func TestStreamPlainTurn(t *testing.T) {
	a := newAPI(t, nil)
	srv := a.streamServer(t)
	a.model.Enqueue(conversetest.Text("Hello there, streaming reader!").WithChunking(5, 10*time.Millisecond).WithUsage(9, 7))
	evs := streamAll(t, srv, map[string]any{"session_id": "s1", "message": "Hi"}, nil)
	if got := names(evs); got != "start text done" {
		t.Fatalf("events %s, want start text done", got)
	}
	if evs[0].data["session_id"] != "s1" {
		t.Errorf("start %v", evs[0].data)
	}
	pieces := deltas(evs)
	done := evs[len(evs)-1].data
	if len(pieces) < 5 || strings.Join(pieces, "") != done["text"] {
		t.Errorf("deltas %q do not join to the final text %q", pieces, done["text"])
	}
	if first, last := evs[1].at, evs[len(evs)-2].at; last.Sub(first) < 30*time.Millisecond {
		t.Errorf("the text pieces arrived within %v: they were not streamed as they came", last.Sub(first))
	}
	usage := done["usage"].(map[string]any)
	if done["stop_reason"] != "end_turn" || usage["input_tokens"] != 9.0 || usage["output_tokens"] != 7.0 || done["metrics"] == nil {
		t.Errorf("done %v", done)
	}
	// done came after the commit: the transcript has the turn.
	if msgs := messagesOf(a.transcript(t, "", "s1")); len(msgs) != 2 {
		t.Errorf("%d stored messages, want 2", len(msgs))
	}
}

func TestStreamToolTurn(t *testing.T) {
	a := newAPI(t, nil)
	srv := a.streamServer(t)
	a.model.Enqueue(
		conversetest.Text("Let me compute.").WithToolUse("c1", "calculator", map[string]any{"expression": "21*21"}).WithChunking(4, 0),
		conversetest.Text("It is 441.").WithChunking(4, 0),
	)
	evs := streamAll(t, srv, map[string]any{"session_id": "s1", "message": "What is 21*21?"}, nil)
	if got, want := names(evs), "start text tool_use tool_result text done"; got != want {
		t.Fatalf("events %s, want %s", got, want)
	}
	for _, e := range evs {
		switch e.name {
		case httpapi.EventToolUse:
			if e.data["id"] != "c1" || e.data["name"] != "calculator" || e.data["input"].(map[string]any)["expression"] != "21*21" {
				t.Errorf("tool_use %v", e.data)
			}
		case httpapi.EventToolResult:
			if e.data["id"] != "c1" || e.data["status"] != "success" || !strings.Contains(e.data["preview"].(string), "441") {
				t.Errorf("tool_result %v", e.data)
			}
		}
	}
	if msgs := messagesOf(a.transcript(t, "", "s1")); len(msgs) != 4 {
		t.Errorf("%d stored messages, want 4", len(msgs))
	}
}

func TestStreamOverflowBeforeTheFirstByteRecovers(t *testing.T) {
	a := newAPI(t, nil)
	srv := a.streamServer(t)
	for i := range 5 {
		a.chat(t, "", "s1", strings.Repeat("long question ", 20)+string(rune('a'+i)))
	}
	a.model.Enqueue(conversetest.Overflow(), conversetest.Text("fits now").WithChunking(3, 0))
	evs := streamAll(t, srv, map[string]any{"session_id": "s1", "message": "more"}, nil)
	done := evs[len(evs)-1]
	if done.name != httpapi.EventDone || strings.Join(deltas(evs), "") != "fits now" {
		t.Fatalf("events %s, deltas %q", names(evs), deltas(evs))
	}
	if m := done.data["metrics"].(map[string]any); m["reductions"] != 1.0 {
		t.Errorf("metrics %v, want one reduction", m)
	}
	if w := done.data["window"].(map[string]any); w["removed"].(float64) == 0 {
		t.Errorf("window %v: the manager removed nothing", w)
	}
}

func TestStreamDisconnectWritesNothingPartial(t *testing.T) {
	a := newAPI(t, nil)
	srv := a.streamServer(t)
	a.chat(t, "", "s1", "first")
	before := messagesOf(a.transcript(t, "", "s1"))
	a.model.Enqueue(conversetest.Text("a long answer that the client will not wait for").WithChunking(4, 40*time.Millisecond))

	raw, _ := json.Marshal(map[string]any{"session_id": "s1", "message": "second"})
	ctx, cancel := context.WithCancel(t.Context())
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, srv.URL+"/chat/stream", bytes.NewReader(raw))
	resp, err := srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	seen := 0
	readSSE(t, resp.Body, func(e sseEvent) bool {
		if e.name == httpapi.EventText {
			seen++
		}
		return seen < 2
	})
	cancel() // the client goes away mid-answer
	resp.Body.Close()
	srv.Close() // waits for the handler to finish

	after := messagesOf(a.transcript(t, "", "s1"))
	if len(after) != len(before) {
		t.Fatalf("%d messages before the cut, %d after: half a turn was written", len(before), len(after))
	}
	// The session is usable, and the stand-in checks what it holds.
	if r := a.chat(t, "", "s1", "third"); r.status != http.StatusOK {
		t.Fatalf("next turn: %d %s", r.status, r.raw)
	}
	if !strings.Contains(a.logs.String(), `"outcome":"timeout"`) {
		t.Errorf("the log does not record the cut turn:\n%s", a.logs.String())
	}
}

func TestStreamCommitConflictIsAnErrorEvent(t *testing.T) {
	a := newAPI(t, nil)
	srv := a.streamServer(t)
	a.chat(t, "", "s1", "first")
	a.model.Enqueue(
		conversetest.Text("slow streamed answer").WithChunking(4, 30*time.Millisecond),
		conversetest.Text("quick answer"),
	)
	resp := stream(t, srv, map[string]any{"session_id": "s1", "message": "streamed"}, nil)
	var evs []sseEvent
	other := false
	readSSE(t, resp.Body, func(e sseEvent) bool {
		evs = append(evs, e)
		if e.name == httpapi.EventText && !other {
			other = true // another turn commits while this one streams
			if r := a.chat(t, "", "s1", "concurrent"); r.status != http.StatusOK {
				t.Errorf("concurrent turn: %d", r.status)
			}
		}
		return true
	})
	last := evs[len(evs)-1]
	if last.name != httpapi.EventError || last.data["error"].(map[string]any)["code"] != "conflict" {
		t.Fatalf("last event %s %v, want error conflict", last.name, last.data)
	}
	msgs := messagesOf(a.transcript(t, "", "s1"))
	if len(msgs) != 4 || !strings.Contains(a.transcript(t, "", "s1").raw, "concurrent") || strings.Contains(a.transcript(t, "", "s1").raw, "streamed") {
		t.Errorf("stored %d messages: want the first turn and the concurrent one only", len(msgs))
	}
}

func TestStreamRefusesBeforeTheStream(t *testing.T) {
	a := newAPI(t, nil)
	srv := a.streamServer(t)
	a.chat(t, "alice", "hers", "private")
	tests := []struct {
		name   string
		method string
		body   string
		status int
		code   string
	}{
		{"malformed JSON", http.MethodPost, `{"message":`, 400, "invalid_json"},
		{"blank message", http.MethodPost, `{"message":"  "}`, 400, "invalid_request"},
		{"bad session id", http.MethodPost, `{"session_id":"no spaces","message":"hi"}`, 400, "invalid_session_id"},
		{"oversized", http.MethodPost, `{"message":"` + strings.Repeat("x", 2*httpapi.DefaultMaxMessageBytes+70<<10) + `"}`, 413, "message_too_large"},
		{"another owner's session", http.MethodPost, `{"session_id":"hers","message":"let me in"}`, 404, "not_found"},
		{"GET", http.MethodGet, ``, 405, "method_not_allowed"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req, _ := http.NewRequestWithContext(t.Context(), tt.method, srv.URL+"/chat/stream", strings.NewReader(tt.body))
			resp, err := srv.Client().Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			var body struct {
				Error struct{ Code, Message string }
			}
			if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
				t.Fatalf("status %d, body is not JSON: %v", resp.StatusCode, err)
			}
			if resp.StatusCode != tt.status || body.Error.Code != tt.code || body.Error.Message == "" {
				t.Errorf("%d %+v, want %d %s", resp.StatusCode, body.Error, tt.status, tt.code)
			}
		})
	}
	if a.model.Calls() != 1 {
		t.Errorf("the model was called %d times; refused requests must not reach it", a.model.Calls()-1)
	}
	if msgs := messagesOf(a.transcript(t, "alice", "hers")); len(msgs) != 2 {
		t.Errorf("alice's session has %d messages", len(msgs))
	}
}

// The function URL sends a body of any type but text base64-encoded, and
// gives no length: the answer still names the body's size, not the limit's.
func TestStreamNamesTheSizeOfAnOversizedBody(t *testing.T) {
	a := newAPI(t, nil)
	fn := lambdaurl.Wrap(a.stream)
	big := `{"message":"` + strings.Repeat("x", 2<<20) + `"}`
	ev := &events.LambdaFunctionURLRequest{
		RawPath:         "/chat/stream",
		Body:            base64.StdEncoding.EncodeToString([]byte(big)),
		IsBase64Encoded: true,
		Headers:         map[string]string{"content-type": "application/octet-stream"},
		RequestContext:  events.LambdaFunctionURLRequestContext{HTTP: events.LambdaFunctionURLRequestContextHTTPDescription{Method: http.MethodPost}},
	}
	resp, err := fn(t.Context(), ev)
	if err != nil {
		t.Fatal(err)
	}
	out, _ := io.ReadAll(resp.Body)
	want := fmt.Sprintf("the body is %d bytes", len(big))
	if resp.StatusCode != 413 || !strings.Contains(string(out), want) {
		t.Errorf("%d %s; want 413 saying %q", resp.StatusCode, out, want)
	}
}

func TestStreamIdempotentReplay(t *testing.T) {
	a := newAPI(t, nil)
	srv := a.streamServer(t)
	a.model.Enqueue(conversetest.Text("only once").WithChunking(3, 0))
	key := map[string]string{"Idempotency-Key": "k-1"}
	first := streamAll(t, srv, map[string]any{"message": "Hi"}, key)
	second := streamAll(t, srv, map[string]any{"message": "Hi"}, key)
	if names(second) != "start done" {
		t.Fatalf("replay events %s, want start done", names(second))
	}
	d1, d2 := first[len(first)-1].data, second[len(second)-1].data
	if d1["session_id"] != d2["session_id"] || d1["text"] != d2["text"] || len(d1["messages"].([]any)) != len(d2["messages"].([]any)) {
		t.Errorf("replay %v differs from %v", d2, d1)
	}
	if a.model.Calls() != 1 {
		t.Errorf("%d model calls, want 1", a.model.Calls())
	}
	// The key is shared with POST /chat: the same request there replays too.
	r := a.invoke(t, request{route: "chat-new.json", body: map[string]any{"message": "Hi"}, headers: key})
	if r.status != http.StatusOK || r.headers["Idempotent-Replayed"] != "true" || r.body["text"] != "only once" {
		t.Errorf("POST /chat with the key: %d %v", r.status, r.body)
	}
}

// TestStreamThroughAFunctionURL runs the stream function's handler the way
// Lambda does, wrapped by lambdaurl, with the caller's IAM identity from the
// function URL's authorizer as the owner: a streamed turn, then the session
// listed, read and deleted through the same URL.
func TestStreamThroughAFunctionURL(t *testing.T) {
	a := newAPI(t, nil)
	a.model.Enqueue(conversetest.Text("signed and streamed").WithChunking(5, 0))
	fn := lambdaurl.Wrap(a.handler(t, httpapi.FunctionURLRoutes))
	const arn = "arn:aws:iam::123456789012:user/alice"
	call := func(method, path, query, body string) *events.LambdaFunctionURLStreamingResponse {
		t.Helper()
		resp, err := fn(t.Context(), &events.LambdaFunctionURLRequest{
			Version: "2.0", RawPath: path, RawQueryString: query, Body: body,
			Headers: map[string]string{"content-type": "application/json"},
			RequestContext: events.LambdaFunctionURLRequestContext{
				RequestID: "r1", DomainName: "abc.lambda-url.us-east-1.on.aws",
				HTTP:       events.LambdaFunctionURLRequestContextHTTPDescription{Method: method, Path: path},
				Authorizer: &events.LambdaFunctionURLRequestContextAuthorizerDescription{IAM: &events.LambdaFunctionURLRequestContextAuthorizerIAMDescription{UserARN: arn, AccountID: "123456789012"}},
			},
		})
		if err != nil {
			t.Fatal(err)
		}
		return resp
	}
	resp := call(http.MethodPost, "/", "", `{"session_id":"url-1","message":"Hi"}`)
	if resp.StatusCode != http.StatusOK || resp.Headers["Content-Type"] != "text/event-stream" {
		t.Fatalf("status %d, headers %v", resp.StatusCode, resp.Headers)
	}
	var evs []sseEvent
	readSSE(t, resp.Body, func(e sseEvent) bool { evs = append(evs, e); return true })
	if names(evs) != "start text done" || strings.Join(deltas(evs), "") != "signed and streamed" {
		t.Fatalf("events %s", names(evs))
	}
	// The session belongs to the principal, and to nobody else.
	if _, err := a.store.Transcript(t.Context(), ddbhistory.Key{Owner: "iam:" + arn, ID: "url-1"}, "", 10); err != nil {
		t.Errorf("the principal's session: %v", err)
	}
	if r := a.transcript(t, "", "url-1"); r.status != http.StatusNotFound {
		t.Errorf("anonymous read the principal's session: %d", r.status)
	}
	// A token cannot pass for a principal.
	if r := a.transcript(t, "iam:"+arn, "url-1"); r.status != http.StatusUnauthorized {
		t.Errorf("a JWT subject beginning with iam: got %d, want 401", r.status)
	}
	// The principal lists, reads and deletes its session through the URL.
	jsonBody := func(resp *events.LambdaFunctionURLStreamingResponse) map[string]any {
		t.Helper()
		var m map[string]any
		if err := json.NewDecoder(resp.Body).Decode(&m); err != nil {
			t.Fatalf("status %d: body is not JSON: %v", resp.StatusCode, err)
		}
		return m
	}
	list := call(http.MethodGet, "/sessions", "limit=5", "")
	if m := jsonBody(list); list.StatusCode != 200 || len(m["sessions"].([]any)) != 1 {
		t.Errorf("GET /sessions through the URL: %d %v", list.StatusCode, m)
	}
	get := call(http.MethodGet, "/sessions/url-1", "", "")
	if m := jsonBody(get); get.StatusCode != 200 || len(m["messages"].([]any)) != 2 {
		t.Errorf("GET /sessions/url-1 through the URL: %d %v", get.StatusCode, m)
	}
	if r := call(http.MethodPut, "/sessions/url-1", "", ""); r.StatusCode != http.StatusMethodNotAllowed {
		t.Errorf("PUT through the URL: %d, want 405", r.StatusCode)
	}
	if del := call(http.MethodDelete, "/sessions/url-1", "", ""); del.StatusCode != http.StatusNoContent {
		t.Errorf("DELETE through the URL: %d", del.StatusCode)
	}
	if gone := call(http.MethodGet, "/sessions/url-1", "", ""); gone.StatusCode != http.StatusNotFound {
		t.Errorf("GET after DELETE: %d", gone.StatusCode)
	}
}

func TestStreamThatBreaksOffIsNotRetried(t *testing.T) {
	a := newAPI(t, nil)
	srv := a.streamServer(t)
	a.model.Enqueue(
		conversetest.Text("This answer breaks off").WithChunking(4, 0).WithStreamError(3, conversetest.CodeThrottling, "slow down"),
		conversetest.Text("a retry would repeat the start"),
	)
	evs := streamAll(t, srv, map[string]any{"session_id": "s1", "message": "Hi"}, nil)
	last := evs[len(evs)-1]
	if names(evs) != "start text error" || last.data["error"].(map[string]any)["code"] != "stream_interrupted" {
		t.Fatalf("events %s, last %v; want start, text, then error stream_interrupted", names(evs), last.data)
	}
	if a.model.Pending() != 1 {
		t.Error("the model was asked again after part of its answer went out")
	}
	if r := a.transcript(t, "", "s1"); r.status != http.StatusNotFound {
		t.Errorf("the broken turn left a session: %d %s", r.status, r.raw)
	}
}
