package runtimetest

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"
)

// Timing holds the instants of one invocation, taken by the emulator. A
// field is zero while, or if, the instant has not happened.
type Timing struct {
	// Queued is when the emulator accepted the event, after any earlier
	// invocation had finished.
	Queued time.Time
	// Fetched is when the emulator handed the event to the runtime's
	// GET /next. The function's time starts here.
	Fetched time.Time
	// Deadline is the deadline announced in Lambda-Runtime-Deadline-Ms:
	// Fetched plus the timeout, in whole milliseconds.
	Deadline time.Time
	// FirstByte is when the first byte of the response or error body
	// arrived; zero for an empty body or a failure without one.
	FirstByte time.Time
	// Completed is when the last byte of the response or error body
	// arrived, or when the emulator saw the invocation fail.
	Completed time.Time
}

// Invocation is one event sent to a [Function], from [Function.InvokeAsync].
// Its methods are safe for concurrent use.
//
// Once the runtime has fetched the event, the invocation runs to its end
// whatever happens to the context it was started with: until the function
// answers, its process dies, or its timeout plus [Config.TimeoutGrace]
// passes (then the process is killed). The next invocation of the Function
// waits for that end.
type Invocation struct {
	id      string
	event   []byte
	timeout time.Duration
	fetched chan struct{} // closed when the runtime has the event
	done    chan struct{} // closed when the result is set
	release func()        // frees the Function for the next invocation

	expired atomic.Bool // the watchdog fired: the result is a timeout

	mu       sync.Mutex
	timing   Timing
	timer    *time.Timer // the watchdog, once fetched
	answered bool        // a /response or /error for it is being read; guarded by the sandbox's mu
	finished bool
	resp     []byte
	err      error
}

func newInvocation(event []byte, timeout time.Duration, release func()) *Invocation {
	return &Invocation{
		id:      newRequestID(),
		event:   event,
		timeout: timeout,
		fetched: make(chan struct{}),
		done:    make(chan struct{}),
		release: release,
		timing:  Timing{Queued: time.Now()},
	}
}

// RequestID returns the invocation's request id, as the function sees it in
// Lambda-Runtime-Aws-Request-Id and lambdacontext.
func (inv *Invocation) RequestID() string {
	return inv.id
}

// Fetched returns a channel that is closed once the runtime has fetched the
// event, that is, once the handler may be running. It stays open if the
// invocation fails before that.
func (inv *Invocation) Fetched() <-chan struct{} {
	return inv.fetched
}

// Done returns a channel that is closed once the invocation has ended.
func (inv *Invocation) Done() <-chan struct{} {
	return inv.done
}

// Wait waits for the invocation to end and returns the response body, or
// the error: an [*InvokeError] if the function reported one, an
// [*ExitError] if its process died, an error wrapping [ErrTimeout], or the
// cause of ctx if the invocation was withdrawn before the runtime fetched
// it. If ctx ends first, Wait returns its cause and the invocation goes on.
func (inv *Invocation) Wait(ctx context.Context) ([]byte, error) {
	select {
	case <-inv.done:
	default: // a result that is there wins over an ended ctx
		select {
		case <-inv.done:
		case <-ctx.Done():
			return nil, fmt.Errorf("runtimetest: invoke %s: %w", inv.id, context.Cause(ctx))
		}
	}
	inv.mu.Lock()
	defer inv.mu.Unlock()
	return inv.resp, inv.err
}

// Timing returns the invocation's instants so far.
func (inv *Invocation) Timing() Timing {
	inv.mu.Lock()
	defer inv.mu.Unlock()
	return inv.timing
}

// markFetched records the hand-off to the runtime and arms the watchdog,
// which calls expire at the deadline plus grace.
func (inv *Invocation) markFetched(at, deadline time.Time, grace time.Duration, expire func()) {
	inv.mu.Lock()
	inv.timing.Fetched = at
	inv.timing.Deadline = deadline
	if !inv.finished {
		inv.timer = time.AfterFunc(time.Until(deadline)+grace, expire)
	}
	inv.mu.Unlock()
	close(inv.fetched)
}

// markFirstByte records the arrival of the first byte of the answer.
func (inv *Invocation) markFirstByte(at time.Time) {
	inv.mu.Lock()
	defer inv.mu.Unlock()
	if inv.timing.FirstByte.IsZero() {
		inv.timing.FirstByte = at
	}
}

// isFinished reports whether the result is set.
func (inv *Invocation) isFinished() bool {
	inv.mu.Lock()
	defer inv.mu.Unlock()
	return inv.finished
}

// finish sets the result, once: later calls do nothing and return false.
// A non-nil err is wrapped with the request id.
func (inv *Invocation) finish(resp []byte, err error, at time.Time) bool {
	inv.mu.Lock()
	if inv.finished {
		inv.mu.Unlock()
		return false
	}
	inv.finished = true
	inv.resp = resp
	if err != nil {
		inv.err = fmt.Errorf("runtimetest: invoke %s: %w", inv.id, err)
	}
	inv.timing.Completed = at
	if inv.timer != nil {
		inv.timer.Stop()
	}
	inv.mu.Unlock()
	close(inv.done)
	inv.release()
	return true
}

// timeoutError is the error of an invocation whose watchdog fired.
func (inv *Invocation) timeoutError() error {
	return fmt.Errorf("%w after %s", ErrTimeout, inv.timeout)
}
