package ledger

import (
	"iter"

	"github.com/convoy-dev/convoy/handler/keyed"
)

// Entry is one transaction of a ledger: a command of one key of one domain,
// with its end-of-sequence mark, as Ledger.Entry gives it.
type Entry struct {
	Domain  string // its domain's Name
	Key     string // the key it is for: its messages' SessionId
	Command any    // a copy of what its domain's ReadEntry read (orders: an orders.Transaction)
	Last    bool
}

// entry is an Entry as a ledger keeps it, for a ledger may hold a million
// (BenchmarkPublisherScale): two indexes and its mark, 12 bytes where an
// Entry takes 56. Its command is in its domain's list, not boxed in an any
// (an allocation of its own); its key, with its domain, is in the ledger's
// keys, which a large ledger repeats many times.
type entry struct {
	key     int32 // its key's index in Ledger.keys
	command int32 // its command's index in its domain's list
	last    bool
}

// keyOf is a key of one domain (by its index): the same id in two domains
// names two keys.
type keyOf struct {
	domain int
	id     string
}

// commands are a domain with the commands of its entries in a ledger, in
// ledger order (nil when it has none).
type commands struct {
	Domain
	list keyed.CommandList
}

// Len returns the number of the ledger's entries.
func (l *Ledger) Len() int { return len(l.entries) }

// Entry returns the i-th entry.
func (l *Ledger) Entry(i int) Entry {
	e, k := l.entries[i], l.key(i)
	return Entry{Domain: l.domains[k.domain].Rules.Name(), Key: k.id, Command: l.command(e), Last: e.last}
}

// Entries yields each entry with its index, in ledger order.
func (l *Ledger) Entries() iter.Seq2[int, Entry] {
	return func(yield func(int, Entry) bool) {
		for i := range l.entries {
			if !yield(i, l.Entry(i)) {
				return
			}
		}
	}
}

// key returns the key of the i-th entry.
func (l *Ledger) key(i int) keyOf { return l.keys[l.entries[i].key] }

// command returns e's command, boxed.
func (l *Ledger) command(e entry) any {
	return l.domains[l.keys[e.key].domain].list.At(int(e.command))
}

// add keeps an entry read without a problem: its key (numbered in order of
// first appearance) and its command, in its domain's list, which it makes
// with room for room commands if the domain has none yet.
func (l *Ledger) add(rd read, ids *interner, room int) entry {
	k, ok := ids.keys[keyOf{rd.domain, rd.key}]
	if !ok {
		k = int32(len(l.keys))
		ids.keys[keyOf{rd.domain, rd.key}] = k
		l.keys = append(l.keys, keyOf{rd.domain, rd.key})
	}
	d := &l.domains[rd.domain]
	if d.list == nil {
		d.list = d.Rules.Commands(room)
	}
	c := ids.share(l.keys[k].id, rd.command)
	return entry{key: k, command: int32(d.list.Append(c)), last: rd.last}
}

// interner numbers a ledger's keys as it is read, and shares one copy of
// each string that entries repeat (share).
type interner struct {
	keys    map[keyOf]int32
	strings map[string]string
}

func newInterner() *interner {
	return &interner{keys: map[keyOf]int32{}, strings: map[string]string{}}
}

func (in *interner) get(s string) string {
	if v, ok := in.strings[s]; ok {
		return v
	}
	in.strings[s] = s
	return s
}

// Keys returns the distinct keys of the entries of domain (a Name), in
// order of first appearance.
func (l *Ledger) Keys(domain string) []string {
	var ids []string
	for _, k := range l.keys {
		if l.domains[k.domain].Rules.Name() == domain {
			ids = append(ids, k.id)
		}
	}
	return ids
}

// KeyCounts counts the distinct keys of the ledger's entries: those of the
// default domain (Summary.Orders, which predates the other domains), and
// those of each other domain the ledger holds entries of, by its Name (nil
// when none).
func (l *Ledger) KeyCounts() (defaults int, others map[string]int) {
	for _, k := range l.keys {
		if k.domain == 0 {
			defaults++
			continue
		}
		if others == nil {
			others = map[string]int{}
		}
		others[l.domains[k.domain].Rules.Name()]++
	}
	return defaults, others
}
