// Package ledger turns a ledger document (the commands of many keys of the
// registered domains, interleaved: orders, accounts) into per-key messages,
// each on its domain's queue: it validates the whole ledger, allocates each
// key's sequence numbers idempotently and publishes with resumable progress.
// Storage and sending sit behind Records, Allocator and convoy.Sender.
package ledger

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"math/big"
	"slices"
	"strings"

	"github.com/convoy-dev/convoy/handler/convoy"
	"github.com/convoy-dev/convoy/handler/fault"
	"github.com/convoy-dev/convoy/handler/keyed"
)

// Defaults of Limits.
const (
	DefaultMaxTransactions = 200_000
	// DefaultMaxMessageBytes is the Standard tier's message size limit.
	DefaultMaxMessageBytes = 256 << 10
)

// Limits bound what Parse accepts; the zero value uses the defaults. The
// size of a message is bounded by its domain's queue: Domain.MaxMessageBytes.
type Limits struct {
	MaxTransactions int
}

// DefaultStream is the stream of a ledger that names none.
const DefaultStream = "default"

// Ledger is a validated ledger document.
type Ledger struct {
	ID string
	// Stream orders ledgers: sent to the ledgers queue it is the message's
	// SessionId, so the ledgers of one stream are de-batched one at a time,
	// in the order they were sent. DefaultStream when the document has none.
	Stream string
	Hash   string // of the canonical content (hashVersion): the idempotency check
	// Default is the Name of the default domain (the first Parse was
	// given): the one of the entries that name none.
	Default string
	// The entries, kept compact (entry): Len, Entry and Entries give them.
	entries []entry
	keys    []keyOf    // the entries' keys, in order of first appearance
	domains []commands // by domain, in the order Parse was given them
}

// Parse validates a whole ledger document whose entries are commands of
// domains, the first being the default (an entry that names no "domain").
// Every problem is reported: the error (fault.Invalid) carries one
// fault.Problem per fault in a transaction. A ledger-level fault (no
// ledgerId, no transactions array) is in its message.
func Parse(doc []byte, limits Limits, domains []Domain) (*Ledger, error) {
	if limits.MaxTransactions <= 0 {
		limits.MaxTransactions = DefaultMaxTransactions
	}
	limits.MaxTransactions = min(limits.MaxTransactions, math.MaxInt32) // entry's indexes
	r, err := newReader(domains)
	if err != nil {
		return nil, err
	}
	// A streaming decode: only one transaction's raw JSON exists at a time
	// besides the document itself, which the caller holds anyway.
	dec := json.NewDecoder(bytes.NewReader(doc))
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return nil, notObject(doc)
	}
	l := &Ledger{Default: r.domains[0].Rules.Name(), domains: make([]commands, len(r.domains))}
	for i, d := range r.domains {
		l.domains[i].Domain = d
	}
	var ledgerFaults []string
	var problems []fault.Problem
	var faulty []int // entries with problems (ascending), not worth measuring
	seen := map[string]bool{}
	ids := newInterner()
	for dec.More() {
		t, err := dec.Token()
		if err != nil {
			return nil, notObject(doc)
		}
		key, _ := t.(string)
		if seen[key] {
			ledgerFaults = append(ledgerFaults, "field "+keyed.Quote(key)+" appears twice")
		}
		seen[key] = true
		switch key {
		case "ledgerId":
			var raw json.RawMessage
			if dec.Decode(&raw) != nil {
				return nil, notObject(doc)
			}
			if json.Unmarshal(raw, &l.ID) != nil {
				ledgerFaults = append(ledgerFaults, "ledgerId must be a string")
			} else if why := keyed.CheckID(l.ID); why != "" {
				ledgerFaults = append(ledgerFaults, "ledgerId "+why)
			}
		case "stream":
			var raw json.RawMessage
			if dec.Decode(&raw) != nil {
				return nil, notObject(doc)
			}
			if json.Unmarshal(raw, &l.Stream) != nil {
				ledgerFaults = append(ledgerFaults, "stream must be a string")
			} else if why := CheckStream(l.Stream); why != "" {
				ledgerFaults = append(ledgerFaults, "stream "+keyed.Quote(l.Stream)+" "+why)
			}
		case "transactions":
			t, err := dec.Token()
			if err != nil {
				return nil, notObject(doc)
			}
			if t != json.Delim('[') {
				ledgerFaults = append(ledgerFaults, "transactions must be an array")
				if skipValue(dec, t) != nil {
					return nil, notObject(doc)
				}
				continue
			}
			n := min(countItems(doc), limits.MaxTransactions)
			l.entries = make([]entry, 0, n)
			// The first domain to appear gets room for every command: a
			// ledger is mostly of one domain (a large one, of orders).
			room := n
			for i := 0; dec.More(); i++ {
				if i == limits.MaxTransactions {
					return nil, fault.Errorf(fault.TooLarge, "the ledger has more than %d transactions", limits.MaxTransactions)
				}
				var item json.RawMessage
				if dec.Decode(&item) != nil {
					return nil, notObject(doc)
				}
				rd, ps := r.entry(i, item)
				var e entry // of a faulty entry, the zero value: the ledger is refused, its entries never read
				if len(ps) > 0 {
					faulty = append(faulty, i)
				} else {
					e, room = l.add(rd, ids, room), 0
				}
				l.entries = append(l.entries, e)
				problems = append(problems, ps...)
			}
			if _, err := dec.Token(); err != nil { // ]
				return nil, notObject(doc)
			}
			if len(l.entries) == 0 {
				ledgerFaults = append(ledgerFaults, "transactions is empty")
			}
		default:
			ledgerFaults = append(ledgerFaults, "unknown field "+keyed.Quote(key))
			var skip json.RawMessage
			if dec.Decode(&skip) != nil {
				return nil, notObject(doc)
			}
		}
	}
	if _, err := dec.Token(); err != nil { // }
		return nil, notObject(doc)
	}
	if _, err := dec.Token(); err != io.EOF { // nothing may follow the object
		return nil, notObject(doc)
	}
	if !seen["ledgerId"] {
		ledgerFaults = append(ledgerFaults, "ledgerId must be a string")
	}
	if !seen["transactions"] {
		ledgerFaults = append(ledgerFaults, "transactions must be an array")
	}
	if !seen["stream"] {
		l.Stream = DefaultStream
	}
	if len(ledgerFaults) == 0 {
		// Measured once the ledgerId is known: it is part of every message.
		for i := range l.entries {
			if len(faulty) > 0 && faulty[0] == i {
				faulty = faulty[1:]
				continue
			}
			problems = append(problems, l.measure(i)...)
		}
		slices.SortStableFunc(problems, func(a, b fault.Problem) int { return a.Index - b.Index })
	}
	if len(ledgerFaults) > 0 || len(problems) > 0 {
		slices.Sort(ledgerFaults)
		msg := "the ledger is invalid"
		if len(ledgerFaults) > 0 {
			msg += ": " + strings.Join(ledgerFaults, "; ")
		}
		if len(problems) > 0 {
			msg += fmt.Sprintf(" (%d problem(s) in its transactions)", len(problems))
		}
		err := &fault.Error{Code: fault.Invalid, Message: msg, Problems: problems}
		if l.ID != "" && keyed.CheckID(l.ID) == "" {
			return nil, &rejection{ledgerID: l.ID, err: err}
		}
		return nil, err
	}
	l.Hash = l.canonicalHash()
	return l, nil
}

// measure: the entry's message, exactly as it will be sent (whatever its
// seq), must fit its domain's queue. Checked before any seq is allocated,
// so a refused ledger leaves no gap.
func (l *Ledger) measure(i int) []fault.Problem {
	e, k := l.entries[i], l.key(i)
	d, c := l.domains[k.domain], l.command(e)
	body, err := d.Rules.Body(c)
	if err != nil {
		return []fault.Problem{{Index: i, Reason: "cannot be encoded as its " + d.Rules.Noun() + " message: " + keyed.Cut(err.Error())}}
	}
	size := convoy.MeasureMessage(l.ID, i, e.last, k.id, body)
	if size > d.MaxMessageBytes {
		return []fault.Problem{{Index: i, Field: sizeField(c), Reason: fmt.Sprintf(
			"its %s message takes %d bytes as sent, more than the %s queue accepts (%d)", d.Rules.Noun(), size, d.Rules.Name(), d.MaxMessageBytes)}}
	}
	return nil
}

// skipValue consumes the rest of a value whose first token was first.
func skipValue(dec *json.Decoder, first json.Token) error {
	if d, ok := first.(json.Delim); !ok || (d != '{' && d != '[') {
		return nil
	}
	for depth := 1; depth > 0; {
		t, err := dec.Token()
		if err != nil {
			return err
		}
		switch t {
		case json.Delim('{'), json.Delim('['):
			depth++
		case json.Delim('}'), json.Delim(']'):
			depth--
		}
	}
	return nil
}

// countItems estimates how many transactions doc holds (objects and arrays
// opening at depth 3, outside strings), to size the entries once: growing a
// slice of a million entries holds two copies of it for a moment.
func countItems(doc []byte) int {
	n, depth, inString, escaped := 0, 0, false, false
	for _, c := range doc {
		switch {
		case escaped:
			escaped = false
		case inString:
			escaped, inString = c == '\\', c != '"'
		case c == '"':
			inString = true
		case c == '{' || c == '[':
			if depth++; depth == 3 {
				n++
			}
		case c == '}' || c == ']':
			depth--
		}
	}
	return n
}

// CheckStream returns why s is not a valid stream name ("" when it is): the
// alphabet and length of every id (it becomes a SessionId).
func CheckStream(s string) string { return keyed.CheckID(s) }

// hashVersion prefixes the hash of canonicalHash. A record's hash without it
// was written by an earlier version (legacyHash).
const hashVersion = "v2:"

// canonicalHash hashes the parsed content, so that whitespace, key order and
// number spelling do not make the same ledger look different, in the
// entries' data too (hashEntry); the stream is part of the content.
func (l *Ledger) canonicalHash() string {
	h := sha256.New()
	enc := json.NewEncoder(h)
	_ = enc.Encode(l.ID)
	_ = enc.Encode(l.Stream)
	var buf bytes.Buffer
	for i := range l.entries {
		l.hashEntry(enc, &buf, i)
	}
	return hashVersion + hex.EncodeToString(h.Sum(nil))
}

// legacyHash is the hash earlier versions recorded: no stream, data as sent;
// "" for a ledger with entries of other domains than orders, which no
// earlier version took.
func (l *Ledger) legacyHash() string {
	h := sha256.New()
	enc := json.NewEncoder(h)
	_ = enc.Encode(l.ID)
	for _, e := range l.entries {
		o, ok := asOrderEntry(l.command(e), e.last)
		if !ok {
			return ""
		}
		_ = enc.Encode(o)
	}
	return hex.EncodeToString(h.Sum(nil))
}

// SameContent tells whether a record's hash is this ledger's: the current
// hash, or for a record written before streams existed (no version prefix)
// the earlier hash of an order ledger of the default stream.
func (l *Ledger) SameContent(recorded string) bool {
	if recorded == l.Hash {
		return true
	}
	if strings.HasPrefix(recorded, hashVersion) || l.Stream != DefaultStream {
		return false
	}
	legacy := l.legacyHash()
	return legacy != "" && recorded == legacy
}

// canonicalJSON writes the next JSON value of dec in a form that is the same
// whatever the spelling of the value: object members sorted by key (a key
// written twice is refused before: each domain's reader), numbers
// canonical, no space.
func canonicalJSON(dec *json.Decoder, w *bytes.Buffer) error {
	dec.UseNumber()
	t, err := dec.Token()
	if err != nil {
		return err
	}
	switch v := t.(type) {
	case json.Delim:
		switch v {
		case '[':
			w.WriteByte('[')
			for i := 0; dec.More(); i++ {
				if i > 0 {
					w.WriteByte(',')
				}
				if err := canonicalJSON(dec, w); err != nil {
					return err
				}
			}
			w.WriteByte(']')
		case '{':
			type member struct {
				key   string
				value []byte
			}
			var members []member
			for dec.More() {
				k, err := dec.Token()
				if err != nil {
					return err
				}
				var value bytes.Buffer
				if err := canonicalJSON(dec, &value); err != nil {
					return err
				}
				key, _ := k.(string)
				members = append(members, member{key, value.Bytes()})
			}
			slices.SortStableFunc(members, func(a, b member) int { return strings.Compare(a.key, b.key) })
			w.WriteByte('{')
			for i, m := range members {
				if i > 0 {
					w.WriteByte(',')
				}
				k, _ := json.Marshal(m.key)
				w.Write(k)
				w.WriteByte(':')
				w.Write(m.value)
			}
			w.WriteByte('}')
		default:
			return fmt.Errorf("unexpected %v", v)
		}
		_, err := dec.Token() // the closing delimiter
		return err
	case json.Number:
		w.WriteString(canonicalNumber(string(v)))
	default: // string, bool, nil
		b, _ := json.Marshal(v)
		w.Write(b)
	}
	return nil
}

// canonicalNumber spells a JSON number by its exact value: significant
// digits and a power of ten ("1.50", "15e-1" and "0.0150E2" are all "15e-1"),
// with no rounding and no cost proportional to the exponent's value.
func canonicalNumber(s string) string {
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	mant, exp, _ := strings.Cut(strings.ToLower(s), "e")
	intPart, frac, _ := strings.Cut(mant, ".")
	digits := intPart + frac
	e, ok := new(big.Int).SetString(strings.TrimPrefix(exp, "+"), 10)
	if exp == "" {
		e, ok = new(big.Int), true
	}
	if !ok {
		return s // not a JSON number: json.Decoder never gives one
	}
	e.Sub(e, big.NewInt(int64(len(frac))))
	digits = strings.TrimLeft(digits, "0")
	if digits == "" {
		return "0"
	}
	trimmed := strings.TrimRight(digits, "0")
	e.Add(e, big.NewInt(int64(len(digits)-len(trimmed))))
	sign := ""
	if neg {
		sign = "-"
	}
	return sign + trimmed + "e" + e.String()
}

// notObject says why doc, which the streaming decode gave up on, is not a
// ledger: where its JSON breaks (the byte, line and column encoding/json's
// SyntaxError.Offset points at), or that it is valid JSON but no object.
// It decodes doc once more, on this failure path only, because the
// streaming decoder's offsets are relative to the value it was reading.
func notObject(doc []byte) error {
	var whole json.RawMessage
	var syntax *json.SyntaxError
	if !errors.As(json.Unmarshal(doc, &whole), &syntax) {
		return fault.Errorf(fault.Invalid, "the ledger is not a JSON object")
	}
	if len(bytes.TrimSpace(doc)) == 0 {
		return fault.Errorf(fault.Invalid, "the ledger is empty")
	}
	at := min(max(syntax.Offset, 0), int64(len(doc))) // unexpected end: the end itself
	if at > 0 && strings.HasPrefix(syntax.Error(), "invalid character") {
		at-- // the offending character was the last byte read
	}
	line, column := position(doc[:at])
	return fault.Errorf(fault.Invalid, "the ledger is not valid JSON: %v at line %d, column %d (byte offset %d)", syntax, line, column, at)
}

// position returns the 1-based line and column (in bytes) just after before.
func position(before []byte) (line, column int) {
	line = 1 + bytes.Count(before, []byte("\n"))
	return line, len(before) - bytes.LastIndexByte(before, '\n')
}

func contentHash(doc []byte) string {
	sum := sha256.Sum256(doc)
	return hex.EncodeToString(sum[:])
}

// WithStream returns doc (a JSON object) with its top-level "stream" set to
// stream: replaced where it is, else added first. Every other member keeps
// its bytes and place. The result is a new document: parse it again.
func WithStream(doc []byte, stream string) ([]byte, error) {
	if why := CheckStream(stream); why != "" {
		return nil, fault.Errorf(fault.Invalid, "stream %s %s", keyed.Quote(stream), why)
	}
	dec := json.NewDecoder(bytes.NewReader(doc))
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return nil, notObject(doc)
	}
	value, _ := json.Marshal(stream)
	var out bytes.Buffer
	out.Grow(len(doc) + len(value) + 12)
	out.WriteString(`{"stream":`)
	out.Write(value)
	for dec.More() {
		t, err := dec.Token()
		if err != nil {
			return nil, notObject(doc)
		}
		var raw json.RawMessage
		if dec.Decode(&raw) != nil {
			return nil, notObject(doc)
		}
		if key, _ := t.(string); key == "stream" {
			continue
		}
		k, _ := json.Marshal(t)
		out.WriteByte(',')
		out.Write(k)
		out.WriteByte(':')
		out.Write(raw)
	}
	if _, err := dec.Token(); err != nil {
		return nil, notObject(doc)
	}
	out.WriteByte('}')
	return out.Bytes(), nil
}
