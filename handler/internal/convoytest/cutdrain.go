package convoytest

import (
	"context"
	"fmt"

	"github.com/convoy-dev/convoy/handler/convoy"
	"github.com/convoy-dev/convoy/handler/fault"
	"github.com/convoy-dev/convoy/handler/internal/memstore"
	"github.com/convoy-dev/convoy/handler/orders"
)

// CutDrain leaves orderID of s as a drain cut short leaves it (issue 33): seqs
// 2..n parked, then seq 1 received and the second commit of its drain
// failing, so that the order's next seq is parked and, every later message
// parked already, no delivery comes to resume it. p must commit to s and
// make one attempt per call; n above 40 makes the drain take more than one
// commit.
func CutDrain(ctx context.Context, s *memstore.Store, p *convoy.Processor, orderID string, n int64) error {
	var tail []convoy.Message
	for seq := int64(2); seq <= n; seq++ {
		amount := int64(1)
		tail = append(tail, convoy.Message{Seq: seq, Command: orders.Transaction{OrderID: orderID, Op: orders.AddTransaction,
			TxID: fmt.Sprintf("t-%d", seq), Amount: &amount}})
	}
	if _, err := p.Process(ctx, orderID, tail); err != nil {
		return err
	}
	commits := 0
	s.Fail = func(op, _ string) error {
		if op == "commit" {
			if commits++; commits == 2 {
				return fault.Errorf(fault.Unavailable, "storage blip")
			}
		}
		return nil
	}
	defer func() { s.Fail = nil }()
	create := convoy.Message{Seq: 1, Command: orders.Transaction{OrderID: orderID, Op: orders.CreateOrder, Currency: "EUR"}}
	if _, err := p.Process(ctx, orderID, []convoy.Message{create}); err == nil {
		return fmt.Errorf("order %q: the drain's second commit did not fail", orderID)
	}
	o, err := s.Load(ctx, orderID)
	if err != nil {
		return err
	}
	if _, cut := o.NextParked(); !cut {
		return fmt.Errorf("order %q: the drain was not cut (appliedSeq %d, %d parked)", orderID, o.AppliedSeq, o.ParkedCount)
	}
	return nil
}
