package devrun_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/lambda-agent/lambda-agent/internal/testkit"
)

// TestDocsApprovalExamples runs docs/approvals.md as written: the local
// run it starts, with the environment it names, and each of its curl
// commands in order, against that run's address.
func TestDocsApprovalExamples(t *testing.T) {
	section, err := testkit.DocSection("docs/approvals.md", "# Approvals and interrupts")
	if err != nil {
		t.Fatal(err)
	}
	env, addr := localRunCommand(t, section)
	if env["APPROVAL_TOOLS"] != "calculator" || addr == "" {
		t.Fatalf("the section starts the local run with %v on %q", env, addr)
	}
	base := start(t, env)
	curls := curlsIn(t, section, "http://"+addr)
	if len(curls) < 6 {
		t.Fatalf("found %d curl commands in the section", len(curls))
	}
	var answers []string
	for _, c := range curls {
		status, body := c.send(t, strings.Replace(c.url, "http://"+addr, base, 1))
		// The one refused request is the example of a 409; its command
		// prints only the status.
		if want := wantStatus(c); status != want {
			t.Errorf("%s\n→ %d %s; want %d", c.line, status, body, want)
		}
		answers = append(answers, body)
	}
	all := strings.Join(answers, "\n")
	for _, want := range []string{
		`"stop_reason":"interrupt"`,
		`"interrupts":[{"id":"tooluse_33e890a0100e0afc","kind":"approval","name":"approval","tool":"calculator","input":{"expression":"120*1.2"},"reason":"calculator needs your approval to run."`,
		`120*1.2 = 144`,
		`"code":"interrupt_pending"`,
		`"status":"error","content":[{"text":"A person denied this tool call. Their message: No more sums today."}]`,
		`"kind":"question","name":"ask_user","tool":"ask_user"`,
		`"status":"success","content":[{"text":"savings"}]`,
	} {
		if !strings.Contains(all, want) {
			t.Errorf("no answer contains %s:\n%s", want, all)
		}
	}
}

// wantStatus is the status a command of docs/approvals.md expects: 409 for the one that
// shows the refusal of a message while interrupts wait, 200 for the rest.
func wantStatus(c curl) int {
	if strings.Contains(c.data, `"message":"Hello?"`) {
		return http.StatusConflict
	}
	return http.StatusOK
}

// localRunCommand finds the section's go run ./cmd/local command, and
// returns the environment it sets and the address it listens on.
func localRunCommand(t *testing.T, section string) (map[string]string, string) {
	t.Helper()
	for line := range strings.Lines(section) {
		if !strings.Contains(line, "go run ./cmd/local") {
			continue
		}
		env := map[string]string{}
		addr := ""
		words := shellWords(t, strings.TrimSpace(line))
		for i, w := range words {
			if k, v, ok := strings.Cut(w, "="); ok && !strings.HasPrefix(w, "-") {
				env[k] = v
			}
			if w == "-addr" && i+1 < len(words) {
				addr = words[i+1]
			}
		}
		return env, addr
	}
	t.Fatal("the section does not start a local run")
	return nil, ""
}
