package operator_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/convoy-dev/convoy/handler/accounts"
	"github.com/convoy-dev/convoy/handler/convoy"
	"github.com/convoy-dev/convoy/handler/fault"
	"github.com/convoy-dev/convoy/handler/keyed"
	"github.com/convoy-dev/convoy/handler/operator"
	"github.com/convoy-dev/convoy/handler/orders"
	"github.com/convoy-dev/convoy/handler/replay"
)

// settler is a dead-letter queue holding one dead letter per seq of o-1
// (MessageId "dl-<seq>"), as QueueReplayer.SettleSkipped sees it: the
// skipped seq's is completed as a duplicate; it records the seqs asked for.
type settler struct {
	held  map[int64]string
	asked []int64
	err   error
}

func (s *settler) SettleSkipped(_ context.Context, orderID string, seq int64) (replay.Report, error) {
	s.asked = append(s.asked, seq)
	rep := replay.Report{OrderID: orderID, Replayed: []replay.Replayed{}}
	if s.err != nil {
		return rep, s.err
	}
	if id, ok := s.held[seq]; ok {
		rep.Duplicates = append(rep.Duplicates, replay.Duplicate{Seq: seq, MessageID: id})
		delete(s.held, seq)
	}
	return rep, nil
}

// TestSettleSkippedCompletesTheSkippedSeqsDeadLetter: after a skip, the
// dead letter of the skipped seq, and no other, is completed, and the
// answer names it; when there is none, or the queue cannot be read, the
// answer says so.
func TestSettleSkippedCompletesTheSkippedSeqsDeadLetter(t *testing.T) {
	ctx := context.Background()
	s := &settler{held: map[int64]string{4: "dl-4", 5: "dl-5"}}
	res := operator.SkipResult{ID: "o-1", Skipped: 4}
	operator.SettleSkipped(ctx, s, &res)
	if len(s.asked) != 1 || s.asked[0] != 4 {
		t.Fatalf("settled seqs %v, want the skipped seq 4 only", s.asked)
	}
	if d := res.DeadLetter; d == nil || len(d.Completed) != 1 || d.Completed[0] != "dl-4" || d.Note != "" {
		t.Fatalf("the answer's dead letter: %+v, want dl-4 completed", res.DeadLetter)
	}
	if _, left := s.held[5]; !left {
		t.Fatal("the dead letter of seq 5, which was not skipped, was completed")
	}

	res = operator.SkipResult{ID: "o-1", Skipped: 6}
	operator.SettleSkipped(ctx, s, &res)
	if d := res.DeadLetter; d == nil || len(d.Completed) != 0 || !strings.Contains(d.Note, "no dead letter of seq 6") {
		t.Fatalf("a skip of a seq never dead-lettered: %+v", res.DeadLetter)
	}

	s.err = fault.Errorf(fault.Unavailable, "Service Bus is down")
	res = operator.SkipResult{ID: "o-1", Skipped: 5}
	operator.SettleSkipped(ctx, s, &res)
	if d := res.DeadLetter; d == nil || len(d.Completed) != 0 || !strings.Contains(d.Note, "could not be read: Service Bus is down") {
		t.Fatalf("a dead-letter queue that cannot be read: %+v", res.DeadLetter)
	}
}

// unboundSkipper skips, and answers a view it could not read: the key's
// head alone, not bound to its domain (convoy.Processor.Skip's answer
// when its history could not be read).
type unboundSkipper struct{}

func (unboundSkipper) Skip(_ context.Context, id string, seq int64) (convoy.Result, convoy.View, error) {
	return convoy.Result{AppliedSeq: seq + 1, Outcomes: []convoy.Outcome{{Seq: seq + 1, Drained: true}}},
		convoy.View{Order: &convoy.Key{ID: id, AppliedSeq: seq + 1}}, nil
}

// TestSkipAnswersInTheDomainsWords: a skip's answer names the key's id and
// view as its domain does, in the order the order domain's always had;
// without a view (it could not be read), the view is the key's id and
// appliedSeq.
func TestSkipAnswersInTheDomainsWords(t *testing.T) {
	for _, c := range []struct {
		domain keyed.Domain
		want   string
	}{
		{orders.Domain, `{"orderId":"o-1","skipped":2,"drained":[3],"order":{"orderId":"o-1","appliedSeq":3}}`},
		{accounts.Domain, `{"accountId":"o-1","skipped":2,"drained":[3],"account":{"accountId":"o-1","appliedSeq":3}}`},
	} {
		res, err := operator.SkipGap(context.Background(), c.domain, unboundSkipper{}, "o-1", "2")
		raw, _ := json.Marshal(res)
		if err != nil || string(raw) != c.want {
			t.Errorf("%s: %s %v, want %s", c.domain.Name(), raw, err, c.want)
		}
	}
	if _, err := operator.SkipGap(context.Background(), accounts.Domain, unboundSkipper{}, "bad id", "2"); err == nil || !strings.HasPrefix(err.Error(), "accountId ") {
		t.Errorf("an invalid account id: %v", err)
	}
}
