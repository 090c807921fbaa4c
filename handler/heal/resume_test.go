package heal_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/convoy-dev/convoy/handler/convoy"
	"github.com/convoy-dev/convoy/handler/fault"
	"github.com/convoy-dev/convoy/handler/heal"
	"github.com/convoy-dev/convoy/handler/internal/convoytest"
	"github.com/convoy-dev/convoy/handler/keyed"
	"github.com/convoy-dev/convoy/handler/operator"
	"github.com/convoy-dev/convoy/handler/orders"
)

// TestRunResumesACutDrain (issue 33, item 1): a blocked order whose missing
// seq is parked (a drain cut short, with no delivery to come) is drained by
// the next AutoReplay run, which then neither lists nor counts it.
func TestRunResumesACutDrain(t *testing.T) {
	ctx := context.Background()
	f := newFixture()
	p := convoy.NewProcessor(f.store, convoy.ProcessorOptions{Domain: orders.Domain, Index: f.store, Retry: fault.RetryPolicy{MaxAttempts: 1}})
	if err := convoytest.CutDrain(ctx, f.store, p, "o-1", 69); err != nil {
		t.Fatal(err)
	}
	if page, _ := convoy.ListBlocked(ctx, f.store, "", 10); len(page.Orders) != 1 {
		t.Fatalf("the cut drain's order is not listed blocked: %+v", page.Orders)
	}
	r := f.healer(heal.Options{Domain: orders.Domain, Resume: p.Resume}).RunOnce(ctx)
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

// TestLongNoteIsBounded (issue 42, item 2): what a replay or a skip learnt
// about a missing message is written into the blocked order's index entry,
// one Table property. A reason or an error of any length (other tools write
// exception text of kilobytes, and '<', '>', '&' cost six bytes in JSON)
// must still fit it: memstore refuses what Table Storage refuses.
func TestLongNoteIsBounded(t *testing.T) {
	ctx := context.Background()
	f := newFixture()
	f.block(t, "o-1")
	long := strings.Repeat("<&> exception text ", 5000) // 95 KB, 155 KB in JSON
	m := heal.Missing{Where: heal.WhereDeadLetter, MessageID: "L:1", DeadLetterReason: long, Why: long,
		AutoReplay: &heal.State{OrderID: "o-1", Seq: 1, LastError: long}}
	if err := heal.Learnt(ctx, f.store, "o-1", m, time.Now()); err != nil {
		t.Fatalf("the note was not written: %v", err)
	}
	page, err := convoy.ListBlocked(ctx, f.store, "", 10)
	if err != nil || len(page.Orders) != 1 || !strings.Contains(page.Orders[0].Note, "exception text") {
		t.Fatalf("the note is not the one learnt: %+v, %v", page.Orders, err)
	}
}

// TestSurveySaysADecisionFails (issue 43): a blocked order whose missing
// seq's decision fails (the rules panicked: the processor noted it on the
// head) is explained by that failure, not by what became of its message,
// which the host dead-lettered for running out of deliveries.
func TestSurveySaysADecisionFails(t *testing.T) {
	ctx := context.Background()
	f := newFixture()
	f.block(t, "o-1")
	f.q.add("o-1", 1, operator.ReasonMaxDelivery, "")
	if err := f.store.NoteFailure(ctx, "o-1", keyed.Failure{Seq: 1, Why: "the rules panicked: index out of range", At: f.clock.now()}); err != nil {
		t.Fatal(err)
	}
	h := f.healer(heal.Options{Domain: orders.Domain, Disabled: true})
	h.RunOnce(ctx)
	page, err := convoy.ListBlocked(ctx, f.store, "", 10)
	if err != nil {
		t.Fatal(err)
	}
	got, err := h.Explain(ctx, page.Orders)
	if err != nil || len(got) != 1 {
		t.Fatalf("explained %+v, %v", got, err)
	}
	if m := got[0].Missing; m.Cause != operator.Permanent || !strings.Contains(m.Why, "its decision fails: the rules panicked: index out of range") {
		t.Fatalf("the missing seq: %+v, want its decision's failure as the cause", m)
	}
}
