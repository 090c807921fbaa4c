// Package memstore is an in-memory convoy.Store for tests and benchmarks. It
// enforces the same contract as tablestore (compare-and-swap on the version,
// atomic commits, the record limit) and passes the same conformance suite.
package memstore

import (
	"cmp"
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
	orders  map[string]*convoy.Order       // heads and parked messages
	history map[string]*history            // transactions and rejections, by order
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

var _ convoy.History = (*Store)(nil)

// history is an order's transactions, in the order added, and rejections.
type history struct {
	txs      []convoy.TxEntry
	byTxID   map[string]int // position in txs
	rejected []convoy.Rejection
}

// New returns an empty Store.
func New() *Store {
	return &Store{orders: map[string]*convoy.Order{}, history: map[string]*history{}}
}

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

// Tx implements convoy.Store.
func (s *Store) Tx(_ context.Context, orderID, txID string) (convoy.TxRecord, bool, error) {
	if err := s.fail("tx", orderID); err != nil {
		return convoy.TxRecord{}, false, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	h, ok := s.history[orderID]
	if !ok {
		return convoy.TxRecord{}, false, nil
	}
	i, ok := h.byTxID[txID]
	if !ok {
		return convoy.TxRecord{}, false, nil
	}
	return convoy.TxRecord{Position: int64(i), TxEntry: h.txs[i]}, true, nil
}

// Transactions implements convoy.History.
func (s *Store) Transactions(_ context.Context, orderID string, from int64, limit int) ([]convoy.TxEntry, bool, error) {
	if err := s.fail("history", orderID); err != nil {
		return nil, false, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	h, ok := s.history[orderID]
	if !ok || from >= int64(len(h.txs)) {
		return []convoy.TxEntry{}, false, nil
	}
	end := min(int64(len(h.txs)), from+int64(limit))
	return slices.Clone(h.txs[from:end]), end < int64(len(h.txs)), nil
}

// Rejections implements convoy.History.
func (s *Store) Rejections(_ context.Context, orderID string, from int64, limit int) ([]convoy.Rejection, bool, error) {
	if err := s.fail("history", orderID); err != nil {
		return nil, false, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	h, ok := s.history[orderID]
	if !ok {
		return []convoy.Rejection{}, false, nil
	}
	i, _ := slices.BinarySearchFunc(h.rejected, from, func(r convoy.Rejection, seq int64) int { return cmp.Compare(r.Seq, seq) })
	end := min(len(h.rejected), i+limit)
	return slices.Clone(h.rejected[i:end]), end < len(h.rejected), nil
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
	h := s.history[o.ID]
	if h == nil {
		h = &history{byTxID: map[string]int{}}
	}
	// Checked before anything changes: a failed commit writes nothing.
	txs := slices.SortedFunc(maps.Values(c.Tx), func(a, b convoy.TxWrite) int { return cmp.Compare(a.Position, b.Position) })
	added := int64(len(h.txs))
	for _, w := range txs {
		i, exists := h.byTxID[w.TxID]
		switch {
		case w.Added && exists:
			return fmt.Errorf("order %q has transaction %q already: %w", o.ID, w.TxID, convoy.ErrConflict)
		case w.Added && w.Position != added:
			return fmt.Errorf("order %q: transaction %q added at %d, the next position is %d: %w", o.ID, w.TxID, w.Position, added, convoy.ErrConflict)
		case w.Added:
			added++
		case !exists || int64(i) != w.Position:
			return fmt.Errorf("order %q has no transaction %q at %d: %w", o.ID, w.TxID, w.Position, convoy.ErrConflict)
		}
	}
	for _, w := range txs {
		if w.Added {
			h.byTxID[w.TxID] = len(h.txs)
			h.txs = append(h.txs, w.TxEntry)
			continue
		}
		t := &h.txs[w.Position]
		t.Amount = w.Amount
		if w.Data != nil {
			t.Data = w.Data
		}
	}
	h.rejected = append(h.rejected, c.Rejections...)
	slices.SortFunc(h.rejected, func(a, b convoy.Rejection) int { return cmp.Compare(a.Seq, b.Seq) })
	s.history[o.ID] = h
	next.Status, next.Complete, next.Currency, next.Data = o.Status, o.Complete, o.Currency, o.Data
	next.AppliedSeq, next.BlockedSince, next.UpdatedAt, next.AppliedAt = o.AppliedSeq, o.BlockedSince, o.UpdatedAt, o.AppliedAt
	next.TotalAmount, next.TxCount, next.Crit = o.TotalAmount, o.TxCount, o.Crit.Clone()
	next.Forget()
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
