package bench_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/data/aztables"

	"github.com/convoy-dev/convoy/handler"
	"github.com/convoy-dev/convoy/handler/convoy"
	"github.com/convoy-dev/convoy/handler/heal"
	"github.com/convoy-dev/convoy/handler/internal/memstore"
	"github.com/convoy-dev/convoy/handler/keyed"
	"github.com/convoy-dev/convoy/handler/ledger"
	"github.com/convoy-dev/convoy/handler/orders"
	"github.com/convoy-dev/convoy/handler/tablestore"
)

// BenchmarkAutoReplayScale (issue 37, "every periodic cost within a budget
// that does not grow with the number of orders"): one AutoReplay run's
// Table requests and time with 1,000, 10,000 and 100,000 active orders, one
// in ten of them blocked (seq 3 parked behind seq 2, in the blocked index),
// and how long a newly stalled order takes to be reported at each size.
//
// The runs survey at most 1,000 active orders and verify at most 100
// blocked entries each (LagSurveyOrdersPerRun, AutoReplayBlockedPerRun),
// below every size, so that the three sizes' runs can be compared: their
// requests must be the same. 10,000 and 100,000 orders are set up in
// memstore, each store call counted as the Table request tablestore makes
// for it (countedHeal), by the kinds kindedTransport counts; Azurite cannot
// hold 100,000 in the suite's time. The same run on 10,000 orders on
// Azurite, counted by the transport, ties the two: its requests must be the
// memstore run's, kind for kind.
//
// The stalled order: its message published two windows ago and never
// processed (stalled for two windows from the start), placed in the index
// just behind where the survey stands (the worst place: the survey has just
// passed it), the runs a minute apart on a simulated clock. It must be
// reported within a pass of the index (ceil(orders / per run) runs) and one
// run more; with the two windows it took to stall, within the period plus
// two windows that docs/operations.md states.
//
// Then, as the alternative design would find stalled orders "from what
// commits write anyway": one query of every order's head (RowKey 'h', across
// partitions) on the Azurite setup, its pages and time against the run's.
func BenchmarkAutoReplayScale(b *testing.B) {
	const (
		lagPerRun     = 1000
		blockedPerRun = 100
		window        = 5 * time.Minute
		every         = time.Minute // the schedule
	)
	opts := func(active convoy.ActiveIndex, now func() time.Time, resume func(context.Context, string) (convoy.Result, error)) heal.Options {
		return heal.Options{Domain: orders.Domain, PeekTimeout: handler.DeadLetterPeekDeadline, PassTimeout: handler.AutoReplayPassDeadline,
			Active: active, LagWindow: window, LagPerRun: lagPerRun, BlockedPerRun: blockedPerRun, Now: now, Resume: resume}
	}
	for range b.N {
		ctx := b.Context()
		type sized struct {
			kinds    map[string]int64 // the first run's requests, by kind
			trips    int64
			most     int64 // the most requests of any run measured
			median   time.Duration
			reported time.Duration // since the message was published
			runs     int
		}
		bySize := map[int]sized{}
		for _, n := range []int{1_000, 10_000, 100_000} {
			start := time.Now()
			t0 := time.Date(2026, 11, 27, 10, 0, 0, 0, time.UTC)
			c := &countedHeal{}
			store := &countedOrders{Store: memstore.New(), c: c}
			ledgers := memstore.NewLedgers()
			ledgers.Now = func() time.Time { return t0.Add(24 * time.Hour) }
			active := &countedActive{Ledgers: ledgers, c: c}
			scaleOrders(b, ctx, n, store, ledgers, t0.Add(24*time.Hour))
			setup := time.Since(start)

			clock := t0
			sb := &sbCounter{q: newDeadLetterQueue()}
			p := convoy.NewProcessor(store, convoy.ProcessorOptions{Domain: orders.Domain, Index: store})
			h := heal.New(store, store, store, sb.open, opts(active, func() time.Time { return clock }, p.Resume))
			var s sized
			var times []time.Duration
			run := func() heal.Run {
				c.reset()
				active.take()
				runCtx, cancel := context.WithTimeout(ctx, handler.AutoReplayDeadline)
				defer cancel()
				t := time.Now()
				r := h.RunOnce(runCtx)
				times = append(times, time.Since(t))
				s.most = max(s.most, c.total())
				if r.Paused != "" || r.Summary == nil || r.Summary.Lag == nil {
					b.Fatalf("%d orders: the run: paused %q, %+v", n, r.Paused, r.Summary)
				}
				clock = clock.Add(every)
				s.runs++
				return r
			}
			run()
			s.kinds, s.trips = c.snapshot(), c.total()
			for range 3 {
				run()
			}
			// The stalled order, just behind the survey: after the first
			// order the last run surveyed.
			behind := active.take()
			if len(behind) == 0 {
				b.Fatalf("%d orders: the last run surveyed none", n)
			}
			x := slices.Min(behind) + "-stalled"
			ledgers.Now = func() time.Time { return clock.Add(-2 * window) }
			if _, err := ledgers.Allocate(ctx, "L-x", "h", x, 1); err != nil {
				b.Fatal(err)
			}
			if err := ledgers.Activate(ctx, []string{x}); err != nil {
				b.Fatal(err)
			}
			published := clock.Add(-2 * window)
			pass := (n + 1 + lagPerRun - 1) / lagPerRun
			for s.reported == 0 && clock.Sub(published) <= 2*window+time.Duration(pass+2)*every {
				r := run()
				if r.Summary.Lag.StalledTwoWindows > 0 {
					s.reported = clock.Add(-every).Sub(published) // the run's own time
				}
			}
			if s.reported == 0 {
				b.Fatalf("%d orders: the stalled order was not reported within %d runs", n, pass+2)
			}
			s.median = medianTime(times)
			bySize[n] = s
			bound := 2*window + time.Duration(pass+1)*every
			b.Logf("%d active orders (%d blocked), memstore: set up in %s; a run: %d requests (%s), the most of %d runs %d, median %s; the stalled order reported %s after its message was published (bound %s)",
				n, n/10, setup.Round(time.Millisecond), s.trips, kindsString(s.kinds), s.runs, s.most, s.median.Round(10*time.Microsecond), s.reported, bound)
			record(figure{name: fmt.Sprintf("autoreplay_scale_run_trips_%d", n), value: float64(s.trips), unit: "trips",
				what: fmt.Sprintf("Table requests of one AutoReplay run, %d active orders (%d blocked), %d surveyed and %d blocked entries verified a run, memstore counted as tablestore: %s; the most of %d runs: %d",
					n, n/10, lagPerRun, blockedPerRun, kindsString(s.kinds), s.runs, s.most)})
			record(figure{name: fmt.Sprintf("autoreplay_scale_stalled_report_minutes_%d", n), value: s.reported.Minutes(), unit: "min",
				what: fmt.Sprintf("from a message published to an order that never processes it to the run that reports the order stalled for two windows, placed just behind the survey, %d active orders: two %s windows, a pass of %d runs a minute apart and one run at most",
					n, window, pass),
				target: atMost(bound.Minutes())})
		}
		small, large := bySize[1_000], bySize[100_000]
		ratio("autoreplay_scale_trips_100000_vs_1000", float64(large.most)/float64(small.most),
			fmt.Sprintf("the most Table requests of a run with 100,000 active orders (%d) / with 1,000 (%d)", large.most, small.most), atMost(1))
		ratio("autoreplay_scale_time_100000_vs_1000", float64(large.median)/float64(small.median),
			fmt.Sprintf("a run's time (median of its runs, memstore) with 100,000 active orders (%s) / with 1,000 (%s)",
				large.median.Round(10*time.Microsecond), small.median.Round(10*time.Microsecond)), atMost(1.5))

		// Azurite, 10,000 orders, the first run.
		az := ownAzurite(b)
		_, ordersTable := az.NewNamedTable(b, nil)
		_, ledgerTable := az.NewNamedTable(b, nil)
		start := time.Now()
		setupStore := storeOn(b, az, ordersTable, nil, tablestore.ProcessorRetry)
		ids := scaleOrders(b, ctx, 10_000, setupStore, ledgersOn(b, az, ledgerTable, nil), time.Now().Add(24*time.Hour))
		setup := time.Since(start)
		trips := &kindedTransport{}
		operator := storeOn(b, az, ordersTable, trips, tablestore.OperatorRetry)
		sb := &sbCounter{q: newDeadLetterQueue()}
		p := convoy.NewProcessor(operator, convoy.ProcessorOptions{Domain: orders.Domain, Index: operator})
		h := heal.New(operator, operator, operator, sb.open, opts(ledgersOn(b, az, ledgerTable, trips), nil, p.Resume))
		runCtx, cancel := context.WithTimeout(ctx, handler.AutoReplayDeadline)
		t := time.Now()
		r := h.RunOnce(runCtx)
		azTime := time.Since(t)
		cancel()
		if r.Paused != "" || r.Summary == nil || r.Summary.Lag == nil || r.Summary.Lag.SurveyedThisPeriod != lagPerRun {
			b.Fatalf("the Azurite run: paused %q, %+v", r.Paused, r.Summary)
		}
		azKinds := trips.snapshot()
		mem := bySize[10_000]
		same := fmt.Sprint(azKinds) == fmt.Sprint(mem.kinds)
		b.Logf("10,000 active orders on Azurite: set up in %s; the run: %s, %d requests (%s); memstore's: %d (%s); the same: %t",
			setup.Round(time.Millisecond), azTime.Round(time.Millisecond), trips.trips.Load(), kindsString(azKinds), mem.trips, kindsString(mem.kinds), same)
		record(figure{name: "autoreplay_scale_run_trips_10000_azurite", value: float64(trips.trips.Load()), unit: "trips",
			what: fmt.Sprintf("the same run on Azurite, 10,000 active orders, counted by the transport (%s, %s); memstore's count: %d", kindsString(azKinds), azTime.Round(time.Millisecond), mem.trips)})
		ratio("autoreplay_scale_azurite_vs_memstore_trips", float64(trips.trips.Load())/float64(mem.trips),
			"the Azurite run's requests / memstore's at 10,000 (1: the counted store makes the requests tablestore makes, kind for kind)", atMost(1))
		record(figure{name: "autoreplay_scale_run_seconds_10000_azurite", value: azTime.Seconds(), unit: "s",
			what: fmt.Sprintf("that run's time on Azurite (%d orders surveyed, %d blocked entries verified)", lagPerRun, blockedPerRun)})

		// The alternative: every head, one query across partitions.
		plain := plainClient(b, az, ordersTable)
		filter := "RowKey eq 'h'"
		t = time.Now()
		pages, heads := 0, 0
		pager := plain.NewListEntitiesPager(&aztables.ListEntitiesOptions{Filter: &filter})
		for pager.More() {
			page, err := pager.NextPage(ctx)
			if err != nil {
				b.Fatal(err)
			}
			pages++
			heads += len(page.Entities)
		}
		scan := time.Since(t)
		if heads != len(ids) {
			b.Fatalf("the head scan read %d heads of %d orders", heads, len(ids))
		}
		record(figure{name: "lag_head_scan_pages_10000_azurite", value: float64(pages), unit: "pages",
			what: fmt.Sprintf("one query of every order's head across partitions (RowKey eq 'h'), 10,000 orders on Azurite: %d pages, %s (the run: %s); in Azure the service reads every row of the table for it, histories included", pages, scan.Round(time.Millisecond), azTime.Round(time.Millisecond))})
		ratio("lag_head_scan_vs_run_10000_azurite", float64(scan)/float64(azTime),
			"that scan's time / the budgeted run's time, 10,000 orders on Azurite", target{})
	}
}

// scaleOrders sets up n active orders: each published 1 seq and applied,
// but one in ten published 3 seqs, seq 1 applied and seq 3 parked (blocked:
// in the blocked index). at is the processor's and, for memstore, the
// allocations' clock: after every run the benchmark makes, so that no order
// looks idle (and leaves the index) or stalls while it runs.
func scaleOrders(b *testing.B, ctx context.Context, n int, store interface {
	convoy.Store
	convoy.BlockedIndex
}, ledgers interface {
	ledger.Store
	convoy.ActiveIndex
}, at time.Time) []string {
	b.Helper()
	ids := make([]string, n)
	for i := range ids {
		ids[i] = fmt.Sprintf("sc-%06d", i)
	}
	p := convoy.NewProcessor(store, convoy.ProcessorOptions{Domain: orders.Domain, Index: store, Now: func() time.Time { return at }, CacheSize: 16})
	parallel(b, ids, func(id string) error {
		var k int
		fmt.Sscanf(id, "sc-%d", &k)
		count := 1
		if k%10 == 0 {
			count = 3
		}
		if _, err := ledgers.Allocate(ctx, "L-sc", "h", id, count); err != nil {
			return err
		}
		msgs := []convoy.Message{{Seq: 1, MessageID: "L-sc:" + id, Command: orders.Transaction{OrderID: id, Op: orders.CreateOrder, Currency: "EUR"}}}
		if count == 3 {
			amount := int64(3)
			msgs = append(msgs, convoy.Message{Seq: 3, MessageID: "L-sc:" + id + ":3", Command: orders.Transaction{OrderID: id, Op: orders.AddTransaction, TxID: "t3", Amount: &amount}})
		}
		for _, m := range msgs {
			if _, err := p.Process(ctx, id, []convoy.Message{m}); err != nil {
				return err
			}
		}
		return nil
	})
	if err := ledgers.Activate(ctx, ids); err != nil {
		b.Fatal(err)
	}
	return ids
}

// countedHeal counts the store calls of an AutoReplay run on memstore as
// the Table requests tablestore makes for each, by the kinds
// kindedTransport tells apart.
type countedHeal struct {
	mu    sync.Mutex
	kinds map[string]int64
}

func (c *countedHeal) add(kind string, n int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.kinds == nil {
		c.kinds = map[string]int64{}
	}
	c.kinds[kind] += n
}

func (c *countedHeal) reset() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.kinds = nil
}

func (c *countedHeal) snapshot() map[string]int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := map[string]int64{}
	for k, v := range c.kinds {
		out[k] = v
	}
	return out
}

func (c *countedHeal) total() int64 {
	var n int64
	for _, v := range c.snapshot() {
		n += v
	}
	return n
}

// snapshot is the transport's counts by kind, as countedHeal's.
func (k *kindedTransport) snapshot() map[string]int64 {
	k.mu.Lock()
	defer k.mu.Unlock()
	out := map[string]int64{}
	for kind, v := range k.kinds {
		out[kind] = v
	}
	return out
}

func kindsString(kinds map[string]int64) string {
	var parts []string
	for _, kind := range []string{"query", "point read", "index write", "other write", "transaction"} {
		if n := kinds[kind]; n > 0 {
			parts = append(parts, fmt.Sprintf("%d %s", n, kind))
		}
	}
	return strings.Join(parts, ", ")
}

// countedOrders is the orders table in memstore: the order store, the
// blocked index and the auto-replay states, counted.
type countedOrders struct {
	*memstore.Store
	c *countedHeal
}

func (s *countedOrders) Load(ctx context.Context, id string) (*convoy.Key, error) {
	s.c.add("query", 1) // the head and the first parked rows
	return s.Store.Load(ctx, id)
}

func (s *countedOrders) Parked(ctx context.Context, id string, after int64, limit int) ([]convoy.Message, bool, error) {
	s.c.add("query", 1)
	return s.Store.Parked(ctx, id, after, limit)
}

func (s *countedOrders) IsParked(ctx context.Context, id string, seq int64) (bool, error) {
	s.c.add("point read", 1)
	return s.Store.IsParked(ctx, id, seq)
}

func (s *countedOrders) Row(ctx context.Context, id string, ref keyed.RowRef) (keyed.Props, bool, error) {
	s.c.add("point read", 1)
	return s.Store.Row(ctx, id, ref)
}

func (s *countedOrders) Commit(ctx context.Context, o *convoy.Key, base int64, ch *convoy.Change) error {
	s.c.add("transaction", 1)
	return s.Store.Commit(ctx, o, base, ch)
}

func (s *countedOrders) MarkBlocked(ctx context.Context, id string, since time.Time, version int64) error {
	s.c.add("index write", 1)
	return s.Store.MarkBlocked(ctx, id, since, version)
}

func (s *countedOrders) UpdateBlocked(ctx context.Context, id string, since time.Time, u convoy.BlockedUpdate, etag string) (string, error) {
	s.c.add("index write", 1)
	return s.Store.UpdateBlocked(ctx, id, since, u, etag)
}

func (s *countedOrders) SetNotes(ctx context.Context, notes []convoy.BlockedNote) error {
	s.c.add("transaction", int64((len(notes)+99)/100)) // 100 an entity-group transaction
	return s.Store.SetNotes(ctx, notes)
}

func (s *countedOrders) ClearBlocked(ctx context.Context, id string, since time.Time, etag string, upTo int64) error {
	s.c.add("index write", 1)
	return s.Store.ClearBlocked(ctx, id, since, etag, upTo)
}

func (s *countedOrders) ClearStale(ctx context.Context, e convoy.BlockedEntry) error {
	s.c.add("index write", 1)
	return s.Store.ClearStale(ctx, e)
}

func (s *countedOrders) ScanBlocked(ctx context.Context, after string, limit int) ([]convoy.BlockedEntry, bool, error) {
	s.c.add("query", 1)
	return s.Store.ScanBlocked(ctx, after, limit)
}

func (s *countedOrders) Head(ctx context.Context, id string) (convoy.Head, bool, error) {
	s.c.add("point read", 1)
	return s.Store.Head(ctx, id)
}

func (s *countedOrders) ReplayState(ctx context.Context, id string) (heal.State, string, bool, error) {
	s.c.add("point read", 1)
	return s.Store.ReplayState(ctx, id)
}

func (s *countedOrders) PutReplayState(ctx context.Context, st heal.State, etag string) (string, error) {
	s.c.add("other write", 1)
	return s.Store.PutReplayState(ctx, st, etag)
}

func (s *countedOrders) DeleteReplayState(ctx context.Context, id, etag string) error {
	s.c.add("other write", 1)
	return s.Store.DeleteReplayState(ctx, id, etag)
}

func (s *countedOrders) ReplayStates(ctx context.Context, after string, limit int) ([]heal.State, bool, error) {
	s.c.add("query", 1)
	return s.Store.ReplayStates(ctx, after, limit)
}

func (s *countedOrders) Health(ctx context.Context) (heal.Health, string, bool, error) {
	s.c.add("point read", 1)
	return s.Store.Health(ctx)
}

func (s *countedOrders) PutHealth(ctx context.Context, h heal.Health, etag string) (string, error) {
	s.c.add("other write", 1)
	return s.Store.PutHealth(ctx, h, etag)
}

// countedActive is the active-orders index in memstore, counted; take
// returns the orders surveyed (Published) since it was last called.
type countedActive struct {
	*memstore.Ledgers
	c        *countedHeal
	mu       sync.Mutex
	surveyed []string
}

func (a *countedActive) take() []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	out := a.surveyed
	a.surveyed = nil
	return out
}

func (a *countedActive) ScanActive(ctx context.Context, after string, limit int) ([]convoy.ActiveOrder, bool, error) {
	a.c.add("query", 1)
	return a.Ledgers.ScanActive(ctx, after, limit)
}

func (a *countedActive) Published(ctx context.Context, id string, seq int64) (convoy.Published, error) {
	a.c.add("point read", 1) // the counter (every order here was published to, recently)
	a.mu.Lock()
	a.surveyed = append(a.surveyed, id)
	a.mu.Unlock()
	return a.Ledgers.Published(ctx, id, seq)
}

func (a *countedActive) NoteDeadLettered(ctx context.Context, id string, seq int64) error {
	a.c.add("other write", 1) // a merge into the counter
	return a.Ledgers.NoteDeadLettered(ctx, id, seq)
}

func (a *countedActive) MarkActive(ctx context.Context, id string, seen convoy.Seen) error {
	a.c.add("other write", 1)
	return a.Ledgers.MarkActive(ctx, id, seen)
}

func (a *countedActive) Deactivate(ctx context.Context, e convoy.ActiveOrder) error {
	a.c.add("other write", 1)
	return a.Ledgers.Deactivate(ctx, e)
}
