package devbus_test

import (
	"context"
	"errors"
	"maps"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"

	"github.com/convoy-dev/convoy/handler/internal/devbus"
)

// Lock expiry with the real azservicebus client and its default retry
// options, as users run it: a settlement after the lock expired fails with
// CodeLockLost on every path the SDK takes, the receiving link and, when the
// SDK retries there, $management's update-disposition. Expectations:
// azservicebus's live test TestReceiverMessageLockExpires (a queue without
// sessions, CodeLockLost), its internal/errors.go (isLockLostError: 410 from
// $management or com.microsoft:message-lock-lost on the link are lock lost),
// and for the delivery count of what comes back: message-sessions.md ("Impact
// of delivery count": the session lock expires, the count is incremented)
// and .NET's ServiceBusReceivedMessage.DeliveryCount (incremented "when a
// message lock expires").

const shortLock = 2 * time.Second

func requireLockLost(t *testing.T, what string, err error) {
	t.Helper()
	if sbErr := (*azservicebus.Error)(nil); !errors.As(err, &sbErr) || sbErr.Code != azservicebus.CodeLockLost {
		t.Fatalf("%s after the lock expired: %v, want CodeLockLost", what, err)
	}
}

// settleAll is every way the SDK settles, by name.
var settleAll = map[string]func(ctx context.Context, settle settler, m *azservicebus.ReceivedMessage) error{
	"complete": func(ctx context.Context, s settler, m *azservicebus.ReceivedMessage) error {
		return s.CompleteMessage(ctx, m, nil)
	},
	"abandon": func(ctx context.Context, s settler, m *azservicebus.ReceivedMessage) error {
		return s.AbandonMessage(ctx, m, nil)
	},
	"defer": func(ctx context.Context, s settler, m *azservicebus.ReceivedMessage) error {
		return s.DeferMessage(ctx, m, nil)
	},
	"deadLetter": func(ctx context.Context, s settler, m *azservicebus.ReceivedMessage) error {
		return s.DeadLetterMessage(ctx, m, nil)
	},
}

type settler interface {
	CompleteMessage(context.Context, *azservicebus.ReceivedMessage, *azservicebus.CompleteMessageOptions) error
	AbandonMessage(context.Context, *azservicebus.ReceivedMessage, *azservicebus.AbandonMessageOptions) error
	DeferMessage(context.Context, *azservicebus.ReceivedMessage, *azservicebus.DeferMessageOptions) error
	DeadLetterMessage(context.Context, *azservicebus.ReceivedMessage, *azservicebus.DeadLetterOptions) error
}

// TestSessionLockExpiryOnEveryPath: session messages settled after their
// session lock expired fail with CodeLockLost whatever the settlement. The
// emulation detaches the session's link when the lock expires, as Service
// Bus does, so the SDK settles on $management (messageSettler.go,
// shouldSettleOnMgmtLink on a link error), where the lock is lost too; the
// SDK retries a lost session lock (GetRecoveryKindForSession) with its
// default retry options (settleWithRetries passes RetryOptions{}: three
// retries, 4 s apart and growing), so each settlement takes some 40 s: the
// four run at once. The messages stay in the session, delivered again with
// their delivery counted.
func TestSessionLockExpiryOnEveryPath(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	_, qs, client := startBus(t, map[string]devbus.QueueProperties{"orders": {RequiresSession: true, LockDuration: shortLock}})
	q := qs["orders"]
	names := slices.Sorted(maps.Keys(settleAll))
	var msgs []devbus.Message
	for _, name := range names {
		msgs = append(msgs, devbus.Message{MessageID: name, SessionID: "o-1", Body: []byte(name)})
	}
	if _, _, err := q.Send(msgs); err != nil {
		t.Fatal(err)
	}
	r, err := client.AcceptSessionForQueue(ctx, "orders", "o-1", nil)
	if err != nil {
		t.Fatal(err)
	}
	var got []*azservicebus.ReceivedMessage
	for len(got) < len(names) {
		ms, err := r.ReceiveMessages(ctx, len(names)-len(got), nil)
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, ms...)
	}
	time.Sleep(shortLock + 500*time.Millisecond)
	errs := make([]error, len(got))
	var wg sync.WaitGroup
	for i, m := range got {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = settleAll[m.MessageID](ctx, r, m)
		}()
	}
	wg.Wait()
	for i, m := range got {
		requireLockLost(t, m.MessageID, errs[i])
	}
	if st := q.Stats(); st.Active != len(names) || st.DeadLettered != 0 || st.Deferred != 0 {
		t.Fatalf("after settlements with a lost lock: %+v, want the %d messages still active", st, len(names))
	}
	for _, p := range q.Peek(0, 10, nil) {
		if p.State != devbus.StateActive {
			t.Fatalf("after settlements with a lost lock, a peek finds %s in state %d, want active", p.MessageID, p.State)
		}
	}
	_ = r.Close(ctx)
	again, err := client.AcceptSessionForQueue(ctx, "orders", "o-1", nil)
	if err != nil {
		t.Fatalf("accepting the session again: %v", err)
	}
	defer again.Close(ctx)
	var redelivered []*azservicebus.ReceivedMessage
	for len(redelivered) < len(names) {
		ms, err := again.ReceiveMessages(ctx, len(names)-len(redelivered), nil)
		if err != nil {
			t.Fatal(err)
		}
		redelivered = append(redelivered, ms...)
	}
	for i, m := range redelivered {
		if m.MessageID != names[i] || m.DeliveryCount != 2 {
			t.Fatalf("redelivered %s as delivery %d, want %s, its second delivery", m.MessageID, m.DeliveryCount, names[i])
		}
	}
}

// TestMessageLockExpiryOnEveryPath: the same on a queue without sessions
// (TestReceiverMessageLockExpires), and through $management alone, settling
// by lock token with a new receiver (as TestReceiver_SettleWithOnlyLockToken
// does, but after the lock expired).
func TestMessageLockExpiryOnEveryPath(t *testing.T) {
	t.Parallel()
	for name, settle := range settleAll {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			_, qs, client := startBus(t, map[string]devbus.QueueProperties{"plain": {LockDuration: shortLock}})
			q := qs["plain"]
			if _, _, err := q.Send([]devbus.Message{{MessageID: "m1", Body: []byte("a")}, {MessageID: "m2", Body: []byte("b")}}); err != nil {
				t.Fatal(err)
			}
			r, err := client.NewReceiverForQueue("plain", nil)
			if err != nil {
				t.Fatal(err)
			}
			defer r.Close(ctx)
			var got []*azservicebus.ReceivedMessage
			for len(got) < 2 {
				msgs, err := r.ReceiveMessages(ctx, 2-len(got), nil)
				if err != nil {
					t.Fatal(err)
				}
				got = append(got, msgs...)
			}
			time.Sleep(shortLock + 500*time.Millisecond)
			requireLockLost(t, name+" on the link", settle(ctx, r, got[0]))
			other, err := client.NewReceiverForQueue("plain", nil)
			if err != nil {
				t.Fatal(err)
			}
			defer other.Close(ctx)
			requireLockLost(t, name+" by lock token", settle(ctx, other, &azservicebus.ReceivedMessage{LockToken: got[1].LockToken}))
			if st := q.Stats(); st.Active != 2 || st.DeadLettered != 0 {
				t.Fatalf("after a %s with a lost lock: %+v, want both messages still active", name, st)
			}
			var again []*azservicebus.ReceivedMessage
			for len(again) < 2 {
				msgs, err := other.ReceiveMessages(ctx, 2-len(again), nil)
				if err != nil {
					t.Fatal(err)
				}
				again = append(again, msgs...)
			}
			for _, m := range again {
				if m.DeliveryCount != 2 {
					t.Fatalf("after a %s with a lost lock, %s comes back as delivery %d, want 2", name, m.MessageID, m.DeliveryCount)
				}
			}
		})
	}
}
