package memstore

import (
	"context"
	"maps"
	"slices"
	"strconv"
	"time"

	"github.com/convoy-dev/convoy/handler/convoy"
)

var _ convoy.BlockedIndex = (*Store)(nil)

// MarkBlocked implements convoy.BlockedIndex.
func (s *Store) MarkBlocked(_ context.Context, orderID string, since time.Time, version int64) error {
	if err := s.fail("index.mark", orderID); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.blocked == nil {
		s.blocked = map[string]convoy.BlockedEntry{}
	}
	key := convoy.BlockedKey(orderID, since)
	e := convoy.BlockedEntry{Key: key, OrderID: orderID, Since: since.UTC(), Version: version}
	if err := blockedEntity(e).check(); err != nil {
		return err
	}
	s.tags++
	if _, ok := s.blocked[key]; !ok {
		s.blockedKeys = nil
	}
	e.ETag = strconv.FormatInt(s.tags, 10)
	s.blocked[key] = e
	return nil
}

// UpdateBlocked implements convoy.BlockedIndex.
func (s *Store) UpdateBlocked(_ context.Context, orderID string, since time.Time, u convoy.BlockedUpdate, etag string) (string, error) {
	if err := s.fail("index.update", orderID); err != nil {
		return "", err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	key := convoy.BlockedKey(orderID, since)
	e, ok := s.blocked[key]
	if !ok || (etag != "*" && e.ETag != etag) {
		return "", nil
	}
	if u.Figures {
		e.Confirmed, e.Version, e.AppliedSeq, e.Parked = u.Confirmed, u.Version, u.AppliedSeq, u.Parked
	}
	if u.Note != nil {
		e.Note = *u.Note
	}
	if err := blockedEntity(e).check(); err != nil {
		return "", err
	}
	s.tags++
	e.ETag = strconv.FormatInt(s.tags, 10)
	s.blocked[key] = e
	return e.ETag, nil
}

// SetNotes implements convoy.BlockedIndex.
func (s *Store) SetNotes(ctx context.Context, notes []convoy.BlockedNote) error {
	for _, x := range notes {
		note := x.Note
		if _, err := s.UpdateBlocked(ctx, x.Entry.OrderID, x.Entry.Since, convoy.BlockedUpdate{Note: &note}, x.Entry.ETag); err != nil {
			return err
		}
	}
	return nil
}

// ClearBlocked implements convoy.BlockedIndex.
func (s *Store) ClearBlocked(_ context.Context, orderID string, since time.Time, etag string, upTo int64) error {
	if err := s.fail("index.clear", orderID); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	key := convoy.BlockedKey(orderID, since)
	if e, ok := s.blocked[key]; !ok || etag != "*" && e.ETag != etag && e.Version > upTo {
		return nil // gone, or marked again since: kept
	}
	delete(s.blocked, key)
	s.blockedKeys = nil
	return nil
}

// ClearStale implements convoy.BlockedIndex.
func (s *Store) ClearStale(_ context.Context, e convoy.BlockedEntry) error {
	if err := s.fail("index.clear", e.OrderID); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if cur, ok := s.blocked[e.Key]; ok && cur.ETag == e.ETag {
		delete(s.blocked, e.Key)
		s.blockedKeys = nil
	}
	return nil
}

// ScanBlocked implements convoy.BlockedIndex: the keys are kept sorted
// between changes of the index, so that a page costs what it holds (as a
// query of Table Storage does), not a sort of the whole index.
func (s *Store) ScanBlocked(_ context.Context, after string, limit int) ([]convoy.BlockedEntry, bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.blockedKeys == nil {
		s.blockedKeys = slices.Sorted(maps.Keys(s.blocked))
	}
	keys := s.blockedKeys[afterKey(s.blockedKeys, after):]
	more := len(keys) > limit
	keys = keys[:min(limit, len(keys))]
	out := make([]convoy.BlockedEntry, len(keys))
	for i, k := range keys {
		out[i] = s.blocked[k]
	}
	return out, more, nil
}

// afterKey is where the keys above after begin in sorted.
func afterKey(sorted []string, after string) int {
	i, found := slices.BinarySearch(sorted, after)
	if found {
		i++
	}
	return i
}

// Head implements convoy.BlockedIndex.
func (s *Store) Head(_ context.Context, orderID string) (convoy.Head, bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	o, ok := s.orders[orderID]
	if !ok {
		return convoy.Head{}, false, nil
	}
	return convoy.Head{OrderID: o.ID, AppliedSeq: o.AppliedSeq, Parked: o.ParkedCount, BlockedSince: o.BlockedSince, Version: o.Version,
		AppliedAt: o.Progress(), Crit: o.Crit.Clone(), Failure: o.Failure}, true, nil
}
