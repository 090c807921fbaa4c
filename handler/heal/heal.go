// Package heal is automatic ordered replay and the health of every order:
// it finds the orders whose dead letters the orders queue holds for a
// transient cause (operator.Classify) and replays them (replay.Order, in
// seq order) with exponential backoff per order and a circuit breaker,
// automating what an operator does (package operator), and it sums up what
// an operator needs to see: blocked orders with where their missing message
// is and why, dead letters by reason, auto-replays done and pending.
//
// Two runs at once (two instances, a lost timer lease) are harmless: an
// order's attempt is claimed with a conditional write of its state, so one
// run replays it; dead letters are received with locks, so no two readers
// hold one; a re-sent dead letter gets a MessageId fixed per dead-lettered
// copy, so a second re-send is dropped by duplicate detection; and the
// processor ignores any seq it has applied. Order is the processor's: a
// re-sent message that arrives early is parked.
package heal

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/convoy-dev/convoy/handler/convoy"
	"github.com/convoy-dev/convoy/handler/keyed"
	"github.com/convoy-dev/convoy/handler/operator"
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
	// Trends reads the trend series (each run's point, the last
	// TrendsKept), in an entity of its own; the zero Trends, "" and ok
	// false when there is none yet.
	Trends(ctx context.Context) (t Trends, etag string, ok bool, err error)
	// PutTrends writes t only if the series still has etag ("": only if
	// there is none); a fault.Conflict otherwise.
	PutTrends(ctx context.Context, t Trends, etag string) (string, error)
}

// Options tune a Healer; every field but Domain has a default.
type Options struct {
	// Domain is the domain whose keys and dead letters the Healer sees
	// (required): it reads their bodies to tell a transient cause from a
	// permanent one (operator.Classify).
	Domain      keyed.Domain
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

// Healer runs automatic replay and sums up the orders' health.
type Healer struct {
	blocked convoy.BlockedIndex
	orders  replay.OrderReader
	states  StateStore
	open    operator.Opener
	opts    Options

	// local is the breaker of this instance while storage cannot be read
	// (the shared one, in Health, cannot be read either then).
	mu    sync.Mutex
	local Breaker
	// unwritten: since when this instance's runs could not write the
	// Health record (writeRecord), nil when the last one could.
	unwritten *Unwritten
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
func New(blocked convoy.BlockedIndex, keys replay.OrderReader, states StateStore, open operator.Opener, opts Options) *Healer {
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
	if opts.Domain == nil {
		panic("heal.New: Options.Domain is required (the rules the dead letters are read with)")
	}
	return &Healer{blocked: blocked, orders: keys, states: states, open: open, opts: opts}
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

// cut shortens an error quoted in what a run records and reports.
func cut(s string) string {
	if len(s) > 120 {
		return strings.ToValidUTF8(s[:120], "") + "…" // not half a rune
	}
	return s
}
