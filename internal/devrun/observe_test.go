package devrun_test

import (
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"sync"
	"testing"

	"github.com/lambda-agent/lambda-agent/internal/devrun"
	"github.com/lambda-agent/lambda-agent/internal/testkit"
)

// TestLocalRunSummarizesEachTurn checks the line the local run prints per
// turn: outcome, tokens, cost, model calls and tools.
func TestLocalRunSummarizesEachTurn(t *testing.T) {
	env := map[string]string{"MODEL_PRICES": `{"input":3,"output":15}`}
	url, out := startRun(t, devrun.Options{Getenv: func(k string) string { return env[k] }})
	resp, err := http.Post(url+"/chat", "application/json", strings.NewReader(`{"session_id":"sum-1","message":"what is 6*7?"}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("status %d", resp.StatusCode)
	}
	want := regexp.MustCompile(`(?m)^turn POST /chat 200 ok session=sum-1 \d+ms tokens: in=[1-9]\d* out=[1-9]\d* cost=\$\d+\.\d{4} model_calls=2 tools=calculator$`)
	if !want.MatchString(out.String()) {
		t.Errorf("no summary line matching %s in:\n%s", want, out)

	}
}

// TestLocalRunSendsTracesWithOtel checks that -otel sends each turn's
// spans, as OTLP protobuf, before the turn's answer returns.
func TestLocalRunSendsTracesWithOtel(t *testing.T) {
	var mu sync.Mutex
	var posts []string
	collector := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		posts = append(posts, r.Method+" "+r.URL.Path+" "+r.Header.Get("Content-Type"))
		mu.Unlock()
	}))
	defer collector.Close()
	url, out := startRun(t, devrun.Options{Getenv: func(string) string { return "" }, OTel: collector.URL})
	resp, err := http.Post(url+"/chat", "application/json", strings.NewReader(`{"message":"hello"}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	mu.Lock()
	defer mu.Unlock()
	if len(posts) != 1 || posts[0] != "POST /v1/traces application/x-protobuf" {
		t.Errorf("the collector got %q, want one export when the answer came", posts)
	}
	if !strings.Contains(out.String(), "traces:   OTLP/HTTP to "+collector.URL+"/v1/traces, service lambda-agent-local") {
		t.Errorf("the banner does not say where traces go:\n%s", out)
	}
}

// TestDocsSummaryLine runs the example of the summary line in
// docs/observability.md: offline, "what is 6*7?" in session demo. Only the
// duration may differ.
func TestDocsSummaryLine(t *testing.T) {
	section, err := testkit.DocSection("docs/observability.md", "## Locally")
	if err != nil {
		t.Fatal(err)
	}
	var example string
	for line := range strings.Lines(section) {
		if strings.HasPrefix(line, "turn POST /chat") {
			example = strings.TrimSpace(line)
			break
		}
	}
	if example == "" {
		t.Fatal("no summary line in the Locally section of docs/observability.md")
	}
	want := regexp.MustCompile(`(?m)^` + regexp.MustCompile(` \d+ms `).ReplaceAllLiteralString(regexp.QuoteMeta(example), ` \d+ms `) + `$`)
	url, out := startRun(t, devrun.Options{Getenv: func(string) string { return "" }})
	resp, err := http.Post(url+"/chat", "application/json", strings.NewReader(`{"session_id":"demo","message":"what is 6*7?"}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if !want.MatchString(out.String()) {
		t.Errorf("the line of docs/observability.md\n%s\nis not what the local run printed:\n%s", example, out)
	}
}

// TestLocalRunSummarizesADirectCall: a direct tool call's line says it was
// a call, not a turn, with no model call.
func TestLocalRunSummarizesADirectCall(t *testing.T) {
	url, out := startRun(t, devrun.Options{Getenv: func(string) string { return "" }})
	resp, err := http.Post(url+"/sessions/sum-2/tools/calculator", "application/json", strings.NewReader(`{"input":{"expression":"2+2"}}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	want := regexp.MustCompile(`(?m)^call POST /sessions/\{sessionId\}/tools/\{name\} 200 ok session=sum-2 \d+ms tokens: in=0 out=0 model_calls=0 tools=calculator$`)
	if !want.MatchString(out.String()) {
		t.Errorf("no summary line matching %s in:\n%s", want, out)
	}
}
