package tablestore_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/data/aztables"

	"github.com/convoy-dev/convoy/handler/convoy"
	"github.com/convoy-dev/convoy/handler/fault"
	"github.com/convoy-dev/convoy/handler/internal/azurite"
	"github.com/convoy-dev/convoy/handler/internal/healtest"
	"github.com/convoy-dev/convoy/handler/internal/ledgertest"
	"github.com/convoy-dev/convoy/handler/internal/storetest"
	"github.com/convoy-dev/convoy/handler/ledger"
	"github.com/convoy-dev/convoy/handler/orders"
	"github.com/convoy-dev/convoy/handler/tablestore"
)

var server *azurite.Server

func TestMain(m *testing.M) {
	var err error
	server, err = azurite.Start(azurite.Options{})
	if err != nil {
		fmt.Fprintln(os.Stderr, "tablestore tests need Azurite:", err)
		os.Exit(1)
	}
	code := m.Run()
	server.Stop()
	os.Exit(code)
}

func TestConformance(t *testing.T) {
	t.Parallel()
	storetest.Run(t, server.NewOrderStore(t, nil))
}

// countingTransport counts HTTP round trips to Table Storage.
type countingTransport struct{ n atomic.Int64 }

func (c *countingTransport) Do(r *http.Request) (*http.Response, error) {
	c.n.Add(1)
	return http.DefaultClient.Do(r)
}

func msg(seq int64, op orders.Op, txID string) convoy.Message {
	tx := orders.Transaction{OrderID: "o-1", Op: op, TxID: txID}
	switch op {
	case orders.CreateOrder:
		tx.Currency = "EUR"
	case orders.AddTransaction, orders.ModifyTransaction:
		amount := seq
		tx.Amount = &amount
	}
	return convoy.Message{Seq: seq, MessageID: fmt.Sprintf("L:%d", seq), Command: tx}
}

// TestRoundTripBudget: in steady state one message costs one round trip in
// single mode (the commit), and a contiguous batch one round trip in all,
// with the active-orders index wired as serve wires it (written for the
// order's first message only).
func TestRoundTripBudget(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	var rt countingTransport
	store := server.NewOrderStore(t, &rt)
	p := convoy.NewProcessor(store, convoy.ProcessorOptions{Domain: orders.Domain, Active: tablestore.NewLedgers(server.NewTable(t, &rt))})
	if _, err := p.Process(ctx, "o-1", []convoy.Message{msg(1, orders.CreateOrder, "")}); err != nil {
		t.Fatal(err)
	}
	rt.n.Store(0)
	const single = 20
	for seq := int64(2); seq < 2+single; seq++ {
		if _, err := p.Process(ctx, "o-1", []convoy.Message{msg(seq, orders.AddTransaction, fmt.Sprintf("t-%d", seq))}); err != nil {
			t.Fatal(err)
		}
	}
	if got := rt.n.Load(); got != single {
		t.Fatalf("single mode: %d round trips for %d messages, want %d", got, single, single)
	}
	rt.n.Store(0)
	var batch []convoy.Message
	for seq := int64(2 + single); seq < 2+single+50; seq++ {
		batch = append(batch, msg(seq, orders.AddTransaction, fmt.Sprintf("t-%d", seq)))
	}
	batch = append(batch, batch[:10]...) // duplicates inside the batch cost nothing
	if _, err := p.Process(ctx, "o-1", batch); err != nil {
		t.Fatal(err)
	}
	// A transaction is two rows (in the order added, and by txId): a commit
	// holds 48 of them besides the marker and the head.
	if got := rt.n.Load(); got != 2 {
		t.Fatalf("batch mode: %d round trips for a contiguous batch of 50, want 2", got)
	}
	rt.n.Store(0)
	if _, err := p.Process(ctx, "o-1", []convoy.Message{msg(5, orders.AddTransaction, "t-5")}); err != nil {
		t.Fatal(err)
	}
	if got := rt.n.Load(); got != 0 {
		t.Fatalf("a duplicate cost %d round trips, want 0", got)
	}
}

// TestConcurrentDuplicateInvocations: several instances (each with its own
// cache) receive the same and adjacent messages of one order at once, as after
// a lost session lock. Every effect happens exactly once.
func TestConcurrentDuplicateInvocations(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	store := &conflictCounter{Store: server.NewOrderStore(t, nil)}
	const instances, n = 4, 30
	procs := make([]*convoy.Processor, instances)
	for i := range procs {
		procs[i] = convoy.NewProcessor(store, convoy.ProcessorOptions{Domain: orders.Domain, Retry: fault.RetryPolicy{Initial: time.Millisecond, MaxElapsed: 30 * time.Second}})
	}
	msgs := []convoy.Message{msg(1, orders.CreateOrder, "")}
	for seq := int64(2); seq <= n; seq++ {
		msgs = append(msgs, msg(seq, orders.AddTransaction, fmt.Sprintf("t-%d", seq)))
	}
	var wg sync.WaitGroup
	var failures atomic.Int64
	start := make(chan struct{})
	for i, p := range procs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			// Instance i sees every message, one at a time, starting at a
			// different point, so they collide on the same and adjacent seqs.
			for k := range msgs {
				m := msgs[(k+i*7)%len(msgs)]
				for {
					_, err := p.Process(ctx, "o-1", []convoy.Message{m})
					if err == nil {
						break
					}
					if !fault.IsTransient(err) {
						t.Errorf("instance %d seq %d: %v", i, m.Seq, err)
						return
					}
					failures.Add(1) // the host would redeliver: so do we
				}
			}
		}()
	}
	close(start)
	wg.Wait()
	o, err := store.Load(ctx, "o-1")
	if err != nil {
		t.Fatal(err)
	}
	var want int64
	for seq := int64(2); seq <= n; seq++ {
		want += seq
	}
	txs, rejected := historyOf(t, store.Store, "o-1")
	st := orders.StateOf(o)
	if o.AppliedSeq != n || len(txs) != n-1 || st.TxCount != n-1 || st.Total != want || len(rejected) != 0 || len(o.Parked) != 0 {
		t.Fatalf("after concurrent delivery: applied %d, %d transactions (head: %d), total %d (want %d), %d rejected, %d parked",
			o.AppliedSeq, len(txs), st.TxCount, st.Total, want, len(rejected), len(o.Parked))
	}
	if store.conflicts.Load() == 0 {
		t.Fatal("no commit lost a race: the instances never collided, so the test showed nothing")
	}
	t.Logf("%d commits lost a race, %d invocations answered non-2xx; %d commits in all",
		store.conflicts.Load(), failures.Load(), o.Version)
}

// TestStaleInstance: an instance whose cache is behind (another instance
// applied messages since) must not re-apply: its commit conflicts, it reloads,
// and the message turns out to be a duplicate.
func TestStaleInstance(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	store := &conflictCounter{Store: server.NewOrderStore(t, nil)}
	a := convoy.NewProcessor(store, convoy.ProcessorOptions{Domain: orders.Domain})
	b := convoy.NewProcessor(store, convoy.ProcessorOptions{Domain: orders.Domain})
	if _, err := b.Process(ctx, "o-1", []convoy.Message{msg(1, orders.CreateOrder, "")}); err != nil {
		t.Fatal(err)
	}
	for seq := int64(2); seq <= 5; seq++ {
		if _, err := a.Process(ctx, "o-1", []convoy.Message{msg(seq, orders.AddTransaction, fmt.Sprintf("t-%d", seq))}); err != nil {
			t.Fatal(err)
		}
	}
	// b still believes appliedSeq is 1: seq 2 looks new to it.
	res, err := b.Process(ctx, "o-1", []convoy.Message{msg(2, orders.AddTransaction, "t-2"), msg(6, orders.AddTransaction, "t-6")})
	if err != nil {
		t.Fatal(err)
	}
	if store.conflicts.Load() != 1 || res.Outcomes[0].Disposition != convoy.Duplicate || res.Outcomes[1].Disposition != convoy.Applied {
		t.Fatalf("conflicts %d, outcomes %+v; want 1 conflict, then duplicate and applied", store.conflicts.Load(), res.Outcomes)
	}
	o, _ := store.Load(ctx, "o-1")
	if txs, _ := historyOf(t, store.Store, "o-1"); o.AppliedSeq != 6 || len(txs) != 5 || orders.StateOf(o).Total != 2+3+4+5+6 {
		t.Fatalf("state %+v %+v, %d transactions", o.Head(), orders.StateOf(o), len(txs))
	}
}

// historyOf reads an order's whole history, page by page.
func historyOf(t *testing.T, s convoy.Store, id string) ([]orders.TxEntry, []orders.Rejection) {
	t.Helper()
	var txs []orders.TxEntry
	var rs []orders.Rejection
	token := ""
	for {
		cv, err := convoy.ReadView(context.Background(), orders.Domain, s, s.(convoy.History), id, token, 0)
		if err != nil {
			t.Fatal(err)
		}
		v := orders.ViewOf(cv)
		txs, rs = append(txs, v.Transactions...), append(rs, v.Rejected...)
		if token = v.Continuation; token == "" {
			return txs, rs
		}
	}
}

// conflictCounter counts commits that lost a compare-and-swap.
type conflictCounter struct {
	convoy.Store
	conflicts atomic.Int64
}

func (c *conflictCounter) Commit(ctx context.Context, o *convoy.Key, base int64, ch *convoy.Change) error {
	err := c.Store.Commit(ctx, o, base, ch)
	if errors.Is(err, convoy.ErrConflict) {
		c.conflicts.Add(1)
	}
	return err
}

func TestReplayStateConformance(t *testing.T) {
	t.Parallel()
	healtest.Run(t, server.NewOrderStore(t, nil))
}

func TestLedgersConformance(t *testing.T) {
	t.Parallel()
	ledgertest.Run(t, tablestore.NewLedgers(server.NewTable(t, nil)))
}

func TestLedgerCrashRecovery(t *testing.T) {
	t.Parallel()
	store := tablestore.NewLedgers(server.NewTable(t, nil))
	ledgertest.CrashAtEveryStep(t, store, store.Keys("account"))
}

// TestLedgersScopes: on one table, the account domain's keys pass the
// suite too, and share the records but neither seqs nor active entries with
// the orders of the same ids; their rows are in their own partitions
// (account:<id>, active:account) while an order's stay where they were
// (order:<id>, active).
func TestLedgersScopes(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	table := server.NewTable(t, nil)
	orders := tablestore.NewLedgers(table)
	accounts := orders.Keys("account")
	ledgertest.Run(t, accounts)
	ledgertest.Scopes(t, orders, accounts)

	if _, err := orders.Allocate(ctx, "L-rows", "h", "same-id", 1); err != nil {
		t.Fatal(err)
	}
	if _, err := accounts.Allocate(ctx, "L-rows", "h", "same-id", 2); err != nil {
		t.Fatal(err)
	}
	if err := orders.Activate(ctx, []string{"same-id"}); err != nil {
		t.Fatal(err)
	}
	if err := accounts.Activate(ctx, []string{"same-id"}); err != nil {
		t.Fatal(err)
	}
	for _, row := range []struct {
		pk, rk string
		count  int64
	}{{"order:same-id", "alloc:L-rows", 1}, {"account:same-id", "alloc:L-rows", 2}, {"active", "same-id", 0}, {"active:account", "same-id", 0}} {
		resp, err := table.GetEntity(ctx, row.pk, row.rk, nil)
		if err != nil {
			t.Fatalf("row %s/%s: %v", row.pk, row.rk, err)
		}
		var e aztables.EDMEntity
		if err := json.Unmarshal(resp.Value, &e); err != nil {
			t.Fatal(err)
		}
		var count int64
		switch v := e.Properties["Count"].(type) {
		case int32:
			count = int64(v)
		case float64:
			count = int64(v)
		}
		if count != row.count {
			t.Fatalf("row %s/%s: Count %v, want %d", row.pk, row.rk, e.Properties["Count"], row.count)
		}
	}
}

// TestRejectedLedgerAlwaysRecordable: a ledger whose problems quote huge
// inputs (a 40,000-character op, field names that JSON escapes to six bytes
// a character) is still recorded as rejected, with the first problems kept,
// instead of failing the record and going to the dead-letter queue.
func TestRejectedLedgerAlwaysRecordable(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	store := tablestore.NewLedgers(server.NewTable(t, nil))
	var b strings.Builder
	b.WriteString(`{"ledgerId":"L-huge-problems","transactions":[`)
	for i := range 200 {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `{"orderId":"o-1","op":"%s","%s":1,"amount":%s}`,
			strings.Repeat("\u2028", 40_000/(1+i%50)), strings.Repeat("<", 300), strings.Repeat("9", 500))
	}
	b.WriteString(`],"` + strings.Repeat("&", 40_000) + `":1}`)
	doc := []byte(b.String())
	p := ledgertest.Publisher(store, &ledgertest.Sender{}, ledger.PublisherOptions{Retry: fault.RetryPolicy{MaxAttempts: 1}})
	_, perr := p.Publish(ctx, doc)
	if fault.CodeOf(perr) != fault.Invalid || len(fault.ProblemsOf(perr)) < 400 {
		t.Fatalf("publish: %v with %d problems, want invalid with every problem", perr, len(fault.ProblemsOf(perr)))
	}
	if _, err := p.RecordRejection(ctx, doc, perr); err != nil {
		t.Fatalf("recording the rejection: %v", err)
	}
	rec, err := store.GetLedger(ctx, "L-huge-problems")
	if err != nil || rec == nil {
		t.Fatalf("record: %v %v", rec, err)
	}
	if rec.Status != ledger.StatusRejected || len(rec.Problems) == 0 || rec.Problems[0].Index != 0 || rec.Error == "" {
		t.Fatalf("record %+v", rec)
	}
}

// TestPublished: what publishing allocated to an order, read back for its
// lag: the counter's last seq, and when the ledger holding a seq was given
// its numbers (the alloc row's Timestamp, the service's clock: Azurite runs
// on this machine, so within a second of the test's).
func TestPublished(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	store := tablestore.NewLedgers(server.NewTable(t, nil))
	if p, err := store.Published(ctx, "o-none", 1); err != nil || p != (convoy.Published{}) {
		t.Fatalf("nothing published: %+v, %v", p, err)
	}
	before := time.Now().UTC()
	if first, err := store.Allocate(ctx, "L-1", "h1", "o-1", 3); err != nil || first != 1 {
		t.Fatalf("allocate L-1: %d, %v", first, err)
	}
	time.Sleep(1100 * time.Millisecond)
	middle := time.Now().UTC()
	if first, err := store.Allocate(ctx, "L-2", "h2", "o-1", 2); err != nil || first != 4 {
		t.Fatalf("allocate L-2: %d, %v", first, err)
	}
	after := time.Now().UTC()
	within := func(at, from, to time.Time) bool {
		return !at.Before(from.Add(-time.Second)) && !at.After(to.Add(time.Second))
	}
	for _, c := range []struct {
		seq      int64
		from, to time.Time
	}{{1, before, middle}, {3, before, middle}, {4, middle, after}, {5, middle, after}} {
		p, err := store.Published(ctx, "o-1", c.seq)
		if err != nil || p.LastSeq != 5 || !within(p.SeqAllocatedAt, c.from, c.to) {
			t.Errorf("seq %d: %+v, %v; want last 5, allocated between %v and %v", c.seq, p, err, c.from, c.to)
		}
	}
	a3, _ := store.Published(ctx, "o-1", 3)
	a4, _ := store.Published(ctx, "o-1", 4)
	if !a4.SeqAllocatedAt.After(a3.SeqAllocatedAt) {
		t.Errorf("seq 4 (L-2) allocated at %v, not after seq 3 (L-1) at %v", a4.SeqAllocatedAt, a3.SeqAllocatedAt)
	}
	if p, err := store.Published(ctx, "o-1", 6); err != nil || p.LastSeq != 5 || !p.SeqAllocatedAt.IsZero() {
		t.Errorf("seq 6, not published: %+v, %v", p, err)
	}
}

// countingDoer counts the requests a client sends.
type countingDoer struct{ n atomic.Int64 }

func (d *countingDoer) Do(r *http.Request) (*http.Response, error) {
	d.n.Add(1)
	return http.DefaultClient.Do(r)
}

// TestPublishedCost: where a seq was allocated is found in the one point
// read of the order's counter when it is among the recent allocations, and
// with one query more when it is older, whatever the number of ledgers
// that published to the order (here 1,100, more than a page of alloc rows
// holds, which the lookup before seq rows needed two queries for).
func TestPublishedCost(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	var d countingDoer
	store := tablestore.NewLedgers(server.NewTable(t, &d))
	const ledgers = 1100
	for i := range ledgers {
		if _, err := store.Allocate(ctx, fmt.Sprintf("L-%04d", i), "h", "o-busy", 1); err != nil {
			t.Fatal(err)
		}
	}
	for seq, want := range map[int64]int64{1: 2, 550: 2, ledgers - 31: 1, ledgers: 1} {
		before := d.n.Load()
		p, err := store.Published(ctx, "o-busy", seq)
		if err != nil || p.LastSeq != ledgers || p.SeqAllocatedAt.IsZero() {
			t.Fatalf("seq %d: %+v, %v", seq, p, err)
		}
		if n := d.n.Load() - before; n != want {
			t.Errorf("seq %d: %d requests, want %d", seq, n, want)
		}
	}
}

// TestPublishedLegacy: seqs allocated before seq rows were kept (alloc rows
// only, as an earlier release wrote them) are still found, and so are the
// seqs allocated after the upgrade, in the same partition.
func TestPublishedLegacy(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	table := server.NewTable(t, nil)
	store := tablestore.NewLedgers(table)
	put := func(rk string, props map[string]any) {
		e, _ := json.Marshal(aztables.EDMEntity{Entity: aztables.Entity{PartitionKey: "order:o-old", RowKey: rk}, Properties: props})
		if _, err := table.AddEntity(ctx, e, nil); err != nil {
			t.Fatal(err)
		}
	}
	put("counter", map[string]any{"Last": aztables.EDMInt64(5)})
	put("alloc:L-a", map[string]any{"First": aztables.EDMInt64(1), "Count": int32(3), "Hash": "h"})
	put("alloc:L-b", map[string]any{"First": aztables.EDMInt64(4), "Count": int32(2), "Hash": "h"})
	if first, err := store.Allocate(ctx, "L-c", "h", "o-old", 2); err != nil || first != 6 {
		t.Fatalf("allocate after the upgrade: %d, %v", first, err)
	}
	for seq := int64(1); seq <= 8; seq++ {
		p, err := store.Published(ctx, "o-old", seq)
		if err != nil || p.LastSeq != 7 || (seq <= 7) == p.SeqAllocatedAt.IsZero() {
			t.Errorf("seq %d: %+v, %v; want last 7, allocated for seqs 1 to 7", seq, p, err)
		}
	}
}

// TestPublishedOfAnOrderFedDirectly: for an order nothing was published to,
// Published is one round trip (its counter, not found): the lag survey has
// the order's active entry from its scan and must not read it again.
// PublishedTo, for OrderStatus, reads the entry: one round trip more.
func TestPublishedOfAnOrderFedDirectly(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	var rt countingTransport
	store := tablestore.NewLedgers(server.NewTable(t, &rt))
	at := time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC)
	if err := store.MarkActive(ctx, "o-direct", convoy.Seen{Seq: 3, At: at}); err != nil {
		t.Fatal(err)
	}
	before := rt.n.Load()
	if p, err := store.Published(ctx, "o-direct", 3); err != nil || p != (convoy.Published{}) {
		t.Fatalf("Published: %+v, %v; want nothing published", p, err)
	}
	if n := rt.n.Load() - before; n != 1 {
		t.Fatalf("Published of an order fed directly made %d round trips, want 1", n)
	}
	before = rt.n.Load()
	if p, err := convoy.PublishedTo(ctx, store, "o-direct", 3); err != nil || p.LastSeq != 3 || !p.SeqAllocatedAt.Equal(at) {
		t.Fatalf("PublishedTo: %+v, %v; want seq 3 seen at %v", p, err, at)
	}
	if n := rt.n.Load() - before; n != 2 {
		t.Fatalf("PublishedTo made %d round trips, want 2", n)
	}
}
