package heal

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/convoy-dev/convoy/handler/fault"
	"github.com/convoy-dev/convoy/handler/replay"
)

// deadLetters is one read of the dead-letter sub-queue within PeekTimeout;
// its error is an *UnreadableError.
//
// The read runs on its own goroutine and is given up at the deadline even
// if it has not returned: azservicebus holds one lock per client while it
// opens a connection, and opening a receiver waits for that lock without a
// context, so a read could otherwise wait for another call's connection
// attempt (bounded by that call's own deadline) past its own. A read given
// up ends, and closes its source, when the SDK lets it.
func (h *Healer) deadLetters(ctx context.Context) (*DeadLetters, error) {
	if h.opts.PeekTimeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, h.opts.PeekTimeout)
		defer cancel()
	}
	type result struct {
		d   *DeadLetters
		err error
	}
	done := make(chan result, 1)
	go func() {
		src, _, close, err := h.open()
		if err != nil {
			done <- result{err: err}
			return
		}
		defer close()
		d, err := ReadDeadLetters(ctx, h.opts.Domain, src, peekPerScan*max(h.opts.MaxScan, replay.DefaultMaxScan))
		done <- result{d, err}
	}()
	var r result
	if deadline, ok := ctx.Deadline(); ok {
		giveUp := time.NewTimer(time.Until(deadline) + readGrace)
		defer giveUp.Stop()
		select {
		case r = <-done:
		case <-giveUp.C:
			r.err = context.DeadlineExceeded
		}
	} else {
		r = <-done
	}
	if r.err != nil {
		return nil, &UnreadableError{Err: r.err, Within: h.opts.PeekTimeout}
	}
	return r.d, nil
}

// The bounds of a run's one read of the dead-letter sub-queue.
const (
	// peekPerScan: the peek reads this many dead letters for each one the
	// pass may receive (MaxScan), as replay's closing peek does, so that the
	// figures see past the pass's window (what lies beyond it is reported,
	// not replayed) while the peek stays bounded by the settings.
	peekPerScan = 10
	// readGrace: a read that stops at the deadline by itself returns what it
	// read (ReadDeadLetters); it is given this moment to before it is given
	// up.
	readGrace = 250 * time.Millisecond
	// maxUnreadableWhy: room for a queue name and the network error in the
	// why of an UnreadableError.
	maxUnreadableWhy = 240
)

// UnreadableError is a dead-letter sub-queue that could not be read at all:
// Service Bus refused, failed or did not answer within PeekTimeout.
type UnreadableError struct {
	Err    error
	Within time.Duration // PeekTimeout, when there was one
}

// Error names the cause in one short sentence (it is the "why" of a blocked
// order whose missing message cannot be looked for).
func (e *UnreadableError) Error() string {
	why := fault.MessageOf(e.Err)
	if len(why) > maxUnreadableWhy {
		why = why[:maxUnreadableWhy] + "…"
	}
	if errors.Is(e.Err, context.DeadlineExceeded) && e.Within > 0 {
		why = fmt.Sprintf("Service Bus did not answer within %s", e.Within)
	}
	return "the dead-letter queue could not be read: " + why
}

func (e *UnreadableError) Unwrap() error { return e.Err }
