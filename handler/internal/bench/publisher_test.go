package bench_test

import (
	"context"
	"encoding/json"
	"fmt"
	"runtime"
	"runtime/metrics"
	"sync/atomic"
	"testing"
	"time"

	"github.com/convoy-dev/convoy/handler/convoy"
	"github.com/convoy-dev/convoy/handler/internal/ledgertest"
	"github.com/convoy-dev/convoy/handler/internal/memstore"
	"github.com/convoy-dev/convoy/handler/ledger"
)

// BenchmarkPublisherScale (figure 4): a 1,000,000-transaction ledger over
// 100,000 orders through the real publisher (validation, per-order seq
// allocation, message building, batching) with a counting sender and the
// in-memory allocation store: transactions per second against decoding the
// same JSON into generic values, peak heap against the ledger's size, and
// store operations against distinct orders.
func BenchmarkPublisherScale(b *testing.B) {
	const n, orders = 1_000_000, 100_000
	ids := orderIDs("pub", orders)
	for i := range b.N {
		b.StopTimer()
		doc := ledgertest.Doc(fmt.Sprintf("scale%d", i), n, ids, 0)
		t0 := time.Now()
		var generic any
		if err := json.Unmarshal(doc, &generic); err != nil {
			b.Fatal(err)
		}
		decode := time.Since(t0)
		generic = nil

		var ops, saves atomic.Int64
		store := memstore.NewLedgers()
		store.Fail = func(op string) error {
			ops.Add(1)
			if op == "save" {
				saves.Add(1)
			}
			return nil
		}
		sender := &countingSender{}
		// As with MaxLedgerTransactions=1000000 (the default limit is 200,000).
		p := ledgertest.Publisher(store, sender, ledger.PublisherOptions{Limits: ledger.Limits{MaxTransactions: n}})
		runtime.GC()
		peak := sampleHeap()
		b.StartTimer()
		t0 = time.Now()
		sum, err := p.Publish(context.Background(), doc)
		elapsed := time.Since(t0)
		b.StopTimer()
		live, used := peak.stop()
		if err != nil || sum.Messages != n || sender.messages.Load() != n || sum.Orders != orders {
			b.Fatalf("published %+v (%d sent), %v; want %d messages over %d orders", sum, sender.messages.Load(), err, n, orders)
		}
		record(figure{name: "publish_rate", value: n / elapsed.Seconds(), unit: "tx/s",
			what: fmt.Sprintf("transactions published per second, %d transactions over %d orders", n, orders)})
		ratio("publish_vs_json_decode", elapsed.Seconds()/decode.Seconds(),
			"publishing the ledger / json.Unmarshal of the same document into generic values", target{})
		ratio("publish_peak_live_heap_vs_ledger", float64(live)/float64(len(doc)),
			fmt.Sprintf("peak live heap growth while publishing / the ledger's size (%d MB)", len(doc)>>20), atMost(2))
		ratio("publish_peak_heap_in_use_vs_ledger", float64(used)/float64(len(doc)),
			"the same counting garbage not yet collected (what the process holds, GOGC=100)", target{})
		ratio("publish_store_ops_per_order", float64(ops.Load()-saves.Load())/orders,
			"ledger-store operations but checkpoints / distinct orders (one allocation per order, plus a constant per ledger)", atMost(1.01))
		ratio("publish_checkpoints_per_batch", float64(saves.Load())/float64(sender.batches.Load()),
			"checkpoints saved / message batches sent (progress is saved once per sent batch)", atMost(1))
		record(figure{name: "publish_store_ops_per_tx", value: float64(ops.Load()) / n, unit: "ops/tx",
			what: "the same per transaction: proportional to orders, not transactions"})
		b.StartTimer()
	}
}

type countingSender struct{ messages, batches atomic.Int64 }

func (s *countingSender) NewBatch(context.Context) (convoy.Batch, error) {
	return &countingBatch{limit: 256 << 10}, nil
}

func (s *countingSender) SendBatch(_ context.Context, b convoy.Batch) error {
	s.messages.Add(int64(b.Len()))
	s.batches.Add(1)
	return nil
}

// countingBatch sizes messages like the Standard tier's 256 KiB batches and
// keeps none of them.
type countingBatch struct{ n, bytes, limit int }

func (c *countingBatch) Add(m convoy.Envelope) error {
	if c.bytes+ledgertest.Size(m) > c.limit {
		return convoy.ErrBatchFull
	}
	c.n++
	c.bytes += ledgertest.Size(m)
	return nil
}

func (c *countingBatch) Len() int { return c.n }

// heapSampler records the heap's peaks above where it started: the live heap
// (as of each GC: what the work needs) and the heap in use (live plus garbage
// not yet collected: what the process holds, GOGC=100 letting it reach about
// twice the live heap).
type heapSampler struct {
	start      [2]uint64
	live, used atomic.Uint64
	quit, done chan struct{}
}

var heapMetrics = []string{"/gc/heap/live:bytes", "/memory/classes/heap/objects:bytes"}

func heapNow() [2]uint64 {
	s := []metrics.Sample{{Name: heapMetrics[0]}, {Name: heapMetrics[1]}}
	metrics.Read(s)
	return [2]uint64{s[0].Value.Uint64(), s[1].Value.Uint64()}
}

func sampleHeap() *heapSampler {
	h := &heapSampler{start: heapNow(), done: make(chan struct{}), quit: make(chan struct{})}
	h.observe()
	go func() {
		defer close(h.done)
		t := time.NewTicker(time.Millisecond)
		defer t.Stop()
		for {
			h.observe()
			select {
			case <-h.quit:
				return
			case <-t.C:
			}
		}
	}()
	return h
}

func (h *heapSampler) observe() {
	now := heapNow()
	for i, peak := range []*atomic.Uint64{&h.live, &h.used} {
		if now[i] > peak.Load() {
			peak.Store(now[i])
		}
	}
}

// stop returns the peak growth of the live heap and of the heap in use.
func (h *heapSampler) stop() (live, used uint64) {
	close(h.quit)
	<-h.done
	runtime.GC() // ends the cycle in progress, so that its live heap is counted too
	h.observe()
	return h.live.Load() - min(h.live.Load(), h.start[0]), h.used.Load() - min(h.used.Load(), h.start[1])
}
