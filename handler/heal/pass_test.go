package heal_test

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/convoy-dev/convoy/handler/convoy"
	"github.com/convoy-dev/convoy/handler/heal"
	"github.com/convoy-dev/convoy/handler/internal/memstore"
	"github.com/convoy-dev/convoy/handler/orders"
	"github.com/convoy-dev/convoy/handler/replay"
)

// surveyed is an active-orders index that records which orders a survey
// read (Published is read once per order surveyed).
type surveyed struct {
	*memstore.Ledgers
	mu  sync.Mutex
	ids []string
}

func (s *surveyed) Published(ctx context.Context, orderID string, seq int64) (convoy.Published, error) {
	s.mu.Lock()
	s.ids = append(s.ids, orderID)
	s.mu.Unlock()
	return s.Ledgers.Published(ctx, orderID, seq)
}

// take returns the orders read since the last take, sorted.
func (s *surveyed) take() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := slices.Sorted(slices.Values(s.ids))
	s.ids = nil
	return out
}

func ids(prefix string, from, to int) []string {
	var out []string
	for i := from; i < to; i++ {
		out = append(out, fmt.Sprintf("%s-%03d", prefix, i))
	}
	return out
}

// TestLagSurveyGoesOnFromWhereTheLastRunStopped (issue 37): with 250
// active orders and LagSurveyOrdersPerRun 100, each run reads 100 orders
// (50 at the index's end), from where the last one stopped, never the same
// twice in a pass; what the runs show counts each order once, as its latest
// survey found it, and says how much of the index that covers. The last
// run surveys 50 (the setting changed): the last pass's figures then stand
// for the rest of its second 100 orders. The expectations are written
// out by hand: o-000…o-199 caught up (ok), o-200…o-249 catching up.
func TestLagSurveyGoesOnFromWhereTheLastRunStopped(t *testing.T) {
	ctx := context.Background()
	f := newFixture()
	ledgers := memstore.NewLedgers()
	ledgers.Now = f.clock.now
	index := &surveyed{Ledgers: ledgers}
	p := convoy.NewProcessor(f.store, convoy.ProcessorOptions{Domain: orders.Domain, Index: f.store, Now: f.clock.now})
	all := ids("o", 0, 250)
	for i, id := range all {
		n := 1
		if i >= 200 {
			n = 2 // seq 2 waits
		}
		if _, err := ledgers.Allocate(ctx, "L", "h", id, n); err != nil {
			t.Fatal(err)
		}
		m := convoy.Message{Seq: 1, MessageID: id + ":1", Command: orders.Transaction{OrderID: id, Op: orders.CreateOrder, Currency: "EUR"}}
		if _, err := p.Process(ctx, id, []convoy.Message{m}); err != nil {
			t.Fatal(err)
		}
	}
	if err := ledgers.Activate(ctx, all); err != nil {
		t.Fatal(err)
	}
	start := f.clock.now()
	run := func(perRun int) *heal.LagFigures {
		t.Helper()
		lag := f.healer(heal.Options{Domain: orders.Domain, Active: index, LagWindow: 5 * time.Minute, LagPerRun: perRun, Disabled: true}).RunOnce(ctx).Summary.Lag
		f.clock.add(time.Minute)
		return lag
	}
	type want struct {
		read                []string
		orders, ok, catchUp int
		complete            bool
		surveyed            int
		period              int64
		oldest              time.Duration // after start
	}
	for i, w := range []want{
		{read: all[:100], orders: 100, ok: 100, surveyed: 100},
		{read: all[100:200], orders: 200, ok: 200, surveyed: 200},
		{read: all[200:], orders: 250, ok: 200, catchUp: 50, complete: true, surveyed: 250, period: 120}, // the pass ends
		{read: all[:100], orders: 250, ok: 200, catchUp: 50, complete: true, surveyed: 100, period: 120, oldest: time.Minute},
	} {
		lag := run(100)
		if got := index.take(); !slices.Equal(got, w.read) {
			t.Fatalf("run %d read %d orders (%v … %v), want %d (%s … %s)", i+1, len(got), first(got), last(got), len(w.read), w.read[0], w.read[len(w.read)-1])
		}
		if lag.Orders != w.orders || lag.ByStatus[convoy.LagOK] != w.ok || lag.ByStatus[convoy.LagCatchingUp] != w.catchUp ||
			lag.Complete != w.complete || lag.SurveyedThisPeriod != w.surveyed || lag.PeriodSeconds != w.period ||
			!lag.OldestSurveyAt.Equal(start.Add(w.oldest)) || lag.OrdersPerRun != 100 {
			t.Errorf("run %d: %d orders %v, complete %t, %d surveyed this period, period %d s, oldest survey %s, %d a run; want %+v",
				i+1, lag.Orders, lag.ByStatus, lag.Complete, lag.SurveyedThisPeriod, lag.PeriodSeconds, lag.OldestSurveyAt, lag.OrdersPerRun, w)
		}
	}
	// 50 a run now: o-100…o-149 surveyed again; o-150…o-199 as the first
	// pass found them (its segment of o-100…o-199, less this pass's).
	lag := run(50)
	if got := index.take(); !slices.Equal(got, all[100:150]) {
		t.Fatalf("the run at 50 a run read %d orders", len(got))
	}
	if lag.Orders != 250 || lag.ByStatus[convoy.LagOK] != 200 || lag.ByStatus[convoy.LagCatchingUp] != 50 || lag.SurveyedThisPeriod != 150 {
		t.Errorf("at 50 a run: %d orders %v, %d surveyed this period; want 250: 200 ok, 50 catching up; 150", lag.Orders, lag.ByStatus, lag.SurveyedThisPeriod)
	}
}

func first(s []string) string {
	if len(s) == 0 {
		return ""
	}
	return s[0]
}

func last(s []string) string {
	if len(s) == 0 {
		return ""
	}
	return s[len(s)-1]
}

// TestStalledOrderReportedWithinPeriodAndTwoWindows (issue 37): what the
// lag survey promises whatever the number of orders: an order whose next
// message waits unprocessed is reported stalled for two windows within the
// period (every active order looked at: 301 orders at 100 a run, 4 runs)
// plus two windows, plus one run, wherever its id puts it in the index and
// wherever the survey stands when it stalls. The other 300 orders are
// blocked (seq 3 parked), so that none leaves the index or stalls.
func TestStalledOrderReportedWithinPeriodAndTwoWindows(t *testing.T) {
	const (
		window = 5 * time.Minute
		perRun = 100
		every  = time.Minute // the schedule
		period = 4 * every   // ceil(301 / 100) runs
	)
	for _, x := range []string{"a-stuck", "o-150-stuck", "z-stuck"} {
		for _, runsBefore := range []int{0, 1, 2, 3} {
			ctx := context.Background()
			f := newFixture()
			ledgers := memstore.NewLedgers()
			ledgers.Now = f.clock.now
			p := convoy.NewProcessor(f.store, convoy.ProcessorOptions{Domain: orders.Domain, Index: f.store, Now: f.clock.now})
			others := ids("o", 0, 300)
			for _, id := range others {
				if _, err := ledgers.Allocate(ctx, "L", "h", id, 3); err != nil {
					t.Fatal(err)
				}
				for _, seq := range []int64{1, 3} {
					tx := orders.Transaction{OrderID: id, Op: orders.CreateOrder, Currency: "EUR"}
					if seq == 3 {
						amount := int64(3)
						tx = orders.Transaction{OrderID: id, Op: orders.AddTransaction, TxID: "t3", Amount: &amount}
					}
					if _, err := p.Process(ctx, id, []convoy.Message{{Seq: seq, MessageID: fmt.Sprintf("%s:%d", id, seq), Command: tx}}); err != nil {
						t.Fatal(err)
					}
				}
			}
			if err := ledgers.Activate(ctx, others); err != nil {
				t.Fatal(err)
			}
			h := f.healer(heal.Options{Domain: orders.Domain, Active: ledgers, LagWindow: window, LagPerRun: perRun, Disabled: true})
			for range runsBefore { // wherever the survey stands
				h.RunOnce(ctx)
				f.clock.add(every)
			}
			// x is published to; its message is never processed.
			stalledAt := f.clock.now()
			if _, err := ledgers.Allocate(ctx, "L-x", "h", x, 1); err != nil {
				t.Fatal(err)
			}
			if err := ledgers.Activate(ctx, []string{x}); err != nil {
				t.Fatal(err)
			}
			var reported time.Duration
			for reported == 0 && f.clock.now().Sub(stalledAt) <= 2*window+period+2*every {
				f.clock.add(every)
				lag := h.RunOnce(ctx).Summary.Lag
				if lag.StalledTwoWindows > 0 {
					if lag.StalledTwoWindows != 1 || lag.ByStatus[convoy.LagStalled] != 1 || lag.Orders != 301 {
						t.Fatalf("%s: %d stalled for two windows, %d orders %v", x, lag.StalledTwoWindows, lag.Orders, lag.ByStatus)
					}
					reported = f.clock.now().Sub(stalledAt)
				}
			}
			switch {
			case reported == 0:
				t.Errorf("%s (%d runs before): not reported within %s", x, runsBefore, 2*window+period+2*every)
			case reported < 2*window:
				t.Errorf("%s (%d runs before): reported stalled for two windows after %s", x, runsBefore, reported)
			case reported > 2*window+period+every:
				t.Errorf("%s (%d runs before): reported after %s, more than two windows, the period and a run (%s)", x, runsBefore, reported, 2*window+period+every)
			}
		}
	}
}

// headsRead is a blocked index that counts its head reads.
type headsRead struct {
	*memstore.Store
	mu    sync.Mutex
	reads int
}

func (h *headsRead) Head(ctx context.Context, orderID string) (convoy.Head, bool, error) {
	h.mu.Lock()
	h.reads++
	h.mu.Unlock()
	return h.Store.Head(ctx, orderID)
}

func (h *headsRead) take() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	n := h.reads
	h.reads = 0
	return n
}

// TestBlockedSurveyGoesOnFromWhereTheLastRunStopped (issue 37): a run
// verifies at most AutoReplayBlockedPerRun entries of the blocked index
// against their orders' heads (100 here), from where the last run stopped:
// 251 entries take three runs of 100, 100 and 51 head reads, not 251 each;
// an entry the processor left behind (a confirm that outlived its block) at
// the index's end is removed by the third, and the figures count every
// blocked order once the pass is whole.
func TestBlockedSurveyGoesOnFromWhereTheLastRunStopped(t *testing.T) {
	ctx := context.Background()
	f := newFixture()
	p := convoy.NewProcessor(f.store, convoy.ProcessorOptions{Domain: orders.Domain, Index: f.store, Now: f.clock.now})
	amount := int64(2)
	for _, id := range ids("b", 0, 250) {
		m := convoy.Message{Seq: 2, MessageID: id + ":2", Command: orders.Transaction{OrderID: id, Op: orders.AddTransaction, TxID: "t2", Amount: &amount}}
		if _, err := p.Process(ctx, id, []convoy.Message{m}); err != nil {
			t.Fatal(err)
		}
	}
	// "stale": applied seq 1, nothing parked, yet a confirmed entry, newer
	// than all the others (the last of the index).
	m := convoy.Message{Seq: 1, MessageID: "stale:1", Command: orders.Transaction{OrderID: "stale", Op: orders.CreateOrder, Currency: "EUR"}}
	if _, err := p.Process(ctx, "stale", []convoy.Message{m}); err != nil {
		t.Fatal(err)
	}
	since := f.clock.now().Add(time.Hour)
	if err := f.store.MarkBlocked(ctx, "stale", since, 1); err != nil {
		t.Fatal(err)
	}
	if _, err := f.store.UpdateBlocked(ctx, "stale", since, convoy.BlockedUpdate{Figures: true, Confirmed: true, Version: 1, Parked: 1}, "*"); err != nil {
		t.Fatal(err)
	}
	idx := &headsRead{Store: f.store}
	h := heal.New(idx, f.store, f.store, func() (replay.Source, convoy.Sender, func(), error) { return f.q, f.sender, func() {}, nil },
		heal.Options{Domain: orders.Domain, Now: f.clock.now, BlockedPerRun: 100, Disabled: true})
	staleListed := func() bool {
		entries, _, _ := f.store.ScanBlocked(ctx, "", 1000)
		return slices.ContainsFunc(entries, func(e convoy.BlockedEntry) bool { return e.OrderID == "stale" })
	}
	for i, w := range []struct {
		reads, blocked int
		complete, kept bool
	}{{100, 100, false, true}, {100, 200, false, true}, {51, 250, true, false}, {100, 250, true, false}} {
		s := h.RunOnce(ctx).Summary
		if reads := idx.take(); reads != w.reads || s.BlockedOrders != w.blocked || s.BlockedComplete != w.complete || staleListed() != w.kept {
			t.Errorf("run %d: %d head reads, %d blocked orders (whole index: %t), the stale entry kept: %t; want %+v",
				i+1, reads, s.BlockedOrders, s.BlockedComplete, staleListed(), w)
		}
		f.clock.add(time.Minute)
	}
}

// cutAt is a blocked index that ends its run's context at its n-th head
// read, as the host does when it cancels an invocation: that read and every
// later one fail, as Table Storage's do once their context ended.
type cutAt struct {
	*memstore.Store
	n      int
	cancel context.CancelFunc
	read   []string // the orders whose head was read
}

func (c *cutAt) Head(ctx context.Context, orderID string) (convoy.Head, bool, error) {
	c.read = append(c.read, orderID)
	if c.n--; c.n == 0 {
		c.cancel()
	}
	if err := ctx.Err(); err != nil {
		return convoy.Head{}, false, err
	}
	return c.Store.Head(ctx, orderID)
}

// TestCutRunLeavesTheBlockedSurveyWhereItStopped: a run cut short in the
// middle of its blocked survey moves the survey's cursor past the entries
// it verified and no further; the next run verifies the rest, and only then
// is the pass whole, counting every blocked order once.
func TestCutRunLeavesTheBlockedSurveyWhereItStopped(t *testing.T) {
	f := newFixture()
	p := convoy.NewProcessor(f.store, convoy.ProcessorOptions{Domain: orders.Domain, Index: f.store, Now: f.clock.now})
	amount := int64(2)
	all := ids("b", 0, 30)
	for _, id := range all {
		m := convoy.Message{Seq: 2, MessageID: id + ":2", Command: orders.Transaction{OrderID: id, Op: orders.AddTransaction, TxID: "t2", Amount: &amount}}
		if _, err := p.Process(context.Background(), id, []convoy.Message{m}); err != nil {
			t.Fatal(err)
		}
		f.clock.add(time.Millisecond)
	}
	idx := &cutAt{Store: f.store}
	h := heal.New(idx, f.store, f.store, func() (replay.Source, convoy.Sender, func(), error) { return f.q, f.sender, func() {}, nil },
		heal.Options{Domain: orders.Domain, Now: f.clock.now, BlockedPerRun: 100, Disabled: true, Sequential: true})
	ctx, cancel := context.WithCancel(context.Background())
	idx.n, idx.cancel = 10, cancel
	s := h.RunOnce(ctx).Summary
	cut := slices.Clone(idx.read)
	if s == nil || s.BlockedComplete || len(cut) >= len(all) {
		t.Fatalf("a run cut at its 10th head read (%d read): summary %+v; want the blocked figures not complete", len(cut), s)
	}
	f.clock.add(time.Minute)
	idx.read, idx.n = nil, 0
	s = h.RunOnce(context.Background()).Summary
	for _, id := range all[len(cut)-1:] { // from the one whose read failed
		if !slices.Contains(idx.read, id) {
			t.Errorf("%s, which the cut run did not verify, was not verified by the next run", id)
		}
	}
	if s == nil || !s.BlockedComplete || s.BlockedOrders != len(all) {
		t.Fatalf("after the run that ended the pass: %+v; want all %d blocked orders, the pass whole", s, len(all))
	}
}

// readsFailing is an active-orders index whose reads of what was published
// fail from the failFrom-th on (0: never), and that records the orders read.
type readsFailing struct {
	*memstore.Ledgers
	failFrom, reads int
	read            []string
}

func (r *readsFailing) Published(ctx context.Context, orderID string, seq int64) (convoy.Published, error) {
	if r.reads++; r.failFrom > 0 && r.reads >= r.failFrom {
		return convoy.Published{}, fmt.Errorf("storage is down")
	}
	r.read = append(r.read, orderID)
	return r.Ledgers.Published(ctx, orderID, seq)
}

// TestLagSurveyGoesOnBeforeItsFirstFailure: a lag survey that stops at a
// failed read leaves its cursor before the orders it did not read; the next
// run reads them, so that every order of the index is surveyed in its turn.
func TestLagSurveyGoesOnBeforeItsFirstFailure(t *testing.T) {
	ctx := context.Background()
	f := newFixture()
	ledgers := memstore.NewLedgers()
	ledgers.Now = f.clock.now
	all := ids("o", 0, 300)
	for _, id := range all {
		if _, err := ledgers.Allocate(ctx, "L", "h", id, 1); err != nil {
			t.Fatal(err)
		}
	}
	if err := ledgers.Activate(ctx, all); err != nil {
		t.Fatal(err)
	}
	index := &readsFailing{Ledgers: ledgers, failFrom: 10}
	h := f.healer(heal.Options{Domain: orders.Domain, Active: index, LagPerRun: 100, Disabled: true, Sequential: true})
	if lag := h.RunOnce(ctx).Summary.Lag; lag.Complete || len(index.read) >= 100 {
		t.Fatalf("a survey failing at its 10th read: %d read, %+v; want it stopped there, incomplete", len(index.read), lag)
	}
	f.clock.add(time.Minute)
	index.failFrom = 0
	h.RunOnce(ctx)
	for _, id := range all[:100] {
		if id != all[9] && !slices.Contains(index.read, id) { // all[9]: the failed read
			t.Errorf("%s, within the first run's budget and not read by it, was not read by the next run either", id)
		}
	}
}
