package ledger_test

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/convoy-dev/convoy/handler/ledger"
	"github.com/convoy-dev/convoy/handler/ledger/ledgertest"
	"github.com/convoy-dev/convoy/handler/memstore"
)

// BenchmarkPublishVsParse: publishing a 10,000-transaction ledger over 500
// orders (validation, allocation, message building, batching; a counting
// sender) against merely decoding the same JSON into generic values.
func BenchmarkPublishVsParse(b *testing.B) {
	orders := make([]string, 500)
	for i := range orders {
		orders[i] = fmt.Sprintf("order-%03d", i)
	}
	var base, subject time.Duration
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		doc := ledgertest.Doc(fmt.Sprintf("L-%d", i), 10_000, orders, 0)
		t0 := time.Now()
		var generic any
		if err := json.Unmarshal(doc, &generic); err != nil {
			b.Fatal(err)
		}
		t1 := time.Now()
		p := ledger.NewPublisher(memstore.NewLedgers(), &countingSender{}, ledger.PublisherOptions{})
		if _, err := p.Publish(context.Background(), doc); err != nil {
			b.Fatal(err)
		}
		base, subject = base+t1.Sub(t0), subject+time.Since(t1)
	}
	b.ReportMetric(float64(subject)/float64(base), "x_json_decode")
	b.ReportMetric(float64(subject.Nanoseconds())/float64(b.N)/10_000, "ns/transaction")
}
