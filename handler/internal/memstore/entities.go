package memstore

import (
	"encoding/json"
	"time"

	"github.com/convoy-dev/convoy/handler/convoy"
	"github.com/convoy-dev/convoy/handler/heal"
	"github.com/convoy-dev/convoy/handler/keyed"
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
	seqRow    = "p:0000000000000000000" // seqKey, of p and r rows alike
)

// commitGroup is the entity-group transaction of tablestore's commitBody.
func commitGroup(o *convoy.Key, c *convoy.Change) *group {
	g := &group{}
	g.write(newEntity(o.ID, markerRow).i64("AppliedSeq").time("At"))
	head := newEntity(o.ID, headRow).i32("Parked")
	if o.ParkedLast != 0 {
		head.i64("ParkedLast")
	}
	head.bool("Complete").i64("AppliedSeq").i64("Version").i32("Layout").time("UpdatedAt")
	if !o.BlockedSince.IsZero() {
		head.time("BlockedSince")
	}
	if !o.AppliedAt.IsZero() {
		head.time("AppliedAt")
	}
	if crit := convoy.EncodeCriticalTimes(o.Crit); crit != "" {
		head.str("Crit", crit)
	}
	if o.StateVersion > 1 {
		head.i32("StateVersion")
	}
	if o.Failure.Seq > o.AppliedSeq {
		head.i64("FailedSeq").str("Failure", o.Failure.Why).time("FailedAt")
	}
	g.write(props(head, o.StateProps))
	for _, w := range c.Writes {
		g.write(props(newEntity(o.ID, w.Ref.Collection+":"+w.Ref.ID), w.Props))
	}
	for _, r := range c.Rejections {
		g.write(props(newEntity(o.ID, seqRow).i64("Seq"), r.Tag).str("Reason", r.Reason))
	}
	for _, m := range c.Park {
		e := newEntity(o.ID, seqRow).i64("Seq").bool("Last").str("MessageId", m.MessageID)
		if m.Oversize != "" {
			e.str("Oversize", m.Oversize)
		}
		if !m.EnqueuedAt.IsZero() {
			e.time("EnqueuedAt")
		}
		if m.TraceParent != "" {
			e.str("TraceParent", m.TraceParent)
		}
		g.write(props(e, m.Stored))
	}
	for range c.Unpark {
		g.delete(o.ID, seqRow)
	}
	return g
}

// props adds a domain's properties as tablestore's entityJSON.props does.
func props(e *entity, p keyed.Props) *entity {
	for _, q := range p {
		switch v := q.Value.(type) {
		case string:
			e.str(q.Name, v)
		case int64:
			e.i64(q.Name)
		case int32:
			e.i32(q.Name)
		case bool:
			e.bool(q.Name)
		case time.Time:
			e.time(q.Name)
		}
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

// allocationGroup is Allocate's transaction in the partition pk of a key
// ("order:<id>"): the alloc row, the seq row and the counter (whose Recent
// list is bounded: recentAllocations).
func allocationGroup(ledgerID, hash, pk string) *group {
	g := &group{}
	g.write(newEntity(pk, "alloc:"+ledgerID).i64("First").i32("Count").str("Hash", hash))
	g.write(newEntity(pk, "seq:0000000000000000000").i64("First").i32("Count").str("LedgerId", ledgerID).time("At"))
	g.write(newEntity(pk, "counter").i64("Last").i64("DeadLetteredSeq"))
	return g
}

// activeEntity is a key's entry in the active index of its domain,
// partition ("active" for orders).
func activeEntity(partition, key string) *entity {
	return newEntity(partition, key).i64("SeenSeq").time("SeenAt").i64("DeadLetteredSeq")
}
