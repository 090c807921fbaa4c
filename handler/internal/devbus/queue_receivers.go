package devbus

import (
	"context"
	"encoding/binary"
	"errors"
	"sort"
	"time"
)

// What a receiver other than the emulated trigger does with the queue: the
// AMQP face's session and queue receivers (bus_receive.go,
// bus_management.go). Service Bus semantics from the SDKs' source and the
// docs: a session receiver holds
// its session's lock for LockDuration from acceptance or its last renewal
// (renew-session-lock); a named session can be accepted while it has no
// messages; a session's state lives as long as the session is known to the
// queue, with or without messages (message-sessions.md, "Message session
// state"); a message received from a queue without sessions is locked on its
// own and renewed with renew-lock. Deferred messages (received by sequence
// number) and scheduled ones (held aside until their time) are here too.

// errSessionCannotBeLocked: another receiver holds the session.
var errSessionCannotBeLocked = errors.New("the session is locked by another receiver")

// lockToken is a lock token as the AMQP face writes it: the lock (a
// session's or a message's) and the message's sequence number.
func lockToken(lock, seq int64) [16]byte {
	var u [16]byte
	binary.BigEndian.PutUint64(u[:8], uint64(lock))
	binary.BigEndian.PutUint64(u[8:], uint64(seq))
	return u
}

// parseLockToken splits a lock token.
func parseLockToken(u [16]byte) (lock, seq int64) {
	return int64(binary.BigEndian.Uint64(u[:8])), int64(binary.BigEndian.Uint64(u[8:]))
}

// acceptNamedSession locks session id, known or not: errSessionCannotBeLocked
// when another receiver holds it. The lock lasts LockDuration (renewed by renew).
func (q *Queue) acceptNamedSession(id string) (*SessionLock, error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	now := q.now()
	q.sweep(now)
	s := q.sessions[id]
	if s == nil {
		s = &session{id: id, locks: map[int64]*lock{}}
		q.sessions[id] = s
	}
	if s.lock.heldAt(now) {
		return nil, errSessionCannotBeLocked
	}
	token := nextToken()
	s.lock = lock{token: token, until: q.lockUntil(now, 0), delivered: map[int64]bool{}}
	return &SessionLock{q: q, s: s, token: token}, nil
}

// Token is the lock's token.
func (l *SessionLock) Token() int64 { return l.token }

// heldNow reports whether this receiver still holds the session lock (cheap:
// no sweep, for a receiver link that checks it every few milliseconds).
func (l *SessionLock) heldNow() bool {
	l.q.mu.Lock()
	defer l.q.mu.Unlock()
	return l.held(l.q.now())
}

// lockedUntil is when the lock ends unless renewed (zero: renewed without end).
func (l *SessionLock) lockedUntil() time.Time {
	l.q.mu.Lock()
	defer l.q.mu.Unlock()
	return l.s.lock.until
}

// renew extends the session lock to LockDuration from now.
func (l *SessionLock) renew() (time.Time, error) {
	l.q.mu.Lock()
	defer l.q.mu.Unlock()
	now := l.q.now()
	l.q.sweep(now)
	if !l.held(now) {
		return time.Time{}, errLockLost
	}
	l.s.lock.until = now.Add(l.q.props.LockDuration)
	return l.s.lock.until, nil
}

// tryNext delivers up to max messages from the head of the session without
// waiting: none when nothing is available.
func (l *SessionLock) tryNext(max int) ([]*Message, error) {
	return l.Next(context.Background(), max, 0)
}

// settleAs settles one message this lock delivered (by a receive or by
// sequence number): errLockLost when the lock is no longer held, or did
// not deliver it. A session's messages are settled only while its lock is
// held by the receiver that took them (message-sessions.md: the session
// lock holds the session's messages).
func (l *SessionLock) settleAs(seq int64, how settlement, o settleOptions) error {
	l.q.mu.Lock()
	defer l.q.mu.Unlock()
	now := l.q.now()
	l.q.sweep(now)
	if !l.held(now) || !l.s.lock.delivered[seq] {
		return errLockLost
	}
	delete(l.s.lock.delivered, seq)
	l.q.dispose(l.s, seq, how, o)
	l.q.notify()
	return nil
}

// state returns the session's state (nil: none set).
func (l *SessionLock) state() ([]byte, error) {
	l.q.mu.Lock()
	defer l.q.mu.Unlock()
	if !l.held(l.q.now()) {
		return nil, errLockLost
	}
	return l.q.states[l.s.id], nil
}

// setState sets the session's state (nil clears it).
func (l *SessionLock) setState(state []byte) error {
	l.q.mu.Lock()
	defer l.q.mu.Unlock()
	if !l.held(l.q.now()) {
		return errLockLost
	}
	if state == nil {
		delete(l.q.states, l.s.id)
	} else {
		l.q.states[l.s.id] = append([]byte(nil), state...)
	}
	return nil
}

// receivedMessage is a message of a queue without sessions, locked on its own.
type receivedMessage struct {
	*Message
	Token       int64
	LockedUntil time.Time
}

// tryReceive locks the oldest message no receiver holds (queues without
// sessions), for LockDuration; nil when there is none.
func (q *Queue) tryReceive() *receivedMessage {
	q.mu.Lock()
	defer q.mu.Unlock()
	now := q.now()
	q.sweep(now)
	s := q.sessions[""]
	if s == nil {
		return nil
	}
	for _, m := range s.msgs {
		if s.locks[m.SequenceNumber] != nil || m.State != StateActive {
			continue
		}
		l := &lock{token: nextToken(), until: q.lockUntil(now, 0), delivered: map[int64]bool{m.SequenceNumber: true}}
		s.locks[m.SequenceNumber] = l
		m.DeliveryCount++
		c := *m
		return &receivedMessage{Message: &c, Token: l.token, LockedUntil: l.until}
	}
	return nil
}

// messageLock returns the live lock token holds on message seq (queues
// without sessions), under q.mu.
func (q *Queue) messageLock(seq, token int64) (*session, *lock, error) {
	now := q.now()
	q.sweep(now)
	s := q.sessions[""]
	if s == nil || s.locks[seq] == nil || s.locks[seq].token != token || !s.locks[seq].heldAt(now) {
		return nil, nil, errLockLost
	}
	return s, s.locks[seq], nil
}

// settleReceived completes (ok) or abandons a message tryReceive locked.
func (q *Queue) settleReceived(seq, token int64, ok bool) error {
	return q.settleByToken(seq, token, completeOrAbandon(ok), settleOptions{})
}

// settleByToken settles a message locked on its own (queues without
// sessions: tryReceive, or receiveDeferred) by its lock token, from any
// receiver (azservicebus's live test TestReceiver_SettleWithOnlyLockToken
// settles with a new receiver): errLockLost when the lock expired or is
// not this one.
func (q *Queue) settleByToken(seq, token int64, how settlement, o settleOptions) error {
	q.mu.Lock()
	defer q.mu.Unlock()
	s, _, err := q.messageLock(seq, token)
	if err != nil {
		return err
	}
	delete(s.locks, seq)
	q.dispose(s, seq, how, o)
	q.notify()
	return nil
}

// renewMessageLock extends a message lock to LockDuration from now.
func (q *Queue) renewMessageLock(seq, token int64) (time.Time, error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	_, l, err := q.messageLock(seq, token)
	if err != nil {
		return time.Time{}, err
	}
	l.until = q.now().Add(q.props.LockDuration)
	return l.until, nil
}

// Peek returns copies of up to max messages (of session id only when
// sessionID is not nil) whose sequence number is at least from, in
// sequence-number order, locking none: active ones, locked or not, deferred
// and scheduled ones, each with its State (message-browsing.md: a peek on a
// queue returns active, locked, deferred and scheduled messages, not dead
// letters). A peeked message's DeliveryCount is what Service Bus reports:
// the deliveries that ended unsettled (abandoned, or their lock expired),
// plus the one under way when it is locked (azservicebus's live test
// TestDeferredMessages/Abandon: an abandon shows in a peek as one delivery
// more).
func (q *Queue) Peek(from int64, max int, sessionID *string) []Message {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.sweep(q.now())
	var all []Message
	for id, s := range q.sessions {
		if sessionID != nil && *sessionID != id {
			continue
		}
		for _, m := range s.msgs {
			c := *m
			if !s.lock.delivered[m.SequenceNumber] && s.locks[m.SequenceNumber] == nil {
				c.DeliveryCount++ // as the next delivery would report it
			}
			all = append(all, c)
		}
	}
	for _, m := range q.scheduled {
		if sessionID == nil || *sessionID == m.SessionID {
			c := *m
			c.DeliveryCount++
			all = append(all, c)
		}
	}
	sort.Slice(all, func(a, b int) bool { return all[a].SequenceNumber < all[b].SequenceNumber })
	var out []Message
	for _, m := range all {
		if len(out) >= max {
			break
		}
		if m.SequenceNumber >= from {
			out = append(out, m)
		}
	}
	return out
}

// schedule enqueues msgs to become active at `at` (schedule-message): each
// gets a sequence number now, the one it is peeked and cancelled by, and a
// new one when it becomes active (message-sequencing.md, "Scheduled
// messages"). A time already past enqueues them at once. It refuses what
// Send refuses; a duplicate dropped has sequence number 0.
func (q *Queue) schedule(msgs []Message, at time.Time) ([]int64, error) {
	msgs = append([]Message(nil), msgs...)
	for i := range msgs {
		msgs[i].ScheduledEnqueueTime = at
	}
	return q.enqueue(msgs)
}

// cancelScheduled deletes the scheduled messages with these sequence
// numbers ("Cancellation deletes the message", message-sequencing.md); a
// number that is not a scheduled message (unknown, cancelled already, or
// active by now) is passed over. It returns how many it deleted.
func (q *Queue) cancelScheduled(seqs []int64) int {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.sweep(q.now())
	cancel := map[int64]bool{}
	for _, seq := range seqs {
		cancel[seq] = true
	}
	left := q.scheduled[:0]
	for _, m := range q.scheduled {
		if !cancel[m.SequenceNumber] {
			left = append(left, m)
		}
	}
	n := len(q.scheduled) - len(left)
	clear(q.scheduled[len(left):])
	q.scheduled = left
	if n > 0 {
		q.notify()
	}
	return n
}

// receiveDeferred receives the deferred messages with these sequence
// numbers (receive-by-sequence-number, message-deferral.md): locked for
// LockDuration each when peekLock, removed at once otherwise (azservicebus's
// live test TestReceiverDeferWithReceiveAndDelete). A message keeps its
// deferred state (x-opt-message-state 1: TestDeferredMessages/Defer), is
// settled by its lock token, and an abandon or a lost lock leaves it
// deferred, its delivery counted. On a session queue the messages must be
// of the session sl holds: errLockLost when it no longer holds it.
// A deferred message whose time to live ran out is expired when asked for
// ("When a client tries to retrieve a deferred message, it's checked for
// expired condition and moved to a dead-letter queue if it's already
// expired", message-deferral.md), and is not found. errMessageNotFound, for
// the whole request, when a number is not a deferred message of the queue
// (or of the session), or another receive by sequence number holds it.
func (q *Queue) receiveDeferred(seqs []int64, sl *SessionLock, peekLock bool) ([]*receivedMessage, error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	now := q.now()
	q.sweep(now)
	s := q.sessions[""]
	if q.props.RequiresSession {
		if sl == nil || sl.q != q || !sl.held(now) {
			return nil, errLockLost
		}
		s = sl.s
	}
	missing, changed := false, false
	for _, seq := range seqs {
		i := -1
		if s != nil {
			i = indexOf(s.msgs, seq)
		}
		switch {
		case i < 0 || s.msgs[i].State != StateDeferred:
			missing = true
		case !s.msgs[i].ExpiresAt.IsZero() && !now.Before(s.msgs[i].ExpiresAt) && !s.lock.delivered[seq] && s.locks[seq] == nil:
			q.expired++
			if q.props.DeadLetteringOnMessageExpiration {
				q.deadLetter(s, i, ReasonExpired)
			} else {
				s.msgs = append(s.msgs[:i], s.msgs[i+1:]...)
			}
			missing, changed = true, true
		case s.lock.delivered[seq] || s.locks[seq] != nil:
			missing = true
		}
	}
	if changed {
		q.notify()
	}
	if missing {
		return nil, errMessageNotFound
	}
	out := make([]*receivedMessage, 0, len(seqs))
	for _, seq := range seqs {
		i := indexOf(s.msgs, seq)
		if i < 0 {
			continue // asked for twice
		}
		m := s.msgs[i]
		m.DeliveryCount++
		c := *m
		got := &receivedMessage{Message: &c}
		switch {
		case !peekLock:
			s.msgs = append(s.msgs[:i], s.msgs[i+1:]...)
		case sl != nil:
			s.lock.delivered[seq] = true
			got.Token, got.LockedUntil = sl.token, s.lock.until
		default:
			l := &lock{token: nextToken(), until: q.lockUntil(now, 0), delivered: map[int64]bool{seq: true}}
			s.locks[seq] = l
			got.Token, got.LockedUntil = l.token, l.until
		}
		out = append(out, got)
	}
	q.notify()
	return out, nil
}
