package convoy

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/convoy-dev/convoy/handler/fault"
)

// ProcessorOptions tune a Processor; the zero value works.
type ProcessorOptions struct {
	CacheSize int               // orders whose state is cached; default 1000
	Retry     fault.RetryPolicy // in-invocation retry of transient failures
	Now       func() time.Time  // clock; default time.Now
	Index     BlockedIndex      // kept up to date when orders block and unblock; optional
	LagWindow time.Duration     // the windows of each order's critical times (CriticalTimes); default DefaultLagWindow
	// CacheBytes bounds the cached orders' size (Order.Size) as well:
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
	store Store
	index BlockedIndex
	cache *orderCache
	locks keyedMutex
	retry fault.RetryPolicy
	now   func() time.Time
	lag   time.Duration

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
	return &Processor{store: store, index: opts.Index, cache: newOrderCache(opts.CacheSize, opts.CacheBytes), retry: opts.Retry, now: now,
		lag: cmp.Or(opts.LagWindow, DefaultLagWindow), active: opts.Active, marked: newMarkedSet(opts.CacheSize)}
}

// Result reports what one Process call did. Every figure is a fact of what
// the call's successful commits changed, whichever attempt made them: a retry
// after a partial commit neither loses nor repeats what the commit did.
type Result struct {
	Outcomes  []Outcome // one per message received, then one per parked message drained
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
	// An AddTransaction is taken as new unless the order knows its txId: the
	// commit inserts it, and fails if it exists. After any conflict, the
	// attempts that follow (in this call, or in the next call for the order:
	// the host redelivers) look every added txId up first, so that one that
	// exists is rejected rather than conflicting again.
	verify := p.cache.suspect(orderID)
	began := p.now()
	err := p.retry.Do(ctx, func(ctx context.Context) (err error) {
		o := p.cache.get(orderID)
		if o == nil && guess {
			// An order's first message: the order most likely has no state
			// yet, so skip the read. The commit's compare-and-swap checks the
			// guess; if it was wrong, nothing was written.
			guess = false
			if res, err = p.apply(ctx, NewOrder(orderID), msgs, &done, false); !errors.Is(err, ErrConflict) {
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
	return res, err
}

// apply is one attempt at applying msgs to o; verify: look up the txId of
// every AddTransaction the order does not know.
func (p *Processor) apply(ctx context.Context, o *Order, msgs []Message, done *committed, verify bool) (Result, error) {
	if err := p.markActive(ctx, o, msgs); err != nil {
		return Result{}, err
	}
	a := p.begin(o, done)
	a.verify = verify
	var err error
	for _, m := range msgs {
		if err = a.makeRoom(ctx); err == nil {
			if err = a.lookup(ctx, m); err == nil {
				a.outcomes = append(a.outcomes, o.Receive(m, p.now(), &a.change))
				err = a.drain(ctx)
			}
		}
		if err != nil {
			break
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

// Skip records the order's missing seq as rejected by an operator and drains
// the parked messages behind it.
//
// It first resumes a drain that an earlier call left cut (Resume): a parked
// seq was received, and is never skipped. Retried after a skip whose commit
// landed but whose answer was lost, it finds seq skipped by an operator and
// answers as that skip would have (Result.SkippedEarlier). Its drain stops a
// margin before ctx's deadline (and when storage fails after the skip
// landed), so that the operator gets an answer: what is left is said
// (Result.Draining) and drains at the order's next load.
func (p *Processor) Skip(ctx context.Context, orderID string, seq int64) (Result, View, error) {
	unlock := p.locks.lock(orderID)
	defer unlock()
	var res Result
	var done committed
	verify, stop := p.cache.suspect(orderID), drainStop(ctx) // as Process: after a conflict, added txIds are looked up
	earlier := false                                         // an earlier call skipped seq
	err := p.retry.Do(ctx, func(ctx context.Context) error {
		p.cache.drop(orderID) // an operator acts on what is stored, not on this instance's view
		o, err := p.store.Load(ctx, orderID)
		if err != nil {
			return err
		}
		if o.Version == 0 {
			return fault.Errorf(fault.NotFound, "order %q has no state", orderID)
		}
		a := p.begin(o, &done)
		a.verify, a.stop = verify, stop
		refused := error(nil)
		if err = a.drain(ctx); err == nil { // a cut drain first: its head was received
			switch {
			case skippedBy(done.outcomes, seq) || earlier:
				// An earlier attempt's commit (or call) skipped it; its drain goes on.
			case seq <= o.AppliedSeq:
				earlier, err = p.skippedBefore(ctx, orderID, seq)
				if err == nil && !earlier {
					refused = fault.Errorf(fault.Conflict, "cannot skip: seq %d of order %q was received (applied or rejected by a rule), it is not missing; appliedSeq is %d", seq, orderID, o.AppliedSeq)
				}
			default:
				if serr := o.Skip(seq, p.now(), &a.change); serr != nil {
					refused = fault.Wrap(fault.Conflict, serr, "cannot skip")
				} else {
					a.outcomes = append(a.outcomes, Outcome{Seq: seq, Disposition: Rejected, Reason: ReasonSkipped})
					err = a.drain(ctx)
				}
			}
		}
		if err == nil {
			err = a.commit(ctx) // what drained is kept even when the skip is refused
		}
		if err != nil {
			a.fail()
			if errors.Is(err, ErrConflict) {
				verify = true // as Process: an added txId may exist
			}
			return err
		}
		res = a.finish()
		return refused
	})
	p.cache.mark(orderID, verify && err != nil)
	if err != nil && fault.CodeOf(err) != fault.Conflict && fault.CodeOf(err) != fault.NotFound && skippedBy(done.outcomes, seq) {
		// The skip landed; only its drain was cut (storage failing): the
		// skip stands, and the rest drains at the order's next load.
		res, err = done.result(), nil
		res.Draining = true
	}
	if err != nil {
		return Result{}, View{}, err
	}
	res.SkippedEarlier = earlier
	view := View{OrderID: orderID, AppliedSeq: res.AppliedSeq}
	if h, ok := p.store.(History); ok {
		// The operator's answer shows the order with its first page of
		// history; it is read even when ctx is about to end (the skip stands).
		vctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), viewTimeout)
		if v, verr := ReadView(vctx, p.store, h, orderID, "", 0); verr == nil {
			view = v
		}
		cancel()
	}
	return res, view, nil
}

// viewTimeout bounds the read of the view an operator's answer shows.
const viewTimeout = 2 * time.Second

// skippedBy reports whether outcomes hold seq skipped by an operator.
func skippedBy(outcomes []Outcome, seq int64) bool {
	return slices.ContainsFunc(outcomes, func(o Outcome) bool { return o.Seq == seq && o.Reason == ReasonSkipped })
}

// skippedBefore reports whether the order's seq (at or below its appliedSeq)
// was skipped by an operator: one read of its rejection.
func (p *Processor) skippedBefore(ctx context.Context, orderID string, seq int64) (bool, error) {
	h, ok := p.store.(History)
	if !ok {
		return false, nil
	}
	rs, _, err := h.Rejections(ctx, orderID, seq, 1)
	if err != nil {
		return false, fmt.Errorf("read the rejection of seq %d of order %q: %w", seq, orderID, err)
	}
	return len(rs) > 0 && rs[0].Seq == seq && rs[0].Reason == ReasonSkipped, nil
}

// Resume drains the order's parked head when its next seq is parked: what a
// drain cut short (a deadline, a failed commit, a message's last delivery,
// an instance that died) leaves when every later message is parked already,
// so that no delivery comes to resume it. Every reader that finds an order
// so calls it (OrderStatus, the AutoReplay survey; Skip drains first): a cut
// drain always resumes. Like Skip's, its drain stops a margin before ctx's
// deadline (Result.Draining). An order with nothing to drain costs one Load.
func (p *Processor) Resume(ctx context.Context, orderID string) (Result, error) {
	unlock := p.locks.lock(orderID)
	defer unlock()
	var res Result
	var done committed
	verify, stop := p.cache.suspect(orderID), drainStop(ctx)
	err := p.retry.Do(ctx, func(ctx context.Context) error {
		p.cache.drop(orderID) // drain what is stored, not this instance's view
		o, err := p.store.Load(ctx, orderID)
		if err != nil {
			return err
		}
		a := p.begin(o, &done)
		a.verify, a.stop = verify, stop
		if err = a.drain(ctx); err == nil {
			err = a.commit(ctx)
		}
		if err != nil {
			a.fail()
			if errors.Is(err, ErrConflict) {
				verify = true
			}
			return err
		}
		res = a.finish()
		return nil
	})
	p.cache.mark(orderID, verify && err != nil)
	return res, err
}

// drainStop is when a drain for an operator stops so that its caller can
// still answer within ctx's deadline (zero: no deadline, no stop): a
// quarter of the time left, at most a second, is kept for the last commit
// and the answer.
func drainStop(ctx context.Context) time.Time {
	deadline, ok := ctx.Deadline()
	if !ok {
		return time.Time{}
	}
	return deadline.Add(-min(time.Second, time.Until(deadline)/4))
}

// attempt is one try at applying messages to an order: the order as it
// evolves, the change not yet committed, and the outcomes of its steps.
type attempt struct {
	p             *Processor
	o             *Order
	change        Change
	outcomes      []Outcome  // of this attempt's steps; those before pending are committed
	pending       int        // index in outcomes of the first step not yet committed
	done          *committed // what the call's commits made durable so far
	storedBlocked time.Time  // BlockedSince as last committed
	verify        bool       // look up added txIds too (Order.Lookup)
	stop          time.Time  // a drain stops here (zero: never), leaving the rest parked (drainStop)
}

// lookup reads the stored transaction that deciding m needs, if the order
// does not know it: a ModifyTransaction's (one point read), or with verify
// an AddTransaction's.
func (a *attempt) lookup(ctx context.Context, m Message) error {
	if seq, ok := a.o.ParkedUnknown(m, &a.change); ok {
		// Beyond the parked window (issue 33): one point read says whether
		// it is parked already, a duplicate.
		parked, err := a.p.store.IsParked(ctx, a.o.ID, seq)
		if err != nil {
			return fmt.Errorf("read parked seq %d of order %q: %w", seq, a.o.ID, err)
		}
		a.o.LearnParked(seq, parked)
	}
	txID, ok := a.o.Lookup(m, a.verify)
	if !ok {
		return nil
	}
	r, found, err := a.p.store.Tx(ctx, a.o.ID, txID)
	if err != nil {
		return fmt.Errorf("read transaction %q of order %q: %w", txID, a.o.ID, err)
	}
	if found {
		a.o.Learn(txID, &r)
	} else {
		a.o.Learn(txID, nil)
	}
	return nil
}

func (p *Processor) begin(o *Order, done *committed) *attempt {
	o.lagWindow = p.lag
	return &attempt{p: p, o: o, done: done, storedBlocked: o.BlockedSince}
}

// fail ends an attempt that failed: what its commits made durable stays in
// the call's record; o may hold uncommitted steps, or a commit's outcome is
// unknown, so the cached state goes.
func (a *attempt) fail() {
	a.done.outcomes = append(a.done.outcomes, a.outcomes[:a.pending]...)
	a.p.cache.drop(a.o.ID)
}

// finish ends the successful attempt: the call's outcomes are those its
// earlier attempts committed, then this attempt's, less the duplicates that
// only an earlier attempt of this same call made so.
func (a *attempt) finish() Result {
	a.o.Forget() // what the order keeps between calls stays bounded
	a.p.cache.put(a.o)
	earlier := map[int64]bool{}
	for _, out := range a.done.outcomes {
		earlier[out.Seq] = true
	}
	res := Result{Outcomes: append([]Outcome{}, a.done.outcomes...), Commits: a.done.commits,
		Blocked: a.done.blocked, Unblocked: a.done.unblocked}
	for _, out := range a.outcomes {
		if out.Disposition == Duplicate && earlier[out.Seq] {
			continue
		}
		res.Outcomes = append(res.Outcomes, out)
	}
	res.AppliedSeq, res.MissingSeq, res.Parked = a.o.AppliedSeq, a.o.MissingSeq(), a.o.ParkedCount
	_, res.Draining = a.o.NextParked()
	return res
}

// result is what the commits of a call that did not finish made durable.
func (d *committed) result() Result {
	return Result{Outcomes: slices.Clone(d.outcomes), Commits: d.commits, Blocked: d.blocked, Unblocked: d.unblocked}
}

func (a *attempt) drain(ctx context.Context) error {
	for {
		if err := a.makeRoom(ctx); err != nil {
			return err
		}
		if err := a.nextPage(ctx); err != nil {
			return err
		}
		if m, ok := a.o.NextParked(); ok {
			if !a.stop.IsZero() && time.Now().After(a.stop) {
				return nil // left parked: Result.Draining
			}
			if err := a.lookup(ctx, m); err != nil {
				return err
			}
		}
		out, ok := a.o.DrainNext(a.p.now(), &a.change)
		if !ok {
			return nil
		}
		a.outcomes = append(a.outcomes, out)
	}
}

// nextPage reads the next page of the parked tail when the window has run
// out and more are parked (issue 33).
func (a *attempt) nextPage(ctx context.Context) error {
	after, ok := a.o.NextPage()
	if !ok {
		return nil
	}
	page, more, err := a.p.store.Parked(ctx, a.o.ID, after, ParkedPageSize)
	if err != nil {
		return fmt.Errorf("read the parked messages of order %q after seq %d: %w", a.o.ID, after, err)
	}
	return a.o.AddParkedPage(page, more, &a.change)
}

// makeRoom commits early when one more step might not fit; each commit is a
// consistent prefix of the work, so a failure after it loses nothing.
func (a *attempt) makeRoom(ctx context.Context) error {
	if a.change.hasRoom() {
		return nil
	}
	return a.commit(ctx)
}

// commit writes the pending change, keeping the blocked index in step with
// it in the three steps of BlockedIndex: before a commit that blocks the
// order or ends its block, the entry is made pending under the version the
// commit writes; after it, the entry of a block that holds is confirmed with
// the head's figures, and the entry of a block that ended is removed. Once
// the commit succeeded, what it changed is recorded: the outcomes of its
// steps, and whether it blocked or unblocked the order.
func (a *attempt) commit(ctx context.Context) error {
	o := a.o
	if a.change.Empty() {
		a.pending = len(a.outcomes) // duplicates only: nothing to write, nothing to lose
		return nil
	}
	since, before := o.BlockedSince, a.storedBlocked
	begins := !since.IsZero() && !since.Equal(before) // this commit begins a run of parked messages
	ends := !before.IsZero() && !before.Equal(since)  // it drains the run begun at before
	if idx := a.p.index; idx != nil {
		if begins {
			if err := idx.MarkBlocked(ctx, o.ID, since, o.Version+1); err != nil {
				return fmt.Errorf("index blocked order %q: %w", o.ID, err)
			}
		}
		if ends {
			pending := BlockedUpdate{Figures: true, Version: o.Version + 1, AppliedSeq: o.AppliedSeq, Parked: o.ParkedCount}
			if err := idx.UpdateBlocked(ctx, o.ID, before, pending, "*"); err != nil {
				return fmt.Errorf("index order %q as unblocking: %w", o.ID, err)
			}
		}
	}
	if err := a.p.store.Commit(ctx, o, o.Version, &a.change); err != nil {
		return fmt.Errorf("commit order %q at version %d: %w", o.ID, o.Version, err)
	}
	o.Version++
	a.done.commits++
	a.pending = len(a.outcomes)
	a.change = Change{}
	a.done.unblocked = a.done.unblocked || ends
	a.done.blocked = a.done.blocked || begins
	a.storedBlocked = since
	if idx := a.p.index; idx != nil {
		// Best effort: an entry left pending is checked by its next reader.
		if ends {
			_ = idx.ClearBlocked(ctx, o.ID, before)
		}
		if !since.IsZero() {
			_ = idx.UpdateBlocked(ctx, o.ID, since, BlockedUpdate{Figures: true, Confirmed: true, Version: o.Version,
				AppliedSeq: o.AppliedSeq, Parked: o.ParkedCount}, "*")
		}
	}
	return nil
}

// orderCache is a small LRU of order states, bounded in orders and in bytes
// (Order.Size), and the orders whose last call ended in a conflict
// (suspects: their next call looks added txIds up).
type orderCache struct {
	mu       sync.Mutex
	size     int
	maxBytes int64
	bytes    int64 // the cached orders' sizes, as put
	byID     map[string]*cacheEntry
	clock    uint64
	suspects map[string]bool // at most max(size, minSuspects) of them
}

// suspect reports whether the order's last call ended in a conflict.
func (c *orderCache) suspect(id string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.suspects[id]
}

// mark records whether the order's call ended in a conflict.
func (c *orderCache) mark(id string, suspect bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !suspect {
		delete(c.suspects, id)
		return
	}
	if c.suspects == nil {
		c.suspects = map[string]bool{}
	}
	if len(c.suspects) >= max(c.size, minSuspects) {
		for other := range c.suspects { // any one: a suspect forgotten costs a conflict more
			delete(c.suspects, other)
			break
		}
	}
	c.suspects[id] = true
}

// minSuspects is how many suspects an instance keeps at least, whatever
// its cache size: a suspect forgotten makes its next call conflict again,
// and with more suspects than are kept, calls of one attempt each
// (RetryPolicy.MaxAttempts 1) forget each other's in turn for ever (the
// healing simulation found it with a cache of one and two orders).
const minSuspects = 10_000

type cacheEntry struct {
	order *Order
	used  uint64
	size  int64 // the order's Size when put
}

func newOrderCache(size int, maxBytes int64) *orderCache {
	return &orderCache{size: size, maxBytes: maxBytes, byID: map[string]*cacheEntry{}}
}

// get hands out the cached order itself: callers hold the order's lock and
// either put it back or drop it.
func (c *orderCache) get(id string) *Order {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.byID[id]
	if !ok {
		return nil
	}
	c.clock++
	e.used = c.clock
	return e.order
}

func (c *orderCache) put(o *Order) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.remove(o.ID)
	size := o.Size()
	if size > c.maxBytes {
		return // read afresh by its next call
	}
	c.clock++
	c.byID[o.ID] = &cacheEntry{order: o, used: c.clock, size: size}
	c.bytes += size
	if len(c.byID) > c.size || c.bytes > c.maxBytes {
		c.evictOldest()
	}
}

// evictOldest drops the least recently used orders until an eighth of the
// room is free (in orders and in bytes, whichever ran out), so that the sort
// is paid once per many insertions.
func (c *orderCache) evictOldest() {
	ids := slices.Collect(maps.Keys(c.byID))
	slices.SortFunc(ids, func(a, b string) int { return cmp.Compare(c.byID[a].used, c.byID[b].used) })
	for _, id := range ids[:len(ids)-1] { // the order just put stays
		if len(c.byID) <= c.size-c.size/8 && c.bytes <= c.maxBytes-c.maxBytes/8 {
			break
		}
		c.remove(id)
	}
}

func (c *orderCache) remove(id string) {
	if e, ok := c.byID[id]; ok {
		c.bytes -= e.size
		delete(c.byID, id)
	}
}

func (c *orderCache) drop(id string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.remove(id)
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
