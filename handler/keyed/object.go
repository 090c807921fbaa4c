package keyed

import (
	"encoding/json"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/convoy-dev/convoy/handler/fault"
)

// Object is a JSON object (a ledger entry, a message body's command) read
// strictly, as a domain's ReadEntry and ReadCommand must read it: whatever
// encoding/json would let pass silently is a problem. It would keep the last
// of a key written twice, match a key in any letter case, and turn bytes
// that are not UTF-8 into U+FFFD. Each problem names the entry's index, one
// per field at most: a field with a problem is reported, and nothing more
// is said of it.
type Object struct {
	index    int
	fields   map[string]json.RawMessage // each field's first value, as written
	reported map[string]bool
	Problems []fault.Problem
}

// ReadObject reads raw, the index-th entry (0 for a lone message), whose
// fields may be those in known: any other field, a field written twice and
// a value that is not UTF-8 are problems. false when raw is no JSON object
// (its one problem is then in Problems).
func ReadObject(index int, raw []byte, known ...string) (*Object, bool) {
	o := &Object{index: index, reported: map[string]bool{}}
	members, err := Members(raw)
	if err != nil {
		o.Problems = []fault.Problem{{Index: index, Reason: "is not a JSON object"}}
		return o, false
	}
	o.fields = make(map[string]json.RawMessage, len(members))
	for _, m := range members {
		_, twice := o.fields[m.Key]
		switch {
		case o.reported[m.Key]:
		case !slices.Contains(known, m.Key):
			o.Bad(Cut(m.Key), "is not a known field ("+strings.Join(known, ", ")+")")
			o.reported[m.Key] = true
		case twice:
			o.Bad(m.Key, "appears twice")
		}
		if !twice {
			o.fields[m.Key] = m.Value
		}
	}
	if !utf8.Valid(raw) {
		inValue := false
		for _, m := range members {
			if !utf8.Valid(m.Value) {
				inValue = true
				if !o.reported[m.Key] {
					o.Bad(m.Key, "is not valid UTF-8")
				}
			}
		}
		if !inValue {
			o.Bad("", "has a field name that is not valid UTF-8")
		}
	}
	return o, true
}

// Given tells whether the object has field (with a problem or not).
func (o *Object) Given(field string) bool { _, ok := o.fields[field]; return ok }

// Reported tells whether a problem was reported for field.
func (o *Object) Reported(field string) bool { return o.reported[field] }

// Value is field's value as written, when given and without a problem.
func (o *Object) Value(field string) (json.RawMessage, bool) {
	v, ok := o.fields[field]
	return v, ok && !o.reported[field]
}

// Extras are the values of the fields a caller reads itself (a ledger's
// "last"), given and without a problem; nil when none is.
func (o *Object) Extras(fields []string) map[string]json.RawMessage {
	var extras map[string]json.RawMessage
	for _, f := range fields {
		if v, ok := o.Value(f); ok {
			if extras == nil {
				extras = map[string]json.RawMessage{}
			}
			extras[f] = v
		}
	}
	return extras
}

// Bad reports a problem of field: nothing more is said of it.
func (o *Object) Bad(field, reason string) {
	o.Problems = append(o.Problems, fault.Problem{Index: o.index, Field: field, Reason: reason})
	o.reported[field] = true
}

// Add reports the problems of ps (the rules on the values, checked once
// the fields are read) whose field has none yet.
func (o *Object) Add(ps []fault.Problem) {
	for _, p := range ps {
		if !o.reported[p.Field] {
			o.Problems = append(o.Problems, p)
		}
	}
}
