package reliability_test

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/lambda-agent/lambda-agent/internal/app"
	"github.com/lambda-agent/lambda-agent/internal/ddbhistory"
	"github.com/lambda-agent/lambda-agent/internal/httpapi"
	"github.com/lambda-agent/lambda-agent/internal/testkit"
	"github.com/lambda-agent/lambda-agent/internal/testkit/conversetest"
	"github.com/lambda-agent/lambda-agent/internal/testkit/dynamodbtest"
)

// The tests in this file hold the functions to what the attacks of issue 10
// broke: a delete racing a turn, an idempotency key sent to several
// sessions, a crash holding a key, the anonymous owner, turns larger than a
// transaction, a commit whose answer never came, and bad input answered 5xx.

// itemsUnder counts the items under a partition key, expired or not.
func itemsUnder(t *testing.T, ddb *dynamodbtest.Server, pk string) int {
	t.Helper()
	out, err := ddb.Client().Query(t.Context(), &dynamodb.QueryInput{
		TableName:                 aws.String(testkit.Table),
		KeyConditionExpression:    aws.String("pk = :pk"),
		ExpressionAttributeValues: map[string]types.AttributeValue{":pk": &types.AttributeValueMemberS{Value: pk}},
		ConsistentRead:            aws.Bool(true),
	})
	if err != nil {
		t.Fatal(err)
	}
	return len(out.Items)
}

// waitCalls waits until the model has had n calls.
func waitCalls(t *testing.T, m *conversetest.Server, n int) {
	t.Helper()
	waitFor(t, fmt.Sprintf("model call %d", n), func() bool { return m.Calls() >= n })
}

// TestDeleteRacingATurn sends DELETE while a turn on the same session is in
// flight. The turn commits first and the delete then removes all of it, or
// the delete wins and the turn writes nothing: either way GET is 404 after,
// nothing of the session is left, and its id is free.
func TestDeleteRacingATurn(t *testing.T) {
	s := newSystem(t, nil)
	damaged := 0
	settled := func(round string, id string) {
		t.Helper()
		if r := s.serve(t, call("GET", "/sessions/"+id, "alice", nil), 30*time.Second); r.status != 404 {
			damaged++
			t.Errorf("%s: GET after the race: %d %s", round, r.status, r.raw)
		}
		if n := itemsUnder(t, s.DDB, "s#alice#"+id); n != 0 {
			damaged++
			t.Errorf("%s: %d items of the session are left", round, n)
		}
		// The id is free: another owner may take it.
		if r := s.chat(t, "bob", id, "mine now"); r.status != 200 {
			damaged++
			t.Errorf("%s: another owner taking the id: %d %s", round, r.status, r.raw)
		}
		if r := s.serve(t, call("DELETE", "/sessions/"+id, "bob", nil), 30*time.Second); r.status != 204 {
			t.Errorf("%s: bob's delete: %d", round, r.status)
		}
	}

	// The attack: a turn that starts while the delete is between its first
	// write and its cleanup.
	if r := s.chat(t, "alice", "doomed", "opening"); r.status != 200 {
		t.Fatal(r.raw)
	}
	reached, release := make(chan struct{}), make(chan struct{})
	var armed atomic.Bool
	armed.Store(true)
	s.faults.setHold(func(op string) {
		if op == "Query" && armed.CompareAndSwap(true, false) {
			close(reached)
			<-release
		}
	})
	deleted := make(chan reply, 1)
	go func() { deleted <- s.serve(t, call("DELETE", "/sessions/doomed", "alice", nil), 30*time.Second) }()
	<-reached
	s.faults.setHold(nil)
	if r := s.chat(t, "alice", "doomed", "during the delete"); r.status != 409 && r.status != 404 {
		damaged++
		t.Errorf("a turn during the delete: %d %s; want 409 or 404", r.status, r.raw)
	}
	close(release)
	if r := <-deleted; r.status != 204 {
		t.Errorf("the delete: %d %s", r.status, r.raw)
	}
	settled("during the cleanup", "doomed")

	// Then rounds at random moments: the delete arrives while the turn's
	// model call runs, and the model answers at a random moment too.
	const rounds = 30
	rng := newRand(11)
	first, won := 0, 0
	for round := range rounds {
		id := fmt.Sprintf("race-%d", round)
		if r := s.chat(t, "alice", id, "opening"); r.status != 200 {
			t.Fatal(r.raw)
		}
		calls := s.Model.Calls()
		s.Model.Enqueue(conversetest.Text("answer").WithDelay(time.Duration(rng.IntN(30)) * time.Millisecond))
		turn := make(chan reply, 1)
		go func() { turn <- s.chat(t, "alice", id, "racing") }()
		waitCalls(t, s.Model, calls+1)
		time.Sleep(time.Duration(rng.IntN(30)) * time.Millisecond)
		if r := s.serve(t, call("DELETE", "/sessions/"+id, "alice", nil), 30*time.Second); r.status != 204 {
			t.Errorf("round %d: delete: %d %s", round, r.status, r.raw)
		}
		switch r := <-turn; r.status {
		case 200:
			first++
		case 404, 409:
			won++
		default:
			damaged++
			t.Errorf("round %d: the turn got %d %s", round, r.status, r.raw)
		}
		settled(fmt.Sprintf("round %d", round), id)
	}
	report(t, "DELETE racing a turn: the turn commits and is then deleted whole, or the delete wins and the turn writes nothing; no half-deleted session, no id held by two owners",
		fmt.Sprintf("1 turn started inside the delete's cleanup, then %d races at random moments (%d turns committed first, %d deletes won)", rounds, first, won), damaged)
}

// TestDeleteStoppedHalfWay fails a DELETE after its first write. The session
// must be gone to every reader and closed to every writer, its id still
// its owner's, and a second DELETE must finish the job.
func TestDeleteStoppedHalfWay(t *testing.T) {
	s := newSystem(t, nil)
	if r := s.chat(t, "alice", "half", "opening"); r.status != 200 {
		t.Fatal(r.raw)
	}
	// DynamoDB throttles everything from the delete's second request on.
	var armed atomic.Bool
	armed.Store(true)
	s.faults.setHold(func(op string) {
		if op == "Query" && armed.CompareAndSwap(true, false) {
			s.faults.left.Store(-1)
		}
	})
	r := s.serve(t, call("DELETE", "/sessions/half", "alice", nil), 30*time.Second)
	s.faults.setHold(nil)
	s.faults.left.Store(0)
	broken := 0
	if r.status != 503 || !strings.Contains(r.raw, "DELETE again") {
		t.Errorf("the stopped delete: %d %s; want 503 asking for the DELETE again", r.status, r.raw)
	}
	if r := s.serve(t, call("GET", "/sessions/half", "alice", nil), 30*time.Second); r.status != 404 {
		broken++
		t.Errorf("GET of the half-deleted session: %d %s", r.status, r.raw)
	}
	if r := s.chat(t, "alice", "half", "still there?"); r.status != 409 || r.code() != "conflict" {
		broken++
		t.Errorf("a turn on the half-deleted session: %d %s; want 409", r.status, r.raw)
	}
	if r := s.chat(t, "bob", "half", "is the id free?"); r.status != 404 {
		broken++
		t.Errorf("another owner taking the id before the delete finished: %d %s", r.status, r.raw)
	}
	if r := s.serve(t, call("DELETE", "/sessions/half", "alice", nil), 30*time.Second); r.status != 204 {
		broken++
		t.Errorf("the second DELETE: %d %s", r.status, r.raw)
	}
	if n := itemsUnder(t, s.DDB, "s#alice#half") + itemsUnder(t, s.DDB, "id#half"); n != 0 {
		broken++
		t.Errorf("%d items left after the second DELETE", n)
	}
	if r := s.chat(t, "alice", "half", "a new start"); r.status != 200 {
		broken++
		t.Errorf("a new session under the id: %d %s", r.status, r.raw)
	}
	report(t, "A DELETE that stops part-way leaves the session deleted to every reader and writer, its id still the owner's; a second DELETE finishes it",
		"1 DELETE throttled after its tombstone, then GET, POST by the owner and by another owner, and the DELETE again", broken)
}

// TestIdempotencyKeyIsTheCallers sends one Idempotency-Key to several
// sessions, at once and one after another. A key names one request of one
// owner: the model runs at most once for it, and any other request with it
// gets 422.
func TestIdempotencyKeyIsTheCallers(t *testing.T) {
	s := newSystem(t, nil)
	s.Model.Responder = func(*conversetest.Request) conversetest.Reply {
		return conversetest.Text("ok").WithDelay(30 * time.Millisecond) // the requests overlap
	}
	extra := 0
	const sessions = 4
	calls := s.Model.Calls()
	var wg sync.WaitGroup
	var mu sync.Mutex
	statuses := map[int]int{}
	for i := range sessions {
		wg.Go(func() {
			r := s.serve(t, call("POST", "/chat", "alice", map[string]any{"session_id": fmt.Sprintf("k-%d", i), "message": "hello"}).withKey("shared-key"), 30*time.Second)
			mu.Lock()
			statuses[r.status]++
			mu.Unlock()
		})
	}
	wg.Wait()
	if n := s.Model.Calls() - calls; n > 1 || statuses[200] != 1 || statuses[422] != sessions-1 {
		extra += max(n-1, 0)
		t.Errorf("one key on %d sessions at once: %d model calls, answers %v; want 1 call, one 200 and 422 for the rest", sessions, n, statuses)
	}

	// One after another.
	calls = s.Model.Calls()
	if r := s.serve(t, call("POST", "/chat", "alice", map[string]any{"session_id": "seq-a", "message": "hi"}).withKey("seq-key"), 30*time.Second); r.status != 200 {
		t.Fatal(r.raw)
	}
	r := s.serve(t, call("POST", "/chat", "alice", map[string]any{"session_id": "seq-b", "message": "hi"}).withKey("seq-key"), 30*time.Second)
	if n := s.Model.Calls() - calls; r.status != 422 || r.code() != "idempotency_key_reused" || n != 1 {
		extra += max(n-1, 0)
		t.Errorf("the key on a second session: %d %s after %d model calls; want 422 and 1 call", r.status, r.raw, n)
	}
	if st := s.stored(t, "alice", "seq-b"); st != nil {
		t.Errorf("the refused request stored a session of %d messages", len(st.messages))
	}
	// Another owner's key of the same name is another key.
	if r := s.serve(t, call("POST", "/chat", "bob", map[string]any{"session_id": "seq-b", "message": "hi"}).withKey("seq-key"), 30*time.Second); r.status != 200 {
		t.Errorf("bob's key of the same name: %d %s", r.status, r.raw)
	}
	// A retry of a request that started a new session replays it.
	create := call("POST", "/chat", "alice", map[string]any{"message": "a new one"}).withKey("create-key")
	firstAnswer := s.serve(t, create, 30*time.Second)
	calls = s.Model.Calls()
	again := s.serve(t, create, 30*time.Second)
	if firstAnswer.status != 200 || again.status != 200 || again.headers.Get("Idempotent-Replayed") != "true" || again.raw != firstAnswer.raw || s.Model.Calls() != calls {
		extra++
		t.Errorf("the retry of a new session's request: %d %s (replayed %q), first %d", again.status, again.raw, again.headers.Get("Idempotent-Replayed"), firstAnswer.status)
	}
	// Once that session is deleted, the retry is told so, and still runs
	// nothing.
	var created map[string]any
	_ = json.Unmarshal([]byte(firstAnswer.raw), &created)
	if r := s.serve(t, call("DELETE", "/sessions/"+fmt.Sprint(created["session_id"]), "alice", nil), 30*time.Second); r.status != 204 {
		t.Fatalf("deleting the new session: %d %s", r.status, r.raw)
	}
	calls = s.Model.Calls()
	if r := s.serve(t, create, 30*time.Second); r.status != 404 || r.code() != "not_found" || s.Model.Calls() != calls {
		extra += s.Model.Calls() - calls
		t.Errorf("the retry after its session was deleted: %d %s, %d model calls; want 404 and none", r.status, r.raw, s.Model.Calls()-calls)
	}
	report(t, "An Idempotency-Key names one request of one owner: reused with another request or session it gets 422, and concurrent uses call the model at most once",
		fmt.Sprintf("1 key sent to %d sessions at once, 1 key sent to 2 sessions in turn, 1 key of another owner, 1 retry of a request that made a new session, and of it after a DELETE", sessions), extra)
}

// TestHoldOfACrashedInvocationExpires kills the chat function while it
// holds an Idempotency-Key. Retries are refused while the dead invocation
// could still have committed, and run the turn, once, soon after its
// deadline.
func TestHoldOfACrashedInvocationExpires(t *testing.T) {
	t.Parallel()
	b := newSandbox(t)
	const timeout = 5 * time.Second
	ev := keyedChatEvent(t, "held", "hold me", "crash-key")
	b.model.Enqueue(conversetest.Text("never sent").WithDelay(time.Minute))
	start := time.Now()
	inv, err := b.fn.InvokeAsync(t.Context(), ev, timeout)
	if err != nil {
		t.Fatal(err)
	}
	waitCalls(t, b.model, 1)
	if err := b.fn.Kill(); err != nil {
		t.Fatal(err)
	}
	_, _ = inv.Wait(t.Context())
	if err := b.fn.Restart(t.Context()); err != nil {
		t.Fatal(err)
	}
	b.model.Reset()
	stuck := 0
	retry := func() events.APIGatewayV2HTTPResponse {
		out, err := b.fn.Invoke(t.Context(), ev, timeout)
		if err != nil {
			t.Fatalf("invoke: %v\n%s", err, b.fn.Logs())
		}
		var resp events.APIGatewayV2HTTPResponse
		if err := json.Unmarshal(out, &resp); err != nil {
			t.Fatalf("not an HTTP response: %s", out)
		}
		return resp
	}
	if r := retry(); r.StatusCode != 409 || !strings.Contains(r.Body, `"in_progress"`) {
		t.Errorf("a retry before the dead invocation's deadline: %d %s; want 409 in_progress", r.StatusCode, r.Body)
	}
	// The hold ends HoldMargin after the deadline, rounded up to a second.
	freeBy := start.Add(timeout + ddbhistory.HoldMargin + 2*time.Second)
	var r events.APIGatewayV2HTTPResponse
	for {
		r = retry()
		if r.StatusCode != 409 || time.Now().After(freeBy) {
			break
		}
		time.Sleep(250 * time.Millisecond)
	}
	if r.StatusCode != 200 {
		stuck++
		t.Errorf("a retry %s after the crash: %d %s; want 200", time.Since(start).Round(time.Second), r.StatusCode, r.Body)
	}
	calls := b.model.Calls()
	if again := retry(); again.StatusCode != 200 || again.Headers["Idempotent-Replayed"] != "true" || b.model.Calls() != calls {
		t.Errorf("the retry after that: %d, replayed %q", again.StatusCode, again.Headers["Idempotent-Replayed"])
	}
	if st := storedIn(t, b.store, "", "held"); st == nil || len(st.messages) != 2 {
		t.Errorf("stored: %+v; want the turn once", st)
	}
	report(t, "A crash while holding an Idempotency-Key holds it only until the dead invocation's deadline (plus a margin); a retry then runs the turn once",
		fmt.Sprintf("1 SIGKILL of the chat bootstrap (timeout %s) during the model call, with retries until the key was free", timeout), stuck)
}

// TestAnonymousIsUnreachable tries to reach the sessions of unauthenticated
// callers with every identity that could be mistaken for theirs.
func TestAnonymousIsUnreachable(t *testing.T) {
	leaks := 0
	for _, requireAuth := range []string{"false", "true"} {
		s := newSystem(t, map[string]string{"REQUIRE_AUTH": requireAuth})
		if requireAuth == "false" {
			if r := s.chat(t, "", "anon-1", "open to anyone"); r.status != 200 {
				t.Fatal(r.raw)
			}
		}
		identities := map[string]*events.APIGatewayV2HTTPRequestContextAuthorizerDescription{
			`JWT sub "anonymous"`:   {JWT: &events.APIGatewayV2HTTPRequestContextAuthorizerJWTDescription{Claims: map[string]string{"sub": "anonymous"}}},
			"JWT with an empty sub": {JWT: &events.APIGatewayV2HTTPRequestContextAuthorizerJWTDescription{Claims: map[string]string{"sub": ""}}},
			"JWT without sub":       {JWT: &events.APIGatewayV2HTTPRequestContextAuthorizerJWTDescription{Claims: map[string]string{"email": "x@example.com"}}},
			"IAM without an ARN":    {IAM: &events.APIGatewayV2HTTPRequestContextAuthorizerIAMDescription{AccountID: "123456789012"}},
		}
		for name, id := range identities {
			for _, q := range []request{
				call("GET", "/sessions/anon-1", "", nil),
				call("GET", "/sessions", "", nil),
				call("DELETE", "/sessions/anon-1", "", nil),
				call("POST", "/chat", "", map[string]any{"session_id": "anon-1", "message": "mine?"}),
			} {
				q.auth = id
				if r := s.serve(t, q, 30*time.Second); r.status != 401 || r.code() != "unauthorized" {
					leaks++
					t.Errorf("REQUIRE_AUTH=%s, %s, %s %s: %d %s; want 401", requireAuth, name, q.method, q.path, r.status, r.raw)
				}
			}
		}
		if requireAuth == "false" {
			if st := s.stored(t, "", "anon-1"); st == nil || len(st.messages) != 2 {
				leaks++
				t.Errorf("the anonymous session after the attempts: %+v", st)
			}
		}
	}
	report(t, "The anonymous owner is a namespace no token or principal reaches: a JWT without a subject, or with the subject \"anonymous\", and a principal without an ARN get 401",
		"4 identities × 4 routes, with REQUIRE_AUTH off and on", leaks)
}

// TestHostileSchemas sends the structured function schemas built to burn
// its time. Those past the static limits are refused before any model
// call; one that passes them, but whose validation of the model's object
// would take exponential time, is stopped by the validation budget. Each is
// a 400 invalid_schema that names the limit, and nothing is stored.
func TestHostileSchemas(t *testing.T) {
	s := newSystem(t, nil)
	// 30 definitions, each applying the next twice: 2^30 paths in 2 KB.
	var defs []string
	for i := range 30 {
		defs = append(defs, fmt.Sprintf(`"d%d":{"allOf":[{"$ref":"#/$defs/d%d"},{"$ref":"#/$defs/d%d"}]}`, i, i+1, i+1))
	}
	defs = append(defs, `"d30":{"type":"string"}`)
	allOf := `{"type":"object","properties":{"x":{"$ref":"#/$defs/d0"}},"$defs":{` + strings.Join(defs, ",") + `}}`
	deep := `{"type":"object","properties":{"x":` + strings.Repeat(`{"type":"object","properties":{"x":`, 100) + `{}` + strings.Repeat(`}}`, 100) + `}}`
	huge := `{"type":"object","properties":{` + strings.TrimSuffix(strings.Repeat(`"n":{"minimum":1e999999},`, 50), ",") + `}}`
	recursion := `{"type":"object","properties":{"a":{"$ref":"#/$defs/t"}},"$defs":{"t":{"type":"array","items":{"$ref":"#/$defs/t"},"contains":{"$ref":"#/$defs/t"}}}}`
	burned := 0
	for _, tc := range []struct {
		name, schema, limit string
		answer              any // the model's object, when the schema passes the static limits
	}{
		{"2 KB of allOf branches", allOf, "MaxExpanded", nil},
		{"100 levels of nesting", deep, "MaxDepth", nil},
		{"numbers with an exponent of a million", huge, "MaxNumberExponent", nil},
		// The validation budget is steps and time, whichever ends first:
		// time, under the race detector on a loaded machine.
		{"a recursion the model makes exponential", recursion, "MaxSteps|MaxValidateTime", json.RawMessage(`{"a":` + strings.Repeat("[", 40) + strings.Repeat("]", 40) + `}`)},
	} {
		calls := s.Model.Calls()
		if tc.answer != nil {
			s.Model.Enqueue(conversetest.ToolUse("t1", "structured_output", tc.answer))
		}
		id := "schema-" + strings.ReplaceAll(tc.name, " ", "-")
		r := s.serve(t, call("POST", "/structured", "", map[string]any{"session_id": id, "prompt": "fill it in", "schema": json.RawMessage(tc.schema)}), 30*time.Second)
		msg, _ := r.body["error"].(map[string]any)["message"].(string)
		if r.status != 400 || r.code() != "invalid_schema" || !regexp.MustCompile(`\(limit: (`+tc.limit+`)\)`).MatchString(msg) {
			burned++
			t.Errorf("%s: %d %s; want 400 invalid_schema naming %s", tc.name, r.status, r.raw, tc.limit)
		}
		wantCalls := 0
		if tc.answer != nil {
			wantCalls = 1
		}
		if n := s.Model.Calls() - calls; n != wantCalls {
			t.Errorf("%s: %d model calls, want %d", tc.name, n, wantCalls)
		}
		if st := s.stored(t, "", id); st != nil {
			t.Errorf("%s: a session of %d messages was stored", tc.name, len(st.messages))
		}
	}
	report(t, "A hostile JSON Schema cannot burn the invocation: past the budget it is a 400 that names the limit, before the model or at the first object it cannot afford to check",
		"4 schemas through the structured function: 2 KB of doubling allOf branches, 100 levels of nesting, huge exponents, and a recursion checked against a 40-deep object", burned)
}

// bigTurnReplies scripts a turn of n messages (n even): n/2-1 model calls
// that each use a tool, and an answer.
func bigTurnReplies(n int) []conversetest.Reply {
	var replies []conversetest.Reply
	for i := range n/2 - 1 {
		replies = append(replies, conversetest.ToolUse(fmt.Sprintf("c%d", i), "calculator", map[string]string{"expression": fmt.Sprintf("%d+1", i)}))
	}
	return append(replies, conversetest.Text("all added up"))
}

// TestTurnLargerThanATransaction runs a turn of 150 messages, which no
// single DynamoDB transaction holds, through the chat function: it is
// stored whole, valid, and replayed whole.
func TestTurnLargerThanATransaction(t *testing.T) {
	s := newSystem(t, map[string]string{"MAX_CYCLES": "80"})
	if r := s.chat(t, "", "big", "opening"); r.status != 200 {
		t.Fatal(r.raw)
	}
	s.Model.Enqueue(bigTurnReplies(150)...)
	ev := call("POST", "/chat", "", map[string]any{"session_id": "big", "message": "add up a lot"}).withKey("big-key")
	r := s.serve(t, ev, 30*time.Second)
	lost := 0
	if r.status != 200 {
		t.Fatalf("a turn of 150 messages: %d %s", r.status, r.raw)
	}
	if n := len(r.body["messages"].([]any)); n != 150 {
		t.Errorf("the answer lists %d messages, want 150", n)
	}
	st := s.stored(t, "", "big")
	if st == nil || len(st.messages) != 152 {
		lost++
		t.Fatalf("stored: %v", st)
	}
	validHistory(t, st.messages)
	if again := s.serve(t, ev, 30*time.Second); again.raw != r.raw {
		t.Errorf("the replay differs: %d, %d bytes of %d", again.status, len(again.raw), len(r.raw))
	}
	if r := s.chat(t, "", "big", "and then?"); r.status != 200 {
		t.Errorf("the turn after: %d %s", r.status, r.raw)
	}
	report(t, "A turn larger than one DynamoDB transaction (100 items, 4 MB) is stored whole, in writes that readers see all or none of",
		"1 turn of 150 messages (74 tool uses) through the chat handler, with an Idempotency-Key, replayed", lost)
}

// TestCrashBetweenTheWritesOfALargeTurn kills the chat function while a
// turn too large for one transaction is half written: after its first
// write, and after its first transaction of messages. The session must be
// as it was, valid, and take the next turns, large or not.
func TestCrashBetweenTheWritesOfALargeTurn(t *testing.T) {
	t.Parallel()
	b := newSandbox(t, "MAX_CYCLES=80")
	if r, _ := b.invoke(t, "opening", 10*time.Second); r.StatusCode != 200 {
		t.Fatalf("opening turn: %d %s", r.StatusCode, r.Body)
	}
	damaged := 0
	kills := 0
	for _, nth := range []int{1, 2, 1, 2} { // held before the nth TransactWriteItems
		before := storedIn(t, b.store, "", "crashy")
		b.model.Enqueue(bigTurnReplies(150)...)
		reached := b.holdWrite("TransactWriteItems", nth)
		inv, err := b.fn.InvokeAsync(t.Context(), chatEvent(t, "a long one"), 20*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		select {
		case <-reached:
		case <-time.After(15 * time.Second):
			t.Fatalf("the turn never reached its write %d:\n%s", nth, b.fn.Logs())
		}
		if err := b.fn.Kill(); err != nil {
			t.Fatal(err)
		}
		_, _ = inv.Wait(t.Context())
		kills++
		b.ddb.SetHook(nil)
		if after := storedIn(t, b.store, "", "crashy"); !after.sameAs(before) {
			damaged++
			t.Errorf("kill before write %d: the session changed from %d to %d messages", nth, len(before.messages), len(after.messages))
		}
		validHistory(t, storedIn(t, b.store, "", "crashy").messages)
		b.model.Reset()
		if err := b.fn.Restart(t.Context()); err != nil {
			t.Fatal(err)
		}
		if r, _ := b.invoke(t, "after the crash", 10*time.Second); r.StatusCode != 200 {
			damaged++
			t.Errorf("the next turn: %d %s", r.StatusCode, r.Body)
		}
	}
	// A large turn after them all lands whole, over the leftovers.
	before := storedIn(t, b.store, "", "crashy")
	b.model.Enqueue(bigTurnReplies(150)...)
	if r, _ := b.invoke(t, "a long one that lands", 20*time.Second); r.StatusCode != 200 {
		t.Fatalf("the large turn after the crashes: %d %s", r.StatusCode, r.Body)
	}
	after := storedIn(t, b.store, "", "crashy")
	if len(after.messages) != len(before.messages)+150 {
		damaged++
		t.Errorf("after the large turn: %d messages, want %d", len(after.messages), len(before.messages)+150)
	}
	validHistory(t, after.messages)
	report(t, "A crash (SIGKILL) between the writes of a turn larger than one transaction leaves the session as it was, valid, and usable",
		fmt.Sprintf("%d SIGKILLs of the chat bootstrap during 150-message turns: %d after the reservation, %d after the first transaction of messages", kills, kills/2, kills/2), damaged)
}

// TestCommitWhoseAnswerIsLost lets a turn's commit land in DynamoDB while
// its answer arrives after the invocation's time is up. The function must
// not claim that nothing was saved: it answers 504 outcome_unknown, and a
// retry with the same Idempotency-Key replays the stored turn.
func TestCommitWhoseAnswerIsLost(t *testing.T) {
	s := newSystem(t, nil)
	if r := s.chat(t, "", "lost", "opening"); r.status != 200 {
		t.Fatal(r.raw)
	}
	s.faults.setLose(func(op string, r *http.Request) error {
		if op != "TransactWriteItems" {
			return nil
		}
		<-r.Context().Done()
		return r.Context().Err()
	})
	ev := call("POST", "/chat", "", map[string]any{"session_id": "lost", "message": "is it saved?"}).withKey("lost-key")
	r := s.serve(t, ev, 5*time.Second)
	s.faults.setLose(nil)
	wrong := 0
	if r.status != 504 || r.code() != "outcome_unknown" {
		wrong++
		t.Errorf("a commit whose answer was lost: %d %s; want 504 outcome_unknown", r.status, r.raw)
	}
	calls := s.Model.Calls()
	again := s.serve(t, ev, 30*time.Second)
	if again.status != 200 || again.headers.Get("Idempotent-Replayed") != "true" || s.Model.Calls() != calls {
		wrong++
		t.Errorf("the retry: %d %s, replayed %q, %d model calls", again.status, again.raw, again.headers.Get("Idempotent-Replayed"), s.Model.Calls()-calls)
	}
	if st := s.stored(t, "", "lost"); st == nil || len(st.messages) != 4 || st.messages[2].Text() != "is it saved?" {
		wrong++
		t.Errorf("stored: %+v", st)
	}
	report(t, "A commit that outlives the invocation's time answers 504 outcome_unknown, never a claim that nothing was saved; a retry with the Idempotency-Key replays it",
		"1 commit that landed while its answer was held past the store's deadline, then its retry", wrong)
}

// TestBadInputIs4xxAndChangesNothing sends input that used to get a 5xx:
// a cursor at the largest message index, on the chat and the stream
// functions; a body that is not UTF-8; images whose bytes are not their
// format; and an image Bedrock cannot read.
func TestBadInputIs4xxAndChangesNothing(t *testing.T) {
	s := newSystem(t, nil)
	if r := s.chat(t, "", "input", "opening"); r.status != 200 {
		t.Fatal(r.raw)
	}
	before := s.stored(t, "", "input")
	bad := 0
	check := func(what string, status int, code, raw string) {
		t.Helper()
		if status < 400 || status >= 500 {
			bad++
			t.Errorf("%s: %d %s; want a 4xx", what, status, raw)
		}
		if code == "" {
			t.Errorf("%s: no error code in %s", what, raw)
		}
	}
	// The stream function: another function on the same table, whose URL
	// serves the session routes too.
	stream, err := app.New(s.Config, s.Model.Client(), s.DDB.Client(), app.Options{Routes: httpapi.FunctionURLRoutes, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	tried := 0
	for _, cursor := range []string{ddbhistory.CursorAt(9_999_999_999), ddbhistory.CursorAt(9_999_999_000)} {
		r := s.serve(t, call("GET", "/sessions/input?cursor="+url.QueryEscape(cursor), "", nil), 30*time.Second)
		tried++
		if msgs, _ := r.body["messages"].([]any); r.status != 200 || len(msgs) != 0 || r.body["next_cursor"] != nil {
			check("GET with a cursor past the end", r.status, r.code(), r.raw)
		}
		// The stream function serves the same route through its URL.
		w := httptest.NewRecorder()
		stream.Handler.ServeHTTP(w, httptest.NewRequest("GET", "/sessions/input?cursor="+url.QueryEscape(cursor), nil))
		tried++
		var body map[string]any
		_ = json.Unmarshal(w.Body.Bytes(), &body)
		if msgs, _ := body["messages"].([]any); w.Code != 200 || len(msgs) != 0 {
			check("the stream URL's GET with a cursor past the end", w.Code, "?", w.Body.String())
		}
	}

	// A body that is not UTF-8, which API Gateway sends base64-encoded
	// (lambdahttp's tests check that it decodes it).
	r := s.serve(t, call("POST", "/chat", "", []byte(`{"session_id":"input","message":"caf`+"\xe9"+`"}`)), 30*time.Second)
	tried++
	check("a body that is not UTF-8", r.status, r.code(), r.raw)

	calls := s.Model.Calls()
	for name, img := range map[string][]byte{"JPEG bytes labelled png": conversetest.JPEGStart, "garbage labelled png": []byte("not an image at all, just text")} {
		r := s.serve(t, call("POST", "/chat", "", map[string]any{"session_id": "input", "content": []any{
			map[string]any{"text": "what is this?"},
			map[string]any{"image": map[string]any{"format": "png", "source": map[string]any{"bytes": img}}},
		}}), 30*time.Second)
		tried++
		check(name, r.status, r.code(), r.raw)
	}
	if n := s.Model.Calls() - calls; n != 0 {
		bad++
		t.Errorf("mislabelled images reached the model %d times", n)
	}
	// An image that passes the checks but that Bedrock refuses.
	s.Model.Enqueue(conversetest.UnreadableImage())
	png := conversetest.PNGStart
	r = s.serve(t, call("POST", "/chat", "", map[string]any{"session_id": "input", "content": []any{
		map[string]any{"text": "and this?"},
		map[string]any{"image": map[string]any{"format": "png", "source": map[string]any{"bytes": png}}},
	}}), 30*time.Second)
	tried++
	check("an image Bedrock cannot read", r.status, r.code(), r.raw)

	if after := s.stored(t, "", "input"); !after.sameAs(before) {
		bad++
		t.Error("bad input changed the session")
	}
	report(t, "Bad input gets a 4xx with a JSON error and changes nothing: cursors past the end, bodies that are not UTF-8, images whose bytes are not their format or that Bedrock cannot read",
		fmt.Sprintf("%d requests on the chat handler and the stream URL", tried), bad)
}
