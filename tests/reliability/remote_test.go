package reliability_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/lambda-agent/lambda-agent/internal/agent"
	"github.com/lambda-agent/lambda-agent/internal/app"
	"github.com/lambda-agent/lambda-agent/internal/testkit"
	"github.com/lambda-agent/lambda-agent/internal/testkit/conversetest"
	"github.com/lambda-agent/lambda-agent/internal/testkit/lambdatest"
	"github.com/lambda-agent/lambda-agent/internal/testkit/mcptest"
)

// The tests in this file hold the remote tools of issue 14 (MCP_SERVERS and
// LAMBDA_TOOLS) to what the suite holds every turn to: turns that race on
// one session, a retry with the Idempotency-Key, a crash while a remote call
// is in flight, another owner, and remote tools that fail in every way they
// can. A remote tool runs at its service, outside the session, so the tests
// count its calls where they land: at the stand-ins (mcptest.Server.Calls,
// lambdatest.Server.Calls).

// remoteStandIns starts an MCP server and the Lambda stand-in, closed when
// t ends.
func remoteStandIns(t *testing.T) (*mcptest.Server, *lambdatest.Server) {
	t.Helper()
	srv := mcptest.NewServer()
	t.Cleanup(srv.Close)
	fn := lambdatest.NewServer()
	t.Cleanup(fn.Close)
	return srv, fn
}

// remoteEnv is the environment that gives a function the MCP servers, by
// name, and the Lambda tools, each named after its function.
func remoteEnv(t *testing.T, servers map[string]string, functions ...string) map[string]string {
	t.Helper()
	var mcp []map[string]string
	for name, url := range servers {
		mcp = append(mcp, map[string]string{"name": name, "url": url})
	}
	var fns []map[string]string
	for _, f := range functions {
		fns = append(fns, map[string]string{"name": f, "function": f, "description": "Calls the Lambda function " + f + "."})
	}
	env := map[string]string{}
	for k, v := range map[string]any{"MCP_SERVERS": mcp, "LAMBDA_TOOLS": fns} {
		raw, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		env[k] = string(raw)
	}
	return env
}

// newRemoteSystem is newSystem with remote tools: env names them, and fn
// serves their Lambda functions.
func newRemoteSystem(t *testing.T, fn *lambdatest.Server, env map[string]string) *system {
	t.Helper()
	return newSystemWith(t, testkit.Options{Env: env, Remote: app.Remote{Lambda: fn.Client()}})
}

// echoFunction is a Lambda function that answers {"echo": <its input's
// text>}.
func echoFunction(_ context.Context, payload []byte) ([]byte, error) {
	var in struct {
		Text string `json:"text"`
	}
	if err := json.Unmarshal(payload, &in); err != nil {
		return nil, err
	}
	return json.Marshal(map[string]string{"echo": in.Text})
}

// useID makes a tool use id of msg, keeping only what Bedrock allows in one.
func useID(msg string) string {
	return strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '_' || r == '-' {
			return r
		}
		return '-'
	}, msg)
}

// remoteModel answers as a model that, told anything, calls the MCP tool
// tickets_echo and the Lambda tool lookup at once, both with the message,
// and answers once it has their results. The tool use ids are made from the
// message ("mcp-" and "fn-" followed by useID), so each turn's are its own.
func remoteModel(r *conversetest.Request) conversetest.Reply {
	last := r.Messages[len(r.Messages)-1]
	for _, b := range last.Content {
		if b.ToolResult != nil && strings.HasPrefix(b.ToolResult.ToolUseID, "mcp-") {
			return conversetest.Text("done " + strings.TrimPrefix(b.ToolResult.ToolUseID, "mcp-"))
		}
	}
	msg := last.Text()
	return conversetest.Text("calling both").
		WithToolUse("mcp-"+useID(msg), "tickets_echo", map[string]string{"text": msg}).
		WithToolUse("fn-"+useID(msg), "lookup", map[string]string{"text": msg}).
		WithDelay(10 * time.Millisecond)
}

// resultsOf returns the tool results of a turn's answer, by tool use id.
func resultsOf(t testing.TB, raw string) map[string]*agent.ToolResultBlock {
	t.Helper()
	var answer struct {
		Messages []agent.Message `json:"messages"`
	}
	if err := json.Unmarshal([]byte(raw), &answer); err != nil {
		t.Errorf("an answer that is not a turn: %s", raw)
	}
	out := map[string]*agent.ToolResultBlock{}
	for _, m := range answer.Messages {
		for _, b := range m.Content {
			if b.ToolResult != nil {
				out[b.ToolResult.ToolUseID] = b.ToolResult
			}
		}
	}
	return out
}

// contentOf is a tool result's text and JSON, one after the other.
func contentOf(r *agent.ToolResultBlock) string {
	if r == nil {
		return ""
	}
	var sb strings.Builder
	for _, c := range r.Content {
		sb.WriteString(c.Text)
		sb.Write(c.JSON)
	}
	return sb.String()
}

// echoedBoth reports whether results hold the answers of remoteModel's two
// tools to msg, both successes that echo it.
func echoedBoth(results map[string]*agent.ToolResultBlock, msg string) bool {
	m, f := results["mcp-"+useID(msg)], results["fn-"+useID(msg)]
	return m != nil && f != nil && m.Status == agent.ToolSuccess && f.Status == agent.ToolSuccess &&
		contentOf(m) == msg && strings.Contains(contentOf(f), fmt.Sprintf("%q", msg))
}

// gate holds its callers until n of them have arrived.
type gate struct {
	mu   sync.Mutex
	n    int
	in   int
	open chan struct{}
	shut atomic.Int64 // callers that gave up waiting
}

// reset makes the gate wait for n new callers.
func (g *gate) reset(n int) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.n, g.in, g.open = n, 0, make(chan struct{})
}

// wait returns once n callers have arrived, or after 5 seconds, or when
// ctx ends; then it reports false.
func (g *gate) wait(ctx context.Context) bool {
	g.mu.Lock()
	open := g.open
	if g.in++; g.in == g.n {
		close(open)
	}
	g.mu.Unlock()
	select {
	case <-open:
		return true
	case <-ctx.Done():
	case <-time.After(5 * time.Second):
	}
	g.shut.Add(1)
	return false
}

// raceRounds sends rounds of racers turns at once to alice's session, each
// round held by g until all of its turns arrived, and checks that exactly
// one of each round commits and the others answer 409 conflict. checkWon
// checks each committed answer. It returns the messages of the committed
// turns and of the refused ones.
func raceRounds(t *testing.T, s *system, g *gate, session string, rounds, racers int, checkWon func(msg string, r reply)) (won, lost []string) {
	t.Helper()
	for round := range rounds {
		g.reset(racers)
		answers := make([]reply, racers)
		var wg sync.WaitGroup
		for i := range racers {
			wg.Go(func() { answers[i] = s.chat(t, "alice", session, fmt.Sprintf("round %d racer %d", round, i)) })
		}
		wg.Wait()
		committed := 0
		for i, r := range answers {
			msg := fmt.Sprintf("round %d racer %d", round, i)
			switch {
			case r.status == 200:
				committed++
				won = append(won, msg)
				checkWon(msg, r)
			case r.status == 409 && r.code() == "conflict":
				lost = append(lost, msg)
			default:
				t.Errorf("%s: %d %s; want 200 or 409 conflict", msg, r.status, r.raw)
			}
		}
		if committed != 1 {
			t.Errorf("round %d: %d turns committed; want exactly 1", round, committed)
		}
	}
	return won, lost
}

// TestRemoteToolTurnsRacing sends turns at once to one session, each of
// whose model answers calls an MCP tool and a Lambda tool. The Lambda
// function holds every turn of a round until all of them reached it, so all
// of them loaded the same session and ran their tools before any could
// commit: exactly one commits, the others answer 409, and nothing of theirs
// is stored, their tool results included. Their tools did run: a turn only
// learns that it lost at its commit, and remote calls cannot be taken back.
func TestRemoteToolTurnsRacing(t *testing.T) {
	const rounds, racers = 3, 10
	srv, fn := remoteStandIns(t)
	g := &gate{}
	fn.RegisterWithConfig("lookup", func(ctx context.Context, payload []byte) ([]byte, error) {
		if !g.wait(ctx) {
			return nil, errors.New("the other racers never came")
		}
		return echoFunction(ctx, payload)
	}, lambdatest.Config{Timeout: 10 * time.Second})
	s := newRemoteSystem(t, fn, remoteEnv(t, map[string]string{"tickets": srv.URL}, "lookup"))
	s.Model.Responder = remoteModel
	g.reset(1)
	if r := s.chat(t, "alice", "race", "opening"); r.status != 200 {
		t.Fatalf("opening turn: %d %s", r.status, r.raw)
	}
	mcpBefore, fnBefore := srv.Calls(mcptest.ToolEcho), fn.Calls("lookup")

	won, lost := raceRounds(t, s, g, "race", rounds, racers, func(msg string, r reply) {
		if !echoedBoth(resultsOf(t, r.raw), msg) {
			t.Errorf("%s: the answer lacks its tools' results: %s", msg, r.raw)
		}
	})
	won = append([]string{"opening"}, won...)
	conflicts := len(lost)
	if n := g.shut.Load(); n > 0 {
		t.Errorf("%d turns gave up waiting for the others at their Lambda function: the turns did not all meet", n)
	}
	mcpRuns, fnRuns := srv.Calls(mcptest.ToolEcho)-mcpBefore, fn.Calls("lookup")-fnBefore
	if mcpRuns != rounds*racers || fnRuns != rounds*racers {
		t.Errorf("%d MCP and %d Lambda calls for %d turns; want one of each for every turn", mcpRuns, fnRuns, rounds*racers)
	}

	st := s.stored(t, "alice", "race")
	if st == nil {
		t.Fatal("the session is gone")
	}
	texts, uses, results := map[string]int{}, map[string]int{}, map[string][]*agent.ToolResultBlock{}
	for _, m := range st.messages {
		if m.Role == agent.RoleUser && m.Text() != "" {
			texts[m.Text()]++
		}
		for _, b := range m.Content {
			if b.ToolUse != nil {
				uses[b.ToolUse.ToolUseID]++
			}
			if b.ToolResult != nil {
				results[b.ToolResult.ToolUseID] = append(results[b.ToolResult.ToolUseID], b.ToolResult)
			}
		}
	}
	missing, leaked := 0, 0
	for _, msg := range won {
		one := map[string]*agent.ToolResultBlock{}
		for _, id := range []string{"mcp-" + useID(msg), "fn-" + useID(msg)} {
			if rs := results[id]; len(rs) == 1 && uses[id] == 1 {
				one[id] = rs[0]
			}
		}
		if texts[msg] != 1 || !echoedBoth(one, msg) {
			missing++
			t.Errorf("the committed turn %q is not stored once, whole, with its tools' results", msg)
		}
	}
	for _, msg := range lost {
		for _, id := range []string{"mcp-" + useID(msg), "fn-" + useID(msg)} {
			if uses[id]+len(results[id]) > 0 {
				leaked++
				t.Errorf("the losing turn %q left its tool use or result %s in the session", msg, id)
			}
		}
		if texts[msg] > 0 {
			leaked++
			t.Errorf("the losing turn %q is stored", msg)
		}
	}
	if want := 4 * len(won); len(st.messages) != want {
		t.Errorf("%d messages stored for %d committed turns of 4; want %d", len(st.messages), len(won), want)
	}
	validHistory(t, st.messages)
	report(t, "Concurrent turns that call remote tools (MCP and Lambda) on one session: one commits, the others answer 409 and store nothing, their tool results included",
		fmt.Sprintf("%d rounds of %d turns at once, each calling an MCP tool and a Lambda tool, all at their tools before any committed (%d committed, %d answered 409); %d MCP and %d Lambda calls ran, the losing turns' too, as a turn learns it lost only at its commit",
			rounds, racers, len(won)-1, conflicts, mcpRuns, fnRuns), missing+leaked)
}

// TestRemoteToolTurnRetriedWithItsKey sends a turn that calls an MCP tool
// and a Lambda function again with its Idempotency-Key: while the function
// runs, the retry gets 409 in_progress; once the turn answered, every retry
// replays its answer, tool results included. Neither tool is called again,
// and neither is the model; the same key with another message gets 422.
func TestRemoteToolTurnRetriedWithItsKey(t *testing.T) {
	srv, fn := remoteStandIns(t)
	entered, release := make(chan struct{}), make(chan struct{})
	var armed atomic.Bool
	armed.Store(true)
	fn.Register("lookup", func(ctx context.Context, payload []byte) ([]byte, error) {
		if armed.CompareAndSwap(true, false) {
			close(entered)
			select {
			case <-release:
			case <-ctx.Done():
				return nil, ctx.Err()
			}
		}
		return echoFunction(ctx, payload)
	})
	s := newRemoteSystem(t, fn, remoteEnv(t, map[string]string{"tickets": srv.URL}, "lookup"))
	s.Model.Responder = remoteModel
	const msg = "look it up"
	turn := call("POST", "/chat", "alice", map[string]any{"session_id": "keyed", "message": msg}).withKey("remote-1")
	answered := make(chan reply, 1)
	go func() { answered <- s.serve(t, turn, 30*time.Second) }()
	select {
	case <-entered:
	case <-time.After(10 * time.Second):
		t.Fatal("the turn never called its Lambda function")
	}
	extra := 0
	// calledOnce checks that each tool, and the model's two calls, ran once.
	calledOnce := func(what string) {
		t.Helper()
		if m, f := srv.Calls(mcptest.ToolEcho), fn.Calls("lookup"); m > 1 || f != 1 {
			extra += max(m-1, 0) + abs(f-1)
			t.Errorf("%s: the MCP tool ran %d times and the Lambda function %d; want once each", what, m, f)
		}
		if n := s.Model.Calls(); n > 2 {
			extra += n - 2
			t.Errorf("%s: the model was called %d times; want twice", what, n)
		}
	}

	during := s.serve(t, turn, 30*time.Second)
	if during.status != 409 || during.code() != "in_progress" {
		t.Errorf("the retry while the Lambda function runs: %d %s; want 409 in_progress", during.status, during.raw)
	}
	calledOnce("a retry while the function runs")
	close(release)
	first := <-answered
	if first.status != 200 || !echoedBoth(resultsOf(t, first.raw), msg) {
		t.Fatalf("the turn: %d %s", first.status, first.raw)
	}
	calledOnce("the turn")

	const retries = 3
	for i := range retries {
		again := s.serve(t, turn, 30*time.Second)
		if again.status != 200 || again.headers.Get("Idempotent-Replayed") != "true" {
			t.Errorf("retry %d: %d %s, replayed %q", i, again.status, again.raw, again.headers.Get("Idempotent-Replayed"))
		}
		if diff := cmp.Diff(first.body, again.body); diff != "" {
			t.Errorf("retry %d replays another answer (-first +retry):\n%s", i, diff)
		}
	}
	calledOnce("the retries after the answer")
	other := call("POST", "/chat", "alice", map[string]any{"session_id": "keyed", "message": "something else"}).withKey("remote-1")
	if r := s.serve(t, other, 30*time.Second); r.status != 422 || r.code() != "idempotency_key_reused" {
		t.Errorf("another message under the key: %d %s; want 422", r.status, r.raw)
	}
	calledOnce("another message under the key")

	st := s.stored(t, "alice", "keyed")
	for _, id := range []string{"mcp-" + useID(msg), "fn-" + useID(msg)} {
		if rs := resultsFor(st.messages, id); len(rs) != 1 {
			t.Errorf("%d stored results for %s; want 1", len(rs), id)
		}
	}
	validHistory(t, st.messages)
	report(t, "A turn that called remote tools, sent again with its Idempotency-Key, calls none of them again: 409 in_progress while it runs, then its answer replayed",
		fmt.Sprintf("1 turn calling an MCP tool and a Lambda function: 1 retry while the function ran, %d after the answer, 1 other message under the key; %d MCP and %d Lambda calls in all",
			retries, srv.Calls(mcptest.ToolEcho), fn.Calls("lookup")), extra)
}

// TestCrashWhileARemoteToolRuns kills the chat function's process with
// SIGKILL while a remote call is in flight: while a Lambda function runs,
// while an MCP tool runs, while both do, and at random moments of a turn
// that calls both. After each kill the session must be exactly as it was
// and pass Bedrock's rules as stored, and the next turn, which calls both
// tools again, must answer 200 with their results.
func TestCrashWhileARemoteToolRuns(t *testing.T) {
	t.Parallel()
	srv, fn := remoteStandIns(t)
	fn.Register("lookup", echoFunction)
	// hold runs until its caller goes away.
	fn.RegisterWithConfig("hold", func(ctx context.Context, _ []byte) ([]byte, error) {
		<-ctx.Done()
		return nil, ctx.Err()
	}, lambdatest.Config{Timeout: time.Minute})
	// nap takes 30 ms.
	fn.Register("nap", func(ctx context.Context, _ []byte) ([]byte, error) {
		select {
		case <-time.After(30 * time.Millisecond):
			return []byte(`{"napped":true}`), nil
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	})
	env := remoteEnv(t, map[string]string{"tickets": srv.URL}, "lookup", "hold", "nap")
	b := newSandbox(t, "AWS_ENDPOINT_URL_LAMBDA="+fn.URL, "LAMBDA_TOOLS="+env["LAMBDA_TOOLS"], "MCP_SERVERS="+env["MCP_SERVERS"])

	damaged, turns, answered := 0, 0, 0
	// next is a turn that calls both tools, and must answer with their
	// results.
	next := func(what string) {
		t.Helper()
		turns++
		id := fmt.Sprintf("next-%d", turns)
		b.model.Enqueue(
			conversetest.Text("checking").WithToolUse("mcp-"+id, "tickets_echo", map[string]string{"text": what}).WithToolUse("fn-"+id, "lookup", map[string]string{"text": what}),
			conversetest.Text("checked"),
		)
		status, _, raw := b.send(t, chatEvent(t, what), 10*time.Second)
		rs := resultsOf(t, raw)
		if m, f := rs["mcp-"+id], rs["fn-"+id]; status != 200 || m == nil || f == nil || m.Status != agent.ToolSuccess || f.Status != agent.ToolSuccess {
			damaged++
			t.Errorf("%s: %d %s; want 200 with the results of both tools", what, status, raw)
			return
		}
		answered++
	}
	next("opening")

	kills := map[string]int{}
	// arm scripts the model for the doomed turn and returns what waits for
	// the moment of the kill.
	crash := func(where string, arm func() (wait func())) {
		t.Helper()
		before := storedIn(t, b.store, "", "crashy")
		wait := arm()
		inv, err := b.fn.InvokeAsync(t.Context(), chatEvent(t, "doomed "+where), 20*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		wait()
		b.kill(t, inv, where)
		kills[where]++
		after := storedIn(t, b.store, "", "crashy")
		if diff := before.diff(after); diff != "" {
			damaged++
			t.Errorf("%s: the killed turn changed the session:\n%s", where, diff)
		}
		validHistory(t, after.messages)
		b.model.Reset()
		if err := b.fn.Restart(t.Context()); err != nil {
			t.Fatal(err)
		}
		next("after the crash " + where)
		validHistory(t, storedIn(t, b.store, "", "crashy").messages)
	}

	const lambdaRuns, mcpRuns, bothRun = "while a Lambda function runs", "while an MCP tool runs", "while both run"
	for i := range 2 {
		crash(lambdaRuns, func() func() {
			calls := fn.Calls("hold")
			b.model.Enqueue(conversetest.ToolUse(fmt.Sprintf("hold-a%d", i), "hold", map[string]any{}))
			return func() { waitFor(t, "the Lambda call", func() bool { return fn.Calls("hold") > calls }) }
		})
		crash(mcpRuns, func() func() {
			calls := srv.Calls(mcptest.ToolSlow)
			b.model.Enqueue(conversetest.ToolUse(fmt.Sprintf("slow-b%d", i), "tickets_slow", map[string]int{"seconds": 60}))
			return func() { waitFor(t, "the MCP call", func() bool { return srv.Calls(mcptest.ToolSlow) > calls }) }
		})
		crash(bothRun, func() func() {
			held, slept := fn.Calls("hold"), srv.Calls(mcptest.ToolSlow)
			b.model.Enqueue(conversetest.ToolUse(fmt.Sprintf("hold-c%d", i), "hold", map[string]any{}).
				WithToolUse(fmt.Sprintf("slow-c%d", i), "tickets_slow", map[string]int{"seconds": 60}))
			return func() {
				waitFor(t, "both calls", func() bool { return fn.Calls("hold") > held && srv.Calls(mcptest.ToolSlow) > slept })
			}
		})
	}
	rng := newRand(23)
	for i := range 4 {
		// A turn of at least 50 ms (two model calls of 10 ms around remote
		// calls of 30 ms), killed anywhere in its first 45 ms.
		at := time.Duration(rng.IntN(45)) * time.Millisecond
		crash("at a random moment", func() func() {
			b.model.Enqueue(
				conversetest.Text("step").WithToolUse(fmt.Sprintf("nap-d%d", i), "nap", map[string]any{}).
					WithToolUse(fmt.Sprintf("slow-d%d", i), "tickets_slow", map[string]float64{"seconds": 0.03}).WithDelay(10*time.Millisecond),
				conversetest.Text("done").WithDelay(10*time.Millisecond),
			)
			return func() { time.Sleep(at) }
		})
	}
	total := 0
	var parts []string
	for _, where := range []string{lambdaRuns, mcpRuns, bothRun, "at a random moment"} {
		total += kills[where]
		parts = append(parts, fmt.Sprintf("%d %s", kills[where], where))
	}
	report(t, "A crash (SIGKILL) while a remote tool call is in flight leaves the session as it was, valid, and usable; the next turn calls the remote tools again",
		fmt.Sprintf("%d SIGKILLs of the chat bootstrap: %s; %d of %d turns calling an MCP tool and a Lambda tool (the opening one, and one after each kill) answered 200 with both results",
			total, strings.Join(parts, ", "), answered, turns), damaged)
}

// TestRemoteToolsAreTheOwners has another owner, and a caller without an
// identity, send requests for a session whose turns call remote tools. Each
// gets 404, as for any session not theirs: no remote tool is called, nor
// the model, and the session is unchanged. Its owner's next turn then calls
// both tools, so they were there to be called.
func TestRemoteToolsAreTheOwners(t *testing.T) {
	srv, fn := remoteStandIns(t)
	fn.Register("lookup", echoFunction)
	s := newRemoteSystem(t, fn, remoteEnv(t, map[string]string{"tickets": srv.URL}, "lookup"))
	s.Model.Responder = remoteModel
	if r := s.chat(t, "alice", "mine", "opening"); r.status != 200 || !echoedBoth(resultsOf(t, r.raw), "opening") {
		t.Fatalf("opening turn: %d %s", r.status, r.raw)
	}
	before := s.stored(t, "alice", "mine")
	mcpCalls, fnCalls, modelCalls := srv.Calls(mcptest.ToolEcho), fn.Calls("lookup"), s.Model.Calls()
	leaks, tried := 0, 0
	for _, who := range []string{"bob", ""} {
		msg := map[string]any{"session_id": "mine", "message": "call your tools"}
		for _, q := range []request{
			call("POST", "/chat", who, msg),
			call("POST", "/chat", who, msg).withKey("theirs"),
			call("POST", "/chat/stream", who, msg),
			call("POST", "/chat", who, map[string]any{"session_id": "mine", "message": "call your tools", "deny_pending": true}),
			call("GET", "/sessions/mine", who, nil),
			call("DELETE", "/sessions/mine", who, nil),
		} {
			tried++
			r := s.serve(t, q, 30*time.Second)
			if r.status != 404 || r.code() != "not_found" {
				leaks++
				t.Errorf("%q: %s %s %v: %d %s; want 404 not_found", who, q.method, q.path, q.body, r.status, r.raw)
			}
		}
	}
	theirs := srv.Calls(mcptest.ToolEcho) - mcpCalls + fn.Calls("lookup") - fnCalls
	if m, f, c := srv.Calls(mcptest.ToolEcho)-mcpCalls, fn.Calls("lookup")-fnCalls, s.Model.Calls()-modelCalls; m+f+c != 0 {
		leaks++
		t.Errorf("others' requests called the MCP tool %d times, the Lambda function %d times and the model %d times", m, f, c)
	}
	if diff := before.diff(s.stored(t, "alice", "mine")); diff != "" {
		leaks++
		t.Errorf("others' requests changed the session:\n%s", diff)
	}
	if r := s.chat(t, "alice", "mine", "my turn"); r.status != 200 || !echoedBoth(resultsOf(t, r.raw), "my turn") {
		t.Errorf("the owner's next turn: %d %s", r.status, r.raw)
	}
	if m, f := srv.Calls(mcptest.ToolEcho)-mcpCalls, fn.Calls("lookup")-fnCalls; m != 1 || f != 1 {
		t.Errorf("the owner's turn called the MCP tool %d times and the Lambda function %d times; want once each", m, f)
	}
	validHistory(t, s.stored(t, "alice", "mine").messages)
	report(t, "Another owner, or a caller without an identity, cannot reach a session's remote tools: 404, no remote tool or model called, the session unchanged",
		fmt.Sprintf("%d requests from 2 other identities: POST /chat with and without a key and with deny_pending, POST /chat/stream, GET and DELETE; %d remote calls for them",
			tried, theirs), leaks)
}

// remoteFailure is a remote tool that fails, and what its error result
// must say.
type remoteFailure struct {
	what  string
	tool  string
	input any
	says  string
}

// TestRemoteToolFailuresAreResults has every turn of a session call remote
// tools that fail in each way they can, beside an MCP tool and a Lambda tool
// that work. Every turn answers 200: each failure is an error result for the
// model that says what went wrong, the working tools' results are intact,
// nothing answers 5xx, and the session stays valid. Then the MCP server that
// was down comes back, and its tool works again.
func TestRemoteToolFailuresAreResults(t *testing.T) {
	tickets, fn := remoteStandIns(t)
	down, gone := mcptest.NewServer(), mcptest.NewServer()
	t.Cleanup(down.Close)
	t.Cleanup(gone.Close)
	fn.Register("lookup", echoFunction)
	fn.Register("broken", func(context.Context, []byte) ([]byte, error) {
		return nil, &lambdatest.FunctionError{Type: "LookupFailed", Message: "the lookup failed on purpose"}
	})
	fn.Register("panicky", func(context.Context, []byte) ([]byte, error) { panic("the function panicked") })
	fn.RegisterWithConfig("stuck", func(ctx context.Context, _ []byte) ([]byte, error) {
		<-ctx.Done()
		return nil, ctx.Err()
	}, lambdatest.Config{Timeout: 100 * time.Millisecond})
	// no-such-function is a Lambda tool whose function does not exist.
	s := newRemoteSystem(t, fn, remoteEnv(t, map[string]string{"tickets": tickets.URL, "down": down.URL, "gone": gone.URL},
		"lookup", "broken", "panicky", "stuck", "no-such-function"))
	failures := []remoteFailure{
		{"an MCP server that answers 503", "down_echo", map[string]string{"text": "hi"}, "Service Unavailable"},
		{"an MCP server that is gone", "gone_echo", map[string]string{"text": "hi"}, "connection refused"},
		{"an MCP tool that fails (isError)", "tickets_fail", map[string]any{}, mcptest.FailMessage},
		{"an MCP tool whose handler returns an error", "tickets_explode", map[string]any{}, mcptest.ExplodeMessage},
		{"an MCP tool answered with a JSON-RPC error", "tickets_rpc_error", map[string]any{}, mcptest.RPCErrorMessage},
		{"a Lambda function that returns an error", "broken", map[string]any{}, "the lookup failed on purpose"},
		{"a Lambda function that panics", "panicky", map[string]any{}, "the function panicked"},
		{"a Lambda function that times out", "stuck", map[string]any{}, "Sandbox.Timedout"},
		{"a Lambda function that does not exist", "no-such-function", map[string]any{}, "ResourceNotFoundException"},
	}

	// The opening turn lists the servers' tools, and then two of the
	// servers fail.
	s.Model.Enqueue(conversetest.Text("hello"))
	if r := s.chat(t, "alice", "failing", "opening"); r.status != 200 {
		t.Fatalf("opening turn: %d %s", r.status, r.raw)
	}
	var offered []string
	for _, tool := range s.Model.Requests()[0].ToolConfig.Tools {
		offered = append(offered, tool.ToolSpec.Name)
	}
	for _, f := range failures {
		if !slices.Contains(offered, f.tool) {
			t.Fatalf("%s is not offered to the model, so its failure would not be the one meant: %v", f.tool, offered)
		}
	}
	down.SetDown(true)
	gone.Close()

	s.Model.Responder = func(r *conversetest.Request) conversetest.Reply {
		last := r.Messages[len(r.Messages)-1]
		if last.Content[0].ToolResult != nil {
			return conversetest.Text("noted what failed")
		}
		id := useID(last.Text())
		reply := conversetest.Text("trying them all").
			WithToolUse(id+"-mcp", "tickets_echo", map[string]string{"text": last.Text()}).
			WithToolUse(id+"-fn", "lookup", map[string]string{"text": last.Text()})
		for i, f := range failures {
			reply = reply.WithToolUse(fmt.Sprintf("%s-f%d", id, i), f.tool, f.input)
		}
		return reply
	}
	const turns = 12
	ok, errorResults, fivexx, wrong := 0, 0, 0, 0
	for n := range turns {
		msg := fmt.Sprintf("turn %d", n)
		r := s.chat(t, "alice", "failing", msg)
		switch {
		case r.status >= 500:
			fivexx++
			wrong++
			t.Errorf("%s: %d %s", msg, r.status, r.raw)
			continue
		case r.status != 200:
			wrong++
			t.Errorf("%s: %d %s; want 200", msg, r.status, r.raw)
			continue
		}
		ok++
		rs := resultsOf(t, r.raw)
		for i, f := range failures {
			res := rs[fmt.Sprintf("%s-f%d", useID(msg), i)]
			if res == nil || res.Status != agent.ToolError || !strings.Contains(contentOf(res), f.says) {
				wrong++
				t.Errorf("%s: %s: the result is %+v; want an error that says %q", msg, f.what, res, f.says)
				continue
			}
			errorResults++
		}
		if m, f := rs[useID(msg)+"-mcp"], rs[useID(msg)+"-fn"]; m == nil || f == nil || m.Status != agent.ToolSuccess || f.Status != agent.ToolSuccess || contentOf(m) != msg {
			wrong++
			t.Errorf("%s: the working tools' results are %+v and %+v", msg, m, f)
		}
	}
	st := s.stored(t, "alice", "failing")
	if want := 2 + 4*ok; len(st.messages) != want {
		wrong++
		t.Errorf("%d messages stored after %d turns; want %d", len(st.messages), ok, want)
	}
	validHistory(t, st.messages)

	// The server that was down comes back: its tool works again.
	down.SetDown(false)
	s.Model.Enqueue(conversetest.ToolUse("back", "down_echo", map[string]string{"text": "back"}), conversetest.Text("it is back"))
	r := s.chat(t, "alice", "failing", "is it back?")
	if res := resultsOf(t, r.raw)["back"]; r.status != 200 || res == nil || res.Status != agent.ToolSuccess || contentOf(res) != "back" {
		wrong++
		t.Errorf("the MCP server back up: %d %s; want its tool's result", r.status, r.raw)
	}
	validHistory(t, s.stored(t, "alice", "failing").messages)
	var kinds []string
	for _, f := range failures {
		kinds = append(kinds, f.what)
	}
	report(t, "A remote tool that fails is an error result for the model: the turn answers 200, never 5xx, the other tools' results are intact, and the session stays valid",
		fmt.Sprintf("%d turns, each calling %d failing remote tools (%s) beside an MCP and a Lambda tool that work: %d answered 200, %d error results, %d 5xx; then the MCP server that was down served again",
			turns, len(failures), strings.Join(kinds, ", "), ok, errorResults, fivexx), wrong)
}
