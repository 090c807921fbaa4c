package convoy

import (
	"encoding/json"
	"math"
	"slices"
	"time"
)

// CriticalTimes are an order's critical times (applied time minus enqueued
// time, docs/operations.md "Lag per order") over its recent windows, kept
// in its head and so written by the commit that applies: no round trip of
// their own. The windows are aligned on the Unix epoch, Window seconds
// long: the one the last applied transaction fell in (Cur, starting at
// Start) and the one before it (Prev). AutoReplay merges them over the
// active orders (Recent) into the summary's p50 / p99 / max.
//
// A histogram's buckets grow by 2^(1/4): bucket 0 holds times under 1 ms,
// bucket b ≥ 1 those in [2^((b−1)/4), 2^(b/4)) ms. A percentile is read as
// its bucket's upper end (at most the exact maximum, which each window
// keeps): never below the true value, at most 19 % above it.
type CriticalTimes struct {
	Window int64     `json:"w"` // seconds; 0: nothing recorded
	Start  int64     `json:"s"` // Unix seconds: the start of Cur's window
	Cur    Histogram `json:"c"`
	Prev   Histogram `json:"p"`
}

// Histogram counts critical times by bucket.
type Histogram struct {
	Buckets [][2]int64 `json:"b,omitempty"` // (bucket, count), by bucket
	MaxMs   int64      `json:"m,omitempty"`
}

// Count is how many times h holds.
func (h Histogram) Count() int64 {
	var n int64
	for _, b := range h.Buckets {
		n += b[1]
	}
	return n
}

// critBucket is the bucket of a critical time of ms milliseconds.
func critBucket(ms int64) int64 {
	if ms < 1 {
		return 0
	}
	return 1 + int64(math.Floor(critBucketsPerDoubling*math.Log2(float64(ms))))
}

// critUpper is the upper end of bucket b, in milliseconds.
func critUpper(b int64) int64 {
	if b == 0 {
		return 1
	}
	return int64(math.Ceil(math.Exp2(float64(b) / critBucketsPerDoubling)))
}

// critBucketsPerDoubling is how many buckets a histogram has per doubling
// of the time (a bucket's upper end at most 19 % above its lower): finer
// would cost each head more buckets. Stored histograms are numbered by it,
// so it cannot change without a new encoding.
const critBucketsPerDoubling = 4

func (h *Histogram) add(ms int64) {
	h.addCount(critBucket(ms), 1)
	h.MaxMs = max(h.MaxMs, ms)
}

func (h *Histogram) addCount(bucket, n int64) {
	i, found := slices.BinarySearchFunc(h.Buckets, bucket, func(e [2]int64, b int64) int { return int(e[0] - b) })
	if found {
		h.Buckets[i][1] += n
		return
	}
	h.Buckets = slices.Insert(h.Buckets, i, [2]int64{bucket, n})
}

// Merge adds o's counts to h.
func (h *Histogram) Merge(o Histogram) {
	for _, b := range o.Buckets {
		h.addCount(b[0], b[1])
	}
	h.MaxMs = max(h.MaxMs, o.MaxMs)
}

// Percentile is the q-quantile (0 < q ≤ 1) in milliseconds: the upper end
// of the bucket holding the ⌈q·n⌉-th smallest time, at most MaxMs; 0 when
// h is empty.
func (h Histogram) Percentile(q float64) int64 {
	n := h.Count()
	if n == 0 {
		return 0
	}
	rank := max(int64(math.Ceil(q*float64(n))), 1)
	var seen int64
	for _, b := range h.Buckets {
		if seen += b[1]; seen >= rank {
			return min(critUpper(b[0]), h.MaxMs)
		}
	}
	return h.MaxMs
}

// Add records a critical time d of a transaction applied at applied, over
// windows of window (at least a second).
func (c *CriticalTimes) Add(applied time.Time, d time.Duration, window time.Duration) {
	w := max(int64(window/time.Second), 1)
	start := applied.Unix() - mod(applied.Unix(), w)
	switch {
	case c.Window != w || start >= c.Start+2*w: // first, resized, or both windows gone by
		*c = CriticalTimes{Window: w, Start: start}
	case start == c.Start+w:
		c.Prev, c.Cur, c.Start = c.Cur, Histogram{}, start
	}
	// start ≤ c.Start: the same window, or a clock behind another
	// instance's: counted in the current one rather than lost.
	c.Cur.add(max(d, 0).Milliseconds())
}

// Recent is what c holds of the window now falls in and the one before it
// (the recent window: from since to now).
func (c CriticalTimes) Recent(now time.Time, window time.Duration) (h Histogram, since time.Time) {
	w := max(int64(window/time.Second), 1)
	from := now.Unix() - mod(now.Unix(), w) - w
	since = time.Unix(from, 0).UTC()
	if c.Window != w {
		return Histogram{}, since
	}
	if c.Start >= from {
		h.Merge(c.Cur)
	}
	if c.Start-w >= from {
		h.Merge(c.Prev)
	}
	return h, since
}

func mod(a, b int64) int64 { return ((a % b) + b) % b }

// Clone returns a copy that shares nothing with c.
func (c CriticalTimes) Clone() CriticalTimes {
	c.Cur.Buckets, c.Prev.Buckets = slices.Clone(c.Cur.Buckets), slices.Clone(c.Prev.Buckets)
	return c
}

// EncodeCriticalTimes is c as the head stores it ("" for nothing recorded).
func EncodeCriticalTimes(c CriticalTimes) string {
	if c.Window == 0 {
		return ""
	}
	b, _ := json.Marshal(c)
	return string(b)
}

// DecodeCriticalTimes reads what EncodeCriticalTimes wrote; anything else
// reads as nothing recorded (figures, never a reason to fail a message).
func DecodeCriticalTimes(s string) CriticalTimes {
	var c CriticalTimes
	if s == "" || json.Unmarshal([]byte(s), &c) != nil || c.Window <= 0 || !c.Cur.valid() || !c.Prev.valid() {
		return CriticalTimes{}
	}
	return c
}

// critLastBucket is the last bucket a time can fall in: that of the longest
// Duration, in milliseconds (213; bucket 252's upper end is past int64's).
var critLastBucket = critBucket(time.Duration(math.MaxInt64).Milliseconds())

// critMaxCount bounds what one stored histogram may count, so that two
// merged, plus the time being added, never overflow int64.
const critMaxCount = 1 << 60

// valid: buckets in order and within those a time can fall in, each
// counted, the total within critMaxCount, the maximum not negative.
func (h Histogram) valid() bool {
	var n int64
	for i, b := range h.Buckets {
		if b[0] < 0 || b[0] > critLastBucket || b[1] <= 0 || b[1] > critMaxCount-n || (i > 0 && b[0] <= h.Buckets[i-1][0]) {
			return false
		}
		n += b[1]
	}
	return h.MaxMs >= 0
}
