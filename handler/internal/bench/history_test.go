package bench_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"runtime"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"

	"github.com/convoy-dev/convoy/handler/convoy"
	"github.com/convoy-dev/convoy/handler/fault"
	"github.com/convoy-dev/convoy/handler/internal/memstore"
	"github.com/convoy-dev/convoy/handler/orders"
	"github.com/convoy-dev/convoy/handler/tablestore"
)

// BenchmarkColdMessageHistory (figure 7, issue 27): what one message costs
// on a cold cache (a restart, a scale-out, a session moving, an eviction)
// after 100 and after 20,000 transactions of its order, in the same run on
// Azurite: Table round trips and entities read (counted by an instrumented
// transport), for an AddTransaction and for a ModifyTransaction of the
// order's first transaction, and the time of each against one plain point
// read of the same partition (Azurite itself slows as a partition grows:
// compare with it, not with a fixed figure). Then steady state (a warm
// cache, one message per call) and the bytes a cached order holds, for an
// order of 20,000 transactions against one of 100 (memstore, 20 orders
// each: the processor's heap, not the store's).
func BenchmarkColdMessageHistory(b *testing.B) {
	const small, large, samples = 100, 20_000, 15
	for i := range b.N {
		type measure struct {
			addTrips, addReads, modTrips, modReads int64
			add, mod, read, load, warm, insert     time.Duration
			steady                                 float64
			allocAdd                               uint64
		}
		m := map[int]measure{}
		for _, n := range []int{small, large} {
			counter := &readCountingTransport{}
			table, name := sharedAzurite(b).NewNamedTable(b, counter)
			batches, err := tablestore.NewBatchesFromConnectionString(sharedAzurite(b).ConnectionString(), &azcore.ClientOptions{Transport: counter})
			if err != nil {
				b.Fatal(err)
			}
			store := tablestore.New(table, batches.Table(name))
			id := fmt.Sprintf("hist%d-%d", i, n)
			seq := buildOrder(b, store, id, n)
			var x measure
			// One message on a cold cache: a new processor each time.
			var adds, mods, reads, loads, warms, inserts []time.Duration
			for k := range samples {
				p := convoy.NewProcessor(store, convoy.ProcessorOptions{Domain: orders.Domain})
				counter.reset()
				var before, after runtime.MemStats
				runtime.ReadMemStats(&before)
				start := time.Now()
				process(b, p, id, addMsg(id, seq, fmt.Sprintf("cold-%d", k), 1))
				adds = append(adds, time.Since(start))
				runtime.ReadMemStats(&after)
				seq++
				if k == 0 {
					x.addTrips, x.addReads, x.allocAdd = counter.trips.Load(), counter.reads.Load(), after.TotalAlloc-before.TotalAlloc
				}
				p = convoy.NewProcessor(store, convoy.ProcessorOptions{Domain: orders.Domain})
				counter.reset()
				start = time.Now()
				process(b, p, id, modifyMsg(id, seq, "t-0", int64(k)))
				mods = append(mods, time.Since(start))
				seq++
				if k == 0 {
					x.modTrips, x.modReads = counter.trips.Load(), counter.reads.Load()
				}
				start = time.Now()
				if _, err := table.GetEntity(b.Context(), id, "h", nil); err != nil {
					b.Fatal(err)
				}
				reads = append(reads, time.Since(start))
				start = time.Now()
				if _, err := store.Load(b.Context(), id); err != nil {
					b.Fatal(err)
				}
				loads = append(loads, time.Since(start))
				// A plain write on the same partition: one entity inserted.
				row, _ := json.Marshal(map[string]any{"PartitionKey": id, "RowKey": fmt.Sprintf("z:bench-%d", k), "N": k})
				start = time.Now()
				if _, err := table.AddEntity(b.Context(), row, nil); err != nil {
					b.Fatal(err)
				}
				inserts = append(inserts, time.Since(start))
			}
			x.insert = medianOf(inserts)
			x.add, x.mod, x.read, x.load = medianOf(adds), medianOf(mods), medianOf(reads), medianOf(loads)
			// Steady state: a warm cache, one message per call.
			p := convoy.NewProcessor(store, convoy.ProcessorOptions{Domain: orders.Domain})
			process(b, p, id, addMsg(id, seq, "warm-0", 1))
			seq++
			counter.reset()
			const steady = 100
			for k := range steady {
				start := time.Now()
				process(b, p, id, addMsg(id, seq, fmt.Sprintf("warm-%d", k+1), 1))
				warms = append(warms, time.Since(start))
				seq++
			}
			x.steady = float64(counter.trips.Load()) / steady
			x.warm = medianOf(warms)
			m[n] = x
		}
		s, l := m[small], m[large]
		for _, c := range []struct {
			name         string
			trips, reads int64
		}{
			{"cold_add_100", s.addTrips, s.addReads}, {"cold_add_20000", l.addTrips, l.addReads},
			{"cold_modify_100", s.modTrips, s.modReads}, {"cold_modify_20000", l.modTrips, l.modReads},
		} {
			record(figure{name: c.name + "_roundtrips", value: float64(c.trips), unit: "trips",
				what: "Table round trips of one message on a cold cache (" + c.name + " transactions before)", target: atMost(3)})
			record(figure{name: c.name + "_entities_read", value: float64(c.reads), unit: "entities",
				what: "entities read by the same message", target: atMost(2)})
		}
		ratio("cold_add_trips_20000_vs_100", float64(l.addTrips)/float64(s.addTrips),
			"round trips of a cold AddTransaction after 20,000 transactions / after 100 (the same: 1.00)", atMost(1))
		ratio("cold_modify_trips_20000_vs_100", float64(l.modTrips)/float64(s.modTrips),
			"round trips of a cold ModifyTransaction after 20,000 transactions / after 100", atMost(1))
		for _, c := range []struct {
			n    int
			x    measure
			name string
		}{{small, s, "100"}, {large, l, "20000"}} {
			ratio("cold_add_vs_point_read_"+c.name, float64(c.x.add)/float64(c.x.read),
				fmt.Sprintf("a cold AddTransaction after %d transactions (median %s) / one point read of the same partition (median %s)",
					c.n, c.x.add.Round(10*time.Microsecond), c.x.read.Round(10*time.Microsecond)), target{})
			ratio("cold_modify_vs_point_read_"+c.name, float64(c.x.mod)/float64(c.x.read),
				fmt.Sprintf("a cold ModifyTransaction of the first transaction after %d (median %s) / the same point read",
					c.n, c.x.mod.Round(10*time.Microsecond)), target{})
			ratio("cold_load_vs_point_read_"+c.name, float64(c.x.load)/float64(c.x.read),
				fmt.Sprintf("of which the load, the head and parked rows in one query (median %s) / the same point read", c.x.load.Round(10*time.Microsecond)), target{})
			ratio("warm_add_vs_point_read_"+c.name, float64(c.x.warm)/float64(c.x.read),
				fmt.Sprintf("and the commit: a warm AddTransaction (median %s) / the same point read", c.x.warm.Round(10*time.Microsecond)), target{})
			ratio("warm_add_vs_plain_insert_"+c.name, float64(c.x.warm)/float64(c.x.insert),
				fmt.Sprintf("the same commit / one plain entity insert on the same partition (median %s)", c.x.insert.Round(10*time.Microsecond)), target{})
			record(figure{name: "steady_roundtrips_" + c.name, value: c.x.steady, unit: "trips/message",
				what: fmt.Sprintf("round trips per message in steady state (warm cache, single mode) after %d transactions", c.n), target: atMost(1)})
		}
		ratio("cold_add_time_20000_vs_100", (float64(l.add)/float64(l.read))/(float64(s.add)/float64(s.read)),
			"cold AddTransaction against the point read, after 20,000 / after 100 (history-independent: about 1)", target{})
		ratio("cold_add_alloc_20000_vs_100", float64(l.allocAdd)/float64(s.allocAdd),
			fmt.Sprintf("bytes allocated by one cold AddTransaction after 20,000 (%d) / after 100 (%d)", l.allocAdd, s.allocAdd), atMost(2))
		bs, bl := cachedBytes(b, small), cachedBytes(b, large)
		record(figure{name: "cached_bytes_order_100", value: bs, unit: "bytes", what: "heap a processor holds per cached order of 100 transactions"})
		record(figure{name: "cached_bytes_order_20000", value: bl, unit: "bytes", what: "the same, order of 20,000 transactions"})
		ratio("cached_bytes_20000_vs_100", bl/bs, "cached bytes of an order of 20,000 transactions / of 100", atMost(2))
	}
}

// buildOrder commits an order of n transactions (t-0 … amount 1) and
// returns the next seq.
func buildOrder(b testing.TB, store convoy.Store, id string, n int) int64 {
	b.Helper()
	// Setup: a call of 1,000 messages is about 21 commits, which Azurite
	// makes slower as the partition grows; the default budget (20 s) is an
	// invocation's, not the setup's.
	p := convoy.NewProcessor(store, convoy.ProcessorOptions{Domain: orders.Domain, Retry: fault.RetryPolicy{MaxElapsed: 5 * time.Minute}})
	msgs := []convoy.Message{{Seq: 1, MessageID: "L:0", Command: orders.Transaction{OrderID: id, Op: orders.CreateOrder, Currency: "EUR"}}}
	for k := range n {
		msgs = append(msgs, addMsg(id, int64(k+2), fmt.Sprintf("t-%d", k), 1))
	}
	for k := 0; k < len(msgs); k += 1000 {
		if _, err := p.Process(b.Context(), id, msgs[k:min(k+1000, len(msgs))]); err != nil {
			b.Fatal(err)
		}
	}
	return int64(n + 2)
}

func addMsg(id string, seq int64, txID string, amount int64) convoy.Message {
	return convoy.Message{Seq: seq, MessageID: fmt.Sprintf("L:%d", seq), Command: orders.Transaction{OrderID: id, Op: orders.AddTransaction, TxID: txID, Amount: &amount}}
}

func modifyMsg(id string, seq int64, txID string, amount int64) convoy.Message {
	m := addMsg(id, seq, txID, amount)
	t := m.Command.(orders.Transaction)
	t.Op = orders.ModifyTransaction
	m.Command = t
	return m
}

func process(b *testing.B, p *convoy.Processor, id string, m convoy.Message) {
	b.Helper()
	res, err := p.Process(b.Context(), id, []convoy.Message{m})
	if err != nil || len(res.Outcomes) != 1 || res.Outcomes[0].Disposition != convoy.Applied {
		b.Fatalf("order %s seq %d: %+v, %v", id, m.Seq, res, err)
	}
}

// cachedBytes is the heap a processor holds per cached order of n
// transactions: 20 orders built in memstore, each then given one message
// by a fresh processor (a cold load, then cached), measured as the live
// heap with the processor minus without it.
func cachedBytes(b *testing.B, n int) float64 {
	const nOrders = 20
	store := memstore.New()
	ctx := context.Background()
	var seqs []int64
	for k := range nOrders {
		seqs = append(seqs, buildOrder(b, store, fmt.Sprintf("bytes-%d-%d", n, k), n))
	}
	base := liveHeap()
	p := convoy.NewProcessor(store, convoy.ProcessorOptions{Domain: orders.Domain, CacheSize: nOrders})
	for k := range nOrders {
		id := fmt.Sprintf("bytes-%d-%d", n, k)
		if _, err := p.Process(ctx, id, []convoy.Message{addMsg(id, seqs[k], "cached", 1)}); err != nil {
			b.Fatal(err)
		}
	}
	with := liveHeap()
	runtime.KeepAlive(p)
	runtime.KeepAlive(store)
	return float64(with-min(with, base)) / nOrders
}

func medianOf(ds []time.Duration) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[len(s)/2]
}

// readCountingTransport counts round trips and the entities the answers
// hold (a query's "value" array, or one entity read by its keys).
type readCountingTransport struct{ trips, reads atomic.Int64 }

func (c *readCountingTransport) reset() { c.trips.Store(0); c.reads.Store(0) }

func (c *readCountingTransport) Do(r *http.Request) (*http.Response, error) {
	c.trips.Add(1)
	resp, err := http.DefaultClient.Do(r)
	if err != nil || r.Method != http.MethodGet || resp.StatusCode != http.StatusOK {
		return resp, err
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		return nil, err
	}
	resp.Body = io.NopCloser(bytes.NewReader(body))
	var page struct {
		Value        []json.RawMessage `json:"value"`
		PartitionKey *string           `json:"PartitionKey"`
	}
	if json.Unmarshal(body, &page) == nil {
		switch {
		case page.Value != nil:
			c.reads.Add(int64(len(page.Value)))
		case page.PartitionKey != nil:
			c.reads.Add(1)
		}
	}
	return resp, nil
}
