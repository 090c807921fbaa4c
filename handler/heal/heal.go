package heal

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/convoy-dev/convoy/handler/convoy"
	"github.com/convoy-dev/convoy/handler/fault"
	"github.com/convoy-dev/convoy/handler/replay"
)

// State is an order's automatic replay state, shared by every instance.
type State struct {
	OrderID string `json:"-"`
	// Seq is the lowest seq of the order dead-lettered for a transient cause
	// when the attempt was claimed; a new Seq starts the backoff over.
	Seq         int64     `json:"seq"`
	Attempts    int       `json:"attempts"`
	LastAttempt time.Time `json:"lastAttempt"`
	NextAttempt time.Time `json:"nextAttempt"`
	Replayed    int64     `json:"replayed"` // messages re-sent by automatic replay, in all
	LastError   string    `json:"lastError,omitempty"`
	ETag        string    `json:"-"` // as ReplayStates read it
}

// StateStore keeps the States and the shared Health record (in Table
// Storage: tablestore.Store).
type StateStore interface {
	// ReplayState reads an order's state and its ETag; ok is false when it
	// has none.
	ReplayState(ctx context.Context, orderID string) (s State, etag string, ok bool, err error)
	// PutReplayState writes s only if the stored state still has etag ("":
	// only if there is none), and returns the new ETag; a fault.Conflict
	// when another writer came first.
	PutReplayState(ctx context.Context, s State, etag string) (string, error)
	// DeleteReplayState removes an order's state only if it still has etag
	// (gone or changed: no error).
	DeleteReplayState(ctx context.Context, orderID, etag string) error
	// ReplayStates lists up to limit states of the orders after after (""
	// from the first), by order id, each with its ETag, and whether more
	// follow.
	ReplayStates(ctx context.Context, after string, limit int) ([]State, bool, error)
	// Health reads the shared record; the zero Health, "" and ok false when
	// there is none yet.
	Health(ctx context.Context) (h Health, etag string, ok bool, err error)
	// PutHealth writes h only if the record still has etag ("": only if
	// there is none); a fault.Conflict otherwise.
	PutHealth(ctx context.Context, h Health, etag string) (string, error)
}

// Options tune a Healer; the zero value works (and replays).
type Options struct {
	Disabled    bool          // AutoReplayEnabled=false: figures only, no replay
	BackoffBase time.Duration // wait after an order's first attempt (default 1 min); doubled per attempt
	BackoffMax  time.Duration // the longest wait between attempts (default 1 h); also the breaker's
	BreakerBase time.Duration // pause after a failed run (default 1 min); doubled per failed run in a row
	MaxOrders   int           // orders replayed per run (default 1,000)
	// MaxScan is replay.Options.MaxScan: the dead letters a run's replay
	// pass receives at most (and so holds locked). Its one peek reads at
	// most 10 times as many.
	MaxScan int
	// PeekTimeout bounds the run's one read of the dead-letter sub-queue
	// (0: the run's deadline only). What was read by then is used, marked
	// incomplete; nothing read means the sub-queue could not be read.
	PeekTimeout time.Duration
	// PassTimeout is what a run keeps for its replay pass: it ends the
	// reading of the index and the states that much before its deadline,
	// and starts no pass with less left (0: no reserve).
	PassTimeout time.Duration
	// Active is the active-orders index whose lag each run surveys
	// (surveyLag), over windows of LagWindow (default
	// convoy.DefaultLagWindow); nil: no lag survey.
	Active    convoy.ActiveIndex
	LagWindow time.Duration
	// LagPerRun and BlockedPerRun are what a run surveys at most of the
	// active-orders index and verifies of the blocked index (defaults
	// DefaultLagPerRun, DefaultBlockedPerRun), each from where the last run
	// stopped (Pass): a run's requests are set by them, not by the number of
	// orders.
	LagPerRun     int
	BlockedPerRun int
	// Sequential makes a run one step at a time: its surveys read one
	// entry at a time, and the lag survey runs before the replay pass
	// instead of alongside it (the healing simulation's runs are then
	// deterministic).
	Sequential bool
	Now        func() time.Time
	// Resume drains a blocked order whose missing seq is parked, a drain
	// cut short (convoy.Processor.Resume); nil: not done.
	Resume func(ctx context.Context, orderID string) (convoy.Result, error)
}

func (o Options) backoff(attempts int) time.Duration {
	return double(o.BackoffBase, attempts, o.BackoffMax)
}

func double(base time.Duration, n int, cap time.Duration) time.Duration {
	d := base
	for i := 1; i < n && d < cap; i++ {
		d *= 2
	}
	return min(d, cap)
}

// Opener opens the dead-letter sub-queue and a sender to the orders queue
// for one run; close releases them.
type Opener func() (src replay.Source, sender convoy.Sender, close func(), err error)

// Healer runs automatic replay and sums up the orders' health.
type Healer struct {
	blocked convoy.BlockedIndex
	orders  replay.OrderReader
	states  StateStore
	open    Opener
	opts    Options

	// local is the breaker of this instance while storage cannot be read
	// (the shared one, in Health, cannot be read either then).
	mu    sync.Mutex
	local Breaker
}

// Defaults of Options (the app settings AutoReplay… default to them).
const (
	DefaultBackoffBase = time.Minute
	DefaultBackoffMax  = time.Hour
	DefaultBreakerBase = time.Minute
	// DefaultMaxOrders: a run's cost is per dead letter (each received
	// once, in one pass), not per order, so a run claims every due order
	// its deadline lets it replay.
	DefaultMaxOrders = 1000
)

// indexPage is how many index entries or states one query reads: the most
// a page of Table Storage holds.
const indexPage = 1000

// New returns a Healer.
func New(blocked convoy.BlockedIndex, orders replay.OrderReader, states StateStore, open Opener, opts Options) *Healer {
	if opts.BackoffBase <= 0 {
		opts.BackoffBase = DefaultBackoffBase
	}
	if opts.BackoffMax <= 0 {
		opts.BackoffMax = DefaultBackoffMax
	}
	opts.BackoffMax = max(opts.BackoffMax, opts.BackoffBase)
	if opts.BreakerBase <= 0 {
		opts.BreakerBase = DefaultBreakerBase
	}
	if opts.MaxOrders <= 0 {
		opts.MaxOrders = DefaultMaxOrders
	}
	if opts.MaxScan <= 0 {
		opts.MaxScan = replay.DefaultMaxScan
	}
	if opts.LagPerRun <= 0 {
		opts.LagPerRun = DefaultLagPerRun
	}
	if opts.BlockedPerRun <= 0 {
		opts.BlockedPerRun = DefaultBlockedPerRun
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	return &Healer{blocked: blocked, orders: orders, states: states, open: open, opts: opts}
}

// Enabled reports whether runs replay.
func (h *Healer) Enabled() bool { return !h.opts.Disabled }

// BlockedWithCause is one blocked order with where its missing message is.
type BlockedWithCause struct {
	convoy.BlockedOrder
	Missing Missing `json:"missing"`
}

// Explain adds to each blocked order where its missing message is, as
// recorded in its index entry by the last run that learnt it (or a replay
// or a skip): one read of the Health record, nothing of Service Bus.
func (h *Healer) Explain(ctx context.Context, orders []convoy.BlockedOrder) ([]BlockedWithCause, error) {
	hl, _, _, err := h.states.Health(ctx)
	if err != nil {
		return nil, fmt.Errorf("read the auto-replay record: %w", err)
	}
	out := make([]BlockedWithCause, len(orders))
	for i, o := range orders {
		out[i] = BlockedWithCause{BlockedOrder: o, Missing: missingOf(o, hl.LastRun)}
	}
	return out, nil
}

// deadLetters is one read of the dead-letter sub-queue within PeekTimeout;
// its error is an *UnreadableError.
//
// The read runs on its own goroutine and is given up at the deadline even
// if it has not returned: azservicebus holds one lock per client while it
// opens a connection, and opening a receiver waits for that lock without a
// context, so a read could otherwise wait for another call's connection
// attempt (bounded by that call's own deadline) past its own. A read given
// up ends, and closes its source, when the SDK lets it.
func (h *Healer) deadLetters(ctx context.Context) (*DeadLetters, error) {
	if h.opts.PeekTimeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, h.opts.PeekTimeout)
		defer cancel()
	}
	type result struct {
		d   *DeadLetters
		err error
	}
	done := make(chan result, 1)
	go func() {
		src, _, close, err := h.open()
		if err != nil {
			done <- result{err: err}
			return
		}
		defer close()
		d, err := ReadDeadLetters(ctx, src, peekPerScan*max(h.opts.MaxScan, replay.DefaultMaxScan))
		done <- result{d, err}
	}()
	var r result
	if deadline, ok := ctx.Deadline(); ok {
		giveUp := time.NewTimer(time.Until(deadline) + readGrace)
		defer giveUp.Stop()
		select {
		case r = <-done:
		case <-giveUp.C:
			r.err = context.DeadlineExceeded
		}
	} else {
		r = <-done
	}
	if r.err != nil {
		return nil, &UnreadableError{Err: r.err, Within: h.opts.PeekTimeout}
	}
	return r.d, nil
}

// The bounds of a run's one read of the dead-letter sub-queue.
const (
	// peekPerScan: the peek reads this many dead letters for each one the
	// pass may receive (MaxScan), as replay's closing peek does, so that the
	// figures see past the pass's window (what lies beyond it is reported,
	// not replayed) while the peek stays bounded by the settings.
	peekPerScan = 10
	// readGrace: a read that stops at the deadline by itself returns what it
	// read (ReadDeadLetters); it is given this moment to before it is given
	// up.
	readGrace = 250 * time.Millisecond
	// maxUnreadableWhy: room for a queue name and the network error in the
	// why of an UnreadableError.
	maxUnreadableWhy = 240
)

// UnreadableError is a dead-letter sub-queue that could not be read at all:
// Service Bus refused, failed or did not answer within PeekTimeout.
type UnreadableError struct {
	Err    error
	Within time.Duration // PeekTimeout, when there was one
}

// Error names the cause in one short sentence (it is the "why" of a blocked
// order whose missing message cannot be looked for).
func (e *UnreadableError) Error() string {
	why := fault.MessageOf(e.Err)
	if len(why) > maxUnreadableWhy {
		why = why[:maxUnreadableWhy] + "…"
	}
	if errors.Is(e.Err, context.DeadlineExceeded) && e.Within > 0 {
		why = fmt.Sprintf("Service Bus did not answer within %s", e.Within)
	}
	return "the dead-letter queue could not be read: " + why
}

func (e *UnreadableError) Unwrap() error { return e.Err }

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

// Summarize is the summary from the Health record and the first page of the
// blocked index: two reads of storage (plus one per index entry a crash
// left pending), nothing of Service Bus, whatever the outage's size. With
// more blocked orders than a page holds, the counts are the last run's.
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
	return s, nil
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
		r.Paused = h.trip(ctx, "storage is failing: "+cut(err.Error()), nil)
		return r
	}
	var lagPass, blockedPass Pass // where the last run left the surveys
	if last := hl.LastRun; last != nil {
		lagPass, blockedPass = last.LagPass.clone(), last.BlockedPass.clone()
	}
	f, blocked, err := h.survey(readCtx, dls, dlErr, states, now, blockedPass)
	if err != nil {
		r.Paused = h.trip(ctx, "storage is failing: "+cut(err.Error()), nil)
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
		r.Paused = h.trip(ctx, "Service Bus is failing: "+dlErr.Error(), f)
		return r
	}
	if h.opts.Disabled {
		h.record(ctx, f, 0, true)
		return r
	}
	if b := hl.Breaker; now.Before(b.OpenUntil) {
		r.Paused = fmt.Sprintf("circuit breaker open until %s after a failing run", b.OpenUntil.UTC().Format(time.RFC3339))
		h.record(ctx, f, 0, false)
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
		r.Paused = h.trip(ctx, failed, f)
		return r
	}
	h.record(ctx, f, replayed, true)
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

// blockedParallelism is how many blocked index entries a run verifies at
// once (a head read each, and a resume for some).
const blockedParallelism = 16

// DefaultBlockedPerRun is how many entries of the blocked index a run
// verifies at most (the app setting AutoReplayBlockedPerRun defaults to
// it): every blocked order up to 5,000 is looked at every run, 100,000
// every 20 runs.
const DefaultBlockedPerRun = 5000

// survey verifies up to BlockedPerRun entries of the blocked index, from
// where the last run stopped (pass; until ctx ends): it resumes cut drains,
// records each blocked order's whereabouts where they changed, and sums it
// all up, each blocked order as its latest survey found it (Pass.rolling);
// the oldest blocked order is read from the index's first page. It also
// removes the states of orders with nothing left to replay. It returns the
// figures, the entries it found blocked, and the pass as it leaves it.
func (h *Healer) survey(ctx context.Context, dls *DeadLetters, dlErr error, states map[string]State, now time.Time, pass Pass) (*Figures, map[string]convoy.BlockedEntry, error) {
	f := &Figures{At: now, DeadLetters: dls, States: len(states), StatesComplete: true}
	if dlErr != nil {
		f.DeadLettersUnreadable = dlErr.Error()
	}
	first, _, err := h.blocked.ScanBlocked(ctx, "", firstBlocked)
	if err != nil {
		return nil, nil, fmt.Errorf("list blocked orders: %w", err)
	}
	entries, end, err := collect(ctx, pass.After, h.opts.BlockedPerRun, h.blocked.ScanBlocked, func(e convoy.BlockedEntry) string { return e.Key })
	if err != nil && (len(entries) == 0 || ctx.Err() == nil) {
		return nil, nil, fmt.Errorf("list blocked orders: %w", err)
	}
	// Each entry verified against its order's head (convoy.VerifyEntries),
	// and its drain resumed when its missing seq is not a dead letter (maybe
	// parked: a drain cut short), by its place in entries.
	listed := make([]*convoy.BlockedOrder, len(entries))
	finished := make([]bool, len(entries))
	var mu sync.Mutex
	work := make(chan int)
	var wg sync.WaitGroup
	for range min(h.parallel(blockedParallelism), len(entries)) {
		wg.Go(func() {
			for i := range work {
				if ctx.Err() != nil {
					continue
				}
				os, err := convoy.VerifyEntries(ctx, h.blocked, entries[i:i+1])
				if err == nil && len(os) > 0 { // otherwise pending, stale or unreadable now: the next pass looks again
					o, still := os[0], true
					if dls == nil || dls.Missing(o.OrderID, o.MissingSeq, o.AppliedSeq).Where != WhereDeadLetter {
						o, still = h.resume(ctx, o)
					}
					if still {
						listed[i] = &o
					}
				}
				mu.Lock()
				finished[i] = ctx.Err() == nil
				mu.Unlock()
			}
		})
	}
	for i := range entries {
		work <- i
	}
	close(work)
	wg.Wait()

	n := done(finished)
	var notes []convoy.BlockedNote
	blocked := map[string]convoy.BlockedEntry{}
	counts := Counts{}
	for i, e := range entries[:n] {
		o := listed[i]
		if o == nil {
			continue
		}
		blocked[o.OrderID] = e
		if dls != nil {
			m := dls.Missing(o.OrderID, o.MissingSeq, o.AppliedSeq)
			if st, ok := states[o.OrderID]; ok {
				st.ETag = ""
				m.AutoReplay = &st
			}
			if note, changed := encodeNote(m, now, e.Note); changed {
				notes = append(notes, convoy.BlockedNote{Entry: e, Note: note})
				o.Note = note
			}
		}
		counts["n"]++
		counts[blockedParked] += int64(o.Parked)
		counts[blockedMissing+missingKey(*o, f)]++
	}
	_ = h.blocked.SetNotes(ctx, notes) // best effort: the next run writes what this one could not
	to := pass.After
	if n > 0 {
		to = entries[n-1].Key
	}
	cutShort := n < len(entries) || err != nil
	pass.advance(to, counts, nil, end && !cutShort, now)
	all, _ := pass.rolling()
	f.BlockedPass = &pass
	f.BlockedComplete = pass.Last != nil && !cutShort
	f.BlockedOrders, f.ParkedMessages, f.MissingBy = int(all["n"]), all[blockedParked], map[string]int{}
	for k, v := range all {
		if where, ok := strings.CutPrefix(k, blockedMissing); ok && v > 0 {
			f.MissingBy[where] = int(v)
		}
	}
	if oldest, err := convoy.CheckEntries(ctx, h.blocked, first); err == nil && len(oldest) > 0 {
		f.OldestBlockedSince = oldest[0].BlockedSince // the index is oldest first
	}
	if dls != nil {
		f.Pending, f.Retrying = dls.pending(states)
		due := map[string]bool{}
		for _, c := range dls.transientOrders() {
			due[c.orderID] = true
		}
		// States of orders with nothing left to replay: removed once their
		// backoff is over (a dead letter that comes back later starts over).
		// A peek that did not read the whole sub-queue cannot tell that of an
		// order it did not see: its state goes once its backoff has been
		// over for BackoffMax (all it could still tell is how far to double
		// the next wait), so that the states a run reads are bounded by the
		// settings (the orders claimed in that time, and the peek's), not by
		// the orders ever replayed.
		for id, st := range states {
			over := !now.Before(st.NextAttempt) && (dls.Complete || !now.Before(st.NextAttempt.Add(h.opts.BackoffMax)))
			if !due[id] && over && ctx.Err() == nil {
				_ = h.states.DeleteReplayState(ctx, id, st.ETag) // best effort: the next run tries again
			}
		}
	}
	return f, blocked, nil
}

// Blocked counts' names in a Pass's segments (besides "n"): parked
// messages, and blocked orders by where their missing message is.
const (
	blockedParked  = "parked"
	blockedMissing = "missing:"
)

// firstBlocked is how many entries of the index's first page a run checks
// for the oldest blocked order (a pending one costs a head read).
const firstBlocked = 10

// missingKey is where o's missing message is, as MissingBy counts it.
func missingKey(o convoy.BlockedOrder, last *Figures) string {
	m := missingOf(o, last)
	if m.Cause != "" {
		return m.Where + "/" + m.Cause
	}
	return m.Where
}

// resume resumes o's drain when its missing seq proves parked; it returns
// o as the drain left it, and whether it is still blocked.
func (h *Healer) resume(ctx context.Context, o convoy.BlockedOrder) (convoy.BlockedOrder, bool) {
	if h.opts.Resume == nil {
		return o, true
	}
	res, err := h.opts.Resume(ctx, o.OrderID)
	if err != nil || res.AppliedSeq == o.AppliedSeq {
		return o, true // nothing parked at its missing seq (or unreadable now: the next run tries)
	}
	if res.Parked == 0 {
		return o, false
	}
	o.AppliedSeq, o.Parked, o.MissingSeq = res.AppliedSeq, res.Parked, res.AppliedSeq+1
	return o, true
}

// afterPass brings a run's figures up to what its pass settled, and records
// in the entries of the blocked orders it replayed that their missing
// messages are on their way back.
func (h *Healer) afterPass(ctx context.Context, f *Figures, dls *DeadLetters, blocked map[string]convoy.BlockedEntry, states map[string]State, settled map[string]*replay.OrderProgress, now time.Time) {
	if len(settled) == 0 {
		return
	}
	var notes []convoy.BlockedNote
	for _, id := range slices.Sorted(maps.Keys(settled)) {
		p := settled[id]
		dls.settled(id, append(slices.Clone(p.Replayed), p.Duplicates...))
		if e, ok := blocked[id]; ok && len(p.Replayed) > 0 {
			n, _ := encodeNote(Missing{Where: WhereNotDeadLettered,
				Why: fmt.Sprintf("re-sent by AutoReplay at %s (seqs %v): on its way back to the order", now.UTC().Format(time.RFC3339), p.Replayed)}, now, "")
			e.ETag = "*" // its note was written by this run since it was read
			notes = append(notes, convoy.BlockedNote{Entry: e, Note: n})
		}
	}
	_ = h.blocked.SetNotes(ctx, notes) // best effort: the next run records where they are
	f.Pending, f.Retrying = dls.pending(states)
}

// summaryOf is the summary a run writes its metrics line from.
func (h *Healer) summaryOf(f *Figures, hl Health, now time.Time) Summary {
	s := Summary{At: now.UTC().Format(time.RFC3339), BlockedOrders: f.BlockedOrders, BlockedComplete: f.BlockedComplete,
		ParkedMessages: f.ParkedMessages, MissingBy: f.MissingBy, FiguresAt: f.At.UTC().Format(time.RFC3339),
		DeadLetters: f.DeadLetters, DeadLettersUnreadable: f.DeadLettersUnreadable,
		AutoReplay:         AutoReplay{Enabled: h.Enabled(), Replayed: hl.Replayed, Pending: f.Pending, Retrying: f.Retrying},
		OldestBlockedSince: f.OldestBlockedSince, Lag: f.Lag}
	s.OldestBlockedSeconds = secondsSince(f.OldestBlockedSince, now)
	return s
}

// replayDue claims the due orders and replays them in one pass; it returns
// how many messages were re-sent, and why the run failed ("" if it did not).
func (h *Healer) replayDue(ctx context.Context, dls *DeadLetters, blocked map[string]convoy.BlockedEntry, states map[string]State, now time.Time, r *Run) (int64, map[string]*replay.OrderProgress, string) {
	todo := dls.transientOrders()
	for i := range todo {
		_, todo[i].blocked = blocked[todo[i].orderID]
	}
	slices.SortStableFunc(todo, func(a, b candidate) int {
		switch {
		case a.blocked && !b.blocked:
			return -1
		case b.blocked && !a.blocked:
			return 1
		}
		return 0
	})
	// The run's window: the first MaxScan dead letters of the sub-queue,
	// which its one pass can receive. Orders with a dead letter due in it
	// are claimed; the others wait for a later run (the window moves as
	// what it replays is completed), unless nothing in it can be replayed:
	// then what lies beyond is never reached, and the run says so.
	windowEnd := dls.windowEnd(h.opts.MaxScan)
	claims := map[string]claim{}
	var beyond []string
	for _, c := range todo {
		if len(claims) >= h.opts.MaxOrders {
			r.Deferred++ // the rest wait for the next run
			continue
		}
		if c.qseq > windowEnd {
			beyond = append(beyond, c.orderID)
			continue
		}
		st, ok := states[c.orderID] // read by this run, with its ETag
		etag := st.ETag
		if !ok || st.Seq != c.seq {
			st = State{OrderID: c.orderID, Seq: c.seq, Replayed: st.Replayed}
		} else if now.Before(st.NextAttempt) {
			r.Waiting++
			continue
		}
		st.OrderID, st.ETag = c.orderID, ""
		st.Attempts++
		st.LastAttempt, st.NextAttempt = now, now.Add(h.opts.backoff(st.Attempts))
		// The claim: of two runs that read the same state, one writes it.
		etag, err := h.states.PutReplayState(ctx, st, etag)
		if err != nil {
			if fault.CodeOf(err) == fault.Conflict {
				r.Elsewhere++
				continue
			}
			return 0, nil, "storage is failing: " + cut(err.Error())
		}
		claims[c.orderID] = claim{st: st, etag: etag, left: dls.permanentOf(c.orderID)}
	}
	if len(beyond) > 0 && len(claims) == 0 && r.Waiting == 0 {
		why := fmt.Sprintf("its dead letters lie beyond the first %d of the dead-letter queue, none of which this run can replay (ReplayScanLimit): skip the gaps of the dead letters of a permanent cause, or raise ReplayScanLimit", h.opts.MaxScan)
		for _, id := range beyond {
			r.fail(id, why, h.opts.MaxOrders)
		}
	} else {
		r.Deferred += len(beyond)
	}
	if len(claims) == 0 {
		return 0, nil, ""
	}
	if deadline, ok := ctx.Deadline(); ok && time.Until(deadline) < h.opts.PassTimeout/2 {
		h.giveBack(ctx, claims, now, "")
		r.Deferred += len(claims) // the run's deadline came before its pass
		return 0, nil, ""
	}
	src, sender, close, err := h.open()
	if err != nil {
		h.giveBack(ctx, claims, now, "")
		return 0, nil, "Service Bus is failing: " + cut(err.Error())
	}
	defer close()
	pass, perr := replay.All(ctx, src, sender, replay.AllOptions{Options: replay.Options{MaxScan: h.opts.MaxScan, Orders: h.orders,
		Select: func(d replay.DeadLetter) bool {
			_, ok := claims[d.SessionID]
			return ok && Classify(d, -1).Class == Transient
		}}, Max: h.opts.MaxScan, NoClosingPeek: true, StopAt: dls.lastTransientOf(claims)})
	var replayed int64
	unreached := []string{}
	ids := slices.Sorted(maps.Keys(claims))
	for _, id := range ids {
		c := claims[id]
		done := pass.ByOrder[id]
		if done == nil {
			unreached = append(unreached, id)
			continue
		}
		c.st.Replayed += int64(len(done.Replayed))
		replayed += int64(len(done.Replayed))
		_, _ = h.states.PutReplayState(ctx, c.st, c.etag) // best effort: the claim already holds the backoff
		if len(done.Replayed) > 0 {
			r.Replayed = append(r.Replayed, Replay{OrderID: id, Seqs: done.Replayed, Attempt: c.st.Attempts, Left: c.left,
				NextWait: h.opts.backoff(c.st.Attempts).String()})
		}
	}
	if perr != nil {
		for _, id := range unreached {
			r.fail(id, cut(perr.Error()), h.opts.MaxOrders)
		}
		return replayed, pass.ByOrder, "a replay failed: " + cut(perr.Error())
	}
	for _, id := range unreached {
		switch {
		case pass.Scanned >= h.opts.MaxScan:
			// Behind MaxScan dead letters it keeps (of a permanent cause, or
			// of orders not due): never reached however often it runs.
			r.fail(id, fmt.Sprintf(
				"its dead letters lie beyond the first %d of the dead-letter queue, which this run received and left (ReplayScanLimit): skip the gaps of the dead letters of a permanent cause, or raise ReplayScanLimit", h.opts.MaxScan), h.opts.MaxOrders)
		case ctx.Err() != nil:
			// The run's deadline came before its dead letters.
			r.Deferred++
			h.giveBack(ctx, map[string]claim{id: claims[id]}, now, "")
		default:
			// Locked by another reader (a replay by an operator): no
			// attempt; the claim is given back so that the next run tries.
			r.Elsewhere++
			h.giveBack(ctx, map[string]claim{id: claims[id]}, now, "")
		}
	}
	return replayed, pass.ByOrder, ""
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

// claim is an order's state as a run claimed it.
type claim struct {
	st   State
	etag string
	left int // dead letters of a permanent cause, left for an operator
}

// giveBack undoes claims: no attempt was made.
func (h *Healer) giveBack(ctx context.Context, claims map[string]claim, now time.Time, why string) {
	for _, c := range claims {
		c.st.Attempts--
		c.st.NextAttempt = now
		c.st.LastError = why
		_, _ = h.states.PutReplayState(ctx, c.st, c.etag) // best effort
	}
}

// record writes a run's figures, and what it replayed, into the Health
// record; closed closes the breaker (a run that succeeded). Best effort: a
// run that cannot write it has found storage failing, and the next one will.
func (h *Healer) record(ctx context.Context, f *Figures, replayed int64, closed bool) {
	ctx, cancel := recordContext(ctx)
	defer cancel()
	_, _ = updateHealth(ctx, h.states, func(hl *Health) {
		hl.LastRun, hl.Replayed = f, hl.Replayed+replayed
		if closed {
			hl.Breaker = Breaker{}
		}
	})
	if closed {
		h.mu.Lock()
		h.local = Breaker{}
		h.mu.Unlock()
	}
}

// recordTimeout bounds the write of a run's record, which happens even when
// the run's own deadline has passed (what it learnt is worth keeping).
const recordTimeout = 10 * time.Second

func recordContext(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.WithoutCancel(ctx), recordTimeout)
}

// trip records a failed run and opens the breaker, in the Health record
// (with the run's figures, when it has them); it returns why.
func (h *Healer) trip(ctx context.Context, why string, f *Figures) string {
	now := h.opts.Now()
	var b Breaker
	ctx, cancel := recordContext(ctx)
	defer cancel()
	_, err := updateHealth(ctx, h.states, func(hl *Health) {
		hl.Breaker.Failures++
		hl.Breaker.OpenUntil = now.Add(double(h.opts.BreakerBase, hl.Breaker.Failures, h.opts.BackoffMax))
		hl.Breaker.Why = why
		if f != nil {
			hl.LastRun = f
		}
		b = hl.Breaker
	})
	if err != nil {
		return h.tripLocal(why)
	}
	return fmt.Sprintf("%s; circuit breaker open until %s (%d failing run(s) in a row)", why, b.OpenUntil.UTC().Format(time.RFC3339), b.Failures)
}

// tripLocal opens this instance's breaker: storage cannot be read, so the
// shared one cannot be written.
func (h *Healer) tripLocal(why string) string {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.local.Failures++
	h.local.OpenUntil = h.opts.Now().Add(double(h.opts.BreakerBase, h.local.Failures, h.opts.BackoffMax))
	return fmt.Sprintf("%s; circuit breaker open until %s (%d failing run(s) in a row)", why, h.local.OpenUntil.UTC().Format(time.RFC3339), h.local.Failures)
}

// localOpen reports whether this instance's own breaker is open, and until
// when.
func (h *Healer) localOpen(now time.Time) (time.Time, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.local.OpenUntil, now.Before(h.local.OpenUntil)
}
