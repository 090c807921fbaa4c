package storetest

import (
	"context"
	"fmt"
	"testing"

	"github.com/convoy-dev/convoy/handler/convoy"
	"github.com/convoy-dev/convoy/handler/orders"
)

// ParkedAboveApplied checks what must hold of an order after every commit,
// read from the store's own rows: every parked row lies above the head's
// appliedSeq (a row at or below it was orphaned: its seq was decided beside
// it, and the order would wait for ever on a seq nobody sends), and the
// rows are as many as the head counts. The healing simulation's store
// checks it after each commit; the suite after each of its steps.
func ParkedAboveApplied(ctx context.Context, s convoy.Store, orderID string) error {
	o, err := s.Load(ctx, orderID)
	if err != nil {
		return fmt.Errorf("load order %q: %w", orderID, err)
	}
	rows, after := 0, int64(0)
	for {
		page, more, err := s.Parked(ctx, orderID, after, convoy.ParkedPageSize)
		if err != nil {
			return fmt.Errorf("read the parked rows of order %q after seq %d: %w", orderID, after, err)
		}
		for _, m := range page {
			if m.Seq <= o.AppliedSeq {
				return fmt.Errorf("order %q: seq %d is parked at or below appliedSeq %d", orderID, m.Seq, o.AppliedSeq)
			}
		}
		rows += len(page)
		if !more || len(page) == 0 {
			break
		}
		after = page[len(page)-1].Seq
	}
	if rows != o.ParkedCount {
		return fmt.Errorf("order %q: %d parked row(s), the head counts %d", orderID, rows, o.ParkedCount)
	}
	return nil
}

// testCopyOfACutDrainsHead: a drain cut short leaves the order's next seq
// parked; a processor given another copy of that seq drains the parked one
// first and takes the copy for a duplicate, leaving no row behind.
func testCopyOfACutDrainsHead(t *testing.T, s convoy.Store, id string) {
	ctx := context.Background()
	o := newOrder(t, id)
	step(t, s, o, msg(3, orders.AddTransaction, "t-3", 3), msg(4, orders.AddTransaction, "t-4", 4))
	// Seqs 1 and 2 received and committed, their drain cut before seq 3.
	var c convoy.Change
	for _, m := range []convoy.Message{msg(1, orders.CreateOrder, "", 0), msg(2, orders.AddTransaction, "t-2", 2)} {
		receive(t, o, of(id, m), epoch, &c)
	}
	if err := s.Commit(ctx, o, o.Version, &c); err != nil {
		t.Fatal(err)
	}
	if got := load(t, s, id); got.AppliedSeq != 2 || got.ParkedCount != 2 {
		t.Fatalf("the setup: appliedSeq %d, %d parked; want a drain cut at 2 with 2 parked", got.AppliedSeq, got.ParkedCount)
	}
	p := convoy.NewProcessor(s, convoy.ProcessorOptions{Domain: orders.Domain})
	copy3 := of(id, msg(3, orders.AddTransaction, "t-3", 3))
	res, err := p.Process(ctx, id, []convoy.Message{copy3})
	if err != nil {
		t.Fatal(err)
	}
	if res.AppliedSeq != 4 || res.Parked != 0 {
		t.Fatalf("a copy of the parked seq 3: appliedSeq %d, %d parked; want 4, none", res.AppliedSeq, res.Parked)
	}
	if err := ParkedAboveApplied(ctx, s, id); err != nil {
		t.Fatal(err)
	}
	sameHistory(t, s, id, []orders.TxEntry{tx("t-2", 2), tx("t-3", 3), tx("t-4", 4)}, nil)
}
