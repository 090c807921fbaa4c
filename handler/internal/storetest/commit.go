package storetest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/convoy-dev/convoy/handler/convoy"
	"github.com/convoy-dev/convoy/handler/keyed"
	"github.com/convoy-dev/convoy/handler/orders"
)

func testLoadUnknown(t *testing.T, s convoy.Store, id string) {
	o := load(t, s, id)
	if st := orders.StateOf(o); o.Version != 0 || st.Status != orders.StatusNew || o.AppliedSeq != 0 || st.TxCount != 0 || st.Total != 0 || len(o.Parked) != 0 {
		t.Fatalf("unknown order loaded as %+v, want a new order at version 0", o)
	}
	if _, found, err := s.Row(context.Background(), id, xRef("t-1")); err != nil || found {
		t.Fatalf("a transaction of an unknown order: %v, %v", found, err)
	}
}

func testCommitThenLoad(t *testing.T, s convoy.Store, id string) {
	o := newOrder(t, id)
	step(t, s, o, msg(1, orders.CreateOrder, "", 0), msg(2, orders.AddTransaction, "t-1", 1250))
	step(t, s, o, msg(3, orders.ModifyTransaction, "t-1", -1200), msg(4, orders.ModifyTransaction, "t-404", 1))
	last := msg(5, orders.AddTransaction, "t-2", 7)
	last.Last = true
	step(t, s, o, last)
	got := load(t, s, id)
	same(t, got, o)
	if st := orders.StateOf(got); st.Total != -1193 || !got.Complete || st.TxCount != 2 || got.Version != 3 {
		t.Fatalf("unexpected state %+v", comparable(got))
	}
	sameHistory(t, s, id, []orders.TxEntry{tx("t-1", -1200), tx("t-2", 7)},
		[]orders.Rejection{rejection(4, orders.ModifyTransaction, "t-404", `transaction "t-404" does not exist`)})
}

// testAppliedAt: the head keeps when appliedSeq last advanced (the lag's
// progress), written by the same commit: a commit that advances it sets it,
// one that only parks keeps it, and a drain sets it again.
func testAppliedAt(t *testing.T, s convoy.Store, id string) {
	o := newOrder(t, id)
	step(t, s, o, msg(1, orders.CreateOrder, "", 0), msg(2, orders.AddTransaction, "t-1", 5)) // at epoch
	got := load(t, s, id)
	if !got.AppliedAt.Equal(epoch) || !got.Progress().Equal(epoch) {
		t.Fatalf("after applying seqs 1-2 at %v: AppliedAt %v, Progress %v", epoch, got.AppliedAt, got.Progress())
	}
	step(t, s, got, msg(4, orders.AddTransaction, "t-3", 1)) // at epoch+1s: parked only
	got = load(t, s, id)
	if !got.AppliedAt.Equal(epoch) || !got.UpdatedAt.Equal(epoch.Add(time.Second)) {
		t.Fatalf("after parking seq 4: AppliedAt %v (want %v, unchanged), UpdatedAt %v", got.AppliedAt, epoch, got.UpdatedAt)
	}
	step(t, s, got, msg(3, orders.AddTransaction, "t-2", 1)) // at epoch+2s: 3 applied, 4 drained
	got = load(t, s, id)
	if want := epoch.Add(2 * time.Second); !got.AppliedAt.Equal(want) || got.AppliedSeq != 4 {
		t.Fatalf("after the drain: AppliedAt %v, appliedSeq %d; want %v, 4", got.AppliedAt, got.AppliedSeq, want)
	}
}

// testDataKept: data is stored and read back byte for byte, for the order
// (CreateOrder, DeleteOrder), its transactions (AddTransaction; a
// ModifyTransaction replaces it only when it carries data) and parked messages.
func testDataKept(t *testing.T, s convoy.Store, id string) {
	with := func(m convoy.Message, data string) convoy.Message {
		return command(m, func(tx *orders.Transaction) { tx.Data = json.RawMessage(data) })
	}
	big := `{"html":"` + strings.Repeat("<b>&é\"</b>", 300) + `"}`
	o := newOrder(t, id)
	step(t, s, o, with(msg(1, orders.CreateOrder, "", 0), `{"customer":"<c-1>"}`), with(msg(2, orders.AddTransaction, "t-1", 5), big),
		with(msg(3, orders.AddTransaction, "t-2", 6), `{"v":1}`), msg(4, orders.ModifyTransaction, "t-1", 7))
	step(t, s, o, with(msg(6, orders.DeleteOrder, "", 0), `{"why":"&"}`)) // parked
	got := load(t, s, id)
	if string(orders.StateOf(got).Data) != `{"customer":"<c-1>"}` || string(orders.CommandOf(id, got.Parked[6]).Data) != `{"why":"&"}` {
		t.Fatalf("data after load: order %s, parked %+v", orders.StateOf(got).Data, got.Parked)
	}
	withData := func(e orders.TxEntry, data string) orders.TxEntry { e.Data = json.RawMessage(data); return e }
	sameHistory(t, s, id, []orders.TxEntry{withData(tx("t-1", 7), big), withData(tx("t-2", 6), `{"v":1}`)}, nil)
	// A modification in a later commit, from a cold order that read t-2.
	cold := load(t, s, id)
	r, found, err := s.Row(context.Background(), id, xRef("t-2"))
	if err != nil || !found {
		t.Fatalf("Row(x/t-2): %v, %v", found, err)
	}
	cold.Learn(xRef("t-2"), r, found)
	step(t, s, cold, with(msg(5, orders.ModifyTransaction, "t-2", 8), `{"v":2}`)) // drains the DeleteOrder
	got = load(t, s, id)
	if st := orders.StateOf(got); string(st.Data) != `{"why":"&"}` || st.Total != 15 {
		t.Fatalf("after modify and delete: order %s, total %d", st.Data, st.Total)
	}
	sameHistory(t, s, id, []orders.TxEntry{withData(tx("t-1", 7), big), withData(tx("t-2", 8), `{"v":2}`)}, nil)
	step(t, s, cold, msg(7, orders.ModifyTransaction, "t-2", 9)) // rejected: deleted
	cold2 := load(t, s, id)
	st := orders.StateOf(cold2)
	st.Status = orders.StatusOpen // a modification without data keeps the data (a state the fold cannot reach after a delete)
	cold2.State = st
	r, found, _ = s.Row(context.Background(), id, xRef("t-1"))
	cold2.Learn(xRef("t-1"), r, found)
	step(t, s, cold2, msg(8, orders.ModifyTransaction, "t-1", 1))
	sameHistory(t, s, id, []orders.TxEntry{withData(tx("t-1", 1), big), withData(tx("t-2", 8), `{"v":2}`)},
		[]orders.Rejection{rejection(7, orders.ModifyTransaction, "t-2", "order is not open (status deleted)")})
}

func testStaleVersion(t *testing.T, s convoy.Store, id string) {
	o := newOrder(t, id)
	step(t, s, o, msg(1, orders.CreateOrder, "", 0))
	stale := load(t, s, id)
	step(t, s, o, msg(2, orders.AddTransaction, "t-1", 5))
	var c convoy.Change
	receive(t, stale, msg(2, orders.AddTransaction, "t-other", 9), epoch, &c)
	err := s.Commit(context.Background(), stale, stale.Version, &c)
	if !errors.Is(err, convoy.ErrConflict) {
		t.Fatalf("commit from stale version: got %v, want ErrConflict", err)
	}
	same(t, load(t, s, id), o)
	sameHistory(t, s, id, []orders.TxEntry{tx("t-1", 5)}, nil)
}

func testConcurrentCommits(t *testing.T, s convoy.Store, id string) {
	o := newOrder(t, id)
	step(t, s, o, msg(1, orders.CreateOrder, "", 0))
	const writers = 8
	base := load(t, s, id)
	var wins atomic.Int32
	var wg sync.WaitGroup
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			mine := base.Clone()
			var c convoy.Change
			if _, err := mine.Receive(msg(2, orders.AddTransaction, fmt.Sprintf("t-%d", w), int64(w)), epoch, &c); err != nil {
				t.Errorf("writer %d: %v", w, err)
				return
			}
			err := s.Commit(context.Background(), mine, mine.Version, &c)
			switch {
			case err == nil:
				wins.Add(1)
			case !errors.Is(err, convoy.ErrConflict):
				t.Errorf("writer %d: %v", w, err)
			}
		}()
	}
	wg.Wait()
	if wins.Load() != 1 {
		t.Fatalf("%d of %d concurrent commits from one version succeeded, want exactly 1", wins.Load(), writers)
	}
	got := load(t, s, id)
	txs, _ := history(t, s, id, 10)
	if st := orders.StateOf(got); got.Version != 2 || st.TxCount != 1 || len(txs) != 1 || got.AppliedSeq != 2 || st.Total != txs[0].Amount {
		t.Fatalf("after the race: %+v, transactions %+v", comparable(got), txs)
	}
}

func testAtomicFailure(t *testing.T, s convoy.Store, id string) {
	o := newOrder(t, id)
	step(t, s, o, msg(1, orders.CreateOrder, "", 0))
	before := load(t, s, id)
	// A change that adds a transaction but unparks a seq that is not parked:
	// the whole commit must fail and write nothing.
	bad := before.Clone()
	var c convoy.Change
	receive(t, bad, msg(2, orders.AddTransaction, "t-1", 5), epoch, &c)
	c.Unpark = map[int64]bool{9: true}
	if err := s.Commit(context.Background(), bad, bad.Version, &c); !errors.Is(err, convoy.ErrConflict) {
		t.Fatalf("commit unparking a missing message: got %v, want ErrConflict", err)
	}
	same(t, load(t, s, id), before)
	sameHistory(t, s, id, nil, nil)
	if _, found, err := s.Row(context.Background(), id, xRef("t-1")); err != nil || found {
		t.Fatalf("the failed commit left transaction t-1: %v, %v", found, err)
	}
}

func testFullCommit(t *testing.T, s convoy.Store, id string) {
	o := newOrder(t, id)
	msgs := []convoy.Message{msg(1, orders.CreateOrder, "", 0)}
	var want []orders.TxEntry
	for i := range convoy.MaxChangeRecords / txRecords {
		msgs = append(msgs, msg(int64(i+2), orders.AddTransaction, fmt.Sprintf("t-%d", i), 1))
		want = append(want, tx(fmt.Sprintf("t-%d", i), 1))
	}
	step(t, s, o, msgs...)
	got := load(t, s, id)
	same(t, got, o)
	sameHistory(t, s, id, want, nil)
}

// testManyTransactions: an order of 10,000 transactions; Load reads the
// head (its figures as stored), the history reads in pages, and a
// modification of the first one, from a cold order, is one point read.
func testManyTransactions(t *testing.T, s convoy.Store, id string) {
	const n = 10_000
	o := newOrder(t, id)
	step(t, s, o, msg(1, orders.CreateOrder, "", 0))
	var want []orders.TxEntry
	sum := int64(0)
	for seq := int64(2); seq <= n+1; {
		var batch []convoy.Message
		for ; len(batch) < convoy.MaxChangeRecords/txRecords && seq <= n+1; seq++ {
			batch = append(batch, msg(seq, orders.AddTransaction, fmt.Sprintf("t-%d", seq), seq))
			want = append(want, tx(fmt.Sprintf("t-%d", seq), seq))
			sum += seq
		}
		step(t, s, o, batch...)
	}
	cold := load(t, s, id)
	if st := orders.StateOf(cold); st.TxCount != n || st.Total != sum {
		t.Fatalf("loaded %d transactions totalling %d, want %d totalling %d", st.TxCount, st.Total, n, sum)
	}
	r, found, err := s.Row(context.Background(), id, xRef("t-2"))
	if err != nil || !found || r.Int("Position") != 0 || r.Int("Amount") != 2 {
		t.Fatalf("Row(x/t-2) = %+v, %v, %v", r, found, err)
	}
	cold.Learn(xRef("t-2"), r, found)
	step(t, s, cold, msg(n+2, orders.ModifyTransaction, "t-2", 0))
	want[0].Amount = 0
	got := load(t, s, id)
	same(t, got, cold)
	if total := orders.StateOf(got).Total; total != sum-2 {
		t.Fatalf("total %d after the modification, want %d", total, sum-2)
	}
	txs, rs := history(t, s, id, convoy.MaxHistoryPageSize)
	if !reflect.DeepEqual(txs, want) || len(rs) != 0 {
		t.Fatalf("history: %d transactions (first %+v), %d rejections; want %d", len(txs), txs[:1], len(rs), n)
	}
}

// testFailureNoted: NoteFailure writes why the decision of a seq failed on
// the head without a commit; Load returns it, a commit that leaves its seq
// ahead keeps it, one that passes it drops it; a key without state keeps
// no note (and no head).
func testFailureNoted(t *testing.T, s convoy.Store, id string) {
	ctx := context.Background()
	if err := s.NoteFailure(ctx, id+"-none", keyed.Failure{Seq: 1, Why: "x", At: epoch}); err != nil {
		t.Fatalf("a note on a key without state: %v", err)
	}
	if o := load(t, s, id+"-none"); o.Version != 0 || o.Failure.Seq != 0 {
		t.Fatalf("a note on a key without state left version %d, failure %+v", o.Version, o.Failure)
	}
	o := newOrder(t, id)
	step(t, s, o, msg(1, orders.CreateOrder, "", 0))
	f := keyed.Failure{Seq: 2, Why: "the rules panicked: <&> boom", At: epoch.Add(time.Minute)}
	if err := s.NoteFailure(ctx, id, f); err != nil {
		t.Fatal(err)
	}
	got := load(t, s, id)
	if got.Failure != f || got.Failing() == nil || got.Version != 1 {
		t.Fatalf("noted %+v; loaded %+v at version %d", f, got.Failure, got.Version)
	}
	step(t, s, got, msg(3, orders.AddTransaction, "t-3", 1)) // parked: seq 2 still ahead
	if got = load(t, s, id); got.Failure != f || orders.StateOf(got).Status != orders.StatusOpen {
		t.Fatalf("after a commit that parks: failure %+v (want %+v kept), status %q", got.Failure, f, orders.StateOf(got).Status)
	}
	step(t, s, got, msg(2, orders.AddTransaction, "t-2", 1)) // 2 applied, 3 drained
	if got = load(t, s, id); got.Failure.Seq != 0 || got.AppliedSeq != 3 {
		t.Fatalf("after seq 2 applied: failure %+v, appliedSeq %d; want none, 3", got.Failure, got.AppliedSeq)
	}
}
