package convoy

import (
	"cmp"
	"context"
	"errors"
	"slices"
	"sync"
	"time"

	"github.com/convoy-dev/convoy/handler/fault"
	"github.com/convoy-dev/convoy/handler/keyed"
)

// ProcessorOptions tune a Processor; Domain is required, the rest may be zero.
type ProcessorOptions struct {
	Domain    keyed.Domain      // the keys' rules (keyed.Erase of a domain's Rules)
	CacheSize int               // orders whose state is cached; default 1000
	Retry     fault.RetryPolicy // in-invocation retry of transient failures
	Now       func() time.Time  // clock; default time.Now
	Index     BlockedIndex      // kept up to date when orders block and unblock; optional
	LagWindow time.Duration     // the windows of each order's critical times (CriticalTimes); default DefaultLagWindow
	// CacheBytes bounds the cached orders' size (Key.Size) as well:
	// parked windows make some orders large (issue 33); default
	// DefaultCacheBytes. An order larger than it is not cached.
	CacheBytes int64
	// Active, if set, is the active-orders index: an order is written into
	// it before a commit when not known to be there (markActive), so that
	// the lag survey sees every order the processor received, whoever sent it.
	Active ActiveMarker
}

// Processor applies order messages strictly in seq order, exactly once.
//
// It caches each order's state and version per instance so that, in steady
// state, one message costs one Store round trip (the commit); the store's
// compare-and-swap on the version detects a stale cache. Any failure drops the
// cached state, and the retry re-decides every message from freshly loaded
// state: decisions are only ever taken from durable state, which is what makes
// redelivery, concurrency and interrupted commits harmless.
type Processor struct {
	domain keyed.Domain
	store  Store
	index  BlockedIndex
	cache  *keyCache
	locks  keyedMutex
	retry  fault.RetryPolicy
	now    func() time.Time
	lag    time.Duration

	active ActiveMarker
	marked *markedSet // orders whose active entry this instance wrote
}

// DefaultCacheSize is ProcessorOptions.CacheSize's default (the app setting
// OrderCacheSize defaults to it).
const DefaultCacheSize = 1000

// DefaultCacheBytes is ProcessorOptions.CacheBytes's default: 1,000 orders
// of about 1 KiB each fit many times over, 128 whose parked windows are full
// (ParkedWindowBytes) do.
const DefaultCacheBytes = 64 << 20

// NewProcessor returns a Processor over store.
func NewProcessor(store Store, opts ProcessorOptions) *Processor {
	if opts.Domain == nil {
		panic("convoy: NewProcessor without a Domain")
	}
	if opts.CacheSize <= 0 {
		opts.CacheSize = DefaultCacheSize
	}
	if opts.CacheBytes <= 0 {
		opts.CacheBytes = DefaultCacheBytes
	}
	clock := opts.Now
	if clock == nil {
		clock = time.Now
	}
	// Milliseconds: what every store keeps exactly.
	now := func() time.Time { return clock().UTC().Truncate(time.Millisecond) }
	return &Processor{domain: opts.Domain, store: store, index: opts.Index, cache: newKeyCache(opts.CacheSize, opts.CacheBytes), retry: opts.Retry, now: now,
		lag: cmp.Or(opts.LagWindow, DefaultLagWindow), active: opts.Active, marked: newMarkedSet(opts.CacheSize)}
}

// Result reports what one Process call did. Every figure is a fact of what
// the call's successful commits changed, whichever attempt made them: a retry
// after a partial commit neither loses nor repeats what the commit did.
type Result struct {
	Outcomes  []Outcome // one per message received and one per parked message drained, in the order decided
	Commits   int       // atomic writes made by this call, over all its attempts
	Blocked   bool      // a commit of this call left the order blocked behind a new gap
	Unblocked bool      // a commit of this call filled the gap the order was blocked by
	// The order afterwards, in figures: not a copy of its state, which grows
	// with its transactions and would cost every message that much.
	AppliedSeq int64
	MissingSeq int64 // the seq it waits for; 0 if none
	Parked     int
	// Draining: the order's next seq is parked, its drain stopped short (an
	// operator's deadline, storage failing after a skip landed); the next
	// load of the order resumes it (Processor.Resume). AppliedSeq and the
	// figures above are then as far as the call got (zero when unknown).
	Draining bool
	// SkippedEarlier: Skip found its seq skipped by an operator already (a
	// retry of a skip whose answer was lost) and skipped nothing itself.
	SkippedEarlier bool
}

// committed accumulates, over the attempts of one call, what its commits made durable.
type committed struct {
	outcomes  []Outcome // of steps made durable by a commit of an earlier attempt
	commits   int
	blocked   bool
	unblocked bool
}

// Process applies msgs, all of one order and in the order received, and
// returns what happened to each. An error is transient (retry the delivery)
// once the retry budget is spent; msgs must already be valid.
func (p *Processor) Process(ctx context.Context, orderID string, msgs []Message) (Result, error) {
	unlock := p.locks.lock(orderID) // same-order calls in this instance queue up instead of racing
	defer unlock()
	var res Result
	var done committed
	guess := len(msgs) > 0 && msgs[0].Seq == 1
	// A row a decision needs absent (keyed.Needs.Absent) is taken as absent
	// unless the key knows it: the commit inserts it, and fails if it
	// exists. After any conflict, the attempts that follow (in this call, or
	// in the next call for the key: the host redelivers) read every such row
	// first, so that a command whose row exists is rejected rather than
	// conflicting again.
	verify := p.cache.suspect(orderID)
	began := p.now()
	err := p.retry.Do(ctx, func(ctx context.Context) (err error) {
		o := p.cache.get(orderID)
		if o == nil && guess {
			// An order's first message: the order most likely has no state
			// yet, so skip the read. The commit's compare-and-swap checks the
			// guess; if it was wrong, nothing was written.
			guess = false
			if res, err = p.apply(ctx, NewKey(orderID), msgs, &done, false); !errors.Is(err, ErrConflict) {
				return err
			}
		}
		if o == nil {
			if o, err = p.store.Load(ctx, orderID); err != nil {
				return err
			}
		}
		res, err = p.apply(ctx, o, msgs, &done, verify)
		if errors.Is(err, ErrConflict) {
			verify = true
		}
		return err
	})
	p.cache.mark(orderID, verify && err != nil)
	p.markAgainIfSlow(ctx, orderID, msgs, began)
	p.noteFailure(ctx, orderID, err)
	return res, err
}

// noteFailure records a decision that failed on the key's head, best
// effort (the message's next delivery fails again and tries again), so that
// the operator sees why the key waits (the order's page, the blocked list).
func (p *Processor) noteFailure(ctx context.Context, orderID string, err error) {
	var de *DecisionError
	if !errors.As(err, &de) {
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), noteTimeout)
	defer cancel()
	_ = p.store.NoteFailure(ctx, orderID, keyed.Failure{Seq: de.Seq, Why: cutReason(de.Error()), At: p.now()})
}

// noteTimeout bounds the write of a failure's note.
const noteTimeout = 2 * time.Second

// apply is one attempt at applying msgs to o; verify: read every row a
// decision guesses absent that the key does not know.
func (p *Processor) apply(ctx context.Context, o *Key, msgs []Message, done *committed, verify bool) (Result, error) {
	if err := p.markActive(ctx, o, msgs); err != nil {
		return Result{}, err
	}
	a, err := p.begin(o, done)
	if err != nil {
		return Result{}, err
	}
	a.verify = verify
	// A drain cut short (a deadline, a failed commit) leaves the next seq
	// parked: it is finished before any message is decided, so that a copy
	// of that seq (a redelivery, a replayed dead letter) is a duplicate of
	// the parked one instead of applied beside it, orphaning its row.
	err = a.drain(ctx)
	for _, m := range msgs {
		if err != nil {
			break
		}
		if err = a.makeRoom(ctx); err == nil {
			if err = a.lookup(ctx, m); err == nil {
				var out Outcome
				if out, err = o.Receive(m, p.now(), &a.change); err == nil {
					a.outcomes = append(a.outcomes, out)
					err = a.drain(ctx)
				}
			}
		}
	}
	if err == nil {
		err = a.commit(ctx)
	}
	if err != nil {
		a.fail()
		return Result{}, err
	}
	return a.finish(), nil
}

// result is what the commits of a call that did not finish made durable.
func (d *committed) result() Result {
	return Result{Outcomes: slices.Clone(d.outcomes), Commits: d.commits, Blocked: d.blocked, Unblocked: d.unblocked}
}

// keyedMutex serialises work per key; entries vanish when unused.
type keyedMutex struct {
	mu    sync.Mutex
	locks map[string]*keyedLock
}

type keyedLock struct {
	mu   sync.Mutex
	refs int
}

func (k *keyedMutex) lock(key string) (unlock func()) {
	k.mu.Lock()
	if k.locks == nil {
		k.locks = map[string]*keyedLock{}
	}
	l, ok := k.locks[key]
	if !ok {
		l = &keyedLock{}
		k.locks[key] = l
	}
	l.refs++
	k.mu.Unlock()
	l.mu.Lock()
	return func() {
		l.mu.Unlock()
		k.mu.Lock()
		if l.refs--; l.refs == 0 {
			delete(k.locks, key)
		}
		k.mu.Unlock()
	}
}
