package streamtest_test

import (
	"testing"

	"github.com/aws/aws-lambda-go/events"
	"github.com/lambda-agent/lambda-agent/internal/memory"
	"github.com/lambda-agent/lambda-agent/internal/testkit/streamtest"
)

func record(name, pk, sk string) events.DynamoDBEventRecord {
	keys := map[string]events.DynamoDBAttributeValue{"pk": events.NewStringAttribute(pk), "sk": events.NewStringAttribute(sk)}
	return events.DynamoDBEventRecord{EventName: name, Change: events.DynamoDBStreamRecord{Keys: keys, NewImage: keys, SequenceNumber: "1"}}
}

// TestMemoryFilter: the memory function's filter passes the INSERT and
// MODIFY records of session items, and nothing else the table writes.
func TestMemoryFilter(t *testing.T) {
	for _, c := range []struct {
		name string
		rec  events.DynamoDBEventRecord
		want bool
	}{
		{"a session's first commit", record("INSERT", "s#alice#s1", "meta"), true},
		{"a later commit", record("MODIFY", "s#alice#s1", "meta"), true},
		{"an owner with # in it", record("MODIFY", "s#a#b#s1", "meta"), true},
		{"the session item's removal", record("REMOVE", "s#alice#s1", "meta"), false},
		{"a message", record("INSERT", "s#alice#s1", "m#0000000001"), false},
		{"a message rewritten", record("MODIFY", "s#alice#s1", "m#0000000001"), false},
		{"a sub-agent's conversation", record("MODIFY", "s#alice#s1", "a#research#meta"), false},
		{"a claim", record("INSERT", "id#s1", "claim"), false},
		{"an idempotency record", record("INSERT", "i#abc", "key"), false},
		{"a memory record", record("INSERT", "mem#alice", "r#abcdefghij"), false},
		{"a forget marker", record("MODIFY", "mem#alice", "f"), false},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, err := streamtest.Match(memory.StreamFilter, c.rec)
			if err != nil {
				t.Fatal(err)
			}
			if got != c.want {
				t.Errorf("Match = %v, want %v", got, c.want)
			}
		})
	}
}

// TestMatchOperators checks the evaluator against Lambda's documented
// filter rules, on plain JSON events.
func TestMatchOperators(t *testing.T) {
	ev := map[string]any{"a": "apple", "n": 5, "list": []any{"x", "y"}, "obj": map[string]any{"s": "hello"}}
	for _, c := range []struct {
		pattern string
		want    bool
	}{
		{`{"a":["apple"]}`, true},
		{`{"a":["pear","apple"]}`, true},
		{`{"a":["pear"]}`, false},
		{`{"a":[{"prefix":"ap"}]}`, true},
		{`{"a":[{"prefix":"pp"}]}`, false},
		{`{"a":[{"suffix":"le"}]}`, true},
		{`{"a":[{"equals-ignore-case":"APPLE"}]}`, true},
		{`{"a":[{"anything-but":["apple"]}]}`, false},
		{`{"a":[{"anything-but":["pear"]}]}`, true},
		{`{"a":[{"anything-but":{"prefix":"app"}}]}`, false},
		{`{"missing":[{"exists":false}]}`, true},
		{`{"missing":[{"exists":true}]}`, false},
		{`{"a":[{"exists":true}]}`, true},
		{`{"missing":["x"]}`, false},
		{`{"n":[{"numeric":[">",4,"<=",5]}]}`, true},
		{`{"n":[{"numeric":[">",5]}]}`, false},
		{`{"list":["y"]}`, true},
		{`{"list":["z"]}`, false},
		{`{"obj":{"s":[{"prefix":"he"}]}}`, true},
		{`{"obj":{"s":["bye"]}}`, false},
		{`{"a":{"s":["x"]}}`, false},
		{`{"a":["apple"],"n":[6]}`, false},
	} {
		got, err := streamtest.Match(c.pattern, ev)
		if err != nil {
			t.Errorf("%s: %v", c.pattern, err)
			continue
		}
		if got != c.want {
			t.Errorf("%s: Match = %v, want %v", c.pattern, got, c.want)
		}
	}
	for _, bad := range []string{`{"a":"apple"}`, `{"a":[{"wildcard":"a*"}]}`, `{"a":[{"prefix":1}]}`, `{"n":[{"numeric":[">"]}]}`, `not json`} {
		if _, err := streamtest.Match(bad, ev); err == nil {
			t.Errorf("%s: no error", bad)
		}
	}
}
