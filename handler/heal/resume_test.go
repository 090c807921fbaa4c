package heal_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/convoy-dev/convoy/handler/convoy"
	"github.com/convoy-dev/convoy/handler/fault"
	"github.com/convoy-dev/convoy/handler/heal"
)

// TestRunResumesACutDrain (issue 33, item 1): a blocked order whose missing
// seq is parked (a drain cut short, with no delivery to come) is drained by
// the next AutoReplay run, which then neither lists nor counts it.
func TestRunResumesACutDrain(t *testing.T) {
	ctx := context.Background()
	f := newFixture()
	p := convoy.NewProcessor(f.store, convoy.ProcessorOptions{Index: f.store, Retry: fault.RetryPolicy{MaxAttempts: 1}})
	var tail []convoy.Message
	for seq := int64(2); seq <= 69; seq++ {
		n := int64(1)
		tail = append(tail, convoy.Message{Seq: seq, Tx: convoy.Transaction{OrderID: "o-1", Op: convoy.AddTransaction, TxID: fmt.Sprintf("t-%d", seq), Amount: &n}})
	}
	if _, err := p.Process(ctx, "o-1", tail); err != nil {
		t.Fatal(err)
	}
	commits := 0
	f.store.Fail = func(op, _ string) error {
		if op == "commit" {
			if commits++; commits == 2 {
				return fault.Errorf(fault.Unavailable, "storage blip")
			}
		}
		return nil
	}
	create := convoy.Message{Seq: 1, Tx: convoy.Transaction{OrderID: "o-1", Op: convoy.CreateOrder, Currency: "EUR"}}
	if _, err := p.Process(ctx, "o-1", []convoy.Message{create}); err == nil {
		t.Fatal("the setup's second commit did not fail")
	}
	f.store.Fail = nil
	if page, _ := convoy.ListBlocked(ctx, f.store, "", 10); len(page.Orders) != 1 {
		t.Fatalf("the cut drain's order is not listed blocked: %+v", page.Orders)
	}
	r := f.healer(heal.Options{Resume: p.Resume}).RunOnce(ctx)
	if r.Summary == nil || r.Summary.BlockedOrders != 0 {
		t.Fatalf("the run counts the drained order blocked: %+v", r.Summary)
	}
	o, _ := f.store.Load(ctx, "o-1")
	if o.AppliedSeq != 69 || o.ParkedCount != 0 {
		t.Fatalf("after the run: appliedSeq %d, %d parked; want 69, 0", o.AppliedSeq, o.ParkedCount)
	}
	if page, _ := convoy.ListBlocked(ctx, f.store, "", 10); len(page.Orders) != 0 {
		t.Fatalf("a drained order is still listed blocked: %+v", page.Orders)
	}
}
