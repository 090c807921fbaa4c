// Package storetest is the conformance suite every convoy.Store passes: the
// in-memory store and the Table Storage store run the same tests. Run lists
// them; they live by what they check: commit.go an order's state and its
// atomic commits, history.go its transactions read by id and by page,
// parked.go the parked tail, blocked.go the blocked-orders index, limits.go
// Table Storage's limits.
package storetest

import (
	"context"
	"fmt"
	"reflect"
	"testing"
	"time"

	"github.com/convoy-dev/convoy/handler/convoy"
	"github.com/convoy-dev/convoy/handler/keyed"
	"github.com/convoy-dev/convoy/handler/orders"
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
		{"CopyOfACutDrainsHead", testCopyOfACutDrainsHead},
		{"DataKept", testDataKept},
		{"FailedCommitWritesNothing", testAtomicFailure},
		{"FailureNoted", testFailureNoted},
		{"FullCommit", testFullCommit},
		{"TenThousandTransactions", testManyTransactions},
		{"TxPointRead", testTxPointRead},
		{"AddExistingTxIdConflicts", testAddExistingConflicts},
		{"HistoryPages", testHistoryPages},
		{"BlockedIndex", testBlockedIndex},
		{"BlockedIndexListedMidCommit", testBlockedListedMidCommit},
		{"BlockedIndexPageWithoutHeads", testBlockedPageWithoutHeads},
		{"BlockedIndexNotes", testBlockedNotes},
		{"BlockedIndexClearKeepsANewBlock", testBlockedClearKeepsANewBlock},
		{"PropertyLimit", testPropertyLimit},
		{"KeyLimits", testKeyLimits},
		{"GroupLimits", testGroupLimits},
		{"BlockedIndexLimits", testBlockedLimits},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.fn(t, store, fmt.Sprintf("st-%d-%d", time.Now().UnixNano(), i))
		})
	}
}

var epoch = time.Date(2026, 11, 21, 10, 20, 30, 0, time.UTC)

func amount(n int64) *int64 { return &n }

func msg(seq int64, op orders.Op, txID string, amt int64) convoy.Message {
	tx := orders.Transaction{Op: op, TxID: txID}
	switch op {
	case orders.CreateOrder:
		tx.Currency = "EUR"
	case orders.AddTransaction, orders.ModifyTransaction:
		tx.Amount = amount(amt)
	}
	return convoy.Message{Seq: seq, MessageID: fmt.Sprintf("L:%d", seq), Command: tx}
}

// command returns m with its transaction changed by f.
func command(m convoy.Message, f func(tx *orders.Transaction)) convoy.Message {
	tx := m.Command.(orders.Transaction)
	f(&tx)
	m.Command = tx
	return m
}

// of returns m as a message of order id (its transaction's OrderID).
func of(id string, m convoy.Message) convoy.Message {
	return command(m, func(tx *orders.Transaction) { tx.OrderID = id })
}

// newOrder is convoy.NewKey(id) bound to the order domain.
func newOrder(t *testing.T, id string) *convoy.Key {
	t.Helper()
	return bind(t, convoy.NewKey(id))
}

// bind binds o to the order domain, as the processor does.
func bind(t *testing.T, o *convoy.Key) *convoy.Key {
	t.Helper()
	if _, err := o.Bind(orders.Domain); err != nil {
		t.Fatalf("bind %s: %v", o.ID, err)
	}
	return o
}

// xRef is the row of txID by its id (its position and amount).
func xRef(txID string) keyed.RowRef { return keyed.RowRef{Collection: "x", ID: txID} }

// txRecords is how many rows one added transaction takes: its row in the
// order added ("t") and its row by txId ("x").
const txRecords = 2

// receive receives m into o, failing the test on an error.
func receive(t *testing.T, o *convoy.Key, m convoy.Message, now time.Time, c *convoy.Change) convoy.Outcome {
	t.Helper()
	out, err := o.Receive(m, now, c)
	if err != nil {
		t.Fatalf("receive seq %d: %v", m.Seq, err)
	}
	return out
}

// step receives msgs (draining after each) into o and commits one change.
func step(t *testing.T, s convoy.Store, o *convoy.Key, msgs ...convoy.Message) {
	t.Helper()
	var c convoy.Change
	bind(t, o)
	now := epoch.Add(time.Duration(o.Version) * time.Second)
	lookup := func(m convoy.Message) { // as the processor does: a ModifyTransaction's record, read
		refs, err := o.Needs(m, false)
		if err != nil {
			t.Fatalf("Needs(seq %d): %v", m.Seq, err)
		}
		for _, ref := range refs {
			p, found, err := s.Row(context.Background(), o.ID, ref)
			if err != nil {
				t.Fatalf("Row(%s/%s): %v", ref.Collection, ref.ID, err)
			}
			o.Learn(ref, p, found)
		}
	}
	for _, m := range msgs {
		m = of(o.ID, m)
		lookup(m)
		if seq, ok := o.ParkedUnknown(m, &c); ok { // as the processor does: beyond the parked window, one point read
			parked, err := s.IsParked(context.Background(), o.ID, seq)
			if err != nil {
				t.Fatalf("IsParked(%d): %v", seq, err)
			}
			o.LearnParked(seq, parked)
		}
		receive(t, o, m, now, &c)
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
			_, ok, err := o.DrainNext(now, &c)
			if err != nil {
				t.Fatalf("drain: %v", err)
			}
			if !ok {
				break
			}
		}
	}
	if err := s.Commit(context.Background(), o, o.Version, &c); err != nil {
		t.Fatalf("commit at version %d: %v", o.Version, err)
	}
	o.Version++
	if err := ParkedAboveApplied(context.Background(), s, o.ID); err != nil {
		t.Fatal(err)
	}
}

func load(t *testing.T, s convoy.Store, id string) *convoy.Key {
	t.Helper()
	o, err := s.Load(context.Background(), id)
	if err != nil {
		t.Fatalf("load %s: %v", id, err)
	}
	return bind(t, o)
}

// same fails unless got has the head and parked messages of want.
func same(t *testing.T, got, want *convoy.Key) {
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

func comparable(o *convoy.Key) state {
	st := orders.StateOf(o)
	s := state{ID: o.ID, Status: string(st.Status), Currency: st.Currency, Data: string(st.Data), Complete: o.Complete,
		AppliedSeq: o.AppliedSeq, Version: o.Version, Total: st.Total, TxCount: st.TxCount,
		ParkedCount: o.ParkedCount, LastParked: o.LastParked(), BlockedSince: o.BlockedSince, Updated: o.UpdatedAt, AppliedAt: o.AppliedAt}
	// A parked message as its command: read from its body in memory, decoded
	// from its row as loaded.
	for seq, m := range o.Parked {
		if s.Parked == nil {
			s.Parked = map[int64]convoy.Message{}
		}
		m.Command, m.Stored = orders.CommandOf(o.ID, m), nil
		s.Parked[seq] = m
	}
	return s
}

func tx(id string, amount int64) orders.TxEntry { return orders.TxEntry{TxID: id, Amount: amount} }

func rejection(seq int64, op orders.Op, txID, reason string) orders.Rejection {
	return orders.Rejection{Seq: seq, Op: op, TxID: txID, Reason: reason}
}

// history reads the order's whole history through convoy.ReadView, pageSize
// at a time, following the continuations.
func history(t *testing.T, s convoy.Store, id string, pageSize int) ([]orders.TxEntry, []orders.Rejection) {
	t.Helper()
	h, ok := s.(convoy.History)
	if !ok {
		t.Fatalf("%T does not implement convoy.History", s)
	}
	var txs []orders.TxEntry
	var rs []orders.Rejection
	token := ""
	for pages := 0; ; pages++ {
		if pages > 100_000 {
			t.Fatal("the history never ends")
		}
		cv, err := convoy.ReadView(context.Background(), orders.Domain, s, h, id, token, pageSize)
		if err != nil {
			t.Fatalf("read the history of %s: %v", id, err)
		}
		v := orders.ViewOf(cv)
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
func sameHistory(t *testing.T, s convoy.Store, id string, wantTx []orders.TxEntry, wantRej []orders.Rejection) {
	t.Helper()
	for _, size := range []int{convoy.MaxHistoryPageSize, 2} {
		gotTx, gotRej := history(t, s, id, size)
		norm := func(txs []orders.TxEntry) []orders.TxEntry {
			out := make([]orders.TxEntry, len(txs))
			for i, x := range txs {
				out[i] = orders.TxEntry{TxID: x.TxID, Amount: x.Amount, Data: x.Data}
				if len(x.Data) == 0 {
					out[i].Data = nil
				}
			}
			return out
		}
		if !reflect.DeepEqual(norm(gotTx), norm(wantTx)) || !reflect.DeepEqual(append([]orders.Rejection{}, gotRej...), append([]orders.Rejection{}, wantRej...)) {
			t.Fatalf("history in pages of %d:\n got %+v\n     %+v\nwant %+v\n     %+v", size, gotTx, gotRej, wantTx, wantRej)
		}
	}
}
