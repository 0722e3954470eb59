package ddbhistory_test

import (
	"testing"
	"time"

	"github.com/lambda-agent/lambda-agent/internal/ddbhistory"
	"github.com/lambda-agent/lambda-agent/internal/testkit"
	// turn names a helper of these tests.
	turnsvc "github.com/lambda-agent/lambda-agent/internal/turn"
	"github.com/lambda-agent/lambda-agent/internal/turn/storetest"
)

// TestStoreConformance holds the store to the contract of turn.Store, on
// every backend: the suite that the turn service's fake is held to too.
func TestStoreConformance(t *testing.T) {
	runBackends(t, func(t *testing.T, b backend) {
		storetest.Run(t, func(t *testing.T) turnsvc.Store {
			// A clock that moves on with every reading, so that sessions
			// created one after the other have creation times in that
			// order, as List needs.
			clock := testkit.NewClock(time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC))
			tick := func() time.Time {
				clock.Advance(time.Millisecond)
				return clock.Now()
			}
			return newEnv(t, b, ddbhistory.Config{Now: tick}).store
		})
	})
}
