package storetest

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/convoy-dev/convoy/handler/convoy"
	"github.com/convoy-dev/convoy/handler/orders"
)

// testTxPointRead: Store.Row reads one transaction by its id (its "x" row):
// its position in the order added and its amount after the latest
// modification.
func testTxPointRead(t *testing.T, s convoy.Store, id string) {
	o := newOrder(t, id)
	step(t, s, o, msg(1, orders.CreateOrder, "", 0), msg(2, orders.AddTransaction, "t-a", 10), msg(3, orders.AddTransaction, "t-b", 20))
	step(t, s, o, msg(4, orders.ModifyTransaction, "t-a", 15))
	ctx := context.Background()
	type record struct {
		Position int64
		orders.TxEntry
	}
	for _, want := range []record{{Position: 0, TxEntry: tx("t-a", 15)}, {Position: 1, TxEntry: tx("t-b", 20)}} {
		got, found, err := s.Row(ctx, id, xRef(want.TxID))
		if err != nil || !found || got.Int("Position") != want.Position || got.Int("Amount") != want.Amount {
			t.Fatalf("Row(x/%s) = %+v, %v, %v; want %+v", want.TxID, got, found, err, want)
		}
		// The row at that position is the transaction's.
		rows, _, err := s.(convoy.History).Rows(ctx, id, "t", want.Position, 1)
		if err != nil || len(rows) != 1 || orders.EntryOf(rows[0].Props).TxID != want.TxID {
			t.Fatalf("Rows(t, %d) = %+v, %v; want the row of %s", want.Position, rows, err, want.TxID)
		}
	}
	if _, found, err := s.Row(ctx, id, xRef("t-c")); err != nil || found {
		t.Fatalf("Tx of a transaction never added: %v, %v", found, err)
	}
}

// testAddExistingConflicts: a commit that adds a txId the order has already
// (decided by a writer that did not know it) fails whole with ErrConflict:
// the commit itself is the check, so that steady state needs no read.
func testAddExistingConflicts(t *testing.T, s convoy.Store, id string) {
	o := newOrder(t, id)
	step(t, s, o, msg(1, orders.CreateOrder, "", 0), msg(2, orders.AddTransaction, "t-1", 5))
	before := load(t, s, id) // knows no transaction
	blind := before.Clone()
	var c convoy.Change
	out := receive(t, blind, msg(3, orders.AddTransaction, "t-1", 9), epoch, &c)
	if out.Disposition != convoy.Applied {
		t.Fatalf("an order that does not know t-1 decided %v, want applied (the commit checks it)", out)
	}
	if err := s.Commit(context.Background(), blind, blind.Version, &c); !errors.Is(err, convoy.ErrConflict) {
		t.Fatalf("commit adding an existing txId: got %v, want ErrConflict", err)
	}
	same(t, load(t, s, id), before)
	sameHistory(t, s, id, []orders.TxEntry{tx("t-1", 5)}, nil)
	// Knowing it, the order rejects it.
	r, found, err := s.Row(context.Background(), id, xRef("t-1"))
	if err != nil || !found {
		t.Fatalf("Row(x/t-1): %v, %v", found, err)
	}
	before.Learn(xRef("t-1"), r, found)
	c = convoy.Change{}
	if out := receive(t, before, msg(3, orders.AddTransaction, "t-1", 9), epoch, &c); out.Disposition != convoy.Rejected {
		t.Fatalf("knowing t-1: %v, want rejected", out)
	}
}

// testHistoryPages: the history reads a page at a time, transactions in the
// order added and rejections by seq, and a continuation not issued is refused.
func testHistoryPages(t *testing.T, s convoy.Store, id string) {
	o := newOrder(t, id)
	msgs := []convoy.Message{msg(1, orders.CreateOrder, "", 0)}
	var wantTx []orders.TxEntry
	var wantRej []orders.Rejection
	for seq := int64(2); seq <= 40; seq++ {
		if seq%5 == 0 { // rejected: modifies a transaction never added
			msgs = append(msgs, msg(seq, orders.ModifyTransaction, fmt.Sprintf("none-%d", seq), 1))
			wantRej = append(wantRej, rejection(seq, orders.ModifyTransaction, fmt.Sprintf("none-%d", seq), fmt.Sprintf("transaction \"none-%d\" does not exist", seq)))
			continue
		}
		msgs = append(msgs, msg(seq, orders.AddTransaction, fmt.Sprintf("t-%02d", 50-seq), seq))
		wantTx = append(wantTx, tx(fmt.Sprintf("t-%02d", 50-seq), seq)) // txIds sort against the order added
	}
	for _, m := range msgs {
		if tx := m.Command.(orders.Transaction); tx.Op == orders.ModifyTransaction {
			o.Learn(xRef(tx.TxID), nil, false)
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
	for _, bad := range []string{"x", "aDIuMS4x", "aDEuMDEuMQ", convoy.HistoryCursor{Rows: -1, Rejected: -1}.Token()} {
		if _, err := convoy.ReadView(context.Background(), orders.Domain, s, h, id, bad, 10); err == nil {
			t.Fatalf("continuation %q accepted", bad)
		}
	}
}
