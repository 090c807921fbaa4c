package convoy_test

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/convoy-dev/convoy/handler/convoy"
)

// TestCriticalTimes against the exact quantiles of the samples of the recent
// window (sorted, the oracle): each percentile at or above the exact value
// and at most 19 % (and a millisecond) above it, the maximum exact, the
// samples of older windows left out, through an encode and decode per add
// (as each commit writes the head).
func TestCriticalTimes(t *testing.T) {
	const window = 5 * time.Minute
	rng := rand.New(rand.NewPCG(1, 2))
	t0 := time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC)
	var c convoy.CriticalTimes
	type sample struct {
		at time.Time
		ms int64
	}
	var all []sample
	at := t0
	for range 5000 {
		at = at.Add(time.Duration(rng.IntN(400)) * time.Millisecond)
		ms := int64(math.Exp(rng.Float64() * 12)) // 1 ms to 160 s, log-spread
		all = append(all, sample{at, ms})
		c.Add(at, time.Duration(ms)*time.Millisecond, window)
		c = convoy.DecodeCriticalTimes(convoy.EncodeCriticalTimes(c))
	}
	for _, now := range []time.Time{at, at.Add(window), at.Add(2 * window)} {
		h, since := c.Recent(now, window)
		var exact []int64
		for _, s := range all {
			if !s.at.Before(since) {
				exact = append(exact, s.ms)
			}
		}
		slices.Sort(exact)
		if h.Count() != int64(len(exact)) {
			t.Fatalf("now %v: %d in the recent window, want %d (since %v)", now, h.Count(), len(exact), since)
		}
		if len(exact) == 0 {
			if h.Percentile(0.5) != 0 || h.MaxMs != 0 {
				t.Fatalf("now %v: nothing recent, got p50 %d max %d", now, h.Percentile(0.5), h.MaxMs)
			}
			continue
		}
		for _, q := range []float64{0.5, 0.9, 0.99, 1} {
			want := exact[int(math.Ceil(q*float64(len(exact))))-1]
			got := h.Percentile(q)
			if got < want || float64(got) > float64(want)*1.19+1 {
				t.Errorf("now %v: p%v = %d ms, exact %d", now, q*100, got, want)
			}
		}
		if h.MaxMs != exact[len(exact)-1] {
			t.Errorf("now %v: max %d, exact %d", now, h.MaxMs, exact[len(exact)-1])
		}
	}
}

// TestCriticalTimesWindowChange: a new window length starts afresh rather
// than mixing windows of two lengths; a corrupt value reads as nothing.
func TestCriticalTimesWindowChange(t *testing.T) {
	at := time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC)
	var c convoy.CriticalTimes
	c.Add(at, time.Second, time.Minute)
	c.Add(at, time.Second, 2*time.Minute)
	if h, _ := c.Recent(at, 2*time.Minute); h.Count() != 1 {
		t.Fatalf("%d times after the window changed, want 1", h.Count())
	}
	if h, _ := c.Recent(at, time.Minute); h.Count() != 0 {
		t.Fatalf("read over the old window: %d times, want none", h.Count())
	}
	for _, s := range []string{"", "{", `{"w":-1}`, "null"} {
		if got := convoy.DecodeCriticalTimes(s); got.Window != 0 {
			t.Errorf("%q read as %+v", s, got)
		}
	}
}

// TestCriticalTimesBucketOutOfRange: a stored bucket beyond the last one a
// time can fall in (its upper end past int64: 700 read p99 as
// −9223372036854775808, FuzzCriticalTimes) reads as nothing recorded, as an
// out-of-order or negative one does; the last bucket a time can fall in
// reads back.
func TestCriticalTimesBucketOutOfRange(t *testing.T) {
	at := time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC)
	for _, b := range []int64{700, 254, math.MaxInt64} {
		s := fmt.Sprintf(`{"w":60,"s":%d,"c":{"b":[[%d,1]],"m":9000}}`, at.Unix(), b)
		if got := convoy.DecodeCriticalTimes(s); got.Window != 0 {
			t.Errorf("bucket %d read as %+v, want nothing recorded", b, got)
		}
	}
	overflow := fmt.Sprintf(`{"w":60,"s":%d,"c":{"b":[[1,%d],[2,%d]],"m":9000}}`, at.Unix(), int64(1)<<62, int64(1)<<62)
	if got := convoy.DecodeCriticalTimes(overflow); got.Window != 0 {
		t.Errorf("counts summing past int64 read as %+v, want nothing recorded", got)
	}
	var c convoy.CriticalTimes
	c.Add(at, time.Duration(math.MaxInt64), time.Minute) // the longest time a Duration holds
	c.Add(at, 0, time.Minute)
	c = convoy.DecodeCriticalTimes(convoy.EncodeCriticalTimes(c))
	h, _ := c.Recent(at, time.Minute)
	if h.Count() != 2 || h.Percentile(0.99) != h.MaxMs || h.Percentile(0.5) != 1 {
		t.Fatalf("longest time: count %d, p50 %d, p99 %d, max %d", h.Count(), h.Percentile(0.5), h.Percentile(0.99), h.MaxMs)
	}
}

// FuzzCriticalTimes: whatever a head's Crit property holds (it is read back
// from storage), decoding never fails a message: it reads as nothing
// recorded or as histograms that keep working, and what is encoded reads
// back the same.
func FuzzCriticalTimes(f *testing.F) {
	var c convoy.CriticalTimes
	at := time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC)
	c.Add(at, 120*time.Millisecond, time.Minute)
	f.Add(convoy.EncodeCriticalTimes(c), int64(250))
	f.Add(`{"w":60,"s":1,"c":{"b":[[3,1],[1,2]],"m":-5}}`, int64(-1))
	f.Add(fmt.Sprintf(`{"w":60,"s":%d,"c":{"b":[[30,1],[1,-2]],"m":-5}}`, at.Unix()), int64(0)) // corrupt, in the current window
	f.Add(`{"w":1e30}`, int64(0))
	f.Add(fmt.Sprintf(`{"w":60,"s":%d,"c":{"b":[[700,1]],"m":9000}}`, at.Unix()), int64(0)) // a bucket past int64's
	f.Fuzz(func(t *testing.T, stored string, ms int64) {
		c := convoy.DecodeCriticalTimes(stored)
		c.Add(at, time.Duration(ms)*time.Millisecond, time.Minute)
		h, _ := c.Recent(at, time.Minute)
		if h.Count() < 1 {
			t.Fatalf("added one time, %d recent", h.Count())
		}
		if p50, p99 := h.Percentile(0.5), h.Percentile(0.99); p50 < 0 || p50 > p99 || p99 > h.MaxMs {
			t.Fatalf("p50 %d, p99 %d, max %d: want 0 ≤ p50 ≤ p99 ≤ max", p50, p99, h.MaxMs)
		}
		again := convoy.DecodeCriticalTimes(convoy.EncodeCriticalTimes(c))
		if convoy.EncodeCriticalTimes(again) != convoy.EncodeCriticalTimes(c) {
			t.Fatalf("does not read back: %+v", c)
		}
	})
}
