package keyed

import (
	"fmt"
	"time"
	"unicode/utf16"
	"unicode/utf8"
)

// Prop is one property of a stored row. Value is one of the types a Table
// Storage property keeps as written: string, int64 (Edm.Int64), int32
// (Edm.Int32), bool, time.Time (Edm.DateTime, kept to the millisecond).
type Prop struct {
	Name  string
	Value any
}

// Props are a row's properties, in the order written. A name appears once.
type Props []Prop

// Get returns the value of the property name.
func (p Props) Get(name string) (any, bool) {
	for _, q := range p {
		if q.Name == name {
			return q.Value, true
		}
	}
	return nil, false
}

// Has reports whether the property name is present.
func (p Props) Has(name string) bool { _, ok := p.Get(name); return ok }

// String returns the string property name ("" if absent or not a string).
func (p Props) String(name string) string { v, _ := p.Get(name); s, _ := v.(string); return s }

// Bool returns the bool property name.
func (p Props) Bool(name string) bool { v, _ := p.Get(name); b, _ := v.(bool); return b }

// Int returns the integer property name, of either width (0 if absent).
func (p Props) Int(name string) int64 {
	v, _ := p.Get(name)
	switch n := v.(type) {
	case int64:
		return n
	case int32:
		return int64(n)
	}
	return 0
}

// Time returns the time property name (zero if absent).
func (p Props) Time(name string) time.Time { v, _ := p.Get(name); t, _ := v.(time.Time); return t }

// Set returns p with the property name set to v (replaced if present).
func (p Props) Set(name string, v any) Props {
	for i, q := range p {
		if q.Name == name {
			out := append(Props(nil), p...)
			out[i].Value = v
			return out
		}
	}
	return append(p[:len(p):len(p)], Prop{name, v})
}

// Merge returns p with every property of q set (Write's Merge).
func (p Props) Merge(q Props) Props {
	out := append(Props(nil), p...)
	for _, r := range q {
		out = out.Set(r.Name, r.Value)
	}
	return out
}

// Check returns why p cannot be stored as properties of a row, or nil:
// a name reserved or given twice, a value of another type.
func (p Props) Check() error {
	seen := make(map[string]bool, len(p))
	for _, q := range p {
		switch {
		case q.Name == "" || !utf8.ValidString(q.Name):
			return fmt.Errorf("property name %q is not a name", q.Name)
		case reserved[q.Name]:
			return fmt.Errorf("property %q is reserved", q.Name)
		case seen[q.Name]:
			return fmt.Errorf("property %q is given twice", q.Name)
		}
		seen[q.Name] = true
		switch v := q.Value.(type) {
		case string:
			if !utf8.ValidString(v) {
				return fmt.Errorf("property %q is not valid UTF-8", q.Name)
			}
		case int64, int32, bool, time.Time:
		default:
			return fmt.Errorf("property %q is a %T, not one of string, int64, int32, bool, time.Time", q.Name, q.Value)
		}
	}
	return nil
}

// reserved are the names Table Storage keeps for itself.
var reserved = map[string]bool{"PartitionKey": true, "RowKey": true, "Timestamp": true, "ETag": true}

// Size is how many bytes p takes as Table Storage counts an entity's size
// (strings as UTF-16, "Understanding the Table service data model"): 8 bytes
// per property plus twice its name's UTF-16 length, and the value's bytes.
func (p Props) Size() int {
	n := 0
	for _, q := range p {
		n += 8 + 2*utf16Len(q.Name) + valueSize(q.Value)
	}
	return n
}

func valueSize(v any) int {
	switch v := v.(type) {
	case string:
		return 4 + 2*utf16Len(v)
	case int64, time.Time:
		return 8
	case int32:
		return 4
	case bool:
		return 1
	}
	return 0
}

func utf16Len(s string) int {
	n := 0
	for _, r := range s {
		n += utf16.RuneLen(r)
	}
	return n
}

// WireSize bounds how many bytes p takes written as JSON in an entity-group
// transaction's body (every character escaped, as the worst case is), which
// Table Storage limits to 4 MiB per transaction.
func (p Props) WireSize() int {
	n := 0
	for _, q := range p {
		n += 40 + 6*len(q.Name)
		if s, ok := q.Value.(string); ok {
			n += 2 + 6*len(s)
		} else {
			n += 40
		}
	}
	return n
}
