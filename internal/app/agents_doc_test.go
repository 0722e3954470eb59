package app_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/lambda-agent/lambda-agent/internal/app"
	"github.com/lambda-agent/lambda-agent/internal/testkit"
	"github.com/lambda-agent/lambda-agent/internal/testkit/ssmtest"
)

// TestAgentsAsDocumented: the AGENTS of docs/subagents.md is valid with
// the default tools, and the page's bounds hold.
func TestAgentsAsDocumented(t *testing.T) {
	section, err := testkit.DocSection("docs/subagents.md", "## Configuring them")
	if err != nil {
		t.Fatal(err)
	}
	_, rest, _ := strings.Cut(section, "```json\n")
	doc, _, ok := strings.Cut(rest, "```")
	if !ok {
		t.Fatal("no JSON block in the section")
	}
	c, err := app.ConfigFromEnv(func(k string) string {
		return map[string]string{"TABLE_NAME": "t", "MODEL_ID": "m", "AGENTS": doc}[k]
	})
	if err != nil || len(c.Agents) != 2 || c.Agents[0].MaxCycles != 6 {
		t.Fatalf("the documented AGENTS: %+v, %v", c, err)
	}

	var many []map[string]string
	for i := range app.MaxSubAgents + 1 {
		many = append(many, map[string]string{"name": fmt.Sprint("a", i), "description": "d", "system_prompt": "p"})
	}
	raw, _ := json.Marshal(many)
	_, err = app.ConfigFromEnv(func(k string) string {
		return map[string]string{"TABLE_NAME": "t", "MODEL_ID": "m", "AGENTS": string(raw)}[k]
	})
	if err == nil || !strings.Contains(err.Error(), "17 agents; at most 16") || !strings.Contains(section, "At most 16 agents") {
		t.Errorf("17 agents: %v", err)
	}
}

// TestAgentsFromSSMAsDocumented: the parameter that docs/subagents.md
// puts into SSM is an agent that AGENTS, set as its sam deploy command
// sets Agents, reads.
func TestAgentsFromSSMAsDocumented(t *testing.T) {
	section, err := testkit.DocSection("docs/subagents.md", "### From SSM Parameter Store")
	if err != nil {
		t.Fatal(err)
	}
	_, rest, _ := strings.Cut(section, "```sh\n")
	block, _, _ := strings.Cut(rest, "```")
	var name, value, agents string
	for line := range strings.Lines(strings.ReplaceAll(block, "\\\n", " ")) {
		words, err := testkit.ShellWords(line)
		if err != nil {
			t.Fatal(err)
		}
		for i, w := range words {
			switch {
			case w == "--name" && i+1 < len(words):
				name = words[i+1]
			case w == "--value" && i+1 < len(words):
				value = words[i+1]
			case strings.HasPrefix(w, "Agents="):
				agents = strings.TrimPrefix(w, "Agents=")
			}
		}
	}
	if name == "" || value == "" || agents == "" {
		t.Fatalf("the section's commands: parameter %q, value %q, Agents %q", name, value, agents)
	}
	srv := ssmtest.NewServer()
	t.Cleanup(srv.Close)
	srv.Put(name, value, false)
	c, err := app.ConfigFromEnv(func(k string) string {
		return map[string]string{"TABLE_NAME": "t", "MODEL_ID": "m", "AGENTS": agents}[k]
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := app.LoadAgents(t.Context(), srv.Client(), c); err != nil || len(c.Agents) != 1 {
		t.Fatalf("the documented agent: %+v, %v", c.Agents, err)
	}
}
