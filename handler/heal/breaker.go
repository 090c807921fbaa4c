package heal

import (
	"context"
	"fmt"
	"time"
)

// record writes a run's figures, and what it replayed, into the Health
// record; closed closes the breaker (a run that succeeded). Best effort: a
// run that cannot write it has found storage failing, and the next one will.
func (h *Healer) record(ctx context.Context, f *Figures, replayed int64, closed bool) {
	ctx, cancel := recordContext(ctx)
	defer cancel()
	_, _ = updateHealth(ctx, h.states, func(hl *Health) {
		hl.LastRun, hl.Replayed = f, hl.Replayed+replayed
		if closed {
			hl.Breaker = Breaker{}
		}
	})
	if closed {
		h.mu.Lock()
		h.local = Breaker{}
		h.mu.Unlock()
	}
}

// recordTimeout bounds the write of a run's record, which happens even when
// the run's own deadline has passed (what it learnt is worth keeping).
const recordTimeout = 10 * time.Second

func recordContext(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.WithoutCancel(ctx), recordTimeout)
}

// trip records a failed run and opens the breaker, in the Health record
// (with the run's figures, when it has them); it returns why.
func (h *Healer) trip(ctx context.Context, why string, f *Figures) string {
	now := h.opts.Now()
	var b Breaker
	ctx, cancel := recordContext(ctx)
	defer cancel()
	_, err := updateHealth(ctx, h.states, func(hl *Health) {
		hl.Breaker.Failures++
		hl.Breaker.OpenUntil = now.Add(double(h.opts.BreakerBase, hl.Breaker.Failures, h.opts.BackoffMax))
		hl.Breaker.Why = why
		if f != nil {
			hl.LastRun = f
		}
		b = hl.Breaker
	})
	if err != nil {
		return h.tripLocal(why)
	}
	return fmt.Sprintf("%s; circuit breaker open until %s (%d failing run(s) in a row)", why, b.OpenUntil.UTC().Format(time.RFC3339), b.Failures)
}

// tripLocal opens this instance's breaker: storage cannot be read, so the
// shared one cannot be written.
func (h *Healer) tripLocal(why string) string {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.local.Failures++
	h.local.OpenUntil = h.opts.Now().Add(double(h.opts.BreakerBase, h.local.Failures, h.opts.BackoffMax))
	return fmt.Sprintf("%s; circuit breaker open until %s (%d failing run(s) in a row)", why, h.local.OpenUntil.UTC().Format(time.RFC3339), h.local.Failures)
}

// localOpen reports whether this instance's own breaker is open, and until
// when.
func (h *Healer) localOpen(now time.Time) (time.Time, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.local.OpenUntil, now.Before(h.local.OpenUntil)
}

func double(base time.Duration, n int, cap time.Duration) time.Duration {
	d := base
	for i := 1; i < n && d < cap; i++ {
		d *= 2
	}
	return min(d, cap)
}
