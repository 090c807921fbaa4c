package operator

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/convoy-dev/convoy/handler/convoy"
	"github.com/convoy-dev/convoy/handler/fault"
	"github.com/convoy-dev/convoy/handler/orders"
	"github.com/convoy-dev/convoy/handler/replay"
)

// Skipper records an order's missing seq as skipped (convoy.Processor).
type Skipper interface {
	Skip(ctx context.Context, orderID string, seq int64) (convoy.Result, convoy.View, error)
}

// SkipResult is SkipGap's answer.
type SkipResult struct {
	OrderID string      `json:"orderId"`
	Skipped int64       `json:"skipped"`
	Drained []int64     `json:"drained"`
	Order   orders.View `json:"order"`
	// SkippedEarlier: the seq was skipped already, by an earlier skip whose
	// answer was lost; this one skipped nothing and settles its dead letter.
	SkippedEarlier bool `json:"skippedEarlier,omitempty"`
	// Draining says, when the drain behind the skip stopped short of the
	// parked tail (the answer's deadline, storage failing), how it goes on.
	Draining string `json:"draining,omitempty"`
	// DeadLetter says what became of the skipped seq's dead letter (absent
	// when the skip had no Service Bus to look with).
	DeadLetter *SkippedDeadLetter `json:"deadLetter,omitempty"`
}

// SkipGap records seq (as text, from the outside) of orderID as skipped with
// p: the one code path of SkipGap (POST /api/orders/{orderId}/skip?seq=N)
// and `convoy skip`. seq must be the order's missing seq; anything else is a
// fault (Invalid, NotFound or Conflict) that changes nothing.
func SkipGap(ctx context.Context, p Skipper, orderID, seq string) (SkipResult, error) {
	if err := CheckOrderID(orderID); err != nil {
		return SkipResult{}, err
	}
	n, err := strconv.ParseInt(seq, 10, 64)
	if err != nil || n < 1 {
		return SkipResult{}, fault.Errorf(fault.Invalid, "seq must be the order's missing seq, an integer ≥ 1 (got %q)", cut(seq, maxQuoted))
	}
	res, view, err := p.Skip(ctx, orderID, n)
	if err != nil {
		return SkipResult{}, err
	}
	out := SkipResult{OrderID: orderID, Skipped: n, Drained: []int64{}, Order: orders.ViewOf(view), SkippedEarlier: res.SkippedEarlier}
	for _, o := range res.Outcomes {
		if o.Drained {
			out.Drained = append(out.Drained, o.Seq)
		}
	}
	if res.Draining {
		out.Draining = fmt.Sprintf("the skip stands; %d parked message(s) behind it are still to drain: "+
			"each read of the order (GET /api/orders/%s) and each AutoReplay run resumes the drain, as does the order's next message", res.Parked, orderID)
	}
	return out, nil
}

// SkippedDeadLetter is what a skip did with the dead letter of its seq: once
// the seq is skipped it is a duplicate, completed so that it no longer
// counts (and alerts) as a dead letter of a permanent cause.
type SkippedDeadLetter struct {
	Completed []string `json:"completed"` // message ids completed
	Note      string   `json:"note,omitempty"`
}

// SkipSettler completes the dead letters of a seq an operator skipped
// (QueueReplayer: replay.Order choosing that seq, which the order now
// counts as applied, so it is completed as a duplicate, never re-sent).
type SkipSettler interface {
	SettleSkipped(ctx context.Context, orderID string, seq int64) (replay.Report, error)
}

// SkipSettleDeadline bounds what follows a skip that succeeded: one scan of
// the dead-letter queue for the skipped seq's dead letter, whose last
// receive waits about 5 s for more. The skip stands whatever the scan finds,
// so the scan has a deadline of its own, not the skip's.
const SkipSettleDeadline = 15 * time.Second

// SettleSkipped completes the dead letter of the seq res skipped, if any,
// within SkipSettleDeadline, and says so in res; a skip stands whatever
// this finds (its dead letter is then left for a replay of every dead
// letter, which completes it as a duplicate).
func SettleSkipped(ctx context.Context, s SkipSettler, res *SkipResult) {
	ctx, cancel := context.WithTimeout(ctx, SkipSettleDeadline)
	defer cancel()
	rep, err := s.SettleSkipped(ctx, res.OrderID, res.Skipped)
	d := &SkippedDeadLetter{Completed: []string{}}
	for _, x := range rep.Duplicates {
		d.Completed = append(d.Completed, x.MessageID)
	}
	switch {
	case err != nil:
		d.Note = "the dead-letter queue could not be read: " + cut(fault.MessageOf(err), maxQuoted) +
			"; a replay of every dead letter (POST /api/deadletters/replay) completes it later"
	case rep.Incomplete != nil:
		d.Note = rep.Incomplete.Reason
	case len(d.Completed) == 0:
		d.Note = fmt.Sprintf("no dead letter of seq %d: it was never dead-lettered (or already removed)", res.Skipped)
	}
	res.DeadLetter = d
}
