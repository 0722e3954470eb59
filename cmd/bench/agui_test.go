package main

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// TestAGUISection runs the AG-UI section on the stand-ins, two requests of
// each kind. The section fails unless every request is answered in full,
// so this also holds that the whole-thread client's threads, built from
// the ids the events gave, are the ones the server holds. Each kind of
// request has its row on each thread, with counts that are counts: the
// allocations less DynamoDB's did not wrap around.
func TestAGUISection(t *testing.T) {
	if testing.Short() {
		t.Skip("builds threads of 20 and 200 messages by AG-UI runs")
	}
	var b strings.Builder
	if err := aguiOverhead(t.Context(), config{warmTurns: 2}, &b); err != nil {
		t.Fatal(err)
	}
	got := b.String()
	for _, n := range aguiThreads {
		for _, r := range requestShapes {
			row := regexp.MustCompile(`(?m)^\| ` + regexp.QuoteMeta(r.name) + fmt.Sprintf(` \| %d \| [0-9.]+ ms \| -?[0-9.]+ ms \| (\d+) \| (\d+) KB \| (\d+) B \| (\d+) B \|`, n))
			m := row.FindStringSubmatch(got)
			if m == nil {
				t.Errorf("no row for %s on %d messages:\n%s", r.name, n, got)
				continue
			}
			for i, what := range []string{"allocations", "KB allocated", "request bytes", "response bytes"} {
				if v, _ := strconv.ParseUint(m[i+1], 10, 64); v == 0 || v > 100_000_000 {
					t.Errorf("%s on %d messages: %d %s", r.name, n, v, what)
				}
			}
			if !r.agui {
				continue
			}
			ratios := regexp.MustCompile(`(?m)^\| ` + regexp.QuoteMeta(strings.TrimPrefix(r.name, "AG-UI, ")) + fmt.Sprintf(` \| %d \| [0-9.]+× \|`, n))
			if !ratios.MatchString(got) {
				t.Errorf("no ratios for %s on %d messages:\n%s", r.name, n, got)
			}
		}
	}
	if !strings.Contains(got, "An AG-UI run's wall time, against our own stream with a key: **") {
		t.Errorf("no summary:\n%s", got)
	}
}

// TestAGUIHeadline: the summary gives each client's wall time against our
// stream with a key, on the shortest and longest threads, the new-message
// client's against our stream without one, and what the whole thread
// costs in bytes sent and DynamoDB.
func TestAGUIHeadline(t *testing.T) {
	short, long := aguiThreads[0], aguiThreads[len(aguiThreads)-1]
	at := func(plain, keyed, fresh, whole time.Duration) []runStats {
		return []runStats{
			{wall: plain, request: 58, requests: 2, rcu: 2},
			{wall: keyed, request: 58, requests: 4, rcu: 3},
			{wall: fresh, request: 231, requests: 4, rcu: 3},
			{wall: whole, request: 61667, requests: 6, rcu: 18},
		}
	}
	stats := map[int][]runStats{
		short: at(10*time.Millisecond, 11*time.Millisecond, 11*time.Millisecond, 22*time.Millisecond),
		long:  at(10*time.Millisecond, 12*time.Millisecond, 12*time.Millisecond, 36*time.Millisecond),
	}
	got := aguiHeadline(stats)
	for _, want := range []string{
		fmt.Sprintf("**1.00×** for the new-message client and **2.00×** for the whole-thread client on %d messages; **1.00×** and **3.00×** on %d.", short, long),
		fmt.Sprintf("the new-message client is **1.10×** on %d messages", short),
		"sends 61667 B against the new-message client's 231 B, and its run makes 6.0 DynamoDB requests and reads 18.0 RCU, against 4.0 and 3.0.",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("the summary lacks %q:\n%s", want, got)
		}
	}
}

// TestAssistantMessages: a client keeps the assistant's messages under the
// ids the events gave them, whatever other events come (a run may begin
// with a STATE_SNAPSHOT); a run that fails or stops short is an error.
func TestAssistantMessages(t *testing.T) {
	stream := func(events ...string) []byte {
		var b strings.Builder
		for _, e := range events {
			b.WriteString("data: " + e + "\n\n")
		}
		return []byte(b.String())
	}
	started := `{"type":"RUN_STARTED","threadId":"t","runId":"r"}`
	finished := `{"type":"RUN_FINISHED","threadId":"t","runId":"r","outcome":{"type":"success"}}`
	tests := []struct {
		name    string
		stream  []byte
		want    []aguiMessage
		wantErr string
	}{
		{"a run", stream(`{"type":"STATE_SNAPSHOT","snapshot":{}}`, started,
			`{"type":"TEXT_MESSAGE_START","messageId":"m-1","role":"assistant"}`,
			`{"type":"TEXT_MESSAGE_CONTENT","messageId":"m-1","delta":"Hel"}`,
			`{"type":"TEXT_MESSAGE_CONTENT","messageId":"m-1","delta":"lo"}`,
			`{"type":"TEXT_MESSAGE_END","messageId":"m-1"}`,
			`{"type":"STATE_SNAPSHOT","snapshot":{}}`, finished),
			[]aguiMessage{{ID: "m-1", Role: "assistant", Content: "Hello"}}, ""},
		{"two messages", stream(started,
			`{"type":"TEXT_MESSAGE_START","messageId":"m-1","role":"assistant"}`,
			`{"type":"TEXT_MESSAGE_CONTENT","messageId":"m-1","delta":"a"}`,
			`{"type":"TEXT_MESSAGE_END","messageId":"m-1"}`,
			`{"type":"TEXT_MESSAGE_START","messageId":"m-3","role":"assistant"}`,
			`{"type":"TEXT_MESSAGE_CONTENT","messageId":"m-3","delta":"b"}`,
			`{"type":"TEXT_MESSAGE_END","messageId":"m-3"}`, finished),
			[]aguiMessage{{ID: "m-1", Role: "assistant", Content: "a"}, {ID: "m-3", Role: "assistant", Content: "b"}}, ""},
		{"an error", stream(started, `{"type":"RUN_ERROR","code":"conflict","message":"raced"}`), nil, "RUN_ERROR conflict: raced"},
		{"cut short", stream(started, `{"type":"TEXT_MESSAGE_START","messageId":"m-1","role":"assistant"}`), nil, "without RUN_FINISHED"},
		{"content of no message", stream(started, `{"type":"TEXT_MESSAGE_CONTENT","messageId":"m-1","delta":"a"}`, finished), nil, "did not start"},
		{"not JSON", stream(started, `{`), nil, "not JSON"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := assistantMessages(tt.stream)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want one that says %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("messages (-want +got):\n%s", diff)
			}
		})
	}
}
