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
	deadline := time.Now().Add(p.MaxElapsed)
	ctx, cancel := context.WithDeadline(ctx, deadline)
	defer cancel()
	backoff := p.Initial
	for attempt := 1; ; attempt++ {
		err := fn(ctx)
		if err == nil || !IsTransient(err) || attempt == p.MaxAttempts {
			return err
		}
		// Full jitter keeps two instances that raced once from racing again in step.
		wait := time.Duration(rand.Int64N(int64(backoff)) + 1)
		if time.Now().Add(wait).After(deadline) {
			return err
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(wait):
		}
		backoff = min(2*backoff, p.Max)
	}
}
