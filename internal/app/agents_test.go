package app

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestConfigAgents(t *testing.T) {
	c, err := ConfigFromEnv(env(map[string]string{
		"TABLE_NAME": "t", "MODEL_ID": "m", "TOOLS": "calculator,current_time,ask_user", "APPROVAL_TOOLS": "current_time",
		"LAMBDA_TOOLS": `[{"name":"refund","function":"f","description":"d"}]`,
		"AGENTS": `[
			{"name":"researcher","description":"Finds things out.","system_prompt":"You research.","tools":["calculator","writer"],"max_cycles":5},
			{"name":"writer","description":"Writes.","system_prompt":"You write.","tools":[]},
			{"name":"helper","description":"Helps.","system_prompt":"You help."},
			{"name":"asker","description":"Asks.","system_prompt":"You ask.","tools":["ask_user","current_time"]}
		]`,
	}))
	if err != nil {
		t.Fatal(err)
	}
	want := []SubAgent{
		{Name: "researcher", Description: "Finds things out.", SystemPrompt: "You research.", Tools: []string{"calculator", "writer"}, MaxCycles: 5},
		{Name: "writer", Description: "Writes.", SystemPrompt: "You write.", Tools: []string{}},
		// Unset tools: the enabled built-in and Lambda tools, but those
		// that wait for a person.
		{Name: "helper", Description: "Helps.", SystemPrompt: "You help.", Tools: []string{"calculator", "refund"}},
		// Named, they are offered: the sub-agent's pause pauses the turn.
		{Name: "asker", Description: "Asks.", SystemPrompt: "You ask.", Tools: []string{"ask_user", "current_time"}},
	}
	if diff := cmp.Diff(want, c.Agents); diff != "" {
		t.Errorf("AGENTS (-want +got):\n%s", diff)
	}
}

// TestConfigAgentsReportsEveryProblem: an invalid list fails init with a
// message that names every problem.
func TestConfigAgentsReportsEveryProblem(t *testing.T) {
	for _, tt := range []struct {
		name, agents string
		want         []string
	}{
		{"each entry", `[
			{"name":"calculator","description":"d","system_prompt":"p"},
			{"name":"main","description":"d","system_prompt":"p"},
			{"name":"bad name","description":"d","system_prompt":"p"},
			{"name":"twice","description":"d","system_prompt":"p"},
			{"name":"twice","description":"d","system_prompt":"p"},
			{"name":"bare","description":" ","system_prompt":""},
			{"name":"greedy","description":"d","system_prompt":"p","max_cycles":5000},
			{"name":"wide","description":"d","system_prompt":"p","tools":["shell","ask_user","current_time","wide"]}
		]`, []string{
			"[0] calculator: a tool has this name", `[1] main: "main" is the main agent's name`, "[2] bad name: name must match",
			"[4] twice: a second agent has this name", "[5] bare: description is required", "[5] bare: system_prompt is required",
			"[6] greedy: max_cycles", `[7] wide: tools: "shell" is neither an enabled built-in or Lambda tool nor an agent`,
			"[7] wide: tools: an agent cannot delegate to itself",
		}},
		{"a cycle", `[
			{"name":"a","description":"d","system_prompt":"p","tools":["b"]},
			{"name":"b","description":"d","system_prompt":"p","tools":["c"]},
			{"name":"c","description":"d","system_prompt":"p","tools":["a"]}
		]`, []string{"a cycle of delegations: a → b → c → a"}},
		{"too deep", `[
			{"name":"a","description":"d","system_prompt":"p","tools":["b"]},
			{"name":"b","description":"d","system_prompt":"p","tools":["c"]},
			{"name":"c","description":"d","system_prompt":"p","tools":["d"]},
			{"name":"d","description":"d","system_prompt":"p","tools":[]}
		]`, []string{"a: its delegations nest 4 deep; at most 3"}},
		{"not a list", `{"name":"a"}`, []string{"want a JSON list of objects"}},
		{"an unknown field", `[{"name":"a","description":"d","system_prompt":"p","model":"x"}]`, []string{`unknown field "model"`}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := ConfigFromEnv(env(map[string]string{
				"TABLE_NAME": "t", "MODEL_ID": "m", "TOOLS": "calculator,current_time,ask_user", "APPROVAL_TOOLS": "current_time", "AGENTS": tt.agents,
			}))
			if err == nil {
				t.Fatal("accepted")
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("the error does not mention %s:\n%v", w, err)
				}
			}
			if tt.name == "a cycle" && strings.Count(err.Error(), "a cycle") != 1 {
				t.Errorf("the cycle is reported more than once:\n%v", err)
			}
		})
	}
}
