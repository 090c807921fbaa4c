package memstore

import (
	"context"
	"slices"
	"strconv"
	"sync"

	"github.com/convoy-dev/convoy/handler/ledger"
)

// Ledgers is an in-memory ledger.Store for tests; it passes ledgertest.Run.
type Ledgers struct {
	mu      sync.Mutex
	records map[string]ledger.Record
	next    map[string]int64                 // order → next seq
	allocs  map[string]map[string]allocation // order → ledger → its seqs
	version int
	// Fail, if set, is called before every operation ("get", "create",
	// "save", "allocate"); a non-nil error is returned instead.
	Fail func(op string) error
}

var _ ledger.Store = (*Ledgers)(nil)

type allocation struct {
	first int64
	count int
	hash  string
}

// NewLedgers returns an empty Ledgers.
func NewLedgers() *Ledgers {
	return &Ledgers{records: map[string]ledger.Record{}, next: map[string]int64{}, allocs: map[string]map[string]allocation{}}
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
	s.allocs[orderID][ledgerID] = allocation{first, count, hash}
	return first, nil
}
