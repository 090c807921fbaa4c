package heal_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/convoy-dev/convoy/handler/heal"
	"github.com/convoy-dev/convoy/handler/operator"
	"github.com/convoy-dev/convoy/handler/orders"
)

// TestTrendsOfRuns: each run adds its point to the series the summary
// shows, in order, the series never holding more than TrendsKept; a run
// that could not read the dead letters adds its blocked orders with the
// dead letters unknown (-1), as is the lag without a survey.
func TestTrendsOfRuns(t *testing.T) {
	ctx := context.Background()
	f := newFixture()
	f.block(t, "o-1", "o-2")
	f.q.add("o-1", 1, operator.ReasonMaxDelivery, "")
	f.q.add("o-2", 1, "unreadable", "not json")
	h := f.healer(heal.Options{Domain: orders.Domain, Disabled: true})
	f.q.peekFail = errors.New("service bus down")
	start := f.clock.now()
	h.RunOnce(ctx)
	f.q.peekFail = nil
	for range heal.TrendsKept + 4 {
		f.clock.add(time.Minute)
		h.RunOnce(ctx)
	}
	sum, err := h.Summarize(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if sum.Trends == nil || len(sum.Trends.Points) != heal.TrendsKept {
		t.Fatalf("trends %v, want %d points", sum.Trends != nil, heal.TrendsKept)
	}
	pts := sum.Trends.Points
	// The first five runs (the failing one and four more) fell out.
	if first, last := pts[0].At, pts[len(pts)-1].At; !first.Equal(start.Add(5*time.Minute)) || !last.Equal(f.clock.now()) {
		t.Errorf("the series spans %s to %s, want %s to %s", first, last, start.Add(5*time.Minute), f.clock.now())
	}
	want := heal.TrendPoint{At: f.clock.now(), BlockedOrders: 2, ParkedMessages: 2, DeadTransient: 1, DeadPermanent: 1,
		LagOK: -1, LagCatchingUp: -1, LagStalled: -1, LagBlocked: -1, CriticalP50Ms: -1, CriticalP99Ms: -1,
		Applied: -1, AppliedSeconds: -1, AppliedPartial: -1}
	if got := pts[len(pts)-1]; got != want {
		t.Errorf("the last point\n%+v\nwant\n%+v", got, want)
	}

	// The failing run's own point: blocked orders known, dead letters not.
	g := newFixture()
	g.block(t, "o-1")
	g.q.peekFail = errors.New("service bus down")
	g.healer(heal.Options{Domain: orders.Domain}).RunOnce(ctx)
	sum, err = g.healer(heal.Options{Domain: orders.Domain}).Summarize(ctx)
	if err != nil || sum.Trends == nil || len(sum.Trends.Points) != 1 {
		t.Fatalf("after a failing run: %+v, %v", sum.Trends, err)
	}
	if p := sum.Trends.Points[0]; p.BlockedOrders != 1 || p.ParkedMessages != 1 || p.DeadTransient != -1 || p.DeadPermanent != -1 {
		t.Errorf("a run that could not read the dead letters: %+v, want 1 blocked, 1 parked, dead letters unknown", p)
	}
}
