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
