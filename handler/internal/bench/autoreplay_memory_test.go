package bench_test

import (
	"context"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"testing"

	"github.com/convoy-dev/convoy/handler/convoy"
	"github.com/convoy-dev/convoy/handler/heal"
	"github.com/convoy-dev/convoy/handler/internal/memstore"
	"github.com/convoy-dev/convoy/handler/operator"
	"github.com/convoy-dev/convoy/handler/orders"
	"github.com/convoy-dev/convoy/handler/replay"
)

// BenchmarkAutoReplayMemory (issue 33, item 6: "a run's memory is bounded by
// its settings, not by the backlog"): one AutoReplay run over 50,000 dead
// letters of 60 KiB against one over 1,000, in the same run, on the same
// settings (AutoReplayMaxOrders 200, ReplayScanLimit 1,000, so that the
// smaller backlog is not below them: each run's pass claims 200 orders and
// receives the same 1,000 dead letters). Every dead letter is of a
// transient cause (a readable transaction padded with white space to 60
// KiB), five per order, each order's together.
//
// What is measured is what the run retains, not what the fake queue
// stores: the fake keeps one small record per dead letter and makes each
// 60 KiB body afresh whenever the run peeks or receives it (as the SDK
// decodes each message), so the bodies on the heap are the ones the run
// holds. At each peek and receive the run makes, and at its first
// completion, abandon or send after a receive, the fake forces a GC and
// reads the live heap (runtime.MemStats.HeapAlloc: liveHeap); the figure is
// the highest of those readings less the live heap just before the run. So it is the
// run's peak live heap: garbage not yet collected (GOGC) is left out, and
// what the run keeps between two calls is in. Before, the peek kept a copy
// of every body: 2,000 dead letters held 126 MiB, 50,000 about 3 GiB.
func BenchmarkAutoReplayMemory(b *testing.B) {
	const size, small, large = 60 << 10, 1_000, 50_000
	for range b.N {
		smallPeak, smallRun := autoReplayPeak(b, small, size)
		largePeak, largeRun := autoReplayPeak(b, large, size)
		mib := func(n int64) string { return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20)) }
		b.Logf("peak live heap of an AutoReplay run: %s with %d dead letters of %d KiB (%s), %s with %d (%s)",
			mib(largePeak), large, size>>10, largeRun, mib(smallPeak), small, smallRun)
		ratio("autoreplay_peak_heap_50k_vs_1k", float64(largePeak)/float64(smallPeak),
			fmt.Sprintf("an AutoReplay run's peak live heap with %d dead letters of %d KiB (%s) / with %d (%s), same settings (MaxOrders 200, ReplayScanLimit 1,000), whose pass receives the same 1,000 dead letters in both; before, the peek kept every body (3,219 MiB against 127 MiB, 25×)",
				large, size>>10, mib(largePeak), small, mib(smallPeak)), atMost(2))
		record(figure{name: "autoreplay_heap_per_dead_letter", value: float64(largePeak-smallPeak) / (large - small), unit: "bytes",
			what: fmt.Sprintf("what a run keeps per dead letter it peeks: the two peaks' difference / the %d dead letters between them (a body is %d bytes)", large-small, size)})
	}
}

// autoReplayPeak runs one AutoReplay run over n dead letters of size bytes
// and returns its peak live heap above the heap before it, and what it did.
func autoReplayPeak(b *testing.B, n, size int) (int64, string) {
	b.Helper()
	q := &madeBodies{size: size, gone: make([]bool, n), locked: make([]bool, n)}
	store := memstore.New()
	h := heal.New(store, store, store, func() (replay.Source, convoy.Sender, func(), error) {
		return q, discardSender{q}, func() {}, nil
	}, heal.Options{Domain: orders.Domain, MaxOrders: 200, MaxScan: 1_000})
	q.base = int64(liveHeap())
	r := h.RunOnce(context.Background())
	if r.Paused != "" || r.Summary == nil || r.Summary.DeadLetters == nil {
		b.Fatalf("the run with %d dead letters: %+v", n, r)
	}
	peak := q.peak - q.base
	replayed := 0
	for _, x := range r.Replayed {
		replayed += len(x.Seqs)
	}
	if replayed != 1_000 || r.Summary.DeadLetters.Total != n-replayed {
		b.Fatalf("the run with %d dead letters replayed %d, left %d", n, replayed, r.Summary.DeadLetters.Total)
	}
	runtime.KeepAlive(r)
	return peak, fmt.Sprintf("%d peeks, %d calls in all, %d re-sent", q.peeks, q.calls, replayed)
}

// padding makes a body size bytes long: white space keeps it readable.
var padding = []byte(strings.Repeat(" ", 1<<20))

// madeBodies is a dead-letter sub-queue of len(gone) dead letters, five per
// order (order i/5, seq 2+i%5), whose bodies are made each time they are
// handed out; each call samples the live heap.
type madeBodies struct {
	mu           sync.Mutex
	size         int
	gone, locked []bool
	base, peak   int64
	peeks, calls int
	received     bool // since the last sample
}

func (q *madeBodies) sample() {
	q.calls++
	q.peak = max(q.peak, int64(liveHeap())) // sessions_test.go
	q.received = false
}

// settling samples the first completion, abandon or send after a receive
// (what the pass received is all held then), not each of them: a GC per
// call would take minutes.
func (q *madeBodies) settling() {
	if q.received {
		q.sample()
	}
}

func (q *madeBodies) letter(i int) replay.DeadLetter {
	order, seq := fmt.Sprintf("o-%05d", i/5), int64(2+i%5)
	body := fmt.Appendf(make([]byte, 0, q.size), `{"transaction":{"orderId":%q,"op":"AddTransaction","txId":"t-%d","amount":5}`, order, seq)
	body = append(body, padding[:max(0, q.size-len(body)-1)]...)
	body = append(body, '}')
	return replay.DeadLetter{SequenceNumber: int64(i + 1), MessageID: fmt.Sprintf("L:%s:%d", order, seq), SessionID: order,
		Properties: map[string]any{"ledgerId": "L", "seq": seq}, Body: body, Reason: operator.ReasonMaxDelivery}
}

func (q *madeBodies) Peek(_ context.Context, from int64, n int) ([]replay.DeadLetter, error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.sample()
	q.peeks++
	var out []replay.DeadLetter
	for i := max(0, int(from)-1); i < len(q.gone) && len(out) < n; i++ {
		if !q.gone[i] {
			out = append(out, q.letter(i))
		}
	}
	return out, nil
}

func (q *madeBodies) Receive(_ context.Context, n int) ([]replay.DeadLetter, error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.sample()
	var out []replay.DeadLetter
	for i := 0; i < len(q.gone) && len(out) < n; i++ {
		if !q.gone[i] && !q.locked[i] {
			q.locked[i] = true
			out = append(out, q.letter(i))
		}
	}
	q.received = true
	return out, nil
}

func (q *madeBodies) Complete(_ context.Context, m replay.DeadLetter) error {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.settling()
	i := m.SequenceNumber - 1
	if !q.locked[i] {
		return fmt.Errorf("dead letter %d is not locked", m.SequenceNumber)
	}
	q.gone[i], q.locked[i] = true, false
	return nil
}

func (q *madeBodies) Abandon(_ context.Context, m replay.DeadLetter) error {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.settling()
	q.locked[m.SequenceNumber-1] = false
	return nil
}

// discardSender sends nowhere, sampling the live heap at its first send
// after a receive.
type discardSender struct{ q *madeBodies }

type countBatch struct{ n int }

func (b *countBatch) Add(convoy.Envelope) error { b.n++; return nil }
func (b *countBatch) Len() int                  { return b.n }

func (s discardSender) NewBatch(context.Context) (convoy.Batch, error) { return &countBatch{}, nil }
func (s discardSender) SendBatch(context.Context, convoy.Batch) error {
	s.q.mu.Lock()
	defer s.q.mu.Unlock()
	s.q.settling()
	return nil
}
