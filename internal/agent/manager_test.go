package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// Turn shapes for building histories.
func plainTurn(i int) []Message {
	return []Message{UserText(fmt.Sprintf("question %d", i)), AssistantText(fmt.Sprintf("answer %d", i))}
}

func toolTurn(i, results, size int) []Message {
	uses := msg(RoleAssistant, Text("let me check"))
	res := msg(RoleUser)
	for j := range results {
		id := fmt.Sprintf("t%d-%d", i, j)
		uses.Content = append(uses.Content, use(id, "lookup"))
		res.Content = append(res.Content, result(id, strings.Repeat("r", size)))
	}
	return []Message{UserText(fmt.Sprintf("question %d", i)), uses, res, AssistantText(fmt.Sprintf("answer %d", i))}
}

func history(turns ...[]Message) []Message {
	var out []Message
	for _, t := range turns {
		out = append(out, t...)
	}
	return out
}

func plainHistory(turns int) []Message {
	var out []Message
	for i := range turns {
		out = append(out, plainTurn(i)...)
	}
	return out
}

// checkWindow checks the invariants every manager keeps: the window is the
// suffix of the full history that Removed says, and it starts at a turn start.
func checkWindow(t *testing.T, full []Message, c *Conversation) {
	t.Helper()
	if c.Window.Removed < 0 || c.Window.Removed > len(full) {
		t.Fatalf("Removed = %d of %d messages", c.Window.Removed, len(full))
	}
	if diff := cmp.Diff(full[c.Window.Removed:], c.Messages); diff != "" {
		t.Fatalf("window is not history[Removed:] (-want +got):\n%s", diff)
	}
	if len(c.Messages) == 0 {
		t.Fatal("window is empty")
	}
	if c.Window.Removed > 0 && !IsTurnStart(c.Messages[0]) {
		t.Fatalf("window starts with %s message %+v", c.Messages[0].Role, c.Messages[0].Content)
	}
}

func TestSlidingWindowApply(t *testing.T) {
	tests := []struct {
		name        string
		size, low   int
		history     []Message
		wantRemoved int
	}{
		{"under the size", 40, 0, plainHistory(10), 0},
		{"exactly the size", 40, 0, plainHistory(20), 0},
		{"over by one turn, back to half", 40, 0, plainHistory(21), 22},
		{"over by one turn, back to the low-water mark", 40, 30, plainHistory(21), 12},
		{"low-water mark at the size drops one turn", 40, 40, plainHistory(21), 2},
		{"a low-water mark past the size is the size", 40, 99, plainHistory(21), 2},
		{"odd size moves to the next turn start", 5, 5, plainHistory(4), 4},
		{"default size and mark", 0, 0, plainHistory(30), 40},
		{"never splits a tool turn", 6, 6, history(toolTurn(0, 1, 10), toolTurn(1, 1, 10), toolTurn(2, 1, 10)), 8},
		{"one turn longer than the window keeps the turn", 3, 0, history(plainTurn(0), toolTurn(1, 3, 10)), 2},
		{"no turn start to cut at", 2, 0, toolTurn(0, 2, 10), 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := &Conversation{Messages: tt.history}
			if err := (SlidingWindow{Size: tt.size, LowWater: tt.low}).Apply(t.Context(), c); err != nil {
				t.Fatal(err)
			}
			if c.Window.Removed != tt.wantRemoved {
				t.Errorf("Removed = %d, want %d", c.Window.Removed, tt.wantRemoved)
			}
			checkWindow(t, tt.history, c)
		})
	}
}

// TestSlidingWindowKeepsItsStart: turn after turn, the window's start
// moves only when the window passes its size, and then by a chunk, so
// that most turns send the same prefix as the turn before.
func TestSlidingWindowKeepsItsStart(t *testing.T) {
	w := SlidingWindow{Size: 40}
	c := &Conversation{}
	moves := 0
	for i := range 200 {
		c.Messages = append(c.Messages, plainTurn(i)...)
		before := c.Window.Removed
		if err := w.Apply(t.Context(), c); err != nil {
			t.Fatal(err)
		}
		if c.Window.Removed != before {
			moves++
		}
		if len(c.Messages) > 40 {
			t.Fatalf("turn %d: %d messages in a window of 40", i, len(c.Messages))
		}
	}
	// 400 messages through a window of 40 cut back to 20: the start moves
	// once every 10 turns, not on every turn past the 20th.
	if moves > 20 {
		t.Errorf("the window's start moved on %d of 200 turns", moves)
	}
}

func TestSlidingWindowReduce(t *testing.T) {
	huge := 50_000
	c := &Conversation{Messages: history(toolTurn(0, 1, huge), plainTurn(1), toolTurn(2, 2, 100))}
	full := c.Messages
	w := SlidingWindow{}

	// 1. The oversized result is cut first; nothing is dropped.
	if err := w.Reduce(t.Context(), c); err != nil {
		t.Fatal(err)
	}
	if c.Window.ToolResultLimit != DefaultToolResultLimit || c.Window.Removed != 0 {
		t.Fatalf("after step 1: limit %d, removed %d", c.Window.ToolResultLimit, c.Window.Removed)
	}
	view := c.View()
	r := view[2].Content[0].ToolResult
	if got := len(r.Content[0].Text); got > DefaultToolResultLimit+100 || !strings.Contains(r.Content[0].Text, "bytes truncated") {
		t.Errorf("view shows a %d-byte result without a marker", got)
	}
	if got := len(c.Messages[2].Content[0].ToolResult.Content[0].Text); got != huge {
		t.Errorf("the window's own message was changed: %d bytes", got)
	}

	// 2. Then whole turns go, oldest first.
	for _, wantRemoved := range []int{4, 6} {
		if err := w.Reduce(t.Context(), c); err != nil {
			t.Fatal(err)
		}
		if c.Window.Removed != wantRemoved {
			t.Fatalf("Removed = %d, want %d", c.Window.Removed, wantRemoved)
		}
		checkWindow(t, full, c)
	}

	// 3. With one turn left, the results are cut further, down to the floor.
	c.Messages[2].Content[0].ToolResult.Content[0].Text = strings.Repeat("x", 5000)
	var limits []int
	for {
		err := w.Reduce(t.Context(), c)
		if errors.Is(err, ErrCannotReduce) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		limits = append(limits, c.Window.ToolResultLimit)
	}
	if diff := cmp.Diff([]int{4096, 2048, 1024, 512}, limits); diff != "" {
		t.Errorf("limits (-want +got):\n%s", diff)
	}
}

func TestNoManager(t *testing.T) {
	c := &Conversation{Messages: plainHistory(100)}
	if err := (NoManager{}).Apply(t.Context(), c); err != nil || len(c.Messages) != 200 {
		t.Errorf("Apply: %v, %d messages", err, len(c.Messages))
	}
	if err := (NoManager{}).Reduce(t.Context(), c); !errors.Is(err, ErrCannotReduce) {
		t.Errorf("Reduce = %v, want ErrCannotReduce", err)
	}
}

// fakeSummarizer is a Model that summarizes by counting, and can fail.
type fakeSummarizer struct {
	mu    sync.Mutex
	fail  error
	calls []*ModelRequest
}

var _ Model = (*fakeSummarizer)(nil)

func (f *fakeSummarizer) Converse(_ context.Context, req *ModelRequest) (*ModelResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, req)
	if f.fail != nil {
		return nil, f.fail
	}
	text := req.Messages[0].Text()
	return &ModelResponse{
		Message:    AssistantText(fmt.Sprintf("summary of %d lines", strings.Count(text, "\n"))),
		StopReason: StopEndTurn,
	}, nil
}

func TestSummarizingReduce(t *testing.T) {
	t.Run("summarizes the oldest share", func(t *testing.T) {
		f := &fakeSummarizer{}
		full := plainHistory(20) // 40 messages
		c := &Conversation{Messages: full}
		if err := (Summarizing{Model: f}).Reduce(t.Context(), c); err != nil {
			t.Fatal(err)
		}
		if c.Window.Removed != 12 { // 0.3 of 40
			t.Errorf("Removed = %d, want 12", c.Window.Removed)
		}
		checkWindow(t, full, c)
		if !strings.HasPrefix(c.Window.Summary, "summary of") {
			t.Errorf("Summary = %q", c.Window.Summary)
		}
		view := c.View()
		if view[0].Role != RoleUser || !strings.Contains(view[0].Content[0].Text, c.Window.Summary) {
			t.Errorf("view does not start with the summary: %+v", view[0])
		}
		if len(f.calls) != 1 || f.calls[0].System != DefaultSummaryPrompt {
			t.Errorf("summarizer calls: %d, system %q", len(f.calls), f.calls[0].System)
		}
	})

	t.Run("earlier summary is carried into the next", func(t *testing.T) {
		f := &fakeSummarizer{}
		c := &Conversation{Messages: plainHistory(20), Window: WindowState{Summary: "OLD FACTS"}}
		if err := (Summarizing{Model: f, Prompt: "custom"}).Reduce(t.Context(), c); err != nil {
			t.Fatal(err)
		}
		req := f.calls[0]
		if req.System != "custom" || !strings.Contains(req.Messages[0].Text(), "OLD FACTS") {
			t.Errorf("summarizer request lacks the old summary or custom prompt: %q / %q", req.System, req.Messages[0].Text())
		}
	})

	t.Run("ratio is clamped and recent messages kept", func(t *testing.T) {
		for _, tt := range []struct {
			ratio       float64
			wantRemoved int
		}{{0.01, 4}, {0.3, 12}, {0.99, 30}, {0.8, 30}} {
			c := &Conversation{Messages: plainHistory(20)}
			if err := (Summarizing{Model: &fakeSummarizer{}, Ratio: tt.ratio}).Reduce(t.Context(), c); err != nil {
				t.Fatal(err)
			}
			if c.Window.Removed != tt.wantRemoved {
				t.Errorf("ratio %v: Removed = %d, want %d", tt.ratio, c.Window.Removed, tt.wantRemoved)
			}
		}
	})

	t.Run("summarizer failure falls back to a trim", func(t *testing.T) {
		f := &fakeSummarizer{fail: &ModelError{Kind: KindThrottled, Message: "slow down"}}
		full := plainHistory(20)
		c := &Conversation{Messages: full, Window: WindowState{Summary: "kept"}}
		if err := (Summarizing{Model: f}).Reduce(t.Context(), c); err != nil {
			t.Fatalf("Reduce failed with the summarizer: %v", err)
		}
		if c.Window.Removed != 12 || c.Window.Summary != "kept" {
			t.Errorf("Removed %d, Summary %q; want 12 and the old summary", c.Window.Removed, c.Window.Summary)
		}
		checkWindow(t, full, c)
	})

	t.Run("one huge tool result does not make it give up", func(t *testing.T) {
		f := &fakeSummarizer{}
		full := toolTurn(0, 1, 2_000_000) // 4 messages: too few to summarize
		c := &Conversation{Messages: full}
		s := Summarizing{Model: f}
		if err := s.Reduce(t.Context(), c); err != nil {
			t.Fatalf("Reduce: %v", err)
		}
		if c.Window.ToolResultLimit != DefaultToolResultLimit {
			t.Errorf("ToolResultLimit = %d", c.Window.ToolResultLimit)
		}
		// It keeps reducing until the floor, and only then gives up.
		n := 0
		for ; n < 20; n++ {
			if err := s.Reduce(t.Context(), c); errors.Is(err, ErrCannotReduce) {
				break
			} else if err != nil {
				t.Fatal(err)
			}
		}
		if c.Window.ToolResultLimit != minToolResultLimit || n == 20 {
			t.Errorf("after %d more reductions: limit %d", n, c.Window.ToolResultLimit)
		}
		checkWindow(t, full, c)
	})

	t.Run("huge result in a long history is summarized away", func(t *testing.T) {
		f := &fakeSummarizer{}
		full := history(toolTurn(0, 1, 1_000_000), plainHistory(10))
		c := &Conversation{Messages: full}
		if err := (Summarizing{Model: f}).Reduce(t.Context(), c); err != nil {
			t.Fatal(err)
		}
		if c.Window.Removed != 8 { // the first turn start after 0.3 of 24
			t.Errorf("Removed = %d, want 8", c.Window.Removed)
		}
		// The summarizer saw the result cut down, not a megabyte.
		if got := len(f.calls[0].Messages[0].Text()); got > 3*DefaultToolResultLimit {
			t.Errorf("summarizer request is %d bytes", got)
		}
	})

	t.Run("apply summarizes past MaxMessages only", func(t *testing.T) {
		f := &fakeSummarizer{}
		c := &Conversation{Messages: plainHistory(10)}
		s := Summarizing{Model: f, MaxMessages: 20}
		if err := s.Apply(t.Context(), c); err != nil || len(f.calls) != 0 {
			t.Fatalf("Apply at the limit: %v, %d calls", err, len(f.calls))
		}
		c.Messages = append(c.Messages, plainTurn(10)...)
		if err := s.Apply(t.Context(), c); err != nil || len(f.calls) != 1 || c.Window.Removed == 0 {
			t.Fatalf("Apply over the limit: %v, %d calls, removed %d", err, len(f.calls), c.Window.Removed)
		}
	})
}

// TestTrimResults: in the view, results older than the last KeepTurns
// turns and larger than MinBytes become a note with their size; the
// stored messages are unchanged, and the view is the same each time.
func TestTrimResults(t *testing.T) {
	h := history(toolTurn(0, 2, 5000), toolTurn(1, 1, 50), toolTurn(2, 1, 5000), toolTurn(3, 1, 5000))
	stored, _ := json.Marshal(h)
	c := &Conversation{Messages: h}
	trim := ResultTrim{KeepTurns: 2, MinBytes: 1000}
	view := c.view(trim)
	results := map[string]string{}
	for _, m := range view {
		for _, b := range m.Content {
			if r := b.ToolResult; r != nil {
				results[r.ToolUseID] = r.Content[0].Text
			}
		}
	}
	note := fmt.Sprintf(trimmedText, 5000)
	for id, want := range map[string]string{
		"t0-0": note, "t0-1": note, // old and large
		"t1-0": strings.Repeat("r", 50),   // old and small
		"t2-0": strings.Repeat("r", 5000), // within the last two turns
		"t3-0": strings.Repeat("r", 5000),
	} {
		if results[id] != want {
			t.Errorf("%s: %.60q, want %.60q", id, results[id], want)
		}
	}
	if again, _ := json.Marshal(h); string(again) != string(stored) {
		t.Error("trimming changed the stored messages")
	}
	asJSON := func(v any) string { b, _ := json.Marshal(v); return string(b) }
	if asJSON(c.view(trim)) != asJSON(view) {
		t.Error("two views of one conversation differ")
	}
	if asJSON(c.view(ResultTrim{})) != asJSON(Repair(h)) {
		t.Error("the zero ResultTrim trimmed")
	}
	checkView(t, view)
}

// TestSummarizingKeepsItsPrefix: turn after turn, the summarizing
// manager's view keeps the summary and the messages after it in place, so
// that its prefix changes only when a new summary is made.
func TestSummarizingKeepsItsPrefix(t *testing.T) {
	m := Summarizing{Model: &fakeSummarizer{}, MaxMessages: 20, PreserveRecent: 4}
	c := &Conversation{}
	var prefix string
	changes, summaries := 0, 0
	for i := range 100 {
		c.Messages = append(c.Messages, plainTurn(i)...)
		removed := c.Window.Removed
		if err := m.Apply(t.Context(), c); err != nil {
			t.Fatal(err)
		}
		if c.Window.Removed != removed { // a summary took in more messages
			summaries++
		}
		// The prefix is what the view holds before this turn's messages.
		view := c.View()
		head, _ := json.Marshal(view[:len(view)-2])
		if i > 0 && !strings.HasPrefix(string(head), prefix) {
			changes++
		}
		prefix = strings.TrimSuffix(string(head), "]")
	}
	t.Logf("100 turns: %d summaries, %d changes of the prefix", summaries, changes)
	if summaries == 0 || changes > summaries {
		t.Errorf("the prefix changed on %d turns, with %d new summaries", changes, summaries)
	}
}
