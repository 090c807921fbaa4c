package orders

import (
	"bytes"
	"encoding/json"
	"strings"

	"github.com/convoy-dev/convoy/handler/convoy"
	"github.com/convoy-dev/convoy/handler/fault"
)

// body wraps the transaction so that no top-level body field can shadow
// trigger metadata (the host copies a JSON body's top-level fields into Metadata).
type body struct {
	Transaction *Transaction `json:"transaction"`
}

// EncodeBody returns the message body for t: compact JSON, without the HTML
// escaping of json.Marshal (which would turn each '<', '>', '&', U+2028 and
// U+2029 of data into six bytes), with no trailing newline.
func EncodeBody(t Transaction) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(body{Transaction: &t}); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
}

// NewOrderMessage returns the message of the index-th transaction of a
// ledger, given its seq.
func NewOrderMessage(ledgerID string, index int, seq int64, last bool, t Transaction) (convoy.Envelope, error) {
	b, err := EncodeBody(t)
	if err != nil {
		return convoy.Envelope{}, fault.Wrap(fault.Internal, err, "encode message body")
	}
	return convoy.NewMessage(ledgerID, index, seq, last, t.OrderID, b), nil
}

// MeasureTransaction returns the size on the queue of the message that will
// carry the index-th transaction of ledger ledgerID, whatever its seq, with
// the trace context the sender stamps on it.
func MeasureTransaction(ledgerID string, index int, last bool, t Transaction) (int, error) {
	b, err := EncodeBody(t)
	if err != nil {
		return 0, err
	}
	return convoy.MeasureMessage(ledgerID, index, last, t.OrderID, b), nil
}

// DecodeBody parses and validates an order message body, as ReadTransaction
// reads a transaction: unknown fields, at either level, a key written twice
// or in other letter case, a quoted amount, bytes that are not UTF-8 are
// errors. A foreign or mistyped message must not pass.
func DecodeBody(data []byte) (Transaction, error) {
	const notBody = "message body is not {\"transaction\": {…}}"
	members, err := Members(data)
	if err != nil {
		return Transaction{}, fault.Wrap(fault.Invalid, err, notBody)
	}
	var raw json.RawMessage
	for _, m := range members {
		if m.Key != "transaction" {
			return Transaction{}, fault.Errorf(fault.Invalid, "%s: unknown field %s", notBody, Quote(m.Key))
		}
		if raw != nil {
			return Transaction{}, fault.Errorf(fault.Invalid, "%s: field \"transaction\" appears twice", notBody)
		}
		raw = m.Value
	}
	if raw == nil || string(bytes.TrimSpace(raw)) == "null" {
		return Transaction{}, fault.Errorf(fault.Invalid, "message body has no transaction")
	}
	t, _, problems := ReadTransaction(0, raw)
	if len(problems) > 0 {
		return Transaction{}, &fault.Error{Code: fault.Invalid, Message: "message transaction is invalid: " + describe(problems), Problems: problems}
	}
	return t, nil
}

func describe(ps []fault.Problem) string {
	parts := make([]string, len(ps))
	for i, p := range ps {
		parts[i] = strings.TrimSpace(p.Field + " " + p.Reason)
	}
	return strings.Join(parts, "; ")
}
