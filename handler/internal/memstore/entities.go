package memstore

import (
	"cmp"
	"encoding/json"
	"maps"
	"slices"

	"github.com/convoy-dev/convoy/handler/convoy"
	"github.com/convoy-dev/convoy/handler/heal"
)

// The entities tablestore writes for each write of memstore, property by
// property, measured against Table Storage's limits (limits.go). Mirrored
// rather than taken from tablestore: memstore may not import the adapter
// (docs/architecture.md; it would bring aztables into every unit test), and
// its encoding is written straight into a $batch body, with no entity to
// measure. What keeps the mirror honest is the conformance suite: each
// limit Azurite enforces is tested at its boundary on both stores, through
// the properties a caller can fill (storetest, healtest). Keys of a fixed
// format are written as one of their length: only their length counts.
const (
	markerRow = "v:0000000000000000000" // markerKey
	headRow   = "h"
	txRow     = "t:0000000000"          // txKey
	seqRow    = "p:0000000000000000000" // seqKey, of p and r rows alike
)

// commitGroup is the entity-group transaction of tablestore's commitBody.
func commitGroup(o *convoy.Order, c *convoy.Change) *group {
	g := &group{}
	g.write(newEntity(o.ID, markerRow).i64("AppliedSeq").time("At"))
	head := newEntity(o.ID, headRow).i32("Parked")
	if o.ParkedLast != 0 {
		head.i64("ParkedLast")
	}
	head.str("Status", string(o.Status)).bool("Complete").str("Currency", o.Currency).
		i64("AppliedSeq").i64("Version").i64("Total").i64("TxCount").i32("Layout").time("UpdatedAt")
	if !o.BlockedSince.IsZero() {
		head.time("BlockedSince")
	}
	if !o.AppliedAt.IsZero() {
		head.time("AppliedAt")
	}
	if crit := convoy.EncodeCriticalTimes(o.Crit); crit != "" {
		head.str("Crit", crit)
	}
	g.write(data(head, o.Data))
	for _, w := range slices.SortedFunc(maps.Values(c.Tx), func(a, b convoy.TxWrite) int { return cmp.Compare(a.Position, b.Position) }) {
		g.write(data(newEntity(o.ID, txRow).str("TxId", w.TxID).i64("Amount"), w.Data))
		g.write(newEntity(o.ID, "x:"+w.TxID).i64("Position").i64("Amount"))
	}
	for _, r := range c.Rejections {
		g.write(newEntity(o.ID, seqRow).i64("Seq").str("Op", string(r.Op)).str("TxId", r.TxID).str("Reason", r.Reason))
	}
	for _, m := range c.Park {
		e := newEntity(o.ID, seqRow).i64("Seq").bool("Last").str("MessageId", m.MessageID).str("Op", string(m.Tx.Op)).
			str("TxId", m.Tx.TxID).str("Currency", m.Tx.Currency)
		if m.Tx.Amount != nil {
			e.i64("Amount")
		}
		if !m.EnqueuedAt.IsZero() {
			e.time("EnqueuedAt")
		}
		if m.TraceParent != "" {
			e.str("TraceParent", m.TraceParent)
		}
		g.write(data(e, m.Tx.Data))
	}
	for range c.Unpark {
		g.delete(o.ID, seqRow)
	}
	return g
}

// data adds a data object as tablestore's entityJSON.data does: a string
// property, absent when empty.
func data(e *entity, d []byte) *entity {
	if len(d) > 0 {
		e.str("Data", string(d))
	}
	return e
}

// blockedEntity is an entry of the blocked index as stored after
// tablestore's MarkBlocked and its merges (UpdateBlocked, SetNotes); its
// figures (AppliedSeq, Parked) are counted whether merged yet or not.
func blockedEntity(e convoy.BlockedEntry) *entity {
	x := newEntity("~blocked", e.Key).str("OrderId", e.OrderID).time("Since").i64("Version").bool("Confirmed").
		i64("AppliedSeq").i32("Parked")
	if e.Note != "" {
		x.str("Note", e.Note)
	}
	return x
}

// stateEntity and healthEntity are tablestore's rows of heal.StateStore:
// one property holding the JSON document.
func stateEntity(st heal.State) *entity {
	raw, _ := json.Marshal(st)
	return newEntity("~autoreplay", st.OrderID).str("State", string(raw))
}

func healthEntity(h heal.Health) *entity {
	raw, _ := json.Marshal(h)
	return newEntity("~health", "autoreplay").str("Health", string(raw))
}

// trendsEntity is tablestore's row of the trend series: one property
// holding its encoding (heal.Trends.Encode).
func trendsEntity(t heal.Trends) *entity {
	return newEntity("~health", "trends").str("Points", t.Encode())
}

// The rows of tablestore.Ledgers. A ledger record's Error and Problems are
// left out: tablestore cuts them to fit (recordEntity) before writing.
func ledgerEntity(id, hash, status string) *entity {
	return newEntity("ledger:"+id, "record").str("Hash", hash).str("Status", status).
		i32("Transactions").i32("Orders").i32("Sent").i32("ProblemCount").time("UpdatedAt")
}

// allocationGroup is Allocate's transaction: the alloc row, the seq row and
// the counter (whose Recent list is bounded: recentAllocations).
func allocationGroup(ledgerID, hash, orderID string) *group {
	pk := "order:" + orderID
	g := &group{}
	g.write(newEntity(pk, "alloc:"+ledgerID).i64("First").i32("Count").str("Hash", hash))
	g.write(newEntity(pk, "seq:0000000000000000000").i64("First").i32("Count").str("LedgerId", ledgerID).time("At"))
	g.write(newEntity(pk, "counter").i64("Last").i64("DeadLetteredSeq"))
	return g
}

func activeEntity(orderID string) *entity {
	return newEntity("active", orderID).i64("SeenSeq").time("SeenAt").i64("DeadLetteredSeq")
}
