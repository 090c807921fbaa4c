package localbus_test

import (
	"strings"
	"testing"

	"github.com/convoy-dev/convoy/handler/convoy"
	"github.com/convoy-dev/convoy/handler/localbus"
)

// TestBatchCountsLikeTheSDK: the emulation's batches take what a real queue
// of the same limit takes (convoy.OrderMessage's sizes, which the servicebus
// tests check against the SDK), no more, no less.
func TestBatchCountsLikeTheSDK(t *testing.T) {
	m := convoy.OrderMessage{SessionID: "o-1", MessageID: "L:0", LedgerID: "L", Seq: 1000}
	m.Body = []byte(strings.Repeat("x", localbus.MaxBatchBytes-m.Size()))
	m.Body = m.Body[:len(m.Body)-(m.Size()-localbus.MaxBatchBytes)] // the 32-bit forms took a few bytes more
	if m.Size() != localbus.MaxBatchBytes {
		t.Fatalf("size %d", m.Size())
	}
	b, _ := localbus.NewSender("127.0.0.1:1", "orders").NewBatch(t.Context())
	if err := b.Add(m); err != nil {
		t.Fatalf("a message of exactly the limit: %v", err)
	}
	m.Body = append(m.Body, 'x')
	b, _ = localbus.NewSender("127.0.0.1:1", "orders").NewBatch(t.Context())
	if err := b.Add(m); err != convoy.ErrBatchFull {
		t.Fatalf("one byte over: %v", err)
	}
	small := convoy.OrderMessage{SessionID: "o-1", MessageID: "L:1", LedgerID: "L", Seq: 1001, Body: []byte(`{}`)}
	b, _ = localbus.NewSender("127.0.0.1:1", "orders").NewBatch(t.Context())
	n := 0
	for ; b.Add(small) == nil; n++ {
	}
	if want := 1 + (localbus.MaxBatchBytes-small.Size())/small.PayloadBytes(); n != want {
		t.Fatalf("%d small messages fit, want %d", n, want)
	}
	if w := localbus.ToWire(small); w.ApplicationProperties["seq"] != int64(1001) || w.ApplicationProperties["ledgerId"] != "L" || w.Body != "{}" {
		t.Fatalf("wire %+v", w)
	}
}
