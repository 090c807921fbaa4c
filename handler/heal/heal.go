package heal

import (
	"context"
	"errors"
	"fmt"
	"slices"
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
}

// StateStore keeps the States (in Table Storage: tablestore.Store).
type StateStore interface {
	// ReplayState reads an order's state and its ETag; ok is false when it
	// has none.
	ReplayState(ctx context.Context, orderID string) (s State, etag string, ok bool, err error)
	// PutReplayState writes s only if the stored state still has etag ("":
	// only if there is none), and returns the new ETag; a fault.Conflict
	// when another writer came first.
	PutReplayState(ctx context.Context, s State, etag string) (string, error)
	// ReplayStates lists up to limit states, and whether more exist.
	ReplayStates(ctx context.Context, limit int) ([]State, bool, error)
}

// Options tune a Healer; the zero value works (and replays).
type Options struct {
	Disabled    bool          // AutoReplayEnabled=false: figures only, no replay
	BackoffBase time.Duration // wait after an order's first attempt (default 1 min); doubled per attempt
	BackoffMax  time.Duration // the longest wait between attempts (default 1 h); also the breaker's
	BreakerBase time.Duration // pause after a failed run (default 1 min); doubled per failed run in a row
	MaxOrders   int           // orders replayed per run (default 50)
	MaxScan     int           // replay.Options.MaxScan
	MaxBlocked  int           // blocked orders a summary reads (default 10,000)
	// PeekTimeout bounds the one read of the dead-letter sub-queue behind
	// Explain, Summarize and each run's figures (0: the caller's deadline
	// only). What was read by then is used, marked incomplete; nothing read
	// means the sub-queue could not be read.
	PeekTimeout time.Duration
	// OrderTimeout bounds the replay of one order in a run, and a run starts
	// no order with less than this left before its own deadline (0: no bound
	// but the run's).
	OrderTimeout time.Duration
	Now          func() time.Time
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

	mu        sync.Mutex
	failures  int // failed runs in a row
	openUntil time.Time
}

// Defaults of Options (the app settings AutoReplay… default to them).
const (
	DefaultBackoffBase = time.Minute
	DefaultBackoffMax  = time.Hour
	DefaultBreakerBase = time.Minute
	DefaultMaxOrders   = 50
)

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
	if opts.MaxBlocked <= 0 {
		opts.MaxBlocked = 10_000
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

// Explain adds to each blocked order where its missing message is, from one
// peek of the dead-letter sub-queue. When the sub-queue cannot be read the
// orders are listed with Where "unknown" and the reason.
func (h *Healer) Explain(ctx context.Context, orders []convoy.BlockedOrder) []BlockedWithCause {
	out := make([]BlockedWithCause, len(orders))
	dls, err := h.deadLetters(ctx)
	for i, o := range orders {
		out[i].BlockedOrder = o
		if err != nil {
			out[i].Missing = Missing{Where: WhereUnknown, Why: err.Error()}
			continue
		}
		out[i].Missing = dls.Missing(o.OrderID, o.MissingSeq, o.AppliedSeq)
		if st, _, ok, err := h.states.ReplayState(ctx, o.OrderID); err == nil && ok {
			out[i].Missing.AutoReplay = &st
		}
	}
	return out
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
		d, err := ReadDeadLetters(ctx, src, 10*max(h.opts.MaxScan, replay.DefaultMaxScan))
		done <- result{d, err}
	}()
	var r result
	if deadline, ok := ctx.Deadline(); ok {
		// A read that stops at the deadline by itself returns what it read
		// (ReadDeadLetters): give it a moment to.
		giveUp := time.NewTimer(time.Until(deadline) + 250*time.Millisecond)
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
	if len(why) > 240 { // room for a queue name and the network error
		why = why[:240] + "…"
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
	BlockedComplete      bool   `json:"blockedComplete"` // false: more than MaxBlocked, counts are of those read
	OldestBlockedSince   string `json:"oldestBlockedSince,omitempty"`
	OldestBlockedSeconds int64  `json:"oldestBlockedSeconds"`
	ParkedMessages       int64  `json:"parkedMessages"`
	// MissingBy counts blocked orders by where their missing message is
	// ("deadLetter/transient", "deadLetter/permanent", "notDeadLettered", …).
	MissingBy   map[string]int `json:"missingBy"`
	DeadLetters *DeadLetters   `json:"deadLetters"` // null when the sub-queue could not be read
	// DeadLettersUnreadable says why the dead-letter sub-queue could not be
	// read (DeadLetters is then null, every blocked order counts under
	// MissingBy "unknown" and the auto-replay figures that come from the
	// sub-queue, Pending and Retrying, are 0).
	DeadLettersUnreadable string     `json:"deadLettersUnreadable,omitempty"`
	AutoReplay            AutoReplay `json:"autoReplay"`
}

// AutoReplay are the automatic replay's figures.
type AutoReplay struct {
	Enabled bool `json:"enabled"`
	// Replayed: messages re-sent by automatic replay, in all (over the
	// orders with a state).
	Replayed int64 `json:"replayed"`
	// Pending: orders with a dead letter of a transient cause still in the
	// sub-queue (waiting for the next run, their backoff or the breaker).
	Pending int `json:"pending"`
	// Retrying: of those, orders already replayed at least once whose
	// dead letter came back (their cause is not over).
	Retrying    int    `json:"retrying"`
	BreakerOpen bool   `json:"breakerOpen"`
	OpenUntil   string `json:"breakerOpenUntil,omitempty"`
}

// Summarize reads the blocked orders (up to MaxBlocked), the dead-letter
// sub-queue and the replay states. A dead-letter sub-queue that cannot be
// read (Service Bus down) is no error: the summary then says so
// (DeadLettersUnreadable) and has every figure that storage gives.
func (h *Healer) Summarize(ctx context.Context) (Summary, error) {
	s, _, _, err := h.summarize(ctx)
	if u := (*UnreadableError)(nil); errors.As(err, &u) {
		return s, nil
	}
	return s, err
}

func (h *Healer) summarize(ctx context.Context) (Summary, *DeadLetters, map[string]bool, error) {
	now := h.opts.Now()
	s := Summary{At: now.UTC().Format(time.RFC3339), MissingBy: map[string]int{}, AutoReplay: AutoReplay{Enabled: h.Enabled()}}
	var blocked []convoy.BlockedOrder
	token := ""
	for {
		page, err := convoy.ListBlocked(ctx, h.blocked, token, min(convoy.MaxBlockedPageSize, h.opts.MaxBlocked-len(blocked)))
		if err != nil {
			return s, nil, nil, fmt.Errorf("list blocked orders: %w", err)
		}
		blocked = append(blocked, page.Orders...)
		token = page.Continuation
		if token == "" {
			s.BlockedComplete = true
			break
		}
		if len(blocked) >= h.opts.MaxBlocked {
			break
		}
	}
	dls, dlErr := h.deadLetters(ctx)
	if dlErr != nil {
		s.DeadLettersUnreadable = dlErr.Error()
	}
	s.DeadLetters = dls
	isBlocked := map[string]bool{}
	s.BlockedOrders = len(blocked)
	for _, o := range blocked {
		isBlocked[o.OrderID] = true
		s.ParkedMessages += int64(o.Parked)
		if s.OldestBlockedSince == "" || o.BlockedSince < s.OldestBlockedSince {
			s.OldestBlockedSince = o.BlockedSince
		}
		m := Missing{Where: WhereUnknown}
		if dls != nil {
			m = dls.Missing(o.OrderID, o.MissingSeq, o.AppliedSeq)
		}
		key := m.Where
		if m.Cause != "" {
			key += "/" + m.Cause
		}
		s.MissingBy[key]++
	}
	if s.OldestBlockedSince != "" {
		if t, err := time.Parse(time.RFC3339Nano, s.OldestBlockedSince); err == nil {
			s.OldestBlockedSeconds = max(0, int64(now.Sub(t)/time.Second))
		}
	}
	states, _, err := h.states.ReplayStates(ctx, 10_000)
	if err != nil {
		return s, nil, nil, fmt.Errorf("read auto-replay states: %w", err)
	}
	byOrder := map[string]State{}
	for _, st := range states {
		s.AutoReplay.Replayed += st.Replayed
		byOrder[st.OrderID] = st
	}
	if dls != nil {
		for _, c := range dls.transientOrders() {
			s.AutoReplay.Pending++
			if st, ok := byOrder[c.orderID]; ok && st.Attempts > 0 && st.Seq == c.seq {
				s.AutoReplay.Retrying++
			}
		}
	}
	h.mu.Lock()
	if now.Before(h.openUntil) {
		s.AutoReplay.BreakerOpen, s.AutoReplay.OpenUntil = true, h.openUntil.UTC().Format(time.RFC3339)
	}
	h.mu.Unlock()
	if dlErr != nil {
		return s, nil, nil, dlErr
	}
	return s, dls, isBlocked, nil
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
	Summary   *Summary  `json:"summary,omitempty"`
	Replayed  []Replay  `json:"replayed"`
	Waiting   int       `json:"waiting"`   // orders whose backoff has not elapsed
	Elsewhere int       `json:"elsewhere"` // orders another run claimed or holds locked
	Failed    []Failure `json:"failed,omitempty"`
	// Paused says why the run replayed nothing: the breaker is open, or
	// storage or Service Bus failed (then Summary may be nil).
	Paused string `json:"paused,omitempty"`
}

// RunOnce is one timer run: the summary (which reads storage and the
// dead-letter sub-queue, and so probes both), then, unless disabled or the
// breaker is open, a replay of up to MaxOrders orders with dead letters of a
// transient cause, blocked ones first, each no sooner than its backoff
// allows. A run that finds storage or Service Bus failing opens the breaker
// for BreakerBase, doubled per failed run in a row up to BackoffMax; the
// first run after that pause that succeeds closes it. The breaker lives in
// the instance (each instance's first run after an outage probes for itself).
func (h *Healer) RunOnce(ctx context.Context) Run {
	r := Run{Replayed: []Replay{}}
	s, dls, blocked, err := h.summarize(ctx)
	if u := (*UnreadableError)(nil); errors.As(err, &u) {
		r.Paused = h.trip("Service Bus is failing: " + u.Error())
		return r
	}
	if err != nil {
		r.Paused = h.trip("storage is failing: " + cut(err.Error()))
		return r
	}
	r.Summary = &s
	if h.opts.Disabled {
		return r
	}
	now := h.opts.Now()
	h.mu.Lock()
	openUntil := h.openUntil
	h.mu.Unlock()
	if now.Before(openUntil) {
		r.Paused = fmt.Sprintf("circuit breaker open until %s after a failing run", openUntil.UTC().Format(time.RFC3339))
		return r
	}
	todo := dls.transientOrders()
	for i := range todo {
		todo[i].blocked = blocked[todo[i].orderID]
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
	if len(todo) == 0 {
		h.reset()
		return r
	}
	src, sender, close, err := h.open()
	if err != nil {
		r.Paused = h.trip("Service Bus is failing: " + cut(err.Error()))
		return r
	}
	defer close()
	done := 0
	for _, c := range todo {
		if done >= h.opts.MaxOrders || ctx.Err() != nil || !h.timeForOne(ctx) {
			break // the rest wait for the next run
		}
		rep, failed, err := h.replayOrder(ctx, src, sender, c, now, &r)
		if err != nil {
			r.Failed = append(r.Failed, Failure{OrderID: c.orderID, Error: cut(err.Error())})
			if failed {
				r.Paused = h.trip("a replay failed: " + cut(err.Error()))
				return r
			}
			continue
		}
		if rep != nil {
			r.Replayed = append(r.Replayed, *rep)
			done++
		}
	}
	h.reset()
	return r
}

// timeForOne reports whether ctx leaves an order's replay its OrderTimeout.
func (h *Healer) timeForOne(ctx context.Context) bool {
	deadline, ok := ctx.Deadline()
	return !ok || h.opts.OrderTimeout <= 0 || time.Until(deadline) >= h.opts.OrderTimeout
}

// replayOrder claims and replays one order, within OrderTimeout; nil when it
// was not its turn. failed reports an error of storage or Service Bus (trip
// the breaker).
func (h *Healer) replayOrder(ctx context.Context, src replay.Source, sender convoy.Sender, c candidate, now time.Time, r *Run) (*Replay, bool, error) {
	if h.opts.OrderTimeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, h.opts.OrderTimeout)
		defer cancel()
	}
	st, etag, ok, err := h.states.ReplayState(ctx, c.orderID)
	if err != nil {
		return nil, true, err
	}
	if !ok || st.Seq != c.seq {
		st = State{OrderID: c.orderID, Seq: c.seq, Replayed: st.Replayed}
	} else if now.Before(st.NextAttempt) {
		r.Waiting++
		return nil, false, nil
	}
	st.OrderID = c.orderID
	st.Attempts++
	st.LastAttempt, st.NextAttempt = now, now.Add(h.opts.backoff(st.Attempts))
	// The claim: of two runs that read the same state, one writes it.
	if etag, err = h.states.PutReplayState(ctx, st, etag); err != nil {
		if fault.CodeOf(err) == fault.Conflict {
			r.Elsewhere++
			return nil, false, nil
		}
		return nil, true, err
	}
	rep, rerr := replay.Order(ctx, src, sender, c.orderID, replay.Options{MaxScan: h.opts.MaxScan, Orders: h.orders,
		Select: func(d replay.DeadLetter) bool { return Classify(d, -1).Class == Transient }})
	st.Replayed += int64(len(rep.Replayed))
	st.LastError = ""
	if rerr != nil {
		st.LastError = cut(rerr.Error())
	}
	elsewhere := rerr == nil && rep.Incomplete != nil && len(rep.Replayed) == 0
	if elsewhere {
		// Another reader held the order's dead letters: this was no
		// attempt. Give the claim back so that the next run tries at once.
		st.Attempts--
		st.NextAttempt = now
	}
	_, _ = h.states.PutReplayState(ctx, st, etag) // best effort: the claim already holds the backoff
	if rerr != nil {
		return nil, !errors.Is(rerr, context.Canceled), rerr
	}
	if elsewhere {
		r.Elsewhere++
		return nil, false, nil
	}
	out := &Replay{OrderID: c.orderID, Attempt: st.Attempts, Left: len(rep.Left) + len(rep.Unplaceable), NextWait: h.opts.backoff(st.Attempts).String()}
	for _, x := range rep.Replayed {
		out.Seqs = append(out.Seqs, x.Seq)
	}
	return out, false, nil
}

// trip records a failed run and opens the breaker; it returns why.
func (h *Healer) trip(why string) string {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.failures++
	h.openUntil = h.opts.Now().Add(double(h.opts.BreakerBase, h.failures, h.opts.BackoffMax))
	return fmt.Sprintf("%s; circuit breaker open until %s (%d failing run(s) in a row)", why, h.openUntil.UTC().Format(time.RFC3339), h.failures)
}

func (h *Healer) reset() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.failures = 0
}
