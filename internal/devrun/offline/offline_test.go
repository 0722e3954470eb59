package offline_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/lambda-agent/lambda-agent/internal/agent"
	"github.com/lambda-agent/lambda-agent/internal/devrun/offline"
	"github.com/lambda-agent/lambda-agent/internal/httpapi"
	"github.com/lambda-agent/lambda-agent/internal/testkit"
	"github.com/lambda-agent/lambda-agent/internal/testkit/conversetest"
	"github.com/lambda-agent/lambda-agent/internal/tools"
	"github.com/lambda-agent/lambda-agent/internal/turn"
)

// weatherInput and forecast are a tool the offline model knows nothing
// about, as a user's own tool would be: the one docs/tools.md shows.
type weatherInput struct {
	City string `json:"city" jsonschema:"the city, e.g. Lisbon"`
	Days int    `json:"days,omitempty" jsonschema:"forecast days, 1 to 7"`
}

type forecast struct {
	City    string `json:"city"`
	Days    int    `json:"days"`
	Summary string `json:"summary"`
}

// newAgent returns an agent with the built-in tools and weather on the
// offline model, reached through the real SDK client, and the inputs the
// weather tool was called with.
func newAgent(t *testing.T) (*agent.Agent, *[]weatherInput) {
	t.Helper()
	s := offline.NewServer()
	t.Cleanup(func() {
		testkit.CheckModel(t, s)
		s.Close()
	})
	var calls []weatherInput // the agent runs one tool at a time here
	weather, err := agent.NewFuncTool("weather", "Get the weather forecast for a city.",
		func(_ context.Context, _ *agent.ToolCall, in weatherInput) (forecast, error) {
			calls = append(calls, in)
			return forecast{City: in.City, Days: max(in.Days, 1), Summary: "sunny"}, nil
		})
	if err != nil {
		t.Fatal(err)
	}
	builtins, err := tools.ByName(tools.Names)
	if err != nil {
		t.Fatal(err)
	}
	a, err := agent.New(agent.Config{
		Model: testkit.BedrockModel(t, s, "offline"),
		Tools: append(builtins, weather),
		Retry: testkit.FastRetry,
	})
	if err != nil {
		t.Fatal(err)
	}
	return a, &calls
}

// run runs one turn of conv and returns its result, with conv moved past it.
func run(t *testing.T, a *agent.Agent, conv *agent.Conversation, text string) *agent.Result {
	t.Helper()
	res, err := a.Run(t.Context(), conv, []agent.ContentBlock{agent.Text(text)})
	if err != nil {
		t.Fatalf("%q: %v", text, err)
	}
	conv.Messages = append(conv.Messages, res.Messages...)
	conv.Window, conv.State = res.Window, res.State
	return res
}

// toolUses returns the tool uses of a turn.
func toolUses(res *agent.Result) []*agent.ToolUseBlock {
	var out []*agent.ToolUseBlock
	for _, m := range res.Messages {
		out = append(out, m.ToolUses()...)
	}
	return out
}

// doubled finds a period right after the end of a sentence, as in "1200.."
// or `"Hi.".`; an ellipsis is not one.
var doubled = regexp.MustCompile(`[.!?]["'”’)\]]*\.`)

func checkPunctuation(t *testing.T, text string) {
	t.Helper()
	if m := doubled.FindString(strings.ReplaceAll(text, "...", "…")); m != "" {
		t.Errorf("doubled period %q in %q", m, text)
	}
}

func TestAnswers(t *testing.T) {
	tests := []struct {
		name string
		// turns are sent in one conversation; the last one's answer is
		// checked.
		turns []string
		want  string
		// wantCalls are the tools the last turn called, by name.
		wantCalls []string
	}{
		{"echo", []string{"Hi."}, `You said: "Hi." I have seen 1 message in this conversation. (This is the offline model; with AWS credentials the local run talks to Bedrock.)`, nil},
		{"echo without a period", []string{"Hi"}, `You said: "Hi". I have seen 1 message in this conversation.`, nil},
		{"echo counts", []string{"Hi", "Hi again!"}, `You said: "Hi again!" I have seen 3 messages in this conversation.`, nil},
		{"calculator", []string{"What is 25*48?"}, "The calculator tool returned: 25*48 = 1200.", []string{"calculator"}},
		{"large result", []string{"What is 12345 * 10000?"}, "The calculator tool returned: 12345 * 10000 = 123450000.", []string{"calculator"}},
		{"overflow", []string{"What is 1e308*10?"}, "The calculator tool reported an error: The tool failed: calc: result out of range at offset 5.", []string{"calculator"}},
		{"remember", []string{"Remember that my favourite colour is teal."}, "The remember tool returned: Remembered favourite_colour.", []string{"remember"}},
		{"recall", []string{"Remember that my favourite colour is teal.", "What is my favourite colour?"}, "The recall tool returned: teal.", []string{"recall"}},
		{"time", []string{"What time is it?"}, `The current_time tool returned: {"time":"`, []string{"current_time"}},
		{"a tool of the user's", []string{`/tool weather {"city":"Paris"}`}, `The weather tool returned: {"city":"Paris","days":1,"summary":"sunny"}.`, []string{"weather"}},
		{"input in several lines", []string{"/tool weather {\n  \"city\": \"Oslo\",\n  \"days\": 3\n}"}, `The weather tool returned: {"city":"Oslo","days":3,"summary":"sunny"}.`, []string{"weather"}},
		{"no input", []string{"/tool current_time"}, `The current_time tool returned: {"time":"`, []string{"current_time"}},
		{"a built-in tool", []string{`/tool calculator {"expression": "2^10"}`}, "The calculator tool returned: 2^10 = 1024.", []string{"calculator"}},
		{"input against the schema", []string{`/tool weather {"town":"Paris"}`}, "The weather tool reported an error: The input does not match the tool's schema:\n- ", []string{"weather"}},
		{"unknown tool", []string{`/tool wether {"city":"Paris"}`}, `There is no tool named "wether" here. I have 5 tools: calculator, current_time, remember, recall, weather.`, nil},
		{"invalid JSON", []string{`/tool weather {"city":`}, `The input for weather is not valid JSON (unexpected end of JSON input). Send a JSON object, such as: /tool weather {"city":"example"}`, nil},
		{"not an object", []string{`/tool weather ["Paris"]`}, `The input for weather must be a JSON object, such as: /tool weather {"city":"example"}`, nil},
		{"usage", []string{"/tool"}, `To call a tool, send /tool NAME {JSON input}. For example: /tool calculator {"expression":"example"}. I have 5 tools: calculator, current_time, remember, recall, weather.`, nil},
		{"not the command", []string{"/toolbox"}, `You said: "/toolbox". I have seen 1 message`, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a, weather := newAgent(t)
			conv := &agent.Conversation{}
			var res *agent.Result
			for _, text := range tt.turns {
				res = run(t, a, conv, text)
				checkPunctuation(t, res.Text)
			}
			if !strings.HasPrefix(res.Text, tt.want) {
				t.Errorf("answer\n%s\nwant it to start with\n%s", res.Text, tt.want)
			}
			var called []string
			for _, u := range toolUses(res) {
				called = append(called, u.Name)
			}
			if diff := cmp.Diff(tt.wantCalls, called); diff != "" {
				t.Errorf("tool calls (-want +got):\n%s", diff)
			}
			if want := 1 + len(tt.wantCalls); res.Metrics.Cycles != want {
				t.Errorf("%d cycles, want %d", res.Metrics.Cycles, want)
			}
			if strings.Contains(tt.name, "user's") && (len(*weather) != 1 || (*weather)[0].City != "Paris") {
				t.Errorf("weather was called with %+v", *weather)
			}
		})
	}
}

// TestCalculatorGetsTheWholeExpression: what the calculator gets is the
// whole expression of the sentence.
func TestCalculatorGetsTheWholeExpression(t *testing.T) {
	a, _ := newAgent(t)
	res := run(t, a, &agent.Conversation{}, "What is 1e308*10?")
	uses := toolUses(res)
	if len(uses) != 1 || string(uses[0].Input) != `{"expression":"1e308*10"}` {
		t.Fatalf("tool uses %+v", uses)
	}
}

func TestSummary(t *testing.T) {
	for _, tt := range []struct {
		transcript, want string
	}{
		{"Conversation to summarize:\nUser: Hi\n", "(offline summary) The conversation had 1 line before this point."},
		{"Summary of what came before:\nThey met.\n\nConversation to summarize:\nUser: Hi\nAssistant: Hello\n", "(offline summary) The conversation had 2 lines before this point."},
	} {
		req := &conversetest.Request{
			System:   []conversetest.SystemBlock{{Text: agent.DefaultSummaryPrompt}},
			Messages: []conversetest.Message{{Role: "user", Content: []conversetest.ContentBlock{{Text: tt.transcript}}}},
		}
		reply := offline.Respond(req)
		if got := reply.Content[0].Text; got != tt.want {
			t.Errorf("summary of %q = %q, want %q", tt.transcript, got, tt.want)
		}
	}
}

// TestSeveralResults: a turn that called several tools gets one sentence
// for each result, without doubled periods.
func TestSeveralResults(t *testing.T) {
	req := &conversetest.Request{Messages: []conversetest.Message{
		{Role: "user", Content: []conversetest.ContentBlock{{Text: "go"}}},
		{Role: "assistant", Content: []conversetest.ContentBlock{
			{ToolUse: &conversetest.ToolUseBlock{ToolUseID: "a", Name: "remember", Input: json.RawMessage(`{}`)}},
			{ToolUse: &conversetest.ToolUseBlock{ToolUseID: "b", Name: "calculator", Input: json.RawMessage(`{}`)}},
		}},
		{Role: "user", Content: []conversetest.ContentBlock{
			{ToolResult: &conversetest.ToolResultBlock{ToolUseID: "a", Content: []conversetest.ToolResultContent{{Text: "Remembered x."}, {Text: "Twice!"}}}},
			{ToolResult: &conversetest.ToolResultBlock{ToolUseID: "b", Status: "error", Content: []conversetest.ToolResultContent{{Text: "The tool failed: calc: division by zero at offset 1"}}}},
		}},
	}}
	got := offline.Respond(req).Content[0].Text
	want := "The remember tool returned: Remembered x; Twice! The calculator tool reported an error: The tool failed: calc: division by zero at offset 1."
	if got != want {
		t.Errorf("got  %q\nwant %q", got, want)
	}
}

// TestDenial: after a person denies a tool use, the answer says so plainly,
// with their message, rather than report the denial as the tool's error.
func TestDenial(t *testing.T) {
	s := offline.NewServer()
	t.Cleanup(func() {
		testkit.CheckModel(t, s)
		s.Close()
	})
	builtins, err := tools.ByName([]string{"calculator", "remember"})
	if err != nil {
		t.Fatal(err)
	}
	a, err := agent.New(agent.Config{
		Model: testkit.BedrockModel(t, s, "offline"),
		Tools: []agent.Tool{agent.RequireApproval(builtins[0]), agent.RequireApproval(builtins[1])},
		Retry: testkit.FastRetry,
	})
	if err != nil {
		t.Fatal(err)
	}
	deny := false
	for _, tt := range []struct {
		name, text, message, want string
	}{
		{"calculator", "What is 99/3?", "No more sums today.", "You denied the calculation of 99/3, so I did not calculate it. Your message: No more sums today."},
		{"without a message", "What is 99/3?", "", "You denied the calculation of 99/3, so I did not calculate it."},
		{"another tool", "Remember that my favourite colour is teal.", "not now", "You denied the call to the remember tool, so it did not run. Your message: not now."},
	} {
		t.Run(tt.name, func(t *testing.T) {
			conv := &agent.Conversation{}
			res := run(t, a, conv, tt.text)
			if res.StopReason != agent.StopInterrupt || len(res.Pending.Interrupts) != 1 {
				t.Fatalf("stop reason %s, pending %+v", res.StopReason, res.Pending)
			}
			conv.Pending = res.Pending
			id := res.Pending.Interrupts[0].ID
			ans, err := a.Answer(t.Context(), conv, []agent.Response{{InterruptID: id, Approve: &deny, Message: tt.message}}, nil)
			if err != nil {
				t.Fatal(err)
			}
			conv.Messages = append(conv.Messages, ans.Messages...)
			conv.Pending = nil
			res, err = a.Continue(t.Context(), conv, nil)
			if err != nil {
				t.Fatal(err)
			}
			if res.Text != tt.want {
				t.Errorf("answer\n%s\nwant\n%s", res.Text, tt.want)
			}
			checkPunctuation(t, res.Text)
		})
	}
}

// docsStructured is the structured example of docs/local-run.md.
const docsStructured = `{"session_id":"demo","prompt":"Ada Lovelace was born in London in 1815.","name":"person","schema":{"type":"object","properties":{"name":{"type":"string"},"born":{"type":"integer"}},"required":["name","born"]}}`

// TestStructured runs the structured example of docs/local-run.md through
// the stack on the offline model: an object built from the schema, not
// extracted from the prompt, in one cycle.
func TestStructured(t *testing.T) {
	page, err := testkit.Doc("docs/local-run.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{docsStructured, `"data":{"born":1,"name":"example"}`} {
		if !strings.Contains(page, want) {
			t.Errorf("docs/local-run.md no longer says %s", want)
		}
	}
	s := testkit.Start(t, testkit.Options{})
	s.Model.Responder = offline.Respond
	r := httptest.NewRequestWithContext(t.Context(), http.MethodPost, "/structured", strings.NewReader(docsStructured))
	r.Header.Set("Content-Type", "application/json")
	w := s.Serve(r)
	if w.Code != http.StatusOK {
		t.Fatalf("%d %s", w.Code, w.Body)
	}
	var got turn.StructuredAnswer
	if err := json.Unmarshal(w.Body.Bytes(), &got); err != nil {
		t.Fatal(err)
	}
	got.Metrics.DurationMS = 0
	want := turn.StructuredAnswer{
		SessionID: "demo",
		Data:      json.RawMessage(`{"born":1,"name":"example"}`),
		Attempts:  1,
		Usage:     got.Usage, // the stand-in's estimate
		Metrics:   turn.Metrics{Cycles: 1, ModelCalls: 1},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("answer (-want +got):\n%s", diff)
	}
}

// TestMemoryAcrossSessions runs the offline model as both the agent's
// model and memory's extraction model, on the stack with memory on: a fact
// told in one session is learned from its commit, recalled into a turn of
// another session and answered from there; a new value replaces it; a
// forget deletes it.
func TestMemoryAcrossSessions(t *testing.T) {
	s := testkit.Start(t, testkit.Options{Env: map[string]string{"MEMORY": "on"}})
	s.Model.Responder, s.MemoryModel.Responder = offline.Respond, offline.Respond
	chat := func(session, message string) string {
		t.Helper()
		body, _ := json.Marshal(map[string]string{"session_id": session, "message": message})
		r := httptest.NewRequestWithContext(t.Context(), http.MethodPost, "/chat", strings.NewReader(string(body)))
		r.Header.Set("Content-Type", "application/json")
		w := s.Serve(testkit.As(r, "alice"))
		if w.Code != http.StatusOK {
			t.Fatalf("chat %q: %d %s", message, w.Code, w.Body)
		}
		var got httpapi.ChatResponse
		if err := json.Unmarshal(w.Body.Bytes(), &got); err != nil {
			t.Fatal(err)
		}
		if err := s.Stream.Drain(t.Context()); err != nil {
			t.Fatal(err)
		}
		if f := s.Stream.Failed(); len(f) > 0 {
			t.Fatalf("%d stream records failed; logs:\n%s", len(f), s.Logs)
		}
		return got.Text
	}
	records := func() []string {
		t.Helper()
		r := httptest.NewRequestWithContext(t.Context(), http.MethodGet, "/memory", nil)
		w := s.Serve(testkit.As(r, "alice"))
		var got httpapi.MemoryResponse
		if err := json.Unmarshal(w.Body.Bytes(), &got); err != nil || w.Code != http.StatusOK || !got.Enabled {
			t.Fatalf("GET /memory: %d %s", w.Code, w.Body)
		}
		var out []string
		for _, r := range got.Records {
			out = append(out, r.Kind+": "+r.Text)
		}
		return out
	}

	chat("first", "Hello! My favourite colour is teal, and I like green tea.")
	if diff := cmp.Diff([]string{"fact: The person's favourite colour is teal.", "preference: The person likes green tea."}, sorted(records())); diff != "" {
		t.Errorf("memory after the first session (-want +got):\n%s", diff)
	}
	if got, want := chat("second", "What is my favourite colour?"), "From memory: The person's favourite colour is teal."; got != want {
		t.Errorf("the second session answers %q, want %q", got, want)
	}
	if got := chat("second", "Hi"); !strings.HasPrefix(got, `You said: "Hi".`) {
		t.Errorf("with a preference recalled into every turn, an echo says %q", got)
	}
	chat("third", "Actually, my favourite colour is orange.")
	if diff := cmp.Diff([]string{"fact: The person's favourite colour is orange.", "preference: The person likes green tea."}, sorted(records())); diff != "" {
		t.Errorf("memory after a new value (-want +got):\n%s", diff)
	}
	chat("third", "Please forget my favourite colour.")
	if diff := cmp.Diff([]string{"preference: The person likes green tea."}, records()); diff != "" {
		t.Errorf("memory after a forget (-want +got):\n%s", diff)
	}
	if got := chat("fourth", "What is my favourite colour?"); strings.Contains(got, "orange") || strings.Contains(got, "teal") {
		t.Errorf("after the forget, the answer is %q", got)
	}
}

func sorted(s []string) []string {
	slices.Sort(s)
	return s
}
