package heal_test

import (
	"context"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/convoy-dev/convoy/handler/convoy"
	"github.com/convoy-dev/convoy/handler/heal"
	"github.com/convoy-dev/convoy/handler/operator"
	"github.com/convoy-dev/convoy/handler/orders"
	"github.com/convoy-dev/convoy/handler/replay"
)

// TestFailuresBoundedByMaxOrders (issue 33, item 6): with MaxOrders 10 and
// 5,000 orders whose dead letters lie beyond the run's window, a run lists
// 10 failures and counts the other 4,990 (each listed failure is a warning
// line, every run: 5,000 of them before), while its figures still count
// all 5,000 unreached.
func TestFailuresBoundedByMaxOrders(t *testing.T) {
	ctx := context.Background()
	f := newFixture()
	for i := range 10 {
		f.q.add(fmt.Sprintf("p-%d", i), 2, "OperatorMoved", "")
	}
	const unreachable = 5000
	for i := range unreachable {
		f.q.add(fmt.Sprintf("o-%04d", i), 2, operator.ReasonMaxDelivery, "")
	}
	r := f.healer(heal.Options{Domain: orders.Domain, MaxOrders: 10, MaxScan: 10}).RunOnce(ctx)
	if len(r.Failed) != 10 || r.FailedMore != unreachable-10 || !strings.Contains(r.Failed[0].Error, "beyond the first 10") {
		t.Fatalf("%d failures listed, %d more; want 10 listed and %d more", len(r.Failed), r.FailedMore, unreachable-10)
	}
	if r.Summary == nil || r.Summary.AutoReplay.Unreached != unreachable {
		t.Fatalf("summary %+v, want %d unreached", r.Summary, unreachable)
	}
}

// bodies is a dead-letter sub-queue whose messages' bodies are made as
// they are peeked (as the SDK decodes each one), size bytes each, so that
// what a reader keeps of them is all the heap holds of them.
type bodies struct {
	n, size int
}

func (b *bodies) letter(i int) replay.DeadLetter {
	order := fmt.Sprintf("o-%05d", i)
	body := fmt.Appendf(nil, `{"transaction":{"orderId":%q,"op":"AddTransaction","txId":"t-%d","amount":5}`, order, i)
	body = append(body, strings.Repeat(" ", max(0, b.size-len(body)-1))...) // readable: white space
	body = append(body, '}')
	return replay.DeadLetter{SequenceNumber: int64(i + 1), MessageID: fmt.Sprintf("L:%s:2", order), SessionID: order,
		Properties: map[string]any{"ledgerId": "L", "seq": int64(2)}, Body: body, Reason: operator.ReasonMaxDelivery}
}

func (b *bodies) Peek(_ context.Context, from int64, n int) ([]replay.DeadLetter, error) {
	var out []replay.DeadLetter
	for i := max(int(from)-1, 0); i < b.n && len(out) < n; i++ {
		out = append(out, b.letter(i))
	}
	return out, nil
}

func (b *bodies) Receive(context.Context, int) ([]replay.DeadLetter, error) { return nil, nil }
func (b *bodies) Complete(context.Context, replay.DeadLetter) error         { return nil }
func (b *bodies) Abandon(context.Context, replay.DeadLetter) error          { return nil }

// TestReadDeadLettersKeepsNoBodies (issue 33, item 6): what a run keeps of
// its peek is a small constant per dead letter, not the bodies: 2,000 dead
// letters of 60 KiB (117 MiB of bodies; 126 MiB held before) leave less
// than 4 MiB on the heap (about 0.5 MiB is what is kept). BenchmarkAutoReplayMemory
// measures a whole run.
func TestReadDeadLettersKeepsNoBodies(t *testing.T) {
	src := &bodies{n: 2000, size: 60 << 10}
	if c := operator.Classify(orders.Domain, src.letter(0), -1); c.Class != operator.Transient {
		t.Fatalf("the fake's dead letter is %+v, want transient", c)
	}
	before := liveHeap()
	d, err := heal.ReadDeadLetters(context.Background(), orders.Domain, src, 0)
	if err != nil || !d.Complete || d.Total != src.n || d.Transient != src.n {
		t.Fatalf("read %+v, %v", d, err)
	}
	kept := liveHeap() - before
	if m := d.Missing("o-01999", 2, 1); m.Where != heal.WhereDeadLetter || m.Cause != operator.Transient || m.MessageID != "L:o-01999:2" {
		t.Fatalf("missing %+v", m)
	}
	runtime.KeepAlive(d)
	t.Logf("%d dead letters of %d KiB: %.2f MiB kept (%d bytes each)", src.n, src.size>>10, float64(kept)/(1<<20), kept/int64(src.n))
	if kept > 4<<20 {
		t.Fatalf("%.1f MiB kept after reading %d dead letters of %d KiB: the bodies are held", float64(kept)/(1<<20), src.n, src.size>>10)
	}
}

func liveHeap() int64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return int64(m.HeapAlloc)
}

// TestMissingClassifiesAsClassify: what a run keeps of a dead letter (its
// cause derived once, as it is peeked, without its body) tells the same
// cause and why as Classify does of the whole dead letter, for every
// appliedSeq Missing is asked with.
func TestMissingClassifiesAsClassify(t *testing.T) {
	good := `{"transaction":{"orderId":"o-1","op":"DeleteOrder"}}`
	bad := `{"transaction":{"orderId":"o-1","op":"AddTransaction","txId":"t","amount":"a lot"}}`
	far := int64(convoy.MaxParkAhead + 3)
	for _, c := range []struct {
		name, session, reason, body string
		seq                         any
	}{
		{"deliveries ran out", "o-1", operator.ReasonMaxDelivery, good, int64(3)},
		{"expired", "o-1", operator.ReasonExpired, good, int64(3)},
		{"no seq", "o-1", operator.ReasonMaxDelivery, good, nil},
		{"seq 0", "o-1", operator.ReasonMaxDelivery, good, int64(0)},
		{"bad body", "o-1", operator.ReasonMaxDelivery, bad, int64(3)},
		{"body of another order", "o-1", operator.ReasonMaxDelivery, `{"transaction":{"orderId":"o-2","op":"DeleteOrder"}}`, int64(3)},
		{"no session", "", operator.ReasonMaxDelivery, good, int64(3)},
		{"far ahead", "o-1", operator.ReasonMaxDelivery, good, far},
		{"far ahead, bad body", "o-1", operator.ReasonMaxDelivery, bad, far},
		{"far ahead, no session", "", operator.ReasonMaxDelivery, good, far},
		{"another tool's reason", "o-1", "OperatorMoved", good, int64(3)},
		{"another tool's reason, far ahead", "o-1", "OperatorMoved", good, far},
	} {
		props := map[string]any{}
		seq := int64(7) // not the letter's: Missing then finds it as the order's letter without a seq
		if c.seq != nil {
			props["seq"] = c.seq
			if s := c.seq.(int64); s >= 1 {
				seq = s
			}
		}
		dl := replay.DeadLetter{SequenceNumber: 1, MessageID: "m", SessionID: c.session, Reason: c.reason, Body: []byte(c.body), Properties: props}
		q := newDLQ()
		q.msgs[1] = dl
		d, err := heal.ReadDeadLetters(context.Background(), orders.Domain, q, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, applied := range []int64{-1, 0, 2, far} {
			want := operator.Classify(orders.Domain, dl, applied)
			m := d.Missing(c.session, seq, applied)
			if m.Where == heal.WhereNotDeadLettered || m.Cause != want.Class || m.Why != want.Why {
				t.Errorf("%s, appliedSeq %d: %s %s %q, Classify says %s %q", c.name, applied, m.Where, m.Cause, m.Why, want.Class, want.Why)
			}
		}
	}
}

// TestStatesBoundedWhenThePeekIsPartial (issue 37): with more dead letters
// than a run's peek reads (50,000), the runs cannot tell that an order not
// in the peek has nothing left to replay; its auto-replay state used to be
// kept for as long as the queue stayed that long, so that the states every
// run reads grew with the orders ever replayed. A state not in the peek is
// now removed once its backoff has been over for BackoffMax (what it would
// have told a later attempt is only how far to double its wait); one whose
// backoff ended less than BackoffMax ago is kept, and so is one of an order
// the peek saw.
func TestStatesBoundedWhenThePeekIsPartial(t *testing.T) {
	ctx := context.Background()
	f := newFixture()
	src := &bodies{n: 50_001, size: 100} // o-00000 … o-50000: the peek reads 50,000
	h := heal.New(f.store, f.store, f.store, func() (replay.Source, convoy.Sender, func(), error) { return src, f.sender, func() {}, nil },
		heal.Options{Domain: orders.Domain, Now: f.clock.now, BackoffMax: time.Hour, Disabled: true})
	now := f.clock.now()
	for id, next := range map[string]time.Time{
		"gone-long-ago": now.Add(-time.Hour - time.Minute), // not in the peek, backoff over for more than BackoffMax
		"gone-recently": now.Add(-time.Minute),             // not in the peek, backoff over for less
		"o-00007":       now.Add(-2 * time.Hour),           // in the peek
	} {
		if _, err := f.store.PutReplayState(ctx, heal.State{OrderID: id, Seq: 2, Attempts: 3, NextAttempt: next}, ""); err != nil {
			t.Fatal(err)
		}
	}
	r := h.RunOnce(ctx)
	if r.Summary == nil || r.Summary.DeadLetters == nil || r.Summary.DeadLetters.Complete {
		t.Fatalf("the peek: %+v; want it partial", r.Summary)
	}
	states, _, err := f.store.ReplayStates(ctx, "", 100)
	if err != nil {
		t.Fatal(err)
	}
	var left []string
	for _, st := range states {
		left = append(left, st.OrderID)
	}
	if fmt.Sprint(left) != "[gone-recently o-00007]" {
		t.Errorf("states left %v; want [gone-recently o-00007]", left)
	}
}

// slowLink is a sub-queue of dead letters of b.size bytes behind a link
// that brings budget bytes within a read's deadline: a peek whose page
// would not arrive in what is left of it waits for the deadline, as over a
// slow link (no page is made that would not arrive).
type slowLink struct {
	*bodies
	budget int
	mu     sync.Mutex
	sent   int
}

func (l *slowLink) Peek(ctx context.Context, from int64, n int) ([]replay.DeadLetter, error) {
	page := min(n, max(l.n-max(int(from)-1, 0), 0)) * l.size
	l.mu.Lock()
	fits := l.sent+page <= l.budget
	if fits {
		l.sent += page
	}
	l.mu.Unlock()
	if !fits {
		<-ctx.Done()
		return nil, ctx.Err()
	}
	return l.bodies.Peek(ctx, from, n)
}

// TestPeekOfLargeDeadLettersOverASlowLink (issue 42, item 3a): 300 dead
// letters of 256 KiB (the most Service Bus Standard takes) behind a link
// that brings 4 MiB within the read's deadline. A first page of 250 (64
// MB) never arrived: every run found the sub-queue unreadable, opened the
// breaker and replayed nothing. Pages are now sized by bytes (the first for
// the largest message, the next for the largest seen): the run reads what
// the link brings in time, marked incomplete, and the breaker stays shut.
func TestPeekOfLargeDeadLettersOverASlowLink(t *testing.T) {
	ctx := context.Background()
	f := newFixture()
	link := &slowLink{bodies: &bodies{n: 300, size: 256 << 10}, budget: 4 << 20}
	h := heal.New(f.store, f.store, f.store, func() (replay.Source, convoy.Sender, func(), error) { return link, f.sender, func() {}, nil },
		// PeekTimeout: what the run does with the pages that arrive takes well under it.
		heal.Options{Domain: orders.Domain, Now: f.clock.now, PeekTimeout: time.Second, Disabled: true})
	r := h.RunOnce(ctx)
	if r.Paused != "" || r.Summary == nil || r.Summary.DeadLetters == nil || r.Summary.DeadLetters.Total == 0 || r.Summary.DeadLetters.Complete {
		t.Fatalf("run: paused %q, summary %+v; want the dead letters the link brought, incomplete, and no pause", r.Paused, r.Summary)
	}
	if s, err := h.Summarize(ctx); err != nil || s.AutoReplay.BreakerOpen {
		t.Fatalf("the breaker: %+v, %v; want it shut", s.AutoReplay, err)
	}
	t.Logf("read %d of %d dead letters of 256 KiB", r.Summary.DeadLetters.Total, link.n)
}
