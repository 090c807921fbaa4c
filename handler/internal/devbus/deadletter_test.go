package devbus

import (
	"errors"
	"testing"
	"time"
)

// TestDeadLetterLocks: the dead-letter sub-queue locks and limits as
// azservicebus's dead-letter receiver does: a receive returns at most the
// number asked for and locks each message for the lock duration; other
// receivers do not see locked messages until they are abandoned or their
// lock expires; settling needs the lock's token; a peek sees everything and
// locks nothing.
func TestDeadLetterLocks(t *testing.T) {
	t.Parallel()
	q := NewQueue("q", QueueProperties{LockDuration: lockFor, DeadLetteringOnMessageExpiration: true})
	for i := range 5 {
		q.Send([]Message{{MessageID: string(rune('a' + i)), TimeToLive: time.Millisecond}})
	}
	time.Sleep(5 * time.Millisecond)
	if st := q.Stats(); st.DeadLettered != 5 {
		t.Fatalf("%d dead letters, want 5", st.DeadLettered)
	}
	first := q.ReceiveDeadLetters(2)
	if len(first) != 2 || first[0].SequenceNumber != 1 || first[1].SequenceNumber != 2 || first[0].LockToken == 0 {
		t.Fatalf("first receive of 2: %+v", first)
	}
	second := q.ReceiveDeadLetters(10)
	if len(second) != 3 || second[0].SequenceNumber != 3 {
		t.Fatalf("second receiver: %d messages, want the 3 not locked", len(second))
	}
	if third := q.ReceiveDeadLetters(10); len(third) != 0 {
		t.Fatalf("everything is locked, yet a receive got %d", len(third))
	}
	if peek := q.PeekDeadLetters(2, 10); len(peek) != 4 || peek[0].SequenceNumber != 2 {
		t.Fatalf("peek from 2: %d messages, want 4 (locked ones too)", len(peek))
	}
	if err := q.completeDeadLetter(1, second[0].LockToken); !errors.Is(err, errLockLost) {
		t.Fatalf("completing with another message's token: %v, want ErrLockLost", err)
	}
	if err := q.completeDeadLetter(1, first[0].LockToken); err != nil {
		t.Fatal(err)
	}
	if err := q.AbandonDeadLetter(2, first[1].LockToken); err != nil {
		t.Fatal(err)
	}
	if got := q.ReceiveDeadLetters(10); len(got) != 1 || got[0].SequenceNumber != 2 {
		t.Fatalf("after an abandon: %+v, want message 2 again", got)
	}
	time.Sleep(lockFor + 20*time.Millisecond)
	if err := q.completeDeadLetter(3, second[0].LockToken); !errors.Is(err, errLockLost) {
		t.Fatalf("completing after the lock expired: %v, want ErrLockLost", err)
	}
	if got := q.ReceiveDeadLetters(10); len(got) != 4 {
		t.Fatalf("after the locks expired: %d received, want 4", len(got))
	}
	if n := len(q.DeadLetters()); n != 4 {
		t.Fatalf("%d dead letters left, want 4", n)
	}
}
