package tablestore_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"

	"github.com/convoy-dev/convoy/handler/convoy"
	"github.com/convoy-dev/convoy/handler/orders"
	"github.com/convoy-dev/convoy/handler/tablestore"
)

// TestHeadsOfEarlierReleasesCountParked (issue 33): Load reads a page of
// the parked rows and trusts the head's count of them all. A head written
// before the count was kept (no Parked) has its rows counted (a query of
// their keys); one written before the highest parked seq was kept (no
// ParkedLast: every head before issue 33, and one an earlier release writes
// again in a rolling upgrade) says the highest it has loaded, until its
// tail drains. Either way the tail drains whole and the head ends counting 0.
func TestHeadsOfEarlierReleasesCountParked(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	table, name := server.NewNamedTable(t, nil)
	batches, err := tablestore.NewBatchesFromConnectionString(server.ConnectionString(), &azcore.ClientOptions{})
	if err != nil {
		t.Fatal(err)
	}
	store := tablestore.New(table, batches.Table(name))
	const parked = convoy.ParkedLoadSize + 24 // seqs 3 to parked+2
	for _, tc := range []struct {
		name      string
		count     bool // the head has Parked
		rows      int
		wantLast  int64
		wantCount int
	}{
		{"no count, more than a page", false, parked, parked + 2, parked},
		{"no count, within a page", false, 5, 7, 5},
		{"count, no highest seq", true, parked, convoy.ParkedLoadSize + 2, parked},
	} {
		t.Run(tc.name, func(t *testing.T) {
			id := fmt.Sprintf("early-%d-%d", tc.rows, len(tc.name))
			old := legacyRows{t: t, table: table, id: id}
			for seq := int64(3); seq < 3+int64(tc.rows); seq++ {
				old.put(old.with(map[string]any{"RowKey": fmt.Sprintf("p:%019d", seq), "Seq": i64(seq), "Last": false, "MessageId": fmt.Sprint("L:", seq),
					"Op": "AddTransaction", "TxId": fmt.Sprint("t-", seq), "Currency": "", "Amount": i64(seq)}))
			}
			head := map[string]any{"RowKey": "h", "Status": "new", "Complete": false, "Currency": "",
				"AppliedSeq": i64(0), "Version": i64(1), "UpdatedAt": []any{"2026-11-20T10:00:00Z", "Edm.DateTime"},
				"BlockedSince": []any{"2026-11-20T10:00:00Z", "Edm.DateTime"}}
			if tc.count {
				head["Parked"] = int32(tc.rows)
			}
			old.put(old.with(head))
			old.put(old.with(map[string]any{"RowKey": fmt.Sprintf("v:%019d", 1), "AppliedSeq": i64(0), "At": []any{"2026-11-20T10:00:00Z", "Edm.DateTime"}}))
			o, err := store.Load(ctx, id)
			if err != nil {
				t.Fatal(err)
			}
			if o.ParkedCount != tc.wantCount || o.LastParked() != tc.wantLast || len(o.Parked) != min(tc.rows, convoy.ParkedLoadSize) || o.MissingSeq() != 1 {
				t.Fatalf("loaded %d of %d parked, last %d, missing %d; want %d of %d, last %d, missing 1",
					len(o.Parked), o.ParkedCount, o.LastParked(), o.MissingSeq(), min(tc.rows, convoy.ParkedLoadSize), tc.wantCount, tc.wantLast)
			}
			p := convoy.NewProcessor(store, convoy.ProcessorOptions{Domain: orders.Domain})
			amount := int64(2)
			res, err := p.Process(ctx, id, []convoy.Message{
				{Seq: 1, MessageID: "L:1", Command: orders.Transaction{OrderID: id, Op: orders.CreateOrder, Currency: "EUR"}},
				{Seq: 2, MessageID: "L:2", Command: orders.Transaction{OrderID: id, Op: orders.AddTransaction, TxID: "t-2", Amount: &amount}},
			})
			if err != nil {
				t.Fatal(err)
			}
			if res.AppliedSeq != int64(tc.rows)+2 || res.Parked != 0 {
				t.Fatalf("the drain: appliedSeq %d, %d parked; want %d, 0", res.AppliedSeq, res.Parked, tc.rows+2)
			}
			h, _, err := store.Head(ctx, id)
			if err != nil || h.Parked != 0 || h.AppliedSeq != int64(tc.rows)+2 {
				t.Fatalf("head after the drain: %+v, %v", h, err)
			}
		})
	}
}
