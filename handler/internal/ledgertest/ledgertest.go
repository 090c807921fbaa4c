// Package ledgertest is the conformance suite every ledger.Store passes.
package ledgertest

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/convoy-dev/convoy/handler/convoy"
	"github.com/convoy-dev/convoy/handler/fault"
	"github.com/convoy-dev/convoy/handler/ledger"
)

// Run runs the suite; every test uses its own ids.
func Run(t *testing.T, s ledger.Store) {
	prefix := fmt.Sprintf("lt%d", time.Now().UnixNano())
	t.Run("Records", func(t *testing.T) { testRecords(t, s, prefix+"-rec") })
	t.Run("AllocateIsIdempotent", func(t *testing.T) { testAllocate(t, s, prefix+"-alloc") })
	t.Run("RacingLedgersShareNoSeqAndLeaveNoHole", func(t *testing.T) { testRace(t, s, prefix+"-race") })
	t.Run("RecordsAreNeverOverwrittenBlindly", func(t *testing.T) { testConditional(t, s, prefix+"-cond") })
	t.Run("AllocationOfOtherContentIsAConflict", func(t *testing.T) { testAllocationMismatch(t, s, prefix+"-mis") })
	if idx, ok := s.(convoy.ActiveIndex); ok {
		t.Run("ActiveIndex", func(t *testing.T) { testActive(t, s, idx, prefix+"-act") })
	}
	t.Run("KeysTableStorageRefuses", func(t *testing.T) { testKeys(t, s, prefix+"-key") })
}

// testKeys: a ledger id is a key ("ledger:<id>", "alloc:<id>"), and so is an
// order id ("order:<id>", its active entry's RowKey); a key with a
// character Table Storage does not allow ('#' here; '/', '\', '?' and
// control characters alike) is refused as tablestore surfaces Azure's 400
// (fault.Internal), and writes nothing.
func testKeys(t *testing.T, s ledger.Store, prefix string) {
	ctx := context.Background()
	bad, good := prefix+"#x", prefix+"-ok"
	if err := s.CreateLedger(ctx, &ledger.Record{ID: bad, Hash: "abc", Status: ledger.StatusPublishing}); fault.CodeOf(err) != fault.Internal {
		t.Fatalf("create ledger %q: %v, want a refusal (fault.Internal)", bad, err)
	}
	if r, err := s.GetLedger(ctx, bad); err != nil || r != nil {
		t.Fatalf("ledger %q after its refused create: %+v, %v", bad, r, err)
	}
	if _, err := s.Allocate(ctx, bad, "h", good, 1); fault.CodeOf(err) != fault.Internal {
		t.Fatalf("allocate to ledger %q: %v, want a refusal (fault.Internal)", bad, err)
	}
	if _, err := s.Allocate(ctx, good, "h", bad, 1); fault.CodeOf(err) != fault.Internal {
		t.Fatalf("allocate to order %q: %v, want a refusal (fault.Internal)", bad, err)
	}
	if first, err := s.Allocate(ctx, good, "h", good, 1); err != nil || first != 1 {
		t.Fatalf("an allocation after the refused ones: first seq %d, %v; want 1", first, err)
	}
	if err := s.Activate(ctx, []string{good, bad}); fault.CodeOf(err) != fault.Internal {
		t.Fatalf("activate order %q: %v, want a refusal (fault.Internal)", bad, err)
	}
	if m, ok := s.(convoy.ActiveMarker); ok {
		if err := m.MarkActive(ctx, bad, convoy.Seen{Seq: 1, At: time.Now()}); fault.CodeOf(err) != fault.Internal {
			t.Fatalf("mark order %q active: %v, want a refusal (fault.Internal)", bad, err)
		}
	}
}

// testActive: the active-orders index lists what Activate wrote, by order
// id, a page at a time; Deactivate removes an entry only as it was read;
// Published tells what was allocated, and when.
func testActive(t *testing.T, s ledger.Store, idx convoy.ActiveIndex, prefix string) {
	ctx := context.Background()
	mine := func() []convoy.ActiveOrder {
		var out []convoy.ActiveOrder
		after := ""
		for {
			page, more, err := idx.ScanActive(ctx, after, 100)
			if err != nil {
				t.Fatal(err)
			}
			if len(page) > 100 {
				t.Fatalf("a page of %d entries, asked for 100", len(page))
			}
			for _, e := range page {
				if strings.HasPrefix(e.OrderID, prefix) {
					out = append(out, e)
				}
			}
			if !more {
				return out
			}
			after = page[len(page)-1].OrderID
		}
	}
	var ids []string
	for i := range 250 {
		ids = append(ids, fmt.Sprintf("%s-%03d", prefix, i))
	}
	before := time.Now().UTC().Add(-2 * time.Second)
	if err := s.Activate(ctx, ids); err != nil {
		t.Fatal(err)
	}
	got := mine()
	if len(got) != len(ids) {
		t.Fatalf("%d entries listed, want %d", len(got), len(ids))
	}
	for i, e := range got {
		if e.OrderID != ids[i] || e.ETag == "" || e.PublishedAt.Before(before) {
			t.Fatalf("entry %d: %+v, want %s with an ETag, published after %v", i, e, ids[i], before)
		}
	}
	if err := idx.Deactivate(ctx, got[0]); err != nil {
		t.Fatal(err)
	}
	if err := s.Activate(ctx, ids[1:2]); err != nil { // written again since it was read
		t.Fatal(err)
	}
	if err := idx.Deactivate(ctx, got[1]); err != nil {
		t.Fatal(err)
	}
	if again := mine(); len(again) != len(ids)-1 || again[0].OrderID != ids[1] || again[0].ETag == got[1].ETag {
		t.Fatalf("after removing the first and the second as read before it was written again: %d entries, first %+v", len(again), again[0])
	}
	if err := idx.Deactivate(ctx, got[0]); err != nil { // gone already
		t.Fatalf("removing an entry twice: %v", err)
	}

	order := prefix + "-pub"
	if p, err := idx.Published(ctx, order, 1); err != nil || p != (convoy.Published{}) {
		t.Fatalf("nothing published: %+v, %v", p, err)
	}
	for i, count := range []int{3, 2, 4} {
		if _, err := s.Allocate(ctx, fmt.Sprintf("%s-L%d", prefix, i), "h", order, count); err != nil {
			t.Fatal(err)
		}
	}
	for seq := int64(1); seq <= 10; seq++ {
		p, err := idx.Published(ctx, order, seq)
		if err != nil || p.LastSeq != 9 || (seq <= 9) == p.SeqAllocatedAt.IsZero() {
			t.Errorf("seq %d: %+v, %v; want last 9, an allocation time for seqs 1 to 9 only", seq, p, err)
		}
	}
	// A dead-lettered seq noted: told with what was published, kept by
	// an allocation, cleared by a note of 0; an order nothing was
	// published to is left without one.
	if err := idx.NoteDeadLettered(ctx, order, 4); err != nil {
		t.Fatal(err)
	}
	if p, _ := idx.Published(ctx, order, 4); p.DeadLetteredSeq != 4 {
		t.Fatalf("noted seq 4: %+v", p)
	}
	if _, err := s.Allocate(ctx, prefix+"-L9", "h", order, 1); err != nil {
		t.Fatal(err)
	}
	if p, _ := idx.Published(ctx, order, 4); p.DeadLetteredSeq != 4 || p.LastSeq != 10 {
		t.Fatalf("after an allocation: %+v, want seq 4 still noted, last 10", p)
	}
	if err := idx.NoteDeadLettered(ctx, order, 0); err != nil {
		t.Fatal(err)
	}
	if p, _ := idx.Published(ctx, order, 4); p.DeadLetteredSeq != 0 {
		t.Fatalf("cleared: %+v", p)
	}
	if err := idx.NoteDeadLettered(ctx, prefix+"-none", 1); err != nil {
		t.Fatalf("noting an order nothing was published to: %v", err)
	}
	if p, _ := idx.Published(ctx, prefix+"-none", 1); p != (convoy.Published{}) {
		t.Fatalf("an order nothing was published to: %+v", p)
	}
	for _, e := range mine() {
		if e.OrderID == prefix+"-none" {
			t.Fatalf("a note made an entry: %+v", e)
		}
	}
	testMarkActive(t, s, idx, prefix, mine)
}

// testMarkActive: the processor's MarkActive makes an entry, or merges into
// the one there, with a new ETag either way (a survey that read it before
// removes nothing); the entry tells what the processor saw, and keeps a
// dead-lettered seq noted in it (an order nothing was published to keeps its
// note there); publishing's Activate replaces it.
func testMarkActive(t *testing.T, s ledger.Store, idx convoy.ActiveIndex, prefix string, mine func() []convoy.ActiveOrder) {
	ctx := context.Background()
	order := prefix + "-direct"
	entry := func() (convoy.ActiveOrder, bool) {
		for _, e := range mine() {
			if e.OrderID == order {
				return e, true
			}
		}
		return convoy.ActiveOrder{}, false
	}
	at := time.Date(2026, 11, 26, 10, 0, 0, 123_000_000, time.UTC)
	if err := idx.MarkActive(ctx, order, convoy.Seen{Seq: 7, At: at}); err != nil {
		t.Fatal(err)
	}
	first, ok := entry()
	if !ok || first.SeenSeq != 7 || !first.SeenAt.Equal(at) || first.ETag == "" || first.DeadLetteredSeq != 0 {
		t.Fatalf("after MarkActive of seq 7: %+v (listed %v), want seq 7 seen at %v, an ETag", first, ok, at)
	}
	if err := idx.NoteDeadLettered(ctx, order, 8); err != nil {
		t.Fatal(err)
	}
	noted, _ := entry()
	if noted.DeadLetteredSeq != 8 || noted.SeenSeq != 7 {
		t.Fatalf("after a note of seq 8 on an order nothing was published to: %+v, want it in the entry", noted)
	}
	// PublishedTo tells an order nothing was published to from its entry
	// (Published itself reads only what publishing allocated: nothing).
	if p, err := idx.Published(ctx, order, 8); err != nil || p != (convoy.Published{}) {
		t.Fatalf("Published of an order nothing was published to: %+v, %v; want nothing", p, err)
	}
	if p, err := convoy.PublishedTo(ctx, idx, order, 8); err != nil || p.LastSeq != 7 || p.DeadLetteredSeq != 8 || !p.SeqAllocatedAt.IsZero() {
		t.Fatalf("an order nothing was published to, seq 8: %+v, %v; want last 7 (seen), seq 8 noted dead-lettered", p, err)
	}
	if p, err := convoy.PublishedTo(ctx, idx, order, 7); err != nil || p.LastSeq != 7 || !p.SeqAllocatedAt.Equal(at) {
		t.Fatalf("an order nothing was published to, seq 7: %+v, %v; want last 7, enqueued at %v", p, err, at)
	}
	if err := idx.MarkActive(ctx, order, convoy.Seen{Seq: 9, At: at.Add(time.Second)}); err != nil {
		t.Fatal(err)
	}
	again, _ := entry()
	if again.SeenSeq != 9 || again.DeadLetteredSeq != 8 || again.ETag == noted.ETag {
		t.Fatalf("after MarkActive of seq 9: %+v, want seq 9, the note kept, a new ETag", again)
	}
	if err := idx.Deactivate(ctx, noted); err != nil {
		t.Fatal(err)
	}
	if _, ok := entry(); !ok {
		t.Fatalf("an entry written by the processor since it was read was removed")
	}
	if err := s.Activate(ctx, []string{order}); err != nil {
		t.Fatal(err)
	}
	if e, _ := entry(); e.SeenSeq != 0 || e.DeadLetteredSeq != 0 || e.ETag == again.ETag {
		t.Fatalf("after publishing's Activate: %+v, want the entry replaced", e)
	}
	cur, _ := entry()
	if err := idx.Deactivate(ctx, cur); err != nil {
		t.Fatal(err)
	}
	if _, ok := entry(); ok {
		t.Fatalf("removing the entry as read did not remove it")
	}
	if err := idx.MarkActive(ctx, order, convoy.Seen{Seq: 10, At: at}); err != nil {
		t.Fatal(err)
	}
	if e, ok := entry(); !ok || e.SeenSeq != 10 || e.DeadLetteredSeq != 0 {
		t.Fatalf("marked again after its removal: %+v (listed %v), want it back with seq 10", e, ok)
	}
}

// testConditional: a record is created only if absent and replaced only as
// the version last read or written; a writer holding an older version gets
// ErrLedgerChanged and the record keeps the newer content.
func testConditional(t *testing.T, s ledger.Store, id string) {
	ctx := context.Background()
	rec := &ledger.Record{ID: id, Hash: "h", Status: ledger.StatusPublishing, Transactions: 4, Orders: 1,
		UpdatedAt: time.Date(2026, 11, 21, 10, 0, 0, 0, time.UTC)}
	if err := s.CreateLedger(ctx, rec); err != nil || rec.ETag == "" {
		t.Fatalf("create: %v, ETag %q", err, rec.ETag)
	}
	a, err := s.GetLedger(ctx, id)
	if err != nil || a.ETag != rec.ETag {
		t.Fatalf("read back ETag %q, %v; want the created %q", a.ETag, err, rec.ETag)
	}
	b := *a
	a.Sent = 2
	if err := s.SaveLedger(ctx, a); err != nil {
		t.Fatal(err)
	}
	if a.ETag == b.ETag {
		t.Fatal("a save did not change the ETag")
	}
	b.Sent, b.Status = 0, ledger.StatusRejected // a stale writer
	if err := s.SaveLedger(ctx, &b); !errors.Is(err, ledger.ErrLedgerChanged) {
		t.Fatalf("save over a stale version: %v, want ErrLedgerChanged", err)
	}
	a.Sent = 4
	if err := s.SaveLedger(ctx, a); err != nil {
		t.Fatalf("save with the current version: %v", err)
	}
	got, _ := s.GetLedger(ctx, id)
	if got.Sent != 4 || got.Status != ledger.StatusPublishing {
		t.Fatalf("record %+v, want the current writer's", got)
	}
	missing := &ledger.Record{ID: id + "-none", Hash: "h", Status: ledger.StatusRejected, ETag: a.ETag}
	if err := s.SaveLedger(ctx, missing); !errors.Is(err, ledger.ErrLedgerChanged) {
		t.Fatalf("save of a record that does not exist: %v, want ErrLedgerChanged", err)
	}
	if r, _ := s.GetLedger(ctx, missing.ID); r != nil {
		t.Fatalf("a save created a record: %+v", r)
	}
}

// testAllocationMismatch: the same ledger id asking again with another count
// or content hash gets a Conflict, not the numbers of the other content.
func testAllocationMismatch(t *testing.T, s ledger.Store, order string) {
	ctx := context.Background()
	first, err := s.Allocate(ctx, "L-m", "v2:aaa", order, 3)
	if err != nil || first != 1 {
		t.Fatalf("allocation: %d, %v", first, err)
	}
	if again, err := s.Allocate(ctx, "L-m", "v2:aaa", order, 3); err != nil || again != 1 {
		t.Fatalf("the same again: %d, %v", again, err)
	}
	for _, c := range []struct {
		hash  string
		count int
	}{{"v2:aaa", 4}, {"v2:bbb", 3}} {
		_, err := s.Allocate(ctx, "L-m", c.hash, order, c.count)
		if !errors.Is(err, ledger.ErrAllocationMismatch) || fault.CodeOf(err) != fault.Conflict {
			t.Fatalf("allocation for %s with count %d: %v, want a conflict", c.hash, c.count, err)
		}
	}
	if next, err := s.Allocate(ctx, "L-n", "v2:ccc", order, 1); err != nil || next != 4 {
		t.Fatalf("a refused allocation took numbers: next ledger got %d, %v; want 4", next, err)
	}
}

func testRecords(t *testing.T, s ledger.Store, id string) {
	ctx := context.Background()
	if r, err := s.GetLedger(ctx, id); err != nil || r != nil {
		t.Fatalf("unknown ledger: %+v, %v", r, err)
	}
	rec := &ledger.Record{ID: id, Hash: "abc", Status: ledger.StatusPublishing, Transactions: 5, Orders: 2,
		UpdatedAt: time.Date(2026, 11, 21, 10, 20, 30, 0, time.UTC)}
	if err := s.CreateLedger(ctx, rec); err != nil {
		t.Fatal(err)
	}
	if err := s.CreateLedger(ctx, rec); !errors.Is(err, ledger.ErrLedgerExists) {
		t.Fatalf("second create: %v, want ErrLedgerExists", err)
	}
	rec.Sent, rec.Status = 3, ledger.StatusRejected
	rec.Error, rec.Problems = "the ledger is invalid", []fault.Problem{{Index: 2, Field: "amount", Reason: "is required"}}
	if err := s.SaveLedger(ctx, rec); err != nil || rec.ETag == "" {
		t.Fatalf("save: %v (ETag %q)", err, rec.ETag)
	}
	got, err := s.GetLedger(ctx, id)
	if err != nil || !reflect.DeepEqual(got, rec) {
		t.Fatalf("read back %+v, %v\nwant %+v", got, err, rec)
	}
}

func testAllocate(t *testing.T, s ledger.Store, order string) {
	ctx := context.Background()
	first, err := s.Allocate(ctx, "L-a", "h-a", order, 3)
	if err != nil || first != 1 {
		t.Fatalf("first allocation: %d, %v; want 1", first, err)
	}
	second, err := s.Allocate(ctx, "L-b", "h-b", order, 2)
	if err != nil || second != 4 {
		t.Fatalf("second allocation: %d, %v; want 4", second, err)
	}
	again, err := s.Allocate(ctx, "L-a", "h-a", order, 3)
	if err != nil || again != 1 {
		t.Fatalf("the first ledger again: %d, %v; want its original 1", again, err)
	}
	third, err := s.Allocate(ctx, "L-c", "h-c", order, 1)
	if err != nil || third != 6 {
		t.Fatalf("third allocation: %d, %v; want 6", third, err)
	}
}

func testRace(t *testing.T, s ledger.Store, prefix string) {
	ctx := context.Background()
	const ledgers, orders = 6, 3
	type grant struct {
		ledger, order int
		first         int64
	}
	var mu sync.Mutex
	var grants []grant
	var wg sync.WaitGroup
	for l := range ledgers {
		for repeat := range 2 { // each ledger allocates twice, as a retried ledger on another instance would
			wg.Add(1)
			go func() {
				defer wg.Done()
				for o := range orders {
					first, err := s.Allocate(ctx, fmt.Sprintf("L-%d", l), fmt.Sprintf("h-%d", l), fmt.Sprintf("%s-o%d", prefix, o), l+1)
					if err != nil {
						t.Errorf("ledger %d (try %d), order %d: %v", l, repeat, o, err)
						return
					}
					mu.Lock()
					grants = append(grants, grant{l, o, first})
					mu.Unlock()
				}
			}()
		}
	}
	wg.Wait()
	for o := range orders {
		firstOf := map[int]int64{}
		for _, g := range grants {
			if g.order != o {
				continue
			}
			if prev, ok := firstOf[g.ledger]; ok && prev != g.first {
				t.Fatalf("order %d: ledger %d got %d and %d", o, g.ledger, prev, g.first)
			}
			firstOf[g.ledger] = g.first
		}
		// The ranges [first, first+count) must tile 1..total with no overlap and no hole.
		var seqs []int64
		for l, first := range firstOf {
			for k := range int64(l + 1) {
				seqs = append(seqs, first+k)
			}
		}
		slices.Sort(seqs)
		for i, seq := range seqs {
			if seq != int64(i+1) {
				t.Fatalf("order %d: seqs %v are not 1..%d without overlap or hole", o, seqs, len(seqs))
			}
		}
	}
}

// Scopes checks two scopes of one table (tablestore.Ledgers and its
// Keys("account")): they share the ledger records, but the same key id is
// two keys, each with its own seqs, allocations, active entry and notes.
func Scopes(t *testing.T, orders, accounts ledger.Store) {
	ctx := context.Background()
	prefix := fmt.Sprintf("sc%d", time.Now().UnixNano())
	key, ledgerID := prefix+"-k", prefix+"-L"
	rec := &ledger.Record{ID: ledgerID, Hash: "h", Status: ledger.StatusPublishing, Transactions: 3, Orders: 1, Keys: map[string]int{"accounts": 1},
		UpdatedAt: time.Date(2026, 11, 26, 9, 0, 0, 0, time.UTC)}
	if err := orders.CreateLedger(ctx, rec); err != nil {
		t.Fatal(err)
	}
	if got, err := accounts.GetLedger(ctx, ledgerID); err != nil || !reflect.DeepEqual(got, rec) {
		t.Fatalf("the record read through the other scope: %+v, %v; want %+v", got, err, rec)
	}
	if err := accounts.CreateLedger(ctx, &ledger.Record{ID: ledgerID, Hash: "h", Status: ledger.StatusPublishing}); !errors.Is(err, ledger.ErrLedgerExists) {
		t.Fatalf("creating the record again through the other scope: %v, want ErrLedgerExists", err)
	}

	// The same ledger allocates to the same id in both: each starts at 1.
	for _, c := range []struct {
		s     ledger.Store
		count int
	}{{orders, 2}, {accounts, 3}} {
		if first, err := c.s.Allocate(ctx, ledgerID, "h", key, c.count); err != nil || first != 1 {
			t.Fatalf("the first allocation of %d seqs: %d, %v; want 1", c.count, first, err)
		}
	}
	if first, err := orders.Allocate(ctx, prefix+"-L2", "h2", key, 1); err != nil || first != 3 {
		t.Fatalf("the order's next allocation: %d, %v; want 3 (after its 2, whatever the account took)", first, err)
	}
	if first, err := accounts.Allocate(ctx, prefix+"-L2", "h2", key, 1); err != nil || first != 4 {
		t.Fatalf("the account's next allocation: %d, %v; want 4 (after its 3)", first, err)
	}
	if _, err := accounts.Allocate(ctx, ledgerID, "h", key, 2); !errors.Is(err, ledger.ErrAllocationMismatch) {
		t.Fatalf("the account asked for the order's count: %v, want a mismatch with its own allocation", err)
	}
	oi, ok1 := orders.(convoy.ActiveIndex)
	ai, ok2 := accounts.(convoy.ActiveIndex)
	if !ok1 || !ok2 {
		return
	}
	for _, c := range []struct {
		idx  convoy.ActiveIndex
		last int64
	}{{oi, 3}, {ai, 4}} {
		if p, err := c.idx.Published(ctx, key, 1); err != nil || p.LastSeq != c.last || p.SeqAllocatedAt.IsZero() {
			t.Fatalf("Published: %+v, %v; want last seq %d", p, err, c.last)
		}
	}

	// Active entries: one scope's writes are not the other's.
	listed := func(idx convoy.ActiveIndex) (convoy.ActiveOrder, bool) {
		for after := ""; ; {
			page, more, err := idx.ScanActive(ctx, after, 100)
			if err != nil {
				t.Fatal(err)
			}
			for _, e := range page {
				if e.OrderID == key {
					return e, true
				}
			}
			if !more {
				return convoy.ActiveOrder{}, false
			}
			after = page[len(page)-1].OrderID
		}
	}
	if err := accounts.Activate(ctx, []string{key}); err != nil {
		t.Fatal(err)
	}
	if _, ok := listed(oi); ok {
		t.Fatal("an account's activation made an order's entry")
	}
	if _, ok := listed(ai); !ok {
		t.Fatal("an account's activation made no entry of its own")
	}
	at := time.Date(2026, 11, 26, 10, 0, 0, 0, time.UTC)
	if err := oi.MarkActive(ctx, key, convoy.Seen{Seq: 7, At: at}); err != nil {
		t.Fatal(err)
	}
	if e, ok, err := oi.ActiveEntry(ctx, key); err != nil || !ok || e.SeenSeq != 7 {
		t.Fatalf("the order's entry: %+v (found %v), %v; want seq 7 seen", e, ok, err)
	}
	if e, ok, err := ai.ActiveEntry(ctx, key); err != nil || !ok || e.SeenSeq != 0 {
		t.Fatalf("the account's entry after the order's was marked: %+v (found %v), %v; want it as activated", e, ok, err)
	}
	if err := ai.NoteDeadLettered(ctx, key, 2); err != nil {
		t.Fatal(err)
	}
	if p, _ := oi.Published(ctx, key, 2); p.DeadLetteredSeq != 0 {
		t.Fatalf("a note of the account's seq 2 is the order's: %+v", p)
	}
	if p, _ := ai.Published(ctx, key, 2); p.DeadLetteredSeq != 2 {
		t.Fatalf("a note of the account's seq 2 is not its own: %+v", p)
	}
	e, _ := listed(ai)
	if err := ai.Deactivate(ctx, e); err != nil {
		t.Fatal(err)
	}
	if _, ok := listed(ai); ok {
		t.Fatal("the account's entry is listed after its removal")
	}
	if _, ok := listed(oi); !ok {
		t.Fatal("removing the account's entry removed the order's")
	}
}
