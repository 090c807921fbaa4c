package main

import (
	"github.com/convoy-dev/convoy/handler/convoy"
	"github.com/convoy-dev/convoy/handler/fault"
	"github.com/convoy-dev/convoy/handler/operator"
	"github.com/convoy-dev/convoy/handler/replay"
	"github.com/convoy-dev/convoy/handler/settings"
)

// The operator's commands (`convoy replay`, `convoy skip`) are command-line
// clients of package operator, on what serve builds for the HTTP functions
// (newServer): the same replayer and processor, on the same tables and queue.

// operatorReplayer is the replayer of `convoy replay`: the orders'
// appliedSeq read from the orders table, so that a dead letter already
// applied (or skipped) is completed as a duplicate, never re-sent. It needs
// StateStorage.
func operatorReplayer(d settings.Domain, cfg settings.Settings, c *clients) (operator.QueueReplayer, error) {
	if c.tables == nil {
		return operator.QueueReplayer{}, fault.Errorf(fault.Invalid, "StateStorage is not set: a replay reads each %s's appliedSeq to tell duplicates", d.Rules.Noun())
	}
	return operator.QueueReplayer{Domain: d.Rules, Open: c.deadLetters(d.Queue),
		Options: replay.Options{MaxScan: cfg.ReplayScanLimit, Orders: c.orderStore(d.Table)}}, nil
}

// allReplayer is the replayer of `convoy replay --all`: it reads the
// orders' appliedSeq (to complete duplicates without re-sending them) when
// StateStorage is set.
func allReplayer(d settings.Domain, cfg settings.Settings, c *clients) operator.QueueReplayer {
	r := operator.QueueReplayer{Domain: d.Rules, Open: c.deadLetters(d.Queue), Options: replay.Options{MaxScan: cfg.ReplayScanLimit}}
	if c.tables != nil {
		r.Options.Orders = c.orderStore(d.Table)
	}
	return r
}

// operatorProcessor is the processor `convoy skip` commits with: a skip is
// one processor commit on the order's stored state (its cache is dropped
// first), so a running handler's cached copy is refused by its version and
// reloaded.
func operatorProcessor(d settings.Domain, cfg settings.Settings, c *clients) *convoy.Processor {
	store := c.orderStore(d.Table)
	return convoy.NewProcessor(store, convoy.ProcessorOptions{Domain: d.Rules,
		CacheSize: 1,
		Retry:     fault.RetryPolicy{MaxElapsed: cfg.RetryBudget},
		Index:     store,
		LagWindow: cfg.LagWindow,
	})
}
