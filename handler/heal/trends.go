package heal

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/convoy-dev/convoy/handler/convoy"
	"github.com/convoy-dev/convoy/handler/fault"
)

// TrendsKept is how many runs the trend series keeps: the last 120, two
// hours at AutoReplay's default schedule of one run a minute (less time
// with a shorter schedule, more with a longer one; never more points).
const TrendsKept = 120

// Unknown is a TrendPoint figure the run could not know: the dead letters
// when the sub-queue could not be read, the lag before a survey, critical
// time when no transaction was applied in the recent window.
const Unknown = -1

// trendMax bounds every figure of a stored point (twelve digits at most),
// so that the series' size is bounded by construction (trendsWorstCase).
const trendMax = 999_999_999_999

// TrendPoint is what one AutoReplay run found, a handful of integers: the
// series of the last TrendsKept runs is what the dashboard draws. Each
// figure is Unknown (-1) when the run could not know it.
type TrendPoint struct {
	At             time.Time `json:"at"`
	BlockedOrders  int64     `json:"blockedOrders"`
	ParkedMessages int64     `json:"parkedMessages"`
	// Dead letters in the orders queue's sub-queue by cause
	// (operator.Classify), as the run's one peek counted them.
	DeadTransient int64 `json:"deadLettersTransient"`
	DeadPermanent int64 `json:"deadLettersPermanent"`
	// The active orders by lag status (LagFigures.ByStatus).
	LagOK         int64 `json:"lagOk"`
	LagCatchingUp int64 `json:"lagCatchingUp"`
	LagStalled    int64 `json:"lagStalled"`
	LagBlocked    int64 `json:"lagBlocked"`
	// Critical time, milliseconds (LagFigures.CriticalTime).
	CriticalP50Ms int64 `json:"criticalTimeP50Ms"`
	CriticalP99Ms int64 `json:"criticalTimeP99Ms"`
	// Applied counts the transactions applied in the recent window of the
	// orders the run's lag survey read (CriticalTimeFigures.Count: a
	// transaction counts there once, when it is applied), AppliedSeconds
	// is that window's length (one to two lag windows): transactions
	// applied per minute are Applied×60/AppliedSeconds, a moving average.
	// AppliedPartial (0 or 1): the survey did not read every active order
	// this run (more of them than a run surveys, or it was cut short), so
	// the count is of those it read.
	Applied        int64 `json:"applied"`
	AppliedSeconds int64 `json:"appliedSeconds"`
	AppliedPartial int64 `json:"appliedPartial"`
}

// Trends is the series of the last runs' points, oldest first, at most
// TrendsKept of them; in Table Storage one string property of its own
// entity (never the Health record, which is near its 64 KiB at its worst).
type Trends struct {
	Points []TrendPoint `json:"points"`
}

// TrendsView is the series as the summary shows it.
type TrendsView struct {
	Kept   int          `json:"kept"` // TrendsKept: the most points the series holds
	Points []TrendPoint `json:"points"`
}

// add puts p in the series in order of At (an overlapping run may write
// after a later one) and drops the oldest past TrendsKept.
func (t *Trends) add(p TrendPoint) {
	i := len(t.Points)
	for i > 0 && t.Points[i-1].At.After(p.At) {
		i--
	}
	t.Points = slices.Insert(t.Points, i, p.bounded())
	if n := len(t.Points); n > TrendsKept {
		t.Points = slices.Delete(t.Points, 0, n-TrendsKept)
	}
}

// trendsVersion marks the stored encoding.
const trendsVersion = "t1"

// Encode is t as stored: "t1" and one line of integers per point, the
// time in Unix seconds, each figure cut to [Unknown, trendMax].
func (t Trends) Encode() string {
	var b strings.Builder
	b.WriteString(trendsVersion)
	for _, p := range t.Points {
		b.WriteByte('\n')
		for i, v := range p.ints() {
			if i > 0 {
				b.WriteByte(',')
			}
			fmt.Fprint(&b, v)
		}
	}
	return b.String()
}

// DecodeTrends reads what Encode wrote.
func DecodeTrends(s string) (Trends, error) {
	lines := strings.Split(s, "\n")
	if lines[0] != trendsVersion {
		return Trends{}, fault.Errorf(fault.Internal, "the trend series is not of version %s", trendsVersion)
	}
	t := Trends{Points: make([]TrendPoint, 0, len(lines)-1)}
	for _, line := range lines[1:] {
		var v [trendFields]int64
		fields := strings.Split(line, ",")
		if len(fields) != trendFields {
			return Trends{}, fault.Errorf(fault.Internal, "a point of the trend series has %d figures, not %d", len(fields), trendFields)
		}
		for i, f := range fields {
			if err := json.Unmarshal([]byte(f), &v[i]); err != nil {
				return Trends{}, fault.Wrap(fault.Internal, err, "decode the trend series")
			}
		}
		t.Points = append(t.Points, pointOf(v))
	}
	return t, nil
}

// trendFields is the number of integers of a stored point.
const trendFields = 14

func (p TrendPoint) ints() [trendFields]int64 {
	return [trendFields]int64{p.At.Unix(), p.BlockedOrders, p.ParkedMessages, p.DeadTransient, p.DeadPermanent,
		p.LagOK, p.LagCatchingUp, p.LagStalled, p.LagBlocked, p.CriticalP50Ms, p.CriticalP99Ms,
		p.Applied, p.AppliedSeconds, p.AppliedPartial}
}

func pointOf(v [trendFields]int64) TrendPoint {
	return TrendPoint{At: time.Unix(v[0], 0).UTC(), BlockedOrders: v[1], ParkedMessages: v[2], DeadTransient: v[3], DeadPermanent: v[4],
		LagOK: v[5], LagCatchingUp: v[6], LagStalled: v[7], LagBlocked: v[8], CriticalP50Ms: v[9], CriticalP99Ms: v[10],
		Applied: v[11], AppliedSeconds: v[12], AppliedPartial: v[13]}
}

// bounded is p with every figure within [Unknown, trendMax], and its time
// to the second between 1970 and the end of year 9999 (what JSON's times
// hold).
func (p TrendPoint) bounded() TrendPoint {
	v := p.ints()
	for i := range v {
		v[i] = min(max(v[i], Unknown), trendMax)
	}
	v[0] = min(max(v[0], 0), lastSecond)
	return pointOf(v)
}

// lastSecond is 9999-12-31T23:59:59Z in Unix seconds.
const lastSecond = 253402300799

// trendOf is the point of a run that found f at now.
func trendOf(f *Figures, now time.Time) TrendPoint {
	p := TrendPoint{At: now.UTC().Truncate(time.Second), BlockedOrders: int64(f.BlockedOrders), ParkedMessages: f.ParkedMessages,
		DeadTransient: Unknown, DeadPermanent: Unknown, LagOK: Unknown, LagCatchingUp: Unknown, LagStalled: Unknown, LagBlocked: Unknown,
		CriticalP50Ms: Unknown, CriticalP99Ms: Unknown, Applied: Unknown, AppliedSeconds: Unknown, AppliedPartial: Unknown}
	if d := f.DeadLetters; d != nil {
		p.DeadTransient, p.DeadPermanent = int64(d.Transient), int64(d.Permanent)
	}
	if l := f.Lag; l != nil {
		p.LagOK, p.LagCatchingUp = int64(l.ByStatus[convoy.LagOK]), int64(l.ByStatus[convoy.LagCatchingUp])
		p.LagStalled, p.LagBlocked = int64(l.ByStatus[convoy.LagStalled]), int64(l.ByStatus[convoy.LagBlocked])
		p.Applied, p.AppliedSeconds, p.AppliedPartial = 0, 2*l.Window, 0
		if !l.Complete || (l.OrdersPerRun > 0 && l.Orders > l.OrdersPerRun) {
			p.AppliedPartial = 1
		}
		if c := l.CriticalTime; c != nil {
			p.CriticalP50Ms, p.CriticalP99Ms = c.P50Ms, c.P99Ms
			p.Applied, p.AppliedSeconds = c.Count, c.SinceSeconds
		}
	}
	return p.bounded()
}

// addTrend adds a run's point to the stored series, under its ETag (runs
// overlap). A best effort, after the Health record: a failure leaves a gap
// in the charts, never the figures unwritten.
func (h *Healer) addTrend(ctx context.Context, f *Figures, now time.Time) {
	p := trendOf(f, now)
	for range 4 {
		t, etag, _, err := h.states.Trends(ctx)
		if err != nil {
			return
		}
		t.add(p)
		if _, err := h.states.PutTrends(ctx, t, etag); fault.CodeOf(err) != fault.Conflict {
			return
		}
	}
}

// trendsView is the stored series as the summary shows it: nil and why
// when it cannot be read.
func (h *Healer) trendsView(ctx context.Context) (*TrendsView, string) {
	t, _, _, err := h.states.Trends(ctx)
	if err != nil {
		return nil, "the trend series could not be read: " + cut(err.Error())
	}
	if t.Points == nil {
		t.Points = []TrendPoint{}
	}
	return &TrendsView{Kept: TrendsKept, Points: t.Points}, ""
}
