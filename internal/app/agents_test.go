package app

import (
	"cmp"
	"encoding/json"
	"maps"
	"slices"
	"strings"
	"testing"

	gocmp "github.com/google/go-cmp/cmp"

	"github.com/lambda-agent/lambda-agent/internal/agent"
	"github.com/lambda-agent/lambda-agent/internal/telemetry"
	"github.com/lambda-agent/lambda-agent/internal/testkit/conversetest"
)

func TestConfigAgents(t *testing.T) {
	c, err := ConfigFromEnv(env(map[string]string{
		"TABLE_NAME": "t", "MODEL_ID": "m", "TOOLS": "calculator,current_time,ask_user", "APPROVAL_TOOLS": "current_time",
		"LAMBDA_TOOLS": `[{"name":"refund","function":"f","description":"d"}]`,
		"AGENTS": `[
			{"name":"researcher","description":"Finds things out.","system_prompt":"You research.","tools":["calculator","writer"],"max_cycles":5},
			{"name":"writer","description":"Writes.","system_prompt":"You write.","tools":[],"conversation_manager":"summarizing","window_size":12,"fresh":true},
			{"name":"helper","description":"Helps.","system_prompt":"You help."},
			{"name":"asker","description":"Asks.","system_prompt":"You ask.","tools":["ask_user","current_time"]}
		]`,
	}))
	if err != nil {
		t.Fatal(err)
	}
	want := []SubAgent{
		{Name: "researcher", Description: "Finds things out.", SystemPrompt: "You research.", Tools: []string{"calculator", "writer"}, MaxCycles: 5},
		{Name: "writer", Description: "Writes.", SystemPrompt: "You write.", Tools: []string{}, Manager: "summarizing", WindowSize: 12, Fresh: true},
		// Unset tools: the enabled built-in and Lambda tools, but those
		// that wait for a person.
		{Name: "helper", Description: "Helps.", SystemPrompt: "You help.", Tools: []string{"calculator", "refund"}},
		// Named, they are offered: the sub-agent's pause pauses the turn.
		{Name: "asker", Description: "Asks.", SystemPrompt: "You ask.", Tools: []string{"ask_user", "current_time"}},
	}
	if diff := gocmp.Diff(want, c.Agents); diff != "" {
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
			{"name":"windy","description":"d","system_prompt":"p","conversation_manager":"sliding_window","window_size":1},
			{"name":"wide","description":"d","system_prompt":"p","tools":["shell","ask_user","current_time","wide"]}
		]`, []string{
			"[0] calculator: a tool has this name", `[1] main: "main" is the main agent's name`, "[2] bad name: name must match",
			"[4] twice: a second agent has this name", "[5] bare: description is required", "[5] bare: system_prompt is required",
			"[6] greedy: max_cycles", "[7] windy: conversation_manager must be one of sliding, summarizing, none",
			"[7] windy: window_size must be from 2 to 10000",
			`[8] wide: tools: "shell" is neither an enabled built-in or Lambda tool nor an agent`,
			"[8] wide: tools: an agent cannot delegate to itself",
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

// TestConfigAgentModels: a sub-agent's model_id is accepted when the
// functions may call it: it is MODEL_ID or SUMMARIZER_MODEL_ID, or
// ADDITIONAL_MODEL_ARNS holds the ARNs it needs; otherwise init fails,
// naming the agent, the model and the ARNs that are missing.
func TestConfigAgentModels(t *testing.T) {
	const (
		haiku   = "anthropic.claude-haiku-4-5-20251001-v1:0"
		profile = "us." + haiku
		nova    = "amazon.nova-lite-v1:0"
	)
	for _, tt := range []struct {
		name, model, arns, region string
		want                      []string // in the error; none for a model the functions may call
	}{
		{name: "MODEL_ID", model: "us.anthropic.claude-sonnet-4-5-20250929-v1:0"},
		{name: "SUMMARIZER_MODEL_ID", model: nova + "-summarizer"},
		{name: "a foundation model in the Region", model: nova, arns: "arn:aws:bedrock:us-east-1::foundation-model/" + nova},
		{name: "a foundation model in every Region", model: nova, arns: "arn:aws:bedrock:*::foundation-model/" + nova},
		{name: "a foundation model in another Region", model: nova, arns: "arn:aws:bedrock:eu-west-1::foundation-model/" + nova,
			want: []string{"[0] researcher: model_id: the functions may not call " + nova, "ADDITIONAL_MODEL_ARNS lacks arn:aws:bedrock:us-east-1::foundation-model/" + nova}},
		{name: "an unknown Region", model: nova, region: "-", arns: "arn:aws:bedrock:us-east-1::foundation-model/" + nova,
			want: []string{"lacks arn:aws:bedrock:REGION::foundation-model/" + nova, "AWS_REGION is not set, so only ARNs of every Region, *, count"}},
		{name: "a profile and its model everywhere", model: profile, arns: "arn:aws:bedrock:us-east-1:111122223333:inference-profile/" + profile + ",arn:aws-us-gov:bedrock:*::foundation-model/" + haiku},
		{name: "a profile without its model", model: profile, arns: "arn:aws:bedrock:us-east-1:111122223333:inference-profile/" + profile,
			want: []string{"lacks arn:aws:bedrock:*::foundation-model/" + haiku}},
		{name: "a profile whose model is in one Region", model: profile, arns: "arn:aws:bedrock:us-east-1:111122223333:inference-profile/" + profile + ",arn:aws:bedrock:us-east-1::foundation-model/" + haiku,
			want: []string{"lacks arn:aws:bedrock:*::foundation-model/" + haiku}},
		{name: "a profile's model alone", model: profile, arns: "arn:aws:bedrock:*::foundation-model/" + haiku,
			want: []string{"lacks arn:aws:bedrock:us-east-1:ACCOUNT:inference-profile/" + profile}},
		{name: "the model behind MODEL_ID's profile", model: "anthropic.claude-sonnet-4-5-20250929-v1:0",
			want: []string{"lacks arn:aws:bedrock:us-east-1::foundation-model/anthropic.claude-sonnet-4-5-20250929-v1:0"}},
		{name: "nothing listed", model: nova, want: []string{"lacks arn:aws:bedrock:us-east-1::foundation-model/" + nova}},
		{name: "an ARN", model: "arn:aws:bedrock:us-east-1::foundation-model/" + nova, arns: "arn:aws:bedrock:us-east-1::foundation-model/" + nova,
			want: []string{"model_id must be a foundation model id or a system-defined inference profile id"}},
		{name: "ARNs that grant no model", model: "", arns: "arn:aws:bedrock:us-east-1:111122223333:foundation-model/" + nova + ",arn:aws:bedrock:us-east-1::inference-profile/" + profile + ",arn:aws:s3:::bucket, arn:aws:bedrock:us-east-1::foundation-model/*",
			want: []string{`ADDITIONAL_MODEL_ARNS: "arn:aws:bedrock:us-east-1:111122223333:foundation-model/` + nova + `", "arn:aws:bedrock:us-east-1::inference-profile/` + profile + `", "arn:aws:s3:::bucket", "arn:aws:bedrock:us-east-1::foundation-model/*": want ARNs of foundation models`}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			region := cmp.Or(tt.region, "us-east-1")
			if region == "-" {
				region = ""
			}
			entry := map[string]string{"name": "researcher", "description": "d", "system_prompt": "p", "model_id": tt.model}
			raw, _ := json.Marshal([]map[string]string{entry})
			c, err := ConfigFromEnv(env(map[string]string{
				"TABLE_NAME": "t", "MODEL_ID": "us.anthropic.claude-sonnet-4-5-20250929-v1:0", "SUMMARIZER_MODEL_ID": nova + "-summarizer",
				"AWS_REGION": region, "ADDITIONAL_MODEL_ARNS": tt.arns, "AGENTS": string(raw),
			}))
			if len(tt.want) == 0 {
				if err != nil || c.Agents[0].ModelID != tt.model {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			if err == nil {
				t.Fatal("accepted")
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("the error does not say %s:\n%v", w, err)
				}
			}
		})
	}
}

// TestSummariesOfASubAgent: the summarizing manager that newAgent builds
// for an agent writes its summaries with SUMMARIZER_MODEL_ID when it is
// set, and with the agent's own model otherwise, as docs/subagents.md
// says of a sub-agent's conversation_manager.
func TestSummariesOfASubAgent(t *testing.T) {
	for _, tt := range []struct{ summarizer, want string }{{"", "sub-model"}, {"small-model", "small-model"}} {
		t.Run(tt.want, func(t *testing.T) {
			srv := conversetest.NewServer()
			t.Cleanup(srv.Close)
			srv.Enqueue(conversetest.Text("a summary"))
			cfg := &Config{ModelID: "main-model", SummarizerModelID: tt.summarizer, SummaryRatio: 0.5, PreserveRecent: 1}
			w := &wiring{cfg: cfg, client: srv.Client(), tracing: telemetry.NewTracing(telemetry.TracingConfig{}, nil), models: map[string]agent.Model{}}
			model, err := w.model("sub-model")
			if err != nil {
				t.Fatal(err)
			}
			m, err := w.manager("summarizing", 2, 0, model)
			if err != nil {
				t.Fatal(err)
			}
			c := &agent.Conversation{Messages: []agent.Message{
				agent.UserText("one"), agent.AssistantText("1"), agent.UserText("two"), agent.AssistantText("2"),
			}}
			if err := m.Apply(t.Context(), c); err != nil {
				t.Fatal(err)
			}
			reqs := srv.Requests()
			if len(reqs) != 1 || reqs[0].ModelID != tt.want || c.Window.Summary != "a summary" {
				t.Fatalf("%d summarizer calls (model %v), summary %q; want one, of %s", len(reqs), reqs, c.Window.Summary, tt.want)
			}
		})
	}
}

// TestConfigEntriesForAgents: a LAMBDA_TOOLS entry with agents is offered
// to those agents, whether their tools are set or not, and to no other;
// an MCP_SERVERS or LAMBDA_TOOLS entry's agents must be agents of AGENTS,
// and none may have to wait for a person. Every problem is named.
func TestConfigEntriesForAgents(t *testing.T) {
	base := map[string]string{
		"TABLE_NAME": "t", "MODEL_ID": "m", "TOOLS": "calculator",
		"LAMBDA_TOOLS": `[{"name":"refund","function":"f","description":"d","agents":["clerk"]},{"name":"lookup","function":"g","description":"d"}]`,
		"MCP_SERVERS":  `[{"name":"docs","url":"https://docs.example.com/mcp","agents":["clerk","writer"]}]`,
		"AGENTS": `[{"name":"clerk","description":"d","system_prompt":"p"},
			{"name":"writer","description":"d","system_prompt":"p","tools":["calculator"]},
			{"name":"narrow","description":"d","system_prompt":"p","tools":[]}]`,
	}
	c, err := ConfigFromEnv(env(base))
	if err != nil {
		t.Fatal(err)
	}
	got := map[string][]string{}
	for _, a := range c.Agents {
		got[a.Name] = a.Tools
	}
	want := map[string][]string{"clerk": {"calculator", "lookup", "refund"}, "writer": {"calculator"}, "narrow": {}}
	if diff := gocmp.Diff(want, got); diff != "" {
		t.Errorf("tools (-want +got):\n%s", diff)
	}

	with := func(vars map[string]string) map[string]string {
		out := maps.Clone(base)
		maps.Copy(out, vars)
		return out
	}
	for _, tt := range []struct {
		name string
		vars map[string]string
		want []string
	}{
		{"unknown and empty audiences", map[string]string{
			"LAMBDA_TOOLS": `[{"name":"refund","function":"f","description":"d","agents":["clerk","ghost"]},{"name":"void","function":"f","description":"d","agents":[]}]`,
			"MCP_SERVERS":  `[{"name":"docs","url":"https://docs.example.com/mcp","agents":["phantom"]}]`,
		}, []string{
			`LAMBDA_TOOLS: [0] refund: agents: "ghost" is not an agent of AGENTS, which are clerk, writer, narrow`,
			"LAMBDA_TOOLS: [1] void: agents is empty",
			`MCP_SERVERS: [0] docs: agents: "phantom" is not an agent of AGENTS`,
		}},
		{"no AGENTS", map[string]string{"AGENTS": ""}, []string{
			"LAMBDA_TOOLS: [0] refund: agents names clerk, and AGENTS defines no agent",
			"MCP_SERVERS: [0] docs: agents names clerk, writer, and AGENTS defines no agent",
		}},
		{"another agent's tool", map[string]string{
			"AGENTS": `[{"name":"clerk","description":"d","system_prompt":"p"},{"name":"writer","description":"d","system_prompt":"p","tools":["refund"]}]`,
		}, []string{`[1] writer: tools: "refund" is offered only to the agents its entry in LAMBDA_TOOLS names: clerk`}},
		{"an approval for agents that start fresh", map[string]string{
			"APPROVAL_TOOLS": "refund",
			"AGENTS":         `[{"name":"clerk","description":"d","system_prompt":"p","fresh":true},{"name":"writer","description":"d","system_prompt":"p"}]`,
		}, []string{`APPROVAL_TOOLS: "refund" waits for a person, and the agents that LAMBDA_TOOLS offers it to start fresh, which cannot wait`}},
		{"remote agents for agents that start fresh, and named like others", map[string]string{
			"AGENTS":     `[{"name":"clerk","description":"d","system_prompt":"p","fresh":true},{"name":"writer","description":"d","system_prompt":"p"}]`,
			"A2A_AGENTS": `[{"name":"helper","card_url":"https://helper.example.com/.well-known/agent-card.json","agents":["clerk"]},{"name":"refund","card_url":"https://r.example.com/.well-known/agent-card.json"},{"name":"x","card_url":"https://x.example.com/card.json","agents":["ghost"]}]`,
		}, []string{
			"A2A_AGENTS: [0] helper: a remote agent may ask for a person's answer, and the agents it is offered to start fresh, which cannot wait",
			"A2A_AGENTS: [1] refund: another tool, Lambda tool or sub-agent has this name",
			`A2A_AGENTS: [2] x: agents: "ghost" is not an agent of AGENTS`,
		}},
		{"a question for an agent that starts fresh", map[string]string{
			"TOOLS":  "calculator,ask_user",
			"AGENTS": `[{"name":"clerk","description":"d","system_prompt":"p"},{"name":"writer","description":"d","system_prompt":"p","fresh":true,"tools":["ask_user"]}]`,
		}, []string{`[1] writer: tools: "ask_user" waits for a person, which an agent that starts fresh cannot do`}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := ConfigFromEnv(env(with(tt.vars)))
			if err == nil {
				t.Fatal("accepted")
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("the error does not say %s:\n%v", w, err)
				}
			}
		})
	}
	// An agent an entry names may name its tool too, to no effect.
	c, err = ConfigFromEnv(env(with(map[string]string{"MCP_SERVERS": "", "AGENTS": `[{"name":"clerk","description":"d","system_prompt":"p","tools":["refund"]}]`})))
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(c.Agents[0].Tools, []string{"refund"}) {
		t.Errorf("the clerk naming its own refund has the tools %v", c.Agents[0].Tools)
	}
	// A name that a server for the main agent may have waits for a person
	// there.
	if _, err := ConfigFromEnv(env(with(map[string]string{
		"APPROVAL_TOOLS": "docs_search",
		"MCP_SERVERS":    `[{"name":"docs","url":"https://docs.example.com/mcp","agents":["clerk"]},{"name":"all","url":"https://all.example.com/mcp","prefix":""}]`,
	}))); err != nil {
		t.Errorf("an approval tool a shared server may have: %v", err)
	}
}

// TestSubAgentManagerSettings: a sub-agent's manager takes its own kind
// and window, or else CONVERSATION_MANAGER and WINDOW_SIZE; a window of
// its own is cut back to half of it, and WINDOW_LOW_WATER goes with
// WINDOW_SIZE alone; SUMMARY_RATIO and PRESERVE_RECENT_MESSAGES apply to
// every agent.
func TestSubAgentManagerSettings(t *testing.T) {
	cfg := &Config{ModelID: "m", Manager: "sliding", WindowSize: 40, WindowLowWater: 30, SummaryRatio: 0.5, PreserveRecent: 4}
	w := &wiring{cfg: cfg, tracing: telemetry.NewTracing(telemetry.TracingConfig{}, nil), models: map[string]agent.Model{}}
	for _, tt := range []struct {
		sa   SubAgent
		want agent.ConversationManager
	}{
		{SubAgent{}, agent.SlidingWindow{Size: 40, LowWater: 30}},
		{SubAgent{WindowSize: 12}, agent.SlidingWindow{Size: 12}},
		{SubAgent{Manager: "none"}, agent.NoManager{}},
		{SubAgent{Manager: "summarizing", WindowSize: 8}, agent.Summarizing{Ratio: 0.5, PreserveRecent: 4, MaxMessages: 8}},
		{SubAgent{Manager: "summarizing"}, agent.Summarizing{Ratio: 0.5, PreserveRecent: 4, MaxMessages: 40}},
	} {
		got, err := w.agentManager(tt.sa, nil)
		if err != nil {
			t.Fatal(err)
		}
		if s, ok := got.(agent.Summarizing); ok {
			s.Model = nil // the summarizer: TestSummariesOfASubAgent
			got = s
		}
		if diff := gocmp.Diff(tt.want, got); diff != "" {
			t.Errorf("%+v: manager (-want +got):\n%s", tt.sa, diff)
		}
	}
}
