package storetest

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"testing"

	"github.com/convoy-dev/convoy/handler/convoy"
	"github.com/convoy-dev/convoy/handler/orders"
)

func testParkThenDrain(t *testing.T, s convoy.Store, id string) {
	o := newOrder(t, id)
	step(t, s, o, msg(3, orders.AddTransaction, "t-1", 10))
	step(t, s, o, msg(4, orders.ModifyTransaction, "t-1", 20))
	got := load(t, s, id)
	same(t, got, o)
	if len(got.Parked) != 2 || got.MissingSeq() != 1 || !got.BlockedSince.Equal(epoch) {
		t.Fatalf("parked state: %+v", comparable(got))
	}
	step(t, s, o, msg(1, orders.CreateOrder, "", 0), msg(2, orders.AddTransaction, "t-0", 1))
	got = load(t, s, id)
	same(t, got, o)
	if len(got.Parked) != 0 || got.AppliedSeq != 4 || orders.StateOf(got).Total != 21 || !got.BlockedSince.IsZero() {
		t.Fatalf("drained state: %+v", comparable(got))
	}
	sameHistory(t, s, id, []orders.TxEntry{tx("t-0", 1), tx("t-1", 20)}, nil)
}

// parkAll parks the AddTransactions of seqs from to to (each t-<seq>,
// amount seq) with a processor, a call per convoy.ParkedPageSize of them.
func parkAll(t *testing.T, p *convoy.Processor, id string, from, to int64) {
	t.Helper()
	for seq := from; seq <= to; {
		var msgs []convoy.Message
		for ; seq <= to && len(msgs) < convoy.ParkedPageSize; seq++ {
			msgs = append(msgs, of(id, msg(seq, orders.AddTransaction, fmt.Sprintf("t-%d", seq), seq)))
		}
		res, err := p.Process(context.Background(), id, msgs)
		if err != nil {
			t.Fatalf("park seqs up to %d: %v", seq-1, err)
		}
		for _, out := range res.Outcomes {
			if out.Disposition != convoy.Parked {
				t.Fatalf("park: %v", out)
			}
		}
	}
}

// headParked is the parked count of the order's head as the blocked
// index reads it (the head's own figure), or -1 if the store has no index.
func headParked(t *testing.T, s convoy.Store, id string) int {
	t.Helper()
	idx, ok := s.(convoy.BlockedIndex)
	if !ok {
		return -1
	}
	h, _, err := idx.Head(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	return h.Parked
}

// testParkedTailInPages (issue 33): Load reads the head and the first
// convoy.ParkedLoadSize parked messages, not the whole tail, with the count
// of them all; a tail of several pages drains whole, in seq order, across
// commits, on a processor that never had the order cached.
func testParkedTailInPages(t *testing.T, s convoy.Store, id string) {
	const n = 2*convoy.ParkedPageSize + convoy.ParkedLoadSize + 7 // parked: seqs 3 to n+2
	parkAll(t, convoy.NewProcessor(s, convoy.ProcessorOptions{Domain: orders.Domain}), id, 3, n+2)
	got := load(t, s, id)
	if got.ParkedCount != n || len(got.Parked) > convoy.ParkedLoadSize || got.MissingSeq() != 1 || got.LastParked() != n+2 {
		t.Fatalf("loaded %d parked message(s) of %d counted, missing seq %d, last parked %d; want at most %d of %d, missing 1, last %d",
			len(got.Parked), got.ParkedCount, got.MissingSeq(), got.LastParked(), convoy.ParkedLoadSize, n, n+2)
	}
	for seq := int64(3); seq < 3+int64(len(got.Parked)); seq++ {
		if orders.CommandOf(id, got.Parked[seq]).TxID != fmt.Sprintf("t-%d", seq) {
			t.Fatalf("the loaded window is not the lowest parked messages: %v", slices.Sorted(maps.Keys(got.Parked)))
		}
	}
	if v := orders.ViewOf(convoy.View{Order: got}); v.Parked != n || v.MissingSeq != 1 {
		t.Fatalf("view: %d parked, missing %d; want %d, 1", v.Parked, v.MissingSeq, n)
	}
	if h := headParked(t, s, id); h != -1 && h != n {
		t.Fatalf("the head counts %d parked, want %d", h, n)
	}
	p := convoy.NewProcessor(s, convoy.ProcessorOptions{Domain: orders.Domain}) // cold
	first := []convoy.Message{msg(1, orders.CreateOrder, "", 0), msg(2, orders.AddTransaction, "t-2", 2)}
	for i := range first {
		first[i] = of(id, first[i])
	}
	res, err := p.Process(context.Background(), id, first)
	if err != nil {
		t.Fatal(err)
	}
	if res.AppliedSeq != n+2 || res.Parked != 0 || res.MissingSeq != 0 || len(res.Outcomes) != n+2 || res.Commits < 3 {
		t.Fatalf("the drain: appliedSeq %d, %d parked, missing %d, %d outcomes in %d commits; want %d, 0, 0, %d in several",
			res.AppliedSeq, res.Parked, res.MissingSeq, len(res.Outcomes), res.Commits, n+2, n+2)
	}
	var want []orders.TxEntry
	for i, out := range res.Outcomes {
		if seq := int64(i + 1); out.Seq != seq || out.Disposition != convoy.Applied || out.Drained != (seq > 2) {
			t.Fatalf("outcome %d: %v, want seq %d applied", i, out, seq)
		}
		if i > 0 {
			want = append(want, tx(fmt.Sprintf("t-%d", i+1), int64(i+1)))
		}
	}
	got = load(t, s, id)
	if got.ParkedCount != 0 || len(got.Parked) != 0 || got.AppliedSeq != n+2 || !got.BlockedSince.IsZero() || got.LastParked() != 0 {
		t.Fatalf("after the drain: %+v", comparable(got))
	}
	if h := headParked(t, s, id); h != -1 && h != 0 {
		t.Fatalf("the head counts %d parked after the drain, want 0", h)
	}
	sameHistory(t, s, id, want, nil)
}

// probeCounter counts IsParked calls.
type probeCounter struct {
	convoy.Store
	n int
}

func (p *probeCounter) IsParked(ctx context.Context, orderID string, seq int64) (bool, error) {
	p.n++
	return p.Store.IsParked(ctx, orderID, seq)
}

// testParkedDuplicateBeyondWindow (issue 33): a message whose seq is parked
// beyond the loaded window is a duplicate (one point read), in a later call
// or again in the same one; a new one there is parked, with no read when it
// lies above every parked seq; the count is exact after each, and the whole
// tail drains once.
func testParkedDuplicateBeyondWindow(t *testing.T, s convoy.Store, id string) {
	const n = convoy.ParkedPageSize + convoy.ParkedLoadSize // parked: 3 to n+2
	parkAll(t, convoy.NewProcessor(s, convoy.ProcessorOptions{Domain: orders.Domain}), id, 3, n+2)
	with := func(ms ...convoy.Message) []convoy.Message {
		for i := range ms {
			ms[i] = of(id, ms[i])
		}
		return ms
	}
	beyond := msg(n+2, orders.AddTransaction, fmt.Sprintf("t-%d", n+2), n+2) // parked, beyond the first page
	fresh := msg(n+9, orders.AddTransaction, fmt.Sprintf("t-%d", n+9), n+9)  // not parked
	cases := []struct {
		msgs   []convoy.Message
		want   []convoy.Disposition
		count  int
		probes int
	}{
		{with(beyond), []convoy.Disposition{convoy.Duplicate}, n, 1},
		{with(beyond, fresh, fresh, beyond), []convoy.Disposition{convoy.Duplicate, convoy.Parked, convoy.Duplicate, convoy.Duplicate}, n + 1, 2},
		{with(fresh), []convoy.Disposition{convoy.Duplicate}, n + 1, 1},
	}
	for i, c := range cases {
		probes := &probeCounter{Store: s}
		p := convoy.NewProcessor(probes, convoy.ProcessorOptions{Domain: orders.Domain}) // cold: the window is Load's
		res, err := p.Process(context.Background(), id, c.msgs)
		if err != nil {
			t.Fatalf("call %d: %v", i, err)
		}
		var got []convoy.Disposition
		for _, out := range res.Outcomes {
			got = append(got, out.Disposition)
		}
		if !slices.Equal(got, c.want) || res.Parked != c.count || probes.n != c.probes {
			t.Fatalf("call %d: %v with %d parked after %d point reads, want %v with %d after %d", i, got, res.Parked, probes.n, c.want, c.count, c.probes)
		}
		if o := load(t, s, id); o.ParkedCount != c.count || o.LastParked() != n+9 && i > 0 {
			t.Fatalf("call %d: loaded %d parked, last %d; want %d, last %d", i, o.ParkedCount, o.LastParked(), c.count, n+9)
		}
		if h := headParked(t, s, id); h != -1 && h != c.count {
			t.Fatalf("call %d: the head counts %d parked, want %d", i, h, c.count)
		}
	}
	// Fill every gap: all drain, each once.
	var fill []convoy.Message
	for _, seq := range []int64{1, 2, n + 3, n + 4, n + 5, n + 6, n + 7, n + 8} {
		m := msg(seq, orders.AddTransaction, fmt.Sprintf("t-%d", seq), seq)
		if seq == 1 {
			m = msg(1, orders.CreateOrder, "", 0)
		}
		fill = append(fill, m)
	}
	res, err := convoy.NewProcessor(s, convoy.ProcessorOptions{Domain: orders.Domain}).Process(context.Background(), id, with(fill...))
	if err != nil {
		t.Fatal(err)
	}
	applied := 0
	for _, out := range res.Outcomes {
		if out.Disposition == convoy.Applied {
			applied++
		}
	}
	if applied != n+9 || res.AppliedSeq != n+9 || res.Parked != 0 {
		t.Fatalf("filling the gaps applied %d, appliedSeq %d, %d parked; want %d, %d, 0", applied, res.AppliedSeq, res.Parked, n+9, n+9)
	}
	if o := load(t, s, id); o.ParkedCount != 0 || orders.StateOf(o).TxCount != n+8 {
		t.Fatalf("after the drain: %d parked, %d transactions; want 0, %d", o.ParkedCount, orders.StateOf(o).TxCount, n+8)
	}
}
