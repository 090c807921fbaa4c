package convoy_test

import (
	"context"
	"fmt"

	"github.com/convoy-dev/convoy/handler/convoy"
	"github.com/convoy-dev/convoy/handler/internal/memstore"
	"github.com/convoy-dev/convoy/handler/orders"
)

// A processor applies each order's messages in seq order, whatever order
// they arrive in: early ones are parked until the gap fills, duplicates have
// no effect.
func ExampleProcessor() {
	ctx := context.Background()
	p := convoy.NewProcessor(memstore.New(), convoy.ProcessorOptions{Domain: orders.Domain})
	amount := func(n int64) *int64 { return &n }
	deliver := func(seq int64, tx orders.Transaction) {
		tx.OrderID = "o-1"
		res, err := p.Process(ctx, "o-1", []convoy.Message{{Seq: seq, Command: tx}})
		if err != nil {
			panic(err)
		}
		for _, out := range res.Outcomes {
			fmt.Println(out)
		}
	}
	deliver(2, orders.Transaction{Op: orders.AddTransaction, TxID: "t-1", Amount: amount(1250)})
	deliver(1, orders.Transaction{Op: orders.CreateOrder, Currency: "EUR"})
	deliver(2, orders.Transaction{Op: orders.AddTransaction, TxID: "t-1", Amount: amount(1250)})
	deliver(3, orders.Transaction{Op: orders.ModifyTransaction, TxID: "t-9", Amount: amount(1)})
	// Output:
	// seq 2 parked
	// seq 1 applied
	// seq 2 applied (from parked)
	// seq 2 duplicate
	// seq 3 rejected: transaction "t-9" does not exist
}
