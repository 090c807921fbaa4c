package accounts

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/convoy-dev/convoy/handler/fault"
	"github.com/convoy-dev/convoy/handler/keyed"
)

// Kind is what a command does to its account.
type Kind string

const (
	Open     Kind = "open"     // currency, limit
	Deposit  Kind = "deposit"  // amount, reference
	Withdraw Kind = "withdraw" // amount, reference
	Reverse  Kind = "reverse"  // reference (its own), reverses (the deposit's or withdrawal's)
	Close    Kind = "close"    // nothing
)

const kindList = "open, deposit, withdraw, reverse, close"

// fieldsOf are the fields each kind takes besides accountId and kind: any
// other is a problem, and those marked required must be given.
var fieldsOf = map[Kind][]string{
	Open:     {"currency", "limit"},
	Deposit:  {"amount", "reference"},
	Withdraw: {"amount", "reference"},
	Reverse:  {"reference", "reverses"},
	Close:    nil,
}

// optional are the fields a kind may leave out (limit: 0, no overdraft).
var optional = []string{"limit"}

// Command is one command of one account, as a message body carries it
// ({"command": {…}}) and a ledger entry spells it.
type Command struct {
	AccountID string `json:"accountId"`
	Kind      Kind   `json:"kind"`
	Currency  string `json:"currency,omitempty"`  // open: three capital letters
	Limit     int64  `json:"limit,omitempty"`     // open: overdraft limit in minor units, 0 to MaxBalance (0 when left out)
	Amount    int64  `json:"amount,omitempty"`    // deposit, withdraw: 1 to MaxAmount minor units
	Reference string `json:"reference,omitempty"` // deposit, withdraw, reverse: unique in the account
	Reverses  string `json:"reverses,omitempty"`  // reverse: the reference of the deposit or withdrawal it reverses
}

// Bounds on money, in minor units, as the order domain's: MaxAmount bounds
// one amount; MaxBalance a balance and an overdraft limit, so that every
// JSON client (a float64 reader included) reads them exactly. Within both,
// no sum the rules compute can overflow an int64.
const (
	MaxAmount  = 1_000_000_000_000_000 // 10^15
	MaxBalance = 1<<53 - 1
)

// Quote returns s quoted for an error, cut short (keyed.Quote).
func Quote(s string) string { return keyed.Quote(s) }

// checkID returns why s is not an id (keyed.CheckID: account ids and
// references, a reference being a row id), or "".
func checkID(s string) string { return keyed.CheckID(s) }

func currencyProblem(s string) string {
	if len(s) == 3 && s[0] >= 'A' && s[0] <= 'Z' && s[1] >= 'A' && s[1] <= 'Z' && s[2] >= 'A' && s[2] <= 'Z' {
		return ""
	}
	return Quote(s) + " is not three capital letters"
}

func amountProblem(n int64) string {
	switch {
	case n <= 0:
		return fmt.Sprintf("%d is not above 0 minor units", n)
	case n > MaxAmount:
		return fmt.Sprintf("%d is beyond %d minor units (10^15)", n, int64(MaxAmount))
	}
	return ""
}

func limitProblem(n int64) string {
	if n < 0 || n > MaxBalance {
		return fmt.Sprintf("%d is not between 0 and %d minor units (2^53 − 1)", n, int64(MaxBalance))
	}
	return ""
}

// problems returns every problem of c's values, each naming index.
func (c Command) problems(index int) []fault.Problem {
	var ps []fault.Problem
	bad := func(field, reason string) { ps = append(ps, fault.Problem{Index: index, Field: field, Reason: reason}) }
	if why := checkID(c.AccountID); why != "" {
		bad("accountId", why)
	}
	switch c.Kind {
	case Open:
		if why := currencyProblem(c.Currency); why != "" {
			bad("currency", why)
		}
		if why := limitProblem(c.Limit); why != "" {
			bad("limit", why)
		}
	case Deposit, Withdraw:
		if why := amountProblem(c.Amount); why != "" {
			bad("amount", why)
		}
		if why := checkID(c.Reference); why != "" {
			bad("reference", why)
		}
	case Reverse:
		if why := checkID(c.Reference); why != "" {
			bad("reference", why)
		}
		if why := checkID(c.Reverses); why != "" {
			bad("reverses", why)
		} else if c.Reverses == c.Reference {
			bad("reverses", "is the reversal's own reference")
		}
	case Close:
	case "":
		bad("kind", "is required")
	default:
		bad("kind", Quote(string(c.Kind))+" is not one of "+kindList)
	}
	return ps
}

// readString reads a JSON string (not null, not a number).
func readString(raw json.RawMessage) (string, string) {
	var s string
	if len(raw) == 0 || raw[0] != '"' || json.Unmarshal(raw, &s) != nil {
		return "", "must be a string"
	}
	return s, ""
}

// readInt reads an amount as written in JSON (keyed.ReadAmount).
func readInt(raw json.RawMessage) (int64, string) { return keyed.ReadAmount(raw) }

// readCommand reads the index-th command of a ledger (0 for a message's) as
// written in JSON and validates it: every problem, each naming index, one
// per field at most. extra names the fields the caller reads itself: their
// values are returned in extras. Whatever encoding/json would let pass
// silently is a problem: an unknown field, a key twice or in other letter
// case, a quoted amount, bytes that are not UTF-8, a field the kind does not
// take.
func readCommand(index int, raw []byte, extra ...string) (c Command, extras map[string]json.RawMessage, problems []fault.Problem) {
	o, ok := keyed.ReadObject(index, raw, slices.Concat([]string{"accountId", "kind", "currency", "limit", "amount", "reference", "reverses"}, extra)...)
	if !ok {
		return Command{}, nil, o.Problems
	}
	var kind string
	for _, f := range []struct {
		name string
		dst  *string
	}{{"accountId", &c.AccountID}, {"kind", &kind}, {"currency", &c.Currency}, {"reference", &c.Reference}, {"reverses", &c.Reverses}} {
		if v, ok := o.Value(f.name); ok {
			if s, why := readString(v); why != "" {
				o.Bad(f.name, why)
			} else {
				*f.dst = s
			}
		}
	}
	c.Kind = Kind(kind)
	for _, f := range []struct {
		name string
		dst  *int64
	}{{"limit", &c.Limit}, {"amount", &c.Amount}} {
		if v, ok := o.Value(f.name); ok {
			if n, why := readInt(v); why != "" {
				o.Bad(f.name, why)
			} else {
				*f.dst = n
			}
		}
	}
	extras = o.Extras(extra)
	// What the kind takes: no other field, and each it needs.
	if takes, ok := fieldsOf[c.Kind]; ok && !o.Reported("kind") {
		for _, f := range []string{"currency", "limit", "amount", "reference", "reverses"} {
			given := o.Given(f)
			switch {
			case o.Reported(f):
			case given && !slices.Contains(takes, f):
				o.Bad(f, fmt.Sprintf("is not a field of %s (it takes %s)", c.Kind, takesList(takes)))
			case !given && slices.Contains(takes, f) && !slices.Contains(optional, f):
				o.Bad(f, "is required for "+string(c.Kind))
			}
		}
	}
	if !o.Given("accountId") {
		o.Bad("accountId", "is required")
	}
	// Rules on the values (alphabets, bounds), for fields without a problem yet.
	o.Add(c.problems(index))
	return c, extras, o.Problems
}

func takesList(takes []string) string {
	if len(takes) == 0 {
		return "nothing besides accountId and kind"
	}
	return strings.Join(takes, " and ")
}

// body wraps the command so that no top-level body field can shadow trigger
// metadata (the host copies a JSON body's top-level fields into Metadata),
// as the order body wraps its transaction.
type body struct {
	Command *Command `json:"command"`
}

// DecodeBody reads and validates a message body, {"command": {…}}, strictly
// (readCommand): any problem is an invalid-input error that names them.
func DecodeBody(data []byte) (Command, error) {
	const notBody = "message body is not {\"command\": {…}}"
	ms, err := keyed.Members(data)
	if err != nil {
		return Command{}, &fault.Error{Code: fault.Invalid, Message: notBody, Err: err}
	}
	var raw json.RawMessage
	for _, m := range ms {
		if m.Key != "command" {
			return Command{}, invalidf("%s: unknown field %s", notBody, Quote(m.Key))
		}
		if raw != nil {
			return Command{}, invalidf("%s: field \"command\" appears twice", notBody)
		}
		raw = m.Value
	}
	if raw == nil || string(bytes.TrimSpace(raw)) == "null" {
		return Command{}, invalidf("message body has no command")
	}
	c, _, problems := readCommand(0, raw)
	if len(problems) > 0 {
		return Command{}, &fault.Error{Code: fault.Invalid, Message: "message command is invalid: " + describe(problems), Problems: problems}
	}
	return c, nil
}

// EncodeBody returns the message body of c: compact JSON, no HTML escaping,
// no trailing newline. A command with a problem has no body.
func EncodeBody(c Command) ([]byte, error) {
	if ps := c.problems(0); len(ps) > 0 {
		return nil, &fault.Error{Code: fault.Invalid, Message: "the command is invalid: " + describe(ps), Problems: ps}
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(body{Command: &c}); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
}

// ReadEntry implements keyed.Publisher: a ledger's entry is a command as a
// body carries it ({"accountId": …, "kind": …}), read as strictly, with the
// fields the ledger reads itself (extra, "last"); its key is its accountId.
func (Rules) ReadEntry(index int, raw []byte, extra ...string) (string, Command, map[string]json.RawMessage, []fault.Problem) {
	c, extras, problems := readCommand(index, raw, extra...)
	return c.AccountID, c, extras, problems
}

// Body implements keyed.Publisher: EncodeBody.
func (Rules) Body(c Command) ([]byte, error) { return EncodeBody(c) }

func invalidf(format string, args ...any) error { return fault.Errorf(fault.Invalid, format, args...) }

func describe(ps []fault.Problem) string {
	parts := make([]string, len(ps))
	for i, p := range ps {
		parts[i] = strings.TrimSpace(p.Field + " " + p.Reason)
	}
	return strings.Join(parts, "; ")
}
