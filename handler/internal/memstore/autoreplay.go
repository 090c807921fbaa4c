package memstore

import (
	"context"
	"slices"
	"strconv"
	"strings"

	"github.com/convoy-dev/convoy/handler/fault"
	"github.com/convoy-dev/convoy/handler/heal"
)

var _ heal.StateStore = (*Store)(nil)

type replayState struct {
	st  heal.State
	tag int64
}

// ReplayState implements heal.StateStore.
func (s *Store) ReplayState(_ context.Context, orderID string) (heal.State, string, bool, error) {
	if err := s.fail("index", orderID); err != nil {
		return heal.State{}, "", false, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	r, ok := s.replay[orderID]
	if !ok {
		return heal.State{}, "", false, nil
	}
	return r.st, strconv.FormatInt(r.tag, 10), true, nil
}

// PutReplayState implements heal.StateStore.
func (s *Store) PutReplayState(_ context.Context, st heal.State, etag string) (string, error) {
	if err := s.fail("index", st.OrderID); err != nil {
		return "", err
	}
	if err := stateEntity(st).check(); err != nil {
		return "", err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.replay == nil {
		s.replay = map[string]replayState{}
	}
	r, ok := s.replay[st.OrderID]
	if (etag == "") == ok || (ok && strconv.FormatInt(r.tag, 10) != etag) {
		return "", fault.Errorf(fault.Conflict, "the auto-replay state of %s changed meanwhile", st.OrderID)
	}
	s.tags++
	s.replay[st.OrderID] = replayState{st: st, tag: s.tags}
	return strconv.FormatInt(s.tags, 10), nil
}

// ReplayStates implements heal.StateStore.
func (s *Store) ReplayStates(_ context.Context, after string, limit int) ([]heal.State, bool, error) {
	if err := s.fail("index", ""); err != nil {
		return nil, false, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []heal.State
	for _, r := range s.replay {
		if r.st.OrderID > after {
			st := r.st
			st.ETag = strconv.FormatInt(r.tag, 10)
			out = append(out, st)
		}
	}
	slices.SortFunc(out, func(a, b heal.State) int { return strings.Compare(a.OrderID, b.OrderID) })
	return out[:min(limit, len(out))], len(out) > limit, nil
}

// DeleteReplayState implements heal.StateStore.
func (s *Store) DeleteReplayState(_ context.Context, orderID, etag string) error {
	if err := s.fail("index", orderID); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if r, ok := s.replay[orderID]; ok && strconv.FormatInt(r.tag, 10) == etag {
		delete(s.replay, orderID)
	}
	return nil
}

// Health implements heal.StateStore.
func (s *Store) Health(context.Context) (heal.Health, string, bool, error) {
	if err := s.fail("health", ""); err != nil {
		return heal.Health{}, "", false, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.healthTag == 0 {
		return heal.Health{}, "", false, nil
	}
	return s.health, strconv.FormatInt(s.healthTag, 10), true, nil
}

// PutHealth implements heal.StateStore.
func (s *Store) PutHealth(_ context.Context, h heal.Health, etag string) (string, error) {
	if err := s.fail("health", ""); err != nil {
		return "", err
	}
	if err := healthEntity(h).check(); err != nil {
		return "", err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if (etag == "") != (s.healthTag == 0) || (etag != "" && strconv.FormatInt(s.healthTag, 10) != etag) {
		return "", fault.Errorf(fault.Conflict, "the auto-replay record changed meanwhile")
	}
	s.tags++
	s.health, s.healthTag = h, s.tags
	return strconv.FormatInt(s.tags, 10), nil
}

// Trends implements heal.StateStore.
func (s *Store) Trends(context.Context) (heal.Trends, string, bool, error) {
	if err := s.fail("health", ""); err != nil {
		return heal.Trends{}, "", false, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.trendsTag == 0 {
		return heal.Trends{}, "", false, nil
	}
	return heal.Trends{Points: slices.Clone(s.trends.Points)}, strconv.FormatInt(s.trendsTag, 10), true, nil
}

// PutTrends implements heal.StateStore.
func (s *Store) PutTrends(_ context.Context, t heal.Trends, etag string) (string, error) {
	if err := s.fail("health", ""); err != nil {
		return "", err
	}
	if err := trendsEntity(t).check(); err != nil {
		return "", err
	}
	// As stored: what the encoding keeps (Unix seconds, figures bounded).
	t, err := heal.DecodeTrends(t.Encode())
	if err != nil {
		return "", err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if (etag == "") != (s.trendsTag == 0) || (etag != "" && strconv.FormatInt(s.trendsTag, 10) != etag) {
		return "", fault.Errorf(fault.Conflict, "the trend series changed meanwhile")
	}
	s.tags++
	s.trends, s.trendsTag = t, s.tags
	return strconv.FormatInt(s.tags, 10), nil
}
