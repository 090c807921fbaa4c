package operator

import (
	"context"
	"fmt"

	"github.com/convoy-dev/convoy/handler/convoy"
	"github.com/convoy-dev/convoy/handler/fault"
	"github.com/convoy-dev/convoy/handler/keyed"
	"github.com/convoy-dev/convoy/handler/replay"
)

// Opener opens a dead-letter source and a sender for one run; close
// releases them.
type Opener func() (src replay.Source, sender convoy.Sender, close func(), err error)

// QueueReplayer is the program's Replayer, ExplainingReplayer and
// SkipSettler of one domain: replay.Order and replay.All on the dead
// letters of its queue, which Open opens, a fresh source per run.
type QueueReplayer struct {
	// Domain reads the dead letters' bodies, to tell those of a permanent
	// cause (Classify); required by ReplayOrder.
	Domain keyed.Domain
	Open   Opener
	// Options are every run's: MaxScan, and Orders (the domain's store),
	// whose appliedSeq tells a dead letter already applied (or skipped),
	// completed as a duplicate, never re-sent (nil: not known;
	// SettleSkipped then refuses).
	Options replay.Options
}

var (
	_ Replayer           = QueueReplayer{}
	_ ExplainingReplayer = QueueReplayer{}
	_ SkipSettler        = QueueReplayer{}
)

// Replay is replay.Order of every dead letter of orderID.
func (r QueueReplayer) Replay(ctx context.Context, orderID string) (replay.Report, error) {
	return r.order(ctx, orderID, r.Options)
}

// ReplayAll is one call of replay.All.
func (r QueueReplayer) ReplayAll(ctx context.Context, max int, continuation string) (replay.Progress, error) {
	src, sender, close, err := r.Open()
	if err != nil {
		return replay.Progress{}, err
	}
	defer close()
	return replay.All(ctx, src, sender, replay.AllOptions{Options: r.Options, Max: max, Continuation: continuation})
}

// ReplayOrder is an operator's replay of one key: it re-sends the key's
// dead letters of a transient cause and leaves those of a permanent cause
// (Classify: the processor cannot read them, or another tool dead-lettered
// them), saying why: re-sent, they would only burn their deliveries and be
// dead-lettered again. Their gap is for SkipGap.
func (r QueueReplayer) ReplayOrder(ctx context.Context, orderID string) (OrderReplay, error) {
	empty := OrderReplay{Report: emptyReport(orderID)}
	if r.Domain == nil {
		return empty, fault.Errorf(fault.Internal, "the replayer has no domain to read its dead letters with")
	}
	// The order's appliedSeq: a dead letter at or below it is a duplicate
	// (replay.Order completes it, whatever its cause: an operator may have
	// skipped it); -1 when unknown (no store).
	applied := int64(-1)
	if r.Options.Orders != nil {
		o, err := r.Options.Orders.Load(ctx, orderID)
		if err != nil {
			return empty, fmt.Errorf("read %s %q: %w", r.Domain.Noun(), orderID, err)
		}
		applied = o.AppliedSeq
	}
	var left []LeftDeadLetter
	opts := r.Options
	opts.Select = func(d replay.DeadLetter) bool {
		seq, ok := convoy.IntProperty(d.Properties[convoy.PropSeq])
		if ok && seq >= 1 && seq <= applied {
			return true // a duplicate: completed, never re-sent
		}
		c := Classify(r.Domain, d, applied)
		if c.Class == Transient {
			return true
		}
		left = append(left, LeftDeadLetter{MessageID: d.MessageID, Seq: max(seq, 0), Cause: c.Class,
			Why: c.Why + ": re-sent, it would be dead-lettered again; skip its seq instead"})
		return false
	}
	rep, err := r.order(ctx, orderID, opts)
	return OrderReplay{Report: rep, Left: left}, err
}

// SettleSkipped is replay.Order choosing the skipped seq only, which the
// order (read from Options.Orders) counts as applied, so its dead letter is
// completed as a duplicate, never re-sent.
func (r QueueReplayer) SettleSkipped(ctx context.Context, orderID string, seq int64) (replay.Report, error) {
	if r.Options.Orders == nil {
		return emptyReport(orderID), fault.Errorf(fault.Invalid, "no orders table to tell the skipped seq applied")
	}
	opts := r.Options
	opts.Select = func(d replay.DeadLetter) bool {
		n, ok := convoy.IntProperty(d.Properties[convoy.PropSeq])
		return ok && n == seq
	}
	return r.order(ctx, orderID, opts)
}

// order is one run of replay.Order with opts.
func (r QueueReplayer) order(ctx context.Context, orderID string, opts replay.Options) (replay.Report, error) {
	src, sender, close, err := r.Open()
	if err != nil {
		return emptyReport(orderID), err
	}
	defer close()
	return replay.Order(ctx, src, sender, orderID, opts)
}
