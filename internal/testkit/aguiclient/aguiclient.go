// Package aguiclient drives an AG-UI server with the official TypeScript
// client, @ag-ui/client's HttpAgent, through Node: client.mjs runs one of
// its scenarios against a URL, checks every event against @ag-ui/core's
// schemas, and prints what happened, for a Go test to judge. The npm
// packages are pinned in package-lock.json; `npm ci --prefix
// internal/testkit/aguiclient` installs them (.ci/run does).
package aguiclient

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/lambda-agent/lambda-agent/internal/agent"
	"github.com/lambda-agent/lambda-agent/internal/agui"
)

// Result is what a scenario did: its runs, and the thread the client holds
// at the end.
type Result struct {
	ThreadID string      `json:"threadId"`
	Runs     []RunResult `json:"runs"`
	Messages []Message   `json:"messages"`
}

// Message is a message of the thread the client holds.
type Message struct {
	ID         string `json:"id"`
	Role       string `json:"role"`
	ToolCallID string `json:"toolCallId"`
	Content    any    `json:"content"`
	// SubagentRunID marks a message of a sub-agent's work.
	SubagentRunID string `json:"subagentRunId"`
}

// RunResult is one run of a scenario: the types of its events, the schema
// violations among them, the error it ended with, and its outcome.
type RunResult struct {
	Events     []string `json:"events"`
	Violations []string `json:"violations"`
	Error      *string  `json:"error"`
	Outcome    *struct {
		Type       string `json:"type"`
		Interrupts []struct {
			ID, Reason, ToolCallID, ExpiresAt, SubagentRunID string
		} `json:"interrupts"`
		PendingToolCallIDs []string `json:"pendingToolCallIds"`
	} `json:"outcome"`
}

// Err is the run's error, or "".
func (r RunResult) Err() string {
	if r.Error == nil {
		return ""
	}
	return *r.Error
}

// OK fails the test unless the run finished, with events that pass the
// schemas, from RUN_STARTED to RUN_FINISHED.
func (r RunResult) OK(t testing.TB, name string) {
	t.Helper()
	if r.Error != nil || len(r.Violations) > 0 || r.Outcome == nil {
		t.Fatalf("%s: error %q, violations %v, events %v", name, r.Err(), r.Violations, r.Events)
	}
	if len(r.Events) < 3 || r.Events[0] != "RUN_STARTED" || r.Events[len(r.Events)-1] != "RUN_FINISHED" {
		t.Errorf("%s: events %v", name, r.Events)
	}
}

// dir is this package's directory, which holds client.mjs and its
// node_modules.
func dir() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Dir(file)
}

// Run runs a scenario of client.mjs against the AG-UI server whose
// endpoint is url (the URL of POST /agui), as the caller bearer names (none
// for ""). Without Node or the npm packages the test is skipped, and says
// why, unless LAMBDA_AGENT_NODE_TEST is set, as .ci/run sets it: then it
// fails.
func Run(t testing.TB, url, scenario, bearer string) Result {
	t.Helper()
	node, err := exec.LookPath("node")
	_, modules := os.Stat(filepath.Join(dir(), "node_modules", "@ag-ui", "client"))
	if err != nil || modules != nil {
		if os.Getenv("LAMBDA_AGENT_NODE_TEST") != "" {
			t.Fatalf("the AG-UI client tests need Node and `npm ci --prefix internal/testkit/aguiclient`: node %v, modules %v", err, modules)
		}
		t.Skip("skipped: needs Node and `npm ci --prefix internal/testkit/aguiclient` (.ci/run installs them and sets LAMBDA_AGENT_NODE_TEST)")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, "client.mjs", url, scenario, bearer)
	cmd.Dir = dir()
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("client.mjs %s: %v\n%s", scenario, err, stderr.String())
	}
	var out Result
	if err := json.Unmarshal(stdout.Bytes(), &out); err != nil {
		t.Fatalf("client.mjs %s printed %q: %v\n%s", scenario, stdout.String(), err, stderr.String())
	}
	return out
}

// SameThread fails the test unless the client ended holding stored, the
// thread the server holds, message for message, by the ids AG-UI gives
// them, and stored is a history Bedrock takes. The messages of sub-agents'
// work, which the client keeps beside the thread, are not the thread's.
func SameThread(t testing.TB, stored []agent.Message, res Result) {
	t.Helper()
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
		if m.SubagentRunID == "" {
			held = append(held, m.ID)
		}
	}
	if strings.Join(ids, " ") != strings.Join(held, " ") {
		t.Errorf("the server holds\n%v\nthe client\n%v", ids, held)
	}
	if err := agent.ValidateHistory(stored); err != nil {
		t.Error(err)
	}
}

// Stored reads the messages of thread id over HTTP, from the server at
// base (GET /sessions/{id}), as its client's caller.
func Stored(t testing.TB, base, id string) []agent.Message {
	t.Helper()
	resp, err := http.Get(base + "/sessions/" + id + "?limit=1000")
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
