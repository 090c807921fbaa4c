package devhost

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
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

// Message is a message in an emulated queue.
type Message struct {
	SequenceNumber int64 // queue-wide, from 1
	MessageID      string
	// SessionID is the message's SessionId; "" is a SessionId of its own
	// when EmptySessionID is set (Service Bus accepts an empty SessionId:
	// azservicebus's live test TestSessionReceiver_blankSessionIDs), and no
	// SessionId at all without it (refused on a session queue).
	SessionID        string
	EmptySessionID   bool
	ContentType      string
	Properties       map[string]any
	Body             []byte
	TimeToLive       time.Duration // 0: the queue's default
	EnqueuedTime     time.Time
	ExpiresAt        time.Time // zero: never
	DeliveryCount    int       // deliveries so far; 1 during the first
	DeadLetterReason string
	// DeadLetterDescription is the receiver's description of why it
	// dead-lettered the message (empty for the broker's own reasons).
	DeadLetterDescription string
	// State is the message's state as a peek (and a receive by sequence
	// number) reports it in x-opt-message-state: active, deferred or
	// scheduled.
	State MessageState
	// ScheduledEnqueueTime is when a scheduled message becomes active
	// (zero: sent to be active at once).
	ScheduledEnqueueTime time.Time
	// AMQP is the message as an AMQP client sent it (nil when it came from
	// the emulation itself): the AMQP face delivers it with the broker's
	// annotations added, every other section as sent.
	AMQP *amqp.Message

	properties json.RawMessage // Properties as JSON, written when the queue accepts the message (and when a settlement modifies them)
}

// hasSessionID reports whether the message carries a SessionId ("" included
// when EmptySessionID is set).
func (m *Message) hasSessionID() bool { return m.SessionID != "" || m.EmptySessionID }

// MessageState is a message's state as Service Bus reports it in the
// x-opt-message-state annotation (azservicebus message.go: MessageState).
type MessageState int32

// Message states (azservicebus MessageStateActive, …Deferred, …Scheduled).
const (
	StateActive    MessageState = 0
	StateDeferred  MessageState = 1
	StateScheduled MessageState = 2
)

// Dead-letter reasons, as Service Bus writes them.
const (
	ReasonMaxDelivery = "MaxDeliveryCountExceeded"
	ReasonExpired     = "TTLExpiredException"
)

// ErrLockLost: the session or message lock expired (or was taken by another
// receiver after it expired); completing fails and the messages come back.
var ErrLockLost = errors.New("lock lost: the lock expired before the messages were settled")

// ErrMessageNotFound: no deferred message has the sequence number asked for
// (.NET's ReceiveDeferredMessageAsync: "The specified sequence number does not
// correspond to a message that has been deferred", reason MessageNotFound).
var ErrMessageNotFound = errors.New("message not found: no deferred message has that sequence number")

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
			return nil, &SendError{Condition: amqp.ErrNotAllowed, Text: fmt.Sprintf("message %d: The SessionId was not set on a message, and it cannot be sent to the entity. Entities that have session support enabled can only receive messages that have the SessionId set to a valid value (queue %s).", i, q.Name)}
		case len(m.MessageID) > MaxMessageIDLength:
			return nil, &SendError{Condition: CondArgumentOutOfRange, Text: fmt.Sprintf("message %d: MessageId of %d characters; Service Bus allows %d", i, len(m.MessageID), MaxMessageIDLength)}
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

// SendError is a send Service Bus refuses, with the AMQP error condition it
// answers with: amqp:not-allowed for a message without a SessionId on a
// session queue (.NET's InvalidOperationException, whose text this is),
// com.microsoft:argument-out-of-range for a MessageId over 128 characters.
type SendError struct {
	Condition amqp.Symbol
	Text      string
}

func (e *SendError) Error() string { return e.Text }

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
// be released. ErrLockLost: the lock expired; the receiver must give it up.
func (l *SessionLock) Next(ctx context.Context, max int, idle time.Duration) ([]*Message, error) {
	deadline := time.Now().Add(idle)
	for ctx.Err() == nil {
		l.q.mu.Lock()
		now := l.q.now()
		l.q.sweep(now)
		if !l.held(now) {
			l.q.mu.Unlock()
			return nil, ErrLockLost
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
// the session moves on. ErrLockLost: the lock expired first, nothing was
// settled (the SDK neither completes nor abandons then).
func (l *SessionLock) Settle(msgs []*Message, ok bool) error {
	l.q.mu.Lock()
	defer l.q.mu.Unlock()
	now := l.q.now()
	l.q.sweep(now)
	if !l.held(now) {
		return ErrLockLost
	}
	for _, d := range msgs {
		delete(l.s.lock.delivered, d.SequenceNumber)
		l.q.dispose(l.s, d.SequenceNumber, completeOrAbandon(ok), SettleOptions{})
	}
	l.q.notify()
	return nil
}

func completeOrAbandon(ok bool) Settlement {
	if ok {
		return SettleComplete
	}
	return SettleAbandon
}

// Settlement is what a receiver does with a message it holds under a lock.
type Settlement int

const (
	// SettleComplete removes the message.
	SettleComplete Settlement = iota
	// SettleAbandon gives it back, its delivery counted: it is delivered
	// again next, or dead-lettered once it used up MaxDeliveryCount.
	SettleAbandon
	// SettleRelease gives it back without counting the delivery (a
	// receiver released a message it did not take: azservicebus's releaser).
	SettleRelease
	// SettleDefer sets it aside: it stays in the queue, deferred, received
	// only by its sequence number (message-deferral.md); the delivery is
	// not counted (.NET ServiceBusReceivedMessage.DeliveryCount: the count
	// goes up when a lock expires or a message is abandoned).
	SettleDefer
	// SettleDeadLetter moves it to the dead-letter sub-queue.
	SettleDeadLetter
)

// SettleOptions go with a settlement: the receiver's dead-letter reason and
// description, and the application properties it modifies (abandon, defer
// and dead-letter take propertiesToModify).
type SettleOptions struct {
	Reason, Description string
	Properties          map[string]any
}

// dispose settles message seq of s, delivered under a lock the caller has
// checked and let go, under q.mu.
func (q *Queue) dispose(s *session, seq int64, how Settlement, o SettleOptions) {
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
	case SettleComplete:
		s.msgs = append(s.msgs[:i], s.msgs[i+1:]...)
	case SettleDeadLetter:
		q.deadLetterAs(s, i, o.Reason, o.Description)
	case SettleDefer:
		m.State = StateDeferred
		m.DeliveryCount = max(m.DeliveryCount-1, 0)
	case SettleRelease:
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
// ctx ends. settle completes (ok) or abandons it, or reports ErrLockLost.
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
		return ErrLockLost
	}
	delete(s.locks, seq)
	q.dispose(s, seq, completeOrAbandon(ok), SettleOptions{})
	q.notify()
	return nil
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

// The dead-letter sub-queue behaves as azservicebus's receiver on
// SubQueueDeadLetter in peek-lock mode: ReceiveDeadLetters returns at most
// max messages and locks each for the queue's LockDuration; other receivers
// do not see a locked message until its lock expires or it is abandoned; a
// message is completed or abandoned by its lock token, and settling with a
// lock that expired (or was never held) fails with ErrLockLost, as the SDK's
// MessageLockLost. PeekDeadLetters reads without locking, locked messages
// included (Receiver.PeekMessages). The sub-queue itself is not
// session-enabled, has no delivery limit and its messages do not expire.

// LockedDeadLetter is a dead letter received under a lock.
type LockedDeadLetter struct {
	Message
	LockToken   int64
	LockedUntil time.Time
}

// sortedDead returns the dead letters in sequence-number order, under q.mu.
func (q *Queue) sortedDead() []*Message {
	out := append([]*Message(nil), q.dead...)
	sortBySeq(out)
	return out
}

func sortBySeq(msgs []*Message) {
	sort.Slice(msgs, func(a, b int) bool { return msgs[a].SequenceNumber < msgs[b].SequenceNumber })
}

// sweepDead drops the expired dead-letter locks, under q.mu.
func (q *Queue) sweepDead(now time.Time) {
	for seq, l := range q.deadLocks {
		if !l.heldAt(now) {
			delete(q.deadLocks, seq)
		}
	}
}

// ReceiveDeadLetters locks up to max dead letters that no receiver holds,
// lowest sequence number first; none when every dead letter is locked or
// there is none.
func (q *Queue) ReceiveDeadLetters(max int) []LockedDeadLetter {
	q.mu.Lock()
	defer q.mu.Unlock()
	now := q.now()
	q.sweep(now)
	q.sweepDead(now)
	if q.deadLocks == nil {
		q.deadLocks = map[int64]*lock{}
	}
	var out []LockedDeadLetter
	for _, m := range q.sortedDead() {
		if len(out) >= max {
			break
		}
		if q.deadLocks[m.SequenceNumber] != nil {
			continue
		}
		l := &lock{token: nextToken(), until: now.Add(q.props.LockDuration)}
		q.deadLocks[m.SequenceNumber] = l
		out = append(out, LockedDeadLetter{Message: *m, LockToken: l.token, LockedUntil: l.until})
	}
	return out
}

// settleDead checks the lock of dead letter seq under q.mu: ErrLockLost
// unless token holds it now.
func (q *Queue) settleDead(seq, token int64) error {
	now := q.now()
	q.sweep(now)
	q.sweepDead(now)
	l := q.deadLocks[seq]
	if l == nil || l.token != token || indexOf(q.dead, seq) < 0 {
		return ErrLockLost
	}
	delete(q.deadLocks, seq)
	return nil
}

// CompleteDeadLetter removes dead letter seq, locked by token.
func (q *Queue) CompleteDeadLetter(seq, token int64) error {
	q.mu.Lock()
	defer q.mu.Unlock()
	if err := q.settleDead(seq, token); err != nil {
		return err
	}
	i := indexOf(q.dead, seq)
	q.dead = append(q.dead[:i], q.dead[i+1:]...)
	q.notify()
	return nil
}

// AbandonDeadLetter releases the lock token holds on dead letter seq: the
// message is available to receivers again.
func (q *Queue) AbandonDeadLetter(seq, token int64) error {
	q.mu.Lock()
	defer q.mu.Unlock()
	if err := q.settleDead(seq, token); err != nil {
		return err
	}
	q.notify()
	return nil
}

// PeekDeadLetters returns copies of up to max dead letters whose sequence
// number is at least from, in sequence-number order, locked or not, without
// locking them.
func (q *Queue) PeekDeadLetters(from int64, max int) []Message {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.sweep(q.now())
	var out []Message
	for _, m := range q.sortedDead() {
		if len(out) >= max {
			break
		}
		if m.SequenceNumber >= from {
			out = append(out, *m)
		}
	}
	return out
}

// DeadLetters returns copies of every dead-lettered message, oldest first,
// locked or not, without locking them: a peek for tests and tools.
func (q *Queue) DeadLetters() []Message {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.sweep(q.now())
	out := make([]Message, 0, len(q.dead))
	for _, m := range q.sortedDead() {
		out = append(out, *m)
	}
	return out
}

// Idle reports whether nothing is waiting or in flight.
func (q *Queue) Idle() bool {
	st := q.Stats()
	return st.Active == 0 && st.InFlight == 0
}
