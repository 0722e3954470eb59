package agent_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/lambda-agent/lambda-agent/internal/agent"
	"github.com/lambda-agent/lambda-agent/internal/schema"
	"github.com/lambda-agent/lambda-agent/internal/testkit/conversetest"
)

const personSchema = `{
	"type": "object",
	"properties": {
		"name": {"type": "string", "minLength": 1},
		"age": {"type": "integer", "minimum": 0}
	},
	"required": ["name", "age"],
	"additionalProperties": false
}`

func personRequest(t *testing.T) agent.StructuredRequest {
	t.Helper()
	s, err := schema.Compile(json.RawMessage(personSchema))
	if err != nil {
		t.Fatal(err)
	}
	return agent.StructuredRequest{Prompt: input("Ada Lovelace was 36."), Schema: s, Name: "person"}
}

func TestStructuredFirstAttempt(t *testing.T) {
	s := newServer(t)
	s.Enqueue(conversetest.ToolUse("p1", "person", map[string]any{"name": "Ada", "age": 36}))
	a := newAgent(t, s, agent.Config{})
	conv := longConversation(2)
	res, err := a.Structured(t.Context(), conv, personRequest(t))
	if err != nil {
		t.Fatal(err)
	}
	if string(res.Data) != `{"age":36,"name":"Ada"}` || res.Attempts != 1 {
		t.Errorf("data %s after %d attempts", res.Data, res.Attempts)
	}
	req := s.Requests()[0]
	if req.ToolConfig == nil || req.ToolConfig.ToolChoice == nil || req.ToolConfig.ToolChoice.Tool == nil || req.ToolConfig.ToolChoice.Tool.Name != "person" {
		t.Errorf("the tool was not forced: %+v", req.ToolConfig)
	}
	if got := len(req.Messages); got != 5 {
		t.Errorf("the model saw %d messages, want the 4 before and the prompt", got)
	}
	// The exchange is kept like a chat turn, so a later turn can refer to it.
	want := []agent.Message{agent.UserText("Ada Lovelace was 36."), agent.AssistantText(`{"age":36,"name":"Ada"}`)}
	if diff := cmp.Diff(want, res.Messages); diff != "" {
		t.Errorf("messages (-want +got):\n%s", diff)
	}
	s.Enqueue(conversetest.Text("She was 36."))
	if _, err := a.Run(t.Context(), next(t, conv, &res.Result), input("How old was she?")); err != nil {
		t.Fatal(err)
	}
}

func TestStructuredRetriesInvalidObjects(t *testing.T) {
	s := newServer(t)
	s.Enqueue(
		conversetest.ToolUse("p1", "person", map[string]any{"name": "Ada", "age": "thirty-six"}),
		conversetest.ToolUse("p2", "person", map[string]any{"name": "Ada", "age": 36}),
	)
	a := newAgent(t, s, agent.Config{})
	conv := &agent.Conversation{}
	res, err := a.Structured(t.Context(), conv, personRequest(t))
	if err != nil {
		t.Fatal(err)
	}
	if res.Attempts != 2 || res.Metrics.ModelCalls != 2 {
		t.Errorf("attempts %d, model calls %d", res.Attempts, res.Metrics.ModelCalls)
	}
	// The second call carried the validation errors back as an error result.
	second := s.Requests()[1]
	r := second.Messages[2].Content[0].ToolResult
	if r == nil || r.Status != "error" || !strings.Contains(r.Content[0].Text, "/age: got string, want integer") {
		t.Errorf("feedback %+v", second.Messages[2])
	}
	if len(res.Messages) != 2 {
		t.Errorf("failed attempts were kept: %d messages", len(res.Messages))
	}
	next(t, conv, &res.Result)
}

func TestStructuredFailures(t *testing.T) {
	tests := []struct {
		name         string
		reply        conversetest.Reply
		wantReason   string
		wantProblems string
	}{
		{"never valid", conversetest.ToolUse("x", "person", map[string]any{"name": ""}), "did not match", "missing property 'age'"},
		{"never calls the tool", conversetest.Text("I'd rather chat."), "did not call the person tool", "did not call"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := newServer(t)
			s.Responder = func(*conversetest.Request) conversetest.Reply { return tt.reply }
			a := newAgent(t, s, agent.Config{})
			req := personRequest(t)
			req.MaxAttempts = 3
			_, err := a.Structured(t.Context(), &agent.Conversation{}, req)
			var se *agent.StructuredError
			if !errors.As(err, &se) || !errors.Is(err, agent.ErrStructuredOutput) {
				t.Fatalf("err = %v, want a *StructuredError", err)
			}
			if se.Attempts != 3 || s.Calls() != 3 || !strings.Contains(se.Reason, tt.wantReason) ||
				!strings.Contains(strings.Join(se.Problems, "\n"), tt.wantProblems) {
				t.Errorf("error %+v after %d calls", se, s.Calls())
			}
		})
	}
}

func TestStructuredFallsBackWhenToolChoiceIsRefused(t *testing.T) {
	s := newServer(t)
	s.Enqueue(
		conversetest.Error(400, conversetest.CodeValidation, "This model doesn't support the toolChoice field. Remove toolChoice and try again."),
		conversetest.ToolUse("p1", "person", map[string]any{"name": "Ada", "age": 36}),
	)
	a := newAgent(t, s, agent.Config{System: "You are helpful."})
	res, err := a.Structured(t.Context(), &agent.Conversation{}, personRequest(t))
	if err != nil {
		t.Fatal(err)
	}
	if res.Attempts != 1 {
		t.Errorf("attempts %d: the refused call was counted", res.Attempts)
	}
	second := s.Requests()[1]
	if second.ToolConfig.ToolChoice != nil {
		t.Errorf("second call still forces a tool: %+v", second.ToolConfig.ToolChoice)
	}
	if sys := second.System[0].Text; !strings.HasPrefix(sys, "You are helpful.") || !strings.Contains(sys, "calling the person tool") {
		t.Errorf("system prompt %q", sys)
	}
}

func TestStructuredAcceptsJSONInText(t *testing.T) {
	s := newServer(t)
	s.Enqueue(conversetest.Text("Here it is:\n```json\n{\"name\": \"Ada\", \"age\": 36}\n```"))
	a := newAgent(t, s, agent.Config{})
	res, err := a.Structured(t.Context(), &agent.Conversation{}, personRequest(t))
	if err != nil {
		t.Fatal(err)
	}
	if string(res.Data) != `{"name":"Ada","age":36}` {
		t.Errorf("data %s", res.Data)
	}
}

// expensiveSchema is a schema whose values all cost too much to check, as
// internal/schema reports for one past its budget.
type expensiveSchema struct{ calls int }

var _ agent.Schema = (*expensiveSchema)(nil)

func (s *expensiveSchema) Raw() json.RawMessage { return json.RawMessage(personSchema) }

func (s *expensiveSchema) Validate(ctx context.Context, _ json.RawMessage) ([]string, error) {
	s.calls++
	if ctx.Err() != nil {
		return nil, ctx.Err()
	}
	return nil, &agent.InputError{Kind: agent.ErrInvalidSchema, Reason: "the schema is too expensive to validate"}
}

func TestStructuredStopsWhenTheSchemaIsTooExpensive(t *testing.T) {
	s := newServer(t)
	s.Responder = func(*conversetest.Request) conversetest.Reply {
		return conversetest.ToolUse("p1", "person", map[string]any{"name": "Ada", "age": 36})
	}
	a := newAgent(t, s, agent.Config{})
	sch := &expensiveSchema{}
	req := personRequest(t)
	req.Schema = sch
	_, err := a.Structured(t.Context(), &agent.Conversation{}, req)
	var ie *agent.InputError
	if !errors.As(err, &ie) || !errors.Is(err, agent.ErrInvalidSchema) {
		t.Fatalf("err = %v, want an *InputError of kind ErrInvalidSchema", err)
	}
	if errors.Is(err, agent.ErrStructuredOutput) {
		t.Errorf("err = %v: the schema's fault was blamed on the model", err)
	}
	// Another attempt would cost as much: the first refusal ends the turn.
	if s.Calls() != 1 || sch.calls != 1 {
		t.Errorf("%d model calls and %d validations, want 1 and 1", s.Calls(), sch.calls)
	}
}

func TestStructuredRefusesAHostileSchema(t *testing.T) {
	// Every array is checked against the definition twice, through items
	// and contains: a value nested 40 deep takes 2^40 checks.
	sch, err := schema.Compile(json.RawMessage(`{
		"type": "object",
		"properties": {"tree": {"$ref": "#/$defs/t"}},
		"$defs": {"t": {"type": "array", "items": {"$ref": "#/$defs/t"}, "contains": {"$ref": "#/$defs/t"}}}
	}`))
	if err != nil {
		t.Fatal(err)
	}
	var tree any = []any{}
	for range 40 {
		tree = []any{tree}
	}
	s := newServer(t)
	s.Enqueue(conversetest.ToolUse("p1", "tree", map[string]any{"tree": tree}))
	a := newAgent(t, s, agent.Config{})
	_, err = a.Structured(t.Context(), &agent.Conversation{}, agent.StructuredRequest{Prompt: input("Draw a tree."), Schema: sch, Name: "tree"})
	if !errors.Is(err, agent.ErrInvalidSchema) || !strings.Contains(err.Error(), "too expensive") {
		t.Fatalf("err = %v, want ErrInvalidSchema saying the schema is too expensive", err)
	}
	if s.Calls() != 1 {
		t.Errorf("%d model calls, want 1", s.Calls())
	}
}

// TestStructuredCountsCycles: a structured turn reports its cycles as Run
// does, one per answer of the model, so a first valid object is 1 cycle. A
// call refused for its toolChoice and asked again is a model call but not
// a cycle, like a call retried after an overflow.
func TestStructuredCountsCycles(t *testing.T) {
	valid := conversetest.ToolUse("p1", "person", map[string]any{"name": "Ada", "age": 36})
	invalid := conversetest.ToolUse("p0", "person", map[string]any{"name": "Ada"})
	refused := conversetest.Error(400, conversetest.CodeValidation, "This model doesn't support the toolChoice field. Remove toolChoice and try again.")
	tests := []struct {
		name                       string
		replies                    []conversetest.Reply
		wantCycles, wantModelCalls int
		wantErr                    bool
	}{
		{"first attempt", []conversetest.Reply{valid}, 1, 1, false},
		{"second attempt", []conversetest.Reply{invalid, valid}, 2, 2, false},
		{"tool choice refused", []conversetest.Reply{refused, valid}, 1, 2, false},
		{"never valid", []conversetest.Reply{invalid, invalid, invalid}, 3, 3, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := newServer(t)
			s.Enqueue(tt.replies...)
			a := newAgent(t, s, agent.Config{})
			res, err := a.Structured(t.Context(), &agent.Conversation{}, personRequest(t))
			var got agent.Metrics
			var te *agent.TurnError
			switch {
			case tt.wantErr && errors.As(err, &te):
				got = te.Metrics
			case err != nil:
				t.Fatalf("err = %v, want error %v", err, tt.wantErr)
			default:
				got = res.Metrics
			}
			if got.Cycles != tt.wantCycles || got.ModelCalls != tt.wantModelCalls {
				t.Errorf("cycles %d, model calls %d; want %d and %d", got.Cycles, got.ModelCalls, tt.wantCycles, tt.wantModelCalls)
			}
		})
	}
}
