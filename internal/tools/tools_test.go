package tools

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/lambda-agent/lambda-agent/internal/agent"
	"github.com/lambda-agent/lambda-agent/internal/schema"
)

func run(t *testing.T, tool agent.Tool, state *agent.State, input string) (string, error) {
	t.Helper()
	content, err := tool.Run(t.Context(), &agent.ToolCall{ID: "t1", Name: tool.Spec().Name, Input: json.RawMessage(input), State: state})
	if err != nil {
		return "", err
	}
	if len(content) != 1 {
		t.Fatalf("%d content parts, want 1", len(content))
	}
	if content[0].JSON != nil {
		return string(content[0].JSON), nil
	}
	return content[0].Text, nil
}

func TestByName(t *testing.T) {
	got, err := ByName(Names)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tool := range got {
		names = append(names, tool.Spec().Name)
		if _, err := schema.Compile(tool.Spec().InputSchema); err != nil {
			t.Errorf("%s: schema: %v", tool.Spec().Name, err)
		}
	}
	if diff := cmp.Diff(Names, names); diff != "" {
		t.Errorf("names (-want +got):\n%s", diff)
	}
	if _, err := ByName([]string{"calculator", "shell"}); err == nil || !strings.Contains(err.Error(), `"shell"`) {
		t.Errorf("ByName(shell) err = %v", err)
	}
	// Every built-in can be registered with an agent at once.
	if _, err := agent.New(agent.Config{Model: nopModel{}, Tools: got}); err != nil {
		t.Errorf("agent.New with the built-ins: %v", err)
	}
}

func TestCalculatorTool(t *testing.T) {
	got, err := run(t, Calculator(), nil, `{"expression":"25*48"}`)
	if err != nil {
		t.Fatal(err)
	}
	if got != `{"expression":"25*48","result":1200}` {
		t.Errorf("got %s", got)
	}
	for _, bad := range []string{`{"expression":"1/0"}`, `{"expression":"2+"}`, `{"expression":"rm -rf /"}`} {
		if _, err := run(t, Calculator(), nil, bad); err == nil {
			t.Errorf("%s: no error", bad)
		}
	}
}

func TestCurrentTimeTool(t *testing.T) {
	clock := func() time.Time { return time.Date(2026, 11, 21, 12, 30, 0, 0, time.UTC) }
	tests := []struct {
		input, want, wantErr string
	}{
		{`{}`, `{"timezone":"UTC","time":"2026-11-21T12:30:00Z","weekday":"Saturday"}`, ""},
		{`{"timezone":"Asia/Tokyo"}`, `{"timezone":"Asia/Tokyo","time":"2026-11-21T21:30:00+09:00","weekday":"Saturday"}`, ""},
		{`{"timezone":"America/Los_Angeles"}`, `{"timezone":"America/Los_Angeles","time":"2026-11-21T04:30:00-08:00","weekday":"Saturday"}`, ""},
		{`{"timezone":"Mars/Olympus"}`, "", "unknown time zone"},
		{`{"timezone":"../../etc/passwd"}`, "", "unknown time zone"},
		{`{"timezone":"Local"}`, "", "unknown time zone"},
	}
	for _, tt := range tests {
		got, err := run(t, CurrentTime(clock), nil, tt.input)
		if tt.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("%s: err = %v, want %q", tt.input, err, tt.wantErr)
			}
			continue
		}
		if err != nil || got != tt.want {
			t.Errorf("%s = %s, %v; want %s", tt.input, got, err, tt.want)
		}
	}
}

func TestRememberRecall(t *testing.T) {
	state := agent.NewState(nil)
	if _, err := run(t, Recall(), state, `{"key":"colour"}`); err == nil || !strings.Contains(err.Error(), "nothing has been remembered") {
		t.Errorf("recall before remember: %v", err)
	}
	if got, err := run(t, Remember(), state, `{"key":"colour","value":"teal"}`); err != nil || got != "Remembered colour." {
		t.Fatalf("remember = %q, %v", got, err)
	}
	// The fact lives in the state, under the memory namespace, so it is
	// persisted with the session and read back in a later invocation.
	later := agent.NewState(state.Snapshot())
	if got, err := run(t, Recall(), later, `{"key":"colour"}`); err != nil || got != "teal" {
		t.Errorf("recall = %q, %v", got, err)
	}
	if got, _ := run(t, Recall(), later, `{}`); got != "Remembered keys: colour" {
		t.Errorf("recall all = %q", got)
	}
	if _, err := run(t, Recall(), later, `{"key":"size"}`); err == nil || !strings.Contains(err.Error(), "colour") {
		t.Errorf("recall of an unknown key: %v", err)
	}
	if diff := cmp.Diff([]string{"memory:colour"}, later.Keys()); diff != "" {
		t.Errorf("state keys (-want +got):\n%s", diff)
	}
	if _, err := run(t, Remember(), state, `{"key":"big","value":"`+strings.Repeat("x", maxValue+1)+`"}`); err == nil {
		t.Error("an oversized value was remembered")
	}
	if _, err := run(t, Remember(), state, `{"key":"  ","value":"x"}`); err == nil {
		t.Error("a blank key was accepted")
	}
}

// nopModel lets TestByName build an agent; it is never called.
type nopModel struct{}

var _ agent.Model = nopModel{}

func (nopModel) Converse(context.Context, *agent.ModelRequest) (*agent.ModelResponse, error) {
	panic("not called")
}
