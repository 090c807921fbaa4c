package convoy

import (
	"fmt"
	"maps"
	"slices"
	"time"
)

// The parked tail in pages (issue 33). An order may have up to MaxParkAhead
// messages parked (one ledger alone may give it 200,000), so an Order holds
// only the lowest of them, its window (Key.Parked), and their number
// (Key.ParkedCount, which the head keeps). Load reads the head and the
// first ParkedLoadSize parked messages; a drain that exhausts the window
// reads the next ParkedPageSize (Store.Parked); a message whose seq lies
// beyond the window is a duplicate if its row exists (Store.IsParked, one
// point read, needed only while more are parked than the window holds).
const (
	// ParkedLoadSize is how many parked messages Load reads with the head:
	// what an order without a cached state, and every operator read of it
	// (OrderStatus, SkipGap), costs whatever its tail.
	ParkedLoadSize = 16
	// ParkedPageSize is how many parked messages a drain reads at a time
	// when the window runs out, and the most the window holds.
	ParkedPageSize = 100
	// ParkedWindowBytes bounds the window's size (MessageSize), one message
	// at least.
	ParkedWindowBytes = 512 << 10
)

// parkedWindow is what an order knows of its parked tail beyond Parked.
type parkedWindow struct {
	// end: when fewer messages are in Parked than ParkedCount, every parked
	// seq up to end is in Parked and every other one lies above end.
	end int64
	// probe is what the store said of a seq beyond the window (LearnParked).
	probe parkedProbe
}

type parkedProbe struct {
	seq    int64 // 0: none
	parked bool
}

// What Size and MessageSize add to the bytes of an order's and a message's
// strings for what Go keeps around them (fields, map entries, slice
// headers): estimates of the right order, which is all a bound in bytes of
// the processor's cache (ProcessorOptions.CacheBytes) needs.
const (
	messageOverhead  = 200  // a Message and its command
	orderOverhead    = 1024 // an Order's head, its maps and its window
	bucketBytes      = 16   // one (bucket, count) of its critical times
	knownRowOverhead = 96   // one row the key knows, besides its id and properties
	propOverhead     = 40   // one property, besides its name and string
)

// MessageSize is about how many bytes a parked message takes in memory: its
// command is its stored properties (stored).
func MessageSize(m Message) int {
	return messageOverhead + len(m.MessageID) + len(m.TraceParent) + len(m.Oversize) + propsSize(m.Stored)
}

// stored returns m as its parked row keeps it: its command encoded, or
// when that is over its domain's budget or not storable, none (Oversize).
// The command as read is dropped: a parked message holds one copy of its
// command, and is decided from its row as one read back from the store is.
func (o *Key) stored(m Message) Message {
	if m.Stored == nil && m.Oversize == "" {
		stored, err := o.domain.EncodeCommand(m.Command)
		m.Stored = stored
		why := rowProblem(m.Stored, parkedProps)
		if err != nil {
			why = "its encoding failed: " + err.Error()
		} else if n, b := m.Stored.WireSize(), budget(o.domain).ParkedBytes; why == "" && n > b {
			why = fmt.Sprintf("it takes %d bytes, more than the %d a parked command may", n, b)
		}
		if why != "" {
			m.Stored, m.Oversize = nil, why
		}
	}
	m.Command = nil
	return m
}

// partial reports whether messages are parked beyond the window.
func (o *Key) partial() bool { return o.ParkedCount > len(o.Parked) }

// covers reports whether the window says whether seq is parked.
func (o *Key) covers(seq int64) bool { return !o.partial() || seq <= o.window.end }

// above reports whether seq lies above every parked seq, so is not parked:
// a message that arrives in order behind a long tail needs no read.
func (o *Key) above(seq int64) bool { return o.ParkedLast != 0 && seq > o.ParkedLast }

// LastParked is the highest parked seq (0 if none): ParkedLast, or when that
// is not known (a head written before it was kept), the highest the window
// holds, a lower bound.
func (o *Key) LastParked() int64 {
	last := o.ParkedLast
	for seq := range o.Parked {
		last = max(last, seq)
	}
	return last
}

// ParkedUnknown returns m's seq when receiving m needs to know whether that
// seq is parked and the order does not: it lies beyond the window (more are
// parked than the window holds), not above the highest parked seq, and was
// not parked by c. The caller asks
// the store (Store.IsParked) and tells the order (LearnParked) before
// Receive.
func (o *Key) ParkedUnknown(m Message, c *Change) (int64, bool) {
	switch {
	case m.Seq <= o.AppliedSeq+1, m.Seq > o.AppliedSeq+MaxParkAhead, o.covers(m.Seq), o.above(m.Seq), o.window.probe.seq == m.Seq:
		return 0, false
	}
	if _, ok := c.Park[m.Seq]; ok {
		return 0, false
	}
	return m.Seq, true
}

// LearnParked records whether the store holds seq parked (ParkedUnknown).
func (o *Key) LearnParked(seq int64, parked bool) {
	o.window.probe = parkedProbe{seq: seq, parked: parked}
}

// park parks m (seq above AppliedSeq+1) unless it is parked already, and
// reports whether it did.
func (o *Key) park(m Message, now time.Time, c *Change) bool {
	if _, ok := o.Parked[m.Seq]; ok {
		return false
	}
	into := o.covers(m.Seq)
	if !into && !o.above(m.Seq) {
		if _, ok := c.Park[m.Seq]; ok {
			return false
		}
		p := o.window.probe
		if p.seq != m.Seq {
			// The processor asks first (ParkedUnknown); deciding without it
			// would park a message twice and count it twice.
			panic(fmt.Sprintf("convoy: seq %d beyond the parked window of %s %q decided without looking it up", m.Seq, o.noun(), o.ID))
		}
		o.window.probe = parkedProbe{}
		if p.parked {
			return false
		}
	}
	if o.ParkedCount == 0 {
		o.BlockedSince = now
		o.ParkedLast = m.Seq
	} else if o.ParkedLast != 0 {
		o.ParkedLast = max(o.ParkedLast, m.Seq)
	}
	o.ParkedCount++
	m = o.stored(m)
	if into {
		o.Parked[m.Seq] = m
		o.trimWindow()
	}
	c.park(m)
	return true
}

// unpark consumes the parked message m, which is in the window.
func (o *Key) unpark(m Message, c *Change) {
	delete(o.Parked, m.Seq)
	c.unpark(m.Seq)
	o.ParkedCount--
	if o.ParkedCount <= 0 {
		o.ParkedCount, o.ParkedLast, o.BlockedSince = 0, 0, time.Time{}
	}
}

// trimWindow drops the highest messages of the window until it holds at
// most ParkedPageSize messages and ParkedWindowBytes (one at least); what it
// drops stays parked beyond the window.
func (o *Key) trimWindow() {
	size := 0
	for _, m := range o.Parked {
		size += MessageSize(m)
	}
	if len(o.Parked) <= ParkedPageSize && size <= ParkedWindowBytes {
		return
	}
	seqs := slices.Sorted(maps.Keys(o.Parked))
	for len(seqs) > 1 && (len(seqs) > ParkedPageSize || size > ParkedWindowBytes) {
		last := seqs[len(seqs)-1]
		size -= MessageSize(o.Parked[last])
		delete(o.Parked, last)
		seqs = seqs[:len(seqs)-1]
	}
	o.window.end = seqs[len(seqs)-1]
}

// NextPage reports whether the window has run out while more messages are
// parked, and if so the seq after which the next page starts
// (Store.Parked's after).
func (o *Key) NextPage() (after int64, ok bool) {
	if len(o.Parked) > 0 || o.ParkedCount == 0 {
		return 0, false
	}
	return o.window.end, true
}

// AddParkedPage fills the empty window with a page of parked messages read
// from the store: page holds the lowest stored ones above NextPage's seq
// (all of them above 0 for Load), ascending; more says whether others
// follow. The messages c parked above that seq join it. A page that does
// not agree with ParkedCount (the store changed meanwhile) is an error
// wrapping ErrConflict: reload. c may be nil (Load).
func (o *Key) AddParkedPage(page []Message, more bool, c *Change) error {
	if len(o.Parked) > 0 {
		return fmt.Errorf("%s %q: a page of parked messages added to a window that is not empty", o.noun(), o.ID)
	}
	after := o.window.end
	size := 0
	for i, m := range page {
		if m.Seq <= after || (i > 0 && m.Seq <= page[i-1].Seq) {
			return fmt.Errorf("%s %q: parked page out of order (seq %d after %d): %w", o.noun(), o.ID, m.Seq, after, ErrConflict)
		}
		if i > 0 && (i >= ParkedPageSize || size+MessageSize(m) > ParkedWindowBytes) {
			page, more = page[:i], true
			break
		}
		size += MessageSize(m)
	}
	for _, m := range page {
		o.Parked[m.Seq] = m
	}
	end := int64(0)
	if len(page) > 0 {
		end = page[len(page)-1].Seq
	}
	if c != nil {
		for seq, m := range c.Park {
			if seq > after && (!more || seq < end) {
				o.Parked[seq] = m
			}
		}
	}
	n := len(o.Parked)
	if n > o.ParkedCount || n < o.ParkedCount && (!more || len(page) == 0) {
		clear(o.Parked)
		return fmt.Errorf("%s %q: %d parked message(s) counted, the store's pages say otherwise: %w", o.noun(), o.ID, o.ParkedCount, ErrConflict)
	}
	if n < o.ParkedCount {
		o.window.end = end
	}
	o.trimWindow()
	return nil
}

// Size is about how many bytes o holds in memory: its head, what it knows of
// its transactions and its parked window. What the processor's cache holds
// is bounded by it (ProcessorOptions.CacheBytes).
func (o *Key) Size() int64 {
	n := orderOverhead + len(o.ID) + o.stateSize + propsSize(o.StateProps) + bucketBytes*(len(o.Crit.Cur.Buckets)+len(o.Crit.Prev.Buckets))
	n += o.rows.size()
	for _, m := range o.Parked {
		n += MessageSize(m)
	}
	return int64(n)
}
