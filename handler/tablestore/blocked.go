package tablestore

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/data/aztables"

	"github.com/convoy-dev/convoy/handler/convoy"
	"github.com/convoy-dev/convoy/handler/fault"
)

const blockedPartition = "~blocked"

var _ convoy.BlockedIndex = (*Store)(nil)

// MarkBlocked implements convoy.BlockedIndex.
func (s *Store) MarkBlocked(ctx context.Context, orderID string, since time.Time, version int64) error {
	data, err := json.Marshal(aztables.EDMEntity{
		Entity:     aztables.Entity{PartitionKey: blockedPartition, RowKey: convoy.BlockedKey(orderID, since)},
		Properties: map[string]any{"OrderId": orderID, "Since": aztables.EDMDateTime(since), "Version": aztables.EDMInt64(version), "Confirmed": false},
	})
	if err != nil {
		return fault.Wrap(fault.Internal, err, "encode blocked entry")
	}
	err = withTable(ctx, s.table, func() error {
		_, err := s.table.UpsertEntity(ctx, data, &aztables.UpsertEntityOptions{UpdateMode: aztables.UpdateModeReplace})
		return err
	})
	return classifyOrNil(err, "mark order "+orderID+" blocked")
}

// UpdateBlocked implements convoy.BlockedIndex: a merge under If-Match.
func (s *Store) UpdateBlocked(ctx context.Context, orderID string, since time.Time, u convoy.BlockedUpdate, etag string) (string, error) {
	props := map[string]any{}
	if u.Figures {
		props["Confirmed"], props["Version"] = u.Confirmed, aztables.EDMInt64(u.Version)
		props["AppliedSeq"], props["Parked"] = aztables.EDMInt64(u.AppliedSeq), int32(u.Parked)
	}
	if u.Note != nil {
		props["Note"] = *u.Note
	}
	data, err := json.Marshal(aztables.EDMEntity{
		Entity:     aztables.Entity{PartitionKey: blockedPartition, RowKey: convoy.BlockedKey(orderID, since)},
		Properties: props,
	})
	if err != nil {
		return "", fault.Wrap(fault.Internal, err, "encode blocked entry")
	}
	tag := azcore.ETag(etag)
	resp, err := s.table.UpdateEntity(ctx, data, &aztables.UpdateEntityOptions{IfMatch: &tag, UpdateMode: aztables.UpdateModeMerge})
	if goneOrChanged(err) {
		return "", nil // gone, or changed since it was read: left as it is
	}
	if err != nil {
		return "", classifyOrNil(err, "update the blocked entry of order "+orderID)
	}
	return string(resp.ETag), nil
}

// SetNotes implements convoy.BlockedIndex: the entries share the "~blocked"
// partition, so up to 100 notes are merged in one entity-group transaction
// (If-Match: *). A transaction fails whole when one of its entries is gone
// (its order unblocked meanwhile): its notes are then merged one by one,
// each under its entry's ETag.
func (s *Store) SetNotes(ctx context.Context, notes []convoy.BlockedNote) error {
	for len(notes) > 0 {
		n := min(maxGroupOps, len(notes))
		part := notes[:n]
		notes = notes[n:]
		b := s.batches.newBody()
		for _, x := range part {
			e := b.merge(blockedPartition, x.Entry.Key)
			e.str("Note", x.Note)
			e.end()
		}
		if err := s.batches.submit(ctx, b); err == nil {
			continue
		} else if fault.CodeOf(classifyOrNil(err, "")) == fault.Unavailable || ctx.Err() != nil {
			return classifyOrNil(err, "write the notes of blocked orders")
		}
		for _, x := range part {
			note := x.Note
			if _, err := s.UpdateBlocked(ctx, x.Entry.OrderID, x.Entry.Since, convoy.BlockedUpdate{Note: &note}, x.Entry.ETag); err != nil {
				return err
			}
		}
	}
	return nil
}

// ClearBlocked implements convoy.BlockedIndex.
func (s *Store) ClearBlocked(ctx context.Context, orderID string, since time.Time, etag string, upTo int64) error {
	what, key := "clear blocked order "+orderID, convoy.BlockedKey(orderID, since)
	tag := azcore.ETag(etag)
	_, err := s.table.DeleteEntity(ctx, blockedPartition, key, &aztables.DeleteEntityOptions{IfMatch: &tag})
	if tableCode(err) != aztables.UpdateConditionNotSatisfied {
		if isAbsent(err) {
			return nil
		}
		return classifyOrNil(err, what)
	}
	// Written since (a reader's confirm, or a new block's mark): read it,
	// and remove it unless it is a new block's.
	resp, err := s.table.GetEntity(ctx, blockedPartition, key, nil)
	if isAbsent(err) {
		return nil
	}
	if err != nil {
		return classify(err, what)
	}
	var e aztables.EDMEntity
	if err := json.Unmarshal(resp.Value, &e); err != nil {
		return fault.Wrap(fault.Internal, err, what)
	}
	if props(e.Properties).int("Version") > upTo {
		return nil
	}
	return deleteAsRead(ctx, s.table, blockedPartition, key, e.ETag, what)
}

// ClearStale implements convoy.BlockedIndex: a delete under the ETag the
// entry was scanned with.
func (s *Store) ClearStale(ctx context.Context, e convoy.BlockedEntry) error {
	if e.ETag == "" {
		return fault.Errorf(fault.Internal, "clear stale entry %q: no ETag (an entry is removed only as it was read)", e.Key)
	}
	return deleteAsRead(ctx, s.table, blockedPartition, e.Key, e.ETag, "clear stale blocked order "+e.OrderID)
}

// deleteAsRead deletes an entity only if it still has the ETag it was read
// with: one gone already, or written again since, is kept (no error).
func deleteAsRead(ctx context.Context, table *aztables.Client, pk, rk, etag, what string) error {
	tag := azcore.ETag(etag)
	_, err := table.DeleteEntity(ctx, pk, rk, &aztables.DeleteEntityOptions{IfMatch: &tag})
	if goneOrChanged(err) {
		return nil
	}
	return classifyOrNil(err, what)
}

// ScanBlocked implements convoy.BlockedIndex: one query.
func (s *Store) ScanBlocked(ctx context.Context, after string, limit int) ([]convoy.BlockedEntry, bool, error) {
	filter := fmt.Sprintf("PartitionKey eq '%s' and RowKey gt '%s'", blockedPartition, escape(after))
	return listUpTo(ctx, s.table, filter, limit, "list blocked orders", func(raw []byte) (convoy.BlockedEntry, error) {
		var e aztables.EDMEntity
		if err := json.Unmarshal(raw, &e); err != nil {
			return convoy.BlockedEntry{}, fault.Wrap(fault.Internal, err, "decode blocked entry")
		}
		p := props(e.Properties)
		return convoy.BlockedEntry{Key: e.RowKey, OrderID: p.str("OrderId"), Since: p.time("Since"), Version: p.int("Version"),
			Confirmed: p.bool("Confirmed"), AppliedSeq: p.int("AppliedSeq"), Parked: int(p.int("Parked")), Note: p.str("Note"), ETag: e.ETag}, nil
	})
}

// Head implements convoy.BlockedIndex: a point read of the head row.
func (s *Store) Head(ctx context.Context, orderID string) (convoy.Head, bool, error) {
	resp, err := s.table.GetEntity(ctx, orderID, headKey, nil)
	switch {
	case isAbsent(err):
		return convoy.Head{}, false, nil
	case err != nil:
		return convoy.Head{}, false, classify(err, "read order "+orderID)
	}
	var e aztables.EDMEntity
	if err := json.Unmarshal(resp.Value, &e); err != nil {
		return convoy.Head{}, false, fault.Wrap(fault.Internal, err, "decode order head")
	}
	p := props(e.Properties)
	progress := p.time("AppliedAt")
	if progress.IsZero() { // a head written before it was kept (Key.Progress)
		progress = p.time("UpdatedAt")
	}
	return convoy.Head{OrderID: orderID, AppliedSeq: p.int("AppliedSeq"), Parked: int(p.int("Parked")),
		BlockedSince: p.time("BlockedSince"), Version: p.int("Version"), AppliedAt: progress,
		Crit: convoy.DecodeCriticalTimes(p.str("Crit")), Failure: p.failure()}, true, nil
}
