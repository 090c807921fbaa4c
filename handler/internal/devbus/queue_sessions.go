package devbus

// A queue's receivers as the emulated trigger uses them: a session locked
// and delivered in order, a message locked on its own without sessions, and
// the settlements.

import (
	"context"
	"maps"
	"time"
)

// AcceptSession locks the available session whose first message is oldest,
// waiting for one; nil when ctx ends. The lock is renewed for renewFor from
// now (the SDK's renewal loop starts when it accepts the session; < 0 renews
// without end, 0 not at all: batch dispatch), then lasts LockDuration.
func (q *Queue) AcceptSession(ctx context.Context, renewFor time.Duration) *SessionLock {
	for ctx.Err() == nil {
		q.mu.Lock()
		now := q.now()
		q.sweep(now)
		// A session is available when it has a message a receive can take
		// (deferred ones are received only by sequence number).
		var best *session
		var bestHead *Message
		for _, s := range q.sessions {
			if head := s.head(); s.lock.token == 0 && head != nil && (best == nil || head.SequenceNumber < bestHead.SequenceNumber) {
				best, bestHead = s, head
			}
		}
		ch := q.changed
		if best != nil {
			token := nextToken()
			best.lock = lock{token: token, until: q.lockUntil(now, renewFor), delivered: map[int64]bool{}}
			q.mu.Unlock()
			return &SessionLock{q: q, s: best, token: token}
		}
		q.mu.Unlock()
		q.wait(ctx, ch, pollEvery)
	}
	return nil
}

// SessionLock is a session as one receiver holds it: its messages are
// delivered one batch at a time, in order, while the lock lasts.
type SessionLock struct {
	q     *Queue
	s     *session
	token int64
}

// SessionID is the locked session's id.
func (l *SessionLock) SessionID() string { return l.s.id }

// held reports, under q.mu, whether this receiver still holds the lock.
func (l *SessionLock) held(now time.Time) bool {
	return l.s.lock.token == l.token && l.s.lock.heldAt(now)
}

// Next delivers up to max messages from the head of the session, waiting up
// to idle for one; none (and no error) means the session is idle and should
// be released. errLockLost: the lock expired; the receiver must give it up.
func (l *SessionLock) Next(ctx context.Context, max int, idle time.Duration) ([]*Message, error) {
	deadline := time.Now().Add(idle)
	for ctx.Err() == nil {
		l.q.mu.Lock()
		now := l.q.now()
		l.q.sweep(now)
		if !l.held(now) {
			l.q.mu.Unlock()
			return nil, errLockLost
		}
		// The head of the session, less what this lock delivered and has
		// not settled (a receiver with more credit than one message), and
		// less the deferred messages: they do not hold the session's order
		// back, being received only by sequence number (message-deferral.md).
		var out []*Message
		for _, m := range l.s.msgs {
			if len(out) == max {
				break
			}
			if l.s.lock.delivered[m.SequenceNumber] || m.State != StateActive {
				continue
			}
			m.DeliveryCount++
			l.s.lock.delivered[m.SequenceNumber] = true
			c := *m
			out = append(out, &c)
		}
		if len(out) > 0 {
			l.q.mu.Unlock()
			return out, nil
		}
		ch := l.q.changed
		l.q.mu.Unlock()
		left := time.Until(deadline)
		if left <= 0 {
			return nil, nil
		}
		l.q.wait(ctx, ch, min(left, pollEvery))
	}
	return nil, nil
}

// Settle completes (ok) or abandons the delivered messages. An abandoned
// message that has used up its deliveries moves to the dead-letter queue and
// the session moves on. errLockLost: the lock expired first, nothing was
// settled (the SDK neither completes nor abandons then).
func (l *SessionLock) Settle(msgs []*Message, ok bool) error {
	l.q.mu.Lock()
	defer l.q.mu.Unlock()
	now := l.q.now()
	l.q.sweep(now)
	if !l.held(now) {
		return errLockLost
	}
	for _, d := range msgs {
		delete(l.s.lock.delivered, d.SequenceNumber)
		l.q.dispose(l.s, d.SequenceNumber, completeOrAbandon(ok), settleOptions{})
	}
	l.q.notify()
	return nil
}

func completeOrAbandon(ok bool) settlement {
	if ok {
		return settleComplete
	}
	return settleAbandon
}

// settlement is what a receiver does with a message it holds under a lock.
type settlement int

const (
	// settleComplete removes the message.
	settleComplete settlement = iota
	// settleAbandon gives it back, its delivery counted: it is delivered
	// again next, or dead-lettered once it used up MaxDeliveryCount.
	settleAbandon
	// settleRelease gives it back without counting the delivery (a
	// receiver released a message it did not take: azservicebus's releaser).
	settleRelease
	// settleDefer sets it aside: it stays in the queue, deferred, received
	// only by its sequence number (message-deferral.md); the delivery is
	// not counted (.NET ServiceBusReceivedMessage.DeliveryCount: the count
	// goes up when a lock expires or a message is abandoned).
	settleDefer
	// settleDeadLetter moves it to the dead-letter sub-queue.
	settleDeadLetter
)

// settleOptions go with a settlement: the receiver's dead-letter reason and
// description, and the application properties it modifies (abandon, defer
// and dead-letter take propertiesToModify).
type settleOptions struct {
	Reason, Description string
	Properties          map[string]any
}

// dispose settles message seq of s, delivered under a lock the caller has
// checked and let go, under q.mu.
func (q *Queue) dispose(s *session, seq int64, how settlement, o settleOptions) {
	i := indexOf(s.msgs, seq)
	if i < 0 {
		return
	}
	m := s.msgs[i]
	if len(o.Properties) > 0 {
		props := make(map[string]any, len(m.Properties)+len(o.Properties))
		maps.Copy(props, m.Properties)
		maps.Copy(props, o.Properties)
		m.Properties, m.properties = props, propertiesJSON(props)
	}
	switch how {
	case settleComplete:
		s.msgs = append(s.msgs[:i], s.msgs[i+1:]...)
	case settleDeadLetter:
		q.deadLetterAs(s, i, o.Reason, o.Description)
	case settleDefer:
		m.State = StateDeferred
		m.DeliveryCount = max(m.DeliveryCount-1, 0)
	case settleRelease:
		m.DeliveryCount = max(m.DeliveryCount-1, 0)
		fallthrough
	default: // abandoned: it stays where it is (deferred if it was) and is delivered again next
		if m.DeliveryCount >= q.props.MaxDeliveryCount {
			q.deadLetter(s, i, ReasonMaxDelivery)
		}
	}
}

// Release closes the session receiver: the lock is given up if still held.
func (l *SessionLock) Release() {
	l.q.mu.Lock()
	defer l.q.mu.Unlock()
	if l.s.lock.token == l.token {
		l.q.release(l.s, &l.s.lock)
	}
	l.q.sweep(l.q.now())
	l.q.notify()
}

// Receive locks the oldest message that is not locked (queues without
// sessions), renewing its lock for renewFor as AcceptSession does; nil when
// ctx ends. settle completes (ok) or abandons it, or reports errLockLost.
func (q *Queue) Receive(ctx context.Context, renewFor time.Duration) (m *Message, settle func(ok bool) error) {
	for ctx.Err() == nil {
		q.mu.Lock()
		now := q.now()
		q.sweep(now)
		if s := q.sessions[""]; s != nil {
			for _, m := range s.msgs {
				if s.locks[m.SequenceNumber] != nil || m.State != StateActive {
					continue
				}
				token := nextToken()
				s.locks[m.SequenceNumber] = &lock{token: token, until: q.lockUntil(now, renewFor), delivered: map[int64]bool{m.SequenceNumber: true}}
				m.DeliveryCount++
				c := *m
				q.mu.Unlock()
				return &c, func(ok bool) error { return q.settleMessage(s, c.SequenceNumber, token, ok) }
			}
		}
		ch := q.changed
		q.mu.Unlock()
		q.wait(ctx, ch, pollEvery)
	}
	return nil, nil
}

func (q *Queue) settleMessage(s *session, seq, token int64, ok bool) error {
	q.mu.Lock()
	defer q.mu.Unlock()
	now := q.now()
	q.sweep(now)
	l := s.locks[seq]
	if l == nil || l.token != token || !l.heldAt(now) {
		return errLockLost
	}
	delete(s.locks, seq)
	q.dispose(s, seq, completeOrAbandon(ok), settleOptions{})
	q.notify()
	return nil
}
