package devrun_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/lambda-agent/lambda-agent/internal/agent"
	"github.com/lambda-agent/lambda-agent/internal/devrun"
	"github.com/lambda-agent/lambda-agent/internal/testkit/conversetest"
)

// TestChatPageRewindsInABrowser drives Regenerate, Edit and Export on the
// chat page, with a scripted model: two messages; the last answer
// regenerated, shown in place of the old one while the stored session holds
// only the new one; a regeneration the model fails, which keeps the answer
// and says why; the first message edited, after which the page and the
// stored session hold only the edited turn, also after a reload; and the
// Export link, which downloads the session.
func TestChatPageRewindsInABrowser(t *testing.T) {
	browser, driver := findBrowser(t)
	model := conversetest.NewServer()
	url := startWithModel(t, model)
	wd := newWebDriver(t, driver, browser)
	wd.Navigate(url + "/")
	wd.WaitFor("the first screen", `return !document.querySelector("#welcome").hidden`)
	if hidden := wd.Eval(`return document.querySelector("#export").hidden`); hidden != true {
		t.Error("a new chat offers to export a session it does not have yet")
	}

	model.Enqueue(conversetest.Text("Apples grow on trees."), conversetest.Text("Pears are sweeter."))
	wd.send("Tell me about apples")
	wd.WaitFor("the first answer", idleWith(1))
	wd.send("And pears?")
	wd.WaitFor("the second answer", idleWith(2))
	id := strings.TrimPrefix(wd.Eval(`return location.hash`).(string), "#s=")
	wantPage(t, wd, "after two messages", page{
		Users: []string{"Tell me about apples", "And pears?"}, Indexes: []string{"0", "2"},
		Answers: []string{"Apples grow on trees.", "Pears are sweeter."},
	})

	// Regenerate: the old answer goes while the new one is written.
	model.Enqueue(conversetest.Text("Pears, regenerated: juicy and soft.").WithDelay(time.Second))
	wd.Click("#messages .turn.assistant .regenerate")
	var during struct {
		Busy    bool
		Shown   string
		Buttons int
	}
	wd.EvalInto(&during, `return {Busy: document.querySelector("#send").disabled, Shown: document.querySelector("#messages").innerText, Buttons: document.querySelectorAll("#messages .regenerate").length}`)
	if !during.Busy {
		t.Fatal("the regeneration was done before the page could be looked at while it ran")
	}
	if strings.Contains(during.Shown, "Pears are sweeter.") || during.Buttons != 0 {
		t.Errorf("while the answer is regenerated, the page shows the old one (%v) or %d Regenerate buttons:\n%s",
			strings.Contains(during.Shown, "Pears are sweeter."), during.Buttons, during.Shown)
	}
	wd.WaitFor("the regenerated answer", idleWith(2)+` && document.querySelector("#messages").innerText.includes("juicy")`)
	wantPage(t, wd, "after Regenerate", page{
		Users: []string{"Tell me about apples", "And pears?"}, Indexes: []string{"0", "2"},
		Answers: []string{"Apples grow on trees.", "Pears, regenerated: juicy and soft."},
	})
	wantStored(t, url, id, "after Regenerate", []string{
		"user: Tell me about apples", "assistant: Apples grow on trees.",
		"user: And pears?", "assistant: Pears, regenerated: juicy and soft.",
	})
	reqs := model.Requests()
	var sent []string
	for _, m := range reqs[len(reqs)-1].Messages {
		sent = append(sent, m.Role+": "+m.Text())
	}
	if diff := cmp.Diff([]string{"user: Tell me about apples", "assistant: Apples grow on trees.", "user: And pears?"}, sent); diff != "" {
		t.Errorf("the regeneration sent the model (-want +got):\n%s", diff)
	}
	if errs := wd.ConsoleErrors(); len(errs) > 0 {
		t.Errorf("the browser's console has errors:\n%s", strings.Join(errs, "\n"))
	}
	wd.Save("chatpage-regenerated.png", wd.Screenshot())

	// A regeneration the model fails keeps the answer, and says why.
	model.Enqueue(conversetest.AccessDenied())
	wd.Click("#messages .turn.assistant .regenerate")
	wd.WaitFor("the failed regeneration", `return !document.querySelector("#send").disabled && document.querySelector("#messages .meta.error") !== null`)
	problem := wd.Eval(`return document.querySelector("#messages .meta.error").textContent`).(string)
	if !strings.HasPrefix(problem, "misconfigured: ") || !strings.Contains(problem, "You don't have access to the model") {
		t.Errorf("the failed regeneration says %q", problem)
	}
	wantPage(t, wd, "after a failed Regenerate", page{
		Users: []string{"Tell me about apples", "And pears?"}, Indexes: []string{"0", "2"},
		Answers: []string{"Apples grow on trees.", "Pears, regenerated: juicy and soft."},
	})
	wantStored(t, url, id, "after a failed Regenerate", []string{
		"user: Tell me about apples", "assistant: Apples grow on trees.",
		"user: And pears?", "assistant: Pears, regenerated: juicy and soft.",
	})
	wd.ConsoleErrors() // the failed request, if it was refused before its stream

	// Edit, cancelled: the message is as it was, and the focus back on Edit.
	first := `#messages .turn.user[data-index="0"]`
	wd.Click(first + " .edit")
	wd.WaitFor("the editor", `return document.activeElement.classList.contains("edit-input")`)
	if got := wd.Eval(`return document.activeElement.value`); got != "Tell me about apples" {
		t.Errorf("the editor holds %q", got)
	}
	if got := wd.Eval(`return document.activeElement.labels[0].textContent`); got != "Edit your message" {
		t.Errorf("the editor's label is %q", got)
	}
	wd.Save("chatpage-edit.png", wd.Screenshot())
	wd.Click(first + " .edit-form .cancel")
	wd.WaitFor("the message after Cancel", `return document.activeElement.classList.contains("edit") && document.querySelector("#messages .edit-form") === null`)
	wantPage(t, wd, "after Cancel", page{
		Users: []string{"Tell me about apples", "And pears?"}, Indexes: []string{"0", "2"},
		Answers: []string{"Apples grow on trees.", "Pears, regenerated: juicy and soft."},
	})

	// Escape cancels too.
	wd.Click(first + " .edit")
	wd.WaitFor("the editor", `return document.activeElement.classList.contains("edit-input")`)
	wd.TypeInto(first+" .edit-input", "\uE00C") // WebDriver's Escape key
	wd.WaitFor("the message after Escape", `return document.activeElement.classList.contains("edit") && document.querySelector("#messages .edit-form") === null`)

	// Edit, saved: only the edited turn is left.
	model.Enqueue(conversetest.Text("Plums are stone fruit."))
	wd.Click(first + " .edit")
	wd.WaitFor("the editor", `return document.activeElement.classList.contains("edit-input")`)
	wd.Eval(`document.activeElement.value = ""`)
	wd.TypeInto(first+" .edit-input", "Tell me about plums")
	wd.Click(first + " .edit-form .save")
	wd.WaitFor("the edited turn's answer", idleWith(1)+` && document.querySelector("#messages").innerText.includes("stone fruit")`)
	edited := page{Users: []string{"Tell me about plums"}, Indexes: []string{"0"}, Answers: []string{"Plums are stone fruit."}}
	wantPage(t, wd, "after Edit", edited)
	wantStored(t, url, id, "after Edit", []string{"user: Tell me about plums", "assistant: Plums are stone fruit."})
	if got := wd.Eval(`return document.activeElement.id`); got != "input" {
		t.Errorf("after the edit the focus is on %q, want the message box", got)
	}

	// The Export link downloads the session.
	var link struct{ Href, Download string }
	wd.EvalInto(&link, `const a = document.querySelector("#export"); return {Href: a.hidden ? "" : a.href, Download: a.download}`)
	if want := url + "/sessions/" + id + "/export"; link.Href != want || link.Download != id+".json" {
		t.Errorf("the Export link is %+v, want href %s and download %s.json", link, want, id)
	}
	var doc struct {
		SessionID string          `json:"session_id"`
		Messages  []agent.Message `json:"messages"`
	}
	if err := getJSON(link.Href, &doc); err != nil {
		t.Errorf("the Export link's target: %v", err)
	} else if doc.SessionID != id || len(doc.Messages) != 2 {
		t.Errorf("the export is of session %q with %d messages, want %s with 2", doc.SessionID, len(doc.Messages), id)
	}

	// After a reload the indexes are the stored ones, and the answer can
	// be regenerated.
	wd.Refresh()
	wd.WaitFor("the session after a reload", `return document.querySelectorAll("#messages .turn.assistant.done").length === 1 && document.querySelector("#messages .regenerate") !== null`)
	wantPage(t, wd, "after a reload", edited)

	wd.Resize(narrowWidth, narrowHeight)
	wd.WaitFor("the narrow layout", narrowLayout)
	wd.Click(first + " .edit")
	wd.WaitFor("the editor", `return document.activeElement.classList.contains("edit-input")`)
	wd.noOverflow()
	wd.Save("chatpage-edit-narrow.png", wd.Screenshot())
	if errs := wd.ConsoleErrors(); len(errs) > 0 {
		t.Errorf("the browser's console has errors:\n%s", strings.Join(errs, "\n"))
	}
	if n := model.Pending(); n != 0 {
		t.Errorf("%d scripted replies were not used", n)
	}
	if v := model.Violations(); len(v) > 0 {
		t.Errorf("the model got requests Bedrock would refuse: %q", v)
	}
}

// idleWith is a script that is true once the page shows n answers, all
// done, and no turn runs.
func idleWith(n int) string {
	return fmt.Sprintf(`return !document.querySelector("#send").disabled && document.querySelectorAll("#messages > .turn.assistant").length === %d && document.querySelectorAll("#messages > .turn.assistant.done").length === %[1]d`, n)
}

// page is what the thread shows: the user's messages, their stored
// indexes, and the answers.
type page struct {
	Users, Indexes, Answers []string
	// Regenerate counts the Regenerate buttons, which only the last
	// answer has.
	Regenerate int
	// Edits counts the Edit buttons.
	Edits int
}

// wantPage checks that the thread shows want, with an Edit button on each
// message of the user's and a Regenerate button on the last answer.
func wantPage(t *testing.T, wd *webDriver, when string, want page) {
	t.Helper()
	var got page
	wd.EvalInto(&got, `
		const shown = [...document.querySelectorAll("#messages > .turn")];
		const users = shown.filter(li => li.classList.contains("user"));
		const answers = shown.filter(li => li.classList.contains("assistant"));
		return {
			Users: users.map(li => li.querySelector(".text").textContent),
			Indexes: users.map(li => li.dataset.index ?? ""),
			Answers: answers.map(li => [...li.querySelectorAll(":scope > .text")].map(t => t.textContent).join(" ")),
			Regenerate: document.querySelectorAll("#messages .regenerate").length,
			Edits: users.filter(li => li.querySelector(".edit")).length,
		}`)
	want.Regenerate, want.Edits = 1, len(want.Users)
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("%s the page shows (-want +got):\n%s", when, diff)
	}
	if on := wd.Eval(`const a = [...document.querySelectorAll("#messages > .turn.assistant")].pop(); return !!(a && a.querySelector(".regenerate"))`); on != true {
		t.Errorf("%s the Regenerate button is not on the last answer", when)
	}
}

// wantStored checks the messages the session stores, each as "role: text".
func wantStored(t *testing.T, base, id, when string, want []string) {
	t.Helper()
	var got []string
	for _, m := range getSession(t, base, id).Messages {
		var texts []string
		for _, b := range m.Content {
			if b.Text != "" {
				texts = append(texts, b.Text)
			}
		}
		got = append(got, string(m.Role)+": "+strings.Join(texts, "\n"))
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("%s the stored session holds (-want +got):\n%s", when, diff)
	}
}

// getJSON decodes the answer to a GET of url into v.
func getJSON(url string, v any) error {
	resp, err := http.Get(url)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	return json.NewDecoder(resp.Body).Decode(v)
}

// startWithModel starts a local run whose Bedrock is model, reached through
// AWS_ENDPOINT_URL_BEDROCK_RUNTIME as on a developer's machine, and returns
// its URL. The SDK reads the variable from the process's environment.
// Memory is off: its extractions would take the replies a test scripts for
// the turns.
func startWithModel(t *testing.T, model *conversetest.Server) string {
	t.Helper()
	url, _ := startRun(t, modelRun(t, model))
	return url
}

// modelRun is the options of a local run whose Bedrock is model, without
// memory.
func modelRun(t *testing.T, model *conversetest.Server) devrun.Options {
	t.Helper()
	t.Cleanup(model.Close) // after the run stops: cleanups run last first
	t.Setenv("AWS_ENDPOINT_URL_BEDROCK_RUNTIME", model.URL)
	env := map[string]string{"AWS_ENDPOINT_URL_BEDROCK_RUNTIME": model.URL}
	return devrun.Options{Getenv: func(k string) string { return env[k] }, NoMemory: true}
}
