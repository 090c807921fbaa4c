package devbus_test

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"crypto/tls"
	"encoding/base64"
	"errors"
	"fmt"
	"net"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"
	"github.com/Azure/go-amqp"

	"github.com/convoy-dev/convoy/handler/internal/devbus"
)

// TestSDKConformance holds the emulation to Service Bus with the real
// azservicebus client and its DEFAULT options (NewClientFromConnectionString(cs,
// nil): three retries, exponential back-off from 4 s), as users run it, so
// that the SDK's retry and recovery paths are exercised as they are in Azure.
// Each expectation names its source: a Service Bus documentation page
// (learn.microsoft.com, azure/service-bus-messaging/<page>) or a live test of
// azservicebus v1.11.0 (a test run against a real namespace), by file and
// name. testdata/conformance/conformance.mjs checks the same behaviours with
// the JavaScript SDK; where both check a thing, the case names match.
//
// Each case runs on its own queue and its own client (its own connection: a
// connection the SDK recycles in one case must not take another case's locks
// with it), in parallel.

// sbcLock is the lock duration of the lock-expiry queues: 5 s, the shortest
// Service Bus takes (azservicebus live test TestReceiverMessageLockExpires
// creates its queue with LockDuration PT5S; service-bus-quotas and the queue
// properties give 5 min as the maximum, 1 min as the default).
const sbcLock = 5 * time.Second

// sbcQueues are the queues of the suite, one (or two) per case.
var sbcQueues = map[string]devbus.QueueProperties{
	"lock-link":      {LockDuration: sbcLock},
	"lock-mgmt":      {LockDuration: sbcLock},
	"lock-session":   {RequiresSession: true, LockDuration: sbcLock},
	"defer":          {},
	"defer-session":  {RequiresSession: true},
	"schedule":       {},
	"schedule-field": {},
	"schedule-ses":   {RequiresSession: true},
	"blank":          {RequiresSession: true},
	"locked-session": {RequiresSession: true},
	"needs-session":  {RequiresSession: true},
	"size":           {},
	"renew":          {},
	"renew-session":  {RequiresSession: true},
	"partition":      {},
	"plain":          {},
	"multi-a":        {RequiresSession: true},
	"multi-b":        {RequiresSession: true},
	"multi-s":        {RequiresSession: true},
	"multi-q":        {},
}

func TestSDKConformance(t *testing.T) {
	// Most of its time is the SDK's back-off (a session lock lost: about
	// 45 s of retries before CodeLockLost): it runs beside the other tests.
	t.Parallel()
	qs := map[string]*devbus.Queue{}
	for name, p := range sbcQueues {
		qs[name] = devbus.NewQueue(name, p)
	}
	bus, err := devbus.StartBus("127.0.0.1:0", qs, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(bus.Close)
	cs := bus.ConnectionString()

	t.Run("lock expiry", func(t *testing.T) {
		// "Message transfers, locks, and settlement" (Settling receive
		// operations): when the lock expires the message becomes available
		// again and its delivery count goes up; a settlement with the expired
		// lock fails. azservicebus live test TestReceiverMessageLockExpires:
		// CompleteMessage 6 s into a 5 s lock gives CodeLockLost.
		t.Run("message lock, settled on the receiving link", func(t *testing.T) {
			t.Parallel()
			c := sbcClient(t, cs)
			ctx := sbcContext(t, time.Minute)
			sbcSend(ctx, t, c, "lock-link", &azservicebus.Message{Body: []byte("lock me")})
			r := sbcReceiver(t, c, "lock-link")
			m := sbcReceiveOne(ctx, t, r)
			time.Sleep(sbcLock + time.Second)
			sbcRequireCode(t, "CompleteMessage after the lock expired", r.CompleteMessage(ctx, m, nil), azservicebus.CodeLockLost)
			again := sbcReceiveOne(ctx, t, r)
			if *again.SequenceNumber != *m.SequenceNumber || again.DeliveryCount != 2 {
				t.Fatalf("after the lock expired got seq %d, delivery count %d; want seq %d again, delivery count 2", *again.SequenceNumber, again.DeliveryCount, *m.SequenceNumber)
			}
			if err := r.CompleteMessage(ctx, again, nil); err != nil {
				t.Fatalf("completing the redelivered message: %v", err)
			}
		})
		// The $management path (com.microsoft:update-disposition): a message
		// settled by its lock token alone goes there (azservicebus live test
		// TestReceiver_SettleWithOnlyLockToken, on another receiver).
		t.Run("message lock, settled by lock token on $management", func(t *testing.T) {
			t.Parallel()
			c := sbcClient(t, cs)
			ctx := sbcContext(t, time.Minute)
			sbcSend(ctx, t, c, "lock-mgmt", &azservicebus.Message{Body: []byte("lock me")})
			r := sbcReceiver(t, c, "lock-mgmt")
			m := sbcReceiveOne(ctx, t, r)
			time.Sleep(sbcLock + time.Second)
			other := sbcReceiver(t, c, "lock-mgmt")
			sbcRequireCode(t, "CompleteMessage by lock token after the lock expired",
				other.CompleteMessage(ctx, &azservicebus.ReceivedMessage{LockToken: m.LockToken}, nil), azservicebus.CodeLockLost)
			again := sbcReceiveOne(ctx, t, r)
			if *again.SequenceNumber != *m.SequenceNumber || again.DeliveryCount != 2 {
				t.Fatalf("after the lock expired got seq %d, delivery count %d; want seq %d again, delivery count 2", *again.SequenceNumber, again.DeliveryCount, *m.SequenceNumber)
			}
			if err := r.CompleteMessage(ctx, again, nil); err != nil {
				t.Fatalf("completing the redelivered message: %v", err)
			}
		})
		// "Message sessions": a session's messages are locked by the session
		// lock; once it expires the session (and its unsettled messages) can
		// be accepted again. The SDK answers com.microsoft:session-lock-lost
		// on the link by recycling the connection and settling again on
		// $management: that path too must find the lock lost, and the message
		// must still be in its session, its delivery counted.
		t.Run("session lock", func(t *testing.T) {
			t.Parallel()
			c := sbcClient(t, cs)
			ctx := sbcContext(t, 2*time.Minute)
			sbcSend(ctx, t, c, "lock-session", &azservicebus.Message{Body: []byte("lock me"), SessionID: sbcPtr("s1")})
			sr, err := c.AcceptSessionForQueue(ctx, "lock-session", "s1", nil)
			if err != nil {
				t.Fatal(err)
			}
			m := sbcReceiveOne(ctx, t, sr)
			time.Sleep(sbcLock + time.Second)
			err = sr.CompleteMessage(ctx, m, nil)
			sbcRequireCode(t, "CompleteMessage after the session lock expired", err, azservicebus.CodeLockLost)
			_ = sr.Close(ctx)
			sr2, err := c.AcceptSessionForQueue(ctx, "lock-session", "s1", nil)
			if err != nil {
				t.Fatalf("accepting the session again after its lock expired: %v", err)
			}
			defer sr2.Close(ctx)
			again := sbcReceiveOne(ctx, t, sr2)
			if *again.SequenceNumber != *m.SequenceNumber || again.DeliveryCount != 2 {
				t.Fatalf("after the session lock expired got seq %d, delivery count %d; want seq %d again (not completed), delivery count 2", *again.SequenceNumber, again.DeliveryCount, *m.SequenceNumber)
			}
			if err := sr2.CompleteMessage(ctx, again, nil); err != nil {
				t.Fatalf("completing the redelivered message: %v", err)
			}
		})
	})

	t.Run("deferral", func(t *testing.T) {
		// "Message deferral": a deferred message stays in the queue, set
		// aside; it is no longer received by a plain receive, only by its
		// sequence number, and is then settled as usual (azservicebus live
		// test TestReceiverDeferAndReceiveDeferredMessages: deferred messages
		// settle on $management). "Message browsing": peek includes deferred
		// messages (state Deferred, x-opt-message-state 1).
		t.Run("queue", func(t *testing.T) {
			t.Parallel()
			c := sbcClient(t, cs)
			ctx := sbcContext(t, time.Minute)
			sbcSend(ctx, t, c, "defer", &azservicebus.Message{Body: []byte("deferring a message")})
			r := sbcReceiver(t, c, "defer")
			sbcDeferral(ctx, t, r, sbcReceiveOne(ctx, t, r))
		})
		// The same through a session receiver ("Message deferral"; the
		// deferred message stays in its session).
		t.Run("session", func(t *testing.T) {
			t.Parallel()
			c := sbcClient(t, cs)
			ctx := sbcContext(t, time.Minute)
			sbcSend(ctx, t, c, "defer-session", &azservicebus.Message{Body: []byte("deferring a message"), SessionID: sbcPtr("d1")})
			sr, err := c.AcceptSessionForQueue(ctx, "defer-session", "d1", nil)
			if err != nil {
				t.Fatal(err)
			}
			defer sr.Close(ctx)
			sbcDeferral(ctx, t, sr, sbcReceiveOne(ctx, t, sr))
		})
	})

	t.Run("scheduling", func(t *testing.T) {
		// azservicebus live test testScheduleMessages (Test_Sender_ScheduleMessages):
		// ScheduleMessages answers a sequence number per message; peek
		// shows scheduled messages with State Scheduled ("Message browsing":
		// scheduled messages are included for queues); a cancelled one
		// disappears (requireScheduledMessageDisappears). "Message
		// sequencing and timestamps" (Scheduled messages): a scheduled
		// message does not materialize in the queue before its time, and
		// cancelling it deletes it.
		t.Run("ScheduleMessages and CancelScheduledMessages", func(t *testing.T) {
			t.Parallel()
			c := sbcClient(t, cs)
			ctx := sbcContext(t, time.Minute)
			s, err := c.NewSender("schedule", nil)
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close(ctx)
			at := time.Now().Add(3 * time.Second)
			soon, err := s.ScheduleMessages(ctx, []*azservicebus.Message{{Body: []byte("soon")}}, at, nil)
			if err != nil || len(soon) != 1 {
				t.Fatalf("ScheduleMessages: %v, sequence numbers %v; want one", err, soon)
			}
			later, err := s.ScheduleMessages(ctx, []*azservicebus.Message{{Body: []byte("cancelled")}}, time.Now().Add(time.Hour), nil)
			if err != nil || len(later) != 1 || later[0] == soon[0] {
				t.Fatalf("ScheduleMessages: %v, sequence numbers %v (first %v); want one, another", err, later, soon)
			}
			r := sbcReceiver(t, c, "schedule")
			for _, seq := range []int64{soon[0], later[0]} {
				p := sbcPeekSeq(ctx, t, r, seq)
				if p == nil || p.State != azservicebus.MessageStateScheduled {
					t.Fatalf("peek of scheduled seq %d: %+v; want it, State Scheduled", seq, p)
				}
			}
			sbcRequireNone(t, r, time.Until(at)-500*time.Millisecond, "before its scheduled time")
			if err := s.CancelScheduledMessages(ctx, later, nil); err != nil {
				t.Fatalf("CancelScheduledMessages: %v", err)
			}
			if p := sbcPeekSeq(ctx, t, r, later[0]); p != nil {
				t.Fatalf("cancelled seq %d still peeked (%q)", later[0], p.Body)
			}
			m := sbcReceiveOne(ctx, t, r)
			// at travels as an AMQP timestamp, in whole milliseconds: the
			// message may come up to a millisecond before at itself.
			if string(m.Body) != "soon" || m.State != azservicebus.MessageStateActive || time.Now().Before(at.Truncate(time.Millisecond)) {
				t.Fatalf("received %q (State %d) at %v; want \"soon\", active, not before %v", m.Body, m.State, time.Now(), at)
			}
			if err := r.CompleteMessage(ctx, m, nil); err != nil {
				t.Fatal(err)
			}
			sbcRequireNone(t, r, 1500*time.Millisecond, "after the cancelled message's cancellation")
		})
		// testScheduleMessages: setting Message.ScheduledEnqueueTime on a
		// plain send schedules it too (x-opt-scheduled-enqueue-time).
		t.Run("ScheduledEnqueueTime on a send", func(t *testing.T) {
			t.Parallel()
			c := sbcClient(t, cs)
			ctx := sbcContext(t, time.Minute)
			at := time.Now().Add(3 * time.Second)
			sbcSend(ctx, t, c, "schedule-field", &azservicebus.Message{Body: []byte("by the field"), ScheduledEnqueueTime: &at})
			r := sbcReceiver(t, c, "schedule-field")
			peeked, err := r.PeekMessages(ctx, 10, nil)
			if err != nil || len(peeked) != 1 || peeked[0].State != azservicebus.MessageStateScheduled {
				t.Fatalf("peek: %v, %d messages; want the one, State Scheduled", err, len(peeked))
			}
			sbcRequireNone(t, r, time.Until(at)-500*time.Millisecond, "before its ScheduledEnqueueTime")
			m := sbcReceiveOne(ctx, t, r)
			if string(m.Body) != "by the field" || time.Now().Before(at.Truncate(time.Millisecond)) {
				t.Fatalf("received %q at %v; want it not before %v", m.Body, time.Now(), at)
			}
			if err := r.CompleteMessage(ctx, m, nil); err != nil {
				t.Fatal(err)
			}
		})
		// On a session queue the scheduled message joins its session at its
		// time ("Message sequencing and timestamps"; "Message sessions").
		t.Run("session", func(t *testing.T) {
			t.Parallel()
			c := sbcClient(t, cs)
			ctx := sbcContext(t, time.Minute)
			s, err := c.NewSender("schedule-ses", nil)
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close(ctx)
			at := time.Now().Add(3 * time.Second)
			seqs, err := s.ScheduleMessages(ctx, []*azservicebus.Message{{Body: []byte("soon"), SessionID: sbcPtr("t1")}}, at, nil)
			if err != nil || len(seqs) != 1 {
				t.Fatalf("ScheduleMessages: %v, %v", err, seqs)
			}
			sr, err := c.AcceptSessionForQueue(ctx, "schedule-ses", "t1", nil)
			if err != nil {
				t.Fatal(err)
			}
			defer sr.Close(ctx)
			sbcRequireNone(t, sr, time.Until(at)-500*time.Millisecond, "before its scheduled time")
			m := sbcReceiveOne(ctx, t, sr)
			if string(m.Body) != "soon" || *m.SessionID != "t1" || time.Now().Before(at.Truncate(time.Millisecond)) {
				t.Fatalf("received %q in session %q at %v; want \"soon\" in t1, not before %v", m.Body, *m.SessionID, time.Now(), at)
			}
			if err := sr.CompleteMessage(ctx, m, nil); err != nil {
				t.Fatal(err)
			}
		})
	})

	// azservicebus live test TestSessionReceiver_blankSessionIDs: "" is a
	// session id like any other: sent, scheduled, accepted by name, with
	// SessionID "" on the receiver and the messages.
	t.Run("blank SessionId", func(t *testing.T) {
		t.Parallel()
		c := sbcClient(t, cs)
		ctx := sbcContext(t, time.Minute)
		s, err := c.NewSender("blank", nil)
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close(ctx)
		if err := s.SendMessage(ctx, &azservicebus.Message{Body: []byte("session-based message"), SessionID: sbcPtr("")}, nil); err != nil {
			t.Fatalf("SendMessage with SessionID \"\": %v", err)
		}
		seqs, err := s.ScheduleMessages(ctx, []*azservicebus.Message{{Body: []byte("session-based message"), SessionID: sbcPtr("")}}, time.Now(), nil)
		if err != nil || len(seqs) == 0 {
			t.Fatalf("ScheduleMessages with SessionID \"\": %v, %v", err, seqs)
		}
		sr, err := c.AcceptSessionForQueue(ctx, "blank", "", nil)
		if err != nil {
			t.Fatalf("AcceptSessionForQueue(\"\"): %v", err)
		}
		defer sr.Close(ctx)
		if sr.SessionID() != "" || sr.LockedUntil().IsZero() {
			t.Fatalf("session receiver: id %q, locked until %v", sr.SessionID(), sr.LockedUntil())
		}
		var got []*azservicebus.ReceivedMessage
		for len(got) < 2 {
			ms, err := sr.ReceiveMessages(ctx, 2, nil)
			if err != nil {
				t.Fatalf("after %d of 2 messages: %v", len(got), err)
			}
			for _, m := range ms {
				if err := sr.CompleteMessage(ctx, m, nil); err != nil {
					t.Fatal(err)
				}
				if m.SessionID == nil || *m.SessionID != "" || string(m.Body) != "session-based message" {
					t.Fatalf("message %q in session %v", m.Body, m.SessionID)
				}
			}
			got = append(got, ms...)
		}
	})

	// One client for several entities, as users (and the Functions host) run
	// it: azservicebus live test TestReceiverMultiTopic sends and receives on
	// two queues with one client. A settlement applies to the message whose
	// lock token it carries ("Message transfers, locks, and settlement"),
	// whatever other session receivers share the connection: each queue's
	// message is completed, and only it.
	t.Run("two session queues on one connection", func(t *testing.T) {
		t.Parallel()
		c := sbcClient(t, cs)
		ctx := sbcContext(t, time.Minute)
		var held []*azservicebus.SessionReceiver
		var got []*azservicebus.ReceivedMessage
		for _, q := range []string{"multi-a", "multi-b"} {
			sbcSend(ctx, t, c, q, &azservicebus.Message{Body: []byte("for " + q), SessionID: sbcPtr("s")})
			sr, err := c.AcceptSessionForQueue(ctx, q, "s", nil)
			if err != nil {
				t.Fatal(err)
			}
			held = append(held, sr)
			got = append(got, sbcReceiveOne(ctx, t, sr))
		}
		for i, sr := range held {
			if err := sr.CompleteMessage(ctx, got[i], nil); err != nil {
				t.Fatalf("completing %q: %v", got[i].Body, err)
			}
			_ = sr.Close(ctx)
		}
		for _, q := range []string{"multi-a", "multi-b"} {
			sr, err := c.AcceptSessionForQueue(ctx, q, "s", nil)
			if err != nil {
				t.Fatal(err)
			}
			sbcRequireNone(t, sr, time.Second, "in "+q+" after its message was completed")
			_ = sr.Close(ctx)
		}
	})

	// The same with a queue without sessions settled by lock token on
	// $management (TestReceiver_SettleWithOnlyLockToken) while a session
	// receiver of another queue is held on the connection: the settlement
	// completes multi-q's message and leaves multi-s's alone.
	t.Run("a lock token settles its own queue's message", func(t *testing.T) {
		t.Parallel()
		c := sbcClient(t, cs)
		ctx := sbcContext(t, time.Minute)
		sbcSend(ctx, t, c, "multi-s", &azservicebus.Message{Body: []byte("for multi-s"), SessionID: sbcPtr("s")})
		sbcSend(ctx, t, c, "multi-q", &azservicebus.Message{Body: []byte("for multi-q")})
		sr, err := c.AcceptSessionForQueue(ctx, "multi-s", "s", nil)
		if err != nil {
			t.Fatal(err)
		}
		sm := sbcReceiveOne(ctx, t, sr)
		r := sbcReceiver(t, c, "multi-q")
		m := sbcReceiveOne(ctx, t, r)
		if err := sbcReceiver(t, c, "multi-q").CompleteMessage(ctx, &azservicebus.ReceivedMessage{LockToken: m.LockToken}, nil); err != nil {
			t.Fatalf("completing multi-q's message by lock token: %v", err)
		}
		sbcRequireNone(t, r, time.Second, "in multi-q after its message was completed")
		_ = sr.Close(ctx) // gives multi-s's unsettled message back
		sr, err = c.AcceptSessionForQueue(ctx, "multi-s", "s", nil)
		if err != nil {
			t.Fatal(err)
		}
		defer sr.Close(ctx)
		again := sbcReceiveOne(ctx, t, sr)
		if *again.SequenceNumber != *sm.SequenceNumber {
			t.Fatalf("multi-s gave seq %d; want its unsettled seq %d back", *again.SequenceNumber, *sm.SequenceNumber)
		}
	})

	// azservicebus live test TestSessionReceiver_acceptSessionButAlreadyLocked:
	// accepting a session another receiver holds fails, not retried, with
	// com.microsoft:session-cannot-be-locked ("The requested session
	// 'session-1' cannot be accepted. It may be locked by another receiver.").
	t.Run("session cannot be locked", func(t *testing.T) {
		t.Parallel()
		c := sbcClient(t, cs)
		ctx := sbcContext(t, time.Minute)
		sr, err := c.AcceptSessionForQueue(ctx, "locked-session", "session-1", nil)
		if err != nil {
			t.Fatal(err)
		}
		defer sr.Close(ctx)
		start := time.Now()
		second, err := c.AcceptSessionForQueue(ctx, "locked-session", "session-1", nil)
		if second != nil {
			t.Fatal("a second receiver accepted a locked session")
		}
		sbcRequireCondition(t, "second AcceptSessionForQueue", err, "com.microsoft:session-cannot-be-locked")
		if d := time.Since(start); d > 3*time.Second {
			t.Errorf("the refusal took %v: it is not retriable (RecoveryKindFatal in the live test)", d)
		}
	})

	t.Run("credentials", func(t *testing.T) {
		// azservicebus live tests TestClientUnauthorizedCreds and
		// TestReceiverUnauthorizedCreds: a token the service does not accept
		// fails sends and receives with CodeUnauthorizedAccess ($cbs answers
		// 401), not retried. "Service Bus authentication with Shared Access
		// Signatures": the signature is an HMAC-SHA256 with the key.
		t.Run("wrong key", func(t *testing.T) {
			t.Parallel()
			wrong := strings.Replace(cs, "SharedAccessKey="+devbus.BusKey, "SharedAccessKey=not-the-key", 1)
			sbcRequireUnauthorized(t, wrong)
		})
		t.Run("expired SAS token", func(t *testing.T) {
			t.Parallel()
			sbcRequireUnauthorized(t, sbcSASConnectionString(bus.Addr(), time.Now().Add(-10*time.Minute)))
		})
		// "AMQP 1.0 in Azure Service Bus and Event Hubs protocol guide"
		// (Connections and sessions): SASL PLAIN carries a SAS rule's name and
		// key; a wrong key must not open the connection (or PLAIN must not
		// be offered at all).
		t.Run("SASL PLAIN with a wrong key", func(t *testing.T) {
			t.Parallel()
			ctx := sbcContext(t, 10*time.Second)
			conn, err := amqp.Dial(ctx, "amqp://"+bus.Addr(), &amqp.ConnOptions{SASLType: amqp.SASLTypePlain(devbus.BusKeyName, "not-the-key")})
			if err == nil {
				_ = conn.Close()
				t.Fatal("SASL PLAIN with a wrong key opened the connection")
			}
			t.Logf("refused: %v", err)
		})
	})

	// azservicebus live tests TestNewClientNewSenderNotFound,
	// TestNewClientNewReceiverNotFound and TestClientNewSessionReceiverNotFound:
	// an entity that does not exist fails with CodeNotFound, not retried.
	t.Run("missing entity", func(t *testing.T) {
		t.Parallel()
		c := sbcClient(t, cs)
		sbcRequireNotFound(t, c, "no-such-queue", "")
	})

	t.Run("size and sessions", func(t *testing.T) {
		// "Service Bus quotas": 256 KB per message on Standard; azservicebus
		// live test Test_Sender_Send_MessageTooBig: ErrMessageTooLarge, not retried.
		t.Run("message over 256 KB", func(t *testing.T) {
			t.Parallel()
			c := sbcClient(t, cs)
			ctx := sbcContext(t, 30*time.Second)
			s, err := c.NewSender("size", nil)
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close(ctx)
			err = s.SendMessage(ctx, &azservicebus.Message{Body: make([]byte, 300*1024)}, nil)
			if !errors.Is(err, azservicebus.ErrMessageTooLarge) {
				t.Fatalf("300 KiB message: %v; want ErrMessageTooLarge", err)
			}
		})
		// "Message sessions": a session-enabled entity takes only messages
		// with a SessionId; the service's answer (quoted in an earlier
		// version of TestSessionReceiver_blankSessionIDs, when the SDK left
		// out an empty group-id): amqp:not-allowed, "The SessionId was not
		// set on a message, and it cannot be sent to the entity."
		t.Run("no SessionId on a session queue", func(t *testing.T) {
			t.Parallel()
			c := sbcClient(t, cs)
			ctx := sbcContext(t, 30*time.Second)
			s, err := c.NewSender("needs-session", nil)
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close(ctx)
			err = s.SendMessage(ctx, &azservicebus.Message{Body: []byte("no session")}, nil)
			sbcRequireCondition(t, "send without SessionId", err, "amqp:not-allowed")
			if !strings.Contains(err.Error(), "The SessionId was not set on a message") {
				t.Errorf("description: %v", err)
			}
		})
	})

	t.Run("lock renewal", func(t *testing.T) {
		// azservicebus live test TestReceiver_RenewMessageLock; "Message
		// transfers, locks, and settlement": renewal moves LockedUntil on.
		t.Run("message", func(t *testing.T) {
			t.Parallel()
			c := sbcClient(t, cs)
			ctx := sbcContext(t, 30*time.Second)
			sbcSend(ctx, t, c, "renew", &azservicebus.Message{Body: []byte("renew me")})
			r := sbcReceiver(t, c, "renew")
			m := sbcReceiveOne(ctx, t, r)
			before := *m.LockedUntil
			time.Sleep(1100 * time.Millisecond)
			if err := r.RenewMessageLock(ctx, m, nil); err != nil {
				t.Fatal(err)
			}
			if !m.LockedUntil.After(before) {
				t.Fatalf("LockedUntil %v after renewal, was %v", *m.LockedUntil, before)
			}
			if err := r.CompleteMessage(ctx, m, nil); err != nil {
				t.Fatal(err)
			}
		})
		// azservicebus live test TestSessionReceiver_RenewSessionLock.
		t.Run("session", func(t *testing.T) {
			t.Parallel()
			c := sbcClient(t, cs)
			ctx := sbcContext(t, 30*time.Second)
			sr, err := c.AcceptSessionForQueue(ctx, "renew-session", "session-1", nil)
			if err != nil {
				t.Fatal(err)
			}
			defer sr.Close(ctx)
			before := sr.LockedUntil()
			time.Sleep(1100 * time.Millisecond)
			if err := sr.RenewSessionLock(ctx, nil); err != nil {
				t.Fatal(err)
			}
			if !sr.LockedUntil().After(before) {
				t.Fatalf("LockedUntil %v after renewal, was %v", sr.LockedUntil(), before)
			}
		})
	})

	// What the emulation does not model, and what a client sees when it
	// tries it: a clear error, never a silent success, never a dropped
	// connection (issue 34).
	t.Run("unmodelled", func(t *testing.T) {
		// Topics and subscriptions: there are none, so an address of one is
		// an entity that does not exist (azservicebus live test
		// TestNewClientNewReceiverNotFound uses exactly a missing topic and
		// subscription: CodeNotFound). A subscription path under a queue's
		// name must not read the queue.
		t.Run("topic", func(t *testing.T) {
			t.Parallel()
			c := sbcClient(t, cs)
			sbcRequireNotFound(t, c, "mytopic", "")  // a sender to the topic
			sbcRequireNotFound(t, c, "mytopic", "x") // mytopic/subscriptions/x
			sbcRequireNotFound(t, c, "plain", "x")   // plain/subscriptions/x: not the queue plain
		})
		// Partitioned entities cannot be asked for over AMQP (partitioning
		// is a property the entity is created with); the emulated queues are
		// not partitioned and, as such a queue in Azure, carry a
		// PartitionKey through (azservicebus live tests
		// Test_Sender_UsingPartitionedQueue: the key comes back;
		// TestNilPartitionKey: accepted on a plain queue).
		t.Run("partition key", func(t *testing.T) {
			t.Parallel()
			c := sbcClient(t, cs)
			ctx := sbcContext(t, 30*time.Second)
			sbcSend(ctx, t, c, "partition", &azservicebus.Message{Body: []byte("keyed"), PartitionKey: sbcPtr("partitionKey1")})
			r := sbcReceiver(t, c, "partition")
			m := sbcReceiveOne(ctx, t, r)
			if m.PartitionKey == nil || *m.PartitionKey != "partitionKey1" {
				t.Fatalf("PartitionKey %v; want partitionKey1", m.PartitionKey)
			}
			if err := r.CompleteMessage(ctx, m, nil); err != nil {
				t.Fatal(err)
			}
		})
		// TLS: the emulation listens on plain TCP, as the Service Bus
		// emulator does (UseDevelopmentEmulator=true). A TLS client must be
		// told at once: the bus answers a ClientHello with the AMQP protocol
		// header (AMQP 1.0 part 2, 2.2: a server answers an unsupported
		// protocol header with the one it supports, then closes), which the
		// client reads as "not a TLS handshake", not as a dropped connection.
		t.Run("TLS", func(t *testing.T) {
			t.Parallel()
			conn, err := tls.DialWithDialer(&sbcDialer, "tcp", bus.Addr(), &tls.Config{InsecureSkipVerify: true})
			if err == nil {
				_ = conn.Close()
				t.Fatal("a TLS handshake succeeded on the plain-TCP bus")
			}
			if !strings.Contains(err.Error(), "first record does not look like a TLS handshake") {
				t.Fatalf("TLS client saw %v; want the bus's AMQP header (\"first record does not look like a TLS handshake\"), not a dropped connection", err)
			}
			// The SDK with a connection string without UseDevelopmentEmulator
			// speaks TLS: it must fail, and say why. With its default options
			// it retries the handshake (RecoveryKindConn) for about 43 s and
			// then answers "(connlost): tls: first record does not look like
			// a TLS handshake"; one try shows the same answer at once.
			ctx := sbcContext(t, 20*time.Second)
			c, err := azservicebus.NewClientFromConnectionString(strings.Replace(cs, "UseDevelopmentEmulator=true;", "", 1), sbcOneTry)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close(ctx)
			s, err := c.NewSender("plain", nil)
			if err != nil {
				t.Fatal(err)
			}
			err = s.SendMessage(ctx, &azservicebus.Message{Body: []byte("over TLS")}, nil)
			if err == nil {
				t.Fatal("a send over TLS to the plain-TCP bus succeeded")
			}
			t.Logf("azservicebus over TLS: %v", err)
			if !strings.Contains(err.Error(), "first record does not look like a TLS handshake") {
				t.Errorf("the SDK's error does not say what went wrong: %v", err)
			}
		})
		// Microsoft Entra ID: "AMQP 1.0 in Azure Service Bus and Event Hubs
		// protocol guide" (Claims-based authorization) lists two token types
		// for put-token on $cbs, jwt (Entra ID) and
		// servicebus.windows.net:sastoken. The emulation takes SAS only: a
		// jwt must be refused with a status and a description, and the
		// connection stay usable (a SAS token then works on it).
		t.Run("Entra ID token", func(t *testing.T) {
			t.Parallel()
			ctx := sbcContext(t, 20*time.Second)
			conn, err := amqp.Dial(ctx, "amqp://"+bus.Addr(), &amqp.ConnOptions{SASLType: amqp.SASLTypeAnonymous()})
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			sess, err := conn.NewSession(ctx, nil)
			if err != nil {
				t.Fatal(err)
			}
			audience := "sb://" + bus.Addr() + "/plain"
			status, desc := sbcPutToken(ctx, t, sess, "jwt", "eyJhbGciOiJub25lIn0.eyJhdWQiOiJodHRwczovL3NlcnZpY2VidXMuYXp1cmUubmV0In0.", audience)
			if status < 400 || status >= 500 || desc == "" {
				t.Fatalf("put-token of a jwt: status %d %q; want a 4xx refusal that says why", status, desc)
			}
			t.Logf("jwt put-token: %d %s", status, desc)
			status, desc = sbcPutToken(ctx, t, sess, "servicebus.windows.net:sastoken", sbcSASToken(bus.Addr(), time.Now().Add(time.Hour)), audience)
			if status != 202 {
				t.Fatalf("SAS put-token after the refused jwt, on the same connection: %d %q; want 202", status, desc)
			}
			snd, err := sess.NewSender(ctx, "plain", nil)
			if err != nil {
				t.Fatalf("attaching to the queue after the refused jwt: %v", err)
			}
			_ = snd.Close(ctx)
			// The SDK itself (azservicebus.NewClient with a credential) only
			// speaks TLS: what it sees is the TLS case's answer (one try, as
			// there).
			c, err := azservicebus.NewClient(bus.Addr(), sbcFakeCredential{}, sbcOneTry)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close(ctx)
			s, err := c.NewSender("plain", nil)
			if err != nil {
				t.Fatal(err)
			}
			err = s.SendMessage(ctx, &azservicebus.Message{Body: []byte("with a token")}, nil)
			if err == nil {
				t.Fatal("a send with an Entra ID credential succeeded")
			}
			t.Logf("azservicebus.NewClient with a credential: %v", err)
			if !strings.Contains(err.Error(), "first record does not look like a TLS handshake") {
				t.Errorf("the SDK's error does not say what went wrong: %v", err)
			}
		})
	})
}

// sbcDeferral: defer m, then it is not received, is peeked as deferred, is
// received by its sequence number, completed, and gone.
func sbcDeferral(ctx context.Context, t *testing.T, r sbcReceiverLike, m *azservicebus.ReceivedMessage) {
	t.Helper()
	seq := *m.SequenceNumber
	if err := r.DeferMessage(ctx, m, nil); err != nil {
		t.Fatalf("DeferMessage: %v", err)
	}
	sbcRequireNone(t, r, 2*time.Second, "after deferral (a deferred message is received only by its sequence number)")
	if p := sbcPeekSeq(ctx, t, r, seq); p == nil || p.State != azservicebus.MessageStateDeferred {
		t.Fatalf("peek of deferred seq %d: %+v; want it, State Deferred (\"Message browsing\")", seq, p)
	}
	got, err := r.ReceiveDeferredMessages(ctx, []int64{seq}, nil)
	if err != nil || len(got) != 1 || string(got[0].Body) != string(m.Body) {
		t.Fatalf("ReceiveDeferredMessages(%d): %v, %d messages; want the deferred one", seq, err, len(got))
	}
	if err := r.CompleteMessage(ctx, got[0], nil); err != nil {
		t.Fatalf("completing the deferred message: %v", err)
	}
	if p := sbcPeekSeq(ctx, t, r, seq); p != nil {
		t.Fatalf("completed deferred seq %d still peeked", seq)
	}
	if again, err := r.ReceiveDeferredMessages(ctx, []int64{seq}, nil); err == nil && len(again) > 0 {
		t.Fatalf("a completed deferred message was received again by its sequence number")
	}
}

type sbcReceiverLike interface {
	ReceiveMessages(context.Context, int, *azservicebus.ReceiveMessagesOptions) ([]*azservicebus.ReceivedMessage, error)
	ReceiveDeferredMessages(context.Context, []int64, *azservicebus.ReceiveDeferredMessagesOptions) ([]*azservicebus.ReceivedMessage, error)
	PeekMessages(context.Context, int, *azservicebus.PeekMessagesOptions) ([]*azservicebus.ReceivedMessage, error)
	CompleteMessage(context.Context, *azservicebus.ReceivedMessage, *azservicebus.CompleteMessageOptions) error
	DeferMessage(context.Context, *azservicebus.ReceivedMessage, *azservicebus.DeferMessageOptions) error
}

func sbcPtr[T any](v T) *T { return &v }

// sbcOneTry: the SDK's options but one try, for the unmodelled transports
// only, whose answer does not change from one try to the next.
var sbcOneTry = &azservicebus.ClientOptions{RetryOptions: azservicebus.RetryOptions{MaxRetries: -1}}

var sbcDialer = net.Dialer{Timeout: 5 * time.Second}

func sbcContext(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// sbcClient is a client with the SDK's default options, as users run it.
func sbcClient(t *testing.T, cs string) *azservicebus.Client {
	t.Helper()
	c, err := azservicebus.NewClientFromConnectionString(cs, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close(context.Background()) })
	return c
}

func sbcReceiver(t *testing.T, c *azservicebus.Client, queue string) *azservicebus.Receiver {
	t.Helper()
	r, err := c.NewReceiverForQueue(queue, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = r.Close(context.Background()) })
	return r
}

func sbcSend(ctx context.Context, t *testing.T, c *azservicebus.Client, queue string, m *azservicebus.Message) {
	t.Helper()
	s, err := c.NewSender(queue, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close(ctx)
	if err := s.SendMessage(ctx, m, nil); err != nil {
		t.Fatalf("send to %s: %v", queue, err)
	}
}

func sbcReceiveOne(ctx context.Context, t *testing.T, r interface {
	ReceiveMessages(context.Context, int, *azservicebus.ReceiveMessagesOptions) ([]*azservicebus.ReceivedMessage, error)
}) *azservicebus.ReceivedMessage {
	t.Helper()
	rctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	ms, err := r.ReceiveMessages(rctx, 1, nil)
	if err != nil || len(ms) != 1 {
		t.Fatalf("receive: %v, %d messages; want one", err, len(ms))
	}
	return ms[0]
}

// sbcRequireNone: nothing is received within d.
func sbcRequireNone(t *testing.T, r interface {
	ReceiveMessages(context.Context, int, *azservicebus.ReceiveMessagesOptions) ([]*azservicebus.ReceivedMessage, error)
}, d time.Duration, when string) {
	t.Helper()
	if d <= 0 {
		t.Fatalf("no time left to check that nothing is received %s", when)
	}
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	ms, err := r.ReceiveMessages(ctx, 1, nil)
	if len(ms) > 0 {
		t.Fatalf("received %q (seq %d, delivery count %d) %s", ms[0].Body, *ms[0].SequenceNumber, ms[0].DeliveryCount, when)
	}
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("receive %s: %v; want nothing until the deadline", when, err)
	}
}

// sbcPeekSeq peeks from seq and returns the message with that sequence
// number, nil when there is none (a peek skips over the gap, as
// requireScheduledMessageDisappears in azservicebus's live tests relies on).
func sbcPeekSeq(ctx context.Context, t *testing.T, r interface {
	PeekMessages(context.Context, int, *azservicebus.PeekMessagesOptions) ([]*azservicebus.ReceivedMessage, error)
}, seq int64) *azservicebus.ReceivedMessage {
	t.Helper()
	ms, err := r.PeekMessages(ctx, 10, &azservicebus.PeekMessagesOptions{FromSequenceNumber: &seq})
	if err != nil {
		t.Fatalf("peek from %d: %v", seq, err)
	}
	for _, m := range ms {
		if *m.SequenceNumber == seq {
			return m
		}
	}
	return nil
}

func sbcRequireCode(t *testing.T, what string, err error, code azservicebus.Code) {
	t.Helper()
	var sbErr *azservicebus.Error
	if !errors.As(err, &sbErr) || sbErr.Code != code {
		t.Fatalf("%s: %v; want azservicebus.Error with Code %q", what, err, code)
	}
}

func sbcRequireCondition(t *testing.T, what string, err error, cond amqp.ErrCond) {
	t.Helper()
	var amqpErr *amqp.Error
	if !errors.As(err, &amqpErr) || amqpErr.Condition != cond {
		t.Fatalf("%s: %v; want an AMQP error %s", what, err, cond)
	}
}

// sbcRequireUnauthorized: a send and a receive with cs fail with
// CodeUnauthorizedAccess, without the retries' back-off (not retriable).
func sbcRequireUnauthorized(t *testing.T, cs string) {
	t.Helper()
	c := sbcClient(t, cs)
	ctx := sbcContext(t, 30*time.Second)
	start := time.Now()
	s, err := c.NewSender("plain", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close(ctx)
	sbcRequireCode(t, "SendMessage", s.SendMessage(ctx, &azservicebus.Message{Body: []byte("hello world")}, nil), azservicebus.CodeUnauthorizedAccess)
	r := sbcReceiver(t, c, "plain")
	ms, err := r.ReceiveMessages(ctx, 1, nil)
	if len(ms) > 0 {
		t.Fatal("received with a refused token")
	}
	sbcRequireCode(t, "ReceiveMessages", err, azservicebus.CodeUnauthorizedAccess)
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("the refusals took %v: not retriable (401 is RecoveryKindFatal)", d)
	}
}

// sbcRequireNotFound: sending to, receiving from, peeking and accepting
// sessions of queue (or of queue's subscription sub) fail with CodeNotFound.
func sbcRequireNotFound(t *testing.T, c *azservicebus.Client, queue, sub string) {
	t.Helper()
	ctx := sbcContext(t, 30*time.Second)
	start := time.Now()
	var r *azservicebus.Receiver
	var err error
	if sub == "" {
		var s *azservicebus.Sender
		if s, err = c.NewSender(queue, nil); err != nil {
			t.Fatal(err)
		}
		sbcRequireCode(t, "SendMessage to "+queue, s.SendMessage(ctx, &azservicebus.Message{Body: []byte("hello")}, nil), azservicebus.CodeNotFound)
		_ = s.Close(ctx)
		_, err = c.AcceptSessionForQueue(ctx, queue, "session-id", nil)
		sbcRequireCode(t, "AcceptSessionForQueue on "+queue, err, azservicebus.CodeNotFound)
		_, err = c.AcceptNextSessionForQueue(ctx, queue, nil)
		sbcRequireCode(t, "AcceptNextSessionForQueue on "+queue, err, azservicebus.CodeNotFound)
		r, err = c.NewReceiverForQueue(queue, nil)
	} else {
		_, err = c.AcceptSessionForSubscription(ctx, queue, sub, "session-id", nil)
		sbcRequireCode(t, "AcceptSessionForSubscription on "+queue+"/subscriptions/"+sub, err, azservicebus.CodeNotFound)
		r, err = c.NewReceiverForSubscription(queue, sub, nil)
	}
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close(ctx)
	ms, err := r.ReceiveMessages(ctx, 1, nil)
	if len(ms) > 0 {
		t.Fatalf("received %q from a missing entity", ms[0].Body)
	}
	sbcRequireCode(t, "ReceiveMessages", err, azservicebus.CodeNotFound)
	ms, err = r.PeekMessages(ctx, 1, nil)
	if len(ms) > 0 {
		t.Fatalf("peeked %q from a missing entity", ms[0].Body)
	}
	sbcRequireCode(t, "PeekMessages", err, azservicebus.CodeNotFound)
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("the refusals took %v: not retriable (amqp:not-found is RecoveryKindFatal)", d)
	}
}

// sbcSASToken is a SharedAccessSignature for the namespace, with the
// emulator's key, expiring at until ("Service Bus authentication with Shared
// Access Signatures": HMAC-SHA256 of "<url-encoded resource>\n<expiry>").
func sbcSASToken(addr string, until time.Time) string {
	sr := url.QueryEscape("sb://" + addr + "/")
	se := fmt.Sprint(until.Unix())
	mac := hmac.New(sha256.New, []byte(devbus.BusKey))
	mac.Write([]byte(sr + "\n" + se))
	sig := url.QueryEscape(base64.StdEncoding.EncodeToString(mac.Sum(nil)))
	return fmt.Sprintf("SharedAccessSignature sr=%s&sig=%s&se=%s&skn=%s", sr, sig, se, devbus.BusKeyName)
}

func sbcSASConnectionString(addr string, until time.Time) string {
	return fmt.Sprintf("Endpoint=sb://%s;SharedAccessSignature=%s;UseDevelopmentEmulator=true;", addr, sbcSASToken(addr, until))
}

// sbcPutToken puts a token on $cbs ("AMQP 1.0 in Azure Service Bus and Event
// Hubs protocol guide", Claims-based authorization) and returns the status.
func sbcPutToken(ctx context.Context, t *testing.T, sess *amqp.Session, typ, token, audience string) (int32, string) {
	t.Helper()
	reply := fmt.Sprintf("cbs-reply-%d", time.Now().UnixNano())
	rcv, err := sess.NewReceiver(ctx, "$cbs", &amqp.ReceiverOptions{TargetAddress: reply, Credit: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer rcv.Close(ctx)
	snd, err := sess.NewSender(ctx, "$cbs", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer snd.Close(ctx)
	id := reply
	msg := &amqp.Message{
		Properties:            &amqp.MessageProperties{MessageID: id, ReplyTo: &reply},
		ApplicationProperties: map[string]any{"operation": "put-token", "type": typ, "name": audience},
		Value:                 token,
	}
	if err := snd.Send(ctx, msg, nil); err != nil {
		t.Fatalf("put-token: %v", err)
	}
	res, err := rcv.Receive(ctx, nil)
	if err != nil {
		t.Fatalf("put-token reply: %v", err)
	}
	_ = rcv.AcceptMessage(ctx, res)
	status, _ := res.ApplicationProperties["status-code"].(int32)
	desc, _ := res.ApplicationProperties["status-description"].(string)
	return status, desc
}

// sbcFakeCredential stands for a Microsoft Entra ID credential.
type sbcFakeCredential struct{}

func (sbcFakeCredential) GetToken(context.Context, policy.TokenRequestOptions) (azcore.AccessToken, error) {
	return azcore.AccessToken{Token: "eyJhbGciOiJub25lIn0.e30.", ExpiresOn: time.Now().Add(time.Hour)}, nil
}
