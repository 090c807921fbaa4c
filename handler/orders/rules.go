package orders

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/convoy-dev/convoy/handler/convoy"
	"github.com/convoy-dev/convoy/handler/fault"
	"github.com/convoy-dev/convoy/handler/keyed"
)

// Status is an order's lifecycle state.
type Status string

const (
	StatusNew     Status = "new"
	StatusOpen    Status = "open"
	StatusDeleted Status = "deleted"
)

// State is one order's state: what its head keeps besides the engine's
// figures. Its transactions are rows of the collections "t" (by position,
// TxId, Amount, Data) and "x" (by txId: Position, Amount).
type State struct {
	Status   Status
	Currency string
	Data     json.RawMessage // of the CreateOrder, or of a DeleteOrder that carried data
	Total    int64           // sum of the transactions' amounts
	TxCount  int64           // transactions added so far: the next one's position
}

// The collections of an order's rows.
const (
	byPosition = "t" // t:<position>: TxId, Amount, Data; the history the read routes page
	byTxID     = "x" // x:<txId>: Position, Amount; the point read a decision needs
)

// Rules are the order fold on the engine: keyed.Rules[State, Transaction].
type Rules struct{}

var (
	_      keyed.Rules[State, Transaction] = Rules{}
	_      keyed.Viewer[State]             = Rules{}
	Domain                                 = keyed.Erase[State, Transaction](Rules{})
)

// Name implements keyed.Rules.
func (Rules) Name() string { return "orders" }

// Noun implements keyed.Namer.
func (Rules) Noun() string { return "order" }

// ReadCommand implements keyed.Rules: DecodeBody, and the body's orderId
// must be the message's SessionId.
func (Rules) ReadCommand(key string, body []byte) (Transaction, error) {
	t, err := DecodeBody(body)
	if err != nil {
		return Transaction{}, err
	}
	if t.OrderID != key {
		return Transaction{}, fmt.Errorf("body orderId %q differs from SessionId %q", t.OrderID, key)
	}
	return t, nil
}

// ReadEntry implements keyed.Publisher: a ledger's transaction, read as
// ReadTransaction reads it (the same problems as a message body's).
func (Rules) ReadEntry(index int, raw []byte, extra ...string) (string, Transaction, map[string]json.RawMessage, []fault.Problem) {
	t, extras, problems := ReadTransaction(index, raw, extra...)
	return t.OrderID, t, extras, problems
}

// Body implements keyed.Publisher: EncodeBody.
func (Rules) Body(t Transaction) ([]byte, error) { return EncodeBody(t) }

// Needs implements keyed.Rules: a ModifyTransaction reads its x row; an
// AddTransaction guesses its x row absent (the commit inserts it).
func (Rules) Needs(s State, t Transaction) keyed.Needs {
	if s.Status != StatusOpen {
		return keyed.Needs{}
	}
	ref := []keyed.RowRef{{Collection: byTxID, ID: t.TxID}}
	switch t.Op {
	case ModifyTransaction:
		return keyed.Needs{Read: ref}
	case AddTransaction:
		return keyed.Needs{Absent: ref}
	}
	return keyed.Needs{}
}

// Decide implements keyed.Rules: the order fold (docs/contract.md).
func (Rules) Decide(s State, t Transaction, rows keyed.Rows) (State, keyed.Writes, error) {
	switch t.Op {
	case CreateOrder:
		if s.Status != StatusNew {
			return s, nil, keyed.Reject("order already created (status %s)", s.Status)
		}
		s.Status, s.Currency, s.Data = StatusOpen, t.Currency, t.Data
		return s, nil, nil
	}
	if s.Status != StatusOpen {
		return s, nil, keyed.Reject("order is not open (status %s)", s.Status)
	}
	if t.Op == DeleteOrder {
		s.Status = StatusDeleted
		if t.Data != nil {
			s.Data = t.Data
		}
		return s, nil, nil
	}
	if t.Op != AddTransaction && t.Op != ModifyTransaction {
		return s, nil, keyed.Reject("op %s is not one of CreateOrder, AddTransaction, ModifyTransaction, DeleteOrder", Quote(string(t.Op)))
	}
	row, exists := rows.Get(keyed.RowRef{Collection: byTxID, ID: t.TxID})
	switch {
	case t.Op == AddTransaction && exists:
		return s, nil, keyed.Reject("transaction %q already exists", t.TxID)
	case t.Op == ModifyTransaction && !exists:
		return s, nil, keyed.Reject("transaction %q does not exist", t.TxID)
	}
	// Validation bounds every amount; checked again here because a message's
	// validity is the caller's promise, and the total must never wrap.
	if t.Amount == nil {
		return s, nil, keyed.Reject("amount is missing")
	}
	if why := AmountProblem(*t.Amount); why != "" {
		return s, nil, keyed.Reject("amount %s", why)
	}
	total := s.Total + *t.Amount
	if t.Op == ModifyTransaction {
		total -= row.Int("Amount")
	}
	if total > MaxTotal || total < -MaxTotal {
		return s, nil, keyed.Reject("the order's total would be %d, beyond ±%d (2^53 − 1)", total, int64(MaxTotal))
	}
	s.Total = total
	entry := keyed.Props{{Name: "TxId", Value: t.TxID}, {Name: "Amount", Value: *t.Amount}}
	if len(t.Data) > 0 {
		entry = append(entry, keyed.Prop{Name: "Data", Value: string(t.Data)})
	}
	if t.Op == AddTransaction {
		pos := s.TxCount
		s.TxCount++
		return s, keyed.Writes{}.
			Append(byPosition, pos, entry).
			Insert(byTxID, t.TxID, keyed.Props{{Name: "Position", Value: pos}, {Name: "Amount", Value: *t.Amount}}), nil
	}
	// A modification replaces the amount, and the data when it carries some.
	pos := row.Int("Position")
	return s, keyed.Writes{}.
		Merge(byPosition, keyed.Position(pos), entry).
		Merge(byTxID, t.TxID, keyed.Props{{Name: "Position", Value: pos}, {Name: "Amount", Value: *t.Amount}}), nil
}

// Tag implements keyed.Rules: a rejection records its op and txId.
func (Rules) Tag(t Transaction) keyed.Props {
	return keyed.Props{{Name: "Op", Value: string(t.Op)}, {Name: "TxId", Value: t.TxID}}
}

// Version implements keyed.Rules: the head as written since issue 27.
func (Rules) Version() int { return 1 }

// EncodeState implements keyed.Rules: the head's Status, Currency, Total,
// TxCount and Data (when there is some).
func (Rules) EncodeState(s State) keyed.Props {
	p := keyed.Props{{Name: "Status", Value: string(s.Status)}, {Name: "Currency", Value: s.Currency},
		{Name: "Total", Value: s.Total}, {Name: "TxCount", Value: s.TxCount}}
	if len(s.Data) > 0 {
		p = append(p, keyed.Prop{Name: "Data", Value: string(s.Data)})
	}
	return p
}

// DecodeState implements keyed.Rules. No properties: a new order.
func (Rules) DecodeState(version int, p keyed.Props) (State, error) {
	if version != 1 {
		return State{}, fmt.Errorf("order state version %d is not one this release reads (1)", version)
	}
	s := State{Status: Status(p.String("Status")), Currency: p.String("Currency"), Data: data(p),
		Total: p.Int("Total"), TxCount: p.Int("TxCount")}
	if s.Status == "" {
		s.Status = StatusNew
	}
	return s, nil
}

// EncodeCommand implements keyed.Rules: a parked row's Op, TxId, Currency,
// Amount (when given) and Data (when there is some).
func (Rules) EncodeCommand(t Transaction) keyed.Props {
	p := keyed.Props{{Name: "Op", Value: string(t.Op)}, {Name: "TxId", Value: t.TxID}, {Name: "Currency", Value: t.Currency}}
	if t.Amount != nil {
		p = append(p, keyed.Prop{Name: "Amount", Value: *t.Amount})
	}
	if len(t.Data) > 0 {
		p = append(p, keyed.Prop{Name: "Data", Value: string(t.Data)})
	}
	return p
}

// DecodeCommand implements keyed.Rules.
func (Rules) DecodeCommand(key string, p keyed.Props) (Transaction, error) {
	t := Transaction{OrderID: key, Op: Op(p.String("Op")), TxID: p.String("TxId"), Currency: p.String("Currency"), Data: data(p)}
	if p.Has("Amount") {
		amount := p.Int("Amount")
		t.Amount = &amount
	}
	return t, nil
}

// Budget implements keyed.Rules: two rows of a transaction, each with at
// most MaxDataBytes of data.
func (Rules) Budget() keyed.Budget {
	return keyed.Budget{Writes: 2, Bytes: 64 << 10, ParkedBytes: 32 << 10}
}

func data(p keyed.Props) json.RawMessage {
	if s := p.String("Data"); s != "" {
		return json.RawMessage(s)
	}
	return nil
}

// History implements keyed.Viewer: the transactions, by position.
func (Rules) History(s State) (string, int64) { return byPosition, s.TxCount }

// View is an order as OrderStatus returns it (docs/contract.md): the head
// and one page of its transactions and of its rejections.
type View struct {
	OrderID      string          `json:"orderId"`
	Status       Status          `json:"status"`
	Complete     bool            `json:"complete"`
	Currency     string          `json:"currency"`
	Data         json.RawMessage `json:"data,omitempty"`
	AppliedSeq   int64           `json:"appliedSeq"`
	Parked       int             `json:"parked"`
	MissingSeq   int64           `json:"missingSeq,omitempty"`
	BlockedSince string          `json:"blockedSince,omitempty"`
	Transactions []TxEntry       `json:"transactions"`
	Total        int64           `json:"total"`
	Rejected     []Rejection     `json:"rejected"`
	UpdatedAt    string          `json:"updatedAt"`
	// Failing is present while the decision of the order's next seq fails
	// (the rules panicked or failed): its message is retried, then
	// dead-lettered, and the order waits.
	Failing *Failing `json:"failing,omitempty"`
	// Continuation is present when more transactions or rejections follow
	// this page: pass it back as ?continuation=<token>.
	Continuation string `json:"continuation,omitempty"`
}

// Failing is a decision that fails: the seq, the error and when it last did.
type Failing struct {
	Seq   int64  `json:"seq"`
	Error string `json:"error"`
	At    string `json:"at"`
}

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

// View implements keyed.Viewer.
func (Rules) View(h keyed.Head, s State, page keyed.Page) any {
	v := View{
		OrderID: h.ID, Status: s.Status, Complete: h.Complete, Currency: s.Currency, Data: s.Data, AppliedSeq: h.AppliedSeq,
		Parked: h.Parked, MissingSeq: h.MissingSeq, Transactions: make([]TxEntry, 0, len(page.Rows)),
		Total: s.Total, Rejected: make([]Rejection, 0, len(page.Rejected)), UpdatedAt: timestamp(h.UpdatedAt),
		Continuation: page.Continuation,
	}
	if !h.BlockedSince.IsZero() {
		v.BlockedSince = timestamp(h.BlockedSince)
	}
	if f := h.Failing; f != nil {
		v.Failing = &Failing{Seq: f.Seq, Error: f.Why, At: timestamp(f.At)}
	}
	for _, r := range page.Rows {
		v.Transactions = append(v.Transactions, EntryOf(r.Props))
	}
	for _, r := range page.Rejected {
		v.Rejected = append(v.Rejected, RejectionOf(r))
	}
	return v
}

// EntryOf reads a row of the "t" collection.
func EntryOf(p keyed.Props) TxEntry {
	return TxEntry{TxID: p.String("TxId"), Amount: p.Int("Amount"), Data: data(p)}
}

// RejectionOf reads a stored rejection of an order.
func RejectionOf(r keyed.Rejected) Rejection {
	return Rejection{Seq: r.Seq, Op: Op(r.Tag.String("Op")), TxID: r.Tag.String("TxId"), Reason: r.Reason}
}

func timestamp(t time.Time) string { return t.UTC().Format(time.RFC3339) }

// ViewOf is the order a key's view shows (convoy.View of the order domain).
// Of a head that is not bound to its domain (Processor.Skip's answer when
// the view could not be read), the order's id and appliedSeq alone.
func ViewOf(v convoy.View) View {
	if ov, ok := v.Value().(View); ok {
		return ov
	}
	if v.Order != nil {
		return View{OrderID: v.Order.ID, AppliedSeq: v.Order.AppliedSeq}
	}
	return View{}
}

// StateOf is the order state of a key as loaded (its StateProps), whether or
// not the engine decoded it.
func StateOf(o *convoy.Key) State {
	if s, ok := o.State.(State); ok {
		return s
	}
	s, _ := Rules{}.DecodeState(1, o.StateProps)
	return s
}

// CommandOf is the transaction a message carries: read from its body, or
// as its parked row keeps it.
func CommandOf(key string, m convoy.Message) Transaction {
	if t, ok := m.Command.(Transaction); ok {
		return t
	}
	t, _ := Rules{}.DecodeCommand(key, m.Stored)
	return t
}
