package convoy

import (
	"cmp"
	"context"
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
	cache *orderCache
	locks keyedMutex
	retry fault.RetryPolicy
	now   func() time.Time
}

// NewProcessor returns a Processor over store.
func NewProcessor(store Store, opts ProcessorOptions) *Processor {
	if opts.CacheSize <= 0 {
		opts.CacheSize = 1000
	}
	clock := opts.Now
	if clock == nil {
		clock = time.Now
	}
	// Milliseconds: what every store keeps exactly.
	now := func() time.Time { return clock().UTC().Truncate(time.Millisecond) }
	return &Processor{store: store, cache: newOrderCache(opts.CacheSize), retry: opts.Retry, now: now}
}

// Result reports what one Process call did.
type Result struct {
	Outcomes []Outcome // one per message received, then one per parked message drained
	Commits  int       // atomic writes made by the successful attempt
	Order    *Order    // the order's state afterwards (a copy)
}

// Process applies msgs, all of one order and in the order received, and
// returns what happened to each. An error is transient (retry the delivery)
// once the retry budget is spent; msgs must already be valid.
func (p *Processor) Process(ctx context.Context, orderID string, msgs []Message) (Result, error) {
	unlock := p.locks.lock(orderID) // same-order calls in this instance queue up instead of racing
	defer unlock()
	var res Result
	err := p.retry.Do(ctx, func(ctx context.Context) error {
		o, err := p.state(ctx, orderID)
		if err != nil {
			return err
		}
		res, err = p.run(ctx, o, msgs)
		if err != nil {
			p.cache.drop(orderID) // o may hold uncommitted steps, or the commit's outcome is unknown
			return err
		}
		p.cache.put(o)
		res.Order = o.Clone()
		return nil
	})
	return res, err
}

// Skip records the order's missing seq as rejected by an operator and drains
// the parked messages behind it.
func (p *Processor) Skip(ctx context.Context, orderID string, seq int64) (Result, error) {
	unlock := p.locks.lock(orderID)
	defer unlock()
	var res Result
	err := p.retry.Do(ctx, func(ctx context.Context) error {
		p.cache.drop(orderID) // an operator acts on what is stored, not on this instance's view
		o, err := p.store.Load(ctx, orderID)
		if err != nil {
			return err
		}
		var c Change
		if err := o.Skip(seq, p.now(), &c); err != nil {
			return fault.Wrap(fault.Conflict, err, "cannot skip")
		}
		res = Result{Outcomes: []Outcome{{Seq: seq, Disposition: Rejected, Reason: ReasonSkipped}}}
		if err := p.drain(ctx, o, &c, &res); err != nil {
			return err
		}
		if err := p.commit(ctx, o, &c, &res); err != nil {
			return err
		}
		p.cache.put(o)
		res.Order = o.Clone()
		return nil
	})
	return res, err
}

func (p *Processor) state(ctx context.Context, orderID string) (*Order, error) {
	if o := p.cache.get(orderID); o != nil {
		return o, nil
	}
	return p.store.Load(ctx, orderID)
}

// run decides each message against o, committing whenever a commit is full.
func (p *Processor) run(ctx context.Context, o *Order, msgs []Message) (Result, error) {
	var res Result
	var c Change
	for _, m := range msgs {
		if err := p.makeRoom(ctx, o, &c, &res); err != nil {
			return res, err
		}
		res.Outcomes = append(res.Outcomes, o.Receive(m, p.now(), &c))
		if err := p.drain(ctx, o, &c, &res); err != nil {
			return res, err
		}
	}
	return res, p.commit(ctx, o, &c, &res)
}

func (p *Processor) drain(ctx context.Context, o *Order, c *Change, res *Result) error {
	for {
		if err := p.makeRoom(ctx, o, c, res); err != nil {
			return err
		}
		out, ok := o.DrainNext(p.now(), c)
		if !ok {
			return nil
		}
		res.Outcomes = append(res.Outcomes, out)
	}
}

// makeRoom commits c early when one more step might not fit; each commit is a
// consistent prefix of the work, so a failure after it loses nothing.
func (p *Processor) makeRoom(ctx context.Context, o *Order, c *Change, res *Result) error {
	if c.hasRoom() {
		return nil
	}
	return p.commit(ctx, o, c, res)
}

func (p *Processor) commit(ctx context.Context, o *Order, c *Change, res *Result) error {
	if c.Empty() {
		return nil
	}
	if err := p.store.Commit(ctx, o, o.Version, c); err != nil {
		return fmt.Errorf("commit order %q at version %d: %w", o.ID, o.Version, err)
	}
	o.Version++
	res.Commits++
	*c = Change{}
	return nil
}

// orderCache is a small LRU of order states.
type orderCache struct {
	mu    sync.Mutex
	size  int
	byID  map[string]*cacheEntry
	clock uint64
}

type cacheEntry struct {
	order *Order
	used  uint64
}

func newOrderCache(size int) *orderCache {
	return &orderCache{size: size, byID: map[string]*cacheEntry{}}
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
	c.clock++
	c.byID[o.ID] = &cacheEntry{order: o, used: c.clock}
	if len(c.byID) > c.size {
		c.evictOldest()
	}
}

// evictOldest drops the least recently used eighth at once, so that the sort
// is paid once per size/8 insertions.
func (c *orderCache) evictOldest() {
	ids := slices.Collect(maps.Keys(c.byID))
	slices.SortFunc(ids, func(a, b string) int { return cmp.Compare(c.byID[a].used, c.byID[b].used) })
	for _, id := range ids[:max(1, c.size/8)] {
		delete(c.byID, id)
	}
}

func (c *orderCache) drop(id string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.byID, id)
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
