package bench_test

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/convoy-dev/convoy/handler/convoy"
	"github.com/convoy-dev/convoy/handler/orders"
)

// BenchmarkStorageRoundTrips (figure 2): HTTP round trips to Table Storage
// (Azurite) per message, counted by an instrumented transport, with a fresh
// processor (cold cache) per scenario: one message per call (single mode),
// contiguous batches of 50 (batch mode), and single mode with every other
// message arriving early, which parks it.
func BenchmarkStorageRoundTrips(b *testing.B) {
	const orders, perOrder = 40, 50
	for i := range b.N {
		msgs := convoyMessages(b, orderMessages(b, fmt.Sprintf("rt%d", i), orders*perOrder, orderIDs(fmt.Sprintf("rt%d", i), orders)))
		single := run(b, "single", msgs, 1)
		batched := run(b, "batch", msgs, 50)
		early := run(b, "early", swapPairs(msgs), 1)
		n := float64(len(msgs))
		perMessage := func(name string, v float64, unit, what string, t target) {
			record(figure{name: name, value: v, unit: unit, what: what, target: t})
		}
		perMessage("roundtrips_single", float64(single.trips)/n, "trips/message",
			"Table Storage round trips per message, one message per invocation, in order, cold cache included", atMost(1.05))
		perMessage("roundtrips_batch50", float64(batched.trips)/n, "trips/message",
			"the same with contiguous batches of 50 messages per invocation", atMost(0.05))
		perMessage("roundtrips_early", float64(early.trips)/n, "trips/message",
			"single mode, every other message arriving before its predecessor (parked, then drained)", atMost(1.05))
		perMessage("writes_single", float64(single.writes)/n, "entities/message",
			"entities written per message in order (commit marker, head, transaction row)", target{})
		perMessage("writes_extra_early", float64(early.writes-single.writes)/(n/2), "entities/message",
			"entities written besides, per message that arrived early (its parked row, then deleting it)", target{})
	}
}

type tally struct{ trips, writes int64 }

// run applies msgs (grouped by order, in the order given) through a new
// processor on a new table, in calls of at most batch messages per order.
func run(b *testing.B, name string, msgs []convoy.Message, batch int) tally {
	counter := &countingTransport{}
	store := sharedAzurite(b).NewOrderStore(b, counter)
	p := convoy.NewProcessor(store, convoy.ProcessorOptions{Domain: orders.Domain})
	counter.reset()
	byOrder, ids := groupByOrder(msgs)
	for _, id := range ids {
		all := byOrder[id]
		for k := 0; k < len(all); k += batch {
			if _, err := p.Process(b.Context(), id, all[k:min(k+batch, len(all))]); err != nil {
				b.Fatalf("%s: %v", name, err)
			}
		}
	}
	t := tally{counter.trips.Load(), counter.writes.Load()}
	for _, id := range ids { // the work was done: every message applied
		o, err := store.Load(b.Context(), id)
		if err != nil || o.AppliedSeq != int64(len(byOrder[id])) || len(o.Parked) != 0 {
			b.Fatalf("%s: order %s applied seq %d with %d parked, %v; want %d", name, id, o.AppliedSeq, len(o.Parked), err, len(byOrder[id]))
		}
	}
	return t
}

func groupByOrder(msgs []convoy.Message) (map[string][]convoy.Message, []string) {
	by := map[string][]convoy.Message{}
	var ids []string
	for _, m := range msgs {
		id := m.Command.(orders.Transaction).OrderID
		if _, ok := by[id]; !ok {
			ids = append(ids, id)
		}
		by[id] = append(by[id], m)
	}
	return by, ids
}

// swapPairs swaps each order's messages two by two: 2 1 4 3 …
func swapPairs(msgs []convoy.Message) []convoy.Message {
	by, ids := groupByOrder(msgs)
	var out []convoy.Message
	for _, id := range ids {
		m := by[id]
		for k := 0; k+1 < len(m); k += 2 {
			out = append(out, m[k+1], m[k])
		}
		if len(m)%2 == 1 {
			out = append(out, m[len(m)-1])
		}
	}
	return out
}

// convoyMessages decodes published messages as the handler does.
func convoyMessages(b *testing.B, msgs []convoy.Envelope) []convoy.Message {
	out := make([]convoy.Message, len(msgs))
	for i, m := range msgs {
		tx, err := orders.DecodeBody(m.Body)
		if err != nil {
			b.Fatal(err)
		}
		out[i] = convoy.Message{Seq: m.Seq, Last: m.Last, MessageID: m.MessageID, Command: tx}
	}
	return out
}

// countingTransport counts round trips, of which reads (GETs), and entities
// written: one per sub-request of a $batch, one per other write.
type countingTransport struct{ trips, reads, writes atomic.Int64 }

func (c *countingTransport) reset() { c.trips.Store(0); c.reads.Store(0); c.writes.Store(0) }

func (c *countingTransport) Do(r *http.Request) (*http.Response, error) {
	c.trips.Add(1)
	switch {
	case strings.HasSuffix(r.URL.Path, "$batch") && r.Body != nil:
		body, err := io.ReadAll(r.Body)
		if err != nil {
			return nil, err
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		c.writes.Add(int64(bytes.Count(body, []byte("Content-Type: application/http"))))
	case r.Method != http.MethodGet:
		c.writes.Add(1)
	default:
		c.reads.Add(1)
	}
	return http.DefaultClient.Do(r)
}
