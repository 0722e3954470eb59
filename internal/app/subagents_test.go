package app_test

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"

	gocmp "github.com/google/go-cmp/cmp"
	"github.com/lambda-agent/lambda-agent/internal/app"
	"github.com/lambda-agent/lambda-agent/internal/pricing"
	"github.com/lambda-agent/lambda-agent/internal/testkit"
	"github.com/lambda-agent/lambda-agent/internal/testkit/conversetest"
	"github.com/lambda-agent/lambda-agent/internal/testkit/lambdatest"
	"github.com/lambda-agent/lambda-agent/internal/testkit/mcptest"
	"github.com/lambda-agent/lambda-agent/internal/turn"
)

// chat posts a chat turn and returns its answer, failing t unless it is a
// 200.
func chat(t *testing.T, s *testkit.Stack, body string) turn.ChatAnswer {
	t.Helper()
	r := httptest.NewRequest(http.MethodPost, "/chat", strings.NewReader(body))
	r.Header.Set("Content-Type", "application/json")
	w := s.Serve(r)
	if w.Code != http.StatusOK {
		t.Fatalf("%d %s", w.Code, w.Body)
	}
	var a turn.ChatAnswer
	if err := json.Unmarshal(w.Body.Bytes(), &a); err != nil {
		t.Fatal(err)
	}
	return a
}

// systemIs says whether req's system prompt is prompt.
func systemIs(req *conversetest.Request, prompt string) bool {
	return len(req.System) > 0 && req.System[0].Text == prompt
}

// TestSubAgentCallsItsModel: a sub-agent with a model_id calls that model,
// with the guardrail and the answers' settings the main agent's calls
// have, retried as they are; one without calls MODEL_ID. Each agent's
// cost is estimated at its model's prices (MODEL_PRICES are MODEL_ID's;
// the table gives Nova Lite's), the turn's is their sum, and the cheap
// agent's metrics line has its model for Model, as docs/subagents.md
// says.
func TestSubAgentCallsItsModel(t *testing.T) {
	const lite = "amazon.nova-lite-v1:0"
	var metrics testkit.Buffer
	throttled := false
	s := testkit.Start(t, testkit.Options{Metrics: &metrics, Env: map[string]string{
		"AWS_REGION": "us-east-1", "ADDITIONAL_MODEL_ARNS": "arn:aws:bedrock:us-east-1::foundation-model/" + lite,
		"GUARDRAIL_ID": "g1", "GUARDRAIL_VERSION": "1", "MAX_TOKENS": "700", "TEMPERATURE": "0.25", "MODEL_PRICES": `{"input":3,"output":15}`,
		"AGENTS": `[{"name":"cheap","description":"Cheap work.","system_prompt":"You are cheap.","model_id":"` + lite + `"},
			{"name":"same","description":"Other work.","system_prompt":"You are the same.","tools":[]}]`,
	}})
	s.Model.Responder = func(req *conversetest.Request) conversetest.Reply {
		switch {
		case systemIs(req, "You are cheap.") && !throttled:
			throttled = true
			return conversetest.Throttle()
		case systemIs(req, "You are cheap."):
			return conversetest.Text("cheap answer").WithUsage(100, 10)
		case systemIs(req, "You are the same."):
			return conversetest.Text("same answer")
		case len(req.Messages) == 1:
			return conversetest.ToolUse("d1", "cheap", map[string]string{"task": "a"}).WithToolUse("d2", "same", map[string]string{"task": "b"})
		}
		return conversetest.Text("done")
	}
	a := chat(t, s, `{"session_id":"models","message":"delegate"}`)
	models := map[string]string{}
	for _, req := range s.Model.Requests() {
		who := "main"
		if systemIs(req, "You are cheap.") {
			who = "cheap"
		} else if systemIs(req, "You are the same.") {
			who = "same"
		}
		models[who] = req.ModelID
		if ic := req.InferenceConfig; req.GuardrailConfig == nil || ic == nil || ic.MaxTokens == nil || *ic.MaxTokens != 700 || ic.Temperature == nil || *ic.Temperature != 0.25 {
			t.Errorf("%s's request: guardrail %v, inference %+v; want both the main agent's", who, req.GuardrailConfig, req.InferenceConfig)
		}
	}
	if want := map[string]string{"main": "test-model", "cheap": lite, "same": "test-model"}; !maps.Equal(models, want) {
		t.Errorf("models %v, want %v", models, want)
	}
	if c := a.Agents["cheap"].EstimatedCostUSD; c == nil || math.Abs(*c-(100*0.06+10*0.24)/1e6) > 1e-15 {
		t.Errorf("the cheap agent's cost %v, want Nova Lite's prices", a.Agents["cheap"])
	}
	mainPrices := pricing.Prices{Input: 3, Output: 15}
	if c := a.Agents["same"].EstimatedCostUSD; c == nil || math.Abs(*c-mainPrices.Cost(a.Agents["same"].Usage)) > 1e-15 {
		t.Errorf("the same agent's cost %v, want MODEL_PRICES", c)
	}
	sum := 0.0
	for _, au := range a.Agents {
		sum += *au.EstimatedCostUSD
	}
	if c := a.Metrics.EstimatedCostUSD; c == nil || math.Abs(*c-sum) > 1e-15 {
		t.Errorf("the turn's cost %v, want the agents' sum %v", c, sum)
	}
	if a.Metrics.ModelCalls != 4 || !strings.Contains(a.Text, "done") {
		t.Errorf("%d model calls, answer %q; want the main agent's 2, and each sub-agent's 1 after the cheap one's retry", a.Metrics.ModelCalls, a.Text)
	}
	found := false
	for line := range strings.Lines(metrics.String()) {
		if strings.Contains(line, `"AgentName":"cheap"`) {
			found = strings.Contains(line, `"Model":"`+lite+`"`)
		}
	}
	if !found {
		t.Errorf("no metrics line of the cheap agent with Model %s:\n%s", lite, metrics.String())
	}
}

// resultBytes returns the size of the tool results in req's last message.
func resultBytes(req *conversetest.Request) int {
	n := 0
	for _, b := range req.Messages[len(req.Messages)-1].Content {
		if b.ToolResult != nil {
			for _, c := range b.ToolResult.Content {
				n += len(c.Text) + len(c.JSON)
			}
		}
	}
	return n
}

// TestSubAgentManagers: each sub-agent has the conversation manager and
// the window its entry names, or else CONVERSATION_MANAGER's and
// WINDOW_SIZE's. Within one delegation, what tells them apart is how they
// treat a large tool result: none lets an overflow fail the delegation,
// sliding cuts the result and calls again, and summarizing over a window
// of 2 cuts it before the call, while over the default window it sends it
// whole.
func TestSubAgentManagers(t *testing.T) {
	fns := lambdatest.NewServer()
	t.Cleanup(fns.Close)
	big := `{"data":"` + strings.Repeat("x", 20<<10) + `"}`
	fns.Register("big", func(context.Context, []byte) ([]byte, error) { return []byte(big), nil })
	s := testkit.Start(t, testkit.Options{Remote: app.Remote{Lambda: fns.Client()}, Env: map[string]string{
		"TOOLS": "none", "CONVERSATION_MANAGER": "none",
		"LAMBDA_TOOLS": `[{"name":"fetch","function":"big","description":"Fetches a lot."}]`,
		"AGENTS": `[
			{"name":"plain","description":"d","system_prompt":"plain"},
			{"name":"sliding","description":"d","system_prompt":"sliding","conversation_manager":"sliding"},
			{"name":"brief","description":"d","system_prompt":"brief","conversation_manager":"summarizing","window_size":2},
			{"name":"roomy","description":"d","system_prompt":"roomy","conversation_manager":"summarizing"}
		]`,
	}})
	var mu sync.Mutex
	seen := map[string][]int{} // by agent, the size of the results its calls sent
	s.Model.Responder = func(req *conversetest.Request) conversetest.Reply {
		if len(req.System) == 0 { // the main agent
			if len(req.Messages) == 1 {
				r := conversetest.ToolUse("d0", "plain", map[string]string{"task": "t"})
				for i, n := range []string{"sliding", "brief", "roomy"} {
					r = r.WithToolUse(fmt.Sprint("d", i+1), n, map[string]string{"task": "t"})
				}
				return r
			}
			return conversetest.Text("done")
		}
		who := req.System[0].Text
		if len(req.Messages) == 1 {
			return conversetest.ToolUse("f-"+who, "fetch", map[string]any{})
		}
		n := resultBytes(req)
		mu.Lock()
		seen[who] = append(seen[who], n)
		mu.Unlock()
		if n > 10<<10 && (who == "plain" || who == "sliding") {
			return conversetest.Overflow()
		}
		return conversetest.Text(who + " read it")
	}
	a := chat(t, s, `{"session_id":"managers","message":"go"}`)
	results := map[string]string{}
	for _, b := range a.Messages[2].Content {
		if r := b.ToolResult; r != nil {
			results[r.ToolUseID] = fmt.Sprint(r.Status, " ", r.Content[0].Text)
		}
	}
	for id, want := range map[string]string{"d0": "error The tool failed: the agent plain failed: agent: context window overflow", "d1": "success sliding read it", "d2": "success brief read it", "d3": "success roomy read it"} {
		if !strings.HasPrefix(results[id], want) {
			t.Errorf("the delegation %s: %q, want %q…", id, results[id], want)
		}
	}
	whole, cut := len(big), 10<<10
	if got := seen["plain"]; len(got) != 1 || got[0] < whole {
		t.Errorf("plain (CONVERSATION_MANAGER none) sent %v, want the whole result once", got)
	}
	if got := seen["sliding"]; len(got) != 2 || got[0] < whole || got[1] > cut {
		t.Errorf("sliding sent %v, want the whole result, then the cut one after the overflow", got)
	}
	if got := seen["brief"]; len(got) != 1 || got[0] > cut {
		t.Errorf("brief (summarizing, window 2) sent %v, want the result cut before the call", got)
	}
	if got := seen["roomy"]; len(got) != 1 || got[0] < whole {
		t.Errorf("roomy (summarizing, WINDOW_SIZE's window) sent %v, want the whole result", got)
	}
}

// TestFreshSubAgent: an agent with "fresh" starts every delegation from
// an empty conversation: its second delegation in a session, in a later
// turn, sees only its task.
func TestFreshSubAgent(t *testing.T) {
	s := testkit.Start(t, testkit.Options{Env: map[string]string{
		"AGENTS": `[{"name":"helper","description":"Helps.","system_prompt":"You help.","tools":[],"fresh":true}]`,
	}})
	var helper [][]conversetest.Message
	s.Model.Responder = func(req *conversetest.Request) conversetest.Reply {
		switch {
		case systemIs(req, "You help."):
			helper = append(helper, req.Messages)
			return conversetest.Text("helped")
		case req.Messages[len(req.Messages)-1].Role == "user" && req.Messages[len(req.Messages)-1].Text() != "":
			return conversetest.ToolUse(fmt.Sprint("d", len(req.Messages)), "helper", map[string]string{"task": req.Messages[len(req.Messages)-1].Text()})
		}
		return conversetest.Text("done")
	}
	chat(t, s, `{"session_id":"fresh","message":"first"}`)
	chat(t, s, `{"session_id":"fresh","message":"second"}`)
	if len(helper) != 2 || len(helper[1]) != 1 || helper[1][0].Text() != "second" {
		t.Fatalf("the helper's requests: %+v; want its second to hold only its task", helper)
	}
}

// TestEntriesForSubAgents: an MCP server or a Lambda tool whose entry
// names agents offers its tools to those sub-agents, which call them, and
// not to the main agent; an entry without agents is the main agent's,
// and a sub-agent gets an MCP server's tools only by its entry's agents.
func TestEntriesForSubAgents(t *testing.T) {
	docs, all := mcptest.NewServer(), mcptest.NewServer()
	t.Cleanup(docs.Close)
	t.Cleanup(all.Close)
	fns := lambdatest.NewServer()
	t.Cleanup(fns.Close)
	fns.Register("refunds", func(context.Context, []byte) ([]byte, error) { return []byte(`{"refunded":true}`), nil })
	s := testkit.Start(t, testkit.Options{Remote: app.Remote{Lambda: fns.Client(), HTTP: http.DefaultClient}, Env: map[string]string{
		"TOOLS":        "calculator",
		"LAMBDA_TOOLS": `[{"name":"refund","function":"refunds","description":"Refunds.","agents":["clerk"]}]`,
		"MCP_SERVERS": fmt.Sprintf(`[{"name":"docs","url":%q,"allow":["echo"],"agents":["clerk"]},{"name":"all","url":%q,"allow":["add"]}]`,
			docs.URL, all.URL),
		"AGENTS": `[{"name":"clerk","description":"Refunds.","system_prompt":"You are the clerk.","tools":[]},
			{"name":"other","description":"Other.","system_prompt":"You are other."}]`,
	}})
	offered := map[string][]string{}
	var mu sync.Mutex
	s.Model.Responder = func(req *conversetest.Request) conversetest.Reply {
		who := "main"
		if len(req.System) > 0 {
			who = req.System[0].Text
		}
		mu.Lock()
		if _, seen := offered[who]; !seen {
			offered[who] = slices.Sorted(slices.Values(req.ToolNames()))
		}
		mu.Unlock()
		switch {
		case who == "main" && len(req.Messages) == 1:
			return conversetest.ToolUse("d1", "clerk", map[string]string{"task": "refund it"}).WithToolUse("d2", "other", map[string]string{"task": "x"})
		case who == "You are the clerk." && len(req.Messages) == 1:
			return conversetest.ToolUse("r1", "refund", map[string]any{}).WithToolUse("e1", "docs_echo", map[string]string{"text": "from docs"})
		}
		return conversetest.Text(who + " done")
	}
	a := chat(t, s, `{"session_id":"entries","message":"go"}`)
	want := map[string][]string{
		"main":               {"all_add", "calculator", "clerk", "other"},
		"You are the clerk.": {"docs_echo", "refund"},
		"You are other.":     {"calculator"},
	}
	if diff := gocmp.Diff(want, offered); diff != "" {
		t.Errorf("the tools each agent is offered (-want +got):\n%s", diff)
	}
	if fns.Calls("refunds") != 1 || docs.Calls("echo") != 1 || a.Text != "main done" {
		t.Errorf("calls: refunds %d, docs echo %d; answer %q", fns.Calls("refunds"), docs.Calls("echo"), a.Text)
	}
}
