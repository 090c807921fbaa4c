package tablestore

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/data/aztables"

	"github.com/convoy-dev/convoy/handler/fault"
	"github.com/convoy-dev/convoy/handler/heal"
)

// autoReplayPartition holds one row per order with an automatic replay
// state (order ids cannot start with '~').
const autoReplayPartition = "~autoreplay"

// healthPartition and healthRow hold the shared heal.Health record;
// trendsRow, in the same partition, the trend series (a property of its
// own entity: the record's is near its 64 KiB at its largest).
const (
	healthPartition = "~health"
	healthRow       = "autoreplay"
	trendsRow       = "trends"
)

var _ heal.StateStore = (*Store)(nil)

// ReplayState implements heal.StateStore: a point read.
func (s *Store) ReplayState(ctx context.Context, orderID string) (heal.State, string, bool, error) {
	raw, etag, ok, err := s.getJSONRow(ctx, autoReplayPartition, orderID, "read the auto-replay state of "+orderID)
	if !ok || err != nil {
		return heal.State{}, "", false, err
	}
	st, err := decodeState(raw)
	return st, etag, err == nil, err
}

func decodeState(raw []byte) (heal.State, error) {
	var e aztables.EDMEntity
	if err := json.Unmarshal(raw, &e); err != nil {
		return heal.State{}, fault.Wrap(fault.Internal, err, "decode auto-replay state")
	}
	var st heal.State
	if err := json.Unmarshal([]byte(props(e.Properties).str("State")), &st); err != nil {
		return heal.State{}, fault.Wrap(fault.Internal, err, "decode auto-replay state "+e.RowKey)
	}
	st.OrderID, st.ETag = e.RowKey, e.ETag
	return st, nil
}

// PutReplayState implements heal.StateStore: insert when etag is "",
// otherwise a replace under If-Match.
func (s *Store) PutReplayState(ctx context.Context, st heal.State, etag string) (string, error) {
	state, _ := json.Marshal(st)
	return s.putJSONRow(ctx, autoReplayPartition, st.OrderID, "State", state, etag, "the auto-replay state of "+st.OrderID)
}

// ReplayStates implements heal.StateStore: one query per 1,000 states.
func (s *Store) ReplayStates(ctx context.Context, after string, limit int) ([]heal.State, bool, error) {
	filter := fmt.Sprintf("PartitionKey eq '%s' and RowKey gt '%s'", autoReplayPartition, escape(after))
	return listUpTo(ctx, s.table, filter, limit, "list auto-replay states", decodeState)
}

// DeleteReplayState implements heal.StateStore: a delete under If-Match.
func (s *Store) DeleteReplayState(ctx context.Context, orderID, etag string) error {
	tag := azcore.ETag(etag)
	_, err := s.table.DeleteEntity(ctx, autoReplayPartition, orderID, &aztables.DeleteEntityOptions{IfMatch: &tag})
	if goneOrChanged(err) {
		return nil // gone, or written again since: kept
	}
	return classifyOrNil(err, "remove the auto-replay state of "+orderID)
}

// Health implements heal.StateStore: a point read.
func (s *Store) Health(ctx context.Context) (heal.Health, string, bool, error) {
	raw, etag, ok, err := s.getJSONRow(ctx, healthPartition, healthRow, "read the auto-replay record")
	if !ok || err != nil {
		return heal.Health{}, "", false, err
	}
	var e aztables.EDMEntity
	var h heal.Health
	if err := json.Unmarshal(raw, &e); err != nil {
		return heal.Health{}, "", false, fault.Wrap(fault.Internal, err, "decode the auto-replay record")
	}
	if err := json.Unmarshal([]byte(props(e.Properties).str("Health")), &h); err != nil {
		return heal.Health{}, "", false, fault.Wrap(fault.Internal, err, "decode the auto-replay record")
	}
	return h, etag, true, nil
}

// PutHealth implements heal.StateStore: insert when etag is "", otherwise a
// replace under If-Match.
func (s *Store) PutHealth(ctx context.Context, h heal.Health, etag string) (string, error) {
	raw, _ := json.Marshal(h)
	return s.putJSONRow(ctx, healthPartition, healthRow, "Health", raw, etag, "the auto-replay record")
}

// Trends implements heal.StateStore: a point read.
func (s *Store) Trends(ctx context.Context) (heal.Trends, string, bool, error) {
	raw, etag, ok, err := s.getJSONRow(ctx, healthPartition, trendsRow, "read the trend series")
	if !ok || err != nil {
		return heal.Trends{}, "", false, err
	}
	var e aztables.EDMEntity
	if err := json.Unmarshal(raw, &e); err != nil {
		return heal.Trends{}, "", false, fault.Wrap(fault.Internal, err, "decode the trend series")
	}
	t, err := heal.DecodeTrends(props(e.Properties).str("Points"))
	if err != nil {
		return heal.Trends{}, "", false, err
	}
	return t, etag, true, nil
}

// PutTrends implements heal.StateStore: insert when etag is "", otherwise
// a replace under If-Match.
func (s *Store) PutTrends(ctx context.Context, t heal.Trends, etag string) (string, error) {
	return s.putRow(ctx, healthPartition, trendsRow, "Points", t.Encode(), etag, "the trend series")
}

// getJSONRow is a point read of a row; ok is false when there is none.
func (s *Store) getJSONRow(ctx context.Context, pk, rk, what string) (raw []byte, etag string, ok bool, err error) {
	resp, err := s.table.GetEntity(ctx, pk, rk, nil)
	switch {
	case isAbsent(err):
		return nil, "", false, nil
	case err != nil:
		return nil, "", false, classify(err, what)
	}
	return resp.Value, string(resp.ETag), true, nil
}

// putJSONRow writes a row whose one property prop holds value (a JSON
// document): an insert when etag is "", otherwise a replace under If-Match.
// Another writer first is a fault.Conflict naming what.
func (s *Store) putJSONRow(ctx context.Context, pk, rk, prop string, value []byte, etag, what string) (string, error) {
	return s.putRow(ctx, pk, rk, prop, string(value), etag, what)
}

// putRow writes a row whose one string property prop holds value, as
// putJSONRow.
func (s *Store) putRow(ctx context.Context, pk, rk, prop, value, etag, what string) (string, error) {
	data, err := json.Marshal(aztables.EDMEntity{
		Entity:     aztables.Entity{PartitionKey: pk, RowKey: rk},
		Properties: map[string]any{prop: value},
	})
	if err != nil {
		return "", fault.Wrap(fault.Internal, err, "encode "+what)
	}
	var newTag azcore.ETag
	err = withTable(ctx, s.table, func() error {
		if etag == "" {
			resp, err := s.table.AddEntity(ctx, data, nil)
			newTag = resp.ETag
			return err
		}
		tag := azcore.ETag(etag)
		resp, err := s.table.UpdateEntity(ctx, data, &aztables.UpdateEntityOptions{IfMatch: &tag, UpdateMode: aztables.UpdateModeReplace})
		newTag = resp.ETag
		return err
	})
	if lostRace(err) {
		return "", fault.Errorf(fault.Conflict, "%s changed meanwhile", what)
	}
	if err != nil {
		return "", classify(err, "write "+what)
	}
	return string(newTag), nil
}
