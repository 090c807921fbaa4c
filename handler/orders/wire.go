package orders

import (
	"bytes"
	"encoding/json"
	"slices"

	"github.com/convoy-dev/convoy/handler/fault"
	"github.com/convoy-dev/convoy/handler/keyed"
)

// A transaction as written in JSON, read the same way by the ledger parser
// and by the processor (DecodeBody): whatever encoding/json would let pass
// silently is a problem here. It would read a quoted amount ("100") as a
// number, keep the last of a key written twice, match a key in any letter
// case ("Amount") and turn bytes that are not UTF-8 into U+FFFD, while the
// raw data (stored as sent) keeps them.

// Member is one member of a JSON object (keyed.Member).
type Member = keyed.Member

// Members splits the JSON object doc into its members, in the order written
// (keyed.Members).
func Members(doc []byte) ([]Member, error) { return keyed.Members(doc) }

// ReadTransaction reads the index-th transaction of a ledger (0 for a lone
// message) as written in JSON, and validates it: every problem is returned,
// each naming index, one per field at most. extra names the fields the
// caller reads itself (the ledger's "last"): their values are returned in
// extras, unless a problem was already reported for them (written twice, not
// UTF-8). Any other field is a problem.
func ReadTransaction(index int, raw []byte, extra ...string) (t Transaction, extras map[string]json.RawMessage, problems []fault.Problem) {
	o, ok := keyed.ReadObject(index, raw, slices.Concat([]string{"orderId", "op", "txId", "amount", "currency"}, extra, []string{"data"})...)
	if !ok {
		return Transaction{}, nil, o.Problems
	}
	str := func(field string, dst *string) {
		if v, ok := o.Value(field); ok && json.Unmarshal(v, dst) != nil {
			o.Bad(field, "must be a string")
		}
	}
	str("orderId", &t.OrderID)
	var op string
	str("op", &op)
	t.Op = Op(op)
	str("txId", &t.TxID)
	str("currency", &t.Currency)
	if v, ok := o.Value("amount"); ok {
		if n, why := ReadAmount(v); why != "" {
			o.Bad("amount", why)
		} else {
			t.Amount = &n
		}
	}
	if v, ok := o.Value("data"); ok && string(bytes.TrimSpace(v)) != "null" {
		var compact bytes.Buffer
		if key, err := duplicateKey(v); err != nil {
			o.Bad("data", "is not valid JSON")
		} else if key != "" {
			o.Bad("data", "has the key "+Quote(key)+" twice in one object")
		} else if json.Compact(&compact, v) == nil {
			t.Data = compact.Bytes()
		}
	}
	extras = o.Extras(extra)
	// Type problems first; Validate adds the rules (required fields,
	// alphabet, …), skipping fields already reported.
	o.Add(t.Validate(index))
	return t, extras, o.Problems
}

// ReadAmount reads an amount as written in JSON (keyed.ReadAmount).
func ReadAmount(raw json.RawMessage) (amount int64, why string) { return keyed.ReadAmount(raw) }

// duplicateKey returns the first key written twice in one object of the
// JSON value raw, at any depth, or "" (a key spelled otherwise, "\u006b" and
// "k", is the same key).
func duplicateKey(raw []byte) (string, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber() // no float conversion, that can fail (1e999)
	return duplicateKeyIn(dec)
}

func duplicateKeyIn(dec *json.Decoder) (string, error) {
	t, err := dec.Token()
	if err != nil {
		return "", err
	}
	d, ok := t.(json.Delim)
	if !ok {
		return "", nil
	}
	var seen map[string]bool
	if d == '{' {
		seen = map[string]bool{}
	}
	for dec.More() {
		if seen != nil {
			k, err := dec.Token()
			if err != nil {
				return "", err
			}
			key, _ := k.(string)
			if seen[key] {
				return key, nil
			}
			seen[key] = true
		}
		if key, err := duplicateKeyIn(dec); key != "" || err != nil {
			return key, err
		}
	}
	_, err = dec.Token() // the closing delimiter
	return "", err
}
