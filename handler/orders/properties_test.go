package orders_test

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"reflect"
	"testing"

	"github.com/convoy-dev/convoy/handler/keyed"
	"github.com/convoy-dev/convoy/handler/orders"
)

// memRows is a key's rows as a store holds them: what its decisions wrote.
type memRows map[keyed.RowRef]keyed.Props

func (r memRows) Get(ref keyed.RowRef) (keyed.Props, bool) { p, ok := r[ref]; return p, ok }

func (r memRows) apply(w keyed.Writes) {
	for _, x := range w {
		if x.Insert {
			r[x.Ref] = x.Props
		} else {
			r[x.Ref] = r[x.Ref].Merge(x.Props)
		}
	}
}

// someTransactions returns n transactions of order id: every op, amounts
// and data or none, txIds that repeat (so that adds collide and
// modifications find their transaction or not), a second create, a delete.
func someTransactions(rng *rand.Rand, id string, n int) []orders.Transaction {
	txs := []orders.Transaction{{OrderID: id, Op: orders.CreateOrder, Currency: "EUR", Data: json.RawMessage(`{"customer":"c-1"}`)}}
	for len(txs) < n {
		amount := rng.Int64N(2001) - 1000
		t := orders.Transaction{OrderID: id, TxID: fmt.Sprintf("t-%d", rng.IntN(6)), Amount: &amount}
		if rng.IntN(3) == 0 {
			t.Data = json.RawMessage(fmt.Sprintf(`{"note":"n-%d"}`, rng.IntN(100)))
		}
		switch k := rng.IntN(20); {
		case k < 11:
			t.Op = orders.AddTransaction
		case k < 18:
			t.Op = orders.ModifyTransaction
		case k < 19:
			t = orders.Transaction{OrderID: id, Op: orders.CreateOrder, Currency: "USD"}
		default:
			t = orders.Transaction{OrderID: id, Op: orders.DeleteOrder}
		}
		txs = append(txs, t)
	}
	return txs
}

// TestRulesDeterministicAndRoundTrip: on generated transactions, folded in
// order, deciding the same transaction on the same state and rows twice
// gives the same state, writes and error; every state the fold passes
// through survives EncodeState/DecodeState, and every transaction
// EncodeCommand/DecodeCommand (how a parked one is kept).
func TestRulesDeterministicAndRoundTrip(t *testing.T) {
	r := orders.Rules{}
	added := int64(0)
	for seed := range uint64(20) {
		rng := rand.New(rand.NewPCG(seed, 43))
		id := fmt.Sprintf("o-%d", seed)
		s, err := r.DecodeState(r.Version(), nil)
		if err != nil || s.Status != orders.StatusNew {
			t.Fatalf("seed %d: a new order decodes as %+v, %v", seed, s, err)
		}
		rows := memRows{}
		applied := 0
		for i, tx := range someTransactions(rng, id, 40) {
			if back, err := r.DecodeCommand(id, r.EncodeCommand(tx)); err != nil || !reflect.DeepEqual(back, tx) {
				t.Fatalf("seed %d, #%d: %+v parked reads back as %+v, %v", seed, i, tx, back, err)
			}
			s1, w1, err1 := r.Decide(s, tx, rows)
			s2, w2, err2 := r.Decide(s, tx, rows)
			if !reflect.DeepEqual(s1, s2) || !reflect.DeepEqual(w1, w2) || !reflect.DeepEqual(err1, err2) {
				t.Fatalf("seed %d, #%d %+v: decided twice: %+v %+v %v, then %+v %+v %v", seed, i, tx, s1, w1, err1, s2, w2, err2)
			}
			if err1 != nil {
				if _, rejected := keyed.RejectionReason(err1); !rejected {
					t.Fatalf("seed %d, #%d %+v: %v is not a rejection", seed, i, tx, err1)
				}
				continue
			}
			applied++
			s = s1
			rows.apply(w1)
			back, err := r.DecodeState(r.Version(), r.EncodeState(s))
			if err != nil || !reflect.DeepEqual(back, s) {
				t.Fatalf("seed %d, #%d: state %+v reads back as %+v, %v", seed, i, s, back, err)
			}
		}
		if applied == 0 {
			t.Fatalf("seed %d: nothing applied", seed)
		}
		added += s.TxCount
	}
	if added == 0 {
		t.Fatal("no seed added a transaction")
	}
}
