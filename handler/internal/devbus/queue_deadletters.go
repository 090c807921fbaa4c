package devbus

// A queue's dead-letter sub-queue.

import (
	"sort"
	"time"
)

// The dead-letter sub-queue behaves as azservicebus's receiver on
// SubQueueDeadLetter in peek-lock mode: ReceiveDeadLetters returns at most
// max messages and locks each for the queue's LockDuration; other receivers
// do not see a locked message until its lock expires or it is abandoned; a
// message is completed or abandoned by its lock token, and settling with a
// lock that expired (or was never held) fails with errLockLost, as the SDK's
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

// settleDead checks the lock of dead letter seq under q.mu: errLockLost
// unless token holds it now.
func (q *Queue) settleDead(seq, token int64) error {
	now := q.now()
	q.sweep(now)
	q.sweepDead(now)
	l := q.deadLocks[seq]
	if l == nil || l.token != token || indexOf(q.dead, seq) < 0 {
		return errLockLost
	}
	delete(q.deadLocks, seq)
	return nil
}

// completeDeadLetter removes dead letter seq, locked by token.
func (q *Queue) completeDeadLetter(seq, token int64) error {
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
