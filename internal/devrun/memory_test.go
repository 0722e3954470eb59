package devrun_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/lambda-agent/lambda-agent/internal/devrun"
	"github.com/lambda-agent/lambda-agent/internal/httpapi"
	"github.com/lambda-agent/lambda-agent/internal/testkit"
	"github.com/lambda-agent/lambda-agent/internal/testkit/conversetest"
)

// TestLocalRunRemembersAcrossSessions: in the local run, offline, a fact
// told in one session is learned in the background, listed by GET
// /memory, and recalled in a new session, whose answer says it; a forget
// empties memory.
func TestLocalRunRemembersAcrossSessions(t *testing.T) {
	url, out := startRun(t, devrun.Options{Getenv: func(string) string { return "" }})
	if !strings.Contains(out.String(), "memory:   on") {
		t.Errorf("the banner does not say memory is on:\n%s", out)
	}
	chatIn(t, url, "first", "My favourite colour is teal.")
	got := waitForMemory(t, url, func(m httpapi.MemoryResponse) bool { return len(m.Records) > 0 })
	if !got.Enabled || len(got.Records) != 1 {
		t.Fatalf("GET /memory: %+v", got)
	}
	r := got.Records[0]
	if r.Kind != "fact" || r.Text != "The person's favourite colour is teal." || r.Source.SessionID != "first" {
		t.Errorf("the record is %+v", r)
	}

	answer := chatIn(t, url, "second", "What is my favourite colour?")
	if want := "From memory: The person's favourite colour is teal."; answer != want {
		t.Errorf("the second session answers %q, want %q", answer, want)
	}
	if stored := getSession(t, url, "second"); len(stored.Messages) != 2 || strings.Contains(stored.Messages[0].Content[0].Text, "memory") {
		t.Errorf("the second session stores %+v, want the question and the answer alone", stored.Messages)
	}

	if status, body := do(t, http.MethodDelete, url+"/memory"); status != http.StatusNoContent {
		t.Fatalf("DELETE /memory: %d %s", status, body)
	}
	if got := memoryOf(t, url); !got.Enabled || len(got.Records) != 0 {
		t.Errorf("after DELETE /memory: %+v", got)
	}
	if answer := chatIn(t, url, "third", "What is my favourite colour?"); strings.Contains(answer, "teal") {
		t.Errorf("after the forget, a new session answers %q", answer)
	}
}

// TestDocsMemoryExamples runs the curl commands of the memory section of
// docs/local-run.md, in order, on a local run, reading memory once it has
// learned from the first turn, as a person would a moment later; the
// answers are what the section says.
func TestDocsMemoryExamples(t *testing.T) {
	section, err := testkit.DocSection("docs/local-run.md", "## Memory across sessions")
	if err != nil {
		t.Fatal(err)
	}
	base := start(t, nil)
	curls := curlsIn(t, section, "http://127.0.0.1:3000")
	if len(curls) != 4 {
		t.Fatalf("found %d curl commands in the section, want 4", len(curls))
	}
	var statuses []int
	var answers []string
	for i, c := range curls {
		if i == 1 {
			waitForMemory(t, base, func(m httpapi.MemoryResponse) bool { return len(m.Records) == 2 })
		}
		status, body := c.send(t, strings.Replace(c.url, "http://127.0.0.1:3000", base, 1))
		if status >= 300 {
			t.Errorf("%s\n→ %d %s", c.line, status, body)
		}
		statuses, answers = append(statuses, status), append(answers, body)
	}
	for i, quoted := range map[int][]string{
		1: {`"text":"The person's favourite colour is teal."`, `"text":"The person likes green tea."`},
		2: {"From memory: The person's favourite colour is teal."},
	} {
		for _, q := range quoted {
			if !strings.Contains(section, q) {
				t.Errorf("the section no longer says %s", q)
			}
			if !strings.Contains(answers[i], q) {
				t.Errorf("answer %d does not contain %s:\n%s", i+1, q, answers[i])
			}
		}
	}
	if statuses[3] != http.StatusNoContent || !strings.Contains(section, "(`204`)") {
		t.Errorf("DELETE /memory answered %d; the section says 204", statuses[3])
	}
	if got := memoryOf(t, base); len(got.Records) != 0 {
		t.Errorf("after DELETE /memory: %+v", got)
	}
}

// TestLocalRunWithoutMemory: -memory=false turns memory off: GET /memory
// says so, and nothing told is recalled elsewhere.
func TestLocalRunWithoutMemory(t *testing.T) {
	url, out := startRun(t, devrun.Options{Getenv: func(string) string { return "" }, NoMemory: true})
	if !strings.Contains(out.String(), "memory:   off") {
		t.Errorf("the banner does not say memory is off:\n%s", out)
	}
	chatIn(t, url, "first", "My favourite colour is teal.")
	if answer := chatIn(t, url, "second", "What is my favourite colour?"); strings.Contains(answer, "teal") {
		t.Errorf("without memory, a new session answers %q", answer)
	}
	if got := memoryOf(t, url); got.Enabled || len(got.Records) != 0 {
		t.Errorf("GET /memory without memory: %+v", got)
	}
}

// TestLocalRunLearnsBeforeItStops: a run that stops waits for memory to
// learn from the turns it served, and leaves no delivery of the stream
// running.
func TestLocalRunLearnsBeforeItStops(t *testing.T) {
	model := conversetest.NewServer()
	opts := modelRun(t, model)
	opts.NoMemory = false
	var out testkit.Buffer
	opts.Addr, opts.Out = "127.0.0.1:0", &out
	ready := make(chan string, 1)
	opts.Ready = func(url string) { ready <- url }
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- devrun.Run(ctx, opts) }()
	var url string
	select {
	case url = <-ready:
	case err := <-done:
		t.Fatalf("Run ended before serving: %v", err)
	}

	// The extraction takes a while: the run stops while it runs.
	const extraction = 1500 * time.Millisecond
	model.Enqueue(conversetest.Text("Teal, noted."),
		conversetest.ToolUse("x1", "update_memory", map[string]any{"operations": []map[string]any{
			{"action": "add", "kind": "fact", "text": "The person's favourite colour is teal."},
		}}).WithDelay(extraction))
	chatIn(t, url, "first", "My favourite colour is teal.")
	stopped := time.Now()
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("Run: %v", err)
	}
	if n := model.Calls(); n != 2 || model.Pending() != 0 {
		t.Errorf("the model got %d requests and has %d replies left; want the turn's and the extraction's", n, model.Pending())
	}
	if took := time.Since(stopped); took < extraction/2 {
		t.Errorf("the run stopped in %v, before the extraction of %v could end", took, extraction)
	}
	// A goroutine that was done may take a moment to return.
	for deadline := time.Now().Add(500 * time.Millisecond); delivering(); {
		if time.Now().After(deadline) {
			t.Fatal("the stream's delivery runs after the run stopped")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if s := out.String(); strings.Contains(s, "level=ERROR") || strings.Contains(s, "memory: stopped") || strings.Contains(s, "could not be learned") {
		t.Errorf("the run says:\n%s", s)
	}
}

// delivering reports whether a stream's delivery goroutine runs.
func delivering() bool {
	buf := make([]byte, 1<<20)
	return bytes.Contains(buf[:runtime.Stack(buf, true)], []byte("streamtest.(*Mapping).deliver"))
}

// chatIn sends a message in session through the API, and returns the
// answer's text.
func chatIn(t *testing.T, base, session, message string) string {
	t.Helper()
	body, _ := json.Marshal(map[string]string{"session_id": session, "message": message})
	resp, err := http.Post(base+"/chat", "application/json", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var answer httpapi.ChatResponse
	if err := json.NewDecoder(resp.Body).Decode(&answer); err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("POST /chat %q: %d %v", message, resp.StatusCode, err)
	}
	return answer.Text
}

// memoryOf reads GET /memory.
func memoryOf(t *testing.T, base string) httpapi.MemoryResponse {
	t.Helper()
	var m httpapi.MemoryResponse
	if err := getJSON(base+"/memory", &m); err != nil {
		t.Fatal(err)
	}
	return m
}

// waitForMemory reads GET /memory until done says it holds what memory
// learns in the background, for at most ten seconds.
func waitForMemory(t *testing.T, base string, done func(httpapi.MemoryResponse) bool) httpapi.MemoryResponse {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		m := memoryOf(t, base)
		if done(m) {
			return m
		}
		if time.Now().After(deadline) {
			t.Fatalf("memory does not hold what it should after 10 s: %+v", m)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// do sends a request without a body, and returns the status and body.
func do(t *testing.T, method, url string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(method, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body)
}
