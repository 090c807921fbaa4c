package convoy

import (
	"context"
	"fmt"
	"strings"
	"testing"
)

// nullStore accepts every commit and holds nothing: enough for what the
// processor keeps in its cache.
type nullStore struct{}

func (nullStore) Load(_ context.Context, id string) (*Order, error) { return NewOrder(id), nil }
func (nullStore) Tx(context.Context, string, string) (TxRecord, bool, error) {
	return TxRecord{}, false, nil
}
func (nullStore) Commit(context.Context, *Order, int64, *Change) error { return nil }
func (nullStore) Parked(context.Context, string, int64, int) ([]Message, bool, error) {
	return nil, false, nil
}
func (nullStore) IsParked(context.Context, string, int64) (bool, error) { return false, nil }

// TestCachedOrderBounded (issue 27): however many transactions an order
// has had, the order the cache holds between calls knows at most maxKnown
// of them and holds no history; its figures stay exact.
func TestCachedOrderBounded(t *testing.T) {
	p := NewProcessor(nullStore{}, ProcessorOptions{})
	ctx := context.Background()
	seq := int64(1)
	if _, err := p.Process(ctx, "o-1", []Message{{Seq: 1, Tx: Transaction{OrderID: "o-1", Op: CreateOrder, Currency: "EUR"}}}); err != nil {
		t.Fatal(err)
	}
	var want int64
	for call := range 50 {
		var msgs []Message
		for range 100 {
			seq++
			amount := seq
			want += amount
			msgs = append(msgs, Message{Seq: seq, Tx: Transaction{OrderID: "o-1", Op: AddTransaction, TxID: fmt.Sprintf("t-%d", seq), Amount: &amount}})
		}
		if _, err := p.Process(ctx, "o-1", msgs); err != nil {
			t.Fatal(err)
		}
		o := p.cache.get("o-1")
		if o == nil {
			t.Fatalf("call %d: the order is not cached", call)
		}
		if len(o.known) > maxKnown || o.present > maxKnown {
			t.Fatalf("call %d: the cached order knows %d transactions (%d present), more than %d", call, len(o.known), o.present, maxKnown)
		}
		if o.TxCount != seq-1 || o.TotalAmount != want {
			t.Fatalf("call %d: %d transactions totalling %d, want %d totalling %d", call, o.TxCount, o.TotalAmount, seq-1, want)
		}
	}
}

// TestCacheBoundedInBytes (issue 33): orders whose parked windows are full
// are large; the cache holds no more of them than CacheBytes, by their
// sizes, and counts what it holds exactly.
func TestCacheBoundedInBytes(t *testing.T) {
	const limit = 8 << 20
	p := NewProcessor(nullStore{}, ProcessorOptions{CacheBytes: limit})
	ctx := context.Background()
	data := []byte(`"` + strings.Repeat("x", 4<<10) + `"`)
	for i := range 40 {
		id := fmt.Sprintf("o-%d", i)
		var msgs []Message
		for seq := int64(3); seq < 3+ParkedPageSize; seq++ {
			amount := seq
			msgs = append(msgs, Message{Seq: seq, Tx: Transaction{OrderID: id, Op: AddTransaction, TxID: fmt.Sprint("t-", seq), Amount: &amount, Data: data}})
		}
		if _, err := p.Process(ctx, id, msgs); err != nil {
			t.Fatal(err)
		}
		if o := p.cache.get(id); o == nil || len(o.Parked) != ParkedPageSize {
			t.Fatalf("order %d: not cached with its window of %d", i, ParkedPageSize)
		}
		var held int64
		for _, e := range p.cache.byID {
			held += e.order.Size()
		}
		if held > limit || held != p.cache.bytes {
			t.Fatalf("after %d orders of %d B: the cache holds %d B (counted %d), more than %d", i+1, cachedSize(p, id), held, p.cache.bytes, limit)
		}
	}
}

// cachedSize is the size of the order id as cached.
func cachedSize(p *Processor, id string) int64 { return p.cache.get(id).Size() }
