package heal

import (
	"cmp"
	"context"
	"sync"
	"time"

	"github.com/convoy-dev/convoy/handler/convoy"
)

// LagFigures are the lag of the active orders as the AutoReplay runs
// surveyed it (docs/operations.md, "Lag per order"): the summary, the
// dashboard and the metrics line show them, on any instance. Each run
// surveys at most LagPerRun orders, from where the last one stopped (Pass),
// so the figures are of the last period: each active order as its latest
// survey found it, the oldest of those surveys at OldestSurveyAt.
type LagFigures struct {
	At     time.Time `json:"at"`
	Window int64     `json:"window"` // seconds
	// Orders counts the active orders, each as its latest survey found it;
	// Complete says those surveys cover the whole index (a pass ended, and
	// this run's survey was not cut short).
	Orders   int                      `json:"orders"`
	Complete bool                     `json:"complete"`
	ByStatus map[convoy.LagStatus]int `json:"byStatus"`
	// StalledTwoWindows counts the stalled orders whose head had not moved
	// (nor the wait begun) for two windows or more: the alert's figure.
	StalledTwoWindows int `json:"stalledTwoWindows"`
	// Coverage: the orders surveyed in the current period (the pass under
	// way, begun at PeriodStartedAt; the one this run ended, if it ended
	// one), the earliest survey the figures hold,
	// how long the last whole pass took (PeriodSeconds, 0 before one ended:
	// every active order is looked at that often), and the orders one run
	// surveys at most.
	SurveyedThisPeriod int       `json:"surveyedThisPeriod"`
	PeriodStartedAt    time.Time `json:"periodStartedAt,omitzero"`
	OldestSurveyAt     time.Time `json:"oldestSurveyAt,omitzero"`
	PeriodSeconds      int64     `json:"periodSeconds"`
	OrdersPerRun       int       `json:"ordersPerRun"`
	// OldestHeads are the orders whose first unapplied seq had waited
	// longest since it was published, oldest first (at most
	// OldestHeadsShown), each as its latest survey found it.
	OldestHeads []OldestHead `json:"oldestHeads"`
	// CriticalTime is over the transactions applied in the recent window
	// (the current aligned window and the one before) of the orders this
	// run surveyed; nil when none was.
	CriticalTime *CriticalTimeFigures `json:"criticalTime,omitempty"`
	// Unread says why some orders could not be read ("" when all were);
	// UnreadOrders counts the orders of the period whose read failed, each
	// skipped until the next pass (lagSkipsPerRun).
	Unread       string `json:"unread,omitempty"`
	UnreadOrders int    `json:"unreadOrders"`
}

// OldestHead is one order of LagFigures.OldestHeads.
type OldestHead struct {
	OrderID        string           `json:"orderId"`
	Status         convoy.LagStatus `json:"status"`
	Backlog        int64            `json:"backlog"`
	AppliedSeq     int64            `json:"appliedSeq"`
	HeadAgeSeconds float64          `json:"headAgeSeconds"` // as of SurveyedAt
	SurveyedAt     time.Time        `json:"surveyedAt"`
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

// DefaultLagPerRun is how many active orders a run surveys at most (the
// app setting LagSurveyOrdersPerRun defaults to it): about 20,000 point
// reads, a few seconds in Azure, so every order up to 10,000 active is
// looked at every run, 100,000 every 10 runs.
const DefaultLagPerRun = 10_000

// lagStalled2W names the count of orders stalled for two windows in a
// Pass's segments (the others: "n" and the statuses, and surveyUnread).
const lagStalled2W = "stalled2w"

// lagSkipsPerRun is how many orders whose read failed a run's lag survey
// skips (UnreadOrders) before it takes storage to be failing, and ends.
const lagSkipsPerRun = 10

// surveyLag judges the lag of up to LagPerRun orders of the active-orders
// index, from where the last run's survey stopped (pass): its head
// (applied seq, when it last moved, its critical times) and what was
// published to it (a point read of its counter; for an order fed by a
// producer of the user's own, none: what the processor noted in its entry
// stands in), with the dead letters of the run's peek (a missing message
// dead-lettered with nothing parked behind it still blocks its order: noted
// with what was published to it, for the order's own lag to tell). An order
// caught up and idle for two windows leaves the index (as read: one
// published to or received since is kept; convoy.Processor writes it back
// when it receives a message of an order that looks idle). Its cost is
// two reads per order surveyed, however long their histories, and one
// query per 1,000; it stops at ctx's end or its first failed read, and says
// so (Complete false). It returns the figures of the last period and the
// pass as this run leaves it.
func (h *Healer) surveyLag(ctx context.Context, dls *DeadLetters, now time.Time, pass Pass) (*LagFigures, Pass) {
	if h.opts.Active == nil {
		return nil, pass
	}
	window := cmp.Or(h.opts.LagWindow, convoy.DefaultLagWindow)
	f := &LagFigures{At: now.UTC(), Window: int64(window / time.Second), Complete: true, OrdersPerRun: h.opts.LagPerRun,
		ByStatus: map[convoy.LagStatus]int{convoy.LagOK: 0, convoy.LagCatchingUp: 0, convoy.LagStalled: 0, convoy.LagBlocked: 0}}
	var mu sync.Mutex
	// An order whose read fails is skipped until the next pass, counted:
	// one that always fails (a corrupt entity) would otherwise hold the
	// cursor before it for ever. Past lagSkipsPerRun failures, storage is
	// failing: the survey ends there (the next reads would fail alike,
	// each waiting for its own deadline), and skips none.
	ctx, stop := context.WithCancel(ctx)
	defer stop()
	failures := 0
	fail := func(err error) {
		mu.Lock()
		defer mu.Unlock()
		f.Complete = false
		if f.Unread == "" {
			f.Unread = cut(err.Error())
		}
		stop()
	}
	entries, end, err := collect(ctx, pass.After, h.opts.LagPerRun, h.opts.Active.ScanActive, func(e convoy.ActiveOrder) string { return e.OrderID })
	if err != nil {
		fail(err)
	}
	// What each order was found to be, by its place in entries.
	type verdict struct {
		status  convoy.LagStatus
		stalled bool // for two windows
		head    *OldestHead
		recent  convoy.Histogram
	}
	verdicts := make([]verdict, len(entries))
	finished := make([]bool, len(entries))
	unread := make([]bool, len(entries))
	// failed skips entry i, whose read failed with err (not for the end of
	// ctx), or ends the survey past lagSkipsPerRun failures.
	failed := func(i int, err error) {
		if ctx.Err() != nil {
			return // the deadline, or the survey ended: not this order's
		}
		mu.Lock()
		failures++
		skip := failures <= lagSkipsPerRun
		finished[i], unread[i] = skip, skip
		mu.Unlock()
		if !skip {
			fail(err)
			return
		}
		mu.Lock()
		f.Complete = false
		if f.Unread == "" {
			f.Unread = cut(err.Error())
		}
		mu.Unlock()
	}
	one := func(i int, e convoy.ActiveOrder) {
		head, _, err := h.blocked.Head(ctx, e.OrderID)
		if err != nil {
			failed(i, err)
			return
		}
		p, err := h.opts.Active.Published(ctx, e.OrderID, head.AppliedSeq+1)
		if err != nil {
			failed(i, err)
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
		v := verdict{status: convoy.JudgeLag(in)}
		v.recent, _ = head.Crit.Recent(now, window)
		idle := in.Backlog == 0 && head.Parked == 0 && now.Sub(head.AppliedAt) >= 2*window
		if idle { // a failure leaves it for the next run
			_ = h.opts.Active.Deactivate(ctx, e)
		}
		waiting := in.AppliedAt
		if in.HeadSince.After(waiting) {
			waiting = in.HeadSince
		}
		v.stalled = v.status == convoy.LagStalled && now.Sub(waiting) >= 2*window
		if in.Backlog > 0 && !in.HeadSince.IsZero() {
			age := float64(now.Sub(in.HeadSince).Milliseconds()) / 1000
			v.head = &OldestHead{OrderID: e.OrderID, Status: v.status, Backlog: in.Backlog, AppliedSeq: head.AppliedSeq,
				HeadAgeSeconds: max(age, 0), SurveyedAt: now.UTC()}
		}
		verdicts[i] = v
		mu.Lock()
		finished[i] = true
		mu.Unlock()
	}

	work := make(chan int)
	var wg sync.WaitGroup
	for range min(h.parallel(lagParallelism), len(entries)) {
		wg.Go(func() {
			for i := range work {
				if ctx.Err() == nil {
					one(i, entries[i])
				}
			}
		})
	}
	for i := range entries {
		work <- i
	}
	close(work)
	wg.Wait()
	if ctx.Err() != nil {
		fail(ctx.Err())
	}
	if failures > lagSkipsPerRun { // storage failing: the orders it skipped are not passed over
		for i := range unread {
			finished[i] = finished[i] && !unread[i]
		}
	}

	// What this run adds to the pass: the orders it worked through in order.
	n := done(finished)
	counts := Counts{}
	var heads oldestHeads // the OldestHeadsShown oldest of this run's
	var crit convoy.Histogram
	for i, v := range verdicts[:n] {
		if unread[i] {
			counts[surveyUnread]++
			continue
		}
		counts["n"]++
		counts[string(v.status)]++
		if v.stalled {
			counts[lagStalled2W]++
		}
		if v.head != nil {
			heads.add(*v.head)
		}
		crit.Merge(v.recent)
	}
	to := pass.After
	if n > 0 {
		to = entries[n-1].OrderID
	}
	pass.advance(to, counts, heads.list(), end && n == len(entries) && f.Complete, now)

	all, oldest := pass.rolling()
	surveyed, since := pass.current(now)
	f.Orders, f.StalledTwoWindows, f.UnreadOrders = int(all["n"]), int(all[lagStalled2W]), int(all[surveyUnread])
	for s := range f.ByStatus {
		f.ByStatus[s] = int(all[string(s)])
	}
	f.SurveyedThisPeriod, f.PeriodStartedAt, f.OldestSurveyAt = int(surveyed), since.UTC(), oldest.UTC()
	f.PeriodSeconds = int64(pass.period() / time.Second)
	f.Complete = f.Complete && pass.Last != nil
	f.OldestHeads = pass.shownHeads()
	if n := crit.Count(); n > 0 {
		_, since := convoy.CriticalTimes{}.Recent(now, window) // where the recent window begins
		f.CriticalTime = &CriticalTimeFigures{Count: n, P50Ms: crit.Percentile(0.5), P99Ms: crit.Percentile(0.99), MaxMs: crit.MaxMs,
			SinceSeconds: int64(now.Sub(since) / time.Second)}
	}
	return f, pass
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
