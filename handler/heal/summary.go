package heal

import (
	"context"
	"fmt"
	"time"

	"github.com/convoy-dev/convoy/handler/convoy"
	"github.com/convoy-dev/convoy/handler/operator"
)

// Summary is the health of every order at a glance.
type Summary struct {
	At                   string `json:"at"`
	BlockedOrders        int    `json:"blockedOrders"`
	BlockedComplete      bool   `json:"blockedComplete"` // false: more than one page of the index; the counts are the last run's
	OldestBlockedSince   string `json:"oldestBlockedSince,omitempty"`
	OldestBlockedSeconds int64  `json:"oldestBlockedSeconds"`
	ParkedMessages       int64  `json:"parkedMessages"`
	// MissingBy counts blocked orders by where their missing message is
	// ("deadLetter/transient", "deadLetter/permanent", "notDeadLettered", …).
	MissingBy map[string]int `json:"missingBy"`
	// FiguresAt is when the last AutoReplay run read the dead-letter queue:
	// DeadLetters, DeadLettersUnreadable, AutoReplay.Pending and Retrying,
	// and each missing message's whereabouts, are as of then ("" before the
	// first run).
	FiguresAt   string       `json:"figuresAt,omitempty"`
	DeadLetters *DeadLetters `json:"deadLetters"` // null when the last run could not read the sub-queue (or none ran)
	// DeadLettersUnreadable says why DeadLetters is null.
	DeadLettersUnreadable string     `json:"deadLettersUnreadable,omitempty"`
	AutoReplay            AutoReplay `json:"autoReplay"`
	// Lag is the lag of the active orders as the last AutoReplay run
	// surveyed it (LagFigures.At); null before the first.
	Lag *LagFigures `json:"lag"`
	// RecordFailingSince: the AutoReplay runs since then could not write
	// their figures into the auto-replay record (RecordFailingWhy says why):
	// the figures above are as of the last run that could, FiguresAt.
	RecordFailingSince string `json:"recordFailingSince,omitempty"`
	RecordFailingWhy   string `json:"recordFailingWhy,omitempty"`
	// Trends are the figures of the last TrendsKept runs, oldest first
	// (absent from a run's own summary, the metrics line);
	// TrendsUnreadable says why they are absent from the summary.
	Trends           *TrendsView `json:"trends,omitempty"`
	TrendsUnreadable string      `json:"trendsUnreadable,omitempty"`
}

// AutoReplay are the automatic replay's figures.
type AutoReplay struct {
	Enabled bool `json:"enabled"`
	// Replayed: messages re-sent by automatic replay, in all.
	Replayed int64 `json:"replayed"`
	// Pending: orders with a dead letter of a transient cause still in the
	// sub-queue (waiting for the next run, their backoff or the breaker).
	Pending int `json:"pending"`
	// Retrying: of those, orders already replayed at least once whose
	// dead letter came back (their cause is not over).
	Retrying int `json:"retrying"`
	// Unreached: orders the last run could not reach (Figures.Unreached);
	// Deferred: orders it left for a later run (Figures.Deferred).
	Unreached   int    `json:"unreached"`
	Deferred    int    `json:"deferred"`
	BreakerOpen bool   `json:"breakerOpen"`
	OpenUntil   string `json:"breakerOpenUntil,omitempty"`
	BreakerWhy  string `json:"breakerWhy,omitempty"`
}

// notRunYet is DeadLettersUnreadable before the first run.
const notRunYet = "not read yet: AutoReplay reads the dead-letter queue on each run, and none has run yet"

// Summarize is the summary from the Health record, the trend series and the
// first page of the blocked index: three reads of storage (plus one per
// index entry a crash left pending), nothing of Service Bus, whatever the
// outage's size. With more blocked orders than a page holds, the counts are
// the last run's. A series that cannot be read is said, not a failure.
func (h *Healer) Summarize(ctx context.Context) (Summary, error) {
	hl, _, _, err := h.states.Health(ctx)
	if err != nil {
		return Summary{}, fmt.Errorf("read the auto-replay record: %w", err)
	}
	entries, more, err := h.blocked.ScanBlocked(ctx, "", indexPage)
	if err != nil {
		return Summary{}, fmt.Errorf("list blocked orders: %w", err)
	}
	blocked, err := convoy.CheckEntries(ctx, h.blocked, entries)
	if err != nil {
		return Summary{}, fmt.Errorf("list blocked orders: %w", err)
	}
	now := h.opts.Now()
	s := Summary{At: now.UTC().Format(time.RFC3339), BlockedComplete: !more, AutoReplay: AutoReplay{Enabled: h.Enabled(), Replayed: hl.Replayed}}
	counts := countBlocked(blocked, hl.LastRun)
	s.BlockedOrders, s.ParkedMessages, s.MissingBy = counts.BlockedOrders, counts.ParkedMessages, counts.MissingBy
	if more && hl.LastRun != nil && hl.LastRun.BlockedOrders > len(blocked) {
		s.BlockedOrders, s.ParkedMessages, s.MissingBy = hl.LastRun.BlockedOrders, hl.LastRun.ParkedMessages, hl.LastRun.MissingBy
	}
	if len(blocked) > 0 {
		s.OldestBlockedSince = blocked[0].BlockedSince // the index is oldest first
		s.OldestBlockedSeconds = secondsSince(s.OldestBlockedSince, now)
	}
	s.DeadLettersUnreadable = notRunYet
	if f := hl.LastRun; f != nil {
		s.FiguresAt = f.At.UTC().Format(time.RFC3339)
		s.DeadLetters, s.DeadLettersUnreadable = f.DeadLetters, f.DeadLettersUnreadable
		s.AutoReplay.Pending, s.AutoReplay.Retrying, s.AutoReplay.Unreached, s.AutoReplay.Deferred = f.Pending, f.Retrying, f.Unreached, f.Deferred
		s.Lag = f.Lag
	}
	if b := hl.Breaker; now.Before(b.OpenUntil) {
		s.AutoReplay.BreakerOpen, s.AutoReplay.OpenUntil, s.AutoReplay.BreakerWhy = true, b.OpenUntil.UTC().Format(time.RFC3339), b.Why
	}
	s.unwritten(hl.Unwritten)
	s.Trends, s.TrendsUnreadable = h.trendsView(ctx)
	return s, nil
}

// unwritten shows a record that could not be written since u.Since (nil:
// none).
func (s *Summary) unwritten(u *Unwritten) {
	if u != nil {
		s.RecordFailingSince, s.RecordFailingWhy = u.Since.UTC().Format(time.RFC3339), u.Why
	}
}

// secondsSince is how long before now the RFC 3339 time since was (0 for
// none).
func secondsSince(since string, now time.Time) int64 {
	t, err := time.Parse(time.RFC3339Nano, since)
	if since == "" || err != nil {
		return 0
	}
	return max(0, int64(now.Sub(t)/time.Second))
}

// countBlocked sums up blocked orders (the Figures' blocked counts).
func countBlocked(blocked []convoy.BlockedOrder, last *Figures) Figures {
	f := Figures{BlockedOrders: len(blocked), MissingBy: map[string]int{}}
	for _, o := range blocked {
		f.ParkedMessages += int64(o.Parked)
		f.MissingBy[missingKey(o, last)]++
	}
	return f
}

// missingKey is where o's missing message is, as MissingBy counts it: one
// of a few keys (a note saying otherwise counts as WhereUnknown), so that
// what the Health record keeps per key is bounded.
func missingKey(o convoy.BlockedOrder, last *Figures) string {
	m := missingOf(o, last)
	switch {
	case (m.Where == WhereDeadLetter || m.Where == WhereDeadLetterNoSeq) && (m.Cause == operator.Transient || m.Cause == operator.Permanent):
		return m.Where + "/" + m.Cause
	case m.Where == WhereNotDeadLettered:
		return m.Where
	}
	return WhereUnknown
}

// summaryOf is the summary a run writes its metrics line from.
func (h *Healer) summaryOf(f *Figures, hl Health, now time.Time) Summary {
	s := Summary{At: now.UTC().Format(time.RFC3339), BlockedOrders: f.BlockedOrders, BlockedComplete: f.BlockedComplete,
		ParkedMessages: f.ParkedMessages, MissingBy: f.MissingBy, FiguresAt: f.At.UTC().Format(time.RFC3339),
		DeadLetters: f.DeadLetters, DeadLettersUnreadable: f.DeadLettersUnreadable,
		AutoReplay:         AutoReplay{Enabled: h.Enabled(), Replayed: hl.Replayed, Pending: f.Pending, Retrying: f.Retrying},
		OldestBlockedSince: f.OldestBlockedSince, Lag: f.Lag}
	s.OldestBlockedSeconds = secondsSince(f.OldestBlockedSince, now)
	s.unwritten(hl.Unwritten)
	return s
}
