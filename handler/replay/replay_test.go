package replay_test

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"testing"

	"github.com/convoy-dev/convoy/handler/fault"
	"github.com/convoy-dev/convoy/handler/ledger"
	"github.com/convoy-dev/convoy/handler/ledger/ledgertest"
	"github.com/convoy-dev/convoy/handler/replay"
)

// fakeDLQ is a dead-letter sub-queue with peek-lock and injected failures.
type fakeDLQ struct {
	msgs         map[int64]replay.DeadLetter // by sequence number
	locked       map[int64]bool
	failComplete func(replay.DeadLetter) bool
	completed    []int64
}

func newDLQ(msgs ...replay.DeadLetter) *fakeDLQ {
	q := &fakeDLQ{msgs: map[int64]replay.DeadLetter{}, locked: map[int64]bool{}}
	for _, m := range msgs {
		q.msgs[m.SequenceNumber] = m
	}
	return q
}

func (q *fakeDLQ) Receive(_ context.Context, max int) ([]replay.DeadLetter, error) {
	var seqs []int64
	for s := range q.msgs {
		if !q.locked[s] {
			seqs = append(seqs, s)
		}
	}
	sort.Slice(seqs, func(a, b int) bool { return seqs[a] < seqs[b] })
	var out []replay.DeadLetter
	for _, s := range seqs[:min(max, len(seqs))] {
		q.locked[s] = true
		out = append(out, q.msgs[s])
	}
	return out, nil
}

func (q *fakeDLQ) Complete(_ context.Context, m replay.DeadLetter) error {
	if !q.locked[m.SequenceNumber] {
		return errors.New("not locked")
	}
	if q.failComplete != nil && q.failComplete(m) {
		return fault.Errorf(fault.Unavailable, "lock lost")
	}
	delete(q.msgs, m.SequenceNumber)
	delete(q.locked, m.SequenceNumber)
	q.completed = append(q.completed, m.SequenceNumber)
	return nil
}

func (q *fakeDLQ) Abandon(_ context.Context, m replay.DeadLetter) error {
	if !q.locked[m.SequenceNumber] {
		return errors.New("not locked")
	}
	delete(q.locked, m.SequenceNumber)
	return nil
}

func (q *fakeDLQ) endRun(t *testing.T) {
	t.Helper()
	if len(q.locked) != 0 {
		t.Fatalf("%d dead letters left locked after the run", len(q.locked))
	}
}

func dead(qseq int64, order string, seq any) replay.DeadLetter {
	props := map[string]any{"ledgerId": "L-1"}
	if seq != nil {
		props["seq"] = seq
	}
	return replay.DeadLetter{SequenceNumber: qseq, MessageID: fmt.Sprintf("L-1:%d", qseq), SessionID: order, Properties: props,
		Body: []byte(fmt.Sprintf(`{"transaction":{"orderId":%q,"op":"DeleteOrder"}}`, order)), Reason: "MaxDeliveryCountExceeded"}
}

func TestReplayInSeqOrder(t *testing.T) {
	ctx := context.Background()
	q := newDLQ(dead(40, "o-1", int64(7)), dead(10, "o-2", int64(3)), dead(30, "o-1", float64(5)), dead(20, "o-1", nil), dead(50, "o-1", "6"))
	sender := &ledgertest.Sender{}
	rep, err := replay.Order(ctx, q, sender, "o-1")
	if err != nil {
		t.Fatal(err)
	}
	q.endRun(t)
	var seqs []int64
	for _, m := range sender.Messages() {
		seqs = append(seqs, m.Seq)
		if m.SessionID != "o-1" || m.LedgerID != "L-1" || m.MessageID == "" {
			t.Fatalf("replayed %+v", m)
		}
	}
	if fmt.Sprint(seqs) != "[5 6 7]" || len(rep.Replayed) != 3 || rep.Scanned != 5 {
		t.Fatalf("replayed seqs %v, report %+v", seqs, rep)
	}
	if len(rep.Unplaceable) != 1 || rep.Unplaceable[0] != "L-1:20" {
		t.Fatalf("unplaceable %v, want the message without seq", rep.Unplaceable)
	}
	if _, ok := q.msgs[10]; !ok {
		t.Fatal("another order's dead letter was consumed")
	}
	if _, ok := q.msgs[20]; !ok {
		t.Fatal("the unplaceable dead letter was consumed")
	}
	again, err := replay.Order(ctx, q, sender, "o-1")
	if err != nil || len(again.Replayed) != 0 || len(sender.Messages()) != 3 {
		t.Fatalf("a second replay: %+v, %v, %d sent in all", again, err, len(sender.Messages()))
	}
}

// TestReplayPartialFailure: the re-send fails half-way, then a completion
// fails after its re-send; replaying again finishes the job. Every dead
// letter ends completed exactly once, and every re-sent copy of one dead
// letter carries the same MessageId (the queue drops the duplicate).
func TestReplayPartialFailure(t *testing.T) {
	ctx := context.Background()
	var all []replay.DeadLetter
	for i := range 8 {
		all = append(all, dead(int64(100+i), "o-1", int64(i+1)))
	}
	q := newDLQ(all...)
	sends := 0
	sender := &ledgertest.Sender{Fail: func(op string) error {
		if op == "send" {
			sends++
			if sends == 4 {
				return fault.Errorf(fault.Unavailable, "namespace unreachable")
			}
		}
		return nil
	}}
	rep, err := replay.Order(ctx, q, sender, "o-1")
	q.endRun(t)
	if err == nil || len(rep.Replayed) != 3 || len(q.msgs) != 5 {
		t.Fatalf("after a failed re-send: %v, %d replayed, %d still dead-lettered", err, len(rep.Replayed), len(q.msgs))
	}
	q.failComplete = func(m replay.DeadLetter) bool { return m.SequenceNumber == 105 }
	rep, err = replay.Order(ctx, q, sender, "o-1")
	q.endRun(t)
	if err == nil || len(rep.Replayed) != 2 || len(q.msgs) != 3 {
		t.Fatalf("after a failed completion: %v, %+v, %d still dead-lettered", err, rep, len(q.msgs))
	}
	q.failComplete = nil
	rep, err = replay.Order(ctx, q, sender, "o-1")
	q.endRun(t)
	if err != nil || len(q.msgs) != 0 {
		t.Fatalf("the last replay: %v, %d still dead-lettered", err, len(q.msgs))
	}
	bySeq := map[int64]map[string]bool{}
	for _, m := range sender.Messages() {
		if bySeq[m.Seq] == nil {
			bySeq[m.Seq] = map[string]bool{}
		}
		bySeq[m.Seq][m.MessageID] = true
	}
	for seq := int64(1); seq <= 8; seq++ {
		if len(bySeq[seq]) != 1 {
			t.Fatalf("seq %d was re-sent under %d MessageIds, want exactly 1: %v", seq, len(bySeq[seq]), bySeq[seq])
		}
	}
	seen := map[int64]bool{}
	for _, s := range q.completed {
		if seen[s] {
			t.Fatalf("dead letter %d completed twice", s)
		}
		seen[s] = true
	}
	if len(seen) != 8 {
		t.Fatalf("%d dead letters completed, want 8", len(seen))
	}
}

var _ ledger.Sender = (*ledgertest.Sender)(nil)
