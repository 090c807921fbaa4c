package convoy

import (
	"context"
	"fmt"
	"sync"
)

// markActive puts o's order into the active-orders index before the commit
// of msgs, unless it is known to be there: every order the processor
// receives a message for is in the index while it may have something
// waiting, whoever sent the message, at no cost to a message in steady
// state. The entry is written when
//
//   - this instance has not written it yet (the order's first message here,
//     or one it forgot: it keeps a bounded set), or the order has no state;
//   - the order looks idle: nothing parked and its head has not moved for a
//     window. The survey removes an entry only when the order is caught up,
//     has nothing parked and its head has not moved for two windows, and
//     only processing a message changes a head with nothing parked (a skip
//     or a drain needs parked messages). So the first commit after a
//     removal is this one's, of a head that looks idle, and it writes the
//     entry back; a head that moved within the window, or has messages
//     parked, was committed after any removal, by a call that wrote it back.
//
// The entry is written before the commit and carries the highest seq of
// msgs, which is above the order's applied seq until the commit lands: a
// survey that reads the entry and then the head before the commit sees
// something waiting and keeps it; one that read the entry before this write
// removes nothing (the write changed its ETag). Messages that are all
// duplicates change nothing and write nothing.
func (p *Processor) markActive(ctx context.Context, o *Order, msgs []Message) error {
	if p.active == nil || len(msgs) == 0 {
		return nil
	}
	last := msgs[0]
	for _, m := range msgs[1:] {
		if m.Seq > last.Seq {
			last = m
		}
	}
	if last.Seq <= o.AppliedSeq {
		return nil
	}
	idle := o.ParkedCount == 0 && len(o.Parked) == 0 && p.now().Sub(o.Progress()) >= p.lag
	if o.Version > 0 && !idle && p.marked.has(o.ID) {
		return nil
	}
	at := last.EnqueuedAt
	if at.IsZero() {
		at = p.now()
	}
	if err := p.active.MarkActive(ctx, o.ID, Seen{Seq: last.Seq, At: at.UTC()}); err != nil {
		return fmt.Errorf("index order %q as active: %w", o.ID, err)
	}
	p.marked.add(o.ID)
	return nil
}

// markedSet is the orders whose active entry this instance wrote, at most
// size of them: one forgotten costs one write more, on its next message.
type markedSet struct {
	mu   sync.Mutex
	size int
	ids  map[string]struct{}
}

// markedPerCached bounds the set at this many times the order cache's size
// (at least minMarked): an id costs about a hundred bytes, an order's state
// about nine hundred.
const (
	markedPerCached = 8
	minMarked       = 10_000
)

func newMarkedSet(cacheSize int) *markedSet {
	return &markedSet{size: max(cacheSize*markedPerCached, minMarked), ids: map[string]struct{}{}}
}

func (s *markedSet) has(id string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	_, ok := s.ids[id]
	return ok
}

func (s *markedSet) add(id string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.ids[id]; ok {
		return
	}
	if len(s.ids) >= s.size {
		for other := range s.ids { // any one
			delete(s.ids, other)
			break
		}
	}
	s.ids[id] = struct{}{}
}
