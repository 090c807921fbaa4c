package convoy

import (
	"cmp"
	"maps"
	"slices"
	"sync"
)

// keyCache is a small LRU of order states, bounded in orders and in bytes
// (Key.Size), and the orders whose last call ended in a conflict
// (suspects: their next call looks added txIds up).
type keyCache struct {
	mu       sync.Mutex
	size     int
	maxBytes int64
	bytes    int64 // the cached orders' sizes, as put
	byID     map[string]*cacheEntry
	clock    uint64
	suspects map[string]bool // at most max(size, minSuspects) of them
}

// suspect reports whether the order's last call ended in a conflict.
func (c *keyCache) suspect(id string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.suspects[id]
}

// mark records whether the order's call ended in a conflict.
func (c *keyCache) mark(id string, suspect bool) {
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
	order *Key
	used  uint64
	size  int64 // the order's Size when put
}

func newKeyCache(size int, maxBytes int64) *keyCache {
	return &keyCache{size: size, maxBytes: maxBytes, byID: map[string]*cacheEntry{}}
}

// get hands out the cached order itself: callers hold the order's lock and
// either put it back or drop it.
func (c *keyCache) get(id string) *Key {
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

func (c *keyCache) put(o *Key) {
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

// evictOldest drops the least recently used orders until 1/evictShare of
// the room is free (in orders and in bytes, whichever ran out), so that the
// sort is paid once per many insertions.
func (c *keyCache) evictOldest() {
	ids := slices.Collect(maps.Keys(c.byID))
	slices.SortFunc(ids, func(a, b string) int { return cmp.Compare(c.byID[a].used, c.byID[b].used) })
	for _, id := range ids[:len(ids)-1] { // the order just put stays
		if len(c.byID) <= c.size-c.size/evictShare && c.bytes <= c.maxBytes-c.maxBytes/evictShare {
			break
		}
		c.remove(id)
	}
}

// evictShare: an eviction frees an eighth of the cache, so that a full
// cache sorts its entries once per size/8 insertions, not at each, and
// keeps seven eighths of what it holds warm.
const evictShare = 8

func (c *keyCache) remove(id string) {
	if e, ok := c.byID[id]; ok {
		c.bytes -= e.size
		delete(c.byID, id)
	}
}

func (c *keyCache) drop(id string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.remove(id)
}
