package app_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ssm"
	gocmp "github.com/google/go-cmp/cmp"

	"github.com/lambda-agent/lambda-agent/internal/app"
	"github.com/lambda-agent/lambda-agent/internal/httpapi"
	"github.com/lambda-agent/lambda-agent/internal/testkit"
	"github.com/lambda-agent/lambda-agent/internal/testkit/conversetest"
	"github.com/lambda-agent/lambda-agent/internal/testkit/ssmtest"
)

// configWith reads the configuration of vars, over TABLE_NAME and
// MODEL_ID.
func configWith(t *testing.T, vars map[string]string) (*app.Config, error) {
	t.Helper()
	all := map[string]string{"TABLE_NAME": "t", "MODEL_ID": "m"}
	for k, v := range vars {
		all[k] = v
	}
	return app.ConfigFromEnv(func(k string) string { return all[k] })
}

// TestAgentsPath: AGENTS=ssm:/a/path names the path LoadAgents reads,
// as it is written; a path SSM would refuse fails init.
func TestAgentsPath(t *testing.T) {
	for v, want := range map[string]string{"ssm:/app/agents/": "/app/agents/", " ssm:/app/agents": "/app/agents", "ssm:/a.b/c-d/e_f": "/a.b/c-d/e_f"} {
		c, err := configWith(t, map[string]string{"AGENTS": v})
		if err != nil || c.AgentsPath != want || c.Agents != nil {
			t.Errorf("AGENTS=%q: path %q, agents %v, %v; want %q", v, c.AgentsPath, c.Agents, err, want)
		}
	}
	for _, v := range []string{"ssm:", "ssm:app/agents", "ssm:/a b", "ssm://a", "ssm:/a//b", "ssm:/" + strings.Repeat("l/", 16)} {
		if _, err := configWith(t, map[string]string{"AGENTS": v}); err == nil || !strings.Contains(err.Error(), "is not an SSM parameter path") {
			t.Errorf("AGENTS=%q: %v, want an error", v, err)
		}
	}
}

// agentsServer is an SSM stand-in holding params, put in the order given.
func agentsServer(t *testing.T, params ...[2]string) *ssmtest.Server {
	t.Helper()
	srv := ssmtest.NewServer()
	t.Cleanup(srv.Close)
	for _, p := range params {
		srv.Put(p[0], p[1], strings.Contains(p[0], "secret"))
	}
	return srv
}

// TestLoadAgents: the agents of an AGENTS path are the parameters
// directly under it, read decrypted through every page, in the order of
// their names, and completed as the inline list is.
func TestLoadAgents(t *testing.T) {
	srv := agentsServer(t,
		[2]string{"/app/agents/writer", `{"name":"writer","description":"Writes.","system_prompt":"You write.","tools":[]}`},
		[2]string{"/app/agents/a-secret", `{"name":"researcher","description":"Researches.","system_prompt":"You research.","tools":["calculator","writer"]}`},
		[2]string{"/app/agents/deeper/helper", `not read: it is not directly under the path`},
		[2]string{"/app/agentsx", `not under the path`},
	)
	srv.SetShortPages(true) // best-effort pages, empty ones among them
	c, err := configWith(t, map[string]string{"AGENTS": "ssm:/app/agents/", "TOOLS": "calculator",
		"MCP_SERVERS": `[{"name":"docs","url":"https://docs.example.com/mcp","agents":["writer"]}]`})
	if err != nil {
		t.Fatal(err)
	}
	if err := app.LoadAgents(t.Context(), srv.Client(), c); err != nil {
		t.Fatal(err)
	}
	want := []app.SubAgent{
		{Name: "researcher", Description: "Researches.", SystemPrompt: "You research.", Tools: []string{"calculator", "writer"}},
		{Name: "writer", Description: "Writes.", SystemPrompt: "You write.", Tools: []string{}},
	}
	if diff := gocmp.Diff(want, c.Agents); diff != "" {
		t.Errorf("agents (-want +got):\n%s", diff)
	}
	for _, r := range srv.Requests() {
		if r.Operation != "GetParametersByPath" || r.Path != "/app/agents/" || r.Recursive || !r.WithDecryption {
			t.Errorf("request %+v; want GetParametersByPath of /app/agents/, decrypted, not recursive", r)
		}
	}
}

// TestLoadAgentsReportsEveryProblem: agents from SSM are checked as the
// inline list is, with the MCP_SERVERS and LAMBDA_TOOLS entries that name
// agents; one error names every problem, each with its parameter's name.
func TestLoadAgentsReportsEveryProblem(t *testing.T) {
	many := make([][2]string, app.MaxSubAgents+1)
	for i := range many {
		many[i] = [2]string{fmt.Sprintf("/many/a%d", i), fmt.Sprintf(`{"name":"a%d","description":"d","system_prompt":"p"}`, i)}
	}
	for _, tt := range []struct {
		name   string
		params [][2]string
		vars   map[string]string
		want   []string
	}{
		{"each parameter", [][2]string{
			{"/app/agents/a", `{"name":"twin","description":"d","system_prompt":"p"}`},
			{"/app/agents/b", `{"name":"twin","description":"d","system_prompt":"p","tools":["shell"]}`},
			{"/app/agents/c", `{"name":"bare","description":" ","system_prompt":"p","model_id":"amazon.nova-lite-v1:0"}`},
		}, map[string]string{"LAMBDA_TOOLS": `[{"name":"refund","function":"f","description":"d","agents":["ghost"]}]`}, []string{
			"configuration: AGENTS: ssm:/app/agents: ",
			"/app/agents/b twin: a second agent has this name",
			`/app/agents/b twin: tools: "shell" is neither an enabled built-in or Lambda tool nor an agent`,
			"/app/agents/c bare: description is required",
			"/app/agents/c bare: model_id: the functions may not call amazon.nova-lite-v1:0",
		}},
		{"not agents", [][2]string{
			{"/app/agents/list", `[{"name":"x"}]`},
			{"/app/agents/field", `{"name":"x","description":"d","system_prompt":"p","model":"m"}`},
			{"/app/agents/two", `{"name":"y","description":"d","system_prompt":"p"} {}`},
		}, nil, []string{
			"/app/agents/list: want a JSON object of an agent",
			`/app/agents/field: want a JSON object of an agent: json: unknown field "model"`,
			"/app/agents/two: unexpected data after the JSON object",
		}},
		{"an unknown agent in an entry", [][2]string{{"/app/agents/a", `{"name":"clerk","description":"d","system_prompt":"p"}`}},
			map[string]string{"LAMBDA_TOOLS": `[{"name":"refund","function":"f","description":"d","agents":["clerk","ghost"]}]`},
			[]string{`LAMBDA_TOOLS: [0] refund: agents: "ghost" is not an agent of AGENTS, which are clerk`}},
		{"nothing under the path", [][2]string{{"/elsewhere/a", "{}"}}, nil, []string{"no parameters under /app/agents"}},
		{"too many", many, map[string]string{"AGENTS": "ssm:/many"}, []string{"more than 16 parameters under /many; at most 16 agents"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			srv := agentsServer(t, tt.params...)
			vars := map[string]string{"AGENTS": "ssm:/app/agents", "AWS_REGION": "us-east-1"}
			for k, v := range tt.vars {
				vars[k] = v
			}
			c, err := configWith(t, vars)
			if err != nil {
				t.Fatal(err)
			}
			err = app.LoadAgents(t.Context(), srv.Client(), c)
			if err == nil || c.Agents != nil {
				t.Fatalf("accepted: %+v", c.Agents)
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("the error does not say %s:\n%v", w, err)
				}
			}
		})
	}

	// SSM's refusal names the path.
	srv := agentsServer(t, [2]string{"/app/agents/a", "{}"})
	c, _ := configWith(t, map[string]string{"AGENTS": "ssm:/app/agents"})
	err := app.LoadAgents(t.Context(), srv.Client(func(o *ssm.Options) { o.Credentials = aws.AnonymousCredentials{} }), c)
	if err == nil || !strings.Contains(err.Error(), "AGENTS: read the parameters under /app/agents: ") || !strings.Contains(err.Error(), "MissingAuthenticationTokenException") {
		t.Errorf("an unsigned read: %v", err)
	}
}

// TestAgentsFromSSMAtInit: a function built by NewFromEnv, as at init,
// with AGENTS=ssm:/path and the SSM client reaching the stand-in only by
// AWS_ENDPOINT_URL_SSM, reads its agents once and delegates to them; the
// structured function, which offers no tools, reads nothing.
func TestAgentsFromSSMAtInit(t *testing.T) {
	params := agentsServer(t, [2]string{"/app/agents/researcher", `{"name":"researcher","description":"Researches.","system_prompt":"You research.","tools":[]}`})
	backends := testkit.StartBackends(t, testkit.BackendOptions{})
	vars := map[string]string{"AWS_ENDPOINT_URL_SSM": params.URL, "MODEL_ID": "m", "AGENTS": "ssm:/app/agents/"}
	for _, kv := range backends.Env {
		k, v, _ := strings.Cut(kv, "=")
		vars[k] = v
	}
	testkit.DefaultAWSConfig(t, "us-east-1", vars) // the environment a function has
	backends.Model.Responder = func(req *conversetest.Request) conversetest.Reply {
		switch {
		case systemIs(req, "You research."):
			return conversetest.Text("found it")
		case len(req.Messages) == 1:
			return conversetest.ToolUse("d1", "researcher", map[string]string{"task": "find it"})
		}
		return conversetest.Text("the researcher found it")
	}

	structured, err := app.NewFromEnv(t.Context(), os.Getenv, app.Options{Routes: httpapi.StructuredRoutes})
	if err != nil || params.Calls() != 0 || structured.Config.Agents != nil {
		t.Fatalf("the structured function: %v, %d reads of SSM, agents %v; want none", err, params.Calls(), structured.Config.Agents)
	}
	a, err := app.NewFromEnv(context.Background(), os.Getenv, app.Options{Routes: httpapi.ChatRoutes})
	if err != nil {
		t.Fatal(err)
	}
	r := httptest.NewRequest(http.MethodPost, "/chat", strings.NewReader(`{"session_id":"ssm","message":"ask"}`))
	r.Header.Set("Content-Type", "application/json")
	w := httptest.NewRecorder()
	a.Handler.ServeHTTP(w, r)
	if w.Code != http.StatusOK || !strings.Contains(w.Body.String(), `"researcher"`) || !strings.Contains(w.Body.String(), "the researcher found it") {
		t.Fatalf("%d %s", w.Code, w.Body)
	}
	if params.Calls() != 1 {
		t.Errorf("%d reads of SSM, want one, at init", params.Calls())
	}
}

// TestSystemPromptFromSSMAtInit: SYSTEM_PROMPT=ssm:/name makes every
// function, the structured one too, read the prompt once at init,
// decrypted, through the SSM client that AWS_ENDPOINT_URL_SSM points at;
// the model gets it as the system prompt. A parameter that is missing or
// blank fails init, naming it, and a malformed name fails the
// configuration.
func TestSystemPromptFromSSMAtInit(t *testing.T) {
	long := "You are the support agent. " + strings.Repeat("Be kind. ", 200)
	params := agentsServer(t, [2]string{"/app/prompt-secret", long}, [2]string{"/app/blank", " "})
	backends := testkit.StartBackends(t, testkit.BackendOptions{})
	vars := map[string]string{"AWS_ENDPOINT_URL_SSM": params.URL, "MODEL_ID": "m", "SYSTEM_PROMPT": "ssm:/app/prompt-secret"}
	for _, kv := range backends.Env {
		k, v, _ := strings.Cut(kv, "=")
		vars[k] = v
	}
	testkit.DefaultAWSConfig(t, "us-east-1", vars)
	var calls, prompted int
	backends.Model.Responder = func(req *conversetest.Request) conversetest.Reply {
		calls++
		if systemIs(req, long) {
			prompted++
		}
		return conversetest.Text("hello")
	}
	for _, routes := range []httpapi.Routes{httpapi.StructuredRoutes, httpapi.ChatRoutes} {
		a, err := app.NewFromEnv(t.Context(), os.Getenv, app.Options{Routes: routes})
		if err != nil || a.Config.SystemPrompt != long {
			t.Fatalf("routes %d: %v, prompt %q", routes, err, a.Config.SystemPrompt)
		}
	}
	if params.Calls() != 2 {
		t.Errorf("%d reads of SSM, want one per function", params.Calls())
	}
	a, _ := app.NewFromEnv(t.Context(), os.Getenv, app.Options{Routes: httpapi.ChatRoutes})
	r := httptest.NewRequest(http.MethodPost, "/chat", strings.NewReader(`{"message":"hi"}`))
	r.Header.Set("Content-Type", "application/json")
	w := httptest.NewRecorder()
	a.Handler.ServeHTTP(w, r)
	if w.Code != http.StatusOK || calls != 1 || prompted != 1 {
		t.Fatalf("%d %s; %d model calls, %d with the prompt", w.Code, w.Body, calls, prompted)
	}
	for _, v := range []string{"ssm:/app/missing", "ssm:/app/blank"} {
		t.Setenv("SYSTEM_PROMPT", v)
		if _, err := app.NewFromEnv(t.Context(), os.Getenv, app.Options{Routes: httpapi.ChatRoutes}); err == nil || !strings.Contains(err.Error(), "SYSTEM_PROMPT") || !strings.Contains(err.Error(), strings.TrimPrefix(v, "ssm:")) {
			t.Errorf("SYSTEM_PROMPT=%s: %v", v, err)
		}
	}
	if _, err := configWith(t, map[string]string{"SYSTEM_PROMPT": "ssm:/app/"}); err == nil || !strings.Contains(err.Error(), "not an SSM parameter name") {
		t.Errorf("a path: %v", err)
	}
}
