package localrun_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/lambda-agent/lambda-agent/internal/testkit"
)

// TestREADMEDirectToolCallExamples runs the curl commands of the README's
// direct tool calls, in order, on a local run started as the README's
// first command starts it, and checks the answers the section quotes.
func TestREADMEDirectToolCallExamples(t *testing.T) {
	section, err := testkit.READMESection("### Direct tool calls")
	if err != nil {
		t.Fatal(err)
	}
	section, _, _ = strings.Cut(section, "\n### ")
	base := start(t, nil)
	curls := curlsIn(t, section, "http://127.0.0.1:3000")
	if len(curls) != 3 {
		t.Fatalf("found %d curl commands in the section, want 3", len(curls))
	}
	var answers []string
	for _, c := range curls {
		status, body := c.send(t, strings.Replace(c.url, "http://127.0.0.1:3000", base, 1))
		if status != http.StatusOK {
			t.Errorf("%s\n→ %d %s", c.line, status, body)
		}
		answers = append(answers, body)
	}
	// The section quotes what the first two answer, between backquotes.
	for i, quoted := range []string{
		`"status":"success","content":[{"text":"Remembered plan."}],"recorded":false,"messages":[]`,
		`"content":[{"json":{"expression":"19*23","result":437}}],"recorded":true`,
	} {
		if !strings.Contains(section, "`"+quoted+"`") {
			t.Errorf("the section no longer quotes %s", quoted)
		}
		if !strings.Contains(answers[i], quoted) {
			t.Errorf("answer %d does not contain %s:\n%s", i+1, quoted, answers[i])
		}
	}
	if n := strings.Count(answers[1], `"role":`); n != 4 {
		t.Errorf("the recorded call added %d messages, want 4:\n%s", n, answers[1])
	}
}
