package memstore

import (
	"context"
	"maps"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/convoy-dev/convoy/handler/convoy"
	"github.com/convoy-dev/convoy/handler/ledger"
)

// Ledgers is an in-memory ledger.Store for tests, as tablestore.Ledgers is
// on one table; it passes ledgertest.Run. Its records are one per ledger;
// its seq counters and active index are those of one domain's keys, the
// order domain's, and Keys gives another domain's, sharing the records.
type Ledgers struct {
	*ledgerTable
	noun string
	keys *keyScope
}

// ledgerTable is what the scopes of one Ledgers share.
type ledgerTable struct {
	mu      sync.Mutex
	records map[string]ledger.Record
	scopes  map[string]*keyScope // by noun
	version int
	// Fail, if set, is called before every operation ("get", "create",
	// "save", "allocate", "activate", "scan", "deactivate", "note",
	// "published", "mark"), whatever the scope; a non-nil error is
	// returned instead.
	Fail func(op string) error
	// Now, if set, is the clock of allocations and index entries.
	Now func() time.Time
}

// keyScope is one domain's counters and active index.
type keyScope struct {
	next   map[string]int64              // key → its last seq
	allocs map[string][]allocation       // key → its ledgers' seqs
	active map[string]convoy.ActiveOrder // the active index
	// activeIDs are active's ids sorted, nil when they changed since.
	activeIDs []string
	dead      map[string]int64 // key → its noted dead-lettered seq
}

var (
	_ ledger.Store       = (*Ledgers)(nil)
	_ convoy.ActiveIndex = (*Ledgers)(nil)
)

type allocation struct {
	ledger string
	first  int64
	count  int
	hash   string
	at     time.Time
}

// NewLedgers returns an empty Ledgers, scoped to the order domain's keys.
func NewLedgers() *Ledgers {
	t := &ledgerTable{records: map[string]ledger.Record{}, scopes: map[string]*keyScope{}}
	return t.scope("order")
}

// Keys returns the Ledgers of the keys of the domain whose Noun is noun,
// on the same records (tablestore.Ledgers.Keys).
func (s *Ledgers) Keys(noun string) *Ledgers { return s.scope(noun) }

func (t *ledgerTable) scope(noun string) *Ledgers {
	t.mu.Lock()
	defer t.mu.Unlock()
	k := t.scopes[noun]
	if k == nil {
		k = &keyScope{next: map[string]int64{}, allocs: map[string][]allocation{}, active: map[string]convoy.ActiveOrder{}, dead: map[string]int64{}}
		t.scopes[noun] = k
	}
	return &Ledgers{ledgerTable: t, noun: noun, keys: k}
}

// partition is a key's partition ("order:o-1"), activePartition the
// domain's active index (tablestore's layout, whose limits the rows are
// checked against).
func (s *Ledgers) partition(key string) string { return s.noun + ":" + key }

func (s *Ledgers) activePartition() string {
	if s.noun == "order" {
		return "active"
	}
	return "active:" + s.noun
}

func (t *ledgerTable) now() time.Time {
	if t.Now != nil {
		return t.Now().UTC()
	}
	return time.Now().UTC()
}

func (t *ledgerTable) fail(op string) error {
	if t.Fail == nil {
		return nil
	}
	return t.Fail(op)
}

// GetLedger implements ledger.Records.
func (s *Ledgers) GetLedger(_ context.Context, id string) (*ledger.Record, error) {
	if err := s.fail("get"); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	r, ok := s.records[id]
	if !ok {
		return nil, nil
	}
	r.Problems, r.Keys = slices.Clone(r.Problems), maps.Clone(r.Keys)
	return &r, nil
}

// CreateLedger implements ledger.Records.
func (s *Ledgers) CreateLedger(_ context.Context, r *ledger.Record) error {
	if err := s.fail("create"); err != nil {
		return err
	}
	if err := ledgerEntity(r.ID, r.Hash, string(r.Status)).check(); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.records[r.ID]; ok {
		return ledger.ErrLedgerExists
	}
	s.store(r)
	return nil
}

// store keeps r under a new version; the caller holds mu.
func (t *ledgerTable) store(r *ledger.Record) {
	t.version++
	r.ETag = strconv.Itoa(t.version)
	c := *r
	c.Problems, c.Keys = slices.Clone(r.Problems), maps.Clone(r.Keys)
	t.records[r.ID] = c
}

// SaveLedger implements ledger.Records.
func (s *Ledgers) SaveLedger(_ context.Context, r *ledger.Record) error {
	if err := s.fail("save"); err != nil {
		return err
	}
	if err := ledgerEntity(r.ID, r.Hash, string(r.Status)).check(); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if cur, ok := s.records[r.ID]; !ok || cur.ETag != r.ETag {
		return ledger.ErrLedgerChanged
	}
	s.store(r)
	return nil
}

// Allocate implements ledger.Allocator.
func (s *Ledgers) Allocate(_ context.Context, ledgerID, hash, key string, count int) (int64, error) {
	if err := s.fail("allocate"); err != nil {
		return 0, err
	}
	if err := allocationGroup(ledgerID, hash, s.partition(key)).check(); err != nil {
		return 0, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	k := s.keys
	for _, a := range k.allocs[key] {
		if a.ledger != ledgerID {
			continue
		}
		if !ledger.SameAllocation(count, hash, a.count, a.hash) {
			return 0, ledger.AllocationMismatch(s.noun, ledgerID, key, count, hash, a.count, a.hash)
		}
		return a.first, nil
	}
	first := k.next[key] + 1
	k.next[key] += int64(count)
	k.allocs[key] = append(k.allocs[key], allocation{ledgerID, first, count, hash, s.now()})
	return first, nil
}

// Activate implements ledger.Allocator.
func (s *Ledgers) Activate(_ context.Context, keys []string) error {
	if err := s.fail("activate"); err != nil {
		return err
	}
	for _, id := range keys { // tablestore writes them 100 to a transaction
		if err := activeEntity(s.activePartition(), id).check(); err != nil {
			return err
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, id := range keys {
		s.version++
		if _, ok := s.keys.active[id]; !ok {
			s.keys.activeIDs = nil
		}
		s.keys.active[id] = convoy.ActiveOrder{OrderID: id, PublishedAt: s.now(), ETag: strconv.Itoa(s.version)}
	}
	return nil
}

// ScanActive implements convoy.ActiveIndex: the ids are kept sorted
// between changes of the index, so that a page costs what it holds.
func (s *Ledgers) ScanActive(_ context.Context, after string, limit int) ([]convoy.ActiveOrder, bool, error) {
	if err := s.fail("scan"); err != nil {
		return nil, false, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	k := s.keys
	if k.activeIDs == nil {
		k.activeIDs = slices.Sorted(maps.Keys(k.active))
	}
	ids := k.activeIDs[afterKey(k.activeIDs, after):]
	more := len(ids) > limit
	var out []convoy.ActiveOrder
	for _, id := range ids[:min(limit, len(ids))] {
		out = append(out, k.active[id])
	}
	return out, more, nil
}

// ActiveEntry implements convoy.Allocations.
func (s *Ledgers) ActiveEntry(_ context.Context, key string) (convoy.ActiveOrder, bool, error) {
	if err := s.fail("active entry"); err != nil {
		return convoy.ActiveOrder{}, false, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	e, ok := s.keys.active[key]
	return e, ok, nil
}

// Deactivate implements convoy.ActiveIndex.
func (s *Ledgers) Deactivate(_ context.Context, e convoy.ActiveOrder) error {
	if err := s.fail("deactivate"); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if cur, ok := s.keys.active[e.OrderID]; ok && cur.ETag == e.ETag {
		delete(s.keys.active, e.OrderID)
		s.keys.activeIDs = nil
	}
	return nil
}

// MarkActive implements convoy.ActiveMarker.
func (s *Ledgers) MarkActive(_ context.Context, key string, seen convoy.Seen) error {
	if err := s.fail("mark"); err != nil {
		return err
	}
	if err := activeEntity(s.activePartition(), key).check(); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	e, ok := s.keys.active[key] // merged: a dead-lettered seq noted in it stays
	if !ok {
		s.keys.activeIDs = nil
	}
	s.version++
	e.OrderID, e.PublishedAt, e.ETag, e.SeenSeq, e.SeenAt = key, s.now(), strconv.Itoa(s.version), seen.Seq, seen.At.UTC()
	s.keys.active[key] = e
	return nil
}

// NoteDeadLettered implements convoy.ActiveIndex.
func (s *Ledgers) NoteDeadLettered(_ context.Context, key string, seq int64) error {
	if err := s.fail("note"); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	k := s.keys
	if _, ok := k.next[key]; !ok {
		if e, ok := k.active[key]; ok { // nothing published to it: noted in its entry
			s.version++
			e.DeadLetteredSeq, e.ETag = seq, strconv.Itoa(s.version)
			k.active[key] = e
		}
		return nil
	}
	k.dead[key] = seq
	return nil
}

// Published implements convoy.Allocations.
func (s *Ledgers) Published(_ context.Context, key string, seq int64) (convoy.Published, error) {
	if err := s.fail("published"); err != nil {
		return convoy.Published{}, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	k := s.keys
	if _, ok := k.next[key]; !ok { // nothing published to it: convoy.PublishedTo reads its entry
		return convoy.Published{}, nil
	}
	out := convoy.Published{LastSeq: k.next[key], DeadLetteredSeq: k.dead[key]}
	for _, a := range k.allocs[key] {
		if a.first <= seq && seq < a.first+int64(a.count) {
			out.SeqAllocatedAt = a.at
		}
	}
	return out, nil
}
