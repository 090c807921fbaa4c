package convoy

import (
	"cmp"
	"maps"
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
// named (looked): a row no decision asks for is not worth remembering.
type knownRows struct {
	rows   map[keyed.RowRef]knownRow
	looked []string // collections named by Needs
	tick   uint64   // recency clock
}

type knownRow struct {
	present bool
	props   keyed.Props
	used    uint64
}

func (k *knownRows) knows(ref keyed.RowRef) bool { _, ok := k.rows[ref]; return ok }

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
	if k.rows == nil {
		k.rows = map[keyed.RowRef]knownRow{}
	}
	k.tick++
	k.rows[ref] = knownRow{present: present, props: p, used: k.tick}
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
	if r, ok := k.rows[w.Ref]; ok && r.present {
		k.learn(w.Ref, r.props.Merge(w.Props), true)
		return
	}
	delete(k.rows, w.Ref)
}

func (k *knownRows) get(ref keyed.RowRef) (keyed.Props, bool) {
	r, ok := k.rows[ref]
	if !ok || !r.present {
		return nil, false
	}
	return r.props, true
}

// forget keeps the maxKnown most recently used rows.
func (k *knownRows) forget() {
	if len(k.rows) <= maxKnown {
		return
	}
	refs := slices.Collect(maps.Keys(k.rows))
	slices.SortFunc(refs, func(a, b keyed.RowRef) int { return cmp.Compare(k.rows[b].used, k.rows[a].used) })
	for _, ref := range refs[maxKnown:] {
		delete(k.rows, ref)
	}
}

func (k knownRows) clone() knownRows {
	k.rows = maps.Clone(k.rows)
	k.looked = slices.Clone(k.looked)
	return k
}

// size is about how many bytes the known rows take in memory.
func (k *knownRows) size() int {
	n := 0
	for ref, r := range k.rows {
		n += knownRowOverhead + len(ref.Collection) + len(ref.ID) + propsSize(r.props)
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
type rowsOf struct{ o *Order }

func (r rowsOf) Get(ref keyed.RowRef) (keyed.Props, bool) { return r.o.rows.get(ref) }
