package ddbhistory_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/lambda-agent/lambda-agent/internal/agent"
	"github.com/lambda-agent/lambda-agent/internal/ddbhistory"
)

// BenchmarkTurnCost measures what one turn costs in DynamoDB: a Load and a
// Commit, on sessions of 40, 1,000 and 10,000 stored messages with the same
// window of 40. Requests and bytes are counted on the wire by the client's
// transport; RCU and WCU are computed from the items on the wire (see
// capacity). Run:
//
//	go test -run='^$' -bench=TurnCost -benchtime=200x ./internal/ddbhistory
func BenchmarkTurnCost(b *testing.B) {
	toolTurn := []agent.Message{
		agent.UserText("What is in the report?"),
		{Role: agent.RoleAssistant, Content: []agent.ContentBlock{{ToolUse: &agent.ToolUseBlock{ToolUseID: "t1", Name: "read_report", Input: json.RawMessage(`{"id":"q3"}`)}}}},
		{Role: agent.RoleUser, Content: []agent.ContentBlock{{ToolResult: agent.TextResult("t1", agent.ToolSuccess, strings.Repeat("Revenue grew in every region. ", 70))}}},
		agent.AssistantText("Revenue grew in every region."),
	}
	turns := map[string][]agent.Message{"plain": sizedTurn(0), "tool": toolTurn}
	for _, kind := range []string{"plain", "tool"} {
		for _, stored := range []int{40, 1_000, 10_000} {
			b.Run(fmt.Sprintf("%s/stored=%d", kind, stored), func(b *testing.B) {
				e := newEnv(b, backends()[0], ddbhistory.Config{})
				key := ddbhistory.Key{Owner: "bench", ID: "s"}
				fill(b, e.store, key, stored, 40)
				e.count.reset()
				for b.Loop() {
					sess, err := e.store.Load(context.Background(), key, "")
					if err != nil {
						b.Fatal(err)
					}
					msgs := turns[kind]
					count := sess.Count + len(msgs)
					if err := e.store.Commit(context.Background(), sess, ddbhistory.Turn{
						Messages: msgs,
						Window:   agent.WindowState{Removed: count - 40},
					}); err != nil {
						b.Fatal(err)
					}
				}
				u := e.count.reset()
				n := float64(b.N)
				b.ReportMetric(float64(u.Requests)/n, "requests/turn")
				b.ReportMetric(float64(u.Sent)/n, "sent-B/turn")
				b.ReportMetric(float64(u.Received)/n, "recv-B/turn")
				b.ReportMetric(u.RCU/n, "RCU/turn")
				b.ReportMetric(u.WCU/n, "WCU/turn")
			})
		}
	}
}
