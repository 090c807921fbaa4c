package convoy

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/convoy-dev/convoy/handler/fault"
)

// Skip records the order's missing seq as rejected by an operator and drains
// the parked messages behind it.
//
// It first resumes a drain that an earlier call left cut (Resume): a parked
// seq was received, and is never skipped. Retried after a skip whose commit
// landed but whose answer was lost, it finds seq skipped by an operator and
// answers as that skip would have (Result.SkippedEarlier). Its drain stops a
// margin before ctx's deadline (and when storage fails after the skip
// landed), so that the operator gets an answer: what is left is said
// (Result.Draining) and drains at the order's next load.
func (p *Processor) Skip(ctx context.Context, orderID string, seq int64) (Result, View, error) {
	unlock := p.locks.lock(orderID)
	defer unlock()
	var res Result
	var done committed
	verify, stop := p.cache.suspect(orderID), drainStop(ctx, p.now()) // as Process: after a conflict, added txIds are looked up
	earlier := false                                                  // an earlier call skipped seq
	err := p.retry.Do(ctx, func(ctx context.Context) error {
		p.cache.drop(orderID) // an operator acts on what is stored, not on this instance's view
		o, err := p.store.Load(ctx, orderID)
		if err != nil {
			return err
		}
		if o.Version == 0 {
			return fault.Errorf(fault.NotFound, "%s %q has no state", p.domain.Noun(), orderID)
		}
		a, err := p.begin(o, &done)
		if err != nil {
			return err
		}
		a.verify, a.stop = verify, stop
		refused := error(nil)
		if err = a.drain(ctx); err == nil { // a cut drain first: its head was received
			switch {
			case skippedBy(done.outcomes, seq) || earlier:
				// An earlier attempt's commit (or call) skipped it; its drain goes on.
			case seq <= o.AppliedSeq:
				earlier, err = p.skippedBefore(ctx, orderID, seq)
				if err == nil && !earlier {
					refused = fault.Errorf(fault.Conflict, "cannot skip: seq %d of %s %q was received (applied or rejected by a rule), it is not missing; appliedSeq is %d", seq, p.domain.Noun(), orderID, o.AppliedSeq)
				}
			default:
				if serr := o.Skip(seq, p.now(), &a.change); serr != nil {
					refused = fault.Wrap(fault.Conflict, serr, "cannot skip")
				} else {
					a.outcomes = append(a.outcomes, Outcome{Seq: seq, Disposition: Rejected, Reason: ReasonSkipped})
					err = a.drain(ctx)
				}
			}
		}
		if err == nil {
			err = a.commit(ctx) // what drained is kept even when the skip is refused
		}
		if err != nil {
			a.fail()
			if errors.Is(err, ErrConflict) {
				verify = true // as Process: an added txId may exist
			}
			return err
		}
		res = a.finish()
		return refused
	})
	p.cache.mark(orderID, verify && err != nil)
	if err != nil && fault.CodeOf(err) != fault.Conflict && fault.CodeOf(err) != fault.NotFound && skippedBy(done.outcomes, seq) {
		// The skip landed; only its drain was cut (storage failing): the
		// skip stands, and the rest drains at the order's next load.
		res, err = done.result(), nil
		res.Draining = true
	}
	if err != nil {
		return Result{}, View{}, err
	}
	res.SkippedEarlier = earlier
	// Without a page of history (it could not be read), the answer shows
	// the key's id and how far the skip's drain took it: a head that is not
	// bound to its domain, which has no view of its own.
	view := View{Order: &Key{ID: orderID, AppliedSeq: res.AppliedSeq}}
	if h, ok := p.store.(History); ok {
		// The operator's answer shows the order with its first page of
		// history; it is read even when ctx is about to end (the skip stands).
		vctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), viewTimeout)
		if v, verr := ReadView(vctx, p.domain, p.store, h, orderID, "", 0); verr == nil {
			view = v
		}
		cancel()
	}
	return res, view, nil
}

// viewTimeout bounds the read of the view an operator's answer shows.
const viewTimeout = 2 * time.Second

// skippedBy reports whether outcomes hold seq skipped by an operator.
func skippedBy(outcomes []Outcome, seq int64) bool {
	return slices.ContainsFunc(outcomes, func(o Outcome) bool { return o.Seq == seq && o.Reason == ReasonSkipped })
}

// skippedBefore reports whether the order's seq (at or below its appliedSeq)
// was skipped by an operator: one read of its rejection.
func (p *Processor) skippedBefore(ctx context.Context, orderID string, seq int64) (bool, error) {
	h, ok := p.store.(History)
	if !ok {
		return false, nil
	}
	rs, _, err := h.Rejections(ctx, orderID, seq, 1)
	if err != nil {
		return false, fmt.Errorf("read the rejection of seq %d of %s %q: %w", seq, p.domain.Noun(), orderID, err)
	}
	return len(rs) > 0 && rs[0].Seq == seq && rs[0].Reason == ReasonSkipped, nil
}

// Resume drains the order's parked head when its next seq is parked: what a
// drain cut short (a deadline, a failed commit, a message's last delivery,
// an instance that died) leaves when every later message is parked already,
// so that no delivery comes to resume it. Every reader that finds an order
// so calls it (OrderStatus, the AutoReplay survey; Skip drains first): a cut
// drain always resumes. Like Skip's, its drain stops a margin before ctx's
// deadline (Result.Draining). An order with nothing to drain costs one Load.
func (p *Processor) Resume(ctx context.Context, orderID string) (Result, error) {
	unlock := p.locks.lock(orderID)
	defer unlock()
	var res Result
	var done committed
	verify, stop := p.cache.suspect(orderID), drainStop(ctx, p.now())
	err := p.retry.Do(ctx, func(ctx context.Context) error {
		p.cache.drop(orderID) // drain what is stored, not this instance's view
		o, err := p.store.Load(ctx, orderID)
		if err != nil {
			return err
		}
		a, err := p.begin(o, &done)
		if err != nil {
			return err
		}
		a.verify, a.stop = verify, stop
		if err = a.drain(ctx); err == nil {
			err = a.commit(ctx)
		}
		if err != nil {
			a.fail()
			if errors.Is(err, ErrConflict) {
				verify = true
			}
			return err
		}
		res = a.finish()
		return nil
	})
	p.cache.mark(orderID, verify && err != nil)
	return res, err
}

// drainStop is when a drain for an operator stops so that its caller can
// still answer within ctx's deadline (zero: no deadline, no stop): the
// answer's reserve is kept for the last commit and the answer. now is the
// processor's clock (ProcessorOptions.Now), which the drain checks the stop
// against: a simulation's deadlines fire on its own clock.
func drainStop(ctx context.Context, now time.Time) time.Time {
	deadline, ok := ctx.Deadline()
	if !ok {
		return time.Time{}
	}
	return deadline.Add(-min(maxAnswerReserve, deadline.Sub(now)/answerShare))
}

// The answer's reserve: 1/answerShare of the time left, at most
// maxAnswerReserve (a commit and a view's read take well under a second on
// a healthy account; a short deadline still leaves most of itself to the
// drain).
const (
	answerShare      = 4
	maxAnswerReserve = time.Second
)
