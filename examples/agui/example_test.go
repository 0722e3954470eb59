package agui_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/lambda-agent/lambda-agent/internal/agent"
	"github.com/lambda-agent/lambda-agent/internal/agui"
	"github.com/lambda-agent/lambda-agent/internal/devrun"
	"github.com/lambda-agent/lambda-agent/internal/testkit"
	"github.com/lambda-agent/lambda-agent/internal/testkit/aguiclient"
	"github.com/lambda-agent/lambda-agent/internal/testkit/webdriver"
)

// requireNode is the variable that turns missing Node or npm modules from
// a skip into a failure; .ci/run sets it after npm ci.
const requireNode = "LAMBDA_AGENT_NODE_TEST"

// What the test types, each a row of the README's table.
const (
	hello    = "Hello there"
	approve  = "What is 6*7?"
	deny     = "What is 7*8?"
	question = `/tool ask_user {"question":"Tea or coffee?","options":["tea","coffee"]}`
	theme    = `/tool set_theme {"theme":"dark"}`
	remember = "Remember that my favourite colour is teal."
	delegate = `/tool researcher {"task":"What is 6*7?"}`
	nested   = `/tool researcher {"task":"/tool checker {\"task\":\"What is 7*8?\"}"}`
)

// idle is true once the page takes a message again.
const idle = `document.body.dataset.state === "idle"`

// TestExampleInABrowser runs the example as its README says, against the
// local run started with the README's environment, and drives it in
// headless Chromium: an answer streamed in pieces; an approval approved,
// and the result and the answer; another denied with a reason; a question
// answered with one of its options; set_theme, which the page runs (it
// turns dark) before the turn goes on; and a STATE_DELTA in the state
// panel. The console stays free of errors, a refused message goes back to
// the input box, and the server stores the thread the page shows, one copy
// of each message, valid for Bedrock.
func TestExampleInABrowser(t *testing.T) {
	browser, driver := webdriver.Find(t, "the AG-UI example")
	node := findNode(t)
	readme, err := testkit.Doc("examples/agui/README.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, typed := range []string{hello, approve, question, theme, remember, "npm ci && npm start"} {
		if !strings.Contains(readme, "`"+typed+"`") && !strings.Contains(readme, typed+"\n") {
			t.Errorf("the README does not show %s", typed)
		}
	}
	line := localRunLine(t, readme, "")
	if section, err := testkit.DocSection("docs/agui.md", "## Example front end"); err != nil || !strings.Contains(section, line) {
		t.Errorf("docs/agui.md's Example front end does not start the local run as the README does, with %s (%v)", line, err)
	}
	agentURL := startLocalRun(t, envOf(line))
	npm(t, "run", "build")
	url := serve(t, node, agentURL)

	wd := webdriver.New(t, driver, browser)
	wd.Navigate(url + "/")
	wd.WaitFor("the page", `return `+idle+` && document.querySelector("#thread").textContent !== ""`)
	threadID := wd.Eval(`return document.querySelector("#thread").textContent`).(string)

	send(wd, hello)
	wd.WaitFor("the first answer", `return `+idle+` && document.querySelectorAll("#messages .message.assistant").length === 1`)
	var first struct {
		Text   string
		Pieces int
	}
	wd.EvalInto(&first, `const r = document.querySelector("#messages .message.assistant"); return {Text: r.querySelector(".text").textContent, Pieces: Number(r.dataset.pieces)}`)
	if !strings.Contains(first.Text, `You said: "Hello there"`) || first.Pieces < 3 {
		t.Errorf("the first answer %q arrived in %d piece(s), want it streamed in several", first.Text, first.Pieces)
	}
	if got := text(wd, "#state-change"); !strings.Contains(got, "STATE_SNAPSHOT") {
		t.Errorf("the state panel says %q, want the run's STATE_SNAPSHOT", got)
	}

	// An approval, approved.
	send(wd, approve)
	wd.WaitFor("the approval", `return document.body.dataset.state === "waiting" && document.querySelector(".interrupt.approval") !== null`)
	card := text(wd, ".interrupt.approval")
	for _, want := range []string{"calculator needs your approval to run.", `calculator {"expression":"6*7"}`, "Answer by"} {
		if !strings.Contains(card, want) {
			t.Errorf("the approval does not show %q:\n%s", want, card)
		}
	}
	if got := text(wd, `.call[data-name="calculator"] .result`); got != "waiting" {
		t.Errorf("the waiting call's result shows %q", got)
	}
	if wd.Eval(`return document.querySelector("#input").disabled`) != true {
		t.Error("the input box takes a message while an approval waits")
	}
	wd.Save("agui-approval.png", wd.Screenshot())
	wd.Click(".interrupt .approve")
	wd.WaitFor("the approved call's answer", `return `+idle+` && document.querySelectorAll("#messages .message.assistant").length === 3`)
	if got := text(wd, `.call[data-name="calculator"] .result`); !strings.Contains(got, `"result":42`) {
		t.Errorf("the approved call's result shows %q", got)
	}
	if got := lastAnswer(wd); !strings.Contains(got, "42") {
		t.Errorf("the answer after the approval is %q", got)
	}

	// Another, denied with a reason.
	send(wd, deny)
	wd.WaitFor("the second approval", `return document.body.dataset.state === "waiting" && document.querySelector(".interrupt.approval") !== null`)
	wd.TypeInto(".interrupt .reason", "not now")
	wd.Click(".interrupt .deny")
	wd.WaitFor("the denial", `return `+idle+` && document.querySelectorAll('.call[data-name="calculator"]:not(.waiting)').length === 2`)
	if got := wd.Eval(`return [...document.querySelectorAll('.call[data-name="calculator"] .result')].pop().textContent`).(string); !strings.Contains(got, "denied") || !strings.Contains(got, "not now") {
		t.Errorf("the denied call's result shows %q", got)
	}

	// A question, answered with one of its options.
	send(wd, question)
	wd.WaitFor("the question", `return document.body.dataset.state === "waiting" && document.querySelector(".interrupt.question") !== null`)
	if got := text(wd, ".interrupt.question .prompt"); got != "Tea or coffee?" {
		t.Errorf("the question shows %q", got)
	}
	options := wd.Eval(`return [...document.querySelectorAll(".interrupt.question button.option")].map(b => b.textContent).join(",")`)
	if options != "tea,coffee" {
		t.Errorf("the question's options are %q", options)
	}
	wd.Click(".interrupt.question button.option:nth-of-type(2)")
	wd.WaitFor("the answered question", `return `+idle+` && document.querySelector('.call[data-name="ask_user"]:not(.waiting)') !== null`)
	if got := text(wd, `.call[data-name="ask_user"] .result`); !strings.Contains(got, "coffee") {
		t.Errorf("the question's result shows %q", got)
	}

	// The page's own tool: it runs in the page, and the turn goes on.
	if got := wd.Eval(`return getComputedStyle(document.body).backgroundColor`); got != "rgb(250, 250, 250)" {
		t.Errorf("the page starts with the background %v, want the light theme's", got)
	}
	send(wd, theme)
	wd.WaitFor("the page's tool and the answer after it", `
		const call = document.querySelector('.call[data-name="set_theme"]');
		const rows = [...document.querySelectorAll("#messages .message")];
		return `+idle+` && call !== null && !call.classList.contains("waiting") && rows.at(-1) !== call.closest(".message")`)
	if got := text(wd, `.call[data-name="set_theme"] .result`); got != "The page is dark now." {
		t.Errorf("set_theme's result shows %q", got)
	}
	if got := wd.Eval(`return [document.documentElement.dataset.theme, getComputedStyle(document.body).backgroundColor].join(" ")`); got != "dark rgb(22, 23, 26)" {
		t.Errorf("after set_theme the page's theme and background are %v, want dark", got)
	}
	if got := lastAnswer(wd); !strings.Contains(got, "The page is dark now.") {
		t.Errorf("the answer after set_theme's result is %q", got)
	}

	// A tool that changes the agent state.
	send(wd, remember)
	wd.WaitFor("the state delta", `return `+idle+` && document.querySelector("#state").textContent.includes("teal")`)
	if got := text(wd, "#state-change"); got != "STATE_DELTA: add /memory:favourite_colour" {
		t.Errorf("the state panel says %q", got)
	}
	wd.Save("agui-dark.png", wd.Screenshot())
	if errs := wd.ConsoleErrors(); len(errs) > 0 {
		t.Errorf("the browser's console has errors:\n%s", strings.Join(errs, "\n"))
	}

	// A message the agent refuses (413) leaves the thread and goes back to
	// the input box. The browser logs the refused request, and HttpAgent
	// the failed run.
	rows := wd.Eval(`return document.querySelectorAll("#messages .message").length`)
	tooLong := strings.Repeat("x", 300_000)
	wd.Eval(`document.querySelector("#input").value = arguments[0]`, tooLong)
	wd.Click("#send")
	wd.WaitFor("the refusal", `return `+idle+` && document.querySelector("#status").classList.contains("error")`)
	if got := text(wd, "#status"); !strings.Contains(got, "message_too_large") {
		t.Errorf("the refusal says %q", got)
	}
	if got := wd.Eval(`return document.querySelector("#input").value.length`); got != float64(len(tooLong)) {
		t.Errorf("after the refusal the input box holds %v characters, want the message's %d", got, len(tooLong))
	}
	if got := wd.Eval(`return document.querySelectorAll("#messages .message").length`); got != rows {
		t.Errorf("after the refusal the page shows %v messages, want %v", got, rows)
	}
	wd.Save("agui-refused.png", wd.Screenshot())
	for _, e := range wd.ConsoleErrors() {
		if !strings.Contains(e, "413") {
			t.Errorf("the browser's console has an error: %s", e)
		}
	}

	// The thread as stored, through the example's proxy: the page's
	// messages, each once, and valid for Bedrock.
	stored := aguiclient.Stored(t, url, threadID)
	if err := agent.ValidateHistory(stored); err != nil {
		t.Errorf("the stored thread: %v", err)
	}
	var ids, typed []string
	results := map[string]int{}
	for k, m := range stored {
		if said := m.Text(); m.Role == agent.RoleAssistant || said != "" {
			ids = append(ids, agui.MessageID(m, k))
			if m.Role == agent.RoleUser {
				typed = append(typed, said)
			}
		}
		for _, b := range m.Content {
			if r := b.ToolResult; r != nil {
				results[r.ToolUseID]++
				if r.MessageID != "" && !strings.Contains(fmt.Sprint(r.Content), "The page is dark now.") {
					t.Errorf("the client's result %s holds %v", r.MessageID, r.Content)
				}
			}
		}
	}
	shown := wd.Eval(`return [...document.querySelectorAll("#messages .message")].map(r => r.dataset.id).join(" ")`).(string)
	if diff := cmp.Diff(strings.Join(ids, " "), shown); diff != "" {
		t.Errorf("the stored thread's messages differ from the page's (-stored +page):\n%s", diff)
	}
	if diff := cmp.Diff([]string{hello, approve, deny, question, theme, remember}, typed); diff != "" {
		t.Errorf("the stored user messages (-want +got):\n%s", diff)
	}
	if len(results) != 5 {
		t.Errorf("%d tool results stored, want 5 (two calculator calls, ask_user, set_theme, remember): %v", len(results), results)
	}
	for id, n := range results {
		if n != 1 {
			t.Errorf("the result of %s is stored %d times", id, n)
		}
	}
}

// TestExampleShowsSubAgents runs the example against the local run that
// the README starts with AGENTS, and drives it in headless Chromium: a
// delegation's line says the researcher is working, and its text and
// calculator call stream in inside that line before the call's result
// comes; the turn's answer is a message of the thread, and none of the
// sub-agent's is. A nested delegation's work is drawn inside the
// researcher's, and the checker's failure is visible, with its error. The
// page's messages are the thread the server stores.
func TestExampleShowsSubAgents(t *testing.T) {
	browser, driver := webdriver.Find(t, "the AG-UI example's sub-agents")
	node := findNode(t)
	readme, err := testkit.Doc("examples/agui/README.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, typed := range []string{delegate, nested} {
		if !strings.Contains(readme, "`"+typed+"`") {
			t.Errorf("the README does not show %s", typed)
		}
	}
	env := envOf(localRunLine(t, readme, "AGENTS="))
	if !strings.Contains(env["AGENTS"], `"researcher"`) || !strings.Contains(env["AGENTS"], `"checker"`) {
		t.Fatalf("the README's local run with AGENTS sets %q", env)
	}
	agentURL := startLocalRun(t, env)
	npm(t, "run", "build")
	url := serve(t, node, agentURL)

	wd := webdriver.New(t, driver, browser)
	wd.Navigate(url + "/")
	wd.WaitFor("the page", `return `+idle+` && document.querySelector("#thread").textContent !== ""`)
	threadID := wd.Eval(`return document.querySelector("#thread").textContent`).(string)

	// What the delegation's line shows as the run streams: each change of
	// the researcher's box, to check after the run.
	wd.Eval(`window.seen = [];
		new MutationObserver(() => {
			const line = document.querySelector('#messages > .message .call[data-name="researcher"]');
			const box = line && line.querySelector(':scope > .agent-work[data-agent="researcher"]');
			if (!box) return;
			const now = {
				Box: box.className, Name: box.querySelector(":scope > .agent-name").textContent,
				Texts: box.querySelectorAll(".step > .text:not(:empty)").length,
				Calls: box.querySelectorAll('.call[data-name="calculator"]').length,
				Result: line.querySelector(":scope > .result").textContent,
			};
			if (JSON.stringify(window.seen.at(-1)) !== JSON.stringify(now)) window.seen.push(now);
		}).observe(document.querySelector("#messages"), {subtree: true, childList: true, characterData: true, attributes: true})`)
	send(wd, delegate)
	wd.WaitFor("the delegation's answer", `return `+idle+` && document.querySelectorAll("#messages > .message.assistant").length === 2`)
	type look struct {
		Box, Name, Result string
		Texts, Calls      int
	}
	var seen []look
	wd.EvalInto(&seen, `return window.seen`)
	working := func(l look) bool {
		return l.Box == "agent-work working" && l.Name == "researcher is working…" && l.Result == "waiting"
	}
	if !slices.ContainsFunc(seen, func(l look) bool { return working(l) && l.Texts > 0 }) ||
		!slices.ContainsFunc(seen, func(l look) bool { return working(l) && l.Calls > 0 }) {
		t.Errorf("the researcher's box did not show it working, with its text and its call as they streamed, before the call's result:\n%+v", seen)
	}
	var first struct{ Box, Name, Text, Calc, Result, Answer string }
	wd.EvalInto(&first, `const line = document.querySelector('#messages > .message .call[data-name="researcher"]');
		const box = line.querySelector(':scope > .agent-work[data-agent="researcher"]');
		return {
			Box: box.className, Name: box.querySelector(":scope > .agent-name").textContent,
			Text: box.querySelector(".step > .text").textContent,
			Calc: box.querySelector('.call[data-name="calculator"] > .result').textContent,
			Result: line.querySelector(":scope > .result").textContent,
			Answer: [...document.querySelectorAll("#messages > .message.assistant > .text")].pop().textContent,
		}`)
	if first.Box != "agent-work done" || first.Name != "researcher answered" || first.Text == "" ||
		!strings.Contains(first.Calc, `"result":42`) || !strings.Contains(first.Result, "42") {
		t.Errorf("the researcher's box once it answered: %+v", first)
	}
	if !strings.Contains(first.Answer, "researcher") || !strings.Contains(first.Answer, "42") || first.Answer == first.Text {
		t.Errorf("the turn's answer, the thread's last message, is %q", first.Answer)
	}

	// A nested delegation, whose sub-agent fails.
	send(wd, nested)
	wd.WaitFor("the nested delegation's answer", `return `+idle+` && document.querySelectorAll("#messages > .message.assistant").length === 4`)
	var second struct{ Outer, Box, Name, Calc, Result string }
	wd.EvalInto(&second, `const line = [...document.querySelectorAll('#messages > .message .call[data-name="researcher"]')].pop();
		const outer = line.querySelector(':scope > .agent-work[data-agent="researcher"]');
		const box = outer.querySelector('.step .call[data-name="checker"] > .agent-work[data-agent="checker"]');
		return {
			Outer: outer.className + " | " + outer.querySelector(":scope > .agent-name").textContent,
			Box: box ? box.className : "", Name: box ? box.querySelector(":scope > .agent-name").textContent : "",
			Calc: box ? box.querySelector('.call[data-name="calculator"] > .result').textContent : "",
			Result: box ? box.closest(".call").querySelector(":scope > .result").textContent : "",
		}`)
	if second.Outer != "agent-work done | researcher answered" || second.Box != "agent-work failed" ||
		!strings.HasPrefix(second.Name, "checker failed: the agent checker stopped before it finished") ||
		!strings.Contains(second.Calc, `"result":56`) || !strings.Contains(second.Result, "failed") {
		t.Errorf("the checker's box, inside the researcher's: %+v", second)
	}
	wd.Save("agui-subagents.png", wd.Screenshot())
	if errs := wd.ConsoleErrors(); len(errs) > 0 {
		t.Errorf("the browser's console has errors:\n%s", strings.Join(errs, "\n"))
	}

	// The thread's messages on the page are the server's: the sub-agents'
	// are drawn in their boxes only.
	var ids []string
	for k, m := range aguiclient.Stored(t, url, threadID) {
		if m.Role == agent.RoleAssistant || m.Text() != "" {
			ids = append(ids, agui.MessageID(m, k))
		}
	}
	shown := wd.Eval(`return [...document.querySelectorAll("#messages > .message")].map(r => r.dataset.id).join(" ")`).(string)
	if diff := cmp.Diff(strings.Join(ids, " "), shown); diff != "" {
		t.Errorf("the stored thread's messages differ from the page's (-stored +page):\n%s", diff)
	}
}

// TestServerPassesStreamsThrough holds server.mjs to passing an answer on
// as it comes: the first event of a stream reaches the browser while the
// agent still writes it. The request reaches the agent whole, for the
// agent's host, and the server gives nothing else away from the disk.
func TestServerPassesStreamsThrough(t *testing.T) {
	node := findNode(t)
	release := make(chan struct{})
	type seen struct{ method, path, host, contentType, body string }
	requests := make(chan seen, 2)
	agentSrv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		requests <- seen{r.Method, r.URL.RequestURI(), r.Host, r.Header.Get("Content-Type"), string(body)}
		if r.URL.Path != "/agui" {
			w.Header().Set("Content-Type", "application/json")
			fmt.Fprint(w, `{"messages":[]}`)
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		fmt.Fprint(w, "data: {\"type\":\"RUN_STARTED\"}\n\n")
		w.(http.Flusher).Flush()
		select {
		case <-release:
		case <-r.Context().Done():
		}
		fmt.Fprint(w, "data: {\"type\":\"RUN_FINISHED\"}\n\n")
	}))
	defer agentSrv.Close()
	defer close(release)
	url := serve(t, node, agentSrv.URL)

	resp, err := http.Post(url+"/agui", "application/json", strings.NewReader(`{"threadId":"t"}`))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if ct := resp.Header.Get("Content-Type"); resp.StatusCode != http.StatusOK || ct != "text/event-stream" {
		t.Fatalf("POST /agui through the server: %d %s", resp.StatusCode, ct)
	}
	lines := make(chan string)
	go func() {
		defer close(lines)
		for s := bufio.NewScanner(resp.Body); s.Scan(); {
			lines <- s.Text()
		}
	}()
	select {
	case line := <-lines:
		if line != `data: {"type":"RUN_STARTED"}` {
			t.Errorf("the first line passed on is %q", line)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the first event did not come through while the agent held the stream open: the server buffers")
	}
	want := seen{http.MethodPost, "/agui", strings.TrimPrefix(agentSrv.URL, "http://"), "application/json", `{"threadId":"t"}`}
	if got := <-requests; got != want {
		t.Errorf("the agent got %+v, want %+v", got, want)
	}
	release <- struct{}{}
	var rest []string
	for line := range lines {
		rest = append(rest, line)
	}
	if got := strings.Join(rest, "|"); got != `|data: {"type":"RUN_FINISHED"}|` {
		t.Errorf("the rest of the stream: %q", got)
	}

	if code := get(t, url+"/sessions/t?limit=5"); code != http.StatusOK {
		t.Errorf("GET /sessions/t through the server: %d", code)
	}
	if got := <-requests; got.path != "/sessions/t?limit=5" || got.method != http.MethodGet {
		t.Errorf("the agent got %+v for GET /sessions/t?limit=5", got)
	}
	for _, path := range []string{"/server.mjs", "/README.md", "/package.json", "/../go.mod", "/%2e%2e/go.mod", "/dist/../server.mjs"} {
		if code := get(t, url+path); code != http.StatusNotFound {
			t.Errorf("GET %s: %d, want 404", path, code)
		}
	}
	if code := get(t, url+"/"); code != http.StatusOK {
		t.Errorf("GET /: %d", code)
	}
}

// findNode returns Node, or skips the test, saying why, when Node or the
// example's npm modules are missing, unless requireNode is set.
func findNode(t *testing.T) string {
	t.Helper()
	node, err := exec.LookPath("node")
	if err == nil {
		_, err = exec.LookPath("npm")
	}
	for _, module := range []string{"@ag-ui/client", "esbuild"} {
		if err == nil {
			_, err = os.Stat(filepath.Join("node_modules", module))
		}
	}
	if err == nil {
		return node
	}
	msg := fmt.Sprintf("the AG-UI example needs Node and `npm ci --prefix examples/agui` (%v)", err)
	if os.Getenv(requireNode) != "" {
		t.Fatalf("%s, and %s is set", msg, requireNode)
	}
	t.Skip(msg + ": it was not tested")
	return ""
}

// localRunLine returns the README's first go run ./cmd/local line that
// holds with.
func localRunLine(t *testing.T, readme, with string) string {
	t.Helper()
	for line := range strings.Lines(readme) {
		if strings.Contains(line, "go run ./cmd/local") && strings.Contains(line, with) {
			return strings.TrimSpace(line)
		}
	}
	t.Fatalf("the README does not start the local run with %q", with)
	return ""
}

// envOf returns the environment that a go run ./cmd/local line sets: its
// NAME=value words, where a value in single quotes, as JSON is, may hold
// spaces.
func envOf(line string) map[string]string {
	before, _, _ := strings.Cut(line, "go run ./cmd/local")
	env := map[string]string{}
	for rest := strings.TrimSpace(before); rest != ""; rest = strings.TrimSpace(rest) {
		var k, v string
		k, rest, _ = strings.Cut(rest, "=")
		if quoted, ok := strings.CutPrefix(rest, "'"); ok {
			v, rest, _ = strings.Cut(quoted, "'")
		} else {
			v, rest, _ = strings.Cut(rest, " ")
		}
		env[k] = v
	}
	return env
}

// startLocalRun starts the local run with the offline model and env on a
// free port, and returns its URL.
func startLocalRun(t *testing.T, env map[string]string) string {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	ready, done := make(chan string, 1), make(chan error, 1)
	go func() {
		done <- devrun.Run(ctx, devrun.Options{
			Addr: "127.0.0.1:0", Offline: true, Getenv: func(k string) string { return env[k] },
			Out: &testkit.Buffer{}, Ready: func(url string) { ready <- url },
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

// npm runs npm in this directory.
func npm(t *testing.T, args ...string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	if out, err := exec.CommandContext(ctx, "npm", args...).CombinedOutput(); err != nil {
		t.Fatalf("npm %s: %v\n%s", strings.Join(args, " "), err, out)
	}
}

// serve runs server.mjs on a free port, passing requests on to agentURL,
// until the test ends, and returns its URL.
func serve(t *testing.T, node, agentURL string) string {
	t.Helper()
	cmd := exec.CommandContext(t.Context(), node, "server.mjs")
	cmd.Env = append(os.Environ(), "PORT=0", "AGENT_URL="+agentURL)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Wait() }) // t.Context() ends it first
	first := make(chan string, 1)
	go func() {
		s := bufio.NewScanner(stdout)
		s.Scan()
		first <- s.Text()
		for s.Scan() {
		}
	}()
	select {
	case line := <-first:
		url := regexp.MustCompile(`http://127\.0\.0\.1:\d+`).FindString(line)
		if url == "" || !strings.Contains(line, agentURL) {
			t.Fatalf("server.mjs said %q\n%s", line, stderr.String())
		}
		return url
	case <-time.After(10 * time.Second):
		t.Fatalf("server.mjs did not start:\n%s", stderr.String())
	}
	return ""
}

func send(wd *webdriver.Session, message string) {
	wd.TypeInto("#input", message)
	wd.Click("#send")
}

// text returns the text of the first element that selector finds.
func text(wd *webdriver.Session, selector string) string {
	v, _ := wd.Eval(`const e = document.querySelector(arguments[0]); return e ? e.textContent : ""`, selector).(string)
	return v
}

// lastAnswer returns the text of the last assistant message on the page.
func lastAnswer(wd *webdriver.Session) string {
	return wd.Eval(`return [...document.querySelectorAll("#messages .message.assistant .text")].pop().textContent`).(string)
}

func get(t *testing.T, url string) int {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}
