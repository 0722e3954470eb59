package memory_test

import (
	"encoding/json"
	"maps"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/lambda-agent/lambda-agent/internal/ddbhistory"
	"github.com/lambda-agent/lambda-agent/internal/httpapi"
	"github.com/lambda-agent/lambda-agent/internal/memory"
	"github.com/lambda-agent/lambda-agent/internal/testkit"
	"github.com/lambda-agent/lambda-agent/internal/testkit/conversetest"
)

// start is the application with memory on, on stand-ins.
func start(t *testing.T, env map[string]string) *testkit.Stack {
	t.Helper()
	vars := map[string]string{"MEMORY": "on"}
	for k, v := range env {
		vars[k] = v
	}
	return testkit.Start(t, testkit.Options{Env: vars})
}

// learns scripts the extraction model's next answer: these operations.
func learns(s *testkit.Stack, ops ...map[string]any) {
	s.MemoryModel.Enqueue(conversetest.ToolUse("x1", "update_memory", map[string]any{"operations": ops}))
}

func add(kind, text string) map[string]any {
	return map[string]any{"action": "add", "kind": kind, "text": text}
}

// records lists sub's memory.
func records(t *testing.T, s *testkit.Stack, sub string) httpapi.MemoryResponse {
	t.Helper()
	code, body := s.Call(http.MethodGet, "/memory", sub, "")
	if code != http.StatusOK {
		t.Fatalf("GET /memory: %d %s", code, body)
	}
	var out httpapi.MemoryResponse
	if err := json.Unmarshal([]byte(body), &out); err != nil {
		t.Fatal(err)
	}
	return out
}

// lastUserText is the text of the last message of the agent's last model
// request.
func lastUserText(s *testkit.Stack) string {
	reqs := s.Model.Requests()
	msgs := reqs[len(reqs)-1].Messages
	return msgs[len(msgs)-1].Text()
}

// TestMemoryAcrossSessions: what one session teaches is recalled in the
// next, as marked context beside the message, and never stored in it;
// the extraction request is the documented prompt, with the turn as data.
func TestMemoryAcrossSessions(t *testing.T) {
	s := start(t, nil)
	s.Model.Enqueue(conversetest.Text("Teal, noted."))
	learns(s, add("fact", "The person's favourite colour is teal."))
	s.Chat(t, "alice", "first", "My favourite colour is teal.")

	reqs := s.MemoryModel.Requests()
	if len(reqs) != 1 {
		t.Fatalf("%d extraction requests, want 1", len(reqs))
	}
	ex := reqs[0]
	if len(ex.System) == 0 || !strings.HasPrefix(ex.System[0].Text, memory.ExtractionPrompt) || ex.ToolConfig == nil || ex.ToolConfig.ToolChoice == nil {
		t.Fatalf("the extraction request is not the documented one: %+v", ex)
	}
	if got := ex.Messages[0].Text(); !strings.Contains(got, "My favourite colour is teal.") || !strings.Contains(got, "Teal, noted.") {
		t.Errorf("the extraction request's data %q lacks the turn", got)
	}
	got := records(t, s, "alice")
	if !got.Enabled || len(got.Records) != 1 || got.Records[0].Kind != "fact" || got.Records[0].Source.SessionID != "first" {
		t.Fatalf("alice's memory: %+v", got)
	}

	s.Model.Enqueue(conversetest.Text("Teal."))
	learns(s) // nothing new
	s.Chat(t, "alice", "second", "What is my favourite colour?")
	text := lastUserText(s)
	if !strings.Contains(text, memory.RecallDescription) || !strings.Contains(text, "favourite colour is teal") {
		t.Errorf("the second session's request lacks the memory: %q", text)
	}
	if code, body := s.Call(http.MethodGet, "/sessions/second", "alice", ""); code != http.StatusOK || strings.Contains(body, "teal") {
		t.Errorf("the second session stores the recalled memory: %d %s", code, body)
	}

	// Bob has memory of his own, and none of Alice's.
	s.Model.Enqueue(conversetest.Text("I do not know."))
	learns(s)
	s.Chat(t, "bob", "bobs", "What is my favourite colour?")
	if text := lastUserText(s); strings.Contains(text, "teal") {
		t.Errorf("bob's request holds alice's memory: %q", text)
	}
	if got := records(t, s, "bob"); !got.Enabled || len(got.Records) != 0 {
		t.Errorf("bob's memory: %+v", got)
	}
}

// TestNoMemoryForOwnersThatAreNotOnePerson: anonymous callers and IAM
// principals have no memory, and their turns call no extraction model.
func TestNoMemoryForOwnersThatAreNotOnePerson(t *testing.T) {
	s := start(t, nil)
	s.Model.Enqueue(conversetest.Text("Noted."))
	s.Chat(t, "", "anon", "My favourite colour is teal.")
	if n := s.MemoryModel.Calls(); n != 0 {
		t.Errorf("%d extraction calls for an anonymous turn", n)
	}
	if got := records(t, s, ""); got.Enabled || len(got.Records) != 0 {
		t.Errorf("anonymous memory: %+v", got)
	}
	if code, _ := s.Call(http.MethodDelete, "/memory", "", ""); code != http.StatusNoContent {
		t.Errorf("DELETE /memory for anonymous: %d", code)
	}
}

// TestSearchMemoryIsTheCallersOwn: search_memory finds the turn's owner's
// records, whatever the model asks, and another owner's search finds
// none of them.
func TestSearchMemoryIsTheCallersOwn(t *testing.T) {
	s := start(t, nil)
	s.Model.Enqueue(conversetest.Text("Noted."))
	learns(s, add("fact", "The person's car is a green Volvo."))
	s.Chat(t, "alice", "a1", "My car is a green Volvo.")

	for _, c := range []struct {
		sub, want, not string
	}{
		{"alice", "green Volvo", ""},
		{"bob", "Nothing in memory", "Volvo"},
	} {
		s.Model.Enqueue(
			conversetest.ToolUse("t1", memory.SearchToolName, map[string]any{"query": "which car does alice drive, volvo"}),
			conversetest.Text("Done."))
		learns(s)
		s.Chat(t, c.sub, "search-"+c.sub, "Which car do I drive?")
		reqs := s.Model.Requests()
		result := reqs[len(reqs)-1].Messages[len(reqs[len(reqs)-1].Messages)-1]
		got := string(mustJSON(t, result))
		if !strings.Contains(got, c.want) || (c.not != "" && strings.Contains(got, c.not)) {
			t.Errorf("%s's search_memory result %s: want %q, not %q", c.sub, got, c.want, c.not)
		}
	}
}

func mustJSON(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestMemoryRoutes: listing pages through the records, a record is
// deleted by its id, another owner's id or a malformed one is a 404, a
// malformed cursor a 400, and the export carries the format's name.
func TestMemoryRoutes(t *testing.T) {
	s := start(t, nil)
	s.Model.Enqueue(conversetest.Text("Noted."))
	learns(s, add("fact", "The person is a nurse."), add("fact", "The person lives in Lyon."), add("preference", "The person likes short answers."))
	s.Chat(t, "alice", "a1", "I am a nurse in Lyon, and I like short answers.")

	code, body := s.Call(http.MethodGet, "/memory?limit=2", "alice", "")
	var page httpapi.MemoryResponse
	if code != http.StatusOK || json.Unmarshal([]byte(body), &page) != nil || len(page.Records) != 2 || page.NextCursor == "" {
		t.Fatalf("the first page: %d %s", code, body)
	}
	code, body = s.Call(http.MethodGet, "/memory?limit=2&cursor="+page.NextCursor, "alice", "")
	var rest httpapi.MemoryResponse
	if code != http.StatusOK || json.Unmarshal([]byte(body), &rest) != nil || len(rest.Records) != 1 || rest.NextCursor != "" {
		t.Fatalf("the second page: %d %s", code, body)
	}
	id := rest.Records[0].ID
	for _, c := range []struct {
		method, path, sub string
		status            int
		code              string
	}{
		{http.MethodGet, "/memory?cursor=bad!", "alice", 400, "invalid_request"},
		{http.MethodGet, "/memory?limit=101", "alice", 400, "invalid_limit"},
		{http.MethodDelete, "/memory/" + id, "bob", 404, "not_found"},
		{http.MethodDelete, "/memory/not-an-id", "alice", 404, "not_found"},
		{http.MethodDelete, "/memory/" + id, "alice", 204, ""},
		{http.MethodDelete, "/memory/" + id, "alice", 404, "not_found"},
	} {
		code, body := s.Call(c.method, c.path, c.sub, "")
		if code != c.status || (c.code != "" && !strings.Contains(body, `"code":"`+c.code+`"`)) {
			t.Errorf("%s %s as %s: %d %s, want %d %s", c.method, c.path, c.sub, code, body, c.status, c.code)
		}
	}
	code, body = s.Call(http.MethodGet, "/memory/export", "alice", "")
	var export httpapi.MemoryExport
	if code != http.StatusOK || json.Unmarshal([]byte(body), &export) != nil || export.Format != httpapi.MemoryFormat || len(export.Records) != 2 {
		t.Fatalf("the export: %d %s", code, body)
	}
	// The session's export holds what the person said, never memory.
	code, body = s.Call(http.MethodGet, "/sessions/a1/export", "alice", "")
	if code != http.StatusOK || strings.Contains(body, export.Records[0].Text) || strings.Contains(body, memory.RecallDescription) {
		t.Errorf("the session's export: %d %s", code, body)
	}
	if code, _ := s.Call(http.MethodDelete, "/memory", "alice", ""); code != http.StatusNoContent {
		t.Fatalf("forget: %d", code)
	}
	if got := records(t, s, "alice"); len(got.Records) != 0 || !got.Enabled {
		t.Errorf("after forget-all: %+v", got)
	}
}

// TestRecallCostsOneQuery: with memory on, a turn of an owner with memory
// makes one more DynamoDB request than without, a Query; an anonymous
// turn makes none more.
func TestRecallCostsOneQuery(t *testing.T) {
	requests := func(env map[string]string, sub string) map[string]int {
		s := testkit.Start(t, testkit.Options{Env: env})
		if s.MemoryModel != nil {
			learns(s, add("fact", "The person's favourite colour is teal."))
		}
		s.Model.Enqueue(conversetest.Text("Noted."), conversetest.Text("Teal."))
		body := `{"session_id":"c1","message":"My favourite colour is teal."}`
		if code, out := s.Call(http.MethodPost, "/chat", sub, body); code != http.StatusOK {
			t.Fatalf("%d %s", code, out)
		}
		if s.Stream != nil {
			s.Drained(t)
		}
		s.Meter.Take()
		body = `{"session_id":"c1","message":"What is my favourite colour?"}`
		if code, out := s.Call(http.MethodPost, "/chat", sub, body); code != http.StatusOK {
			t.Fatalf("%d %s", code, out)
		}
		return s.Meter.Take().ByOperation
	}
	off := requests(nil, "alice")
	on := requests(map[string]string{"MEMORY": "on"}, "alice")
	anon := requests(map[string]string{"MEMORY": "on"}, "")
	want := maps.Clone(off)
	want["Query"]++
	if !maps.Equal(on, want) {
		t.Errorf("a turn with memory made %v; without, %v: want one Query more", on, off)
	}
	if !maps.Equal(anon, off) {
		t.Errorf("an anonymous turn with memory on made %v; without, %v", anon, off)
	}
}

// TestIAMOwnersOnTheFunctionURL: the function URL serves the memory
// routes, and an IAM principal has memory only with MEMORY_IAM_OWNERS.
func TestIAMOwnersOnTheFunctionURL(t *testing.T) {
	for _, c := range []struct {
		iam  string
		want bool
	}{{"", false}, {"true", true}} {
		s := testkit.Start(t, testkit.Options{Routes: httpapi.FunctionURLRoutes, Env: map[string]string{"MEMORY": "on", "MEMORY_IAM_OWNERS": c.iam}})
		r := httptest.NewRequest(http.MethodGet, "/memory", nil)
		r = r.WithContext(httpapi.WithAuthorizer(r.Context(), &events.APIGatewayV2HTTPRequestContextAuthorizerDescription{
			IAM: &events.APIGatewayV2HTTPRequestContextAuthorizerIAMDescription{UserARN: "arn:aws:iam::123456789012:role/caller"},
		}))
		w := s.Serve(r)
		var got httpapi.MemoryResponse
		if w.Code != http.StatusOK || json.Unmarshal(w.Body.Bytes(), &got) != nil || got.Enabled != c.want {
			t.Errorf("MEMORY_IAM_OWNERS=%q: GET /memory as a principal: %d %s, want enabled %v", c.iam, w.Code, w.Body, c.want)
		}
	}
}

// TestSessionRecreatedUnderItsID: a session deleted and made again under
// its id is another incarnation, whose versions start again at 1; its
// commits are learned from, not taken for the earlier one's, which were.
func TestSessionRecreatedUnderItsID(t *testing.T) {
	s := start(t, nil)
	s.Model.Enqueue(conversetest.Text("Teal, noted."))
	learns(s, add("fact", "The person's favourite colour is teal."))
	s.Chat(t, "alice", "daily", "My favourite colour is teal.")
	if code, body := s.Call(http.MethodDelete, "/sessions/daily", "alice", ""); code != http.StatusNoContent {
		t.Fatalf("DELETE /sessions/daily: %d %s", code, body)
	}
	s.Drained(t)
	if got := records(t, s, "alice"); len(got.Records) != 0 {
		t.Fatalf("alice's memory after the session's delete: %+v", got.Records)
	}

	s.Model.Enqueue(conversetest.Text("Rust, noted."))
	learns(s, add("fact", "The person writes Rust."))
	s.Chat(t, "alice", "daily", "I write Rust.")
	if n := s.MemoryModel.Calls(); n != 2 {
		t.Errorf("%d extraction calls; want 2, one for each incarnation's first commit", n)
	}
	if got := records(t, s, "alice"); len(got.Records) != 1 || got.Records[0].Text != "The person writes Rust." {
		t.Errorf("alice's memory after the new session's first turn: %+v", got.Records)
	}
}

// TestMemoryIsNotASession: no memory item has both the owner index's keys,
// so none is in the index or in GET /sessions.
func TestMemoryIsNotASession(t *testing.T) {
	s := start(t, nil)
	s.Model.Enqueue(conversetest.Text("Noted."))
	learns(s, add("fact", "The person is a nurse."))
	s.Chat(t, "alice", "only", "I am a nurse.")
	if code, _ := s.Call(http.MethodDelete, "/memory", "alice", ""); code != http.StatusNoContent {
		t.Fatal("forget")
	}
	s.Model.Enqueue(conversetest.Text("Noted."))
	learns(s, add("fact", "The person is a doctor now."))
	s.Chat(t, "alice", "only", "I am a doctor now.")

	out, err := s.DDB.Client().Scan(t.Context(), &dynamodb.ScanInput{TableName: aws.String(testkit.Table)})
	if err != nil {
		t.Fatal(err)
	}
	kinds := map[string]int{}
	for _, it := range out.Items {
		pk := it[ddbhistory.PartitionKey].(*types.AttributeValueMemberS).Value
		if !strings.HasPrefix(pk, "mem#") {
			continue
		}
		sk := it[ddbhistory.SortKey].(*types.AttributeValueMemberS).Value
		kinds[sk[:1]]++
		if it["owner"] != nil && it["created_at"] != nil {
			t.Errorf("the memory item %s %s has the owner index's keys", pk, sk)
		}
	}
	if kinds["f"] != 1 || kinds["r"] != 1 || kinds["x"] != 1 {
		t.Errorf("memory items by kind of sort key: %v; want the marker, a record and a learned commit", kinds)
	}
	code, body := s.Call(http.MethodGet, "/sessions", "alice", "")
	if code != http.StatusOK || strings.Count(body, `"session_id"`) != 1 || strings.Contains(body, "mem#") {
		t.Errorf("GET /sessions: %d %s", code, body)
	}
}

// TestDiscardsDeliveredAgain: a stream delivered again after a crash, as
// one batch, once later records were handled: a delete's record spares
// what a session made again under its id since taught, and a rewind's
// record spares what its own commit taught; nothing is asked of the
// model again.
func TestDiscardsDeliveredAgain(t *testing.T) {
	s := start(t, nil)
	s.Model.Enqueue(conversetest.Text("Teal, noted."))
	learns(s, add("fact", "The person's favourite colour is teal."))
	s.Chat(t, "alice", "daily", "My favourite colour is teal.")
	if code, body := s.Call(http.MethodDelete, "/sessions/daily", "alice", ""); code != http.StatusNoContent {
		t.Fatalf("DELETE /sessions/daily: %d %s", code, body)
	}
	s.Drained(t)
	s.Model.Enqueue(conversetest.Text("Rust, noted."))
	learns(s, add("fact", "The person writes Rust."))
	s.Chat(t, "alice", "daily", "I write Rust.")

	s.Model.Enqueue(conversetest.Text("Oslo, noted."))
	learns(s, add("fact", "The person lives in Oslo."))
	s.Chat(t, "alice", "moves", "I live in Oslo.")
	s.Model.Enqueue(conversetest.Text("Bergen, noted."))
	learns(s, add("fact", "The person lives in Bergen."))
	if code, body := s.Call(http.MethodPost, "/chat", "alice", `{"session_id":"moves","edit":{"from":0,"message":"I live in Bergen."}}`); code != http.StatusOK {
		t.Fatalf("edit: %d %s", code, body)
	}
	s.Drained(t)
	want := []string{"The person lives in Bergen.", "The person writes Rust."}
	texts := func() []string {
		var out []string
		for _, r := range records(t, s, "alice").Records {
			out = append(out, r.Text)
		}
		slices.Sort(out)
		return out
	}
	if got := texts(); !slices.Equal(got, want) {
		t.Fatalf("alice's memory before the stream came again: %q, want %q", got, want)
	}
	calls := s.MemoryModel.Calls()
	resp, err := s.Extractor.Handle(t.Context(), events.DynamoDBEvent{Records: s.Stream.Delivered()})
	if err != nil || len(resp.BatchItemFailures) != 0 {
		t.Fatalf("Handle again: %+v, %v", resp, err)
	}
	if got := texts(); !slices.Equal(got, want) {
		t.Errorf("alice's memory after the stream came again: %q, want %q", got, want)
	}
	if n := s.MemoryModel.Calls() - calls; n != 0 {
		t.Errorf("the stream delivered again called the extraction model %d times", n)
	}
}
