package turn_test

import (
	"testing"

	"github.com/lambda-agent/lambda-agent/internal/turn"
	"github.com/lambda-agent/lambda-agent/internal/turn/storetest"
)

// TestFakeStoreConformance holds the fake that the service's tests run on
// to the contract of turn.Store that *ddbhistory.Store is held to.
func TestFakeStoreConformance(t *testing.T) {
	storetest.Run(t, func(*testing.T) turn.Store { return newFakeStore() })
}
