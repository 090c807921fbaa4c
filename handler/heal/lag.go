package heal

import (
	"cmp"
	"context"
	"sync"
	"time"

	"github.com/convoy-dev/convoy/handler/convoy"
)

// LagFigures are the lag of the active orders as one AutoReplay run
// surveyed it (docs/operations.md, "Lag per order"): the summary, the
// dashboard and the metrics line show them, on any instance.
type LagFigures struct {
	At     time.Time `json:"at"`
	Window int64     `json:"window"` // seconds
	// Orders counts the active orders surveyed; Complete says the run read
	// the whole index and every one of them before its deadline.
	Orders   int                      `json:"orders"`
	Complete bool                     `json:"complete"`
	ByStatus map[convoy.LagStatus]int `json:"byStatus"`
	// StalledTwoWindows counts the stalled orders whose head has not moved
	// (nor the wait begun) for two windows or more: the alert's figure.
	StalledTwoWindows int `json:"stalledTwoWindows"`
	// OldestHeads are the orders whose first unapplied seq has waited
	// longest since it was published, oldest first (at most OldestHeadsShown).
	OldestHeads []OldestHead `json:"oldestHeads"`
	// CriticalTime is over the transactions applied in the recent window
	// (the current aligned window and the one before); nil when none was.
	CriticalTime *CriticalTimeFigures `json:"criticalTime,omitempty"`
	// Unread says why some orders could not be read ("" when all were).
	Unread string `json:"unread,omitempty"`
}

// OldestHead is one order of LagFigures.OldestHeads.
type OldestHead struct {
	OrderID        string           `json:"orderId"`
	Status         convoy.LagStatus `json:"status"`
	Backlog        int64            `json:"backlog"`
	AppliedSeq     int64            `json:"appliedSeq"`
	HeadAgeSeconds float64          `json:"headAgeSeconds"`
}

// CriticalTimeFigures are percentiles of critical time (convoy.Histogram:
// each at most 19 % above the exact value; the maximum exact).
type CriticalTimeFigures struct {
	Count        int64 `json:"count"`
	P50Ms        int64 `json:"p50Ms"`
	P99Ms        int64 `json:"p99Ms"`
	MaxMs        int64 `json:"maxMs"`
	SinceSeconds int64 `json:"sinceSeconds"` // the recent window began this long before At
}

// OldestHeadsShown bounds LagFigures.OldestHeads.
const OldestHeadsShown = 10

// lagParallelism is how many orders the survey reads at once (two point
// reads each: the head, and where its next seq was allocated).
const lagParallelism = 32

// surveyLag judges the lag of every order in the active-orders index: its
// head (applied seq, when it last moved, its critical times) and what was
// published to it (a point read of its counter; for an order fed by a
// producer of the user's own, none: what the processor noted in its entry
// stands in), with the dead letters of the run's peek (a missing message
// dead-lettered with nothing parked behind it still blocks its order: noted
// with what was published to it, for the order's own lag to tell). An order
// caught up and idle for two windows leaves the index (as read: one
// published to or received since is kept; convoy.Processor writes it back
// when it receives a message of an order that looks idle). Its cost is
// two reads per active order, however long their histories; it stops at
// ctx's end or its first failed read, and says so (Complete false).
func (h *Healer) surveyLag(ctx context.Context, dls *DeadLetters, now time.Time) *LagFigures {
	if h.opts.Active == nil {
		return nil
	}
	window := cmp.Or(h.opts.LagWindow, convoy.DefaultLagWindow)
	f := &LagFigures{At: now.UTC(), Window: int64(window / time.Second), Complete: true,
		ByStatus: map[convoy.LagStatus]int{convoy.LagOK: 0, convoy.LagCatchingUp: 0, convoy.LagStalled: 0, convoy.LagBlocked: 0}}
	var (
		mu    sync.Mutex
		crit  convoy.Histogram
		heads oldestHeads // the OldestHeadsShown oldest so far
	)
	// The first failure ends the survey: storage failing for one read
	// fails the next thousands alike, each waiting for its own deadline.
	ctx, stop := context.WithCancel(ctx)
	defer stop()
	fail := func(err error) {
		mu.Lock()
		defer mu.Unlock()
		f.Complete = false
		if f.Unread == "" {
			f.Unread = cut(err.Error())
		}
		stop()
	}
	one := func(e convoy.ActiveOrder) {
		head, _, err := h.blocked.Head(ctx, e.OrderID)
		if err != nil {
			fail(err)
			return
		}
		p, err := h.opts.Active.Published(ctx, e.OrderID, head.AppliedSeq+1)
		if err != nil {
			fail(err)
			return
		}
		p = p.WithSeen(e, head.AppliedSeq+1) // an order fed by a producer of the user's own: what the processor saw
		next := head.AppliedSeq + 1
		dead := p.DeadLetteredSeq == next // as a run noted it: this run's peek failed
		if dls != nil {
			dead = dls.holds(e.OrderID, next)
			var note int64 // what the counter should say: next, or none
			if dead {
				note = next
			}
			// A note is removed only on a whole peek's word.
			if note != p.DeadLetteredSeq && (dead || dls.Complete) {
				_ = h.opts.Active.NoteDeadLettered(ctx, e.OrderID, note) // a failure leaves it to the next run
			}
		}
		// What waits counts every seq known to be sent: allocated, received
		// by the processor, dead-lettered (the next), or parked (distinct
		// seqs past the missing one: the last is at least next+parked).
		last := p.LastSeq
		if dead {
			last = max(last, next)
		}
		if head.Parked > 0 {
			last = max(last, next+int64(head.Parked))
		}
		in := convoy.LagInput{Backlog: max(last-head.AppliedSeq, 0), AppliedAt: head.AppliedAt, Parked: head.Parked,
			DeadLettered: dead, Now: now, Window: window}
		if in.Backlog > 0 {
			in.HeadSince = p.SeqAllocatedAt
		}
		status := convoy.JudgeLag(in)
		recent, _ := head.Crit.Recent(now, window)
		idle := in.Backlog == 0 && head.Parked == 0 && now.Sub(head.AppliedAt) >= 2*window
		if idle { // a failure leaves it for the next run
			_ = h.opts.Active.Deactivate(ctx, e)
		}
		mu.Lock()
		defer mu.Unlock()
		f.Orders++
		f.ByStatus[status]++
		waiting := in.AppliedAt
		if in.HeadSince.After(waiting) {
			waiting = in.HeadSince
		}
		if status == convoy.LagStalled && now.Sub(waiting) >= 2*window {
			f.StalledTwoWindows++
		}
		crit.Merge(recent)
		if in.Backlog > 0 && !in.HeadSince.IsZero() {
			age := float64(now.Sub(in.HeadSince).Milliseconds()) / 1000
			heads.add(OldestHead{OrderID: e.OrderID, Status: status, Backlog: in.Backlog, AppliedSeq: head.AppliedSeq, HeadAgeSeconds: max(age, 0)})
		}
	}

	work := make(chan convoy.ActiveOrder)
	var wg sync.WaitGroup
	for range lagParallelism {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for e := range work {
				if ctx.Err() == nil {
					one(e)
				}
			}
		}()
	}
	after := ""
	for {
		page, more, err := h.opts.Active.ScanActive(ctx, after, indexPage)
		if err != nil {
			fail(err)
			break
		}
		for _, e := range page {
			work <- e
		}
		if !more || len(page) == 0 {
			break
		}
		after = page[len(page)-1].OrderID
	}
	close(work)
	wg.Wait()
	if ctx.Err() != nil {
		fail(ctx.Err())
	}

	f.OldestHeads = heads.list()
	if n := crit.Count(); n > 0 {
		_, since := convoy.CriticalTimes{}.Recent(now, window) // where the recent window begins
		f.CriticalTime = &CriticalTimeFigures{Count: n, P50Ms: crit.Percentile(0.5), P99Ms: crit.Percentile(0.99), MaxMs: crit.MaxMs,
			SinceSeconds: int64(now.Sub(since) / time.Second)}
	}
	return f
}

// holds reports whether the peek saw the dead letter of seq of the order.
func (d *DeadLetters) holds(orderID string, seq int64) bool {
	if d == nil {
		return false
	}
	for _, l := range d.byOrder[orderID] {
		if l.seq == seq {
			return true
		}
	}
	return false
}
