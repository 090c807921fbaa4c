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
	"github.com/convoy-dev/convoy/handler/keyed"
)

// Store keeps orders in a map.
type Store struct {
	mu      sync.Mutex
	orders  map[string]*convoy.Key         // heads (no parked messages: parked)
	parked  map[string]*parkedSet          // parked messages, by order
	history map[string]*history            // transactions and rejections, by order
	blocked map[string]convoy.BlockedEntry // the blocked index, by key
	// blockedKeys are blocked's keys sorted, nil when they changed since.
	blockedKeys []string
	// health is the heal.Health record; healthTag its ETag (0: none yet).
	health    heal.Health
	healthTag int64
	// trends is the heal.Trends series; trendsTag its ETag (0: none yet).
	trends    heal.Trends
	trendsTag int64
	replay    map[string]replayState // automatic replay states, by order
	tags      int64
	// Fail, if set, is called before every operation ("load", "commit",
	// "parked" for Parked and IsParked, "tx", "history", "index…"); a
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

// history is a key's rows of its domain's collections, by RowKey
// (<collection>:<id>), and its rejections.
type history struct {
	rows     map[string]keyed.Props
	rejected []convoy.Rejection
}

// parkedSet is an order's parked messages, as the rows of a partition: by
// seq, and their seqs in order.
type parkedSet struct {
	msgs map[int64]convoy.Message
	seqs []int64 // ascending
}

// page returns up to limit messages above seq after, and whether more follow.
func (p *parkedSet) page(after int64, limit int) ([]convoy.Message, bool) {
	if p == nil {
		return nil, false
	}
	i, found := slices.BinarySearch(p.seqs, after)
	if found {
		i++
	}
	end := min(len(p.seqs), i+limit)
	out := make([]convoy.Message, 0, end-i)
	for _, seq := range p.seqs[i:end] {
		out = append(out, p.msgs[seq])
	}
	return out, end < len(p.seqs)
}

// New returns an empty Store.
func New() *Store {
	return &Store{orders: map[string]*convoy.Key{}, parked: map[string]*parkedSet{}, history: map[string]*history{}}
}

// Load implements convoy.Store: the head and the first convoy.ParkedLoadSize
// parked messages, as tablestore reads them.
func (s *Store) Load(_ context.Context, orderID string) (*convoy.Key, error) {
	if err := s.fail("load", orderID); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	o, ok := s.orders[orderID]
	if !ok {
		return convoy.NewKey(orderID), nil
	}
	o = unbound(o)
	page, more := s.parked[orderID].page(0, convoy.ParkedLoadSize)
	if err := o.AddParkedPage(page, more, nil); err != nil {
		return nil, fault.Wrap(fault.Internal, err, "load order "+orderID)
	}
	return o, nil
}

// Parked implements convoy.Store.
func (s *Store) Parked(_ context.Context, orderID string, after int64, limit int) ([]convoy.Message, bool, error) {
	if err := s.fail("parked", orderID); err != nil {
		return nil, false, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	page, more := s.parked[orderID].page(after, limit)
	return page, more, nil
}

// IsParked implements convoy.Store.
func (s *Store) IsParked(_ context.Context, orderID string, seq int64) (bool, error) {
	if err := s.fail("parked", orderID); err != nil {
		return false, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	p := s.parked[orderID]
	if p == nil {
		return false, nil
	}
	_, ok := p.msgs[seq]
	return ok, nil
}

// Row implements convoy.Store.
func (s *Store) Row(_ context.Context, orderID string, ref keyed.RowRef) (keyed.Props, bool, error) {
	if err := s.fail("row", orderID); err != nil {
		return nil, false, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	h, ok := s.history[orderID]
	if !ok {
		return nil, false, nil
	}
	p, ok := h.rows[rowKey(ref)]
	return p, ok, nil
}

func rowKey(ref keyed.RowRef) string { return ref.Collection + ":" + ref.ID }

// Rows implements convoy.History: a positional collection's rows are at
// consecutive positions (keyed.Writes.Append), read from from on.
func (s *Store) Rows(_ context.Context, orderID, coll string, from int64, limit int) ([]keyed.Row, bool, error) {
	if err := s.fail("history", orderID); err != nil {
		return nil, false, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	out := []keyed.Row{}
	h, ok := s.history[orderID]
	if !ok {
		return out, false, nil
	}
	for pos := max(from, 0); ; pos++ {
		id := keyed.Position(pos)
		p, ok := h.rows[coll+":"+id]
		if !ok {
			return out, false, nil
		}
		if len(out) == limit {
			return out, true, nil
		}
		out = append(out, keyed.Row{ID: id, Props: p})
	}
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
func (s *Store) Commit(_ context.Context, o *convoy.Key, base int64, c *convoy.Change) error {
	if err := o.Encoded(); err != nil {
		return err
	}
	if err := s.fail("commit", o.ID); err != nil {
		return err
	}
	// More than convoy.MaxChangeRecords records are more than 100
	// operations, which tablestore refuses before sending, as Azure would.
	if err := commitGroup(o, c).check(); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	cur, ok := s.orders[o.ID]
	if !ok {
		cur = convoy.NewKey(o.ID)
	}
	if cur.Version != base {
		return fmt.Errorf("order %q is at version %d, not %d: %w", o.ID, cur.Version, base, convoy.ErrConflict)
	}
	next := convoy.NewKey(o.ID)
	parked := s.parked[o.ID]
	if parked == nil {
		parked = &parkedSet{msgs: map[int64]convoy.Message{}}
	}
	for seq := range c.Unpark {
		if _, ok := parked.msgs[seq]; !ok {
			return fmt.Errorf("order %q has no parked seq %d: %w", o.ID, seq, convoy.ErrConflict)
		}
	}
	for seq := range c.Park {
		if _, ok := parked.msgs[seq]; ok && !c.Unpark[seq] { // as tablestore's insert of its row
			return fmt.Errorf("order %q has seq %d parked already: %w", o.ID, seq, convoy.ErrConflict)
		}
	}
	// The head's count is the writer's (as tablestore keeps it); one that
	// disagrees with the rows is a bug of the writer's.
	if n := len(parked.msgs) - len(c.Unpark) + len(c.Park); o.ParkedCount != n {
		return fault.Errorf(fault.Internal, "order %q: the head counts %d parked message(s), the commit leaves %d", o.ID, o.ParkedCount, n)
	}
	h := s.history[o.ID]
	if h == nil {
		h = &history{rows: map[string]keyed.Props{}}
	}
	// Checked before anything changes: a failed commit writes nothing.
	for _, w := range c.Writes {
		_, exists := h.rows[rowKey(w.Ref)]
		switch {
		case w.Insert && exists:
			return fmt.Errorf("%q has row %s already: %w", o.ID, rowKey(w.Ref), convoy.ErrConflict)
		case !w.Insert && !exists:
			return fmt.Errorf("%q has no row %s: %w", o.ID, rowKey(w.Ref), convoy.ErrConflict)
		}
	}
	for _, w := range c.Writes {
		h.rows[rowKey(w.Ref)] = h.rows[rowKey(w.Ref)].Merge(w.Props)
	}
	parked.apply(c)
	s.parked[o.ID] = parked
	h.rejected = append(h.rejected, c.Rejections...)
	slices.SortFunc(h.rejected, func(a, b convoy.Rejection) int { return cmp.Compare(a.Seq, b.Seq) })
	s.history[o.ID] = h
	next.Complete, next.StateProps, next.StateVersion = o.Complete, o.StateProps, o.StateVersion
	next.AppliedSeq, next.BlockedSince, next.UpdatedAt, next.AppliedAt = o.AppliedSeq, o.BlockedSince, o.UpdatedAt, o.AppliedAt
	next.Crit = o.Crit.Clone()
	if o.Failure.Seq > o.AppliedSeq { // still ahead: kept (NoteFailure)
		next.Failure = o.Failure
	}
	next.ParkedCount, next.ParkedLast = o.ParkedCount, o.ParkedLast
	next.Version = base + 1
	s.orders[o.ID] = next
	if s.LoseReply != nil && s.LoseReply(o.ID) {
		return ErrReplyLost
	}
	return nil
}

// NoteFailure implements convoy.Store: on the head, if the key has one.
func (s *Store) NoteFailure(_ context.Context, orderID string, f keyed.Failure) error {
	if err := s.fail("note", orderID); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if o, ok := s.orders[orderID]; ok {
		next := unbound(o)
		next.Failure = f
		s.orders[orderID] = next
	}
	return nil
}

func (s *Store) fail(op, orderID string) error {
	if s.Fail == nil {
		return nil
	}
	return s.Fail(op, orderID)
}

// apply removes the messages c unparks and adds those it parks.
func (p *parkedSet) apply(c *convoy.Change) {
	for seq := range c.Unpark {
		delete(p.msgs, seq)
	}
	if n := len(c.Unpark); n > 0 {
		if n <= len(p.seqs) && !slices.ContainsFunc(p.seqs[:n], func(seq int64) bool { return !c.Unpark[seq] }) {
			p.seqs = p.seqs[n:] // the lowest n, as a drain consumes them: no copy of the tail
		} else {
			p.seqs = slices.DeleteFunc(p.seqs, func(seq int64) bool { return c.Unpark[seq] })
		}
	}
	for _, seq := range slices.Sorted(maps.Keys(c.Park)) {
		p.msgs[seq] = c.Park[seq]
		if i, found := slices.BinarySearch(p.seqs, seq); !found {
			p.seqs = slices.Insert(p.seqs, i, seq)
		}
	}
}

// unbound is the head of o as a store reads it: the engine's figures and
// the state as stored, nothing the processor knows besides (its rows, its
// domain, its decoded state).
func unbound(o *convoy.Key) *convoy.Key {
	h := convoy.NewKey(o.ID)
	h.Complete, h.StateProps, h.StateVersion = o.Complete, o.StateProps, o.StateVersion
	h.AppliedSeq, h.BlockedSince, h.UpdatedAt, h.AppliedAt = o.AppliedSeq, o.BlockedSince, o.UpdatedAt, o.AppliedAt
	h.Crit, h.ParkedCount, h.ParkedLast, h.Version, h.Failure = o.Crit.Clone(), o.ParkedCount, o.ParkedLast, o.Version, o.Failure
	return h
}
