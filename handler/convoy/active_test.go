package convoy_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/convoy-dev/convoy/handler/convoy"
	"github.com/convoy-dev/convoy/handler/internal/memstore"
	"github.com/convoy-dev/convoy/handler/orders"
)

// TestActiveIndexWrittenOnlyWhenNotKnown: the processor writes an order's
// active entry when it does not know it to be there, never in steady state:
// a message costs its commit alone once the order is known to the instance,
// whatever its pace, with messages parked or not; the entry is written again
// for the first message after the order looked idle for a window (the
// survey may have removed it), by a new instance, and never for duplicates.
// A failed index write fails the message, before its commit.
func TestActiveIndexWrittenOnlyWhenNotKnown(t *testing.T) {
	ctx := context.Background()
	now := time.Date(2026, 11, 26, 10, 0, 0, 0, time.UTC)
	clock := func() time.Time { return now }
	store := memstore.New()
	ledgers := memstore.NewLedgers()
	var marks, commits int
	var markFails error
	ledgers.Fail = func(op string) error {
		if op == "mark" {
			marks++
			return markFails
		}
		return nil
	}
	store.Fail = func(op, _ string) error {
		if op == "commit" {
			commits++
		}
		return nil
	}
	const window = 5 * time.Minute
	newProcessor := func() *convoy.Processor {
		return convoy.NewProcessor(store, convoy.ProcessorOptions{Domain: orders.Domain, Now: clock, LagWindow: window, Active: ledgers})
	}
	p := newProcessor()
	msg := func(seq int64) convoy.Message {
		tx := orders.Transaction{OrderID: "o-1", Op: orders.CreateOrder, Currency: "EUR"}
		if seq > 1 {
			amount := seq
			tx = orders.Transaction{OrderID: "o-1", Op: orders.AddTransaction, TxID: fmt.Sprintf("t%d", seq), Amount: &amount}
		}
		return convoy.Message{Seq: seq, MessageID: fmt.Sprintf("L:%d", seq), Command: tx, EnqueuedAt: now.Add(-time.Second)}
	}
	step := func(name string, p *convoy.Processor, seq int64, wantMarks, wantCommits int) {
		t.Helper()
		marks, commits = 0, 0
		if _, err := p.Process(ctx, "o-1", []convoy.Message{msg(seq)}); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if marks != wantMarks || commits != wantCommits {
			t.Errorf("%s (seq %d): %d index writes and %d commits, want %d and %d", name, seq, marks, commits, wantMarks, wantCommits)
		}
	}
	step("the order's first message", p, 1, 1, 1)
	for seq := int64(2); seq <= 50; seq++ {
		now = now.Add(10 * time.Second)
		step("steady state", p, seq, 0, 1)
	}
	step("a duplicate", p, 20, 0, 0)
	now = now.Add(4 * time.Minute)
	step("after four minutes", p, 51, 0, 1)
	now = now.Add(window)
	step("after a window without progress", p, 52, 1, 1)
	step("the next one", p, 53, 0, 1)
	step("a message that opens a gap", p, 55, 0, 1)
	now = now.Add(time.Hour)
	step("parked behind the gap for an hour", p, 56, 0, 1)
	step("a new instance", newProcessor(), 57, 1, 1)

	e := activeEntry(t, ledgers, "o-1")
	if e.SeenSeq != 57 || !e.SeenAt.Equal(now.Add(-time.Second)) {
		t.Errorf("entry %+v, want seq 57 seen, enqueued a second ago", e)
	}

	markFails = errors.New("storage is down")
	marks, commits = 0, 0
	if _, err := newProcessor().Process(ctx, "o-1", []convoy.Message{msg(54)}); !errors.Is(err, markFails) || commits != 0 {
		t.Errorf("index write failing: %v after %d commits, want the failure, no commit", err, commits)
	}
	if o, err := store.Load(ctx, "o-1"); err != nil || o.AppliedSeq != 53 {
		t.Errorf("after the failed index write: applied %d, %v; want 53 still", o.AppliedSeq, err)
	}
}

func activeEntry(t *testing.T, idx convoy.ActiveIndex, id string) convoy.ActiveOrder {
	t.Helper()
	page, _, err := idx.ScanActive(context.Background(), "", 1000)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range page {
		if e.OrderID == id {
			return e
		}
	}
	t.Fatalf("%s is not in the active index", id)
	return convoy.ActiveOrder{}
}
