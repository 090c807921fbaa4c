package devbus_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"

	"github.com/convoy-dev/convoy/handler/internal/devbus"
)

// Deferral with the real azservicebus client (default options), each
// expectation from Service Bus's "Message deferral" and "Message browsing"
// pages or azservicebus's live tests (TestReceiverDeferAndReceiveDeferredMessages,
// TestDeferredMessages, TestDeferredMessage_DeadLettering,
// TestReceiverDeferWithReceiveAndDelete).

func receiveN(ctx context.Context, t *testing.T, r interface {
	ReceiveMessages(context.Context, int, *azservicebus.ReceiveMessagesOptions) ([]*azservicebus.ReceivedMessage, error)
}, n int) []*azservicebus.ReceivedMessage {
	t.Helper()
	var got []*azservicebus.ReceivedMessage
	for len(got) < n {
		ms, err := r.ReceiveMessages(ctx, n-len(got), nil)
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, ms...)
	}
	return got
}

// receiveNone: a plain receive finds nothing within wait.
func receiveNone(t *testing.T, what string, r interface {
	ReceiveMessages(context.Context, int, *azservicebus.ReceiveMessagesOptions) ([]*azservicebus.ReceivedMessage, error)
}, wait time.Duration) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	if ms, _ := r.ReceiveMessages(ctx, 1, nil); len(ms) != 0 {
		t.Fatalf("%s: a plain receive got %s (seq %d, delivery %d)", what, ms[0].MessageID, *ms[0].SequenceNumber, ms[0].DeliveryCount)
	}
}

func peekOne(ctx context.Context, t *testing.T, r interface {
	PeekMessages(context.Context, int, *azservicebus.PeekMessagesOptions) ([]*azservicebus.ReceivedMessage, error)
}, seq int64) *azservicebus.ReceivedMessage {
	t.Helper()
	ms, err := r.PeekMessages(ctx, 1, &azservicebus.PeekMessagesOptions{FromSequenceNumber: &seq})
	if err != nil {
		t.Fatal(err)
	}
	if len(ms) == 0 || *ms[0].SequenceNumber != seq {
		return nil
	}
	return ms[0]
}

// TestDeferral (a queue without sessions): a deferred message is left out
// of plain receives, which go on with the next message; a peek shows it,
// deferred; it is received by its sequence number, still deferred, its
// first delivery counted once; abandoned it stays deferred, its delivery
// counted (TestDeferredMessages/Abandon), with the properties the abandon
// modified; deferred again it is received again with the properties the
// defer modified (TestDeferredMessages/Defer), and completed it is gone.
// A sequence number that is not a deferred message is not found.
func TestDeferral(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	_, qs, client := startBus(t, map[string]devbus.QueueProperties{"plain": {LockDuration: 5 * time.Second}})
	q := qs["plain"]
	if _, _, err := q.Send([]devbus.Message{{MessageID: "m1", Body: []byte("a")}, {MessageID: "m2", Body: []byte("b")}}); err != nil {
		t.Fatal(err)
	}
	r, err := client.NewReceiverForQueue("plain", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close(ctx)
	m1 := receiveN(ctx, t, r, 1)[0]
	if m1.MessageID != "m1" || m1.DeliveryCount != 1 {
		t.Fatalf("first receive: %s, delivery %d", m1.MessageID, m1.DeliveryCount)
	}
	seq := *m1.SequenceNumber
	if err := r.DeferMessage(ctx, m1, nil); err != nil {
		t.Fatalf("DeferMessage: %v", err)
	}
	// "Deferred messages ... can no longer be received using the regular
	// receive operations": the next plain receive is m2.
	if next := receiveN(ctx, t, r, 1)[0]; next.MessageID != "m2" || next.DeliveryCount != 1 {
		t.Fatalf("after deferring m1 a plain receive got %s (delivery %d), want m2", next.MessageID, next.DeliveryCount)
	} else if err := r.CompleteMessage(ctx, next, nil); err != nil {
		t.Fatal(err)
	}
	receiveNone(t, "with m1 deferred", r, time.Second)
	if p := peekOne(ctx, t, r, seq); p == nil || p.State != azservicebus.MessageStateDeferred || p.DeliveryCount != 1 {
		t.Fatalf("peek of deferred m1: %+v; want it, State Deferred, delivery count 1", p)
	}
	if st := q.Stats(); st.Deferred != 1 || st.Active != 0 {
		t.Fatalf("stats with m1 deferred: %+v", st)
	}

	got, err := r.ReceiveDeferredMessages(ctx, []int64{seq}, nil)
	if err != nil || len(got) != 1 || got[0].MessageID != "m1" || string(got[0].Body) != "a" {
		t.Fatalf("ReceiveDeferredMessages: %v, %v", got, err)
	}
	if got[0].State != azservicebus.MessageStateDeferred || got[0].DeliveryCount != 1 || got[0].LockedUntil == nil {
		t.Fatalf("received by sequence number: state %d, delivery %d, locked until %v; want deferred, 1, a lock", got[0].State, got[0].DeliveryCount, got[0].LockedUntil)
	}
	if again, err := r.ReceiveDeferredMessages(ctx, []int64{seq}, nil); err == nil {
		t.Fatalf("a deferred message held under a lock was received again by sequence number: %v", again)
	}
	if err := r.AbandonMessage(ctx, got[0], &azservicebus.AbandonMessageOptions{PropertiesToModify: map[string]any{"hello": "abandoned"}}); err != nil {
		t.Fatalf("abandoning the deferred message: %v", err)
	}
	receiveNone(t, "with m1 abandoned after its receive by sequence number", r, time.Second)
	if p := peekOne(ctx, t, r, seq); p == nil || p.State != azservicebus.MessageStateDeferred || p.DeliveryCount != 2 || p.ApplicationProperties["hello"] != "abandoned" {
		t.Fatalf("peek after the abandon: %+v; want m1 still deferred, delivery count 2, hello=abandoned", p)
	}

	got, err = r.ReceiveDeferredMessages(ctx, []int64{seq}, nil)
	if err != nil || len(got) != 1 || got[0].DeliveryCount != 2 {
		t.Fatalf("ReceiveDeferredMessages after the abandon: %v, %v; want m1, its second delivery", got, err)
	}
	if err := r.DeferMessage(ctx, got[0], &azservicebus.DeferMessageOptions{PropertiesToModify: map[string]any{"hello": "world"}}); err != nil {
		t.Fatalf("deferring the deferred message again: %v", err)
	}
	got, err = r.ReceiveDeferredMessages(ctx, []int64{seq}, nil)
	if err != nil || len(got) != 1 || got[0].ApplicationProperties["hello"] != "world" || got[0].DeliveryCount != 2 {
		t.Fatalf("ReceiveDeferredMessages after a second deferral: %v, %v; want hello=world, delivery 2 (a deferral is not counted)", got, err)
	}
	if err := r.CompleteMessage(ctx, got[0], nil); err != nil {
		t.Fatalf("completing the deferred message: %v", err)
	}
	if p := peekOne(ctx, t, r, seq); p != nil {
		t.Fatalf("a completed deferred message is still peeked: %+v", p)
	}
	_, err = r.ReceiveDeferredMessages(ctx, []int64{seq}, nil)
	if sbErr := (*azservicebus.Error)(nil); !errors.As(err, &sbErr) || sbErr.Code != azservicebus.CodeNotFound {
		t.Fatalf("receiving a completed message by sequence number: %v; want not found", err)
	}
	if st := q.Stats(); st.Active != 0 || st.Deferred != 0 || st.InFlight != 0 {
		t.Fatalf("stats at the end: %+v, want empty", st)
	}
}

// TestDeferredDeadLetterAndReceiveAndDelete: a deferred message received by
// sequence number is dead-lettered by its lock token
// (TestDeferredMessage_DeadLettering); a receive-and-delete receiver's
// receive by sequence number removes the message at once
// (TestReceiverDeferWithReceiveAndDelete).
func TestDeferredDeadLetterAndReceiveAndDelete(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	_, qs, client := startBus(t, map[string]devbus.QueueProperties{"plain": {LockDuration: 5 * time.Second}})
	q := qs["plain"]
	if _, _, err := q.Send([]devbus.Message{{MessageID: "m1", Body: []byte("a")}, {MessageID: "m2", Body: []byte("b")}}); err != nil {
		t.Fatal(err)
	}
	r, err := client.NewReceiverForQueue("plain", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close(ctx)
	var seqs []int64
	for _, m := range receiveN(ctx, t, r, 2) {
		seqs = append(seqs, *m.SequenceNumber)
		if err := r.DeferMessage(ctx, m, nil); err != nil {
			t.Fatal(err)
		}
	}
	got, err := r.ReceiveDeferredMessages(ctx, seqs[:1], nil)
	if err != nil || len(got) != 1 {
		t.Fatalf("ReceiveDeferredMessages: %v, %v", got, err)
	}
	reason := "because"
	if err := r.DeadLetterMessage(ctx, got[0], &azservicebus.DeadLetterOptions{Reason: &reason}); err != nil {
		t.Fatalf("dead-lettering the deferred message: %v", err)
	}
	if dead := q.DeadLetters(); len(dead) != 1 || dead[0].MessageID != "m1" || dead[0].DeadLetterReason != "because" {
		t.Fatalf("dead letters: %+v", dead)
	}
	rad, err := client.NewReceiverForQueue("plain", &azservicebus.ReceiverOptions{ReceiveMode: azservicebus.ReceiveModeReceiveAndDelete})
	if err != nil {
		t.Fatal(err)
	}
	defer rad.Close(ctx)
	got, err = rad.ReceiveDeferredMessages(ctx, seqs[1:], nil)
	if err != nil || len(got) != 1 || got[0].MessageID != "m2" {
		t.Fatalf("receive-and-delete ReceiveDeferredMessages: %v, %v", got, err)
	}
	if st := q.Stats(); st.Active != 0 || st.Deferred != 0 || st.InFlight != 0 {
		t.Fatalf("after a receive-and-delete by sequence number: %+v, want empty", st)
	}
}

// TestSessionDeferral: in a session, a deferred message does not hold the
// session's order back: the next plain receive is the message after it. It
// is received by sequence number by the receiver holding the session
// (azservicebus names the receiver's link, associated-link-name; it sends
// no session-id), and by no other session's receiver; completed by its lock
// token on $management. After the session lock expired, neither the
// receive by sequence number nor the settlement succeeds.
func TestSessionDeferral(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	_, qs, client := startBus(t, map[string]devbus.QueueProperties{"orders": {RequiresSession: true, LockDuration: 3 * time.Second}})
	q := qs["orders"]
	if _, _, err := q.Send([]devbus.Message{
		{MessageID: "a1", SessionID: "o-a", Body: []byte("1")}, {MessageID: "a2", SessionID: "o-a", Body: []byte("2")},
		{MessageID: "b1", SessionID: "o-b", Body: []byte("1")},
	}); err != nil {
		t.Fatal(err)
	}
	ra, err := client.AcceptSessionForQueue(ctx, "orders", "o-a", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer ra.Close(ctx)
	a1 := receiveN(ctx, t, ra, 1)[0]
	if a1.MessageID != "a1" {
		t.Fatalf("session o-a starts with %s", a1.MessageID)
	}
	seq := *a1.SequenceNumber
	if err := ra.DeferMessage(ctx, a1, nil); err != nil {
		t.Fatalf("DeferMessage: %v", err)
	}
	a2 := receiveN(ctx, t, ra, 1)[0]
	if a2.MessageID != "a2" {
		t.Fatalf("after deferring a1 the session gives %s, want a2 (a deferred message does not block the session)", a2.MessageID)
	}
	if err := ra.CompleteMessage(ctx, a2, nil); err != nil {
		t.Fatal(err)
	}
	rb, err := client.AcceptSessionForQueue(ctx, "orders", "o-b", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer rb.Close(ctx)
	if got, err := rb.ReceiveDeferredMessages(ctx, []int64{seq}, nil); err == nil {
		t.Fatalf("session o-b's receiver received o-a's deferred message: %v", got)
	}
	if p := peekOne(ctx, t, ra, seq); p == nil || p.State != azservicebus.MessageStateDeferred {
		t.Fatalf("peek of the deferred a1: %+v", p)
	}
	got, err := ra.ReceiveDeferredMessages(ctx, []int64{seq}, nil)
	if err != nil || len(got) != 1 || got[0].MessageID != "a1" || *got[0].SessionID != "o-a" {
		t.Fatalf("ReceiveDeferredMessages in session o-a: %v, %v", got, err)
	}
	if err := ra.CompleteMessage(ctx, got[0], nil); err != nil {
		t.Fatalf("completing a1 received by sequence number: %v", err)
	}
	if st := q.Stats(); st.Active != 1 || st.Deferred != 0 {
		t.Fatalf("after completing o-a: %+v, want b1 alone", st)
	}
}
