package devrun_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"html"
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/lambda-agent/lambda-agent/internal/agent"
	"github.com/lambda-agent/lambda-agent/internal/devrun"
	"github.com/lambda-agent/lambda-agent/internal/httpapi"
	"github.com/lambda-agent/lambda-agent/internal/memory"
	"github.com/lambda-agent/lambda-agent/internal/testkit/webdriver"
)

// The window sizes of the wide and the narrow layout; the page switches at
// 700 pixels. A session starts wide.
const (
	wideWidth, wideHeight     = webdriver.Width, webdriver.Height
	narrowWidth, narrowHeight = 390, 844
)

// TestChatPageInABrowser drives the local run's chat page in headless
// Chromium through chromedriver's WebDriver API: the first screen, messages
// with the first answer streamed in pieces, a calculator call shown with
// its result, the view following the end of the thread but not a reader who
// scrolled up, a rejected message given back, and after a reload the same
// transcript, in the wide layout and the narrow one. The browser's console
// stays free of errors. It saves screenshots (see webdriver.ScreenshotsDir).
func TestChatPageInABrowser(t *testing.T) {
	browser, driver := findBrowser(t)
	// A window of two messages slides on the second turn, for the page to
	// show; a message over 4000 bytes is refused.
	// With MODEL_PRICES, each turn shows its cost.
	url := start(t, map[string]string{"WINDOW_SIZE": "2", "MAX_MESSAGE_BYTES": "4000", "MODEL_PRICES": `{"input":3,"output":15}`})
	wd := newWebDriver(t, driver, browser)

	wd.Navigate(url + "/")
	wd.WaitFor("the first screen", `return !document.querySelector("#welcome").hidden && !document.querySelector("#model").hidden`)
	welcome := wd.Eval(`return document.querySelector("#welcome").innerText`).(string)
	for _, want := range []string{"local run", "Offline model", "canned replies"} {
		if !strings.Contains(welcome, want) {
			t.Errorf("the first screen does not say %q:\n%s", want, welcome)
		}
	}
	if got := wd.Eval(`return document.querySelectorAll("#welcome button.example").length`); got != 3.0 {
		t.Errorf("the first screen offers %v example prompts, want 3", got)
	}
	if got := wd.Eval(`return document.querySelector("#model").textContent`); got != "Offline model" {
		t.Errorf("the model badge says %q", got)
	}
	wd.Save("chatpage-welcome.png", wd.Screenshot())

	wd.send("Hello there")
	wd.WaitFor("the first answer", `return document.querySelectorAll("#messages .turn.assistant.done").length === 1`)
	pieces := wd.Eval(`return Number(document.querySelector("#messages .turn.assistant").dataset.pieces)`)
	if n, _ := pieces.(float64); n < 3 {
		t.Errorf("the first answer arrived in %v piece(s), want it streamed in several", pieces)
	}
	first := wd.Eval(`return document.querySelector("#messages .turn.assistant .text").textContent`).(string)
	if !strings.Contains(first, "Hello there") {
		t.Errorf("first answer %q", first)
	}
	if hidden := wd.Eval(`return document.querySelector("#welcome").hidden`); hidden != true {
		t.Error("the first screen stays after the first message")
	}

	// A long message, so that the thread is taller than the view.
	long := strings.Repeat("This is a long message, for the thread to be taller than the window. ", 18)
	wd.sendValue(long)
	wd.WaitFor("the answer to the long message", `return document.querySelectorAll("#messages .turn.assistant.done").length === 2`)

	wd.send("What is 12*34?")
	wd.WaitFor("the calculator's answer", `return document.querySelectorAll("#messages .turn.assistant.done").length === 3`)
	result := wd.Eval(`const r = document.querySelector('#messages .tool[data-name="calculator"] .result'); return r ? r.textContent : ""`).(string)
	if !strings.Contains(result, "408") {
		t.Errorf("calculator result shown as %q, want 408", result)
	}
	usage := wd.Eval(`return document.querySelector("#messages .turn.assistant.done .usage").textContent`).(string)
	if !strings.Contains(usage, "tokens") || !regexp.MustCompile(`\$0\.\d{4}`).MatchString(usage) {
		t.Errorf("usage line %q", usage)
	}
	slid := wd.Eval(`const w = document.querySelector("#messages .meta.window"); return w ? w.textContent : ""`).(string)
	if !strings.Contains(slid, "window slid") {
		t.Errorf("the page does not say that the window slid: %q", slid)
	}
	// The turn's last line, which arrives with its end, is in view.
	if v := wd.lastLine(); !v.Overflows || !v.InView || !strings.Contains(v.Text, "window slid") {
		t.Errorf("after the calculator's turn, its last line is not in view: %+v", v)
	}
	wd.Save("chatpage-wide.png", wd.Screenshot())
	sessionURL := wd.Eval(`return location.href`).(string)
	if !strings.Contains(sessionURL, "#s=") {
		t.Fatalf("the page did not put the session in its URL: %s", sessionURL)
	}

	// A reader who scrolls up while an answer streams stays where they are,
	// and gets a button back to the end.
	// The reader scrolls up as soon as the message is sent, before the
	// answer is done: the pieces that arrive after must not move the view.
	wd.sendValue("Another long one. " + long)
	var before struct {
		Done   bool
		Pieces int
	}
	wd.EvalInto(&before, `
		const m = document.querySelector("#messages");
		const t = [...m.querySelectorAll(".turn.assistant")].pop();
		m.scrollTop = 0;
		return {Done: t.classList.contains("done"), Pieces: Number(t.dataset.pieces)}`)
	if before.Done {
		t.Fatal("the answer was done before the reader could scroll up")
	}
	wd.WaitFor("the answer scrolled past", `return document.querySelectorAll("#messages .turn.assistant.done").length === 4`)
	if top := wd.Eval(`return document.querySelector("#messages").scrollTop`); top != 0.0 {
		t.Errorf("the view moved to %v while the reader had scrolled up to 0", top)
	}
	if pieces := wd.Eval(`return Number([...document.querySelectorAll("#messages .turn.assistant")].pop().dataset.pieces)`).(float64); int(pieces) < before.Pieces+2 {
		t.Errorf("the answer streamed %v pieces in all, %d before the reader scrolled up: too few after to tell", pieces, before.Pieces)
	}
	if hidden := wd.Eval(`return document.querySelector("#jump").hidden`); hidden != false {
		t.Error("no button back to the end of the thread after it grew out of view")
	}
	wd.Click("#jump")
	if v := wd.lastLine(); !v.InView {
		t.Errorf("the button back to the end does not show the last line: %+v", v)
	}
	if errs := wd.ConsoleErrors(); len(errs) > 0 {
		t.Errorf("the browser's console has errors:\n%s", strings.Join(errs, "\n"))
	}

	// A message the API refuses (413) goes back to the input box.
	tooLong := strings.Repeat("x", 5000)
	wd.sendValue(tooLong)
	wd.WaitFor("the refusal", `return document.querySelectorAll("#messages .turn.assistant.failed").length === 1`)
	refusal := wd.Eval(`return document.querySelector("#messages .turn.assistant.failed").textContent`).(string)
	if !strings.Contains(refusal, "message_too_large") {
		t.Errorf("the refusal says %q", refusal)
	}
	if got := wd.Eval(`return document.querySelector("#input").value`); got != tooLong {
		t.Errorf("after the refusal the input box holds %d characters, want the %d of the message", len(fmt.Sprint(got)), len(tooLong))
	}
	if v := wd.lastLine(); !v.InView {
		t.Errorf("the refusal's last line is not in view: %+v", v)
	}
	wd.Save("chatpage-refused.png", wd.Screenshot())
	// The browser logs the refused request, which shows that the console
	// is read; nothing else.
	errs := wd.ConsoleErrors()
	if len(errs) == 0 {
		t.Error("the browser's console did not log the refused request: is it read?")
	}
	for _, e := range errs {
		if !strings.Contains(e, "/chat/stream") || !strings.Contains(e, "413") {
			t.Errorf("the browser's console has an error: %s", e)
		}
	}
	wd.Eval(`document.querySelector("#input").value = ""`)

	wd.Refresh()
	wd.WaitFor("the transcript after a reload", `return document.querySelectorAll("#messages .turn.user").length === 4 && document.querySelectorAll("#messages .turn.assistant").length === 4`)
	after := wd.Eval(`return [...document.querySelectorAll("#messages .turn")].map(t => t.textContent).join("\n")`).(string)
	for _, want := range []string{"Hello there", "What is 12*34?", "calculator", "408", "Another long one."} {
		if !strings.Contains(after, want) {
			t.Errorf("the reloaded transcript lacks %q:\n%s", want, after)
		}
	}
	if strings.Contains(after, tooLong) {
		t.Error("the refused message is in the stored transcript")
	}
	if v := wd.lastLine(); !v.InView {
		t.Errorf("after the reload the end of the transcript is not in view: %+v", v)
	}
	wd.WaitFor("the session in the list", `return [...document.querySelectorAll("#sessions .session")].some(b => b.textContent.includes("Hello there"))`)
	banner := wd.Eval(`const b = document.querySelector("#window-banner"); return b.hidden ? "" : b.textContent`).(string)
	if !strings.Contains(banner, "slid out of its window") {
		t.Errorf("after the reload the page does not say which messages the model sees: %q", banner)
	}

	wd.Resize(narrowWidth, narrowHeight)
	wd.WaitFor("the narrow layout", narrowLayout)
	// The thread, narrower and so taller, keeps its end in view; the page
	// scrolls when it sees the new size, a frame later.
	wd.WaitFor("the end of the transcript in view in the narrow layout", `return `+lastLineScript+`.InView`)
	wd.noOverflow()
	wd.Save("chatpage-narrow.png", wd.Screenshot())
	if errs := wd.ConsoleErrors(); len(errs) > 0 {
		t.Errorf("the browser's console has errors:\n%s", strings.Join(errs, "\n"))
	}
}

// TestChatPageSessionsInABrowser drives the session list: more than a page
// of sessions, sessions with one title told apart, a deletion after a
// confirmation, and the list in the narrow layout, behind a button.
func TestChatPageSessionsInABrowser(t *testing.T) {
	browser, driver := findBrowser(t)
	url := start(t, nil)
	// Two sessions with one title, then more than a page of the list.
	var twins []string
	for i := range 52 {
		title := fmt.Sprintf("Session number %d", i)
		if i < 2 {
			title = "Plan a trip"
		}
		id := chat(t, url, title)
		if i < 2 {
			twins = append(twins, id)
		}
	}
	wd := newWebDriver(t, driver, browser)
	wd.Navigate(url + "/")
	wd.WaitFor("a page of the session list", `return document.querySelectorAll("#sessions .session").length === 50 && !document.querySelector("#more-sessions").hidden`)
	wd.Click("#more-sessions")
	wd.WaitFor("the rest of the list", `return document.querySelectorAll("#sessions .session").length === 52 && document.querySelector("#more-sessions").hidden`)

	var lines []string
	raw := wd.Eval(`return [...document.querySelectorAll("#sessions .session")].filter(b => b.querySelector(".title").textContent === "Plan a trip").map(b => b.querySelector(".when").textContent)`)
	for _, l := range raw.([]any) {
		lines = append(lines, l.(string))
	}
	if len(lines) != 2 || lines[0] == lines[1] {
		t.Errorf("sessions with one title are listed as %q, want two told apart", lines)
	}
	for i, id := range twins {
		if !slices.ContainsFunc(lines, func(l string) bool { return strings.Contains(l, id[:8]) }) {
			t.Errorf("no session in the list shows the start of twin %d's id, %s: %q", i, id, lines)
		}
	}

	// Deleting asks first; Cancel keeps the session.
	gone := twins[0]
	item := fmt.Sprintf(`document.querySelector('#sessions .session[data-id="%s"]')`, gone)
	wd.Click(fmt.Sprintf(`#sessions .session[data-id="%s"] + .delete`, gone))
	wd.WaitFor("the question", `return document.querySelector("#sessions .confirm") !== null`)
	if got := wd.Eval(`return document.activeElement.textContent`); got != "Cancel" {
		t.Errorf("the question focuses %q, want Cancel", got)
	}
	wd.Save("chatpage-confirm.png", wd.Screenshot())
	wd.Click("#sessions .confirm .quiet")
	wd.WaitFor("the session back after Cancel", `return `+item+` !== null && document.querySelector("#sessions .confirm") === null`)
	if status := get(t, url+"/sessions/"+gone); status != http.StatusOK {
		t.Fatalf("GET of a session whose deletion was cancelled: %d", status)
	}
	wd.Click(fmt.Sprintf(`#sessions .session[data-id="%s"] + .delete`, gone))
	wd.Click("#sessions .confirm .danger")
	wd.WaitFor("the session gone from the list", `return `+item+` === null && document.querySelectorAll("#sessions .session").length === 51`)
	if status := get(t, url+"/sessions/"+gone); status != http.StatusNotFound {
		t.Errorf("GET of a deleted session: %d, want 404", status)
	}

	// In the narrow layout a button opens the list, and New chat is in it.
	wd.Navigate(url + "/#s=" + twins[1])
	wd.WaitFor("the session", `return document.querySelectorAll("#messages .turn.assistant.done").length === 1`)
	wd.Resize(narrowWidth, narrowHeight)
	const listShown = `const r = document.querySelector("#sidebar").getBoundingClientRect(); return getComputedStyle(document.querySelector("#sidebar")).visibility === "visible" && r.left >= 0 && r.right > 0`
	wd.WaitFor("the narrow layout", narrowLayout)
	if shown := wd.Eval(listShown); shown != false {
		t.Error("in the narrow layout the session list shows without being asked for")
	}
	wd.noOverflow()
	wd.Click("#open-sessions")
	wd.WaitFor("the session list", listShown)
	if got := wd.Eval(`return document.querySelector("#open-sessions").getAttribute("aria-expanded")`); got != "true" {
		t.Errorf("the button that opened the list has aria-expanded=%v", got)
	}
	wd.Save("chatpage-narrow-sessions.png", wd.Screenshot())
	wd.Click("#new-chat")
	wd.WaitFor("a new chat, the list closed", `return !document.querySelector("#welcome").hidden && getComputedStyle(document.querySelector("#sidebar")).visibility === "hidden"`)
	wd.noOverflow()
	wd.Save("chatpage-narrow-welcome.png", wd.Screenshot())
	wd.Click("#welcome .example")
	wd.WaitFor("the example's answer", `return document.querySelectorAll("#messages .turn.assistant.done").length === 1`)
	if got := wd.Eval(`return document.querySelector("#messages .turn.assistant").textContent`).(string); !strings.Contains(got, "126") {
		t.Errorf("the first example prompt's answer: %q, want the calculator's 126", got)
	}
	wd.Click("#open-sessions")
	wd.WaitFor("the session list again", listShown)
	wd.Click(fmt.Sprintf(`#sessions .session[data-id="%s"]`, twins[1]))
	wd.WaitFor("the session opened from the narrow list", `return document.querySelectorAll("#messages .turn.assistant.done").length === 1 && getComputedStyle(document.querySelector("#sidebar")).visibility === "hidden"`)
	if errs := wd.ConsoleErrors(); len(errs) > 0 {
		t.Errorf("the browser's console has errors:\n%s", strings.Join(errs, "\n"))
	}
}

// TestChatPageApprovalsInABrowser drives the cards of a turn that waits for
// a person, with the calculator behind an approval and ask_user on: a sum
// approved with one click and its result shown; a message typed while the
// next sum waits, which asks first and is cancelled; that sum denied with a
// reason, in the narrow layout; a question whose card comes back after a
// reload, answered through its text box; and a sum asked where the page did
// not see it, whose card the refused message brings, denied by that message
// after the confirmation. The stored session matches what the page showed.
// It saves screenshots (see webdriver.ScreenshotsDir).
func TestChatPageApprovalsInABrowser(t *testing.T) {
	browser, driver := findBrowser(t)
	url := start(t, map[string]string{"APPROVAL_TOOLS": "calculator", "TOOLS": "calculator,current_time,remember,recall,ask_user"})
	wd := newWebDriver(t, driver, browser)
	wd.Navigate(url + "/")
	wd.WaitFor("the first screen", `return !document.querySelector("#welcome").hidden`)

	// The first sum waits for an approval, with a card that says what for.
	wd.send("What is 12*34?")
	wd.WaitFor("the approval card", `return document.querySelectorAll("#messages .interrupt.approval").length === 1 && !document.querySelector("#send").disabled`)
	card := wd.Eval(`return document.querySelector("#messages .interrupt").innerText`).(string)
	for _, want := range []string{"Approval needed: calculator", "calculator needs your approval to run.", `"expression": "12*34"`, "Expires", "Approve", "Deny"} {
		if !strings.Contains(card, want) {
			t.Errorf("the approval card does not say %q:\n%s", want, card)
		}
	}
	if got := wd.Eval(`return document.querySelector('#messages .tool[data-name="calculator"] .result').textContent`); got != "waiting for your approval" {
		t.Errorf("the calculator's box says %q while it waits", got)
	}
	if got := wd.Eval(`return document.querySelectorAll("#messages .turn.assistant .text").length`); got != 1.0 {
		t.Errorf("the paused turn shows %v texts, want 1: its text before the call, once", got)
	}
	bar := wd.Eval(`const b = document.querySelector("#pending-bar"); return b.hidden ? "" : b.innerText`).(string)
	if !strings.Contains(bar, "waits for your approval") {
		t.Errorf("the bar above the message box says %q", bar)
	}
	if v := wd.lastLine(); !v.InView {
		t.Errorf("the end of the paused turn is not in view: %+v", v)
	}
	wd.Save("chatpage-approval.png", wd.Screenshot())
	sessionID := strings.TrimPrefix(wd.Eval(`return location.hash`).(string), "#s=")

	wd.Click("#messages .interrupt .approve")
	wd.WaitFor("the approved sum's answer", `return document.querySelectorAll("#messages .interrupt").length === 0 && !document.querySelector("#send").disabled && document.querySelector("#messages .turn.assistant").textContent.includes("12*34 = 408")`)
	approved := wd.Eval(`return document.querySelector('#messages .tool[data-name="calculator"]').innerText`).(string)
	if !strings.Contains(approved, "408") || !strings.Contains(approved, "You approved this.") {
		t.Errorf("after the approval the calculator's box says:\n%s", approved)
	}
	if got := wd.Eval(`return document.querySelectorAll("#messages .turn.assistant").length`); got != 1.0 {
		t.Errorf("the resumed turn is drawn in %v bubbles, want the one that paused", got)
	}
	if hidden := wd.Eval(`return document.querySelector("#pending-bar").hidden`); hidden != true {
		t.Error("the bar about a waiting request stays after the approval")
	}

	// While the second sum waits, a message asks before it denies; Cancel
	// keeps both the message and the card.
	wd.send("And 99/3?")
	wd.WaitFor("the second approval card", `return document.querySelectorAll("#messages .interrupt.approval").length === 1 && !document.querySelector("#send").disabled`)
	wd.send("Hello?")
	wd.WaitFor("the question before a denial", `return document.querySelector("#pending-bar").classList.contains("confirming")`)
	question := wd.Eval(`return document.querySelector("#pending-bar").innerText`).(string)
	if !strings.Contains(question, "This will deny the pending request (calculator)") || !strings.Contains(question, "Deny and send") {
		t.Errorf("before a message denies, the page asks:\n%s", question)
	}
	if got := wd.Eval(`return document.activeElement.id`); got != "pending-cancel" {
		t.Errorf("the question focuses %q, want Cancel", got)
	}
	wd.Save("chatpage-deny-confirm.png", wd.Screenshot())
	wd.Click("#pending-cancel")
	if got := wd.Eval(`return document.querySelector("#input").value`); got != "Hello?" {
		t.Errorf("after Cancel the input box holds %q", got)
	}
	if got := wd.Eval(`return document.querySelectorAll("#messages .turn.user").length`); got != 2.0 {
		t.Errorf("after Cancel the thread has %v messages of the user, want 2", got)
	}
	wd.Eval(`document.querySelector("#input").value = ""`)

	// The denial, with a reason, in the narrow layout.
	wd.Resize(narrowWidth, narrowHeight)
	wd.WaitFor("the narrow layout", narrowLayout)
	wd.WaitFor("the card in view in the narrow layout", `return `+lastLineScript+`.InView`)
	wd.noOverflow()
	wd.fitsIn("#messages .interrupt")
	wd.Save("chatpage-approval-narrow.png", wd.Screenshot())
	wd.TypeInto("#messages .interrupt .deny-reason", "No more sums today.")
	wd.Click("#messages .interrupt .deny")
	const denial = "A person denied this tool call. Their message: No more sums today."
	wd.WaitFor("the denied sum's answer", `return document.querySelectorAll("#messages .interrupt").length === 0 && !document.querySelector("#send").disabled && [...document.querySelectorAll("#messages .turn.assistant")].pop().textContent.includes("You denied")`)
	denied := wd.Eval(`return [...document.querySelectorAll('#messages .tool[data-name="calculator"]')].pop().innerText`).(string)
	for _, want := range []string{denial, "You denied this: No more sums today."} {
		if !strings.Contains(denied, want) {
			t.Errorf("after the denial the calculator's box does not say %q:\n%s", want, denied)
		}
	}
	answer := wd.Eval(`return [...document.querySelectorAll("#messages .turn.assistant")].pop().innerText`).(string)
	if !strings.Contains(answer, "You denied the calculation of 99/3, so I did not calculate it. Your message: No more sums today.") {
		t.Errorf("the answer after the denial:\n%s", answer)
	}
	wd.Save("chatpage-denied-narrow.png", wd.Screenshot())
	wd.Resize(wideWidth, wideHeight)

	// The stored session: the approved sum's result, and the denial.
	s := getSession(t, url, sessionID)
	if len(s.Interrupts) != 0 {
		t.Errorf("the session still waits for %+v", s.Interrupts)
	}
	results := toolResults(s.Messages)
	if r := results[`{"expression":"12*34"}`]; r == nil || r.Status != agent.ToolSuccess || len(r.Content) != 1 || !strings.Contains(string(r.Content[0].JSON), `"result":408`) {
		t.Errorf("the stored result of the approved sum is %+v", r)
	}
	if r := results[`{"expression":"99/3"}`]; r == nil || r.Status != agent.ToolError || len(r.Content) != 1 || r.Content[0].Text != denial {
		t.Errorf("the stored result of the denied sum is %+v", r)
	}

	// A question: options, and a text box. Its card comes back after a
	// reload, from the stored session.
	wd.sendValue(`/tool ask_user {"question":"Which account?","options":["checking","savings"]}`)
	wd.WaitFor("the question card", `return document.querySelectorAll("#messages .interrupt.question").length === 1 && !document.querySelector("#send").disabled`)
	wd.Save("chatpage-question.png", wd.Screenshot())
	wd.Refresh()
	wd.WaitFor("the question card after a reload", `return document.querySelectorAll("#messages .interrupt.question").length === 1 && document.querySelectorAll("#messages .turn.user").length === 3`)
	card = wd.Eval(`return document.querySelector("#messages .interrupt").innerText`).(string)
	for _, want := range []string{"The agent asks you", "Which account?", "Send answer", "Decline to answer", "Expires"} {
		if !strings.Contains(card, want) {
			t.Errorf("the question card does not say %q:\n%s", want, card)
		}
	}
	options := wd.Eval(`return [...document.querySelectorAll("#messages .interrupt .option")].map(b => b.textContent).join(",")`)
	if options != "checking,savings" {
		t.Errorf("the question card offers %v", options)
	}
	if got := wd.Eval(`return document.activeElement.classList.contains("answer")`); got != true {
		t.Error("the question card's text box does not have the focus")
	}
	reloaded := wd.Eval(`return document.querySelector("#messages").innerText`).(string)
	for _, want := range []string{"408", denial} {
		if !strings.Contains(reloaded, want) {
			t.Errorf("the reloaded transcript lacks %q:\n%s", want, reloaded)
		}
	}
	wd.Resize(narrowWidth, narrowHeight)
	wd.WaitFor("the narrow layout", narrowLayout)
	wd.WaitFor("the question card in view in the narrow layout", `return `+lastLineScript+`.InView`)
	wd.noOverflow()
	wd.fitsIn("#messages .interrupt")
	wd.Save("chatpage-question-narrow.png", wd.Screenshot())
	wd.TypeInto("#messages .interrupt input.answer", "Savings, the joint one")
	wd.Click("#messages .interrupt .send-answer")
	wd.WaitFor("the answered question's result", `return document.querySelectorAll("#messages .interrupt").length === 0 && !document.querySelector("#send").disabled && [...document.querySelectorAll("#messages .turn.assistant")].pop().textContent.includes("returned: Savings")`)
	asked := wd.Eval(`return document.querySelector('#messages .tool[data-name="ask_user"]').innerText`).(string)
	if !strings.Contains(asked, "You answered: Savings, the joint one") {
		t.Errorf("after the answer the question's box says:\n%s", asked)
	}
	s = getSession(t, url, sessionID)
	var got *agent.ToolResultBlock
	for in, r := range toolResults(s.Messages) {
		if strings.Contains(in, "Which account?") {
			got = r
		}
	}
	if got == nil || got.Status != agent.ToolSuccess || len(got.Content) != 1 || got.Content[0].Text != "Savings, the joint one" {
		t.Errorf("the stored answer to the question is %+v", got)
	}
	if errs := wd.ConsoleErrors(); len(errs) > 0 {
		t.Errorf("the browser's console has errors:\n%s", strings.Join(errs, "\n"))
	}

	// The session pauses where the page does not see it, as in another
	// tab: the message the page sends is refused, comes back to the input
	// box, and the card shows. Sent again, after the confirmation, it
	// denies the sum.
	wd.Resize(wideWidth, wideHeight)
	body, _ := json.Marshal(map[string]string{"session_id": sessionID, "message": "What is 1+1?"})
	resp, err := http.Post(url+"/chat", "application/json", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	wd.send("Hello again")
	wd.WaitFor("the card of the sum asked elsewhere", `return document.querySelectorAll("#messages .interrupt.approval").length === 1 && !document.querySelector("#send").disabled`)
	if got := wd.Eval(`return document.querySelector("#input").value`); got != "Hello again" {
		t.Errorf("after the refusal the input box holds %q", got)
	}
	if status := wd.Eval(`return document.querySelector("#status").textContent`).(string); !strings.Contains(status, "waits for your response") {
		t.Errorf("after the refusal the status says %q", status)
	}
	wd.Click("#send")
	wd.WaitFor("the question before a denial", `return document.querySelector("#pending-bar").classList.contains("confirming")`)
	wd.Click("#pending-deny")
	wd.WaitFor("the answer to the message", `return document.querySelectorAll("#messages .interrupt").length === 0 && !document.querySelector("#send").disabled && [...document.querySelectorAll("#messages .turn.assistant")].pop().textContent.includes("You said: \"Hello again\"")`)
	movedOn := wd.Eval(`return [...document.querySelectorAll('#messages .tool[data-name="calculator"]')].pop().innerText`).(string)
	for _, want := range []string{"Denied: you sent a message instead.", "A person sent a new message instead of responding to this tool call"} {
		if !strings.Contains(movedOn, want) {
			t.Errorf("the denied sum's box does not say %q:\n%s", want, movedOn)
		}
	}
	if hidden := wd.Eval(`return document.querySelector("#pending-bar").hidden`); hidden != true {
		t.Error("the bar about a waiting request stays after the message denied it")
	}
	if s := getSession(t, url, sessionID); len(s.Interrupts) != 0 {
		t.Errorf("after the message the session still waits for %+v", s.Interrupts)
	}
	// The browser logs the refused request; nothing else.
	for _, e := range wd.ConsoleErrors() {
		if !strings.Contains(e, "/chat/stream") || !strings.Contains(e, "409") {
			t.Errorf("the browser's console has an error: %s", e)
		}
	}
}

// TestChatPageAnswersInterruptsTogether drives a turn that waits for two
// responses at once, an approval and a question, which the offline model
// never asks for: the page talks to a stand-in of the API (twoWaiting). A
// first decision sends nothing and can be changed; the last one sends both
// responses in one request. That one fails, and the cards are back for a
// retry; the retry's answer shows both results.
func TestChatPageAnswersInterruptsTogether(t *testing.T) {
	browser, driver := findBrowser(t)
	api := &twoWaiting{}
	srv := httptest.NewServer(devrun.Routes(api, devrun.Info{Model: "offline", ModelID: "offline", Where: "A stand-in of the API answers"}))
	t.Cleanup(srv.Close)
	wd := newWebDriver(t, driver, browser)
	wd.Navigate(srv.URL + "/#s=two")
	wd.WaitFor("the two cards", `return document.querySelectorAll("#messages .interrupt").length === 2`)

	wd.Click("#messages .interrupt.approval .approve")
	wd.WaitFor("the first decision", `return document.querySelector("#messages .interrupt.approval").classList.contains("decided")`)
	if n := len(api.requests()); n != 0 {
		t.Fatalf("the page sent %d requests after the first of two decisions", n)
	}
	decided := wd.Eval(`return document.querySelector("#messages .interrupt.approval").innerText`).(string)
	if !strings.Contains(decided, "You approved this.") || !strings.Contains(decided, "Change") {
		t.Errorf("the decided card says:\n%s", decided)
	}
	if bar := wd.Eval(`return document.querySelector("#pending-text").textContent`).(string); !strings.Contains(bar, "1 decided, 1 to go") {
		t.Errorf("the bar says %q", bar)
	}
	if got := wd.Eval(`return document.activeElement.classList.contains("answer")`); got != true {
		t.Error("after the first decision the focus is not in the question's text box")
	}
	wd.Save("chatpage-two-requests.png", wd.Screenshot())

	// Change, then deny with a reason, and answer the question.
	wd.Click("#messages .interrupt.approval .change")
	wd.TypeInto("#messages .interrupt.approval .deny-reason", "Not this one")
	wd.Click("#messages .interrupt.approval .deny")
	if n := len(api.requests()); n != 0 {
		t.Fatalf("the page sent %d requests before the question was answered", n)
	}
	wd.Click("#messages .interrupt.question .option:nth-child(2)")
	wd.WaitFor("the cards back after a failure", `return document.querySelectorAll("#messages .interrupt:not(.decided)").length === 2 && !document.querySelector("#send").disabled`)
	if status := wd.Eval(`return document.querySelector("#status").textContent`).(string); !strings.Contains(status, "did not go through") {
		t.Errorf("after the failure the status says %q", status)
	}
	if failure := wd.Eval(`return document.querySelector("#messages .turn.assistant .meta.error").textContent`).(string); !strings.Contains(failure, "throttled") {
		t.Errorf("the turn says %q about the failure", failure)
	}
	wd.TypeInto("#messages .interrupt.approval .deny-reason", "Not this one")
	wd.Click("#messages .interrupt.approval .deny")
	wd.TypeInto("#messages .interrupt.question input.answer", "savings")
	wd.Click("#messages .interrupt.question .send-answer")
	wd.WaitFor("the resumed turn", `return document.querySelectorAll("#messages .interrupt").length === 0 && !document.querySelector("#send").disabled && document.querySelector("#messages .turn.assistant").textContent.includes("Understood.")`)
	resumeBody := `{"session_id":"two","responses":[{"interrupt_id":"u1","approve":false,"message":"Not this one"},{"interrupt_id":"u2","answer":"savings"}]}`
	want := []string{resumeBody, resumeBody}
	if diff := cmp.Diff(want, api.requests()); diff != "" {
		t.Errorf("the requests of the resume (-want +got):\n%s", diff)
	}
	boxes := wd.Eval(`return [...document.querySelectorAll("#messages .tool")].map(b => b.innerText).join("\n")`).(string)
	for _, want := range []string{"You denied this: Not this one", "A person denied this tool call. Their message: Not this one", "You answered: savings"} {
		if !strings.Contains(boxes, want) {
			t.Errorf("the tool boxes do not say %q:\n%s", want, boxes)
		}
	}
	// The browser logs the refused request; nothing else.
	for _, e := range wd.ConsoleErrors() {
		if !strings.Contains(e, "/chat/stream") || !strings.Contains(e, "429") {
			t.Errorf("the browser's console has an error: %s", e)
		}
	}
}

// twoWaiting is a stand-in of the API with one session, "two", whose turn
// waits for an approval of the calculator (u1) and an answer to ask_user
// (u2), and no memory. It records the bodies of the requests to POST /chat/stream; it
// refuses the first, as when Bedrock throttles, and answers the next
// with the turn resumed. Its answers are the API's types.
type twoWaiting struct {
	mu     sync.Mutex
	bodies []string
}

func (a *twoWaiting) requests() []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return slices.Clone(a.bodies)
}

func (a *twoWaiting) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	asked := json.RawMessage(`{"question":"Which account?","options":["checking","savings"]}`)
	writeJSON := func(v any) {
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(v)
	}
	switch {
	case r.Method == http.MethodGet && r.URL.Path == "/memory":
		writeJSON(httpapi.MemoryResponse{Records: []memory.Record{}})
	case r.Method == http.MethodGet && r.URL.Path == "/sessions":
		writeJSON(httpapi.SessionsResponse{Sessions: []httpapi.SessionSummary{{SessionID: "two", Title: "Two at once", CreatedAt: time.Now()}}})
	case r.Method == http.MethodGet && r.URL.Path == "/sessions/two":
		writeJSON(httpapi.SessionResponse{
			SessionID: "two",
			Title:     "Two at once",
			Messages: []agent.Message{
				{Role: agent.RoleUser, Content: []agent.ContentBlock{agent.Text("What is 2+3, and which account?")}},
				{Role: agent.RoleAssistant, Content: []agent.ContentBlock{
					agent.Text("Let me check."),
					{ToolUse: &agent.ToolUseBlock{ToolUseID: "u1", Name: "calculator", Input: json.RawMessage(`{"expression":"2+3"}`)}},
					{ToolUse: &agent.ToolUseBlock{ToolUseID: "u2", Name: "ask_user", Input: asked}},
				}},
			},
			State: map[string]json.RawMessage{},
			Interrupts: []agent.Interrupt{
				{ID: "u1", Kind: agent.KindApproval, Name: "approval", Tool: "calculator", Input: json.RawMessage(`{"expression":"2+3"}`), Reason: "calculator needs your approval to run.", ExpiresAt: time.Now().Add(time.Hour)},
				{ID: "u2", Kind: agent.KindQuestion, Name: "ask_user", Tool: "ask_user", Input: asked, Reason: "Which account?", Payload: asked, ExpiresAt: time.Now().Add(time.Hour)},
			},
		})
	case r.Method == http.MethodPost && r.URL.Path == "/chat/stream":
		body, _ := io.ReadAll(r.Body)
		a.mu.Lock()
		a.bodies = append(a.bodies, string(body))
		first := len(a.bodies) == 1
		a.mu.Unlock()
		if first {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusTooManyRequests)
			fmt.Fprint(w, `{"error":{"code":"throttled","message":"the model is throttling requests; retry later"}}`)
			return
		}
		denied := agent.TextResult("u1", agent.ToolError, "A person denied this tool call. Their message: Not this one")
		answered := agent.TextResult("u2", agent.ToolSuccess, "savings")
		done, _ := json.Marshal(httpapi.ChatResponse{
			SessionID: "two",
			Text:      "Understood.",
			Messages: []agent.Message{
				{Role: agent.RoleUser, Content: []agent.ContentBlock{{ToolResult: denied}, {ToolResult: answered}}},
				{Role: agent.RoleAssistant, Content: []agent.ContentBlock{agent.Text("Understood.")}},
			},
			StopReason: agent.StopEndTurn,
		})
		w.Header().Set("Content-Type", "text/event-stream")
		fmt.Fprintf(w, "event: start\ndata: {\"session_id\":\"two\"}\n\n")
		fmt.Fprintf(w, "event: tool_result\ndata: {\"id\":\"u2\",\"status\":\"success\",\"preview\":\"savings\"}\n\n")
		fmt.Fprintf(w, "event: text\ndata: {\"delta\":\"Understood.\"}\n\n")
		fmt.Fprintf(w, "event: done\ndata: %s\n\n", done)
	default:
		http.NotFound(w, r)
	}
}

// getSession reads a session through the API.
func getSession(t *testing.T, base, id string) httpapi.SessionResponse {
	t.Helper()
	resp, err := http.Get(base + "/sessions/" + id)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var s httpapi.SessionResponse
	if err := json.NewDecoder(resp.Body).Decode(&s); err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /sessions/%s: %d %v", id, resp.StatusCode, err)
	}
	return s
}

// toolResults returns the tool results of messages by the input of their
// tool use, compacted.
func toolResults(messages []agent.Message) map[string]*agent.ToolResultBlock {
	inputs := map[string]string{}
	out := map[string]*agent.ToolResultBlock{}
	for _, m := range messages {
		for _, b := range m.Content {
			if u := b.ToolUse; u != nil {
				var c bytes.Buffer
				_ = json.Compact(&c, u.Input)
				inputs[u.ToolUseID] = c.String()
			}
			if r := b.ToolResult; r != nil {
				out[inputs[r.ToolUseID]] = r
			}
		}
	}
	return out
}

// TestChatPageLearnsTheModel checks what the chat page reads besides the
// API: which model answers, from the local run's own route, and its icon.
func TestChatPageLearnsTheModel(t *testing.T) {
	url := start(t, nil)
	resp, err := http.Get(url + devrun.InfoPath)
	if err != nil {
		t.Fatal(err)
	}
	var got devrun.Info
	err = json.NewDecoder(resp.Body).Decode(&got)
	resp.Body.Close()
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %d %v", devrun.InfoPath, resp.StatusCode, err)
	}
	want := devrun.Info{Model: "offline", ModelID: "offline", Where: "The local run was started with -offline"}
	if got != want {
		t.Errorf("GET %s = %+v, want %+v", devrun.InfoPath, got, want)
	}

	// The first screen's example prompts each make the offline model call a
	// tool.
	resp, err = http.Get(url + "/")
	if err != nil {
		t.Fatal(err)
	}
	page, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	examples := regexp.MustCompile(`<button type="button" class="example">([^<]+)</button>`).FindAllStringSubmatch(string(page), -1)
	if len(examples) != 3 {
		t.Errorf("the page has %d example prompts, want 3", len(examples))
	}
	for _, m := range examples {
		body, _ := json.Marshal(map[string]string{"message": html.UnescapeString(m[1])})
		resp, err := http.Post(url+"/chat", "application/json", bytes.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		var answer struct {
			Text    string `json:"text"`
			Metrics struct {
				ToolCalls int `json:"tool_calls"`
			} `json:"metrics"`
		}
		err = json.NewDecoder(resp.Body).Decode(&answer)
		resp.Body.Close()
		if err != nil || answer.Metrics.ToolCalls != 1 {
			t.Errorf("example %q: %d tool calls, %v; answer %q", m[1], answer.Metrics.ToolCalls, err, answer.Text)
		}
	}

	resp, err = http.Get(url + "/static/favicon.svg")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "image/svg+xml" {
		t.Errorf("the icon: %d %s", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
}

// narrowLayout is true once the page has its narrow layout: the button to
// the session list shows, and the list does not.
const narrowLayout = `return getComputedStyle(document.querySelector("#open-sessions")).display !== "none" && getComputedStyle(document.querySelector("#sidebar")).visibility === "hidden"`

// chat sends a message in a new session through the API, and returns the
// session's id.
func chat(t *testing.T, base, message string) string {
	t.Helper()
	body, _ := json.Marshal(map[string]string{"message": message})
	resp, err := http.Post(base+"/chat", "application/json", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var answer struct {
		SessionID string `json:"session_id"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&answer); err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("POST /chat: %d %v", resp.StatusCode, err)
	}
	return answer.SessionID
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

// findBrowser returns Chromium and chromedriver, or skips the test, loudly,
// when they are missing, unless webdriver.Require is set.
func findBrowser(t *testing.T) (browser, driver string) {
	t.Helper()
	return webdriver.Find(t, "the chat page")
}

// webDriver is a WebDriver session on the chat page: webdriver.Session's
// commands, and the page's own below.
type webDriver struct {
	*webdriver.Session
	t *testing.T
}

func newWebDriver(t *testing.T, driver, browser string) *webDriver {
	t.Helper()
	return &webDriver{Session: webdriver.New(t, driver, browser), t: t}
}

// send types text into the composer and submits it, as a user would.
func (wd *webDriver) send(text string) {
	wd.t.Helper()
	wd.TypeInto("#input", text)
	wd.Click("#send")
}

// sendValue puts text in the composer at once, as a paste would, and
// submits it: typing a long text key by key takes a while.
func (wd *webDriver) sendValue(text string) {
	wd.t.Helper()
	wd.Eval(`document.querySelector("#input").value = arguments[0]`, text)
	wd.Click("#send")
}

// lastLine is where the last line of the thread's last turn is.
type lastLine struct {
	Text      string
	InView    bool // inside the thread's visible part
	Overflows bool // the thread is taller than its view
}

func (wd *webDriver) lastLine() lastLine {
	wd.t.Helper()
	var v lastLine
	wd.EvalInto(&v, `return `+lastLineScript)
	return v
}

// lastLineScript is a JavaScript expression for a lastLine: the last line
// of the turn's content, not the row of its buttons, such as Regenerate,
// nor the collapsed view of what the model saw.
const lastLineScript = `(() => {
	const m = document.querySelector("#messages");
	const line = [...m.lastElementChild.children].filter(e => !e.matches(".turn-actions, .saw")).pop();
	const r = line.getBoundingClientRect(), view = m.getBoundingClientRect();
	return {Text: line.textContent, InView: r.top >= view.top && r.bottom <= view.bottom + 1, Overflows: m.scrollHeight > m.clientHeight + 100};
})()`

// noOverflow checks that the page does not scroll sideways, and that no
// element inside it is cut on the right.
func (wd *webDriver) noOverflow() {
	wd.t.Helper()
	cut := wd.Eval(`
		const w = document.documentElement.clientWidth;
		if (document.documentElement.scrollWidth > w) return "the page is " + document.documentElement.scrollWidth + " pixels wide in a " + w + " pixel window";
		for (const e of document.querySelectorAll("main *")) {
			const r = e.getBoundingClientRect();
			if (r.width && r.right > w + 1) return e.outerHTML.slice(0, 120) + " ends at " + r.right + " in a " + w + " pixel window";
		}
		return ""`)
	if cut != "" {
		wd.t.Errorf("overflow: %v", cut)
	}
}

// fitsIn checks that nothing inside the elements selector finds sticks out
// of them on the right.
func (wd *webDriver) fitsIn(selector string) {
	wd.t.Helper()
	cut := wd.Eval(`
		for (const box of document.querySelectorAll(arguments[0])) {
			const right = box.getBoundingClientRect().right;
			for (const e of box.querySelectorAll("*")) {
				const r = e.getBoundingClientRect();
				if (r.width && r.right > right + 1) return e.outerHTML.slice(0, 120) + " ends at " + r.right + ", its box at " + right;
			}
		}
		return ""`, selector)
	if cut != "" {
		wd.t.Errorf("overflow: %v", cut)
	}
}
