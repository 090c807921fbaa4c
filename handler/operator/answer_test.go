package operator_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/convoy-dev/convoy/handler/fault"
	"github.com/convoy-dev/convoy/handler/operator"
	"github.com/convoy-dev/convoy/handler/replay"
)

// TestAnswerBody: `convoy replay` prints the body ReplayOrder answers with
// (the failure worded as the command line does, fault.MessageOf), never the
// envelope of its headers: the report, with "error" beside it when the
// replay was incomplete or failed.
func TestAnswerBody(t *testing.T) {
	inc := operator.OrderReplay{Report: replay.Report{OrderID: "o-1", Replayed: []replay.Replayed{},
		Incomplete: &replay.Incomplete{NotReceived: 1, Reason: "1 locked by another reader"}}}
	for _, c := range []struct {
		rep     operator.OrderReplay
		err     error
		outcome operator.Outcome
		want    []string
	}{
		{operator.OrderReplay{Report: replay.Report{OrderID: "o-1", Replayed: []replay.Replayed{}}}, nil, operator.Complete,
			[]string{`{"orderId":"o-1","replayed":[],"scanned":0}`}},
		{inc, nil, operator.LockedElsewhere, []string{`"error":"1 locked by another reader"`, `"incomplete":{`, `"orderId":"o-1"`}},
		{operator.OrderReplay{Report: replay.Report{OrderID: "o-1", Replayed: []replay.Replayed{}}}, fault.Errorf(fault.Unavailable, "Service Bus is down"),
			operator.Failed, []string{`"error":"Service Bus is down"`, `"orderId":"o-1"`}},
	} {
		a := operator.AnswerOf(c.rep, c.rep.Incomplete, c.err)
		raw, _ := json.Marshal(a.Body(fault.MessageOf))
		if a.Outcome != c.outcome {
			t.Errorf("%s: outcome %d, want %d", raw, a.Outcome, c.outcome)
		}
		for _, w := range c.want {
			if !strings.Contains(string(raw), w) || strings.Contains(string(raw), `"Body"`) {
				t.Errorf("outcome %d: %s, want %s and no envelope", a.Outcome, raw, w)
			}
		}
	}
}

// TestAnswerOutcome: what an operator's replay answers is decided once: a
// failure outranks an incomplete report; dead letters locked by another
// reader are a different outcome from the scan limit reached.
func TestAnswerOutcome(t *testing.T) {
	locked := &replay.Incomplete{NotReceived: 2, ScanLimit: 5000, Reason: "2 locked by another reader"}
	limit := &replay.Incomplete{ScanLimitReached: true, ScanLimit: 3, NotReceived: 1, Reason: "scan limit"}
	down := fault.Errorf(fault.Unavailable, "down")
	for _, c := range []struct {
		inc  *replay.Incomplete
		err  error
		want operator.Outcome
	}{
		{nil, nil, operator.Complete}, {locked, nil, operator.LockedElsewhere}, {limit, nil, operator.ScanLimitReached},
		{nil, down, operator.Failed}, {locked, down, operator.Failed},
	} {
		if got := operator.AnswerOf(replay.Progress{Incomplete: c.inc}, c.inc, c.err).Outcome; got != c.want {
			t.Errorf("incomplete %+v, error %v: outcome %d, want %d", c.inc, c.err, got, c.want)
		}
	}
}
