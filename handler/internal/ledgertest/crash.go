package ledgertest

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/convoy-dev/convoy/handler/accounts"
	"github.com/convoy-dev/convoy/handler/convoy"
	"github.com/convoy-dev/convoy/handler/fault"
	"github.com/convoy-dev/convoy/handler/ledger"
	"github.com/convoy-dev/convoy/handler/orders"
)

// Orders are the domains of a publisher of orders alone: what Parse is
// given where only orders matter.
var Orders = []ledger.Domain{{Rules: orders.Domain}}

// OrdersAndAccounts are the domains of a publisher of orders (the default)
// and accounts.
var OrdersAndAccounts = []ledger.Domain{{Rules: orders.Domain}, {Rules: accounts.Domain}}

// Publisher returns a publisher of orders alone, whose records and seqs
// are store's, sending to sender.
func Publisher(store ledger.Store, sender convoy.Sender, opts ledger.PublisherOptions) *ledger.Publisher {
	return ledger.NewPublisher(store, []ledger.Route{{Domain: Orders[0], Allocator: store, Sender: sender}}, opts)
}

// MixedPublisher returns a publisher of orders (records and seqs: store's,
// to ordersQueue) and accounts (seqs: accountKeys', to accountsQueue).
func MixedPublisher(store ledger.Store, accountKeys ledger.Allocator, ordersQueue, accountsQueue convoy.Sender, opts ledger.PublisherOptions) *ledger.Publisher {
	return ledger.NewPublisher(store, []ledger.Route{
		{Domain: OrdersAndAccounts[0], Allocator: store, Sender: ordersQueue},
		{Domain: OrdersAndAccounts[1], Allocator: accountKeys, Sender: accountsQueue},
	}, opts)
}

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

// MixedDoc builds a ledger of n entries alternating an order's and an
// account's of the same ids (keys, in turn): the same id names an order and
// an account, which the ledger keeps apart. Each key's first entry in each
// domain creates it (CreateOrder, open); an order's entries carry
// dataBytes of data, an account's are small.
func MixedDoc(id string, n int, keys []string, dataBytes int) []byte {
	var b strings.Builder
	fmt.Fprintf(&b, `{"ledgerId":%q,"transactions":[`, id)
	created := map[[2]string]bool{}
	for i := range n {
		k := keys[(i/2)%len(keys)]
		if i > 0 {
			b.WriteByte(',')
		}
		data := ""
		if dataBytes > 0 {
			data = fmt.Sprintf(`,"data":{"blob":%q}`, strings.Repeat("x", dataBytes))
		}
		domain := [2]string{"orders", "accounts"}[i%2]
		first := !created[[2]string{domain, k}]
		created[[2]string{domain, k}] = true
		switch {
		case domain == "orders" && first:
			fmt.Fprintf(&b, `{"orderId":%q,"op":"CreateOrder","currency":"EUR"%s}`, k, data)
		case domain == "orders":
			fmt.Fprintf(&b, `{"orderId":%q,"op":"AddTransaction","txId":"%s-t%d","amount":%d%s}`, k, id, i, i, data)
		case first:
			fmt.Fprintf(&b, `{"domain":"accounts","accountId":%q,"kind":"open","currency":"EUR"}`, k)
		default:
			fmt.Fprintf(&b, `{"accountId":%q,"kind":"deposit","amount":%d,"reference":"%s-r%d","domain":"accounts"}`, k, i, id, i)
		}
	}
	b.WriteString("]}")
	return []byte(b.String())
}

// flaky counts the operations of the records, the allocators and the
// senders of a publish and fails the k-th: before it runs, or after it ran
// (the reply lost, the process gone).
type flaky struct {
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

type flakyRecords struct {
	*flaky
	r ledger.Records
}

func (f flakyRecords) GetLedger(ctx context.Context, id string) (r *ledger.Record, err error) {
	err = f.step(func() (e error) { r, e = f.r.GetLedger(ctx, id); return e })
	return
}
func (f flakyRecords) CreateLedger(ctx context.Context, r *ledger.Record) error {
	return f.step(func() error { return f.r.CreateLedger(ctx, r) })
}
func (f flakyRecords) SaveLedger(ctx context.Context, r *ledger.Record) error {
	return f.step(func() error { return f.r.SaveLedger(ctx, r) })
}

type flakyAllocator struct {
	*flaky
	a ledger.Allocator
}

func (f flakyAllocator) Allocate(ctx context.Context, l, h, k string, n int) (first int64, err error) {
	err = f.step(func() (e error) { first, e = f.a.Allocate(ctx, l, h, k, n); return e })
	return
}
func (f flakyAllocator) Activate(ctx context.Context, keys []string) error {
	return f.step(func() error { return f.a.Activate(ctx, keys) })
}

type flakySender struct {
	*flaky
	s convoy.Sender
}

func (f flakySender) NewBatch(ctx context.Context) (b convoy.Batch, err error) {
	err = f.step(func() (e error) { b, e = f.s.NewBatch(ctx); return e })
	return
}
func (f flakySender) SendBatch(ctx context.Context, b convoy.Batch) error {
	return f.step(func() error { return f.s.SendBatch(ctx, b) })
}

// CrashAtEveryStep checks that a ledger of orders and accounts (MixedDoc)
// interrupted at any operation (reading or writing its record, allocating
// or indexing the keys of either domain, making or sending a batch to
// either queue; before or after the operation took effect) and then
// retried publishes exactly the messages of an uninterrupted run: the same
// MessageIds on the same queues with the same seqs and bodies, none
// missing. orders holds the records and the orders' seqs; accounts the
// accounts' seqs (on the same table: orders.Keys("account")).
func CrashAtEveryStep(t *testing.T, orders ledger.Store, accounts ledger.Allocator) {
	ctx := context.Background()
	runs := 0
	run := func(failAt int, after bool) (map[string]convoy.Envelope, int, error) {
		runs++ // fresh ledger and key ids: the store keeps every counter
		p := fmt.Sprintf("c%d-%d", time.Now().UnixNano(), runs)
		doc := MixedDoc("L-"+p, 40, []string{p + "-k1", p + "-k2", p + "-k3"}, 900)
		queues := map[string]*Sender{"orders": {MaxBatchBytes: 8 << 10}, "accounts": {MaxBatchBytes: 1 << 10}} // several batches each
		f := &flaky{failAt: failAt, after: after}
		pub := ledger.NewPublisher(flakyRecords{f, orders}, []ledger.Route{
			{Domain: OrdersAndAccounts[0], Allocator: flakyAllocator{f, orders}, Sender: flakySender{f, queues["orders"]}},
			{Domain: OrdersAndAccounts[1], Allocator: flakyAllocator{f, accounts}, Sender: flakySender{f, queues["accounts"]}},
		}, ledger.PublisherOptions{Retry: fault.RetryPolicy{MaxAttempts: 1}, AllocParallelism: 1})
		_, firstErr := pub.Publish(ctx, doc)
		ops := f.ops
		f.failAt = -1
		if _, err := pub.Publish(ctx, doc); err != nil {
			return nil, ops, fmt.Errorf("retry after a crash at op %d: %w", failAt, err)
		}
		byID := map[string]convoy.Envelope{}
		for queue, sender := range queues {
			for _, m := range sender.Messages() {
				// Runs use their own ids: compare them by queue, ledger index and key number.
				id := queue + m.MessageID[strings.Index(m.MessageID, ":"):]
				m.MessageID, m.LedgerID, m.SessionID = "", "", m.SessionID[strings.LastIndex(m.SessionID, "-"):]
				m.Body = []byte(strings.ReplaceAll(string(m.Body), p, ""))
				if prev, ok := byID[id]; ok && (prev.Seq != m.Seq || string(prev.Body) != string(m.Body)) {
					return nil, ops, fmt.Errorf("%s re-sent differently: %+v then %+v", id, prev, m)
				}
				byID[id] = m
			}
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
	perQueue := map[string]int{}
	for id := range clean {
		perQueue[id[:strings.Index(id, ":")]]++
	}
	if len(clean) != 40 || perQueue["orders"] != 20 || perQueue["accounts"] != 20 || total < 10 {
		t.Fatalf("clean run: %d messages (by queue %v) in %d operations", len(clean), perQueue, total)
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
