package orders

import (
	"bytes"
	"encoding/json"
	"slices"
	"strings"
	"unicode/utf8"

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
	members, err := Members(raw)
	if err != nil {
		return Transaction{}, nil, []fault.Problem{{Index: index, Reason: "is not a JSON object"}}
	}
	bad := func(field, reason string) {
		problems = append(problems, fault.Problem{Index: index, Field: field, Reason: reason})
	}
	known := slices.Concat([]string{"orderId", "op", "txId", "amount", "currency"}, extra, []string{"data"})
	fields := make(map[string]json.RawMessage, len(members))
	reported := map[string]bool{} // fields with a problem: nothing more is said of them
	for _, m := range members {
		_, twice := fields[m.Key]
		switch {
		case reported[m.Key]:
		case !slices.Contains(known, m.Key):
			bad(cut(m.Key), "is not a known field ("+strings.Join(known, ", ")+")")
			reported[m.Key] = true
		case twice:
			bad(m.Key, "appears twice")
			reported[m.Key] = true
		}
		if !twice {
			fields[m.Key] = m.Value
		}
	}
	if !utf8.Valid(raw) {
		inValue := false
		for _, m := range members {
			if !utf8.Valid(m.Value) {
				inValue = true
				if !reported[m.Key] {
					bad(m.Key, "is not valid UTF-8")
					reported[m.Key] = true
				}
			}
		}
		if !inValue {
			bad("", "has a field name that is not valid UTF-8")
		}
	}
	value := func(field string) (json.RawMessage, bool) {
		v, ok := fields[field]
		return v, ok && !reported[field]
	}
	str := func(field string, dst *string) {
		if v, ok := value(field); ok && json.Unmarshal(v, dst) != nil {
			bad(field, "must be a string")
		}
	}
	str("orderId", &t.OrderID)
	var op string
	str("op", &op)
	t.Op = Op(op)
	str("txId", &t.TxID)
	str("currency", &t.Currency)
	if v, ok := value("amount"); ok {
		if n, why := ReadAmount(v); why != "" {
			bad("amount", why)
		} else {
			t.Amount = &n
		}
	}
	if v, ok := value("data"); ok && string(bytes.TrimSpace(v)) != "null" {
		var compact bytes.Buffer
		if key, err := duplicateKey(v); err != nil {
			bad("data", "is not valid JSON")
		} else if key != "" {
			bad("data", "has the key "+Quote(key)+" twice in one object")
		} else if json.Compact(&compact, v) == nil {
			t.Data = compact.Bytes()
		}
	}
	for _, f := range extra {
		if v, ok := value(f); ok {
			if extras == nil {
				extras = map[string]json.RawMessage{}
			}
			extras[f] = v
		}
	}
	// Type problems first; Validate adds the rules (required fields,
	// alphabet, …), skipping fields already reported.
	for _, p := range problems {
		reported[p.Field] = true
	}
	for _, p := range t.Validate(index) {
		if !reported[p.Field] {
			problems = append(problems, p)
		}
	}
	return t, extras, problems
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

// cut shortens user input named in a problem, unquoted (see Quote).
func cut(s string) string { return keyed.Cut(s) }
