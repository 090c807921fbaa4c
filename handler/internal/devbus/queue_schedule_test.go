package devbus_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"

	"github.com/convoy-dev/convoy/handler/internal/devbus"
)

// Scheduled messages and the empty SessionId with the real azservicebus
// client (default options). Sources: "Message sequencing and timestamps"
// (Scheduled messages), "Message browsing", azservicebus's live tests
// Test_Sender_ScheduleMessages (testScheduleMessages) and
// TestSessionReceiver_blankSessionIDs.

// TestScheduledMessages: ScheduleMessages answers one sequence number per
// message; a peek shows the scheduled messages, State Scheduled, by those
// numbers; a plain receive gets none before its time; a message sent with
// ScheduledEnqueueTime is scheduled too; a cancelled one is deleted and
// never delivered; at its time a scheduled message is appended to the
// queue as if enqueued then, with a new sequence number, after what was
// enqueued meanwhile, and is received, active, its ScheduledEnqueueTime
// kept.
func TestScheduledMessages(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	_, qs, client := startBus(t, map[string]devbus.QueueProperties{"plain": {}})
	q := qs["plain"]
	s, err := client.NewSender("plain", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close(ctx)
	at := time.Now().Add(2 * time.Second)
	seqs, err := s.ScheduleMessages(ctx, []*azservicebus.Message{{MessageID: strPtr("soon"), Body: []byte("soon")}, {MessageID: strPtr("cancelled"), Body: []byte("cancelled")}}, at, nil)
	if err != nil || len(seqs) != 2 {
		t.Fatalf("ScheduleMessages: %v, %v; want two sequence numbers", seqs, err)
	}
	if err := s.SendMessage(ctx, &azservicebus.Message{MessageID: strPtr("by-field"), Body: []byte("by the field"), ScheduledEnqueueTime: &at}, nil); err != nil {
		t.Fatalf("a send with ScheduledEnqueueTime: %v", err)
	}
	if err := s.SendMessage(ctx, &azservicebus.Message{MessageID: strPtr("now"), Body: []byte("now")}, nil); err != nil {
		t.Fatal(err)
	}
	r, err := client.NewReceiverForQueue("plain", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close(ctx)
	peeked, err := r.PeekMessages(ctx, 10, &azservicebus.PeekMessagesOptions{FromSequenceNumber: &seqs[0]})
	if err != nil || len(peeked) != 4 {
		t.Fatalf("peek: %v, %v; want the three scheduled messages and the active one", peeked, err)
	}
	for i, p := range peeked[:3] {
		if p.State != azservicebus.MessageStateScheduled || p.ScheduledEnqueueTime == nil || !p.ScheduledEnqueueTime.Equal(at.Truncate(time.Millisecond)) {
			t.Fatalf("peeked %s: state %d, scheduled for %v; want scheduled for %v", p.MessageID, p.State, p.ScheduledEnqueueTime, at)
		}
		if i < 2 && *p.SequenceNumber != seqs[i] {
			t.Fatalf("peeked %s as seq %d, want %d, the one ScheduleMessages answered", p.MessageID, *p.SequenceNumber, seqs[i])
		}
	}
	if err := s.CancelScheduledMessages(ctx, seqs[1:], nil); err != nil {
		t.Fatalf("CancelScheduledMessages: %v", err)
	}
	now := receiveN(ctx, t, r, 1)[0]
	if now.MessageID != "now" {
		t.Fatalf("the first receive got %s, want the message sent active", now.MessageID)
	}
	if err := r.CompleteMessage(ctx, now, nil); err != nil {
		t.Fatal(err)
	}
	if st := q.Stats(); st.Scheduled != 2 || st.Active != 0 {
		t.Fatalf("before their time: %+v, want two scheduled, none active", st)
	}
	receiveNone(t, "before the scheduled time", r, time.Until(at)-300*time.Millisecond)
	got := receiveN(ctx, t, r, 2)
	if time.Now().Before(at.Truncate(time.Millisecond)) { // at travels in whole milliseconds
		t.Fatalf("scheduled messages received at %v, before %v", time.Now(), at)
	}
	for i, want := range []string{"soon", "by-field"} {
		m := got[i]
		if m.MessageID != want || m.State != azservicebus.MessageStateActive || m.ScheduledEnqueueTime == nil {
			t.Fatalf("received %s (state %d, scheduled %v), want %s, active, with its ScheduledEnqueueTime", m.MessageID, m.State, m.ScheduledEnqueueTime, want)
		}
		if *m.SequenceNumber <= *now.SequenceNumber || *m.SequenceNumber == seqs[0] {
			t.Fatalf("%s received as seq %d; want a new sequence number, after %d (message-sequencing.md)", m.MessageID, *m.SequenceNumber, *now.SequenceNumber)
		}
		if err := r.CompleteMessage(ctx, m, nil); err != nil {
			t.Fatal(err)
		}
	}
	receiveNone(t, "after the cancelled message's time", r, 500*time.Millisecond)
	if st := q.Stats(); st.Scheduled != 0 || st.Active != 0 {
		t.Fatalf("at the end: %+v, want empty", st)
	}
}

// TestScheduledMessagesOnASessionQueue: a scheduled message of a session
// becomes its session's next message at its time; one without a SessionId
// is refused on a session queue, as a send is (400 with amqp:not-allowed,
// the status @azure/core-amqp's ConditionStatusMapper pairs with it; a 400
// is not final to azservicebus, which retries it: the check uses a client
// without retries to be quick).
func TestScheduledMessagesOnASessionQueue(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	b, _, client := startBus(t, map[string]devbus.QueueProperties{"orders": {RequiresSession: true}})
	noRetry, err := azservicebus.NewClientFromConnectionString(b.ConnectionString(), &azservicebus.ClientOptions{RetryOptions: azservicebus.RetryOptions{MaxRetries: -1}})
	if err != nil {
		t.Fatal(err)
	}
	defer noRetry.Close(ctx)
	refused, err := noRetry.NewSender("orders", nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := refused.ScheduleMessages(ctx, []*azservicebus.Message{{Body: []byte("no session")}}, time.Now().Add(time.Second), nil); err == nil || !strings.Contains(err.Error(), "SessionId was not set") {
		t.Fatalf("a scheduled message without SessionId on a session queue: %v; want refused", err)
	}
	s, err := client.NewSender("orders", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close(ctx)
	at := time.Now().Add(time.Second)
	if _, err := s.ScheduleMessages(ctx, []*azservicebus.Message{{MessageID: strPtr("later"), SessionID: strPtr("o-1")}}, at, nil); err != nil {
		t.Fatal(err)
	}
	if err := s.SendMessage(ctx, &azservicebus.Message{MessageID: strPtr("first"), SessionID: strPtr("o-1")}, nil); err != nil {
		t.Fatal(err)
	}
	r, err := client.AcceptSessionForQueue(ctx, "orders", "o-1", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close(ctx)
	for _, want := range []string{"first", "later"} {
		m := receiveN(ctx, t, r, 1)[0]
		if m.MessageID != want {
			t.Fatalf("session o-1 gave %s, want %s", m.MessageID, want)
		}
		if err := r.CompleteMessage(ctx, m, nil); err != nil {
			t.Fatal(err)
		}
	}
}

// TestBlankSessionID: TestSessionReceiver_blankSessionIDs against the
// emulation: a message sent, and one scheduled, with SessionID "" are
// accepted on a session queue; AcceptSessionForQueue(ctx, queue, "")
// accepts the session ""; both messages come back with SessionID "". The
// next available session can be "" too. A message with no SessionId at
// all is still refused (amqp:not-allowed).
func TestBlankSessionID(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	_, qs, client := startBus(t, map[string]devbus.QueueProperties{"orders": {RequiresSession: true}})
	s, err := client.NewSender("orders", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close(ctx)
	if err := s.SendMessage(ctx, &azservicebus.Message{Body: []byte("session-based message"), SessionID: strPtr("")}, nil); err != nil {
		t.Fatalf("a send with SessionID \"\": %v", err)
	}
	seqs, err := s.ScheduleMessages(ctx, []*azservicebus.Message{{Body: []byte("session-based message"), SessionID: strPtr("")}}, time.Now(), nil)
	if err != nil || len(seqs) == 0 {
		t.Fatalf("ScheduleMessages with SessionID \"\": %v, %v", seqs, err)
	}
	r, err := client.AcceptSessionForQueue(ctx, "orders", "", nil)
	if err != nil {
		t.Fatalf("AcceptSessionForQueue with \"\": %v", err)
	}
	if r.SessionID() != "" || r.LockedUntil().IsZero() {
		t.Fatalf("accepted session %q locked until %v", r.SessionID(), r.LockedUntil())
	}
	for _, m := range receiveN(ctx, t, r, 2) {
		if m.SessionID == nil || *m.SessionID != "" || string(m.Body) != "session-based message" {
			t.Fatalf("received %q with SessionID %v, want SessionID \"\"", m.Body, m.SessionID)
		}
		if err := r.CompleteMessage(ctx, m, nil); err != nil {
			t.Fatal(err)
		}
	}
	_ = r.Close(ctx)

	if err := s.SendMessage(ctx, &azservicebus.Message{Body: []byte("again"), SessionID: strPtr("")}, nil); err != nil {
		t.Fatal(err)
	}
	next, err := client.AcceptNextSessionForQueue(ctx, "orders", nil)
	if err != nil || next.SessionID() != "" {
		t.Fatalf("AcceptNextSessionForQueue: %v; want the session \"\"", err)
	}
	if m := receiveN(ctx, t, next, 1)[0]; string(m.Body) != "again" {
		t.Fatalf("next session gave %q", m.Body)
	}
	_ = next.Close(ctx)
	if st := qs["orders"].Stats(); st.Sessions != 1 {
		t.Fatalf("stats: %+v, want the one session \"\"", st)
	}

	err = s.SendMessage(ctx, &azservicebus.Message{Body: []byte("no session")}, nil)
	if err == nil || !strings.Contains(err.Error(), "amqp:not-allowed") {
		t.Fatalf("a send without SessionId: %v; want amqp:not-allowed", err)
	}
}

func strPtr(s string) *string { return &s }
