package main

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/lambda-agent/lambda-agent/internal/agentcore"
	"github.com/lambda-agent/lambda-agent/internal/testkit/agentcoretest"
	"github.com/lambda-agent/lambda-agent/internal/testkit/conversetest"
	"github.com/lambda-agent/lambda-agent/internal/testkit/dynamodbtest"
)

// turnKinds are the turns whose DynamoDB cost is measured.
var turnKinds = []struct {
	name, message string
	env           map[string]string
	keyed         bool // each turn sends a new Idempotency-Key
	remote        bool // A2A_AGENTS names a remote agent (remoteAgent)
	// person is the JWT subject the turns come from; "" is anonymous.
	person string
}{
	{"plain", "Hello again", nil, false, false, ""},
	{"plain, Idempotency-Key", "Hello again", nil, true, false, ""},
	{"tool", "What is 25*48?", nil, false, false, ""},
	{"150 messages", longTurn, map[string]string{"MAX_CYCLES": "80"}, false, false, ""},
	{"summarizing", "Hello again", map[string]string{"CONVERSATION_MANAGER": "summarizing"}, false, false, ""},
	{"delegating", delegatingTurn, map[string]string{"AGENTS": helperAgent}, false, false, ""},
	{"remote agent (A2A)", remoteTurn, nil, false, true, ""},
	{"with memory (a person's)", "Hello again", map[string]string{"MEMORY": "on"}, false, false, "bench-person"},
	{"with AgentCore Memory (a person's)", "Hello again", map[string]string{"AGENTCORE_MEMORY_ID": agentcoretest.MemoryID}, false, false, "bench-person"},
	{"plain, audit record", "Hello again", map[string]string{"AUDIT": "on"}, false, false, ""},
	{"tool, audit record", "What is 25*48?", map[string]string{"AUDIT": "on"}, false, false, ""},
}

// remoteTurn calls the remote agent once, over A2A: the session keeps the
// remote context in its state.
const remoteTurn = "Ask the remote agent for 25*48"

// delegatingTurn hands a calculation to helperAgent, a sub-agent with the
// calculator, whose two model calls and tool call are the turn's too.
const (
	delegatingTurn = "Ask the helper for 25*48"
	helperAgent    = `[{"name":"helper","description":"Does arithmetic.","system_prompt":"You do arithmetic.","tools":["calculator"]}]`
)

// longTurn asks for a turn of 150 messages: 74 calculator calls in a row,
// more than one DynamoDB transaction holds.
const longTurn = "Add up 74 numbers"

// respond answers like a model: arithmetic gets a calculator call, tool
// results an answer, anything else an echo. It answers the summarizer too.
func respond(r *conversetest.Request) conversetest.Reply {
	last := r.Messages[len(r.Messages)-1]
	if calls, ok := callsSince(r.Messages, longTurn); ok {
		if calls < 74 {
			return conversetest.ToolUse(fmt.Sprintf("n%d", calls), "calculator", map[string]string{"expression": fmt.Sprintf("%d+1", calls)})
		}
		return conversetest.Text("Done adding.")
	}
	if last.Text() == remoteTurn {
		return conversetest.ToolUse(fmt.Sprintf("r%d", len(r.Messages)), "remote", map[string]string{"message": "What is 25*48?"})
	}
	if last.Text() == delegatingTurn {
		return conversetest.ToolUse(fmt.Sprintf("h%d", len(r.Messages)), "helper", map[string]string{"task": "What is 25*48?"})
	}
	if len(last.Content) > 0 && last.Content[0].ToolResult != nil {
		return conversetest.Text("25 × 48 = 1200.")
	}
	if strings.Contains(last.Text(), "25*48") {
		return conversetest.ToolUse(fmt.Sprintf("t%d", len(r.Messages)), "calculator", map[string]string{"expression": "25*48"})
	}
	return conversetest.EchoResponder(r)
}

// callsSince counts the tool results after the last user message whose text
// is prompt, and reports whether the request's turn began with it.
func callsSince(msgs []conversetest.Message, prompt string) (int, bool) {
	n := 0
	for i := len(msgs) - 1; i >= 0; i-- {
		switch m := msgs[i]; {
		case m.Role == "user" && len(m.Content) > 0 && m.Content[0].ToolResult != nil:
			n++
		case m.Role == "user":
			return n, m.Text() == prompt
		}
	}
	return 0, false
}

// costs measures what each kind of turn costs in DynamoDB, against a store
// that keeps the whole history in one item.
func costs(ctx context.Context, cfg config, b *strings.Builder) error {
	fmt.Fprintf(b, "### DynamoDB cost per turn\n\nAverages over %d turns of each kind, through the handler, counted on the wire by the client's transport (`dynamodbtest.Meter`). RCU is 1 per 4 KB read strongly consistently. WCU is 1 per KB written, doubled in a transaction. Every session has a window of 40 messages. A keyed turn sends a new `Idempotency-Key` each time. A turn of 150 messages is 74 calculator calls in a row (`MAX_CYCLES=80`), more than one transaction holds, so it is committed in parts. A summarizing turn uses `CONVERSATION_MANAGER=summarizing`, whose window summarizes past 40 messages. A delegating turn hands a calculation to a sub-agent (`AGENTS`), which calls the calculator: the turn reads the sub-agent's conversation, which the earlier turns on the session grew, with one Query more, and commits its four new messages and its conversation item in the turn's one transaction. A remote agent turn calls an agent over A2A (`A2A_AGENTS`, an a2a-go server in the bench process that answers at once): its tool result, and the remote context the session keeps in its state, are what it adds. The audit record's turns (`AUDIT=on`) write one item more per model call, its request and answer compressed (docs/audit.md).\n\n", cfg.costTurns)
	b.WriteString("| turn | stored messages | requests | sent | received | RCU | WCU |\n|---|---|---|---|---|---|---|\n")
	plain := map[int]dynamodbtest.Usage{}
	var memoryLine, agentCoreLine string
	remote := startRemoteAgent()
	defer remote.srv.Close()
	var remoteTurns int64
	for k, kind := range turnKinds {
		for _, n := range sizes {
			env := kind.env
			if kind.remote {
				env = map[string]string{"A2A_AGENTS": remote.agentsEnv()}
			}
			s, err := newStack(ctx, env)
			if err != nil {
				return err
			}
			s.Model.Responder = respond
			s.person = kind.person
			if s.MemoryModel != nil {
				s.MemoryModel.Responder = learnOne
			}
			if s.AgentCore != nil {
				remember(s, kind.person)
			}
			id := fmt.Sprintf("kind%d-%d", k, n)
			err = s.fill(ctx, id, n)
			key := func(i int) string {
				if kind.keyed {
					return fmt.Sprintf("key-%d", i)
				}
				return ""
			}
			if err == nil {
				_, err = s.chatWithKey(ctx, id, kind.message, key(-1)) // warm up
			}
			s.Meter.Take()
			recalls := agentCoreCalls(s, "RetrieveMemoryRecords")
			for i := 0; err == nil && i < cfg.costTurns; i++ {
				_, err = s.chatWithKey(ctx, id, kind.message, key(i))
			}
			u := s.Meter.Take()
			recalls = agentCoreCalls(s, "RetrieveMemoryRecords") - recalls
			if err == nil && s.Stream != nil {
				learned, lerr := s.drainMemory(ctx, cfg.costTurns, recalls)
				switch {
				case lerr != nil:
					err = lerr
				case n != sizes[0]:
				case s.AgentCore != nil:
					agentCoreLine = learned
				default:
					memoryLine = learned
				}
			}
			s.Close()
			if err != nil {
				return fmt.Errorf("%s turn at %d messages: %w", kind.name, n, err)
			}
			t := float64(cfg.costTurns)
			fmt.Fprintf(b, "| %s | %d | %.1f | %.0f B | %.0f B | %.1f | %.1f |\n", kind.name, n,
				float64(u.Requests)/t, float64(u.Sent)/t, float64(u.Received)/t, u.RCU/t, u.WCU/t)
			if kind.name == "plain" {
				plain[n] = u
			}
			if kind.remote {
				remoteTurns += int64(cfg.costTurns) + 1 // the warm-up's too
			}
		}
	}
	small, large := plain[sizes[0]], plain[sizes[len(sizes)-1]]
	bytesRatio := float64(large.Sent+large.Received) / float64(small.Sent+small.Received)
	reqs := float64(large.Requests) / float64(cfg.costTurns)
	verdict := func(ok bool) string {
		if ok {
			return "met"
		}
		return "**missed**"
	}
	fmt.Fprintf(b, "\nA plain turn makes **%.1f** requests (target ≤ 2: %s). Its bytes at 10,000 messages are **%.3f×** those at 40 (target ≤ 1.2×: %s).\n\n",
		reqs, verdict(reqs <= 2), bytesRatio, verdict(bytesRatio <= 1.2))
	if remoteTurns > 0 {
		fmt.Fprintf(b, "The remote agent got **%.2f** HTTP requests per turn that called it (%d for %d turns, in %d stacks): one JSON-RPC `SendMessage` a turn, and the card once a stack, which init began to fetch.\n\n",
			float64(remote.requests.Load())/float64(remoteTurns), remote.requests.Load(), remoteTurns, len(sizes))
	}
	b.WriteString(memoryLine)
	b.WriteString(agentCoreLine)
	return baselineCosts(ctx, cfg, b, plain)
}

// learnOne is the extraction model of the memory turns: each commit
// teaches one fact.
func learnOne(r *conversetest.Request) conversetest.Reply {
	return conversetest.ToolUse(fmt.Sprintf("m%d", len(r.Messages)), "update_memory", map[string]any{
		"operations": []map[string]any{{"action": "add", "kind": "fact", "text": fmt.Sprintf("The person said hello again, time %d.", time.Now().UnixNano())}},
	})
}

// remember gives person the records an AgentCore strategy would have
// extracted: ten, which each turn's recall finds.
func remember(s *stack, person string) {
	for i := range 10 {
		s.AgentCore.AddRecord(agentcoretest.MemoryID, agentcoretest.Record{
			Namespaces: []string{"/users/" + agentcore.ActorID(person) + "/facts"},
			Text:       fmt.Sprintf("The person says hello again, fact %d.", i),
		})
	}
}

// agentCoreCalls counts the stack's calls of op to AgentCore, if it has
// AgentCore Memory.
func agentCoreCalls(s *stack, op string) int {
	if s.AgentCore == nil {
		return 0
	}
	return s.AgentCore.Calls(op)
}

// drainMemory waits until the memory function has handled the turns so
// far, and describes what it cost, per commit; recalls are the AgentCore
// recalls of the turns measured.
func (s *stack) drainMemory(ctx context.Context, turns, recalls int) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	if err := s.Stream.Drain(ctx); err != nil {
		return "", err
	}
	if f := s.Stream.Failed(); len(f) > 0 {
		return "", fmt.Errorf("memory: %d stream records failed", len(f))
	}
	u := s.MemoryMeter.Take()
	commits := float64(len(s.Stream.Delivered()))
	if s.AgentCore != nil {
		return fmt.Sprintf("With AgentCore Memory on, a person's turn makes the DynamoDB requests of a plain turn and **%.1f** `RetrieveMemoryRecords` call, which finds 10 records. The memory function, from the table's stream, made **%.1f** DynamoDB requests per commit (%.0f B sent, %.0f B received, %.1f RCU; the commit's messages read) and **%.1f** `CreateEvent` calls (%d commits, the warm-up's included): one per message with words.\n\n",
			float64(recalls)/float64(turns), float64(u.Requests)/commits, float64(u.Sent)/commits, float64(u.Received)/commits, u.RCU/commits,
			float64(s.AgentCore.Calls("CreateEvent"))/commits, int(commits)), nil
	}
	return fmt.Sprintf("With memory on, a person's turn makes one Query more than a plain turn: the recall of their records, %d of them by the last turn (each turn teaches one). The memory function, from the table's stream, made **%.1f** DynamoDB requests per commit (%.0f B sent, %.0f B received, %.1f RCU, %.1f WCU; %d commits, the warm-up's included) and one Converse call to the extraction model.\n\n",
		turns+1, float64(u.Requests)/commits, float64(u.Sent)/commits, float64(u.Received)/commits, u.RCU/commits, u.WCU/commits, int(commits)), nil
}
