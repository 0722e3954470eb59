package deploy

import (
	"bytes"
	"context"
	"fmt"
	"maps"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/lambda-agent/lambda-agent/internal/ddbhistory"
	"github.com/lambda-agent/lambda-agent/internal/httpapi"
	"github.com/lambda-agent/lambda-agent/internal/tools"
)

// envVars is the contract between the template and the functions'
// configuration: exactly these variables are set, on both functions.
var envVars = []string{
	"TABLE_NAME",
	"MODEL_ID",
	"ADDITIONAL_MODEL_ARNS",
	"SYSTEM_PROMPT",
	"MAX_TOKENS",
	"TEMPERATURE",
	"CONVERSATION_MANAGER",
	"WINDOW_SIZE",
	"SUMMARY_RATIO",
	"PRESERVE_RECENT_MESSAGES",
	"SUMMARIZER_MODEL_ID",
	"CONTEXT_WINDOW_TOKENS",
	"MAX_CYCLES",
	"TOOLS",
	"WINDOW_LOW_WATER",
	"TOOL_RESULT_TRIM_TURNS",
	"PROMPT_CACHE",
	"MODEL_PRICES",
	"TOOL_RESULT_TRIM_BYTES",
	"APPROVAL_TOOLS",
	"DIRECT_TOOLS",
	"INTERRUPT_TTL",
	"MCP_SERVERS",
	"LAMBDA_TOOLS",
	"AGENTS",
	"A2A_AGENTS",
	"SESSION_TTL_DAYS",
	"MAX_MESSAGE_BYTES",
	"MAX_TOOL_RESULT_BYTES",
	"MAX_TOOL_RESULT_MEDIA_BYTES",
	"GUARDRAIL_ID",
	"GUARDRAIL_VERSION",
	"GUARDRAIL_REDACTED_INPUT",
	// Long-term memory, which every turn recalls and the /memory routes
	// serve, built in or AgentCore Memory; what only extraction reads is
	// the memory function's alone (memoryEnvVars).
	"MEMORY",
	"MEMORY_IAM_OWNERS",
	"AGENTCORE_MEMORY_ID",
	"AGENTCORE_NAMESPACE",
	// The audit record of every model call (docs/audit.md).
	"AUDIT",
	"AUDIT_TTL_DAYS",
	"REQUIRE_AUTH",
	"ALLOWED_ORIGINS",
	// Metrics and traces: see observability_test.go.
	"METRICS_NAMESPACE",
	"OTEL_EXPORTER_OTLP_ENDPOINT",
	"OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT",
	// The SDK's, empty: declared for sam local's --env-vars (see
	// TestSamLocalInvoke).
	"AWS_ENDPOINT_URL_DYNAMODB",
}

// The functions: logical id and handler package.
var functions = map[string]string{
	"ChatFunction":       "functions/chat",
	"StructuredFunction": "functions/structured",
	"ChatStreamFunction": "functions/stream",
}

// timeouts are the functions' timeouts: HTTP API's integration timeout for
// the functions behind it, and longer for the stream, whose function URL has
// no such cap.
var timeouts = map[string]string{
	"ChatFunction":       "30",
	"StructuredFunction": "30",
	"ChatStreamFunction": "120",
}

const tableID = "SessionTable"

// jwt turns the JWT authorizer on, with an issuer that is no Cognito user
// pool: the REST API checks its tokens with the Lambda authorizer.
var jwt = map[string]string{"JwtIssuer": "https://issuer.example.com", "JwtAudience": "client-a,client-b"}

// cognitoJWT turns the JWT authorizer on with a Cognito user pool for the
// issuer: the REST API checks its tokens with a COGNITO_USER_POOLS
// authorizer.
var cognitoJWT = map[string]string{"JwtIssuer": "https://cognito-idp.eu-west-1.amazonaws.com/eu-west-1_AbCdEf123", "JwtAudience": "1example23456789,2example23456789"}

// with returns the union of parameter overrides.
func with(sets ...map[string]string) map[string]string {
	out := map[string]string{}
	for _, s := range sets {
		maps.Copy(out, s)
	}
	return out
}

// authModes are the ways the HTTP API can be deployed: its routes'
// AuthorizationType, and the REQUIRE_AUTH the functions get. Open mode
// (NONE) must be asked for by name, with AllowAnonymous.
var authModes = []struct {
	name        string
	params      map[string]string
	authType    string
	requireAuth string
}{
	{name: "defaults: IAM", authType: "AWS_IAM", requireAuth: "true"},
	{name: "IAM ignores RequireAuth", params: map[string]string{"RequireAuth": "false", "AllowAnonymous": "false"}, authType: "AWS_IAM", requireAuth: "true"},
	{name: "IAM, RequireAuth", params: map[string]string{"RequireAuth": "true"}, authType: "AWS_IAM", requireAuth: "true"},
	{name: "open", params: map[string]string{"AllowAnonymous": "true"}, authType: "NONE", requireAuth: "false"},
	{name: "open, RequireAuth", params: map[string]string{"AllowAnonymous": "true", "RequireAuth": "true"}, authType: "NONE", requireAuth: "true"},
	{name: "open, public stream", params: map[string]string{"AllowAnonymous": "true", "StreamAuthType": "NONE"}, authType: "NONE", requireAuth: "false"},
	{name: "JWT", params: jwt, authType: "JWT", requireAuth: "true"},
	{name: "JWT ignores RequireAuth", params: with(jwt, map[string]string{"RequireAuth": "false"}), authType: "JWT", requireAuth: "true"},
	{name: "JWT of a Cognito user pool", params: cognitoJWT, authType: "JWT", requireAuth: "true"},
}

func TestTableMatchesStore(t *testing.T) {
	tp := loadTemplate(t)
	if got := tp.ofType("AWS::DynamoDB::Table"); !slices.Equal(got, []string{tableID}) {
		t.Fatalf("tables = %v, want [%s]", got, tableID)
	}
	table := tp.Resources[tableID]
	props := table.Properties
	want := ddbhistory.TableDefinition("x")

	keySchema := func(v any) []types.KeySchemaElement {
		var out []types.KeySchemaElement
		for _, e := range branches(v) {
			out = append(out, types.KeySchemaElement{
				AttributeName: aws.String(get(e, "AttributeName").(string)),
				KeyType:       types.KeyType(get(e, "KeyType").(string)),
			})
		}
		return out
	}
	gotKeys := keySchema(props["KeySchema"])
	var gotAttrs []types.AttributeDefinition
	for _, e := range branches(props["AttributeDefinitions"]) {
		gotAttrs = append(gotAttrs, types.AttributeDefinition{
			AttributeName: aws.String(get(e, "AttributeName").(string)),
			AttributeType: types.ScalarAttributeType(get(e, "AttributeType").(string)),
		})
	}
	var gotIndexes []types.GlobalSecondaryIndex
	for _, e := range branches(props["GlobalSecondaryIndexes"]) {
		var nonKey []string
		for _, a := range branches(get(e, "Projection", "NonKeyAttributes")) {
			nonKey = append(nonKey, a.(string))
		}
		gotIndexes = append(gotIndexes, types.GlobalSecondaryIndex{
			IndexName: aws.String(get(e, "IndexName").(string)),
			KeySchema: keySchema(get(e, "KeySchema")),
			Projection: &types.Projection{
				ProjectionType:   types.ProjectionType(get(e, "Projection", "ProjectionType").(string)),
				NonKeyAttributes: nonKey,
			},
		})
	}
	ignore := cmpopts.IgnoreUnexported(types.KeySchemaElement{}, types.AttributeDefinition{}, types.GlobalSecondaryIndex{}, types.Projection{})
	if diff := cmp.Diff(want.GlobalSecondaryIndexes, gotIndexes, ignore); diff != "" {
		t.Errorf("GlobalSecondaryIndexes differ from ddbhistory.TableDefinition (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(want.KeySchema, gotKeys, ignore); diff != "" {
		t.Errorf("KeySchema differs from ddbhistory.TableDefinition (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(want.AttributeDefinitions, gotAttrs, ignore); diff != "" {
		t.Errorf("AttributeDefinitions differ from ddbhistory.TableDefinition (-want +got):\n%s", diff)
	}
	if got := props["BillingMode"]; got != string(want.BillingMode) {
		t.Errorf("BillingMode = %v, want %s", got, want.BillingMode)
	}

	gotTTL := map[string]any{
		"AttributeName": get(props, "TimeToLiveSpecification", "AttributeName"),
		"Enabled":       get(props, "TimeToLiveSpecification", "Enabled"),
	}
	wantTTL := map[string]any{"AttributeName": ddbhistory.TTLAttribute, "Enabled": "true"}
	if diff := cmp.Diff(wantTTL, gotTTL); diff != "" {
		t.Errorf("TimeToLiveSpecification (-want +got):\n%s", diff)
	}
	if got := get(props, "PointInTimeRecoverySpecification", "PointInTimeRecoveryEnabled"); got != "true" {
		t.Errorf("PointInTimeRecoveryEnabled = %v, want true", got)
	}
	if table.DeletionPolicy != "Retain" || table.UpdateReplacePolicy != "Retain" {
		t.Errorf("DeletionPolicy, UpdateReplacePolicy = %q, %q; want Retain, Retain: sessions must outlive the stack",
			table.DeletionPolicy, table.UpdateReplacePolicy)
	}
	if name, ok := props["TableName"]; ok {
		t.Errorf("TableName = %v; leave it to CloudFormation so that stacks and replacements don't collide", name)
	}
}

func TestEnvironment(t *testing.T) {
	tp := loadTemplate(t)
	for id := range functions {
		t.Run(id, func(t *testing.T) {
			want := slices.Clone(envVars)
			if id == "ChatStreamFunction" { // it alone serves A2A
				want = append(want, "A2A_NAME", "A2A_DESCRIPTION", "A2A_PUBLIC_URL")
			}
			slices.Sort(want)
			vars, _ := get(tp.functionProperties(id), "Environment", "Variables").(map[string]any)
			var got []string
			for k := range vars {
				got = append(got, k)
			}
			slices.Sort(got)
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("environment variables (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(ref(tableID), vars["TABLE_NAME"]); diff != "" {
				t.Errorf("TABLE_NAME (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(ref("ModelId"), vars["MODEL_ID"]); diff != "" {
				t.Errorf("MODEL_ID (-want +got):\n%s", diff)
			}
			if v := vars["AWS_ENDPOINT_URL_DYNAMODB"]; v != "" {
				t.Errorf("AWS_ENDPOINT_URL_DYNAMODB = %v; deployed, it must be empty, which leaves DynamoDB's own endpoint", v)
			}
		})
	}
	// A JWT authorizer or IAM auth means every request names its caller, so
	// the functions insist on one; RequireAuth decides only in open mode.
	for _, m := range authModes {
		t.Run("REQUIRE_AUTH/"+m.name, func(t *testing.T) {
			r := newResolver(t, tp, m.params)
			r.deployable(t)
			for id := range functions {
				if got := r.environment(t, id)["REQUIRE_AUTH"]; got != m.requireAuth {
					t.Errorf("%s: REQUIRE_AUTH = %q, want %q", id, got, m.requireAuth)
				}
			}
		})
	}
}

func TestFunctions(t *testing.T) {
	tp := loadTemplate(t)
	if got, want := tp.ofType("AWS::Serverless::Function"), slices.Sorted(maps.Keys(functions)); !slices.Equal(got, want) {
		t.Fatalf("functions = %v, want %v", got, want)
	}
	for id, handler := range functions {
		t.Run(id, func(t *testing.T) {
			props := tp.functionProperties(id)
			got := map[string]any{
				"Runtime":       props["Runtime"],
				"Architectures": props["Architectures"],
				"CodeUri":       props["CodeUri"],
				"Handler":       props["Handler"],
				"Timeout":       props["Timeout"],
				"LogFormat":     get(props, "LoggingConfig", "LogFormat"),
				"BuildMethod":   get(tp.Resources[id].Metadata, "BuildMethod"),
			}
			want := map[string]any{
				"Runtime":       "provided.al2023",
				"Architectures": []any{"arm64"},
				"CodeUri":       ".",
				"Handler":       handler,
				"Timeout":       timeouts[id],
				"LogFormat":     "JSON",
				"BuildMethod":   "go1.x",
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("function settings (-want +got):\n%s", diff)
			}
			// An idempotency key's hold must outlive any invocation holding it.
			if secs, err := strconv.Atoi(timeouts[id]); err != nil || time.Duration(secs)*time.Second >= ddbhistory.DefaultHoldTTL {
				t.Errorf("timeout %s s is not shorter than ddbhistory.DefaultHoldTTL (%s)", timeouts[id], ddbhistory.DefaultHoldTTL)
			}
			// The HTTP API's routes are raw ApiGatewayV2 resources, so that
			// the authorizer can be optional; the REST API's one method is
			// the stream function's event (see TestStreamRestApi).
			wantEvents := 0
			if id == "ChatStreamFunction" {
				wantEvents = 3 // POST /agui, and A2A's POST /a2a and card
			}
			if ev, _ := props["Events"].(map[string]any); len(ev) != wantEvents {
				t.Errorf("Events = %v; want %d", ev, wantEvents)
			}
		})
	}
}

// TestModuleRootHasNoGoFiles guards the build: with CodeUri "." sam build
// first runs go build at the module root and turns to the Handler directory
// only when that finds no Go files there.
func TestModuleRootHasNoGoFiles(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("..", "..", "*.go"))
	if err != nil {
		t.Fatal(err)
	}
	if len(files) > 0 {
		t.Errorf("Go files at the module root %v would stop sam build from building functions/<name>", files)
	}
}

// statement is one IAM policy statement a function may get.
type statement struct {
	Actions   []string
	Resources []any
	Condition any
}

// statements returns every statement a function's role may hold, whatever
// the conditions: both branches of each Fn::If.
func (tp *tmpl) statements(t *testing.T, id string) []statement {
	t.Helper()
	var out []statement
	for _, p := range branches(tp.functionProperties(id)["Policies"]) {
		doc := p
		if name := refName(p); name != "" {
			r, ok := tp.Resources[name]
			if !ok || r.Type != "AWS::IAM::ManagedPolicy" {
				t.Errorf("%s: policy %v is not a managed policy of this template", id, p)
				continue
			}
			doc = r.Properties["PolicyDocument"]
		}
		stmts := get(doc, "Statement")
		if stmts == nil {
			// A SAM policy template such as DynamoDBCrudPolicy grants more
			// than the store uses; only explicit statements are allowed.
			t.Errorf("%s: policy %v is not an explicit policy document", id, p)
			continue
		}
		for _, s := range branches(stmts) {
			m, _ := s.(map[string]any)
			for _, k := range []string{"NotAction", "NotResource", "Principal"} {
				if _, ok := m[k]; ok {
					t.Errorf("%s: statement %v has %s", id, get(m, "Sid"), k)
				}
			}
			if m["Effect"] != "Allow" {
				t.Errorf("%s: statement %v: Effect = %v, want Allow", id, get(m, "Sid"), m["Effect"])
			}
			out = append(out, statement{
				Actions:   strs(t, m["Action"]),
				Resources: branches(m["Resource"]),
				Condition: m["Condition"],
			})
		}
	}
	return out
}

func TestLeastPrivilege(t *testing.T) {
	tp := loadTemplate(t)
	// The store's calls on the table, without conditions. IAM checks each
	// action of a TransactWriteItems as its own (a Put as PutItem, an Update
	// as UpdateItem, a Delete as DeleteItem, a ConditionCheck as
	// ConditionCheckItem), so that action is never granted itself.
	chat := []string{
		"dynamodb:ConditionCheckItem", "dynamodb:DeleteItem", "dynamodb:GetItem",
		"dynamodb:PutItem", "dynamodb:Query", "dynamodb:UpdateItem",
	}
	wantDynamoDB := map[string][]string{
		// Load, hold, commit, release, and delete sessions.
		"ChatFunction": chat,
		// Load, hold and commit; it never deletes a session.
		"StructuredFunction": {
			"dynamodb:ConditionCheckItem", "dynamodb:GetItem",
			"dynamodb:PutItem", "dynamodb:Query", "dynamodb:UpdateItem",
		},
		// The chat function's: its URL serves the session routes too.
		"ChatStreamFunction": chat,
	}
	// The memory store's calls, which every function makes on the table
	// when memory is on (memory items share it, in mem# partitions): the
	// functions behind the /memory routes list (Query), forget (PutItem,
	// then Query and DeleteItem) and delete records (DeleteItem); a turn's
	// recall reads (Query).
	memoryRoutes := []string{"dynamodb:DeleteItem", "dynamodb:GetItem", "dynamodb:PutItem", "dynamodb:Query"}
	wantMemory := map[string][]string{
		"ChatFunction":       memoryRoutes,
		"ChatStreamFunction": memoryRoutes,
		"StructuredFunction": {"dynamodb:Query"},
	}
	// Actions granted on the table only for idempotency holds, whose
	// partition keys begin with i#: the structured function deletes those
	// when it releases a hold, and nothing else.
	holdsOnly := map[string]any{"ForAllValues:StringLike": map[string]any{"dynamodb:LeadingKeys": []any{"i#*"}}}
	wantHoldsOnly := map[string][]string{"StructuredFunction": {"dynamodb:DeleteItem"}}
	// The functions that list sessions, and the owner index is all they may
	// query besides the table.
	wantIndex := map[string]bool{"ChatFunction": true, "ChatStreamFunction": true}
	index := map[string]any{"Fn::Sub": "${" + tableID + ".Arn}/index/" + ddbhistory.OwnerIndex}
	wantBedrock := []string{"bedrock:ApplyGuardrail", "bedrock:InvokeModel", "bedrock:InvokeModelWithResponseStream"}
	const arn = "arn:${AWS::Partition}:bedrock:"
	wantInvokeResources := []string{
		arn + "${AWS::Region}::foundation-model/${ModelId}",
		arn + "${AWS::Region}:${AWS::AccountId}:inference-profile/${ModelId}",
		arn + "*::foundation-model/${FoundationModelId}",
		arn + "${AWS::Region}::foundation-model/${SummarizerModelId}",
		arn + "${AWS::Region}:${AWS::AccountId}:inference-profile/${SummarizerModelId}",
		arn + "*::foundation-model/${SummarizerFoundationModelId}",
	}
	wantGuardrail := []string{arn + "${AWS::Region}:${AWS::AccountId}:guardrail/${GuardrailId}"}
	// The functions that run tools may invoke the Lambda tools' functions
	// and read the MCP servers' secrets: exactly those the parameters list.
	// They may read the agents of an Agents path too (TestAgentsPath).
	agentsPath := map[string]any{"Fn::Sub": []any{
		"arn:${AWS::Partition}:ssm:${AWS::Region}:${AWS::AccountId}:parameter/${Path}",
		map[string]any{"Path": map[string]any{"Fn::Select": []any{"1", map[string]any{"Fn::Split": []any{"ssm:/", map[string]any{"Fn::Join": []any{"", []any{ref("Agents"), "ssm:/"}}}}}}}},
	}}
	// The system prompt's parameter, after ssm:/, which every function
	// reads.
	promptName := map[string]any{"Fn::Sub": []any{
		"arn:${AWS::Partition}:ssm:${AWS::Region}:${AWS::AccountId}:parameter/${Name}",
		map[string]any{"Name": map[string]any{"Fn::Select": []any{"1", map[string]any{"Fn::Split": []any{"ssm:/", map[string]any{"Fn::Join": []any{"", []any{ref("SystemPrompt"), "ssm:/"}}}}}}}},
	}}
	// The path of an A2aAgents that names one, as Agents'.
	a2aPath := map[string]any{"Fn::Sub": []any{
		"arn:${AWS::Partition}:ssm:${AWS::Region}:${AWS::AccountId}:parameter/${Path}",
		map[string]any{"Path": map[string]any{"Fn::Select": []any{"1", map[string]any{"Fn::Split": []any{"ssm:/", map[string]any{"Fn::Join": []any{"", []any{ref("A2aAgents"), "ssm:/"}}}}}}}},
	}}
	// The functions that run tools may call the Lambda tools, and the
	// remote A2A agents' functions through their URLs, read the MCP
	// servers' and A2A agents' secrets and the paths of AGENTS and
	// A2A_AGENTS; every function, the system prompt.
	runsTools := map[string][]any{
		"lambda:InvokeFunction":    {ref("LambdaToolArns"), ref("A2aAgentFunctionArns")},
		"lambda:InvokeFunctionUrl": {ref("A2aAgentFunctionArns")},
		"ssm:GetParameter":         {ref("McpSecretParameterArns"), ref("A2aSecretParameterArns"), promptName},
		"ssm:GetParametersByPath":  {agentsPath, a2aPath},
	}
	wantRemote := map[string]map[string][]any{
		"ChatFunction":       runsTools,
		"ChatStreamFunction": runsTools,
		"StructuredFunction": {"ssm:GetParameter": {promptName}},
	}

	// AgentCore Memory's calls, on the one memory AgentCoreMemoryId names
	// (TestAgentCoreLeastPrivilege: with it alone): recall, and for the
	// functions behind the memory routes, listing and deleting records.
	memoryRoutesAgentCore := []string{
		"bedrock-agentcore:BatchDeleteMemoryRecords", "bedrock-agentcore:GetMemoryRecord",
		"bedrock-agentcore:ListMemoryRecords", "bedrock-agentcore:RetrieveMemoryRecords",
	}
	wantAgentCore := map[string][]string{
		"ChatFunction":       memoryRoutesAgentCore,
		"ChatStreamFunction": memoryRoutesAgentCore,
		"StructuredFunction": {"bedrock-agentcore:RetrieveMemoryRecords"},
	}

	// The other models (AdditionalModelArns), exactly as listed, and only
	// for invoking them.
	additionalModels := []any{map[string]any{"Fn::Split": []any{",", ref("AdditionalModelArns")}}}
	wantInvoke := []string{"bedrock:InvokeModel", "bedrock:InvokeModelWithResponseStream"}

	for id := range functions {
		t.Run(id, func(t *testing.T) {
			var dynamo, dynamoHolds, bedrock, invokeResources, guardrailResources, agentCore []string
			queriesIndex, additional := false, false
			remote := map[string][]any{}
			for _, s := range tp.statements(t, id) {
				service := ""
				for _, a := range s.Actions {
					if strings.Contains(a, "*") {
						t.Errorf("action %q has a wildcard", a)
					}
					p, _, _ := strings.Cut(a, ":")
					if service != "" && p != service {
						t.Errorf("statement mixes %s and %s actions: %v", service, p, s.Actions)
					}
					service = p
				}
				for _, r := range s.Resources {
					if r == "*" {
						t.Errorf("statement with %v has Resource *", s.Actions)
					}
				}
				switch service {
				case "dynamodb":
					if cmp.Equal([]any{index}, s.Resources) {
						queriesIndex = true
						if !slices.Equal(s.Actions, []string{"dynamodb:Query"}) || s.Condition != nil {
							t.Errorf("actions on the owner index: %v, condition %v; want dynamodb:Query only, unconditionally", s.Actions, s.Condition)
						}
						continue
					}
					if diff := cmp.Diff([]any{getAtt(tableID, "Arn")}, s.Resources); diff != "" {
						t.Errorf("DynamoDB resources (-want +got):\n%s", diff)
					}
					switch {
					case s.Condition == nil:
						dynamo = append(dynamo, s.Actions...)
					case cmp.Equal(holdsOnly, s.Condition):
						dynamoHolds = append(dynamoHolds, s.Actions...)
					default:
						t.Errorf("DynamoDB actions %v: unexpected condition %v", s.Actions, s.Condition)
					}
				case "bedrock":
					bedrock = append(bedrock, s.Actions...)
					if cmp.Equal(additionalModels, s.Resources) {
						additional = true
						if !slices.Equal(s.Actions, wantInvoke) || s.Condition != nil {
							t.Errorf("actions on AdditionalModelArns: %v, condition %v; want %v, unconditionally", s.Actions, s.Condition, wantInvoke)
						}
						continue
					}
					var subs []string
					for _, r := range s.Resources {
						if sub(r) == "" {
							t.Errorf("Bedrock resource %v is not an Fn::Sub ARN", r)
						}
						subs = append(subs, sub(r))
					}
					if slices.Contains(s.Actions, "bedrock:ApplyGuardrail") {
						guardrailResources = append(guardrailResources, subs...)
						continue
					}
					invokeResources = append(invokeResources, subs...)
					// A foundation model in every Region is granted only
					// through the stack's own inference profile.
					for _, r := range subs {
						if strings.Contains(r, ":bedrock:*:") && get(s.Condition, "ArnLike", "bedrock:InferenceProfileArn") == nil {
							t.Errorf("%s is granted without the bedrock:InferenceProfileArn condition", r)
						}
					}
				case "bedrock-agentcore":
					agentCore = append(agentCore, s.Actions...)
					if diff := cmp.Diff([]any{map[string]any{"Fn::Sub": agentCoreMemoryArn}}, s.Resources); diff != "" || s.Condition != nil {
						t.Errorf("AgentCore actions %v on other than the one memory, or with a condition %v (-want +got):\n%s", s.Actions, s.Condition, diff)
					}
				case "lambda", "ssm":
					if len(s.Actions) != 1 || len(s.Resources) != 1 || s.Condition != nil {
						t.Errorf("remote tools' grant %v on %v, condition %v; want one action on one list", s.Actions, s.Resources, s.Condition)
						continue
					}
					remote[s.Actions[0]] = append(remote[s.Actions[0]], s.Resources[0])
				default:
					t.Errorf("unexpected actions %v", s.Actions)
				}
			}
			if diff := cmp.Diff(wantRemote[id], remote, cmpopts.EquateEmpty(), cmpopts.SortSlices(func(a, b any) bool { return fmt.Sprint(a) < fmt.Sprint(b) })); diff != "" {
				t.Errorf("remote tools' grants (-want +got):\n%s", diff)
			}
			if !additional {
				t.Error("no grant on AdditionalModelArns")
			}
			if queriesIndex != wantIndex[id] {
				t.Errorf("may query the owner index: %v, want %v", queriesIndex, wantIndex[id])
			}
			sortCompact := func(s []string) []string { slices.Sort(s); return slices.Compact(s) }
			if diff := cmp.Diff(wantDynamoDB[id], sortCompact(dynamo)); diff != "" {
				t.Errorf("DynamoDB actions (-want +got):\n%s", diff)
			}
			for _, a := range wantMemory[id] {
				if !slices.Contains(dynamo, a) {
					t.Errorf("%s is not granted on the whole table, which memory items share", a)
				}
			}
			if diff := cmp.Diff(wantHoldsOnly[id], sortCompact(dynamoHolds)); diff != "" {
				t.Errorf("DynamoDB actions on idempotency holds only, with dynamodb:LeadingKeys i#* (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(wantBedrock, sortCompact(bedrock)); diff != "" {
				t.Errorf("Bedrock actions (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(sortCompact(wantInvokeResources), sortCompact(invokeResources)); diff != "" {
				t.Errorf("Bedrock model resources (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(wantGuardrail, sortCompact(guardrailResources)); diff != "" {
				t.Errorf("guardrail resources (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(wantAgentCore[id], sortCompact(agentCore)); diff != "" {
				t.Errorf("AgentCore Memory actions (-want +got):\n%s", diff)
			}
		})
	}
}

// TestAuthorizerLeastPrivilege: the REST API's Lambda authorizer calls
// nothing of AWS's, so its role, which only Lambda may assume, may write
// its logs to its own log group and nothing else; no managed policy, not
// even Lambda's basic execution role, whose grant covers every log group.
func TestAuthorizerLeastPrivilege(t *testing.T) {
	tp := loadTemplate(t)
	fn, role := tp.Resources["AuthorizerFunction"], tp.Resources["AuthorizerRole"]
	if diff := cmp.Diff(getAtt("AuthorizerRole", "Arn"), fn.Properties["Role"]); diff != "" {
		t.Errorf("AuthorizerFunction's Role (-want +got):\n%s", diff)
	}
	if role.Type != "AWS::IAM::Role" {
		t.Fatalf("AuthorizerRole: Type %q", role.Type)
	}
	wantTrust := map[string]any{"Version": "2012-10-17", "Statement": []any{map[string]any{
		"Effect": "Allow", "Principal": map[string]any{"Service": "lambda.amazonaws.com"}, "Action": "sts:AssumeRole",
	}}}
	if diff := cmp.Diff(wantTrust, role.Properties["AssumeRolePolicyDocument"]); diff != "" {
		t.Errorf("trust policy (-want +got):\n%s", diff)
	}
	for _, k := range []string{"ManagedPolicyArns", "PermissionsBoundary"} {
		if v, ok := role.Properties[k]; ok {
			t.Errorf("AuthorizerRole has %s: %v", k, v)
		}
	}
	var got []statement
	for _, p := range branches(role.Properties["Policies"]) {
		for _, st := range branches(get(p, "PolicyDocument", "Statement")) {
			m, _ := st.(map[string]any)
			if m["Effect"] != "Allow" || m["NotAction"] != nil || m["NotResource"] != nil {
				t.Errorf("statement %v", m)
			}
			got = append(got, statement{Actions: strs(t, m["Action"]), Resources: branches(m["Resource"]), Condition: m["Condition"]})
		}
	}
	want := []statement{{Actions: []string{"logs:CreateLogStream", "logs:PutLogEvents"}, Resources: []any{getAtt("AuthorizerLogGroup", "Arn")}}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("the authorizer's grants (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(ref("AuthorizerLogGroup"), get(fn.Properties, "LoggingConfig", "LogGroup")); diff != "" {
		t.Errorf("the authorizer logs elsewhere than the log group its role may write to (-want +got):\n%s", diff)
	}
}

func TestRoutes(t *testing.T) {
	tp := loadTemplate(t)
	// The handlers dispatch on these route keys.
	want := map[string]string{
		httpapi.RouteChat:          "ChatFunction",
		httpapi.RouteListSessions:  "ChatFunction",
		httpapi.RouteGetSession:    "ChatFunction",
		httpapi.RouteDeleteSession: "ChatFunction",
		httpapi.RouteCallTool:      "ChatFunction",
		httpapi.RouteRewind:        "ChatFunction",
		httpapi.RouteExportSession: "ChatFunction",
		httpapi.RouteImportSession: "ChatFunction",
		httpapi.RouteImportPage:    "ChatFunction",
		httpapi.RouteListMemory:    "ChatFunction",
		httpapi.RouteExportMemory:  "ChatFunction",
		httpapi.RouteDeleteRecord:  "ChatFunction",
		httpapi.RouteForget:        "ChatFunction",
		httpapi.RouteAudit:         "ChatFunction",
		httpapi.RouteAuditRecord:   "ChatFunction",
		httpapi.RouteStructured:    "StructuredFunction",
	}
	got := map[string]string{}
	wantPermissions := map[string]string{} // SourceArn -> function
	for _, id := range tp.ofType("AWS::ApiGatewayV2::Route") {
		props := tp.Resources[id].Properties
		key, _ := props["RouteKey"].(string)
		if refName(props["ApiId"]) != "Api" {
			t.Errorf("%s: ApiId = %v, want Ref Api", id, props["ApiId"])
		}
		integration, ok := strings.CutPrefix(sub(props["Target"]), "integrations/${")
		integration, ok2 := strings.CutSuffix(integration, "}")
		if !ok || !ok2 || tp.Resources[integration].Type != "AWS::ApiGatewayV2::Integration" {
			t.Errorf("%s: Target = %v, want integrations/${Integration}", id, props["Target"])
			continue
		}
		ip := tp.Resources[integration].Properties
		for k, v := range map[string]string{"IntegrationType": "AWS_PROXY", "PayloadFormatVersion": "2.0"} {
			if ip[k] != v {
				t.Errorf("%s: %s = %v, want %s", integration, k, ip[k], v)
			}
		}
		fn := ""
		if a, ok := get(ip, "IntegrationUri", "Fn::GetAtt").([]any); ok && len(a) == 2 && a[1] == "Arn" {
			fn, _ = a[0].(string)
		}
		got[key] = fn

		method, path, _ := strings.Cut(key, " ")
		path = regexp.MustCompile(`\{[^}]+\}`).ReplaceAllString(path, "*")
		wantPermissions["arn:${AWS::Partition}:execute-api:${AWS::Region}:${AWS::AccountId}:${Api}/*/"+method+path] = fn
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("routes -> functions (-want +got):\n%s", diff)
	}

	// Each route may invoke its function, and nothing else may.
	gotPermissions := map[string]string{}
	for _, id := range tp.ofType("AWS::Lambda::Permission") {
		props := tp.Resources[id].Properties
		switch id {
		case "ChatStreamPublicInvoke":
			continue // the function URL's; see TestStreamFunctionURL
		case "AuthorizerInvokePermission":
			continue // the REST API's authorizer's; see TestStreamRestApiAuthorizers
		}
		if props["Principal"] != "apigateway.amazonaws.com" || props["Action"] != "lambda:InvokeFunction" {
			t.Errorf("%s: Principal, Action = %v, %v", id, props["Principal"], props["Action"])
		}
		gotPermissions[sub(props["SourceArn"])] = refName(props["FunctionName"])
	}
	if diff := cmp.Diff(wantPermissions, gotPermissions); diff != "" {
		t.Errorf("Lambda permissions, SourceArn -> function (-want +got):\n%s", diff)
	}

	auth := tp.Resources["JwtAuthorizer"]
	if auth.Type != "AWS::ApiGatewayV2::Authorizer" || auth.Condition != "UseJwt" {
		t.Fatalf("JwtAuthorizer: Type, Condition = %q, %q; want AWS::ApiGatewayV2::Authorizer, UseJwt", auth.Type, auth.Condition)
	}
	if auth.Properties["AuthorizerType"] != "JWT" {
		t.Errorf("JwtAuthorizer: AuthorizerType = %v, want JWT", auth.Properties["AuthorizerType"])
	}
	if diff := cmp.Diff([]any{"$request.header.Authorization"}, auth.Properties["IdentitySource"]); diff != "" {
		t.Errorf("JwtAuthorizer: IdentitySource (-want +got):\n%s", diff)
	}
	wantCond := map[string]any{"Fn::And": []any{
		map[string]any{"Fn::Not": []any{map[string]any{"Fn::Equals": []any{ref("JwtIssuer"), ""}}}},
		map[string]any{"Fn::Not": []any{map[string]any{"Fn::Equals": []any{ref("JwtAudience"), ""}}}},
	}}
	if diff := cmp.Diff(wantCond, tp.Conditions["UseJwt"]); diff != "" {
		t.Errorf("condition UseJwt: the authorizer must be on exactly when both JwtIssuer and JwtAudience are set (-want +got):\n%s", diff)
	}

	// Every route's auth, as deployed in each mode.
	for _, m := range authModes {
		t.Run(m.name, func(t *testing.T) {
			r := newResolver(t, tp, m.params)
			r.deployable(t)
			for _, id := range tp.ofType("AWS::ApiGatewayV2::Route") {
				props, _, err := r.resolve(tp.Resources[id].Properties)
				if err != nil {
					t.Fatalf("%s: %v", id, err)
				}
				got := map[string]any{
					"AuthorizationType": get(props, "AuthorizationType"),
					"AuthorizerId":      get(props, "AuthorizerId"),
				}
				want := map[string]any{"AuthorizationType": m.authType, "AuthorizerId": nil}
				if m.authType == "JWT" {
					want["AuthorizerId"] = "resource-JwtAuthorizer"
				}
				if diff := cmp.Diff(want, got); diff != "" {
					t.Errorf("%s (-want +got):\n%s", id, diff)
				}
			}
		})
	}
}

// TestApiInvokeArnCoversEveryRoute holds the output that docs/deploy.md tells
// IAM callers to grant execute-api:Invoke on: it must cover every route of
// the API, on its stage, and no other API.
func TestApiInvokeArnCoversEveryRoute(t *testing.T) {
	tp := loadTemplate(t)
	arn := sub(tp.Outputs["ApiInvokeArn"].Value)
	prefix := "arn:${AWS::Partition}:execute-api:${AWS::Region}:${AWS::AccountId}:${Api}/"
	if !strings.HasPrefix(arn, prefix) {
		t.Fatalf("ApiInvokeArn = %q, want an execute-api ARN of this stack's Api", arn)
	}
	// IAM matches * against any characters, / included.
	pattern := "^" + strings.ReplaceAll(regexp.QuoteMeta(arn), `\*`, ".*") + "$"
	routes := tp.ofType("AWS::ApiGatewayV2::Route")
	if len(routes) == 0 {
		t.Fatal("no routes")
	}
	for _, id := range routes {
		method, path, _ := strings.Cut(tp.Resources[id].Properties["RouteKey"].(string), " ")
		// The request's resource: stage, method, path with its parameters filled.
		resource := prefix + "$default/" + method + regexp.MustCompile(`\{[^}]+\}`).ReplaceAllString(path, "s-1")
		if !regexp.MustCompile(pattern).MatchString(resource) {
			t.Errorf("ApiInvokeArn %q does not cover route %s (%s)", arn, id, resource)
		}
	}
}

// TestPrivateUnlessAllowAnonymous deploys every combination of the auth
// parameters that the Rules accept, and checks that the HTTP API and the
// stream URL are open only when AllowAnonymous says so, and that the
// functions then follow RequireAuth; and that the Rules refuse exactly the
// contradictory or half-set combinations.
func TestPrivateUnlessAllowAnonymous(t *testing.T) {
	tp := loadTemplate(t)
	domains := []struct {
		name   string
		values []string
	}{
		{"JwtIssuer", []string{"", jwt["JwtIssuer"], cognitoJWT["JwtIssuer"]}},
		{"JwtAudience", []string{"", jwt["JwtAudience"]}},
		{"AllowAnonymous", []string{"true", "false"}},
		{"StreamAuthType", []string{"AWS_IAM", "NONE"}},
		{"RequireAuth", []string{"true", "false"}},
	}
	combos := []map[string]string{{}}
	for _, d := range domains {
		var next []map[string]string
		for _, c := range combos {
			for _, v := range d.values {
				next = append(next, with(c, map[string]string{d.name: v}))
			}
		}
		combos = next
	}
	deployed := 0
	for _, p := range combos {
		name := fmt.Sprintf("issuer=%t,audience=%t,anonymous=%s,stream=%s,require=%s",
			p["JwtIssuer"] != "", p["JwtAudience"] != "", p["AllowAnonymous"], p["StreamAuthType"], p["RequireAuth"])
		t.Run(name, func(t *testing.T) {
			r := newResolver(t, tp, p)
			refused, err := r.refusals()
			if err != nil {
				t.Fatal(err)
			}
			useJwt := p["JwtIssuer"] != "" && p["JwtAudience"] != ""
			halfJwt := (p["JwtIssuer"] != "") != (p["JwtAudience"] != "")
			anonymous := p["AllowAnonymous"] == "true"
			wantRefused := halfJwt || (anonymous && useJwt) || (p["StreamAuthType"] == "NONE" && !anonymous)
			if gotRefused := len(refused) > 0; gotRefused != wantRefused {
				t.Fatalf("refused = %v %q, want refused = %v", gotRefused, refused, wantRefused)
			}
			if wantRefused {
				return
			}
			deployed++

			wantAuth, wantRequire := "AWS_IAM", "true"
			switch {
			case useJwt:
				wantAuth = "JWT"
			case anonymous:
				wantAuth, wantRequire = "NONE", p["RequireAuth"]
			}
			for _, id := range tp.ofType("AWS::ApiGatewayV2::Route") {
				if got, err := r.value(tp.Resources[id].Properties["AuthorizationType"]); err != nil || got != wantAuth {
					t.Errorf("%s: AuthorizationType = %q (%v), want %s", id, got, err, wantAuth)
				}
			}
			for id := range functions {
				if got := r.environment(t, id)["REQUIRE_AUTH"]; got != wantRequire {
					t.Errorf("%s: REQUIRE_AUTH = %q, want %s", id, got, wantRequire)
				}
			}
			url, err := r.value(get(tp.functionProperties("ChatStreamFunction"), "FunctionUrlConfig", "AuthType"))
			if err != nil {
				t.Fatal(err)
			}
			public, err := r.exists("ChatStreamPublicInvoke")
			if err != nil {
				t.Fatal(err)
			}
			if (url == "NONE" || public) && !anonymous {
				t.Errorf("stream URL AuthType %s, public invoke permission %v, without AllowAnonymous", url, public)
			}
			if public != (url == "NONE") {
				t.Errorf("stream URL AuthType %s, but public invoke permission %v", url, public)
			}
			// The REST API's method takes the same auth: IAM, the JWT
			// issuer's tokens (Cognito's authorizer or ours), or none.
			wantREST := "sigv4"
			switch {
			case useJwt && p["JwtIssuer"] == cognitoJWT["JwtIssuer"]:
				wantREST = "cognito"
			case useJwt:
				wantREST = "token"
			case anonymous:
				wantREST = ""
			}
			if got := restAuth(t, r); got != wantREST {
				t.Errorf("the REST API's POST /agui takes %q, want %q", got, wantREST)
			}
			for _, id := range []string{"AuthorizerFunction", "AuthorizerRole", "AuthorizerInvokePermission", "AuthorizerLogGroup"} {
				if ok, err := r.exists(id); err != nil || ok != (wantREST == "token") {
					t.Errorf("%s exists: %v (%v); want %v", id, ok, err, wantREST == "token")
				}
			}
		})
	}
	if deployed == 0 {
		t.Error("the Rules refuse every combination")
	}
}

func TestParameters(t *testing.T) {
	tp := loadTemplate(t)
	grouped := map[string]int{}
	for _, g := range tp.Metadata.Interface.ParameterGroups {
		for _, p := range g.Parameters {
			grouped[p]++
		}
	}
	for name, p := range tp.Parameters {
		if grouped[name] != 1 {
			t.Errorf("parameter %s is in %d parameter groups, want 1", name, grouped[name])
		}
		if p.Default != nil && !p.allowed(t, *p.Default) {
			t.Errorf("parameter %s: its default %q is not an allowed value", name, *p.Default)
		}
	}
	for name := range grouped {
		if _, ok := tp.Parameters[name]; !ok {
			t.Errorf("parameter group lists %s, which is not a parameter", name)
		}
	}

	// Open mode is asked for by name: a true/false string, false by default.
	anon := tp.Parameters["AllowAnonymous"]
	if anon.Type != "String" || anon.Default == nil || *anon.Default != "false" || !slices.Equal(anon.AllowedValues, []string{"true", "false"}) {
		t.Errorf("AllowAnonymous: Type %q, Default %v, AllowedValues %v; want String, false, [true false]", anon.Type, anon.Default, anon.AllowedValues)
	}

	// The Tools parameter offers exactly the built-in tools.
	toolsParam := tp.Parameters["Tools"]
	if got, want := *toolsParam.Default, strings.Join(tools.Names, ","); got != want {
		t.Errorf("Tools default = %q, want %q (tools.Names)", got, want)
	}
	for _, name := range append(slices.Clone(tools.Names), tools.Optional...) {
		if !toolsParam.allowed(t, name) {
			t.Errorf("Tools does not accept the built-in tool %q", name)
		}
	}
	for _, bad := range []string{"calculator, recall", "calculator,", "bogus"} {
		if toolsParam.allowed(t, bad) {
			t.Errorf("Tools accepts %q", bad)
		}
	}
	// ApprovalTools offers the tools that run code; ask_user always waits.
	approvals := tp.Parameters["ApprovalTools"]
	for _, name := range append([]string{"", strings.Join(tools.Names, ",")}, tools.Names...) {
		if !approvals.allowed(t, name) {
			t.Errorf("ApprovalTools does not accept %q", name)
		}
	}
	for _, bad := range []string{"ask_user", "calculator, recall", "bogus"} {
		if approvals.allowed(t, bad) {
			t.Errorf("ApprovalTools accepts %q", bad)
		}
	}
}

// TestCfnLint runs cfn-lint, which also runs the SAM transform, and wants
// neither errors nor warnings.
func TestCfnLint(t *testing.T) {
	lint, err := exec.LookPath("cfn-lint")
	if err != nil {
		t.Skip("cfn-lint is not on PATH; install it (pip install cfn-lint) to lint template.yaml")
	}
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	path, err := filepath.Abs(templatePath)
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	cmd := exec.CommandContext(ctx, lint, path)
	cmd.Stdout, cmd.Stderr = &out, &out
	err = cmd.Run()
	if err != nil || out.Len() > 0 {
		t.Errorf("cfn-lint %s: %v\n%s", templatePath, err, out.String())
	}
}

func TestStreamFunctionURL(t *testing.T) {
	tp := loadTemplate(t)
	props := tp.functionProperties("ChatStreamFunction")
	url, _ := props["FunctionUrlConfig"].(map[string]any)
	if cmp.Diff(ref("StreamAuthType"), url["AuthType"]) != "" || url["InvokeMode"] != "RESPONSE_STREAM" {
		t.Errorf("FunctionUrlConfig: AuthType %v, InvokeMode %v; want Ref StreamAuthType, RESPONSE_STREAM", url["AuthType"], url["InvokeMode"])
	}
	// CORS only for the origins given, and none by default.
	cors, _ := get(url, "Cors", "Fn::If").([]any)
	if len(cors) != 3 || cors[0] != "HasStreamCors" || cmp.Diff(noValue, cors[2]) != "" ||
		cmp.Diff(map[string]any{"Fn::Split": []any{",", ref("StreamAllowedOrigins")}}, get(cors[1], "AllowOrigins")) != "" {
		t.Errorf("FunctionUrlConfig.Cors = %v; want AllowOrigins from StreamAllowedOrigins when it is set, and nothing otherwise", url["Cors"])
	}
	if p := tp.Parameters["StreamAllowedOrigins"]; *p.Default != "" || !p.allowed(t, "https://chat.example.com,http://localhost:3000") || p.allowed(t, "*") || p.allowed(t, "https://x.example/path") {
		t.Errorf("StreamAllowedOrigins must default to none and take only comma-separated origins")
	}
	apiCors, _ := get(tp.Resources["Api"].Properties, "CorsConfiguration", "Fn::If").([]any)
	if len(apiCors) != 3 {
		t.Fatalf("the HTTP API has no CORS rules: %v", tp.Resources["Api"].Properties["CorsConfiguration"])
	}
	if diff := cmp.Diff(cors[1], sameOrigins(apiCors[1], "StreamAllowedOrigins")); diff != "" {
		t.Errorf("the stream URL's CORS rules differ from the HTTP API's (-url +api):\n%s", diff)
	}
	// The URL has no throttle: reserved concurrency is the bound.
	if diff := cmp.Diff(fnIf("HasStreamConcurrency", ref("StreamReservedConcurrency"), noValue), props["ReservedConcurrentExecutions"]); diff != "" {
		t.Errorf("ReservedConcurrentExecutions (-want +got):\n%s", diff)
	}
	p := tp.Parameters["StreamAuthType"]
	if p.Default == nil || *p.Default != "AWS_IAM" || !p.allowed(t, "NONE") || p.allowed(t, "CUSTOM") {
		t.Errorf("StreamAuthType: default %v; it must default to AWS_IAM and allow only AWS_IAM and NONE", p.Default)
	}
	// A public URL gets lambda:InvokeFunction too, and only through the URL.
	perm := tp.Resources["ChatStreamPublicInvoke"]
	wantPerm := map[string]any{
		"Action":                "lambda:InvokeFunction",
		"FunctionName":          ref("ChatStreamFunction"),
		"Principal":             "*",
		"InvokedViaFunctionUrl": "true", // the YAML loader reads scalars as strings
	}
	if perm.Type != "AWS::Lambda::Permission" || perm.Condition != "StreamIsPublic" {
		t.Errorf("ChatStreamPublicInvoke: Type, Condition = %q, %q", perm.Type, perm.Condition)
	}
	if diff := cmp.Diff(wantPerm, perm.Properties); diff != "" {
		t.Errorf("ChatStreamPublicInvoke (-want +got):\n%s", diff)
	}
	wantCond := map[string]any{"Fn::Equals": []any{ref("StreamAuthType"), "NONE"}}
	if diff := cmp.Diff(wantCond, tp.Conditions["StreamIsPublic"]); diff != "" {
		t.Errorf("condition StreamIsPublic (-want +got):\n%s", diff)
	}
	// A public URL is an open mode: the Rules refuse it without
	// AllowAnonymous, however the rest is set.
	for _, tt := range []struct {
		params  map[string]string
		refused bool
	}{
		{params: nil},
		{params: map[string]string{"StreamAuthType": "NONE"}, refused: true},
		{params: map[string]string{"StreamAuthType": "NONE", "RequireAuth": "true"}, refused: true},
		{params: map[string]string{"StreamAuthType": "NONE", "AllowAnonymous": "false"}, refused: true},
		{params: with(jwt, map[string]string{"StreamAuthType": "NONE"}), refused: true},
		{params: map[string]string{"StreamAuthType": "NONE", "AllowAnonymous": "true"}},
		{params: map[string]string{"StreamAuthType": "AWS_IAM", "AllowAnonymous": "true"}},
	} {
		refused, err := newResolver(t, tp, tt.params).refusals()
		if err != nil {
			t.Fatal(err)
		}
		if got := len(refused) > 0; got != tt.refused {
			t.Errorf("%v: refused = %v %q, want %v", tt.params, got, refused, tt.refused)
		}
	}
}

// TestApiCors: a browser page may call the HTTP API from the origins that
// ApiAllowedOrigins names, with the headers every auth mode needs, and from
// none by default.
func TestApiCors(t *testing.T) {
	tp := loadTemplate(t)
	cors, _ := get(tp.Resources["Api"].Properties, "CorsConfiguration", "Fn::If").([]any)
	if len(cors) != 3 || cors[0] != "HasApiCors" || cmp.Diff(noValue, cors[2]) != "" {
		t.Fatalf("CorsConfiguration = %v; want it only when ApiAllowedOrigins is set", tp.Resources["Api"].Properties["CorsConfiguration"])
	}
	if diff := cmp.Diff(map[string]any{"Fn::Split": []any{",", ref("ApiAllowedOrigins")}}, get(cors[1], "AllowOrigins")); diff != "" {
		t.Errorf("AllowOrigins (-want +got):\n%s", diff)
	}
	methods := map[string]bool{}
	for _, m := range get(cors[1], "AllowMethods").([]any) {
		methods[m.(string)] = true
	}
	for _, id := range tp.ofType("AWS::ApiGatewayV2::Route") {
		r := tp.Resources[id].Properties["RouteKey"].(string)
		if method, _, _ := strings.Cut(r, " "); !methods[method] {
			t.Errorf("the route %s is not allowed by CORS", r)
		}
	}
	headers := strings.Join(anys(get(cors[1], "AllowHeaders")), ",")
	for _, h := range []string{"content-type", "idempotency-key", "authorization", "x-amz-date", "x-amz-security-token", "x-amz-content-sha256"} {
		if !strings.Contains(headers, h) {
			t.Errorf("AllowHeaders lacks %s: %s", h, headers)
		}
	}
	if got := anys(get(cors[1], "ExposeHeaders")); !slices.Contains(got, "retry-after") {
		t.Errorf("ExposeHeaders = %v; a page must see Retry-After", got)
	}
	if p := tp.Parameters["ApiAllowedOrigins"]; p.Default == nil || *p.Default != "" || !p.allowed(t, "https://chat.example.com,http://localhost:3000") || p.allowed(t, "*") || p.allowed(t, "https://x.example/path") {
		t.Errorf("ApiAllowedOrigins must default to none and take only comma-separated origins")
	}
	// The stream function reads the origins too (ALLOWED_ORIGINS): what
	// the parameter takes, its configuration must take, or the function
	// would fail at init after a deployment that looked successful.
	p := tp.Parameters["ApiAllowedOrigins"]
	for _, v := range []string{
		"https://chat.example.com", "http://localhost:3000", "https://a.example.com:8443,http://127.0.0.1:5173",
		"https://*.example.com", "https://user@a.example.com", "https://a.example.com?x=1", "https://a.example.com#x",
		"https://a.example.com/", "https://a.example.com:", "https://a.example.com:99999x",
	} {
		if !p.allowed(t, v) {
			continue
		}
		r := newResolver(t, tp, map[string]string{"ApiAllowedOrigins": v})
		if got := r.environment(t, "ChatStreamFunction")["ALLOWED_ORIGINS"]; got != v {
			t.Errorf("ApiAllowedOrigins=%q: ALLOWED_ORIGINS = %q", v, got)
		}
		if _, _, err := readConfig(r.environment(t, "ChatStreamFunction")); err != nil {
			t.Errorf("ApiAllowedOrigins=%q is allowed by the template, but the configuration says: %v", v, err)
		}
	}
}

// sameOrigins returns the CORS rules v with their origins taken from the
// parameter param, to compare two sets of rules but for their origins.
func sameOrigins(v any, param string) any {
	m, ok := v.(map[string]any)
	if !ok {
		return v
	}
	out := maps.Clone(m)
	out["AllowOrigins"] = map[string]any{"Fn::Split": []any{",", ref(param)}}
	return out
}

// anys returns the strings of a YAML list.
func anys(v any) []string {
	var out []string
	for _, x := range v.([]any) {
		out = append(out, fmt.Sprint(x))
	}
	return out
}
