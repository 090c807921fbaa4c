package healsim

import (
	"context"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/convoy-dev/convoy/handler/convoy"
	"github.com/convoy-dev/convoy/handler/fault"
	"github.com/convoy-dev/convoy/handler/operator"
	"github.com/convoy-dev/convoy/handler/replay"
)

// The Service Bus model: the orders queue (sessions in order, peek-lock,
// MaxDeliveryCount, duplicate detection by MessageId) and its dead-letter
// sub-queue, in simulated time, with faults on every call an adapter makes
// (docs/host-contract.md, "What the host does with the message").

// maxDeliveries is the orders queue's MaxDeliveryCount in the simulation.
const maxDeliveries = 4

// dupWindow is the queue's duplicate detection history
// (infra/modules/servicebus.bicep: duplicateDetectionHistoryTimeWindow
// PT10M): a message sent with a MessageId seen within it is accepted and
// dropped.
const dupWindow = 10 * time.Minute

// lockDuration is the queues' lock duration.
const lockDuration = 30 * time.Second

// delivery is a message in the orders queue.
type delivery struct {
	m     convoy.Envelope
	count int // deliveries that failed or whose lock was lost
	lock  int // bumped at each delivery: a settlement under an older lock fails (the lock was lost)
}

// sbFault reports whether a Service Bus call fails (an outage, a timeout).
func (w *world) sbFault(op, id string) bool {
	if !w.armed || w.roll("sb|"+op+"|"+id) >= 4 {
		return false
	}
	w.st.sbFaults++
	w.stepSB++
	w.note("Service Bus: %s of %s fails", op, id)
	return true
}

// send puts messages into the orders queue, dropping those whose MessageId
// the queue saw within its duplicate detection window, as Service Bus does.
func (w *world) send(msgs []convoy.Envelope, why string) {
	for _, m := range msgs {
		if at, seen := w.sentIDs[m.MessageID]; seen && w.now.Sub(at) < dupWindow {
			w.st.dupsDropped++
			w.note("queue drops %s (MessageId seen %s ago)%s", m.MessageID, w.now.Sub(at), why)
			continue
		}
		w.sentIDs[m.MessageID] = w.now
		w.queue = append(w.queue, &delivery{m: m})
	}
}

// pendingOf is the index in the queue of a random delivery of orderID, or
// -1 for any.
func (w *world) pendingOf(orderID string) int {
	var of []int
	for i, d := range w.queue {
		if d.m.SessionID == orderID {
			of = append(of, i)
		}
	}
	if len(of) == 0 {
		return -1
	}
	return of[w.roll("pick|"+orderID)%len(of)]
}

// next is the delivery Service Bus hands out next: the first queued of a
// random session (a session's messages come in order), now and then any
// (a lock lost: another instance takes the session mid-stream).
func (w *world) next() int {
	if w.r.IntN(100) < 15 {
		return w.r.IntN(len(w.queue))
	}
	order := w.queue[w.r.IntN(len(w.queue))].m.SessionID
	return slices.IndexFunc(w.queue, func(d *delivery) bool { return d.m.SessionID == order })
}

// batchFrom is the batch the host hands over from the i-th queued
// delivery: it and up to size-1 more of its session after it, in order
// (docs/host-contract.md: a batch holds messages of one session, in order).
func (w *world) batchFrom(i, size int) []*delivery {
	first := w.queue[i]
	out := []*delivery{first}
	for _, d := range w.queue[i+1:] {
		if len(out) < size && d.m.SessionID == first.m.SessionID {
			out = append(out, d)
		}
	}
	return out
}

// settle ends the delivery of d under lock: completed after a success (it
// leaves the queue), abandoned after a failure (one more delivery counted,
// dead-lettered at MaxDeliveryCount). A completion that fails, or whose
// lock was lost (lockLost: the session's, for the whole batch, or to
// another delivery), leaves it for redelivery (the lock expires: one more
// delivery counted); an abandon that fails lets the lock expire, to the
// same effect.
func (w *world) settle(d *delivery, lock int, ok, lockLost bool) (completed bool) {
	k := key(d.m.SessionID, d.m.Seq)
	if !slices.Contains(w.queue, d) || d.lock != lock {
		w.note("  %s: lock lost, settlement fails", k)
		return false
	}
	if ok {
		if lockLost {
			w.note("  %s: the session lock was lost, the completion fails", k)
		} else if !w.sbFault("complete", k) {
			w.queue = slices.DeleteFunc(w.queue, func(x *delivery) bool { return x == d })
			return true
		}
	} else {
		w.sbFault("abandon", k) // abandoned or expired: counted alike
	}
	d.count++
	if d.count >= maxDeliveries {
		w.queue = slices.DeleteFunc(w.queue, func(x *delivery) bool { return x == d })
		w.st.deadLettered++
		if o := w.peek(d.m.SessionID); d.m.Seq > o.AppliedSeq+1 && o.ParkedCount > 0 {
			w.st.parkedDeadLettered++
		}
		w.note("  %s dead-lettered after %d deliveries", k, d.count)
		w.dlq.add(d.m)
	}
	return false
}

// sessionLockLost reports whether the session lock of a batch of order is
// lost before its completion: nothing renews a session's lock in batch mode
// (docs/host-contract.md), so a call that overruns it loses it, and the
// whole batch comes back, duplicates all. An order whose calls are slow (a
// long parked tail read a page at a time, a slow partition: slowSession)
// loses it most of the time: its parked messages are dead-lettered while
// parked, their commits landed (issue 42, item 1's copies).
func (w *world) sessionLockLost(order string) bool {
	if w.storyLockLost && order == storyOrder {
		return true
	}
	return w.armed && w.roll("lock|"+order) < w.lockLoss(order)
}

// queued reports whether a message of orderID waits in the queue.
func (w *world) queued(orderID string) bool {
	return slices.ContainsFunc(w.queue, func(d *delivery) bool { return d.m.SessionID == orderID })
}

func (w *world) lockLoss(order string) int {
	if order == w.slowSession {
		return w.slowLockLoss
	}
	return 8
}

// deadLetters is the orders queue's dead-letter sub-queue, with peek-lock as
// Service Bus keeps it: a received message is locked for the lock duration
// (in simulated time) to its receiver, and closing a receiver releases
// nothing.
type deadLetters struct {
	mu       sync.Mutex // the run's peek is read on a goroutine of its own
	w        *world
	msgs     map[int64]*deadLetter
	next     int64
	receiver int
}

type deadLetter struct {
	replay.DeadLetter
	seq         int64
	holder      int
	lockedUntil time.Time
	lockedIn    int // the top-level step whose action received it
}

func (q *deadLetters) add(m convoy.Envelope) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.next++
	q.msgs[q.next] = &deadLetter{DeadLetter: replay.DeadLetter{SequenceNumber: q.next, MessageID: m.MessageID, SessionID: m.SessionID,
		Properties: m.Properties(), Body: m.Body, Reason: operator.ReasonMaxDelivery}, seq: m.Seq}
}

func (q *deadLetters) reader() *dlReader {
	q.receiver++
	return &dlReader{q: q, id: q.receiver}
}

func (q *deadLetters) sorted() []int64 { return slices.Sorted(maps.Keys(q.msgs)) }

// locked are the dead letters a receiver holds locked now.
func (q *deadLetters) locked() []*deadLetter {
	var out []*deadLetter
	for _, s := range q.sorted() {
		if m := q.msgs[s]; m.holder != 0 && m.lockedUntil.After(q.w.now) {
			out = append(out, m)
		}
	}
	return out
}

type dlReader struct {
	q  *deadLetters
	id int
}

func (r *dlReader) Receive(_ context.Context, max int) ([]replay.DeadLetter, error) {
	r.q.mu.Lock()
	defer r.q.mu.Unlock()
	if r.q.w.sbFault("receive", "dead letters") {
		return nil, fault.Errorf(fault.Unavailable, "injected: receive fails")
	}
	var out []replay.DeadLetter
	for _, s := range r.q.sorted() {
		m := r.q.msgs[s]
		if len(out) < max && !m.lockedUntil.After(r.q.w.now) {
			m.holder, m.lockedUntil, m.lockedIn = r.id, r.q.w.now.Add(lockDuration), r.q.w.stepNo
			d := m.DeadLetter
			d.Handle = r.id
			out = append(out, d)
		}
	}
	return out, nil
}

func (r *dlReader) Peek(_ context.Context, from int64, max int) ([]replay.DeadLetter, error) {
	r.q.mu.Lock()
	defer r.q.mu.Unlock()
	if r.q.w.inRun > 0 {
		r.q.w.runPeeked = true
	}
	if r.q.w.sbFault("peek", "dead letters") {
		return nil, fault.Errorf(fault.Unavailable, "injected: peek fails")
	}
	var out []replay.DeadLetter
	for _, s := range r.q.sorted() {
		if s >= from && len(out) < max {
			out = append(out, r.q.msgs[s].DeadLetter)
		}
	}
	return out, nil
}

func (r *dlReader) held(d replay.DeadLetter) (*deadLetter, error) {
	m, ok := r.q.msgs[d.SequenceNumber]
	if !ok || m.holder != r.id || !m.lockedUntil.After(r.q.w.now) {
		return nil, fault.Errorf(fault.Unavailable, "lock lost")
	}
	return m, nil
}

func (r *dlReader) Complete(_ context.Context, d replay.DeadLetter) error {
	r.q.mu.Lock()
	defer r.q.mu.Unlock()
	if _, err := r.held(d); err != nil {
		return err
	}
	if r.q.w.sbFault("complete", d.MessageID) {
		return fault.Errorf(fault.Unavailable, "injected: complete fails")
	}
	delete(r.q.msgs, d.SequenceNumber)
	return nil
}

func (r *dlReader) Abandon(_ context.Context, d replay.DeadLetter) error {
	r.q.mu.Lock()
	defer r.q.mu.Unlock()
	m, err := r.held(d)
	if err != nil {
		return err
	}
	if r.q.w.sbFault("abandon", d.MessageID) {
		return fault.Errorf(fault.Unavailable, "injected: abandon fails")
	}
	m.holder, m.lockedUntil = 0, time.Time{}
	return nil
}

// sender puts re-sent messages back into the orders queue: a send fails
// before it lands, or times out after it landed (the caller sees a
// failure; a re-send of the same MessageId is then dropped by duplicate
// detection, or, past its window, delivered twice).
type sender struct{ w *world }

type batch struct{ msgs []convoy.Envelope }

func (b *batch) Add(m convoy.Envelope) error { b.msgs = append(b.msgs, m); return nil }
func (b *batch) Len() int                    { return len(b.msgs) }

func (s sender) NewBatch(context.Context) (convoy.Batch, error) { return &batch{}, nil }

func (s sender) SendBatch(_ context.Context, b convoy.Batch) error {
	msgs := b.(*batch).msgs
	id := ""
	if len(msgs) > 0 {
		id = msgs[0].MessageID
	}
	if s.w.sbFault("send", id) {
		if s.w.roll("landed|"+id) < 50 {
			s.w.st.landedTimeouts++
			s.w.note("  the send timed out after it landed")
			s.w.send(msgs, " (re-sent)")
		}
		return fault.Errorf(fault.Unavailable, "injected: send times out")
	}
	s.w.send(msgs, " (re-sent)")
	return nil
}
