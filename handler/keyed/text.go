package keyed

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"strconv"
)

// What every domain reads strictly and says the same way: a key's alphabet,
// input quoted in an error, the members of a JSON object as written.

// MaxIDLength bounds a key (the SessionId) and the ids a domain keeps (a
// transaction id, a reference), so that "<ledgerId>:<index>" stays within
// Service Bus's 128-character MessageId and an id fits a RowKey.
const MaxIDLength = 100

// CheckID returns why s is not a valid id (1-100 characters of
// [A-Za-z0-9._-]), or "".
func CheckID(s string) string {
	if s == "" {
		return "is required"
	}
	if len(s) > MaxIDLength {
		return "is longer than " + strconv.Itoa(MaxIDLength) + " characters"
	}
	for _, c := range []byte(s) {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-') {
			return "may contain only letters, digits, '.', '_' and '-'"
		}
	}
	return ""
}

// MaxQuoted bounds the characters of user input quoted in an error, so
// that a rejection can always be recorded (and read).
const MaxQuoted = 64

// Quote returns s quoted for an error message, cut short after MaxQuoted
// characters.
func Quote(s string) string {
	if r := []rune(s); len(r) > MaxQuoted {
		return strconv.Quote(string(r[:MaxQuoted])) + "…"
	}
	return strconv.Quote(s)
}

// Cut shortens user input named in a problem, unquoted (see Quote).
func Cut(s string) string {
	if r := []rune(s); len(r) > MaxQuoted {
		return string(r[:MaxQuoted]) + "…"
	}
	return s
}

// Member is one member of a JSON object: its key, decoded, and its value as
// written.
type Member struct {
	Key   string
	Value json.RawMessage
}

// ErrNotObject: Members was given something else than one JSON object.
var ErrNotObject = errors.New("not a JSON object")

// Members splits the JSON object doc into its members, in the order written;
// nothing but space may follow the object. A key written twice is there
// twice, for the caller to refuse by name (encoding/json would keep the last
// one silently).
func Members(doc []byte) ([]Member, error) {
	dec := json.NewDecoder(bytes.NewReader(doc))
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return nil, ErrNotObject
	}
	var members []Member
	for dec.More() {
		t, err := dec.Token()
		if err != nil {
			return nil, err
		}
		key, _ := t.(string)
		var value json.RawMessage
		if err := dec.Decode(&value); err != nil {
			return nil, err
		}
		members = append(members, Member{Key: key, Value: value})
	}
	if _, err := dec.Token(); err != nil { // }
		return nil, err
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, errors.New("unexpected data after the JSON object")
	}
	return members, nil
}

// ReadAmount reads an amount of money as written in JSON: an integer number
// of minor units, not a string that spells one, not a fraction or an
// exponent. why says what is wrong with it ("" when it is read).
func ReadAmount(raw json.RawMessage) (amount int64, why string) {
	raw = bytes.TrimSpace(raw)
	if len(raw) > 0 && raw[0] == '"' {
		var s string
		_ = json.Unmarshal(raw, &s)
		return 0, Quote(s) + " is a string, not an integer number of minor units"
	}
	if len(raw) == 0 || raw[0] != '-' && (raw[0] < '0' || raw[0] > '9') { // null, true, false, {…}, […]
		return 0, "must be an integer number of minor units"
	}
	n, err := strconv.ParseInt(string(raw), 10, 64)
	if err != nil {
		return 0, Cut(string(raw)) + " is not an integer number of minor units"
	}
	return n, ""
}
