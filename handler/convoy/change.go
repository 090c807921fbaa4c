package convoy

// MaxChangeRecords is how many records (besides the order's head and the
// commit marker) one atomic commit may touch: a Table Storage entity-group
// transaction holds at most 100 operations.
const MaxChangeRecords = 98

// TxRecords is how many records one transaction takes: its row in the order
// added and its row by txId (the point read of Store.Tx).
const TxRecords = 2

// maxStepRecords is the most records one Receive or DrainNext adds to a Change
// (an unpark plus a transaction or a rejection, or a park).
const maxStepRecords = 1 + TxRecords

// Change is what one commit writes, besides the order's scalar state (its
// head): records keyed so that touching one twice in a commit writes it once.
type Change struct {
	Tx         map[string]TxWrite // transactions added or modified, by txId
	Rejections []Rejection        // new rejections
	Park       map[int64]Message  // messages to park, by seq
	Unpark     map[int64]bool     // parked messages consumed, by seq
	changed    bool               // the head changed too (every step but a duplicate)
}

// TxWrite is one transaction a commit writes. Added: a new transaction,
// whose records the commit inserts, failing whole (ErrConflict) if its txId
// exists already; else a modification of a stored one: its amount replaced,
// and its data when Data is not nil (nil keeps the stored data).
type TxWrite struct {
	TxRecord
	Added bool
}

// Records is how many records the change touches.
func (c *Change) Records() int {
	return TxRecords*len(c.Tx) + len(c.Rejections) + len(c.Park) + len(c.Unpark)
}

// Empty reports whether committing c would change nothing.
func (c *Change) Empty() bool { return !c.changed }

// hasRoom reports whether one more step fits in this commit.
func (c *Change) hasRoom() bool { return c.Records()+maxStepRecords <= MaxChangeRecords }

func (c *Change) addTx(r TxRecord) {
	if c.Tx == nil {
		c.Tx = map[string]TxWrite{}
	}
	c.Tx[r.TxID] = TxWrite{TxRecord: r, Added: true}
}

// modifyTx replaces a transaction's amount (and data, if r has some); a
// transaction added in the same commit stays an addition.
func (c *Change) modifyTx(r TxRecord) {
	if c.Tx == nil {
		c.Tx = map[string]TxWrite{}
	}
	w, ok := c.Tx[r.TxID]
	if !ok {
		c.Tx[r.TxID] = TxWrite{TxRecord: r}
		return
	}
	w.Amount = r.Amount
	if r.Data != nil {
		w.Data = r.Data
	}
	c.Tx[r.TxID] = w
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
