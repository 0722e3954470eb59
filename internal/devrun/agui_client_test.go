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
	"strings"
	"testing"
	"time"

	"github.com/lambda-agent/lambda-agent/internal/agent"
)

// aguiClientDir holds the official AG-UI client, installed by `npm ci`
// (.ci/run does it).
const aguiClientDir = "testdata/agui"

// aguiResult is what client.mjs prints.
type aguiResult struct {
	ThreadID string `json:"threadId"`
	Runs     []struct {
		Events     []string `json:"events"`
		Violations []string `json:"violations"`
		Error      *string  `json:"error"`
	} `json:"runs"`
	Messages []struct {
		ID   string `json:"id"`
		Role string `json:"role"`
	} `json:"messages"`
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
