package commitshape_test

import (
	"encoding/json"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/to"
	"github.com/Azure/azure-sdk-for-go/sdk/data/aztables"

	"github.com/convoy-dev/convoy/handler/convoy"
	"github.com/convoy-dev/convoy/handler/internal/azurite"
	"github.com/convoy-dev/convoy/handler/internal/bench/commitshape"
	"github.com/convoy-dev/convoy/handler/orders"
	"github.com/convoy-dev/convoy/handler/tablestore"
)

// TestActionsAreTheProcessorsCommit holds the benchmarks' baseline to the
// handler: the rows an AddTransaction commit of the real processor and
// store leaves in Azurite, and the rows Actions leaves there, have the same
// keys' form and length and the same properties with the same types.
func TestActionsAreTheProcessorsCommit(t *testing.T) {
	az, err := azurite.Start(azurite.Options{})
	if err != nil {
		t.Fatalf("this test needs Azurite: %v", err)
	}
	defer az.Stop()
	table, name := az.NewNamedTable(t, nil)
	batches, err := tablestore.NewBatchesFromConnectionString(az.ConnectionString(), nil)
	if err != nil {
		t.Fatal(err)
	}
	p := convoy.NewProcessor(tablestore.New(table, batches.Table(name)), convoy.ProcessorOptions{Domain: orders.Domain})

	const processed, submitted = "order-00001", "order-00002" // the same length, as the bench's ids
	process := func(m convoy.Message) {
		t.Helper()
		if _, err := p.Process(t.Context(), processed, []convoy.Message{m}); err != nil {
			t.Fatal(err)
		}
	}
	process(convoy.Message{Seq: 1, MessageID: "l:0", EnqueuedAt: time.Now().Add(-100 * time.Millisecond), Command: orders.Transaction{OrderID: processed, Op: orders.CreateOrder, Currency: "EUR"}})
	before := rows(t, table, processed)
	process(convoy.Message{Seq: 2, MessageID: "l:1", EnqueuedAt: time.Now().Add(-100 * time.Millisecond), Command: orders.Transaction{OrderID: processed, Op: orders.AddTransaction, TxID: "t-2", Amount: to.Ptr[int64](2)}})
	committed := map[string]map[string]string{}
	for key, row := range rows(t, table, processed) {
		if prev, ok := before[key]; !ok || prev["odata.etag"] != row["odata.etag"] {
			committed[shapeOfKey(key)] = shapeOf(row)
		}
	}

	if _, err := table.SubmitTransaction(t.Context(), commitshape.Actions(submitted, 2), nil); err != nil {
		t.Fatal(err)
	}
	baseline := map[string]map[string]string{}
	for key, row := range rows(t, table, submitted) {
		baseline[shapeOfKey(key)] = shapeOf(row)
	}

	if len(committed) != 4 {
		t.Fatalf("the commit wrote %d rows, want a marker, the head and a transaction's two rows: %v", len(committed), committed)
	}
	for _, key := range slices.Sorted(maps.Keys(committed)) {
		if got, want := baseline[key], committed[key]; !maps.Equal(got, want) {
			t.Errorf("row %s: Actions wrote %v, the processor's commit %v", key, got, want)
		}
	}
	if len(baseline) != len(committed) {
		t.Errorf("Actions wrote rows %v, the commit %v", slices.Sorted(maps.Keys(baseline)), slices.Sorted(maps.Keys(committed)))
	}
}

// rows reads a partition: row key → the entity as Azurite returns it.
func rows(t *testing.T, table *aztables.Client, partition string) map[string]map[string]any {
	t.Helper()
	out := map[string]map[string]any{}
	pager := table.NewListEntitiesPager(&aztables.ListEntitiesOptions{Filter: to.Ptr(fmt.Sprintf("PartitionKey eq '%s'", partition))})
	for pager.More() {
		page, err := pager.NextPage(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		for _, raw := range page.Entities {
			var e map[string]any
			if err := json.Unmarshal(raw, &e); err != nil {
				t.Fatal(err)
			}
			out[e["RowKey"].(string)] = e
		}
	}
	if len(out) == 0 {
		t.Fatalf("partition %s is empty", partition)
	}
	return out
}

var digits = regexp.MustCompile(`[0-9]`)

// shapeOfKey is a row key with its digits masked: its form and length.
func shapeOfKey(key string) string { return digits.ReplaceAllString(key, "#") }

// shapeOf is a row's properties: name → JSON kind and EDM type annotation.
func shapeOf(row map[string]any) map[string]string {
	shape := map[string]string{}
	for k, v := range row {
		if strings.HasPrefix(k, "odata.") || strings.HasSuffix(k, "@odata.type") || k == "PartitionKey" || k == "RowKey" || k == "Timestamp" {
			continue
		}
		edm, _ := row[k+"@odata.type"].(string)
		shape[k] = fmt.Sprintf("%T %s", v, edm)
	}
	return shape
}
