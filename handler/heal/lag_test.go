package heal_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/convoy-dev/convoy/handler/convoy"
	"github.com/convoy-dev/convoy/handler/heal"
	"github.com/convoy-dev/convoy/handler/internal/memstore"
	"github.com/convoy-dev/convoy/handler/orders"
)

// TestLagSurvey: a run judges every active order, each case built to be
// one status, the expectations written out by hand (not by JudgeLag):
//   - o-idle: caught up 11 minutes ago: ok, and it leaves the index;
//   - o-busy: caught up now: ok;
//   - o-catch, o-new: waiting, the head moved (or the wait began) now:
//     catching-up;
//   - o-stalled: waiting since 11 minutes, over two 5-minute windows:
//     stalled, and stalled for two windows;
//   - o-gap: seq 3 parked behind seq 2: blocked;
//   - o-dl: seq 2 dead-lettered, nothing parked behind it: blocked.
//
// Critical times over the recent window are checked against the exact
// values the test applied; the summary on another Healer reads the same
// figures from the Health record.
func TestLagSurvey(t *testing.T) {
	ctx := context.Background()
	f := newFixture()
	ledgers := memstore.NewLedgers()
	ledgers.Now = f.clock.now
	p := convoy.NewProcessor(f.store, convoy.ProcessorOptions{Domain: orders.Domain, Index: f.store, Now: f.clock.now})
	publish := func(order string, n int) {
		t.Helper()
		if _, err := ledgers.Allocate(ctx, "L-"+order+f.clock.now().Format("150405"), "h", order, n); err != nil {
			t.Fatal(err)
		}
		if err := ledgers.Activate(ctx, []string{order}); err != nil {
			t.Fatal(err)
		}
	}
	apply := func(order string, seq int64, critical time.Duration) {
		t.Helper()
		tx := orders.Transaction{OrderID: order, Op: orders.CreateOrder, Currency: "EUR"}
		if seq > 1 {
			amount := seq
			tx = orders.Transaction{OrderID: order, Op: orders.AddTransaction, TxID: "t", Amount: &amount}
			tx.TxID += string(rune('0' + seq))
		}
		m := convoy.Message{Seq: seq, MessageID: order + ":" + string(rune('0'+seq)), Command: tx, EnqueuedAt: f.clock.now().Add(-critical)}
		if _, err := p.Process(ctx, order, []convoy.Message{m}); err != nil {
			t.Fatal(err)
		}
	}
	// 10:00
	publish("o-idle", 1)
	apply("o-idle", 1, time.Second)
	for _, o := range []string{"o-stalled", "o-gap"} {
		publish(o, 3)
		apply(o, 1, time.Second)
	}
	apply("o-gap", 3, time.Second) // parked
	publish("o-dl", 2)
	apply("o-dl", 1, time.Second)
	f.q.add("o-dl", 2, "MaxDeliveryCountExceeded", `{"transaction":{"orderId":"o-dl","op":"AddTransaction","txId":"t2","amount":2}}`)
	// 10:11
	f.clock.add(11 * time.Minute)
	publish("o-catch", 4)
	apply("o-catch", 1, 50*time.Millisecond)
	apply("o-catch", 2, 80*time.Millisecond)
	publish("o-busy", 2)
	apply("o-busy", 1, 200*time.Millisecond)
	apply("o-busy", 2, 3*time.Second)
	publish("o-new", 2)

	h := f.healer(heal.Options{Domain: orders.Domain, Active: ledgers, LagWindow: 5 * time.Minute, Disabled: true})
	run := h.RunOnce(ctx)
	lag := run.Summary.Lag
	if lag == nil {
		t.Fatalf("no lag in the run's summary: %+v", run)
	}
	want := map[convoy.LagStatus]int{convoy.LagOK: 2, convoy.LagCatchingUp: 2, convoy.LagStalled: 1, convoy.LagBlocked: 2}
	if lag.Orders != 7 || !lag.Complete || !equalCounts(lag.ByStatus, want) || lag.StalledTwoWindows != 1 || lag.Window != 300 {
		t.Errorf("lag %+v; want 7 orders, complete, %v, one stalled for two windows, window 300", lag, want)
	}
	var oldest []string
	for _, o := range lag.OldestHeads[:3] {
		oldest = append(oldest, o.OrderID)
		if o.HeadAgeSeconds != 660 {
			t.Errorf("%s: head age %v s, want 660", o.OrderID, o.HeadAgeSeconds)
		}
	}
	slices.Sort(oldest)
	if !slices.Equal(oldest, []string{"o-dl", "o-gap", "o-stalled"}) || len(lag.OldestHeads) != 5 {
		t.Errorf("oldest heads %+v; want o-dl, o-gap and o-stalled first, then o-catch and o-new", lag.OldestHeads)
	}
	// Applied in the recent window (10:05 on): 50, 80, 200 and 3,000 ms.
	exact := []int64{50, 80, 200, 3000}
	ct := lag.CriticalTime
	if ct == nil || ct.Count != 4 || ct.MaxMs != 3000 || ct.SinceSeconds != 360 {
		t.Fatalf("critical time %+v; want 4 since 360 s, max 3000 ms", ct)
	}
	for q, got := range map[float64]int64{0.5: ct.P50Ms, 0.99: ct.P99Ms} {
		e := exact[int(math.Ceil(q*4))-1]
		if got < e || float64(got) > float64(e)*1.19+1 {
			t.Errorf("p%v = %d ms, exact %d", q*100, got, e)
		}
	}

	// o-dl's dead-lettered seq is noted for its own lag (OrderStatus).
	for order, seq := range map[string]int64{"o-dl": 2, "o-stalled": 0} {
		if p, _ := ledgers.Published(ctx, order, 2); p.DeadLetteredSeq != seq {
			t.Errorf("%s: dead-lettered seq noted %d, want %d", order, p.DeadLetteredSeq, seq)
		}
	}

	// Another instance's summary: the same figures, from the record.
	sum, err := f.healer(heal.Options{Domain: orders.Domain}).Summarize(ctx)
	if err != nil {
		t.Fatal(err)
	}
	a, _ := json.Marshal(sum.Lag)
	b, _ := json.Marshal(lag)
	if string(a) != string(b) {
		t.Errorf("summary's lag\n%s\nwant the run's\n%s", a, b)
	}
	// The run's point of the trend series: the same figures, as the test
	// made them (one blocked order, o-gap, one parked message; o-dl's dead
	// letter, of a transient cause; 4 applied in the 360 s recent window).
	if sum.Trends == nil || len(sum.Trends.Points) != 1 || sum.Trends.Kept != heal.TrendsKept {
		t.Fatalf("the summary's trends %+v, want the run's one point", sum.Trends)
	}
	wantPoint := heal.TrendPoint{At: f.clock.now(), BlockedOrders: 1, ParkedMessages: 1, DeadTransient: 1, DeadPermanent: 0,
		LagOK: 2, LagCatchingUp: 2, LagStalled: 1, LagBlocked: 2, CriticalP50Ms: ct.P50Ms, CriticalP99Ms: ct.P99Ms,
		Applied: 4, AppliedSeconds: 360, AppliedPartial: 0}
	if got := sum.Trends.Points[0]; got != wantPoint {
		t.Errorf("the run's trend point\n%+v\nwant\n%+v", got, wantPoint)
	}
	// o-idle left the index; a run later surveys the six others.
	if again := h.RunOnce(ctx).Summary.Lag; again.Orders != 6 || again.ByStatus[convoy.LagOK] != 1 {
		t.Errorf("second run: %+v; want 6 orders, one ok", again)
	}
	// The dead letter gone (replayed, say), the note goes too.
	f.q.mu.Lock()
	clear(f.q.msgs)
	f.q.mu.Unlock()
	if again := h.RunOnce(ctx).Summary.Lag; again.ByStatus[convoy.LagBlocked] != 1 {
		t.Errorf("with the dead letter gone: %+v; want o-gap alone blocked", again)
	}
	if p, _ := ledgers.Published(ctx, "o-dl", 2); p.DeadLetteredSeq != 0 {
		t.Errorf("o-dl's note after its dead letter went: %d", p.DeadLetteredSeq)
	}
	// Published to again, it is back.
	publish("o-idle", 1)
	if again := h.RunOnce(ctx).Summary.Lag; again.Orders != 7 || again.ByStatus[convoy.LagCatchingUp] != 3 {
		t.Errorf("after o-idle was published to: %+v; want 7 orders, three catching up", again)
	}
}

// TestLagSurveyStopsAtFirstFailure: storage failing for the orders' reads
// ends the survey after a few (the next reads would fail alike, each
// waiting for its deadline): the figures say it is incomplete, and why.
func TestLagSurveyStopsAtFirstFailure(t *testing.T) {
	ctx := context.Background()
	f := newFixture()
	ledgers := memstore.NewLedgers()
	var ids []string
	for i := range 500 {
		ids = append(ids, fmt.Sprintf("o-%03d", i))
	}
	for _, id := range ids {
		if _, err := ledgers.Allocate(ctx, "L", "h", id, 1); err != nil {
			t.Fatal(err)
		}
	}
	if err := ledgers.Activate(ctx, ids); err != nil {
		t.Fatal(err)
	}
	var reads atomic.Int64
	ledgers.Fail = func(op string) error {
		if op == "published" && reads.Add(1) >= 10 {
			return errors.New("storage is down")
		}
		return nil
	}
	lag := f.healer(heal.Options{Domain: orders.Domain, Active: ledgers, Disabled: true}).RunOnce(ctx).Summary.Lag
	if lag.Complete || !strings.Contains(lag.Unread, "storage is down") || lag.Orders >= 100 || reads.Load() >= 100 || lag.UnreadOrders != 0 {
		t.Errorf("lag %+v after %d reads; want incomplete, saying why, stopped after its first failures, none skipped", lag, reads.Load())
	}
}

func equalCounts(a, b map[convoy.LagStatus]int) bool {
	for k, v := range b {
		if a[k] != v {
			return false
		}
	}
	return len(a) == len(b)
}

// unreadable is an active-orders index whose read of one order always
// fails (a corrupt entity, say), and which records the orders read.
type unreadable struct {
	*surveyed
	bad string
}

func (u *unreadable) Published(ctx context.Context, orderID string, seq int64) (convoy.Published, error) {
	p, err := u.surveyed.Published(ctx, orderID, seq)
	if orderID == u.bad {
		return convoy.Published{}, errors.New("the entity of " + orderID + " cannot be decoded")
	}
	return p, err
}

// TestLagSurveySkipsAnOrderItCannotRead (issue 42, item 3b): one order
// whose read always fails held the lag survey for ever: each run stopped at
// it, its cursor before it, and the orders after it were never surveyed
// again. It is now skipped, counted (unreadOrders) and said why, and the
// survey reaches every other order within a pass: 3 runs of 2 for 6 orders.
func TestLagSurveySkipsAnOrderItCannotRead(t *testing.T) {
	ctx := context.Background()
	f := newFixture()
	index := &unreadable{surveyed: activeOrders(t, f, 6), bad: "o-002"}
	h := f.healer(heal.Options{Domain: orders.Domain, Active: index, LagPerRun: 2, Disabled: true, Sequential: true})
	var lag *heal.LagFigures
	why := ""
	for range 3 {
		lag = h.RunOnce(ctx).Summary.Lag
		why += lag.Unread
		f.clock.add(time.Minute)
	}
	read := map[string]bool{}
	for _, id := range index.take() {
		read[id] = true
	}
	for _, id := range ids("o", 0, 6) {
		if !read[id] {
			t.Errorf("%s not surveyed in 3 runs of 2 over 6 orders (read: %v)", id, read)
		}
	}
	if lag.Orders != 5 || lag.UnreadOrders != 1 || !strings.Contains(why, "cannot be decoded") || lag.PeriodSeconds == 0 {
		t.Errorf("the figures after a pass: %d orders, %d unread (the runs said %q), period %d s; want 5, 1 and why, a pass ended",
			lag.Orders, lag.UnreadOrders, why, lag.PeriodSeconds)
	}
}
