package main

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
)

// TestColdStartJudgedAgainstTheFloor: the headline is chat against the SDK
// floor, with what lambda-agent adds on top and the peak RSS against its
// target; echo is only the baseline, and no target is set against it.
func TestColdStartJudgedAgainstTheFloor(t *testing.T) {
	const mb = 1 << 20
	chat, floor, echo := 13720*time.Microsecond, 8790*time.Microsecond, 2920*time.Microsecond
	for _, tt := range []struct {
		name string
		rss  int64
		want []string
	}{
		{"within the RSS target", 183 * mb / 10, []string{
			"Ratio of medians, chat / SDK floor: **1.56×**: what lambda-agent adds on top of the floor is **4.93 ms**.",
			"Peak RSS: **18.3 MB** (target ≤ 40 MB: met).",
			"Echo is only the baseline",
			"The SDK floor alone is **3.01×** echo (chat: 4.70×)",
			"judged against the floor, not against echo",
		}},
		{"past the RSS target", 41 * mb, []string{"Peak RSS: **41.0 MB** (target ≤ 40 MB: **missed**)."}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got := coldStartHeadline(chat, floor, tt.rss) + coldStartBaseline(chat, floor, echo)
			for _, w := range tt.want {
				if !strings.Contains(got, w) {
					t.Errorf("the cold start's verdict lacks %q:\n%s", w, got)
				}
			}
			for _, stale := range []string{"chat / echo", "target ≤ 3"} {
				if strings.Contains(got, stale) {
					t.Errorf("the verdict still judges chat against echo (%q):\n%s", stale, got)
				}
			}
		})
	}
}

// TestStreamColdStart: the stream function's first turn is given against
// the SDK floor, with the AG-UI run's beside it; a build from before, when
// there is one, is judged with a target of +5%.
func TestStreamColdStart(t *testing.T) {
	stream, agui, floor := 16*time.Millisecond, 16800*time.Microsecond, 10*time.Millisecond
	for _, tt := range []struct {
		name   string
		before time.Duration
		want   []string
		absent string
	}{
		{"without a build from before", 0, []string{"first streamed turn takes **16.00 ms**, 1.60× the SDK floor; as an AG-UI run, whose `runId` is an idempotency key too, **16.80 ms** (+5.0%)."}, "Against the stream function built before"},
		{"within 5% of before", 15400 * time.Microsecond, []string{"built before, measured in turn with it: **+3.9%** (target ≤ +5%: met)."}, ""},
		{"faster than before", 17 * time.Millisecond, []string{"**-5.9%** (target ≤ +5%: met)."}, ""},
		{"past 5% of before", 15 * time.Millisecond, []string{"**+6.7%** (target ≤ +5%: **missed**)."}, ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got := streamColdStart(stream, agui, floor, tt.before)
			for _, w := range tt.want {
				if !strings.Contains(got, w) {
					t.Errorf("the stream function's verdict lacks %q:\n%s", w, got)
				}
			}
			if tt.absent != "" && strings.Contains(got, tt.absent) {
				t.Errorf("the verdict says %q with no build from before:\n%s", tt.absent, got)
			}
		})
	}
}

// TestColdEventsAnswered sends the cold start's first invocations to the
// functions' handlers on stand-ins, in process: each is answered as the
// cold start checks, the chat turn by the chat function, the streamed turn
// and the AG-UI run by the stream function.
func TestColdEventsAnswered(t *testing.T) {
	chat, streamed, run, err := coldEvents(0)
	if err != nil {
		t.Fatal(err)
	}
	s, err := newStack(t.Context(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	var api events.APIGatewayV2HTTPRequest
	if err := json.Unmarshal(chat, &api); err != nil {
		t.Fatal(err)
	}
	resp, err := s.fn(t.Context(), api)
	if err != nil {
		t.Fatal(err)
	}
	if out, _ := json.Marshal(resp); !bytes.Contains(out, []byte(chatAnswered)) {
		t.Errorf("the chat turn answered %s, which lacks %s", out, chatAnswered)
	}

	st, err := newStreamStack(t.Context(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	for _, tt := range []struct {
		name  string
		event []byte
		want  string
	}{
		{"the streamed turn", streamed, streamAnswered},
		{"the AG-UI run", run, runAnswered},
	} {
		var ev events.LambdaFunctionURLRequest
		if err := json.Unmarshal(tt.event, &ev); err != nil {
			t.Fatal(err)
		}
		var body bytes.Buffer
		status, err := st.serveURL(t.Context(), &ev, &body)
		if err != nil {
			t.Fatal(err)
		}
		if status != 200 || !strings.Contains(body.String(), tt.want) {
			t.Errorf("%s answered %d %s, which lacks %q", tt.name, status, body.String(), tt.want)
		}
	}
}
