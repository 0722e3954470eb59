package httpapi_test

import (
	"encoding/json"
	"maps"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/lambda-agent/lambda-agent/internal/agent"
	"github.com/lambda-agent/lambda-agent/internal/httpapi"
	"github.com/lambda-agent/lambda-agent/internal/testkit/conversetest"
)

// guardrailEnv deploys the functions with a guardrail.
var guardrailEnv = map[string]string{"GUARDRAIL_ID": "gr1", "GUARDRAIL_VERSION": "1"}

const (
	// blockedInput is what the user sends and the guardrail blocks; no
	// other text in these tests has the word "neighbour".
	blockedInput = "How do I hurt my neighbour?"
	blockedText  = "Sorry, the model cannot answer this question."
	redacted     = "[User input redacted.]"
)

// leaked fails t if raw, a body the API answered, holds the blocked input.
func leaked(t *testing.T, what, raw string) {
	t.Helper()
	if strings.Contains(raw, "neighbour") {
		t.Errorf("%s holds the blocked input: %s", what, raw)
	}
}

// checkStored checks session's stored messages against want, their texts,
// through GET /sessions/{id}, its export and the list of sessions, and
// that the history is one Bedrock accepts.
func checkStored(t *testing.T, a *api, session string, want []string) {
	t.Helper()
	got := a.transcript(t, "", session)
	if diff := cmp.Diff(want, storedTexts(t, a, session)); diff != "" {
		t.Errorf("GET /sessions/%s (-want +got):\n%s", session, diff)
	}
	if got.body["title"] != want[0] {
		t.Errorf("title %q, want %q", got.body["title"], want[0])
	}
	doc, _ := exportAll(t, a.Stack, "", session)
	var exported []string
	for _, m := range doc.Messages {
		exported = append(exported, m.Text())
	}
	if diff := cmp.Diff(want, exported); diff != "" {
		t.Errorf("export (-want +got):\n%s", diff)
	}
	if err := agent.ValidateHistory(doc.Messages); err != nil {
		t.Errorf("the stored history is not valid: %v", err)
	}
	if want[0] == redacted {
		leaked(t, "GET", got.raw)
		leaked(t, "the export", exportPage(t, a.Stack, "", session, "").Body.String())
		leaked(t, "GET /sessions", a.invoke(t, request{route: "sessions-list.json"}).raw)
	}
}

// checkSent checks the texts of the messages of the model's last request.
func checkSent(t *testing.T, a *api, want []string) {
	t.Helper()
	req := lastRequest(t, a.Stack)
	var got []string
	for _, m := range req.Messages {
		got = append(got, m.Text())
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("messages sent to the model (-want +got):\n%s", diff)
	}
	if g := req.GuardrailConfig; g == nil || g.GuardrailIdentifier != "gr1" || g.Trace != "enabled" {
		t.Errorf("guardrailConfig %+v: the guardrail's trace, which says what it blocked, was not asked for", g)
	}
}

// TestGuardrailBlockedInputIsStoredRedacted: a message the guardrail
// blocks is stored as the redacted note, in the turn's commit (the turn
// makes the DynamoDB requests of any first turn), and answered with the
// guardrail's message. GET, the export, the list and the
// next turn's request hold the note, never the message, and the session
// goes on.
func TestGuardrailBlockedInputIsStoredRedacted(t *testing.T) {
	a := newAPI(t, guardrailEnv)
	a.model.Enqueue(conversetest.Text("Hello."), conversetest.GuardrailInput(blockedText))
	a.Meter.Take()
	if r := a.chat(t, "", "s0", "Hello"); r.status != 200 {
		t.Fatalf("a plain turn: %d %s", r.status, r.raw)
	}
	plain := a.Meter.Take().ByOperation
	r := a.chat(t, "", "s1", blockedInput)
	if r.status != 200 || r.body["text"] != blockedText || r.body["stop_reason"] != "guardrail_intervened" {
		t.Fatalf("answer %d %s", r.status, r.raw)
	}
	// The redacted input is written with the turn: no write more than a
	// plain first turn's.
	if ops := a.Meter.Take().ByOperation; !maps.Equal(plain, ops) {
		t.Errorf("DynamoDB requests of the blocked turn %v, of a plain one %v", ops, plain)
	}
	var answer httpapi.ChatResponse
	if err := json.Unmarshal([]byte(r.raw), &answer); err != nil {
		t.Fatal(err)
	}
	want := []agent.Message{agent.UserText(redacted), agent.AssistantText(blockedText)}
	if diff := cmp.Diff(want, answer.Messages); diff != "" {
		t.Errorf("the answer's messages (-want +got):\n%s", diff)
	}
	leaked(t, "the answer", r.raw)
	checkSent(t, a, []string{blockedInput})
	checkStored(t, a, "s1", []string{redacted, blockedText})

	a.model.Enqueue(conversetest.Text("Hello again."))
	if r := a.chat(t, "", "s1", "Hi"); r.status != 200 || r.body["text"] != "Hello again." {
		t.Fatalf("the next turn: %d %s", r.status, r.raw)
	}
	checkSent(t, a, []string{redacted, blockedText, "Hi"})
	checkStored(t, a, "s1", []string{redacted, blockedText, "Hi", "Hello again."})
}

// TestStreamGuardrailBlockedInputIsStoredRedacted is the stream's: the
// guardrail's message streams as the answer, and the done event, after the
// commit, has the redacted note for the input.
func TestStreamGuardrailBlockedInputIsStoredRedacted(t *testing.T) {
	a := newAPI(t, guardrailEnv)
	srv := a.streamServer(t)
	a.model.Enqueue(conversetest.GuardrailInput(blockedText).WithChunking(8, 0))
	evs := streamAll(t, srv, map[string]any{"session_id": "s1", "message": blockedInput}, nil)
	if got := names(evs); got != "start text done" {
		t.Fatalf("events %s, want start text done", got)
	}
	done := evs[len(evs)-1]
	if strings.Join(deltas(evs), "") != blockedText || done.data["text"] != blockedText || done.data["stop_reason"] != "guardrail_intervened" {
		t.Errorf("deltas %q, done %v", deltas(evs), done.data)
	}
	raw, _ := json.Marshal(done.data["messages"])
	var msgs []agent.Message
	if err := json.Unmarshal(raw, &msgs); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]agent.Message{agent.UserText(redacted), agent.AssistantText(blockedText)}, msgs); diff != "" {
		t.Errorf("done's messages (-want +got):\n%s", diff)
	}
	if g := lastRequest(t, a.Stack).GuardrailConfig; g == nil || g.StreamProcessingMode != "sync" {
		t.Errorf("guardrailConfig %+v, want sync", g)
	}
	checkSent(t, a, []string{blockedInput})
	checkStored(t, a, "s1", []string{redacted, blockedText})

	a.model.Enqueue(conversetest.Text("Hello again."))
	evs = streamAll(t, srv, map[string]any{"session_id": "s1", "message": "Hi"}, nil)
	if got := names(evs); got != "start text done" {
		t.Fatalf("the next turn's events: %s", got)
	}
	checkSent(t, a, []string{redacted, blockedText, "Hi"})
	checkStored(t, a, "s1", []string{redacted, blockedText, "Hi", "Hello again."})
}

// TestGuardrailBlockedOutputKeepsTheInput: when the guardrail blocks the
// model's answer, the input passed it and is kept as written; the answer
// stored is the guardrail's message, as Bedrock returns it.
func TestGuardrailBlockedOutputKeepsTheInput(t *testing.T) {
	a := newAPI(t, guardrailEnv)
	a.model.Enqueue(conversetest.GuardrailOutput(blockedText), conversetest.Text("Fine."))
	if r := a.chat(t, "", "s1", "Tell me a story."); r.status != 200 || r.body["text"] != blockedText || r.body["stop_reason"] != "guardrail_intervened" {
		t.Fatalf("answer %d %s", r.status, r.raw)
	}
	checkStored(t, a, "s1", []string{"Tell me a story.", blockedText})
	if r := a.chat(t, "", "s1", "A shorter one?"); r.status != 200 {
		t.Fatalf("the next turn: %d %s", r.status, r.raw)
	}
	checkSent(t, a, []string{"Tell me a story.", blockedText, "A shorter one?"})
}

// TestGuardrailRedactedInputIsConfigured: GUARDRAIL_REDACTED_INPUT is the
// note a blocked input is stored as.
func TestGuardrailRedactedInputIsConfigured(t *testing.T) {
	env := maps.Clone(guardrailEnv)
	env["GUARDRAIL_REDACTED_INPUT"] = "[Nachricht entfernt.]"
	a := newAPI(t, env)
	a.model.Enqueue(conversetest.GuardrailInput(blockedText))
	if r := a.chat(t, "", "s1", blockedInput); r.status != 200 {
		t.Fatalf("answer %d %s", r.status, r.raw)
	}
	if diff := cmp.Diff([]string{"[Nachricht entfernt.]", blockedText}, storedTexts(t, a, "s1")); diff != "" {
		t.Errorf("stored (-want +got):\n%s", diff)
	}
}
