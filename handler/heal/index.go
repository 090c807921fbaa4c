package heal

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/convoy-dev/convoy/handler/convoy"
	"github.com/convoy-dev/convoy/handler/keyed"
	"github.com/convoy-dev/convoy/handler/operator"
	"github.com/convoy-dev/convoy/handler/replay"
)

// Missing says where an order's missing message is.
type Missing struct {
	// Where: "deadLetter" (in the orders queue's dead-letter sub-queue),
	// "deadLetterWithoutSeq" (the order has a dead letter without a readable
	// seq, most likely the missing one), "notDeadLettered" (not there: never
	// published, or still on its way), or "unknown" (the sub-queue could not
	// be read whole).
	Where            string `json:"where"`
	MessageID        string `json:"messageId,omitempty"`
	DeadLetterReason string `json:"deadLetterReason,omitempty"`
	Cause            string `json:"cause,omitempty"`
	Why              string `json:"why,omitempty"`
	// AutoReplay is the order's automatic replay state, when it has one.
	AutoReplay *State `json:"autoReplay,omitempty"`
	// LearntAt is when this was learnt (by an AutoReplay run, a replay or
	// a skip); later runs that saw the same left it as it is.
	LearntAt string `json:"learntAt,omitempty"`
}

// Where values.
const (
	WhereDeadLetter       = "deadLetter"
	WhereDeadLetterNoSeq  = "deadLetterWithoutSeq"
	WhereNotDeadLettered  = "notDeadLettered"
	WhereUnknown          = "unknown"
	defaultPeekLimit      = 50_000
	maxReasonsInSummaries = 20
)

// letter is what a run keeps of one peeked dead letter: never its body
// (60 KiB each, 50,000 in a peek), only what Missing and the run's choices
// read, its cause derived once as it is peeked.
type letter struct {
	seq    int64 // 0 when unreadable
	qseq   int64
	id     string
	reason string
	// cause is operator.Classify's without the key's appliedSeq;
	// addressed says the letter names its key and seq, so that an
	// appliedSeq can only add that the seq is too far ahead
	// (operator.WithAppliedSeq).
	cause     operator.Cause
	addressed bool
}

// newLetter keeps what a run needs of m, a dead letter of domain d; strs
// interns its repeated strings.
func newLetter(d keyed.Domain, m replay.DeadLetter, strs interned) letter {
	seq, ok := convoy.IntProperty(m.Properties[convoy.PropSeq])
	if !ok || seq < 1 {
		seq = 0
	}
	c := operator.Classify(d, m, -1)
	c.Why = strs.of(clip(c.Why, maxWhyBytes)) // it quotes the reason: a note is a Table property too
	return letter{seq: seq, qseq: m.SequenceNumber, id: strings.Clone(m.MessageID), reason: strs.of(clip(m.Reason, maxReasonBytes)),
		cause: c, addressed: operator.Addressed(m)}
}

// classify is operator.Classify(d, the dead letter, appliedSeq).
func (l letter) classify(d keyed.Domain, appliedSeq int64) operator.Cause {
	return operator.WithAppliedSeq(d, l.cause, l.addressed, l.seq, appliedSeq)
}

// interned shares the strings many dead letters repeat (a reason, a cause),
// up to maxInterned of them, rather than keeping a copy per letter.
type interned map[string]string

const maxInterned = 1000

func (m interned) of(s string) string {
	if v, ok := m[s]; ok {
		return v
	}
	s = strings.Clone(s) // not a slice of a larger buffer
	if len(m) < maxInterned {
		m[s] = s
	}
	return s
}

// DeadLetters is what one peek of the dead-letter sub-queue saw, by order.
type DeadLetters struct {
	domain  keyed.Domain // whose dead letters they are
	byOrder map[string][]letter
	// Counts.
	Total    int            `json:"total"`
	ByReason map[string]int `json:"byReason"`
	// Transient and Permanent count by operator.Classify (without the orders'
	// appliedSeq: a seq too far ahead is counted transient here).
	Transient int `json:"transient"`
	Permanent int `json:"permanent"`
	// Complete: the peek read the whole sub-queue.
	Complete bool `json:"complete"`
	// unread says why the peek stopped before the end ("" when it did not,
	// or stopped at its limit).
	unread string
	// qseqs are the sequence numbers read, in the sub-queue's order.
	qseqs []int64
}

// ReadDeadLetters peeks the whole sub-queue of domain dom's queue (locking
// nothing), up to limit messages. When ctx ends after at least one page was
// read, what was read is returned, not Complete; an error means nothing
// could be read.
func ReadDeadLetters(ctx context.Context, dom keyed.Domain, src replay.Source, limit int) (*DeadLetters, error) {
	if limit <= 0 {
		limit = defaultPeekLimit
	}
	d := &DeadLetters{domain: dom, byOrder: map[string][]letter{}, ByReason: map[string]int{}}
	strs := interned{}
	var from int64
	largest := 0
	for {
		// At the limit, one more message is asked for: none proves the end.
		batch, err := src.Peek(ctx, from, max(1, min(replay.PeekPage(largest), limit-d.Total)))
		if err != nil && d.Total > 0 && ctx.Err() != nil {
			d.unread = fmt.Sprintf("the dead-letter queue was read only in part (%d messages) before the deadline", d.Total)
			break
		}
		if err != nil {
			return nil, fmt.Errorf("peek dead letters: %w", err)
		}
		if len(batch) == 0 {
			d.Complete = true
			break
		}
		if d.Total >= limit {
			break // more than limit: not read whole
		}
		for _, m := range batch {
			largest = max(largest, replay.MessageBytes(m))
			from = max(from, m.SequenceNumber+1)
			d.Total++
			d.qseqs = append(d.qseqs, m.SequenceNumber)
			reason := clip(m.Reason, maxReasonBytes) // as newLetter keeps it
			if reason == "" {
				reason = "(none)"
			}
			if len(d.ByReason) < maxReasonsInSummaries || d.ByReason[reason] > 0 {
				d.ByReason[reason]++
			} else {
				d.ByReason["(other)"]++
			}
			l := newLetter(dom, m, strs)
			if l.cause.Class == operator.Transient {
				d.Transient++
			} else {
				d.Permanent++
			}
			order := m.SessionID
			if _, seen := d.byOrder[order]; !seen {
				order = strings.Clone(order)
			}
			d.byOrder[order] = append(d.byOrder[order], l)
		}
	}
	return d, nil
}

// Missing says where seq of orderID is (appliedSeq as operator.Classify
// takes it).
func (d *DeadLetters) Missing(orderID string, seq, appliedSeq int64) Missing {
	var noSeq *letter
	for i, l := range d.byOrder[orderID] {
		if l.seq == seq {
			c := l.classify(d.domain, appliedSeq)
			return Missing{Where: WhereDeadLetter, MessageID: l.id, DeadLetterReason: l.reason, Cause: c.Class, Why: c.Why}
		}
		if l.seq == 0 && noSeq == nil {
			noSeq = &d.byOrder[orderID][i]
		}
	}
	if noSeq != nil {
		c := noSeq.classify(d.domain, appliedSeq)
		return Missing{Where: WhereDeadLetterNoSeq, MessageID: noSeq.id, DeadLetterReason: noSeq.reason, Cause: c.Class, Why: c.Why}
	}
	if !d.Complete {
		why := d.unread
		if why == "" {
			why = "the dead-letter queue holds more than one peek reads"
		}
		return Missing{Where: WhereUnknown, Why: why}
	}
	return Missing{Where: WhereNotDeadLettered, Why: "not in the dead-letter queue: never published (resend its ledger), or still on its way"}
}

// transientOrders lists the orders with at least one dead letter of a
// transient cause, with the lowest such seq, by their oldest dead letter.
func (d *DeadLetters) transientOrders() []candidate {
	var out []candidate
	for id, ls := range d.byOrder {
		c := candidate{orderID: id}
		for _, l := range ls {
			if l.cause.Class != operator.Transient {
				continue
			}
			if c.seq == 0 || l.seq < c.seq {
				c.seq = l.seq
			}
			if c.qseq == 0 || l.qseq < c.qseq {
				c.qseq = l.qseq
			}
		}
		if c.seq > 0 {
			out = append(out, c)
		}
	}
	slices.SortFunc(out, func(a, b candidate) int { return int(a.qseq - b.qseq) })
	return out
}

type candidate struct {
	orderID string
	seq     int64 // the lowest seq dead-lettered for a transient cause
	qseq    int64
	blocked bool
}

// permanentOf counts the dead letters of orderID of a permanent cause.
func (d *DeadLetters) permanentOf(orderID string) int {
	n := 0
	for _, l := range d.byOrder[orderID] {
		if l.cause.Class == operator.Permanent {
			n++
		}
	}
	return n
}

// lastTransientOf is the highest sequence number (in the queue) of the
// dead letters of a transient cause of the orders in ids: a replay pass that
// has received it has received every one it wants.
func (d *DeadLetters) lastTransientOf(ids map[string]claim) int64 {
	var last int64
	for id := range ids {
		for _, l := range d.byOrder[id] {
			if l.cause.Class == operator.Transient {
				last = max(last, l.qseq)
			}
		}
	}
	return last
}

// settled removes from d the dead letters of orderID with the given seqs
// (re-sent and completed, or completed as duplicates), so that the counts
// say what the sub-queue holds after a run's pass.
func (d *DeadLetters) settled(orderID string, seqs []int64) {
	ls := d.byOrder[orderID]
	kept := ls[:0]
	for _, l := range ls {
		if l.seq == 0 || !slices.Contains(seqs, l.seq) {
			kept = append(kept, l)
			continue
		}
		d.Total--
		reason := l.reason
		if reason == "" {
			reason = "(none)"
		}
		if d.ByReason[reason] > 0 {
			d.ByReason[reason]--
			if d.ByReason[reason] == 0 {
				delete(d.ByReason, reason)
			}
		}
		if l.cause.Class == operator.Transient {
			d.Transient--
		} else {
			d.Permanent--
		}
	}
	d.byOrder[orderID] = kept
}

// pending counts the orders with a dead letter of a transient cause, and of
// those, the ones already replayed whose dead letter came back.
func (d *DeadLetters) pending(states map[string]State) (pending, retrying int) {
	for _, c := range d.transientOrders() {
		pending++
		if st, ok := states[c.orderID]; ok && st.Attempts > 0 && st.Seq == c.seq {
			retrying++
		}
	}
	return pending, retrying
}

// windowEnd is the sequence number of the n-th dead letter read (the last
// one a pass that receives n can reach), or of the last one read when fewer.
func (d *DeadLetters) windowEnd(n int) int64 {
	if len(d.qseqs) == 0 {
		return 0
	}
	return d.qseqs[min(n, len(d.qseqs))-1]
}
