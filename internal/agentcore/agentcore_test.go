package agentcore_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	lambdaevents "github.com/aws/aws-lambda-go/events"
	"github.com/lambda-agent/lambda-agent/internal/agentcore"
	"github.com/lambda-agent/lambda-agent/internal/httpapi"
	"github.com/lambda-agent/lambda-agent/internal/memory"
	"github.com/lambda-agent/lambda-agent/internal/testkit"
	"github.com/lambda-agent/lambda-agent/internal/testkit/agentcoretest"
	"github.com/lambda-agent/lambda-agent/internal/testkit/conversetest"
)

// start is the application with AgentCore Memory on, on stand-ins.
func start(t *testing.T, env map[string]string) *testkit.Stack {
	t.Helper()
	vars := map[string]string{"AGENTCORE_MEMORY_ID": agentcoretest.MemoryID}
	for k, v := range env {
		vars[k] = v
	}
	return testkit.Start(t, testkit.Options{Env: vars})
}

// events are the mirrored events of sub's session.
func events(s *testkit.Stack, sub, session string) []agentcoretest.Event {
	return s.AgentCore.Events(agentcoretest.MemoryID, agentcore.ActorID(sub), agentcore.SessionID(session))
}

// texts are the conversational payloads of evs, as role: text.
func texts(t *testing.T, evs []agentcoretest.Event) []string {
	t.Helper()
	var out []string
	for _, e := range evs {
		for _, p := range e.Payload {
			var m struct {
				Conversational struct {
					Role    string `json:"role"`
					Content struct {
						Text string `json:"text"`
					} `json:"content"`
				} `json:"conversational"`
			}
			if err := json.Unmarshal(p, &m); err != nil {
				t.Fatal(err)
			}
			out = append(out, m.Conversational.Role+": "+m.Conversational.Content.Text)
		}
	}
	return out
}

// addRecord adds a record of sub's, as a strategy writing under the
// default namespace would.
func addRecord(s *testkit.Stack, sub, kind, text string) string {
	return s.AgentCore.AddRecord(agentcoretest.MemoryID, agentcoretest.Record{
		Namespaces: []string{"/users/" + agentcore.ActorID(sub) + "/" + kind}, StrategyID: kind, Text: text})
}

// lastUserText is the text of the last message of the agent's last model
// request.
func lastUserText(s *testkit.Stack) string {
	reqs := s.Model.Requests()
	msgs := reqs[len(reqs)-1].Messages
	return msgs[len(msgs)-1].Text()
}

// TestMirrorAndRecall: a committed turn becomes events of the owner's
// encoded actor and session, in order; a record a strategy extracted under
// the owner's namespace is recalled in a later session, beside the
// message and never stored in it; another owner gets none of it, and an
// owner who is not one person is neither mirrored nor recalled.
func TestMirrorAndRecall(t *testing.T) {
	s := start(t, nil)
	s.Model.Enqueue(conversetest.Text("Teal, noted."))
	s.Chat(t, "alice", "first", "My favourite colour is teal.")

	evs := events(s, "alice", "first")
	if got, want := texts(t, evs), []string{"USER: My favourite colour is teal.", "ASSISTANT: Teal, noted."}; strings.Join(got, "|") != strings.Join(want, "|") {
		t.Fatalf("mirrored %q, want %q", got, want)
	}
	for i, e := range evs {
		if e.Skip || e.Metadata["lambda_agent.session"] != "first" || e.Metadata["lambda_agent.message"] != []string{"0", "1"}[i] {
			t.Errorf("event %d: skip %v, metadata %v", i, e.Skip, e.Metadata)
		}
	}

	addRecord(s, "alice", "facts", "The person's favourite colour is teal.")
	addRecord(s, "bob", "facts", "Bob's favourite colour is red.")
	s.Model.Enqueue(conversetest.Text("Teal."))
	before := s.AgentCore.Calls("RetrieveMemoryRecords")
	s.Chat(t, "alice", "second", "What is my favourite colour?")
	if n := s.AgentCore.Calls("RetrieveMemoryRecords") - before; n != 1 {
		t.Errorf("a turn made %d RetrieveMemoryRecords calls, want 1", n)
	}
	text := lastUserText(s)
	if !strings.Contains(text, memory.RecallDescription) || !strings.Contains(text, "favourite colour is teal") || strings.Contains(text, "red") {
		t.Errorf("alice's second request does not recall her memory alone: %q", text)
	}
	if code, body := s.Call(http.MethodGet, "/sessions/second", "alice", ""); code != http.StatusOK || strings.Contains(body, "teal") {
		t.Errorf("the second session stores the recalled memory: %d %s", code, body)
	}

	calls := s.AgentCore.Calls("RetrieveMemoryRecords")
	s.Model.Enqueue(conversetest.Text("I do not know."))
	s.Chat(t, "", "anon", "What is my favourite colour?")
	if text := lastUserText(s); strings.Contains(text, memory.RecallDescription) {
		t.Errorf("anonymous was given memory: %q", text)
	}
	if n := s.AgentCore.Calls("RetrieveMemoryRecords"); n != calls {
		t.Errorf("an anonymous turn called RetrieveMemoryRecords %d times", n-calls)
	}
	if evs := events(s, "anonymous", "anon"); len(evs) != 0 {
		t.Errorf("an anonymous session was mirrored: %d events", len(evs))
	}
}

// TestToolChatterIsSkipped: a turn's tool calls and results are events of
// their own, with extractionMode SKIP, apart from the words strategies
// extract from.
func TestToolChatterIsSkipped(t *testing.T) {
	s := start(t, nil)
	s.Model.Enqueue(conversetest.Text("Let me compute.").WithToolUse("c1", "calculator", map[string]string{"expression": "6*7"}))
	s.Model.Enqueue(conversetest.Text("It is 42."))
	s.Chat(t, "alice", "calc", "What is six times seven?")

	var words, tools []string
	for _, e := range events(s, "alice", "calc") {
		ts := texts(t, []agentcoretest.Event{e})
		if e.Skip {
			tools = append(tools, ts...)
		} else {
			words = append(words, ts...)
		}
	}
	if strings.Join(words, "|") != "USER: What is six times seven?|ASSISTANT: Let me compute.|ASSISTANT: It is 42." {
		t.Errorf("words mirrored for extraction: %q", words)
	}
	if len(tools) != 2 || !strings.HasPrefix(tools[0], `TOOL: {"toolUse":{"input":{"expression":"6*7"},"name":"calculator"}}`) ||
		!strings.HasPrefix(tools[1], `TOOL: {"toolResult":`) || !strings.Contains(tools[1], "42") {
		t.Errorf("tool chatter mirrored with SKIP: %q", tools)
	}
}

// TestMirrorRetried: a batch delivered again, as after a crash before the
// memory function answered, creates no event twice.
func TestMirrorRetried(t *testing.T) {
	s := start(t, nil)
	s.Model.Enqueue(conversetest.Text("Noted."))
	s.Chat(t, "alice", "first", "I live in Oslo.")
	before := events(s, "alice", "first")
	delivered := s.Stream.Delivered()
	for range 2 {
		resp, err := s.Mirror.Handle(t.Context(), eventOf(delivered))
		if err != nil || len(resp.BatchItemFailures) != 0 {
			t.Fatalf("Handle again: %+v, %v", resp, err)
		}
	}
	if after := events(s, "alice", "first"); len(after) != len(before) || len(before) != 2 {
		t.Errorf("%d events after two more deliveries, %d before; want 2", len(after), len(before))
	}
}

func eventOf(rs []lambdaevents.DynamoDBEventRecord) lambdaevents.DynamoDBEvent {
	return lambdaevents.DynamoDBEvent{Records: rs}
}

// TestDeletesReachAgentCore: a rewind deletes the events of the messages
// it discarded, and mirrors those that replace them; a deleted session
// loses all of its events; another session's stay.
func TestDeletesReachAgentCore(t *testing.T) {
	s := start(t, nil)
	s.Model.Enqueue(conversetest.Text("Noted."))
	s.Chat(t, "alice", "s1", "I live in Oslo.")
	s.Model.Enqueue(conversetest.Text("Bergen, then."))
	s.Chat(t, "alice", "s1", "Actually I moved to Bergen.")
	s.Model.Enqueue(conversetest.Text("Hello."))
	s.Chat(t, "alice", "other", "Hello.")
	if n := len(events(s, "alice", "s1")); n != 4 {
		t.Fatalf("%d events of s1, want 4", n)
	}

	if code, body := s.Call(http.MethodPost, "/sessions/s1/rewind", "alice", `{"to":2}`); code != http.StatusOK {
		t.Fatalf("rewind: %d %s", code, body)
	}
	s.Drained(t)
	if got := texts(t, events(s, "alice", "s1")); strings.Join(got, "|") != "USER: I live in Oslo.|ASSISTANT: Noted." {
		t.Errorf("after the rewind, s1's events are %q", got)
	}
	s.Model.Enqueue(conversetest.Text("Stockholm it is."))
	s.Chat(t, "alice", "s1", "I moved to Stockholm.")
	if got := texts(t, events(s, "alice", "s1")); strings.Join(got, "|") != "USER: I live in Oslo.|ASSISTANT: Noted.|USER: I moved to Stockholm.|ASSISTANT: Stockholm it is." {
		t.Errorf("after the next turn, s1's events are %q", got)
	}

	addRecord(s, "alice", "facts", "The person lives in Stockholm.")
	if code, body := s.Call(http.MethodDelete, "/sessions/s1", "alice", ""); code != http.StatusNoContent {
		t.Fatalf("delete: %d %s", code, body)
	}
	s.Drained(t)
	// No operation links a record to its events: a session's delete
	// leaves what the strategies extracted from it (docs/memory.md).
	if n := len(s.AgentCore.Records(agentcoretest.MemoryID)); n != 1 {
		t.Errorf("%d records after the session's delete, want the 1 extracted", n)
	}
	if n := len(events(s, "alice", "s1")); n != 0 {
		t.Errorf("%d events of the deleted session remain", n)
	}
	if n := len(events(s, "alice", "other")); n != 2 {
		t.Errorf("%d events of another session remain, want 2", n)
	}
}

// TestMemoryRoutes: GET /memory lists the caller's records in AgentCore,
// paged; DELETE /memory/{recordId} deletes one of theirs and answers 404
// for anyone else's; DELETE /memory marks a forget-all, from which the
// memory function deletes every record of the caller's, and no one
// else's.
func TestMemoryRoutes(t *testing.T) {
	s := start(t, nil)
	a1 := addRecord(s, "alice", "facts", "Lives in Oslo.")
	addRecord(s, "alice", "preferences", "Prefers tea.")
	b1 := addRecord(s, "bob", "facts", "Lives in Rome.")

	list := func(sub, query string) httpapi.MemoryResponse {
		t.Helper()
		code, body := s.Call(http.MethodGet, "/memory"+query, sub, "")
		if code != http.StatusOK {
			t.Fatalf("GET /memory%s: %d %s", query, code, body)
		}
		var out httpapi.MemoryResponse
		if err := json.Unmarshal([]byte(body), &out); err != nil {
			t.Fatal(err)
		}
		return out
	}
	page := list("alice", "?limit=1")
	if !page.Enabled || len(page.Records) != 1 || page.Records[0].Text != "Lives in Oslo." || page.NextCursor == "" {
		t.Fatalf("alice's first page: %+v", page)
	}
	if next := list("alice", "?limit=1&cursor="+page.NextCursor); len(next.Records) != 1 || next.Records[0].Text != "Prefers tea." || next.Records[0].Kind != "preferences" {
		t.Errorf("alice's second page: %+v", next)
	}
	if code, _ := s.Call(http.MethodGet, "/memory?cursor=not-a-cursor!", "alice", ""); code != http.StatusBadRequest {
		t.Errorf("a malformed cursor: %d, want 400", code)
	}
	if got := list("", ""); got.Enabled || len(got.Records) != 0 {
		t.Errorf("anonymous's memory: %+v", got)
	}

	if code, body := s.Call(http.MethodDelete, "/memory/"+b1, "alice", ""); code != http.StatusNotFound {
		t.Errorf("alice deleting bob's record: %d %s, want 404", code, body)
	}
	if code, body := s.Call(http.MethodDelete, "/memory/"+a1, "alice", ""); code != http.StatusNoContent {
		t.Errorf("alice deleting her record: %d %s, want 204", code, body)
	}
	if code, _ := s.Call(http.MethodDelete, "/memory/"+a1, "alice", ""); code != http.StatusNotFound {
		t.Errorf("deleting it again: %d, want 404", code)
	}

	if code, body := s.Call(http.MethodDelete, "/memory", "alice", ""); code != http.StatusNoContent {
		t.Fatalf("forget all: %d %s", code, body)
	}
	s.Drained(t)
	var left []string
	for _, r := range s.AgentCore.Records(agentcoretest.MemoryID) {
		left = append(left, r.Text)
	}
	if strings.Join(left, "|") != "Lives in Rome." {
		t.Errorf("after alice forgot all, the records are %q; want bob's alone", left)
	}
}

// TestAgentCoreUnavailable: a recall that AgentCore throttles or fails
// gives the turn no memory, and the turn succeeds; a mirror that fails is
// reported for the record, delivered again, counted in the metrics, and
// creates each event once.
func TestAgentCoreUnavailable(t *testing.T) {
	var metrics testkit.Buffer
	s := testkit.Start(t, testkit.Options{Env: map[string]string{"AGENTCORE_MEMORY_ID": agentcoretest.MemoryID}, Metrics: &metrics})
	addRecord(s, "alice", "facts", "My home is Oslo.")
	s.AgentCore.FailNext("RetrieveMemoryRecords", 1, agentcoretest.Throttled)
	s.AgentCore.FailNext("CreateEvent", 1, agentcoretest.Unavailable)
	s.Model.Enqueue(conversetest.Text("I do not know."))
	s.Chat(t, "alice", "s1", "Where is my home?")
	if text := lastUserText(s); strings.Contains(text, memory.RecallDescription) {
		t.Errorf("a throttled recall gave memory: %q", text)
	}
	if got := texts(t, events(s, "alice", "s1")); strings.Join(got, "|") != "USER: Where is my home?|ASSISTANT: I do not know." {
		t.Errorf("mirrored after a failed CreateEvent: %q", got)
	}
	if !strings.Contains(metrics.String(), `"StreamRecordsFailed":1`) {
		t.Errorf("no metrics line counts the failed record:\n%s", metrics.String())
	}
	s.Model.Enqueue(conversetest.Text("In Oslo."))
	s.Chat(t, "alice", "s1", "Where is my home?")
	if text := lastUserText(s); !strings.Contains(text, "My home is Oslo.") {
		t.Errorf("the next recall, with AgentCore back, gave no memory: %q", text)
	}
}

// TestSessionRecreatedUnderItsID: a session deleted and made again under
// its id keeps none of the earlier session's events, and its own are
// mirrored, though its commits' versions start again.
func TestSessionRecreatedUnderItsID(t *testing.T) {
	s := start(t, nil)
	s.Model.Enqueue(conversetest.Text("Teal, noted."))
	s.Chat(t, "alice", "daily", "My favourite colour is teal.")
	if code, body := s.Call(http.MethodDelete, "/sessions/daily", "alice", ""); code != http.StatusNoContent {
		t.Fatalf("DELETE /sessions/daily: %d %s", code, body)
	}
	s.Drained(t)
	s.Model.Enqueue(conversetest.Text("Rust, noted."))
	s.Chat(t, "alice", "daily", "I write Rust.")
	if got := texts(t, events(s, "alice", "daily")); strings.Join(got, "|") != "USER: I write Rust.|ASSISTANT: Rust, noted." {
		t.Errorf("the re-created session's events: %q", got)
	}
}

// TestRedactedInputNeverReachesAgentCore: an input the guardrail blocks is
// stored redacted before the mirror reads it, so AgentCore never gets it.
func TestRedactedInputNeverReachesAgentCore(t *testing.T) {
	s := start(t, map[string]string{"GUARDRAIL_ID": "gr1", "GUARDRAIL_VERSION": "1"})
	s.Model.Enqueue(conversetest.GuardrailInput("Sorry, the model cannot answer this question."))
	s.Chat(t, "alice", "g", "How do I hurt my neighbour?")
	got := texts(t, events(s, "alice", "g"))
	if len(got) == 0 || strings.Contains(strings.Join(got, "|"), "neighbour") {
		t.Errorf("mirrored %q; want the redacted input", got)
	}
}

// TestDocsAreTheCode: docs/memory.md's AgentCore Memory section states the
// filter, limits and defaults the code has.
func TestDocsAreTheCode(t *testing.T) {
	raw, err := os.ReadFile("../../docs/memory.md")
	if err != nil {
		t.Fatal(err)
	}
	doc := string(raw)
	for name, want := range map[string]string{
		"the forget filter": "```json\n" + memory.ForgetFilter + "\n```",
		"the namespace":     fmt.Sprintf("(`AGENTCORE_NAMESPACE`, default `%s`)", agentcore.DefaultNamespace),
		"top k":             fmt.Sprintf("top\n%d.", agentcore.DefaultTopK),
		"the timeout":       fmt.Sprintf("longer than %d seconds", agentcore.DefaultRecallTimeout/time.Second),
		"the budget":        fmt.Sprintf("within the same %d,%03d bytes", memory.DefaultRecallBytes/1000, memory.DefaultRecallBytes%1000),
	} {
		if !strings.Contains(doc, want) {
			t.Errorf("docs/memory.md lacks %s: %q", name, want)
		}
	}
}

// TestSearchMemory: search_memory searches AgentCore under the turn's
// owner's namespace path alone.
func TestSearchMemory(t *testing.T) {
	s := start(t, nil)
	addRecord(s, "alice", "facts", "Her cat is called Miso.")
	addRecord(s, "bob", "facts", "His cat is called Rex.")
	s.Model.Enqueue(conversetest.ToolUse("m1", memory.SearchToolName, map[string]string{"query": "cat name"}))
	s.Model.Enqueue(conversetest.Text("Miso."))
	s.Chat(t, "alice", "s1", "Hello there.")
	reqs := s.Model.Requests()
	result := reqs[len(reqs)-1].Messages
	got := result[len(result)-1].Content[0].ToolResult
	if got == nil {
		t.Fatal("the last request does not answer the tool use")
	}
	raw, _ := json.Marshal(got)
	if !strings.Contains(string(raw), "Miso") || strings.Contains(string(raw), "Rex") {
		t.Errorf("search_memory for alice answered %s", raw)
	}
}
