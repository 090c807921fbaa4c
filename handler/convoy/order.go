package convoy

import (
	"cmp"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"time"
)

// Status is an order's lifecycle state.
type Status string

const (
	StatusNew     Status = "new"
	StatusOpen    Status = "open"
	StatusDeleted Status = "deleted"
)

// Rejection reasons that callers may rely on.
const (
	ReasonSequenceComplete = "sequence complete"
	ReasonSkipped          = "skipped by operator"
)

// TxEntry is one transaction held by an order, in the order it was added.
type TxEntry struct {
	TxID   string          `json:"txId"`
	Amount int64           `json:"amount"`
	Data   json.RawMessage `json:"data,omitempty"` // of the AddTransaction, or of the latest ModifyTransaction that carried data
}

// Rejection records a transaction that broke a business rule: it consumed its
// seq but had no effect. A seq skipped by an operator has no Op: its message
// was never read (the answer leaves "op" out rather than show it empty).
type Rejection struct {
	Seq    int64  `json:"seq"`
	Op     Op     `json:"op,omitempty"`
	TxID   string `json:"txId,omitempty"`
	Reason string `json:"reason"`
}

// TxRecord is one stored transaction: its position (0 for the first one
// added, then 1, 2, …) and its entry.
type TxRecord struct {
	Position int64
	TxEntry
}

// Order is the state one message needs (issue 27): the head (the fold's
// figures, the checkpoint AppliedSeq, the version) and the lowest of the
// messages parked behind a gap (issue 33: parked.go). Its history (transactions, rejections) stays in the store,
// read a page at a time (History, ReadView); the few transactions the order
// has looked up or written lately are remembered, at most maxKnown of them
// between calls, so that what an order holds does not grow with its history.
type Order struct {
	ID          string
	Status      Status
	Complete    bool
	Currency    string
	Data        json.RawMessage // of the CreateOrder, or of a DeleteOrder that carried data
	AppliedSeq  int64           // highest seq applied or rejected; all below it are too
	TotalAmount int64           // sum of the transactions' amounts
	TxCount     int64           // transactions added so far: the next one's position
	// Parked holds the lowest parked messages, the window: all of them
	// when ParkedCount says so, else at most ParkedPageSize (and
	// ParkedWindowBytes), the rest read a page at a time as a drain
	// reaches them (parked.go).
	Parked map[int64]Message
	// ParkedCount is how many messages are parked, in the window and beyond.
	ParkedCount int
	// ParkedLast is the highest parked seq; 0 if none, or not known (a head
	// written before it was kept): LastParked.
	ParkedLast   int64
	BlockedSince time.Time // when the current run of parked messages began; zero if none
	UpdatedAt    time.Time
	// AppliedAt is when AppliedSeq last advanced (a message applied or
	// rejected, or a seq skipped): the head's progress, which the lag's
	// status is judged by (Lag). Zero for a head written before it was kept.
	AppliedAt time.Time
	// Crit holds the critical times of its recently applied transactions.
	Crit CriticalTimes
	// Version counts the order's commits; it is the store's compare-and-swap
	// token. 0 means the order has no stored state.
	Version int64

	lagWindow time.Duration      // Crit's window (ProcessorOptions.LagWindow)
	known     map[string]knownTx // transactions looked up or written: a bounded working set
	present   int64              // entries of known that are present: all TxCount of them means known is the whole list
	tick      uint64             // recency clock of known
	window    parkedWindow       // what it knows of the parked messages beyond Parked
}

// knownTx is what the order knows of one txId: absent, or present at a
// position with an amount.
type knownTx struct {
	present bool
	pos     int64
	amount  int64
	used    uint64
}

// maxKnown is how many known transactions an order keeps between calls (the
// most recently used): enough for a ModifyTransaction that follows its
// AddTransaction closely to need no read, a constant whatever the history.
const maxKnown = 32

// NewOrder returns the state of an order nothing has happened to.
func NewOrder(id string) *Order {
	return &Order{ID: id, Status: StatusNew, Parked: map[int64]Message{}}
}

// Total is the sum of the transactions' amounts.
func (o *Order) Total() int64 { return o.TotalAmount }

// Knows reports whether the order knows whether txID exists (it has looked
// it up, or written it): deciding a ModifyTransaction needs it.
func (o *Order) Knows(txID string) bool {
	_, ok := o.known[txID]
	return ok
}

// Learn records what the store holds of txID: r, or nothing (r nil).
func (o *Order) Learn(txID string, r *TxRecord) {
	if r == nil {
		o.remember(txID, knownTx{})
		return
	}
	o.remember(txID, knownTx{present: true, pos: r.Position, amount: r.Amount})
}

func (o *Order) remember(txID string, k knownTx) {
	if o.known == nil {
		o.known = map[string]knownTx{}
	}
	o.tick++
	k.used = o.tick
	if k.present && !o.known[txID].present {
		o.present++
	}
	o.known[txID] = k
}

// knowsAll reports whether the order knows every transaction it has (it
// wrote them all, or looked them all up): a txId it does not know is absent.
func (o *Order) knowsAll() bool { return o.present >= o.TxCount }

// Lookup returns the txId whose stored record deciding m would need and the
// order does not know, if any: that of a ModifyTransaction (its amount and
// position), and with adds, that of an AddTransaction too (which the commit
// otherwise checks: it inserts the txId, and fails if it exists).
func (o *Order) Lookup(m Message, adds bool) (string, bool) {
	if m.Seq != o.AppliedSeq+1 || o.Complete || o.Status != StatusOpen {
		return "", false
	}
	switch t := m.Tx; {
	case t.Op == ModifyTransaction, t.Op == AddTransaction && adds:
		return t.TxID, !o.Knows(t.TxID) && !o.knowsAll()
	}
	return "", false
}

// NextParked returns the parked message that is next in sequence, if it is
// in the window (when it has run out, NextPage says where the next page starts).
func (o *Order) NextParked() (Message, bool) {
	m, ok := o.Parked[o.AppliedSeq+1]
	return m, ok
}

// Forget keeps the maxKnown most recently used known transactions: called
// between calls, when nothing uncommitted depends on the others.
func (o *Order) Forget() {
	if len(o.known) <= maxKnown {
		return
	}
	ids := slices.Collect(maps.Keys(o.known))
	slices.SortFunc(ids, func(a, b string) int { return cmp.Compare(o.known[b].used, o.known[a].used) })
	for _, id := range ids[maxKnown:] {
		if o.known[id].present {
			o.present--
		}
		delete(o.known, id)
	}
}

// MissingSeq is the seq the order waits for when messages are parked, else 0.
func (o *Order) MissingSeq() int64 {
	if o.ParkedCount == 0 {
		return 0
	}
	return o.AppliedSeq + 1
}

// Clone returns a deep copy of o.
func (o *Order) Clone() *Order {
	c := *o
	c.Parked = maps.Clone(o.Parked)
	if c.Parked == nil {
		c.Parked = map[int64]Message{}
	}
	c.known = maps.Clone(o.known)
	c.Crit = o.Crit.Clone()
	return &c
}

// Disposition is what a message did.
type Disposition string

const (
	Applied   Disposition = "applied"   // its transaction took effect
	Rejected  Disposition = "rejected"  // it broke a business rule; recorded, seq consumed
	Parked    Disposition = "parked"    // it arrived early and waits for the gap to fill
	Duplicate Disposition = "duplicate" // already applied, rejected or parked: no effect
	// Refused: its seq is more than MaxParkAhead past the order's appliedSeq.
	// No effect; the message is to be failed as unreadable (redelivered, then
	// dead-lettered), so that a corrupt seq cannot block its order forever.
	Refused Disposition = "refused"
)

// MaxParkAhead is how far past appliedSeq a message may be parked. Ledgers
// hold at most MaxLedgerTransactions (200,000 by default), so a real seq is
// never this far ahead of the order's progress; a seq further ahead is
// corrupt (or forged) and would leave the order blocked for good.
const MaxParkAhead = 1_000_000

// Outcome is what happened to one message.
type Outcome struct {
	Seq         int64
	Disposition Disposition
	Reason      string // for Rejected
	Drained     bool   // applied or rejected from the parked set
	// Of a drained message: what it carried when it was received (Message).
	MessageID   string
	EnqueuedAt  time.Time
	TraceParent string
}

func (out Outcome) String() string {
	s := fmt.Sprintf("seq %d %s", out.Seq, out.Disposition)
	if out.Drained {
		s += " (from parked)"
	}
	if out.Reason != "" {
		s += ": " + out.Reason
	}
	return s
}

// Receive applies the sequence rules to m: a duplicate changes nothing, an
// early message is parked, the next one is applied. It updates o and records
// the entity changes in c. It never drains parked messages: call DrainNext.
func (o *Order) Receive(m Message, now time.Time, c *Change) Outcome {
	switch {
	case m.Seq <= o.AppliedSeq:
		return Outcome{Seq: m.Seq, Disposition: Duplicate}
	case m.Seq > o.AppliedSeq+MaxParkAhead:
		return Outcome{Seq: m.Seq, Disposition: Refused, Reason: fmt.Sprintf("seq %d is more than %d past appliedSeq %d", m.Seq, MaxParkAhead, o.AppliedSeq)}
	case m.Seq > o.AppliedSeq+1:
		if !o.park(m, now, c) {
			return Outcome{Seq: m.Seq, Disposition: Duplicate}
		}
		o.UpdatedAt = now
		c.changed = true
		return Outcome{Seq: m.Seq, Disposition: Parked}
	default:
		if _, parked := o.Parked[m.Seq]; parked {
			// Its drain was cut: the parked copy is applied by DrainNext,
			// this one changes nothing (applied too, it would orphan that row).
			return Outcome{Seq: m.Seq, Disposition: Duplicate}
		}
		return o.apply(m, now, c)
	}
}

// DrainNext applies the parked message that is now next in sequence, if it
// is in the window: when the window has run out (NextPage), the caller adds
// the next page first (AddParkedPage).
func (o *Order) DrainNext(now time.Time, c *Change) (Outcome, bool) {
	m, ok := o.Parked[o.AppliedSeq+1]
	if !ok {
		return Outcome{}, false
	}
	o.unpark(m, c)
	out := o.apply(m, now, c)
	out.Drained, out.MessageID, out.EnqueuedAt, out.TraceParent = true, m.MessageID, m.EnqueuedAt, m.TraceParent
	return out, true
}

// Skip consumes seq, which must be the missing one, as rejected by an
// operator, so that the parked tail can drain. A parked seq was received:
// it is never skipped (its drain was cut; DrainNext applies it).
func (o *Order) Skip(seq int64, now time.Time, c *Change) error {
	if _, parked := o.Parked[seq]; parked {
		return fmt.Errorf("seq %d of order %q was received and is parked, not missing: it drains instead", seq, o.ID)
	}
	if seq != o.AppliedSeq+1 || o.ParkedCount == 0 {
		return fmt.Errorf("seq %d is not the missing seq of order %q", seq, o.ID)
	}
	o.reject(Message{Seq: seq}, "", ReasonSkipped, now, c)
	return nil
}

// apply folds m (the next seq) into the order, or rejects it.
func (o *Order) apply(m Message, now time.Time, c *Change) Outcome {
	if reason := o.check(m.Tx); reason != "" {
		o.reject(m, m.Tx.Op, reason, now, c)
		o.finish(m, now, c)
		return Outcome{Seq: m.Seq, Disposition: Rejected, Reason: reason}
	}
	t := m.Tx
	switch t.Op {
	case CreateOrder:
		o.Status, o.Currency, o.Data = StatusOpen, t.Currency, t.Data
	case AddTransaction:
		pos := o.TxCount
		o.TxCount++
		o.TotalAmount += *t.Amount
		o.remember(t.TxID, knownTx{present: true, pos: pos, amount: *t.Amount})
		c.addTx(TxRecord{Position: pos, TxEntry: TxEntry{TxID: t.TxID, Amount: *t.Amount, Data: t.Data}})
	case ModifyTransaction:
		k := o.known[t.TxID]
		o.TotalAmount += *t.Amount - k.amount
		k.amount = *t.Amount
		o.remember(t.TxID, k)
		c.modifyTx(TxRecord{Position: k.pos, TxEntry: TxEntry{TxID: t.TxID, Amount: *t.Amount, Data: t.Data}})
	case DeleteOrder:
		o.Status = StatusDeleted
		if t.Data != nil {
			o.Data = t.Data
		}
	}
	o.finish(m, now, c)
	return Outcome{Seq: m.Seq, Disposition: Applied}
}

// check returns why t cannot be applied now, or "".
func (o *Order) check(t Transaction) string {
	if o.Complete {
		return ReasonSequenceComplete
	}
	switch t.Op {
	case CreateOrder:
		if o.Status != StatusNew {
			return "order already created (status " + string(o.Status) + ")"
		}
		return ""
	}
	if o.Status != StatusOpen {
		return "order is not open (status " + string(o.Status) + ")"
	}
	k, known := o.known[t.TxID]
	if !known && t.Op == ModifyTransaction && !o.knowsAll() {
		// The processor looks it up first (Lookup); deciding without it
		// would take an existing transaction for a missing one.
		panic(fmt.Sprintf("convoy: ModifyTransaction of %q decided without looking it up", t.TxID))
	}
	// An AddTransaction of a txId the order does not know is taken as new:
	// the commit inserts its record, which fails if it exists (Store.Commit).
	exists := k.present
	switch {
	case t.Op == AddTransaction && exists:
		return fmt.Sprintf("transaction %q already exists", t.TxID)
	case t.Op == ModifyTransaction && !exists:
		return fmt.Sprintf("transaction %q does not exist", t.TxID)
	case t.Op == DeleteOrder:
		return ""
	}
	// Validation bounds every amount; checked again here because a message's
	// validity is the caller's promise, and the total must never wrap.
	if t.Amount == nil {
		return "amount is missing"
	}
	if why := AmountProblem(*t.Amount); why != "" {
		return "amount " + why
	}
	total := o.TotalAmount + *t.Amount
	if t.Op == ModifyTransaction {
		total -= k.amount
	}
	if total > MaxTotal || total < -MaxTotal {
		return fmt.Sprintf("the order's total would be %d, beyond ±%d (2^53 − 1)", total, int64(MaxTotal))
	}
	return ""
}

func (o *Order) reject(m Message, op Op, reason string, now time.Time, c *Change) {
	r := Rejection{Seq: m.Seq, Op: op, TxID: m.Tx.TxID, Reason: reason}
	c.Rejections = append(c.Rejections, r)
	o.AppliedSeq, o.UpdatedAt, o.AppliedAt = m.Seq, now, now
	c.changed = true
}

// finish advances the checkpoint; last: true ends the sequence.
func (o *Order) finish(m Message, now time.Time, c *Change) {
	o.AppliedSeq, o.UpdatedAt, o.AppliedAt = m.Seq, now, now
	c.changed = true
	if !m.EnqueuedAt.IsZero() {
		o.Crit.Add(now, now.Sub(m.EnqueuedAt), cmp.Or(o.lagWindow, DefaultLagWindow))
	}
	if m.Last {
		o.Complete = true
	}
}
