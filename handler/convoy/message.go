package convoy

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/convoy-dev/convoy/handler/fault"
)

// The order message format (CONTRACT.md, "Order message"): one place that
// both the publisher and the processor use.
const (
	PropLedgerID = "ledgerId" // application property: the ledger the transaction came from
	PropSeq      = "seq"      // application property: the order's own sequence number, from 1
	PropLast     = "last"     // application property: true on an end-of-sequence transaction
	ContentType  = "application/json"
)

// MessageID is the Service Bus MessageId of the index-th transaction of a
// ledger; a re-published ledger yields the same ids (duplicate detection).
func MessageID(ledgerID string, index int) string {
	return ledgerID + ":" + strconv.Itoa(index)
}

// IntProperty reads an integer application property (seq) whatever a
// transport made of it: int64 from azservicebus, float64 or json.Number after
// a JSON round trip, a string from a lenient sender.
func IntProperty(v any) (int64, bool) {
	switch n := v.(type) {
	case int64:
		return n, true
	case int32:
		return int64(n), true
	case int:
		return int64(n), true
	case float64:
		return int64(n), n == float64(int64(n))
	case json.Number:
		i, err := n.Int64()
		return i, err == nil
	case string:
		i, err := strconv.ParseInt(n, 10, 64)
		return i, err == nil
	}
	return 0, false
}

// Message is one order message as the processor sees it.
type Message struct {
	Seq       int64
	Last      bool
	MessageID string
	Tx        Transaction
}

// body wraps the transaction so that no top-level body field can shadow
// trigger metadata (the host copies a JSON body's top-level fields into Metadata).
type body struct {
	Transaction *Transaction `json:"transaction"`
}

// EncodeBody returns the message body for t.
func EncodeBody(t Transaction) ([]byte, error) {
	return json.Marshal(body{Transaction: &t})
}

// DecodeBody parses and validates an order message body. Unknown fields, at
// either level, are errors: a foreign or mistyped message must not pass.
func DecodeBody(data []byte) (Transaction, error) {
	var b struct {
		Transaction *wireTransaction `json:"transaction"`
	}
	if err := strictUnmarshal(data, &b); err != nil {
		return Transaction{}, fault.Wrap(fault.Invalid, err, "message body is not {\"transaction\": {…}}")
	}
	if b.Transaction == nil {
		return Transaction{}, fault.Errorf(fault.Invalid, "message body has no transaction")
	}
	t, problems := b.Transaction.toTransaction(0)
	problems = append(problems, t.Validate(0)...)
	if len(problems) > 0 {
		return Transaction{}, &fault.Error{Code: fault.Invalid, Message: "message transaction is invalid: " + describe(problems), Problems: problems}
	}
	return t, nil
}

// wireTransaction is a transaction as written in JSON, before validation:
// amount is a json.Number so that 12.5 or 1e3 give a clear problem.
type wireTransaction struct {
	OrderID  string          `json:"orderId"`
	Op       Op              `json:"op"`
	TxID     string          `json:"txId"`
	Amount   *json.Number    `json:"amount"`
	Currency string          `json:"currency"`
	Data     json.RawMessage `json:"data"`
}

func (w wireTransaction) toTransaction(index int) (Transaction, []fault.Problem) {
	t := Transaction{OrderID: w.OrderID, Op: w.Op, TxID: w.TxID, Currency: w.Currency, Data: w.Data}
	if string(bytes.TrimSpace(w.Data)) == "null" {
		t.Data = nil
	}
	if w.Amount != nil {
		n, err := strconv.ParseInt(w.Amount.String(), 10, 64)
		if err != nil {
			return t, []fault.Problem{{Index: index, Field: "amount", Reason: fmt.Sprintf("%s is not an integer number of minor units", w.Amount.String())}}
		}
		t.Amount = &n
	}
	return t, nil
}

func strictUnmarshal(data []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	dec.UseNumber()
	if err := dec.Decode(v); err != nil {
		return err
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return errors.New("unexpected data after the JSON value")
	}
	return nil
}

func describe(ps []fault.Problem) string {
	parts := make([]string, len(ps))
	for i, p := range ps {
		parts[i] = p.Field + " " + p.Reason
	}
	return strings.Join(parts, "; ")
}
