package main

import (
	"encoding/json"
	"net/http"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/google/go-cmp/cmp"
	"github.com/lambda-agent/lambda-agent/internal/agentcore"
	"github.com/lambda-agent/lambda-agent/internal/app"
	"github.com/lambda-agent/lambda-agent/internal/ddbhistory"
	"github.com/lambda-agent/lambda-agent/internal/httpapi"
	"github.com/lambda-agent/lambda-agent/internal/memory"
	"github.com/lambda-agent/lambda-agent/internal/testkit"
	"github.com/lambda-agent/lambda-agent/internal/testkit/agentcoretest"
	"github.com/lambda-agent/lambda-agent/internal/testkit/conversetest"
	"github.com/lambda-agent/lambda-agent/internal/testkit/streamtest"
)

// sampleEvent is the memory function's sample event, the one `sam local
// invoke MemoryFunction -e events/memory-stream.json` sends: a session
// item's MODIFY, the commit of a session's second turn.
const sampleEvent = "memory-stream.json"

func sample(t *testing.T) events.DynamoDBEvent {
	t.Helper()
	ev, err := testkit.StreamEvent(sampleEvent)
	if err != nil {
		t.Fatal(err)
	}
	if len(ev.Records) != 1 {
		t.Fatalf("events/%s has %d records, want 1", sampleEvent, len(ev.Records))
	}
	return ev
}

// TestSampleEventPassesTheFilter: the event source mapping would deliver
// the sample: it passes the template's filter, memory.StreamFilter (which
// tests/deploy holds the template to).
func TestSampleEventPassesTheFilter(t *testing.T) {
	for _, r := range sample(t).Records {
		if ok, err := streamtest.Match(memory.StreamFilter, r); err != nil || !ok {
			t.Errorf("events/%s: record %s does not pass memory.StreamFilter (%v)", sampleEvent, r.EventID, err)
		}
	}
}

// TestSampleEventOnAnEmptyTable: the memory function, as app.NewExtractor
// builds it, handles the sample against a table that does not hold its
// session, as sam local's DynamoDB Local does not: it learns nothing,
// calls no model, and answers with an empty batchItemFailures, which
// tells the mapping that the whole batch succeeded.
func TestSampleEventOnAnEmptyTable(t *testing.T) {
	b := testkit.StartBackends(t, testkit.BackendOptions{})
	env := map[string]string{"TABLE_NAME": testkit.Table, "MODEL_ID": "test-model", "MEMORY": "on"}
	cfg, err := app.ConfigFromEnv(func(k string) string { return env[k] })
	if err != nil {
		t.Fatal(err)
	}
	x, err := app.NewExtractor(cfg, b.Model.Client(), b.DDB.Client(), app.Options{})
	if err != nil {
		t.Fatal(err)
	}
	resp, err := x.Handle(t.Context(), sample(t))
	if err != nil {
		t.Fatal(err)
	}
	raw, err := json.Marshal(resp)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := string(raw), `{"batchItemFailures":[]}`; got != want {
		t.Errorf("the answer to events/%s is %s, want %s", sampleEvent, got, want)
	}
	if n := b.Model.Calls(); n != 0 {
		t.Errorf("%d model calls for a session the table does not hold", n)
	}
}

// TestSampleEventIsACommit holds the sample to what ddbhistory writes: two
// turns of its session, by its owner, make a stream record of the same
// shape (attribute names and types, version and count), and with the
// sample's session item in the table, over those turns' messages, the
// memory function learns from the second turn's messages, and from no
// other, and answers with an empty batchItemFailures.
func TestSampleEventIsACommit(t *testing.T) {
	ev := sample(t)
	rec := ev.Records[0]
	owner, session := rec.Change.NewImage["owner"].String(), rec.Change.NewImage["session_id"].String()
	s := testkit.Start(t, testkit.Options{Env: map[string]string{"MEMORY": "on"}})

	first := rec.Change.NewImage["title"].String()
	const second = "Please keep your answers short: I read them on my phone."
	for _, turn := range []struct{ message, answer string }{
		{first, "Hello Ada! How can I help with the greenhouses?"},
		{second, "Understood: short answers from now on."},
	} {
		s.Model.Enqueue(conversetest.Text(turn.answer))
		s.MemoryModel.Enqueue(conversetest.ToolUse("x1", "update_memory", map[string]any{"operations": []any{}}))
		body, _ := json.Marshal(map[string]string{"session_id": session, "message": turn.message})
		if code, out := s.Call(http.MethodPost, "/chat", owner, string(body)); code != http.StatusOK {
			t.Fatalf("chat: %d %s", code, out)
		}
		if err := s.Stream.Drain(t.Context()); err != nil {
			t.Fatal(err)
		}
	}
	delivered := s.Stream.Delivered()
	if len(delivered) != 2 {
		t.Fatalf("%d stream records delivered for two commits", len(delivered))
	}
	real := delivered[1]
	if diff := cmp.Diff(shape(real), shape(rec)); diff != "" {
		t.Errorf("events/%s differs from the stream record of a second turn's commit (-commit +sample):\n%s", sampleEvent, diff)
	}
	for _, attr := range []string{"version", "count"} {
		for name, images := range map[string][2]map[string]events.DynamoDBAttributeValue{
			"NewImage": {real.Change.NewImage, rec.Change.NewImage},
			"OldImage": {real.Change.OldImage, rec.Change.OldImage},
		} {
			if got, want := images[1][attr].Number(), images[0][attr].Number(); got != want {
				t.Errorf("events/%s: %s %s = %s; a second turn's commit has %s", sampleEvent, name, attr, got, want)
			}
		}
	}

	// The table now holds the sample's session item, over the turns'
	// messages. Its expiry is the one value a fixture cannot keep true: it
	// moves to tomorrow.
	meta := item(t, rec.Change.NewImage)
	meta[ddbhistory.TTLAttribute] = &types.AttributeValueMemberN{Value: strconv.FormatInt(time.Now().Add(24*time.Hour).Unix(), 10)}
	if _, err := s.DDB.Client().PutItem(t.Context(), &dynamodb.PutItemInput{TableName: aws.String(testkit.Table), Item: meta}); err != nil {
		t.Fatal(err)
	}
	s.MemoryModel.Enqueue(conversetest.ToolUse("x1", "update_memory", map[string]any{"operations": []any{
		map[string]any{"action": "add", "kind": "preference", "text": "The person wants short answers.", "message": 2},
	}}))
	resp, err := s.Extractor.Handle(t.Context(), ev)
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.BatchItemFailures) != 0 || resp.BatchItemFailures == nil {
		t.Errorf("batchItemFailures = %#v, want empty; logs:\n%s", resp.BatchItemFailures, s.Logs)
	}
	reqs := s.MemoryModel.Requests()
	data := reqs[len(reqs)-1].Messages[0].Text()
	if !strings.Contains(data, second) || strings.Contains(data, first) {
		t.Errorf("the extraction read %q; want the second turn's messages alone", data)
	}
	code, out := s.Call(http.MethodGet, "/memory", owner, "")
	var got httpapi.MemoryResponse
	if err := json.Unmarshal([]byte(out), &got); code != http.StatusOK || err != nil {
		t.Fatalf("GET /memory: %d %s", code, out)
	}
	if len(got.Records) != 1 || got.Records[0].Kind != "preference" || got.Records[0].Source != (memory.Source{SessionID: session, Message: 2}) {
		t.Errorf("the owner's memory after the sample: %+v", got)
	}
}

// recordShape is what a stream record's handler may rely on: its kind,
// and the names and types of its keys' and images' attributes.
type recordShape struct {
	EventName, EventSource, StreamViewType string
	Keys, NewImage, OldImage               map[string]events.DynamoDBDataType
}

func shape(r events.DynamoDBEventRecord) recordShape {
	kinds := func(img map[string]events.DynamoDBAttributeValue) map[string]events.DynamoDBDataType {
		out := map[string]events.DynamoDBDataType{}
		for name, v := range img {
			out[name] = v.DataType()
		}
		return out
	}
	return recordShape{
		EventName: r.EventName, EventSource: r.EventSource, StreamViewType: r.Change.StreamViewType,
		Keys: kinds(r.Change.Keys), NewImage: kinds(r.Change.NewImage), OldImage: kinds(r.Change.OldImage),
	}
}

// item is a stream image as the SDK's item (memory.Image), which must hold
// strings and numbers alone, all a session item holds.
func item(t *testing.T, img map[string]events.DynamoDBAttributeValue) map[string]types.AttributeValue {
	t.Helper()
	for name, v := range img {
		if v.DataType() != events.DataTypeString && v.DataType() != events.DataTypeNumber {
			t.Fatalf("attribute %s: type %v, which a session item's image does not hold", name, v.DataType())
		}
	}
	return memory.Image(img)
}

// TestMirrorFromTheEnvironment: with AGENTCORE_MEMORY_ID set, the memory
// function's handler, as main builds it from the environment alone, with
// AWS_ENDPOINT_URL_DYNAMODB and AWS_ENDPOINT_URL_BEDROCK_AGENTCORE pointing
// at stand-ins, mirrors a commit into AgentCore Memory through the real
// SDK clients.
func TestMirrorFromTheEnvironment(t *testing.T) {
	s := testkit.Start(t, testkit.Options{Env: map[string]string{"AGENTCORE_MEMORY_ID": agentcoretest.MemoryID}})
	s.Model.Enqueue(conversetest.Text("Noted."))
	if code, out := s.Call(http.MethodPost, "/chat", "ada", `{"session_id":"s1","message":"I grow tomatoes."}`); code != http.StatusOK {
		t.Fatalf("chat: %d %s", code, out)
	}
	if err := s.Stream.Drain(t.Context()); err != nil {
		t.Fatal(err)
	}
	// The function's own AgentCore, apart from the stack's mirror's.
	ac := agentcoretest.NewServer()
	defer ac.Close()
	env := map[string]string{
		"TABLE_NAME": testkit.Table, "MODEL_ID": "test-model", "AGENTCORE_MEMORY_ID": agentcoretest.MemoryID,
		"AWS_ENDPOINT_URL_DYNAMODB": s.DDB.URL, "AWS_ENDPOINT_URL_BEDROCK_AGENTCORE": ac.URL,
		"AWS_REGION": "us-east-1", "AWS_ACCESS_KEY_ID": "AKID", "AWS_SECRET_ACCESS_KEY": "SECRET",
		"AWS_CONFIG_FILE": "/dev/null", "AWS_SHARED_CREDENTIALS_FILE": "/dev/null",
	}
	for k, v := range env {
		t.Setenv(k, v)
	}
	h, err := app.NewStreamHandlerFromEnv(t.Context(), os.Getenv, app.Options{})
	if err != nil {
		t.Fatal(err)
	}
	resp, err := h(t.Context(), events.DynamoDBEvent{Records: s.Stream.Delivered()})
	if err != nil || len(resp.BatchItemFailures) != 0 {
		t.Fatalf("handler: %+v, %v", resp, err)
	}
	if n := len(ac.Events(agentcoretest.MemoryID, agentcore.ActorID("ada"), agentcore.SessionID("s1"))); n != 2 {
		t.Errorf("the function mirrored %d events, want 2", n)
	}
}

// TestBatchesAreCounted: the memory function as main builds it from the
// environment writes a line of metrics per batch, with its records and
// failures (docs/observability.md).
func TestBatchesAreCounted(t *testing.T) {
	b := testkit.StartBackends(t, testkit.BackendOptions{})
	for _, kv := range append(b.Env, "MODEL_ID=test-model", "MEMORY=on", "AWS_CONFIG_FILE=/dev/null", "AWS_SHARED_CREDENTIALS_FILE=/dev/null") {
		k, v, _ := strings.Cut(kv, "=")
		t.Setenv(k, v)
	}
	var metrics testkit.Buffer
	h, err := app.NewStreamHandlerFromEnv(t.Context(), os.Getenv, app.Options{Metrics: &metrics})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := h(t.Context(), sample(t)); err != nil {
		t.Fatal(err)
	}
	var line map[string]any
	if err := json.Unmarshal([]byte(metrics.String()), &line); err != nil {
		t.Fatalf("metrics %q: %v", metrics.String(), err)
	}
	if line[memory.MetricRecords] != 1.0 || line[memory.MetricFailed] != 0.0 {
		t.Errorf("the batch's line: %v", line)
	}
}
