package operator

import (
	"encoding/json"

	"github.com/convoy-dev/convoy/handler/replay"
)

// Outcome is how an operator's replay ended, as the use case decides it;
// each transport says it in its own terms.
type Outcome int

const (
	// Complete: the replay saw every dead letter it was asked to.
	Complete Outcome = iota
	// LockedElsewhere: incomplete, dead letters were locked by another
	// reader. The same call later finishes the job (a lock lasts the
	// queue's lock duration).
	LockedElsewhere
	// ScanLimitReached: incomplete, the scan limit was reached. The same
	// call cannot finish the job: replay every dead letter, or raise
	// ReplayScanLimit.
	ScanLimitReached
	// Failed: the replay failed part-way (Service Bus or storage
	// unavailable, its deadline reached). What was replayed stays
	// replayed; the rest stays dead-lettered.
	Failed
)

// Answer is what an operator's replay answers: its outcome and its report
// (an OrderReplay, or replay.Progress of a replay of every order).
type Answer struct {
	Outcome Outcome
	Report  any
	Err     error  // why it Failed
	Reason  string // why it is incomplete (replay.Incomplete.Reason)
}

// AnswerOf is the answer of a replay that reported report, which says in
// incomplete (its Incomplete) whether it saw every dead letter, and ended
// with err. A failure outranks an incomplete report.
func AnswerOf(report any, incomplete *replay.Incomplete, err error) Answer {
	switch {
	case err != nil:
		return Answer{Outcome: Failed, Report: report, Err: err}
	case incomplete == nil:
		return Answer{Outcome: Complete, Report: report}
	case incomplete.LockedElsewhere():
		return Answer{Outcome: LockedElsewhere, Report: report, Reason: incomplete.Reason}
	}
	return Answer{Outcome: ScanLimitReached, Report: report, Reason: incomplete.Reason}
}

// Body is the answer's JSON body, the same whichever transport gives it:
// the report when Complete; otherwise the JSON error shape of
// docs/contract.md, "error" beside the report's fields, saying why it is
// incomplete, or the failure as describe words it (the HTTP functions hide
// an internal error's details, the command line does not).
func (a Answer) Body(describe func(error) string) any {
	if a.Outcome == Complete {
		return a.Report
	}
	body := map[string]any{}
	raw, _ := json.Marshal(a.Report)
	_ = json.Unmarshal(raw, &body)
	body["error"] = a.Reason
	if a.Outcome == Failed {
		body["error"] = describe(a.Err)
	}
	return body
}
