package convoy_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/convoy-dev/convoy/handler/convoy"
	"github.com/convoy-dev/convoy/handler/fault"
	"github.com/convoy-dev/convoy/handler/internal/memstore"
	"github.com/convoy-dev/convoy/handler/keyed"
	"github.com/convoy-dev/convoy/handler/orders"
)

// FuzzHistoryCursor: a continuation is either refused as Invalid or names a
// cursor whose own token reads back as the same cursor, within bounds.
func FuzzHistoryCursor(f *testing.F) {
	f.Add(convoy.HistoryCursor{Rows: 1000, Rejected: -1}.Token())
	f.Add(convoy.HistoryCursor{Rows: -1, Rejected: 7}.Token())
	f.Add("aDEuMDEuMQ")
	f.Add("aDEuLTEuLTE")
	f.Add("")
	f.Fuzz(func(t *testing.T, token string) {
		c, err := convoy.ParseHistoryCursor(token)
		if err != nil {
			if fault.CodeOf(err) != fault.Invalid {
				t.Fatalf("%q: %v is not Invalid", token, err)
			}
			return
		}
		if c.Rows < -1 || c.Rejected < -1 || (c.Rows == -1 && c.Rejected == -1) {
			t.Fatalf("%q read as %+v", token, c)
		}
		again, err := convoy.ParseHistoryCursor(c.Token())
		if err != nil || again != c {
			t.Fatalf("%q: %+v re-issued reads %+v, %v", token, c, again, err)
		}
	})
}

func TestHistoryCursorRoundTrip(t *testing.T) {
	for _, c := range []convoy.HistoryCursor{{0, 0}, {-1, 0}, {0, -1}, {1 << 62, 9_223_372_036_854_775_807}} {
		got, err := convoy.ParseHistoryCursor(c.Token())
		if err != nil || got != c {
			t.Fatalf("%+v: %+v, %v", c, got, err)
		}
	}
	for _, bad := range []string{"", "!!", convoy.HistoryCursor{Rows: -1, Rejected: -1}.Token(), convoy.HistoryCursor{Rows: -2, Rejected: 0}.Token()} {
		if _, err := convoy.ParseHistoryCursor(bad); err == nil {
			t.Fatalf("%q accepted", bad)
		}
	}
}

// moreHistory says more follow after every page, as a query page that is
// full may.
type moreHistory struct{ convoy.History }

func (m moreHistory) Rows(ctx context.Context, id, coll string, from int64, limit int) ([]keyed.Row, bool, error) {
	rows, _, err := m.History.Rows(ctx, id, coll, from, limit)
	return rows, true, err
}

func (m moreHistory) Rejections(ctx context.Context, id string, from int64, limit int) ([]convoy.Rejection, bool, error) {
	rs, _, err := m.History.Rejections(ctx, id, from, limit)
	return rs, false, err
}

// TestReadViewStopsAtTheCount: an order whose transactions fill the page
// exactly answers without a continuation, as it did before paging, even
// when the store announces a page more.
func TestReadViewStopsAtTheCount(t *testing.T) {
	ctx := context.Background()
	store := memstore.New()
	msgs := []convoy.Message{create(1)}
	for i := range 4 {
		msgs = append(msgs, add(int64(i+2), fmt.Sprintf("t-%d", i), 1))
	}
	if _, err := convoy.NewProcessor(store, convoy.ProcessorOptions{Domain: orders.Domain}).Process(ctx, "o-1", msgs); err != nil {
		t.Fatal(err)
	}
	cv, err := convoy.ReadView(ctx, orders.Domain, store, moreHistory{store}, "o-1", "", 4)
	v := orders.ViewOf(cv)
	if err != nil || len(v.Transactions) != 4 || v.Continuation != "" {
		t.Fatalf("a page of exactly the order's 4 transactions: %d, continuation %q, %v", len(v.Transactions), v.Continuation, err)
	}
	cv, err = convoy.ReadView(ctx, orders.Domain, store, moreHistory{store}, "o-1", "", 3)
	v = orders.ViewOf(cv)
	if err != nil || len(v.Transactions) != 3 || v.Continuation == "" {
		t.Fatalf("a page of 3 of 4: %d, continuation %q, %v", len(v.Transactions), v.Continuation, err)
	}
}
