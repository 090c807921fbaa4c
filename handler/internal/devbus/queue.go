package devbus

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/convoy-dev/convoy/handler/internal/amqp"
)

// QueueProperties are the Service Bus queue properties the emulation models.
type QueueProperties struct {
	RequiresSession                  bool
	MaxDeliveryCount                 int           // default 10
	RequiresDuplicateDetection       bool          //
	DuplicateDetectionWindow         time.Duration // default 10 min
	LockDuration                     time.Duration // default 1 min
	DefaultMessageTimeToLive         time.Duration // 0: never expires
	DeadLetteringOnMessageExpiration bool
}

// Queue emulates a Service Bus queue (docs/host-contract.md, "What the host does
// with the message"): FIFO per session; a session locked by one receiver at a
// time for a limited time; peek-lock with abandon (the same message comes back
// next, DeliveryCount+1); a lock that expires makes its messages available
// again (DeliveryCount+1 on their next delivery) and lets another receiver
// take the session while the first is still working; dead-lettering after
// MaxDeliveryCount; message expiry (one expired message of a session expires
// the whole session); duplicate detection by MessageId within a window; and a
// dead-letter sub-queue. Without sessions each message is locked on its own.
// Deferred messages (set aside by a receiver, received only by sequence
// number, holding no session back) and scheduled ones (held aside until
// their time, then enqueued with a new sequence number): queue_receivers.go
// and activateScheduled.
// Not modelled: throttling, partitions.
type Queue struct {
	Name  string
	props QueueProperties

	mu       sync.Mutex
	changed  chan struct{} // closed and replaced on every change
	seq      int64
	sessions map[string]*session // by SessionId ("" without sessions, or the empty SessionId)
	dead     []*Message
	// scheduled are the messages waiting for their ScheduledEnqueueTime, in
	// sequence-number order; nextScheduled is the earliest of their times.
	scheduled     []*Message
	nextScheduled time.Time
	// deadLocks are the dead-letter sub-queue's message locks by sequence number.
	deadLocks map[int64]*lock
	seen      map[string]time.Time // MessageId → when first accepted
	states    map[string][]byte    // session state by SessionId
	sent      []Message            // journal of accepted messages (bodies dropped), for tools and checks
	expired   int                  // messages expired so far
	now       func() time.Time
}

// maxJournal bounds the journal of a long-running emulation.
const maxJournal = 1_000_000

type session struct {
	id   string
	msgs []*Message
	// nextExpiry is no later than the earliest ExpiresAt of msgs (zero: none
	// expires), so that a sweep scans a session's messages only when one may
	// have expired.
	nextExpiry time.Time
	lock       lock            // the session lock (session queues)
	locks      map[int64]*lock // message locks by sequence number (queues without sessions)
}

// lockCounter numbers the locks handed out, across every queue: a lock
// token names one lock wherever it comes back (a connection's receivers
// may hold sessions of several queues, looked up by token).
var lockCounter atomic.Int64

func nextToken() int64 { return lockCounter.Add(1) }

// lock is a peek-lock: who holds it (a token; 0 for nobody), until when
// (zero: renewed for as long as it is held), and what it delivered.
type lock struct {
	token     int64
	until     time.Time
	delivered map[int64]bool
}

func (l *lock) heldAt(now time.Time) bool {
	return l.token != 0 && (l.until.IsZero() || now.Before(l.until))
}

// NewQueue returns an empty queue.
func NewQueue(name string, p QueueProperties) *Queue {
	if p.MaxDeliveryCount <= 0 {
		p.MaxDeliveryCount = 10
	}
	if p.DuplicateDetectionWindow <= 0 {
		p.DuplicateDetectionWindow = 10 * time.Minute
	}
	if p.LockDuration <= 0 {
		p.LockDuration = time.Minute
	}
	return &Queue{Name: name, props: p, changed: make(chan struct{}), sessions: map[string]*session{},
		seen: map[string]time.Time{}, states: map[string][]byte{}, now: time.Now}
}

// Properties returns the queue's properties.
func (q *Queue) Properties() QueueProperties { return q.props }

func (q *Queue) notify() {
	close(q.changed)
	q.changed = make(chan struct{})
}

// Send enqueues msgs in order; a MessageId seen within the duplicate
// detection window is dropped. It returns how many were accepted. As Service
// Bus does, it refuses the whole send when a message has no SessionId and
// the queue requires sessions, or a MessageId longer than 128 characters. A
// message whose ScheduledEnqueueTime is still to come is scheduled
// (message-sequencing.md, "Scheduled messages").
func (q *Queue) Send(msgs []Message) (accepted, duplicates int, err error) {
	seqs, err := q.enqueue(msgs)
	for _, seq := range seqs {
		if seq == 0 {
			duplicates++
		} else {
			accepted++
		}
	}
	return accepted, duplicates, err
}

// enqueue accepts msgs and returns their sequence numbers (0 for a
// duplicate dropped), or refuses them all.
func (q *Queue) enqueue(msgs []Message) ([]int64, error) {
	for i, m := range msgs {
		switch {
		case q.props.RequiresSession && !m.hasSessionID():
			return nil, &sendError{Condition: amqp.ErrNotAllowed, Text: fmt.Sprintf("message %d: The SessionId was not set on a message, and it cannot be sent to the entity. Entities that have session support enabled can only receive messages that have the SessionId set to a valid value (queue %s).", i, q.Name)}
		case len(m.MessageID) > maxMessageIDLength:
			return nil, &sendError{Condition: condArgumentOutOfRange, Text: fmt.Sprintf("message %d: MessageId of %d characters; Service Bus allows %d", i, len(m.MessageID), maxMessageIDLength)}
		}
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	now := q.now()
	seqs := make([]int64, len(msgs))
	for i, m := range msgs {
		if q.props.RequiresDuplicateDetection && m.MessageID != "" {
			if at, ok := q.seen[m.MessageID]; ok && now.Sub(at) < q.props.DuplicateDetectionWindow {
				continue
			}
			q.seen[m.MessageID] = now
		}
		if !q.props.RequiresSession {
			m.SessionID, m.EmptySessionID = "", false
		}
		q.seq++
		m.SequenceNumber, m.DeliveryCount, m.DeadLetterReason = q.seq, 0, ""
		m.properties = propertiesJSON(m.Properties)
		seqs[i] = m.SequenceNumber
		msg := m
		if msg.ScheduledEnqueueTime.After(now) {
			// Held aside until its time, with a sequence number of its own
			// (the one schedule-message answers and cancel takes).
			msg.State, msg.EnqueuedTime = StateScheduled, now
			q.scheduled = append(q.scheduled, &msg)
			if q.nextScheduled.IsZero() || msg.ScheduledEnqueueTime.Before(q.nextScheduled) {
				q.nextScheduled = msg.ScheduledEnqueueTime
			}
			continue
		}
		q.materialize(&msg, now)
	}
	q.notify()
	return seqs, nil
}

// materialize appends m to its session as an active message enqueued now:
// its time to live starts, and the journal records it. Under q.mu.
func (q *Queue) materialize(m *Message, now time.Time) {
	m.State, m.EnqueuedTime, m.ExpiresAt = StateActive, now, time.Time{}
	if ttl := m.TimeToLive; ttl > 0 || q.props.DefaultMessageTimeToLive > 0 {
		if ttl <= 0 || (q.props.DefaultMessageTimeToLive > 0 && q.props.DefaultMessageTimeToLive < ttl) {
			ttl = q.props.DefaultMessageTimeToLive // the queue's default caps a message's own TTL
		}
		m.ExpiresAt = now.Add(ttl)
	}
	s := q.sessions[m.SessionID]
	if s == nil {
		s = &session{id: m.SessionID, locks: map[int64]*lock{}}
		q.sessions[m.SessionID] = s
	}
	s.msgs = append(s.msgs, m)
	s.noteExpiry(m)
	if len(q.sent) < maxJournal {
		j := *m
		j.Body, j.AMQP = nil, nil
		q.sent = append(q.sent, j)
	}
}

// sendError is a send Service Bus refuses, with the AMQP error condition it
// answers with: amqp:not-allowed for a message without a SessionId on a
// session queue (.NET's InvalidOperationException, whose text this is),
// com.microsoft:argument-out-of-range for a MessageId over 128 characters.
type sendError struct {
	Condition amqp.Symbol
	Text      string
}

func (e *sendError) Error() string { return e.Text }

// wait blocks until the queue changes, timeout passes or ctx ends; false when ctx ended.
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

// pollEvery bounds how late the emulation notices an expired lock or message.
const pollEvery = 20 * time.Millisecond

// sweep applies what time did, under q.mu: expired locks release their
// messages (dead-lettering those that used up their deliveries), and expired
// messages leave the queue. Service Bus does both lazily, when receivers ask.
func (q *Queue) sweep(now time.Time) {
	changed := q.activateScheduled(now)
	for id, s := range q.sessions {
		if s.lock.token != 0 && !s.lock.heldAt(now) {
			q.release(s, &s.lock)
			changed = true
		}
		for seq, l := range s.locks {
			if !l.heldAt(now) {
				q.release(s, l)
				delete(s.locks, seq)
				changed = true
			}
		}
		changed = q.expire(s, now) || changed
		if len(s.msgs) == 0 && s.lock.token == 0 && len(s.locks) == 0 {
			delete(q.sessions, id)
		}
	}
	if changed {
		q.notify()
	}
}

// release gives up lock l: what it delivered and did not settle is available
// again, or dead-lettered if it used up its deliveries.
func (q *Queue) release(s *session, l *lock) {
	for seq := range l.delivered {
		if i := indexOf(s.msgs, seq); i >= 0 && s.msgs[i].DeliveryCount >= q.props.MaxDeliveryCount {
			q.deadLetter(s, i, ReasonMaxDelivery)
		}
	}
	*l = lock{}
}

// expire removes the expired messages of s that no live lock delivered.
// Service Bus expires a message when a receiver would get it; a message
// locked for delivery is not touched. In a session queue one expired message
// expires every waiting message of the session (docs/host-contract.md, "Expiry");
// without sessions each message expires on its own.
func (q *Queue) expire(s *session, now time.Time) bool {
	if s.nextExpiry.IsZero() || now.Before(s.nextExpiry) {
		return false
	}
	defer s.updateNextExpiry()
	// A deferred message is not expired here: Service Bus checks it when a
	// receiver asks for it by sequence number (message-deferral.md).
	waiting := func(m *Message) bool {
		return m.State == StateActive && !s.lock.delivered[m.SequenceNumber] && s.locks[m.SequenceNumber] == nil
	}
	expired := func(m *Message) bool { return waiting(m) && !m.ExpiresAt.IsZero() && !now.Before(m.ExpiresAt) }
	hit := false
	for _, m := range s.msgs {
		hit = hit || expired(m)
	}
	if !hit {
		return false
	}
	for i := 0; i < len(s.msgs); {
		m := s.msgs[i]
		if expired(m) || (q.props.RequiresSession && waiting(m)) {
			q.expired++
			if q.props.DeadLetteringOnMessageExpiration {
				q.deadLetter(s, i, ReasonExpired)
			} else {
				s.msgs = append(s.msgs[:i], s.msgs[i+1:]...)
			}
			continue
		}
		i++
	}
	return true
}

// head is the session's first message a receive can take (nil: none).
func (s *session) head() *Message {
	for _, m := range s.msgs {
		if m.State == StateActive {
			return m
		}
	}
	return nil
}

// activateScheduled makes the scheduled messages whose time has come
// active, under q.mu: each is appended to the queue as if enqueued now,
// with a new sequence number (message-sequencing.md: "The SequenceNumber for
// a scheduled message is only valid while the message is in this state. As
// the message transitions to the active state, the message is appended to
// the queue as if had been enqueued at the current instant, which includes
// assigning a new SequenceNumber"). It reports whether any became active.
func (q *Queue) activateScheduled(now time.Time) bool {
	if q.nextScheduled.IsZero() || now.Before(q.nextScheduled) {
		return false
	}
	var due []*Message
	left := q.scheduled[:0]
	q.nextScheduled = time.Time{}
	for _, m := range q.scheduled {
		if !now.Before(m.ScheduledEnqueueTime) {
			due = append(due, m)
			continue
		}
		left = append(left, m)
		if q.nextScheduled.IsZero() || m.ScheduledEnqueueTime.Before(q.nextScheduled) {
			q.nextScheduled = m.ScheduledEnqueueTime
		}
	}
	clear(q.scheduled[len(left):])
	q.scheduled = left
	sort.SliceStable(due, func(a, b int) bool { return due[a].ScheduledEnqueueTime.Before(due[b].ScheduledEnqueueTime) })
	for _, m := range due {
		q.seq++
		m.SequenceNumber = q.seq
		q.materialize(m, now)
	}
	return len(due) > 0
}

// updateNextExpiry recomputes nextExpiry from the session's messages.
func (s *session) updateNextExpiry() {
	s.nextExpiry = time.Time{}
	for _, m := range s.msgs {
		s.noteExpiry(m)
	}
}

func (s *session) noteExpiry(m *Message) {
	if m.State == StateActive && !m.ExpiresAt.IsZero() && (s.nextExpiry.IsZero() || m.ExpiresAt.Before(s.nextExpiry)) {
		s.nextExpiry = m.ExpiresAt
	}
}

func (q *Queue) deadLetter(s *session, i int, reason string) { q.deadLetterAs(s, i, reason, "") }

func (q *Queue) deadLetterAs(s *session, i int, reason, description string) {
	m := s.msgs[i]
	m.DeadLetterReason, m.DeadLetterDescription = reason, description
	q.dead = append(q.dead, m)
	s.msgs = append(s.msgs[:i], s.msgs[i+1:]...)
}

// lockUntil: a lock taken now that is renewed for renewFor (< 0: without
// end; 0: never renewed) lasts until the last renewal plus LockDuration.
func (q *Queue) lockUntil(now time.Time, renewFor time.Duration) time.Time {
	if renewFor < 0 {
		return time.Time{}
	}
	return now.Add(renewFor + q.props.LockDuration)
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
	Active       int    `json:"active"`   // waiting or in flight, deferred ones aside
	InFlight     int    `json:"inFlight"` // delivered under a lock that still holds, not yet settled
	Deferred     int    `json:"deferred"` // set aside, received only by sequence number
	Scheduled    int    `json:"scheduled"`
	DeadLettered int    `json:"deadLettered"`
	Expired      int    `json:"expired"`  // messages that outlived their time to live
	Sessions     int    `json:"sessions"` // sessions with messages a receive can take or has taken
}

// Stats returns the queue's counts.
func (q *Queue) Stats() QueueStats {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.sweep(q.now())
	st := QueueStats{Name: q.Name, DeadLettered: len(q.dead), Expired: q.expired, Scheduled: len(q.scheduled)}
	for _, s := range q.sessions {
		active := 0
		for _, m := range s.msgs {
			if m.State == StateDeferred {
				st.Deferred++
			} else {
				active++
			}
		}
		st.Active += active
		st.InFlight += len(s.lock.delivered) + len(s.locks)
		if active > 0 {
			st.Sessions++
		}
	}
	return st
}

// Idle reports whether nothing is waiting or in flight.
func (q *Queue) Idle() bool {
	st := q.Stats()
	return st.Active == 0 && st.InFlight == 0
}
