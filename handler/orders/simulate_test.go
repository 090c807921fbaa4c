package orders_test

import (
	"flag"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/convoy-dev/convoy/handler/convoy"
	"github.com/convoy-dev/convoy/handler/internal/convoytest"
	"github.com/convoy-dev/convoy/handler/keyed/keyedtest"
	"github.com/convoy-dev/convoy/handler/orders"
)

// genOrder makes an order's transactions: mostly valid ones, and the
// mistakes the rules reject (a second CreateOrder, a modification of a txId
// that does not exist, a transaction after the delete, totals beyond ±2^53).
func genOrder(rng *rand.Rand, id string) []orders.Transaction {
	n := 1 + rng.IntN(30)
	txs := make([]orders.Transaction, 0, n)
	if rng.IntN(8) != 0 {
		txs = append(txs, orders.Transaction{OrderID: id, Op: orders.CreateOrder, Currency: "EUR"})
	}
	for len(txs) < n {
		amount := rng.Int64N(2001) - 1000
		if rng.IntN(20) == 0 {
			amount = orders.MaxAmount - rng.Int64N(3)
		}
		t := orders.Transaction{OrderID: id, TxID: fmt.Sprintf("t-%d", rng.IntN(12)), Amount: &amount}
		switch r := rng.IntN(20); {
		case r < 12:
			t.Op = orders.AddTransaction
		case r < 18:
			t.Op = orders.ModifyTransaction
		case r < 19:
			t = orders.Transaction{OrderID: id, Op: orders.CreateOrder, Currency: "USD"}
		default:
			t = orders.Transaction{OrderID: id, Op: orders.DeleteOrder}
		}
		txs = append(txs, t)
	}
	return txs
}

// foldOrder is convoytest's fold, written apart from the order rules: the oracle.
func foldOrder(txs []orders.Transaction) orders.State {
	msgs := make([]convoy.Message, len(txs))
	for i, t := range txs {
		msgs[i] = convoy.Message{Seq: int64(i + 1), Command: t}
	}
	e := convoytest.Fold(msgs)
	return orders.State{Status: e.Status, Currency: e.Currency, Total: e.Total(), TxCount: int64(len(e.Txs))}
}

func TestOrderRulesConform(t *testing.T) {
	keyedtest.Conformance(t, orders.Rules{}, genOrder, keyedtest.Options{})
}

// The soak's flags (make soak): seeds from -first on, for -duration.
var (
	soakFirst    = flag.Int64("first", 1, "TestOrderRulesSimulated: the first seed")
	soakDuration = flag.Duration("duration", 0, "TestOrderRulesSimulated: run seeds for this long (make soak)")
)

func TestOrderRulesSimulated(t *testing.T) {
	seeds := 40
	if testing.Short() {
		seeds = 10
	}
	keyedtest.Simulate(t, orders.Rules{}, genOrder, foldOrder, keyedtest.Options{Seeds: seeds, FirstSeed: *soakFirst, Duration: *soakDuration})
}
