package devrun_test

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/lambda-agent/lambda-agent/internal/devrun"
	"github.com/lambda-agent/lambda-agent/internal/httpapi"
)

// TestChatPageMemoryInABrowser drives the memory panel on the offline
// local run: empty at first, with a hint; a fact and a preference told in
// one chat appear without a reload, as memory learns them after each
// answer; a new chat's question is answered from memory; one record
// deleted by its button; Forget all, after a confirmation that Cancel
// leaves; more than a page of records, paged; and, in a run without
// memory, the panel marked off. The browser's console stays free of
// errors. It saves screenshots (see webdriver.ScreenshotsDir).
func TestChatPageMemoryInABrowser(t *testing.T) {
	browser, driver := findBrowser(t)
	url := start(t, nil)
	// A run without memory. Both runs start before the browser, so that
	// it is gone when they stop: a connection it holds open would keep a
	// run from stopping.
	off, _ := startRun(t, devrun.Options{Getenv: func(string) string { return "" }, NoMemory: true})
	wd := newWebDriver(t, driver, browser)
	wd.Navigate(url + "/")
	wd.WaitFor("the empty memory panel", `return document.querySelector("#memory-note").textContent.startsWith("Nothing yet")`)
	if got := wd.Eval(`return [document.querySelector("#forget-all").hidden, document.querySelector("#memory-off").hidden]`); !cmp.Equal(got, []any{true, true}) {
		t.Errorf("the empty panel's Forget all and off badge are hidden: %v, want both hidden", got)
	}

	wd.send("My favourite colour is teal.")
	wd.WaitFor("the answer", idleWith(1))
	wd.WaitFor("the fact in the panel", `return document.querySelectorAll("#memory-records .memory-item").length === 1`)
	wd.send("I like green tea.")
	wd.WaitFor("the second answer", idleWith(2))
	wd.WaitFor("the preference in the panel", `return document.querySelectorAll("#memory-records .memory-item").length === 2`)
	want := []string{"fact: The person's favourite colour is teal.", "preference: The person likes green tea."}
	if diff := cmp.Diff(want, panel(t, wd)); diff != "" {
		t.Errorf("the panel shows (-want +got):\n%s", diff)
	}
	if got := wd.Eval(`return document.querySelector("#memory-note").textContent`); got != "" {
		t.Errorf("with records, the panel's note says %q", got)
	}
	wd.Save("chatpage-memory.png", wd.Screenshot())

	// A new chat recalls it.
	wd.Click("#new-chat")
	wd.WaitFor("a new chat", `return !document.querySelector("#welcome").hidden`)
	wd.send("What is my favourite colour?")
	wd.WaitFor("the answer from memory", idleWith(1))
	if got := wd.Eval(`return document.querySelector("#messages .turn.assistant .text").textContent`); got != "From memory: The person's favourite colour is teal." {
		t.Errorf("a new chat answers %q", got)
	}

	// Delete one.
	tea := `[...document.querySelectorAll("#memory-records .memory-item")].find(li => li.textContent.includes("green tea"))`
	wd.Eval(tea + `.querySelector(".delete").click()`)
	wd.WaitFor("the record gone", `return document.querySelectorAll("#memory-records .memory-item").length === 1`)
	if diff := cmp.Diff(want[:1], records(t, url)); diff != "" {
		t.Errorf("after the deletion, GET /memory holds (-want +got):\n%s", diff)
	}
	if got := wd.Eval(`return document.activeElement.closest("#memory-records .memory-item") !== null`); got != true {
		t.Error("after the deletion the focus is not on the record left")
	}

	// Forget all asks first; Cancel keeps memory as it is.
	wd.Click("#forget-all")
	wd.WaitFor("the question", `return !document.querySelector("#memory-confirm").hidden && document.activeElement.id === "forget-cancel"`)
	wd.Save("chatpage-memory-forget.png", wd.Screenshot())
	wd.Click("#forget-cancel")
	wd.WaitFor("the question gone", `return document.querySelector("#memory-confirm").hidden && !document.querySelector("#forget-all").hidden`)
	if got := records(t, url); len(got) != 1 {
		t.Fatalf("after Cancel, GET /memory holds %q", got)
	}
	wd.Click("#forget-all")
	wd.Click("#forget-yes")
	wd.WaitFor("the panel empty", `return document.querySelectorAll("#memory-records .memory-item").length === 0 && document.querySelector("#memory-note").textContent.startsWith("Nothing yet")`)
	if got := records(t, url); len(got) != 0 {
		t.Errorf("after Forget all, GET /memory holds %q", got)
	}

	// More than a page, told through the API: the panel pages.
	for i := range 3 {
		var b strings.Builder
		for j := range 20 {
			fmt.Fprintf(&b, "My thing%d is %d. ", 20*i+j, 20*i+j)
		}
		chatIn(t, url, fmt.Sprintf("many-%d", i), b.String())
	}
	waitForMemory(t, url, func(httpapi.MemoryResponse) bool { return len(records(t, url)) == 60 })
	wd.Refresh()
	wd.WaitFor("a page of memory", `return document.querySelectorAll("#memory-records .memory-item").length === 50 && !document.querySelector("#more-memory").hidden`)
	wd.Click("#more-memory")
	wd.WaitFor("the rest of memory", `return document.querySelectorAll("#memory-records .memory-item").length === 60 && document.querySelector("#more-memory").hidden`)
	if got := wd.Eval(`return new Set([...document.querySelectorAll("#memory-records .memory-item")].map(li => li.dataset.id)).size`); got != 60.0 {
		t.Errorf("the panel shows %v different records, want 60", got)
	}

	wd.Resize(narrowWidth, narrowHeight)
	wd.WaitFor("the narrow layout", narrowLayout)
	wd.Click("#open-sessions")
	wd.WaitFor("the drawer", `const r = document.querySelector("#sidebar").getBoundingClientRect(); return getComputedStyle(document.querySelector("#sidebar")).visibility === "visible" && r.left >= 0`)
	wd.fitsIn("#memory")
	wd.Save("chatpage-memory-narrow.png", wd.Screenshot())
	if errs := wd.ConsoleErrors(); len(errs) > 0 {
		t.Errorf("the browser's console has errors:\n%s", strings.Join(errs, "\n"))
	}

	// Without memory the panel says it is off, and lists nothing.
	wd.Resize(wideWidth, wideHeight)
	wd.Navigate(off + "/")
	wd.WaitFor("the panel marked off", `return !document.querySelector("#memory-off").hidden && document.querySelector("#memory").classList.contains("off")`)
	note := wd.Eval(`return document.querySelector("#memory-note").textContent`).(string)
	if !strings.Contains(note, "off") || !strings.Contains(note, "-memory=false") {
		t.Errorf("the panel of a run without memory says %q", note)
	}
	if got := wd.Eval(`return [document.querySelector("#forget-all").hidden, document.querySelectorAll("#memory-records li").length]`); !cmp.Equal(got, []any{true, 0.0}) {
		t.Errorf("the panel of a run without memory: Forget all hidden and records %v, want [true 0]", got)
	}
	if errs := wd.ConsoleErrors(); len(errs) > 0 {
		t.Errorf("the browser's console has errors:\n%s", strings.Join(errs, "\n"))
	}
}

// panel is what the memory panel lists, each record as "kind: text".
func panel(t *testing.T, wd *webDriver) []string {
	t.Helper()
	var got []string
	wd.EvalInto(&got, `return [...document.querySelectorAll("#memory-records .memory-item")].map(li => li.querySelector(".kind").textContent + ": " + li.querySelector(".text").textContent).sort()`)
	return got
}

// records is what GET /memory lists, page by page, each record as
// "kind: text", sorted.
func records(t *testing.T, base string) []string {
	t.Helper()
	var out []string
	for cursor := ""; ; {
		var m httpapi.MemoryResponse
		if err := getJSON(base+"/memory?limit=100&cursor="+cursor, &m); err != nil {
			t.Fatal(err)
		}
		for _, r := range m.Records {
			out = append(out, r.Kind+": "+r.Text)
		}
		if cursor = m.NextCursor; cursor == "" {
			break
		}
	}
	slices.Sort(out)
	return out
}
