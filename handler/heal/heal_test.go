package heal_test

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/convoy-dev/convoy/handler/convoy"
	"github.com/convoy-dev/convoy/handler/heal"
	"github.com/convoy-dev/convoy/handler/internal/ledgertest"
	"github.com/convoy-dev/convoy/handler/internal/memstore"
	"github.com/convoy-dev/convoy/handler/operator"
	"github.com/convoy-dev/convoy/handler/orders"
	"github.com/convoy-dev/convoy/handler/replay"
)

// dlq is a dead-letter sub-queue with peek-lock: a received message is
// invisible to other receivers until completed or abandoned.
type dlq struct {
	mu       sync.Mutex
	msgs     map[int64]replay.DeadLetter
	locked   map[int64]bool
	next     int64
	peekFail error
	received chan struct{} // if set, Receive signals it and waits for hold
	hold     chan struct{}
}

func newDLQ() *dlq { return &dlq{msgs: map[int64]replay.DeadLetter{}, locked: map[int64]bool{}} }

func (q *dlq) add(order string, seq int64, reason, body string) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.next++
	if body == "" {
		body = fmt.Sprintf(`{"transaction":{"orderId":%q,"op":"AddTransaction","txId":"t-%d","amount":5}}`, order, seq)
	}
	q.msgs[q.next] = replay.DeadLetter{SequenceNumber: q.next, MessageID: fmt.Sprintf("L:%s:%d", order, seq), SessionID: order,
		Properties: map[string]any{"ledgerId": "L", "seq": seq}, Body: []byte(body), Reason: reason}
}

func (q *dlq) sorted() []int64 {
	var s []int64
	for k := range q.msgs {
		s = append(s, k)
	}
	sort.Slice(s, func(a, b int) bool { return s[a] < s[b] })
	return s
}

func (q *dlq) Receive(_ context.Context, max int) ([]replay.DeadLetter, error) {
	q.mu.Lock()
	var out []replay.DeadLetter
	for _, s := range q.sorted() {
		if len(out) < max && !q.locked[s] {
			q.locked[s] = true
			out = append(out, q.msgs[s])
		}
	}
	q.mu.Unlock()
	if len(out) > 0 && q.received != nil {
		q.received <- struct{}{}
		<-q.hold
	}
	return out, nil
}

func (q *dlq) Peek(_ context.Context, from int64, max int) ([]replay.DeadLetter, error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.peekFail != nil {
		return nil, q.peekFail
	}
	var out []replay.DeadLetter
	for _, s := range q.sorted() {
		if s >= from && len(out) < max {
			out = append(out, q.msgs[s])
		}
	}
	return out, nil
}

func (q *dlq) Complete(_ context.Context, m replay.DeadLetter) error {
	q.mu.Lock()
	defer q.mu.Unlock()
	if !q.locked[m.SequenceNumber] {
		return errors.New("not locked")
	}
	delete(q.msgs, m.SequenceNumber)
	delete(q.locked, m.SequenceNumber)
	return nil
}

func (q *dlq) Abandon(_ context.Context, m replay.DeadLetter) error {
	q.mu.Lock()
	defer q.mu.Unlock()
	delete(q.locked, m.SequenceNumber)
	return nil
}

type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

type fixture struct {
	q      *dlq
	store  *memstore.Store
	sender *ledgertest.Sender
	clock  *clock
}

func newFixture() *fixture {
	return &fixture{q: newDLQ(), store: memstore.New(), sender: &ledgertest.Sender{}, clock: &clock{t: time.Date(2026, 11, 21, 10, 0, 0, 0, time.UTC)}}
}

func (f *fixture) healer(opts heal.Options) *heal.Healer {
	opts.Now = f.clock.now
	if opts.BackoffBase == 0 {
		opts.BackoffBase = time.Minute
	}
	if opts.BreakerBase == 0 {
		opts.BreakerBase = 30 * time.Second
	}
	return heal.New(f.store, f.store, f.store, func() (replay.Source, convoy.Sender, func(), error) {
		return f.q, f.sender, func() {}, nil
	}, opts)
}

func (f *fixture) sent() []string {
	var out []string
	for _, m := range f.sender.Messages() {
		out = append(out, fmt.Sprintf("%s:%d", m.SessionID, m.Seq))
	}
	return out
}

// TestTransientOnlyWithBackoff: a dead letter of a transient cause is
// replayed at the first run; when it comes back (its cause is not over) the
// next attempts wait 1, 2, 4 minutes, capped at 3; a poison message of the
// same order is never re-sent.
func TestTransientOnlyWithBackoff(t *testing.T) {
	ctx := context.Background()
	f := newFixture()
	h := f.healer(heal.Options{Domain: orders.Domain, BackoffMax: 3 * time.Minute})
	f.q.add("o-1", 2, operator.ReasonMaxDelivery, "")
	f.q.add("o-1", 5, operator.ReasonMaxDelivery, `{"transaction":{"orderId":"o-1","op":"AddTransaction","txId":"t","amount":"a lot"}}`)
	r := h.RunOnce(ctx)
	if len(r.Replayed) != 1 || fmt.Sprint(r.Replayed[0].Seqs) != "[2]" || r.Replayed[0].Left != 1 || r.Paused != "" {
		t.Fatalf("first run %+v", r)
	}
	// Each attempt fails again: the message is dead-lettered again.
	var attempts []time.Duration
	start := f.clock.now()
	for range 40 {
		f.clock.add(30 * time.Second)
		if len(f.q.msgs) == 1 { // only the poison message: the replayed one came back
			f.q.add("o-1", 2, operator.ReasonMaxDelivery, "")
		}
		if r := h.RunOnce(ctx); len(r.Replayed) == 1 {
			attempts = append(attempts, f.clock.now().Sub(start))
			start = f.clock.now()
		}
	}
	want := "[1m0s 2m0s 3m0s 3m0s 3m0s 3m0s]"
	if got := fmt.Sprint(attempts[:min(6, len(attempts))]); got != want {
		t.Fatalf("waits between attempts %s, want %s", got, want)
	}
	for _, s := range f.sent() {
		if s == "o-1:5" {
			t.Fatal("the poison message was replayed")
		}
	}
	if _, ok := f.q.msgs[2]; !ok {
		t.Fatal("the poison message left the dead-letter queue")
	}
}

// TestANewSeqDoesNotWaitOutTheLastOnesBackoff: an order's backoff is that
// of the seq it replayed; a later seq of the order dead-lettered after that
// one was replayed is replayed at the next run, not once the earlier seq's
// backoff is over.
func TestANewSeqDoesNotWaitOutTheLastOnesBackoff(t *testing.T) {
	ctx := context.Background()
	f := newFixture()
	h := f.healer(heal.Options{Domain: orders.Domain, BackoffBase: time.Hour, BackoffMax: time.Hour})
	f.q.add("o-1", 2, operator.ReasonMaxDelivery, "")
	if r := h.RunOnce(ctx); len(r.Replayed) != 1 || fmt.Sprint(r.Replayed[0].Seqs) != "[2]" {
		t.Fatalf("first run %+v", r)
	}
	f.clock.add(time.Minute)
	f.q.add("o-1", 3, operator.ReasonMaxDelivery, "")
	if r := h.RunOnce(ctx); len(r.Replayed) != 1 || fmt.Sprint(r.Replayed[0].Seqs) != "[3]" || r.Waiting != 0 {
		t.Fatalf("the run after seq 3 was dead-lettered: %+v; want seq 3 replayed, nothing waiting", r)
	}
}

// TestBreaker: a run that cannot read the dead-letter queue (Service Bus
// failing) replays nothing and opens the breaker: the next runs wait 30 s,
// then 60 s after a second failure; after that, a run replays.
func TestBreaker(t *testing.T) {
	ctx := context.Background()
	f := newFixture()
	h := f.healer(heal.Options{Domain: orders.Domain})
	f.q.add("o-1", 2, operator.ReasonMaxDelivery, "")
	f.q.peekFail = errors.New("service bus down")
	if r := h.RunOnce(ctx); r.Paused == "" || len(r.Replayed) != 0 {
		t.Fatalf("run during the outage: %+v", r)
	}
	f.clock.add(10 * time.Second)
	if r := h.RunOnce(ctx); r.Paused == "" || len(f.sent()) != 0 {
		t.Fatalf("second failing run: %+v", r)
	}
	f.q.peekFail = nil
	f.clock.add(50 * time.Second) // 50 s after the second failure: its pause is 60 s
	if r := h.RunOnce(ctx); r.Paused == "" || len(f.sent()) != 0 {
		t.Fatalf("run within the breaker's pause: %+v", r)
	}
	f.clock.add(11 * time.Second)
	if r := h.RunOnce(ctx); r.Paused != "" || len(r.Replayed) != 1 {
		t.Fatalf("run after the pause: %+v", r)
	}
}

// TestDisabled: figures only, nothing replayed.
func TestDisabled(t *testing.T) {
	f := newFixture()
	f.q.add("o-1", 2, operator.ReasonMaxDelivery, "")
	r := f.healer(heal.Options{Domain: orders.Domain, Disabled: true}).RunOnce(context.Background())
	if r.Summary == nil || r.Summary.AutoReplay.Pending != 1 || len(f.sent()) != 0 {
		t.Fatalf("disabled run %+v, sent %v", r, f.sent())
	}
}

// TestTwoRunsAtOnce: two instances run at once over the same dead letters
// and states, then one runs again (the next timer firing); every dead letter
// is re-sent exactly once in all.
func TestTwoRunsAtOnce(t *testing.T) {
	ctx := context.Background()
	f := newFixture()
	for i := range 20 {
		f.q.add(fmt.Sprintf("o-%d", i), 2, operator.ReasonMaxDelivery, "")
	}
	a, b := f.healer(heal.Options{Domain: orders.Domain}), f.healer(heal.Options{Domain: orders.Domain})
	var wg sync.WaitGroup
	for _, h := range []*heal.Healer{a, b} {
		wg.Add(1)
		go func() { defer wg.Done(); h.RunOnce(ctx) }()
	}
	wg.Wait()
	// What one found locked by the other is replayed by the next run.
	f.clock.add(time.Second)
	a.RunOnce(ctx)
	seen := map[string]int{}
	for _, s := range f.sent() {
		seen[s]++
		if seen[s] > 1 {
			t.Fatalf("%s re-sent twice", s)
		}
	}
	if len(seen) != 20 || len(f.q.msgs) != 0 {
		t.Fatalf("re-sent %d of 20, %d left dead-lettered", len(seen), len(f.q.msgs))
	}
}

// stalling is a dead-letter sub-queue on a Service Bus that stops answering:
// its first pages peeks answer, later ones wait until their context ends.
type stalling struct {
	*dlq
	pages int
}

func (s *stalling) Peek(ctx context.Context, from int64, max int) ([]replay.DeadLetter, error) {
	if s.pages > 0 {
		s.pages--
		return s.dlq.Peek(ctx, from, max)
	}
	<-ctx.Done()
	return nil, ctx.Err()
}

// block parks seq 2 of each order: each is blocked, waiting for seq 1.
func (f *fixture) block(t *testing.T, ids ...string) []convoy.BlockedOrder {
	t.Helper()
	p := convoy.NewProcessor(f.store, convoy.ProcessorOptions{Domain: orders.Domain, Index: f.store})
	for _, id := range ids {
		amount := int64(5)
		m := convoy.Message{Seq: 2, MessageID: "L:" + id + ":2", Command: orders.Transaction{OrderID: id, Op: orders.AddTransaction, TxID: "t-2", Amount: &amount}}
		if _, err := p.Process(context.Background(), id, []convoy.Message{m}); err != nil {
			t.Fatal(err)
		}
	}
	page, err := convoy.ListBlocked(context.Background(), f.store, "", 100)
	if err != nil || len(page.Orders) != len(ids) {
		t.Fatalf("blocked %+v, %v", page.Orders, err)
	}
	return page.Orders
}

// TestDeadLettersWithinPeekTimeout: with Service Bus silent, a run pauses
// once PeekTimeout has passed and records why; Explain and Summarize then
// say so without touching Service Bus. A Service Bus that stops part-way
// leaves what was read usable. An opener that does not return (the SDK
// waiting for its connection lock) is given up at the deadline too.
func TestDeadLettersWithinPeekTimeout(t *testing.T) {
	ctx := context.Background()
	f := newFixture()
	f.block(t, "o-1", "o-2")
	f.q.add("o-1", 1, operator.ReasonMaxDelivery, "")
	src := &stalling{dlq: f.q}
	h := heal.New(f.store, f.store, f.store, func() (replay.Source, convoy.Sender, func(), error) {
		return src, f.sender, func() {}, nil
	}, heal.Options{Domain: orders.Domain, PeekTimeout: 100 * time.Millisecond, Now: f.clock.now})
	within := func(what string, fn func()) {
		t.Helper()
		start := time.Now()
		fn()
		if took := time.Since(start); took > 2*time.Second {
			t.Errorf("%s took %s with PeekTimeout 100ms", what, took)
		}
	}
	explain := func() []heal.BlockedWithCause {
		t.Helper()
		page, err := convoy.ListBlocked(ctx, f.store, "", 100)
		if err != nil {
			t.Fatal(err)
		}
		got, err := h.Explain(ctx, page.Orders)
		if err != nil {
			t.Fatal(err)
		}
		return got
	}
	within("RunOnce", func() {
		if r := h.RunOnce(ctx); !strings.Contains(r.Paused, "Service Bus is failing") || len(r.Replayed) != 0 || len(f.sent()) != 0 {
			t.Errorf("run %+v", r)
		}
	})
	for _, o := range explain() {
		if o.Missing.Where != heal.WhereUnknown || !strings.Contains(o.Missing.Why, "did not answer within 100ms") {
			t.Errorf("%s: %+v, want unknown: did not answer within 100ms", o.OrderID, o.Missing)
		}
	}
	s, err := h.Summarize(ctx)
	if err != nil || s.BlockedOrders != 2 || s.ParkedMessages != 2 || s.MissingBy[heal.WhereUnknown] != 2 || s.DeadLetters != nil ||
		!strings.Contains(s.DeadLettersUnreadable, "did not answer within 100ms") || !s.AutoReplay.BreakerOpen {
		t.Errorf("summary %+v, %v", s, err)
	}

	// One page, then silence: o-1's missing message is in that page (and
	// re-sent by the run); o-2's is unknown.
	src.pages = 1
	f.clock.add(time.Hour) // past the breaker's pause
	within("RunOnce after one page", func() { h.RunOnce(ctx) })
	got := explain()
	if got[0].Missing.Where != heal.WhereNotDeadLettered || !strings.Contains(got[0].Missing.Why, "re-sent by AutoReplay") ||
		got[1].Missing.Where != heal.WhereUnknown || !strings.Contains(got[1].Missing.Why, "read only in part") {
		t.Errorf("%+v / %+v, want o-1's re-sent and o-2's unknown (read in part)", got[0].Missing, got[1].Missing)
	}

	stuck := make(chan struct{})
	defer close(stuck)
	h = heal.New(f.store, f.store, f.store, func() (replay.Source, convoy.Sender, func(), error) {
		<-stuck
		return f.q, f.sender, func() {}, nil
	}, heal.Options{Domain: orders.Domain, PeekTimeout: 100 * time.Millisecond, Now: f.clock.now})
	f.clock.add(time.Hour)
	within("RunOnce with a stuck opener", func() {
		if r := h.RunOnce(ctx); !strings.Contains(r.Paused, "did not answer within 100ms") {
			t.Errorf("run %+v, want paused: did not answer", r)
		}
	})
}

// TestRunKeepsItsPassTime: a run whose deadline leaves less than
// PassTimeout for its replay pass replays nothing, counts the orders it
// defers, and does not pause or fail for that; the next run replays them.
func TestRunKeepsItsPassTime(t *testing.T) {
	f := newFixture()
	f.q.add("o-1", 2, operator.ReasonMaxDelivery, "")
	h := f.healer(heal.Options{Domain: orders.Domain, PassTimeout: time.Minute})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if r := h.RunOnce(ctx); len(r.Replayed) != 0 || r.Paused != "" || len(f.sent()) != 0 || len(r.Failed) != 0 || r.Deferred != 1 {
		t.Fatalf("run with 20 s left and a 1 min pass: %+v", r)
	}
	if r := h.RunOnce(context.Background()); len(r.Replayed) != 1 {
		t.Fatalf("run without a deadline: %+v", r)
	}
}

// counting is a dead-letter sub-queue that counts what is asked of it.
type counting struct {
	*dlq
	mu                                   sync.Mutex
	receives, peeks, completes, abandons int
	received                             map[int64]int // times each dead letter was received
}

func (c *counting) Receive(ctx context.Context, max int) ([]replay.DeadLetter, error) {
	out, err := c.dlq.Receive(ctx, max)
	c.mu.Lock()
	defer c.mu.Unlock()
	c.receives++
	for _, m := range out {
		c.received[m.SequenceNumber]++
	}
	return out, err
}

func (c *counting) Peek(ctx context.Context, from int64, max int) ([]replay.DeadLetter, error) {
	c.mu.Lock()
	c.peeks++
	c.mu.Unlock()
	return c.dlq.Peek(ctx, from, max)
}

func (c *counting) Complete(ctx context.Context, m replay.DeadLetter) error {
	c.mu.Lock()
	c.completes++
	c.mu.Unlock()
	return c.dlq.Complete(ctx, m)
}

func (c *counting) Abandon(ctx context.Context, m replay.DeadLetter) error {
	c.mu.Lock()
	c.abandons++
	c.mu.Unlock()
	return c.dlq.Abandon(ctx, m)
}

func (c *counting) reset() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.receives, c.peeks, c.completes, c.abandons = 0, 0, 0, 0
	c.received = map[int64]int{}
}

// TestRunIsBounded (issue 25): after an outage, 5,000 dead letters of a
// transient cause over 1,000 orders, interleaved. A run reads the sub-queue
// once (peeks) and receives each dead letter at most once, in one pass that
// stops past the last one it wants; it settles each once. With 400 orders a
// run, three runs re-send every dead letter exactly once; with the default,
// one run does, abandoning none. (Before: 2,500 receives, 1,000 peeks and
// 240,000 abandons in a run.)
func TestRunIsBounded(t *testing.T) {
	ctx := context.Background()
	f := newFixture()
	const keys, each = 1000, 5
	fill := func(prefix string) {
		for seq := int64(2); seq < 2+each; seq++ {
			for o := range keys {
				f.q.add(fmt.Sprintf("%s-%04d", prefix, o), seq, operator.ReasonMaxDelivery, "")
			}
		}
	}
	src := &counting{dlq: f.q}
	run := func(maxOrders int) (runs, abandons int) {
		h := heal.New(f.store, f.store, f.store, func() (replay.Source, convoy.Sender, func(), error) {
			return src, f.sender, func() {}, nil
		}, heal.Options{Domain: orders.Domain, Now: f.clock.now, MaxOrders: maxOrders})
		for ; len(f.q.msgs) > 0 && runs < 100; runs++ {
			src.reset()
			left := len(f.q.msgs)
			r := h.RunOnce(ctx)
			if r.Paused != "" || len(r.Failed) > 0 {
				t.Fatalf("run %d: %+v", runs, r)
			}
			replayed := left - len(f.q.msgs)
			for seq, n := range src.received {
				if n > 1 {
					t.Fatalf("run %d received dead letter %d %d times", runs, seq, n)
				}
			}
			// The peek: the whole sub-queue, 250 a page, and one empty page.
			if want := left/250 + 1; src.peeks > want+1 {
				t.Errorf("run %d: %d peeks of %d dead letters, want about %d", runs, src.peeks, left, want)
			}
			if src.completes != replayed || src.completes+src.abandons != len(src.received) || src.receives > len(src.received)/100+2 {
				t.Errorf("run %d: %d receives of %d dead letters, %d completes, %d abandons for %d replayed",
					runs, src.receives, len(src.received), src.completes, src.abandons, replayed)
			}
			abandons += src.abandons
		}
		return runs, abandons
	}
	check := func(what string) {
		t.Helper()
		sent := map[string]int{}
		for _, s := range f.sent() {
			sent[s]++
		}
		if len(sent) != keys*each || len(f.sender.Messages()) != keys*each {
			t.Fatalf("%s: re-sent %d distinct of %d messages (%d sends), want each once", what, len(sent), keys*each, len(f.sender.Messages()))
		}
	}
	fill("a")
	if runs, _ := run(400); runs != 3 {
		t.Errorf("400 keys a run: %d runs, want 3", runs)
	}
	check("400 keys a run")
	f.sender = &ledgertest.Sender{}
	fill("b")
	if runs, abandons := run(0); runs != 1 || abandons != 0 {
		t.Errorf("default: %d runs, %d abandons; want 1 run abandoning nothing", runs, abandons)
	}
	check("default")
}

// TestUnreachedIsAFailure (issue 25): a dead letter of a transient cause
// behind more than MaxScan dead letters of a permanent cause is reported as
// a failure of its order and counted, never silently "elsewhere"; with room
// to reach it, it is replayed.
func TestUnreachedIsAFailure(t *testing.T) {
	ctx := context.Background()
	f := newFixture()
	for i := range 12 {
		f.q.add(fmt.Sprintf("p-%d", i), 2, "OperatorMoved", "")
	}
	f.q.add("o-1", 2, operator.ReasonMaxDelivery, "")
	r := f.healer(heal.Options{Domain: orders.Domain, MaxScan: 10}).RunOnce(ctx)
	if len(r.Failed) != 1 || r.Failed[0].OrderID != "o-1" || !strings.Contains(r.Failed[0].Error, "beyond the first 10") || r.Elsewhere != 0 ||
		r.Summary.AutoReplay.Unreached != 1 {
		t.Fatalf("run %+v (summary %+v), want o-1 failed: beyond the first 10", r, r.Summary)
	}
	if s, _ := f.healer(heal.Options{Domain: orders.Domain}).Summarize(ctx); s.AutoReplay.Unreached != 1 {
		t.Errorf("summary %+v, want 1 unreached", s.AutoReplay)
	}
	f.clock.add(time.Hour)
	if r := f.healer(heal.Options{Domain: orders.Domain, MaxScan: 20}).RunOnce(ctx); len(r.Replayed) != 1 || len(r.Failed) != 0 {
		t.Fatalf("run with room: %+v", r)
	}
}

// TestSharedAcrossInstances (issue 25): on Flex the timer runs on instances
// of its own, the summary on HTTP instances. A breaker opened by a run, and
// where each missing message is, are seen by another Healer on the same
// storage, which never opens Service Bus to say so; a run on a third
// instance (a timer takeover) keeps the breaker's pause.
func TestSharedAcrossInstances(t *testing.T) {
	ctx := context.Background()
	f := newFixture()
	f.block(t, "o-1")
	f.q.add("o-1", 1, "OperatorMoved", "")
	timer := f.healer(heal.Options{Domain: orders.Domain})
	if r := timer.RunOnce(ctx); r.Paused != "" {
		t.Fatalf("run %+v", r)
	}
	opened := 0
	web := heal.New(f.store, f.store, f.store, func() (replay.Source, convoy.Sender, func(), error) {
		opened++
		return f.q, f.sender, func() {}, nil
	}, heal.Options{Domain: orders.Domain, Now: f.clock.now})
	page, _ := convoy.ListBlocked(ctx, f.store, "", 10)
	got, err := web.Explain(ctx, page.Orders)
	if err != nil || len(got) != 1 || got[0].Missing.Where != heal.WhereDeadLetter || got[0].Missing.Cause != operator.Permanent {
		t.Fatalf("explained %+v, %v: want o-1's missing message dead-lettered, permanent", got, err)
	}
	f.q.peekFail = errors.New("service bus down")
	if r := timer.RunOnce(ctx); r.Paused == "" {
		t.Fatalf("run during the outage: %+v", r)
	}
	s, err := web.Summarize(ctx)
	if err != nil || !s.AutoReplay.BreakerOpen || !strings.Contains(s.AutoReplay.BreakerWhy, "service bus down") || s.MissingBy["deadLetter/permanent"] != 1 {
		t.Fatalf("summary on another instance %+v, %v: want the breaker open with why, o-1 still dead-lettered", s, err)
	}
	if opened != 0 {
		t.Fatalf("the HTTP instance opened Service Bus %d times", opened)
	}
	f.q.peekFail = nil
	f.q.add("o-2", 1, operator.ReasonMaxDelivery, "")
	if r := f.healer(heal.Options{Domain: orders.Domain}).RunOnce(ctx); !strings.Contains(r.Paused, "circuit breaker open") || len(f.sent()) != 0 {
		t.Fatalf("a run on a third instance within the pause: %+v", r)
	}
}

// TestStatesCleanedUp (issue 25): an order's auto-replay state is removed
// once it has nothing left to replay and its backoff is over; the count of
// messages replayed in all is kept in the shared record.
func TestStatesCleanedUp(t *testing.T) {
	ctx := context.Background()
	f := newFixture()
	f.q.add("o-1", 2, operator.ReasonMaxDelivery, "")
	h := f.healer(heal.Options{Domain: orders.Domain})
	if r := h.RunOnce(ctx); len(r.Replayed) != 1 {
		t.Fatalf("run %+v", r)
	}
	if _, _, ok, _ := f.store.ReplayState(ctx, "o-1"); !ok {
		t.Fatal("no state after the replay")
	}
	f.clock.add(2 * time.Minute)
	h.RunOnce(ctx)
	if _, _, ok, _ := f.store.ReplayState(ctx, "o-1"); ok {
		t.Fatal("the state of an order with nothing left to replay was kept")
	}
	if s, _ := h.Summarize(ctx); s.AutoReplay.Replayed != 1 {
		t.Fatalf("replayed in all %d, want 1", s.AutoReplay.Replayed)
	}
}

// TestEveryStateCounted (issue 25): more than 10,000 states are all read
// (the listing used to stop there and say nothing).
func TestEveryStateCounted(t *testing.T) {
	ctx := context.Background()
	f := newFixture()
	for i := range 10_001 {
		if _, err := f.store.PutReplayState(ctx, heal.State{OrderID: fmt.Sprintf("o-%05d", i), Seq: 2, Attempts: 1,
			NextAttempt: f.clock.now().Add(time.Hour)}, ""); err != nil {
			t.Fatal(err)
		}
		f.q.add(fmt.Sprintf("o-%05d", i), 2, operator.ReasonMaxDelivery, "")
	}
	r := f.healer(heal.Options{Domain: orders.Domain, MaxScan: 20_000}).RunOnce(ctx)
	if r.Summary == nil || r.Summary.AutoReplay.Retrying != 10_001 || r.Waiting != 10_001 {
		t.Fatalf("run: waiting %d, summary %+v; want all 10,001 orders retrying and waiting", r.Waiting, r.Summary)
	}
}

// TestPeekAtItsLimit: a sub-queue holding exactly the peek's limit is read
// whole (one more, empty, peek proves the end); one more dead letter is not.
func TestPeekAtItsLimit(t *testing.T) {
	q := newDLQ()
	for i := range 500 {
		q.add(fmt.Sprintf("o-%d", i), 2, operator.ReasonMaxDelivery, "")
	}
	d, err := heal.ReadDeadLetters(context.Background(), orders.Domain, q, 500)
	if err != nil || !d.Complete || d.Total != 500 {
		t.Fatalf("500 dead letters, limit 500: %+v, %v; want read whole", d, err)
	}
	q.add("o-x", 2, operator.ReasonMaxDelivery, "")
	if d, err = heal.ReadDeadLetters(context.Background(), orders.Domain, q, 500); err != nil || d.Complete || d.Total != 500 {
		t.Fatalf("501 dead letters, limit 500: complete %v, total %d, %v; want 500 read, not whole", d.Complete, d.Total, err)
	}
}
