package healsim

import (
	"context"
	"time"

	"github.com/convoy-dev/convoy/handler/fault"
)

// The simulated clock. Nothing in a run reads the wall clock: the store's
// round trips, the retry policy's backoffs and the operators' deadlines all
// move or read w.now, so a seed replays the same on a loaded machine.

// advance moves the clock by d and fires the deadlines it passes: a
// deadline fires between two operations, as a real one does from the
// caller's point of view (the SDK's next call sees it).
func (w *world) advance(d time.Duration) {
	w.now = w.now.Add(d)
	live := w.deadlines[:0]
	for _, dl := range w.deadlines {
		if dl.at.After(w.now) {
			live = append(live, dl)
			continue
		}
		w.st.deadlines++
		w.note("deadline %s fires", dl.at.Format("15:04:05.000"))
		dl.cancel()
	}
	w.deadlines = live
}

func (w *world) clock() time.Time { return w.now }

// simDeadline is a deadline on the simulated clock.
type simDeadline struct {
	at     time.Time
	cancel context.CancelFunc
}

// simCtx is a context whose deadline is a simulated instant: its Done
// closes when the simulated clock passes it (advance). It embeds the
// standard cancel context whose Done it returns, so that contexts derived
// from it (context.WithTimeout in the code under test: a wall-clock
// deadline later than this one keeps this one) are cancelled with it at
// once, not by a goroutine of the context package: the cancellation is
// deterministic.
type simCtx struct {
	context.Context
	at time.Time
}

func (c *simCtx) Deadline() (time.Time, bool) { return c.at, true }

func (c *simCtx) Err() error {
	if c.Context.Err() != nil {
		return context.DeadlineExceeded
	}
	return nil
}

// withDeadline is a context that ends d after now on the simulated clock.
func (w *world) withDeadline(d time.Duration) (context.Context, context.CancelFunc) {
	inner, cancel := context.WithCancel(context.Background())
	ctx := &simCtx{Context: inner, at: w.now.Add(d)}
	w.deadlines = append(w.deadlines, &simDeadline{at: ctx.at, cancel: cancel})
	return ctx, cancel
}

// retryClock is the retry policy's clock: its backoffs pass on the
// simulated clock (and may fire a deadline).
type retryClock struct{ w *world }

func (c retryClock) Now() time.Time { return c.w.now }

func (c retryClock) Sleep(ctx context.Context, d time.Duration) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	c.w.advance(d)
	return ctx.Err()
}

// retryPolicy is an instance's in-invocation retry on the simulated clock,
// its jitter drawn from the seed. Two attempts at least, as production's
// budget always allows (fault.RetryPolicy: MaxAttempts 0 within 20 s): a
// first attempt that guessed an added txId absent and conflicted is
// followed by one that looks it up (verify mode), so a clean read or run
// resumes a cut drain whose next message re-adds a txId (seed 7755: with
// one attempt, the resume failed on the guess, and the next call on
// another instance guessed again).
func (w *world) retryPolicy() fault.RetryPolicy {
	return fault.RetryPolicy{MaxAttempts: 2 + w.r.IntN(2), Initial: 5 * time.Millisecond, Max: 50 * time.Millisecond, MaxElapsed: time.Second,
		Clock: retryClock{w}, Jitter: func(n int64) int64 { return w.jitter.Int64N(n) }}
}

// actionContext is a top-level action's context: now and then with a
// deadline a few round trips away (a deadline that fires mid-drain), else
// one far enough never to fire.
func (w *world) actionContext() (context.Context, context.CancelFunc) {
	if w.armed && w.r.IntN(100) < 35 {
		return w.withDeadline(time.Duration(3+w.r.IntN(60)) * time.Millisecond)
	}
	return w.withDeadline(time.Hour)
}

// storeFault is the store's Fail hook: every round trip takes a
// millisecond at least (two commits never share the millisecond that keys
// a block, convoy.BlockedKey), some much longer; a call past its action's
// deadline fails as the SDK's would; now and then another actor's whole
// action runs first (an interleaving), or the operation fails before it
// takes place.
func (w *world) storeFault(op, orderID string) error {
	if w.quiet {
		return nil
	}
	what := op + "|" + orderID
	d := time.Millisecond
	if w.armed && w.slowStore > 0 {
		d += time.Duration(w.roll("latency|"+what)%w.slowStore) * time.Millisecond
	}
	if w.armed && w.roll("slow|"+what) < 10 {
		d += time.Duration(w.roll("latency|"+what)) * time.Millisecond
	}
	w.advance(d)
	if w.depth == 0 && w.ctx != nil && w.ctx.Err() != nil {
		w.stepDeadlined++
		return context.DeadlineExceeded
	}
	if !w.armed {
		return nil
	}
	if w.depth == 0 && w.runCancel != nil && w.runPeeked && w.roll("cancel|"+what) < 2 {
		w.stepFaults++
		w.note("the host cancels the AutoReplay invocation before %s of %s", op, orderID)
		w.runCancel()
		return context.Canceled
	}
	if w.depth == 0 && w.roll("interleave|"+what) < 6 {
		w.depth++
		w.interleave(orderID)
		w.depth--
	}
	if w.roll(what) < 7 {
		w.st.faults++
		w.stepFaults++
		w.note("%s of %s fails", op, orderID)
		return fault.Errorf(fault.Unavailable, "injected: %s fails", op)
	}
	return nil
}

// loseReply is the store's LoseReply hook: the commit took place, its
// answer is lost.
func (w *world) loseReply(orderID string) bool {
	if !w.armed || w.roll("reply|"+orderID) >= 6 {
		return false
	}
	w.st.lostReplies++
	w.stepFaults++
	w.note("reply of a commit of %s lost", orderID)
	return true
}
