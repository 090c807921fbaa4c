package ledger_test

import (
	"context"
	"fmt"

	"github.com/convoy-dev/convoy/handler/fault"
	"github.com/convoy-dev/convoy/handler/internal/ledgertest"
	"github.com/convoy-dev/convoy/handler/internal/memstore"
	"github.com/convoy-dev/convoy/handler/ledger"
	"github.com/convoy-dev/convoy/handler/orders"
)

// A publisher turns a ledger into per-order messages, each order's seqs
// contiguous; an invalid ledger is refused whole, with every problem.
func ExamplePublisher() {
	ctx := context.Background()
	sender := &ledgertest.Sender{}
	store := memstore.NewLedgers() // the ledger records and the orders' seqs
	p := ledger.NewPublisher(store, []ledger.Route{{Domain: ledger.Domain{Rules: orders.Domain}, Allocator: store, Sender: sender}}, ledger.PublisherOptions{})
	sum, _ := p.Publish(ctx, []byte(`{"ledgerId": "L-1", "transactions": [
		{"orderId": "o-1", "op": "CreateOrder", "currency": "EUR"},
		{"orderId": "o-2", "op": "CreateOrder", "currency": "USD"},
		{"orderId": "o-1", "op": "AddTransaction", "txId": "t-1", "amount": 1250, "last": true}]}`))
	fmt.Println(sum.Outcome, sum.Messages, "messages for", sum.Orders, "orders")
	for _, m := range sender.Messages() {
		fmt.Printf("%s seq %d (MessageId %s, last %v)\n", m.SessionID, m.Seq, m.MessageID, m.Last)
	}
	_, err := p.Publish(ctx, []byte(`{"ledgerId": "L-2", "transactions": [{"orderId": "o-1", "op": "AddTransaction", "amount": 1.5}]}`))
	for _, problem := range fault.ProblemsOf(err) {
		fmt.Printf("transaction %d: %s %s\n", problem.Index, problem.Field, problem.Reason)
	}
	// Output:
	// published 3 messages for 2 orders
	// o-1 seq 1 (MessageId L-1:0, last false)
	// o-1 seq 2 (MessageId L-1:2, last true)
	// o-2 seq 1 (MessageId L-1:1, last false)
	// transaction 0: amount 1.5 is not an integer number of minor units
	// transaction 0: txId is required
}
