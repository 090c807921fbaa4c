package ledger

import (
	"bytes"
	"encoding/json"
	"strings"

	"github.com/convoy-dev/convoy/handler/fault"
	"github.com/convoy-dev/convoy/handler/keyed"
)

// Domain is a domain a ledger's entries may be commands of: its rules
// read an entry (keyed.Domain.ReadEntry), keep the commands read (Commands)
// and write their message bodies (Body).
type Domain struct {
	Rules keyed.Domain
	// MaxMessageBytes is its queue's message size limit (Premium: up to
	// 100 MiB); default DefaultMaxMessageBytes.
	MaxMessageBytes int
}

// domainField is the member of an entry that names its domain; an entry
// without it is a command of the default domain (the first).
const domainField = "domain"

// reader reads a ledger's entries with the domains a ledger may carry.
type reader struct {
	domains []Domain
	byName  map[string]int
	// publishing lists the Names of the domains whose commands can be
	// in a ledger, for a problem to say.
	publishing string
}

func newReader(domains []Domain) (*reader, error) {
	if len(domains) == 0 {
		return nil, fault.Errorf(fault.Internal, "no domain to read a ledger's entries with")
	}
	r := &reader{domains: make([]Domain, len(domains)), byName: make(map[string]int, len(domains))}
	var names []string
	for i, d := range domains {
		if _, twice := r.byName[d.Rules.Name()]; twice {
			return nil, fault.Errorf(fault.Internal, "domain %q is registered twice", d.Rules.Name())
		}
		if d.MaxMessageBytes <= 0 {
			d.MaxMessageBytes = DefaultMaxMessageBytes
		}
		r.domains[i], r.byName[d.Rules.Name()] = d, i
		if d.Rules.Publishes() {
			names = append(names, d.Rules.Name())
		}
	}
	r.publishing = strings.Join(names, ", ")
	return r, nil
}

var (
	extraLast       = []string{"last"}
	extraLastDomain = []string{"last", domainField}
)

// read is what a reader read of an entry.
type read struct {
	domain  int // its index in the reader's domains
	key     string
	command any
	last    bool
}

// entry reads the i-th entry of a ledger with its domain's rules (the same
// problems on every path as a message body's), with its "last". Its domain
// is the one its "domain" member names, else the default. An entry whose
// bytes do not hold `"domain"` is read once, by the default domain, as
// before ledgers carried others, and told the same problems. A "domain"
// spelt with escapes is no domain member: the rules reading the entry tell
// it an unknown field.
func (r *reader) entry(i int, raw json.RawMessage) (read, []fault.Problem) {
	k, extra := 0, extraLast
	if bytes.Contains(raw, []byte(`"`+domainField+`"`)) {
		extra = extraLastDomain
		name, named, why := domainMember(raw)
		if why != "" {
			return read{}, []fault.Problem{{Index: i, Field: domainField, Reason: why}}
		}
		if named {
			var ok bool
			if k, ok = r.byName[name]; !ok {
				return read{}, []fault.Problem{{Index: i, Field: domainField, Reason: keyed.Quote(name) + " is not one of " + r.publishing}}
			}
			if !r.domains[k].Rules.Publishes() {
				return read{}, []fault.Problem{{Index: i, Field: domainField, Reason: keyed.Quote(name) +
					" takes no ledger entries (the domains that do: " + r.publishing + ")"}}
			}
		}
	}
	d := r.domains[k]
	if !d.Rules.Publishes() {
		return read{}, []fault.Problem{{Index: i, Field: domainField, Reason: "is required: the default domain " +
			keyed.Quote(d.Rules.Name()) + " takes no ledger entries (the domains that do: " + r.publishing + ")"}}
	}
	key, c, extras, ps := d.Rules.ReadEntry(i, raw, extra...)
	rd := read{domain: k, key: key, command: c}
	if v, ok := extras["last"]; ok && json.Unmarshal(v, &rd.last) != nil {
		ps = append(ps, fault.Problem{Index: i, Field: "last", Reason: "must be true or false"})
	}
	return rd, ps
}

// domainMember returns the value of the first "domain" member of the
// entry raw, whether it has one, and why the value is no name ("" when it
// is). An entry that is no object has none: its rules say what it is.
func domainMember(raw []byte) (name string, named bool, why string) {
	members, err := keyed.Members(raw)
	if err != nil {
		return "", false, ""
	}
	for _, m := range members {
		if m.Key != domainField {
			continue
		}
		if !bytes.HasPrefix(m.Value, []byte(`"`)) || json.Unmarshal(m.Value, &name) != nil { // null reads as ""
			return "", true, "must be a string"
		}
		return name, true, ""
	}
	return "", false, ""
}

// otherEntry is how an entry of a domain other than orders is hashed: its
// domain, its message body in canonical JSON (the key is in it), its mark.
type otherEntry struct {
	Domain string          `json:"domain"`
	Body   json.RawMessage `json:"body"`
	Last   bool            `json:"last"`
}

// hashEntry writes the i-th entry's canonical content to enc, buf being
// scratch space: an order's transaction as before ledgers carried other
// domains (orderEntry), so that the hash recorded of an order ledger is its
// hash still; any other entry as otherEntry, its body being what is sent.
func (l *Ledger) hashEntry(enc *json.Encoder, buf *bytes.Buffer, i int) {
	buf.Reset()
	e := l.entries[i]
	c := l.command(e)
	if o, ok := asOrderEntry(c, e.last); ok {
		if len(o.Data) > 0 && canonicalJSON(json.NewDecoder(bytes.NewReader(o.Data)), buf) == nil {
			o.Data = buf.Bytes()
		}
		_ = enc.Encode(o)
		return
	}
	d := l.domains[l.key(i).domain].Rules
	body, _ := d.Body(c) // measured before: it encodes
	_ = canonicalJSON(json.NewDecoder(bytes.NewReader(body)), buf)
	_ = enc.Encode(otherEntry{Domain: d.Name(), Body: buf.Bytes(), Last: e.last})
}
