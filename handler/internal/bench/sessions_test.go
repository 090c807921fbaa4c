package bench_test

import (
	"encoding/json"
	"fmt"
	"runtime"
	"testing"

	"github.com/convoy-dev/convoy/handler/convoy"
	"github.com/convoy-dev/convoy/handler/internal/memstore"
	"github.com/convoy-dev/convoy/handler/orders"
)

// BenchmarkManySessions (figure 5): the memory the processor holds per
// active order when 10,000 orders are in flight at once (each has received 9
// of its 10 messages, round robin), measured as the live heap with the
// processor minus the live heap once it is dropped (the store stays), with a
// cache large enough for all of them and with the default cache.
func BenchmarkManySessions(b *testing.B) {
	const nOrders, perOrder = 10_000, 10
	for i := range b.N {
		msgs := convoyMessages(b, orderMessages(b, fmt.Sprintf("many%d", i), nOrders*perOrder, orderIDs(fmt.Sprintf("many%d", i), nOrders)))
		byOrder, ids := groupByOrder(msgs)
		var stateJSON int
		retained := func(cacheSize int) uint64 {
			store := memstore.New()
			p := convoy.NewProcessor(store, convoy.ProcessorOptions{Domain: orders.Domain, CacheSize: cacheSize})
			for k := range perOrder - 1 { // round robin: every order in flight together
				for _, id := range ids {
					if _, err := p.Process(b.Context(), id, byOrder[id][k:k+1]); err != nil {
						b.Fatal(err)
					}
				}
			}
			with := liveHeap()
			runtime.KeepAlive(p)
			p = nil
			without := liveHeap()
			stateJSON = 0
			for _, id := range ids { // the work was done, and what its state weighs as JSON
				o, err := store.Load(b.Context(), id)
				if err != nil || o.AppliedSeq != perOrder-1 {
					b.Fatalf("order %s applied seq %d, %v; want %d", id, o.AppliedSeq, err, perOrder-1)
				}
				if _, err := o.Bind(orders.Domain); err != nil {
					b.Fatal(err)
				}
				data, _ := json.Marshal(convoy.View{Order: o}) // the head as OrderStatus shows it, without its history
				stateJSON += len(data)
			}
			runtime.KeepAlive(store)
			return with - min(with, without)
		}
		all := retained(nOrders)
		def := retained(0)
		perOrderBytes := float64(all) / nOrders
		record(figure{name: "sessions_bytes_per_order", value: perOrderBytes, unit: "bytes",
			what: fmt.Sprintf("heap held per in-flight order, %d orders cached (OrderCacheSize=%d)", nOrders, nOrders)})
		ratio("sessions_bytes_vs_state_json", perOrderBytes/(float64(stateJSON)/nOrders),
			"the same / the size of the order's state as OrderStatus JSON", target{})
		record(figure{name: "sessions_heap_default_cache", value: float64(def) / (1 << 20), unit: "MiB",
			what: fmt.Sprintf("heap held with %d orders in flight and the default OrderCacheSize (1000)", nOrders)})
	}
}

func liveHeap() uint64 {
	runtime.GC()
	runtime.GC() // a second cycle frees what the first one's finalizers released
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}
