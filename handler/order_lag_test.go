package handler_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/convoy-dev/convoy/handler"
	"github.com/convoy-dev/convoy/handler/convoy"
	"github.com/convoy-dev/convoy/handler/internal/memstore"
	"github.com/convoy-dev/convoy/handler/orders"
)

// publishedFunc adapts a function to convoy.Allocations.
type publishedFunc func(ctx context.Context, orderID string, seq int64) (convoy.Published, error)

func (f publishedFunc) Published(ctx context.Context, orderID string, seq int64) (convoy.Published, error) {
	return f(ctx, orderID, seq)
}

func (f publishedFunc) ActiveEntry(context.Context, string) (convoy.ActiveOrder, bool, error) {
	return convoy.ActiveOrder{}, false, nil
}

// TestOrderStatusLag: OrderStatus's lag, from the head and what the ledgers
// table says was published (asked for the first unapplied seq); without a
// ledgers table, or when it cannot be read, the lag says so instead of
// guessing, and the answer is still the order's.
func TestOrderStatusLag(t *testing.T) {
	store := memstore.New()
	p := convoy.NewProcessor(store, convoy.ProcessorOptions{Domain: orders.Domain})
	create := convoy.Message{Seq: 1, Command: orders.Transaction{OrderID: "o-1", Op: orders.CreateOrder, Currency: "EUR"}}
	if _, err := p.Process(context.Background(), "o-1", []convoy.Message{create}); err != nil {
		t.Fatal(err)
	}
	var asked int64
	for _, c := range []struct {
		name  string
		alloc convoy.Allocations
		check func(lag map[string]any) bool
	}{
		{"no ledgers table", nil, func(lag map[string]any) bool {
			u, _ := lag["unavailable"].(string)
			return strings.Contains(u, "not configured") && lag["window"] == 60.0 && lag["status"] == nil
		}},
		{"ledgers table failing", publishedFunc(func(context.Context, string, int64) (convoy.Published, error) {
			return convoy.Published{}, errors.New("storage is down")
		}), func(lag map[string]any) bool {
			u, _ := lag["unavailable"].(string)
			return strings.Contains(u, "storage is down") && lag["status"] == nil
		}},
		{"three waiting for an hour", publishedFunc(func(_ context.Context, _ string, seq int64) (convoy.Published, error) {
			asked = seq
			return convoy.Published{LastSeq: 4, SeqAllocatedAt: time.Now().Add(-time.Hour)}, nil
		}), func(lag map[string]any) bool {
			age, _ := lag["headAgeSeconds"].(float64)
			// The head moved just now (seq 1 applied): catching up, not stalled.
			return asked == 2 && lag["backlog"] == 3.0 && age > 3590 && age < 3700 && lag["status"] == "catching-up" && lag["window"] == 60.0
		}},
	} {
		f := &fixture{}
		f.srv = handler.New(handler.OrdersDeps(handler.Deps{LagWindow: time.Minute}, handler.Domain{Keys: store, Allocations: c.alloc}))
		code, v := f.do(t, "GET", "/api/orders/o-1", nil)
		lag, _ := v["lag"].(map[string]any)
		if code != 200 || v["appliedSeq"] != 1.0 || lag == nil || !c.check(lag) {
			t.Errorf("%s: %d %v", c.name, code, v)
		}
	}
}
