package heal

import (
	"context"
	"fmt"
	"sync"
	"time"
)

// Replay is one order replayed by a run.
type Replay struct {
	OrderID  string  `json:"orderId"`
	Seqs     []int64 `json:"seqs"`
	Attempt  int     `json:"attempt"`
	Left     int     `json:"left"` // dead letters of a permanent cause left for an operator
	NextWait string  `json:"nextWait"`
}

// Failure is one order whose replay failed.
type Failure struct {
	OrderID string `json:"orderId"`
	Error   string `json:"error"`
}

// Run is what one run did.
type Run struct {
	Summary   *Summary `json:"summary,omitempty"`
	Replayed  []Replay `json:"replayed"`
	Waiting   int      `json:"waiting"`   // orders whose backoff has not elapsed
	Elsewhere int      `json:"elsewhere"` // orders another run claimed or holds locked
	Deferred  int      `json:"deferred"`  // orders left for a later run: beyond its window, MaxOrders or deadline
	// Failed lists the orders whose replay failed or that the run could
	// not reach, at most MaxOrders of them; FailedMore counts the rest.
	Failed     []Failure `json:"failed,omitempty"`
	FailedMore int       `json:"failedMore,omitempty"`
	// Paused says why the run replayed nothing: the breaker is open, or
	// storage or Service Bus failed (then Summary may be nil).
	Paused string `json:"paused,omitempty"`
	// Unrecorded says that the run's figures could not be written into the
	// Health record, since when and why ("" when they were).
	Unrecorded string `json:"unrecorded,omitempty"`
}

// RunOnce is one timer run, bounded by ctx's deadline:
//
//  1. it reads the dead-letter queue once (a peek, locking nothing);
//  2. it reads every auto-replay state and the whole blocked index, records
//     in each blocked order's entry where its missing message is (when that
//     changed), and removes the states of orders with nothing left to replay;
//  3. unless disabled or the breaker is open, it claims up to MaxOrders
//     orders whose dead letters of a transient cause are due (blocked
//     orders first, then the oldest dead letters; each order no sooner than
//     its backoff allows), and replays them all in one pass over the
//     sub-queue (replay.All): each dead letter received once, the others
//     released;
//  4. it writes its figures and the breaker into the Health record, which
//     the summary and the dashboard read on any instance.
//
// Orders it could not reach (beyond MaxScan dead letters, or its deadline)
// are Failed, counted as Unreached, and wait for the next run. A run that
// finds storage or Service Bus failing opens the breaker for BreakerBase,
// doubled per failed run in a row up to BackoffMax; the first run after the
// pause that succeeds closes it.
func (h *Healer) RunOnce(ctx context.Context) Run {
	r := Run{Replayed: []Replay{}}
	now := h.opts.Now()
	hl, _, _, err := h.states.Health(ctx)
	if err != nil {
		r.Paused = h.tripLocal("storage is failing: " + cut(err.Error()))
		return r
	}
	if until, open := h.localOpen(now); open {
		// This instance's own pause after a run that found storage failing
		// (which it could not record in the Health record).
		r.Paused = fmt.Sprintf("circuit breaker open until %s after a run found storage failing", until.UTC().Format(time.RFC3339))
		return r
	}
	readCtx, cancel := h.reserve(ctx)
	defer cancel()
	dls, dlErr := h.deadLetters(readCtx)
	states, err := h.readStates(readCtx)
	if err != nil {
		r.Paused = h.trip(ctx, &r, "storage is failing: "+cut(err.Error()), nil)
		return r
	}
	var lagPass, blockedPass Pass // where the last run left the surveys
	if last := hl.LastRun; last != nil {
		lagPass, blockedPass = last.LagPass.clone(), last.BlockedPass.clone()
	}
	f, blocked, err := h.survey(readCtx, dls, dlErr, states, now, blockedPass)
	if err != nil {
		r.Paused = h.trip(ctx, &r, "storage is failing: "+cut(err.Error()), nil)
		return r
	}
	// The lag survey runs alongside the replay pass, and is waited for
	// before the figures are written, whichever way the run ends.
	lag := h.startLagSurvey(ctx, dls, now, lagPass, f)
	if dlErr != nil || h.opts.Disabled || now.Before(hl.Breaker.OpenUntil) {
		f.Lag = lag()
		sum := h.summaryOf(f, hl, now)
		r.Summary = &sum
	}
	if dlErr != nil {
		r.Paused = h.trip(ctx, &r, "Service Bus is failing: "+dlErr.Error(), f)
		return r
	}
	if h.opts.Disabled {
		h.record(ctx, &r, f, 0, &hl.Breaker)
		return r
	}
	if b := hl.Breaker; now.Before(b.OpenUntil) {
		r.Paused = fmt.Sprintf("circuit breaker open until %s after a failing run", b.OpenUntil.UTC().Format(time.RFC3339))
		h.record(ctx, &r, f, 0, nil)
		return r
	}
	replayed, settled, failed := h.replayDue(ctx, dls, blocked, states, now, &r)
	h.afterPass(ctx, f, dls, blocked, states, settled, now)
	f.Unreached, f.Deferred = len(r.Failed)+r.FailedMore, r.Deferred
	f.Lag = lag()
	sum := h.summaryOf(f, hl, now)
	r.Summary = &sum
	sum.AutoReplay.Unreached, sum.AutoReplay.Deferred = f.Unreached, f.Deferred
	if failed != "" {
		r.Paused = h.trip(ctx, &r, failed, f)
		return r
	}
	h.record(ctx, &r, f, replayed, &hl.Breaker)
	sum.AutoReplay.Replayed += replayed
	return r
}

// startLagSurvey starts surveyLag on its own goroutine; the function it
// returns waits for its figures, and puts the pass it leaves into f. The
// survey ends lagRecordMargin before ctx's deadline, leaving the run time
// to write them.
func (h *Healer) startLagSurvey(ctx context.Context, dls *DeadLetters, now time.Time, pass Pass, f *Figures) func() *LagFigures {
	ctx, cancel := context.WithCancel(ctx)
	if deadline, ok := ctx.Deadline(); ok {
		ctx, cancel = context.WithDeadline(ctx, deadline.Add(-lagRecordMargin))
	}
	type result struct {
		lag  *LagFigures
		pass Pass
	}
	done := make(chan result, 1)
	survey := func() {
		defer cancel()
		lag, pass := h.surveyLag(ctx, dls, now, pass)
		done <- result{lag, pass}
	}
	if h.opts.Sequential {
		survey()
	} else {
		go survey()
	}
	var lag *LagFigures
	var once sync.Once
	return func() *LagFigures {
		once.Do(func() {
			r := <-done
			lag = r.lag
			if lag != nil {
				f.LagPass = &r.pass
			}
		})
		return lag
	}
}

// lagRecordMargin is what the lag survey leaves of a run's deadline.
const lagRecordMargin = 3 * time.Second

// reserve is ctx ended PassTimeout before its deadline (the reads of a run
// leave its replay pass that much), when the deadline leaves the reads as
// long again; otherwise the reads have it all, and the pass is left to the
// next run.
func (h *Healer) reserve(ctx context.Context) (context.Context, context.CancelFunc) {
	deadline, ok := ctx.Deadline()
	if !ok || h.opts.PassTimeout <= 0 || time.Until(deadline) < 2*h.opts.PassTimeout {
		return context.WithCancel(ctx)
	}
	return context.WithDeadline(ctx, deadline.Add(-h.opts.PassTimeout))
}

// readStates reads every auto-replay state, page by page.
func (h *Healer) readStates(ctx context.Context) (map[string]State, error) {
	out := map[string]State{}
	after := ""
	for {
		page, more, err := h.states.ReplayStates(ctx, after, indexPage)
		if err != nil {
			return nil, fmt.Errorf("read auto-replay states: %w", err)
		}
		for _, st := range page {
			out[st.OrderID] = st
		}
		if !more || len(page) == 0 {
			return out, nil
		}
		after = page[len(page)-1].OrderID
	}
}

// parallel is n, or 1 for a Sequential healer.
func (h *Healer) parallel(n int) int {
	if h.opts.Sequential {
		return 1
	}
	return n
}

// fail lists orderID among r's failures, or counts it past limit of them
// (a run's lines and memory are bounded by its settings, not the backlog).
func (r *Run) fail(orderID, why string, limit int) {
	if len(r.Failed) >= limit {
		r.FailedMore++
		return
	}
	r.Failed = append(r.Failed, Failure{OrderID: orderID, Error: why})
}
