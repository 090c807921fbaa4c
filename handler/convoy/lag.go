package convoy

import (
	"context"
	"time"
)

// LagStatus is how an order keeps up with what was published to it
// (docs/operations.md, "Lag per order"), judged over a window, not against a
// threshold of backlog or age.
type LagStatus string

const (
	LagOK         LagStatus = "ok"          // nothing waiting
	LagCatchingUp LagStatus = "catching-up" // something waiting, and the head moved (or the wait began) within the window
	LagStalled    LagStatus = "stalled"     // something waiting, no gap, and the head has not moved for the whole window
	LagBlocked    LagStatus = "blocked"     // something waiting behind a gap: messages parked, or the missing one dead-lettered
)

// DefaultLagWindow is the window the status is judged over (the app setting
// LagWindowSeconds defaults to it).
const DefaultLagWindow = 5 * time.Minute

// Published is what publishing allocated to an order (the ledgers table's
// counter and alloc rows): the last seq given to it, and when the ledger
// that was given seq got its numbers.
type Published struct {
	LastSeq int64
	// SeqAllocatedAt is when seq (the one asked about) was allocated; zero
	// when seq is past LastSeq or its allocation is not found.
	SeqAllocatedAt time.Time
	// DeadLetteredSeq is the seq an AutoReplay run last found dead-lettered
	// as the order's next one (ActiveIndex.NoteDeadLettered); 0 for none.
	DeadLetteredSeq int64
}

// Allocations reads what publishing allocated to an order: a bounded number
// of reads, whatever the order's history (tablestore.Ledgers: one query).
// Published is zero for an order nothing was published to (fed by a
// producer of the user's own); its ActiveEntry tells what the processor
// noted instead (PublishedTo joins the two).
type Allocations interface {
	Published(ctx context.Context, orderID string, seq int64) (Published, error)
	// ActiveEntry is the order's entry in the active-orders index, one
	// point read; false when it has none.
	ActiveEntry(ctx context.Context, orderID string) (ActiveOrder, bool, error)
}

// PublishedTo is what was published to an order for its seq: what
// publishing allocated, or for an order nothing was published to, what the
// processor noted in its active entry (Published.WithSeen), one read more.
// The lag survey, which has the entry from its scan, reads only Published.
func PublishedTo(ctx context.Context, a Allocations, orderID string, seq int64) (Published, error) {
	p, err := a.Published(ctx, orderID, seq)
	if err != nil || p != (Published{}) {
		return p, err
	}
	e, ok, err := a.ActiveEntry(ctx, orderID)
	if err != nil || !ok {
		return p, err
	}
	return p.WithSeen(e, seq), nil
}

// ActiveOrder is an entry of the active-orders index: an order publishing
// gave seqs to, or whose messages the processor received, since its entry
// was last removed.
type ActiveOrder struct {
	OrderID     string
	PublishedAt time.Time // when the entry was last written (by publishing or by the processor)
	// SeenSeq and SeenAt are what the processor last wrote into the entry
	// (ActiveMarker): the highest seq of the messages it was given, and
	// when Service Bus enqueued the last of them; zero when only publishing
	// wrote it. For an order fed by a producer of the user's own, they stand
	// in for what publishing allocated (Published.WithSeen).
	SeenSeq int64
	SeenAt  time.Time
	// DeadLetteredSeq is NoteDeadLettered's note for an order nothing was
	// published to (no counter to keep it); 0 for none.
	DeadLetteredSeq int64
	ETag            string // of the stored entry, for Deactivate
}

// Seen is what the processor writes into an order's active entry.
type Seen struct {
	Seq int64     // the highest seq of the messages given to the processor
	At  time.Time // when Service Bus enqueued that message (the processor's clock if unknown)
}

// ActiveMarker puts an order into the active-orders index from the
// processor (ProcessorOptions.Active), so that an order fed by any producer
// of the orders queue, not only by publishing, has its lag surveyed.
type ActiveMarker interface {
	// MarkActive writes the order's entry, creating it or merging seen into
	// the one there: either way a new ETag, so that a survey that read the
	// entry before removes nothing.
	MarkActive(ctx context.Context, orderID string, seen Seen) error
}

// ActiveIndex lists the orders that may have something waiting, so that
// their lag can be surveyed without visiting every order (AutoReplay,
// heal.LagSurvey). Publishing writes an order's entry after allocating its
// seqs and before sending them; the processor writes it (MarkActive) before
// the commit of a message of an order it does not know to be in it (see
// Processor.Process); the survey removes it, under the ETag it read, once
// the order has caught up and stayed idle for two windows: an entry written
// again since (a new allocation, a message received) is kept, and the
// processor writes the entry again when the order it is given looks idle.
type ActiveIndex interface {
	Allocations
	ActiveMarker
	// ScanActive returns up to limit entries after the order id after (""
	// from the start), by order id, and whether more follow.
	ScanActive(ctx context.Context, after string, limit int) ([]ActiveOrder, bool, error)
	// Deactivate removes e only if it is still as ScanActive returned it.
	Deactivate(ctx context.Context, e ActiveOrder) error
	// NoteDeadLettered records that seq, the order's next, is dead-lettered
	// (0: none is), for Published to tell (an order whose missing message
	// is dead-lettered with nothing parked behind it is blocked, not
	// stalled). For an order nothing was published to, the note goes into
	// its active entry (ActiveOrder.DeadLetteredSeq); an order in neither is
	// left as it is.
	NoteDeadLettered(ctx context.Context, orderID string, seq int64) error
}

// WithSeen folds into p, what publishing allocated to the order of e (for
// seq, its first unapplied one), what the processor noted in e: a seq it
// received beyond the last allocated (an order fed by a producer of the
// user's own has no allocation at all) counts as published, and when it was
// enqueued stands for when it was published; a dead-lettered seq noted in
// the entry counts when the counter has none.
func (p Published) WithSeen(e ActiveOrder, seq int64) Published {
	if e.SeenSeq > p.LastSeq {
		p.LastSeq = e.SeenSeq
	}
	if p.SeqAllocatedAt.IsZero() && e.SeenSeq == seq {
		p.SeqAllocatedAt = e.SeenAt
	}
	if p.DeadLetteredSeq == 0 {
		p.DeadLetteredSeq = e.DeadLetteredSeq
	}
	return p
}

// LagInput is what an order's lag is judged from.
type LagInput struct {
	Backlog      int64     // seqs allocated and not applied (LastSeq − AppliedSeq, at least 0)
	HeadSince    time.Time // when the first unapplied seq was published; zero if unknown
	AppliedAt    time.Time // when AppliedSeq last advanced; zero if unknown (see Key.Progress)
	Parked       int       // messages parked behind the gap
	DeadLettered bool      // the missing message is known to be dead-lettered
	Now          time.Time
	Window       time.Duration
}

// JudgeLag returns an order's lag status. With nothing waiting it is ok.
// Something waiting behind a gap (parked messages, or the missing message
// dead-lettered) is blocked: the head cannot move until the gap is filled.
// Otherwise the head is expected to move: it is catching up if it moved
// within the window, or if the first unapplied seq has been waiting for less
// than the window (an order idle for an hour that was just published to is
// not stalled); stalled if neither.
func JudgeLag(in LagInput) LagStatus {
	switch {
	case in.Parked > 0, in.DeadLettered && in.Backlog > 0:
		return LagBlocked
	case in.Backlog <= 0:
		return LagOK
	}
	// The latest moment progress was made or the wait began.
	since := in.AppliedAt
	if in.HeadSince.After(since) {
		since = in.HeadSince
	}
	if !since.IsZero() && in.Now.Sub(since) <= in.Window {
		return LagCatchingUp
	}
	return LagStalled
}

// Progress is when the head last moved: AppliedAt, or for a head written
// before it was kept, UpdatedAt (the last commit: a later time, so the
// status errs towards catching-up, never towards stalled too early).
func (o *Key) Progress() time.Time {
	if o.AppliedAt.IsZero() {
		return o.UpdatedAt
	}
	return o.AppliedAt
}

// Lag is an order's lag as OrderStatus shows it.
type Lag struct {
	// Backlog counts the seqs allocated to the order by publishing and not
	// yet applied or rejected (parked and dead-lettered ones included).
	Backlog int64 `json:"backlog"`
	// HeadAgeSeconds is how long the first unapplied seq has waited since it
	// was published; absent when nothing waits or its allocation is unknown.
	HeadAgeSeconds *float64  `json:"headAgeSeconds,omitempty"`
	Status         LagStatus `json:"status,omitempty"`
	Window         int64     `json:"window"` // seconds
	// Unavailable says why the lag is not known (the ledgers table is not
	// configured, or could not be read); Backlog and Status are then absent
	// in meaning (zero).
	Unavailable string `json:"unavailable,omitempty"`
}

// OrderLag computes o's lag from what was published to it (p, for seq
// o.AppliedSeq+1) at now, over window.
func OrderLag(o *Key, p Published, now time.Time, window time.Duration) Lag {
	// Parked, so published (by a producer of the ledgers table's or not):
	// up to the highest parked seq, at least one past the missing one per
	// parked message (the window may hold only the first of them).
	parked := max(o.ParkedCount, len(o.Parked))
	last := max(p.LastSeq, o.LastParked())
	if parked > 0 {
		last = max(last, o.AppliedSeq+1+int64(parked))
	}
	dead := p.DeadLetteredSeq != 0 && p.DeadLetteredSeq == o.AppliedSeq+1
	if dead { // sent, so waiting (an order nothing was published to has no counter to say so)
		last = max(last, p.DeadLetteredSeq)
	}
	l := Lag{Backlog: max(last-o.AppliedSeq, 0), Window: int64(window / time.Second)}
	var head time.Time
	if l.Backlog > 0 && !p.SeqAllocatedAt.IsZero() {
		head = p.SeqAllocatedAt
		age := max(now.Sub(head), 0).Seconds()
		age = float64(int64(age*1000)) / 1000 // milliseconds
		l.HeadAgeSeconds = &age
	}
	l.Status = JudgeLag(LagInput{Backlog: l.Backlog, HeadSince: head, AppliedAt: o.Progress(), Parked: parked,
		DeadLettered: dead, Now: now, Window: window})
	return l
}
