package servicebus_test

import (
	"os"
	"testing"

	"github.com/convoy-dev/convoy/handler/convoy"
	"github.com/convoy-dev/convoy/handler/orders"
	"github.com/convoy-dev/convoy/handler/servicebus"
)

func TestToMessage(t *testing.T) {
	amount := int64(1250)
	body, _ := orders.EncodeBody(orders.Transaction{OrderID: "o-1", Op: orders.AddTransaction, TxID: "t-1", Amount: &amount})
	for _, last := range []bool{false, true} {
		m := servicebus.ToMessage(convoy.Envelope{SessionID: "o-1", MessageID: "L-1:2", LedgerID: "L-1", Seq: 2, Last: last, Body: body})
		if *m.SessionID != "o-1" || *m.MessageID != "L-1:2" || *m.ContentType != "application/json" || string(m.Body) != string(body) {
			t.Fatalf("message %+v", m)
		}
		if m.ApplicationProperties["ledgerId"] != "L-1" || m.ApplicationProperties["seq"] != int64(2) {
			t.Fatalf("properties %v", m.ApplicationProperties)
		}
		if v, ok := m.ApplicationProperties["last"]; ok != last || (ok && v != true) {
			t.Fatalf("last=%v gives properties %v", last, m.ApplicationProperties)
		}
		if m.PartitionKey != nil || m.TimeToLive != nil || m.ScheduledEnqueueTime != nil {
			t.Fatalf("unexpected fields set: %+v", m)
		}
	}
}

// TestLiveNamespace sends and receives through a real namespace when one is
// configured; it skips otherwise.
func TestLiveNamespace(t *testing.T) {
	cs := os.Getenv("SERVICEBUS_LIVE_CONNECTION_STRING")
	if cs == "" {
		t.Skip("SERVICEBUS_LIVE_CONNECTION_STRING is not set: no live Service Bus namespace to test against")
	}
	runLive(t, cs)
}
