// Package convoytest is test support, never used by the product: the folds
// of an order's messages and of an account's commands, each written
// independently of its domain's rules (orders.Rules, accounts.Rules): the
// oracles that the property tests, the end-to-end suite and the demo
// compare every order and account with.
package convoytest

import (
	"fmt"
	"slices"

	"github.com/convoy-dev/convoy/handler/convoy"
	"github.com/convoy-dev/convoy/handler/orders"
)

// Tx is a transaction of an order as the fold sees it (data is not folded:
// its rules have their own tests).
type Tx struct {
	TxID   string
	Amount int64
}

// Expected is an order's state after its messages, in seq order.
type Expected struct {
	Status     orders.Status
	Currency   string
	Complete   bool
	AppliedSeq int64
	Txs        []Tx
	Rejected   []int64 // seqs
}

// Total is the sum of the transactions' amounts.
func (e Expected) Total() int64 {
	var sum int64
	for _, t := range e.Txs {
		sum += t.Amount
	}
	return sum
}

// maxTotal: |total| must stay within 2^53 − 1 (docs/contract.md).
const maxTotal = 1<<53 - 1

// Fold applies msgs, which must carry seqs 1..n in order, by the contract's
// table, starting from status new.
func Fold(msgs []convoy.Message) Expected {
	return FoldSkipping(msgs, nil)
}

// FoldSkipping is Fold with the seqs in skipped consumed by an operator
// instead: rejected with no effect (not even a "last" they carry).
func FoldSkipping(msgs []convoy.Message, skipped map[int64]bool) Expected {
	e := Expected{Status: orders.StatusNew}
	for _, m := range msgs {
		if skipped[m.Seq] {
			e.Rejected, e.AppliedSeq = append(e.Rejected, m.Seq), m.Seq
			continue
		}
		t, ok := orders.CommandOf("", m), true
		pos := slices.IndexFunc(e.Txs, func(x Tx) bool { return x.TxID == t.TxID })
		switch {
		case e.Complete:
			ok = false
		case t.Op == orders.CreateOrder:
			ok = e.Status == orders.StatusNew
			if ok {
				e.Status, e.Currency = orders.StatusOpen, t.Currency
			}
		case e.Status != orders.StatusOpen:
			ok = false
		case t.Op == orders.AddTransaction:
			ok = pos < 0 && withinTotal(e.Txs, -1, *t.Amount)
			if ok {
				e.Txs = append(e.Txs, Tx{TxID: t.TxID, Amount: *t.Amount})
			}
		case t.Op == orders.ModifyTransaction:
			ok = pos >= 0 && withinTotal(e.Txs, pos, *t.Amount)
			if ok {
				e.Txs[pos].Amount = *t.Amount
			}
		case t.Op == orders.DeleteOrder:
			e.Status = orders.StatusDeleted
		}
		if !ok {
			e.Rejected = append(e.Rejected, m.Seq)
		}
		if m.Last {
			e.Complete = true
		}
		e.AppliedSeq = m.Seq
	}
	return e
}

// withinTotal: the total of txs, with the amount at pos replaced by amount
// (or amount added when pos < 0), stays within ±(2^53 − 1).
func withinTotal(txs []Tx, pos int, amount int64) bool {
	sum := amount
	for i, x := range txs {
		if i != pos {
			sum += x.Amount
		}
	}
	return sum >= -maxTotal && sum <= maxTotal
}

// Observe is what an order's stored or shown state says, in Expected's terms.
func Observe(v convoy.View) Expected { return ObserveView(orders.ViewOf(v)) }

// ObserveView is Observe of an order's view as OrderStatus answers it.
func ObserveView(v orders.View) Expected {
	e := Expected{Status: v.Status, Currency: v.Currency, Complete: v.Complete, AppliedSeq: v.AppliedSeq}
	for _, t := range v.Transactions {
		e.Txs = append(e.Txs, Tx{TxID: t.TxID, Amount: t.Amount})
	}
	for _, r := range v.Rejected {
		e.Rejected = append(e.Rejected, r.Seq)
	}
	return e
}

// Compare returns how an order's view differs from its fold ("" if it does
// not); an order with parked messages never matches.
func Compare(got convoy.View, want Expected) string { return CompareView(orders.ViewOf(got), want) }

// CompareView is Compare of an order's view as OrderStatus answers it.
func CompareView(got orders.View, want Expected) string {
	g := ObserveView(got)
	switch {
	case got.Parked != 0:
		return fmt.Sprintf("%d message(s) still parked", got.Parked)
	case got.Total != want.Total():
		return fmt.Sprintf("total %d, want %d", got.Total, want.Total())
	case g.Status != want.Status || g.Currency != want.Currency || g.Complete != want.Complete || g.AppliedSeq != want.AppliedSeq:
		return fmt.Sprintf("status %s %s complete %v appliedSeq %d, want %s %s complete %v appliedSeq %d",
			g.Status, g.Currency, g.Complete, g.AppliedSeq, want.Status, want.Currency, want.Complete, want.AppliedSeq)
	case !slices.Equal(g.Txs, want.Txs):
		return fmt.Sprintf("transactions %v, want %v", g.Txs, want.Txs)
	case !slices.Equal(g.Rejected, want.Rejected):
		return fmt.Sprintf("rejected seqs %v, want %v", g.Rejected, want.Rejected)
	}
	return ""
}
