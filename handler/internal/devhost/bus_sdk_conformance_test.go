package devhost_test

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

	"github.com/convoy-dev/convoy/handler/internal/devhost"
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
var sbcQueues = map[string]devhost.QueueProperties{
	"lock-link":      {LockDuration: sbcLock},
	"lock-mgmt":      {LockDuration: sbcLock},
	"locked-session": {RequiresSession: true},
	"needs-session":  {RequiresSession: true},
	"size":           {},
	"renew":          {},
	"renew-session":  {RequiresSession: true},
	"partition":      {},
	"plain":          {},
}

func TestSDKConformance(t *testing.T) {
	qs := map[string]*devhost.Queue{}
	for name, p := range sbcQueues {
		qs[name] = devhost.NewQueue(name, p)
	}
	bus, err := devhost.StartBus("127.0.0.1:0", qs, nil)
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
			wrong := strings.Replace(cs, "SharedAccessKey="+devhost.BusKey, "SharedAccessKey=not-the-key", 1)
			sbcRequireUnauthorized(t, wrong)
		})
		t.Run("expired SAS token", func(t *testing.T) {
			t.Parallel()
			sbcRequireUnauthorized(t, sbcSASConnectionString(bus.Addr(), time.Now().Add(-10*time.Minute)))
		})
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

// sbcSASToken is a SharedAccessSignature for the namespace, with the
// emulator's key, expiring at until ("Service Bus authentication with Shared
// Access Signatures": HMAC-SHA256 of "<url-encoded resource>\n<expiry>").
func sbcSASToken(addr string, until time.Time) string {
	sr := url.QueryEscape("sb://" + addr + "/")
	se := fmt.Sprint(until.Unix())
	mac := hmac.New(sha256.New, []byte(devhost.BusKey))
	mac.Write([]byte(sr + "\n" + se))
	sig := url.QueryEscape(base64.StdEncoding.EncodeToString(mac.Sum(nil)))
	return fmt.Sprintf("SharedAccessSignature sr=%s&sig=%s&se=%s&skn=%s", sr, sig, se, devhost.BusKeyName)
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
