package agentcore

import (
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/aws/aws-sdk-go-v2/service/bedrockagentcore/types"
	"github.com/lambda-agent/lambda-agent/internal/agent"
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
