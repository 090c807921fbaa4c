package convoy

import (
	"cmp"
	"slices"

	"github.com/convoy-dev/convoy/handler/keyed"
)

// maxKnown is how many rows a key keeps knowing between calls (the most
// recently used): enough for a command that follows the one that wrote its
// row closely (a ModifyTransaction after its AddTransaction) to need no
// read, a constant whatever the history.
const maxKnown = 32

// knownRows is what a key knows of its rows: absent, or present with their
// properties. It keeps only rows of the collections its rules' Needs have
// named (looked): a row no decision asks for is not worth remembering. A
// slice, not a map: it holds maxKnown rows between calls, and a key's
// cached size is mostly what it holds (a map's groups would triple it).
type knownRows struct {
	rows   []knownRow
	looked []string // collections named by Needs
	tick   uint64   // recency clock
}

type knownRow struct {
	ref     keyed.RowRef
	present bool
	props   keyed.Props
	used    uint64
}

func (k *knownRows) find(ref keyed.RowRef) int {
	for i := range k.rows {
		if k.rows[i].ref == ref {
			return i
		}
	}
	return -1
}

func (k *knownRows) knows(ref keyed.RowRef) bool { return k.find(ref) >= 0 }

func (k *knownRows) lookedUp(n keyed.Needs) {
	for _, refs := range [][]keyed.RowRef{n.Read, n.Absent} {
		for _, ref := range refs {
			if !slices.Contains(k.looked, ref.Collection) {
				k.looked = append(k.looked, ref.Collection)
			}
		}
	}
}

func (k *knownRows) learn(ref keyed.RowRef, p keyed.Props, present bool) {
	k.tick++
	r := knownRow{ref: ref, present: present, props: p, used: k.tick}
	if i := k.find(ref); i >= 0 {
		k.rows[i] = r
		return
	}
	k.rows = append(k.rows, r)
}

// wrote records a write of a decision: an inserted row is known as written;
// a merged one as merged, if its properties were known (else it is forgotten).
func (k *knownRows) wrote(w keyed.Write) {
	if !slices.Contains(k.looked, w.Ref.Collection) {
		return
	}
	if w.Insert {
		k.learn(w.Ref, w.Props, true)
		return
	}
	i := k.find(w.Ref)
	if i >= 0 && k.rows[i].present {
		k.learn(w.Ref, k.rows[i].props.Merge(w.Props), true)
		return
	}
	if i >= 0 {
		k.rows = slices.Delete(k.rows, i, i+1)
	}
}

func (k *knownRows) get(ref keyed.RowRef) (keyed.Props, bool) {
	i := k.find(ref)
	if i < 0 || !k.rows[i].present {
		return nil, false
	}
	return k.rows[i].props, true
}

// forget keeps the maxKnown most recently used rows.
func (k *knownRows) forget() {
	if len(k.rows) <= maxKnown {
		return
	}
	slices.SortFunc(k.rows, func(a, b knownRow) int { return cmp.Compare(b.used, a.used) })
	clear(k.rows[maxKnown:])
	k.rows = slices.Clip(k.rows[:maxKnown])
}

func (k knownRows) clone() knownRows {
	k.rows = slices.Clone(k.rows)
	k.looked = slices.Clone(k.looked)
	return k
}

// size is about how many bytes the known rows take in memory.
func (k *knownRows) size() int {
	n := 0
	for _, r := range k.rows {
		n += knownRowOverhead + len(r.ref.Collection) + len(r.ref.ID) + propsSize(r.props)
	}
	return n
}

// propsSize is about how many bytes p takes in memory.
func propsSize(p keyed.Props) int {
	n := 0
	for _, q := range p {
		n += propOverhead + len(q.Name)
		if s, ok := q.Value.(string); ok {
			n += len(s)
		}
	}
	return n
}

// rowsOf is what a decision sees of a key's rows: those it knows present.
// Needs made sure it knows every row it named.
type rowsOf struct{ o *Key }

func (r rowsOf) Get(ref keyed.RowRef) (keyed.Props, bool) { return r.o.rows.get(ref) }
