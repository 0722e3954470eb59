package agent

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"
)

// RetryPolicy says how often and how patiently to retry a model call that
// failed with a retryable error (see ErrorKind.Retryable).
type RetryPolicy struct {
	// MaxAttempts counts the first call; 0 means DefaultMaxAttempts and 1
	// turns retries off.
	MaxAttempts int
	// BaseDelay is the cap of the first backoff; it doubles with each retry
	// up to MaxDelay. Each wait is drawn uniformly from zero to the cap ("full
	// jitter"), which spreads out clients that failed together.
	BaseDelay time.Duration
	MaxDelay  time.Duration
}

// Defaults for RetryPolicy.
const (
	DefaultMaxAttempts = 6
	DefaultBaseDelay   = 400 * time.Millisecond
	DefaultMaxDelay    = 10 * time.Second
)

// backoff returns the wait before retry number n (1 for the first retry).
func (p RetryPolicy) backoff(n int) time.Duration {
	base := cmp.Or(p.BaseDelay, DefaultBaseDelay)
	ceiling := cmp.Or(p.MaxDelay, DefaultMaxDelay)
	limit := base << min(n-1, 30)
	if limit <= 0 || limit > ceiling {
		limit = ceiling
	}
	return rand.N(limit + 1)
}

// Retrying wraps m so that retryable failures are tried again, with
// exponential backoff and full jitter, as long as the policy allows and the
// context's deadline leaves time: a retry that would end past the deadline,
// its wait plus a call as long as the last, is not made, and the last
// failure is returned instead. Failures
// that are not retryable, such as validation errors, access errors and a model
// that does not exist, are returned at once.
//
// The result streams when m does, and retries a stream only until its first
// piece was emitted.
func Retrying(m Model, p RetryPolicy) StreamingModel {
	return &retrying{model: m, policy: p}
}

type retrying struct {
	model  Model
	policy RetryPolicy
}

func (r *retrying) Converse(ctx context.Context, req *ModelRequest) (*ModelResponse, error) {
	return r.retry(ctx, func() (*ModelResponse, error) { return r.model.Converse(ctx, req) }, nil)
}

// retry makes call until it succeeds, fails for good, or the policy or the
// deadline leaves no more tries. mayRetry, if set, is asked before each
// retry; a failure it refuses to retry is returned wrapped in
// ErrStreamInterrupted.
func (r *retrying) retry(ctx context.Context, call func() (*ModelResponse, error), mayRetry func() bool) (*ModelResponse, error) {
	attempts := cmp.Or(r.policy.MaxAttempts, DefaultMaxAttempts)
	for n := 1; ; n++ {
		start := time.Now()
		resp, err := call()
		took := time.Since(start)
		var me *ModelError
		if err == nil || !errors.As(err, &me) || !me.Kind.Retryable() {
			return resp, err
		}
		if mayRetry != nil && !mayRetry() {
			return nil, streamInterrupted(err)
		}
		if n >= attempts {
			return nil, fmt.Errorf("gave up after %d attempts: %w", n, err)
		}
		// A retry must fit before the deadline: its wait, and a call as
		// long as the one that just failed.
		wait := r.policy.backoff(n)
		if d, ok := ctx.Deadline(); ok && time.Until(d) < wait+took {
			return nil, fmt.Errorf("no time left to retry after %d attempts: %w", n, err)
		}
		if observe, ok := ctx.Value(retryObserverKey{}).(func(*ModelRetryEvent)); ok {
			observe(&ModelRetryEvent{Attempt: n, Err: me, Wait: wait})
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, ctx.Err()
		case <-t.C:
		}
	}
}

// retryObserverKey keys the function a turn observes its model calls'
// retries with: the retrying model is the agent's, shared by every turn,
// while what it reports belongs to the turn whose call it retries.
type retryObserverKey struct{}
