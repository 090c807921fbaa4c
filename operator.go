package main

import (
	"context"
	"fmt"

	"github.com/convoy-dev/convoy/handler"
	"github.com/convoy-dev/convoy/handler/convoy"
	"github.com/convoy-dev/convoy/handler/fault"
	"github.com/convoy-dev/convoy/handler/heal"
	"github.com/convoy-dev/convoy/handler/replay"
	"github.com/convoy-dev/convoy/handler/settings"
)

// An operator's replay (ReplayOrder over HTTP, `convoy replay`) re-sends an
// order's dead letters of a transient cause and leaves those of a permanent
// cause (heal.Classify: the processor cannot read them, or another tool
// dead-lettered them), saying why: re-sent, they would only burn their
// deliveries and be dead-lettered again. Their gap is for SkipGap.
var _ handler.ExplainingReplayer = replayer{}

// ReplayOrder is handler.ExplainingReplayer: replay.Order restricted to the
// dead letters of a transient cause, with the others listed and explained.
func (r replayer) ReplayOrder(ctx context.Context, orderID string) (handler.OrderReplay, error) {
	empty := handler.OrderReplay{Report: replay.Report{OrderID: orderID, Replayed: []replay.Replayed{}}}
	// The order's appliedSeq: a dead letter at or below it is a duplicate
	// (replay.Order completes it, whatever its cause: an operator may have
	// skipped it); -1 when unknown (no store).
	applied := int64(-1)
	if r.opts.Orders != nil {
		o, err := r.opts.Orders.Load(ctx, orderID)
		if err != nil {
			return empty, fmt.Errorf("read order %q: %w", orderID, err)
		}
		applied = o.AppliedSeq
	}
	var left []handler.LeftDeadLetter
	opts := r.opts
	opts.Select = func(d replay.DeadLetter) bool {
		seq, ok := convoy.IntProperty(d.Properties[convoy.PropSeq])
		if ok && seq >= 1 && seq <= applied {
			return true // a duplicate: completed, never re-sent
		}
		c := heal.Classify(d, applied)
		if c.Class == heal.Transient {
			return true
		}
		left = append(left, handler.LeftDeadLetter{MessageID: d.MessageID, Seq: max(seq, 0), Cause: c.Class,
			Why: c.Why + ": re-sent, it would be dead-lettered again; skip its seq instead"})
		return false
	}
	src, sender, close, err := r.source()
	if err != nil {
		return empty, err
	}
	defer close()
	rep, err := replay.Order(ctx, src, sender, orderID, opts)
	return handler.OrderReplay{Report: rep, Left: left}, err
}

var _ handler.SkipSettler = replayer{}

// SettleSkipped is handler.SkipSettler: replay.Order choosing the skipped
// seq only, which the order (read from the store) counts as applied, so its
// dead letter is completed as a duplicate, never re-sent.
func (r replayer) SettleSkipped(ctx context.Context, orderID string, seq int64) (replay.Report, error) {
	empty := replay.Report{OrderID: orderID, Replayed: []replay.Replayed{}}
	if r.opts.Orders == nil {
		return empty, fault.Errorf(fault.Invalid, "no orders table to tell the skipped seq applied")
	}
	opts := r.opts
	opts.Select = func(d replay.DeadLetter) bool {
		n, ok := convoy.IntProperty(d.Properties[convoy.PropSeq])
		return ok && n == seq
	}
	src, sender, close, err := r.source()
	if err != nil {
		return empty, err
	}
	defer close()
	return replay.Order(ctx, src, sender, orderID, opts)
}

// operatorReplayer is the replayer of `convoy replay`, as serve builds the
// HTTP functions' (newServer): the orders' appliedSeq read from the orders
// table, so that a dead letter already applied (or skipped) is completed as
// a duplicate, never re-sent. It needs StateStorage.
func operatorReplayer(cfg settings.Settings, c *clients) (replayer, error) {
	if c.tables == nil {
		return replayer{}, fault.Errorf(fault.Invalid, "StateStorage is not set: a replay reads each order's appliedSeq to tell duplicates")
	}
	return replayer{c: c, queue: cfg.OrdersQueue, opts: replay.Options{MaxScan: cfg.ReplayScanLimit, Orders: c.orderStore(cfg.OrdersTable)}}, nil
}

// operatorProcessor is the processor `convoy skip` commits with, as serve
// builds the handler's (newServer): a skip is one processor commit on the
// order's stored state (its cache is dropped first), so a running handler's
// cached copy is refused by its version and reloaded.
func operatorProcessor(cfg settings.Settings, c *clients) *convoy.Processor {
	store := c.orderStore(cfg.OrdersTable)
	return convoy.NewProcessor(store, convoy.ProcessorOptions{
		CacheSize: 1,
		Retry:     fault.RetryPolicy{MaxElapsed: cfg.RetryBudget},
		Index:     store,
		LagWindow: cfg.LagWindow,
	})
}
