package tablestore

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/data/aztables"

	"github.com/convoy-dev/convoy/handler/convoy"
	"github.com/convoy-dev/convoy/handler/fault"
	"github.com/convoy-dev/convoy/handler/keyed"
)

// migrate brings a partition written before issue 27 to layout 2, once (a
// partition of the order domain: the only one that release had): it
// reads every transaction row (pages of 1,000), writes each one's x row
// (upserts, 100 a transaction: derived data that no reader trusts until the
// head says layout 2), then merges Total, TxCount and Layout into the head if
// its ETag is still etag. A commit in between (of this release or the one
// before) changes the head: the migration is then a conflict, and the next
// Load starts it again. It never changes the version (the compare-and-swap
// token the blocked index also relies on). The cost is that of the old Load
// plus N/100 writes, paid by the first Load of the order; after each page it
// records how far it got (the w:migration row, for the head's version), so
// that a migration cut short by a deadline resumes where it stopped.
func (s *Store) migrate(ctx context.Context, o *convoy.Key, etag azcore.ETag) error {
	what := "migrate order " + o.ID + " to layout 2"
	var total, count int64
	if resp, err := s.table.GetEntity(ctx, o.ID, migrationKey, nil); err == nil {
		var e aztables.EDMEntity
		if json.Unmarshal(resp.Value, &e) == nil {
			if p := props(e.Properties); p.int("Version") == o.Version {
				total, count = p.int("Total"), p.int("Position")
			}
		}
	} else if !entityAbsent(err) {
		return classify(err, what)
	}
	filter := fmt.Sprintf("PartitionKey eq '%s' and RowKey ge '%s' and RowKey lt '%s'", escape(o.ID), txKey(count), prefixEnd(txPrefix))
	pager := s.table.NewListEntitiesPager(&aztables.ListEntitiesOptions{Filter: &filter})
	b := s.batches.newBody()
	flush := func() error {
		if b.ops == 0 {
			return nil
		}
		err := s.batches.submit(ctx, b)
		b = s.batches.newBody()
		return err
	}
	for pager.More() {
		page, err := pager.NextPage(ctx)
		if err != nil {
			return classify(err, what)
		}
		for _, raw := range page.Entities {
			r, err := decodeRow(raw, txPrefix)
			if err != nil {
				return fault.Wrap(fault.Internal, err, what)
			}
			if r.ID != keyed.Position(count) {
				return fault.Errorf(fault.Internal, "%s: transaction row %s where %d was expected", what, r.ID, count)
			}
			total += r.Props.Int("Amount")
			e := b.upsert(o.ID, txIDPrefix+r.Props.String("TxId"))
			e.i64("Position", count)
			e.i64("Amount", r.Props.Int("Amount"))
			e.end()
			count++
			if b.ops == maxGroupOps-1 { // the last one: the progress row
				if err := flush(); err != nil {
					return classify(err, what)
				}
			}
		}
		// How far it got, with the page's last rows: a next Load resumes here.
		e := b.upsert(o.ID, migrationKey)
		e.i64("Version", o.Version)
		e.i64("Position", count)
		e.i64("Total", total)
		e.end()
		if err := flush(); err != nil {
			return classify(err, what)
		}
	}
	head := map[string]any{"PartitionKey": o.ID, "RowKey": headKey, "Layout": int32(layout),
		"Total": strconv.FormatInt(total, 10), "Total@odata.type": "Edm.Int64",
		"TxCount": strconv.FormatInt(count, 10), "TxCount@odata.type": "Edm.Int64"}
	body, err := json.Marshal(head)
	if err != nil {
		return fault.Wrap(fault.Internal, err, what)
	}
	_, err = s.table.UpdateEntity(ctx, body, &aztables.UpdateEntityOptions{IfMatch: &etag, UpdateMode: aztables.UpdateModeMerge})
	switch {
	case lostRace(err): // a merge is never answered EntityAlreadyExists
		return fmt.Errorf("%s: the head changed meanwhile: %w", what, convoy.ErrConflict)
	case err != nil:
		return classify(err, what)
	}
	o.StateProps = o.StateProps.Set("Total", total).Set("TxCount", count)
	return nil
}

// migrationKey is the row of a migration's progress: after the markers,
// before the x rows, so that neither this release's reads nor the old
// one's ("lt v:") meet it.
const migrationKey = "w:migration"
