package convoy

import "github.com/convoy-dev/convoy/handler/keyed"

// MaxChangeRecords is how many records (besides the key's head and the
// commit marker) one atomic commit may touch: a Table Storage entity-group
// transaction holds at most 100 operations.
const MaxChangeRecords = 98

// MaxChangeBytes is how many bytes (keyed.Props.WireSize) the records of one
// commit may take: an entity-group transaction holds 4 MiB, of which the
// head and the operations' own lines take the rest.
const MaxChangeBytes = 3 << 20

// Change is what one commit writes, besides the key's scalar state (its
// head): records keyed so that touching one twice in a commit writes it once.
type Change struct {
	Writes     []keyed.Write     // rows of the domain's collections, in the order first written
	Rejections []Rejection       // new rejections
	Park       map[int64]Message // messages to park, by seq
	Unpark     map[int64]bool    // parked messages consumed, by seq
	changed    bool              // the head changed too (every step but a duplicate)
	bytes      int               // the records' WireSize
}

// Records is how many records the change touches.
func (c *Change) Records() int {
	return len(c.Writes) + len(c.Rejections) + len(c.Park) + len(c.Unpark)
}

// Bytes is about how many bytes the change's records take in a commit.
func (c *Change) Bytes() int { return c.bytes }

// Empty reports whether committing c would change nothing.
func (c *Change) Empty() bool { return !c.changed }

// hasRoom reports whether one more step of d's budget fits in this commit:
// an unpark and its writes, or a rejection, or a park.
func (c *Change) hasRoom(b keyed.Budget) bool {
	return c.Records()+1+b.Writes <= MaxChangeRecords && c.bytes+b.Bytes+b.ParkedBytes+rejectionBytes <= MaxChangeBytes
}

// rejectionBytes bounds a rejection row's WireSize (its reason and tag are cut: reject).
const rejectionBytes = 16 << 10

// write adds a decision's write: a row written twice in a commit is written
// once, an insert merged with what follows it staying an insert.
func (c *Change) write(w keyed.Write) {
	c.bytes += w.Props.WireSize()
	for i, prev := range c.Writes {
		if prev.Ref == w.Ref {
			c.Writes[i].Props = prev.Props.Merge(w.Props)
			return
		}
	}
	c.Writes = append(c.Writes, w)
}

func (c *Change) park(m Message) {
	if c.Park == nil {
		c.Park = map[int64]Message{}
	}
	c.bytes += m.Stored.WireSize()
	c.Park[m.Seq] = m
}

// unpark consumes a parked message; parked and consumed in the same commit,
// it is never written at all.
func (c *Change) unpark(seq int64) {
	if _, ok := c.Park[seq]; ok {
		delete(c.Park, seq)
		return
	}
	if c.Unpark == nil {
		c.Unpark = map[int64]bool{}
	}
	c.Unpark[seq] = true
}
