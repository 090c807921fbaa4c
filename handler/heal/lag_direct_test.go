package heal_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/convoy-dev/convoy/handler/convoy"
	"github.com/convoy-dev/convoy/handler/heal"
	"github.com/convoy-dev/convoy/handler/internal/memstore"
	"github.com/convoy-dev/convoy/handler/orders"
)

// TestLagSurveyOfOrdersFedDirectly: orders whose messages were sent straight
// to the orders queue (no publisher: no counter, no allocation) are in the
// active-orders index because the processor received them, and the survey
// judges them from what it saw, as it judges published ones:
//   - d-gap: seq 3 parked behind seq 2: blocked;
//   - d-dl: seq 2 dead-lettered, nothing parked: blocked (not ok: the dead
//     letter counts as waiting, though nothing was allocated);
//   - d-stuck: seq 2 received by an instance whose commits fail: stalled,
//     for two windows, its head's age counted from seq 2's enqueued time;
//   - d-idle: caught up 11 minutes ago: ok, and it leaves the index.
//
// Then d-idle, removed, gets a message: it is surveyed again.
func TestLagSurveyOfOrdersFedDirectly(t *testing.T) {
	ctx := context.Background()
	f := newFixture()
	ledgers := memstore.NewLedgers()
	ledgers.Now = f.clock.now
	const window = 5 * time.Minute
	processor := func() *convoy.Processor {
		return convoy.NewProcessor(f.store, convoy.ProcessorOptions{Domain: orders.Domain, Index: f.store, Now: f.clock.now, LagWindow: window, Active: ledgers})
	}
	p := processor()
	msg := func(order string, seq int64) convoy.Message {
		tx := orders.Transaction{OrderID: order, Op: orders.CreateOrder, Currency: "EUR"}
		if seq > 1 {
			amount := seq
			tx = orders.Transaction{OrderID: order, Op: orders.AddTransaction, TxID: fmt.Sprintf("t%d", seq), Amount: &amount}
		}
		return convoy.Message{Seq: seq, MessageID: fmt.Sprintf("%s:%d", order, seq), Command: tx, EnqueuedAt: f.clock.now().Add(-time.Second)}
	}
	send := func(p *convoy.Processor, order string, seq int64) error {
		_, err := p.Process(ctx, order, []convoy.Message{msg(order, seq)})
		return err
	}
	// 10:00
	for _, o := range []string{"d-gap", "d-dl", "d-stuck", "d-idle"} {
		if err := send(p, o, 1); err != nil {
			t.Fatal(err)
		}
	}
	if err := send(p, "d-gap", 3); err != nil { // parked
		t.Fatal(err)
	}
	f.q.add("d-dl", 2, "MaxDeliveryCountExceeded", `{"transaction":{"orderId":"d-dl","op":"AddTransaction","txId":"t2","amount":2}}`)
	down := errors.New("storage is down")
	f.store.Fail = func(op, orderID string) error {
		if op == "commit" && orderID == "d-stuck" {
			return down
		}
		return nil
	}
	if err := send(processor(), "d-stuck", 2); !errors.Is(err, down) { // another instance, its commits failing
		t.Fatalf("d-stuck's seq 2: %v, want %v", err, down)
	}
	f.store.Fail = nil

	// 10:11
	f.clock.add(11 * time.Minute)
	h := f.healer(heal.Options{Domain: orders.Domain, Active: ledgers, LagWindow: window, Disabled: true})
	lag := h.RunOnce(ctx).Summary.Lag
	want := map[convoy.LagStatus]int{convoy.LagOK: 1, convoy.LagCatchingUp: 0, convoy.LagStalled: 1, convoy.LagBlocked: 2}
	if lag == nil || lag.Orders != 4 || !lag.Complete || !equalCounts(lag.ByStatus, want) || lag.StalledTwoWindows != 1 {
		t.Fatalf("lag %+v; want the 4 orders fed directly, %v, one stalled for two windows", lag, want)
	}
	heads := map[string]heal.OldestHead{}
	for _, o := range lag.OldestHeads {
		heads[o.OrderID] = o
	}
	if s := heads["d-stuck"]; s.Status != convoy.LagStalled || s.Backlog != 1 || s.HeadAgeSeconds != 661 {
		t.Errorf("d-stuck: %+v, want stalled, backlog 1, waiting 661 s (since seq 2 was enqueued)", s)
	}
	if got := active(t, ledgers); got["d-idle"] || !got["d-gap"] || !got["d-dl"] || !got["d-stuck"] {
		t.Errorf("index after the run: %v; want d-idle removed (idle), the others kept", got)
	}
	// 10:12: d-idle, removed as idle, gets a message from the instance that
	// indexed it before: it is back, and surveyed.
	f.clock.add(time.Minute)
	if err := send(p, "d-idle", 2); err != nil {
		t.Fatal(err)
	}
	if !active(t, ledgers)["d-idle"] {
		t.Fatalf("d-idle received seq 2 after the survey removed it, and is not in the index")
	}
	if again := h.RunOnce(ctx).Summary.Lag; again.Orders != 4 {
		t.Errorf("after d-idle received a message: %+v; want 4 orders surveyed (d-race stays out)", again)
	}
}

// TestLagSurveyBetweenIndexWriteAndCommit: an order fed directly, idle and
// removed from the index, gets a message; a survey runs between the
// processor's index write and its commit, and reads the order as caught up
// and idle (its head has not moved yet). It keeps the entry: the entry names
// the seq in flight, above the head's appliedSeq, so something waits.
func TestLagSurveyBetweenIndexWriteAndCommit(t *testing.T) {
	ctx := context.Background()
	f := newFixture()
	ledgers := memstore.NewLedgers()
	ledgers.Now = f.clock.now
	const window = 5 * time.Minute
	p := convoy.NewProcessor(f.store, convoy.ProcessorOptions{Domain: orders.Domain, Index: f.store, Now: f.clock.now, LagWindow: window, Active: ledgers})
	h := f.healer(heal.Options{Domain: orders.Domain, Active: ledgers, LagWindow: window, Disabled: true})
	create := convoy.Message{Seq: 1, MessageID: "d-race:1", Command: orders.Transaction{OrderID: "d-race", Op: orders.CreateOrder, Currency: "EUR"}}
	if _, err := p.Process(ctx, "d-race", []convoy.Message{create}); err != nil {
		t.Fatal(err)
	}
	f.clock.add(11 * time.Minute)
	h.RunOnce(ctx)
	if active(t, ledgers)["d-race"] {
		t.Fatalf("d-race, idle for 11 minutes, was not removed")
	}
	amount := int64(2)
	add := convoy.Message{Seq: 2, MessageID: "d-race:2", Command: orders.Transaction{OrderID: "d-race", Op: orders.AddTransaction, TxID: "t2", Amount: &amount}}
	surveyed := false
	f.store.Fail = func(op, orderID string) error {
		if op == "commit" && orderID == "d-race" && !surveyed {
			surveyed = true
			h.RunOnce(ctx)
		}
		return nil
	}
	if _, err := p.Process(ctx, "d-race", []convoy.Message{add}); err != nil || !surveyed {
		t.Fatalf("seq 2: %v (surveyed before its commit: %v)", err, surveyed)
	}
	if !active(t, ledgers)["d-race"] {
		t.Fatalf("a survey between the processor's index write and its commit removed d-race")
	}
}

// active lists the orders in the index.
func active(t *testing.T, idx convoy.ActiveIndex) map[string]bool {
	t.Helper()
	out := map[string]bool{}
	page, _, err := idx.ScanActive(context.Background(), "", 1000)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range page {
		out[e.OrderID] = true
	}
	return out
}

// TestLagSurveyDuringASlowCommit: an order fed directly, busy (its head
// moved four minutes ago: the processor does not write its entry), gets a
// message whose commit hangs for seven minutes; meanwhile a survey finds the
// head still for eleven minutes and removes the entry. The call, slow, writes
// the entry again once its commit landed.
func TestLagSurveyDuringASlowCommit(t *testing.T) {
	ctx := context.Background()
	f := newFixture()
	ledgers := memstore.NewLedgers()
	ledgers.Now = f.clock.now
	const window = 5 * time.Minute
	p := convoy.NewProcessor(f.store, convoy.ProcessorOptions{Domain: orders.Domain, Index: f.store, Now: f.clock.now, LagWindow: window, Active: ledgers})
	h := f.healer(heal.Options{Domain: orders.Domain, Active: ledgers, LagWindow: window, Disabled: true})
	create := convoy.Message{Seq: 1, MessageID: "d-slow:1", Command: orders.Transaction{OrderID: "d-slow", Op: orders.CreateOrder, Currency: "EUR"}}
	if _, err := p.Process(ctx, "d-slow", []convoy.Message{create}); err != nil {
		t.Fatal(err)
	}
	f.clock.add(4 * time.Minute)
	amount := int64(2)
	add := convoy.Message{Seq: 2, MessageID: "d-slow:2", Command: orders.Transaction{OrderID: "d-slow", Op: orders.AddTransaction, TxID: "t2", Amount: &amount}}
	removed := false
	f.store.Fail = func(op, orderID string) error {
		if op == "commit" && orderID == "d-slow" && f.store.Fail != nil {
			f.store.Fail = nil
			f.clock.add(7 * time.Minute)
			h.RunOnce(ctx)
			removed = !active(t, ledgers)["d-slow"]
		}
		return nil
	}
	if _, err := p.Process(ctx, "d-slow", []convoy.Message{add}); err != nil || !removed {
		t.Fatalf("seq 2: %v (entry removed during its commit: %v, want true)", err, removed)
	}
	if !active(t, ledgers)["d-slow"] {
		t.Fatalf("the entry a survey removed during a commit that hung for seven minutes was not written again")
	}
}
