package testkit

import (
	"sync"
	"time"
)

// Clock is a settable time for tests of expiry, safe for concurrent use:
// pass its Now where code takes a clock.
type Clock struct {
	mu sync.Mutex
	t  time.Time
}

// NewClock returns a Clock at t.
func NewClock(t time.Time) *Clock { return &Clock{t: t} }

// Now returns the clock's time.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

// Advance moves the clock on by d.
func (c *Clock) Advance(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}
