// Package storetest is the conformance suite every convoy.Store passes: the
// in-memory store and the Table Storage store run the same tests.
package storetest

import (
	"context"
	"errors"
	"fmt"
	"reflect"
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
		{"StaleVersionConflicts", testStaleVersion},
		{"ConcurrentCommitsOneWins", testConcurrentCommits},
		{"ParkThenDrain", testParkThenDrain},
		{"FailedCommitWritesNothing", testAtomicFailure},
		{"FullCommit", testFullCommit},
		{"TenThousandTransactions", testManyTransactions},
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
	for _, m := range msgs {
		m.Tx.OrderID = o.ID
		o.Receive(m, now, &c)
		for {
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

// same fails unless got has the state of want.
func same(t *testing.T, got, want *convoy.Order) {
	t.Helper()
	g, w := comparable(got), comparable(want)
	if !reflect.DeepEqual(g, w) {
		t.Fatalf("stored state differs\n got: %+v\nwant: %+v", g, w)
	}
}

type state struct {
	ID, Status, Currency  string
	Complete              bool
	AppliedSeq, Version   int64
	Transactions          []convoy.TxEntry
	Rejected              []convoy.Rejection
	Parked                map[int64]convoy.Message
	BlockedSince, Updated time.Time
}

func comparable(o *convoy.Order) state {
	s := state{ID: o.ID, Status: string(o.Status), Currency: o.Currency, Complete: o.Complete,
		AppliedSeq: o.AppliedSeq, Version: o.Version, Transactions: o.Transactions, Rejected: o.Rejected,
		Parked: o.Parked, BlockedSince: o.BlockedSince, Updated: o.UpdatedAt}
	if len(s.Transactions) == 0 {
		s.Transactions = nil
	}
	if len(s.Rejected) == 0 {
		s.Rejected = nil
	}
	if len(s.Parked) == 0 {
		s.Parked = nil
	}
	return s
}

func testLoadUnknown(t *testing.T, s convoy.Store, id string) {
	o := load(t, s, id)
	if o.Version != 0 || o.Status != convoy.StatusNew || o.AppliedSeq != 0 || len(o.Transactions)+len(o.Parked)+len(o.Rejected) != 0 {
		t.Fatalf("unknown order loaded as %+v, want a new order at version 0", o)
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
	if got.Total() != -1193 || !got.Complete || len(got.Rejected) != 1 || got.Version != 3 {
		t.Fatalf("unexpected state %+v", comparable(got))
	}
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
	if got.Version != 2 || len(got.Transactions) != 1 || got.AppliedSeq != 2 {
		t.Fatalf("after the race: %+v", comparable(got))
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
}

func testFullCommit(t *testing.T, s convoy.Store, id string) {
	o := convoy.NewOrder(id)
	msgs := []convoy.Message{msg(1, convoy.CreateOrder, "", 0)}
	for i := range convoy.MaxChangeRecords {
		msgs = append(msgs, msg(int64(i+2), convoy.AddTransaction, fmt.Sprintf("t-%d", i), 1))
	}
	step(t, s, o, msgs...)
	got := load(t, s, id)
	same(t, got, o)
	if len(got.Transactions) != convoy.MaxChangeRecords {
		t.Fatalf("%d transactions stored, want %d", len(got.Transactions), convoy.MaxChangeRecords)
	}
}

func testManyTransactions(t *testing.T, s convoy.Store, id string) {
	const n = 10_000
	o := convoy.NewOrder(id)
	step(t, s, o, msg(1, convoy.CreateOrder, "", 0))
	for seq := int64(2); seq <= n+1; {
		var batch []convoy.Message
		for ; len(batch) < convoy.MaxChangeRecords && seq <= n+1; seq++ {
			batch = append(batch, msg(seq, convoy.AddTransaction, fmt.Sprintf("t-%d", seq), seq))
		}
		step(t, s, o, batch...)
	}
	step(t, s, o, msg(n+2, convoy.ModifyTransaction, "t-2", 0))
	got := load(t, s, id)
	if len(got.Transactions) != n || got.Transactions[n-1].TxID != fmt.Sprintf("t-%d", n+1) || got.Transactions[0].Amount != 0 {
		t.Fatalf("loaded %d transactions (last %v), want %d in order", len(got.Transactions), got.Transactions[len(got.Transactions)-1], n)
	}
	same(t, got, o)
}
