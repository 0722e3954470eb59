// Package webdriver drives headless Chromium through chromedriver's W3C
// WebDriver API, for the tests of the pages we ship: the local run's chat
// page and the AG-UI example. It speaks the protocol over net/http, so the
// tests need Chromium and chromedriver and no Go dependency.
package webdriver

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"image/png"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"
)

// Require is the variable that turns a missing browser from a skip into a
// failure; .ci/run sets it after installing Chromium.
const Require = "LAMBDA_AGENT_BROWSER_TEST"

// ScreenshotsDir is the variable that names a directory to keep the
// browser tests' screenshots in; without it they go to a temporary one.
const ScreenshotsDir = "LAMBDA_AGENT_SCREENSHOTS"

// The size of the window a session starts with.
const Width, Height = 1200, 800

// Find returns Chromium and chromedriver, or skips the test, loudly, when
// they are missing, unless Require is set. what names what was not tested,
// for the message.
func Find(t *testing.T, what string) (browser, driver string) {
	t.Helper()
	browser, err1 := exec.LookPath("chromium")
	driver, err2 := exec.LookPath("chromedriver")
	if err1 == nil && err2 == nil {
		return browser, driver
	}
	msg := fmt.Sprintf("Chromium or chromedriver is not installed (apt-get install chromium chromium-driver): %s was not tested in a browser", what)
	if os.Getenv(Require) != "" {
		t.Fatalf("%s, and %s is set", msg, Require)
	}
	t.Skip(msg)
	return "", ""
}

// Session is a session of chromedriver's W3C WebDriver API, in a browser
// of its own. Its methods end the test on any WebDriver error.
type Session struct {
	t     *testing.T
	base  string // http://127.0.0.1:port/session/<id>
	shots string // the temporary directory of the screenshots, once made
}

// New starts chromedriver and a headless browser, which the test's cleanup
// ends.
func New(t *testing.T, driver, browser string) *Session {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	ctx, cancel := context.WithCancel(context.Background())
	cmd := exec.CommandContext(ctx, driver, fmt.Sprintf("--port=%d", port))
	var logs bytes.Buffer
	cmd.Stdout, cmd.Stderr = &logs, &logs
	if err := cmd.Start(); err != nil {
		cancel()
		t.Fatal(err)
	}
	t.Cleanup(func() { cancel(); _ = cmd.Wait() })
	root := fmt.Sprintf("http://127.0.0.1:%d", port)
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		if resp, err := http.Get(root + "/status"); err == nil {
			resp.Body.Close()
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("chromedriver did not start:\n%s", logs.String())
		}
	}
	wd := &Session{t: t, base: root}
	// The flags keep Chromium off the network this machine does not have.
	args := []string{"--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
		"--disable-background-networking", "--disable-component-update", "--disable-sync",
		"--no-first-run", "--disable-quic", fmt.Sprintf("--window-size=%d,%d", Width, Height), "--user-data-dir=" + t.TempDir()}
	var session struct {
		SessionID string `json:"sessionId"`
	}
	wd.Call(http.MethodPost, "/session", map[string]any{"capabilities": map[string]any{"alwaysMatch": map[string]any{
		"browserName":        "chrome",
		"goog:chromeOptions": map[string]any{"binary": browser, "args": args},
		"goog:loggingPrefs":  map[string]string{"browser": "ALL"}, // for ConsoleErrors
	}}}, &session)
	if session.SessionID == "" {
		t.Fatalf("no WebDriver session:\n%s", logs.String())
	}
	wd.base = root + "/session/" + session.SessionID
	t.Cleanup(func() { wd.Call(http.MethodDelete, "", nil, nil) })
	return wd
}

// Call sends a WebDriver command and decodes its value into out.
func (wd *Session) Call(method, path string, in, out any) {
	wd.t.Helper()
	var body bytes.Buffer
	if in != nil {
		if err := json.NewEncoder(&body).Encode(in); err != nil {
			wd.t.Fatal(err)
		}
	}
	req, err := http.NewRequest(method, wd.base+path, &body)
	if err != nil {
		wd.t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		wd.t.Fatalf("WebDriver %s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	var envelope struct {
		Value json.RawMessage `json:"value"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&envelope); err != nil {
		wd.t.Fatalf("WebDriver %s %s: %v", method, path, err)
	}
	if resp.StatusCode != http.StatusOK {
		wd.t.Fatalf("WebDriver %s %s: %d %s", method, path, resp.StatusCode, envelope.Value)
	}
	if out != nil {
		if err := json.Unmarshal(envelope.Value, out); err != nil {
			wd.t.Fatalf("WebDriver %s %s: %v", method, path, err)
		}
	}
}

// Navigate opens url.
func (wd *Session) Navigate(url string) {
	wd.Call(http.MethodPost, "/url", map[string]string{"url": url}, nil)
}

// Refresh reloads the page.
func (wd *Session) Refresh() { wd.Call(http.MethodPost, "/refresh", map[string]any{}, nil) }

// Eval runs script as a function's body, with args as its arguments, and
// returns what it returns.
func (wd *Session) Eval(script string, args ...any) any {
	wd.t.Helper()
	var v any
	wd.EvalInto(&v, script, args...)
	return v
}

// EvalInto runs script as Eval does, and decodes what it returns into out.
func (wd *Session) EvalInto(out any, script string, args ...any) {
	wd.t.Helper()
	if args == nil {
		args = []any{}
	}
	wd.Call(http.MethodPost, "/execute/sync", map[string]any{"script": script, "args": args}, out)
}

// WaitFor polls script until it returns true, for up to 15 seconds.
func (wd *Session) WaitFor(what, script string) {
	wd.t.Helper()
	for deadline := time.Now().Add(15 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		if ok, _ := wd.Eval(script).(bool); ok {
			return
		}
		if time.Now().After(deadline) {
			page := wd.Eval(`return document.body.innerText`)
			wd.t.Fatalf("timed out waiting for %s; the page shows:\n%v", what, page)
		}
	}
}

// TypeInto types text into the element that selector finds, as a user
// would.
func (wd *Session) TypeInto(selector, text string) {
	wd.t.Helper()
	wd.Call(http.MethodPost, "/element/"+wd.Element(selector)+"/value", map[string]string{"text": text}, nil)
}

// Element returns the id of the element that selector finds.
func (wd *Session) Element(selector string) string {
	wd.t.Helper()
	var ref map[string]string
	wd.Call(http.MethodPost, "/element", map[string]string{"using": "css selector", "value": selector}, &ref)
	return ref["element-6066-11e4-a52e-4f735466cecf"] // the W3C element key
}

// Click clicks the element that selector finds, as a user would: WebDriver
// refuses an element that is hidden or covered.
func (wd *Session) Click(selector string) {
	wd.t.Helper()
	wd.Call(http.MethodPost, "/element/"+wd.Element(selector)+"/click", map[string]any{}, nil)
}

// Resize sets the size of the browser's window.
func (wd *Session) Resize(width, height int) {
	wd.t.Helper()
	wd.Call(http.MethodPost, "/window/rect", map[string]int{"width": width, "height": height}, nil)
}

// ConsoleErrors returns the errors the browser's console logged since the
// last call.
func (wd *Session) ConsoleErrors() []string {
	wd.t.Helper()
	var entries []struct {
		Level   string `json:"level"`
		Message string `json:"message"`
	}
	wd.Call(http.MethodPost, "/se/log", map[string]string{"type": "browser"}, &entries)
	var errs []string
	for _, e := range entries {
		if e.Level == "SEVERE" {
			errs = append(errs, e.Message)
		}
	}
	return errs
}

// Save writes a screenshot to the directory ScreenshotsDir names, or to a
// temporary one.
func (wd *Session) Save(name string, shot []byte) {
	wd.t.Helper()
	dir := os.Getenv(ScreenshotsDir)
	if dir == "" {
		if wd.shots == "" {
			wd.shots = wd.t.TempDir()
		}
		dir = wd.shots
	}
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, shot, 0o644); err != nil {
		wd.t.Fatal(err)
	}
	wd.t.Logf("screenshot: %s", path)
}

// Screenshot returns a PNG of the window.
func (wd *Session) Screenshot() []byte {
	wd.t.Helper()
	var b64 string
	wd.Call(http.MethodGet, "/screenshot", nil, &b64)
	b, err := base64.StdEncoding.DecodeString(b64)
	if err != nil {
		wd.t.Fatal(err)
	}
	img, err := png.Decode(bytes.NewReader(b))
	if err != nil {
		wd.t.Fatalf("screenshot: %v", err)
	}
	if r := img.Bounds(); r.Dx() < 300 || r.Dy() < 300 {
		wd.t.Errorf("screenshot is %v", r)
	}
	return b
}
