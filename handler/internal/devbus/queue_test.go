package devbus

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"
)

// The queue model against docs/host-contract.md, "What the host does with the
// message": session lock lifetime, lock loss, expiry. Durations are short
// so that the tests run in well under a second each.

const lockFor = 200 * time.Millisecond

func sessionQueue(p QueueProperties) *Queue {
	p.RequiresSession, p.LockDuration = true, lockFor
	return NewQueue("q", p)
}

func send(q *Queue, session string, n int, ttl ...time.Duration) {
	msgs := make([]Message, n)
	for i := range msgs {
		msgs[i] = Message{SessionID: session, MessageID: session + ":" + string(rune('a'+i))}
		if i < len(ttl) {
			msgs[i].TimeToLive = ttl[i]
		}
	}
	q.Send(msgs)
}

func ctx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	t.Cleanup(cancel)
	return c
}

func next(t *testing.T, l *SessionLock) *Message {
	t.Helper()
	msgs, err := l.Next(ctx(t), 1, time.Second)
	if err != nil || len(msgs) != 1 {
		t.Fatalf("Next: %v, %v", msgs, err)
	}
	return msgs[0]
}

// In single dispatch the lock is renewed for maxAutoLockRenewalDuration from
// acceptance, not per call, then lasts lockDuration: a session busy for
// longer loses it; completion fails; the message comes back with
// DeliveryCount +1 to whoever accepts the session next.
func TestSessionLockRenewalIsPerAcceptance(t *testing.T) {
	t.Parallel()
	q := sessionQueue(QueueProperties{})
	send(q, "s", 3)
	renew := 150 * time.Millisecond
	first := q.AcceptSession(ctx(t), renew)
	for range 2 { // busy, call after call: renewal does not restart per call
		m := next(t, first)
		time.Sleep(20 * time.Millisecond)
		if err := first.Settle([]*Message{m}, true); err != nil {
			t.Fatalf("settle within the lock: %v", err)
		}
	}
	m := next(t, first)
	time.Sleep(renew + lockFor)
	if err := first.Settle([]*Message{m}, true); !errors.Is(err, errLockLost) {
		t.Fatalf("settle after renew+lockDuration: %v, want ErrLockLost", err)
	}
	second := q.AcceptSession(ctx(t), renew)
	again := next(t, second)
	if again.MessageID != m.MessageID || again.DeliveryCount != 2 {
		t.Fatalf("after the lock loss got %s delivery %d, want %s delivery 2", again.MessageID, again.DeliveryCount, m.MessageID)
	}
	if _, err := first.Next(ctx(t), 1, time.Millisecond); !errors.Is(err, errLockLost) {
		t.Fatalf("the first receiver goes on after losing the lock: %v", err)
	}
}

// A session can be taken by a second receiver while the first still works
// on a message it received before its lock expired.
func TestSessionTakenWhileFirstCallRuns(t *testing.T) {
	t.Parallel()
	q := sessionQueue(QueueProperties{})
	send(q, "s", 1)
	first := q.AcceptSession(ctx(t), 0)
	m1 := next(t, first)
	c, cancel := context.WithTimeout(context.Background(), 2*lockFor)
	defer cancel()
	second := q.AcceptSession(c, 0) // waits until the first lock expires
	if second == nil {
		t.Fatal("no second receiver got the session after the lock expired")
	}
	m2 := next(t, second)
	if m2.SequenceNumber != m1.SequenceNumber || m2.DeliveryCount != 2 {
		t.Fatalf("second receiver got %+v", m2)
	}
	if err := second.Settle([]*Message{m2}, true); err != nil {
		t.Fatal(err)
	}
	if err := first.Settle([]*Message{m1}, true); !errors.Is(err, errLockLost) {
		t.Fatalf("the first call's completion: %v, want ErrLockLost", err)
	}
	if !q.Idle() {
		t.Fatalf("queue not idle: %+v", q.Stats())
	}
}

// Batch dispatch never renews: the lock lasts lockDuration from acceptance.
// Infinite renewal (maxAutoLockRenewalDuration < 0) never loses it.
func TestLockWithoutRenewalAndWithoutEnd(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		renew time.Duration
		lost  bool
	}{{0, true}, {-1, false}} {
		q := sessionQueue(QueueProperties{})
		send(q, "s", 2)
		l := q.AcceptSession(ctx(t), tc.renew)
		msgs, _ := l.Next(ctx(t), 2, time.Second)
		time.Sleep(lockFor + 20*time.Millisecond)
		err := l.Settle(msgs, true)
		if lost := errors.Is(err, errLockLost); lost != tc.lost {
			t.Fatalf("renew %v: settle after lockDuration: %v, want lost %v", tc.renew, err, tc.lost)
		}
	}
}

// A lock lost on the last allowed delivery dead-letters the message.
func TestLockLossUsesUpDeliveries(t *testing.T) {
	t.Parallel()
	q := sessionQueue(QueueProperties{MaxDeliveryCount: 2})
	send(q, "s", 1)
	for range 2 {
		l := q.AcceptSession(ctx(t), 0)
		next(t, l)
		time.Sleep(lockFor + 10*time.Millisecond)
	}
	q.Stats() // Service Bus applies expiry when asked
	dead := q.DeadLetters()
	if len(dead) != 1 || dead[0].DeadLetterReason != ReasonMaxDelivery || dead[0].DeliveryCount != 2 {
		t.Fatalf("dead letters %+v, want the message after 2 deliveries", dead)
	}
}

// One expired message expires the whole session (dead-lettered with
// deadLetteringOnMessageExpiration); other sessions are untouched; a message
// locked for delivery does not expire.
func TestExpiredMessageExpiresItsSession(t *testing.T) {
	t.Parallel()
	q := sessionQueue(QueueProperties{DeadLetteringOnMessageExpiration: true})
	send(q, "held", 2, time.Hour, 100*time.Millisecond)
	held := q.AcceptSession(ctx(t), -1)
	first := next(t, held)
	send(q, "doomed", 3, time.Hour, 10*time.Millisecond, time.Hour)
	send(q, "fine", 2)
	time.Sleep(150 * time.Millisecond)
	st := q.Stats()
	// doomed's 3 messages, and held's second one (waiting, not locked for delivery).
	if st.Expired != 4 || st.DeadLettered != 4 || st.InFlight != 1 {
		t.Fatalf("stats %+v, want 4 expired, held's first message still in flight", st)
	}
	if err := held.Settle([]*Message{first}, true); err != nil {
		t.Fatal(err)
	}
	if msgs, err := held.Next(ctx(t), 1, 10*time.Millisecond); err != nil || len(msgs) != 0 {
		t.Fatalf("an expired message was delivered: %v %v", msgs, err)
	}
	reasons := map[string]int{}
	for _, m := range q.DeadLetters() {
		reasons[m.SessionID+"/"+m.DeadLetterReason]++
	}
	if reasons["doomed/"+ReasonExpired] != 3 || reasons["held/"+ReasonExpired] != 1 || len(reasons) != 2 {
		t.Fatalf("dead letters by session and reason: %v", reasons)
	}
	if l := q.AcceptSession(ctx(t), 0); l == nil || l.SessionID() != "fine" {
		t.Fatalf("the unexpired session is not available")
	}
}

// Without sessions a message lock is renewed like a session lock and a lost
// one fails completion; messages expire one by one.
func TestMessageLocksWithoutSessions(t *testing.T) {
	t.Parallel()
	q := NewQueue("plain", QueueProperties{LockDuration: lockFor})
	q.Send([]Message{{MessageID: "a"}, {MessageID: "b", TimeToLive: 10 * time.Millisecond}, {MessageID: "c"}})
	m, settle := q.Receive(ctx(t), 0)
	time.Sleep(lockFor + 10*time.Millisecond)
	if err := settle(true); !errors.Is(err, errLockLost) {
		t.Fatalf("completion after the lock expired: %v", err)
	}
	again, settle := q.Receive(ctx(t), 0)
	if again.MessageID != m.MessageID || again.DeliveryCount != 2 {
		t.Fatalf("got %s delivery %d, want %s again", again.MessageID, again.DeliveryCount, m.MessageID)
	}
	if err := settle(true); err != nil {
		t.Fatal(err)
	}
	if st := q.Stats(); st.Expired != 1 || st.Active != 1 {
		t.Fatalf("stats %+v: want b expired alone, c waiting", st)
	}
}

// Service Bus refuses a send with a message without SessionId on a session
// queue, or a MessageId over 128 characters, whole.
func TestSendRefusals(t *testing.T) {
	t.Parallel()
	q := sessionQueue(QueueProperties{})
	for _, msgs := range [][]Message{
		{{SessionID: "s", MessageID: "a"}, {MessageID: "b"}},
		{{SessionID: "s", MessageID: strings.Repeat("x", 129)}},
	} {
		if n, _, err := q.Send(msgs); err == nil || n != 0 {
			t.Errorf("send %v: accepted %d, %v; want refused whole", msgs, n, err)
		}
	}
	if st := q.Stats(); st.Active != 0 {
		t.Fatalf("a refused send left %d messages", st.Active)
	}
}

// A deferred message stays in its session, set aside: the session's next
// message is the one after it ("Message deferral": deferred messages "can
// no longer be received using the regular receive operations"); a peek
// shows it, deferred; a session holding only deferred messages is not
// offered to a receiver asking for the next available session; the
// deferral is not a delivery counted (.NET DeliveryCount: counted when a
// lock expires or a message is abandoned).
func TestDeferredMessageDoesNotBlockItsSession(t *testing.T) {
	t.Parallel()
	q := sessionQueue(QueueProperties{})
	send(q, "s", 2)
	l := q.AcceptSession(ctx(t), -1)
	a := next(t, l)
	if err := l.settleAs(a.SequenceNumber, settleDefer, settleOptions{}); err != nil {
		t.Fatal(err)
	}
	if b := next(t, l); b.MessageID != "s:b" {
		t.Fatalf("after deferring s:a the session gives %s, want s:b", b.MessageID)
	} else if err := l.settleAs(b.SequenceNumber, settleComplete, settleOptions{}); err != nil {
		t.Fatal(err)
	}
	if msgs, err := l.Next(ctx(t), 1, 50*time.Millisecond); err != nil || len(msgs) != 0 {
		t.Fatalf("with only a deferred message left, Next gives %v, %v", msgs, err)
	}
	peeked := q.Peek(0, 10, nil)
	if len(peeked) != 1 || peeked[0].MessageID != "s:a" || peeked[0].State != StateDeferred || peeked[0].DeliveryCount != 1 {
		t.Fatalf("peek: %+v, want s:a deferred, its first delivery not counted", peeked)
	}
	if st := q.Stats(); st.Active != 0 || st.Deferred != 1 || st.Sessions != 0 {
		t.Fatalf("stats: %+v", st)
	}
	l.Release()
	short, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	if other := q.AcceptSession(short, 0); other != nil {
		t.Fatalf("a session holding only a deferred message was offered to a receiver")
	}
}

// A deferred message is received by sequence number only by the receiver
// holding its session's lock; after that lock expired neither the receive
// nor the settlement of what it received succeeds.
func TestReceiveDeferredNeedsItsSessionLock(t *testing.T) {
	t.Parallel()
	q := sessionQueue(QueueProperties{})
	send(q, "s", 1)
	send(q, "t", 1)
	l := q.AcceptSession(ctx(t), 0)
	a := next(t, l)
	if err := l.settleAs(a.SequenceNumber, settleDefer, settleOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := q.receiveDeferred([]int64{a.SequenceNumber}, nil, true); !errors.Is(err, errLockLost) {
		t.Fatalf("ReceiveDeferred without a session: %v, want ErrLockLost", err)
	}
	other, err := q.acceptNamedSession("t")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := q.receiveDeferred([]int64{a.SequenceNumber}, other, true); !errors.Is(err, errMessageNotFound) {
		t.Fatalf("ReceiveDeferred in another session: %v, want ErrMessageNotFound", err)
	}
	got, err := q.receiveDeferred([]int64{a.SequenceNumber}, l, true)
	if err != nil || len(got) != 1 || got[0].Token != l.Token() || got[0].State != StateDeferred || got[0].DeliveryCount != 1 {
		t.Fatalf("ReceiveDeferred in its session: %+v, %v", got, err)
	}
	time.Sleep(lockFor + 50*time.Millisecond)
	if err := l.settleAs(a.SequenceNumber, settleComplete, settleOptions{}); !errors.Is(err, errLockLost) {
		t.Fatalf("completing after the session lock expired: %v, want ErrLockLost", err)
	}
	if _, err := q.receiveDeferred([]int64{a.SequenceNumber}, l, true); !errors.Is(err, errLockLost) {
		t.Fatalf("ReceiveDeferred after the session lock expired: %v, want ErrLockLost", err)
	}
	if st := q.Stats(); st.Deferred != 1 {
		t.Fatalf("stats: %+v, want s:a still deferred", st)
	}
}

// Deferred messages are not expired while set aside; one asked for after
// its time to live is expired then (dead-lettered here) and not found
// ("Message deferral": "When a client tries to retrieve a deferred message,
// it's checked for expired condition and moved to a dead-letter queue if
// it's already expired").
func TestDeferredMessageExpiresWhenAskedFor(t *testing.T) {
	t.Parallel()
	q := NewQueue("q", QueueProperties{LockDuration: lockFor, DeadLetteringOnMessageExpiration: true})
	if _, _, err := q.Send([]Message{{MessageID: "a", TimeToLive: 100 * time.Millisecond}, {MessageID: "b"}}); err != nil {
		t.Fatal(err)
	}
	a := q.tryReceive()
	if err := q.settleByToken(a.SequenceNumber, a.Token, settleDefer, settleOptions{}); err != nil {
		t.Fatal(err)
	}
	time.Sleep(150 * time.Millisecond)
	if peeked := q.Peek(0, 10, nil); len(peeked) != 2 || peeked[0].State != StateDeferred {
		t.Fatalf("peek after a's time to live: %+v, want a still there, deferred", peeked)
	}
	if st := q.Stats(); st.Expired != 0 || st.DeadLettered != 0 {
		t.Fatalf("stats before asking for a: %+v, want nothing expired", st)
	}
	if _, err := q.receiveDeferred([]int64{a.SequenceNumber}, nil, true); !errors.Is(err, errMessageNotFound) {
		t.Fatalf("ReceiveDeferred of an expired deferred message: %v, want ErrMessageNotFound", err)
	}
	if dead := q.DeadLetters(); len(dead) != 1 || dead[0].MessageID != "a" || dead[0].DeadLetterReason != ReasonExpired {
		t.Fatalf("dead letters: %+v, want a, expired", dead)
	}
	if b := q.tryReceive(); b == nil || b.MessageID != "b" {
		t.Fatalf("b: %+v", b)
	}
}

// A scheduled message waits aside with the sequence number it was given,
// peeked as scheduled; at its time it is appended as if enqueued then: a
// new sequence number, its enqueued time and time to live from then
// ("Message sequencing and timestamps", Scheduled messages); a cancelled
// one is gone, and cancelling what is not scheduled does nothing.
func TestScheduledMessageActivation(t *testing.T) {
	t.Parallel()
	q := NewQueue("q", QueueProperties{})
	clock := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	q.now = func() time.Time { return clock }
	at := clock.Add(time.Hour)
	seqs, err := q.schedule([]Message{{MessageID: "later", TimeToLive: time.Minute}, {MessageID: "cancelled"}}, at)
	if err != nil || len(seqs) != 2 || seqs[0] != 1 || seqs[1] != 2 {
		t.Fatalf("Schedule: %v, %v", seqs, err)
	}
	if _, _, err := q.Send([]Message{{MessageID: "now"}}); err != nil {
		t.Fatal(err)
	}
	if peeked := q.Peek(0, 10, nil); len(peeked) != 3 || peeked[0].State != StateScheduled || peeked[2].State != StateActive {
		t.Fatalf("peek: %+v", peeked)
	}
	if n := q.cancelScheduled([]int64{2, 3, 99}); n != 1 {
		t.Fatalf("CancelScheduled cancelled %d, want 1", n)
	}
	if m := q.tryReceive(); m == nil || m.MessageID != "now" {
		t.Fatalf("before its time: %+v, want now alone", m)
	} else if err := q.settleReceived(m.SequenceNumber, m.Token, true); err != nil {
		t.Fatal(err)
	}
	if m := q.tryReceive(); m != nil {
		t.Fatalf("%s received before its time", m.MessageID)
	}
	clock = at
	m := q.tryReceive()
	if m == nil || m.MessageID != "later" || m.SequenceNumber != 4 || m.State != StateActive || !m.EnqueuedTime.Equal(at) || !m.ExpiresAt.Equal(at.Add(time.Minute)) {
		t.Fatalf("at its time: %+v, want later as seq 4, enqueued at %v", m, at)
	}
	if sent := q.Sent(); len(sent) != 2 || sent[1].SequenceNumber != 4 {
		t.Fatalf("journal: %+v", sent)
	}
	if st := q.Stats(); st.Scheduled != 0 || st.Active != 1 {
		t.Fatalf("stats: %+v", st)
	}
}

// The empty SessionId is a SessionId (TestSessionReceiver_blankSessionIDs):
// accepted on a session queue, its session accepted by name and as the
// next available one; no SessionId at all is still refused.
func TestEmptySessionID(t *testing.T) {
	t.Parallel()
	q := sessionQueue(QueueProperties{})
	if _, _, err := q.Send([]Message{{MessageID: "x"}}); err == nil {
		t.Fatal("a message without SessionId was accepted on a session queue")
	}
	if n, _, err := q.Send([]Message{{MessageID: "a", EmptySessionID: true}, {MessageID: "b", EmptySessionID: true}}); err != nil || n != 2 {
		t.Fatalf("messages with the empty SessionId: %d, %v", n, err)
	}
	l := q.AcceptSession(ctx(t), 0)
	if l == nil || l.SessionID() != "" {
		t.Fatalf("next available session: %+v", l)
	}
	if m := next(t, l); m.MessageID != "a" || !m.EmptySessionID {
		t.Fatalf("session \"\" gives %+v", m)
	}
	l.Release()
	named, err := q.acceptNamedSession("")
	if err != nil {
		t.Fatal(err)
	}
	if m := next(t, named); m.MessageID != "a" || m.DeliveryCount != 2 {
		t.Fatalf("session \"\" by name gives %s (delivery %d)", m.MessageID, m.DeliveryCount)
	}
}
