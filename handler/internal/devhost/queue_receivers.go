package devhost

import (
	"context"
	"encoding/binary"
	"errors"
	"time"
)

// What a receiver other than the emulated trigger does with the queue: the
// AMQP face's session and queue receivers (amqp_bus.go). Service Bus
// semantics from the SDKs' source and the docs: a session receiver holds
// its session's lock for LockDuration from acceptance or its last renewal
// (renew-session-lock); a named session can be accepted while it has no
// messages; a session's state lives as long as the session is known to the
// queue, with or without messages (message-sessions.md, "Message session
// state"); a message received from a queue without sessions is locked on its
// own and renewed with renew-lock.

// ErrSessionCannotBeLocked: another receiver holds the session.
var ErrSessionCannotBeLocked = errors.New("the session is locked by another receiver")

// LockToken is a lock token as the AMQP face writes it: the lock (a
// session's or a message's) and the message's sequence number.
func LockToken(lock, seq int64) [16]byte {
	var u [16]byte
	binary.BigEndian.PutUint64(u[:8], uint64(lock))
	binary.BigEndian.PutUint64(u[8:], uint64(seq))
	return u
}

// ParseLockToken splits a lock token.
func ParseLockToken(u [16]byte) (lock, seq int64) {
	return int64(binary.BigEndian.Uint64(u[:8])), int64(binary.BigEndian.Uint64(u[8:]))
}

// AcceptNamedSession locks session id, known or not: ErrSessionCannotBeLocked
// when another receiver holds it. The lock lasts LockDuration (renewed by Renew).
func (q *Queue) AcceptNamedSession(id string) (*SessionLock, error) {
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
		return nil, ErrSessionCannotBeLocked
	}
	q.tokens++
	s.lock = lock{token: q.tokens, until: q.lockUntil(now, 0), delivered: map[int64]bool{}}
	return &SessionLock{q: q, s: s, token: q.tokens}, nil
}

// Token is the lock's token.
func (l *SessionLock) Token() int64 { return l.token }

// LockedUntil is when the lock ends unless renewed (zero: renewed without end).
func (l *SessionLock) LockedUntil() time.Time {
	l.q.mu.Lock()
	defer l.q.mu.Unlock()
	return l.s.lock.until
}

// Renew extends the session lock to LockDuration from now.
func (l *SessionLock) Renew() (time.Time, error) {
	l.q.mu.Lock()
	defer l.q.mu.Unlock()
	now := l.q.now()
	l.q.sweep(now)
	if !l.held(now) {
		return time.Time{}, ErrLockLost
	}
	l.s.lock.until = now.Add(l.q.props.LockDuration)
	return l.s.lock.until, nil
}

// TryNext delivers up to max messages from the head of the session without
// waiting: none when nothing is available.
func (l *SessionLock) TryNext(max int) ([]*Message, error) {
	return l.Next(context.Background(), max, 0)
}

// SettleOne completes (ok) or abandons one delivered message.
func (l *SessionLock) SettleOne(seq int64, ok bool) error {
	return l.Settle([]*Message{{SequenceNumber: seq}}, ok)
}

// DeadLetter moves a delivered message to the dead-letter sub-queue with the
// receiver's reason and description.
func (l *SessionLock) DeadLetter(seq int64, reason, description string) error {
	l.q.mu.Lock()
	defer l.q.mu.Unlock()
	now := l.q.now()
	l.q.sweep(now)
	if !l.held(now) || !l.s.lock.delivered[seq] {
		return ErrLockLost
	}
	delete(l.s.lock.delivered, seq)
	if i := indexOf(l.s.msgs, seq); i >= 0 {
		l.q.deadLetterAs(l.s, i, reason, description)
	}
	l.q.notify()
	return nil
}

// State returns the session's state (nil: none set).
func (l *SessionLock) State() ([]byte, error) {
	l.q.mu.Lock()
	defer l.q.mu.Unlock()
	if !l.held(l.q.now()) {
		return nil, ErrLockLost
	}
	return l.q.states[l.s.id], nil
}

// SetState sets the session's state (nil clears it).
func (l *SessionLock) SetState(state []byte) error {
	l.q.mu.Lock()
	defer l.q.mu.Unlock()
	if !l.held(l.q.now()) {
		return ErrLockLost
	}
	if state == nil {
		delete(l.q.states, l.s.id)
	} else {
		l.q.states[l.s.id] = append([]byte(nil), state...)
	}
	return nil
}

// ReceivedMessage is a message of a queue without sessions, locked on its own.
type ReceivedMessage struct {
	*Message
	Token       int64
	LockedUntil time.Time
}

// TryReceive locks the oldest message no receiver holds (queues without
// sessions), for LockDuration; nil when there is none.
func (q *Queue) TryReceive() *ReceivedMessage {
	q.mu.Lock()
	defer q.mu.Unlock()
	now := q.now()
	q.sweep(now)
	s := q.sessions[""]
	if s == nil {
		return nil
	}
	for _, m := range s.msgs {
		if s.locks[m.SequenceNumber] != nil {
			continue
		}
		q.tokens++
		l := &lock{token: q.tokens, until: q.lockUntil(now, 0), delivered: map[int64]bool{m.SequenceNumber: true}}
		s.locks[m.SequenceNumber] = l
		m.DeliveryCount++
		c := *m
		return &ReceivedMessage{Message: &c, Token: l.token, LockedUntil: l.until}
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
		return nil, nil, ErrLockLost
	}
	return s, s.locks[seq], nil
}

// SettleReceived completes (ok) or abandons a message TryReceive locked.
func (q *Queue) SettleReceived(seq, token int64, ok bool) error {
	q.mu.Lock()
	s := q.sessions[""]
	q.mu.Unlock()
	if s == nil {
		return ErrLockLost
	}
	return q.settleMessage(s, seq, token, ok)
}

// DeadLetterReceived dead-letters a message TryReceive locked.
func (q *Queue) DeadLetterReceived(seq, token int64, reason, description string) error {
	q.mu.Lock()
	defer q.mu.Unlock()
	s, _, err := q.messageLock(seq, token)
	if err != nil {
		return err
	}
	delete(s.locks, seq)
	if i := indexOf(s.msgs, seq); i >= 0 {
		q.deadLetterAs(s, i, reason, description)
	}
	q.notify()
	return nil
}

// RenewMessageLock extends a message lock to LockDuration from now.
func (q *Queue) RenewMessageLock(seq, token int64) (time.Time, error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	_, l, err := q.messageLock(seq, token)
	if err != nil {
		return time.Time{}, err
	}
	l.until = q.now().Add(q.props.LockDuration)
	return l.until, nil
}

// Peek returns copies of up to max active messages (of session id only when
// sessionID is not nil) whose sequence number is at least from, locked or
// not, in sequence-number order, locking none (message-browsing.md).
func (q *Queue) Peek(from int64, max int, sessionID *string) []Message {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.sweep(q.now())
	var all []*Message
	for id, s := range q.sessions {
		if sessionID != nil && *sessionID != id {
			continue
		}
		all = append(all, s.msgs...)
	}
	sortBySeq(all)
	var out []Message
	for _, m := range all {
		if len(out) >= max {
			break
		}
		if m.SequenceNumber >= from {
			out = append(out, *m)
		}
	}
	return out
}
