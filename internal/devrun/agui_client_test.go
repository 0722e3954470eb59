package devrun_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/lambda-agent/lambda-agent/internal/agent"
	"github.com/lambda-agent/lambda-agent/internal/agui"
)

// aguiClientDir holds the official AG-UI client, installed by `npm ci`
// (.ci/run does it).
const aguiClientDir = "testdata/agui"

// aguiResult is what client.mjs prints.
type aguiResult struct {
	ThreadID string          `json:"threadId"`
	Runs     []aguiRunResult `json:"runs"`
	Messages []struct {
		ID         string `json:"id"`
		Role       string `json:"role"`
		ToolCallID string `json:"toolCallId"`
		Content    any    `json:"content"`
	} `json:"messages"`
}

type aguiRunResult struct {
	Events     []string `json:"events"`
	Violations []string `json:"violations"`
	Error      *string  `json:"error"`
	Outcome    *struct {
		Type       string `json:"type"`
		Interrupts []struct {
			ID, Reason, ToolCallID, ExpiresAt string
		} `json:"interrupts"`
		PendingToolCallIDs []string `json:"pendingToolCallIds"`
	} `json:"outcome"`
}

// ok fails the test unless the run finished, with events that pass the
// schemas.
func (r aguiRunResult) ok(t *testing.T, name string) {
	t.Helper()
	if r.Error != nil || len(r.Violations) > 0 || r.Outcome == nil {
		t.Fatalf("%s: error %q, violations %v, events %v", name, deref(r.Error), r.Violations, r.Events)
	}
	if len(r.Events) < 3 || r.Events[0] != "RUN_STARTED" || r.Events[len(r.Events)-1] != "RUN_FINISHED" {
		t.Errorf("%s: events %v", name, r.Events)
	}
}

// sameThread fails the test unless the client holds the thread the
// server holds, message for message, by id.
func sameThread(t *testing.T, url string, res aguiResult) {
	t.Helper()
	stored := transcript(t, url, res.ThreadID)
	var ids []string
	for k, m := range stored {
		var tools []string
		for _, b := range m.Content {
			if r := b.ToolResult; r != nil {
				tools = append(tools, agui.ToolMessageID(r))
			}
		}
		ids = append(ids, tools...)
		if len(tools) == 0 || m.Text() != "" {
			ids = append(ids, agui.MessageID(m, k))
		}
	}
	var held []string
	for _, m := range res.Messages {
		held = append(held, m.ID)
	}
	if strings.Join(ids, " ") != strings.Join(held, " ") {
		t.Errorf("the server holds\n%v\nthe client\n%v", ids, held)
	}
	if err := agent.ValidateHistory(stored); err != nil {
		t.Error(err)
	}
}

// runAGUIClient runs a scenario of client.mjs against the local run at
// url, as the caller bearer names (none for "").
func runAGUIClient(t *testing.T, url, scenario, bearer string) aguiResult {
	t.Helper()
	node, err := exec.LookPath("node")
	_, modules := os.Stat(filepath.Join(aguiClientDir, "node_modules", "@ag-ui", "client"))
	if err != nil || modules != nil {
		if os.Getenv("LAMBDA_AGENT_NODE_TEST") != "" {
			t.Fatalf("the AG-UI client tests need Node and `npm ci --prefix internal/devrun/testdata/agui`: node %v, modules %v", err, modules)
		}
		t.Skip("skipped: needs Node and `npm ci --prefix internal/devrun/testdata/agui` (.ci/run installs them and sets LAMBDA_AGENT_NODE_TEST)")
	}
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, "client.mjs", url, scenario, bearer)
	cmd.Dir = aguiClientDir
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("client.mjs %s: %v\n%s", scenario, err, stderr.String())
	}
	var out aguiResult
	if err := json.Unmarshal(stdout.Bytes(), &out); err != nil {
		t.Fatalf("client.mjs %s printed %q: %v\n%s", scenario, stdout.String(), err, stderr.String())
	}
	return out
}

// TestAGUIWithTheOfficialClient: HttpAgent, as it comes (the whole thread
// every run) and made to send only new messages, holds a conversation of
// two runs with the local run: every event passes @ag-ui/core's schemas,
// and the server stores each message once, the client's under its ids.
// Another owner's client gets the 404 before any event.
func TestAGUIWithTheOfficialClient(t *testing.T) {
	url := start(t, nil)
	for _, scenario := range []string{"whole", "new"} {
		t.Run(scenario, func(t *testing.T) {
			res := runAGUIClient(t, url, scenario, "")
			if len(res.Runs) != 2 {
				t.Fatalf("%d runs", len(res.Runs))
			}
			for i, r := range res.Runs {
				if r.Error != nil || len(r.Violations) > 0 {
					t.Errorf("run %d: error %q, violations %v", i+1, deref(r.Error), r.Violations)
				}
				if len(r.Events) < 3 || r.Events[0] != "RUN_STARTED" || r.Events[len(r.Events)-1] != "RUN_FINISHED" {
					t.Errorf("run %d: events %v", i+1, r.Events)
				}
			}
			stored := transcript(t, url, res.ThreadID)
			if len(stored) != len(res.Messages) {
				t.Fatalf("the server holds %d messages, the client %d:\nserver %+v\nclient %+v", len(stored), len(res.Messages), stored, res.Messages)
			}
			users := 0
			for i, m := range res.Messages {
				if m.Role == "user" {
					users++
					if stored[i].ID != m.ID || stored[i].Role != agent.RoleUser {
						t.Errorf("message %d: the client's %q, the server's %q (%s)", i, m.ID, stored[i].ID, stored[i].Role)
					}
				}
			}
			if users != 2 {
				t.Errorf("%d user messages", users)
			}
		})
	}
	t.Run("another owner", func(t *testing.T) {
		claims := base64.RawURLEncoding.EncodeToString([]byte(`{"sub":"mallory"}`))
		res := runAGUIClient(t, url, "foreign", "header."+claims+".signature")
		if len(res.Runs) != 2 || res.Runs[0].Error != nil {
			t.Fatalf("the owner's run: %+v", res.Runs)
		}
		if r := res.Runs[1]; r.Error == nil || !strings.Contains(*r.Error, "404") || len(r.Events) != 0 {
			t.Errorf("another owner's run: error %q, events %v", deref(r.Error), r.Events)
		}
	})
}

// TestAGUIPeopleAndClientsInTheLoop: with the official client, an approval
// ends a run with an interrupt that a resume entry resolves or cancels
// (and HttpAgent itself refuses a run that leaves it unanswered); a client
// tool's call ends a run with its id pending, a new message is refused
// until its result comes, and the result continues the turn. Every event
// passes the schemas, and the client ends holding the server's thread.
func TestAGUIPeopleAndClientsInTheLoop(t *testing.T) {
	url := start(t, map[string]string{"APPROVAL_TOOLS": "calculator"})
	t.Run("approval", func(t *testing.T) {
		res := runAGUIClient(t, url, "approval", "")
		if len(res.Runs) != 5 {
			t.Fatalf("%d runs", len(res.Runs))
		}
		asked, resolved, again, refused, cancelled := res.Runs[0], res.Runs[1], res.Runs[2], res.Runs[3], res.Runs[4]
		asked.ok(t, "the question")
		if o := asked.Outcome; o.Type != "interrupt" || len(o.Interrupts) != 1 || o.Interrupts[0].Reason != "approval" || o.Interrupts[0].ToolCallID == "" || o.Interrupts[0].ExpiresAt == "" {
			t.Errorf("the first run's outcome %+v", o)
		}
		resolved.ok(t, "the resolving run")
		if !slices.Contains(resolved.Events, "TOOL_CALL_RESULT") || resolved.Outcome.Type != "success" {
			t.Errorf("the resolving run: %v %+v", resolved.Events, resolved.Outcome)
		}
		again.ok(t, "the second question")
		if refused.Error == nil || !strings.Contains(*refused.Error, "not addressed by resume") || len(refused.Events) != 0 {
			t.Errorf("a run that leaves the interrupt unanswered: %q %v", deref(refused.Error), refused.Events)
		}
		cancelled.ok(t, "the cancelling run")
		sameThread(t, url, res)
		if stored, _ := json.Marshal(transcript(t, url, res.ThreadID)); !strings.Contains(string(stored), "denied this tool call. Their message: not now") {
			t.Errorf("the denial's result is not stored: %s", stored)
		}
	})
	t.Run("client tool", func(t *testing.T) {
		res := runAGUIClient(t, url, "client-tool", "")
		if len(res.Runs) != 4 {
			t.Fatalf("%d runs", len(res.Runs))
		}
		called, early, answered, after := res.Runs[0], res.Runs[1], res.Runs[2], res.Runs[3]
		called.ok(t, "the call")
		if o := called.Outcome; o.Type != "success" || len(o.PendingToolCallIDs) != 1 || slices.Contains(called.Events, "TOOL_CALL_RESULT") {
			t.Errorf("the call's run: %v %+v", called.Events, o)
		}
		if early.Error == nil || !strings.Contains(*early.Error, "409") {
			t.Errorf("a message while the call waits: %q %v", deref(early.Error), early.Events)
		}
		answered.ok(t, "the result")
		after.ok(t, "the next message")
		sameThread(t, url, res)
		if stored, _ := json.Marshal(transcript(t, url, res.ThreadID)); !strings.Contains(string(stored), "shown: AMZN 190") {
			t.Errorf("the client's result is not stored: %s", stored)
		}
	})
	t.Run("errors", func(t *testing.T) {
		res := runAGUIClient(t, url, "errors", "")
		if len(res.Runs) != 2 {
			t.Fatalf("%d runs", len(res.Runs))
		}
		if r := res.Runs[0]; r.Error == nil || !strings.Contains(*r.Error, "400") || len(r.Events) != 0 {
			t.Errorf("a system message: %q %v", deref(r.Error), r.Events)
		}
		if r := res.Runs[1]; r.Error == nil || !strings.Contains(*r.Error, "413") || len(r.Events) != 0 {
			t.Errorf("a body over the limit: %q %v", deref(r.Error), r.Events)
		}
	})
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// transcript reads a session's messages over HTTP.
func transcript(t *testing.T, url, id string) []agent.Message {
	t.Helper()
	resp, err := http.Get(url + "/sessions/" + id + "?limit=1000")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var page struct{ Messages []agent.Message }
	if err := json.NewDecoder(resp.Body).Decode(&page); err != nil || resp.StatusCode != 200 {
		t.Fatalf("GET the session: %d %v", resp.StatusCode, err)
	}
	return page.Messages
}
