package devhost

import (
	"context"
	"sort"
	"sync"
	"time"
)

// QueueProperties are the Service Bus queue properties the emulation models.
type QueueProperties struct {
	RequiresSession            bool
	MaxDeliveryCount           int
	RequiresDuplicateDetection bool
	DuplicateDetectionWindow   time.Duration
}

// Message is a message in an emulated queue.
type Message struct {
	SequenceNumber   int64 // queue-wide, from 1
	MessageID        string
	SessionID        string
	ContentType      string
	Properties       map[string]any
	Body             []byte
	EnqueuedTime     time.Time
	DeliveryCount    int // deliveries so far; 1 during the first
	DeadLetterReason string
}

// Queue emulates a Service Bus queue: FIFO per session, one session locked by
// one receiver at a time, peek-lock with abandon (the same message comes back
// next, DeliveryCount+1), dead-lettering after MaxDeliveryCount, duplicate
// detection by MessageId within a window, and a dead-letter sub-queue.
// Without sessions each message is locked on its own and any number may be in
// flight. Not modelled: lock expiry, TTL, throttling, partitions.
type Queue struct {
	Name  string
	props QueueProperties

	mu       sync.Mutex
	changed  chan struct{} // closed and replaced on every change
	seq      int64
	sessions map[string]*session // by SessionId ("" without sessions)
	dead     []*Message
	seen     map[string]time.Time // MessageId → when first accepted
	inFlight int
	sent     []Message // journal of accepted messages (bodies dropped), for tools and checks
	now      func() time.Time
}

// maxJournal bounds the journal of a long-running emulation.
const maxJournal = 1_000_000

type session struct {
	id     string
	msgs   []*Message
	locked bool           // a session receiver holds it
	busy   map[int64]bool // without sessions: locked messages by sequence number
}

// NewQueue returns an empty queue.
func NewQueue(name string, p QueueProperties) *Queue {
	if p.MaxDeliveryCount <= 0 {
		p.MaxDeliveryCount = 10
	}
	if p.DuplicateDetectionWindow <= 0 {
		p.DuplicateDetectionWindow = 10 * time.Minute
	}
	return &Queue{Name: name, props: p, changed: make(chan struct{}), sessions: map[string]*session{},
		seen: map[string]time.Time{}, now: time.Now}
}

// Properties returns the queue's properties.
func (q *Queue) Properties() QueueProperties { return q.props }

func (q *Queue) notify() {
	close(q.changed)
	q.changed = make(chan struct{})
}

// Send enqueues msgs in order; a MessageId seen within the duplicate
// detection window is dropped. It returns how many were accepted.
func (q *Queue) Send(msgs []Message) (accepted, duplicates int) {
	q.mu.Lock()
	defer q.mu.Unlock()
	now := q.now()
	for _, m := range msgs {
		if q.props.RequiresDuplicateDetection && m.MessageID != "" {
			if at, ok := q.seen[m.MessageID]; ok && now.Sub(at) < q.props.DuplicateDetectionWindow {
				duplicates++
				continue
			}
			q.seen[m.MessageID] = now
		}
		if !q.props.RequiresSession {
			m.SessionID = ""
		}
		q.seq++
		m.SequenceNumber, m.EnqueuedTime, m.DeliveryCount, m.DeadLetterReason = q.seq, now, 0, ""
		s := q.sessions[m.SessionID]
		if s == nil {
			s = &session{id: m.SessionID, busy: map[int64]bool{}}
			q.sessions[m.SessionID] = s
		}
		msg := m
		s.msgs = append(s.msgs, &msg)
		if len(q.sent) < maxJournal {
			j := m
			j.Body = nil
			q.sent = append(q.sent, j)
		}
		accepted++
	}
	if accepted > 0 {
		q.notify()
	}
	return accepted, duplicates
}

// wait blocks until the queue changes or ctx ends; false when ctx ended.
func (q *Queue) wait(ctx context.Context, ch chan struct{}, timeout time.Duration) bool {
	t := time.NewTimer(timeout)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-ch:
	case <-t.C:
	}
	return true
}

// AcceptSession locks the unlocked session whose first message is oldest,
// waiting for one; nil when ctx ends.
func (q *Queue) AcceptSession(ctx context.Context) *SessionLock {
	for {
		q.mu.Lock()
		var best *session
		for _, s := range q.sessions {
			if !s.locked && len(s.msgs) > 0 && (best == nil || s.msgs[0].SequenceNumber < best.msgs[0].SequenceNumber) {
				best = s
			}
		}
		ch := q.changed
		if best != nil {
			best.locked = true
			q.mu.Unlock()
			return &SessionLock{q: q, s: best}
		}
		q.mu.Unlock()
		if !q.wait(ctx, ch, time.Second) {
			return nil
		}
	}
}

// SessionLock is a locked session: its messages are delivered one batch at a
// time, in order.
type SessionLock struct {
	q *Queue
	s *session
}

// SessionID is the locked session's id.
func (l *SessionLock) SessionID() string { return l.s.id }

// Next delivers up to max messages from the head of the session, waiting up
// to idle for one; none means the session is idle and should be released.
func (l *SessionLock) Next(ctx context.Context, max int, idle time.Duration) []*Message {
	deadline := time.Now().Add(idle)
	for {
		l.q.mu.Lock()
		if n := min(max, len(l.s.msgs)); n > 0 {
			out := make([]*Message, n)
			for i, m := range l.s.msgs[:n] {
				m.DeliveryCount++
				c := *m
				out[i] = &c
			}
			l.q.inFlight += n
			l.q.mu.Unlock()
			return out
		}
		ch := l.q.changed
		l.q.mu.Unlock()
		left := time.Until(deadline)
		if left <= 0 || !l.q.wait(ctx, ch, left) {
			return nil
		}
	}
}

// Settle completes (ok) or abandons the delivered messages, which are the
// head of the session. An abandoned message that has used up its deliveries
// moves to the dead-letter queue and the session moves on.
func (l *SessionLock) Settle(msgs []*Message, ok bool) {
	l.q.mu.Lock()
	defer l.q.mu.Unlock()
	l.q.inFlight -= len(msgs)
	for _, d := range msgs {
		i := indexOf(l.s.msgs, d.SequenceNumber)
		if i < 0 {
			continue
		}
		if !ok {
			if l.s.msgs[i].DeliveryCount < l.q.props.MaxDeliveryCount {
				continue // stays at the head: delivered again next
			}
			dead := l.s.msgs[i]
			dead.DeadLetterReason = "MaxDeliveryCountExceeded"
			l.q.dead = append(l.q.dead, dead)
		}
		l.s.msgs = append(l.s.msgs[:i], l.s.msgs[i+1:]...)
	}
	l.q.notify()
}

// Release unlocks the session.
func (l *SessionLock) Release() {
	l.q.mu.Lock()
	defer l.q.mu.Unlock()
	l.s.locked = false
	if len(l.s.msgs) == 0 {
		delete(l.q.sessions, l.s.id)
	}
	l.q.notify()
}

// Receive locks the oldest message that is not locked (queues without
// sessions); nil when ctx ends.
func (q *Queue) Receive(ctx context.Context) (*Message, func(ok bool)) {
	for {
		q.mu.Lock()
		s := q.sessions[""]
		if s != nil {
			for _, m := range s.msgs {
				if !s.busy[m.SequenceNumber] {
					s.busy[m.SequenceNumber] = true
					m.DeliveryCount++
					q.inFlight++
					c := *m
					q.mu.Unlock()
					return &c, func(ok bool) { q.settleOne(s, c.SequenceNumber, ok) }
				}
			}
		}
		ch := q.changed
		q.mu.Unlock()
		if !q.wait(ctx, ch, time.Second) {
			return nil, nil
		}
	}
}

func (q *Queue) settleOne(s *session, seq int64, ok bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.inFlight--
	delete(s.busy, seq)
	if i := indexOf(s.msgs, seq); i >= 0 {
		if !ok && s.msgs[i].DeliveryCount < q.props.MaxDeliveryCount {
			q.notify()
			return
		}
		if !ok {
			s.msgs[i].DeadLetterReason = "MaxDeliveryCountExceeded"
			q.dead = append(q.dead, s.msgs[i])
		}
		s.msgs = append(s.msgs[:i], s.msgs[i+1:]...)
	}
	q.notify()
}

func indexOf(msgs []*Message, seq int64) int {
	for i, m := range msgs {
		if m.SequenceNumber == seq {
			return i
		}
	}
	return -1
}

// Sent returns every message the queue accepted, in order, without bodies.
func (q *Queue) Sent() []Message {
	q.mu.Lock()
	defer q.mu.Unlock()
	return append([]Message(nil), q.sent...)
}

// QueueStats is a snapshot of a queue.
type QueueStats struct {
	Name         string `json:"name"`
	Active       int    `json:"active"`   // waiting or in flight
	InFlight     int    `json:"inFlight"` // delivered, not yet settled
	DeadLettered int    `json:"deadLettered"`
	Sessions     int    `json:"sessions"`
}

// Stats returns the queue's counts.
func (q *Queue) Stats() QueueStats {
	q.mu.Lock()
	defer q.mu.Unlock()
	st := QueueStats{Name: q.Name, InFlight: q.inFlight, DeadLettered: len(q.dead)}
	for _, s := range q.sessions {
		st.Active += len(s.msgs)
		if len(s.msgs) > 0 {
			st.Sessions++
		}
	}
	return st
}

// DeadLetters returns copies of the dead-lettered messages, oldest first.
func (q *Queue) DeadLetters() []Message {
	q.mu.Lock()
	defer q.mu.Unlock()
	out := make([]Message, len(q.dead))
	for i, m := range q.dead {
		out[i] = *m
	}
	sort.Slice(out, func(a, b int) bool { return out[a].SequenceNumber < out[b].SequenceNumber })
	return out
}

// RemoveDeadLetter deletes the dead-lettered message with sequence number
// seq (completing it from the dead-letter sub-queue); false if absent.
func (q *Queue) RemoveDeadLetter(seq int64) bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	if i := indexOf(q.dead, seq); i >= 0 {
		q.dead = append(q.dead[:i], q.dead[i+1:]...)
		q.notify()
		return true
	}
	return false
}

// Idle reports whether nothing is waiting or in flight.
func (q *Queue) Idle() bool {
	st := q.Stats()
	return st.Active == 0 && st.InFlight == 0
}
