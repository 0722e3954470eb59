package devrun_test

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
)

// TestLocalRunNeverRedirects sends the local run paths that a ServeMux
// would clean, parameters that hold encoded slashes and dots, and the chat
// page's own paths, with every method. Nothing answers a redirect: an API
// path gets the error a deployment gives, and the page's paths serve a file
// or a 404.
func TestLocalRunNeverRedirects(t *testing.T) {
	base := start(t, nil)
	client := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	send := func(method, path string) (int, http.Header, []byte) {
		t.Helper()
		req, err := http.NewRequestWithContext(t.Context(), method, base+path, strings.NewReader(`{}`))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", "application/json")
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, resp.Header, body
	}
	unclean := []string{
		"/sessions/../etc", "/sessions/..", "/sessions/demo/tools/..", "/sessions/demo/tools/calc/../../x", "//sessions",
		"/./", "/static/../local/info", "/static/./app.js", "/chat/stream/..", "/sessions//export",
	}
	for _, path := range unclean {
		for _, method := range []string{"GET", "POST", "DELETE", "PUT", "HEAD", "OPTIONS"} {
			status, header, body := send(method, path)
			var e struct {
				Error struct{ Code string }
			}
			if method != "HEAD" {
				_ = json.Unmarshal(body, &e)
			}
			if status != http.StatusBadRequest || method != "HEAD" && e.Error.Code != "invalid_path" {
				t.Errorf("%s %s: %d %s %s; want 400 invalid_path", method, path, status, header.Get("Location"), body)
			}
		}
	}
	tests := []struct {
		method, path string
		status       int
		code         string // the error's code, for the API's paths
	}{
		{"GET", "/sessions/demo%2Fexport", 400, "invalid_session_id"},
		{"DELETE", "/sessions/demo%2Ftools%2Fcalculator", 400, "invalid_session_id"},
		{"GET", "/sessions/%2E%2E", 400, "invalid_session_id"},
		{"GET", "/sessions/%2E%2E/export", 400, "invalid_session_id"},
		{"POST", "/sessions/demo/tools/calc%2F..%2F..%2Fx", 404, "unknown_tool"},
		{"POST", "/sessions/demo/tools/%2E%2E", 404, "unknown_tool"},
		{"GET", "/sessions/", 404, "no_route"},
		{"GET", "/static", 404, "no_route"},
		{"GET", "/static/", 404, ""},
		{"GET", "/static/index.html", 200, ""},
		{"GET", "/static/app.js", 200, ""},
		{"GET", "/static/app.js/", 404, ""},
		{"GET", "/static/%2E%2E", 404, ""},
		{"GET", "/static/nothing.js", 404, ""},
		{"GET", "/", 200, ""},
	}
	for _, tt := range tests {
		status, header, body := send(tt.method, tt.path)
		var e struct {
			Error struct{ Code string }
		}
		_ = json.Unmarshal(body, &e)
		if status != tt.status || tt.code != "" && e.Error.Code != tt.code {
			t.Errorf("%s %s: %d %s %.200s; want %d %s", tt.method, tt.path, status, header.Get("Location"), body, tt.status, tt.code)
		}
	}
}
