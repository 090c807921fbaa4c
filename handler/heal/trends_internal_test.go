package heal

import (
	"math"
	"testing"
	"time"
)

// worstTrends is the trend series at its largest: TrendsKept points, each
// figure as wide as bounded lets it be (twelve digits, or -1).
func worstTrends() Trends {
	var t Trends
	at := time.Date(9999, 12, 31, 23, 0, 0, 0, time.UTC)
	for i := range TrendsKept + 10 {
		p := TrendPoint{At: at.Add(time.Duration(i) * time.Second), BlockedOrders: math.MaxInt64, ParkedMessages: math.MaxInt64,
			DeadTransient: math.MaxInt64, DeadPermanent: math.MinInt64, LagOK: math.MaxInt64, LagCatchingUp: math.MaxInt64,
			LagStalled: math.MaxInt64, LagBlocked: math.MaxInt64, CriticalP50Ms: math.MaxInt64, CriticalP99Ms: math.MaxInt64,
			Applied: math.MaxInt64, AppliedSeconds: math.MaxInt64, AppliedPartial: math.MaxInt64}
		t.add(p)
	}
	return t
}

// TestTrendsWorstCaseFits: the series at its largest (TrendsKept points of
// twelve-digit figures) is one string property of a Table entity, at most
// 64 KiB of UTF-16: it never shares the Health record's, which is near its
// limit at its own worst case.
func TestTrendsWorstCaseFits(t *testing.T) {
	tr := worstTrends()
	if len(tr.Points) != TrendsKept {
		t.Fatalf("%d points kept, want %d", len(tr.Points), TrendsKept)
	}
	raw := tr.Encode() // ASCII: one UTF-16 unit a byte
	if 2*len(raw) > 64<<10 {
		t.Fatalf("the series is %d bytes of UTF-16, more than a Table property holds (65,536)", 2*len(raw))
	}
	back, err := DecodeTrends(raw)
	if err != nil || len(back.Points) != TrendsKept || back.Points[0] != tr.Points[0] || back.Points[0].BlockedOrders != trendMax ||
		back.Points[0].DeadPermanent != Unknown || back.Points[TrendsKept-1].At.Year() != 9999 {
		t.Fatalf("read back: %v, %+v", err, back.Points[:1])
	}
	t.Logf("the series at its largest: %d characters (%d bytes of UTF-16)", len(raw), 2*len(raw))
}

// TestTrendsOrderedAndBounded: points are kept in order of time whatever
// order the runs write them in (overlapping runs), and only the last
// TrendsKept.
func TestTrendsOrderedAndBounded(t *testing.T) {
	var tr Trends
	t0 := time.Date(2026, 11, 21, 10, 0, 0, 0, time.UTC)
	for i := range 300 {
		m := i
		if i%10 == 3 { // written late: after the run of the next minute
			m = i - 2
		}
		tr.add(TrendPoint{At: t0.Add(time.Duration(m) * time.Minute), BlockedOrders: int64(m)})
	}
	if len(tr.Points) != TrendsKept {
		t.Fatalf("%d points, want %d", len(tr.Points), TrendsKept)
	}
	for i := 1; i < len(tr.Points); i++ {
		if tr.Points[i].At.Before(tr.Points[i-1].At) {
			t.Fatalf("point %d (%s) before point %d (%s)", i, tr.Points[i].At, i-1, tr.Points[i-1].At)
		}
	}
	if last := tr.Points[len(tr.Points)-1]; last.BlockedOrders != 299 {
		t.Fatalf("the last point is of minute %d, want 299", last.BlockedOrders)
	}
}
