package ddbhistory

import (
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/lambda-agent/lambda-agent/internal/agent"
)

// TestMessageSetCurrent builds the message items a read can find beside a
// commit, a Query not being isolated from a transaction, and checks that
// the window refuses them (errUnseen, so that the read is made again) or,
// on a last attempt, starts after them; never that it mixes them in.
func TestMessageSetCurrent(t *testing.T) {
	now := time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC)
	// The session item as read: version 5, 6 messages, and, where set, a
	// rewind at version 4 to message 2.
	for _, tt := range []struct {
		name               string
		rewound, rewoundTo int
		// written is the version each message's items were written at.
		written []int64
		// stale lists the messages that are not current, and lastStart is
		// where the window of a last attempt starts.
		stale     []int
		lastStart int
	}{
		{"no rewind, all older than the session item", 0, 0, []int64{1, 1, 2, 3, 5, 5}, nil, 0},
		{"a message written after the session item", 0, 0, []int64{1, 1, 2, 6, 5, 5}, []int{3}, 4},
		{"the newest messages written after the session item", 0, 0, []int64{1, 1, 2, 3, 6, 6}, []int{4, 5}, 6},
		{"rewound, every message current", 4, 2, []int64{1, 1, 4, 4, 5, 5}, nil, 0},
		{"rewound, a message below the rewind written before it", 4, 2, []int64{1, 3, 4, 4, 5, 5}, nil, 0},
		{"rewound, a covered message written before it", 4, 2, []int64{1, 1, 3, 4, 5, 5}, []int{2}, 3},
		{"rewound, the newest messages written before it", 4, 2, []int64{1, 1, 4, 4, 3, 3}, []int{4, 5}, 6},
		{"rewound, a message written after the session item", 4, 2, []int64{1, 1, 4, 4, 5, 6}, []int{5}, 6},
	} {
		t.Run(tt.name, func(t *testing.T) {
			sess := &Session{Key: Key{Owner: "o", ID: "s"}, Version: 5, Count: len(tt.written), rewound: int64(tt.rewound), rewoundTo: tt.rewoundTo}
			pk := partitionKey(sess.Key)
			ms := newMessageSet(mainKeys)
			var want []agent.Message
			for i, v := range tt.written {
				m := agent.UserText(fmt.Sprintf("message %d at version %d", i, v))
				its, err := messageItems(pk, mainKeys, i, m, v, 0, now)
				if err != nil {
					t.Fatal(err)
				}
				ms.add(its, now)
				want = append(want, m)
			}
			for i := range tt.written {
				if got, wantCurrent := ms.current(i, sess), !slices.Contains(tt.stale, i); got != wantCurrent {
					t.Errorf("current(%d) = %v, want %v", i, got, wantCurrent)
				}
			}
			got, start, err := ms.window(0, sess, false)
			switch {
			case tt.stale == nil && (err != nil || start != 0 || !sameMessages(got, want)):
				t.Errorf("window: %d messages from %d, %v; want all %d", len(got), start, err, len(want))
			case tt.stale != nil && !errors.Is(err, errUnseen):
				t.Errorf("window: %d messages from %d, %v; want errUnseen", len(got), start, err)
			}
			// The last attempt keeps the current messages after the newest
			// stale one.
			got, start, err = ms.window(0, sess, true)
			if err != nil || start != tt.lastStart || !sameMessages(got, want[tt.lastStart:]) {
				t.Errorf("last attempt: %d messages from %d, %v; want %d from %d", len(got), start, err, len(want)-tt.lastStart, tt.lastStart)
			}
		})
	}
}

func sameMessages(a, b []agent.Message) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i].Text() != b[i].Text() || a[i].Role != b[i].Role {
			return false
		}
	}
	return true
}
