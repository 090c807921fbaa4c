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

// Ledgers is an in-memory ledger.Store for tests; it passes ledgertest.Run.
type Ledgers struct {
	mu      sync.Mutex
	records map[string]ledger.Record
	next    map[string]int64                 // order → next seq
	allocs  map[string]map[string]allocation // order → ledger → its seqs
	active  map[string]convoy.ActiveOrder    // the active-orders index
	// activeIDs are active's ids sorted, nil when they changed since.
	activeIDs []string
	dead      map[string]int64 // order → its noted dead-lettered seq
	version   int
	// Fail, if set, is called before every operation ("get", "create",
	// "save", "allocate", "activate", "scan", "deactivate", "note",
	// "published", "mark"); a non-nil error is returned instead.
	Fail func(op string) error
	// Now, if set, is the clock of allocations and index entries.
	Now func() time.Time
}

var (
	_ ledger.Store       = (*Ledgers)(nil)
	_ convoy.ActiveIndex = (*Ledgers)(nil)
)

type allocation struct {
	first int64
	count int
	hash  string
	at    time.Time
}

// NewLedgers returns an empty Ledgers.
func NewLedgers() *Ledgers {
	return &Ledgers{records: map[string]ledger.Record{}, next: map[string]int64{}, allocs: map[string]map[string]allocation{}}
}

func (s *Ledgers) now() time.Time {
	if s.Now != nil {
		return s.Now().UTC()
	}
	return time.Now().UTC()
}

func (s *Ledgers) fail(op string) error {
	if s.Fail == nil {
		return nil
	}
	return s.Fail(op)
}

// GetLedger implements ledger.Store.
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
	r.Problems = slices.Clone(r.Problems)
	return &r, nil
}

// CreateLedger implements ledger.Store.
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
func (s *Ledgers) store(r *ledger.Record) {
	s.version++
	r.ETag = strconv.Itoa(s.version)
	c := *r
	c.Problems = slices.Clone(r.Problems)
	s.records[r.ID] = c
}

// SaveLedger implements ledger.Store.
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

// Allocate implements ledger.Store.
func (s *Ledgers) Allocate(_ context.Context, ledgerID, hash, orderID string, count int) (int64, error) {
	if err := s.fail("allocate"); err != nil {
		return 0, err
	}
	if err := allocationGroup(ledgerID, hash, orderID).check(); err != nil {
		return 0, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if a, ok := s.allocs[orderID][ledgerID]; ok {
		if !ledger.SameAllocation(count, hash, a.count, a.hash) {
			return 0, ledger.AllocationMismatch(ledgerID, orderID, count, hash, a.count, a.hash)
		}
		return a.first, nil
	}
	first := s.next[orderID] + 1
	s.next[orderID] += int64(count)
	if s.allocs[orderID] == nil {
		s.allocs[orderID] = map[string]allocation{}
	}
	s.allocs[orderID][ledgerID] = allocation{first, count, hash, s.now()}
	return first, nil
}

// Activate implements ledger.Store.
func (s *Ledgers) Activate(_ context.Context, orderIDs []string) error {
	if err := s.fail("activate"); err != nil {
		return err
	}
	for _, id := range orderIDs { // tablestore writes them 100 to a transaction
		if err := activeEntity(id).check(); err != nil {
			return err
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.active == nil {
		s.active = map[string]convoy.ActiveOrder{}
	}
	for _, id := range orderIDs {
		s.version++
		if _, ok := s.active[id]; !ok {
			s.activeIDs = nil
		}
		s.active[id] = convoy.ActiveOrder{OrderID: id, PublishedAt: s.now(), ETag: strconv.Itoa(s.version)}
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
	if s.activeIDs == nil {
		s.activeIDs = slices.Sorted(maps.Keys(s.active))
	}
	ids := s.activeIDs[afterKey(s.activeIDs, after):]
	more := len(ids) > limit
	var out []convoy.ActiveOrder
	for _, id := range ids[:min(limit, len(ids))] {
		out = append(out, s.active[id])
	}
	return out, more, nil
}

// ActiveEntry implements convoy.Allocations.
func (s *Ledgers) ActiveEntry(_ context.Context, orderID string) (convoy.ActiveOrder, bool, error) {
	if err := s.fail("active entry"); err != nil {
		return convoy.ActiveOrder{}, false, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	e, ok := s.active[orderID]
	return e, ok, nil
}

// Deactivate implements convoy.ActiveIndex.
func (s *Ledgers) Deactivate(_ context.Context, e convoy.ActiveOrder) error {
	if err := s.fail("deactivate"); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if cur, ok := s.active[e.OrderID]; ok && cur.ETag == e.ETag {
		delete(s.active, e.OrderID)
		s.activeIDs = nil
	}
	return nil
}

// MarkActive implements convoy.ActiveMarker.
func (s *Ledgers) MarkActive(_ context.Context, orderID string, seen convoy.Seen) error {
	if err := s.fail("mark"); err != nil {
		return err
	}
	if err := activeEntity(orderID).check(); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.active == nil {
		s.active = map[string]convoy.ActiveOrder{}
	}
	e, ok := s.active[orderID] // merged: a dead-lettered seq noted in it stays
	if !ok {
		s.activeIDs = nil
	}
	s.version++
	e.OrderID, e.PublishedAt, e.ETag, e.SeenSeq, e.SeenAt = orderID, s.now(), strconv.Itoa(s.version), seen.Seq, seen.At.UTC()
	s.active[orderID] = e
	return nil
}

// NoteDeadLettered implements convoy.ActiveIndex.
func (s *Ledgers) NoteDeadLettered(_ context.Context, orderID string, seq int64) error {
	if err := s.fail("note"); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.next[orderID]; !ok {
		if e, ok := s.active[orderID]; ok { // nothing published to it: noted in its entry
			s.version++
			e.DeadLetteredSeq, e.ETag = seq, strconv.Itoa(s.version)
			s.active[orderID] = e
		}
		return nil
	}
	if s.dead == nil {
		s.dead = map[string]int64{}
	}
	s.dead[orderID] = seq
	return nil
}

// Published implements convoy.Allocations.
func (s *Ledgers) Published(_ context.Context, orderID string, seq int64) (convoy.Published, error) {
	if err := s.fail("published"); err != nil {
		return convoy.Published{}, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.next[orderID]; !ok { // nothing published to it: convoy.PublishedTo reads its entry
		return convoy.Published{}, nil
	}
	out := convoy.Published{LastSeq: s.next[orderID], DeadLetteredSeq: s.dead[orderID]}
	for _, a := range s.allocs[orderID] {
		if a.first <= seq && seq < a.first+int64(a.count) {
			out.SeqAllocatedAt = a.at
		}
	}
	return out, nil
}
