package memory

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/lambda-agent/lambda-agent/internal/agent"
	"github.com/lambda-agent/lambda-agent/internal/ddbhistory"
	"github.com/lambda-agent/lambda-agent/internal/testkit/dynamodbtest"
	"github.com/lambda-agent/lambda-agent/internal/turn"
)

// clock is a settable clock.
type clock struct{ t time.Time }

func newClock(t time.Time) *clock        { return &clock{t} }
func (c *clock) Now() time.Time          { return c.t }
func (c *clock) Advance(d time.Duration) { c.t = c.t.Add(d) }

func newStore(t *testing.T, clock *clock) (*Store, *dynamodb.Client) {
	t.Helper()
	srv, err := dynamodbtest.NewServer("")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Close)
	client := srv.Client()
	if err := ddbhistory.CreateTable(t.Context(), client, "sessions"); err != nil {
		t.Fatal(err)
	}
	s, err := New(client, Config{Table: "sessions", Now: clock.Now})
	if err != nil {
		t.Fatal(err)
	}
	return s, client
}

// itemSize is an item's size as DynamoDB counts it: names and values, a
// number at its most (its digits, plus one).
func itemSize(it item) int {
	n := 0
	for name, v := range it {
		n += len(name)
		switch v := v.(type) {
		case *types.AttributeValueMemberS:
			n += len(v.Value)
		case *types.AttributeValueMemberN:
			n += len(v.Value) + 1
		case *types.AttributeValueMemberBOOL:
			n++
		default:
			panic(fmt.Sprintf("an attribute of type %T", v))
		}
	}
	return n
}

// TestRecordsFitOnePage: MaxRecords records of the longest owner, kind,
// text and session id, with the marker, fit the 1 MB a Query page reads,
// which is what lets a recall cost one request.
func TestRecordsFitOnePage(t *testing.T) {
	s := &Store{cfg: Config{Table: "sessions", TTL: DefaultTTL}}
	owner := strings.Repeat("o", ddbhistory.MaxOwnerBytes)
	r := Record{
		ID: strings.Repeat("a", 10), Kind: strings.Repeat("k", MaxKindBytes), Text: strings.Repeat("t", MaxTextBytes),
		Source:    Source{SessionID: strings.Repeat("s", 128), Message: 9_999_999_999},
		UpdatedAt: time.UnixMilli(1 << 62 / 1_000_000), version: 1 << 62, committed: 1 << 62, always: true,
	}
	record := itemSize(s.encode(owner, r))
	marker := s.key(owner, skMarker)
	marker[attrForgotAt], marker[ddbhistory.TTLAttribute] = num(int64(1<<62)), num(int64(1<<62))
	total := MaxRecords*record + itemSize(marker)
	t.Logf("the largest record is %d bytes; %d of them and the marker are %d bytes", record, MaxRecords, total)
	if total > 1<<20 {
		t.Errorf("%d records and the marker are %d bytes, past the 1 MB of a Query page", MaxRecords, total)
	}
}

// put writes n records of owner's, learned at the clock's time.
func put(t *testing.T, s *Store, owner string, n int, text func(i int) string) {
	t.Helper()
	for i := range n {
		r := Record{ID: newID(), Kind: "fact", Text: text(i), Source: Source{"s1", i}, UpdatedAt: s.cfg.Now().Add(time.Duration(i) * time.Millisecond), version: 1, committed: s.cfg.Now().UnixMilli()}
		if _, err := s.client.PutItem(t.Context(), &dynamodb.PutItemInput{TableName: aws.String("sessions"), Item: s.encode(owner, r)}); err != nil {
			t.Fatal(err)
		}
	}
}

// TestApplyKeepsTheLimit: a consolidation that adds past MaxRecords
// deletes the records learned longest ago, in the same transaction.
func TestApplyKeepsTheLimit(t *testing.T) {
	clock := newClock(time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC))
	s, _ := newStore(t, clock)
	put(t, s, "alice", MaxRecords, func(i int) string { return fmt.Sprintf("fact %d", i) })
	sn, err := s.read(t.Context(), "alice", true)
	if err != nil || len(sn.records) != MaxRecords {
		t.Fatalf("read %d records, %v", len(sn.records), err)
	}
	clock.Advance(time.Hour)
	c := Commit{Owner: "alice", SessionID: "s2", Version: 1, At: clock.Now()}
	if err := s.apply(t.Context(), sn, c, []Op{{Kind: "fact", Text: "new one"}, {Kind: "fact", Text: "new two"}}); err != nil {
		t.Fatal(err)
	}
	sn, err = s.read(t.Context(), "alice", true)
	if err != nil {
		t.Fatal(err)
	}
	have := map[string]bool{}
	for _, r := range sn.records {
		have[r.Text] = true
	}
	if len(sn.records) != MaxRecords || !have["new one"] || !have["new two"] || have["fact 0"] || have["fact 1"] || !have["fact 2"] {
		t.Errorf("after adding two to a full memory: %d records, new %v %v, oldest %v %v, third %v",
			len(sn.records), have["new one"], have["new two"], have["fact 0"], have["fact 1"], have["fact 2"])
	}
}

// TestApplyUnderItsReads: a consolidation from a read that another
// changed since is errRace, and writes nothing; one of a commit learned
// from already, or that a forget reached, writes nothing and succeeds.
func TestApplyUnderItsReads(t *testing.T) {
	clock := newClock(time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC))
	s, client := newStore(t, clock)
	put(t, s, "alice", 1, func(int) string { return "The person lives in Lyon." })
	stale, _ := s.read(t.Context(), "alice", true)
	id := stale.records[0].ID
	clock.Advance(time.Second)
	c1 := Commit{Owner: "alice", SessionID: "s1", Version: 2, At: clock.Now()}
	if err := s.apply(t.Context(), stale, c1, []Op{{ID: id, Text: "The person lives in Paris."}}); err != nil {
		t.Fatal(err)
	}
	c2 := Commit{Owner: "alice", SessionID: "s2", Version: 1, At: clock.Now()}
	if err := s.apply(t.Context(), stale, c2, []Op{{ID: id, Text: "The person lives in Nice."}, {Kind: "fact", Text: "The person has a cat."}}); !errors.Is(err, errRace) {
		t.Fatalf("a consolidation from a stale read: %v, want errRace", err)
	}
	fresh, _ := s.read(t.Context(), "alice", true)
	if len(fresh.records) != 1 || fresh.records[0].Text != "The person lives in Paris." {
		t.Fatalf("after the lost race: %+v", fresh.records)
	}
	// c1 again, as a retried stream record would bring it.
	if err := s.apply(t.Context(), fresh, c1, []Op{{Kind: "fact", Text: "A duplicate."}}); err != nil {
		t.Fatalf("a commit learned from already: %v", err)
	}
	if done, err := s.learned(t.Context(), c1); err != nil || !done {
		t.Errorf("learned(c1) = %v, %v", done, err)
	}
	// A forget reaches c2's commit: it writes nothing.
	if err := s.Forget(t.Context(), "alice"); err != nil {
		t.Fatal(err)
	}
	if err := s.apply(t.Context(), fresh, c2, []Op{{Kind: "fact", Text: "After the forget."}}); !errors.Is(err, errRace) {
		t.Fatalf("a consolidation read before a forget: %v, want errRace", err)
	}
	after, _ := s.read(t.Context(), "alice", true)
	if err := s.apply(t.Context(), after, c2, []Op{{Kind: "fact", Text: "After the forget."}}); err != nil {
		t.Fatal(err)
	}
	out, err := client.Query(t.Context(), &dynamodb.QueryInput{
		TableName:                 aws.String("sessions"),
		KeyConditionExpression:    aws.String("pk = :pk"),
		ExpressionAttributeValues: item{":pk": str(partition("alice"))},
		ConsistentRead:            aws.Bool(true),
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(out.Items) != 1 || getS(out.Items[0], ddbhistory.SortKey) != skMarker || out.Items[0][attrText] != nil {
		raw, _ := json.Marshal(out.Items)
		t.Errorf("after a forget, the partition holds %s, want the marker alone", raw)
	}
}

// TestExpiredRecordsAreGone: a record past its TTL, which DynamoDB deletes
// late, is neither listed nor recalled.
func TestExpiredRecordsAreGone(t *testing.T) {
	clock := newClock(time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC))
	s, _ := newStore(t, clock)
	s.cfg.TTL = time.Hour
	put(t, s, "alice", 1, func(int) string { return "The person's favourite colour is teal." })
	if got, _ := s.Recall(t.Context(), "alice", "favourite colour"); len(got) != 1 {
		t.Fatalf("recall before the TTL: %+v", got)
	}
	clock.Advance(2 * time.Hour)
	page, err := s.List(t.Context(), "alice", "", 10)
	if err != nil || len(page.Records) != 0 {
		t.Errorf("list past the TTL: %+v %v", page, err)
	}
	if got, _ := s.Recall(context.Background(), "alice", "favourite colour"); len(got) != 0 {
		t.Errorf("recall past the TTL: %+v", got)
	}
}

// TestParseOpsRefusesWhatIsMalformed: the model's operations are outside
// content; only well-formed ones, within the limits, are kept.
func TestParseOpsRefusesWhatIsMalformed(t *testing.T) {
	kinds := DefaultKinds
	conv := []Line{{Index: 4, Role: "user", Text: "hi"}, {Index: 5, Role: "assistant", Text: "hello"}}
	many := make([]map[string]any, 0, 100)
	for range 100 {
		many = append(many, map[string]any{"action": "add", "kind": "fact", "text": "x"})
	}
	for _, c := range []struct {
		name  string
		input any
		want  int
	}{
		{"an add", map[string]any{"operations": []any{map[string]any{"action": "add", "kind": "fact", "text": "ok", "message": 5}}}, 1},
		{"an unknown kind", map[string]any{"operations": []any{map[string]any{"action": "add", "kind": "secret", "text": "ok"}}}, 0},
		{"no kind", map[string]any{"operations": []any{map[string]any{"action": "add", "text": "ok"}}}, 0},
		{"text past the limit", map[string]any{"operations": []any{map[string]any{"action": "add", "kind": "fact", "text": strings.Repeat("x", MaxTextBytes+1)}}}, 0},
		{"empty text", map[string]any{"operations": []any{map[string]any{"action": "add", "kind": "fact", "text": "  "}}}, 0},
		{"an update without an id", map[string]any{"operations": []any{map[string]any{"action": "update", "text": "ok"}}}, 0},
		{"a malformed id", map[string]any{"operations": []any{map[string]any{"action": "delete", "id": "mem#bob"}}}, 0},
		{"an unknown action", map[string]any{"operations": []any{map[string]any{"action": "drop", "id": "abcdefghij"}}}, 0},
		{"more than are read", map[string]any{"operations": append(many, many...)}, maxParsed},
		{"not an object", []any{1, 2}, 0},
	} {
		raw, _ := json.Marshal(c.input)
		got := parseOps(raw, kinds, conv)
		if len(got) != c.want {
			t.Errorf("%s: %d ops, want %d: %+v", c.name, len(got), c.want, got)
		}
		for _, op := range got {
			if op.Message != 4 && op.Message != 5 {
				t.Errorf("%s: message %d, outside the conversation", c.name, op.Message)
			}
		}
	}
}

// TestWords: the terms a question and a fact share are found through
// case, punctuation, plurals and function words.
func TestWords(t *testing.T) {
	q := words("What's my favourite COLOUR?")
	f := words("The person's favourite colours are teal and navy.")
	shared := 0
	for _, w := range q {
		for _, x := range f {
			if w == x {
				shared++
			}
		}
	}
	if shared != 2 {
		t.Errorf("the question %q and the fact %q share %d terms, want 2 (favourite, colour)", q, f, shared)
	}
}

// TestProvideFitsTheRoom: what a turn is given of memory fits the room the
// caller's context leaves, escaping included; with no room, nothing.
func TestProvideFitsTheRoom(t *testing.T) {
	s, _ := newStore(t, newClock(time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)))
	put(t, s, "alice", 20, func(i int) string { return fmt.Sprintf(`The person's "colour" number %d is teal \ navy.`, i) })
	p := &Provider{Store: s}
	input := []agent.ContentBlock{{Text: "What colour?"}}
	for _, room := range []int{agent.MaxContextBytes, 600, 400, 10} {
		got, err := p.Provide(t.Context(), turn.Provision{Owner: "alice", Input: input, Room: room})
		if err != nil {
			t.Fatal(err)
		}
		size := 0
		for _, e := range got {
			size += len(e.Description) + len(e.Value)
		}
		if size > room || (room >= 400 && len(got) != 1) || (room == 10 && len(got) != 0) {
			t.Errorf("with %d bytes of room: %d entries, %d bytes", room, len(got), size)
		}
	}
}

// TestHandleKeepsTimeToAnswer: a record that the invocation's time left
// cannot cover is reported failed, with the rest, rather than started:
// the mapping delivers it again.
func TestHandleKeepsTimeToAnswer(t *testing.T) {
	x := &Extractor{Logger: slog.New(slog.DiscardHandler)}
	ev := events.DynamoDBEvent{Records: []events.DynamoDBEventRecord{
		{EventName: "REMOVE", Change: events.DynamoDBStreamRecord{SequenceNumber: "1"}},
		{EventName: "REMOVE", Change: events.DynamoDBStreamRecord{SequenceNumber: "2"}},
	}}
	ctx, cancel := context.WithTimeout(t.Context(), deadlineMargin/2)
	defer cancel()
	resp, err := x.Handle(ctx, ev)
	if err != nil || len(resp.BatchItemFailures) != 1 || resp.BatchItemFailures[0].ItemIdentifier != "1" {
		t.Errorf("near the deadline: %+v, %v", resp, err)
	}
	ctx, cancel = context.WithTimeout(t.Context(), 2*deadlineMargin)
	defer cancel()
	if resp, err := x.Handle(ctx, ev); err != nil || len(resp.BatchItemFailures) != 0 {
		t.Errorf("with time to spare: %+v, %v", resp, err)
	}
}

// TestUnknownIDsTakeNoPlace: operations on ids that are not the owner's
// are left out before the limit is counted, so a hostile answer cannot
// crowd out what the turn taught.
func TestUnknownIDsTakeNoPlace(t *testing.T) {
	clock := newClock(time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC))
	s, _ := newStore(t, clock)
	var ops []Op
	for i := range 10 {
		ops = append(ops, Op{ID: fmt.Sprintf("zzzzzzzz%02d", i)[:10], Text: "taken over"}, Op{ID: fmt.Sprintf("yyyyyyyy%02d", i)[:10], Delete: true})
	}
	for i := range maxOps + 5 {
		ops = append(ops, Op{Kind: "fact", Text: fmt.Sprintf("fact %d", i)})
	}
	sn, _ := s.read(t.Context(), "alice", true)
	if err := s.apply(t.Context(), sn, Commit{Owner: "alice", SessionID: "s1", Version: 1, At: clock.Now()}, ops); err != nil {
		t.Fatal(err)
	}
	sn, _ = s.read(t.Context(), "alice", true)
	if len(sn.records) != maxOps {
		t.Errorf("%d records learned, want %d", len(sn.records), maxOps)
	}
}
