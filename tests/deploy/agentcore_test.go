package deploy

import (
	"encoding/json"
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/lambda-agent/lambda-agent/internal/agentcore"
)

// agentCoreMemoryArn is the one AgentCore Memory the functions may use, as
// the template writes it: AgentCoreMemoryId's, in the stack's Region and
// account.
const agentCoreMemoryArn = "arn:${AWS::Partition}:bedrock-agentcore:${AWS::Region}:${AWS::AccountId}:memory/${AgentCoreMemoryId}"

// TestAgentCoreParameters: AgentCoreMemoryId takes a memory's id, and
// nothing else, not even its ARN, or nothing; AgentCoreNamespace a
// namespace path with {actorId} once. They agree with the functions'
// checks (agentcore.CheckMemoryID and CheckNamespace), except that they
// bound the length, for Lambda's 4 KB: whatever they accept, the functions
// accept at init, and what the functions refuse they refuse at deploy.
// Both sit with the built-in memory's parameters.
func TestAgentCoreParameters(t *testing.T) {
	tp := loadTemplate(t)
	id, ns := tp.Parameters["AgentCoreMemoryId"], tp.Parameters["AgentCoreNamespace"]
	if id.Default == nil || *id.Default != "" {
		t.Errorf("AgentCoreMemoryId's default = %v, want empty: AgentCore Memory is asked for by name", id.Default)
	}
	if ns.Default == nil || *ns.Default != agentcore.DefaultNamespace {
		t.Errorf("AgentCoreNamespace's default = %v, want agentcore.DefaultNamespace, %s", ns.Default, agentcore.DefaultNamespace)
	}
	name48 := "m" + strings.Repeat("_", 47) // AWS::BedrockAgentCore::Memory's longest Name
	for _, tt := range []struct {
		value    string
		ok, goOK bool // the template accepts it; agentcore.CheckMemoryID does
	}{
		{"", true, false}, // off
		{agentCoreID, true, true},
		{"my_agent_memory-AbCdE01234", true, true},
		{"m-0123456789", true, true},
		{name48 + "-AbCdE01234", true, true},
		{name48 + "x-AbCdE01234", false, true}, // past MaxLength, which no memory's name reaches
		{"arn:aws:bedrock-agentcore:eu-west-1:123456789012:memory/" + agentCoreID, false, false},
		{"lambdaagent", false, false},
		{"lambdaagent-AbCdE0123", false, false},   // a suffix of 9
		{"lambdaagent_AbCdE01234", false, false},  // no hyphen before the suffix
		{"lambdaagent-AbCdE01234-", false, false}, // a hyphen at the end
		{"-AbCdE01234", false, false},
		{"1lambdaagent-AbCdE01234", false, false},
		{"lambda agent-AbCdE01234", false, false},
		{" " + agentCoreID, false, false},
	} {
		if got := id.allowed(t, tt.value); got != tt.ok {
			t.Errorf("AgentCoreMemoryId allows %q: %v, want %v", tt.value, got, tt.ok)
		}
		if tt.value == "" {
			continue // off: the functions check no id
		}
		if got := agentcore.CheckMemoryID(tt.value) == nil; got != tt.goOK {
			t.Errorf("agentcore.CheckMemoryID(%q) accepts: %v, want %v", tt.value, got, tt.goOK)
		}
	}
	for _, tt := range []struct {
		value    string
		ok, goOK bool // the template accepts it; agentcore.CheckNamespace does
	}{
		{"/users/{actorId}", true, true},
		{"/users/{actorId}/", true, true},
		{"/{actorId}", true, true},
		{"/actor/{actorId}/facts", true, true},
		{"/tenants/acme-eu/users/{actorId}", true, true},
		{"/" + strings.Repeat("n", 37) + "/{actorId}", true, true},  // 48 characters
		{"/" + strings.Repeat("n", 38) + "/{actorId}", false, true}, // past MaxLength
		{"", false, true},                                           // empty: the functions' default
		{"/users", false, false},
		{"/users/{actorid}", false, false},
		{"users/{actorId}", false, false},
		{"/users/{actorId}/{actorId}", false, false},
		{"/users/{actorId}/{sessionId}", false, false},
		{"/strategies/{memoryStrategyId}/actors/{actorId}", false, false},
		{"/users/{sessionId}", false, false},
		{"/users/ {actorId}", false, false},
		{"/users/{actorId}\n", false, false},
	} {
		if got := ns.allowed(t, tt.value); got != tt.ok {
			t.Errorf("AgentCoreNamespace allows %q: %v, want %v", tt.value, got, tt.ok)
		}
		if tt.value == "" {
			continue // ConfigFromEnv reads it as the default
		}
		if got := agentcore.CheckNamespace(tt.value) == nil; got != tt.goOK {
			t.Errorf("agentcore.CheckNamespace(%q) accepts: %v, want %v", tt.value, got, tt.goOK)
		}
	}

	// What the template accepts, the functions accept at init, built-in
	// memory off; or a deployment would succeed and every invocation fail.
	for _, v := range []string{agentCoreID, name48 + "-AbCdE01234"} {
		for _, n := range []string{"/users/{actorId}", "/actor/{actorId}/facts", "/" + strings.Repeat("n", 37) + "/{actorId}"} {
			r := newResolver(t, tp, map[string]string{"AgentCoreMemoryId": v, "AgentCoreNamespace": n})
			r.deployable(t)
			for _, fn := range append(slices.Sorted(maps.Keys(functions)), memoryFunction) {
				c, _, err := readConfig(r.environment(t, fn))
				if err != nil {
					t.Errorf("AgentCoreMemoryId=%q AgentCoreNamespace=%q: %s's configuration says: %v", v, n, fn, err)
					continue
				}
				if c.AgentCore.MemoryID != v || c.AgentCore.Namespace != n {
					t.Errorf("%s's configuration: AgentCore %+v, want %s under %s", fn, c.AgentCore, v, n)
				}
			}
		}
	}

	for _, g := range tp.Metadata.Interface.ParameterGroups {
		if slices.Contains(g.Parameters, "Memory") {
			for _, p := range []string{"AgentCoreMemoryId", "AgentCoreNamespace"} {
				if !slices.Contains(g.Parameters, p) {
					t.Errorf("%s is not in the parameter group of Memory: %v", p, g.Parameters)
				}
			}
		}
	}
}

// TestOneLongTermMemory: the built-in memory and AgentCore Memory are
// alternatives, which the functions' configuration refuses together: the
// template refuses them at deploy time, before it changes anything, with
// a message that names both parameters. Either alone, or neither, deploys.
func TestOneLongTermMemory(t *testing.T) {
	tp := loadTemplate(t)
	for _, tt := range []struct {
		params  map[string]string
		refused bool
	}{
		{params: map[string]string{}},
		{params: map[string]string{"Memory": "on"}},
		{params: map[string]string{"AgentCoreMemoryId": agentCoreID}},
		{params: map[string]string{"Memory": "off", "AgentCoreMemoryId": agentCoreID, "AgentCoreNamespace": "/actor/{actorId}"}},
		{params: map[string]string{"Memory": "on", "AgentCoreMemoryId": agentCoreID}, refused: true},
		{params: map[string]string{"Memory": "on", "AgentCoreMemoryId": agentCoreID, "MemoryForIamOwners": "true"}, refused: true},
	} {
		refused, err := newResolver(t, tp, tt.params).refusals()
		if err != nil {
			t.Fatal(err)
		}
		if got := len(refused) > 0; got != tt.refused {
			t.Errorf("%v: refused = %v %q, want %v", tt.params, got, refused, tt.refused)
		}
		for _, why := range refused {
			if !strings.HasPrefix(why, "OneLongTermMemory: ") || !strings.Contains(why, "Memory") || !strings.Contains(why, "AgentCoreMemoryId") {
				t.Errorf("%v: refused with %q; want OneLongTermMemory's, naming Memory and AgentCoreMemoryId", tt.params, why)
			}
		}
	}
}

// TestAgentCoreEnvironment: the chat, structured and stream functions, and
// the memory function, get AGENTCORE_MEMORY_ID and AGENTCORE_NAMESPACE as
// the parameters say, the same in all four; without AgentCoreMemoryId the
// id is empty, which turns AgentCore Memory off.
func TestAgentCoreEnvironment(t *testing.T) {
	tp := loadTemplate(t)
	for _, tt := range []struct {
		params    map[string]string
		id, ns    string
		hasMemory bool // the stack has the memory function
	}{
		{params: map[string]string{}, id: "", ns: "/users/{actorId}"},
		{params: map[string]string{"Memory": "on"}, id: "", ns: "/users/{actorId}", hasMemory: true},
		{params: map[string]string{"AgentCoreMemoryId": agentCoreID}, id: agentCoreID, ns: "/users/{actorId}", hasMemory: true},
		{params: map[string]string{"AgentCoreMemoryId": agentCoreID, "AgentCoreNamespace": "/actor/{actorId}/facts"}, id: agentCoreID, ns: "/actor/{actorId}/facts", hasMemory: true},
	} {
		r := newResolver(t, tp, tt.params)
		r.deployable(t)
		ids := slices.Sorted(maps.Keys(functions))
		if tt.hasMemory {
			ids = append(ids, memoryFunction)
		}
		for _, fn := range ids {
			env := r.environment(t, fn)
			if got := env["AGENTCORE_MEMORY_ID"]; got != tt.id {
				t.Errorf("%v: %s has AGENTCORE_MEMORY_ID=%q, want %q", tt.params, fn, got, tt.id)
			}
			if got := env["AGENTCORE_NAMESPACE"]; got != tt.ns {
				t.Errorf("%v: %s has AGENTCORE_NAMESPACE=%q, want %q", tt.params, fn, got, tt.ns)
			}
		}
	}
}

// grants returns the statements a SAM function's role holds as r deploys
// it: those of its inline policies and of the template's managed policies
// it attaches, with Ref and Fn::If resolved.
func (r *resolver) grants(t *testing.T, id string) []statement {
	t.Helper()
	policies, _, err := r.resolve(r.tp.functionProperties(id)["Policies"])
	if err != nil {
		t.Fatalf("%s: %v", id, err)
	}
	var out []statement
	for _, p := range policies.([]any) {
		doc := p
		if s, ok := p.(string); ok { // a Ref to a managed policy: "resource-ID"
			res := r.tp.Resources[strings.TrimPrefix(s, "resource-")]
			if res.Type != "AWS::IAM::ManagedPolicy" {
				t.Fatalf("%s: policy %s is not a managed policy of this template", id, s)
			}
			if doc, _, err = r.resolve(res.Properties["PolicyDocument"]); err != nil {
				t.Fatalf("%s: %s: %v", id, s, err)
			}
		}
		stmts, _ := get(doc, "Statement").([]any)
		for _, st := range stmts {
			resources := get(st, "Resource")
			if _, isList := resources.([]any); !isList {
				resources = []any{resources}
			}
			out = append(out, statement{Actions: strs(t, get(st, "Action")), Resources: resources.([]any), Condition: get(st, "Condition")})
		}
	}
	return out
}

// TestAgentCoreLeastPrivilege: AgentCore Memory's actions are granted only
// with AgentCoreMemoryId, and only on that one memory's ARN, as the
// deployment renders it: to the chat and stream functions what recall and
// the memory routes call, to the structured function recall alone, to the
// memory function what the mirror calls. The built-in memory's
// permissions are not there: the memory function may not write the table
// nor call a model. The chat and stream functions keep the writes on the
// table through which DELETE /memory marks a forget-all for the mirror.
func TestAgentCoreLeastPrivilege(t *testing.T) {
	tp := loadTemplate(t)
	routes := []string{
		"bedrock-agentcore:BatchDeleteMemoryRecords", "bedrock-agentcore:GetMemoryRecord",
		"bedrock-agentcore:ListMemoryRecords", "bedrock-agentcore:RetrieveMemoryRecords",
	}
	want := map[string][]string{
		"ChatFunction":       routes,
		"ChatStreamFunction": routes,
		"StructuredFunction": {"bedrock-agentcore:RetrieveMemoryRecords"},
		memoryFunction: {
			"bedrock-agentcore:BatchDeleteMemoryRecords", "bedrock-agentcore:CreateEvent", "bedrock-agentcore:DeleteEvent",
			"bedrock-agentcore:ListEvents", "bedrock-agentcore:ListMemoryRecords",
		},
	}
	for _, m := range memorySetups {
		t.Run(m.name, func(t *testing.T) {
			r := newResolver(t, tp, m.params)
			r.deployable(t)
			grants := map[string][]statement{}
			for id := range functions {
				grants[id] = r.grants(t, id)
			}
			if m.builtIn || m.agentCore {
				grants[memoryFunction] = memoryRoleStatements(t, tp, r)
			}
			arn := "arn:aws:bedrock-agentcore:" + pseudo["AWS::Region"] + ":" + pseudo["AWS::AccountId"] + ":memory/" + m.params["AgentCoreMemoryId"]
			for id, stmts := range grants {
				var got []string
				for _, s := range stmts {
					var agentCore []string
					for _, a := range s.Actions {
						if strings.HasPrefix(a, "bedrock-agentcore:") {
							agentCore = append(agentCore, a)
						}
						if m.agentCore && id == memoryFunction && (strings.HasPrefix(a, "bedrock:") || (strings.HasPrefix(a, "dynamodb:") && slices.Contains([]string{"dynamodb:PutItem", "dynamodb:DeleteItem", "dynamodb:UpdateItem", "dynamodb:ConditionCheckItem"}, a))) {
							t.Errorf("%s may %s, which only the built-in memory calls", id, a)
						}
					}
					if len(agentCore) == 0 {
						continue
					}
					if len(agentCore) != len(s.Actions) || s.Condition != nil || len(s.Resources) != 1 {
						t.Errorf("%s: statement %v on %v, condition %v: want AgentCore's actions alone, on one resource, unconditionally", id, s.Actions, s.Resources, s.Condition)
						continue
					}
					if got := r.subValue(t, s.Resources[0]); got != arn {
						t.Errorf("%s: %v on %s, want %s", id, agentCore, got, arn)
					}
					got = append(got, agentCore...)
				}
				slices.Sort(got)
				var wantActions []string
				if m.agentCore {
					wantActions = want[id]
				}
				if diff := cmp.Diff(wantActions, got); diff != "" {
					t.Errorf("%s: AgentCore actions (-want +got):\n%s", id, diff)
				}
			}
			// DELETE /memory's forget marker, a PutItem in the owner's
			// mem# partition, whichever memory: the chat and stream
			// functions may write the whole table.
			for _, id := range []string{"ChatFunction", "ChatStreamFunction"} {
				if !slices.ContainsFunc(grants[id], func(s statement) bool {
					return slices.Contains(s.Actions, "dynamodb:PutItem") && s.Condition == nil && cmp.Equal(s.Resources, []any{getAtt(tableID, "Arn")})
				}) {
					t.Errorf("%s may not PutItem on the whole table, where DELETE /memory marks a forget-all", id)
				}
			}
			out, ok := tp.Outputs["AgentCoreMemoryArn"]
			if !ok || out.Condition != "AgentCoreOn" {
				t.Fatalf("output AgentCoreMemoryArn: %+v, want one with Condition AgentCoreOn", out)
			}
			if on, err := r.condition(out.Condition); err != nil || on != m.agentCore {
				t.Errorf("output AgentCoreMemoryArn: output %v (%v), want %v", on, err, m.agentCore)
			} else if on {
				if got := r.subValue(t, out.Value); got != arn {
					t.Errorf("output AgentCoreMemoryArn = %s, want %s", got, arn)
				}
			}
		})
	}
}

// TestAgentCoreTransformed: after SAM's transform, with AgentCore Memory,
// the chat and stream functions' roles attach AgentCoreMemoryPolicy when
// AgentCoreOn holds, and the structured function's does not: SAM passes
// the template's Fn::If through to the roles it makes.
func TestAgentCoreTransformed(t *testing.T) {
	python := samPython(t)
	doc := loadGeneric(t)
	for _, id := range slices.Sorted(maps.Keys(functions)) {
		get(doc, "Resources", id, "Properties").(map[string]any)["CodeUri"] = "s3://bucket/key"
	}
	input, err := json.Marshal(doc)
	if err != nil {
		t.Fatal(err)
	}
	out := samTransform(t, python, input, map[string]string{"AgentCoreMemoryId": agentCoreID})
	attach := map[string]any{"Fn::If": []any{"AgentCoreOn", map[string]any{"Ref": "AgentCoreMemoryPolicy"}, map[string]any{"Ref": "AWS::NoValue"}}}
	for id := range functions {
		role := get(out, "Resources", id+"Role", "Properties")
		if role == nil {
			t.Fatalf("SAM made no role %sRole", id)
		}
		arns, _ := get(role, "ManagedPolicyArns").([]any)
		if got, want := slices.ContainsFunc(arns, func(a any) bool { return cmp.Equal(a, attach) }), id != "StructuredFunction"; got != want {
			t.Errorf("%sRole attaches AgentCoreMemoryPolicy when AgentCoreOn: %v, want %v (ManagedPolicyArns %v)", id, got, want, arns)
		}
	}
}
