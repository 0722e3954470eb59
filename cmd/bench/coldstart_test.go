package main

import (
	"strings"
	"testing"
	"time"
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
