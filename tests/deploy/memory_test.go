package deploy

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/aws/aws-lambda-go/events"
	"github.com/google/go-cmp/cmp"

	"github.com/lambda-agent/lambda-agent/internal/memory"
	"github.com/lambda-agent/lambda-agent/internal/testkit/streamtest"
)

// The memory function, a plain AWS::Lambda::Function (see the template),
// and the resources that exist with it, with Memory on or AgentCore Memory.
const memoryFunction = "MemoryFunction"

var memoryResources = []string{memoryFunction, "MemoryRole", "MemoryStream", "MemoryFailureQueue", "MemoryLogGroup"}

// memoryEnvVars are exactly the memory function's variables: what
// extraction reads (the table, the models it may call, memory's settings),
// what the mirror into AgentCore Memory reads, the namespace of its
// metrics, and the SDK's DynamoDB endpoint for sam local.
var memoryEnvVars = []string{
	"TABLE_NAME",
	"MODEL_ID",
	"ADDITIONAL_MODEL_ARNS",
	"MEMORY",
	"MEMORY_IAM_OWNERS",
	"MEMORY_MODEL_ID",
	"MEMORY_KINDS",
	"MEMORY_TTL_DAYS",
	"AGENTCORE_MEMORY_ID",
	"AGENTCORE_NAMESPACE",
	"METRICS_NAMESPACE",
	"AWS_ENDPOINT_URL_DYNAMODB",
}

// agentCoreID is an AgentCore Memory id, as AgentCore makes them: the
// memory's name, a hyphen and ten characters.
const agentCoreID = "lambdaagent-AbCdE01234"

// memorySetups are the ways long-term memory can be deployed: none, the
// built-in memory, or AgentCore Memory. The Rules refuse both at once
// (TestOneLongTermMemory).
var memorySetups = []struct {
	name      string
	params    map[string]string
	builtIn   bool // Memory on
	agentCore bool // AgentCoreMemoryId set
}{
	{name: "none", params: map[string]string{"Memory": "off"}},
	{name: "built in", params: map[string]string{"Memory": "on"}, builtIn: true},
	{name: "AgentCore", params: map[string]string{"Memory": "off", "AgentCoreMemoryId": agentCoreID}, agentCore: true},
}

// TestMemoryFunction: with Memory on or AgentCore Memory, and only then,
// the table has a stream with both images, and the memory function reads
// it through an event source mapping that reports partial failures,
// retries a bounded number of times within the stream's 24 hours, and
// sends what still fails to an encrypted queue.
func TestMemoryFunction(t *testing.T) {
	tp := loadTemplate(t)
	fn := tp.Resources[memoryFunction]
	if fn.Type != "AWS::Lambda::Function" || fn.Condition != "MemoryFunctionOn" {
		t.Fatalf("%s: Type %q, Condition %q; want AWS::Lambda::Function, MemoryFunctionOn", memoryFunction, fn.Type, fn.Condition)
	}
	props := fn.Properties
	got := map[string]any{
		"Runtime":       props["Runtime"],
		"Architectures": props["Architectures"],
		"Code":          props["Code"],
		"Handler":       props["Handler"],
		"MemorySize":    props["MemorySize"],
		"Timeout":       props["Timeout"],
		"LogFormat":     get(props, "LoggingConfig", "LogFormat"),
		"LogLevel":      get(props, "LoggingConfig", "ApplicationLogLevel"),
		"LogGroup":      get(props, "LoggingConfig", "LogGroup"),
		"BuildMethod":   get(fn.Metadata, "BuildMethod"),
		"Role":          props["Role"],
	}
	want := map[string]any{
		"Runtime":       "provided.al2023",
		"Architectures": []any{"arm64"},
		"Code":          ".",
		"Handler":       "functions/memory",
		"MemorySize":    tp.Globals.Function["MemorySize"],
		// Ten commits, one after another, each a Bedrock call.
		"Timeout":     "120",
		"LogFormat":   "JSON",
		"LogLevel":    ref("LogLevel"),
		"LogGroup":    ref("MemoryLogGroup"),
		"BuildMethod": "go1.x",
		"Role":        getAtt("MemoryRole", "Arn"),
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("%s settings (-want +got):\n%s", memoryFunction, diff)
	}
	// It exports no traces and has no collector to send them to.
	for _, k := range []string{"TracingConfig", "Layers"} {
		if v, ok := props[k]; ok {
			t.Errorf("%s has %s: %v", memoryFunction, k, v)
		}
	}

	vars, _ := get(props, "Environment", "Variables").(map[string]any)
	if diff := cmp.Diff(slices.Sorted(slices.Values(memoryEnvVars)), slices.Sorted(maps.Keys(vars))); diff != "" {
		t.Errorf("%s: environment variables (-want +got):\n%s", memoryFunction, diff)
	}
	for k, v := range map[string]any{"TABLE_NAME": ref(tableID), "MODEL_ID": ref("ModelId"), "METRICS_NAMESPACE": ref("MetricsNamespace"), "AWS_ENDPOINT_URL_DYNAMODB": ""} {
		if diff := cmp.Diff(v, vars[k]); diff != "" {
			t.Errorf("%s: %s (-want +got):\n%s", memoryFunction, k, diff)
		}
	}

	wantStream := fnIf("MemoryFunctionOn", map[string]any{"StreamViewType": "NEW_AND_OLD_IMAGES"}, noValue)
	if diff := cmp.Diff(wantStream, tp.Resources[tableID].Properties["StreamSpecification"]); diff != "" {
		t.Errorf("the table's StreamSpecification (-want +got):\n%s", diff)
	}

	esm := tp.Resources["MemoryStream"]
	if esm.Type != "AWS::Lambda::EventSourceMapping" {
		t.Fatalf("MemoryStream: Type %q", esm.Type)
	}
	gotESM := maps.Clone(esm.Properties)
	delete(gotESM, "FilterCriteria") // TestMemoryStreamFilter
	wantESM := map[string]any{
		"FunctionName":                   ref(memoryFunction),
		"EventSourceArn":                 getAtt(tableID, "StreamArn"),
		"StartingPosition":               "LATEST",
		"BatchSize":                      "10",
		"MaximumBatchingWindowInSeconds": "5",
		"BisectBatchOnFunctionError":     "true",
		"MaximumRetryAttempts":           "3",
		// Within the stream's 24 hours, so that a record past it goes to
		// the queue rather than expiring from the stream unseen.
		"MaximumRecordAgeInSeconds": "21600",
		"FunctionResponseTypes":     []any{"ReportBatchItemFailures"},
		"DestinationConfig":         map[string]any{"OnFailure": map[string]any{"Destination": getAtt("MemoryFailureQueue", "Arn")}},
	}
	if diff := cmp.Diff(wantESM, gotESM); diff != "" {
		t.Errorf("MemoryStream (-want +got):\n%s", diff)
	}

	queue := tp.Resources["MemoryFailureQueue"]
	wantQueue := map[string]any{"SqsManagedSseEnabled": "true", "MessageRetentionPeriod": "1209600"}
	if queue.Type != "AWS::SQS::Queue" {
		t.Errorf("MemoryFailureQueue: Type %q", queue.Type)
	}
	if diff := cmp.Diff(wantQueue, queue.Properties); diff != "" {
		t.Errorf("MemoryFailureQueue (-want +got):\n%s", diff)
	}

	onOff := map[bool]string{false: "off", true: "on"}
	for _, m := range memorySetups {
		r := newResolver(t, tp, m.params)
		r.deployable(t)
		want := m.builtIn || m.agentCore
		for _, id := range append(slices.Clone(memoryResources), "MemoryFailuresAlarm") {
			if exists, err := r.exists(id); err != nil || exists != want {
				t.Errorf("memory %s: %s exists: %v (%v)", m.name, id, exists, err)
			}
		}
		table, _, err := r.resolve(tp.Resources[tableID].Properties)
		if err != nil {
			t.Fatal(err)
		}
		if _, stream := table.(map[string]any)["StreamSpecification"]; stream != want {
			t.Errorf("memory %s: the table has a stream: %v", m.name, stream)
		}
		// The chat, structured and stream functions recall with memory on.
		for id := range functions {
			if got := r.environment(t, id)["MEMORY"]; got != onOff[m.builtIn] {
				t.Errorf("memory %s: %s has MEMORY=%q", m.name, id, got)
			}
		}
	}
}

// TestMemoryStreamFilter: the mapping's filters are memory.StreamFilter,
// and with AgentCore Memory memory.ForgetFilter too, and with the built-in
// memory that one alone. StreamFilter lets through the INSERT and MODIFY
// records of session items and nothing else: no REMOVE (TTL's deletes), no
// message, no sub-agent's conversation, no memory item (which the memory
// function writes itself), no claim and no idempotency record.
// ForgetFilter adds the INSERT and MODIFY records of forget markers, which
// DELETE /memory writes and the mirror into AgentCore acts on.
func TestMemoryStreamFilter(t *testing.T) {
	tp := loadTemplate(t)
	parse := func(t *testing.T, pattern string) any {
		t.Helper()
		var v any
		if err := json.Unmarshal([]byte(pattern), &v); err != nil {
			t.Fatalf("filter pattern %q is not JSON: %v", pattern, err)
		}
		return v
	}
	record := func(name events.DynamoDBOperationType, pk, sk string) events.DynamoDBEventRecord {
		keys := map[string]events.DynamoDBAttributeValue{"pk": events.NewStringAttribute(pk), "sk": events.NewStringAttribute(sk)}
		return events.DynamoDBEventRecord{
			EventName:   string(name),
			EventSource: "aws:dynamodb",
			Change:      events.DynamoDBStreamRecord{Keys: keys, NewImage: keys, StreamViewType: "NEW_AND_OLD_IMAGES"},
		}
	}
	const (
		insert = events.DynamoDBOperationTypeInsert
		modify = events.DynamoDBOperationTypeModify
		remove = events.DynamoDBOperationTypeRemove
	)
	records := []struct {
		name      string
		record    events.DynamoDBEventRecord
		builtIn   bool // passes with the built-in memory
		agentCore bool // passes with AgentCore Memory
	}{
		{"a session's first commit", record(insert, "s#alice#s-1", "meta"), true, true},
		{"a session's later commit", record(modify, "s#alice#s-1", "meta"), true, true},
		{"a session item's TTL delete", record(remove, "s#alice#s-1", "meta"), false, false},
		{"a message", record(insert, "s#alice#s-1", "m#0000000002"), false, false},
		{"a message rewritten", record(modify, "s#alice#s-1", "m#0000000002"), false, false},
		{"a message's second part", record(insert, "s#alice#s-1", "m#0000000002#001"), false, false},
		{"a sub-agent's conversation", record(modify, "s#alice#s-1", "a#researcher#meta"), false, false},
		{"a sub-agent's message", record(insert, "s#alice#s-1", "a#researcher#m#0000000000"), false, false},
		{"an idempotent turn's response", record(insert, "s#alice#s-1", "r#key-1"), false, false},
		{"a memory record", record(insert, "mem#alice", "r#abcdefghij"), false, false},
		{"a memory record changed", record(modify, "mem#alice", "r#abcdefghij"), false, false},
		{"a first forget marker", record(insert, "mem#alice", "f"), false, true},
		{"a forget marker moved on", record(modify, "mem#alice", "f"), false, true},
		{"a forget marker's TTL delete", record(remove, "mem#alice", "f"), false, false},
		{"a session's item named f", record(modify, "s#alice#s-1", "f"), false, false},
		{"a learned commit", record(insert, "mem#alice", "x#s-1#2"), false, false},
		{"a session id's claim", record(insert, "id#s-1", "claim"), false, false},
		{"an idempotency record", record(insert, "i#0123abcd", "key"), false, false},
	}
	for _, m := range memorySetups {
		if !m.builtIn && !m.agentCore {
			continue // no mapping (TestMemoryFunction)
		}
		t.Run(m.name, func(t *testing.T) {
			r := newResolver(t, tp, m.params)
			r.deployable(t)
			resolved, _, err := r.resolve(get(tp.Resources["MemoryStream"].Properties, "FilterCriteria", "Filters"))
			if err != nil {
				t.Fatal(err)
			}
			var patterns, got []any
			for _, f := range resolved.([]any) {
				p, _ := get(f, "Pattern").(string)
				patterns = append(patterns, p)
				got = append(got, parse(t, p))
			}
			want := []any{parse(t, memory.StreamFilter)}
			if m.agentCore {
				want = append(want, parse(t, memory.ForgetFilter))
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Fatalf("the filters' Patterns differ from memory.StreamFilter and, with AgentCore Memory, memory.ForgetFilter (-want +got):\n%s", diff)
			}
			for _, tt := range records {
				passes := false
				for _, p := range patterns {
					ok, err := streamtest.Match(p.(string), tt.record)
					if err != nil {
						t.Fatalf("%s: %v", tt.name, err)
					}
					passes = passes || ok
				}
				if want := (m.builtIn && tt.builtIn) || (m.agentCore && tt.agentCore); passes != want {
					t.Errorf("%s (%s %s %s): passes the filters: %v, want %v", tt.name, tt.record.EventName,
						tt.record.Change.Keys["pk"].String(), tt.record.Change.Keys["sk"].String(), passes, want)
				}
			}
		})
	}
}

// TestMemoryModelNeedsGrant: a MemoryModelId other than ModelId deploys
// only with AdditionalModelArns, which must grant it: the function checks
// it at init, but an empty list cannot.
func TestMemoryModelNeedsGrant(t *testing.T) {
	tp := loadTemplate(t)
	const (
		haiku   = "us.anthropic.claude-haiku-4-5-20251001-v1:0"
		haikuAt = "arn:aws:bedrock:us-east-1:111122223333:inference-profile/" + haiku + ",arn:aws:bedrock:*::foundation-model/anthropic.claude-haiku-4-5-20251001-v1:0"
	)
	model := *tp.Parameters["ModelId"].Default
	for _, tt := range []struct {
		params  map[string]string
		refused bool
	}{
		{params: map[string]string{"Memory": "on"}},
		{params: map[string]string{"Memory": "on", "MemoryModelId": model}},
		{params: map[string]string{"Memory": "on", "MemoryModelId": haiku}, refused: true},
		{params: map[string]string{"Memory": "on", "MemoryModelId": haiku, "AdditionalModelArns": haikuAt}},
		{params: map[string]string{"Memory": "off", "MemoryModelId": haiku}},
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

// memoryRoleStatements returns the statements of the memory function's
// role: its Policies resolved as r deploys them, or, when r is nil, all of
// them, with both branches of each Fn::If.
func memoryRoleStatements(t *testing.T, tp *tmpl, r *resolver) []statement {
	t.Helper()
	policies := tp.Resources["MemoryRole"].Properties["Policies"]
	if r != nil {
		var err error
		if policies, _, err = r.resolve(policies); err != nil {
			t.Fatal(err)
		}
	}
	var out []statement
	for _, p := range branches(policies) {
		for _, st := range branches(get(p, "PolicyDocument", "Statement")) {
			m, _ := st.(map[string]any)
			for _, k := range []string{"NotAction", "NotResource", "Principal"} {
				if _, ok := m[k]; ok {
					t.Errorf("MemoryRole: statement %v has %s", m["Sid"], k)
				}
			}
			if m["Effect"] != "Allow" {
				t.Errorf("MemoryRole: statement %v: Effect = %v, want Allow", m["Sid"], m["Effect"])
			}
			actions := strs(t, m["Action"])
			slices.Sort(actions)
			resources := m["Resource"]
			if r == nil {
				resources = branches(resources)
			}
			if _, isList := resources.([]any); !isList {
				resources = []any{resources}
			}
			out = append(out, statement{Actions: actions, Resources: resources.([]any), Condition: m["Condition"]})
		}
	}
	return out
}

// TestMemoryLeastPrivilege: the memory function's role, which only Lambda
// may assume and which has no managed policy (not the
// AWSLambdaDynamoDBExecutionRole a SAM DynamoDB event would attach, which
// reads every stream and writes every log group), grants exactly what the
// function calls: its log group; the table's stream; reads of the table;
// the on-failure queue; with Memory on, extraction's writes of memory
// items only and InvokeModel on the extraction model; with AgentCore
// Memory, the mirror's calls on that memory alone, and no write to the
// table and no model. An extra action or a wildcard resource fails it.
func TestMemoryLeastPrivilege(t *testing.T) {
	tp := loadTemplate(t)
	role := tp.Resources["MemoryRole"]
	if role.Type != "AWS::IAM::Role" || role.Condition != "MemoryFunctionOn" {
		t.Fatalf("MemoryRole: Type %q, Condition %q", role.Type, role.Condition)
	}
	wantTrust := map[string]any{"Version": "2012-10-17", "Statement": []any{map[string]any{
		"Effect": "Allow", "Principal": map[string]any{"Service": "lambda.amazonaws.com"}, "Action": "sts:AssumeRole",
	}}}
	if diff := cmp.Diff(wantTrust, role.Properties["AssumeRolePolicyDocument"]); diff != "" {
		t.Errorf("trust policy (-want +got):\n%s", diff)
	}
	for _, k := range []string{"ManagedPolicyArns", "PermissionsBoundary"} {
		if v, ok := role.Properties[k]; ok {
			t.Errorf("MemoryRole has %s: %v", k, v)
		}
	}

	// No statement, in any branch, has a wildcard action or the resource *.
	for _, s := range memoryRoleStatements(t, tp, nil) {
		for _, a := range s.Actions {
			if strings.Contains(a, "*") {
				t.Errorf("action %q has a wildcard", a)
			}
		}
		for _, r := range s.Resources {
			if r == "*" {
				t.Errorf("statement with %v has Resource *", s.Actions)
			}
		}
	}

	table := getAtt(tableID, "Arn")
	common := []statement{
		{Actions: []string{"logs:CreateLogStream", "logs:PutLogEvents"}, Resources: []any{getAtt("MemoryLogGroup", "Arn")}},
		{Actions: []string{"dynamodb:DescribeStream", "dynamodb:GetRecords", "dynamodb:GetShardIterator", "dynamodb:ListStreams"}, Resources: []any{getAtt(tableID, "StreamArn")}},
		// The session item and messages of a commit, the owner's memory.
		{Actions: []string{"dynamodb:GetItem", "dynamodb:Query"}, Resources: []any{table}},
		{Actions: []string{"sqs:SendMessage"}, Resources: []any{getAtt("MemoryFailureQueue", "Arn")}},
	}
	// Extraction's: a TransactWriteItems's Put, Delete and ConditionCheck,
	// and DeleteItem alone, on memory items only.
	writeMemory := statement{Actions: []string{"dynamodb:ConditionCheckItem", "dynamodb:DeleteItem", "dynamodb:PutItem"}, Resources: []any{table},
		Condition: map[string]any{"ForAllValues:StringLike": map[string]any{"dynamodb:LeadingKeys": []any{"mem#*"}}}}
	// The mirror's, on the one memory (TestAgentCoreLeastPrivilege renders
	// the ARN).
	mirror := statement{
		Actions: []string{
			"bedrock-agentcore:BatchDeleteMemoryRecords", "bedrock-agentcore:CreateEvent", "bedrock-agentcore:DeleteEvent",
			"bedrock-agentcore:ListEvents", "bedrock-agentcore:ListMemoryRecords",
		},
		Resources: []any{map[string]any{"Fn::Sub": agentCoreMemoryArn}},
	}
	const arn = "arn:${AWS::Partition}:bedrock:"
	modelID := []any{
		map[string]any{"Fn::Sub": arn + "${AWS::Region}::foundation-model/${ModelId}"},
		map[string]any{"Fn::Sub": arn + "${AWS::Region}:${AWS::AccountId}:inference-profile/${ModelId}"},
	}
	throughProfile := statement{
		Actions:   []string{"bedrock:InvokeModel"},
		Resources: []any{map[string]any{"Fn::Sub": arn + "*::foundation-model/${FoundationModelId}"}},
		Condition: map[string]any{"ArnLike": map[string]any{"bedrock:InferenceProfileArn": map[string]any{"Fn::Sub": arn + "${AWS::Region}:${AWS::AccountId}:inference-profile/${ModelId}"}}},
	}
	const (
		haiku   = "us.anthropic.claude-haiku-4-5-20251001-v1:0"
		haikuAt = "arn:aws:bedrock:us-east-1:111122223333:inference-profile/" + haiku
		haikuFM = "arn:aws:bedrock:*::foundation-model/anthropic.claude-haiku-4-5-20251001-v1:0"
	)
	model := *tp.Parameters["ModelId"].Default
	for _, tt := range []struct {
		name    string
		params  map[string]string
		bedrock []statement // with the built-in memory: extraction's model
	}{
		{
			name:    "ModelId, a cross-Region profile",
			params:  map[string]string{"Memory": "on"},
			bedrock: []statement{{Actions: []string{"bedrock:InvokeModel"}, Resources: modelID}, throughProfile},
		},
		{
			name:    "ModelId by name",
			params:  map[string]string{"Memory": "on", "MemoryModelId": model},
			bedrock: []statement{{Actions: []string{"bedrock:InvokeModel"}, Resources: modelID}, throughProfile},
		},
		{
			name:    "ModelId, a foundation model",
			params:  map[string]string{"Memory": "on", "ModelId": "amazon.nova-pro-v1:0", "FoundationModelId": ""},
			bedrock: []statement{{Actions: []string{"bedrock:InvokeModel"}, Resources: modelID}},
		},
		{
			// Exactly the ARNs listed, which the function checks cover
			// MemoryModelId; ModelId's are not granted.
			name:    "MemoryModelId among AdditionalModelArns",
			params:  map[string]string{"Memory": "on", "MemoryModelId": haiku, "AdditionalModelArns": haikuAt + "," + haikuFM},
			bedrock: []statement{{Actions: []string{"bedrock:InvokeModel"}, Resources: []any{haikuAt, haikuFM}}},
		},
		// No model and no write to the table, whatever the model
		// parameters say.
		{name: "AgentCore Memory", params: map[string]string{"Memory": "off", "AgentCoreMemoryId": agentCoreID}},
		{name: "AgentCore Memory, MemoryModelId", params: map[string]string{"Memory": "off", "AgentCoreMemoryId": agentCoreID, "MemoryModelId": haiku, "AdditionalModelArns": haikuAt}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			r := newResolver(t, tp, tt.params)
			r.deployable(t)
			want := slices.Concat(common, tt.bedrock)
			if tt.params["Memory"] == "on" {
				want = append(want, writeMemory)
			} else {
				want = append(want, mirror)
			}
			got := memoryRoleStatements(t, tp, r)
			key := func(s statement) string { return fmt.Sprint(s.Actions, s.Resources, s.Condition) }
			slices.SortFunc(want, func(a, b statement) int { return strings.Compare(key(a), key(b)) })
			slices.SortFunc(got, func(a, b statement) int { return strings.Compare(key(a), key(b)) })
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("the memory function's grants (-want +got):\n%s", diff)
			}
		})
	}
}

// TestMemoryRoleTransformed: after SAM's transform, with Memory on, no role
// of the stack has AWSLambdaDynamoDBExecutionRole, and the memory
// function's has no managed policy at all: SAM would attach one to the
// role it makes for a function with a DynamoDB event, and the memory
// function's mapping is a resource of its own, with a role of its own.
func TestMemoryRoleTransformed(t *testing.T) {
	python := samPython(t)
	doc := loadGeneric(t)
	for _, id := range slices.Sorted(maps.Keys(functions)) {
		get(doc, "Resources", id, "Properties").(map[string]any)["CodeUri"] = "s3://bucket/key"
	}
	input, err := json.Marshal(doc)
	if err != nil {
		t.Fatal(err)
	}
	out := samTransform(t, python, input, map[string]string{"Memory": "on"})
	resources, _ := get(out, "Resources").(map[string]any)
	for id, res := range resources {
		for _, arn := range branches(get(res, "Properties", "ManagedPolicyArns")) {
			if s, _ := arn.(string); strings.Contains(s, "AWSLambdaDynamoDBExecutionRole") {
				t.Errorf("%s has %s", id, s)
			}
		}
		if get(res, "Type") == "AWS::Lambda::EventSourceMapping" && id != "MemoryStream" {
			t.Errorf("SAM made the event source mapping %s", id)
		}
	}
	if got := get(resources, memoryFunction, "Type"); got != "AWS::Lambda::Function" {
		t.Errorf("%s: Type = %v after the transform", memoryFunction, got)
	}
	if v := get(resources, "MemoryRole", "Properties", "ManagedPolicyArns"); v != nil {
		t.Errorf("MemoryRole: ManagedPolicyArns = %v after the transform", v)
	}
}
