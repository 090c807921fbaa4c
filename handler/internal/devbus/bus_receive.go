package devbus

// The receive side of the AMQP face: receiver links on a queue, its
// sessions and its dead-letter sub-queue, delivering as credit allows.

import (
	"fmt"
	"sync"
	"time"

	"github.com/convoy-dev/convoy/handler/internal/amqp"
)

// receiverLink delivers a queue's (or its dead-letter sub-queue's)
// messages to a client receiver, as its credit allows.
type receiverLink struct {
	c       *busConn
	q       *Queue
	dead    bool         // the dead-letter sub-queue
	session *SessionLock // a session receiver's session
	deletes bool         // receive-and-delete: sent settled, removed at once
	// A session receiver's request: the session named (nil: the next
	// available one) and how long to wait for one.
	accept     bool
	sessionID  *string
	acceptWait time.Duration
	name       string // the link's name

	mu   sync.Mutex
	done chan struct{}
}

type delivered struct{ lock, seq int64 }

// receivers are the receiver links by connection and link name: a
// $management request names the receiver it is for in its
// associated-link-name application property (azservicebus's mgmt.go:
// addAssociatedLinkName; its ReceiveDeferred sends no session-id), and on a
// session queue that receiver's session is the one the request acts in.
var receivers sync.Map // receiverKey → *receiverLink

type receiverKey struct {
	c    *busConn
	name string
}

// receiverNamed is the connection's receiver link called name, or nil.
func (c *busConn) receiverNamed(name string) *receiverLink {
	if v, ok := receivers.Load(receiverKey{c, name}); ok {
		return v.(*receiverLink)
	}
	return nil
}

func (c *busConn) attachReceiver(l *amqp.Link, q *Queue, dead bool) (amqp.LinkHandler, *amqp.Error) {
	r := &receiverLink{c: c, q: q, dead: dead, deletes: l.SndSettle == 1, name: l.Name, done: make(chan struct{})}
	receivers.Store(receiverKey{c, l.Name}, r)
	filters, _ := l.Source.Field(7).(amqp.Map)
	want, isSession := filters[sessionFilter]
	switch {
	case isSession && (dead || !q.Properties().RequiresSession):
		receivers.CompareAndDelete(receiverKey{c, l.Name}, r)
		return nil, &amqp.Error{Condition: amqp.ErrNotAllowed, Description: fmt.Sprintf("It is not possible for an entity that does not require sessions to create a session receiver: %s", l.Address())}
	case !isSession && !dead && q.Properties().RequiresSession:
		receivers.CompareAndDelete(receiverKey{c, l.Name}, r)
		return nil, &amqp.Error{Condition: amqp.ErrNotAllowed, Description: fmt.Sprintf("It is not possible for an entity that requires sessions to create a non-sessionful message receiver: %s", l.Address())}
	case !isSession:
		if err := l.AttachReply(l.Source, l.Target, 0, nil); err != nil {
			receivers.CompareAndDelete(receiverKey{c, l.Name}, r)
			return nil, &amqp.Error{Condition: amqp.ErrInternal, Description: err.Error()}
		}
		return r, nil
	}
	var id *string
	if d, ok := want.(*amqp.Described); ok {
		want = d.Value
	}
	if s, ok := want.(string); ok {
		id = &s
	}
	r.accept, r.sessionID, r.acceptWait = true, id, acceptTimeout
	if ms, ok := amqp.Uint(l.Properties[linkTimeout]); ok {
		r.acceptWait = time.Duration(ms) * time.Millisecond
	}
	return r, nil
}

// Start implements amqp.Starter: a session receiver's attach is answered
// when a session is locked (accepting the next available one waits; the
// connection goes on meanwhile); then, as for any receiver, messages flow
// as the credit allows.
func (r *receiverLink) Start(l *amqp.Link) {
	if r.accept {
		go r.acceptSession(l, r.sessionID, r.acceptWait)
		return
	}
	go r.deliver(l)
}

func (r *receiverLink) acceptSession(l *amqp.Link, id *string, wait time.Duration) {
	var lock *SessionLock
	if id != nil {
		var err error
		if lock, err = r.q.acceptNamedSession(*id); err != nil {
			_ = l.Refuse(&amqp.Error{Condition: condSessionCannotLock, Description: fmt.Sprintf("The requested session '%s' cannot be accepted. It may be locked by another receiver.", *id)})
			return
		}
	} else {
		ctx, cancel := contextUntil(r.done, wait)
		lock = r.q.AcceptSession(ctx, 0)
		cancel()
		if lock == nil {
			_ = l.Refuse(&amqp.Error{Condition: CondTimeout, Description: "The operation did not complete within the allocated time: no unlocked session is available."})
			return
		}
	}
	r.mu.Lock()
	r.session = lock
	r.mu.Unlock()
	r.c.holdSession(lock)
	source := &amqp.Performative{Code: amqp.CodeSource, Fields: append([]any(nil), l.Source.Fields...)}
	filters := amqp.Map{}
	for k, v := range source.Field(7).(amqp.Map) {
		filters[k] = v
	}
	// The session id comes back in the form the client asked in: described
	// for azservicebus (go-amqp reads only a described filter), a plain
	// string for rhea (which leaves a described value of an unknown
	// descriptor wrapped, and compares the string).
	if d, ok := filters[sessionFilter].(*amqp.Described); ok {
		filters[sessionFilter] = &amqp.Described{Descriptor: d.Descriptor, Value: lock.SessionID()}
	} else {
		filters[sessionFilter] = lock.SessionID()
	}
	source.Fields[7] = filters
	if err := l.AttachReply(source, l.Target, 0, amqp.Map{lockedUntilUTC: ticks(lock.lockedUntil())}); err != nil {
		lock.Release()
		return
	}
	r.deliver(l)
}

// deliver sends messages while the link has credit, until it goes. A
// session receiver's link is detached with com.microsoft:session-lock-lost
// as soon as its session lock expires, credit or not, as Service Bus does
// ("when a sessionful entity's lock expired, the service would send a
// detach frame indicating the session lock is lost": azure-uamqp-python
// issue 183; azure-service-bus-dotnet PR 226 handles "the scenario where
// session link is closed from the broker due to Session timing out"). A
// settlement the client then tries can only go through $management, where
// the lock is lost too.
func (r *receiverLink) deliver(l *amqp.Link) {
	for {
		credit, drain, changed := l.Credit()
		select {
		case <-r.done:
			return
		default:
		}
		if s := r.lockedSession(); s != nil && !s.heldNow() {
			_ = l.Detach(sessionLockLost())
			return
		}
		sent := 0
		for ; credit > 0; credit-- {
			ok, err := r.sendOne(l)
			if err != nil {
				_ = l.Detach(err)
				return
			}
			if !ok {
				break
			}
			sent++
		}
		if sent > 0 {
			continue
		}
		if drain {
			_ = l.Drained()
			continue
		}
		r.q.mu.Lock()
		queueChanged := r.q.changed
		r.q.mu.Unlock()
		select {
		case <-r.done:
			return
		case <-changed:
		case <-queueChanged:
		case <-time.After(pollEvery):
		}
	}
}

// sendOne takes one message for the link and sends it; false when there is none.
func (r *receiverLink) sendOne(l *amqp.Link) (bool, *amqp.Error) {
	var m *Message
	var lock int64
	var until time.Time
	switch {
	case r.lockedSession() != nil:
		msgs, err := r.session.tryNext(1)
		if err != nil {
			return false, sessionLockLost()
		}
		if len(msgs) == 0 {
			return false, nil
		}
		m, lock, until = msgs[0], r.session.Token(), r.session.lockedUntil()
	case r.dead:
		got := r.q.ReceiveDeadLetters(1)
		if len(got) == 0 {
			return false, nil
		}
		m, lock, until = &got[0].Message, got[0].LockToken, got[0].LockedUntil
	default:
		got := r.q.tryReceive()
		if got == nil {
			return false, nil
		}
		m, lock, until = got.Message, got.Token, got.LockedUntil
	}
	token := amqp.UUID(lockToken(lock, m.SequenceNumber))
	if r.deletes {
		_ = r.settle(delivered{lock, m.SequenceNumber}, settleComplete, settleOptions{})
		until = time.Time{}
	}
	payload, err := toAMQP(m, until, &token)
	if err != nil {
		return false, &amqp.Error{Condition: amqp.ErrInternal, Description: err.Error()}
	}
	if err := l.Send(netGUID(token), 0, payload, r.deletes); err != nil {
		return false, &amqp.Error{Condition: amqp.ErrInternal, Description: err.Error()}
	}
	return true, nil
}

// sessionLockLost is Service Bus's error for a session whose lock expired.
func sessionLockLost() *amqp.Error {
	return &amqp.Error{Condition: condSessionLockLost, Description: "The session lock has expired on the MessageSession. Accept a new MessageSession."}
}

func (r *receiverLink) lockedSession() *SessionLock {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.session
}

func (r *receiverLink) Transfer(*amqp.Link, amqp.Delivery) *amqp.Performative { return nil }
func (r *receiverLink) Flow(*amqp.Link)                                       {}

// Detached: a session receiver gives its session up (what it delivered and
// did not settle becomes available again, its delivery counted).
func (r *receiverLink) Detached(*amqp.Link, *amqp.Error) {
	receivers.CompareAndDelete(receiverKey{r.c, r.name}, r)
	r.mu.Lock()
	select {
	case <-r.done:
	default:
		close(r.done)
	}
	s := r.session
	r.mu.Unlock()
	if s != nil {
		r.c.releaseSession(s)
		s.Release()
	}
}
