package reliability_test

import (
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/lambda-agent/lambda-agent/internal/audit"
	"github.com/lambda-agent/lambda-agent/internal/testkit"
	"github.com/lambda-agent/lambda-agent/internal/testkit/conversetest"
)

// auditOn is the environment of a system that keeps the audit record.
var auditOn = map[string]string{"AUDIT": "on"}

// auditEntry is a record as GET /sessions/{id}/audit lists it.
type auditEntry struct {
	ID      string        `json:"id"`
	At      int           `json:"at"`
	Turn    string        `json:"turn"`
	Call    int           `json:"call"`
	Outcome string        `json:"outcome"`
	Bytes   int           `json:"bytes"`
	Record  *audit.Record `json:"record"`
	Href    string        `json:"href"`
}

// auditOf reads every page of session's audit record as owner: the
// status of the first answer that is not a 200, or 200 and the records.
func (s *system) auditOf(t testing.TB, owner, session string) (int, []auditEntry, string) {
	t.Helper()
	var all []auditEntry
	for cursor := ""; ; {
		path := "/sessions/" + session + "/audit?limit=100"
		if cursor != "" {
			path += "&cursor=" + cursor
		}
		r := s.serve(t, call("GET", path, owner, nil), 30*time.Second)
		if r.status != http.StatusOK {
			return r.status, nil, r.raw
		}
		var page struct {
			Records    []auditEntry `json:"records"`
			NextCursor string       `json:"next_cursor"`
		}
		if err := json.Unmarshal([]byte(r.raw), &page); err != nil {
			t.Fatalf("an audit page that is not the documented shape: %v: %s", err, r.raw)
		}
		all = append(all, page.Records...)
		if page.NextCursor == "" {
			return http.StatusOK, all, ""
		}
		cursor = page.NextCursor
	}
}

// lastPrompt is the text of the last user message a record's request
// sent.
func lastPrompt(r *audit.Record) string {
	msgs := r.Request.Messages
	for i := len(msgs) - 1; i >= 0; i-- {
		if msgs[i].Role == "user" {
			return msgs[i].Text()
		}
	}
	return ""
}

// TestAuditOtherOwner: another owner's audit record is a 404, from the
// page and from each record, as every other session route answers, and
// nothing of it is in the answer.
func TestAuditOtherOwner(t *testing.T) {
	s := newSystem(t, auditOn)
	const secret = "my account number is 12345678"
	if r := s.chat(t, "alice", "alice-audit", secret); r.status != 200 {
		t.Fatalf("alice's turn: %d %s", r.status, r.raw)
	}
	status, records, _ := s.auditOf(t, "alice", "alice-audit")
	if status != 200 || len(records) != 1 || records[0].Record == nil || lastPrompt(records[0].Record) != secret {
		t.Fatalf("alice's own audit: %d %+v", status, records)
	}
	tried, leaked := 0, 0
	for _, path := range []string{
		"/sessions/alice-audit/audit",
		"/sessions/alice-audit/audit?limit=1",
		"/sessions/alice-audit/audit/" + records[0].ID,
		"/sessions/alice-audit/audit/0.0000000000000000000.1",
		"/sessions/no-such-session/audit",
	} {
		r := s.serve(t, call("GET", path, "mallory", nil), 30*time.Second)
		tried++
		if r.status != http.StatusNotFound || r.code() != "not_found" {
			t.Errorf("mallory's GET %s: %d %s, want 404 not_found", path, r.status, r.raw)
		}
		if strings.Contains(r.raw, "12345678") || strings.Contains(r.raw, records[0].Turn) {
			leaked++
			t.Errorf("mallory's GET %s leaks alice's record: %s", path, r.raw)
		}
	}
	report(t, "another owner's audit record is a 404, and nothing of it leaks", fmt.Sprintf("%d reads", tried), leaked)
}

// TestAuditRecordOverTheItemLimit: a model call whose record is larger
// than a DynamoDB item is stored in parts and read back whole, and its
// turn is as any other.
func TestAuditRecordOverTheItemLimit(t *testing.T) {
	s := newSystem(t, map[string]string{"AUDIT": "on", "MAX_MESSAGE_BYTES": "2000000"})
	raw := make([]byte, 900<<10)
	_, _ = rand.Read(raw)
	big := base64.StdEncoding.EncodeToString(raw) // 1.2 MB that DEFLATE cannot shrink much
	if r := s.chat(t, "alice", "big-audit", big); r.status != 200 {
		t.Fatalf("the turn: %d %.300s", r.status, r.raw)
	}
	validHistory(t, s.stored(t, "alice", "big-audit").messages)
	status, records, _ := s.auditOf(t, "alice", "big-audit")
	if status != 200 || len(records) != 1 {
		t.Fatalf("the audit page: %d %d records", status, len(records))
	}
	lost := 0
	// The page, which the local run serves unbuffered, holds it whole, and
	// so does the route of one record.
	if rec := records[0].Record; rec == nil || lastPrompt(rec) != big {
		lost++
		t.Errorf("the page's record is not the turn's whole request")
	}
	r := s.serve(t, call("GET", "/sessions/big-audit/audit/"+records[0].ID, "alice", nil), 30*time.Second)
	var one auditEntry
	if err := json.Unmarshal([]byte(r.raw), &one); r.status != 200 || err != nil || one.Record == nil || lastPrompt(one.Record) != big {
		lost++
		t.Errorf("GET the record alone: %d %v", r.status, err)
	}
	if one.Bytes < 400<<10 {
		t.Errorf("the record is %d bytes; the test needs one larger than an item", one.Bytes)
	}
	items := auditItems(t, s, "alice", "big-audit")
	if items < 2 {
		t.Errorf("the record is stored in %d items, want parts", items)
	}
	report(t, "an audit record larger than a DynamoDB item is stored and read back whole", fmt.Sprintf("a %d KB record in %d items", one.Bytes>>10, items), lost)
}

// auditItems counts the audit items of a session, parts included, read
// from the table itself.
func auditItems(t testing.TB, s *system, owner, session string) int {
	t.Helper()
	out, err := s.DDB.Client().Query(t.Context(), &dynamodb.QueryInput{
		TableName:                 aws.String(testkit.Table),
		KeyConditionExpression:    aws.String("pk = :pk AND begins_with(sk, :audit)"),
		ExpressionAttributeValues: map[string]types.AttributeValue{":pk": &types.AttributeValueMemberS{Value: "s#" + owner + "#" + session}, ":audit": &types.AttributeValueMemberS{Value: "audit#"}},
		ProjectionExpression:      aws.String("sk"),
	})
	if err != nil {
		t.Fatal(err)
	}
	return len(out.Items)
}

// TestAuditWriteFails: a turn whose audit write fails succeeds all the
// same, leaves its session valid, and the failure is logged and counted.
func TestAuditWriteFails(t *testing.T) {
	var metrics testkit.Buffer
	logs := &testkit.Buffer{}
	s := newSystemWith(t, testkit.Options{Env: auditOn, Metrics: &metrics, Logger: slog.New(slog.NewJSONHandler(logs, nil))})
	// Commits are transactions; without an Idempotency-Key, the audit
	// record is the one thing a turn puts with PutItem.
	s.faults.setLose(func(op string, _ *http.Request) error {
		if op == "PutItem" {
			return errors.New("the audit write's answer is lost")
		}
		return nil
	})
	const turns = 5
	lost := 0
	for i := range turns {
		if r := s.chat(t, "alice", "audit-fails", fmt.Sprintf("message %d", i)); r.status != 200 {
			lost++
			t.Errorf("turn %d: %d %s", i, r.status, r.raw)
		}
	}
	st := s.stored(t, "alice", "audit-fails")
	if st == nil || len(st.messages) != 2*turns {
		t.Fatalf("the session after %d turns: %+v", turns, st)
	}
	validHistory(t, st.messages)
	if n := strings.Count(metrics.String(), `"AuditWriteFailures":1`); n != turns {
		t.Errorf("AuditWriteFailures counted %d times, want %d:\n%s", n, turns, metrics.String())
	}
	if n := strings.Count(logs.String(), "audit record not stored"); n != turns {
		t.Errorf("%d log lines of the failure, want %d", n, turns)
	}
	report(t, "a turn whose audit write fails succeeds, and its session stays valid", fmt.Sprintf("%d turns, every audit write failing", turns), lost)
}

// TestAuditRacingTurns: turns that race on one session each get the
// records of their own model calls, with their own request and answer and
// their own outcome: no record is confused with another turn's.
func TestAuditRacingTurns(t *testing.T) {
	s := newSystem(t, auditOn)
	s.Model.Responder = func(req *conversetest.Request) conversetest.Reply {
		msgs := req.Messages
		var prompt string
		for _, c := range msgs[len(msgs)-1].Content {
			prompt += c.Text
		}
		return conversetest.Text("re: " + prompt).WithDelay(5 * time.Millisecond)
	}
	const session, racers, rounds = "audit-race", 6, 4
	if r := s.chat(t, "alice", session, "opening"); r.status != 200 {
		t.Fatalf("opening: %d %s", r.status, r.raw)
	}
	won := map[string]bool{"opening": true}
	for round := range rounds {
		var wg sync.WaitGroup
		var mu sync.Mutex
		for i := range racers {
			prompt := fmt.Sprintf("round %d racer %d", round, i)
			wg.Go(func() {
				r := s.chat(t, "alice", session, prompt)
				mu.Lock()
				defer mu.Unlock()
				won[prompt] = r.status == 200
				if r.status != 200 && r.status != 409 {
					t.Errorf("%s: %d %s", prompt, r.status, r.raw)
				}
			})
		}
		wg.Wait()
	}
	status, records, raw := s.auditOf(t, "alice", session)
	if status != 200 {
		t.Fatalf("the audit: %d %s", status, raw)
	}
	confused := 0
	seen := map[string]bool{}
	for _, e := range records {
		prompt := lastPrompt(e.Record)
		wantOutcome := map[bool]string{true: "committed", false: "failed"}[won[prompt]]
		if e.Record.Response == nil || e.Record.Response.Message.Text() != "re: "+prompt || e.Outcome != wantOutcome || seen[prompt] {
			confused++
			t.Errorf("record %s: prompt %q, answer %+v, outcome %s (want %s), seen before %v", e.ID, prompt, e.Record.Response, e.Outcome, wantOutcome, seen[prompt])
		}
		seen[prompt] = true
	}
	if len(records) != s.Model.Calls() || len(seen) != len(won) {
		confused++
		t.Errorf("%d records of %d model calls, for %d of %d turns", len(records), s.Model.Calls(), len(seen), len(won))
	}
	report(t, "racing turns on one session each record their own model calls", fmt.Sprintf("%d turns, %d racing at once, %d records", len(won), racers, len(records)), confused)
}

// TestAuditFollowsTheSession: a rewind removes the records of the turns it
// discards, a regenerate's records take their place, a guardrail's
// redaction reaches the records, and a delete takes them all.
func TestAuditFollowsTheSession(t *testing.T) {
	s := newSystem(t, map[string]string{"AUDIT": "on", "GUARDRAIL_ID": "g1", "GUARDRAIL_VERSION": "1"})
	const session = "audit-follows"
	s.Model.Enqueue(conversetest.Text("one"), conversetest.Text("two"), conversetest.Text("two again"))
	for _, m := range []string{"first", "second"} {
		if r := s.chat(t, "alice", session, m); r.status != 200 {
			t.Fatalf("%s: %d %s", m, r.status, r.raw)
		}
	}
	if r := s.serve(t, regenerate(session, "alice"), 30*time.Second); r.status != 200 {
		t.Fatalf("regenerate: %d %s", r.status, r.raw)
	}
	_, records, _ := s.auditOf(t, "alice", session)
	var answers []string
	for _, e := range records {
		answers = append(answers, e.Record.Response.Message.Text())
	}
	lost := 0
	if strings.Join(answers, ",") != "one,two again" {
		lost++
		t.Errorf("after a regenerate, the records answer %q, want one, two again", answers)
	}
	if n := auditItems(t, s, "alice", session); n != 2 {
		t.Errorf("%d audit items are stored, want the 2 that show: the regenerated turn's are deleted", n)
	}
	if r := s.serve(t, rewindTo(session, "alice", 2), 30*time.Second); r.status != 200 {
		t.Fatalf("rewind: %d %s", r.status, r.raw)
	}
	if _, records, _ = s.auditOf(t, "alice", session); len(records) != 1 || auditItems(t, s, "alice", session) != 1 {
		lost++
		t.Errorf("after a rewind to 2, %d records show, %d items are stored; want 1", len(records), auditItems(t, s, "alice", session))
	}

	const blocked = "my card is 4111 1111 1111 1111"
	s.Model.Enqueue(conversetest.GuardrailInput("Sorry, I cannot help with that."))
	if r := s.chat(t, "alice", session, blocked); r.status != 200 {
		t.Fatalf("the blocked turn: %d %s", r.status, r.raw)
	}
	_, records, raw := s.auditOfRaw(t, "alice", session)
	if strings.Contains(raw, "4111") || len(records) != 2 || lastPrompt(records[1].Record) != "[User input redacted.]" {
		lost++
		t.Errorf("the blocked input survives in the audit record, or is not redacted as the session is: %.500s", raw)
	}

	if r := s.serve(t, call("DELETE", "/sessions/"+session, "alice", nil), 30*time.Second); r.status != 204 {
		t.Fatalf("delete: %d %s", r.status, r.raw)
	}
	if status, _, _ := s.auditOf(t, "alice", session); status != 404 || auditItems(t, s, "alice", session) != 0 {
		lost++
		t.Errorf("after the delete: %d, %d audit items stored", status, auditItems(t, s, "alice", session))
	}
	report(t, "the audit record follows rewinds, redactions and deletes", "a regenerate, a rewind, a blocked input, a delete", lost)
}

// auditOfRaw is auditOf with the first page's raw answer too.
func (s *system) auditOfRaw(t testing.TB, owner, session string) (int, []auditEntry, string) {
	t.Helper()
	r := s.serve(t, call("GET", "/sessions/"+session+"/audit?limit=100", owner, nil), 30*time.Second)
	status, records, _ := s.auditOf(t, owner, session)
	return status, records, r.raw
}

// TestAuditOff: a deployment without AUDIT answers the audit routes with
// 404 audit_off, for every session, and its turns write no audit item.
func TestAuditOff(t *testing.T) {
	s := newSystem(t, nil)
	if r := s.chat(t, "alice", "no-audit", "hello"); r.status != 200 {
		t.Fatalf("turn: %d %s", r.status, r.raw)
	}
	for _, path := range []string{"/sessions/no-audit/audit", "/sessions/no-audit/audit/0.0000000000000000000.1", "/sessions/other/audit"} {
		if r := s.serve(t, call("GET", path, "alice", nil), 30*time.Second); r.status != 404 || r.code() != "audit_off" {
			t.Errorf("GET %s: %d %s, want 404 audit_off", path, r.status, r.raw)
		}
	}
	if n := auditItems(t, s, "alice", "no-audit"); n != 0 {
		t.Errorf("%d audit items stored with AUDIT off", n)
	}
}

// TestAuditCostPerTurn measures what the audit record adds to a turn's
// DynamoDB work, as docs/audit.md reports it (go test -run
// TestAuditCostPerTurn -v ./tests/reliability), and holds it to the
// bounds the page promises: one PutItem per model call, and a few WCU per
// record of a 40-message window.
func TestAuditCostPerTurn(t *testing.T) {
	type cost struct {
		requests, puts int
		wcu, rcu       float64
	}
	measure := func(env map[string]string, tool bool) cost {
		s := newSystem(t, env)
		for i := range 20 { // a window of 40 messages
			s.Model.Enqueue(conversetest.Text(fmt.Sprintf("answer %d: %s", i, strings.Repeat("words of an answer ", 20))))
			if r := s.chat(t, "alice", "cost", fmt.Sprintf("question %d: %s", i, strings.Repeat("words of a question ", 10))); r.status != 200 {
				t.Fatalf("warm-up turn %d: %d %s", i, r.status, r.raw)
			}
		}
		if tool {
			s.Model.Enqueue(conversetest.Text("Let me calculate.").WithToolUse("c1", "calculator", map[string]string{"expression": "25*48"}), conversetest.Text("1200."))
		} else {
			s.Model.Enqueue(conversetest.Text("The answer."))
		}
		s.Meter.Take()
		if r := s.chat(t, "alice", "cost", "What is 25*48?"); r.status != 200 {
			t.Fatalf("the measured turn: %d %s", r.status, r.raw)
		}
		u := s.Meter.Take()
		return cost{requests: u.Requests, puts: u.ByOperation["PutItem"], wcu: u.WCU, rcu: u.RCU}
	}
	for _, tc := range []struct {
		name  string
		tool  bool
		calls int
	}{{"plain", false, 1}, {"tool", true, 2}} {
		off, on := measure(nil, tc.tool), measure(auditOn, tc.tool)
		t.Logf("%s turn, 40 stored messages: audit off %d requests, %.0f RCU, %.0f WCU; on %d requests, %.0f RCU, %.0f WCU (+%d PutItem, +%.0f WCU)",
			tc.name, off.requests, off.rcu, off.wcu, on.requests, on.rcu, on.wcu, on.puts-off.puts, on.wcu-off.wcu)
		if on.puts-off.puts != tc.calls || on.rcu != off.rcu || on.wcu-off.wcu > float64(8*tc.calls) {
			t.Errorf("%s turn: the audit record adds %d PutItem, %.0f RCU and %.0f WCU; want %d, 0 and at most %d", tc.name, on.puts-off.puts, on.rcu-off.rcu, on.wcu-off.wcu, tc.calls, 8*tc.calls)
		}
	}
}

// TestAuditKeyedRetry sends a turn again with its Idempotency-Key, after
// it answered: the replay calls no model, so the audit record holds the
// turn's calls once, and the replayed answer is the first.
func TestAuditKeyedRetry(t *testing.T) {
	s := newSystem(t, auditOn)
	s.Model.Responder = always(conversetest.Text("Noted once."))
	first := s.serve(t, call("POST", "/chat", "alice", map[string]any{"session_id": "keyed", "message": "Remember this once."}).withKey("k-1"), 30*time.Second)
	if first.status != 200 {
		t.Fatalf("the turn: %d %s", first.status, first.raw)
	}
	_, before, _ := s.auditOf(t, "alice", "keyed")
	calls := s.Model.Calls()
	lost := 0
	const retries = 3
	for i := range retries {
		r := s.serve(t, call("POST", "/chat", "alice", map[string]any{"session_id": "keyed", "message": "Remember this once."}).withKey("k-1"), 30*time.Second)
		if r.status != 200 || r.raw != first.raw {
			lost++
			t.Errorf("retry %d: %d %s; want the first answer replayed", i, r.status, r.raw)
		}
	}
	status, after, raw := s.auditOf(t, "alice", "keyed")
	if status != 200 || len(before) != 1 || len(after) != len(before) || after[0].ID != before[0].ID {
		lost++
		t.Errorf("the audit record after %d keyed retries: %d %d records (%d before) %s", retries, status, len(after), len(before), raw)
	}
	if n := s.Model.Calls() - calls; n != 0 {
		lost++
		t.Errorf("the keyed retries called the model %d times", n)
	}
	report(t, "a turn sent again with its Idempotency-Key is replayed and records no model call again",
		fmt.Sprintf("1 keyed turn, then %d retries with its key, %d record", retries, len(after)), lost)
}
