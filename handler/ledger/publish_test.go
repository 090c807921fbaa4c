package ledger_test

import (
	"context"
	"fmt"
	"reflect"
	"runtime"
	"strings"
	"sync"
	"testing"

	"github.com/convoy-dev/convoy/handler/convoy"
	"github.com/convoy-dev/convoy/handler/fault"
	"github.com/convoy-dev/convoy/handler/internal/ledgertest"
	"github.com/convoy-dev/convoy/handler/internal/memstore"
	"github.com/convoy-dev/convoy/handler/ledger"
	"github.com/convoy-dev/convoy/handler/orders"
)

var noRetry = fault.RetryPolicy{MaxAttempts: 1}

func publisher(store ledger.Store, sender convoy.Sender) *ledger.Publisher {
	return ledgertest.Publisher(store, sender, ledger.PublisherOptions{Retry: noRetry})
}

func TestPublishContractExample(t *testing.T) {
	ctx := context.Background()
	sender := &ledgertest.Sender{}
	p := publisher(memstore.NewLedgers(), sender)
	sum, err := p.Publish(ctx, []byte(contractExample))
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(sum, ledger.Summary{LedgerID: "L-2026-11-21-0001", Transactions: 5, Orders: 2, Messages: 5,
		Sent: map[string]int{"orders": 5}, Outcome: ledger.OutcomePublished}) {
		t.Fatalf("summary %+v", sum)
	}
	want := []struct {
		session, id string
		seq         int64
		last        bool
		op          orders.Op
	}{
		{"o-1", "L-2026-11-21-0001:0", 1, false, orders.CreateOrder},
		{"o-1", "L-2026-11-21-0001:2", 2, false, orders.AddTransaction},
		{"o-1", "L-2026-11-21-0001:3", 3, false, orders.ModifyTransaction},
		{"o-2", "L-2026-11-21-0001:1", 1, false, orders.CreateOrder},
		{"o-2", "L-2026-11-21-0001:4", 2, true, orders.DeleteOrder},
	}
	msgs := sender.Messages()
	if len(msgs) != len(want) {
		t.Fatalf("%d messages, want %d", len(msgs), len(want))
	}
	for i, w := range want {
		m := msgs[i]
		tx, err := orders.DecodeBody(m.Body)
		if err != nil || m.SessionID != w.session || m.MessageID != w.id || m.Seq != w.seq || m.Last != w.last ||
			m.LedgerID != "L-2026-11-21-0001" || tx.Op != w.op || tx.OrderID != w.session {
			t.Errorf("message %d: %+v (%+v, %v), want %+v", i, m, tx, err, w)
		}
	}

	// The same ledger again (even reformatted) is a no-op reporting the original outcome.
	sum, err = p.Publish(ctx, []byte(strings.ReplaceAll(contractExample, "\n", " ")))
	if err != nil || sum.Outcome != ledger.OutcomeAlreadyPublished || sum.Messages != 5 || len(sender.Messages()) != 5 {
		t.Fatalf("republish: %+v, %v, %d messages sent in all", sum, err, len(sender.Messages()))
	}
	// The same id with other content is a conflict, and sends nothing.
	_, err = p.Publish(ctx, []byte(strings.Replace(contractExample, "1250", "1251", 1)))
	if fault.CodeOf(err) != fault.Conflict || len(sender.Messages()) != 5 {
		t.Fatalf("reuse of the id: %v", err)
	}
	// A second ledger continues each order's sequence.
	if _, err := p.Publish(ctx, []byte(`{"ledgerId":"L-2","transactions":[{"orderId":"o-1","op":"DeleteOrder"}]}`)); err != nil {
		t.Fatal(err)
	}
	if m := sender.Messages()[5]; m.SessionID != "o-1" || m.Seq != 4 || m.MessageID != "L-2:0" {
		t.Fatalf("second ledger's message %+v, want o-1 seq 4", m)
	}
}

func TestInvalidLedgerSendsNothingAndIsRecorded(t *testing.T) {
	ctx := context.Background()
	sender := &ledgertest.Sender{}
	store := memstore.NewLedgers()
	p := publisher(store, sender)
	doc := []byte(`{"ledgerId":"L-bad","transactions":[{"orderId":"o-1","op":"CreateOrder","currency":"EUR"},{"orderId":"o-1","op":"AddTransaction"}]}`)
	sum, err := p.Publish(ctx, doc)
	if fault.CodeOf(err) != fault.Invalid || len(sender.Messages()) != 0 || sum.Outcome != ledger.OutcomeRejected || len(sum.Problems) != 2 {
		t.Fatalf("invalid ledger: %+v, %v, %d messages", sum, err, len(sender.Messages()))
	}
	if _, err := p.RecordRejection(ctx, doc, err); err != nil {
		t.Fatal(err)
	}
	rec, _ := store.GetLedger(ctx, "L-bad")
	if rec == nil || rec.Status != ledger.StatusRejected || len(rec.Problems) != 2 || rec.Problems[0].Index != 1 {
		t.Fatalf("rejection record %+v", rec)
	}
	// Unreadable documents are recorded under their content hash.
	rec, err = p.RecordRejection(ctx, []byte("not json"), fault.Errorf(fault.Invalid, "the ledger is not a JSON object"))
	if err != nil || !strings.HasPrefix(rec.ID, "sha256-") {
		t.Fatalf("unreadable ledger recorded as %+v, %v", rec, err)
	}
	// A corrected ledger may reuse the rejected id.
	fixed := []byte(strings.Replace(string(doc), `"op":"AddTransaction"}`, `"op":"AddTransaction","txId":"t","amount":1}`, 1))
	if sum, err := p.Publish(ctx, fixed); err != nil || sum.Outcome != ledger.OutcomePublished {
		t.Fatalf("corrected ledger: %+v, %v", sum, err)
	}
}

// TestCrashAtEveryStep runs the crash-recovery check on the memory store
// (tablestore runs it on Azurite).
func TestCrashAtEveryStep(t *testing.T) {
	store := memstore.NewLedgers()
	ledgertest.CrashAtEveryStep(t, store, store.Keys("account"))
}

// TestRacingLedgers: ledgers over the same orders published at once (as on
// two instances) interleave their seqs without sharing or skipping one.
func TestRacingLedgers(t *testing.T) {
	ctx := context.Background()
	store, sender := memstore.NewLedgers(), &ledgertest.Sender{}
	p := ledgertest.Publisher(store, sender, ledger.PublisherOptions{})
	orders := []string{"o-1", "o-2", "o-3", "o-4"}
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, err := p.Publish(ctx, ledgertest.Doc(fmt.Sprintf("L-%d", i), 20+i, orders, 0)); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	seqs := map[string]map[int64]string{}
	lastSeqOf := map[[2]string]int64{}
	for _, m := range sender.Messages() {
		if seqs[m.SessionID] == nil {
			seqs[m.SessionID] = map[int64]string{}
		}
		if prev, dup := seqs[m.SessionID][m.Seq]; dup {
			t.Fatalf("%s seq %d given to %s and %s", m.SessionID, m.Seq, prev, m.MessageID)
		}
		seqs[m.SessionID][m.Seq] = m.MessageID
		key := [2]string{m.SessionID, m.LedgerID}
		if m.Seq <= lastSeqOf[key] {
			t.Fatalf("%s: ledger %s's seqs are out of ledger order", m.SessionID, m.LedgerID)
		}
		lastSeqOf[key] = m.Seq
	}
	for o, s := range seqs {
		for seq := int64(1); seq <= int64(len(s)); seq++ {
			if _, ok := s[seq]; !ok {
				t.Fatalf("%s: hole at seq %d of %d", o, seq, len(s))
			}
		}
	}
}

func TestBatchesRespectTheSizeLimit(t *testing.T) {
	ctx := context.Background()
	const limit = 16 << 10
	sender := &ledgertest.Sender{MaxBatchBytes: limit}
	var checkpoints []int
	store := memstore.NewLedgers()
	p := ledger.NewPublisher(store, []ledger.Route{{Domain: ledger.Domain{Rules: orders.Domain, MaxMessageBytes: limit}, Allocator: store, Sender: sender}},
		ledger.PublisherOptions{Progress: func(sent, _ int) { checkpoints = append(checkpoints, sent) }})
	// 30 transactions of ~3.6 KiB each: four fit in 16 KiB, five do not.
	if _, err := p.Publish(ctx, ledgertest.Doc("L-big", 30, []string{"o-1", "o-2"}, 3500)); err != nil {
		t.Fatal(err)
	}
	batches := sender.Batches()
	if len(batches) != 8 {
		t.Fatalf("%d batches, want 8 (7 of four ~3.6 KiB messages, then 2)", len(batches))
	}
	for i, b := range batches {
		size := b[0].EnvelopeBytes() // as azservicebus counts (servicebus' TestSizeAsTheSDKCounts)
		for _, m := range b {
			size += m.PayloadBytes()
		}
		if size > limit || len(b) == 0 {
			t.Fatalf("batch %d: %d messages, %d bytes (limit %d)", i, len(b), size, limit)
		}
	}
	if len(checkpoints) != 8 || checkpoints[7] != 30 {
		t.Fatalf("checkpoints %v, want one per batch ending at 30", checkpoints)
	}

	perSession := &ledgertest.Sender{}
	store = memstore.NewLedgers()
	p = ledger.NewPublisher(store, []ledger.Route{{Domain: ledgertest.Orders[0], Allocator: store, Sender: perSession, BatchPerSession: true}}, ledger.PublisherOptions{})
	if _, err := p.Publish(ctx, ledgertest.Doc("L-ps", 40, []string{"o-1", "o-2", "o-3"}, 0)); err != nil {
		t.Fatal(err)
	}
	for _, b := range perSession.Batches() {
		for _, m := range b {
			if m.SessionID != b[0].SessionID {
				t.Fatalf("a per-session batch mixes %s and %s", b[0].SessionID, m.SessionID)
			}
		}
	}
	if len(perSession.Batches()) != 3 {
		t.Fatalf("%d per-session batches, want 3", len(perSession.Batches()))
	}
}

// TestHundredThousandTransactions publishes a 100,000-transaction ledger
// over 5,000 orders through a counting sender and reports its peak heap.
func TestHundredThousandTransactions(t *testing.T) {
	ctx := context.Background()
	orders := make([]string, 5000)
	for i := range orders {
		orders[i] = fmt.Sprintf("order-%05d", i)
	}
	doc := ledgertest.Doc("L-100k", 100_000, orders, 0)
	sender := &countingSender{}
	runtime.GC()
	var base runtime.MemStats
	runtime.ReadMemStats(&base)
	var peak uint64
	sample := func(int, int) {
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		peak = max(peak, ms.HeapAlloc)
	}
	p := ledgertest.Publisher(memstore.NewLedgers(), sender, ledger.PublisherOptions{Progress: sample})
	sum, err := p.Publish(ctx, doc)
	if err != nil {
		t.Fatal(err)
	}
	if sum.Messages != 100_000 || sender.messages != 100_000 || sum.Orders != 5000 {
		t.Fatalf("summary %+v, %d messages counted", sum, sender.messages)
	}
	growth := float64(peak-min(peak, base.HeapAlloc)) / (1 << 20)
	t.Logf("100,000 transactions (%.1f MiB ledger) in %d batches; peak heap growth %.1f MiB", float64(len(doc))/(1<<20), sender.batches, growth)
	if growth > 256 {
		t.Fatalf("peak heap grew by %.0f MiB: messages are being held beyond their batch", growth)
	}
}

// countingSender keeps nothing but counts.
type countingSender struct {
	batches, messages int
}

func (c *countingSender) NewBatch(context.Context) (convoy.Batch, error) {
	return &countingBatch{}, nil
}
func (c *countingSender) SendBatch(_ context.Context, b convoy.Batch) error {
	c.batches++
	c.messages += b.Len()
	return nil
}

type countingBatch struct{ n, bytes int }

func (b *countingBatch) Add(m convoy.Envelope) error {
	if b.bytes+ledgertest.Size(m) > 256<<10 {
		return convoy.ErrBatchFull
	}
	b.n++
	b.bytes += ledgertest.Size(m)
	return nil
}
func (b *countingBatch) Len() int { return b.n }
