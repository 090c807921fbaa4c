// Package storetest is the conformance suite every convoy.Store passes: the
// in-memory store and the Table Storage store run the same tests.
package storetest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/convoy-dev/convoy/handler/convoy"
)

// Run runs the suite against store. Every test uses its own order ids.
func Run(t *testing.T, store convoy.Store) {
	tests := []struct {
		name string
		fn   func(t *testing.T, s convoy.Store, id string)
	}{
		{"LoadUnknownOrder", testLoadUnknown},
		{"CommitThenLoad", testCommitThenLoad},
		{"AppliedAtKept", testAppliedAt},
		{"StaleVersionConflicts", testStaleVersion},
		{"ConcurrentCommitsOneWins", testConcurrentCommits},
		{"ParkThenDrain", testParkThenDrain},
		{"ParkedTailInPages", testParkedTailInPages},
		{"ParkedDuplicateBeyondWindow", testParkedDuplicateBeyondWindow},
		{"DataKept", testDataKept},
		{"FailedCommitWritesNothing", testAtomicFailure},
		{"FullCommit", testFullCommit},
		{"TenThousandTransactions", testManyTransactions},
		{"TxPointRead", testTxPointRead},
		{"AddExistingTxIdConflicts", testAddExistingConflicts},
		{"HistoryPages", testHistoryPages},
		{"BlockedIndex", testBlockedIndex},
		{"BlockedIndexListedMidCommit", testBlockedListedMidCommit},
		{"BlockedIndexPageWithoutHeads", testBlockedPageWithoutHeads},
		{"BlockedIndexNotes", testBlockedNotes},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.fn(t, store, fmt.Sprintf("st-%d-%d", time.Now().UnixNano(), i))
		})
	}
}

var epoch = time.Date(2026, 11, 21, 10, 20, 30, 0, time.UTC)

func amount(n int64) *int64 { return &n }

func msg(seq int64, op convoy.Op, txID string, amt int64) convoy.Message {
	tx := convoy.Transaction{Op: op, TxID: txID}
	switch op {
	case convoy.CreateOrder:
		tx.Currency = "EUR"
	case convoy.AddTransaction, convoy.ModifyTransaction:
		tx.Amount = amount(amt)
	}
	return convoy.Message{Seq: seq, MessageID: fmt.Sprintf("L:%d", seq), Tx: tx}
}

// step receives msgs (draining after each) into o and commits one change.
func step(t *testing.T, s convoy.Store, o *convoy.Order, msgs ...convoy.Message) {
	t.Helper()
	var c convoy.Change
	now := epoch.Add(time.Duration(o.Version) * time.Second)
	lookup := func(m convoy.Message) { // as the processor does: a ModifyTransaction's record, read
		if txID, ok := o.Lookup(m, false); ok {
			r, found, err := s.Tx(context.Background(), o.ID, txID)
			if err != nil {
				t.Fatalf("Tx(%s): %v", txID, err)
			}
			if found {
				o.Learn(txID, &r)
			} else {
				o.Learn(txID, nil)
			}
		}
	}
	for _, m := range msgs {
		m.Tx.OrderID = o.ID
		lookup(m)
		if seq, ok := o.ParkedUnknown(m, &c); ok { // as the processor does: beyond the parked window, one point read
			parked, err := s.IsParked(context.Background(), o.ID, seq)
			if err != nil {
				t.Fatalf("IsParked(%d): %v", seq, err)
			}
			o.LearnParked(seq, parked)
		}
		o.Receive(m, now, &c)
		for {
			if after, ok := o.NextPage(); ok {
				page, more, err := s.Parked(context.Background(), o.ID, after, convoy.ParkedPageSize)
				if err != nil {
					t.Fatalf("Parked(after %d): %v", after, err)
				}
				if err := o.AddParkedPage(page, more, &c); err != nil {
					t.Fatal(err)
				}
			}
			if next, ok := o.NextParked(); ok {
				lookup(next)
			}
			if _, ok := o.DrainNext(now, &c); !ok {
				break
			}
		}
	}
	if err := s.Commit(context.Background(), o, o.Version, &c); err != nil {
		t.Fatalf("commit at version %d: %v", o.Version, err)
	}
	o.Version++
}

func load(t *testing.T, s convoy.Store, id string) *convoy.Order {
	t.Helper()
	o, err := s.Load(context.Background(), id)
	if err != nil {
		t.Fatalf("load %s: %v", id, err)
	}
	return o
}

// same fails unless got has the head and parked messages of want.
func same(t *testing.T, got, want *convoy.Order) {
	t.Helper()
	g, w := comparable(got), comparable(want)
	if !reflect.DeepEqual(g, w) {
		t.Fatalf("stored state differs\n got: %+v\nwant: %+v", g, w)
	}
}

type state struct {
	ID, Status, Currency  string
	Data                  string
	Complete              bool
	AppliedSeq, Version   int64
	Total, TxCount        int64
	Parked                map[int64]convoy.Message
	ParkedCount           int
	LastParked            int64
	BlockedSince, Updated time.Time
	AppliedAt             time.Time
}

func comparable(o *convoy.Order) state {
	s := state{ID: o.ID, Status: string(o.Status), Currency: o.Currency, Data: string(o.Data), Complete: o.Complete,
		AppliedSeq: o.AppliedSeq, Version: o.Version, Total: o.TotalAmount, TxCount: o.TxCount,
		Parked: o.Parked, ParkedCount: o.ParkedCount, LastParked: o.LastParked(), BlockedSince: o.BlockedSince, Updated: o.UpdatedAt, AppliedAt: o.AppliedAt}
	if len(s.Parked) == 0 {
		s.Parked = nil
	}
	return s
}

func tx(id string, amount int64) convoy.TxEntry { return convoy.TxEntry{TxID: id, Amount: amount} }

func rejection(seq int64, op convoy.Op, txID, reason string) convoy.Rejection {
	return convoy.Rejection{Seq: seq, Op: op, TxID: txID, Reason: reason}
}

// history reads the order's whole history through convoy.ReadView, pageSize
// at a time, following the continuations.
func history(t *testing.T, s convoy.Store, id string, pageSize int) ([]convoy.TxEntry, []convoy.Rejection) {
	t.Helper()
	h, ok := s.(convoy.History)
	if !ok {
		t.Fatalf("%T does not implement convoy.History", s)
	}
	var txs []convoy.TxEntry
	var rs []convoy.Rejection
	token := ""
	for pages := 0; ; pages++ {
		if pages > 100_000 {
			t.Fatal("the history never ends")
		}
		v, err := convoy.ReadView(context.Background(), s, h, id, token, pageSize)
		if err != nil {
			t.Fatalf("read the history of %s: %v", id, err)
		}
		if len(v.Transactions) > pageSize || len(v.Rejected) > pageSize {
			t.Fatalf("a page of %d holds %d transactions and %d rejections", pageSize, len(v.Transactions), len(v.Rejected))
		}
		txs = append(txs, v.Transactions...)
		rs = append(rs, v.Rejected...)
		if token = v.Continuation; token == "" {
			return txs, rs
		}
	}
}

// sameHistory fails unless the stored history is wantTx and wantRej, read
// in one page and in pages of 2.
func sameHistory(t *testing.T, s convoy.Store, id string, wantTx []convoy.TxEntry, wantRej []convoy.Rejection) {
	t.Helper()
	for _, size := range []int{convoy.MaxHistoryPageSize, 2} {
		gotTx, gotRej := history(t, s, id, size)
		norm := func(txs []convoy.TxEntry) []convoy.TxEntry {
			out := make([]convoy.TxEntry, len(txs))
			for i, x := range txs {
				out[i] = convoy.TxEntry{TxID: x.TxID, Amount: x.Amount, Data: x.Data}
				if len(x.Data) == 0 {
					out[i].Data = nil
				}
			}
			return out
		}
		if !reflect.DeepEqual(norm(gotTx), norm(wantTx)) || !reflect.DeepEqual(append([]convoy.Rejection{}, gotRej...), append([]convoy.Rejection{}, wantRej...)) {
			t.Fatalf("history in pages of %d:\n got %+v\n     %+v\nwant %+v\n     %+v", size, gotTx, gotRej, wantTx, wantRej)
		}
	}
}

func testLoadUnknown(t *testing.T, s convoy.Store, id string) {
	o := load(t, s, id)
	if o.Version != 0 || o.Status != convoy.StatusNew || o.AppliedSeq != 0 || o.TxCount != 0 || o.TotalAmount != 0 || len(o.Parked) != 0 {
		t.Fatalf("unknown order loaded as %+v, want a new order at version 0", o)
	}
	if _, found, err := s.Tx(context.Background(), id, "t-1"); err != nil || found {
		t.Fatalf("a transaction of an unknown order: %v, %v", found, err)
	}
}

func testCommitThenLoad(t *testing.T, s convoy.Store, id string) {
	o := convoy.NewOrder(id)
	step(t, s, o, msg(1, convoy.CreateOrder, "", 0), msg(2, convoy.AddTransaction, "t-1", 1250))
	step(t, s, o, msg(3, convoy.ModifyTransaction, "t-1", -1200), msg(4, convoy.ModifyTransaction, "t-404", 1))
	last := msg(5, convoy.AddTransaction, "t-2", 7)
	last.Last = true
	step(t, s, o, last)
	got := load(t, s, id)
	same(t, got, o)
	if got.Total() != -1193 || !got.Complete || got.TxCount != 2 || got.Version != 3 {
		t.Fatalf("unexpected state %+v", comparable(got))
	}
	sameHistory(t, s, id, []convoy.TxEntry{tx("t-1", -1200), tx("t-2", 7)},
		[]convoy.Rejection{rejection(4, convoy.ModifyTransaction, "t-404", `transaction "t-404" does not exist`)})
}

// testAppliedAt: the head keeps when appliedSeq last advanced (the lag's
// progress), written by the same commit: a commit that advances it sets it,
// one that only parks keeps it, and a drain sets it again.
func testAppliedAt(t *testing.T, s convoy.Store, id string) {
	o := convoy.NewOrder(id)
	step(t, s, o, msg(1, convoy.CreateOrder, "", 0), msg(2, convoy.AddTransaction, "t-1", 5)) // at epoch
	got := load(t, s, id)
	if !got.AppliedAt.Equal(epoch) || !got.Progress().Equal(epoch) {
		t.Fatalf("after applying seqs 1-2 at %v: AppliedAt %v, Progress %v", epoch, got.AppliedAt, got.Progress())
	}
	step(t, s, got, msg(4, convoy.AddTransaction, "t-3", 1)) // at epoch+1s: parked only
	got = load(t, s, id)
	if !got.AppliedAt.Equal(epoch) || !got.UpdatedAt.Equal(epoch.Add(time.Second)) {
		t.Fatalf("after parking seq 4: AppliedAt %v (want %v, unchanged), UpdatedAt %v", got.AppliedAt, epoch, got.UpdatedAt)
	}
	step(t, s, got, msg(3, convoy.AddTransaction, "t-2", 1)) // at epoch+2s: 3 applied, 4 drained
	got = load(t, s, id)
	if want := epoch.Add(2 * time.Second); !got.AppliedAt.Equal(want) || got.AppliedSeq != 4 {
		t.Fatalf("after the drain: AppliedAt %v, appliedSeq %d; want %v, 4", got.AppliedAt, got.AppliedSeq, want)
	}
}

// testTxPointRead: Store.Tx reads one transaction by its id: its position in
// the order added and its amount after the latest modification.
func testTxPointRead(t *testing.T, s convoy.Store, id string) {
	o := convoy.NewOrder(id)
	step(t, s, o, msg(1, convoy.CreateOrder, "", 0), msg(2, convoy.AddTransaction, "t-a", 10), msg(3, convoy.AddTransaction, "t-b", 20))
	step(t, s, o, msg(4, convoy.ModifyTransaction, "t-a", 15))
	ctx := context.Background()
	for _, want := range []convoy.TxRecord{{Position: 0, TxEntry: tx("t-a", 15)}, {Position: 1, TxEntry: tx("t-b", 20)}} {
		got, found, err := s.Tx(ctx, id, want.TxID)
		if err != nil || !found || got.Position != want.Position || got.TxID != want.TxID || got.Amount != want.Amount {
			t.Fatalf("Tx(%s) = %+v, %v, %v; want %+v", want.TxID, got, found, err, want)
		}
	}
	if _, found, err := s.Tx(ctx, id, "t-c"); err != nil || found {
		t.Fatalf("Tx of a transaction never added: %v, %v", found, err)
	}
}

// testAddExistingConflicts: a commit that adds a txId the order has already
// (decided by a writer that did not know it) fails whole with ErrConflict:
// the commit itself is the check, so that steady state needs no read.
func testAddExistingConflicts(t *testing.T, s convoy.Store, id string) {
	o := convoy.NewOrder(id)
	step(t, s, o, msg(1, convoy.CreateOrder, "", 0), msg(2, convoy.AddTransaction, "t-1", 5))
	before := load(t, s, id) // knows no transaction
	blind := before.Clone()
	var c convoy.Change
	out := blind.Receive(msg(3, convoy.AddTransaction, "t-1", 9), epoch, &c)
	if out.Disposition != convoy.Applied {
		t.Fatalf("an order that does not know t-1 decided %v, want applied (the commit checks it)", out)
	}
	if err := s.Commit(context.Background(), blind, blind.Version, &c); !errors.Is(err, convoy.ErrConflict) {
		t.Fatalf("commit adding an existing txId: got %v, want ErrConflict", err)
	}
	same(t, load(t, s, id), before)
	sameHistory(t, s, id, []convoy.TxEntry{tx("t-1", 5)}, nil)
	// Knowing it, the order rejects it.
	r, found, err := s.Tx(context.Background(), id, "t-1")
	if err != nil || !found {
		t.Fatalf("Tx(t-1): %v, %v", found, err)
	}
	before.Learn("t-1", &r)
	c = convoy.Change{}
	if out := before.Receive(msg(3, convoy.AddTransaction, "t-1", 9), epoch, &c); out.Disposition != convoy.Rejected {
		t.Fatalf("knowing t-1: %v, want rejected", out)
	}
}

// testHistoryPages: the history reads a page at a time, transactions in the
// order added and rejections by seq, and a continuation not issued is refused.
func testHistoryPages(t *testing.T, s convoy.Store, id string) {
	o := convoy.NewOrder(id)
	msgs := []convoy.Message{msg(1, convoy.CreateOrder, "", 0)}
	var wantTx []convoy.TxEntry
	var wantRej []convoy.Rejection
	for seq := int64(2); seq <= 40; seq++ {
		if seq%5 == 0 { // rejected: modifies a transaction never added
			msgs = append(msgs, msg(seq, convoy.ModifyTransaction, fmt.Sprintf("none-%d", seq), 1))
			wantRej = append(wantRej, rejection(seq, convoy.ModifyTransaction, fmt.Sprintf("none-%d", seq), fmt.Sprintf("transaction \"none-%d\" does not exist", seq)))
			continue
		}
		msgs = append(msgs, msg(seq, convoy.AddTransaction, fmt.Sprintf("t-%02d", 50-seq), seq))
		wantTx = append(wantTx, tx(fmt.Sprintf("t-%02d", 50-seq), seq)) // txIds sort against the order added
	}
	for _, m := range msgs {
		if !o.Knows(m.Tx.TxID) && m.Tx.Op == convoy.ModifyTransaction {
			o.Learn(m.Tx.TxID, nil)
		}
	}
	step(t, s, o, msgs...)
	sameHistory(t, s, id, wantTx, wantRej)
	for _, size := range []int{3, 8, 31, 32} {
		txs, rs := history(t, s, id, size)
		if len(txs) != len(wantTx) || len(rs) != len(wantRej) {
			t.Fatalf("pages of %d: %d transactions, %d rejections", size, len(txs), len(rs))
		}
	}
	h := s.(convoy.History)
	for _, bad := range []string{"x", "aDIuMS4x", "aDEuMDEuMQ", convoy.HistoryCursor{Tx: -1, Rejected: -1}.Token()} {
		if _, err := convoy.ReadView(context.Background(), s, h, id, bad, 10); err == nil {
			t.Fatalf("continuation %q accepted", bad)
		}
	}
}

// testDataKept: data is stored and read back byte for byte, for the order
// (CreateOrder, DeleteOrder), its transactions (AddTransaction; a
// ModifyTransaction replaces it only when it carries data) and parked messages.
func testDataKept(t *testing.T, s convoy.Store, id string) {
	with := func(m convoy.Message, data string) convoy.Message { m.Tx.Data = json.RawMessage(data); return m }
	big := `{"html":"` + strings.Repeat("<b>&é\"</b>", 300) + `"}`
	o := convoy.NewOrder(id)
	step(t, s, o, with(msg(1, convoy.CreateOrder, "", 0), `{"customer":"<c-1>"}`), with(msg(2, convoy.AddTransaction, "t-1", 5), big),
		with(msg(3, convoy.AddTransaction, "t-2", 6), `{"v":1}`), msg(4, convoy.ModifyTransaction, "t-1", 7))
	step(t, s, o, with(msg(6, convoy.DeleteOrder, "", 0), `{"why":"&"}`)) // parked
	got := load(t, s, id)
	if string(got.Data) != `{"customer":"<c-1>"}` || string(got.Parked[6].Tx.Data) != `{"why":"&"}` {
		t.Fatalf("data after load: order %s, parked %+v", got.Data, got.Parked)
	}
	withData := func(e convoy.TxEntry, data string) convoy.TxEntry { e.Data = json.RawMessage(data); return e }
	sameHistory(t, s, id, []convoy.TxEntry{withData(tx("t-1", 7), big), withData(tx("t-2", 6), `{"v":1}`)}, nil)
	// A modification in a later commit, from a cold order that read t-2.
	cold := load(t, s, id)
	r, found, err := s.Tx(context.Background(), id, "t-2")
	if err != nil || !found {
		t.Fatalf("Tx(t-2): %v, %v", found, err)
	}
	cold.Learn("t-2", &r)
	step(t, s, cold, with(msg(5, convoy.ModifyTransaction, "t-2", 8), `{"v":2}`)) // drains the DeleteOrder
	got = load(t, s, id)
	if string(got.Data) != `{"why":"&"}` || got.TotalAmount != 15 {
		t.Fatalf("after modify and delete: order %s, total %d", got.Data, got.TotalAmount)
	}
	sameHistory(t, s, id, []convoy.TxEntry{withData(tx("t-1", 7), big), withData(tx("t-2", 8), `{"v":2}`)}, nil)
	step(t, s, cold, msg(7, convoy.ModifyTransaction, "t-2", 9)) // rejected: deleted
	cold2 := load(t, s, id)
	cold2.Status = convoy.StatusOpen // a modification without data keeps the data (a state the fold cannot reach after a delete)
	r, _, _ = s.Tx(context.Background(), id, "t-1")
	cold2.Learn("t-1", &r)
	step(t, s, cold2, msg(8, convoy.ModifyTransaction, "t-1", 1))
	sameHistory(t, s, id, []convoy.TxEntry{withData(tx("t-1", 1), big), withData(tx("t-2", 8), `{"v":2}`)},
		[]convoy.Rejection{rejection(7, convoy.ModifyTransaction, "t-2", "order is not open (status deleted)")})
}

func testStaleVersion(t *testing.T, s convoy.Store, id string) {
	o := convoy.NewOrder(id)
	step(t, s, o, msg(1, convoy.CreateOrder, "", 0))
	stale := load(t, s, id)
	step(t, s, o, msg(2, convoy.AddTransaction, "t-1", 5))
	var c convoy.Change
	stale.Receive(msg(2, convoy.AddTransaction, "t-other", 9), epoch, &c)
	err := s.Commit(context.Background(), stale, stale.Version, &c)
	if !errors.Is(err, convoy.ErrConflict) {
		t.Fatalf("commit from stale version: got %v, want ErrConflict", err)
	}
	same(t, load(t, s, id), o)
	sameHistory(t, s, id, []convoy.TxEntry{tx("t-1", 5)}, nil)
}

func testConcurrentCommits(t *testing.T, s convoy.Store, id string) {
	o := convoy.NewOrder(id)
	step(t, s, o, msg(1, convoy.CreateOrder, "", 0))
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
			mine.Receive(msg(2, convoy.AddTransaction, fmt.Sprintf("t-%d", w), int64(w)), epoch, &c)
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
	if got.Version != 2 || got.TxCount != 1 || len(txs) != 1 || got.AppliedSeq != 2 || got.TotalAmount != txs[0].Amount {
		t.Fatalf("after the race: %+v, transactions %+v", comparable(got), txs)
	}
}

func testParkThenDrain(t *testing.T, s convoy.Store, id string) {
	o := convoy.NewOrder(id)
	step(t, s, o, msg(3, convoy.AddTransaction, "t-1", 10))
	step(t, s, o, msg(4, convoy.ModifyTransaction, "t-1", 20))
	got := load(t, s, id)
	same(t, got, o)
	if len(got.Parked) != 2 || got.MissingSeq() != 1 || !got.BlockedSince.Equal(epoch) {
		t.Fatalf("parked state: %+v", comparable(got))
	}
	step(t, s, o, msg(1, convoy.CreateOrder, "", 0), msg(2, convoy.AddTransaction, "t-0", 1))
	got = load(t, s, id)
	same(t, got, o)
	if len(got.Parked) != 0 || got.AppliedSeq != 4 || got.Total() != 21 || !got.BlockedSince.IsZero() {
		t.Fatalf("drained state: %+v", comparable(got))
	}
	sameHistory(t, s, id, []convoy.TxEntry{tx("t-0", 1), tx("t-1", 20)}, nil)
}

// parkAll parks the AddTransactions of seqs from to to (each t-<seq>,
// amount seq) with a processor, a call per convoy.ParkedPageSize of them.
func parkAll(t *testing.T, p *convoy.Processor, id string, from, to int64) {
	t.Helper()
	for seq := from; seq <= to; {
		var msgs []convoy.Message
		for ; seq <= to && len(msgs) < convoy.ParkedPageSize; seq++ {
			m := msg(seq, convoy.AddTransaction, fmt.Sprintf("t-%d", seq), seq)
			m.Tx.OrderID = id
			msgs = append(msgs, m)
		}
		res, err := p.Process(context.Background(), id, msgs)
		if err != nil {
			t.Fatalf("park seqs up to %d: %v", seq-1, err)
		}
		for _, out := range res.Outcomes {
			if out.Disposition != convoy.Parked {
				t.Fatalf("park: %v", out)
			}
		}
	}
}

// headParked is the parked count of the order's head as the blocked
// index reads it (the head's own figure), or -1 if the store has no index.
func headParked(t *testing.T, s convoy.Store, id string) int {
	t.Helper()
	idx, ok := s.(convoy.BlockedIndex)
	if !ok {
		return -1
	}
	h, _, err := idx.Head(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	return h.Parked
}

// testParkedTailInPages (issue 33): Load reads the head and the first
// convoy.ParkedLoadSize parked messages, not the whole tail, with the count
// of them all; a tail of several pages drains whole, in seq order, across
// commits, on a processor that never had the order cached.
func testParkedTailInPages(t *testing.T, s convoy.Store, id string) {
	const n = 2*convoy.ParkedPageSize + convoy.ParkedLoadSize + 7 // parked: seqs 3 to n+2
	parkAll(t, convoy.NewProcessor(s, convoy.ProcessorOptions{}), id, 3, n+2)
	got := load(t, s, id)
	if got.ParkedCount != n || len(got.Parked) > convoy.ParkedLoadSize || got.MissingSeq() != 1 || got.LastParked() != n+2 {
		t.Fatalf("loaded %d parked message(s) of %d counted, missing seq %d, last parked %d; want at most %d of %d, missing 1, last %d",
			len(got.Parked), got.ParkedCount, got.MissingSeq(), got.LastParked(), convoy.ParkedLoadSize, n, n+2)
	}
	for seq := int64(3); seq < 3+int64(len(got.Parked)); seq++ {
		if got.Parked[seq].Tx.TxID != fmt.Sprintf("t-%d", seq) {
			t.Fatalf("the loaded window is not the lowest parked messages: %v", slices.Sorted(maps.Keys(got.Parked)))
		}
	}
	if v := got.View(); v.Parked != n || v.MissingSeq != 1 {
		t.Fatalf("view: %d parked, missing %d; want %d, 1", v.Parked, v.MissingSeq, n)
	}
	if h := headParked(t, s, id); h != -1 && h != n {
		t.Fatalf("the head counts %d parked, want %d", h, n)
	}
	p := convoy.NewProcessor(s, convoy.ProcessorOptions{}) // cold
	first := []convoy.Message{msg(1, convoy.CreateOrder, "", 0), msg(2, convoy.AddTransaction, "t-2", 2)}
	for i := range first {
		first[i].Tx.OrderID = id
	}
	res, err := p.Process(context.Background(), id, first)
	if err != nil {
		t.Fatal(err)
	}
	if res.AppliedSeq != n+2 || res.Parked != 0 || res.MissingSeq != 0 || len(res.Outcomes) != n+2 || res.Commits < 3 {
		t.Fatalf("the drain: appliedSeq %d, %d parked, missing %d, %d outcomes in %d commits; want %d, 0, 0, %d in several",
			res.AppliedSeq, res.Parked, res.MissingSeq, len(res.Outcomes), res.Commits, n+2, n+2)
	}
	var want []convoy.TxEntry
	for i, out := range res.Outcomes {
		if seq := int64(i + 1); out.Seq != seq || out.Disposition != convoy.Applied || out.Drained != (seq > 2) {
			t.Fatalf("outcome %d: %v, want seq %d applied", i, out, seq)
		}
		if i > 0 {
			want = append(want, tx(fmt.Sprintf("t-%d", i+1), int64(i+1)))
		}
	}
	got = load(t, s, id)
	if got.ParkedCount != 0 || len(got.Parked) != 0 || got.AppliedSeq != n+2 || !got.BlockedSince.IsZero() || got.LastParked() != 0 {
		t.Fatalf("after the drain: %+v", comparable(got))
	}
	if h := headParked(t, s, id); h != -1 && h != 0 {
		t.Fatalf("the head counts %d parked after the drain, want 0", h)
	}
	sameHistory(t, s, id, want, nil)
}

// probeCounter counts IsParked calls.
type probeCounter struct {
	convoy.Store
	n int
}

func (p *probeCounter) IsParked(ctx context.Context, orderID string, seq int64) (bool, error) {
	p.n++
	return p.Store.IsParked(ctx, orderID, seq)
}

// testParkedDuplicateBeyondWindow (issue 33): a message whose seq is parked
// beyond the loaded window is a duplicate (one point read), in a later call
// or again in the same one; a new one there is parked, with no read when it
// lies above every parked seq; the count is exact after each, and the whole
// tail drains once.
func testParkedDuplicateBeyondWindow(t *testing.T, s convoy.Store, id string) {
	const n = convoy.ParkedPageSize + convoy.ParkedLoadSize // parked: 3 to n+2
	parkAll(t, convoy.NewProcessor(s, convoy.ProcessorOptions{}), id, 3, n+2)
	with := func(ms ...convoy.Message) []convoy.Message {
		for i := range ms {
			ms[i].Tx.OrderID = id
		}
		return ms
	}
	beyond := msg(n+2, convoy.AddTransaction, fmt.Sprintf("t-%d", n+2), n+2) // parked, beyond the first page
	fresh := msg(n+9, convoy.AddTransaction, fmt.Sprintf("t-%d", n+9), n+9)  // not parked
	cases := []struct {
		msgs   []convoy.Message
		want   []convoy.Disposition
		count  int
		probes int
	}{
		{with(beyond), []convoy.Disposition{convoy.Duplicate}, n, 1},
		{with(beyond, fresh, fresh, beyond), []convoy.Disposition{convoy.Duplicate, convoy.Parked, convoy.Duplicate, convoy.Duplicate}, n + 1, 2},
		{with(fresh), []convoy.Disposition{convoy.Duplicate}, n + 1, 1},
	}
	for i, c := range cases {
		probes := &probeCounter{Store: s}
		p := convoy.NewProcessor(probes, convoy.ProcessorOptions{}) // cold: the window is Load's
		res, err := p.Process(context.Background(), id, c.msgs)
		if err != nil {
			t.Fatalf("call %d: %v", i, err)
		}
		var got []convoy.Disposition
		for _, out := range res.Outcomes {
			got = append(got, out.Disposition)
		}
		if !slices.Equal(got, c.want) || res.Parked != c.count || probes.n != c.probes {
			t.Fatalf("call %d: %v with %d parked after %d point reads, want %v with %d after %d", i, got, res.Parked, probes.n, c.want, c.count, c.probes)
		}
		if o := load(t, s, id); o.ParkedCount != c.count || o.LastParked() != n+9 && i > 0 {
			t.Fatalf("call %d: loaded %d parked, last %d; want %d, last %d", i, o.ParkedCount, o.LastParked(), c.count, n+9)
		}
		if h := headParked(t, s, id); h != -1 && h != c.count {
			t.Fatalf("call %d: the head counts %d parked, want %d", i, h, c.count)
		}
	}
	// Fill every gap: all drain, each once.
	var fill []convoy.Message
	for _, seq := range []int64{1, 2, n + 3, n + 4, n + 5, n + 6, n + 7, n + 8} {
		m := msg(seq, convoy.AddTransaction, fmt.Sprintf("t-%d", seq), seq)
		if seq == 1 {
			m = msg(1, convoy.CreateOrder, "", 0)
		}
		fill = append(fill, m)
	}
	res, err := convoy.NewProcessor(s, convoy.ProcessorOptions{}).Process(context.Background(), id, with(fill...))
	if err != nil {
		t.Fatal(err)
	}
	applied := 0
	for _, out := range res.Outcomes {
		if out.Disposition == convoy.Applied {
			applied++
		}
	}
	if applied != n+9 || res.AppliedSeq != n+9 || res.Parked != 0 {
		t.Fatalf("filling the gaps applied %d, appliedSeq %d, %d parked; want %d, %d, 0", applied, res.AppliedSeq, res.Parked, n+9, n+9)
	}
	if o := load(t, s, id); o.ParkedCount != 0 || o.TxCount != n+8 {
		t.Fatalf("after the drain: %d parked, %d transactions; want 0, %d", o.ParkedCount, o.TxCount, n+8)
	}
}

func testAtomicFailure(t *testing.T, s convoy.Store, id string) {
	o := convoy.NewOrder(id)
	step(t, s, o, msg(1, convoy.CreateOrder, "", 0))
	before := load(t, s, id)
	// A change that adds a transaction but unparks a seq that is not parked:
	// the whole commit must fail and write nothing.
	bad := before.Clone()
	var c convoy.Change
	bad.Receive(msg(2, convoy.AddTransaction, "t-1", 5), epoch, &c)
	c.Unpark = map[int64]bool{9: true}
	if err := s.Commit(context.Background(), bad, bad.Version, &c); !errors.Is(err, convoy.ErrConflict) {
		t.Fatalf("commit unparking a missing message: got %v, want ErrConflict", err)
	}
	same(t, load(t, s, id), before)
	sameHistory(t, s, id, nil, nil)
	if _, found, err := s.Tx(context.Background(), id, "t-1"); err != nil || found {
		t.Fatalf("the failed commit left transaction t-1: %v, %v", found, err)
	}
}

func testFullCommit(t *testing.T, s convoy.Store, id string) {
	o := convoy.NewOrder(id)
	msgs := []convoy.Message{msg(1, convoy.CreateOrder, "", 0)}
	var want []convoy.TxEntry
	for i := range convoy.MaxChangeRecords / convoy.TxRecords {
		msgs = append(msgs, msg(int64(i+2), convoy.AddTransaction, fmt.Sprintf("t-%d", i), 1))
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
	o := convoy.NewOrder(id)
	step(t, s, o, msg(1, convoy.CreateOrder, "", 0))
	var want []convoy.TxEntry
	sum := int64(0)
	for seq := int64(2); seq <= n+1; {
		var batch []convoy.Message
		for ; len(batch) < convoy.MaxChangeRecords/convoy.TxRecords && seq <= n+1; seq++ {
			batch = append(batch, msg(seq, convoy.AddTransaction, fmt.Sprintf("t-%d", seq), seq))
			want = append(want, tx(fmt.Sprintf("t-%d", seq), seq))
			sum += seq
		}
		step(t, s, o, batch...)
	}
	cold := load(t, s, id)
	if cold.TxCount != n || cold.TotalAmount != sum {
		t.Fatalf("loaded %d transactions totalling %d, want %d totalling %d", cold.TxCount, cold.TotalAmount, n, sum)
	}
	r, found, err := s.Tx(context.Background(), id, "t-2")
	if err != nil || !found || r.Position != 0 || r.Amount != 2 {
		t.Fatalf("Tx(t-2) = %+v, %v, %v", r, found, err)
	}
	cold.Learn("t-2", &r)
	step(t, s, cold, msg(n+2, convoy.ModifyTransaction, "t-2", 0))
	want[0].Amount = 0
	got := load(t, s, id)
	same(t, got, cold)
	if got.TotalAmount != sum-2 {
		t.Fatalf("total %d after the modification, want %d", got.TotalAmount, sum-2)
	}
	txs, rs := history(t, s, id, convoy.MaxHistoryPageSize)
	if !reflect.DeepEqual(txs, want) || len(rs) != 0 {
		t.Fatalf("history: %d transactions (first %+v), %d rejections; want %d", len(txs), txs[:1], len(rs), n)
	}
}

// testBlockedIndex: the processor keeps the index of blocked orders; the
// listing is oldest first, paged, and drops stale entries.
func testBlockedIndex(t *testing.T, s convoy.Store, id string) {
	idx, ok := s.(convoy.BlockedIndex)
	if !ok {
		t.Fatalf("%T does not implement convoy.BlockedIndex", s)
	}
	ctx := context.Background()
	clock := epoch.Add(time.Duration(time.Now().UnixNano()%1e6) * time.Hour) // after anything listed by other runs
	p := convoy.NewProcessor(s, convoy.ProcessorOptions{Index: idx, Now: func() time.Time { return clock }})
	process := processOne(t, p)
	a, b := id+"-a", id+"-b"
	if res := process(a, msg(3, convoy.AddTransaction, "t-1", 5)); !res.Blocked {
		t.Fatal("parking a message did not report the order blocked")
	}
	if res := process(a, msg(4, convoy.AddTransaction, "t-2", 5)); res.Blocked {
		t.Fatal("a second parked message reported the order blocked again")
	}
	clock = clock.Add(time.Minute)
	process(b, msg(2, convoy.AddTransaction, "t-1", 5))
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
	if res := process(a, msg(1, convoy.CreateOrder, "", 0)); res.Blocked {
		t.Fatal("still blocked at seq 2")
	}
	if res := process(a, msg(2, convoy.AddTransaction, "t-0", 1)); !res.Unblocked {
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

func (l listBeforeCommit) Commit(ctx context.Context, o *convoy.Order, base int64, c *convoy.Change) error {
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
	p := convoy.NewProcessor(mid, convoy.ProcessorOptions{Index: idx, Now: func() time.Time { return clock }})
	process := processOne(t, p)
	fresh, existing := id+"-fresh", id+"-existing"
	// An order whose first message parks: no head yet while the lister runs.
	if res := process(fresh, msg(2, convoy.AddTransaction, "t-1", 5)); !res.Blocked {
		t.Fatal("parking a message did not report the order blocked")
	}
	// An order with state that parks: its head is not blocked while the lister runs.
	process(existing, msg(1, convoy.CreateOrder, "", 0))
	if res := process(existing, msg(3, convoy.AddTransaction, "t-1", 5)); !res.Blocked {
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
	if res := process(existing, msg(2, convoy.AddTransaction, "t-0", 1)); !res.Unblocked {
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
	if err := idx.ClearBlocked(ctx, existing, pending); err != nil {
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

func (c *crashyIndex) UpdateBlocked(ctx context.Context, id string, since time.Time, u convoy.BlockedUpdate, etag string) error {
	if c.crash && etag == "*" && u.Confirmed {
		return fmt.Errorf("crashed before confirming")
	}
	return c.BlockedIndex.UpdateBlocked(ctx, id, since, u, etag)
}

func (c *crashyIndex) ClearBlocked(ctx context.Context, id string, since time.Time) error {
	if c.crash {
		return fmt.Errorf("crashed before clearing")
	}
	return c.BlockedIndex.ClearBlocked(ctx, id, since)
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
	p := convoy.NewProcessor(s, convoy.ProcessorOptions{Index: idx, Now: func() time.Time { return clock }})
	process := processOne(t, p)
	quiet, crashed, healed := id+"-quiet", id+"-crashed", id+"-healed"
	process(quiet, msg(2, convoy.AddTransaction, "t-1", 5))
	process(quiet, msg(3, convoy.AddTransaction, "t-2", 5)) // a second park updates the entry's figures
	idx.crash = true
	process(crashed, msg(2, convoy.AddTransaction, "t-1", 5)) // blocked; its entry left pending
	idx.crash = false
	process(healed, msg(2, convoy.AddTransaction, "t-1", 5))
	idx.crash = true
	process(healed, msg(1, convoy.CreateOrder, "", 0)) // unblocked; its entry left behind
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
	if err := idx.ClearBlocked(ctx, gone.OrderID, gone.Since); err != nil {
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
		m.Tx.OrderID = order
		res, err := p.Process(context.Background(), order, []convoy.Message{m})
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
}
