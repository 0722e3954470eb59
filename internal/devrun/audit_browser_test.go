package devrun_test

import (
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/lambda-agent/lambda-agent/internal/agent"
	"github.com/lambda-agent/lambda-agent/internal/devrun"
	"github.com/lambda-agent/lambda-agent/internal/httpapi"
)

// sawCall is a model call as the view of what the model saw shows it.
type sawCall struct {
	Head    string
	System  string
	Roles   []string // each message's role
	Texts   []string // the text blocks of the messages, in order
	Context []string // the text of the blocks marked as context
	Tools   []string // the tools' names
	Cache   []string // the cache points
	Output  string
	Stop    string
}

// sawScript returns, for the view of the answer that the JavaScript
// expression answer finds, its model calls as sawCalls.
func sawScript(answer string) string {
	return `const view = ` + answer + `.querySelector(":scope > .saw");
		return [...view.querySelectorAll(".saw-call")].map(c => ({
			Head: c.querySelector("h4").textContent,
			System: [...c.querySelectorAll(".saw-part.system pre")].map(p => p.textContent).join("\n"),
			Roles: [...c.querySelectorAll(".saw-message")].map(m => m.classList[1]),
			Texts: [...c.querySelectorAll(".saw-message .saw-block.text pre")].map(p => p.textContent),
			Context: [...c.querySelectorAll(".saw-message .saw-block.context")].map(b => b.textContent),
			Tools: [...c.querySelectorAll(".saw-tool > summary")].map(s => s.textContent),
			Cache: [...c.querySelectorAll(".saw-cache, .saw-part.tools .saw-meta")].map(p => p.textContent).filter(t => t.includes("cache point")),
			Output: c.querySelector(".saw-part.output") ? c.querySelector(".saw-part.output").textContent : "",
			Stop: c.querySelector(".saw-stop") ? c.querySelector(".saw-stop").textContent : "",
		}))`
}

// answerAt is a JavaScript expression for the n-th answer of the thread,
// from 1.
func answerAt(n int) string {
	return fmt.Sprintf(`document.querySelectorAll("#messages > .turn.assistant")[%d]`, n-1)
}

// openSaw opens the view of what the model saw of the n-th answer and
// waits for its calls, want of them.
func (wd *webDriver) openSaw(n, want int) []sawCall {
	wd.t.Helper()
	wd.Eval(answerAt(n) + `.querySelector(":scope > .saw > summary").click()`)
	wd.WaitFor(fmt.Sprintf("what the model saw for answer %d", n), fmt.Sprintf(`const v = %s.querySelector(":scope > .saw");
		return v.open && !v.querySelector(".saw-body").hasAttribute("aria-busy") && v.querySelectorAll(".saw-call").length === %d`, answerAt(n), want))
	var calls []sawCall
	wd.EvalInto(&calls, sawScript(answerAt(n)))
	return calls
}

// TestChatPageShowsWhatTheModelSaw drives the view of what the model saw
// on the offline local run: under each answer, collapsed and unread until
// opened, the turn's model calls from its audit record, each with the
// system prompt, the messages as sent (the recalled memory marked as a
// context block), the tools by name with their specs a click away, and the
// output with its stop reason; a message holding HTML shown as text; the
// same after a reload; and, on a run whose records need a second page and
// a read of one alone, the records of every answer. On a run with AUDIT
// off the view says so. The browser's console stays free of errors. It
// saves screenshots (see webdriver.ScreenshotsDir).
func TestChatPageShowsWhatTheModelSaw(t *testing.T) {
	browser, driver := findBrowser(t)
	// A model whose prompt cache Bedrock offers, and a system prompt long
	// enough to be cached: the requests have cache points.
	system := "You are the test's agent. <b>This is not bold.</b>" + strings.Repeat(" Answer briefly, and use the tools you have.", 200)
	url := start(t, map[string]string{"SYSTEM_PROMPT": system, "MODEL_ID": devrun.DefaultModelID})
	// A run whose records need more than a page, and one too large for
	// a page (4 MB in the local run), which is read alone; and a run
	// without the audit record. They start before the browser, which is
	// gone when they stop.
	big, _ := startRun(t, devrun.Options{NoMemory: true, Getenv: func(k string) string {
		return map[string]string{"MAX_MESSAGE_BYTES": fmt.Sprint(2 << 20), "WINDOW_SIZE": "2"}[k]
	}})
	off, _ := startRun(t, devrun.Options{NoMemory: true, Getenv: func(k string) string { return map[string]string{"AUDIT": "off"}[k] }})
	wd := newWebDriver(t, driver, browser)
	wd.Navigate(url + "/")
	wd.WaitFor("the first screen", `return !document.querySelector("#welcome").hidden`)

	// A turn with a tool call: two model calls.
	wd.send("What is 12*34?")
	wd.WaitFor("the calculator's answer", idleWith(1))
	var closed struct {
		Views, Open, Read int
		Summary           string
	}
	wd.EvalInto(&closed, `const v = document.querySelectorAll("#messages .turn.assistant > .saw");
		return {Views: v.length, Open: [...v].filter(d => d.open).length, Read: [...v].filter(d => d.querySelector(".saw-body").childElementCount > 0).length,
			Summary: v.length ? v[0].querySelector("summary").textContent : ""}`)
	if closed.Views != 1 || closed.Open != 0 || closed.Read != 0 || closed.Summary != "What the model saw" {
		t.Errorf("under the answer, %+v; want one view, %q, closed and not read", closed, "What the model saw")
	}
	calls := wd.openSaw(1, 2)
	for i, c := range calls {
		if c.System != system || !strings.Contains(strings.Join(c.Tools, ","), "calculator") {
			t.Errorf("call %d: system prompt %q, tools %q; want %q and the calculator", i+1, c.System, c.Tools, system)
		}
		if len(c.Cache) == 0 {
			t.Errorf("call %d shows no cache point", i+1)
		}
		if len(c.Texts) == 0 || c.Texts[0] != "What is 12*34?" || c.Roles[0] != "user" {
			t.Errorf("call %d: messages %q of roles %q; want the user's message first", i+1, c.Texts, c.Roles)
		}
	}
	if len(calls) == 2 {
		if !strings.Contains(calls[0].Output, "tool use: calculator") || !strings.Contains(calls[0].Stop, "stop reason: tool_use") {
			t.Errorf("the first call's output %q, %q; want the calculator's use, stopped for it", calls[0].Output, calls[0].Stop)
		}
		if len(calls[1].Roles) != 3 || !strings.Contains(calls[1].Stop, "stop reason: end_turn") || !strings.Contains(calls[1].Output, "408") {
			t.Errorf("the second call: %d messages, output %q, %q; want the use and its result sent, and the answer", len(calls[1].Roles), calls[1].Output, calls[1].Stop)
		}
		if !strings.HasPrefix(calls[0].Head, "Model call 1 of 2 · "+devrun.DefaultModelID) {
			t.Errorf("the first call is headed %q", calls[0].Head)
		}
	}
	// A tool's spec is a click away.
	wd.Eval(answerAt(1) + `.querySelector('.saw-tool[data-name="calculator"] > summary').click()`)
	if spec := wd.Eval(`return ` + answerAt(1) + `.querySelector('.saw-tool[data-name="calculator"]').textContent`).(string); !strings.Contains(spec, `"expression"`) {
		t.Errorf("the calculator's spec, expanded: %q", spec)
	}
	wd.Save("chatpage-saw.png", wd.Screenshot())

	// Recalled memory is a context block, marked as not the person's.
	wd.send("My favourite colour is teal.")
	wd.WaitFor("the fact's answer", idleWith(2))
	wd.WaitFor("the fact in memory", `return document.querySelectorAll("#memory-records .memory-item").length === 1`)
	wd.send("What is my favourite colour?")
	wd.WaitFor("the answer from memory", idleWith(3))
	calls = wd.openSaw(3, 1)
	if len(calls[0].Context) != 1 || !strings.Contains(calls[0].Context[0], "teal") || !strings.Contains(calls[0].Context[0], "not the person's words") {
		t.Errorf("the recalled memory's context blocks: %q", calls[0].Context)
	}
	for _, text := range calls[0].Texts {
		if strings.HasPrefix(text, agent.ContextHeader) {
			t.Errorf("a context block is shown as words of the conversation: %q", text)
		}
	}

	// What a record holds is shown as text, never as HTML.
	const hostile = `<img src=x onerror="document.title='pwned'"> and <script>document.title='pwned'</script>`
	wd.sendValue(hostile)
	wd.WaitFor("the hostile message's answer", idleWith(4))
	calls = wd.openSaw(4, 1)
	if texts := calls[0].Texts; len(texts) == 0 || texts[len(texts)-1] != hostile {
		t.Errorf("the hostile message is shown as %q", texts)
	}
	var shown struct {
		Images, Scripts, Bold int
		Escaped, Title        bool
	}
	wd.EvalInto(&shown, `const v = `+answerAt(4)+`.querySelector(":scope > .saw");
		return {Images: document.querySelectorAll("#messages img").length, Scripts: document.querySelectorAll("#messages script").length,
			Bold: document.querySelectorAll("#messages .saw b").length, Escaped: v.innerHTML.includes("&lt;img src=x onerror="),
			Title: document.title.includes("pwned")}`)
	if shown.Images != 0 || shown.Scripts != 0 || shown.Bold != 0 || !shown.Escaped || shown.Title {
		t.Errorf("HTML in a record became HTML: %+v", shown)
	}

	// After a reload, each answer's view covers its own turn.
	wd.Refresh()
	wd.WaitFor("the transcript after a reload", idleWith(4))
	if calls = wd.openSaw(1, 2); len(calls) == 2 && calls[1].Texts[0] != "What is 12*34?" {
		t.Errorf("after a reload, the first answer's calls: %+v", calls)
	}
	if calls = wd.openSaw(4, 1); calls[0].Texts[len(calls[0].Texts)-1] != hostile {
		t.Errorf("after a reload, the last answer's call sent %q", calls[0].Texts)
	}
	wd.Resize(narrowWidth, narrowHeight)
	wd.WaitFor("the narrow layout", narrowLayout)
	wd.noOverflow()
	wd.Save("chatpage-saw-narrow.png", wd.Screenshot())
	wd.Resize(wideWidth, wideHeight)
	if errs := wd.ConsoleErrors(); len(errs) > 0 {
		t.Errorf("the browser's console has errors:\n%s", strings.Join(errs, "\n"))
	}

	// More records than a page holds, and one larger than a page: 100
	// turns, one whose message takes 4 MB in its record, and one more.
	const session = "many-records"
	for i := range httpapi.MaxAuditPageSize {
		chatIn(t, big, session, fmt.Sprintf("message %d", i))
	}
	huge := strings.Repeat(`"\`, 1<<20) // 2 MiB, which JSON escapes to 4 MiB
	chatIn(t, big, session, huge)
	chatIn(t, big, session, "the last one")
	wd.Navigate(big + "/#s=" + session)
	wd.WaitFor("the long session", idleWith(httpapi.MaxAuditPageSize+2))
	n := httpapi.MaxAuditPageSize + 1
	calls = wd.openSaw(n, 1)
	if texts := calls[0].Texts; len(texts) == 0 || texts[len(texts)-1] != huge {
		t.Errorf("the record larger than a page, read alone: messages of %d texts", len(texts))
	}
	if calls = wd.openSaw(n+1, 1); calls[0].Texts[len(calls[0].Texts)-1] != "the last one" {
		t.Errorf("the record on the second page: %q", calls[0].Texts)
	}
	if calls = wd.openSaw(1, 1); calls[0].Texts[0] != "message 0" {
		t.Errorf("the first record: %q", calls[0].Texts)
	}

	// Without the audit record, the view says it is off.
	wd.Navigate(off + "/")
	wd.WaitFor("the first screen", `return !document.querySelector("#welcome").hidden`)
	wd.send("Hello")
	wd.WaitFor("the answer", idleWith(1))
	wd.Eval(answerAt(1) + `.querySelector(":scope > .saw > summary").click()`)
	wd.WaitFor("the view of a run without the audit record", `return `+answerAt(1)+`.querySelector(".saw-body").textContent.includes("AUDIT=off")`)
	if errs := wd.ConsoleErrors(); len(errs) != 1 || !strings.Contains(errs[0], "/audit") || !strings.Contains(errs[0], "404") {
		t.Errorf("the browser's console, which logs the 404 of the audit record that is off, and nothing else:\n%s", strings.Join(errs, "\n"))
	}
}

// TestChatPageKnowsTheContextHeader: the chat page marks context blocks
// by the header the agent begins them with, agent.ContextHeader.
func TestChatPageKnowsTheContextHeader(t *testing.T) {
	js, err := os.ReadFile("page/app.js")
	if err != nil {
		t.Fatal(err)
	}
	if want := fmt.Sprintf("const CONTEXT_HEADER = %q;", agent.ContextHeader); !strings.Contains(string(js), want) {
		t.Errorf("page/app.js does not hold agent.ContextHeader: want %s", want)
	}
}
