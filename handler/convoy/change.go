package convoy

// MaxChangeRecords is how many records (besides the order's head and the
// commit marker) one atomic commit may touch: a Table Storage entity-group
// transaction holds at most 100 operations.
const MaxChangeRecords = 98

// maxStepRecords is the most records one Receive or DrainNext adds to a Change
// (an unpark plus a transaction or a rejection, or a park).
const maxStepRecords = 2

// Change is what one commit writes, besides the order's scalar state (its
// head): records keyed so that touching one twice in a commit writes it once.
type Change struct {
	Tx         map[int]TxEntry   // transaction records by position, new or modified
	Rejections []Rejection       // new rejections
	Park       map[int64]Message // messages to park, by seq
	Unpark     map[int64]bool    // parked messages consumed, by seq
	changed    bool              // the head changed too (every step but a duplicate)
}

// Records is how many records the change touches.
func (c *Change) Records() int {
	return len(c.Tx) + len(c.Rejections) + len(c.Park) + len(c.Unpark)
}

// Empty reports whether committing c would change nothing.
func (c *Change) Empty() bool { return !c.changed }

// hasRoom reports whether one more step fits in this commit.
func (c *Change) hasRoom() bool { return c.Records()+maxStepRecords <= MaxChangeRecords }

func (c *Change) putTx(i int, t TxEntry) {
	if c.Tx == nil {
		c.Tx = map[int]TxEntry{}
	}
	c.Tx[i] = t
}

func (c *Change) park(m Message) {
	if c.Park == nil {
		c.Park = map[int64]Message{}
	}
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
