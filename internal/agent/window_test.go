package agent

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"

	"github.com/lambda-agent/lambda-agent/internal/testkit/conversetest"
)

// The window invariants, checked over random histories:
//   - the window is the stored history from Removed on, and starts with a
//     user message that answers no tool use, so no tool use is separated from
//     its result and no result is orphaned;
//   - whatever the history, even one no agent would write, the view sent to
//     the model is accepted by the strict Converse stand-in.

// chooser draws choices from bytes, so the fuzzer can steer the generator.
// Once the bytes run out every choice is 0, which the generators make the
// cheap one, so that short inputs give small histories.
type chooser struct {
	data []byte
	i    int
}

func (c *chooser) intn(n int) int {
	if n <= 1 {
		return 0
	}
	v := 0
	for range 2 {
		v <<= 8
		if c.i < len(c.data) {
			v |= int(c.data[c.i])
			c.i++
		}
	}
	return v % n
}

func (c *chooser) chance(pct int) bool { return c.intn(100) >= 100-pct }

// validHistory builds a history an agent could have stored: turns of user
// input (text, images, documents), tool cycles with small or huge results,
// and a closing answer. The last turn may have been cut by a crash after a
// tool use.
func validHistory(ch *chooser) []Message {
	var h []Message
	turns := 1 + ch.intn(20)
	id := 0
	for turn := range turns {
		in := Message{Role: RoleUser, Content: []ContentBlock{Text(fmt.Sprintf("question %d", turn))}}
		if ch.chance(15) {
			in.Content = append(in.Content, ContentBlock{Image: &ImageBlock{Format: "png", Source: Source{Bytes: []byte("\x89PNG\r\n\x1a\n")}}})
		}
		if ch.chance(10) {
			in.Content = append(in.Content, ContentBlock{Document: &DocumentBlock{Format: "txt", Name: "doc", Source: Source{Bytes: []byte("text")}}})
		}
		h = append(h, in)
		for range ch.intn(4) {
			uses := Message{Role: RoleAssistant}
			if ch.chance(50) {
				uses.Content = append(uses.Content, Text("working"))
			}
			results := Message{Role: RoleUser}
			for range 1 + ch.intn(3) {
				id++
				tid := fmt.Sprintf("tool%d", id)
				uses.Content = append(uses.Content, ContentBlock{ToolUse: &ToolUseBlock{ToolUseID: tid, Name: "lookup", Input: json.RawMessage(`{"q":1}`)}})
				r := &ToolResultBlock{ToolUseID: tid, Status: ToolSuccess}
				switch ch.intn(12) {
				case 11:
					r.Content = []ToolResultContent{{Text: strings.Repeat("big ", 500+ch.intn(1500))}}
				case 10:
					r.Content = []ToolResultContent{{JSON: json.RawMessage(`{"rows":"` + strings.Repeat("x", 3000) + `"}`)}}
				case 9:
					r.Content = []ToolResultContent{{Image: &ImageBlock{Format: "jpeg", Source: Source{Bytes: []byte{0xff, 0xd8, 0xff, 0xe0}}}}}
				case 8:
					r.Status = ToolError
					r.Content = []ToolResultContent{{Text: "failed"}}
				default:
					r.Content = []ToolResultContent{{Text: "small"}}
				}
				results.Content = append(results.Content, ContentBlock{ToolResult: r})
			}
			h = append(h, uses)
			if turn == turns-1 && ch.chance(20) {
				return h // crashed between the tool use and its result
			}
			h = append(h, results)
		}
		h = append(h, AssistantText(fmt.Sprintf("answer %d", turn)))
	}
	return h
}

// anyHistory builds a history no agent should write: random roles and
// blocks, blank text, duplicate and orphaned tool ids, media in the wrong
// place. Only the view's validity is promised for these.
func anyHistory(ch *chooser) []Message {
	var h []Message
	for range ch.intn(30) {
		m := Message{Role: []Role{RoleUser, RoleAssistant, "system"}[ch.intn(3)]}
		for range ch.intn(4) {
			tid := fmt.Sprintf("t%d", ch.intn(4))
			switch ch.intn(8) {
			case 7:
				m.Content = append(m.Content, Text([]string{"", " ", "hi", "\n\t"}[ch.intn(4)]))
			case 1:
				m.Content = append(m.Content, ContentBlock{ToolUse: &ToolUseBlock{ToolUseID: tid, Name: "lookup", Input: json.RawMessage(`{}`)}})
			case 2:
				m.Content = append(m.Content, ContentBlock{ToolResult: TextResult(tid, ToolSuccess, "r")})
			case 3:
				m.Content = append(m.Content, ContentBlock{Image: &ImageBlock{Format: "gif", Source: Source{Bytes: []byte("GIF89a")}}})
			case 4:
				m.Content = append(m.Content, ContentBlock{Document: &DocumentBlock{Format: "md", Name: "d", Source: Source{Bytes: []byte{1}}}})
			case 5:
				m.Content = append(m.Content, ContentBlock{ToolResult: &ToolResultBlock{ToolUseID: tid, Content: []ToolResultContent{{Text: strings.Repeat("z", 3000)}}}})
			case 0:
				m.Content = append(m.Content, Text("plain"))
			case 6:
				m.Content = append(m.Content, ContentBlock{Reasoning: &ReasoningBlock{Text: "hmm", Signature: "s"}})
			}
		}
		h = append(h, m)
	}
	return h
}

// sharedServer is one stand-in for all window checks.
var sharedServer = sync.OnceValue(func() *conversetest.Server { return conversetest.NewServer() })

// checkView sends the view to the strict stand-in, through the real SDK, and
// fails when Bedrock would reject it.
func checkView(t testing.TB, view []Message) {
	t.Helper()
	if len(view) == 0 || view[len(view)-1].Role != RoleUser {
		view = append(view, UserText("next input")) // as a turn would
		view = Repair(view)
	}
	s := sharedServer()
	m := wireModel(t, s, "window-check")
	schema := json.RawMessage(`{"type":"object"}`)
	_, err := m.Converse(context.Background(), &ModelRequest{Messages: view, Tools: []ToolSpec{{Name: "lookup", InputSchema: schema}}})
	if err != nil {
		raw, _ := json.Marshal(Repair(truncateResults(view, 100)))
		t.Fatalf("stand-in rejected the view: %v\nview, results cut: %.2000s", err, raw)
	}
}

// exerciseManagers runs random Apply and Reduce calls of each manager on h
// and checks the invariants after each.
func exerciseManagers(t testing.TB, ch *chooser, h []Message, valid bool) {
	// The huge results above are "huge" against these limits, which keeps
	// the requests small enough to check thousands of them.
	limit := func() int { return 600 + ch.intn(2000) }
	managers := []ConversationManager{
		NoManager{},
		SlidingWindow{Size: 1 + ch.intn(50), LowWater: ch.intn(50), ToolResultLimit: limit()},
		SlidingWindow{Size: 1 + ch.intn(5), ToolResultLimit: limit()},
		Summarizing{Model: &fakeSummarizer{}, Ratio: float64(ch.intn(100)) / 100, PreserveRecent: ch.intn(12), MaxMessages: ch.intn(30), ToolResultLimit: limit()},
		Summarizing{Model: &fakeSummarizer{fail: &ModelError{Kind: KindUnavailable}}, MaxMessages: 1 + ch.intn(10), ToolResultLimit: limit()},
	}
	for _, m := range managers {
		c := &Conversation{Messages: h}
		checkView(t, c.View())
		for range 1 + ch.intn(6) {
			var err error
			if ch.chance(50) {
				err = m.Apply(context.Background(), c)
			} else {
				err = m.Reduce(context.Background(), c)
			}
			if err != nil && err != ErrCannotReduce {
				t.Fatalf("%T: %v", m, err)
			}
			if c.Window.Removed < 0 || c.Window.Removed > len(h) || len(c.Messages) != len(h)-c.Window.Removed {
				t.Fatalf("%T: removed %d of %d, window of %d", m, c.Window.Removed, len(h), len(c.Messages))
			}
			for i := range c.Messages {
				if !sameMessage(c.Messages[i], h[c.Window.Removed+i]) {
					t.Fatalf("%T: window is not history[Removed:] at %d", m, i)
				}
			}
			if valid && len(c.Messages) > 0 && c.Window.Removed > 0 && !IsTurnStart(c.Messages[0]) {
				t.Fatalf("%T: window starts with %s %+v", m, c.Messages[0].Role, c.Messages[0].Content)
			}
			checkView(t, c.View())
			checkView(t, c.view(ResultTrim{KeepTurns: ch.intn(4), MinBytes: 1 + ch.intn(3000)}))
		}
	}
}

// sameMessage reports whether a and b are the same message, not copies:
// managers move the window, they never rewrite messages.
func sameMessage(a, b Message) bool {
	return a.Role == b.Role && len(a.Content) == len(b.Content) &&
		(len(a.Content) == 0 || &a.Content[0] == &b.Content[0])
}

func TestWindowInvariantsProperty(t *testing.T) {
	// Each check goes through the SDK and the stand-in; FuzzWindow explores
	// further (go test -fuzz=FuzzWindow ./internal/agent).
	n := 60
	if testing.Short() || raceEnabled {
		n = 15
	}
	r := rand.New(rand.NewPCG(1, 2))
	for i := range n {
		data := make([]byte, 400)
		for j := range data {
			data[j] = byte(r.UintN(256))
		}
		t.Run(fmt.Sprint(i), func(t *testing.T) {
			ch := &chooser{data: data}
			if i%3 == 2 {
				exerciseManagers(t, ch, anyHistory(ch), false)
				return
			}
			exerciseManagers(t, ch, validHistory(ch), true)
		})
	}
}

func FuzzWindow(f *testing.F) {
	f.Add(false, []byte{})
	f.Add(false, []byte("tool heavy history with huge results \xff\xff\x00\x01"))
	f.Add(true, []byte("\x00\x01\x02\x03\x04\x05\x06\x07\x08\x09\x0a\x0b\x0c\x0d\x0e\x0f"))
	f.Add(true, []byte("garbage: roles, blanks, orphans, duplicates"))
	f.Fuzz(func(t *testing.T, garbage bool, data []byte) {
		ch := &chooser{data: data}
		if garbage {
			exerciseManagers(t, ch, anyHistory(ch), false)
			return
		}
		exerciseManagers(t, ch, validHistory(ch), true)
	})
}
