// Package convoy is the domain of the Sequential Convoy: transactions, the
// order message format, the order fold, the sequence rules that make
// application strictly ordered and exactly-once, and the Store they rely on.
// It knows nothing of echo, aztables or azservicebus.
package orders

import (
	"bytes"
	"encoding/json"
	"fmt"

	"github.com/convoy-dev/convoy/handler/fault"
	"github.com/convoy-dev/convoy/handler/keyed"
)

// Op is what a transaction does to its order.
type Op string

const (
	CreateOrder       Op = "CreateOrder"
	AddTransaction    Op = "AddTransaction"
	ModifyTransaction Op = "ModifyTransaction"
	DeleteOrder       Op = "DeleteOrder"
)

// MaxIDLength bounds ledger, order and transaction ids (keyed.MaxIDLength).
const MaxIDLength = keyed.MaxIDLength

// Bounds on money (docs/contract.md), in minor units. MaxAmount bounds one
// transaction's amount; MaxTotal bounds an order's total, so that every JSON
// client (a float64 reader included) reads it exactly. Within both, no sum
// the fold computes can overflow an int64.
const (
	MaxAmount = 1_000_000_000_000_000 // 10^15
	MaxTotal  = 1<<53 - 1
)

// MaxDataBytes bounds a transaction's data (compact JSON): it is stored with
// the order (a Table Storage property holds 64 KiB, an entity-group
// transaction 4 MiB for up to 100 rows, each written JSON-escaped).
const MaxDataBytes = 4096

// AmountProblem returns why amount is out of bounds, or "".
func AmountProblem(amount int64) string {
	if amount > MaxAmount || amount < -MaxAmount {
		return fmt.Sprintf("%d is beyond ±%d minor units", amount, int64(MaxAmount))
	}
	return ""
}

// Transaction is one transaction of one order, as carried in an order message.
type Transaction struct {
	OrderID  string          `json:"orderId"`
	Op       Op              `json:"op"`
	TxID     string          `json:"txId,omitempty"`
	Amount   *int64          `json:"amount,omitempty"`
	Currency string          `json:"currency,omitempty"`
	Data     json.RawMessage `json:"data,omitempty"` // carried untouched, stored with the order (see TxEntry, Order.Data)
}

// Validate returns every problem with t, each naming index (its position in
// the ledger, or 0 for a lone message). It is the one definition of a valid
// transaction, shared by the publisher and the processor.
func (t Transaction) Validate(index int) []fault.Problem {
	var ps []fault.Problem
	bad := func(field, reason string) { ps = append(ps, fault.Problem{Index: index, Field: field, Reason: reason}) }
	if why := CheckID(t.OrderID); why != "" {
		bad("orderId", why)
	}
	needsTx, needsCurrency := false, false
	switch t.Op {
	case CreateOrder:
		needsCurrency = true
	case AddTransaction, ModifyTransaction:
		needsTx = true
	case DeleteOrder:
	case "":
		bad("op", "is required")
	default:
		bad("op", Quote(string(t.Op))+" is not one of CreateOrder, AddTransaction, ModifyTransaction, DeleteOrder")
	}
	if needsTx {
		if why := CheckID(t.TxID); why != "" {
			bad("txId", why)
		}
		if t.Amount == nil {
			bad("amount", "is required for "+string(t.Op))
		} else if why := AmountProblem(*t.Amount); why != "" {
			bad("amount", why)
		}
	}
	if needsCurrency && !isCurrency(t.Currency) {
		if t.Currency == "" {
			bad("currency", "is required for CreateOrder")
		} else {
			bad("currency", Quote(t.Currency)+" is not three capital letters")
		}
	}
	if len(t.Data) > 0 && (bytes.TrimSpace(t.Data)[0] != '{') {
		bad("data", "must be a JSON object")
	} else if len(t.Data) > MaxDataBytes {
		bad("data", fmt.Sprintf("takes %d bytes, more than %d", len(t.Data), MaxDataBytes))
	}
	return ps
}

// MaxQuoted bounds the characters of user input quoted in an error
// (keyed.MaxQuoted).
const MaxQuoted = keyed.MaxQuoted

// Quote returns s quoted for an error message (keyed.Quote).
func Quote(s string) string { return keyed.Quote(s) }

// CheckID returns why s is not a valid id (keyed.CheckID), or "".
func CheckID(s string) string { return keyed.CheckID(s) }

func isCurrency(s string) bool {
	return len(s) == 3 && s[0] >= 'A' && s[0] <= 'Z' && s[1] >= 'A' && s[1] <= 'Z' && s[2] >= 'A' && s[2] <= 'Z'
}
