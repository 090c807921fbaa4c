package bench_test

import (
	"context"
	"encoding/json"
	"fmt"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/data/aztables"

	"github.com/convoy-dev/convoy/handler/convoy"
	"github.com/convoy-dev/convoy/handler/internal/memstore"
	"github.com/convoy-dev/convoy/handler/keyed"
	"github.com/convoy-dev/convoy/handler/orders"
	"github.com/convoy-dev/convoy/handler/tablestore"
)

// BenchmarkParkedTail (issue 33, item 4): what an operator's read of an
// order (OrderStatus) and a skip of its missing seq (SkipGap) cost when the
// order has 200,000 messages parked, against one with 10 parked, in the
// same run: time (median) and bytes allocated (median), each a ratio of the
// large to the small, and store round trips. Every parked message carries
// 4 KiB of data.
//
// 200,000 parked are measured on memstore, built through the processor (the
// parks of a ledger arriving behind its gap), each store call counted as
// the Table round trip it is in tablestore: Azurite's entity-group
// transactions slow with the partition's size (a plain one-row transaction
// on a partition of 10,000 parked rows takes 1.9 times what it takes on one
// of 10), so that inserting 200,000 rows into one partition did not end in
// six minutes. The same is measured on Azurite with 20,000 parked (rows past
// the first block inserted directly, 100 a transaction, and the head's
// count set to match), beside the time of a plain transaction of as many
// operations as the skip's commit on each partition: Azurite's own slowing,
// which the Azurite time ratios include (they have no target; round trips
// and allocations do).
//
// The orders: seq 1 applied, then blocks of 10 parked messages each behind
// one missing seq (2, 13, 24, …). The large order has as many blocks as
// make its tail; its k-th sample skips its k-th missing seq (on a fresh
// processor: a cold cache, as an operator's call finds it), and the small
// order of that sample has had its first k missing seqs skipped already and
// has one block left (10 parked): both then have the same history (the view
// reads its first page) and each skip does the same work: load, skip, drain
// 10, commit, and read the view the answer shows.
func BenchmarkParkedTail(b *testing.B) {
	data := json.RawMessage(`"` + strings.Repeat("d", 4<<10-2) + `"`)
	for i := range b.N {
		// memstore, 200,000 parked.
		mem := &countingMemstore{Store: memstore.New()}
		measureParked(b, parkedSetup{name: "", where: "memstore", large: 200_000, store: mem, data: data,
			prefix: fmt.Sprintf("pm%d", i), reset: mem.reset, trips: mem.calls.Load,
			fill: func(id string, from, blocks int) {
				p := convoy.NewProcessor(mem, convoy.ProcessorOptions{Domain: orders.Domain})
				var msgs []convoy.Message
				flush := func() {
					if _, err := p.Process(b.Context(), id, msgs); err != nil {
						b.Fatal(err)
					}
					msgs = msgs[:0]
				}
				for k := from; k < blocks; k++ {
					msgs = append(msgs, parkedBlock(id, k, data)...)
					if len(msgs) >= 1000 {
						flush()
					}
				}
				if len(msgs) > 0 {
					flush()
				}
			}})
		// Azurite, 20,000 parked.
		az := ownAzurite(b)
		counter := &readCountingTransport{}
		table, name := az.NewNamedTable(b, counter)
		batches, err := tablestore.NewBatchesFromConnectionString(az.ConnectionString(), &azcore.ClientOptions{Transport: counter})
		if err != nil {
			b.Fatal(err)
		}
		store := tablestore.New(table, batches.Table(name))
		ctx := b.Context()
		measureParked(b, parkedSetup{name: "_azurite", where: "Azurite", large: 20_000, store: store, data: data,
			prefix: fmt.Sprintf("pa%d", i), reset: counter.reset, trips: counter.trips.Load,
			fill: func(id string, from, blocks int) {
				var actions []aztables.TransactionAction
				var last int64
				flush := func() {
					if _, err := table.SubmitTransaction(ctx, actions, nil); err != nil {
						b.Fatal(err)
					}
					actions = actions[:0]
				}
				for k := from; k < blocks; k++ {
					for _, m := range parkedBlock(id, k, data) {
						actions = append(actions, aztables.TransactionAction{ActionType: aztables.TransactionTypeAdd, Entity: parkedRow(b, m)})
						last = m.Seq
						if len(actions) == 100 {
							flush()
						}
					}
				}
				if len(actions) > 0 {
					flush()
				}
				head, _ := json.Marshal(map[string]any{"PartitionKey": id, "RowKey": "h", "Parked": int32(blocks * 10),
					"ParkedLast": fmt.Sprint(last), "ParkedLast@odata.type": "Edm.Int64"})
				if _, err := table.UpdateEntity(ctx, head, &aztables.UpdateEntityOptions{UpdateMode: aztables.UpdateModeMerge}); err != nil {
					b.Fatal(err)
				}
			},
			floor: func(id string, k int) time.Duration {
				// As many operations as the skip's commit: its marker, head,
				// rejection, 10 parked rows deleted, 10 transactions of 2 rows.
				var actions []aztables.TransactionAction
				for j := range 33 {
					row, _ := json.Marshal(map[string]any{"PartitionKey": id, "RowKey": fmt.Sprintf("z:bench-%d-%02d", k, j), "N": k})
					actions = append(actions, aztables.TransactionAction{ActionType: aztables.TransactionTypeAdd, Entity: row})
				}
				start := time.Now()
				if _, err := table.SubmitTransaction(ctx, actions, nil); err != nil {
					b.Fatal(err)
				}
				return time.Since(start)
			}})
	}
}

// parkedSetup is one store BenchmarkParkedTail measures.
type parkedSetup struct {
	name, where string // of its figures: a suffix, and the store in words
	large       int    // parked messages of the large order
	store       convoy.Store
	data        json.RawMessage
	prefix      string // of its order ids
	reset       func()
	trips       func() int64
	// fill parks blocks from to blocks-1 of order id (the head counting
	// them all).
	fill func(id string, from, blocks int)
	// floor, if set, is the time of a plain transaction on order id's
	// partition, of as many operations as the skip's commit.
	floor func(id string, k int) time.Duration
}

func measureParked(b *testing.B, s parkedSetup) {
	const small, samples, block = 10, 7, 10
	ctx := b.Context()
	h := s.store.(convoy.History)
	// build makes order id with blocks blocks parked, the first skipped of
	// them skipped.
	build := func(id string, blocks, skipped int) {
		p := convoy.NewProcessor(s.store, convoy.ProcessorOptions{Domain: orders.Domain})
		msgs := []convoy.Message{{Seq: 1, MessageID: "L:1", Command: orders.Transaction{OrderID: id, Op: orders.CreateOrder, Currency: "EUR"}}}
		for k := range min(blocks, skipped+1) {
			msgs = append(msgs, parkedBlock(id, k, s.data)...)
		}
		if _, err := p.Process(ctx, id, msgs); err != nil {
			b.Fatal(err)
		}
		for k := range skipped {
			if _, _, err := p.Skip(ctx, id, int64(2+11*k)); err != nil {
				b.Fatal(err)
			}
		}
		if blocks > skipped+1 {
			start := time.Now()
			s.fill(id, skipped+1, blocks)
			b.Logf("%s: order %s: %d more parked in %s", s.where, id, (blocks-skipped-1)*block, time.Since(start).Round(time.Second))
		}
	}
	type measure struct {
		ids                    []string
		status, skip, plain    []time.Duration
		statusAlloc, skipAlloc []time.Duration // bytes, as durations for medianOf
		statusTrips, skipTrips int64
	}
	m := map[int]*measure{small: {}, s.large: {}}
	for k := range samples {
		id := fmt.Sprintf("%s-%d-%d", s.prefix, small, k)
		build(id, k+1, k)
		m[small].ids = append(m[small].ids, id)
	}
	id := fmt.Sprintf("%s-%d", s.prefix, s.large)
	build(id, s.large/block, 0)
	m[s.large].ids = []string{id}
	// Interleaved, so that both sizes meet the same machine.
	for k := range samples {
		for _, n := range []int{small, s.large} {
			x, id := m[n], m[n].ids[min(k, len(m[n].ids)-1)]
			large := n / s.large // 1 for the large order
			runtime.GC()         // the store's own heap (memstore holds the tail) is not the operation's
			s.reset()
			allocs, start := allocated(), time.Now()
			cv, err := convoy.ReadView(ctx, orders.Domain, s.store, h, id, "", 0)
			v := orders.ViewOf(cv)
			x.status = append(x.status, time.Since(start))
			x.statusAlloc = append(x.statusAlloc, time.Duration(allocated()-allocs))
			if err != nil || v.Parked != n-k*block*large || v.MissingSeq != int64(2+k*(block+1)) {
				b.Fatalf("order %s: status %+v, %v", id, v, err)
			}
			if k == 0 {
				x.statusTrips = s.trips()
			}
			p := convoy.NewProcessor(s.store, convoy.ProcessorOptions{Domain: orders.Domain}) // cold, as an operator's call finds it
			sctx, cancel := context.WithTimeout(ctx, 5*time.Second)                           // SkipDeadline
			runtime.GC()
			s.reset()
			allocs, start = allocated(), time.Now()
			res, _, err := p.Skip(sctx, id, v.MissingSeq)
			x.skip = append(x.skip, time.Since(start))
			x.skipAlloc = append(x.skipAlloc, time.Duration(allocated()-allocs))
			cancel()
			if err != nil || res.AppliedSeq != v.MissingSeq+block || res.Parked != n-(k*large+1)*block {
				b.Fatalf("order %s: skip of %d: %+v, %v", id, v.MissingSeq, res, err)
			}
			if k == 0 {
				x.skipTrips = s.trips()
			}
			runtime.KeepAlive(p)
			if s.floor != nil {
				x.plain = append(x.plain, s.floor(id, k))
			}
		}
	}
	sm, lg := m[small], m[s.large]
	if s.floor != nil {
		ps, pl := medianOf(sm.plain), medianOf(lg.plain)
		ratio(fmt.Sprintf("plain_transaction_time_%d_vs_10_parked%s", s.large, s.name), float64(pl)/float64(ps),
			fmt.Sprintf("the floor: one plain entity-group transaction of 33 inserts (the skip's commit has 33 operations) on the partition of %d parked (median %s) / of 10 parked (median %s), %s",
				s.large, pl.Round(10*time.Microsecond), ps.Round(10*time.Microsecond), s.where), target{})
	}
	for _, c := range []struct {
		name, what string
		s, l       []time.Duration
		sa, la     []time.Duration
		trips      [2]int64
	}{
		{"orderstatus", "OrderStatus (the head, its first parked messages, a page of history)", sm.status, lg.status, sm.statusAlloc, lg.statusAlloc,
			[2]int64{sm.statusTrips, lg.statusTrips}},
		{"skipgap", "SkipGap on a cold processor (load, skip, drain 10, commit, the answer's view)", sm.skip, lg.skip, sm.skipAlloc, lg.skipAlloc,
			[2]int64{sm.skipTrips, lg.skipTrips}},
	} {
		name := fmt.Sprintf("%s_%%s_%d_vs_10_parked%s", c.name, s.large, s.name)
		ts, tl := medianOf(c.s), medianOf(c.l)
		t := atMost(2)
		if s.floor != nil {
			t = target{}
		}
		ratio(fmt.Sprintf(name, "time"), float64(tl)/float64(ts),
			fmt.Sprintf("%s with %d parked (median %s) / with 10 parked (median %s), %s", c.what, s.large, tl.Round(10*time.Microsecond), ts.Round(10*time.Microsecond), s.where), t)
		as, al := float64(medianOf(c.sa)), float64(medianOf(c.la))
		ratio(fmt.Sprintf(name, "alloc"), al/as,
			fmt.Sprintf("bytes allocated by the same, %d parked (median %.0f KiB) / 10 parked (median %.0f KiB)", s.large, al/1024, as/1024), atMost(2))
		record(figure{name: fmt.Sprintf(name, "roundtrips"), value: float64(c.trips[1]) / float64(c.trips[0]), unit: "ratio",
			what: fmt.Sprintf("store round trips of the same, %d parked (%d) / 10 parked (%d)", s.large, c.trips[1], c.trips[0]), target: atMost(1)})
	}
}

// parkedBlock is the k-th block of 10 parked messages of the orders of
// BenchmarkParkedTail: seqs 3+11k to 12+11k (2+11k is missing).
func parkedBlock(id string, k int, data json.RawMessage) []convoy.Message {
	var out []convoy.Message
	for j := range int64(10) {
		seq := int64(3+11*k) + j
		m := addMsg(id, seq, fmt.Sprintf("t-%d", seq), seq)
		t := m.Command.(orders.Transaction)
		t.Data = data
		m.Command = t
		out = append(out, m)
	}
	return out
}

// parkedRow is m's parked row as tablestore writes it (its commitBody).
func parkedRow(b *testing.B, m convoy.Message) []byte {
	t := m.Command.(orders.Transaction)
	row, err := json.Marshal(map[string]any{"PartitionKey": t.OrderID, "RowKey": fmt.Sprintf("p:%019d", m.Seq),
		"Seq": fmt.Sprint(m.Seq), "Seq@odata.type": "Edm.Int64", "Last": false, "MessageId": m.MessageID,
		"Op": string(t.Op), "TxId": t.TxID, "Currency": "", "Amount": fmt.Sprint(*t.Amount), "Amount@odata.type": "Edm.Int64",
		"Data": string(t.Data)})
	if err != nil {
		b.Fatal(err)
	}
	return row
}

// allocated is the bytes this process has allocated so far.
func allocated() uint64 {
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.TotalAlloc
}

// countingMemstore counts the calls made to a memstore: each is one Table
// round trip in tablestore.
type countingMemstore struct {
	*memstore.Store
	calls atomic.Int64
}

func (c *countingMemstore) reset() { c.calls.Store(0) }

func (c *countingMemstore) Load(ctx context.Context, id string) (*convoy.Key, error) {
	c.calls.Add(1)
	return c.Store.Load(ctx, id)
}

func (c *countingMemstore) Row(ctx context.Context, id string, ref keyed.RowRef) (keyed.Props, bool, error) {
	c.calls.Add(1)
	return c.Store.Row(ctx, id, ref)
}

func (c *countingMemstore) Commit(ctx context.Context, o *convoy.Key, base int64, ch *convoy.Change) error {
	c.calls.Add(1)
	return c.Store.Commit(ctx, o, base, ch)
}

func (c *countingMemstore) Parked(ctx context.Context, id string, after int64, limit int) ([]convoy.Message, bool, error) {
	c.calls.Add(1)
	return c.Store.Parked(ctx, id, after, limit)
}

func (c *countingMemstore) IsParked(ctx context.Context, id string, seq int64) (bool, error) {
	c.calls.Add(1)
	return c.Store.IsParked(ctx, id, seq)
}

func (c *countingMemstore) Rows(ctx context.Context, id, coll string, from int64, limit int) ([]keyed.Row, bool, error) {
	c.calls.Add(1)
	return c.Store.Rows(ctx, id, coll, from, limit)
}

func (c *countingMemstore) Rejections(ctx context.Context, id string, from int64, limit int) ([]convoy.Rejection, bool, error) {
	c.calls.Add(1)
	return c.Store.Rejections(ctx, id, from, limit)
}
