package convoy

import (
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
// seq but had no effect.
type Rejection struct {
	Seq    int64  `json:"seq"`
	Op     Op     `json:"op"`
	TxID   string `json:"txId,omitempty"`
	Reason string `json:"reason"`
}

// Order is the durable state of one order: the fold of its transactions so
// far, the checkpoint (AppliedSeq) and the messages parked behind a gap.
type Order struct {
	ID           string
	Status       Status
	Complete     bool
	Currency     string
	Data         json.RawMessage // of the CreateOrder, or of a DeleteOrder that carried data
	AppliedSeq   int64           // highest seq applied or rejected; all below it are too
	Transactions []TxEntry
	Rejected     []Rejection // ascending seq
	Parked       map[int64]Message
	BlockedSince time.Time // when the current run of parked messages began; zero if none
	UpdatedAt    time.Time
	// Version counts the order's commits; it is the store's compare-and-swap
	// token. 0 means the order has no stored state.
	Version int64

	txIndex map[string]int // TxID → position in Transactions, derived
	total   int64          // sum of the amounts, derived with txIndex
}

// NewOrder returns the state of an order nothing has happened to.
func NewOrder(id string) *Order {
	return &Order{ID: id, Status: StatusNew, Parked: map[int64]Message{}}
}

// Total is the sum of the transactions' amounts.
func (o *Order) Total() int64 {
	o.indexOf("") // derives the total with the index
	return o.total
}

// MissingSeq is the seq the order waits for when messages are parked, else 0.
func (o *Order) MissingSeq() int64 {
	if len(o.Parked) == 0 {
		return 0
	}
	return o.AppliedSeq + 1
}

// Clone returns a deep copy of o.
func (o *Order) Clone() *Order {
	c := *o
	c.Transactions = slices.Clone(o.Transactions)
	c.Rejected = slices.Clone(o.Rejected)
	c.Parked = maps.Clone(o.Parked)
	if c.Parked == nil {
		c.Parked = map[int64]Message{}
	}
	c.txIndex = nil
	return &c
}

func (o *Order) indexOf(txID string) (int, bool) {
	if o.txIndex == nil {
		o.txIndex = make(map[string]int, len(o.Transactions))
		o.total = 0
		for i, t := range o.Transactions {
			o.txIndex[t.TxID] = i
			o.total += t.Amount
		}
	}
	i, ok := o.txIndex[txID]
	return i, ok
}

func (o *Order) addTx(t TxEntry) int {
	o.indexOf(t.TxID) // builds the index if needed
	o.Transactions = append(o.Transactions, t)
	o.txIndex[t.TxID] = len(o.Transactions) - 1
	o.total += t.Amount
	return len(o.Transactions) - 1
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
		if _, ok := o.Parked[m.Seq]; ok {
			return Outcome{Seq: m.Seq, Disposition: Duplicate}
		}
		if len(o.Parked) == 0 {
			o.BlockedSince = now
		}
		o.Parked[m.Seq] = m
		o.UpdatedAt = now
		c.park(m)
		c.changed = true
		return Outcome{Seq: m.Seq, Disposition: Parked}
	default:
		return o.apply(m, now, c)
	}
}

// DrainNext applies the parked message that is now next in sequence, if any.
func (o *Order) DrainNext(now time.Time, c *Change) (Outcome, bool) {
	m, ok := o.Parked[o.AppliedSeq+1]
	if !ok {
		return Outcome{}, false
	}
	delete(o.Parked, m.Seq)
	c.unpark(m.Seq)
	if len(o.Parked) == 0 {
		o.BlockedSince = time.Time{}
	}
	out := o.apply(m, now, c)
	out.Drained = true
	return out, true
}

// Skip consumes seq, which must be the missing one, as rejected by an
// operator, so that the parked tail can drain.
func (o *Order) Skip(seq int64, now time.Time, c *Change) error {
	if seq != o.AppliedSeq+1 || len(o.Parked) == 0 {
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
		i := o.addTx(TxEntry{TxID: t.TxID, Amount: *t.Amount, Data: t.Data})
		c.putTx(i, o.Transactions[i])
	case ModifyTransaction:
		i, _ := o.indexOf(t.TxID)
		o.total += *t.Amount - o.Transactions[i].Amount
		o.Transactions[i].Amount = *t.Amount
		if t.Data != nil {
			o.Transactions[i].Data = t.Data
		}
		c.putTx(i, o.Transactions[i])
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
	i, exists := o.indexOf(t.TxID)
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
	total := o.Total() + *t.Amount
	if t.Op == ModifyTransaction {
		total -= o.Transactions[i].Amount
	}
	if total > MaxTotal || total < -MaxTotal {
		return fmt.Sprintf("the order's total would be %d, beyond ±%d (2^53 − 1)", total, int64(MaxTotal))
	}
	return ""
}

func (o *Order) reject(m Message, op Op, reason string, now time.Time, c *Change) {
	r := Rejection{Seq: m.Seq, Op: op, TxID: m.Tx.TxID, Reason: reason}
	o.Rejected = append(o.Rejected, r)
	c.Rejections = append(c.Rejections, r)
	o.AppliedSeq, o.UpdatedAt = m.Seq, now
	c.changed = true
}

// finish advances the checkpoint; last: true ends the sequence.
func (o *Order) finish(m Message, now time.Time, c *Change) {
	o.AppliedSeq, o.UpdatedAt = m.Seq, now
	c.changed = true
	if m.Last {
		o.Complete = true
	}
}
