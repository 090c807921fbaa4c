package tablestore_test

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/data/aztables"

	"github.com/convoy-dev/convoy/handler/convoy"
	"github.com/convoy-dev/convoy/handler/tablestore"
)

// BenchmarkProcessVsBareUpsert: one message through the processor (cache
// warm: one entity-group transaction) against the least any durable design
// pays, one plain entity upsert, measured alternately in the same run.
func BenchmarkProcessVsBareUpsert(b *testing.B) {
	ctx := context.Background()
	table := server.NewTable(b, nil)
	p := convoy.NewProcessor(tablestore.New(table), convoy.ProcessorOptions{})
	if _, err := p.Process(ctx, "o-1", []convoy.Message{msg(1, convoy.CreateOrder, "")}); err != nil {
		b.Fatal(err)
	}
	var base, subject time.Duration
	b.ResetTimer()
	for i := range b.N {
		entity, _ := json.Marshal(aztables.EDMEntity{Entity: aztables.Entity{PartitionKey: "bare", RowKey: fmt.Sprint(i)},
			Properties: map[string]any{"TxId": fmt.Sprintf("t-%d", i), "Amount": aztables.EDMInt64(i)}})
		t0 := time.Now()
		if _, err := table.UpsertEntity(ctx, entity, nil); err != nil {
			b.Fatal(err)
		}
		t1 := time.Now()
		if _, err := p.Process(ctx, "o-1", []convoy.Message{msg(int64(i+2), convoy.AddTransaction, fmt.Sprintf("t-%d", i))}); err != nil {
			b.Fatal(err)
		}
		base, subject = base+t1.Sub(t0), subject+time.Since(t1)
	}
	b.ReportMetric(float64(subject)/float64(base), "x_bare_upsert")
	b.ReportMetric(float64(subject.Nanoseconds())/float64(b.N), "ns/message")
}

// BenchmarkBatchVsSingle: messages applied per second with a contiguous
// batch of 100 in one call (cardinality many) against one call per message.
func BenchmarkBatchVsSingle(b *testing.B) {
	ctx := context.Background()
	single := convoy.NewProcessor(tablestore.New(server.NewTable(b, nil)), convoy.ProcessorOptions{})
	batched := convoy.NewProcessor(tablestore.New(server.NewTable(b, nil)), convoy.ProcessorOptions{})
	const n = 100
	var base, subject time.Duration
	b.ResetTimer()
	for i := range b.N {
		order := fmt.Sprintf("o-%d", i)
		msgs := []convoy.Message{msg(1, convoy.CreateOrder, "")}
		for seq := int64(2); seq <= n; seq++ {
			msgs = append(msgs, msg(seq, convoy.AddTransaction, fmt.Sprintf("t-%d", seq)))
		}
		for k := range msgs {
			msgs[k].Tx.OrderID = order
		}
		t0 := time.Now()
		for _, m := range msgs {
			if _, err := single.Process(ctx, order, []convoy.Message{m}); err != nil {
				b.Fatal(err)
			}
		}
		t1 := time.Now()
		if _, err := batched.Process(ctx, order, msgs); err != nil {
			b.Fatal(err)
		}
		base, subject = base+t1.Sub(t0), subject+time.Since(t1)
	}
	b.ReportMetric(float64(base)/float64(subject), "x_faster_than_single")
}
