package devrun_test

import (
	"bytes"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/lambda-agent/lambda-agent/internal/testkit"
)

// TestLocalRunDelegates runs what docs/subagents.md says to try: the
// local run with the page's AGENTS, and /tool researcher with a task. The
// offline model hands the task to the researcher, which uses its
// calculator, and its answer is the tool's result.
func TestLocalRunDelegates(t *testing.T) {
	section, err := testkit.DocSection("docs/subagents.md", "## Configuring them")
	if err != nil {
		t.Fatal(err)
	}
	const prefix = "AGENTS='"
	i := strings.Index(section, prefix)
	j := strings.Index(section, "' go run ./cmd/local")
	if i < 0 || j < i {
		t.Fatalf("no AGENTS='...' go run ./cmd/local in the section")
	}
	url := start(t, map[string]string{"AGENTS": section[i+len(prefix) : j]})
	typed := `/tool researcher {"task":"What is 6*7?"}`
	if !strings.Contains(section, "`"+typed+"`") {
		t.Fatalf("the section does not say to type %s", typed)
	}
	body, _ := json.Marshal(map[string]string{"message": typed})
	resp, err := http.Post(url+"/chat", "application/json", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var answer struct {
		Messages []struct {
			Content []struct {
				ToolResult *struct {
					Status  string `json:"status"`
					Content []struct {
						Text string `json:"text"`
					} `json:"content"`
				} `json:"toolResult"`
			} `json:"content"`
		} `json:"messages"`
		Agents map[string]json.RawMessage `json:"agents"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&answer); err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("POST /chat: %d %v", resp.StatusCode, err)
	}
	var result string
	for _, m := range answer.Messages {
		for _, c := range m.Content {
			if c.ToolResult != nil && c.ToolResult.Status == "success" {
				result = c.ToolResult.Content[0].Text
			}
		}
	}
	if !strings.Contains(result, "42") || answer.Agents["researcher"] == nil {
		t.Errorf("the researcher's result %q; agents %s", result, answer.Agents)
	}
}
