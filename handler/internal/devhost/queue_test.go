package devhost

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
	if err := first.Settle([]*Message{m}, true); !errors.Is(err, ErrLockLost) {
		t.Fatalf("settle after renew+lockDuration: %v, want ErrLockLost", err)
	}
	second := q.AcceptSession(ctx(t), renew)
	again := next(t, second)
	if again.MessageID != m.MessageID || again.DeliveryCount != 2 {
		t.Fatalf("after the lock loss got %s delivery %d, want %s delivery 2", again.MessageID, again.DeliveryCount, m.MessageID)
	}
	if _, err := first.Next(ctx(t), 1, time.Millisecond); !errors.Is(err, ErrLockLost) {
		t.Fatalf("the first receiver goes on after losing the lock: %v", err)
	}
}

// A session can be taken by a second receiver while the first still works
// on a message it received before its lock expired.
func TestSessionTakenWhileFirstCallRuns(t *testing.T) {
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
	if err := first.Settle([]*Message{m1}, true); !errors.Is(err, ErrLockLost) {
		t.Fatalf("the first call's completion: %v, want ErrLockLost", err)
	}
	if !q.Idle() {
		t.Fatalf("queue not idle: %+v", q.Stats())
	}
}

// Batch dispatch never renews: the lock lasts lockDuration from acceptance.
// Infinite renewal (maxAutoLockRenewalDuration < 0) never loses it.
func TestLockWithoutRenewalAndWithoutEnd(t *testing.T) {
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
		if lost := errors.Is(err, ErrLockLost); lost != tc.lost {
			t.Fatalf("renew %v: settle after lockDuration: %v, want lost %v", tc.renew, err, tc.lost)
		}
	}
}

// A lock lost on the last allowed delivery dead-letters the message.
func TestLockLossUsesUpDeliveries(t *testing.T) {
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
	q := NewQueue("plain", QueueProperties{LockDuration: lockFor})
	q.Send([]Message{{MessageID: "a"}, {MessageID: "b", TimeToLive: 10 * time.Millisecond}, {MessageID: "c"}})
	m, settle := q.Receive(ctx(t), 0)
	time.Sleep(lockFor + 10*time.Millisecond)
	if err := settle(true); !errors.Is(err, ErrLockLost) {
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

// TimeSpans as host.json writes them, the infinite one included.
func TestTimeSpan(t *testing.T) {
	for in, want := range map[string]time.Duration{
		"00:05:00": 5 * time.Minute, "1.02:00:00": 26 * time.Hour, "00:00:00.5": 500 * time.Millisecond,
		"-00:00:00.0010000": -time.Millisecond,
	} {
		if got, err := timeSpan(in, 0); err != nil || got != want {
			t.Errorf("timeSpan(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	if _, err := timeSpan("5 minutes", 0); err == nil {
		t.Error("a bad TimeSpan was accepted")
	}
}

// Service Bus refuses a send with a message without SessionId on a session
// queue, or a MessageId over 128 characters, whole.
func TestSendRefusals(t *testing.T) {
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
