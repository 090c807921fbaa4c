// Package memstore is an in-memory convoy.Store for tests and benchmarks. It
// enforces the same contract as tablestore (compare-and-swap on the version,
// atomic commits, the record limit) and passes the same conformance suite.
package memstore

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"sync"

	"github.com/convoy-dev/convoy/handler/convoy"
	"github.com/convoy-dev/convoy/handler/fault"
	"github.com/convoy-dev/convoy/handler/heal"
)

// Store keeps orders in a map.
type Store struct {
	mu      sync.Mutex
	orders  map[string]*convoy.Order
	blocked map[string]convoy.BlockedEntry // the blocked index, by key
	// health is the heal.Health record; healthTag its ETag (0: none yet).
	health    heal.Health
	healthTag int64
	replay    map[string]replayState // automatic replay states, by order
	tags      int64
	// Fail, if set, is called before every operation ("load", "commit", "index"); a
	// non-nil error is returned instead of doing it (fault injection).
	Fail func(op, orderID string) error
	// LoseReply, if set, is called after every successful commit; true makes
	// Commit report a transient error although the commit took place, as when
	// the reply is lost or the process dies right after the write.
	LoseReply func(orderID string) bool
}

// ErrReplyLost is what Commit returns when LoseReply fires.
var ErrReplyLost = fault.Errorf(fault.Unavailable, "reply lost after the commit took place")

var _ convoy.Store = (*Store)(nil)

// New returns an empty Store.
func New() *Store { return &Store{orders: map[string]*convoy.Order{}} }

// Load implements convoy.Store.
func (s *Store) Load(_ context.Context, orderID string) (*convoy.Order, error) {
	if err := s.fail("load", orderID); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if o, ok := s.orders[orderID]; ok {
		return o.Clone(), nil
	}
	return convoy.NewOrder(orderID), nil
}

// Commit implements convoy.Store.
func (s *Store) Commit(_ context.Context, o *convoy.Order, base int64, c *convoy.Change) error {
	if err := s.fail("commit", o.ID); err != nil {
		return err
	}
	if n := c.Records(); n > convoy.MaxChangeRecords {
		return fault.Errorf(fault.Internal, "change touches %d records, more than %d", n, convoy.MaxChangeRecords)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	cur, ok := s.orders[o.ID]
	if !ok {
		cur = convoy.NewOrder(o.ID)
	}
	if cur.Version != base {
		return fmt.Errorf("order %q is at version %d, not %d: %w", o.ID, cur.Version, base, convoy.ErrConflict)
	}
	next := cur.Clone()
	for seq := range c.Unpark {
		if _, ok := next.Parked[seq]; !ok {
			return fmt.Errorf("order %q has no parked seq %d: %w", o.ID, seq, convoy.ErrConflict)
		}
		delete(next.Parked, seq)
	}
	for seq, m := range c.Park {
		next.Parked[seq] = m
	}
	for _, i := range slices.Sorted(maps.Keys(c.Tx)) {
		t := c.Tx[i]
		switch {
		case i < len(next.Transactions):
			next.Transactions[i] = t
		case i == len(next.Transactions):
			next.Transactions = append(next.Transactions, t)
		default:
			return fault.Errorf(fault.Internal, "order %q: transaction %d written before %d", o.ID, i, len(next.Transactions))
		}
	}
	next.Rejected = append(next.Rejected, c.Rejections...)
	slices.SortFunc(next.Rejected, func(a, b convoy.Rejection) int { return int(a.Seq - b.Seq) })
	next.Status, next.Complete, next.Currency, next.Data = o.Status, o.Complete, o.Currency, o.Data
	next.AppliedSeq, next.BlockedSince, next.UpdatedAt = o.AppliedSeq, o.BlockedSince, o.UpdatedAt
	next.Version = base + 1
	s.orders[o.ID] = next
	if s.LoseReply != nil && s.LoseReply(o.ID) {
		return ErrReplyLost
	}
	return nil
}

func (s *Store) fail(op, orderID string) error {
	if s.Fail == nil {
		return nil
	}
	return s.Fail(op, orderID)
}
