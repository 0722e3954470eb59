package turn_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/lambda-agent/lambda-agent/internal/agent"
	"github.com/lambda-agent/lambda-agent/internal/ddbhistory"
	"github.com/lambda-agent/lambda-agent/internal/turn"
)

// withSubAgents is a fake agent with the sub-agents *agent.Agent lists.
type withSubAgents struct {
	*fakeAgent
	names []string
}

func (a withSubAgents) SubAgents() ([]string, map[string]bool) { return a.names, map[string]bool{} }

// TestAgentTranscript: the service reads the transcripts of its agent's
// sub-agents, with each one's count, window and state; a name its agent
// does not have, or any name when it has none, is an *UnknownAgentError
// that lists those it has.
func TestAgentTranscript(t *testing.T) {
	store := newFakeStore()
	key := ddbhistory.Key{Owner: owner, ID: "s1"}
	window := agent.WindowState{Removed: 2}
	if err := store.Commit(t.Context(), ddbhistory.NewSession(key), ddbhistory.Turn{
		Messages: []agent.Message{agent.UserText("q"), agent.AssistantText("a")},
		Agents:   []ddbhistory.AgentTurn{{Name: "researcher", Messages: []agent.Message{agent.UserText("t1"), agent.AssistantText("r1"), agent.UserText("t2"), agent.AssistantText("r2")}, Window: window}},
	}); err != nil {
		t.Fatal(err)
	}
	svc, _ := turn.New(store, withSubAgents{&fakeAgent{}, []string{"researcher", "writer"}})
	page, err := svc.AgentTranscript(t.Context(), owner, "s1", "researcher", "", 3)
	if err != nil {
		t.Fatal(err)
	}
	if page.Agent != "researcher" || page.Count != 4 || page.Window != window || len(page.Messages) != 3 || page.NextCursor == "" || page.Title != "q" || page.Pending != nil {
		t.Errorf("the researcher's first page: %+v", page)
	}
	if page, err := svc.AgentTranscript(t.Context(), owner, "s1", "writer", "", 3); err != nil || page.Count != 0 || len(page.Messages) != 0 {
		t.Errorf("the writer's: %+v, %v", page, err)
	}
	_, err = svc.AgentTranscript(t.Context(), owner, "s1", "critic", "", 3)
	var unknown *turn.UnknownAgentError
	if !errors.As(err, &unknown) || !errors.Is(err, turn.ErrUnknownAgent) || !strings.Contains(err.Error(), "researcher, writer") {
		t.Errorf("an unknown sub-agent: %v", err)
	}
	none, _ := turn.New(store, &fakeAgent{})
	if _, err := none.AgentTranscript(t.Context(), owner, "s1", "researcher", "", 3); !errors.Is(err, turn.ErrUnknownAgent) || !strings.Contains(err.Error(), "has none") {
		t.Errorf("an agent without sub-agents: %v", err)
	}
}
