package deploy

import (
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/lambda-agent/lambda-agent/internal/agentcore"
	"github.com/lambda-agent/lambda-agent/internal/app"
)

// resolver evaluates the template's intrinsic functions for one set of
// parameter values, as CloudFormation would at deploy time.
type resolver struct {
	tp     *tmpl
	params map[string]string
}

// newResolver takes the parameters' defaults, then overrides.
func newResolver(t *testing.T, tp *tmpl, overrides map[string]string) *resolver {
	t.Helper()
	r := &resolver{tp: tp, params: map[string]string{}}
	for name, p := range tp.Parameters {
		if p.Default != nil {
			r.params[name] = *p.Default
		}
	}
	for name, v := range overrides {
		p, ok := tp.Parameters[name]
		if !ok {
			t.Fatalf("no parameter %s", name)
		}
		if !p.allowed(t, v) {
			t.Fatalf("%s=%q is not an allowed value", name, v)
		}
		r.params[name] = v
	}
	return r
}

// value resolves v to a string: a parameter's value, a branch of an Fn::If,
// or "resource-ID" for a Ref to resource ID.
func (r *resolver) value(v any) (string, error) {
	x, ok, err := r.resolve(v)
	if err != nil {
		return "", err
	}
	s, isString := x.(string)
	if !ok || !isString {
		return "", fmt.Errorf("cannot resolve %v to a string", v)
	}
	return s, nil
}

// resolve evaluates Ref and Fn::If in v, in lists and maps too, and drops
// what resolves to AWS::NoValue; ok is false when v itself does. Other
// intrinsic functions (Fn::Sub, Fn::GetAtt, ...) are kept as they are. A Ref
// to a resource stands for "resource-ID", and is an error when this
// deployment does not create the resource.
func (r *resolver) resolve(v any) (res any, ok bool, err error) {
	switch v := v.(type) {
	case []any:
		out := make([]any, 0, len(v))
		for _, e := range v {
			x, ok, err := r.resolve(e)
			if err != nil {
				return nil, false, err
			}
			if ok {
				out = append(out, x)
			}
		}
		return out, true, nil
	case map[string]any:
		if name := refName(v); name != "" {
			if name == "AWS::NoValue" {
				return nil, false, nil
			}
			if p, ok := r.params[name]; ok {
				return p, true, nil
			}
			if _, ok := r.tp.Resources[name]; !ok {
				return nil, false, fmt.Errorf("Ref to unknown %s", name)
			}
			exists, err := r.exists(name)
			if err != nil {
				return nil, false, err
			}
			if !exists {
				return nil, false, fmt.Errorf("Ref to %s, which this deployment does not create", name)
			}
			return "resource-" + name, true, nil
		}
		if args, isIf := v["Fn::If"].([]any); isIf && len(v) == 1 {
			cond, _ := args[0].(string)
			if len(args) != 3 || cond == "" {
				return nil, false, fmt.Errorf("malformed Fn::If %v", v)
			}
			yes, err := r.condition(cond)
			if err != nil {
				return nil, false, err
			}
			if yes {
				return r.resolve(args[1])
			}
			return r.resolve(args[2])
		}
		if len(v) == 1 {
			if x, done, err := r.stringFunction(v); done || err != nil {
				return x, err == nil, err
			}
			for k := range v {
				if strings.HasPrefix(k, "Fn::") {
					return v, true, nil
				}
			}
		}
		out := make(map[string]any, len(v))
		for k, e := range v {
			x, ok, err := r.resolve(e)
			if err != nil {
				return nil, false, err
			}
			if ok {
				out[k] = x
			}
		}
		return out, true, nil
	}
	return v, true, nil
}

// stringFunction evaluates Fn::Join, Fn::Split and Fn::Select, when their
// arguments resolve to strings and lists of strings, as CloudFormation
// would; done is false for any other function, or for arguments that hold
// what only a deployment knows (an attribute, an Fn::Sub), which resolve
// leaves as they are. A list parameter (CommaDelimitedList) resolves to its
// string, which Fn::Join and Fn::Select take as the list it stands for.
// Fn::Select past the end is an error, as it is at deploy time.
func (r *resolver) stringFunction(v map[string]any) (res any, done bool, err error) {
	list := func(x any) ([]string, bool) {
		switch x := x.(type) {
		case string:
			return strings.Split(x, ","), true
		case []any:
			out := make([]string, 0, len(x))
			for _, e := range x {
				s, ok := e.(string)
				if !ok {
					return nil, false
				}
				out = append(out, s)
			}
			return out, true
		}
		return nil, false
	}
	for name, raw := range v {
		args, ok := raw.([]any)
		if !ok || len(args) != 2 || (name != "Fn::Join" && name != "Fn::Split" && name != "Fn::Select") {
			return nil, false, nil
		}
		first, _, err := r.resolve(args[0])
		if err != nil {
			return nil, false, err
		}
		second, _, err := r.resolve(args[1])
		if err != nil {
			return nil, false, err
		}
		s, isString := first.(string)
		if !isString {
			return nil, false, nil
		}
		switch name {
		case "Fn::Join":
			parts, ok := list(second)
			if !ok {
				return nil, false, nil
			}
			return strings.Join(parts, s), true, nil
		case "Fn::Split":
			src, ok := second.(string)
			if !ok {
				return nil, false, nil
			}
			var out []any
			for _, p := range strings.Split(src, s) {
				out = append(out, p)
			}
			return out, true, nil
		default: // Fn::Select
			parts, ok := list(second)
			if !ok {
				return nil, false, nil
			}
			i, err := strconv.Atoi(s)
			if err != nil || i < 0 || i >= len(parts) {
				return nil, false, fmt.Errorf("Fn::Select %s of %q: no such element", s, parts)
			}
			return parts[i], true, nil
		}
	}
	return nil, false, nil
}

// exists reports whether the deployment creates resource id: it has no
// Condition, or its Condition holds.
func (r *resolver) exists(id string) (bool, error) {
	c := r.tp.Resources[id].Condition
	if c == "" {
		return true, nil
	}
	return r.condition(c)
}

// refusals returns the AssertDescription of each of the template's Rules
// assertions that these parameters fail, sorted: CloudFormation refuses to
// deploy them, before it creates or changes anything.
func (r *resolver) refusals() ([]string, error) {
	var out []string
	for name, rl := range r.tp.Rules {
		if rl.RuleCondition != nil {
			applies, err := r.eval(rl.RuleCondition)
			if err != nil {
				return nil, fmt.Errorf("rule %s: %w", name, err)
			}
			if !applies {
				continue
			}
		}
		for _, a := range rl.Assertions {
			holds, err := r.eval(a.Assert)
			if err != nil {
				return nil, fmt.Errorf("rule %s: %w", name, err)
			}
			if !holds {
				out = append(out, name+": "+a.AssertDescription)
			}
		}
	}
	slices.Sort(out)
	return out, nil
}

// deployable fails the test unless the template's Rules accept the
// resolver's parameters.
func (r *resolver) deployable(t *testing.T) {
	t.Helper()
	refused, err := r.refusals()
	if err != nil {
		t.Fatal(err)
	}
	if len(refused) > 0 {
		t.Fatalf("the template's Rules refuse %v:\n%s", r.overrides(), strings.Join(refused, "\n"))
	}
}

// overrides returns the parameters that differ from their defaults, for
// messages.
func (r *resolver) overrides() map[string]string {
	out := map[string]string{}
	for name, v := range r.params {
		if d := r.tp.Parameters[name].Default; d == nil || *d != v {
			out[name] = v
		}
	}
	return out
}

func (r *resolver) condition(name string) (bool, error) {
	c, ok := r.tp.Conditions[name]
	if !ok {
		return false, fmt.Errorf("no condition %s", name)
	}
	return r.eval(c)
}

func (r *resolver) eval(c any) (bool, error) {
	m, _ := c.(map[string]any)
	if len(m) != 1 {
		return false, fmt.Errorf("cannot evaluate condition %v", c)
	}
	var args []any
	for _, v := range m {
		args, _ = v.([]any)
	}
	switch {
	case m["Condition"] != nil:
		name, _ := m["Condition"].(string)
		return r.condition(name)
	case m["Fn::Equals"] != nil && len(args) == 2:
		a, err := r.value(args[0])
		if err != nil {
			return false, err
		}
		b, err := r.value(args[1])
		return a == b, err
	case m["Fn::Not"] != nil && len(args) == 1:
		ok, err := r.eval(args[0])
		return !ok, err
	case m["Fn::And"] != nil, m["Fn::Or"] != nil:
		and := m["Fn::And"] != nil
		for _, a := range args {
			ok, err := r.eval(a)
			if err != nil {
				return false, err
			}
			if ok != and {
				return ok, nil
			}
		}
		return and, nil
	}
	return false, fmt.Errorf("cannot evaluate condition %v", c)
}

// environment returns a function's environment variables as deployed: a
// SAM function's with the Globals', a plain AWS::Lambda::Function's its
// own alone.
func (r *resolver) environment(t *testing.T, id string) map[string]string {
	t.Helper()
	vars, _ := get(r.tp.properties(id), "Environment", "Variables").(map[string]any)
	env := map[string]string{}
	for k, v := range vars {
		s, err := r.value(v)
		if err != nil {
			t.Fatalf("%s: %s: %v", id, k, err)
		}
		env[k] = s
	}
	return env
}

// readConfig runs the functions' configuration on env and returns it and the
// variables it asked for.
func readConfig(env map[string]string) (*app.Config, []string, error) {
	var read []string
	c, err := app.ConfigFromEnv(func(name string) string {
		read = append(read, name)
		return env[name]
	})
	slices.Sort(read)
	return c, slices.Compact(read), err
}

// TestConfigReadsTemplate feeds the environment the template gives the
// functions, for several sets of parameters, to their configuration: it must
// be valid, and every variable set must be one the code reads.
func TestConfigReadsTemplate(t *testing.T) {
	tp := loadTemplate(t)
	sc := loadSamconfig(t)
	requireAuth := func(want bool) func(t *testing.T, c *app.Config) {
		return func(t *testing.T, c *app.Config) {
			if c.RequireAuth != want {
				t.Errorf("RequireAuth = %v, want %v", c.RequireAuth, want)
			}
		}
	}
	tests := []struct {
		name      string
		overrides map[string]string
		check     func(t *testing.T, c *app.Config)
	}{
		// Private by default: IAM auth, and the functions insist on a caller.
		{name: "defaults", check: requireAuth(true)},
		{name: "samconfig", overrides: sc.overrides(t, "deploy"), check: requireAuth(true)},
		// sam local runs no authorizer, so requests name no caller: the
		// local settings must leave the functions serving them.
		{name: "samconfig local invoke", overrides: sc.overrides(t, "local_invoke"), check: requireAuth(false)},
		{name: "samconfig local start-api", overrides: sc.overrides(t, "local_start_api"), check: requireAuth(false)},
		{name: "anonymous", overrides: map[string]string{"AllowAnonymous": "true"}, check: requireAuth(false)},
		{
			name: "jwt",
			overrides: map[string]string{
				"JwtIssuer":   "https://issuer.example.com",
				"JwtAudience": "client-a,client-b",
			},
			check: func(t *testing.T, c *app.Config) {
				if !c.RequireAuth {
					t.Error("RequireAuth = false with the JWT authorizer on")
				}
			},
		},
		{
			name:      "approvals",
			overrides: map[string]string{"Tools": "calculator,ask_user", "ApprovalTools": "calculator", "InterruptTtl": "30m"},
			check: func(t *testing.T, c *app.Config) {
				if !slices.Equal(c.ApprovalTools, []string{"calculator"}) || c.InterruptTTL != 30*time.Minute || !slices.Contains(c.Tools, "ask_user") {
					t.Errorf("config = %+v", c)
				}
			},
		},
		{
			name: "agents",
			overrides: map[string]string{
				"Tools":  "calculator",
				"Agents": `[{"name":"researcher","description":"Researches.","system_prompt":"You research.","tools":["calculator"]}]`,
			},
			check: func(t *testing.T, c *app.Config) {
				if len(c.Agents) != 1 || c.Agents[0].Name != "researcher" || c.AgentsPath != "" {
					t.Errorf("agents %+v, path %q", c.Agents, c.AgentsPath)
				}
			},
		},
		{
			name:      "agents in SSM",
			overrides: map[string]string{"Agents": "ssm:/app/agents/"},
			check: func(t *testing.T, c *app.Config) {
				if c.AgentsPath != "/app/agents/" || c.Agents != nil {
					t.Errorf("agents %+v, path %q", c.Agents, c.AgentsPath)
				}
			},
		},
		{
			name: "everything",
			overrides: map[string]string{
				"SystemPrompt":                "Be brief.",
				"MaxTokens":                   "4096",
				"Temperature":                 "0.5",
				"MaxCycles":                   "999",
				"Tools":                       "none",
				"ContextWindowTokens":         "200000",
				"ConversationManager":         "summarizing",
				"WindowSize":                  "2",
				"SummaryRatio":                "0.8",
				"PreserveRecentMessages":      "1",
				"SummarizerModelId":           "us.amazon.nova-lite-v1:0",
				"SummarizerFoundationModelId": "amazon.nova-lite-v1:0",
				"AdditionalModelArns":         "arn:aws:bedrock:us-east-1:111122223333:inference-profile/us.anthropic.claude-haiku-4-5-20251001-v1:0,arn:aws:bedrock:*::foundation-model/anthropic.claude-haiku-4-5-20251001-v1:0",
				"GuardrailId":                 "abc123def456",
				"GuardrailVersion":            "1",
				"GuardrailRedactedInput":      "[Nachricht entfernt.]",
				"RequireAuth":                 "true",
			},
			check: func(t *testing.T, c *app.Config) {
				if c.Manager != "summarizing" || c.GuardrailVersion != "1" || c.GuardrailRedactedInput != "[Nachricht entfernt.]" || len(c.Tools) != 0 || !c.RequireAuth || len(c.AdditionalModels) != 2 {
					t.Errorf("config = %+v", c)
				}
			},
		},
		{
			name:      "memory",
			overrides: map[string]string{"Memory": "on"},
			check: func(t *testing.T, c *app.Config) {
				if !c.Memory.Enabled || c.Memory.IAMOwners || c.Memory.TTLDays != app.DefaultMemoryTTLDays {
					t.Errorf("memory = %+v", c.Memory)
				}
			},
		},
		{
			name: "memory, everything",
			overrides: map[string]string{
				"Memory":             "on",
				"MemoryForIamOwners": "true",
				"MemoryModelId":      "us.anthropic.claude-haiku-4-5-20251001-v1:0",
				// Lambda sets AWS_REGION, which this environment lacks:
				// the memory function's check counts only ARNs of every
				// Region here.
				"AdditionalModelArns": "arn:aws:bedrock:*:111122223333:inference-profile/us.anthropic.claude-haiku-4-5-20251001-v1:0,arn:aws:bedrock:*::foundation-model/anthropic.claude-haiku-4-5-20251001-v1:0",
				"MemoryKinds":         `[{"name":"project","prompt":"The person's projects.","always":true}]`,
				"MemoryTtlDays":       "0",
			},
			check: func(t *testing.T, c *app.Config) {
				if !c.Memory.Enabled || !c.Memory.IAMOwners {
					t.Errorf("memory = %+v", c.Memory)
				}
			},
		},
		// AgentCore Memory instead of the built-in memory: the memory
		// function mirrors, the others recall from AgentCore.
		{
			name:      "AgentCore Memory",
			overrides: map[string]string{"AgentCoreMemoryId": agentCoreID},
			check: func(t *testing.T, c *app.Config) {
				if c.Memory.Enabled || c.AgentCore.MemoryID != agentCoreID || c.AgentCore.Namespace != agentcore.DefaultNamespace {
					t.Errorf("memory = %+v, AgentCore = %+v", c.Memory, c.AgentCore)
				}
			},
		},
		// The audit record, with its own TTL.
		{
			name:      "audit record",
			overrides: map[string]string{"Audit": "on", "AuditTtlDays": "9999"},
			check: func(t *testing.T, c *app.Config) {
				if c.Audit != (app.AuditConfig{Enabled: true, TTLDays: 9999}) {
					t.Errorf("audit = %+v", c.Audit)
				}
			},
		},
		{
			name: "AgentCore Memory, everything",
			overrides: map[string]string{
				"AgentCoreMemoryId":  agentCoreID,
				"AgentCoreNamespace": "/tenants/acme/users/{actorId}/",
				"MemoryForIamOwners": "true",
			},
			check: func(t *testing.T, c *app.Config) {
				if c.Memory.Enabled || !c.Memory.IAMOwners || c.AgentCore.Namespace != "/tenants/acme/users/{actorId}/" {
					t.Errorf("memory = %+v, AgentCore = %+v", c.Memory, c.AgentCore)
				}
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := newResolver(t, tp, tt.overrides)
			r.deployable(t)
			checkMemoryFunctionConfig(t, r)
			for id := range functions {
				env := r.environment(t, id)
				c, read, err := readConfig(env)
				if err != nil {
					t.Fatalf("%s: %v", id, err)
				}
				// Every variable set is read: a misspelt one would
				// silently leave its setting at the default. The SDK
				// reads the AWS_ ones.
				set := slices.DeleteFunc(slices.Sorted(maps.Keys(env)), func(k string) bool { return strings.HasPrefix(k, "AWS_") })
				// The code also reads what the template leaves to others:
				// Lambda's own AWS_ variables, such as the function's name,
				// and OpenTelemetry's standard OTEL_ ones, which a
				// deployment may add.
				// Only the stream function serves A2A: the others leave
				// what its card says to their defaults.
				// What only extraction reads is the memory function's:
				// the others leave it to its defaults.
				read = slices.DeleteFunc(read, func(k string) bool {
					return !slices.Contains(set, k) && (strings.HasPrefix(k, "AWS_") || strings.HasPrefix(k, "OTEL_") ||
						(id != "ChatStreamFunction" && strings.HasPrefix(k, "A2A_")) || slices.Contains(extractionOnly, k))
				})
				if diff := cmp.Diff(set, read); diff != "" {
					t.Errorf("%s: variables set (-) and read (+):\n%s", id, diff)
				}
				if tt.check != nil {
					tt.check(t, c)
				}
			}
		})
	}
}

// extractionOnly are the variables the memory function alone needs: the
// extraction model and what it keeps.
var extractionOnly = []string{"MEMORY_KINDS", "MEMORY_MODEL_ID", "MEMORY_TTL_DAYS"}

// checkMemoryFunctionConfig feeds the memory function's environment, when
// the deployment has the function, to its configuration, which the
// function reads whole: it must be valid and name a memory, the built-in
// one or AgentCore Memory, every variable set must be one it reads, and
// every variable it shares with the chat function must have the chat
// function's value, so that both see one table, one model and one memory.
func checkMemoryFunctionConfig(t *testing.T, r *resolver) {
	t.Helper()
	if exists, err := r.exists(memoryFunction); err != nil || !exists {
		if err != nil {
			t.Fatal(err)
		}
		return
	}
	env := r.environment(t, memoryFunction)
	c, read, err := readConfig(env)
	if err != nil {
		t.Fatalf("%s: %v", memoryFunction, err)
	}
	if !c.Memory.Enabled && env["AGENTCORE_MEMORY_ID"] == "" {
		t.Errorf("%s: MEMORY = %q and no AGENTCORE_MEMORY_ID", memoryFunction, env["MEMORY"])
	}
	chat := r.environment(t, "ChatFunction")
	for k, v := range env {
		if !slices.Contains(read, k) && !strings.HasPrefix(k, "AWS_") {
			t.Errorf("%s sets %s, which its configuration does not read", memoryFunction, k)
		}
		if shared, ok := chat[k]; ok && shared != v {
			t.Errorf("%s: %s = %q, but ChatFunction's is %q", memoryFunction, k, v, shared)
		}
	}
}

// TestConfigAcceptsAllowedValues probes each parameter with values around
// the code's bounds: whatever the parameter accepts, the code must accept
// too, or a deployment would succeed and every invocation fail at init.
func TestConfigAcceptsAllowedValues(t *testing.T) {
	tp := loadTemplate(t)
	probes := []string{
		"", "-1", "0", "1", "2", "9", "10", "999", "1000", "1001", "9999", "10000", "10001",
		"99999999", "100000000", "1048576", "1048577", "0.0", "0.05", "0.1", "0.5", "0.8", "0.85",
		"1.0", "1.5", ".5", "1e3", " 1", "none", "calculator", "calculator,recall", "true",
		"false", "DRAFT", "sliding", "summarizing",
	}
	for name, p := range tp.Parameters {
		candidates := append(slices.Clone(probes), p.AllowedValues...)
		candidates = append(candidates, p.MinValue, p.MaxValue)
		for _, v := range candidates {
			if !p.allowed(t, v) || (p.Type == "Number" && !numberInRange(p, v)) {
				continue
			}
			// Each value with memory off, on, and AgentCore Memory's:
			// with either memory, the memory function reads the memory
			// parameters too.
			for _, m := range memorySetups {
				overrides := maps.Clone(m.params)
				overrides[name] = v
				r := newResolver(t, tp, overrides)
				// A value that the Rules allow only beside others (a
				// guardrail id without its version) is probed by
				// TestConfigReadsTemplate in a valid combination.
				if refused, err := r.refusals(); err != nil {
					t.Fatal(err)
				} else if len(refused) > 0 {
					continue
				}
				ids := slices.Collect(maps.Keys(functions))
				if exists, err := r.exists(memoryFunction); err != nil {
					t.Fatal(err)
				} else if exists {
					ids = append(ids, memoryFunction)
				}
				for _, id := range ids {
					if _, _, err := readConfig(r.environment(t, id)); err != nil {
						t.Errorf("%s=%q is allowed by the template, but %s's configuration says: %v", name, v, id, err)
					}
				}
			}
		}
	}
}

// numberInRange reports whether v is a number within p's MinValue and
// MaxValue, as CloudFormation checks a Number parameter.
func numberInRange(p parameter, v string) bool {
	var n, lo, hi float64
	if _, err := fmt.Sscan(v, &n); err != nil || strings.TrimSpace(v) != v {
		return false
	}
	if _, err := fmt.Sscan(p.MinValue, &lo); err == nil && n < lo {
		return false
	}
	if _, err := fmt.Sscan(p.MaxValue, &hi); err == nil && n > hi {
		return false
	}
	return true
}

// TestAdditionalModelArnsAgree: AdditionalModelArns accepts the ARNs the
// functions accept in ADDITIONAL_MODEL_ARNS, and refuses those they
// refuse, which would otherwise deploy a stack whose every init fails.
func TestAdditionalModelArnsAgree(t *testing.T) {
	p := loadTemplate(t).Parameters["AdditionalModelArns"]
	const (
		fm      = "arn:aws:bedrock:us-east-1::foundation-model/amazon.nova-lite-v1:0"
		fmAll   = "arn:aws:bedrock:*::foundation-model/anthropic.claude-haiku-4-5-20251001-v1:0"
		profile = "arn:aws:bedrock:us-east-1:111122223333:inference-profile/us.anthropic.claude-haiku-4-5-20251001-v1:0"
		govFM   = "arn:aws-us-gov:bedrock:us-gov-west-1::foundation-model/amazon.nova-lite-v1:0"
	)
	for _, tt := range []struct {
		value string
		ok    bool
	}{
		{"", true},
		{fm, true},
		{profile + "," + fmAll, true},
		{govFM, true},
		{"arn:aws:bedrock:us-east-1:111122223333:foundation-model/amazon.nova-lite-v1:0", false}, // a foundation model has no account
		{"arn:aws:bedrock:us-east-1::inference-profile/us.amazon.nova-lite-v1:0", false},         // a profile has one
		{"arn:aws:bedrock:us-east-1::foundation-model/*", false},
		{"arn:aws:bedrock:us-east-1:111122223333:application-inference-profile/abc", false},
		{"arn:aws:s3:::bucket", false},
		{fm + ",", false},
		{"amazon.nova-lite-v1:0", false},
	} {
		if got := p.allowed(t, tt.value); got != tt.ok {
			t.Errorf("AdditionalModelArns allows %q: %v, want %v", tt.value, got, tt.ok)
		}
		_, _, err := readConfig(map[string]string{"TABLE_NAME": "t", "MODEL_ID": "m", "ADDITIONAL_MODEL_ARNS": tt.value})
		if (err == nil) != tt.ok && !(tt.value == fm+",") { // the functions skip an empty entry
			t.Errorf("the functions' ADDITIONAL_MODEL_ARNS=%q: %v, want ok %v", tt.value, err, tt.ok)
		}
	}
}

// TestAgentsPath: with Agents=ssm:/a/path, the functions that run tools
// may call GetParametersByPath on exactly the path they read, and the
// structured function, which reads none, may not; with a JSON list or
// none, no function may read SSM for its agents.
func TestAgentsPath(t *testing.T) {
	tp := loadTemplate(t)
	for _, path := range []string{"/app/agents/", "/app/agents", "/a"} {
		r := newResolver(t, tp, map[string]string{"Agents": "ssm:" + path})
		r.deployable(t)
		grant := r.subVars(t, get(tp.Resources["AgentsPolicy"].Properties, "PolicyDocument", "Statement").([]any)[0].(map[string]any)["Resource"])
		for id := range functions {
			c, _, err := readConfig(r.environment(t, id))
			if err != nil {
				t.Fatal(err)
			}
			if want := "arn:aws:ssm:" + pseudo["AWS::Region"] + ":" + pseudo["AWS::AccountId"] + ":parameter" + c.AgentsPath; grant != want {
				t.Errorf("Agents=ssm:%s: the grant is on %s; %s reads %s", path, grant, id, want)
			}
			policies, _, err := r.resolve(tp.functionProperties(id)["Policies"])
			if err != nil {
				t.Fatal(err)
			}
			attached := slices.ContainsFunc(policies.([]any), func(p any) bool { return p == "resource-AgentsPolicy" })
			if attached != (id != "StructuredFunction") {
				t.Errorf("Agents=ssm:%s: %s has AgentsPolicy: %v", path, id, attached)
			}
		}
	}
	for _, v := range []string{"", `[{"name":"a","description":"d","system_prompt":"p"}]`} {
		r := newResolver(t, tp, map[string]string{"Agents": v})
		if exists, err := r.exists("AgentsPolicy"); err != nil || exists {
			t.Errorf("Agents=%q: AgentsPolicy exists: %v, %v", v, exists, err)
		}
	}
}
