package replay

import (
	"context"
	"fmt"
)

// scan receives the dead letters of one run, each once. A dead letter the
// run holds longer than the queue's lock duration loses its lock and comes
// back from a later receive under a new one: the same SequenceNumber with a
// new Handle. scan keeps one copy of it, with the new Handle (the lock to
// settle with; the lost one settles nothing), and stops receiving: the run
// has come round, and everything else it could receive is locked by itself,
// under locks that are running out.
type scan struct {
	src   Source
	limit int
	// msgs are the distinct dead letters received, in the order first
	// received, each with the Handle of its latest receive.
	msgs []DeadLetter
	at   map[int64]int // sequence number → index in msgs
	// cameRound: a receive brought back a dead letter already received.
	cameRound bool
	// stopAt, when not 0: receiving stops once a dead letter with this
	// sequence number or a higher one was received.
	stopAt  int64
	stopped bool
}

func newScan(src Source, limit int) *scan {
	return &scan{src: src, limit: limit, at: map[int64]int{}}
}

// ReceiveEnder is a Source that can end its receiving before the run
// settles anything: what it gives back then cannot come back into a receive
// of its own (servicebus.DeadLetters closes its receiving link, and the
// credit left on it).
type ReceiveEnder interface {
	EndReceive(ctx context.Context) error
}

// run receives until limit distinct dead letters, an empty receive, or a
// receive that brings back one already received, and then ends the
// source's receiving (ReceiveEnder). On error, msgs holds what was received
// before it.
func (s *scan) run(ctx context.Context) error {
	if e, ok := s.src.(ReceiveEnder); ok {
		// A run receives once, in its scan: a close that fails leaves the
		// link to the adapter (an abandon tries again).
		defer func() { _ = e.EndReceive(ctx) }()
	}
	for len(s.msgs) < s.limit && !s.cameRound && !s.stopped {
		batch, err := s.src.Receive(ctx, min(receiveBatch, s.limit-len(s.msgs)))
		if err != nil {
			return fmt.Errorf("read dead letters: %w", err)
		}
		if len(batch) == 0 {
			return nil
		}
		for _, m := range batch {
			if i, ok := s.at[m.SequenceNumber]; ok {
				s.msgs[i].Handle = m.Handle
				s.cameRound = true
				continue
			}
			s.at[m.SequenceNumber] = len(s.msgs)
			s.msgs = append(s.msgs, m)
			s.stopped = s.stopped || (s.stopAt > 0 && m.SequenceNumber >= s.stopAt)
		}
	}
	return nil
}

// received reports whether the run received the dead letter with sequence
// number seq.
func (s *scan) received(seq int64) bool {
	_, ok := s.at[seq]
	return ok
}
