package storetest

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/convoy-dev/convoy/handler/convoy"
	"github.com/convoy-dev/convoy/handler/orders"
)

// testBlockedIndex: the processor keeps the index of blocked orders; the
// listing is oldest first, paged, and drops stale entries.
func testBlockedIndex(t *testing.T, s convoy.Store, id string) {
	idx, ok := s.(convoy.BlockedIndex)
	if !ok {
		t.Fatalf("%T does not implement convoy.BlockedIndex", s)
	}
	ctx := context.Background()
	clock := epoch.Add(time.Duration(time.Now().UnixNano()%1e6) * time.Hour) // after anything listed by other runs
	p := convoy.NewProcessor(s, convoy.ProcessorOptions{Domain: orders.Domain, Index: idx, Now: func() time.Time { return clock }})
	process := processOne(t, p)
	a, b := id+"-a", id+"-b"
	if res := process(a, msg(3, orders.AddTransaction, "t-1", 5)); !res.Blocked {
		t.Fatal("parking a message did not report the order blocked")
	}
	if res := process(a, msg(4, orders.AddTransaction, "t-2", 5)); res.Blocked {
		t.Fatal("a second parked message reported the order blocked again")
	}
	clock = clock.Add(time.Minute)
	process(b, msg(2, orders.AddTransaction, "t-1", 5))
	// A stale entry: indexed, but the order is not blocked (and has no state;
	// version 0: an entry from before entries named their commit's version).
	if err := idx.MarkBlocked(ctx, id+"-stale", clock.Add(-time.Hour), 0); err != nil {
		t.Fatal(err)
	}

	var mine []convoy.BlockedOrder
	token := ""
	for pages := 0; ; pages++ {
		if pages > 1000 {
			t.Fatal("the listing never ends")
		}
		page, err := convoy.ListBlocked(ctx, idx, token, 1)
		if err != nil {
			t.Fatal(err)
		}
		for _, o := range page.Orders {
			if strings.HasPrefix(o.OrderID, id) {
				mine = append(mine, o)
			}
		}
		if page.Continuation == "" {
			break
		}
		token = page.Continuation
	}
	if len(mine) != 2 || mine[0].OrderID != a || mine[1].OrderID != b {
		t.Fatalf("blocked orders %+v, want %s then %s", mine, a, b)
	}
	if mine[0].Parked != 2 || mine[0].MissingSeq != 1 || mine[0].AppliedSeq != 0 || mine[1].MissingSeq != 1 {
		t.Fatalf("blocked order rows %+v", mine)
	}
	if entries, _, _ := idx.ScanBlocked(ctx, convoy.BlockedKey(id+"-stale", clock.Add(-time.Hour-time.Second)), 1); len(entries) == 1 && entries[0].OrderID == id+"-stale" {
		t.Fatal("the stale entry was not removed by the listing")
	}
	// Filling a's gap unblocks it.
	if res := process(a, msg(1, orders.CreateOrder, "", 0)); res.Blocked {
		t.Fatal("still blocked at seq 2")
	}
	if res := process(a, msg(2, orders.AddTransaction, "t-0", 1)); !res.Unblocked {
		t.Fatal("filling the gap did not report the order unblocked")
	}
	h, ok, err := idx.Head(ctx, a)
	if err != nil || !ok || h.Parked != 0 || h.AppliedSeq != 4 || !h.BlockedSince.IsZero() {
		t.Fatalf("head after the drain %+v, %v, %v", h, ok, err)
	}
	page, err := convoy.ListBlocked(ctx, idx, "", convoy.MaxBlockedPageSize)
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range page.Orders {
		if o.OrderID == a {
			t.Fatalf("%s is listed as blocked after its gap filled", a)
		}
	}
	if _, err := convoy.ListBlocked(ctx, idx, "not base64!", 10); err == nil {
		t.Fatal("a forged continuation was accepted")
	}
}

// listBeforeCommit is a Store whose every commit first runs list: a lister
// (the blocked list, the summary, the dashboard) interleaved between the
// processor's index write and the commit that blocks the order.
type listBeforeCommit struct {
	convoy.Store
	list func()
}

func (l listBeforeCommit) Commit(ctx context.Context, o *convoy.Key, base int64, c *convoy.Change) error {
	l.list()
	return l.Store.Commit(ctx, o, base, c)
}

// listAll lists every blocked order, page after page.
func listAll(t *testing.T, idx convoy.BlockedIndex) map[string]convoy.BlockedOrder {
	t.Helper()
	out := map[string]convoy.BlockedOrder{}
	token := ""
	for pages := 0; ; pages++ {
		if pages > 1000 {
			t.Fatal("the listing never ends")
		}
		page, err := convoy.ListBlocked(context.Background(), idx, token, convoy.MaxBlockedPageSize)
		if err != nil {
			t.Fatal(err)
		}
		for _, o := range page.Orders {
			out[o.OrderID] = o
		}
		if token = page.Continuation; token == "" {
			return out
		}
	}
}

// testBlockedListedMidCommit (issue 25): a listing that runs after the index
// entry is written but before the commit that blocks the order lands finds
// the order not (yet) blocked; it must neither list it nor remove its entry,
// or the order is missing from every later listing.
func testBlockedListedMidCommit(t *testing.T, s convoy.Store, id string) {
	idx, ok := s.(convoy.BlockedIndex)
	if !ok {
		t.Fatalf("%T does not implement convoy.BlockedIndex", s)
	}
	ctx := context.Background()
	clock := epoch.Add(time.Duration(time.Now().UnixNano()%1e6) * time.Hour)
	listings := 0
	mid := listBeforeCommit{Store: s, list: func() {
		listings++
		listAll(t, idx)
	}}
	p := convoy.NewProcessor(mid, convoy.ProcessorOptions{Domain: orders.Domain, Index: idx, Now: func() time.Time { return clock }})
	process := processOne(t, p)
	fresh, existing := id+"-fresh", id+"-existing"
	// An order whose first message parks: no head yet while the lister runs.
	if res := process(fresh, msg(2, orders.AddTransaction, "t-1", 5)); !res.Blocked {
		t.Fatal("parking a message did not report the order blocked")
	}
	// An order with state that parks: its head is not blocked while the lister runs.
	process(existing, msg(1, orders.CreateOrder, "", 0))
	if res := process(existing, msg(3, orders.AddTransaction, "t-1", 5)); !res.Blocked {
		t.Fatal("parking a message did not report the order blocked")
	}
	if listings < 3 {
		t.Fatalf("the lister ran %d times, want once before each commit", listings)
	}
	listed := listAll(t, idx)
	for _, o := range []string{fresh, existing} {
		if _, ok := listed[o]; !ok {
			t.Errorf("%s is blocked but missing from the listing: a lister between the index write and the commit removed its entry", o)
		}
	}
	// The entry stays until the gap fills, however often it is listed.
	listAll(t, idx)
	if _, ok := listAll(t, idx)[existing]; !ok {
		t.Fatalf("%s dropped out of the listing", existing)
	}
	if res := process(existing, msg(2, orders.AddTransaction, "t-0", 1)); !res.Unblocked {
		t.Fatal("filling the gap did not report the order unblocked")
	}
	if _, ok := listAll(t, idx)[existing]; ok {
		t.Fatalf("%s is listed as blocked after its gap filled", existing)
	}

	// Entries of existing (now at version 3, not blocked) whose commits are
	// still to come (version 4) or lost to another commit (version 3).
	pending, lost := clock.Add(-2*time.Hour), clock.Add(-3*time.Hour)
	if err := idx.MarkBlocked(ctx, existing, pending, 4); err != nil {
		t.Fatal(err)
	}
	if err := idx.MarkBlocked(ctx, existing, lost, 3); err != nil {
		t.Fatal(err)
	}
	if _, ok := listAll(t, idx)[existing]; ok {
		t.Fatalf("%s is listed as blocked on an entry whose commit has not landed", existing)
	}
	if !indexed(t, idx, existing, pending) {
		t.Fatal("the listing removed an entry whose commit is still to come")
	}
	if indexed(t, idx, existing, lost) {
		t.Fatal("the listing kept an entry whose commit lost to another")
	}

	// The listing removes a stale entry only as it scanned it.
	entries, _, err := idx.ScanBlocked(ctx, convoy.BlockedKey(existing, pending.Add(-time.Millisecond)), 1)
	if err != nil || len(entries) != 1 || entries[0].OrderID != existing {
		t.Fatalf("scan %+v, %v", entries, err)
	}
	if err := idx.MarkBlocked(ctx, existing, pending, 5); err != nil {
		t.Fatal(err)
	}
	if err := idx.ClearStale(ctx, entries[0]); err != nil {
		t.Fatal(err)
	}
	if !indexed(t, idx, existing, pending) {
		t.Fatal("ClearStale removed an entry written again after it was scanned")
	}
	if err := idx.ClearBlocked(ctx, existing, pending, "*", 0); err != nil {
		t.Fatal(err)
	}
	if err := idx.ClearStale(ctx, entries[0]); err != nil {
		t.Fatalf("ClearStale of an entry already gone: %v", err)
	}
}

// indexed reports whether the index holds the entry of order since since.
func indexed(t *testing.T, idx convoy.BlockedIndex, order string, since time.Time) bool {
	t.Helper()
	entries, _, err := idx.ScanBlocked(context.Background(), convoy.BlockedKey(order, since.Add(-time.Millisecond)), 1)
	if err != nil {
		t.Fatal(err)
	}
	return len(entries) == 1 && entries[0].Key == convoy.BlockedKey(order, since)
}

// crashyIndex is a BlockedIndex whose steps after a commit (UpdateBlocked
// with "*", ClearBlocked) can be made to fail, as a crash between the commit
// and them would leave the index; it counts head reads.
type crashyIndex struct {
	convoy.BlockedIndex
	crash bool
	heads int
}

func (c *crashyIndex) UpdateBlocked(ctx context.Context, id string, since time.Time, u convoy.BlockedUpdate, etag string) (string, error) {
	if c.crash && etag == "*" && u.Confirmed {
		return "", fmt.Errorf("crashed before confirming")
	}
	return c.BlockedIndex.UpdateBlocked(ctx, id, since, u, etag)
}

func (c *crashyIndex) ClearBlocked(ctx context.Context, id string, since time.Time, etag string, upTo int64) error {
	if c.crash {
		return fmt.Errorf("crashed before clearing")
	}
	return c.BlockedIndex.ClearBlocked(ctx, id, since, etag, upTo)
}

func (c *crashyIndex) Head(ctx context.Context, id string) (convoy.Head, bool, error) {
	c.heads++
	return c.BlockedIndex.Head(ctx, id)
}

// testBlockedPageWithoutHeads (issue 25): a page of confirmed entries is one
// query, with no order read; an entry left pending by a crash after the
// commit that blocks is listed and confirmed by its next reader; one left by
// a crash after the commit that unblocks is removed, not listed.
func testBlockedPageWithoutHeads(t *testing.T, s convoy.Store, id string) {
	inner, ok := s.(convoy.BlockedIndex)
	if !ok {
		t.Fatalf("%T does not implement convoy.BlockedIndex", s)
	}
	idx := &crashyIndex{BlockedIndex: inner}
	clock := epoch.Add(time.Duration(time.Now().UnixNano()%1e6) * time.Hour)
	p := convoy.NewProcessor(s, convoy.ProcessorOptions{Domain: orders.Domain, Index: idx, Now: func() time.Time { return clock }})
	process := processOne(t, p)
	quiet, crashed, healed := id+"-quiet", id+"-crashed", id+"-healed"
	process(quiet, msg(2, orders.AddTransaction, "t-1", 5))
	process(quiet, msg(3, orders.AddTransaction, "t-2", 5)) // a second park updates the entry's figures
	idx.crash = true
	process(crashed, msg(2, orders.AddTransaction, "t-1", 5)) // blocked; its entry left pending
	idx.crash = false
	process(healed, msg(2, orders.AddTransaction, "t-1", 5))
	idx.crash = true
	process(healed, msg(1, orders.CreateOrder, "", 0)) // unblocked; its entry left behind
	idx.crash = false

	idx.heads = 0
	listed := listAll(t, idx)
	if _, ok := listed[healed]; ok {
		t.Errorf("%s is listed as blocked after the commit that unblocked it (its entry was left behind by a crash)", healed)
	}
	if o, ok := listed[crashed]; !ok || o.Parked != 1 || o.MissingSeq != 1 {
		t.Errorf("%s: listed %v as %+v, want blocked with 1 parked (its entry left pending by a crash)", crashed, ok, o)
	}
	if o := listed[quiet]; o.Parked != 2 || o.MissingSeq != 1 || o.AppliedSeq != 0 {
		t.Errorf("%s listed as %+v, want missing seq 1 with 2 parked", quiet, o)
	}
	if idx.heads > 2 {
		t.Errorf("the listing read %d heads, want at most the two pending entries'", idx.heads)
	}
	idx.heads = 0
	listed = listAll(t, idx)
	if _, ok := listed[crashed]; !ok || idx.heads != 0 {
		t.Errorf("second listing: %s listed %v, %d heads read; want it listed from its confirmed entry, no head read", crashed, ok, idx.heads)
	}
}

// testBlockedNotes: SetNotes writes the notes of many entries (more than one
// entity-group transaction holds), also when one entry was removed since it
// was scanned, which keeps no note and does not come back.
func testBlockedNotes(t *testing.T, s convoy.Store, id string) {
	idx, ok := s.(convoy.BlockedIndex)
	if !ok {
		t.Fatalf("%T does not implement convoy.BlockedIndex", s)
	}
	ctx := context.Background()
	since := epoch.Add(-time.Duration(time.Now().UnixNano()%1e6) * time.Hour) // before anything else listed
	for i := range 150 {
		if err := idx.MarkBlocked(ctx, fmt.Sprintf("%s-%03d", id, i), since, 1); err != nil {
			t.Fatal(err)
		}
	}
	entries, _, err := idx.ScanBlocked(ctx, convoy.BlockedKey(id, since), 150)
	if err != nil || len(entries) != 150 {
		t.Fatalf("scanned %d entries, %v", len(entries), err)
	}
	gone := entries[120]
	if err := idx.ClearBlocked(ctx, gone.OrderID, gone.Since, "*", 0); err != nil {
		t.Fatal(err)
	}
	var notes []convoy.BlockedNote
	for i, e := range entries {
		notes = append(notes, convoy.BlockedNote{Entry: e, Note: fmt.Sprintf("note %d", i)})
	}
	if err := idx.SetNotes(ctx, notes); err != nil {
		t.Fatal(err)
	}
	scanned, _, err := idx.ScanBlocked(ctx, convoy.BlockedKey(id, since), 150)
	var after []convoy.BlockedEntry
	for _, e := range scanned {
		if strings.HasPrefix(e.OrderID, id+"-") {
			after = append(after, e)
		}
	}
	if err != nil || len(after) != 149 {
		t.Fatalf("after the notes: %d entries, %v; want 149 (the removed one not back)", len(after), err)
	}
	for _, e := range after {
		var i int
		if _, err := fmt.Sscanf(e.OrderID[len(id)+1:], "%03d", &i); err != nil || e.Note != fmt.Sprintf("note %d", i) || e.Version != 1 {
			t.Fatalf("entry %s: note %q version %d", e.OrderID, e.Note, e.Version)
		}
	}
}

// processOne processes one message of order with p, failing the test on an
// error.
func processOne(t *testing.T, p *convoy.Processor) func(order string, m convoy.Message) convoy.Result {
	return func(order string, m convoy.Message) convoy.Result {
		t.Helper()
		m = of(order, m)
		res, err := p.Process(context.Background(), order, []convoy.Message{m})
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
}

// testBlockedClearKeepsANewBlock: the commit that ends a block clears its
// entry as its own update left it, or as a reader confirmed it meanwhile,
// but keeps the entry of a new block of the same key and millisecond that
// another instance marked meanwhile (same RowKey, a later version).
func testBlockedClearKeepsANewBlock(t *testing.T, s convoy.Store, id string) {
	idx := s.(convoy.BlockedIndex)
	ctx := context.Background()
	since := epoch.Add(time.Duration(time.Now().UnixNano()%1e6) * time.Minute)
	if err := idx.MarkBlocked(ctx, id, since, 2); err != nil {
		t.Fatal(err)
	}
	ended, err := idx.UpdateBlocked(ctx, id, since, convoy.BlockedUpdate{Figures: true, Version: 3, Parked: 1}, "*")
	if err != nil || ended == "" {
		t.Fatalf("the ending commit's update: ETag %q, %v", ended, err)
	}
	if err := idx.MarkBlocked(ctx, id, since, 4); err != nil { // another instance's new block
		t.Fatal(err)
	}
	if err := idx.ClearBlocked(ctx, id, since, ended, 3); err != nil {
		t.Fatal(err)
	}
	if !indexed(t, idx, id, since) {
		t.Fatal("the commit that ended a block removed the entry of the key's next block")
	}
	// A reader's confirm (of the old block, version 3) is cleared all the same.
	if _, err := idx.UpdateBlocked(ctx, id, since, convoy.BlockedUpdate{Figures: true, Confirmed: true, Version: 3, Parked: 1}, "*"); err != nil {
		t.Fatal(err)
	}
	if err := idx.ClearBlocked(ctx, id, since, ended, 3); err != nil {
		t.Fatal(err)
	}
	if indexed(t, idx, id, since) {
		t.Fatal("an entry a reader confirmed mid-commit outlived the block the commit ended")
	}
}
