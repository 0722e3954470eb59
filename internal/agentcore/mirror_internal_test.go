package agentcore

import (
	"slices"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/aws/aws-sdk-go-v2/service/bedrockagentcore/types"
	"github.com/lambda-agent/lambda-agent/internal/agent"
	"github.com/lambda-agent/lambda-agent/internal/ddbhistory"
	"github.com/lambda-agent/lambda-agent/internal/memory"
)

// TestEventsOfALongMessage: a message longer than a payload's limit is
// split into payloads of at most 9000 characters, and a payload list
// longer than an event's limit goes on in another event, the text whole
// and in order across them, each event with a part of its own.
func TestEventsOfALongMessage(t *testing.T) {
	// 101 payloads of text: two events. The rune é is two bytes, so that
	// a split by bytes would show.
	text := strings.Repeat("é", maxText*maxPayload+5)
	evs := eventsOf(7, agent.Message{Role: agent.RoleUser, Content: []agent.ContentBlock{agent.Text(text)}})
	if len(evs) != 2 {
		t.Fatalf("%d events, want 2", len(evs))
	}
	var whole strings.Builder
	parts := map[string]bool{}
	for _, e := range evs {
		if e.message != 7 || e.skip || parts[e.part] || len(e.payload) > maxPayload {
			t.Errorf("event %+v", e)
		}
		parts[e.part] = true
		for _, p := range e.payload {
			c := p.(*types.PayloadTypeMemberConversational).Value
			s := c.Content.(*types.ContentMemberText).Value
			if n := utf8.RuneCountInString(s); n < 1 || n > maxText || c.Role != types.RoleUser {
				t.Errorf("a payload of %d characters, role %s", n, c.Role)
			}
			whole.WriteString(s)
		}
	}
	if whole.String() != text {
		t.Error("the payloads do not add up to the message's text")
	}
}

// TestEventsOfMedia: a message of media and reasoning alone makes no event:
// there are no words to mirror.
func TestEventsOfMedia(t *testing.T) {
	msg := agent.Message{Role: agent.RoleAssistant, Content: []agent.ContentBlock{
		{Reasoning: &agent.ReasoningBlock{Text: "thinking"}},
		{Image: &agent.ImageBlock{Format: "png", Source: agent.Source{Bytes: []byte{1}}}},
	}}
	if evs := eventsOf(0, msg); len(evs) != 0 {
		t.Errorf("%d events of a message without words", len(evs))
	}
}

// TestStamp: a commit's events take the milliseconds at the end of the
// span since the previous commit, in order, and never reach back to it;
// when there are more of them than the span holds, the first share its
// first millisecond.
func TestStamp(t *testing.T) {
	at := time.UnixMilli(1_000_000)
	change := func(previous time.Time) memory.Change {
		return memory.Change{Session: ddbhistory.SessionImage{UpdatedAt: at}, Previous: previous}
	}
	stamps := func(c memory.Change, count int) []int64 {
		var out []int64
		for n := range count {
			out = append(out, stamp(c, n, count).UnixMilli()-at.UnixMilli())
		}
		return out
	}
	for _, tt := range []struct {
		name     string
		previous time.Time
		count    int
		want     []int64
	}{
		{"a first commit", time.Time{}, 3, []int64{-2, -1, 0}},
		{"room enough", at.Add(-time.Second), 3, []int64{-2, -1, 0}},
		{"too little room", at.Add(-3 * time.Millisecond), 5, []int64{-2, -2, -2, -1, 0}},
	} {
		if got := stamps(change(tt.previous), tt.count); !slices.Equal(got, tt.want) {
			t.Errorf("%s: stamps %v ms from the commit, want %v", tt.name, got, tt.want)
		}
	}
}
