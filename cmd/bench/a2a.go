package main

import (
	"context"
	"iter"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"sync/atomic"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2asrv"
)

// remoteAgent is a remote agent for the bench: an a2a-go server in the
// bench process that answers every message at once, and counts the
// requests it gets.
type remoteAgent struct {
	srv      *httptest.Server
	requests atomic.Int64
}

// echoExecutor completes each task with the message's text.
type echoExecutor struct{}

func (echoExecutor) Execute(_ context.Context, ec *a2asrv.ExecutorContext) iter.Seq2[a2a.Event, error] {
	return func(yield func(a2a.Event, error) bool) {
		text := ""
		for _, p := range ec.Message.Parts {
			text += p.Text()
		}
		if ec.StoredTask == nil && !yield(a2a.NewSubmittedTask(ec, ec.Message), nil) {
			return
		}
		if yield(a2a.NewArtifactEvent(ec, a2a.NewTextPart("Done: "+text)), nil) {
			yield(a2a.NewStatusUpdateEvent(ec, a2a.TaskStateCompleted, nil), nil)
		}
	}
}

func (echoExecutor) Cancel(_ context.Context, ec *a2asrv.ExecutorContext) iter.Seq2[a2a.Event, error] {
	return func(yield func(a2a.Event, error) bool) {
		yield(a2a.NewStatusUpdateEvent(ec, a2a.TaskStateCanceled, nil), nil)
	}
}

// startRemoteAgent serves a remote agent on loopback, whose card names
// its JSON-RPC endpoint.
func startRemoteAgent() *remoteAgent {
	r := &remoteAgent{}
	mux := http.NewServeMux()
	r.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		r.requests.Add(1)
		mux.ServeHTTP(w, req)
	}))
	card := &a2a.AgentCard{
		Name: "remote", Description: "Answers at once.", Version: "1",
		SupportedInterfaces: []*a2a.AgentInterface{{URL: r.srv.URL + "/a2a", ProtocolBinding: a2a.TransportProtocolJSONRPC, ProtocolVersion: a2a.Version}},
		Skills:              []a2a.AgentSkill{{ID: "echo", Name: "echo", Description: "Echoes.", Tags: []string{"echo"}}},
	}
	mux.Handle("/.well-known/agent-card.json", a2asrv.NewStaticAgentCardHandler(card))
	mux.Handle("/a2a", a2asrv.NewJSONRPCHandler(a2asrv.NewHandler(echoExecutor{}, a2asrv.WithLogger(slog.New(slog.DiscardHandler)))))
	return r
}

// agentsEnv is A2A_AGENTS naming r.
func (r *remoteAgent) agentsEnv() string {
	return `[{"name":"remote","card_url":"` + r.srv.URL + `/.well-known/agent-card.json"}]`
}
