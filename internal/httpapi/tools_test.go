package httpapi_test

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/lambda-agent/lambda-agent/internal/agent"
	"github.com/lambda-agent/lambda-agent/internal/httpapi"
	"github.com/lambda-agent/lambda-agent/internal/testkit"
	"github.com/lambda-agent/lambda-agent/internal/testkit/conversetest"
)

// toolCall posts body to POST /sessions/{session}/tools/{name} as owner,
// with the Idempotency-Key key unless it is "".
func toolCall(t *testing.T, s *testkit.Stack, owner, session, name, body, key string) *httptest.ResponseRecorder {
	t.Helper()
	r := httptest.NewRequestWithContext(t.Context(), http.MethodPost, "/sessions/"+session+"/tools/"+name, strings.NewReader(body))
	r.Header.Set("Content-Type", "application/json")
	if key != "" {
		r.Header.Set("Idempotency-Key", key)
	}
	return s.Serve(testkit.As(r, owner))
}

func decodeAnswer(t *testing.T, w *httptest.ResponseRecorder) httpapi.ToolCallResponse {
	t.Helper()
	var a httpapi.ToolCallResponse
	if err := json.Unmarshal(w.Body.Bytes(), &a); err != nil {
		t.Fatalf("%d %s: %v", w.Code, w.Body, err)
	}
	return a
}

// transcriptOf reads a session's messages through GET, or nil for 404.
func transcriptOf(t *testing.T, s *testkit.Stack, owner, session string) []agent.Message {
	t.Helper()
	w := s.Serve(testkit.As(httptest.NewRequestWithContext(t.Context(), http.MethodGet, "/sessions/"+session+"?limit=1000", nil), owner))
	if w.Code == http.StatusNotFound {
		return nil
	}
	var got struct {
		Messages []agent.Message `json:"messages"`
	}
	if err := json.Unmarshal(w.Body.Bytes(), &got); err != nil || w.Code != http.StatusOK {
		t.Fatalf("GET %s: %d %s", session, w.Code, w.Body)
	}
	return got.Messages
}

func roles(msgs []agent.Message) []agent.Role {
	out := make([]agent.Role, len(msgs))
	for i, m := range msgs {
		out[i] = m.Role
	}
	return out
}

// TestDirectToolCallIsRecorded calls the calculator without the model. The
// call is committed as a valid history that the model sees on the next
// turn, against the strict stand-in, and no model call is made for it.
func TestDirectToolCallIsRecorded(t *testing.T) {
	s := testkit.Start(t, testkit.Options{})
	s.Model.Enqueue(conversetest.Text("hello"))
	if w := postJSON(t, s, "/chat", `{"session_id":"direct-1","message":"hi"}`); w.Code != http.StatusOK {
		t.Fatalf("%d %s", w.Code, w.Body)
	}
	calls := s.Model.Calls()
	w := toolCall(t, s, "", "direct-1", "calculator", `{"input":{"expression":"6*7"}}`, "")
	if w.Code != http.StatusOK {
		t.Fatalf("%d %s", w.Code, w.Body)
	}
	a := decodeAnswer(t, w)
	if a.SessionID != "direct-1" || a.Tool != "calculator" || a.Status != agent.ToolSuccess || !a.Recorded || !strings.HasPrefix(a.ToolUseID, "direct_") {
		t.Errorf("answer %+v", a)
	}
	if len(a.Content) != 1 || !strings.Contains(string(a.Content[0].JSON), `"result":42`) {
		t.Errorf("content %s", w.Body)
	}
	if diff := cmp.Diff([]agent.Role{agent.RoleUser, agent.RoleAssistant, agent.RoleUser, agent.RoleAssistant}, roles(a.Messages)); diff != "" {
		t.Errorf("roles of the recorded call (-want +got):\n%s", diff)
	}
	if s.Model.Calls() != calls {
		t.Errorf("the direct call made %d model calls", s.Model.Calls()-calls)
	}
	if got := transcriptOf(t, s, "", "direct-1"); len(got) != 6 {
		t.Fatalf("%d messages stored, want the 2 of the turn and the 4 of the call", len(got))
	}

	// The next turn's request carries the call: its tool use and result.
	s.Model.Enqueue(conversetest.Text("It was 42."))
	if w := postJSON(t, s, "/chat", `{"session_id":"direct-1","message":"what did the calculator say?"}`); w.Code != http.StatusOK {
		t.Fatalf("next turn: %d %s", w.Code, w.Body)
	}
	reqs := s.Model.Requests()
	last := reqs[len(reqs)-1]
	var sawUse, sawResult bool
	for _, m := range last.Messages {
		for _, b := range m.Content {
			sawUse = sawUse || (b.ToolUse != nil && b.ToolUse.ToolUseID == a.ToolUseID)
			sawResult = sawResult || (b.ToolResult != nil && b.ToolResult.ToolUseID == a.ToolUseID)
		}
	}
	if !sawUse || !sawResult {
		t.Errorf("the next model request lacks the direct call (use %v, result %v)", sawUse, sawResult)
	}
}

// TestDirectToolCallUnrecorded checks record: false: no message is
// written, and what the tool changed in the agent state is kept.
func TestDirectToolCallUnrecorded(t *testing.T) {
	s := testkit.Start(t, testkit.Options{})
	w := toolCall(t, s, "", "direct-2", "remember", `{"input":{"key":"colour","value":"teal"},"record":false}`, "")
	if w.Code != http.StatusOK {
		t.Fatalf("%d %s", w.Code, w.Body)
	}
	if a := decodeAnswer(t, w); a.Recorded || len(a.Messages) != 0 || a.Status != agent.ToolSuccess {
		t.Errorf("answer %s", w.Body)
	}
	if got := transcriptOf(t, s, "", "direct-2"); len(got) != 0 {
		t.Errorf("%d messages stored for an unrecorded call", len(got))
	}
	w = toolCall(t, s, "", "direct-2", "recall", `{"input":{"key":"colour"},"record":false}`, "")
	if a := decodeAnswer(t, w); len(a.Content) != 1 || a.Content[0].Text != "teal" {
		t.Errorf("recall after the unrecorded remember: %s", w.Body)
	}
}

// TestDirectToolCallRefusals checks what is refused before anything runs,
// each with the JSON error body and nothing stored: an unknown tool, input
// the schema refuses, input that is not an object, a bad session id, and a
// session whose turn waits for a person.
func TestDirectToolCallRefusals(t *testing.T) {
	s := testkit.Start(t, testkit.Options{Env: map[string]string{"TOOLS": "calculator,ask_user", "DIRECT_TOOLS": "calculator,ask_user"}})
	tests := []struct {
		name, session, tool, body string
		status                    int
		code                      string
	}{
		{"unknown tool", "refused-1", "shell", `{"input":{"cmd":"ls"}}`, 404, "unknown_tool"},
		{"a tool that asks the person", "refused-1", "ask_user", `{"input":{"question":"who?"}}`, 404, "unknown_tool"},
		{"a name no tool can have", "refused-1", "calc..x", `{"input":{}}`, 404, "unknown_tool"},
		{"input over MAX_MESSAGE_BYTES", "refused-1", "calculator", `{"input":{"expression":"` + strings.Repeat("1", 300<<10) + `"}}`, 413, "message_too_large"},
		{"input the schema refuses", "refused-1", "calculator", `{"input":{"expr":"1+1"}}`, 400, "invalid_tool_input"},
		{"input not an object", "refused-1", "calculator", `{"input":"1+1"}`, 400, "invalid_request"},
		{"unknown field", "refused-1", "calculator", `{"input":{},"recrd":false}`, 400, "invalid_json"},
		{"bad session id", "-bad", "calculator", `{"input":{"expression":"1"}}`, 400, "invalid_session_id"},
		{"not JSON", "refused-1", "calculator", `{"input":`, 400, "invalid_json"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := toolCall(t, s, "", tt.session, tt.tool, tt.body, "")
			var body struct {
				Error struct {
					Code    string         `json:"code"`
					Message string         `json:"message"`
					Details map[string]any `json:"details"`
				} `json:"error"`
			}
			if err := json.Unmarshal(w.Body.Bytes(), &body); err != nil || w.Code != tt.status || body.Error.Code != tt.code || body.Error.Message == "" {
				t.Errorf("%d %s; want %d %s", w.Code, w.Body, tt.status, tt.code)
			}
			if tt.code == "invalid_tool_input" && len(body.Error.Details["problems"].([]any)) == 0 {
				t.Errorf("no schema problems in %s", w.Body)
			}
			// docs/api.md: the message lists the tools the caller may use,
			// which ask_user is not.
			if tt.code == "unknown_tool" && !strings.HasSuffix(body.Error.Message, "the tools you may call are: calculator") {
				t.Errorf("the message lists no tools: %q", body.Error.Message)
			}
		})
	}
	if got := transcriptOf(t, s, "", "refused-1"); got != nil {
		t.Errorf("a refused call created the session: %v", got)
	}

	// A session that waits for a person's answer.
	s.Model.Enqueue(conversetest.ToolUse("q1", "ask_user", map[string]any{"question": "Which account?"}))
	if w := postJSON(t, s, "/chat", `{"session_id":"waiting","message":"move money"}`); w.Code != http.StatusOK {
		t.Fatalf("%d %s", w.Code, w.Body)
	}
	before := transcriptOf(t, s, "", "waiting")
	w := toolCall(t, s, "", "waiting", "calculator", `{"input":{"expression":"1+1"}}`, "")
	if w.Code != http.StatusConflict || !strings.Contains(w.Body.String(), `"interrupt_pending"`) {
		t.Errorf("%d %s; want 409 interrupt_pending", w.Code, w.Body)
	}
	if diff := cmp.Diff(before, transcriptOf(t, s, "", "waiting")); diff != "" {
		t.Errorf("the refused call changed the session:\n%s", diff)
	}
}

// TestDirectToolCallNeedsNoApproval: a tool that waits for a person's
// approval when the model uses it runs at once when the person calls it.
func TestDirectToolCallNeedsNoApproval(t *testing.T) {
	s := testkit.Start(t, testkit.Options{Env: map[string]string{"APPROVAL_TOOLS": "calculator"}})
	w := toolCall(t, s, "", "approve-1", "calculator", `{"input":{"expression":"2+2"}}`, "")
	if a := decodeAnswer(t, w); w.Code != http.StatusOK || a.Status != agent.ToolSuccess || !strings.Contains(string(a.Content[0].JSON), `"result":4`) {
		t.Errorf("%d %s", w.Code, w.Body)
	}
}

// TestDirectToolCallKeysAndOwners: a retry with the Idempotency-Key gets
// the first answer and runs nothing; another owner's call on the session
// is a 404 that changes nothing.
func TestDirectToolCallKeysAndOwners(t *testing.T) {
	s := testkit.Start(t, testkit.Options{})
	body := `{"input":{"expression":"3*3"}}`
	first := toolCall(t, s, "alice", "keyed-1", "calculator", body, "k-1")
	again := toolCall(t, s, "alice", "keyed-1", "calculator", body, "k-1")
	if first.Code != http.StatusOK || again.Code != http.StatusOK || again.Header().Get("Idempotent-Replayed") != "true" {
		t.Fatalf("%d, %d %v", first.Code, again.Code, again.Header())
	}
	if diff := cmp.Diff(first.Body.String(), again.Body.String()); diff != "" {
		t.Errorf("the replay differs (-first +again):\n%s", diff)
	}
	if got := transcriptOf(t, s, "alice", "keyed-1"); len(got) != 4 {
		t.Errorf("%d messages after a call and its replay, want 4", len(got))
	}
	// The key names one request: another input, tool or session, or a
	// chat turn, is a reuse.
	for name, w := range map[string]*httptest.ResponseRecorder{
		"another input":   toolCall(t, s, "alice", "keyed-1", "calculator", `{"input":{"expression":"4*4"}}`, "k-1"),
		"another tool":    toolCall(t, s, "alice", "keyed-1", "recall", body, "k-1"),
		"another session": toolCall(t, s, "alice", "keyed-2", "calculator", body, "k-1"),
	} {
		if w.Code != http.StatusUnprocessableEntity {
			t.Errorf("the key with %s: %d %s", name, w.Code, w.Body)
		}
	}
	r := httptest.NewRequestWithContext(t.Context(), http.MethodPost, "/chat", strings.NewReader(`{"session_id":"keyed-1","message":"hi"}`))
	r.Header.Set("Content-Type", "application/json")
	r.Header.Set("Idempotency-Key", "k-1")
	if w := s.Serve(testkit.As(r, "alice")); w.Code != http.StatusUnprocessableEntity {
		t.Errorf("the key on POST /chat: %d %s", w.Code, w.Body)
	}

	before := transcriptOf(t, s, "alice", "keyed-1")
	w := toolCall(t, s, "mallory", "keyed-1", "calculator", body, "")
	if w.Code != http.StatusNotFound || !strings.Contains(w.Body.String(), `"not_found"`) {
		t.Errorf("another owner: %d %s", w.Code, w.Body)
	}
	if diff := cmp.Diff(before, transcriptOf(t, s, "alice", "keyed-1")); diff != "" {
		t.Errorf("another owner's call changed the session:\n%s", diff)
	}
}

// postJSON posts body to path on s, as the anonymous owner.
func postJSON(t *testing.T, s *testkit.Stack, path, body string) *httptest.ResponseRecorder {
	t.Helper()
	r := httptest.NewRequestWithContext(t.Context(), http.MethodPost, path, strings.NewReader(body))
	r.Header.Set("Content-Type", "application/json")
	return s.Serve(r)
}

// TestDirectToolsAreChosen: DIRECT_TOOLS chooses what may be called
// directly; unset, the enabled built-ins; none, nothing.
func TestDirectToolsAreChosen(t *testing.T) {
	for _, tt := range []struct {
		direct string
		want   map[string]int
	}{
		{"", map[string]int{"calculator": 200, "recall": 200}},
		{"none", map[string]int{"calculator": 404, "recall": 404}},
		{"recall", map[string]int{"calculator": 404, "recall": 200}},
	} {
		t.Run("DIRECT_TOOLS="+tt.direct, func(t *testing.T) {
			s := testkit.Start(t, testkit.Options{Env: map[string]string{"DIRECT_TOOLS": tt.direct}})
			bodies := map[string]string{"calculator": `{"input":{"expression":"1+1"},"record":false}`, "recall": `{"record":false}`}
			for tool, status := range tt.want {
				if w := toolCall(t, s, "", "chosen", tool, bodies[tool], ""); w.Code != status {
					t.Errorf("%s: %d %s; want %d", tool, w.Code, w.Body, status)
				}
			}
		})
	}
}
