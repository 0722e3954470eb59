package devrun_test

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/lambda-agent/lambda-agent/internal/agent"
	"github.com/lambda-agent/lambda-agent/internal/testkit/aguiclient"
)

// sameThread fails the test unless the client holds the thread the
// server holds, message for message, by id.
func sameThread(t *testing.T, url string, res aguiclient.Result) {
	t.Helper()
	stored := aguiclient.Stored(t, url, res.ThreadID)
	aguiclient.SameThread(t, stored, res)
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
			res := aguiclient.Run(t, url+"/agui", scenario, "")
			if len(res.Runs) != 2 {
				t.Fatalf("%d runs", len(res.Runs))
			}
			for i, r := range res.Runs {
				if r.Error != nil || len(r.Violations) > 0 {
					t.Errorf("run %d: error %q, violations %v", i+1, r.Err(), r.Violations)
				}
				if len(r.Events) < 3 || r.Events[0] != "RUN_STARTED" || r.Events[len(r.Events)-1] != "RUN_FINISHED" {
					t.Errorf("run %d: events %v", i+1, r.Events)
				}
			}
			stored := aguiclient.Stored(t, url, res.ThreadID)
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
		res := aguiclient.Run(t, url+"/agui", "foreign", "header."+claims+".signature")
		if len(res.Runs) != 2 || res.Runs[0].Error != nil {
			t.Fatalf("the owner's run: %+v", res.Runs)
		}
		if r := res.Runs[1]; r.Error == nil || !strings.Contains(*r.Error, "404") || len(r.Events) != 0 {
			t.Errorf("another owner's run: error %q, events %v", r.Err(), r.Events)
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
		res := aguiclient.Run(t, url+"/agui", "approval", "")
		if len(res.Runs) != 5 {
			t.Fatalf("%d runs", len(res.Runs))
		}
		asked, resolved, again, refused, cancelled := res.Runs[0], res.Runs[1], res.Runs[2], res.Runs[3], res.Runs[4]
		asked.OK(t, "the question")
		if o := asked.Outcome; o.Type != "interrupt" || len(o.Interrupts) != 1 || o.Interrupts[0].Reason != "approval" || o.Interrupts[0].ToolCallID == "" || o.Interrupts[0].ExpiresAt == "" {
			t.Errorf("the first run's outcome %+v", o)
		}
		resolved.OK(t, "the resolving run")
		if !slices.Contains(resolved.Events, "TOOL_CALL_RESULT") || resolved.Outcome.Type != "success" {
			t.Errorf("the resolving run: %v %+v", resolved.Events, resolved.Outcome)
		}
		again.OK(t, "the second question")
		if refused.Error == nil || !strings.Contains(*refused.Error, "not addressed by resume") || len(refused.Events) != 0 {
			t.Errorf("a run that leaves the interrupt unanswered: %q %v", refused.Err(), refused.Events)
		}
		cancelled.OK(t, "the cancelling run")
		sameThread(t, url, res)
		if stored, _ := json.Marshal(aguiclient.Stored(t, url, res.ThreadID)); !strings.Contains(string(stored), "denied this tool call. Their message: not now") {
			t.Errorf("the denial's result is not stored: %s", stored)
		}
	})
	t.Run("client tool", func(t *testing.T) {
		res := aguiclient.Run(t, url+"/agui", "client-tool", "")
		if len(res.Runs) != 4 {
			t.Fatalf("%d runs", len(res.Runs))
		}
		called, early, answered, after := res.Runs[0], res.Runs[1], res.Runs[2], res.Runs[3]
		called.OK(t, "the call")
		if o := called.Outcome; o.Type != "success" || len(o.PendingToolCallIDs) != 1 || slices.Contains(called.Events, "TOOL_CALL_RESULT") {
			t.Errorf("the call's run: %v %+v", called.Events, o)
		}
		if early.Error == nil || !strings.Contains(*early.Error, "409") {
			t.Errorf("a message while the call waits: %q %v", early.Err(), early.Events)
		}
		answered.OK(t, "the result")
		after.OK(t, "the next message")
		sameThread(t, url, res)
		if stored, _ := json.Marshal(aguiclient.Stored(t, url, res.ThreadID)); !strings.Contains(string(stored), "shown: AMZN 190") {
			t.Errorf("the client's result is not stored: %s", stored)
		}
	})
	t.Run("errors", func(t *testing.T) {
		res := aguiclient.Run(t, url+"/agui", "errors", "")
		if len(res.Runs) != 2 {
			t.Fatalf("%d runs", len(res.Runs))
		}
		if r := res.Runs[0]; r.Error == nil || !strings.Contains(*r.Error, "400") || len(r.Events) != 0 {
			t.Errorf("a system message: %q %v", r.Err(), r.Events)
		}
		if r := res.Runs[1]; r.Error == nil || !strings.Contains(*r.Error, "413") || len(r.Events) != 0 {
			t.Errorf("a body over the limit: %q %v", r.Err(), r.Events)
		}
	})
}

// TestAGUISubAgentWithTheOfficialClient: HttpAgent runs a turn that
// delegates to a sub-agent on the local run, and a second run with the
// whole thread it then holds, the sub-agent's messages included: every
// event passes @ag-ui/core's schemas, the sub-agent's work comes between
// SUBAGENT_STARTED and SUBAGENT_FINISHED, and the client's thread, but for
// the sub-agent's messages, is the server's.
func TestAGUISubAgentWithTheOfficialClient(t *testing.T) {
	url := start(t, map[string]string{"AGENTS": `[{"name":"researcher","description":"Researches.","system_prompt":"You research.","tools":["calculator"]}]`})
	res := aguiclient.Run(t, url+"/agui", "delegate", "")
	if len(res.Runs) != 2 {
		t.Fatalf("%d runs", len(res.Runs))
	}
	for i, r := range res.Runs {
		r.OK(t, fmt.Sprint("run ", i+1))
	}
	events := strings.Join(res.Runs[0].Events, " ")
	start, end := strings.Index(events, "TOOL_CALL_END SUBAGENT_STARTED"), strings.Index(events, "SUBAGENT_FINISHED TOOL_CALL_RESULT")
	if start < 0 || end < start || !strings.Contains(events[start:end], "TOOL_CALL_RESULT") {
		t.Errorf("the delegating run: %s", events)
	}
	subs := 0
	for _, m := range res.Messages {
		if m.SubagentRunID != "" {
			subs++
		}
	}
	if subs < 2 {
		t.Errorf("the client holds %d messages of the sub-agent's work", subs)
	}
	aguiclient.SameThread(t, aguiclient.Stored(t, url, res.ThreadID), res)
}

// TestAGUISubAgentPausesWithTheOfficialClient: with the official client, a
// sub-agent whose tool needs approval ends the run with an interrupt
// outcome whose interrupt carries the sub-agent's subagentRunId, after
// SUBAGENT_FINISHED with outcome suspended; HttpAgent's resume entry
// resumes the sub-agent, whose work streams again under its run, and the
// run succeeds. Every event passes @ag-ui/core's schemas, and the client's
// thread is the server's.
func TestAGUISubAgentPausesWithTheOfficialClient(t *testing.T) {
	url := start(t, map[string]string{
		"APPROVAL_TOOLS": "calculator",
		"AGENTS":         `[{"name":"researcher","description":"Researches.","system_prompt":"You research.","tools":["calculator"]}]`,
	})
	res := aguiclient.Run(t, url+"/agui", "delegate-approval", "")
	if len(res.Runs) != 2 {
		t.Fatalf("%d runs", len(res.Runs))
	}
	for i, r := range res.Runs {
		r.OK(t, fmt.Sprint("run ", i+1))
	}
	asked, resumed := res.Runs[0], res.Runs[1]
	if o := asked.Outcome; o.Type != "interrupt" || len(o.Interrupts) != 1 || o.Interrupts[0].SubagentRunID == "" || o.Interrupts[0].Reason != "approval" {
		t.Errorf("the paused run's outcome: %+v", o)
	}
	if events := strings.Join(asked.Events, " "); !strings.Contains(events, "SUBAGENT_STARTED") || !strings.Contains(events, "SUBAGENT_FINISHED RUN_FINISHED") {
		t.Errorf("the paused run: %s", events)
	}
	if events := strings.Join(resumed.Events, " "); resumed.Outcome.Type != "success" || !strings.Contains(events, "SUBAGENT_STARTED") || !strings.Contains(events, "SUBAGENT_FINISHED TOOL_CALL_RESULT") {
		t.Errorf("the resumed run (%s): %s", resumed.Outcome.Type, events)
	}
	aguiclient.SameThread(t, aguiclient.Stored(t, url, res.ThreadID), res)
}
