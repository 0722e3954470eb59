package agent

import (
	"encoding/json"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/google/go-cmp/cmp"
)

func use(id, name string) ContentBlock {
	return ContentBlock{ToolUse: &ToolUseBlock{ToolUseID: id, Name: name, Input: json.RawMessage(`{}`)}}
}

func result(id, text string) ContentBlock {
	return ContentBlock{ToolResult: TextResult(id, ToolSuccess, text)}
}

func interrupted(id string) ContentBlock {
	return ContentBlock{ToolResult: TextResult(id, ToolError, interruptedText)}
}

func msg(role Role, blocks ...ContentBlock) Message { return Message{Role: role, Content: blocks} }

func TestRepair(t *testing.T) {
	tests := []struct {
		name string
		in   []Message
		want []Message
	}{
		{
			name: "valid history is unchanged",
			in: []Message{
				UserText("hi"), msg(RoleAssistant, Text("calling"), use("a", "calc")),
				msg(RoleUser, result("a", "4")), AssistantText("it is 4"),
			},
			want: []Message{
				UserText("hi"), msg(RoleAssistant, Text("calling"), use("a", "calc")),
				msg(RoleUser, result("a", "4")), AssistantText("it is 4"),
			},
		},
		{
			name: "crash after the tool use: dangling use is answered",
			in:   []Message{UserText("hi"), msg(RoleAssistant, use("a", "calc"), use("b", "calc"))},
			want: []Message{
				UserText("hi"), msg(RoleAssistant, use("a", "calc"), use("b", "calc")),
				msg(RoleUser, interrupted("a"), interrupted("b")),
			},
		},
		{
			name: "crash after the tool use, then a new input",
			in:   []Message{UserText("hi"), msg(RoleAssistant, use("a", "calc")), UserText("again")},
			want: []Message{
				UserText("hi"), msg(RoleAssistant, use("a", "calc")),
				msg(RoleUser, interrupted("a"), Text("again")),
			},
		},
		{
			name: "one result of two is missing, results are reordered to the uses' order",
			in: []Message{
				UserText("hi"), msg(RoleAssistant, use("a", "x"), use("b", "y"), use("c", "z")),
				msg(RoleUser, result("c", "3"), result("a", "1")), AssistantText("ok"),
			},
			want: []Message{
				UserText("hi"), msg(RoleAssistant, use("a", "x"), use("b", "y"), use("c", "z")),
				msg(RoleUser, result("a", "1"), interrupted("b"), result("c", "3")), AssistantText("ok"),
			},
		},
		{
			name: "orphaned result at the start becomes text",
			in:   []Message{msg(RoleUser, result("gone", "42"), Text("go on")), AssistantText("ok")},
			want: []Message{
				msg(RoleUser, Text("[result of earlier tool call gone: 42]"), Text("go on")), AssistantText("ok"),
			},
		},
		{
			name: "duplicate and foreign results become text",
			in: []Message{
				UserText("hi"), msg(RoleAssistant, use("a", "x")),
				msg(RoleUser, result("a", "1"), result("a", "again"), result("zz", "?")),
			},
			want: []Message{
				UserText("hi"), msg(RoleAssistant, use("a", "x")),
				msg(RoleUser, result("a", "1"), Text("[result of earlier tool call a: again]"), Text("[result of earlier tool call zz: ?]")),
			},
		},
		{
			name: "starts with the assistant",
			in:   []Message{AssistantText("hello"), UserText("hi")},
			want: []Message{UserText(continuationText), AssistantText("hello"), UserText("hi")},
		},
		{
			name: "consecutive roles merge, results first",
			in: []Message{
				UserText("a"), UserText("b"), msg(RoleAssistant, use("t", "x")), AssistantText("more"),
				UserText("c"), msg(RoleUser, result("t", "r")),
			},
			want: []Message{
				msg(RoleUser, Text("a"), Text("b")), msg(RoleAssistant, use("t", "x"), Text("more")),
				msg(RoleUser, result("t", "r"), Text("c")),
			},
		},
		{
			name: "blank text dropped, empty message gets a placeholder",
			in:   []Message{msg(RoleUser, Text("  "), Text("q")), msg(RoleAssistant, Text("\n"))},
			want: []Message{UserText("q"), AssistantText(placeholderText)},
		},
		{
			name: "message with no content is dropped",
			in:   []Message{UserText("q"), {Role: RoleAssistant}, AssistantText("a")},
			want: []Message{UserText("q"), AssistantText("a")},
		},
		{
			name: "media in assistant messages becomes notes",
			in:   []Message{UserText("q"), msg(RoleAssistant, ContentBlock{Image: &ImageBlock{Format: "png", Source: Source{Bytes: []byte{1}}}})},
			want: []Message{
				UserText("q"), AssistantText("[png image omitted: only user messages may carry it]"),
				// the view always ends with the user in a turn; Repair itself
				// only needs to keep it valid
			},
		},
		{
			name: "a reused tool use id is renamed with its result",
			in: []Message{
				UserText("q"), msg(RoleAssistant, use("x", "calc")), msg(RoleUser, result("x", "1")),
				msg(RoleAssistant, use("x", "calc")), msg(RoleUser, result("x", "2")), AssistantText("done"),
			},
			want: []Message{
				UserText("q"), msg(RoleAssistant, use("x", "calc")), msg(RoleUser, result("x", "1")),
				msg(RoleAssistant, use("x_dup2", "calc")), msg(RoleUser, result("x_dup2", "2")), AssistantText("done"),
			},
		},
		{
			name: "reasoning in a user message is dropped",
			in:   []Message{msg(RoleUser, Text("q"), ContentBlock{Reasoning: &ReasoningBlock{Text: "?"}})},
			want: []Message{UserText("q")},
		},
		{
			name: "unknown role is treated as user",
			in:   []Message{{Role: "system", Content: []ContentBlock{Text("x")}}},
			want: []Message{UserText("x")},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := cloneAll(tt.in)
			got := Repair(tt.in)
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("Repair (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(before, tt.in); diff != "" {
				t.Errorf("Repair changed its input (-before +after):\n%s", diff)
			}
			if again := Repair(got); !cmp.Equal(again, got) {
				t.Errorf("Repair is not idempotent:\n%s", cmp.Diff(got, again))
			}
		})
	}
}

// cloneAll deep-copies messages through JSON.
func cloneAll(msgs []Message) []Message {
	raw, _ := json.Marshal(msgs)
	var out []Message
	_ = json.Unmarshal(raw, &out)
	return out
}

func TestRepairLimitsMedia(t *testing.T) {
	img := ContentBlock{Image: &ImageBlock{Format: "png", Source: Source{Bytes: []byte{1}}}}
	doc := ContentBlock{Document: &DocumentBlock{Format: "txt", Name: "d", Source: Source{Bytes: []byte("x")}}}
	var msgs []Message
	for range 15 {
		msgs = append(msgs, msg(RoleUser, Text("look"), img, img, doc), AssistantText("seen"))
	}
	msgs = append(msgs, UserText("last"))
	got := Repair(msgs)
	var images, docs int
	for _, m := range got {
		for _, b := range m.Content {
			if b.Image != nil {
				images++
			}
			if b.Document != nil {
				docs++
			}
		}
	}
	if images != MaxImages || docs != MaxDocuments {
		t.Errorf("%d images and %d documents kept, want %d and %d", images, docs, MaxImages, MaxDocuments)
	}
	// The latest are the ones kept.
	last := got[len(got)-3]
	if last.Content[1].Image == nil || last.Content[3].Document == nil {
		t.Errorf("latest media were dropped: %+v", last.Content)
	}
	if first := got[0]; first.Content[1].Image != nil {
		t.Error("oldest image was kept")
	}
}

func TestTruncateMiddle(t *testing.T) {
	s := strings.Repeat("é", 1000) + "MIDDLE" + strings.Repeat("ü", 1000) // 2-byte runes
	for _, limit := range []int{100, 101, 333, 1000} {
		got := truncateMiddle(s, limit)
		if !utf8.ValidString(got) {
			t.Errorf("limit %d: result is not valid UTF-8", limit)
		}
		if !strings.HasPrefix(got, "éé") || !strings.HasSuffix(got, "üü") {
			t.Errorf("limit %d: head or tail lost", limit)
		}
		if !strings.Contains(got, "bytes truncated") || strings.Contains(got, "MIDDLE") {
			t.Errorf("limit %d: no marker or middle kept: %q", limit, got)
		}
		if len(got) > limit+64 {
			t.Errorf("limit %d: %d bytes", limit, len(got))
		}
	}
	if got := truncateMiddle("short", 10); got != "short" {
		t.Errorf("short string changed: %q", got)
	}
}
