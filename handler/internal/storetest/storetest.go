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
		{"FullCommit", testFullCommit},
		{"TenThousandTransactions", testManyTransactions},
		{"TxPointRead", testTxPointRead},
		{"AddExistingTxIdConflicts", testAddExistingConflicts},
		{"HistoryPages", testHistoryPages},
		{"BlockedIndex", testBlockedIndex},
		{"BlockedIndexListedMidCommit", testBlockedListedMidCommit},
		{"BlockedIndexPageWithoutHeads", testBlockedPageWithoutHeads},
		{"BlockedIndexNotes", testBlockedNotes},
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
	if err := ParkedAboveApplied(context.Background(), s, o.ID); err != nil {
		t.Fatal(err)
	}
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

func tx(id string, amount int64) orders.TxEntry { return orders.TxEntry{TxID: id, Amount: amount} }

func rejection(seq int64, op orders.Op, txID, reason string) convoy.Rejection {
	return convoy.Rejection{Seq: seq, Op: op, TxID: txID, Reason: reason}
}

// history reads the order's whole history through convoy.ReadView, pageSize
// at a time, following the continuations.
func history(t *testing.T, s convoy.Store, id string, pageSize int) ([]orders.TxEntry, []convoy.Rejection) {
	t.Helper()
	h, ok := s.(convoy.History)
	if !ok {
		t.Fatalf("%T does not implement convoy.History", s)
	}
	var txs []orders.TxEntry
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
func sameHistory(t *testing.T, s convoy.Store, id string, wantTx []orders.TxEntry, wantRej []convoy.Rejection) {
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
		if !reflect.DeepEqual(norm(gotTx), norm(wantTx)) || !reflect.DeepEqual(append([]convoy.Rejection{}, gotRej...), append([]convoy.Rejection{}, wantRej...)) {
			t.Fatalf("history in pages of %d:\n got %+v\n     %+v\nwant %+v\n     %+v", size, gotTx, gotRej, wantTx, wantRej)
		}
	}
}
