package devrun_test

import (
	"bytes"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/lambda-agent/lambda-agent/internal/testkit"
	"github.com/lambda-agent/lambda-agent/internal/testkit/ssmtest"
)

// TestLocalRunDelegates runs what docs/subagents.md says to try: the
// local run with the page's AGENTS, and /tool researcher with a task. The
// offline model hands the task to the researcher, which uses its
// calculator, and its answer is the tool's result; the session keeps the
// researcher's conversation, which GET /sessions/{id}?agent= reads.
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
		Agents    map[string]json.RawMessage `json:"agents"`
		SessionID string                     `json:"session_id"`
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
	// The session keeps the researcher's conversation, which ?agent= reads.
	resp, err = http.Get(url + "/sessions/" + answer.SessionID + "?agent=researcher")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var page struct {
		Agent    string `json:"agent"`
		Messages []struct {
			Role    string `json:"role"`
			Content []struct {
				Text string `json:"text"`
			} `json:"content"`
		} `json:"messages"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&page); err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET ?agent=researcher: %d %v", resp.StatusCode, err)
	}
	if n := len(page.Messages); page.Agent != "researcher" || n < 2 || page.Messages[0].Content[0].Text != "What is 6*7?" || !strings.Contains(page.Messages[n-1].Content[0].Text, "42") {
		t.Errorf("the researcher's conversation: %+v", page)
	}
}

// TestChatPageShowsTheSubAgent: in the chat page, a delegation's box shows
// the sub-agent's work as it streams, its own tool calls and text, and
// then the delegation's result; the turn's text is the main agent's.
func TestChatPageShowsTheSubAgent(t *testing.T) {
	browser, driver := findBrowser(t)
	url := start(t, map[string]string{"AGENTS": `[{"name":"researcher","description":"Researches.","system_prompt":"You research.","tools":["calculator"]}]`})
	wd := newWebDriver(t, driver, browser)
	wd.Navigate(url + "/")
	wd.WaitFor("the first screen", `return !document.querySelector("#welcome").hidden`)
	wd.send(`/tool researcher {"task":"What is 6*7?"}`)
	wd.WaitFor("the answer", `return document.querySelectorAll("#messages .turn.assistant.done").length === 1`)
	var got struct {
		Work, Inner, Result, Name string
		Texts                     int
	}
	wd.EvalInto(&got, `const box = document.querySelector('#messages .tool[data-name="researcher"]');
		const work = box.querySelector(":scope > .agent-work");
		return {
			Work: work ? work.dataset.agent : "",
			Name: work ? work.querySelector(".agent-name").textContent : "",
			Inner: work ? work.querySelector('.tool[data-name="calculator"] .result').textContent : "",
			Result: box.querySelector(":scope > .result").textContent,
			Texts: work ? work.querySelectorAll(".text").length : 0,
		}`)
	if got.Work != "researcher" || got.Name != "researcher answered" || !strings.Contains(got.Inner, "42") || !strings.Contains(got.Result, "42") || got.Texts == 0 {
		t.Errorf("the delegation's box: %+v", got)
	}
	wd.Save("chatpage-subagent.png", wd.Screenshot())
}

// TestChatPageSubAgentAsksForApproval: a sub-agent's approval shows its
// card inside the delegation's box, in the sub-agent's work, titled with
// the agent; approving it resumes the sub-agent in the same work, whose
// calculator's result and answer follow, then the main agent's answer.
func TestChatPageSubAgentAsksForApproval(t *testing.T) {
	browser, driver := findBrowser(t)
	url := start(t, map[string]string{
		"APPROVAL_TOOLS": "calculator",
		"AGENTS":         `[{"name":"researcher","description":"Researches.","system_prompt":"You research.","tools":["calculator"]}]`,
	})
	wd := newWebDriver(t, driver, browser)
	wd.Navigate(url + "/")
	wd.WaitFor("the first screen", `return !document.querySelector("#welcome").hidden`)
	wd.send(`/tool researcher {"task":"What is 6*7?"}`)
	wd.WaitFor("the approval card", `return document.querySelectorAll("#messages .interrupt.approval").length === 1 && !document.querySelector("#send").disabled`)
	var paused struct{ Title, Name, Where, Delegation string }
	wd.EvalInto(&paused, `const card = document.querySelector("#messages .interrupt.approval");
		const work = card.closest(".agent-work");
		return {
			Title: card.querySelector("h3").textContent,
			Name: work ? work.querySelector(".agent-name").textContent : "",
			Where: work ? work.closest('.tool').dataset.name : "",
			Delegation: work ? work.closest('.tool').querySelector(":scope > .result").textContent : "",
		}`)
	if paused.Title != "Approval needed: calculator for researcher" || paused.Name != "researcher waits for you" || paused.Where != "researcher" || paused.Delegation != "waiting for you to answer researcher" {
		t.Errorf("the paused sub-agent: %+v", paused)
	}
	wd.Save("chatpage-subagent-approval.png", wd.Screenshot())
	wd.Click("#messages .interrupt .approve")
	wd.WaitFor("the answer", `return document.querySelectorAll("#messages .interrupt").length === 0 && !document.querySelector("#send").disabled && document.querySelectorAll("#messages .turn.assistant.done").length === 1`)
	var done struct {
		Works         int
		Name, Inner   string
		Result, Final string
	}
	wd.EvalInto(&done, `const box = document.querySelector('#messages .tool[data-name="researcher"]');
		const work = box.querySelector(":scope > .agent-work");
		return {
			Works: box.querySelectorAll(":scope > .agent-work").length,
			Name: work.querySelector(".agent-name").textContent,
			Inner: work.querySelector('.tool[data-name="calculator"] .result').textContent,
			Result: box.querySelector(":scope > .result").textContent,
			Final: document.querySelector("#messages .turn.assistant").textContent,
		}`)
	if done.Works != 1 || done.Name != "researcher answered" || !strings.Contains(done.Inner, "42") || !strings.Contains(done.Result, "42") {
		t.Errorf("the resumed delegation's box: %+v", done)
	}
}

// TestLocalRunReadsAgentsFromSSM: the local run reads AGENTS=ssm:/a/path
// as a function does, from the SSM that AWS_ENDPOINT_URL_SSM names.
func TestLocalRunReadsAgentsFromSSM(t *testing.T) {
	params := ssmtest.NewServer()
	t.Cleanup(params.Close)
	params.Put("/local/agents/researcher", `{"name":"researcher","description":"Researches.","system_prompt":"You research.","tools":["calculator"]}`, true)
	testkit.DefaultAWSConfig(t, "us-east-1", map[string]string{"AWS_ENDPOINT_URL_SSM": params.URL})
	url := start(t, map[string]string{"AGENTS": "ssm:/local/agents"})
	body, _ := json.Marshal(map[string]string{"message": `/tool researcher {"task":"What is 6*7?"}`})
	resp, err := http.Post(url+"/chat", "application/json", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var answer struct {
		Agents map[string]json.RawMessage `json:"agents"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&answer); err != nil || resp.StatusCode != http.StatusOK || answer.Agents["researcher"] == nil {
		t.Fatalf("POST /chat: %d %v, agents %s", resp.StatusCode, err, answer.Agents)
	}
	if params.Calls() != 1 {
		t.Errorf("%d reads of SSM, want 1", params.Calls())
	}
}
