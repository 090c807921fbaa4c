// Package accounts is an account ledger on the convoy engine, the pattern's
// other textbook case: a bank account's entries must apply in order (a
// withdrawal that the deposit before it pays for is refused if it comes
// first). It is written against the public API alone (handler/keyed,
// docs/rules.md) and tested with the public harness (keyedtest): a domain
// as a team outside this module would write it.
//
// An account is opened with a currency and an overdraft limit, takes
// deposits and withdrawals (each with a reference unique to the account),
// reverses one of them once (by its reference), and closes when its balance
// is zero; after the close every command is rejected.
//
// Rows: the entries, a positional collection ("e", what the read routes
// page: reference, kind, amount, balance after), and the references ("a",
// by reference: kind, amount, position; what a reversal reads, and what a
// second use of a reference finds).
package accounts

import (
	"fmt"
	"strconv"

	"github.com/convoy-dev/convoy/handler/keyed"
)

// Status is an account's lifecycle state.
type Status string

const (
	StatusNew    Status = "new"    // nothing applied yet
	StatusOpen   Status = "open"   // opened, not closed
	StatusClosed Status = "closed" // closed: every command is rejected
)

// State is one account's state, the same size whatever its history: the
// entries themselves are rows.
type State struct {
	Status   Status
	Currency string // three capital letters, from the open
	Limit    int64  // overdraft limit in minor units: the balance may go down to -Limit
	Balance  int64  // in minor units, within ±MaxBalance
	Entries  int64  // entries so far (deposits, withdrawals, reversals): the next one's position
}

// The collections of an account's rows (a collection may not begin with
// h-p, r, v or w: the engine's rows).
const (
	byPosition  = "e" // e:<position>: Reference, Kind, Amount (signed), Balance (after), Reverses
	byReference = "a" // a:<reference>: Kind, Amount, Position, Reverses; ReversedBy once reversed
)

// Rules are the account rules: keyed.Rules[State, Command], with a View
// (keyed.Viewer) and a ledger entry (keyed.Publisher).
type Rules struct{}

var (
	_ keyed.Rules[State, Command] = Rules{}
	_ keyed.Namer                 = Rules{}
	_ keyed.Viewer[State]         = Rules{}
	_ keyed.Publisher[Command]    = Rules{}

	// Domain is the account rules as the engine holds them.
	Domain = keyed.Erase[State, Command](Rules{})
)

// Name implements keyed.Rules.
func (Rules) Name() string { return "accounts" }

// Noun implements keyed.Namer.
func (Rules) Noun() string { return "account" }

// ReadCommand implements keyed.Rules: DecodeBody, and the body's accountId
// must be the message's SessionId.
func (Rules) ReadCommand(key string, body []byte) (Command, error) {
	c, err := DecodeBody(body)
	if err != nil {
		return Command{}, err
	}
	if c.AccountID != key {
		return Command{}, invalidf("body accountId %s differs from SessionId %s", Quote(c.AccountID), Quote(key))
	}
	return c, nil
}

func refRow(reference string) keyed.RowRef {
	return keyed.RowRef{Collection: byReference, ID: reference}
}

// Needs implements keyed.Rules. A deposit or a withdrawal guesses its
// reference's row absent (the commit inserts it: if it exists, the commit
// fails and the engine decides again with the row read, which rejects the
// reuse). A reversal reads the row of the entry it reverses, and guesses its
// own absent. Nothing else needs a row; neither does a command on an account
// that is not open (it is rejected), nor a reference that is no id (Decide
// rejects it before it looks).
func (Rules) Needs(s State, c Command) keyed.Needs {
	if s.Status != StatusOpen || checkID(c.Reference) != "" {
		return keyed.Needs{}
	}
	own := []keyed.RowRef{refRow(c.Reference)}
	switch c.Kind {
	case Deposit, Withdraw:
		return keyed.Needs{Absent: own}
	case Reverse:
		if checkID(c.Reverses) != "" {
			return keyed.Needs{}
		}
		if c.Reverses == c.Reference { // one row, which exists if there is anything to reverse
			return keyed.Needs{Read: own}
		}
		return keyed.Needs{Read: []keyed.RowRef{refRow(c.Reverses)}, Absent: own}
	}
	return keyed.Needs{}
}

// Decide implements keyed.Rules: deterministic, no I/O. Every rule a
// command breaks is a rejection; the bounds ReadCommand checks are checked
// again, since a command's validity is its sender's promise and the balance
// must never wrap.
func (Rules) Decide(s State, c Command, rows keyed.Rows) (State, keyed.Writes, error) {
	if c.Kind == Open {
		if s.Status != StatusNew {
			return s, nil, keyed.Reject("the account was opened already (status %s)", s.Status)
		}
		if why := currencyProblem(c.Currency); why != "" {
			return s, nil, keyed.Reject("currency %s", why)
		}
		if why := limitProblem(c.Limit); why != "" {
			return s, nil, keyed.Reject("limit %s", why)
		}
		s.Status, s.Currency, s.Limit = StatusOpen, c.Currency, c.Limit
		return s, nil, nil
	}
	if s.Status != StatusOpen {
		return s, nil, keyed.Reject("the account is not open (status %s)", s.Status)
	}
	switch c.Kind {
	case Close:
		if s.Balance != 0 {
			return s, nil, keyed.Reject("the balance is %d, not 0: only an empty account closes", s.Balance)
		}
		s.Status = StatusClosed
		return s, nil, nil
	case Deposit, Withdraw, Reverse:
	default:
		return s, nil, keyed.Reject("kind %s is not one of %s", Quote(string(c.Kind)), kindList)
	}
	if why := checkID(c.Reference); why != "" {
		return s, nil, keyed.Reject("reference %s", why)
	}
	if c.Kind == Reverse {
		return reverse(s, c, rows)
	}
	if _, used := rows.Get(refRow(c.Reference)); used {
		return s, nil, keyed.Reject("reference %q was used already", c.Reference)
	}
	if why := amountProblem(c.Amount); why != "" {
		return s, nil, keyed.Reject("amount %s", why)
	}
	delta := c.Amount
	if c.Kind == Withdraw {
		delta = -c.Amount
	}
	next, err := move(s, delta, "a withdrawal of "+strconv.FormatInt(c.Amount, 10))
	if err != nil {
		return s, nil, err
	}
	return next, entry(s, next, c, delta).
		Insert(byReference, c.Reference, keyed.Props{{Name: "Kind", Value: string(c.Kind)},
			{Name: "Amount", Value: c.Amount}, {Name: "Position", Value: s.Entries}}), nil
}

// reverse applies the opposite of the entry c.Reverses names, once.
func reverse(s State, c Command, rows keyed.Rows) (State, keyed.Writes, error) {
	if why := checkID(c.Reverses); why != "" {
		return s, nil, keyed.Reject("reverses %s", why)
	}
	if _, used := rows.Get(refRow(c.Reference)); used {
		return s, nil, keyed.Reject("reference %q was used already", c.Reference)
	}
	of, found := rows.Get(refRow(c.Reverses))
	kind := Kind(of.String("Kind"))
	switch {
	case !found:
		return s, nil, keyed.Reject("there is no deposit or withdrawal %q to reverse", c.Reverses)
	case kind != Deposit && kind != Withdraw:
		return s, nil, keyed.Reject("%q is a %s, not a deposit or withdrawal: it cannot be reversed", c.Reverses, kind)
	case of.Has("ReversedBy"):
		return s, nil, keyed.Reject("%q was reversed already (by %q)", c.Reverses, of.String("ReversedBy"))
	}
	amount := of.Int("Amount")
	if why := amountProblem(amount); why != "" { // as stored: a row no decision of these rules wrote
		return s, nil, fmt.Errorf("the row of reference %q holds amount %s", c.Reverses, why)
	}
	delta := amount // a withdrawal's reversal pays it back
	if kind == Deposit {
		delta = -amount
	}
	next, err := move(s, delta, fmt.Sprintf("reversing deposit %q of %d", c.Reverses, amount))
	if err != nil {
		return s, nil, err
	}
	return next, entry(s, next, c, delta).
		Insert(byReference, c.Reference, keyed.Props{{Name: "Kind", Value: string(Reverse)},
			{Name: "Amount", Value: amount}, {Name: "Position", Value: s.Entries}, {Name: "Reverses", Value: c.Reverses}}).
		Merge(byReference, c.Reverses, keyed.Props{{Name: "ReversedBy", Value: c.Reference}}), nil
}

// move returns s with delta added to its balance and one more entry, or the
// rejection of a balance below the overdraft limit (what names the debit) or
// beyond ±MaxBalance. |Balance| ≤ 2^53−1 and |delta| ≤ 10^15: no overflow.
func move(s State, delta int64, what string) (State, error) {
	balance := s.Balance + delta
	if delta < 0 && balance < -s.Limit {
		return s, keyed.Reject("insufficient funds: the balance is %d and the overdraft limit %d; %s would leave %d",
			s.Balance, s.Limit, what, balance)
	}
	if balance > MaxBalance || balance < -MaxBalance {
		return s, keyed.Reject("the balance would be %d, beyond ±%d (2^53 − 1)", balance, int64(MaxBalance))
	}
	s.Balance = balance
	s.Entries++
	return s, nil
}

// entry is the history row of c, applied at s's position, leaving next.
func entry(s, next State, c Command, delta int64) keyed.Writes {
	p := keyed.Props{{Name: "Reference", Value: c.Reference}, {Name: "Kind", Value: string(c.Kind)},
		{Name: "Amount", Value: delta}, {Name: "Balance", Value: next.Balance}}
	if c.Kind == Reverse {
		p = append(p, keyed.Prop{Name: "Reverses", Value: c.Reverses})
	}
	return keyed.Writes{}.Append(byPosition, s.Entries, p)
}

// Tag implements keyed.Rules: a rejection records the command's kind and
// reference (a skipped seq, the zero command: nothing).
func (Rules) Tag(c Command) keyed.Props {
	var p keyed.Props
	if c.Kind != "" {
		p = append(p, keyed.Prop{Name: "Kind", Value: string(c.Kind)})
	}
	if c.Reference != "" {
		p = append(p, keyed.Prop{Name: "Reference", Value: c.Reference})
	}
	return p
}

// Version implements keyed.Rules: the first.
func (Rules) Version() int { return 1 }

// EncodeState implements keyed.Rules.
func (Rules) EncodeState(s State) keyed.Props {
	return keyed.Props{{Name: "Status", Value: string(s.Status)}, {Name: "Currency", Value: s.Currency},
		{Name: "Limit", Value: s.Limit}, {Name: "Balance", Value: s.Balance}, {Name: "Entries", Value: s.Entries}}
}

// DecodeState implements keyed.Rules. No properties: a new account. A state
// out of the bounds the rules keep is an error (the message fails, and the
// account waits), never arithmetic on it.
func (Rules) DecodeState(version int, p keyed.Props) (State, error) {
	if version != 1 {
		return State{}, fmt.Errorf("account state version %d is not one this release reads (1)", version)
	}
	s := State{Status: Status(p.String("Status")), Currency: p.String("Currency"), Limit: p.Int("Limit"),
		Balance: p.Int("Balance"), Entries: p.Int("Entries")}
	switch s.Status {
	case "":
		s.Status = StatusNew
	case StatusNew, StatusOpen, StatusClosed:
	default:
		return State{}, fmt.Errorf("account status %s is not one of new, open, closed", Quote(string(s.Status)))
	}
	if s.Balance > MaxBalance || s.Balance < -MaxBalance || limitProblem(s.Limit) != "" || s.Entries < 0 {
		return State{}, fmt.Errorf("account state %+v is beyond the rules' bounds", s)
	}
	return s, nil
}

// EncodeCommand implements keyed.Rules: a parked row's Kind, and the
// fields the command has (Currency, Limit, Amount, Reference, Reverses).
func (Rules) EncodeCommand(c Command) keyed.Props {
	p := keyed.Props{{Name: "Kind", Value: string(c.Kind)}}
	if c.Currency != "" {
		p = append(p, keyed.Prop{Name: "Currency", Value: c.Currency})
	}
	if c.Limit != 0 {
		p = append(p, keyed.Prop{Name: "Limit", Value: c.Limit})
	}
	if c.Amount != 0 {
		p = append(p, keyed.Prop{Name: "Amount", Value: c.Amount})
	}
	if c.Reference != "" {
		p = append(p, keyed.Prop{Name: "Reference", Value: c.Reference})
	}
	if c.Reverses != "" {
		p = append(p, keyed.Prop{Name: "Reverses", Value: c.Reverses})
	}
	return p
}

// DecodeCommand implements keyed.Rules: the account is the key.
func (Rules) DecodeCommand(key string, p keyed.Props) (Command, error) {
	return Command{AccountID: key, Kind: Kind(p.String("Kind")), Currency: p.String("Currency"), Limit: p.Int("Limit"),
		Amount: p.Int("Amount"), Reference: p.String("Reference"), Reverses: p.String("Reverses")}, nil
}

// Budget implements keyed.Rules: a reversal writes the most, three rows
// (its entry, its reference, the mark on the reference it reverses) of
// short properties (references of at most keyed.MaxIDLength characters), about
// 3.5 KiB as the engine counts them; a parked command takes about 1.5 KiB
// (TestBudgetIsWhatADecisionWrites).
func (Rules) Budget() keyed.Budget {
	return keyed.Budget{Writes: 3, Bytes: 4 << 10, ParkedBytes: 2 << 10}
}
