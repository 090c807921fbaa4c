package fault

import (
	"context"
	"math/rand/v2"
	"time"
)

// RetryPolicy bounds the retries of transient failures inside one invocation.
// The Functions host redelivers a failed Service Bus message at once, with no
// backoff, so a brief outage would burn through MaxDeliveryCount in seconds;
// retrying here, with backoff, rides it out. Its zero value is usable.
type RetryPolicy struct {
	MaxElapsed  time.Duration // total budget; default 20s (well under the lock duration and functionTimeout)
	MaxAttempts int           // attempts at most; 0 for as many as the budget allows, 1 for no retry
	Initial     time.Duration // first backoff; default 100ms
	Max         time.Duration // backoff cap; default 2s
	// Clock, if set, replaces the wall clock: the budget is judged by its
	// Now and the backoffs wait in its Sleep, and no wall-clock deadline is
	// put on the attempts (ctx's own deadline still holds). A simulation
	// sets it, with Jitter, so that a seed replays the same under any load.
	Clock Clock
	// Jitter returns a number in [0, n); default the global random source.
	Jitter func(n int64) int64
}

// Clock is a source of time that a RetryPolicy reads and waits on.
type Clock interface {
	Now() time.Time
	// Sleep waits d, or until ctx ends (then it returns ctx's error).
	Sleep(ctx context.Context, d time.Duration) error
}

// DefaultRetryBudget is RetryPolicy.MaxElapsed's default (the app setting
// TransientRetrySeconds defaults to it).
const DefaultRetryBudget = 20 * time.Second

func (p RetryPolicy) withDefaults() RetryPolicy {
	if p.MaxElapsed <= 0 {
		p.MaxElapsed = DefaultRetryBudget
	}
	if p.Initial <= 0 {
		p.Initial = 100 * time.Millisecond
	}
	if p.Max <= 0 {
		p.Max = 2 * time.Second
	}
	return p
}

// Do calls fn until it succeeds, fails with a non-transient error, the budget is
// spent or ctx ends. It returns fn's last error. The attempts themselves run
// under the budget's deadline, so that an SDK's own retries inside one attempt
// cannot stretch the invocation past it.
func (p RetryPolicy) Do(ctx context.Context, fn func(ctx context.Context) error) error {
	p = p.withDefaults()
	clock, jitter := p.Clock, p.Jitter
	if clock == nil {
		clock = wallClock{}
	}
	if jitter == nil {
		jitter = rand.Int64N
	}
	deadline := clock.Now().Add(p.MaxElapsed)
	if p.Clock == nil {
		var cancel context.CancelFunc
		ctx, cancel = context.WithDeadline(ctx, deadline)
		defer cancel()
	}
	backoff := p.Initial
	for attempt := 1; ; attempt++ {
		err := fn(ctx)
		if err == nil || !IsTransient(err) || attempt == p.MaxAttempts {
			return err
		}
		// Full jitter keeps two instances that raced once from racing again in step.
		wait := time.Duration(jitter(int64(backoff)) + 1)
		if clock.Now().Add(wait).After(deadline) {
			return err
		}
		if clock.Sleep(ctx, wait) != nil {
			return err
		}
		backoff = min(2*backoff, p.Max)
	}
}

// wallClock is the Clock of a RetryPolicy that sets none.
type wallClock struct{}

func (wallClock) Now() time.Time { return time.Now() }

func (wallClock) Sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
