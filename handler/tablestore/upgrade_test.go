package tablestore_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	"github.com/Azure/azure-sdk-for-go/sdk/data/aztables"

	"github.com/convoy-dev/convoy/handler/convoy"
	"github.com/convoy-dev/convoy/handler/keyed"
	"github.com/convoy-dev/convoy/handler/orders"
	"github.com/convoy-dev/convoy/handler/tablestore"
)

// legacyRows writes rows as the release before issue 27 wrote them (its
// tablestore.commitBody): a head without Layout, Total or TxCount, the
// transactions by position only, rejections, parked messages, markers.
type legacyRows struct {
	t     *testing.T
	table *aztables.Client
	id    string
}

func (l legacyRows) put(props map[string]any) {
	l.t.Helper()
	props["PartitionKey"] = l.id
	body, err := json.Marshal(props)
	if err != nil {
		l.t.Fatal(err)
	}
	if _, err := l.table.UpsertEntity(context.Background(), body, &aztables.UpsertEntityOptions{UpdateMode: aztables.UpdateModeReplace}); err != nil {
		l.t.Fatal(err)
	}
}

func i64(v int64) []any { return []any{fmt.Sprint(v), "Edm.Int64"} }

func (l legacyRows) with(props map[string]any) map[string]any {
	out := map[string]any{}
	for k, v := range props {
		if typed, ok := v.([]any); ok {
			out[k], out[k+"@odata.type"] = typed[0], typed[1]
			continue
		}
		out[k] = v
	}
	return out
}

func (l legacyRows) head(version, applied int64, parked int32) {
	l.put(l.with(map[string]any{"RowKey": "h", "Parked": parked, "Status": "open", "Complete": false, "Currency": "EUR",
		"AppliedSeq": i64(applied), "Version": i64(version), "UpdatedAt": []any{"2026-11-20T10:00:00Z", "Edm.DateTime"}}))
	l.put(l.with(map[string]any{"RowKey": fmt.Sprintf("v:%019d", version), "AppliedSeq": i64(applied), "At": []any{"2026-11-20T10:00:00Z", "Edm.DateTime"}}))
}

func (l legacyRows) tx(pos int, txID string, amount int64) {
	l.put(l.with(map[string]any{"RowKey": fmt.Sprintf("t:%010d", pos), "TxId": txID, "Amount": i64(amount)}))
}

// TestLegacyPartition: a partition written by the release before issue 27
// keeps working. Its first Load migrates it (the x rows, then the head's
// Total, TxCount and Layout), messages apply to it (a cold modification,
// a parked message drained, an existing txId rejected), its history reads
// in pages, and rows the old release reads stay readable by it (a
// rollback); a head it writes again is migrated again on the next Load.
func TestLegacyPartition(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	table, name := server.NewNamedTable(t, nil)
	batches, err := tablestore.NewBatchesFromConnectionString(server.ConnectionString(), &azcore.ClientOptions{})
	if err != nil {
		t.Fatal(err)
	}
	store := tablestore.New(table, batches.Table(name))
	old := legacyRows{t: t, table: table, id: "legacy-1"}
	const n = 300
	var total int64
	for i := range n {
		old.tx(i, fmt.Sprintf("t-%d", i), int64(i))
		total += int64(i)
	}
	old.put(old.with(map[string]any{"RowKey": fmt.Sprintf("r:%019d", 302), "Seq": i64(302), "Op": "ModifyTransaction", "TxId": "nope", "Reason": `transaction "nope" does not exist`}))
	old.put(old.with(map[string]any{"RowKey": fmt.Sprintf("p:%019d", 304), "Seq": i64(304), "Last": false, "MessageId": "L:304",
		"Op": "AddTransaction", "TxId": "t-new", "Currency": "", "Amount": i64(1000)}))
	old.head(10, 302, 1)

	o, err := store.Load(ctx, "legacy-1")
	if err != nil {
		t.Fatal(err)
	}
	if st := orders.StateOf(o); o.Version != 10 || o.AppliedSeq != 302 || st.TxCount != n || st.Total != total || len(o.Parked) != 1 || orders.CommandOf("legacy-1", o.Parked[304]).TxID != "t-new" {
		t.Fatalf("legacy partition loaded as version %d, applied %d, %d transactions totalling %d, parked %v; want 10, 302, %d totalling %d, 304",
			o.Version, o.AppliedSeq, st.TxCount, st.Total, o.Parked, n, total)
	}
	// A head written before AppliedAt was kept: its progress is its last commit.
	if updated := time.Date(2026, 11, 20, 10, 0, 0, 0, time.UTC); !o.AppliedAt.IsZero() || !o.Progress().Equal(updated) {
		t.Fatalf("legacy head: AppliedAt %v, Progress %v; want none, and its UpdatedAt %v", o.AppliedAt, o.Progress(), updated)
	}
	if r, found, err := store.Row(ctx, "legacy-1", keyed.RowRef{Collection: "x", ID: "t-5"}); err != nil || !found || r.Int("Position") != 5 || r.Int("Amount") != 5 {
		t.Fatalf("Row(x/t-5) after the migration: %+v, %v, %v", r, found, err)
	}
	if layout := headProps(t, table, "legacy-1")["Layout"]; fmt.Sprint(layout) != "2" {
		t.Fatalf("the head's Layout after the migration: %v, want 2", layout)
	}

	p := convoy.NewProcessor(store, convoy.ProcessorOptions{Domain: orders.Domain})
	amount := func(v int64) *int64 { return &v }
	res, err := p.Process(ctx, "legacy-1", []convoy.Message{
		{Seq: 303, Command: orders.Transaction{OrderID: "legacy-1", Op: orders.ModifyTransaction, TxID: "t-5", Amount: amount(50)}},
		{Seq: 305, Command: orders.Transaction{OrderID: "legacy-1", Op: orders.AddTransaction, TxID: "t-7", Amount: amount(1)}},
	})
	if err != nil {
		t.Fatal(err)
	}
	var disp []string
	for _, out := range res.Outcomes {
		disp = append(disp, fmt.Sprint(out.Seq, out.Disposition))
	}
	if got := strings.Join(disp, " "); got != "303applied 304applied 305rejected" {
		t.Fatalf("outcomes %s", got)
	}
	total += 50 - 5 + 1000
	txs, rejected := historyOf(t, store, "legacy-1")
	if len(txs) != n+1 || txs[5].Amount != 50 || txs[n].TxID != "t-new" || len(rejected) != 2 || rejected[0].Seq != 302 || rejected[1].Seq != 305 {
		t.Fatalf("history: %d transactions (t-5 %+v, last %+v), rejections %+v", len(txs), txs[5], txs[len(txs)-1], rejected)
	}
	if o, _ := store.Load(ctx, "legacy-1"); orders.StateOf(o).Total != total || orders.StateOf(o).TxCount != n+1 || o.Version != 11 {
		t.Fatalf("after the messages: total %d over %d at version %d, want %d over %d at 11", orders.StateOf(o).Total, orders.StateOf(o).TxCount, o.Version, total, n+1)
	}

	// The old release's Load read every row before the markers ("lt v:"):
	// the rows it finds are still only of the kinds it knows.
	filter := "PartitionKey eq 'legacy-1' and RowKey lt 'v:'"
	pager := table.NewListEntitiesPager(&aztables.ListEntitiesOptions{Filter: &filter})
	for pager.More() {
		page, err := pager.NextPage(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, raw := range page.Entities {
			var e aztables.EDMEntity
			_ = json.Unmarshal(raw, &e)
			if k := e.RowKey; k != "h" && !strings.HasPrefix(k, "p:") && !strings.HasPrefix(k, "r:") && !strings.HasPrefix(k, "t:") {
				t.Fatalf("row %q would break the release before (rollback)", k)
			}
		}
	}

	// A rollback (or an old instance in a rolling upgrade) writes the head
	// whole, without Layout, and a transaction without its x row.
	old.tx(n+1, "t-old", 7)
	old.head(12, 306, 0)
	o, err = store.Load(ctx, "legacy-1")
	if err != nil {
		t.Fatal(err)
	}
	if st := orders.StateOf(o); st.TxCount != n+2 || st.Total != total+7 || o.Version != 12 {
		t.Fatalf("after an old release's write: %d transactions totalling %d at version %d; want %d totalling %d at 12", st.TxCount, st.Total, o.Version, n+2, total+7)
	}
	if r, found, err := store.Row(ctx, "legacy-1", keyed.RowRef{Collection: "x", ID: "t-old"}); err != nil || !found || r.Int("Position") != n+1 || r.Int("Amount") != 7 {
		t.Fatalf("Row(x/t-old): %+v, %v, %v", r, found, err)
	}
}

func headProps(t *testing.T, table *aztables.Client, id string) map[string]any {
	t.Helper()
	resp, err := table.GetEntity(context.Background(), id, "h", nil)
	if err != nil {
		t.Fatal(err)
	}
	var e aztables.EDMEntity
	if err := json.Unmarshal(resp.Value, &e); err != nil {
		t.Fatal(err)
	}
	return e.Properties
}

// failingBatches fails every $batch request after the first ok ones, and
// counts the entities the batches carried.
type failingBatches struct {
	ok, batches, ops atomic.Int64
}

func (f *failingBatches) Do(r *http.Request) (*http.Response, error) {
	if strings.HasSuffix(r.URL.Path, "$batch") {
		if f.batches.Add(1) > f.ok.Load() {
			return nil, errors.New("injected: connection reset")
		}
		body, _ := io.ReadAll(r.Body)
		r.Body = io.NopCloser(bytes.NewReader(body))
		f.ops.Add(int64(bytes.Count(body, []byte("Content-Type: application/http"))))
	}
	return http.DefaultClient.Do(r)
}

// TestLegacyMigrationResumes: a migration cut short (here after 12 of its
// batches) resumes where it stopped on the next Load, rather than starting
// over (a key of a million transactions could otherwise never finish within
// a deadline), and ends in the same state.
func TestLegacyMigrationResumes(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	table, name := server.NewNamedTable(t, nil)
	open := func(transport *failingBatches) *tablestore.Store {
		opts := &aztables.ClientOptions{}
		opts.Transport = transport
		svc, err := aztables.NewServiceClientFromConnectionString(server.ConnectionString(), opts)
		if err != nil {
			t.Fatal(err)
		}
		batches, err := tablestore.NewBatchesFromConnectionString(server.ConnectionString(),
			&azcore.ClientOptions{Transport: transport, Retry: policy.RetryOptions{MaxRetries: -1}})
		if err != nil {
			t.Fatal(err)
		}
		return tablestore.New(svc.NewClient(name), batches.Table(name))
	}
	old := legacyRows{t: t, table: table, id: "legacy-2"}
	const n = 2500
	var total int64
	for i := range n {
		old.tx(i, fmt.Sprintf("t-%d", i), int64(i%7))
		total += int64(i % 7)
	}
	old.head(3, n+1, 0)

	cut := &failingBatches{}
	cut.ok.Store(12)
	if _, err := open(cut).Load(ctx, "legacy-2"); err == nil {
		t.Fatal("the migration did not fail when its batches did")
	}
	resumed := &failingBatches{}
	resumed.ok.Store(1 << 30)
	o, err := open(resumed).Load(ctx, "legacy-2")
	if err != nil {
		t.Fatal(err)
	}
	// The first run got past its first page (1,000 rows: 10 full batches and
	// the progress row), so the second writes at most the 1,500 rows after it.
	if st := orders.StateOf(o); st.TxCount != n || st.Total != total {
		t.Fatalf("after the resumed migration: %d transactions totalling %d, want %d totalling %d", st.TxCount, st.Total, n, total)
	}
	if w := resumed.ops.Load(); w > 1500+20 {
		t.Fatalf("the resumed migration wrote %d rows: it started over", w)
	}
	for _, i := range []int{0, 999, 1000, n - 1} {
		r, found, err := open(resumed).Row(ctx, "legacy-2", keyed.RowRef{Collection: "x", ID: fmt.Sprintf("t-%d", i)})
		if err != nil || !found || r.Int("Position") != int64(i) || r.Int("Amount") != int64(i%7) {
			t.Fatalf("Row(x/t-%d): %+v, %v, %v", i, r, found, err)
		}
	}
}
