package convoy

import (
	"context"
	"fmt"
	"sync"
	"time"
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
//
// The rule holds when the check and the commit are close in time. A call
// that took half a window or more (a commit that hung) may have skipped the
// write for a head that looked busy and then committed after a survey found
// it idle and removed its entry: markAgainIfSlow writes it once more.
func (p *Processor) markActive(ctx context.Context, o *Key, msgs []Message) error {
	if p.active == nil || len(msgs) == 0 {
		return nil
	}
	last := highest(msgs)
	if last.Seq <= o.AppliedSeq {
		return nil
	}
	idle := o.ParkedCount == 0 && len(o.Parked) == 0 && p.now().Sub(o.Progress()) >= p.lag
	if o.Version > 0 && !idle && p.marked.has(o.ID) {
		return nil
	}
	if err := p.active.MarkActive(ctx, o.ID, p.seen(last)); err != nil {
		return fmt.Errorf("index %s %q as active: %w", p.domain.Noun(), o.ID, err)
	}
	p.marked.add(o.ID)
	return nil
}

// markAgainIfSlow writes the order's entry after a Process call begun at
// began that took half a window or more, whatever its outcome: best effort
// (its commits, if any, landed; a failure is the next message's to mend).
// A survey removes an entry only for a head still for two windows; the call
// checked a head that had moved within one, so the removal it missed came
// more than a window after its check (less the clocks' skew, up to half a
// window).
func (p *Processor) markAgainIfSlow(ctx context.Context, orderID string, msgs []Message, began time.Time) {
	if p.active == nil || len(msgs) == 0 || p.now().Sub(began) < p.lag/2 || ctx.Err() != nil {
		return
	}
	if p.active.MarkActive(ctx, orderID, p.seen(highest(msgs))) == nil {
		p.marked.add(orderID)
	}
}

// seen is what the entry says of m: its seq, and when it was enqueued (now
// if unknown).
func (p *Processor) seen(m Message) Seen {
	at := m.EnqueuedAt
	if at.IsZero() {
		at = p.now()
	}
	return Seen{Seq: m.Seq, At: at.UTC()}
}

// highest is the message of msgs (not empty) with the highest seq.
func highest(msgs []Message) Message {
	last := msgs[0]
	for _, m := range msgs[1:] {
		if m.Seq > last.Seq {
			last = m
		}
	}
	return last
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
