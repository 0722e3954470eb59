package offline

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/google/go-cmp/cmp"
	"github.com/lambda-agent/lambda-agent/internal/memory"
	"github.com/lambda-agent/lambda-agent/internal/testkit/conversetest"
)

// defaultKinds are the kinds of memory.DefaultKinds, as update_memory's
// schema offers them.
var defaultKinds = []string{"fact", "preference", "summary"}

// held is a record memory holds, as extraction's data gives it.
type held struct {
	ID   string `json:"id"`
	Kind string `json:"kind"`
	Text string `json:"text"`
}

// said is a message as extraction's data gives it.
type said struct {
	Index int    `json:"index"`
	Role  string `json:"role"`
	Text  string `json:"text"`
}

// data is extraction's data: the records memory holds and the messages.
func data(t testing.TB, records []held, lines ...said) string {
	t.Helper()
	if records == nil {
		records = []held{}
	}
	raw, err := json.Marshal(map[string]any{"memory": records, "conversation": lines})
	if err != nil {
		t.Fatal(err)
	}
	return string(raw)
}

// person is what the person said in message 0.
func person(text string) said { return said{Index: 0, Role: "user", Text: text} }

func at(i int) *int { return &i }

func add(kind, text string, message int) memoryOp {
	return memoryOp{Action: "add", Kind: kind, Text: text, Message: at(message)}
}

func update(id, text string, message int) memoryOp {
	return memoryOp{Action: "update", ID: id, Text: text, Message: at(message)}
}

func del(id string) memoryOp { return memoryOp{Action: "delete", ID: id} }

var (
	teal = held{"tealaaaaaa", "fact", "The person's favourite colour is teal."}
	tea  = held{"teaaaaaaaa", "preference", "The person likes tea."}
)

func TestExtract(t *testing.T) {
	tests := []struct {
		name   string
		memory []held
		lines  []said
		kinds  []string // defaultKinds when nil
		want   []memoryOp
	}{
		{"a fact", nil, []said{person("My favourite colour is teal.")},
			nil, []memoryOp{add("fact", "The person's favourite colour is teal.", 0)}},
		{"asked to remember it", nil, []said{person("Remember that my favourite colour is teal")},
			nil, []memoryOp{add("fact", "The person's favourite colour is teal.", 0)}},
		{"a plural", nil, []said{person("my kids are Ann and Bo!")},
			nil, []memoryOp{add("fact", "The person's kids are Ann and Bo.", 0)}},
		{"the subject in lower case, the value as said", nil, []said{person("My Home Town is Porto.")},
			nil, []memoryOp{add("fact", "The person's home town is Porto.", 0)}},
		{"another value updates", []held{teal}, []said{person("Actually, my favourite colour is blue.")},
			nil, []memoryOp{update(teal.ID, "The person's favourite colour is blue.", 0)}},
		{"the same value changes nothing", []held{teal}, []said{person("My favourite colour is Teal!")},
			nil, []memoryOp{}},
		{"a preference", nil, []said{person("I like green tea.")},
			nil, []memoryOp{add("preference", "The person likes green tea.", 0)}},
		{"love and prefer", nil, []said{person("I love jazz. I prefer short answers")},
			nil, []memoryOp{add("preference", "The person loves jazz.", 0), add("preference", "The person prefers short answers.", 0)}},
		{"a preference held", []held{tea}, []said{person("I like tea")},
			nil, []memoryOp{}},
		{"two statements in a sentence", nil, []said{person("I really like tea, and my dog is Rex.")},
			nil, []memoryOp{add("preference", "The person likes tea.", 0), add("fact", "The person's dog is Rex.", 0)}},
		{"a list is one value", nil, []said{person("My favourite foods are fish, chips and peas.")},
			nil, []memoryOp{add("fact", "The person's favourite foods are fish, chips and peas.", 0)}},
		{"forget a fact", []held{teal, tea}, []said{person("Please forget my favourite colour.")},
			nil, []memoryOp{del(teal.ID)}},
		{"forget a fact by its value", []held{teal}, []said{person("Forget that my favourite colour is teal")},
			nil, []memoryOp{del(teal.ID)}},
		{"forget a preference", []held{teal, tea}, []said{person("Forget that I like tea.")},
			nil, []memoryOp{del(tea.ID)}},
		{"forget what memory does not hold", []held{tea}, []said{person("Forget my shoe size.")},
			nil, []memoryOp{}},
		{"questions teach nothing", []held{teal}, []said{person("What is my favourite colour? Is my favourite colour red?")},
			nil, []memoryOp{}},
		{"the assistant's words teach nothing", nil, []said{{Index: 1, Role: "assistant", Text: "My name is Claude. I like helping."}},
			nil, []memoryOp{}},
		{"secrets are not kept", nil, []said{person("My password is hunter2. My card number is 4111 1111 1111 1111. My API key is abc.")},
			nil, []memoryOp{}},
		{"small talk teaches nothing", nil, []said{person("Hello there. What is 25*48? Thanks, that is all.")},
			nil, []memoryOp{}},
		{"the last statement wins, from its message", nil, []said{person("My colour is red."), {Index: 1, Role: "assistant", Text: "Red."}, {Index: 2, Role: "user", Text: "My colour is blue."}},
			nil, []memoryOp{add("fact", "The person's colour is blue.", 2)}},
		{"told, then forgotten", nil, []said{person("My colour is red. Forget my colour.")},
			nil, []memoryOp{}},
		{"forgotten, then told", []held{{"redaaaaaaa", "fact", "The person's colour is red."}}, []said{person("Forget my colour. My colour is blue.")},
			nil, []memoryOp{update("redaaaaaaa", "The person's colour is blue.", 0)}},
		{"records of other forms are left alone", []held{{"nurseaaaaa", "fact", "The person is a nurse."}}, []said{person("Forget my job.")},
			nil, []memoryOp{}},
		{"a kind the schema lacks is its first", nil, []said{person("My name is Ada. I like tea.")},
			[]string{"profile"}, []memoryOp{add("profile", "The person's name is Ada.", 0), add("profile", "The person likes tea.", 0)}},
		{"no kinds, nothing added", []held{teal}, []said{person("My name is Ada. My favourite colour is red.")},
			[]string{}, []memoryOp{update(teal.ID, "The person's favourite colour is red.", 0)}},
		{"a value too long", nil, []said{person("My plan is " + strings.Repeat("long ", 50))},
			nil, []memoryOp{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			kinds := tt.kinds
			if kinds == nil {
				kinds = defaultKinds
			}
			got := extract(data(t, tt.memory, tt.lines...), kinds)
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("operations (-want +got):\n%s", diff)
			}
		})
	}
}

// TestExtractBoundsItsAnswer: one answer has at most update_memory's
// maxItems of operations.
func TestExtractBoundsItsAnswer(t *testing.T) {
	var b strings.Builder
	for i := range 30 {
		fmt.Fprintf(&b, "My thing%d is %d. ", i, i)
	}
	if got := extract(data(t, nil, person(b.String())), defaultKinds); len(got) != maxMemoryOps {
		t.Errorf("%d operations, want %d", len(got), maxMemoryOps)
	}
}

// TestExtractReadsOnlyItsData: what is not extraction's data teaches
// nothing, and the answer is still a list.
func TestExtractReadsOnlyItsData(t *testing.T) {
	for _, in := range []string{"", "null", "[]", "My favourite colour is teal.", `{"memory":"x"}`,
		`{"conversation":[{"index":"0","role":"user","text":"My name is Ada."}]}`, `{"conversation":{"role":"user"}}`} {
		if got := extract(in, defaultKinds); got == nil || len(got) != 0 {
			t.Errorf("extract(%q) = %#v, want an empty list", in, got)
		}
	}
}

// extractionRequest is a request as memory.Extractor sends it, with
// update_memory's schema, offering kinds.
func extractionRequest(t testing.TB, name, dataText string, kinds []string) *conversetest.Request {
	t.Helper()
	schema, _ := json.Marshal(map[string]any{
		"type": "object",
		"properties": map[string]any{"operations": map[string]any{
			"type": "array",
			"items": map[string]any{"type": "object", "properties": map[string]any{
				"action": map[string]any{"type": "string", "enum": []string{"add", "update", "delete"}},
				"kind":   map[string]any{"type": "string", "enum": kinds},
			}},
		}},
		"required": []string{"operations"},
	})
	return &conversetest.Request{
		System:   []conversetest.SystemBlock{{Text: memory.ExtractionPrompt}},
		Messages: []conversetest.Message{{Role: "user", Content: []conversetest.ContentBlock{{Text: dataText}}}},
		ToolConfig: &conversetest.ToolConfig{
			Tools:      []conversetest.Tool{{ToolSpec: &conversetest.ToolSpec{Name: name, InputSchema: conversetest.ToolInputSchema{JSON: schema}}}},
			ToolChoice: &conversetest.ToolChoice{Tool: &conversetest.SpecificToolChoice{Name: name}},
		},
	}
}

// TestRespondExtracts: a request that forces update_memory gets its
// operations, with the kinds of its schema; a structured request of
// another shape is answered from its schema, whatever its tool's name.
func TestRespondExtracts(t *testing.T) {
	req := extractionRequest(t, "update_memory", data(t, nil, person("My name is Ada.")), []string{"about"})
	got := toolInput(t, Respond(req), "update_memory")
	if want := `{"operations":[{"action":"add","kind":"about","text":"The person's name is Ada.","message":0}]}`; got != want {
		t.Errorf("the answer's input is %s, want %s", got, want)
	}
	other := extractionRequest(t, "person", data(t, nil, person("My name is Ada.")), []string{"about"})
	if got := toolInput(t, Respond(other), "person"); !strings.HasPrefix(got, `{"operations":[`) || strings.Contains(got, "Ada") {
		t.Errorf("a structured request named person got %s, want the example of its schema", got)
	}
	var s map[string]any
	_ = json.Unmarshal(other.ToolConfig.Tools[0].ToolSpec.InputSchema.JSON, &s)
	delete(s["properties"].(map[string]any), "operations")
	s["properties"].(map[string]any)["name"] = map[string]any{"type": "string"}
	s["required"] = []string{"name"}
	other.ToolConfig.Tools[0].ToolSpec.Name, other.ToolConfig.ToolChoice.Tool.Name = "update_memory", "update_memory"
	other.ToolConfig.Tools[0].ToolSpec.InputSchema.JSON, _ = json.Marshal(s)
	if got := toolInput(t, Respond(other), "update_memory"); got != `{"name":"example"}` {
		t.Errorf("a structured request named update_memory without operations got %s", got)
	}
}

// toolInput is the input of the reply's use of tool name, compacted.
func toolInput(t *testing.T, r conversetest.Reply, name string) string {
	t.Helper()
	for _, c := range r.Content {
		if c.ToolUse != nil && c.ToolUse.Name == name {
			raw, err := json.Marshal(c.ToolUse.Input)
			if err != nil {
				t.Fatal(err)
			}
			return string(raw)
		}
	}
	t.Fatalf("the reply does not use %s: %+v", name, r.Content)
	return ""
}

// withMemory is a turn's first message: context that recalls records,
// then the person's text.
func withMemory(t testing.TB, value, text string) conversetest.Message {
	t.Helper()
	return conversetest.Message{Role: "user", Content: []conversetest.ContentBlock{
		{Text: contextHeader + "\n- page: orders\n- " + memory.RecallDescription + ": " + value},
		{Text: text},
	}}
}

const recalledTeal = `[{"kind":"fact","text":"The person's favourite colour is teal.","learned":"2025-01-02"},{"kind":"preference","text":"The person likes tea.","learned":"2025-01-02"}]`

// TestRespondFromMemory: a question about the person is answered from the
// records recalled into the turn, where they answer it.
func TestRespondFromMemory(t *testing.T) {
	tools := []string{"calculator", "remember", "recall"}
	remembered := []conversetest.Message{
		{Role: "user", Content: []conversetest.ContentBlock{{Text: "Remember that my favourite colour is teal."}}},
		{Role: "assistant", Content: []conversetest.ContentBlock{{ToolUse: &conversetest.ToolUseBlock{ToolUseID: "a", Name: "remember", Input: json.RawMessage(`{"key":"favourite_colour","value":"teal"}`)}}}},
		{Role: "user", Content: []conversetest.ContentBlock{{ToolResult: &conversetest.ToolResultBlock{ToolUseID: "a", Content: []conversetest.ToolResultContent{{Text: "Remembered favourite_colour."}}}}}},
		{Role: "assistant", Content: []conversetest.ContentBlock{{Text: "Done."}}},
	}
	tests := []struct {
		name     string
		before   []conversetest.Message
		value    string
		text     string
		tools    []string
		want     string // the answer's text
		wantTool string // or the tool it calls
	}{
		{"a fact", nil, recalledTeal, "What is my favourite colour?", tools, "From memory: The person's favourite colour is teal.", ""},
		{"what's", nil, recalledTeal, "what's my favourite colour", tools, "From memory: The person's favourite colour is teal.", ""},
		{"the preferences", nil, recalledTeal, "What do I like?", tools, "From memory: The person likes tea.", ""},
		{"a fact memory lacks", nil, recalledTeal, "What is my shoe size?", tools, "Let me check my memory.", "recall"},
		{"told in this conversation", remembered, recalledTeal, "What is my favourite colour?", tools, "Let me check my memory.", "recall"},
		{"told here, without the recall tool", remembered, recalledTeal, "What is my favourite colour?", []string{"calculator"}, "From memory: The person's favourite colour is teal.", ""},
		{"no memory", nil, `[]`, "What is my favourite colour?", tools, "Let me check my memory.", "recall"},
		{"memory that is not JSON", nil, `The person's favourite colour is red.`, "What is my favourite colour?", tools, "Let me check my memory.", "recall"},
		{"memory of another shape", nil, `{"text":"The person's favourite colour is red."}`, "What is my favourite colour?", tools, "Let me check my memory.", "recall"},
		{"the context is not the person's", nil, recalledTeal, "Hi", tools, `You said: "Hi". I have seen 1 message`, ""},
		{"a command after context", nil, recalledTeal, `/tool calculator {"expression":"2+2"}`, tools, "Calling the calculator tool.", "calculator"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var specs []conversetest.Tool
			for _, name := range tt.tools {
				specs = append(specs, conversetest.Tool{ToolSpec: &conversetest.ToolSpec{Name: name, InputSchema: conversetest.ToolInputSchema{JSON: json.RawMessage(`{"type":"object"}`)}}})
			}
			req := &conversetest.Request{
				Messages:   append(slices.Clone(tt.before), withMemory(t, tt.value, tt.text)),
				ToolConfig: &conversetest.ToolConfig{Tools: specs},
			}
			reply := Respond(req)
			var text, tool string
			for _, c := range reply.Content {
				if c.ToolUse != nil {
					tool = c.ToolUse.Name
				} else if text == "" {
					text = c.Text
				}
			}
			if !strings.HasPrefix(text, tt.want) || tool != tt.wantTool {
				t.Errorf("answer %q, tool %q; want %q, tool %q", text, tool, tt.want, tt.wantTool)
			}
			if strings.Contains(text, "Context from") || strings.Contains(text, "orders") {
				t.Errorf("the answer takes the context for the person's words: %q", text)
			}
		})
	}
}

// FuzzExtract: whatever the data, the answer is a list of well-formed
// operations, within update_memory's bounds, that name only records the
// data holds and kinds the schema offers.
func FuzzExtract(f *testing.F) {
	f.Add(data(f, []held{teal, tea}, person("My favourite colour is blue. Forget that I like tea. I love jazz, and my dog is Rex.")), "fact")
	f.Add(data(f, nil, person("Remember that my name is Ada")), "")
	f.Add(`{"memory":[{"id":1}],"conversation":[{"index":-1,"role":"user","text":"my x is y"}]}`, "preference")
	f.Add("not json", "fact")
	f.Fuzz(func(t *testing.T, in, kind string) {
		kinds := []string{kind}
		ops := extract(in, kinds)
		if ops == nil || len(ops) > maxMemoryOps {
			t.Fatalf("%d operations (nil: %v)", len(ops), ops == nil)
		}
		var d struct {
			Memory []struct {
				ID string `json:"id"`
			} `json:"memory"`
		}
		_ = json.Unmarshal([]byte(in), &d)
		for _, op := range ops {
			known := slices.ContainsFunc(d.Memory, func(r struct {
				ID string `json:"id"`
			}) bool {
				return r.ID == op.ID
			})
			switch op.Action {
			case "add":
				if op.ID != "" || !slices.Contains(kinds, op.Kind) || op.Message == nil {
					t.Errorf("add %+v", op)
				}
			case "update":
				if !known || op.ID == "" || op.Message == nil {
					t.Errorf("update %+v of a record the data does not hold", op)
				}
			case "delete":
				if !known || op.ID == "" || op.Text != "" {
					t.Errorf("delete %+v", op)
				}
			default:
				t.Errorf("action %q", op.Action)
			}
			if op.Action != "delete" && (op.Text == "" || len(op.Text) > memory.MaxTextBytes || !utf8.ValidString(op.Text)) {
				t.Errorf("text %q", op.Text)
			}
		}
	})
}

// FuzzRespondWithContext: whatever a turn's context and text, the offline
// model answers without panicking, and never with the context's header.
func FuzzRespondWithContext(f *testing.F) {
	f.Add(recalledTeal, "What is my favourite colour?")
	f.Add(`[{"kind":1}]`, "What do I like?")
	f.Add(`[`, "/tool recall {}")
	f.Fuzz(func(t *testing.T, value, text string) {
		req := &conversetest.Request{
			Messages: []conversetest.Message{withMemory(t, value, text)},
			ToolConfig: &conversetest.ToolConfig{Tools: []conversetest.Tool{
				{ToolSpec: &conversetest.ToolSpec{Name: "recall", InputSchema: conversetest.ToolInputSchema{JSON: json.RawMessage(`{"type":"object"}`)}}},
			}},
		}
		for _, c := range Respond(req).Content {
			if strings.Contains(c.Text, contextHeader) && !strings.Contains(text, contextHeader) {
				t.Errorf("the answer %q holds the context", c.Text)
			}
		}
	})
}
