package devbus_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"

	"github.com/convoy-dev/convoy/handler/convoy"
	"github.com/convoy-dev/convoy/handler/internal/devbus"
	"github.com/convoy-dev/convoy/handler/replay"
	"github.com/convoy-dev/convoy/handler/servicebus"
)

// The product's replay (handler/replay over handler/servicebus's
// DeadLetters, as the program wires it) with the real azservicebus client
// against the emulation, on a queue with Service Bus's default lock duration
// of a minute: a replay releases at once every dead letter it received and
// did not take, and closes holding none (issue 33, item 5). Service Bus keeps
// a closed receiver's locks until they expire, and a dead letter abandoned
// while the receiver's link still has credit is delivered straight back into
// it, so a replay that abandons and then closes can leave another order's
// dead letter locked for the lock duration.

// deadLetter dead-letters seq of order on q (one delivery allowed), as the
// processor's failures do.
func deadLetter(t *testing.T, ctx context.Context, q *devbus.Queue, order string, seq int64, body string) {
	t.Helper()
	id := fmt.Sprintf("L-%s:%d", order, seq)
	if _, _, err := q.Send([]devbus.Message{{MessageID: id, SessionID: order, ContentType: "application/json",
		Properties: map[string]any{convoy.PropSeq: seq, convoy.PropLedgerID: "L-" + order}, Body: []byte(body)}}); err != nil {
		t.Fatal(err)
	}
	lock := q.AcceptSession(ctx, 0)
	if lock == nil {
		t.Fatalf("no session of %s", order)
	}
	msgs, err := lock.Next(ctx, 1, time.Second)
	if err != nil || len(msgs) != 1 {
		t.Fatalf("receive %s: %v %v", id, msgs, err)
	}
	if err := lock.Settle(msgs, false); err != nil {
		t.Fatal(err)
	}
	lock.Release()
}

// replayOrder is the program's replay of one order: a dead-letter receiver
// of its own, closed after the run.
func replayOrder(t *testing.T, ctx context.Context, client *azservicebus.Client, order string, opts replay.Options) replay.Report {
	t.Helper()
	sender, err := servicebus.NewSender(client, "orders")
	if err != nil {
		t.Fatal(err)
	}
	defer sender.Close(ctx)
	dl, err := servicebus.NewDeadLetters(client, "orders")
	if err != nil {
		t.Fatal(err)
	}
	rep, err := replay.Order(ctx, dl, sender, order, opts)
	if cerr := dl.Close(ctx); cerr != nil {
		t.Errorf("close the dead-letter receiver: %v", cerr)
	}
	if err != nil {
		t.Fatalf("replay of %s: %v (%+v)", order, err, rep)
	}
	return rep
}

// receivable reports the dead letters of q that no receiver holds: what
// another reader can receive at once.
func receivable(q *devbus.Queue) []devbus.LockedDeadLetter {
	got := q.ReceiveDeadLetters(1000)
	for _, m := range got {
		_ = q.AbandonDeadLetter(m.SequenceNumber, m.LockToken)
	}
	return got
}

// TestReplayReleasesOtherOrders follows the README's heal: replay the
// transient order, then settle the poison order's dead letter (a skip does
// so with a replay of that seq alone): the second finds it unlocked, and so
// does another receiver right after the first replay.
func TestReplayReleasesOtherOrders(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	_, qs, client := startBus(t, map[string]devbus.QueueProperties{"orders": {RequiresSession: true, RequiresDuplicateDetection: true, MaxDeliveryCount: 1}})
	q := qs["orders"]
	deadLetter(t, ctx, q, "poison", 2, `{"transaction":{"orderId":"poison","op":"AddTransaction","txId":"t-1","amount":"a lot"}}`)
	deadLetter(t, ctx, q, "transient", 2, `{"transaction":{"orderId":"transient","op":"AddTransaction","txId":"t-1","amount":5}}`)
	for i := range 3 {
		deadLetter(t, ctx, q, fmt.Sprintf("other-%d", i), 2, `{}`)
	}

	rep := replayOrder(t, ctx, client, "transient", replay.Options{})
	if len(rep.Replayed) != 1 || rep.Incomplete != nil {
		t.Fatalf("replay of the transient order: %+v", rep)
	}
	if got := receivable(q); len(got) != 4 {
		t.Fatalf("right after the replay, %d of the 4 other dead letters can be received: the replay left the others locked", len(got))
	}

	// The skip's settling of the poison order's seq 2: the order counts it
	// as applied, so its dead letter is completed as a duplicate.
	skipped := replay.Options{Orders: appliedAt{"poison": 2}, Select: func(d replay.DeadLetter) bool {
		n, ok := convoy.IntProperty(d.Properties[convoy.PropSeq])
		return ok && n == 2
	}}
	rep = replayOrder(t, ctx, client, "poison", skipped)
	if len(rep.Duplicates) != 1 || rep.Incomplete != nil {
		t.Fatalf("settling the skipped seq: %+v, want its dead letter completed", rep)
	}
	if got := receivable(q); len(got) != 3 {
		t.Fatalf("after the second replay, %d of the 3 other dead letters can be received", len(got))
	}
	for _, m := range q.DeadLetters() {
		if m.SessionID == "poison" || m.SessionID == "transient" {
			t.Errorf("dead letter of %s left: %s", m.SessionID, m.MessageID)
		}
	}
}

// TestReplaysInARow: replays of one order after another, and of the same
// order twice, each see every dead letter of their order (none answers
// "locked by another reader"), and leave the rest receivable.
func TestReplaysInARow(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	_, qs, client := startBus(t, map[string]devbus.QueueProperties{"orders": {RequiresSession: true, RequiresDuplicateDetection: true, MaxDeliveryCount: 1}})
	q := qs["orders"]
	for i := range 4 {
		deadLetter(t, ctx, q, fmt.Sprintf("o-%d", i), 2, `{}`)
	}
	for _, order := range []string{"o-0", "o-1", "o-1", "o-3"} {
		rep := replayOrder(t, ctx, client, order, replay.Options{Orders: appliedAt{}})
		if rep.Incomplete != nil {
			t.Fatalf("replay of %s: %+v, want every dead letter of the order seen", order, rep)
		}
		left := 0
		for _, m := range q.DeadLetters() {
			if m.SessionID == order {
				t.Errorf("replay of %s left its dead letter %s", order, m.MessageID)
			}
			left++
		}
		if got := receivable(q); len(got) != left {
			t.Fatalf("after the replay of %s, %d of %d dead letters can be received", order, len(got), left)
		}
	}
}

// appliedAt is a replay.OrderReader with fixed appliedSeqs (0 for others).
type appliedAt map[string]int64

func (a appliedAt) Load(_ context.Context, id string) (*convoy.Key, error) {
	return &convoy.Key{ID: id, AppliedSeq: a[id]}, nil
}
