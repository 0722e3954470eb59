package localrun_test

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
	"strings"
	"testing"
	"time"
)

// requireBrowser is the variable that turns a missing browser from a skip
// into a failure; .ci/run sets it after installing Chromium.
const requireBrowser = "LAMBDA_AGENT_BROWSER_TEST"

// TestChatPageInABrowser drives the local run's chat page in headless
// Chromium through chromedriver's WebDriver API: two messages, the first
// answer streamed in pieces, a calculator call shown with its result, and
// after a reload the same transcript. It saves a screenshot, to the file
// LAMBDA_AGENT_SCREENSHOT names if set.
func TestChatPageInABrowser(t *testing.T) {
	browser, driver := findBrowser(t)
	// A window of two messages slides on the second turn, for the page to
	// show.
	url := start(t, map[string]string{"WINDOW_SIZE": "2"})
	wd := newWebDriver(t, driver, browser)

	wd.navigate(url + "/")
	wd.waitFor("the page to load", `return document.querySelector("#input") !== null && document.querySelector("#sessions-note") !== null`)

	wd.send("Hello there")
	wd.waitFor("the first answer", `return document.querySelectorAll("#messages .turn.assistant.done").length === 1`)
	pieces := wd.eval(`return Number(document.querySelector("#messages .turn.assistant").dataset.pieces)`)
	if n, _ := pieces.(float64); n < 3 {
		t.Errorf("the first answer arrived in %v piece(s), want it streamed in several", pieces)
	}
	first := wd.eval(`return document.querySelector("#messages .turn.assistant .text").textContent`).(string)
	if !strings.Contains(first, "Hello there") {
		t.Errorf("first answer %q", first)
	}

	wd.send("What is 12*34?")
	wd.waitFor("the calculator's answer", `return document.querySelectorAll("#messages .turn.assistant.done").length === 2`)
	result := wd.eval(`const r = document.querySelector('#messages .tool[data-name="calculator"] .result'); return r ? r.textContent : ""`).(string)
	if !strings.Contains(result, "408") {
		t.Errorf("calculator result shown as %q, want 408", result)
	}
	usage := wd.eval(`return document.querySelector("#messages .turn.assistant.done .usage").textContent`).(string)
	if !strings.Contains(usage, "tokens") {
		t.Errorf("usage line %q", usage)
	}
	slid := wd.eval(`const w = document.querySelector("#messages .meta.window"); return w ? w.textContent : ""`).(string)
	if !strings.Contains(slid, "window slid") {
		t.Errorf("the page does not say that the window slid: %q", slid)
	}
	shot := wd.screenshot()
	sessionURL := wd.eval(`return location.href`).(string)
	if !strings.Contains(sessionURL, "#s=") {
		t.Fatalf("the page did not put the session in its URL: %s", sessionURL)
	}

	wd.refresh()
	wd.waitFor("the transcript after a reload", `return document.querySelectorAll("#messages .turn.user").length === 2 && document.querySelectorAll("#messages .turn.assistant").length === 2`)
	after := wd.eval(`return [...document.querySelectorAll("#messages .turn")].map(t => t.textContent).join("\n")`).(string)
	for _, want := range []string{"Hello there", "What is 12*34?", "calculator", "408"} {
		if !strings.Contains(after, want) {
			t.Errorf("the reloaded transcript lacks %q:\n%s", want, after)
		}
	}
	wd.waitFor("the session in the list", `return [...document.querySelectorAll("#sessions .session")].some(b => b.textContent.includes("Hello there"))`)
	banner := wd.eval(`const b = document.querySelector("#window-banner"); return b.hidden ? "" : b.textContent`).(string)
	if !strings.Contains(banner, "slid out of its window") {
		t.Errorf("after the reload the page does not say which messages the model sees: %q", banner)
	}

	img, err := png.Decode(bytes.NewReader(shot))
	if err != nil {
		t.Fatalf("screenshot: %v", err)
	}
	if b := img.Bounds(); b.Dx() < 400 || b.Dy() < 300 {
		t.Errorf("screenshot is %v", b)
	}
	path := os.Getenv("LAMBDA_AGENT_SCREENSHOT")
	if path == "" {
		path = filepath.Join(t.TempDir(), "chat-page.png")
	}
	if err := os.WriteFile(path, shot, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("screenshot: %s", path)
}

// findBrowser returns Chromium and chromedriver, or skips the test, loudly,
// when they are missing, unless requireBrowser is set.
func findBrowser(t *testing.T) (browser, driver string) {
	t.Helper()
	browser, err1 := exec.LookPath("chromium")
	driver, err2 := exec.LookPath("chromedriver")
	if err1 == nil && err2 == nil {
		return browser, driver
	}
	msg := "Chromium or chromedriver is not installed (apt-get install chromium chromium-driver): the chat page was not tested in a browser"
	if os.Getenv(requireBrowser) != "" {
		t.Fatalf("%s, and %s is set", msg, requireBrowser)
	}
	t.Skip(msg)
	return "", ""
}

// webDriver is a session of chromedriver's W3C WebDriver API.
type webDriver struct {
	t    *testing.T
	base string // http://127.0.0.1:port/session/<id>
}

func newWebDriver(t *testing.T, driver, browser string) *webDriver {
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
	wd := &webDriver{t: t, base: root}
	// The flags keep Chromium off the network this machine does not have.
	args := []string{"--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
		"--disable-background-networking", "--disable-component-update", "--disable-sync",
		"--no-first-run", "--disable-quic", "--window-size=1200,800", "--user-data-dir=" + t.TempDir()}
	var session struct {
		SessionID string `json:"sessionId"`
	}
	wd.call(http.MethodPost, "/session", map[string]any{"capabilities": map[string]any{"alwaysMatch": map[string]any{
		"browserName":        "chrome",
		"goog:chromeOptions": map[string]any{"binary": browser, "args": args},
	}}}, &session)
	if session.SessionID == "" {
		t.Fatalf("no WebDriver session:\n%s", logs.String())
	}
	wd.base = root + "/session/" + session.SessionID
	t.Cleanup(func() { wd.call(http.MethodDelete, "", nil, nil) })
	return wd
}

// call sends a WebDriver command and decodes its value into out.
func (wd *webDriver) call(method, path string, in, out any) {
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

func (wd *webDriver) navigate(url string) {
	wd.call(http.MethodPost, "/url", map[string]string{"url": url}, nil)
}

func (wd *webDriver) refresh() { wd.call(http.MethodPost, "/refresh", map[string]any{}, nil) }

func (wd *webDriver) eval(script string) any {
	var v any
	wd.call(http.MethodPost, "/execute/sync", map[string]any{"script": script, "args": []any{}}, &v)
	return v
}

// waitFor polls script until it returns true, for up to 15 seconds.
func (wd *webDriver) waitFor(what, script string) {
	wd.t.Helper()
	for deadline := time.Now().Add(15 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		if ok, _ := wd.eval(script).(bool); ok {
			return
		}
		if time.Now().After(deadline) {
			page := wd.eval(`return document.body.innerText`)
			wd.t.Fatalf("timed out waiting for %s; the page shows:\n%v", what, page)
		}
	}
}

// send types text into the composer and submits it, as a user would.
func (wd *webDriver) send(text string) {
	wd.t.Helper()
	var input, button map[string]string
	wd.call(http.MethodPost, "/element", map[string]string{"using": "css selector", "value": "#input"}, &input)
	wd.call(http.MethodPost, "/element", map[string]string{"using": "css selector", "value": "#send"}, &button)
	wd.call(http.MethodPost, "/element/"+elementID(input)+"/value", map[string]string{"text": text}, nil)
	wd.call(http.MethodPost, "/element/"+elementID(button)+"/click", map[string]any{}, nil)
}

func elementID(ref map[string]string) string {
	return ref["element-6066-11e4-a52e-4f735466cecf"] // the W3C element key
}

func (wd *webDriver) screenshot() []byte {
	var b64 string
	wd.call(http.MethodGet, "/screenshot", nil, &b64)
	b, err := base64.StdEncoding.DecodeString(b64)
	if err != nil {
		wd.t.Fatal(err)
	}
	return b
}
