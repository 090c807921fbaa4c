package bench_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/data/aztables"

	"github.com/convoy-dev/convoy/handler"
	"github.com/convoy-dev/convoy/handler/convoy"
	"github.com/convoy-dev/convoy/handler/heal"
	"github.com/convoy-dev/convoy/handler/internal/azurite"
	"github.com/convoy-dev/convoy/handler/orders"
	"github.com/convoy-dev/convoy/handler/tablestore"
)

// BenchmarkLagSurvey (issue 28, "the cost stays bounded"): with 10,000
// active orders on Azurite (each given seqs 1 to 3 by publishing, in the
// active-orders index, seq 1 applied by the processor), what the lag costs:
//   - the summary (heal.Healer.Summarize): Table round trips, whatever the
//     number of active orders (it reads the last run's figures);
//   - one AutoReplay run's lag survey: its Table round trips per active
//     order (an AutoReplay run without the survey, on the same state, is
//     the baseline subtracted), and its time against 20,000 plain point
//     reads of the same tables, 32 at a time, in the same run.
//
// The processor's steady state is BenchmarkRoundTrips' roundtrips_single.
func BenchmarkLagSurvey(b *testing.B) {
	const active = 10_000
	for range b.N {
		ctx := b.Context()
		az := ownAzurite(b)
		_, ordersTable := az.NewNamedTable(b, nil)
		_, ledgerTable := az.NewNamedTable(b, nil)
		ids := orderIDs("lag", active)

		// Setup: publishing's allocations and index entries, and seq 1 of
		// each order applied by the processor (its head, critical times).
		start := time.Now()
		setupLedgers := ledgersOn(b, az, ledgerTable, nil)
		parallel(b, ids, func(id string) error {
			_, err := setupLedgers.Allocate(ctx, "L-lag", "h", id, 3)
			return err
		})
		if err := setupLedgers.Activate(ctx, ids); err != nil {
			b.Fatal(err)
		}
		procStore := storeOn(b, az, ordersTable, nil, tablestore.ProcessorRetry)
		p := convoy.NewProcessor(procStore, convoy.ProcessorOptions{Domain: orders.Domain, Index: procStore})
		parallel(b, ids, func(id string) error {
			m := convoy.Message{Seq: 1, MessageID: "L-lag:" + id, EnqueuedAt: time.Now().Add(-150 * time.Millisecond),
				Command: orders.Transaction{OrderID: id, Op: orders.CreateOrder, Currency: "EUR"}}
			_, err := p.Process(ctx, id, []convoy.Message{m})
			return err
		})
		setup := time.Since(start)
		b.Logf("setup: %d orders allocated, indexed and applied in %s", active, setup.Round(time.Millisecond))

		// The operator's clients, as serve.go builds them, counted.
		trips := &kindedTransport{}
		operator := storeOn(b, az, ordersTable, trips, tablestore.OperatorRetry)
		ledgers := ledgersOn(b, az, ledgerTable, trips)
		sb := &sbCounter{q: newDeadLetterQueue()}
		healer := func(withLag bool) *heal.Healer {
			opts := heal.Options{Domain: orders.Domain, Disabled: true, PeekTimeout: handler.DeadLetterPeekDeadline, PassTimeout: handler.AutoReplayPassDeadline}
			if withLag {
				opts.Active = ledgers
			}
			return heal.New(operator, operator, operator, sb.open, opts)
		}
		runOnce := func(h *heal.Healer) (heal.Run, int64, time.Duration) {
			trips.reset()
			runCtx, cancel := context.WithTimeout(ctx, handler.AutoReplayDeadline)
			defer cancel()
			t0 := time.Now()
			run := h.RunOnce(runCtx)
			return run, trips.trips.Load(), time.Since(t0)
		}
		_, baseTrips, baseTime := runOnce(healer(false))
		run, lagTrips, lagTime := runOnce(healer(true))
		kinds := trips.breakdown()
		lag := run.Summary.Lag
		if lag == nil || lag.Orders != active || !lag.Complete || lag.ByStatus[convoy.LagCatchingUp] != active || lag.CriticalTime == nil {
			b.Fatalf("the survey: %+v", lag)
		}
		perOrder := float64(lagTrips-baseTrips) / active
		b.Logf("an AutoReplay run with the lag survey: %s, %d Table round trips (%s); without: %s, %d; critical time %+v",
			lagTime.Round(10*time.Millisecond), lagTrips, kinds, baseTime.Round(10*time.Millisecond), baseTrips, *lag.CriticalTime)

		// Baseline: 20,000 plain point reads of the same rows (each order's
		// head and counter), 32 at a time.
		plainOrders, plainLedgers := plainClient(b, az, ordersTable), plainClient(b, az, ledgerTable)
		t0 := time.Now()
		parallelN(b, 32, ids, func(id string) error {
			if _, err := plainOrders.GetEntity(ctx, id, "h", nil); err != nil {
				return err
			}
			_, err := plainLedgers.GetEntity(ctx, "order:"+id, "counter", nil)
			return err
		})
		plainTime := time.Since(t0)

		// The summary, 21 times.
		summarizer := healer(false) // any instance: it reads the record
		var sumTrips []int64
		for range 21 {
			trips.reset()
			s, err := summarizer.Summarize(ctx)
			if err != nil || s.Lag == nil || s.Lag.Orders != active {
				b.Fatalf("summary %+v, %v", s.Lag, err)
			}
			sumTrips = append(sumTrips, trips.trips.Load())
		}

		record(figure{name: "lag_summary_trips", value: float64(slices.Max(sumTrips)), unit: "trips",
			what: fmt.Sprintf("Table round trips per summary with its lag figures (Summarize, the most of 21), %d active orders", active), target: atMost(3)})
		record(figure{name: "lag_survey_trips_per_order", value: perOrder, unit: "trips/order",
			what: fmt.Sprintf("Table round trips of an AutoReplay run's lag survey per active order (%d in the run, %d without the survey), %d active orders: head and where its next seq was allocated, plus the index's pages",
				lagTrips, baseTrips, active), target: atMost(2.05)})
		ratio("lag_survey_vs_point_reads", float64(lagTime-baseTime)/float64(plainTime),
			fmt.Sprintf("the survey's time (the run with it %s, without %s) / %d plain point reads of the same rows, 32 at a time (%s)",
				lagTime.Round(10*time.Millisecond), baseTime.Round(10*time.Millisecond), 2*active, plainTime.Round(10*time.Millisecond)), target{})
		record(figure{name: "lag_critical_p50_ms", value: float64(lag.CriticalTime.P50Ms), unit: "ms",
			what: fmt.Sprintf("the survey's critical time p50 (p99 %d ms, max %d ms) over the %d applied transactions, each enqueued 150 ms before the processor was called with it",
				lag.CriticalTime.P99Ms, lag.CriticalTime.MaxMs, lag.CriticalTime.Count)})
		record(figure{name: "lag_setup_seconds", value: setup.Seconds(), unit: "s",
			what: fmt.Sprintf("setup: %d orders allocated 3 seqs, indexed, seq 1 applied by the processor", active)})
	}
}

// ledgersOn is a tablestore.Ledgers on the existing table name, with the
// operator's retries; transport, if not nil, sees every request.
func ledgersOn(b *testing.B, az *azurite.Server, name string, transport azurite.Doer) *tablestore.Ledgers {
	b.Helper()
	opts := tablestore.ClientOptions(tablestore.OperatorRetry)
	if transport != nil {
		opts.Transport = transport
	}
	svc, err := aztables.NewServiceClientFromConnectionString(az.ConnectionString(), opts)
	if err != nil {
		b.Fatal(err)
	}
	return tablestore.NewLedgers(svc.NewClient(name))
}

func plainClient(b *testing.B, az *azurite.Server, name string) *aztables.Client {
	b.Helper()
	svc, err := aztables.NewServiceClientFromConnectionString(az.ConnectionString(), nil)
	if err != nil {
		b.Fatal(err)
	}
	return svc.NewClient(name)
}
