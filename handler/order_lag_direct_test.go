package handler_test

import (
	"context"
	"testing"
	"time"

	"github.com/convoy-dev/convoy/handler"
	"github.com/convoy-dev/convoy/handler/convoy"
	"github.com/convoy-dev/convoy/handler/internal/memstore"
	"github.com/convoy-dev/convoy/handler/orders"
)

// TestOrderStatusLagOfOrderFedDirectly: an order nothing was published to
// (its messages sent straight to the orders queue) whose seq 2 is
// dead-lettered with nothing parked behind it, as an AutoReplay run noted
// it: OrderStatus tells it blocked with seq 2 waiting, as the summary does,
// from what the processor noted in the order's active entry.
func TestOrderStatusLagOfOrderFedDirectly(t *testing.T) {
	ctx := context.Background()
	store := memstore.New()
	ledgers := memstore.NewLedgers()
	p := convoy.NewProcessor(store, convoy.ProcessorOptions{Domain: orders.Domain, Active: ledgers})
	create := convoy.Message{Seq: 1, Command: orders.Transaction{OrderID: "d-1", Op: orders.CreateOrder, Currency: "EUR"}, EnqueuedAt: time.Now()}
	if _, err := p.Process(ctx, "d-1", []convoy.Message{create}); err != nil {
		t.Fatal(err)
	}
	if err := ledgers.NoteDeadLettered(ctx, "d-1", 2); err != nil {
		t.Fatal(err)
	}
	f := &fixture{}
	f.srv = handler.New(handler.OrdersDeps(handler.Deps{LagWindow: time.Minute}, handler.Domain{Keys: store, Allocations: ledgers}))
	code, v := f.do(t, "GET", "/api/orders/d-1", nil)
	lag, _ := v["lag"].(map[string]any)
	if code != 200 || lag == nil || lag["status"] != "blocked" || lag["backlog"] != 1.0 {
		t.Errorf("%d %v; want lag blocked, backlog 1", code, v)
	}
}
