package convoy_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/convoy-dev/convoy/handler/convoy"
	"github.com/convoy-dev/convoy/handler/fault"
	"github.com/convoy-dev/convoy/handler/internal/convoytest"
	"github.com/convoy-dev/convoy/handler/internal/memstore"
	"github.com/convoy-dev/convoy/handler/orders"
)

// parkedTail parks seqs 2..n of order o-1 (created by nothing yet): seq 1 is
// its missing seq.
func parkedTail(t *testing.T, p *convoy.Processor, n int64) {
	t.Helper()
	var msgs []convoy.Message
	for seq := int64(2); seq <= n; seq++ {
		msgs = append(msgs, add(seq, fmt.Sprintf("t-%d", seq), 1))
	}
	if _, err := p.Process(context.Background(), "o-1", msgs); err != nil {
		t.Fatal(err)
	}
}

// TestSkipCutMidDrainNeverSkipsAReceivedSeq (issue 33, item 1): a skip whose
// drain is cut after its first commit leaves the order's next seq parked.
// That seq was received: a skip of it is refused, and the cut drain resumes
// (the skip retried, or Resume), so that every parked message is applied and
// only the missing seq is "skipped by operator".
func TestSkipCutMidDrainNeverSkipsAReceivedSeq(t *testing.T) {
	ctx := context.Background()
	store := memstore.New()
	p := convoy.NewProcessor(store, convoy.ProcessorOptions{Domain: orders.Domain, Index: store, Retry: fault.RetryPolicy{MaxAttempts: 1}})
	parkedTail(t, p, 69) // 68 parked: their drain takes three commits
	failCommit(store, 2)
	res, _, err := p.Skip(ctx, "o-1", 1)
	if err != nil {
		t.Fatalf("the skip landed, only its drain was cut: %v", err)
	}
	if !res.Draining {
		t.Fatalf("a skip whose drain was cut does not say so: %+v", res)
	}
	store.Fail = nil
	o, _ := store.Load(ctx, "o-1")
	cut := o.AppliedSeq + 1
	if _, parked := o.Parked[cut]; !parked {
		t.Fatalf("the setup did not cut the drain: appliedSeq %d, %d parked", o.AppliedSeq, len(o.Parked))
	}
	if _, _, err := p.Skip(ctx, "o-1", cut); err == nil || fault.CodeOf(err) != fault.Conflict {
		t.Fatalf("skipping seq %d, which was received and is parked: %v, want a conflict", cut, err)
	}
	// The operator's retry of the skip resumes the drain and answers success.
	res, cv, err := p.Skip(ctx, "o-1", 1)
	view := orders.ViewOf(cv)
	if err != nil || !res.SkippedEarlier {
		t.Fatalf("the retried skip: %+v, %v; want success, skipped earlier", res, err)
	}
	if view.AppliedSeq != 69 || view.Parked != 0 || res.Draining {
		t.Fatalf("after the retried skip: appliedSeq %d, %d parked, draining %v; want 69, 0, false", view.AppliedSeq, view.Parked, res.Draining)
	}
	assertOnlySkipped(t, store, "o-1", 1)
	if page, _ := convoy.ListBlocked(ctx, store, "", 10); len(page.Orders) != 0 {
		t.Fatalf("a drained order is listed blocked: %+v", page.Orders)
	}
}

// TestResumeDrainsACutDrain: a drain cut with every later message parked
// (no delivery will come) is resumed by Resume, which every reader of an
// order that finds its next seq parked calls.
func TestResumeDrainsACutDrain(t *testing.T) {
	ctx := context.Background()
	store := memstore.New()
	p := convoy.NewProcessor(store, convoy.ProcessorOptions{Domain: orders.Domain, Index: store, Retry: fault.RetryPolicy{MaxAttempts: 1}})
	// Seq 1 arrives on its last delivery; the drain's second commit fails.
	if err := convoytest.CutDrain(ctx, store, p, "o-1", 69); err != nil {
		t.Fatal(err)
	}
	res, err := p.Resume(ctx, "o-1")
	if err != nil || res.AppliedSeq != 69 || res.Parked != 0 || res.Draining {
		t.Fatalf("Resume: %+v, %v; want appliedSeq 69, none parked", res, err)
	}
	assertOnlySkipped(t, store, "o-1")
	// Nothing to drain: nothing written.
	if res, err := p.Resume(ctx, "o-1"); err != nil || res.Commits != 0 {
		t.Fatalf("Resume of a drained order: %+v, %v", res, err)
	}
}

// TestSkipRetriedAfterLostReply (issue 33, item 2): a skip whose commit
// landed but whose answer was lost, retried, answers success (skipped
// earlier), so that its dead letter is settled; nothing is skipped twice.
func TestSkipRetriedAfterLostReply(t *testing.T) {
	ctx := context.Background()
	store := memstore.New()
	p := convoy.NewProcessor(store, convoy.ProcessorOptions{Domain: orders.Domain, Index: store, Retry: fault.RetryPolicy{MaxAttempts: 1}})
	parkedTail(t, p, 3)
	lost := false
	store.LoseReply = func(string) bool { was := lost; lost = true; return !was }
	if _, _, err := p.Skip(ctx, "o-1", 1); err == nil {
		t.Fatal("the lost reply was not reported")
	}
	store.LoseReply = nil
	res, cv, err := p.Skip(ctx, "o-1", 1)
	view := orders.ViewOf(cv)
	if err != nil || !res.SkippedEarlier || view.AppliedSeq != 3 {
		t.Fatalf("the retried skip: %+v, appliedSeq %d, %v; want success, skipped earlier, appliedSeq 3", res, view.AppliedSeq, err)
	}
	assertOnlySkipped(t, store, "o-1", 1)
	// A seq that was applied is not "skipped earlier": refused.
	if _, _, err := p.Skip(ctx, "o-1", 2); fault.CodeOf(err) != fault.Conflict {
		t.Fatalf("skip of an applied seq: %v, want a conflict", err)
	}
}

// TestStaleConfirmIsVerified (issue 3): a confirm that lands after another
// instance's commit ended the block, whose clear failed, is listed by
// CheckEntries (confirmed entries are trusted) until VerifyEntries, which
// the AutoReplay survey uses, checks it against the head and removes it.
func TestStaleConfirmIsVerified(t *testing.T) {
	ctx := context.Background()
	store := memstore.New()
	a := convoy.NewProcessor(store, convoy.ProcessorOptions{Domain: orders.Domain, Index: store})
	b := convoy.NewProcessor(store, convoy.ProcessorOptions{Domain: orders.Domain, Index: store})
	parkedTail(t, a, 2)
	o, _ := store.Load(ctx, "o-1")
	since, version := o.BlockedSince, o.Version
	// b fills the gap; its clear of the entry fails.
	store.Fail = func(op, _ string) error {
		if op == "index.clear" {
			return fault.Errorf(fault.Unavailable, "storage blip")
		}
		return nil
	}
	if _, err := b.Process(ctx, "o-1", []convoy.Message{create(1)}); err != nil {
		t.Fatal(err)
	}
	store.Fail = nil
	// a's confirm of its commit lands late, after b's commit.
	if _, err := store.UpdateBlocked(ctx, "o-1", since, convoy.BlockedUpdate{Figures: true, Confirmed: true, Version: version,
		AppliedSeq: 0, Parked: 1}, "*"); err != nil {
		t.Fatal(err)
	}
	entries, _, _ := store.ScanBlocked(ctx, "", 10)
	verified, err := convoy.VerifyEntries(ctx, store, entries)
	if err != nil || len(verified) != 0 {
		t.Fatalf("VerifyEntries lists a healed order: %+v, %v", verified, err)
	}
	if page, _ := convoy.ListBlocked(ctx, store, "", 10); len(page.Orders) != 0 {
		t.Fatalf("the stale entry outlived the verification: %+v", page.Orders)
	}
}

// TestSkipDrainStopsBeforeTheDeadline: a skip's drain leaves its caller time
// to answer: with a deadline too short for the whole tail it stops, says so,
// and the skip stands.
func TestSkipDrainStopsBeforeTheDeadline(t *testing.T) {
	store := memstore.New()
	p := convoy.NewProcessor(store, convoy.ProcessorOptions{Domain: orders.Domain, Index: store})
	parkedTail(t, p, 300)
	slow := 0
	store.Fail = func(op, _ string) error {
		if op == "commit" {
			if slow++; slow > 1 {
				time.Sleep(100 * time.Millisecond) // each drain commit after the skip's
			}
		}
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 400*time.Millisecond)
	defer cancel()
	res, cv, err := p.Skip(ctx, "o-1", 1)
	view := orders.ViewOf(cv)
	if err != nil || !res.Draining || view.AppliedSeq >= 300 || view.AppliedSeq < 1 {
		t.Fatalf("a skip with no time for its whole drain: %+v, appliedSeq %d, %v; want success, draining", res, view.AppliedSeq, err)
	}
	store.Fail = nil
	if res, err := p.Resume(context.Background(), "o-1"); err != nil || res.AppliedSeq != 300 {
		t.Fatalf("Resume after the cut skip: %+v, %v", res, err)
	}
	assertOnlySkipped(t, store, "o-1", 1)
}

// assertOnlySkipped checks that the order's rejections "skipped by operator"
// are exactly seqs.
func assertOnlySkipped(t *testing.T, store *memstore.Store, orderID string, seqs ...int64) {
	t.Helper()
	rs, _, err := store.Rejections(context.Background(), orderID, 0, 1000)
	if err != nil {
		t.Fatal(err)
	}
	var skipped []int64
	for _, r := range rs {
		if r.Reason == convoy.ReasonSkipped {
			skipped = append(skipped, r.Seq)
		}
	}
	if fmt.Sprint(skipped) != fmt.Sprint(append([]int64{}, seqs...)) {
		t.Fatalf("seqs skipped by operator: %v, want %v", skipped, seqs)
	}
}

// TestCopyOfACutDrainsHeadDrainsFirst (issue 42, item 1): a drain cut short
// leaves the order's next seq parked. Another copy of that seq (a
// redelivery after a lost completion, a replayed dead letter) must not be
// decided as the next seq while the parked row stays: the parked drain is
// finished first, the copy is then a duplicate. Otherwise the row is
// orphaned below appliedSeq, the order stays blocked on a seq nobody sent
// yet, a skip of it is accepted and the real message is dropped.
func TestCopyOfACutDrainsHeadDrainsFirst(t *testing.T) {
	ctx := context.Background()
	store := memstore.New()
	p := convoy.NewProcessor(store, convoy.ProcessorOptions{Domain: orders.Domain, Index: store, Retry: fault.RetryPolicy{MaxAttempts: 1}})
	if err := convoytest.CutDrain(ctx, store, p, "o-1", 69); err != nil {
		t.Fatal(err)
	}
	o, _ := store.Load(ctx, "o-1")
	head := o.AppliedSeq + 1
	res, err := p.Process(ctx, "o-1", []convoy.Message{add(head, fmt.Sprintf("t-%d", head), 1)})
	if err != nil {
		t.Fatal(err)
	}
	if res.AppliedSeq != 69 || res.Parked != 0 {
		t.Fatalf("after a copy of parked seq %d: appliedSeq %d, %d parked; want 69, none", head, res.AppliedSeq, res.Parked)
	}
	// The store's own rows, read apart from the head's count.
	if rows, _, err := store.Parked(ctx, "o-1", 0, 1000); err != nil || len(rows) != 0 {
		t.Fatalf("parked rows left after the drain: %d (%v)", len(rows), err)
	}
	if _, _, err := p.Skip(ctx, "o-1", 70); fault.CodeOf(err) != fault.Conflict {
		t.Fatalf("skip of seq 70, which nobody sent yet and nothing waits for: %v, want refused", err)
	}
	res, err = p.Process(ctx, "o-1", []convoy.Message{add(70, "t-70", 1)})
	if err != nil || len(res.Outcomes) != 1 || res.Outcomes[0].Disposition != convoy.Applied {
		t.Fatalf("the real seq 70: %+v, %v; want applied", res.Outcomes, err)
	}
	assertOnlySkipped(t, store, "o-1")
}

// TestSkipWhoseDrainStopsAtOnceRefusesTheParkedHead: a skip's drain that
// stops before its first step (the answer's deadline near, on the
// processor's clock) leaves a cut drain's head parked; that seq was
// received, so a skip of it is refused there too, and the head drains
// with the rest (Resume): nothing is skipped.
func TestSkipWhoseDrainStopsAtOnceRefusesTheParkedHead(t *testing.T) {
	ctx := context.Background()
	store := memstore.New()
	deadline := time.Now().Add(time.Hour)
	now := deadline.Add(-4 * time.Second) // the drain's stop: a second before the deadline
	p := convoy.NewProcessor(store, convoy.ProcessorOptions{Domain: orders.Domain, Index: store, Retry: fault.RetryPolicy{MaxAttempts: 1},
		Now: func() time.Time { return now }})
	if err := convoytest.CutDrain(ctx, store, p, "o-1", 69); err != nil {
		t.Fatal(err)
	}
	o, _ := store.Load(ctx, "o-1")
	head := o.AppliedSeq + 1
	store.Fail = func(op, _ string) error {
		if op == "load" {
			now = deadline.Add(-500 * time.Millisecond) // past the stop once the order is read
		}
		return nil
	}
	dctx, cancel := context.WithDeadline(ctx, deadline)
	defer cancel()
	if _, _, err := p.Skip(dctx, "o-1", head); fault.CodeOf(err) != fault.Conflict {
		t.Fatalf("skip of seq %d, received and parked, with no time left to drain it: %v, want a conflict", head, err)
	}
	store.Fail = nil
	if res, err := p.Resume(ctx, "o-1"); err != nil || res.AppliedSeq != 69 || res.Parked != 0 {
		t.Fatalf("Resume: %+v, %v; want appliedSeq 69, none parked", res, err)
	}
	assertOnlySkipped(t, store, "o-1")
}

// TestOrderListedOnceWithAStaleConfirm: a commit ended an order's block
// but its clear of the index entry failed, and a reader's (or another
// instance's) confirm of that entry landed after it (TestStaleConfirmIsVerified);
// before the next AutoReplay survey verifies it, the order blocks again. Its
// stale entry and its new one are both in the index: the blocked list reads
// the head of an order it finds twice, lists it once, on its current gap, and
// removes the stale entry.
func TestOrderListedOnceWithAStaleConfirm(t *testing.T) {
	ctx := context.Background()
	store := memstore.New()
	clock := t0
	p := convoy.NewProcessor(store, convoy.ProcessorOptions{Domain: orders.Domain, Index: store,
		Now: func() time.Time { clock = clock.Add(time.Second); return clock }}) // each block its own key
	parkedTail(t, p, 2) // seq 2 parked behind seq 1: blocked
	o, _ := store.Load(ctx, "o-1")
	since, version := o.BlockedSince, o.Version
	store.Fail = func(op, _ string) error {
		if op == "index.clear" {
			return fault.Errorf(fault.Unavailable, "storage blip")
		}
		return nil
	}
	if _, err := p.Process(ctx, "o-1", []convoy.Message{create(1)}); err != nil { // fills the gap; the clear fails
		t.Fatal(err)
	}
	store.Fail = nil
	if _, err := store.UpdateBlocked(ctx, "o-1", since, convoy.BlockedUpdate{Figures: true, Confirmed: true, Version: version,
		AppliedSeq: 0, Parked: 1}, "*"); err != nil { // the late confirm
		t.Fatal(err)
	}
	if _, err := p.Process(ctx, "o-1", []convoy.Message{add(4, "t-4", 1)}); err != nil { // blocked again, on seq 3
		t.Fatal(err)
	}
	if entries, _, _ := store.ScanBlocked(ctx, "", 10); len(entries) != 2 {
		t.Fatalf("the setup left %d index entries, want the stale one and the new one", len(entries))
	}
	page, err := convoy.ListBlocked(ctx, store, "", 10)
	if err != nil || len(page.Orders) != 1 || page.Orders[0].MissingSeq != 3 {
		t.Fatalf("the blocked list: %+v, %v; want o-1 once, missing seq 3", page.Orders, err)
	}
	if entries, _, _ := store.ScanBlocked(ctx, "", 10); len(entries) != 1 {
		t.Fatalf("%d index entries left, want the stale one removed", len(entries))
	}
}
