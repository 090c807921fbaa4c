package servicebus_test

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"

	"github.com/convoy-dev/convoy/handler/internal/ledgertest"
	"github.com/convoy-dev/convoy/handler/internal/memstore"
	"github.com/convoy-dev/convoy/handler/ledger"
	"github.com/convoy-dev/convoy/handler/servicebus"
)

// runLive publishes a small ledger to the session-enabled queue named by
// SERVICEBUS_LIVE_ORDERS_QUEUE (default "orders") and reads its messages back.
func runLive(t *testing.T, connectionString string) {
	queue := os.Getenv("SERVICEBUS_LIVE_ORDERS_QUEUE")
	if queue == "" {
		queue = "orders"
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	client, err := azservicebus.NewClientFromConnectionString(connectionString, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close(ctx)
	sender, err := servicebus.NewSender(client, queue)
	if err != nil {
		t.Fatal(err)
	}
	defer sender.Close(ctx)
	order := fmt.Sprintf("live-%d", time.Now().UnixNano())
	p := ledgertest.Publisher(memstore.NewLedgers(), sender, ledger.PublisherOptions{})
	if _, err := p.Publish(ctx, ledgertest.Doc("L-"+order, 3, []string{order}, 0)); err != nil {
		t.Fatal(err)
	}
	recv, err := client.AcceptSessionForQueue(ctx, queue, order, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer recv.Close(ctx)
	var seqs []int64
	for len(seqs) < 3 {
		msgs, err := recv.ReceiveMessages(ctx, 3, nil)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range msgs {
			seqs = append(seqs, m.ApplicationProperties["seq"].(int64))
			if err := recv.CompleteMessage(ctx, m, nil); err != nil {
				t.Fatal(err)
			}
		}
	}
	if seqs[0] != 1 || seqs[1] != 2 || seqs[2] != 3 {
		t.Fatalf("received seqs %v, want 1 2 3", seqs)
	}
}
