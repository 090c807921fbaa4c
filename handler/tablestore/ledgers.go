package tablestore

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/data/aztables"

	"github.com/convoy-dev/convoy/handler/convoy"
	"github.com/convoy-dev/convoy/handler/fault"
	"github.com/convoy-dev/convoy/handler/ledger"
)

// Ledgers is a ledger.Store on one table, its keys those of one domain
// (the order domain's; Keys: another's), whose Noun ("order", "account")
// prefixes their partitions:
//
//	PK ledger:<ledgerId>  RK record           the ledger's record (status, hash, progress), whatever its domains
//	PK <noun>:<key>       RK counter          the last seq allocated to the key, the recent allocations
//	PK <noun>:<key>       RK alloc:<ledgerId> the seqs a ledger was given: First, Count, Hash
//	PK <noun>:<key>       RK seq:<inverted>   the same, keyed by First (inverted: the latest first)
//	PK active             RK <orderId>        an order publishing gave seqs to, or the processor received (convoy.ActiveIndex)
//	PK active:<noun>      RK <key>            the same of another domain's key
//
// The order domain's rows are where they were before other domains had
// any (partition "active", not "active:order"), so that a table written
// before is read as it is.
//
// An allocation writes the counter (ETag-guarded), its alloc row and its seq
// row in one entity-group transaction: two ledgers racing over a key
// cannot both take the same numbers, and numbers are never taken without
// their record. The counter keeps the key's last recentAllocations
// allocations (first seq, count, when), so that where a seq waiting to be
// applied was allocated is, nearly always, in the one point read of the
// counter (Published); an older one is found by one query of one seq row,
// however many ledgers published to the key; partitions allocated before
// seq rows were kept fall back to the alloc rows.
// The alloc row holds the ledger's count and content hash: the numbers go
// back only to the same content. Records are inserted (AddEntity) or
// replaced under the ETag they were read with, never upserted.
type Ledgers struct {
	table  *aztables.Client
	noun   string // of the keys: their partitions are <noun>:<key>
	active string // the partition of their active index
}

var _ ledger.Store = (*Ledgers)(nil)

// NewLedgers returns a Ledgers on table, created on first use if missing,
// of the order domain's keys.
func NewLedgers(table *aztables.Client) *Ledgers { return (&Ledgers{table: table}).Keys("order") }

// Keys returns the Ledgers of the keys of the domain whose Noun is noun, on
// the same table and records. A noun is letters (it must name no other
// partition: "ledger" and "active" do).
func (s *Ledgers) Keys(noun string) *Ledgers {
	if noun == "" || noun == "ledger" || noun == "active" || strings.Trim(noun, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ") != "" {
		panic(fmt.Sprintf("tablestore: %q is no noun of a domain's keys", noun))
	}
	active := "active:" + noun
	if noun == "order" {
		active = "active" // as before other domains
	}
	return &Ledgers{table: s.table, noun: noun, active: active}
}

// partition is the partition of key's counter and allocations.
func (s *Ledgers) partition(key string) string { return s.noun + ":" + key }

// A rejected ledger's record must always be writable: a string property
// holds at most 64 KiB (32K UTF-16 units). The problems kept are the first
// that fit maxProblemsBytes of JSON, at most maxStoredProblems;
// ProblemCount says how many there were. The error is cut to maxErrorRunes.
const (
	maxStoredProblems = 100
	maxProblemsBytes  = 30_000
	maxErrorRunes     = 4_000
)

// GetLedger implements ledger.Store.
func (s *Ledgers) GetLedger(ctx context.Context, id string) (*ledger.Record, error) {
	resp, err := s.table.GetEntity(ctx, "ledger:"+id, "record", nil)
	switch {
	case isAbsent(err):
		return nil, nil
	case err != nil:
		return nil, classify(err, "read ledger "+id)
	}
	var e aztables.EDMEntity
	if err := json.Unmarshal(resp.Value, &e); err != nil {
		return nil, fault.Wrap(fault.Internal, err, "decode ledger "+id)
	}
	p := props(e.Properties)
	r := &ledger.Record{ID: id, Hash: p.str("Hash"), Status: ledger.Status(p.str("Status")),
		Transactions: int(p.int("Transactions")), Orders: int(p.int("Orders")), Sent: int(p.int("Sent")),
		Error: p.str("Error"), UpdatedAt: p.time("UpdatedAt"), ETag: string(resp.ETag)}
	if s := p.str("Problems"); s != "" {
		_ = json.Unmarshal([]byte(s), &r.Problems)
	}
	if s := p.str("Keys"); s != "" {
		_ = json.Unmarshal([]byte(s), &r.Keys)
	}
	return r, nil
}

func recordEntity(r *ledger.Record) ([]byte, error) {
	problems := r.Problems
	if len(problems) > maxStoredProblems {
		problems = problems[:maxStoredProblems]
	}
	pj, err := json.Marshal(problems)
	for err == nil && len(pj) > maxProblemsBytes {
		problems = problems[:len(problems)*maxProblemsBytes/len(pj)] // shrinks every round: len(pj) > maxProblemsBytes
		pj, err = json.Marshal(problems)
	}
	if err != nil {
		return nil, err
	}
	msg := r.Error
	if rs := []rune(msg); len(rs) > maxErrorRunes {
		msg = string(rs[:maxErrorRunes]) + "…"
	}
	props := map[string]any{
		"Hash": r.Hash, "Status": string(r.Status), "Transactions": int32(r.Transactions), "Orders": int32(r.Orders),
		"Sent": int32(r.Sent), "Error": msg, "Problems": string(pj), "ProblemCount": int32(len(r.Problems)),
		"UpdatedAt": aztables.EDMDateTime(r.UpdatedAt),
	}
	if len(r.Keys) > 0 { // none of a ledger of orders alone: its record is as before other domains
		keys, err := json.Marshal(r.Keys)
		if err != nil {
			return nil, err
		}
		props["Keys"] = string(keys)
	}
	return json.Marshal(aztables.EDMEntity{Entity: aztables.Entity{PartitionKey: "ledger:" + r.ID, RowKey: "record"}, Properties: props})
}

// CreateLedger implements ledger.Store.
func (s *Ledgers) CreateLedger(ctx context.Context, r *ledger.Record) error {
	data, err := recordEntity(r)
	if err != nil {
		return fault.Wrap(fault.Internal, err, "encode ledger record")
	}
	err = withTable(ctx, s.table, func() error {
		resp, err := s.table.AddEntity(ctx, data, nil)
		if err == nil {
			r.ETag = string(resp.ETag)
		}
		return err
	})
	if tableCode(err) == aztables.EntityAlreadyExists {
		return ledger.ErrLedgerExists
	}
	return classifyOrNil(err, "create ledger "+r.ID)
}

// SaveLedger implements ledger.Store.
func (s *Ledgers) SaveLedger(ctx context.Context, r *ledger.Record) error {
	data, err := recordEntity(r)
	if err != nil {
		return fault.Wrap(fault.Internal, err, "encode ledger record")
	}
	if r.ETag == "" {
		return fault.Errorf(fault.Internal, "save ledger %q: no ETag (a record is replaced only as it was read)", r.ID)
	}
	etag := azcore.ETag(r.ETag)
	resp, err := s.table.UpdateEntity(ctx, data, &aztables.UpdateEntityOptions{UpdateMode: aztables.UpdateModeReplace, IfMatch: &etag})
	switch {
	case err == nil:
		r.ETag = string(resp.ETag)
		return nil
	case goneOrChanged(err):
		return ledger.ErrLedgerChanged
	default:
		return classify(err, "save ledger "+r.ID)
	}
}

// maxAllocateAttempts bounds Allocate's reads and writes when other
// allocations to the same key keep coming first: each lost attempt means
// one of them succeeded, so 20 in a row is contention worth reporting
// (transient: the caller retries later) rather than a loop.
const maxAllocateAttempts = 20

// Allocate implements ledger.Allocator: one query (counter and this
// ledger's alloc row) and one transaction per attempt.
func (s *Ledgers) Allocate(ctx context.Context, ledgerID, hash, key string, count int) (int64, error) {
	pk := s.partition(key)
	allocKey := "alloc:" + ledgerID
	filter := fmt.Sprintf("PartitionKey eq '%s' and (RowKey eq 'counter' or RowKey eq '%s')", escape(pk), escape(allocKey))
	for range maxAllocateAttempts {
		var last, note int64
		var etag *azcore.ETag
		var recent []allocation
		pager := s.table.NewListEntitiesPager(&aztables.ListEntitiesOptions{Filter: &filter})
		for pager.More() {
			page, err := pager.NextPage(ctx)
			if err != nil && !tableAbsent(err) {
				return 0, classify(err, "read seq counter of "+s.noun+" "+key)
			}
			for _, raw := range page.Entities {
				var e aztables.EDMEntity
				if err := json.Unmarshal(raw, &e); err != nil {
					return 0, fault.Wrap(fault.Internal, err, "decode seq counter")
				}
				p := props(e.Properties)
				if e.RowKey == allocKey { // this ledger was given its numbers before
					if got, gotHash := int(p.int("Count")), p.str("Hash"); !ledger.SameAllocation(count, hash, got, gotHash) {
						return 0, ledger.AllocationMismatch(s.noun, ledgerID, key, count, hash, got, gotHash)
					}
					return p.int("First"), nil
				}
				tag := azcore.ETag(e.ETag)
				last, etag, note, recent = p.int("Last"), &tag, p.int("DeadLetteredSeq"), decodeRecent(p.str("Recent"))
			}
		}
		at := time.Now().UTC().Truncate(time.Millisecond)
		recent = append(recent, allocation{First: last + 1, Count: int64(count), At: at.UnixMilli()})
		recent = recent[max(len(recent)-recentAllocations, 0):]
		counterProps := map[string]any{"Last": aztables.EDMInt64(last + int64(count)), "Recent": encodeRecent(recent)}
		if note != 0 { // kept: the missing seq is still dead-lettered
			counterProps["DeadLetteredSeq"] = aztables.EDMInt64(note)
		}
		counter, _ := json.Marshal(aztables.EDMEntity{Entity: aztables.Entity{PartitionKey: pk, RowKey: "counter"}, Properties: counterProps})
		alloc, _ := json.Marshal(aztables.EDMEntity{Entity: aztables.Entity{PartitionKey: pk, RowKey: allocKey},
			Properties: map[string]any{"First": aztables.EDMInt64(last + 1), "Count": int32(count), "Hash": hash}})
		bySeq, _ := json.Marshal(aztables.EDMEntity{Entity: aztables.Entity{PartitionKey: pk, RowKey: seqRowKey(last + 1)},
			Properties: map[string]any{"First": aztables.EDMInt64(last + 1), "Count": int32(count), "LedgerId": ledgerID, "At": aztables.EDMDateTime(at)}})
		actions := []aztables.TransactionAction{{ActionType: aztables.TransactionTypeAdd, Entity: alloc},
			{ActionType: aztables.TransactionTypeAdd, Entity: bySeq}}
		if etag == nil {
			actions = append(actions, aztables.TransactionAction{ActionType: aztables.TransactionTypeAdd, Entity: counter})
		} else {
			actions = append(actions, aztables.TransactionAction{ActionType: aztables.TransactionTypeUpdateReplace, Entity: counter, IfMatch: etag})
		}
		err := withTable(ctx, s.table, func() error { return submitTransaction(ctx, s.table, actions) })
		switch tableCode(err) {
		case "":
			if err != nil {
				return 0, classify(err, "allocate seqs of "+s.noun+" "+key)
			}
			return last + 1, nil
		case aztables.EntityAlreadyExists, aztables.UpdateConditionNotSatisfied:
			continue // another ledger (or this one, elsewhere) allocated first: read again
		default:
			return 0, classify(err, "allocate seqs of "+s.noun+" "+key)
		}
	}
	return 0, fault.Errorf(fault.Unavailable, "allocate seqs of %s %q: too much contention", s.noun, key)
}

var _ convoy.ActiveIndex = (*Ledgers)(nil)

// seqRowKey is the key of the seq row of an allocation starting at first:
// inverted, so that the rows of the allocations starting at or before a seq
// come first, the latest of them leading.
func seqRowKey(first int64) string { return fmt.Sprintf("seq:%019d", math.MaxInt64-first) }

// recentAllocations is how many allocations the counter keeps: a ledger
// each, so a seq waiting behind fewer ledgers than that (nearly any) is
// found in the counter.
const recentAllocations = 32

// allocation is one of the counter's recent allocations (JSON, compact).
type allocation struct {
	First int64 `json:"f"`
	Count int64 `json:"c"`
	At    int64 `json:"t"` // Unix milliseconds
}

func decodeRecent(s string) []allocation {
	var out []allocation
	if s != "" && json.Unmarshal([]byte(s), &out) != nil {
		return nil // figures only: an unreadable list is an empty one
	}
	return out
}

func encodeRecent(a []allocation) string {
	b, _ := json.Marshal(a)
	return string(b)
}

// Published implements convoy.Allocations: one point read of the counter,
// which holds the recent allocations; a seq allocated before them costs one
// query of one seq row more, whatever the key's history. When seq was
// allocated is the allocating publisher's clock (an allocation's At; seq
// rows written before it was kept: their Timestamp, the service's).
func (s *Ledgers) Published(ctx context.Context, key string, seq int64) (convoy.Published, error) {
	resp, err := s.table.GetEntity(ctx, s.partition(key), "counter", nil)
	switch {
	case isAbsent(err):
		return convoy.Published{}, nil // nothing published to it: convoy.PublishedTo reads its entry
	case err != nil:
		return convoy.Published{}, classify(err, "read the seqs published to "+s.noun+" "+key)
	}
	_, p, err := decodeProps(resp.Value)
	if err != nil {
		return convoy.Published{}, fault.Wrap(fault.Internal, err, "decode the seqs published to "+s.noun+" "+key)
	}
	out := convoy.Published{LastSeq: p.int("Last"), DeadLetteredSeq: p.int("DeadLetteredSeq")}
	if seq < 1 || seq > out.LastSeq {
		return out, nil
	}
	for _, a := range decodeRecent(p.str("Recent")) {
		if a.First <= seq && seq < a.First+a.Count {
			out.SeqAllocatedAt = time.UnixMilli(a.At).UTC()
			return out, nil
		}
	}
	at, found, err := s.seqAllocatedAt(ctx, key, seq)
	switch {
	case err != nil:
		return convoy.Published{}, err
	case found:
		out.SeqAllocatedAt = at
		return out, nil
	}
	legacy, err := s.publishedLegacy(ctx, key, seq) // allocated before seq rows were kept
	legacy.LastSeq, legacy.DeadLetteredSeq = out.LastSeq, out.DeadLetteredSeq
	return legacy, err
}

// ActiveEntry implements convoy.Allocations: one point read.
func (s *Ledgers) ActiveEntry(ctx context.Context, key string) (convoy.ActiveOrder, bool, error) {
	resp, err := s.table.GetEntity(ctx, s.active, key, nil)
	switch {
	case isAbsent(err):
		return convoy.ActiveOrder{}, false, nil
	case err != nil:
		return convoy.ActiveOrder{}, false, classify(err, "read the active entry of "+s.noun+" "+key)
	}
	_, p, err := decodeProps(resp.Value)
	if err != nil {
		return convoy.ActiveOrder{}, false, fault.Wrap(fault.Internal, err, "decode the active entry of "+s.noun+" "+key)
	}
	return convoy.ActiveOrder{OrderID: key, SeenSeq: p.int("SeenSeq"), SeenAt: p.time("SeenAt"), DeadLetteredSeq: p.int("DeadLetteredSeq")}, true, nil
}

// seqAllocatedAt finds seq's allocation among the seq rows: one query,
// whose first row is the latest allocation starting at or before seq.
func (s *Ledgers) seqAllocatedAt(ctx context.Context, key string, seq int64) (time.Time, bool, error) {
	filter := fmt.Sprintf("PartitionKey eq '%s' and RowKey ge '%s' and RowKey lt 'seq;'", escape(s.partition(key)), seqRowKey(seq))
	sel := "RowKey,Timestamp,First,Count,At"
	top := int32(1)
	pager := s.table.NewListEntitiesPager(&aztables.ListEntitiesOptions{Filter: &filter, Select: &sel, Top: &top})
	for pager.More() { // an empty page with a continuation is possible
		page, err := pager.NextPage(ctx)
		if err != nil {
			return time.Time{}, false, classify(err, "read the seqs published to "+s.noun+" "+key)
		}
		for _, raw := range page.Entities {
			e, p, err := decodeProps(raw)
			if err != nil {
				return time.Time{}, false, fault.Wrap(fault.Internal, err, "decode the seqs published to "+s.noun+" "+key)
			}
			if first := p.int("First"); first > seq || seq >= first+p.int("Count") {
				return time.Time{}, false, nil
			}
			if at := p.time("At"); !at.IsZero() {
				return at, true, nil
			}
			return time.Time(e.Timestamp).UTC(), true, nil
		}
	}
	return time.Time{}, false, nil
}

// publishedLegacy is Published from the alloc rows: one query of the
// key's partition, one page per 1,000 ledgers that published to it.
func (s *Ledgers) publishedLegacy(ctx context.Context, key string, seq int64) (convoy.Published, error) {
	filter := fmt.Sprintf("PartitionKey eq '%s' and RowKey ge 'alloc:' and RowKey lt 'alloc;'", escape(s.partition(key)))
	sel := "RowKey,Timestamp,First,Count"
	pager := s.table.NewListEntitiesPager(&aztables.ListEntitiesOptions{Filter: &filter, Select: &sel})
	out := convoy.Published{}
	for pager.More() {
		page, err := pager.NextPage(ctx)
		if err != nil {
			return convoy.Published{}, classify(err, "read the seqs published to "+s.noun+" "+key)
		}
		for _, raw := range page.Entities {
			e, p, err := decodeProps(raw)
			if err != nil {
				return convoy.Published{}, fault.Wrap(fault.Internal, err, "decode the seqs published to "+s.noun+" "+key)
			}
			first := p.int("First")
			out.LastSeq = max(out.LastSeq, first+p.int("Count")-1)
			if first <= seq && seq < first+p.int("Count") {
				out.SeqAllocatedAt = time.Time(e.Timestamp).UTC()
			}
		}
	}
	return out, nil
}

func decodeProps(raw []byte) (aztables.EDMEntity, props, error) {
	var e aztables.EDMEntity
	if err := json.Unmarshal(raw, &e); err != nil {
		return e, nil, err
	}
	return e, props(e.Properties), nil
}

// Activate implements ledger.Allocator: the keys' entries written (replaced:
// a new ETag, so that a survey that read the old one removes nothing), up
// to 100 in an entity-group transaction.
func (s *Ledgers) Activate(ctx context.Context, keys []string) error {
	for len(keys) > 0 {
		n := min(maxGroupOps, len(keys))
		actions := make([]aztables.TransactionAction, 0, n)
		for _, id := range keys[:n] {
			e, _ := json.Marshal(aztables.EDMEntity{Entity: aztables.Entity{PartitionKey: s.active, RowKey: id}})
			actions = append(actions, aztables.TransactionAction{ActionType: aztables.TransactionTypeInsertReplace, Entity: e})
		}
		keys = keys[n:]
		if err := withTable(ctx, s.table, func() error { return submitTransaction(ctx, s.table, actions) }); err != nil {
			return classifyOrNil(err, "index active "+s.noun+"s")
		}
	}
	return nil
}

// ScanActive implements convoy.ActiveIndex: one query.
func (s *Ledgers) ScanActive(ctx context.Context, after string, limit int) ([]convoy.ActiveOrder, bool, error) {
	filter := fmt.Sprintf("PartitionKey eq '%s' and RowKey gt '%s'", s.active, escape(after))
	top := int32(min(max(limit, 1), maxPageSize))
	pager := s.table.NewListEntitiesPager(&aztables.ListEntitiesOptions{Filter: &filter, Top: &top})
	if !pager.More() {
		return nil, false, nil
	}
	page, err := pager.NextPage(ctx)
	switch {
	case tableAbsent(err):
		return nil, false, nil
	case err != nil:
		return nil, false, classify(err, "list active "+s.noun+"s")
	}
	out := make([]convoy.ActiveOrder, 0, len(page.Entities))
	for _, raw := range page.Entities {
		e, _, err := decodeProps(raw)
		if err != nil {
			return nil, false, fault.Wrap(fault.Internal, err, "decode an active "+s.noun)
		}
		p := props(e.Properties)
		out = append(out, convoy.ActiveOrder{OrderID: e.RowKey, PublishedAt: time.Time(e.Timestamp).UTC(), ETag: e.ETag,
			SeenSeq: p.int("SeenSeq"), SeenAt: p.time("SeenAt"), DeadLetteredSeq: p.int("DeadLetteredSeq")})
	}
	return out, page.NextRowKey != nil, nil
}

// NoteDeadLettered implements convoy.ActiveIndex: a merge into the key's
// counter (Allocate keeps it); for a key without one (nothing was
// published to it), a second merge, into its active entry (where the
// processor's SeenSeq is). Neither creates a row.
func (s *Ledgers) NoteDeadLettered(ctx context.Context, key string, seq int64) error {
	note := map[string]any{"DeadLetteredSeq": aztables.EDMInt64(seq)}
	found, err := s.mergeIfExists(ctx, s.partition(key), "counter", note)
	if err == nil && !found {
		_, err = s.mergeIfExists(ctx, s.active, key, note)
	}
	return classifyOrNil(err, "note the dead-lettered seq of "+s.noun+" "+key)
}

// mergeIfExists merges props into an existing row; found false if there is none.
func (s *Ledgers) mergeIfExists(ctx context.Context, pk, rk string, props map[string]any) (bool, error) {
	e, _ := json.Marshal(aztables.EDMEntity{Entity: aztables.Entity{PartitionKey: pk, RowKey: rk}, Properties: props})
	exists := azcore.ETagAny
	_, err := s.table.UpdateEntity(ctx, e, &aztables.UpdateEntityOptions{UpdateMode: aztables.UpdateModeMerge, IfMatch: &exists})
	if isAbsent(err) {
		return false, nil
	}
	return err == nil, err
}

// MarkActive implements convoy.ActiveMarker: one upsert (merge) of the
// key's entry with what the processor saw. A publisher's Activate
// replaces it (the counter then tells what was published).
func (s *Ledgers) MarkActive(ctx context.Context, key string, seen convoy.Seen) error {
	e, _ := json.Marshal(aztables.EDMEntity{Entity: aztables.Entity{PartitionKey: s.active, RowKey: key},
		Properties: map[string]any{"SeenSeq": aztables.EDMInt64(seen.Seq), "SeenAt": aztables.EDMDateTime(seen.At.UTC())}})
	err := withTable(ctx, s.table, func() error {
		_, err := s.table.UpsertEntity(ctx, e, &aztables.UpsertEntityOptions{UpdateMode: aztables.UpdateModeMerge})
		return err
	})
	return classifyOrNil(err, "index "+s.noun+" "+key+" as active")
}

// Deactivate implements convoy.ActiveIndex: a delete under the entry's ETag.
func (s *Ledgers) Deactivate(ctx context.Context, e convoy.ActiveOrder) error {
	if e.ETag == "" {
		return fault.Errorf(fault.Internal, "deactivate %s %q: no ETag (an entry is removed only as it was read)", s.noun, e.OrderID)
	}
	return deleteAsRead(ctx, s.table, s.active, e.OrderID, e.ETag, "deactivate "+s.noun+" "+e.OrderID)
}
