package devrun_test

import (
	"context"
	"encoding/base64"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/lambda-agent/lambda-agent/internal/devrun"
	"github.com/lambda-agent/lambda-agent/internal/testkit"
)

// start runs the local run on a free port with the offline model, and
// returns its URL.
func start(t *testing.T, env map[string]string) string {
	t.Helper()
	url, _ := startRun(t, devrun.Options{Getenv: func(k string) string { return env[k] }})
	return url
}

// startRun starts a local run with opts on a free port, and returns its URL
// and what it prints. It is offline unless opts's environment names a
// Bedrock endpoint, a stand-in's.
func startRun(t *testing.T, opts devrun.Options) (string, *testkit.Buffer) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	ready := make(chan string, 1)
	done := make(chan error, 1)
	var out testkit.Buffer // the server's goroutines write to it
	opts.Addr, opts.Out = "127.0.0.1:0", &out
	opts.Offline = opts.Getenv == nil || opts.Getenv("AWS_ENDPOINT_URL_BEDROCK_RUNTIME") == ""
	opts.Ready = func(url string) { ready <- url }
	go func() { done <- devrun.Run(ctx, opts) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	})
	select {
	case url := <-ready:
		return url, &out
	case err := <-done:
		t.Fatalf("Run ended before serving: %v", err)
	}
	return "", nil
}

// curl is one curl command of the docs.
type curl struct {
	line    string
	method  string
	url     string
	headers map[string]string
	data    string
}

// send sends c's request to url, in place of the docs', and returns the
// answer's status and body.
func (c curl) send(t *testing.T, url string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(c.method, url, strings.NewReader(c.data))
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range c.headers {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body)
}

// docCurls returns the curl commands of README.md, then of docs/*.md in
// the order of their names, that call the local run.
func docCurls(t *testing.T) []curl {
	t.Helper()
	root := filepath.Join("..", "..")
	pages, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	var out []curl
	for _, file := range append([]string{filepath.Join(root, "README.md")}, pages...) {
		text, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, curlsIn(t, string(text), "http://127.0.0.1:3000")...)
	}
	return out
}

// curlsIn returns the curl commands of text that call base.
func curlsIn(t *testing.T, text, base string) []curl {
	t.Helper()
	var out []curl
	for line := range strings.Lines(text) {
		line = strings.TrimSpace(line)
		if !strings.HasPrefix(line, "curl ") || !strings.Contains(line, base) {
			continue // examples against a deployment, or another run, are not run
		}
		c := curl{line: line, method: "GET", headers: map[string]string{}}
		args := shellWords(t, line)
		for i := 1; i < len(args); i++ {
			switch a := args[i]; a {
			case "-s", "-i", "-N":
			case "-X":
				i++
				c.method = args[i]
			case "-H":
				i++
				k, v, _ := strings.Cut(args[i], ":")
				c.headers[strings.TrimSpace(k)] = strings.TrimSpace(v)
			case "-d":
				i++
				c.data = args[i]
				if c.method == "GET" {
					c.method = "POST"
				}
			case "-o", "-w":
				i++ // output options do not change the request
			default:
				if strings.HasPrefix(a, "-") {
					t.Fatalf("the docs use curl option %s, which this test does not understand: %s", a, line)
				}
				c.url = a
			}
		}
		out = append(out, c)
	}
	return out
}

// shellWords splits a command line the way sh does for quotes.
func shellWords(t *testing.T, line string) []string {
	t.Helper()
	words, err := testkit.ShellWords(line)
	if err != nil {
		t.Fatal(err)
	}
	return words
}

// TestDocsCurlExamplesWork runs every curl command of the README and of
// docs/ that calls the local run's address, in order, on one local run:
// each must succeed, and the answers must say what the docs say of them.
func TestDocsCurlExamplesWork(t *testing.T) {
	base := start(t, nil)
	curls := docCurls(t)
	if len(curls) < 5 {
		t.Fatalf("found %d curl commands in the docs", len(curls))
	}
	readme, err := os.ReadFile(filepath.Join("..", "..", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	if len(curlsIn(t, string(readme), "http://127.0.0.1:3000")) == 0 {
		t.Error("the README shows no curl command against the local run")
	}
	var answers []string
	for _, c := range curls {
		url := strings.Replace(c.url, "http://127.0.0.1:3000", base, 1)
		if url == c.url {
			t.Errorf("an example of the docs does not target the local run's address: %s", c.line)
			continue
		}
		status, body := c.send(t, url)
		if status >= 300 {
			t.Errorf("%s\n→ %d %s", c.line, status, body)
		}
		answers = append(answers, body)
	}
	all := strings.Join(answers, "\n")
	for _, want := range []string{`25*48 = 1200`, `"text":"teal"`, `"data":{"born":1,"name":"example"}`, "event: tool_use\ndata: {\"id\"", "event: done\ndata: {\"session_id\":\"demo\"", `"title":"What is 25*48?"`} {
		if !strings.Contains(all, want) {
			t.Errorf("no answer contains %s:\n%s", want, all)
		}
	}
}

// TestBearerTokenNamesTheOwner: the local run takes a bearer token's subject
// for the caller, unverified, as sam local does; sessions are the caller's,
// and every error is JSON, unknown routes and wrong methods included.
func TestBearerTokenNamesTheOwner(t *testing.T) {
	base := start(t, nil)
	token := func(sub string) string {
		payload := base64.RawURLEncoding.EncodeToString([]byte(`{"sub":"` + sub + `","exp":1795256102,"groups":["a"]}`))
		return "Bearer header." + payload + ".signature"
	}
	do := func(method, path, auth, body string) (int, string) {
		t.Helper()
		req, _ := http.NewRequest(method, base+path, strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		if auth != "" {
			req.Header.Set("Authorization", auth)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		if resp.StatusCode >= 400 && (resp.Header.Get("Content-Type") != "application/json" || !strings.Contains(string(b), `"code"`)) {
			t.Errorf("%s %s: %d without a JSON error: %s", method, path, resp.StatusCode, b)
		}
		return resp.StatusCode, string(b)
	}
	if status, body := do("POST", "/chat", token("user-7"), `{"session_id":"mine","message":"hi"}`); status != 200 {
		t.Fatalf("chat: %d %s", status, body)
	}
	if status, _ := do("GET", "/sessions/mine", token("user-7"), ""); status != 200 {
		t.Errorf("the owner's GET: %d", status)
	}
	if status, _ := do("GET", "/sessions/mine", token("user-8"), ""); status != 404 {
		t.Errorf("another subject's GET: %d, want 404", status)
	}
	if status, _ := do("GET", "/sessions/mine", "", ""); status != 404 {
		t.Errorf("an anonymous GET: %d, want 404", status)
	}
	if status, body := do("GET", "/nowhere", "", ""); status != 404 || !strings.Contains(body, "no_route") {
		t.Errorf("unknown route: %d %s", status, body)
	}
	if status, body := do("PUT", "/chat", "", "{}"); status != 405 || !strings.Contains(body, "method_not_allowed") {
		t.Errorf("wrong method: %d %s", status, body)
	}
}

// TestRefusesWhatOtherPagesCouldSend checks that a web page elsewhere cannot
// drive the local run, which spends the developer's AWS credentials: a form
// or text/plain POST, and a request for another host name (DNS rebinding).
func TestRefusesWhatOtherPagesCouldSend(t *testing.T) {
	base := start(t, nil)
	post := func(contentType, host string) int {
		t.Helper()
		req, _ := http.NewRequest(http.MethodPost, base+"/chat", strings.NewReader(`{"message":"spend your credits"}`))
		if contentType != "" {
			req.Header.Set("Content-Type", contentType)
		}
		if host != "" {
			req.Host = host
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	for _, tt := range []struct {
		contentType, host string
		want              int
	}{
		{"text/plain", "", http.StatusUnsupportedMediaType},
		{"application/x-www-form-urlencoded", "", http.StatusUnsupportedMediaType},
		{"", "", http.StatusUnsupportedMediaType},
		{"application/json", "evil.example:3000", http.StatusMisdirectedRequest},
		{"application/json; charset=utf-8", "localhost:3000", http.StatusOK},
		{"application/json", "", http.StatusOK},
	} {
		if got := post(tt.contentType, tt.host); got != tt.want {
			t.Errorf("POST with %q for host %q: %d, want %d", tt.contentType, tt.host, got, tt.want)
		}
	}
}
