package main

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/lambda-agent/lambda-agent/internal/devrun"
	"github.com/lambda-agent/lambda-agent/internal/testkit"
)

// TestDocsWithTheLocalRun does what the remote tools section of
// docs/tools.md shows: the local run, with this server added by -mcp, and the offline
// model told to call one of its tools.
func TestDocsWithTheLocalRun(t *testing.T) {
	section, err := testkit.DocSection("docs/tools.md", "## Remote tools: MCP servers and Lambda functions")
	if err != nil {
		t.Fatal(err)
	}
	const message = `/tool mcp_word_count {"text":"one two three"}`
	const answer = `{"characters":13,"words":3}`
	for _, shown := range []string{"go run ./cmd/local -mcp http://127.0.0.1:8765/mcp", "`" + message + "`", "`" + answer + "`"} {
		if !strings.Contains(section, shown) {
			t.Fatalf("docs/tools.md no longer shows %s", shown)
		}
	}
	mcp := httptest.NewServer(handler())
	t.Cleanup(mcp.Close)

	ctx, cancel := context.WithCancel(context.Background())
	ready, done := make(chan string, 1), make(chan error, 1)
	go func() {
		done <- devrun.Run(ctx, devrun.Options{
			Addr: "127.0.0.1:0", Offline: true, Getenv: func(string) string { return "" },
			Out: &testkit.Buffer{}, Ready: func(url string) { ready <- url }, MCP: []string{mcp.URL + "/mcp"},
		})
	}()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	})
	var base string
	select {
	case base = <-ready:
	case err := <-done:
		t.Fatalf("Run ended before serving: %v", err)
	}
	body, _ := json.Marshal(map[string]string{"message": message})
	resp, err := http.Post(base+"/chat", "application/json", strings.NewReader(string(body)))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out struct{ Text string }
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil || resp.StatusCode != 200 {
		t.Fatalf("%d %v", resp.StatusCode, err)
	}
	if !strings.Contains(out.Text, answer) {
		t.Errorf("the answer %q does not carry %s", out.Text, answer)
	}
}
