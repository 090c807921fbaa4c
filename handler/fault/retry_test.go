package fault_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/convoy-dev/convoy/handler/fault"
)

func TestRetryPolicy(t *testing.T) {
	p := fault.RetryPolicy{MaxElapsed: 300 * time.Millisecond, Initial: time.Millisecond, Max: 10 * time.Millisecond}
	calls := 0
	err := p.Do(context.Background(), func(context.Context) error {
		calls++
		if calls < 3 {
			return fault.Errorf(fault.Unavailable, "flaky")
		}
		return nil
	})
	if err != nil || calls != 3 {
		t.Fatalf("transient failures: %v after %d calls, want success on the third", err, calls)
	}
	calls = 0
	err = p.Do(context.Background(), func(context.Context) error { calls++; return fault.Errorf(fault.Invalid, "bad") })
	if fault.CodeOf(err) != fault.Invalid || calls != 1 {
		t.Fatalf("a permanent failure: %v after %d calls, want it at once", err, calls)
	}
	calls = 0
	err = fault.RetryPolicy{MaxAttempts: 1}.Do(context.Background(), func(context.Context) error {
		calls++
		return fault.Errorf(fault.Unavailable, "down")
	})
	if err == nil || calls != 1 {
		t.Fatalf("MaxAttempts 1: %v after %d calls, want one call", err, calls)
	}
	// An attempt that would outlast the budget (an SDK retrying inside it) is cut at the deadline.
	start := time.Now()
	err = p.Do(context.Background(), func(ctx context.Context) error {
		select {
		case <-ctx.Done():
			return fault.Wrap(fault.Unavailable, ctx.Err(), "slow dependency")
		case <-time.After(10 * time.Second):
			return errors.New("the attempt was not cut")
		}
	})
	if !errors.Is(err, context.DeadlineExceeded) || time.Since(start) > 2*time.Second {
		t.Fatalf("slow attempt: %v after %s", err, time.Since(start))
	}
}

// fakeClock advances only when slept on, and records the waits.
type fakeClock struct {
	now   time.Time
	waits []time.Duration
}

func (c *fakeClock) Now() time.Time { return c.now }
func (c *fakeClock) Sleep(_ context.Context, d time.Duration) error {
	c.waits = append(c.waits, d)
	c.now = c.now.Add(d)
	return nil
}

// TestRetryPolicyOnAnInjectedClock: with a Clock and a Jitter, the waits and
// the budget are the clock's: the same inputs give the same waits, and the
// retries stop when the clock, not the wall clock, has spent the budget.
func TestRetryPolicyOnAnInjectedClock(t *testing.T) {
	run := func() ([]time.Duration, int) {
		c := &fakeClock{now: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
		p := fault.RetryPolicy{MaxElapsed: time.Minute, Initial: 4 * time.Second, Max: 16 * time.Second, Clock: c,
			Jitter: func(n int64) int64 { return n - 1 }} // the longest wait: the backoff itself
		calls := 0
		err := p.Do(context.Background(), func(ctx context.Context) error {
			if _, ok := ctx.Deadline(); ok {
				t.Error("an injected clock's attempts carry a wall-clock deadline")
			}
			calls++
			return fault.Errorf(fault.Unavailable, "down")
		})
		if err == nil {
			t.Fatal("every attempt failed, Do succeeded")
		}
		return c.waits, calls
	}
	waits, calls := run()
	// 4 + 8 + 16 + 16 + 16 = 60 s, the whole budget; a sixth wait would end past it.
	want := []time.Duration{4 * time.Second, 8 * time.Second, 16 * time.Second, 16 * time.Second, 16 * time.Second}
	if len(waits) != len(want) || calls != len(want)+1 {
		t.Fatalf("waits %v over %d calls, want %v over %d", waits, calls, want, len(want)+1)
	}
	for i := range want {
		if waits[i] != want[i] {
			t.Fatalf("waits %v, want %v", waits, want)
		}
	}
	if again, _ := run(); len(again) != len(waits) {
		t.Fatalf("the same inputs waited %v, then %v", waits, again)
	}
}
