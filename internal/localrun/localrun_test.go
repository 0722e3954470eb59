package localrun_test

import (
	"bufio"
	"context"
	"encoding/base64"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/lambda-agent/lambda-agent/internal/localrun"
)

// start runs the local run on a free port with the offline model, and
// returns its URL.
func start(t *testing.T, env map[string]string) string {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	ready := make(chan string, 1)
	done := make(chan error, 1)
	var out strings.Builder
	go func() {
		done <- localrun.Run(ctx, localrun.Options{
			Addr:    "127.0.0.1:0",
			Offline: true,
			Getenv:  func(k string) string { return env[k] },
			Out:     &syncWriter{w: &out},
			Ready:   func(url string) { ready <- url },
		})
	}()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	})
	select {
	case url := <-ready:
		return url
	case err := <-done:
		t.Fatalf("Run ended before serving: %v", err)
	}
	return ""
}

// curl is one curl command of the README.
type curl struct {
	line    string
	method  string
	url     string
	headers map[string]string
	data    string
}

// readmeCurls returns the curl commands of the README that call the local
// run.
func readmeCurls(t *testing.T) []curl {
	t.Helper()
	f, err := os.Open(filepath.Join("..", "..", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []curl
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if !strings.HasPrefix(line, "curl ") || !strings.Contains(line, "http://127.0.0.1:3000") {
			continue // examples against a deployment are not run
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
					t.Fatalf("the README uses curl option %s, which this test does not understand: %s", a, line)
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
	var words []string
	var cur strings.Builder
	inWord := false
	for i := 0; i < len(line); i++ {
		switch c := line[i]; {
		case c == '\'' || c == '"':
			end := strings.IndexByte(line[i+1:], c)
			if end < 0 {
				t.Fatalf("unbalanced quote: %s", line)
			}
			cur.WriteString(line[i+1 : i+1+end])
			i += end + 1
			inWord = true
		case c == ' ' || c == '\t':
			if inWord {
				words = append(words, cur.String())
				cur.Reset()
				inWord = false
			}
		default:
			cur.WriteByte(c)
			inWord = true
		}
	}
	if inWord {
		words = append(words, cur.String())
	}
	return words
}

func TestREADMECurlExamplesWork(t *testing.T) {
	base := start(t, nil)
	curls := readmeCurls(t)
	if len(curls) < 5 {
		t.Fatalf("found %d curl commands in the README", len(curls))
	}
	var answers []string
	for _, c := range curls {
		url := strings.Replace(c.url, "http://127.0.0.1:3000", base, 1)
		if url == c.url {
			t.Errorf("a README example does not target the local run's address: %s", c.line)
			continue
		}
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
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode >= 300 {
			t.Errorf("%s\n→ %d %s", c.line, resp.StatusCode, body)
		}
		answers = append(answers, string(body))
	}
	all := strings.Join(answers, "\n")
	for _, want := range []string{`25*48 = 1200`, `"text":"teal"`, `"data":{"born":1,"name":"example"}`, "event: tool_use\ndata: {\"id\"", "event: done\ndata: {\"session_id\":\"demo\"", `"title":"What is 25*48?"`} {
		if !strings.Contains(all, want) {
			t.Errorf("no answer contains %s:\n%s", want, all)
		}
	}
}

func TestEvent(t *testing.T) {
	payload := base64.RawURLEncoding.EncodeToString([]byte(`{"sub":"user-7","exp":1795256102,"groups":["a"]}`))
	req, _ := http.NewRequest("GET", "http://127.0.0.1:3000/sessions/abc?limit=5&limit=6&cursor=x", nil)
	req.Header.Set("Authorization", "Bearer header."+payload+".signature")
	req.Header.Set("X-Custom", "1")
	req.RemoteAddr = "127.0.0.1:50000"
	mux := http.NewServeMux()
	var got struct {
		method, route, path, id, sub, exp, limit, custom, ip string
	}
	mux.HandleFunc("GET /sessions/{sessionId}", func(w http.ResponseWriter, r *http.Request) {
		ev, err := localrun.Event(r, "GET /sessions/{sessionId}")
		if err != nil {
			t.Fatal(err)
		}
		c := ev.RequestContext.Authorizer.JWT.Claims
		got.method, got.route, got.path, got.id = ev.RequestContext.HTTP.Method, ev.RouteKey, ev.RawPath, ev.PathParameters["sessionId"]
		got.sub, got.exp, got.limit, got.custom, got.ip = c["sub"], c["exp"], ev.QueryStringParameters["limit"], ev.Headers["x-custom"], ev.RequestContext.HTTP.SourceIP
	})
	mux.ServeHTTP(nopWriter{}, req)
	want := struct {
		method, route, path, id, sub, exp, limit, custom, ip string
	}{"GET", "GET /sessions/{sessionId}", "/sessions/abc", "abc", "user-7", "1795256102", "5,6", "1", "127.0.0.1"}
	if got != want {
		t.Errorf("event (-want +got):\n%s", cmp.Diff(want, got, cmp.AllowUnexported(want)))
	}
}

type nopWriter struct{}

func (nopWriter) Header() http.Header         { return http.Header{} }
func (nopWriter) Write(b []byte) (int, error) { return len(b), nil }
func (nopWriter) WriteHeader(int)             {}

// syncWriter serializes writes from the server's goroutines.
type syncWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (s *syncWriter) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.w.Write(p)
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
