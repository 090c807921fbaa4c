package memstore

import (
	"context"
	"slices"
	"sync"

	"github.com/convoy-dev/convoy/handler/ledger"
)

// Ledgers is an in-memory ledger.Store for tests; it passes ledgertest.Run.
type Ledgers struct {
	mu      sync.Mutex
	records map[string]ledger.Record
	next    map[string]int64            // order → next seq
	allocs  map[string]map[string]int64 // order → ledger → first seq
	// Fail, if set, is called before every operation ("get", "create",
	// "save", "allocate"); a non-nil error is returned instead.
	Fail func(op string) error
}

var _ ledger.Store = (*Ledgers)(nil)

// NewLedgers returns an empty Ledgers.
func NewLedgers() *Ledgers {
	return &Ledgers{records: map[string]ledger.Record{}, next: map[string]int64{}, allocs: map[string]map[string]int64{}}
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
	s.records[r.ID] = *r
	return nil
}

// SaveLedger implements ledger.Store.
func (s *Ledgers) SaveLedger(_ context.Context, r *ledger.Record) error {
	if err := s.fail("save"); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.records[r.ID] = *r
	return nil
}

// Allocate implements ledger.Store.
func (s *Ledgers) Allocate(_ context.Context, ledgerID, orderID string, count int) (int64, error) {
	if err := s.fail("allocate"); err != nil {
		return 0, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if first, ok := s.allocs[orderID][ledgerID]; ok {
		return first, nil
	}
	first := s.next[orderID] + 1
	s.next[orderID] += int64(count)
	if s.allocs[orderID] == nil {
		s.allocs[orderID] = map[string]int64{}
	}
	s.allocs[orderID][ledgerID] = first
	return first, nil
}
