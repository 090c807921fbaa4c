package devbus_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"

	"github.com/convoy-dev/convoy/handler/convoy"
	"github.com/convoy-dev/convoy/handler/fault"
	"github.com/convoy-dev/convoy/handler/internal/devbus"
	"github.com/convoy-dev/convoy/handler/servicebus"
)

// The product's Service Bus adapters (handler/servicebus), the code that
// runs in Azure, against the emulation with the real azservicebus client.
// Expectations are Service Bus's documented behaviour: message-sessions.md
// (FIFO per session, SessionId as the AMQP group-id), duplicate-detection.md,
// service-bus-dead-letter-queues.md, message-browsing.md, service-bus-quotas.md.

func startBus(t *testing.T, queues map[string]devbus.QueueProperties) (*devbus.Bus, map[string]*devbus.Queue, *azservicebus.Client) {
	t.Helper()
	qs := map[string]*devbus.Queue{}
	for name, p := range queues {
		qs[name] = devbus.NewQueue(name, p)
	}
	b, err := devbus.StartBus("127.0.0.1:0", qs, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(b.Close)
	c, err := azservicebus.NewClientFromConnectionString(b.ConnectionString(), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close(context.Background()) })
	return b, qs, c
}

func orderMessage(order string, seq int64, body string) convoy.Envelope {
	return convoy.Envelope{SessionID: order, MessageID: fmt.Sprintf("L-%s:%d", order, seq), LedgerID: "L-" + order, Seq: seq, Body: []byte(body)}
}

// TestSenderAdapter: the publisher's batches carry SessionId, MessageId,
// ContentType and the seq properties; each session comes back in order; a
// MessageId seen within the window is dropped; a ledger over the entity's
// size is refused as too large.
func TestSenderAdapter(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, _, client := startBus(t, map[string]devbus.QueueProperties{"orders": {RequiresSession: true, RequiresDuplicateDetection: true}})
	sender, err := servicebus.NewSender(client, "orders")
	if err != nil {
		t.Fatal(err)
	}
	defer sender.Close(ctx)
	send := func(msgs ...convoy.Envelope) {
		b, err := sender.NewBatch(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range msgs {
			if err := b.Add(m); err != nil {
				t.Fatal(err)
			}
		}
		if err := sender.SendBatch(ctx, b); err != nil {
			t.Fatal(err)
		}
	}
	// Interleaved orders, and a body large enough to span frames (65,536 bytes).
	big := `{"pad":"` + strings.Repeat("x", 150_000) + `"}`
	send(orderMessage("o-a", 1, "{}"), orderMessage("o-b", 1, "{}"), orderMessage("o-a", 2, big), orderMessage("o-b", 2, "{}"))
	send(orderMessage("o-a", 2, "{}")) // the same MessageId again: dropped
	for _, order := range []string{"o-a", "o-b"} {
		r, err := client.AcceptSessionForQueue(ctx, "orders", order, nil)
		if err != nil {
			t.Fatal(err)
		}
		var got []*azservicebus.ReceivedMessage
		for len(got) < 2 {
			msgs, err := r.ReceiveMessages(ctx, 2, nil)
			if err != nil {
				t.Fatal(err)
			}
			got = append(got, msgs...)
		}
		for i, m := range got {
			want := orderMessage(order, int64(i+1), "")
			if m.MessageID != want.MessageID || *m.SessionID != order || *m.ContentType != convoy.ContentType ||
				m.ApplicationProperties["seq"] != int64(i+1) || m.ApplicationProperties["ledgerId"] != want.LedgerID || m.DeliveryCount != 1 {
				t.Fatalf("session %s message %d: %s %v %v %v (delivery %d)", order, i, m.MessageID, *m.SessionID, *m.ContentType, m.ApplicationProperties, m.DeliveryCount)
			}
			if order == "o-a" && i == 1 && string(m.Body) != big {
				t.Fatalf("the large body came back as %d bytes, want %d", len(m.Body), len(big))
			}
			if err := r.CompleteMessage(ctx, m, nil); err != nil {
				t.Fatal(err)
			}
		}
		short, cancelShort := context.WithTimeout(ctx, 300*time.Millisecond)
		extra, _ := r.ReceiveMessages(short, 1, nil)
		cancelShort()
		if len(extra) != 0 {
			t.Fatalf("session %s: %s delivered again (duplicate detection)", order, extra[0].MessageID)
		}
		_ = r.Close(ctx)
	}
	err = sender.SendLedger(ctx, "L-huge", "s", []byte(strings.Repeat("x", devbus.MaxMessageBytes+1)))
	if fault.CodeOf(err) != fault.TooLarge {
		t.Fatalf("a ledger over the entity's size: %v, want TooLarge", err)
	}
}

// TestDeadLetterAdapter: replay's dead-letter source receives under a lock
// (a second reader does not see a locked dead letter), peeks from a
// sequence number without locking, completes and abandons by lock, and reads
// the reason Service Bus wrote.
func TestDeadLetterAdapter(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 40*time.Second)
	defer cancel()
	_, qs, client := startBus(t, map[string]devbus.QueueProperties{"orders": {RequiresSession: true, MaxDeliveryCount: 2}})
	q := qs["orders"]
	if _, _, err := q.Send([]devbus.Message{{MessageID: "m1", SessionID: "o-1", Body: []byte("a"), Properties: map[string]any{"seq": int64(1)}},
		{MessageID: "m2", SessionID: "o-2", Body: []byte("b"), Properties: map[string]any{"seq": int64(1)}}}); err != nil {
		t.Fatal(err)
	}
	// Abandon each twice through a session receiver: MaxDeliveryCountExceeded.
	for range 2 {
		for _, order := range []string{"o-1", "o-2"} {
			r, err := client.AcceptSessionForQueue(ctx, "orders", order, nil)
			if err != nil {
				t.Fatal(err)
			}
			msgs, err := r.ReceiveMessages(ctx, 1, nil)
			if err != nil || len(msgs) != 1 {
				t.Fatal(len(msgs), err)
			}
			if err := r.AbandonMessage(ctx, msgs[0], nil); err != nil {
				t.Fatal(err)
			}
			_ = r.Close(ctx)
		}
	}
	dl, err := servicebus.NewDeadLetters(client, "orders")
	if err != nil {
		t.Fatal(err)
	}
	defer dl.Close(ctx)
	peeked, err := dl.Peek(ctx, 2, 10)
	if err != nil || len(peeked) != 1 || peeked[0].MessageID != "m2" || peeked[0].Reason != devbus.ReasonMaxDelivery || peeked[0].Handle != nil {
		t.Fatalf("peek from 2: %+v, %v", peeked, err)
	}
	got, err := dl.Receive(ctx, 10)
	if err != nil || len(got) != 2 || got[0].MessageID != "m1" || got[0].SessionID != "o-1" || got[0].Properties["seq"] != int64(1) {
		t.Fatalf("receive: %+v, %v", got, err)
	}
	other, err := servicebus.NewDeadLetters(client, "orders")
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close(ctx)
	if seen, err := other.Receive(ctx, 10); err != nil || len(seen) != 0 {
		t.Fatalf("a second reader received locked dead letters: %+v, %v", seen, err)
	}
	if all, err := other.Peek(ctx, 1, 10); err != nil || len(all) != 2 {
		t.Fatalf("peek sees locked dead letters too: %+v, %v", all, err)
	}
	if err := dl.Complete(ctx, got[0]); err != nil {
		t.Fatal(err)
	}
	if err := dl.Abandon(ctx, got[1]); err != nil {
		t.Fatal(err)
	}
	again, err := other.Receive(ctx, 10)
	if err != nil || len(again) != 1 || again[0].MessageID != "m2" {
		t.Fatalf("after complete m1 and abandon m2, a reader gets %+v, %v", again, err)
	}
	if left := q.DeadLetters(); len(left) != 1 || left[0].MessageID != "m2" {
		t.Fatalf("dead letters left: %+v", left)
	}
}

// TestDeadLetterLockExpiry: a dead letter held past its lock cannot be
// completed (Service Bus's lock lost) and stays in the sub-queue.
func TestDeadLetterLockExpiry(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	_, qs, client := startBus(t, map[string]devbus.QueueProperties{"orders": {RequiresSession: true, MaxDeliveryCount: 1, LockDuration: time.Second}})
	q := qs["orders"]
	if _, _, err := q.Send([]devbus.Message{{MessageID: "m1", SessionID: "o-1", Body: []byte("a")}}); err != nil {
		t.Fatal(err)
	}
	lock := q.AcceptSession(ctx, 0)
	msgs, _ := lock.Next(ctx, 1, time.Second)
	if err := lock.Settle(msgs, false); err != nil { // one delivery allowed: dead-lettered
		t.Fatal(err)
	}
	dl, err := servicebus.NewDeadLetters(client, "orders")
	if err != nil {
		t.Fatal(err)
	}
	defer dl.Close(ctx)
	got, err := dl.Receive(ctx, 1)
	if err != nil || len(got) != 1 {
		t.Fatalf("receive: %+v, %v", got, err)
	}
	time.Sleep(1100 * time.Millisecond)
	if err := dl.Complete(ctx, got[0]); err == nil {
		t.Fatal("completing with an expired lock succeeded")
	} else if sbErr := (*azservicebus.Error)(nil); !errors.As(err, &sbErr) || sbErr.Code != azservicebus.CodeLockLost {
		t.Fatalf("completing with an expired lock: %v, want CodeLockLost", err)
	}
	if left := q.DeadLetters(); len(left) != 1 {
		t.Fatalf("dead letters after a failed complete: %+v", left)
	}
}

// TestWrongKeyRefused: a SAS token signed with another key is refused on
// $cbs (401), which azservicebus reports as unauthorized access, at once.
func TestWrongKeyRefused(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	b, _, _ := startBus(t, map[string]devbus.QueueProperties{"orders": {RequiresSession: true}})
	wrong := strings.Replace(b.ConnectionString(), devbus.BusKey, "not-the-key", 1)
	c, err := azservicebus.NewClientFromConnectionString(wrong, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(ctx)
	s, err := c.NewSender("orders", nil)
	if err != nil {
		t.Fatal(err)
	}
	sid := "o-1"
	err = s.SendMessage(ctx, &azservicebus.Message{SessionID: &sid, Body: []byte("x")}, nil)
	if sbErr := (*azservicebus.Error)(nil); !errors.As(err, &sbErr) || sbErr.Code != azservicebus.CodeUnauthorizedAccess {
		t.Fatalf("send with a wrong key: %v, want unauthorized access", err)
	}
}

// TestReceiveAndDelete: on a queue without sessions, a receive-and-delete
// receiver removes what it receives at once; a peek-lock one leaves it
// locked until completed.
func TestReceiveAndDelete(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	_, qs, client := startBus(t, map[string]devbus.QueueProperties{"plain": {}})
	q := qs["plain"]
	if _, _, err := q.Send([]devbus.Message{{MessageID: "m1", Body: []byte("a")}, {MessageID: "m2", Body: []byte("b")}}); err != nil {
		t.Fatal(err)
	}
	rad, err := client.NewReceiverForQueue("plain", &azservicebus.ReceiverOptions{ReceiveMode: azservicebus.ReceiveModeReceiveAndDelete})
	if err != nil {
		t.Fatal(err)
	}
	got, err := rad.ReceiveMessages(ctx, 1, nil)
	if err != nil || len(got) != 1 || got[0].MessageID != "m1" {
		t.Fatalf("receive-and-delete: %v, %v", got, err)
	}
	_ = rad.Close(ctx)
	if st := q.Stats(); st.Active != 1 || st.InFlight != 0 {
		t.Fatalf("after receive-and-delete: %+v, want m2 alone, none in flight", st)
	}
	r, err := client.NewReceiverForQueue("plain", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close(ctx)
	got, err = r.ReceiveMessages(ctx, 1, nil)
	if err != nil || len(got) != 1 || got[0].MessageID != "m2" {
		t.Fatalf("peek-lock: %v, %v", got, err)
	}
	if st := q.Stats(); st.Active != 1 || st.InFlight != 1 {
		t.Fatalf("peek-locked: %+v, want m2 in flight", st)
	}
	if err := r.CompleteMessage(ctx, got[0], nil); err != nil {
		t.Fatal(err)
	}
	if st := q.Stats(); st.Active != 0 {
		t.Fatalf("after complete: %+v, want empty", st)
	}
}
