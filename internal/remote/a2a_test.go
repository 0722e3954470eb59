package remote_test

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"iter"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2asrv"
	"github.com/google/go-cmp/cmp"
	"github.com/lambda-agent/lambda-agent/internal/agent"
	"github.com/lambda-agent/lambda-agent/internal/remote"
	"github.com/lambda-agent/lambda-agent/internal/testkit"
	"github.com/lambda-agent/lambda-agent/internal/testkit/ssmtest"
)

// weatherAgent is the executor of the test agents, a real a2a-go server's.
// What it does depends on the message:
//   - "weather?" asks which city, and answers the follow-up on the task;
//   - "message" answers with a message, not a task;
//   - "fail" fails its task;
//   - "slow" answers after a minute;
//   - anything else is echoed in an artifact sent in two pieces, with how
//     many messages the conversation (context) has had.
type weatherAgent struct {
	mu       sync.Mutex
	contexts map[string]int
}

func (w *weatherAgent) Execute(ctx context.Context, ec *a2asrv.ExecutorContext) iter.Seq2[a2a.Event, error] {
	return func(yield func(a2a.Event, error) bool) {
		text := ""
		for _, p := range ec.Message.Parts {
			text += p.Text()
		}
		if text == "message" {
			m := a2a.NewMessage(a2a.MessageRoleAgent, a2a.NewTextPart("a message, not a task"))
			m.ContextID = ec.ContextID
			yield(m, nil)
			return
		}
		w.mu.Lock()
		if w.contexts == nil {
			w.contexts = map[string]int{}
		}
		w.contexts[ec.ContextID]++
		n := w.contexts[ec.ContextID]
		w.mu.Unlock()

		if ec.StoredTask == nil && !yield(a2a.NewSubmittedTask(ec, ec.Message), nil) {
			return
		}
		status := func(state a2a.TaskState, say string) bool {
			var m *a2a.Message
			if say != "" {
				m = a2a.NewMessageForTask(a2a.MessageRoleAgent, ec, a2a.NewTextPart(say))
			}
			return yield(a2a.NewStatusUpdateEvent(ec, state, m), nil)
		}
		switch {
		case ec.StoredTask != nil && ec.StoredTask.Status.State == a2a.TaskStateInputRequired:
			if yield(a2a.NewArtifactEvent(ec, a2a.NewTextPart("Sunny in "+text+".")), nil) {
				status(a2a.TaskStateCompleted, "")
			}
		case text == "weather?":
			status(a2a.TaskStateInputRequired, "Which city?")
		case text == "fail":
			status(a2a.TaskStateFailed, "no such order")
		case text == "slow":
			select {
			case <-ctx.Done():
			case <-time.After(time.Minute):
			}
			status(a2a.TaskStateCompleted, "too late")
		default:
			if !status(a2a.TaskStateWorking, "thinking") {
				return
			}
			first := a2a.NewArtifactEvent(ec, a2a.NewTextPart("Hello, "))
			if !yield(first, nil) || !yield(a2a.NewArtifactUpdateEvent(ec, first.Artifact.ID, a2a.NewTextPart(fmt.Sprintf("%s (message %d)", text, n))), nil) {
				return
			}
			status(a2a.TaskStateCompleted, "")
		}
	}
}

func (w *weatherAgent) Cancel(_ context.Context, ec *a2asrv.ExecutorContext) iter.Seq2[a2a.Event, error] {
	return func(yield func(a2a.Event, error) bool) {
		yield(a2a.NewStatusUpdateEvent(ec, a2a.TaskStateCanceled, nil), nil)
	}
}

// agentServer is a real A2A agent: a2a-go's JSON-RPC handler at /a2a and
// its card at the well-known path, with the requests it got.
type agentServer struct {
	*httptest.Server
	CardURL string

	mu       sync.Mutex
	requests []*http.Request
}

// serverOpts change an agentServer.
type serverOpts struct {
	tls       bool
	streaming bool
	// card changes the card the server serves, given its base URL.
	card func(base string, c *a2a.AgentCard)
	// cardBody, when set, is served as the card, as it is.
	cardBody []byte
	// rpc, when set, answers at /a2a instead of the agent.
	rpc http.HandlerFunc
	// check, when set, looks at every request and its body first.
	check func(r *http.Request, body []byte)
}

func startAgent(t *testing.T, opts serverOpts) *agentServer {
	t.Helper()
	s := &agentServer{}
	mux := http.NewServeMux()
	rpc := http.Handler(a2asrv.NewJSONRPCHandler(a2asrv.NewHandler(&weatherAgent{}, a2asrv.WithLogger(slog.New(slog.DiscardHandler)))))
	if opts.rpc != nil {
		rpc = opts.rpc
	}
	mux.Handle("/a2a", rpc)
	mux.Handle(a2asrv.WellKnownAgentCardPath, a2asrv.NewAgentCardHandler(a2asrv.AgentCardProducerFn(func(context.Context) (*a2a.AgentCard, error) {
		c := &a2a.AgentCard{
			Name:        "Weather",
			Description: "Knows the weather.",
			SupportedInterfaces: []*a2a.AgentInterface{
				a2a.NewAgentInterface(s.URL+"/a2a", a2a.TransportProtocolJSONRPC),
			},
			DefaultInputModes:  []string{"text"},
			DefaultOutputModes: []string{"text"},
			Capabilities:       a2a.AgentCapabilities{Streaming: opts.streaming},
			Skills:             []a2a.AgentSkill{{ID: "forecast", Name: "forecast", Description: "Forecasts for a city."}},
			Version:            "1",
		}
		if opts.card != nil {
			opts.card(s.URL, c)
		}
		return c, nil
	})))
	s.Server = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body := readBody(t, r)
		s.mu.Lock()
		s.requests = append(s.requests, r.Clone(context.Background()))
		s.mu.Unlock()
		if opts.check != nil {
			opts.check(r, body)
		}
		if opts.cardBody != nil && r.URL.Path == a2asrv.WellKnownAgentCardPath {
			_, _ = w.Write(opts.cardBody)
			return
		}
		mux.ServeHTTP(w, r)
	}))
	if opts.tls {
		s.StartTLS()
	} else {
		s.Start()
	}
	t.Cleanup(s.Close)
	s.CardURL = s.URL + a2asrv.WellKnownAgentCardPath
	return s
}

// readBody reads r's body, and puts it back.
func readBody(t *testing.T, r *http.Request) []byte {
	b, err := io.ReadAll(r.Body)
	if err != nil {
		t.Errorf("read a request's body: %v", err)
	}
	r.Body = io.NopCloser(bytes.NewReader(b))
	return b
}

// Requests returns the requests the server got, and clears them.
func (s *agentServer) Requests() []*http.Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	r := s.requests
	s.requests = nil
	return r
}

// tlsConfig trusts the certificate of s, a TLS server.
func (s *agentServer) tlsConfig() *tls.Config {
	return s.Client().Transport.(*http.Transport).TLSClientConfig
}

// newA2A returns the tool set of agents, whose warnings go to the buffer
// returned.
func newA2A(t *testing.T, opts remote.A2AOptions, agents ...remote.A2AAgent) (*remote.A2A, *testkit.Buffer) {
	t.Helper()
	var logs testkit.Buffer
	opts.Logger = slog.New(slog.NewJSONHandler(&logs, nil))
	if opts.Getenv == nil {
		opts.Getenv = func(string) string { return "" }
	}
	return remote.NewA2A(agents, opts), &logs
}

// client returns the client of the one agent of set, named "weather".
func client(t *testing.T, set *remote.A2A) *remote.A2AClient {
	t.Helper()
	c, err := set.Client(t.Context(), "weather")
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// TestA2AAnswers: an agent that answers, over a blocking call and over a
// stream, through its client and through its tool, over http to loopback
// and https.
func TestA2AAnswers(t *testing.T) {
	for _, tt := range []struct {
		name string
		opts serverOpts
	}{
		{"blocking", serverOpts{}},
		{"streaming", serverOpts{streaming: true}},
		{"https", serverOpts{tls: true, streaming: true}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			srv := startAgent(t, tt.opts)
			var opts remote.A2AOptions
			if tt.opts.tls {
				opts.TLSConfig = srv.tlsConfig()
			}
			set, logs := newA2A(t, opts, remote.A2AAgent{Name: "weather", CardURL: srv.CardURL})
			c := client(t, set)
			if c.Streaming() != tt.opts.streaming {
				t.Errorf("Streaming() = %v", c.Streaming())
			}

			got, err := c.Send(t.Context(), remote.SendInput{Text: "hi"})
			if err != nil {
				t.Fatal(err)
			}
			want := &remote.A2AOutcome{State: a2a.TaskStateCompleted, Text: "Hello, hi (message 1)"}
			if diff := cmp.Diff(want, got, ignoreIDs); diff != "" {
				t.Errorf("Send (-want +got):\n%s", diff)
			}
			if got.TaskID == "" || got.ContextID == "" {
				t.Errorf("ids %q %q", got.TaskID, got.ContextID)
			}

			var progress []string
			got, err = c.SendStreaming(t.Context(), remote.SendInput{Text: "there"}, func(s string) { progress = append(progress, s) })
			if err != nil {
				t.Fatal(err)
			}
			want.Text = "Hello, there (message 1)"
			if diff := cmp.Diff(want, got, ignoreIDs); diff != "" {
				t.Errorf("SendStreaming (-want +got):\n%s", diff)
			}
			var wantProgress []string
			if tt.opts.streaming {
				wantProgress = []string{"thinking", "Hello, ", "there (message 1)"}
			}
			if diff := cmp.Diff(wantProgress, progress); diff != "" {
				t.Errorf("progress (-want +got):\n%s", diff)
			}

			tools := set.Tools(t.Context())
			if len(tools) != 1 {
				t.Fatalf("tools %v; logs:\n%s", names(tools), logs)
			}
			spec := tools[0].Spec()
			if spec.Name != "weather" || !strings.Contains(spec.Description, "Weather: Knows the weather. Skills: forecast: Forecasts for a city.;") {
				t.Errorf("spec %+v", spec)
			}
			out, err := run(t, t.Context(), tools[0], `{"message":"tool"}`)
			if err != nil || len(out) != 1 || out[0].Text != "Hello, tool (message 1)" {
				t.Errorf("the tool: %v %+v", err, out)
			}
			for _, r := range srv.Requests() {
				if r.Method == http.MethodPost && r.Header.Get("A2A-Version") != "1.0" {
					t.Errorf("A2A-Version %q", r.Header.Get("A2A-Version"))
				}
			}
		})
	}
}

var ignoreIDs = cmp.FilterPath(func(p cmp.Path) bool {
	n := p.Last().String()
	return n == ".TaskID" || n == ".ContextID"
}, cmp.Ignore())

// TestA2AMessageAnswer: an agent may answer with a message, not a task.
func TestA2AMessageAnswer(t *testing.T) {
	for _, streaming := range []bool{false, true} {
		srv := startAgent(t, serverOpts{streaming: streaming})
		set, _ := newA2A(t, remote.A2AOptions{}, remote.A2AAgent{Name: "weather", CardURL: srv.CardURL})
		got, err := client(t, set).SendStreaming(t.Context(), remote.SendInput{Text: "message"}, nil)
		if err != nil {
			t.Fatal(err)
		}
		want := &remote.A2AOutcome{State: a2a.TaskStateCompleted, Text: "a message, not a task"}
		if diff := cmp.Diff(want, got, ignoreIDs); diff != "" {
			t.Errorf("streaming %v (-want +got):\n%s", streaming, diff)
		}
	}
}

// TestA2AInputRequired: an agent that asks for input returns its
// question; the answer on the same task and context completes it.
func TestA2AInputRequired(t *testing.T) {
	for _, streaming := range []bool{false, true} {
		t.Run(fmt.Sprint("streaming ", streaming), func(t *testing.T) {
			srv := startAgent(t, serverOpts{streaming: streaming})
			set, _ := newA2A(t, remote.A2AOptions{}, remote.A2AAgent{Name: "weather", CardURL: srv.CardURL})
			c := client(t, set)
			asked, err := c.SendStreaming(t.Context(), remote.SendInput{Text: "weather?"}, nil)
			if err != nil {
				t.Fatal(err)
			}
			want := &remote.A2AOutcome{State: a2a.TaskStateInputRequired, Text: "Which city?", Question: "Which city?"}
			if diff := cmp.Diff(want, asked, ignoreIDs); diff != "" {
				t.Errorf("the question (-want +got):\n%s", diff)
			}
			got, err := c.SendStreaming(t.Context(), remote.SendInput{Text: "Paris", TaskID: asked.TaskID, ContextID: asked.ContextID}, nil)
			if err != nil {
				t.Fatal(err)
			}
			want = &remote.A2AOutcome{State: a2a.TaskStateCompleted, Text: "Sunny in Paris.", TaskID: asked.TaskID, ContextID: asked.ContextID}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("the answer (-want +got):\n%s", diff)
			}

			// The tool asks the person the agent's question.
			out, err := run(t, t.Context(), set.Tools(t.Context())[0], `{"message":"weather?"}`)
			if err == nil || !strings.Contains(err.Error(), "The agent weather asks: Which city?") || out != nil {
				t.Errorf("the tool: %v %+v", err, out)
			}
		})
	}
}

// TestA2AToolKeepsTheConversation: the tool keeps the remote context in
// the session's state, so that the next call goes on with the same
// conversation, and the task that waits for input, so that the next call
// answers it; a call in a session that keeps nothing starts afresh, and
// ids the remote agent should not have sent are not kept.
func TestA2AToolKeepsTheConversation(t *testing.T) {
	srv := startAgent(t, serverOpts{})
	set, _ := newA2A(t, remote.A2AOptions{}, remote.A2AAgent{Name: "weather", CardURL: srv.CardURL})
	tool := set.Tools(t.Context())[0]
	state := agent.NewState(nil)
	call := func(message string) string {
		t.Helper()
		out, err := tool.Run(t.Context(), &agent.ToolCall{ID: "u", Name: "weather", Input: json.RawMessage(`{"message":"` + message + `"}`), State: state})
		if err != nil || len(out) != 1 {
			t.Fatalf("%s: %v %+v", message, err, out)
		}
		return out[0].Text
	}
	kept := func() remote.A2AConversation {
		t.Helper()
		var c remote.A2AConversation
		if ok, err := state.Get(remote.A2AStateKey("weather"), &c); !ok || err != nil {
			t.Fatalf("nothing kept: %v", err)
		}
		return c
	}
	if got := call("one"); got != "Hello, one (message 1)" {
		t.Fatalf("first answer %q", got)
	}
	first := kept()
	if first.ContextID == "" || first.TaskID != "" {
		t.Fatalf("kept %+v after an answer", first)
	}
	if _, err := tool.Run(t.Context(), &agent.ToolCall{ID: "u", Name: "weather", Input: json.RawMessage(`{"message":"weather?"}`), State: state}); err == nil || !strings.Contains(err.Error(), "Which city?") {
		t.Fatalf("the question: %v", err)
	}
	asked := kept()
	if asked.ContextID != first.ContextID || asked.TaskID == "" {
		t.Fatalf("kept %+v after a question", asked)
	}
	// The person's answer, in the invocation that resumes the turn, which
	// has only the session's state.
	state = agent.NewState(state.Snapshot())
	out, err := tool.(agent.Asker).Answered(t.Context(), &agent.ToolCall{ID: "u", Name: "weather", Input: json.RawMessage(`{"message":"weather?"}`), State: state}, "Paris")
	if err != nil || len(out) != 1 || out[0].Text != "Sunny in Paris." {
		t.Fatalf("the answer to the question: %v %+v", err, out)
	}
	if after := kept(); after.ContextID != first.ContextID || after.TaskID != "" {
		t.Fatalf("kept %+v after the task ended", after)
	}
	if got := call("two"); got != "Hello, two (message 4)" { // one, weather?, Paris, two
		t.Errorf("a later message: %q", got)
	}
	// A stored id that is not the agent's, or not text, starts afresh.
	_ = state.Set(remote.A2AStateKey("weather"), map[string]any{"context_id": 7})
	if got := call("three"); got != "Hello, three (message 1)" {
		t.Errorf("a message after an unreadable state: %q", got)
	}
	fresh := agent.NewState(nil)
	if out, err := tool.Run(t.Context(), &agent.ToolCall{ID: "u", Name: "weather", Input: json.RawMessage(`{"message":"four"}`), State: fresh}); err != nil || out[0].Text != "Hello, four (message 1)" {
		t.Errorf("another session: %v %+v", err, out)
	}
}

// TestA2AContextContinues: a message with the context id of an earlier
// answer goes on with the same conversation, in a new task.
func TestA2AContextContinues(t *testing.T) {
	srv := startAgent(t, serverOpts{})
	set, _ := newA2A(t, remote.A2AOptions{}, remote.A2AAgent{Name: "weather", CardURL: srv.CardURL})
	c := client(t, set)
	first, err := c.Send(t.Context(), remote.SendInput{Text: "one"})
	if err != nil {
		t.Fatal(err)
	}
	second, err := c.Send(t.Context(), remote.SendInput{Text: "two", ContextID: first.ContextID})
	if err != nil {
		t.Fatal(err)
	}
	if second.ContextID != first.ContextID || second.TaskID == first.TaskID || second.Text != "Hello, two (message 2)" {
		t.Errorf("first %+v, second %+v", first, second)
	}
	other, err := c.Send(t.Context(), remote.SendInput{Text: "three"})
	if err != nil || other.ContextID == first.ContextID || other.Text != "Hello, three (message 1)" {
		t.Errorf("a message without a context id: %v %+v", err, other)
	}
}

// TestA2AFailures: what goes wrong in a call is an error naming the
// agent, which the model gets as an error result, and never a panic.
func TestA2AFailures(t *testing.T) {
	huge := func(w http.ResponseWriter, r *http.Request) {
		_, _ = fmt.Fprint(w, `{"jsonrpc":"2.0","id":"1","result":{"task":{"id":"t","contextId":"c","status":{"state":"TASK_STATE_COMPLETED"},"artifacts":[{"artifactId":"a","parts":[{"text":"`)
		chunk := strings.Repeat("x", 1<<20)
		for range (remote.MaxResponseBytes >> 20) + 2 {
			if _, err := fmt.Fprint(w, chunk); err != nil {
				return
			}
		}
		_, _ = fmt.Fprint(w, `"}]}]}}}`)
	}
	for _, tt := range []struct {
		name    string
		opts    serverOpts
		timeout int
		message string
		says    string
		is      error
	}{
		{name: "failed task", message: "fail", says: "the task ended failed: no such order"},
		{name: "failed task, streaming", opts: serverOpts{streaming: true}, message: "fail", says: "the task ended failed: no such order"},
		{name: "garbage", opts: serverOpts{rpc: func(w http.ResponseWriter, r *http.Request) { _, _ = fmt.Fprint(w, "<html>not JSON-RPC</html>") }}, says: "decode"},
		{name: "garbage result", opts: serverOpts{rpc: func(w http.ResponseWriter, r *http.Request) {
			_, _ = fmt.Fprint(w, `{"jsonrpc":"2.0","id":"1","result":{"banana":1}}`)
		}}, says: "A2A agent weather"},
		{name: "garbage state", opts: serverOpts{rpc: func(w http.ResponseWriter, r *http.Request) {
			_, _ = fmt.Fprint(w, `{"jsonrpc":"2.0","id":"1","result":{"task":{"id":"t","contextId":"c","status":{"state":"TASK_STATE_BANANA"}}}}`)
		}}, says: "no known state"},
		{name: "garbage id", opts: serverOpts{rpc: func(w http.ResponseWriter, r *http.Request) {
			_, _ = fmt.Fprintf(w, `{"jsonrpc":"2.0","id":"1","result":{"task":{"id":"%s","contextId":"c","status":{"state":"TASK_STATE_COMPLETED"}}}}`, strings.Repeat("i", 300))
		}}, says: "not one"},
		{name: "garbage stream", opts: serverOpts{streaming: true, rpc: func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "text/event-stream")
			_, _ = fmt.Fprint(w, "data: {not json\n\n")
		}}, says: "A2A agent weather"},
		{name: "stream cut short", opts: serverOpts{streaming: true, rpc: func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "text/event-stream")
			_, _ = fmt.Fprint(w, `data: {"jsonrpc":"2.0","id":"1","result":{"task":{"id":"t","contextId":"c","status":{"state":"TASK_STATE_WORKING"}}}}`+"\n\n")
		}}, says: "ended before its task did"},
		{name: "HTTP error", opts: serverOpts{rpc: func(w http.ResponseWriter, r *http.Request) { http.Error(w, "down", http.StatusBadGateway) }}, says: "502"},
		{name: "huge", opts: serverOpts{rpc: huge}, is: remote.ErrTooLarge},
		{name: "huge stream", opts: serverOpts{streaming: true, rpc: func(w http.ResponseWriter, r *http.Request) {
			// An event, then comments of 1 MiB each, which the SDK's
			// parser reads line by line and skips.
			w.Header().Set("Content-Type", "text/event-stream")
			_, _ = fmt.Fprint(w, `data: {"jsonrpc":"2.0","id":"1","result":{"task":{"id":"t","contextId":"c","status":{"state":"TASK_STATE_WORKING"}}}}`+"\n\n")
			comment := ": " + strings.Repeat("x", 1<<20) + "\n"
			for range (remote.MaxResponseBytes >> 20) + 2 {
				if _, err := fmt.Fprint(w, comment); err != nil {
					return
				}
			}
		}}, is: remote.ErrTooLarge},
		{name: "slow", timeout: 1, message: "slow", says: "no answer within 1s", is: context.DeadlineExceeded},
		{name: "slow stream", opts: serverOpts{streaming: true}, timeout: 1, message: "slow", says: "no answer within 1s", is: context.DeadlineExceeded},
	} {
		t.Run(tt.name, func(t *testing.T) {
			srv := startAgent(t, tt.opts)
			set, _ := newA2A(t, remote.A2AOptions{}, remote.A2AAgent{Name: "weather", CardURL: srv.CardURL, TimeoutSeconds: tt.timeout})
			tools := set.Tools(t.Context())
			if len(tools) != 1 {
				t.Fatalf("tools %v", names(tools))
			}
			input, _ := json.Marshal(map[string]string{"message": cmpOr(tt.message, "hi")})
			start := time.Now()
			out, err := run(t, t.Context(), tools[0], string(input))
			switch {
			case err == nil:
				t.Fatalf("no error: %+v", out)
			case !strings.HasPrefix(err.Error(), "A2A agent weather: "):
				t.Errorf("the error does not name the agent: %v", err)
			case tt.says != "" && !strings.Contains(err.Error(), tt.says):
				t.Errorf("error %v, want one that says %q", err, tt.says)
			case tt.is != nil && !errors.Is(err, tt.is):
				t.Errorf("error %v, want one that is %v", err, tt.is)
			}
			if tt.timeout > 0 && time.Since(start) > 10*time.Second {
				t.Errorf("the timeout of %ds took %s", tt.timeout, time.Since(start))
			}
		})
	}
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// TestA2AJSONRPCError: an agent's JSON-RPC error, here a real server's
// for a task it does not know, is an error naming the agent.
func TestA2AJSONRPCError(t *testing.T) {
	srv := startAgent(t, serverOpts{})
	set, _ := newA2A(t, remote.A2AOptions{}, remote.A2AAgent{Name: "weather", CardURL: srv.CardURL})
	_, err := client(t, set).Send(t.Context(), remote.SendInput{Text: "Paris", TaskID: "no-such-task"})
	if err == nil || !strings.HasPrefix(err.Error(), "A2A agent weather: ") || !errors.Is(err, a2a.ErrTaskNotFound) {
		t.Errorf("error %v, want the agent's task not found", err)
	}
}

// TestA2AHostileCards: an agent whose card is unsafe or garbage is left
// out, with a warning naming it, and nothing is sent where the card
// points.
func TestA2AHostileCards(t *testing.T) {
	elsewhere := startAgent(t, serverOpts{})
	bigCard, _ := json.Marshal(map[string]any{"name": "big", "description": strings.Repeat("d", remote.MaxA2ACardBytes)})
	for _, tt := range []struct {
		name string
		opts serverOpts
		says string
	}{
		{"another origin", serverOpts{card: func(_ string, c *a2a.AgentCard) {
			c.SupportedInterfaces = []*a2a.AgentInterface{a2a.NewAgentInterface(elsewhere.URL+"/a2a", a2a.TransportProtocolJSONRPC)}
		}}, "another origin"},
		{"http from https", serverOpts{tls: true, card: func(base string, c *a2a.AgentCard) {
			c.SupportedInterfaces = []*a2a.AgentInterface{a2a.NewAgentInterface(strings.Replace(base, "https:", "http:", 1)+"/a2a", a2a.TransportProtocolJSONRPC)}
		}}, "not https"},
		{"metadata service", serverOpts{card: func(_ string, c *a2a.AgentCard) {
			c.SupportedInterfaces = []*a2a.AgentInterface{a2a.NewAgentInterface("http://169.254.169.254/latest/meta-data", a2a.TransportProtocolJSONRPC)}
		}}, "another origin"},
		{"no JSON-RPC", serverOpts{card: func(base string, c *a2a.AgentCard) {
			c.SupportedInterfaces = []*a2a.AgentInterface{a2a.NewAgentInterface(base+"/a2a", a2a.TransportProtocolGRPC)}
		}}, "no JSON-RPC interface"},
		{"too big", serverOpts{cardBody: bigCard}, "larger than 64 KiB"},
		{"garbage", serverOpts{cardBody: []byte("<html>hello</html>")}, "not a JSON object"},
		{"garbage JSON", serverOpts{cardBody: []byte(`{"supportedInterfaces":"everywhere"}`)}, "not an A2A agent card"},
		{"not found", serverOpts{check: func(r *http.Request, _ []byte) { r.URL.Path = "/nothing" }}, "404"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			srv := startAgent(t, tt.opts)
			var opts remote.A2AOptions
			if tt.opts.tls {
				opts.TLSConfig = srv.tlsConfig()
			}
			set, logs := newA2A(t, opts, remote.A2AAgent{Name: "weather", CardURL: srv.CardURL})
			if tools := set.Tools(t.Context()); len(tools) != 0 {
				t.Errorf("tools %v", names(tools))
			}
			if !strings.Contains(logs.String(), "A2A agent unavailable") || !strings.Contains(logs.String(), `"agent":"weather"`) ||
				!strings.Contains(logs.String(), tt.says) {
				t.Errorf("the warning does not say %q:\n%s", tt.says, logs)
			}
			_, err := set.Client(t.Context(), "weather")
			if err == nil || !strings.Contains(err.Error(), "A2A agent weather: ") || !strings.Contains(err.Error(), tt.says) {
				t.Errorf("Client: %v", err)
			}
			if got := elsewhere.Requests(); len(got) != 0 {
				t.Errorf("the card sent %d requests elsewhere", len(got))
			}
		})
	}
}

// TestA2ACardIsFetchedOnce: the card is fetched once, when first needed,
// and again after the TTL; one that failed is asked again after
// RetryAfter, not before.
func TestA2ACardIsFetchedOnce(t *testing.T) {
	var fail bool
	var mu sync.Mutex
	srv := startAgent(t, serverOpts{check: func(r *http.Request, _ []byte) {
		mu.Lock()
		defer mu.Unlock()
		if fail && r.URL.Path == a2asrv.WellKnownAgentCardPath {
			r.URL.Path = "/down"
		}
	}})
	cards := func() int {
		n := 0
		for _, r := range srv.Requests() {
			if r.URL.Path == a2asrv.WellKnownAgentCardPath || r.URL.Path == "/down" {
				n++
			}
		}
		return n
	}
	c := testkit.NewClock(time.Date(2026, 11, 24, 12, 0, 0, 0, time.UTC))
	set, logs := newA2A(t, remote.A2AOptions{Now: c.Now, TTL: time.Minute, RetryAfter: 30 * time.Second},
		remote.A2AAgent{Name: "weather", CardURL: srv.CardURL})
	if n := cards(); n != 0 {
		t.Errorf("NewA2A fetched %d cards", n)
	}
	for range 3 {
		if tools := set.Tools(t.Context()); len(tools) != 1 {
			t.Fatalf("tools %v", names(tools))
		}
	}
	if n := cards(); n != 1 {
		t.Errorf("%d fetches for 3 turns", n)
	}
	mu.Lock()
	fail = true
	mu.Unlock()
	c.Advance(2 * time.Minute)
	set.Start()
	waitFor(t, func() bool { return strings.Contains(logs.String(), "A2A agent unavailable") })
	if tools := set.Tools(t.Context()); len(tools) != 1 {
		t.Errorf("a failed refresh dropped the tool: %v", names(tools))
	}
	if n := cards(); n != 1 {
		t.Errorf("%d fetches after the TTL, want 1", n)
	}
	c.Advance(10 * time.Second)
	set.Tools(t.Context())
	if n := cards(); n != 0 {
		t.Errorf("fetched again %d times before RetryAfter", n)
	}
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("timed out")
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestA2ARuntimeAPIRefused: the Lambda Runtime API is refused, though on
// loopback: a card URL that names it, by its address, localhost or
// another loopback address on its port, is refused before any request.
// (The same check when dialling is TestDialGuard's: a card URL can reach
// loopback only by naming it literally, which this check sees first.)
func TestA2ARuntimeAPIRefused(t *testing.T) {
	srv := startAgent(t, serverOpts{})
	hostPort := strings.TrimPrefix(srv.URL, "http://")
	getenv := func(k string) string {
		if k == "AWS_LAMBDA_RUNTIME_API" {
			return hostPort
		}
		return ""
	}
	_, port, _ := net.SplitHostPort(hostPort)
	for _, cardURL := range []string{srv.CardURL, "http://localhost:" + port + a2asrv.WellKnownAgentCardPath} {
		set, logs := newA2A(t, remote.A2AOptions{Getenv: getenv}, remote.A2AAgent{Name: "weather", CardURL: cardURL})
		if !strings.Contains(logs.String(), "A2A agent left out") || !strings.Contains(logs.String(), "Runtime API") {
			t.Errorf("%s: no warning at NewA2A:\n%s", cardURL, logs)
		}
		if tools := set.Tools(t.Context()); len(tools) != 0 {
			t.Errorf("%s: tools %v", cardURL, names(tools))
		}
		if _, err := set.Client(t.Context(), "weather"); !errors.Is(err, remote.ErrForbiddenAddress) {
			t.Errorf("%s: Client: %v", cardURL, err)
		}
	}
	// Another loopback address on the Runtime API's port.
	set, logs := newA2A(t, remote.A2AOptions{Getenv: func(k string) string {
		if k == "AWS_LAMBDA_RUNTIME_API" {
			return "localhost:" + port
		}
		return ""
	}}, remote.A2AAgent{Name: "weather", CardURL: "http://127.0.0.2:" + port + a2asrv.WellKnownAgentCardPath})
	if _, err := set.Client(t.Context(), "weather"); !errors.Is(err, remote.ErrForbiddenAddress) || !strings.Contains(err.Error(), "Runtime API") {
		t.Errorf("127.0.0.2: Client: %v\n%s", err, logs)
	}
	if got := srv.Requests(); len(got) != 0 {
		t.Errorf("the Runtime API got %d requests", len(got))
	}
}

// TestA2ANameResolvingToLoopback: a name that resolves to a loopback
// address is refused when dialled (no DNS rebinding), though a server
// listens there.
func TestA2ANameResolvingToLoopback(t *testing.T) {
	srv := startAgent(t, serverOpts{tls: true})
	_, port, _ := net.SplitHostPort(strings.TrimPrefix(srv.URL, "https://"))
	resolver := fakeDNS(t, map[string]net.IP{"agent.example.test.": net.ParseIP("127.0.0.1")})
	if ips, err := resolver.LookupIP(t.Context(), "ip4", "agent.example.test"); err != nil || len(ips) != 1 || !ips[0].IsLoopback() {
		t.Fatalf("the fake DNS: %v %v", ips, err)
	}
	set, logs := newA2A(t, remote.A2AOptions{Resolver: resolver, TLSConfig: srv.tlsConfig()},
		remote.A2AAgent{Name: "weather", CardURL: "https://agent.example.test:" + port + a2asrv.WellKnownAgentCardPath})
	_, err := set.Client(t.Context(), "weather")
	if !errors.Is(err, remote.ErrForbiddenAddress) || !strings.Contains(err.Error(), "loopback") {
		t.Errorf("Client: %v\n%s", err, logs)
	}
	if got := srv.Requests(); len(got) != 0 {
		t.Errorf("the server got %d requests", len(got))
	}
}

// TestA2AHeaders: the configured headers, secret ones included, go with
// every request to the agent, the card's included.
func TestA2AHeaders(t *testing.T) {
	params := ssmtest.NewServer()
	t.Cleanup(params.Close)
	params.Put("/agent/token", "Bearer s3cret", true)
	srv := startAgent(t, serverOpts{})
	agents, err := remote.ParseA2AAgents(fmt.Sprintf(`[{"name":"weather","card_url":%q,"headers":{"X-Team":"support"},"secret_headers":{"Authorization":"/agent/token"}}]`, srv.CardURL))
	if err != nil {
		t.Fatal(err)
	}
	agents, errs := remote.ResolveA2ASecrets(t.Context(), params.Client(), agents)
	if len(errs) != 0 {
		t.Fatal(errs)
	}
	set, _ := newA2A(t, remote.A2AOptions{}, agents...)
	if _, err := client(t, set).Send(t.Context(), remote.SendInput{Text: "hi"}); err != nil {
		t.Fatal(err)
	}
	got := srv.Requests()
	if len(got) != 2 {
		t.Errorf("%d requests, want the card's and a call", len(got))
	}
	for _, r := range got {
		if r.Header.Get("Authorization") != "Bearer s3cret" || r.Header.Get("X-Team") != "support" {
			t.Errorf("%s %s: headers %v", r.Method, r.URL.Path, r.Header)
		}
	}
}

// TestA2AOnly: Only shares the agents' cards.
func TestA2AOnly(t *testing.T) {
	srv := startAgent(t, serverOpts{})
	set, _ := newA2A(t, remote.A2AOptions{},
		remote.A2AAgent{Name: "weather", CardURL: srv.CardURL},
		remote.A2AAgent{Name: "other", CardURL: srv.CardURL, Description: "Ours."})
	if got := names(set.Only("other").Tools(t.Context())); !cmp.Equal(got, []string{"other"}) {
		t.Errorf("Only(other): %v", got)
	}
	set.Tools(t.Context())
	n := 0
	for _, r := range srv.Requests() {
		if r.URL.Path == a2asrv.WellKnownAgentCardPath {
			n++
		}
	}
	if n != 2 {
		t.Errorf("%d cards fetched for two agents, once each", n)
	}
	tools := set.Tools(t.Context())
	if got := names(tools); !cmp.Equal(got, []string{"weather", "other"}) || tools[1].Spec().Description != "Ours." {
		t.Errorf("tools %v", got)
	}
}

// TestA2AToolSpec: the tool's input schema compiles, and the agent holds
// the model's input to it.
func TestA2AToolSpec(t *testing.T) {
	srv := startAgent(t, serverOpts{})
	set, _ := newA2A(t, remote.A2AOptions{Approval: []string{"weather"}}, remote.A2AAgent{Name: "weather", CardURL: srv.CardURL})
	tools := set.Tools(t.Context())
	if len(tools) != 1 {
		t.Fatal(names(tools))
	}
	if _, err := agent.CompileToolSchema(tools[0].Spec().InputSchema); err != nil {
		t.Fatal(err)
	}
	var schema map[string]any
	_ = json.Unmarshal(tools[0].Spec().InputSchema, &schema)
	if diff := cmp.Diff([]any{"message"}, schema["required"]); diff != "" {
		t.Errorf("required (-want +got):\n%s", diff)
	}
	// APPROVAL_TOOLS reaches A2A agents too: the turn waits for a person.
	s := testkit.ConverseServer(t)
	s.Enqueue(conversetestToolUse("a1", "weather", `{"message":"hi"}`))
	a, err := agent.New(agent.Config{Model: testkit.BedrockModel(t, s, "m"), ToolSets: []agent.ToolSet{set}})
	if err != nil {
		t.Fatal(err)
	}
	res, err := a.Run(t.Context(), &agent.Conversation{}, []agent.ContentBlock{agent.Text("ask")})
	if err != nil || res.StopReason != agent.StopInterrupt {
		t.Errorf("no approval asked: %v, %s", err, res.StopReason)
	}
	for _, r := range srv.Requests() {
		if r.Method == http.MethodPost {
			t.Error("the agent was asked before the approval")
		}
	}
}
