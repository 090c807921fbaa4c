package heal

import (
	"context"
	"fmt"
	"time"
)

// record writes a run's figures, and what it replayed, into the Health
// record; closes, when not nil, is the breaker the run read at its start,
// which it closes (a run that succeeded). A write that fails is told
// (writeRecord), and the next run tries again.
//
// Runs overlap (two instances; a slow run and the next firing), and each
// writes the record as it stands (under its ETag): what another run wrote
// since this one read it is kept where it is newer (Figures.over), and a
// close clears only the trip the run saw, not one recorded since.
func (h *Healer) record(ctx context.Context, r *Run, f *Figures, replayed int64, closes *Breaker) {
	ctx, cancel := recordContext(ctx)
	defer cancel()
	_ = h.writeRecord(ctx, r, func(hl *Health) {
		hl.LastRun, hl.Replayed = f.over(hl.LastRun), hl.Replayed+replayed
		if closes != nil && hl.Breaker.Trips == closes.Trips {
			hl.Breaker = Breaker{Trips: hl.Breaker.Trips}
		}
	})
	if closes != nil {
		h.mu.Lock()
		h.local = Breaker{}
		h.mu.Unlock()
	}
	h.addTrend(ctx, f, f.At)
}

// writeRecord applies change to the Health record (updateHealth). A write
// that fails would otherwise leave the record, the summary and the surveys'
// cursors as they were, run after run, with nothing to say so (issue 42):
// it is told in the run (Run.Unrecorded, a line of its own) and its summary,
// and, since when, in the record as it stands (Health.Unwritten: small and
// bounded, it can be written where the whole record could not, and every
// instance's summary shows it). When storage refuses that too, this
// instance's memory keeps the since (the timer's runs mostly land on the
// same instance, docs/host-contract.md; another starts it again).
func (h *Healer) writeRecord(ctx context.Context, r *Run, change func(*Health)) error {
	_, err := updateHealth(ctx, h.states, func(hl *Health) {
		change(hl)
		hl.Unwritten = nil
	})
	if err == nil {
		h.mu.Lock()
		h.unwritten = nil
		h.mu.Unlock()
		if r.Summary != nil {
			r.Summary.RecordFailingSince, r.Summary.RecordFailingWhy = "", ""
		}
		return nil
	}
	u := h.recordFailure(ctx, err)
	r.Unrecorded = fmt.Sprintf("the run's figures could not be written into the auto-replay record (since %s): %s", u.Since.UTC().Format(time.RFC3339), u.Why)
	if r.Summary != nil {
		r.Summary.RecordFailingSince, r.Summary.RecordFailingWhy = u.Since.UTC().Format(time.RFC3339), u.Why
	}
	return err
}

// recordFailure keeps since when the record could not be written, and why:
// in the record as it stands when it can be, and in this instance's memory.
func (h *Healer) recordFailure(ctx context.Context, err error) Unwritten {
	h.mu.Lock()
	u := Unwritten{Since: h.opts.Now(), Why: clip(err.Error(), maxWhyBytes)}
	if h.unwritten != nil {
		u.Since = h.unwritten.Since
	}
	h.mu.Unlock()
	_, _ = updateHealth(ctx, h.states, func(hl *Health) {
		if hl.Unwritten != nil && hl.Unwritten.Since.Before(u.Since) {
			u.Since = hl.Unwritten.Since // an earlier run's, maybe on another instance
		}
		hl.Unwritten = &Unwritten{Since: u.Since, Why: u.Why}
	})
	h.mu.Lock()
	h.unwritten = &u
	h.mu.Unlock()
	return u
}

// recordTimeout bounds the write of a run's record, which happens even when
// the run's own deadline has passed (what it learnt is worth keeping).
const recordTimeout = 10 * time.Second

func recordContext(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.WithoutCancel(ctx), recordTimeout)
}

// trip records a failed run and opens the breaker, in the Health record
// (with the run's figures, when it has them); it returns why.
func (h *Healer) trip(ctx context.Context, r *Run, why string, f *Figures) string {
	now := h.opts.Now()
	var b Breaker
	ctx, cancel := recordContext(ctx)
	defer cancel()
	err := h.writeRecord(ctx, r, func(hl *Health) {
		hl.Breaker.Failures++
		hl.Breaker.Trips++
		hl.Breaker.OpenUntil = now.Add(double(h.opts.BreakerBase, hl.Breaker.Failures, h.opts.BackoffMax))
		hl.Breaker.Why = why
		if f != nil {
			hl.LastRun = f.over(hl.LastRun)
		}
		b = hl.Breaker
	})
	if f != nil {
		h.addTrend(ctx, f, f.At)
	}
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
