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

var _ heal.StateStore = (*Store)(nil)

// ReplayState implements heal.StateStore: a point read.
func (s *Store) ReplayState(ctx context.Context, orderID string) (heal.State, string, bool, error) {
	resp, err := s.table.GetEntity(ctx, autoReplayPartition, orderID, nil)
	switch tableCode(err) {
	case "":
		if err != nil {
			return heal.State{}, "", false, classify(err, "read the auto-replay state of "+orderID)
		}
	case aztables.ResourceNotFound, aztables.EntityNotFound, aztables.TableNotFound:
		return heal.State{}, "", false, nil
	default:
		return heal.State{}, "", false, classify(err, "read the auto-replay state of "+orderID)
	}
	st, err := decodeState(resp.Value)
	return st, string(resp.ETag), err == nil, err
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
	st.OrderID = e.RowKey
	return st, nil
}

// PutReplayState implements heal.StateStore: insert when etag is "",
// otherwise a replace under If-Match.
func (s *Store) PutReplayState(ctx context.Context, st heal.State, etag string) (string, error) {
	state, _ := json.Marshal(st)
	data, err := json.Marshal(aztables.EDMEntity{
		Entity:     aztables.Entity{PartitionKey: autoReplayPartition, RowKey: st.OrderID},
		Properties: map[string]any{"State": string(state)},
	})
	if err != nil {
		return "", fault.Wrap(fault.Internal, err, "encode auto-replay state")
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
	switch tableCode(err) {
	case "":
	case aztables.EntityAlreadyExists, aztables.UpdateConditionNotSatisfied, aztables.ResourceNotFound, aztables.EntityNotFound:
		return "", fault.Errorf(fault.Conflict, "the auto-replay state of %s changed meanwhile", st.OrderID)
	}
	if err != nil {
		return "", classify(err, "write the auto-replay state of "+st.OrderID)
	}
	return string(newTag), nil
}

// ReplayStates implements heal.StateStore: one paged query.
func (s *Store) ReplayStates(ctx context.Context, limit int) ([]heal.State, bool, error) {
	filter := fmt.Sprintf("PartitionKey eq '%s'", autoReplayPartition)
	return listUpTo(ctx, s.table, filter, limit, "list auto-replay states", decodeState)
}
