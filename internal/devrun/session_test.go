package devrun_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/lambda-agent/lambda-agent/internal/agent"
	"github.com/lambda-agent/lambda-agent/internal/testkit"
)

// runSection runs the curl commands of the section heading of
// docs/sessions.md, in order, on a local run started as the README's first
// command starts it, and returns the section, the run's address and the
// answers. Every command must succeed, and there must be want of them.
func runSection(t *testing.T, heading string, want int) (section, base string, answers []string) {
	t.Helper()
	section, err := testkit.DocSection("docs/sessions.md", heading)
	if err != nil {
		t.Fatal(err)
	}
	base = start(t, nil)
	curls := curlsIn(t, section, "http://127.0.0.1:3000")
	if len(curls) != want {
		t.Fatalf("found %d curl commands in the section, want %d", len(curls), want)
	}
	for _, c := range curls {
		status, body := c.send(t, strings.Replace(c.url, "http://127.0.0.1:3000", base, 1))
		if status >= 300 {
			t.Errorf("%s\n→ %d %s", c.line, status, body)
		}
		answers = append(answers, body)
	}
	return section, base, answers
}

// TestDocsDirectToolCallExamples runs the curl commands of the direct tool
// calls of docs/sessions.md, in order, on a local run started as the README's
// first command starts it, and checks the answers the section quotes.
func TestDocsDirectToolCallExamples(t *testing.T) {
	section, _, answers := runSection(t, "## Direct tool calls", 3)
	// The section quotes what the first two answer, between backquotes.
	for i, quoted := range []string{
		`"status":"success","content":[{"text":"Remembered plan."}],"recorded":false`,
		`"content":[{"json":{"expression":"19*23","result":437}}],"recorded":true`,
	} {
		if !strings.Contains(section, "`"+quoted+"`") {
			t.Errorf("the section no longer quotes %s", quoted)
		}
		if !strings.Contains(answers[i], quoted) {
			t.Errorf("answer %d does not contain %s:\n%s", i+1, quoted, answers[i])
		}
	}
	if !strings.Contains(section, "and no messages") || !strings.HasSuffix(strings.TrimSpace(answers[0]), `"messages":[]}`) {
		t.Errorf("the first answer has messages, which the section says it has not:\n%s", answers[0])
	}
	if n := strings.Count(answers[1], `"role":`); n != 4 {
		t.Errorf("the recorded call added %d messages, want 4:\n%s", n, answers[1])
	}
}

// TestDocsRewindExamples runs the curl commands of the rewind, edit and
// regenerate examples of docs/sessions.md, in order, on a local run, and checks what
// the section says of their answers and of the session they leave.
func TestDocsRewindExamples(t *testing.T) {
	section, base, answers := runSection(t, "## Rewind, edit and regenerate", 5)
	for i, want := range map[int][]string{
		2: {`"rewound_to":2`, "42"},
		3: {`"rewound_to":2`, "437"},
		4: {`{"session_id":"retry","message_count":2,"discarded":4,"window":{"removed":0,"summarized":false}}`},
	} {
		for _, w := range want {
			if !strings.Contains(answers[i], w) {
				t.Errorf("answer %d does not contain %s:\n%s", i+1, w, answers[i])
			}
		}
	}
	if !strings.Contains(section, "`"+`{"session_id":"retry","message_count":2,"discarded":4,"window":{"removed":0,"summarized":false}}`+"`") {
		t.Error("the section no longer quotes the rewind's answer")
	}
	status, body := curl{method: http.MethodGet}.send(t, base+"/sessions/retry")
	var s struct {
		Messages []agent.Message `json:"messages"`
	}
	if err := json.Unmarshal([]byte(body), &s); err != nil || status != http.StatusOK {
		t.Fatalf("GET: %d %s", status, body)
	}
	if len(s.Messages) != 2 || s.Messages[0].Text() != "hello" {
		t.Errorf("the session holds %d messages after the rewind, want the first exchange:\n%s", len(s.Messages), body)
	}
}

// TestDocsExportExamples runs the curl commands of the export and import
// examples of docs/sessions.md on a local run: the export is a document of the
// session, the import answers as the section says, and the next turn on the
// imported session goes on from its history.
func TestDocsExportExamples(t *testing.T) {
	section, _, answers := runSection(t, "## Export and import", 4)
	var doc struct {
		Format   string          `json:"format"`
		Version  int             `json:"format_version"`
		ID       string          `json:"session_id"`
		Messages []agent.Message `json:"messages"`
	}
	if err := json.Unmarshal([]byte(answers[1]), &doc); err != nil || doc.Format != "lambda-agent/session" || doc.Version != 1 || doc.ID != "backup" || len(doc.Messages) != 4 { // the calculator's round trip
		t.Errorf("the export is not the session's document: %v\n%s", err, answers[1])
	}
	const imported = `{"session_id":"restored","message_count":2}`
	if !strings.Contains(section, "`"+imported+"`") || !strings.Contains(answers[2], imported) {
		t.Errorf("the import answered %s; the section quotes %s", answers[2], imported)
	}
	if !strings.Contains(answers[3], "437") {
		t.Errorf("the next turn on the imported session did not see its history:\n%s", answers[3])
	}
}
