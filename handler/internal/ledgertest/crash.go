package ledgertest

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/convoy-dev/convoy/handler/convoy"
	"github.com/convoy-dev/convoy/handler/fault"
	"github.com/convoy-dev/convoy/handler/ledger"
)

// Doc builds a ledger of n transactions interleaving the given orders.
func Doc(id string, n int, orders []string, dataBytes int) []byte {
	var b strings.Builder
	fmt.Fprintf(&b, `{"ledgerId":%q,"transactions":[`, id)
	created := map[string]bool{}
	for i := range n {
		o := orders[i%len(orders)]
		if i > 0 {
			b.WriteByte(',')
		}
		data := ""
		if dataBytes > 0 {
			data = fmt.Sprintf(`,"data":{"blob":%q}`, strings.Repeat("x", dataBytes))
		}
		if !created[o] {
			created[o] = true
			fmt.Fprintf(&b, `{"orderId":%q,"op":"CreateOrder","currency":"EUR"%s}`, o, data)
			continue
		}
		fmt.Fprintf(&b, `{"orderId":%q,"op":"AddTransaction","txId":"%s-t%d","amount":%d%s}`, o, id, i, i, data)
	}
	b.WriteString("]}")
	return []byte(b.String())
}

// flaky counts the operations of a store and a sender and fails the k-th:
// before it runs, or after it ran (the reply lost, the process gone).
type flaky struct {
	ledger.Store
	sender convoy.Sender
	mu     sync.Mutex
	ops    int
	failAt int // -1: never
	after  bool
}

var errCrash = fault.Errorf(fault.Unavailable, "injected crash")

func (f *flaky) step(do func() error) error {
	f.mu.Lock()
	k := f.ops
	f.ops++
	f.mu.Unlock()
	if k == f.failAt && !f.after {
		return errCrash
	}
	if err := do(); err != nil {
		return err
	}
	if k == f.failAt {
		return errCrash
	}
	return nil
}

func (f *flaky) GetLedger(ctx context.Context, id string) (r *ledger.Record, err error) {
	err = f.step(func() (e error) { r, e = f.Store.GetLedger(ctx, id); return e })
	return
}
func (f *flaky) CreateLedger(ctx context.Context, r *ledger.Record) error {
	return f.step(func() error { return f.Store.CreateLedger(ctx, r) })
}
func (f *flaky) SaveLedger(ctx context.Context, r *ledger.Record) error {
	return f.step(func() error { return f.Store.SaveLedger(ctx, r) })
}
func (f *flaky) Allocate(ctx context.Context, l, h, o string, n int) (first int64, err error) {
	err = f.step(func() (e error) { first, e = f.Store.Allocate(ctx, l, h, o, n); return e })
	return
}
func (f *flaky) NewBatch(ctx context.Context) (b convoy.Batch, err error) {
	err = f.step(func() (e error) { b, e = f.sender.NewBatch(ctx); return e })
	return
}
func (f *flaky) SendBatch(ctx context.Context, b convoy.Batch) error {
	return f.step(func() error { return f.sender.SendBatch(ctx, b) })
}

// CrashAtEveryStep checks that a ledger interrupted at any operation (before
// allocation, after it, after each batch; before or after the operation took
// effect) and then retried publishes exactly the messages of an uninterrupted
// run: the same MessageIds with the same seqs and bodies, none missing.
func CrashAtEveryStep(t *testing.T, store ledger.Store) {
	ctx := context.Background()
	runs := 0
	run := func(failAt int, after bool) (map[string]convoy.Envelope, int, error) {
		runs++ // fresh ledger and order ids: the store keeps every counter
		p := fmt.Sprintf("c%d-%d", time.Now().UnixNano(), runs)
		doc := Doc("L-"+p, 40, []string{p + "-o1", p + "-o2", p + "-o3"}, 900)
		sender := &Sender{MaxBatchBytes: 8 << 10} // several batches
		f := &flaky{Store: store, sender: sender, failAt: failAt, after: after}
		pub := ledger.NewPublisher(f, f, ledger.PublisherOptions{Retry: fault.RetryPolicy{MaxAttempts: 1}, AllocParallelism: 1})
		_, firstErr := pub.Publish(ctx, doc)
		ops := f.ops
		f.failAt = -1
		if _, err := pub.Publish(ctx, doc); err != nil {
			return nil, ops, fmt.Errorf("retry after a crash at op %d: %w", failAt, err)
		}
		byID := map[string]convoy.Envelope{}
		for _, m := range sender.Messages() {
			// Runs use their own ids: compare them by ledger index and order number.
			m.MessageID = m.MessageID[strings.Index(m.MessageID, ":"):]
			m.LedgerID, m.SessionID = "", m.SessionID[strings.LastIndex(m.SessionID, "-"):]
			m.Body = []byte(strings.ReplaceAll(string(m.Body), p, ""))
			if prev, ok := byID[m.MessageID]; ok && (prev.Seq != m.Seq || string(prev.Body) != string(m.Body)) {
				return nil, ops, fmt.Errorf("%s re-sent differently: %+v then %+v", m.MessageID, prev, m)
			}
			byID[m.MessageID] = m
		}
		if failAt >= 0 && firstErr == nil && failAt < ops {
			return nil, ops, fmt.Errorf("the crash at op %d was not reported", failAt)
		}
		return byID, ops, nil
	}
	clean, total, err := run(-1, false)
	if err != nil {
		t.Fatal(err)
	}
	if len(clean) != 40 || total < 10 {
		t.Fatalf("clean run: %d messages in %d operations", len(clean), total)
	}
	for k := range total {
		for _, after := range []bool{false, true} {
			got, _, err := run(k, after)
			if err != nil {
				t.Fatalf("crash at op %d (after=%v): %v", k, after, err)
			}
			if len(got) != len(clean) {
				t.Fatalf("crash at op %d (after=%v): %d distinct messages, want %d", k, after, len(got), len(clean))
			}
			for id, m := range clean {
				if g := got[id]; g.Seq != m.Seq || g.SessionID != m.SessionID || string(g.Body) != string(m.Body) {
					t.Fatalf("crash at op %d (after=%v): %s is %+v, want %+v", k, after, id, g, m)
				}
			}
		}
	}
	t.Logf("a crash at each of %d operations, before and after it took effect, recovered exactly", total)
}
