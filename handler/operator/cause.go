package operator

import (
	"fmt"

	"github.com/convoy-dev/convoy/handler/convoy"
	"github.com/convoy-dev/convoy/handler/keyed"
	"github.com/convoy-dev/convoy/handler/replay"
)

// Dead-letter reasons Service Bus writes.
const (
	ReasonMaxDelivery = "MaxDeliveryCountExceeded"
	ReasonExpired     = "TTLExpiredException"
)

// Classes of cause.
const (
	Transient = "transient"
	Permanent = "permanent"
)

// Cause is why a dead letter is there, as far as it can be told.
type Cause struct {
	Class string `json:"cause"` // Transient or Permanent
	Why   string `json:"why"`
}

// Classify tells a dead letter of domain d of a transient cause from one of
// a permanent cause: what an operator's replay re-sends
// (QueueReplayer.ReplayOrder), and what AutoReplay, which automates it,
// replays (package heal). The rule: a dead letter the processor could read
// (a key's id, a seq ≥ 1 within convoy.MaxParkAhead of the key's
// appliedSeq, a body d reads as a command of that key) was refused for
// nothing it carries, so its delivery count was spent by something outside
// it (storage or Service Bus down, locks lost) or it expired waiting
// (TTLExpiredException): transient, worth replaying. One the processor
// cannot read failed because of what it is, and failing it ten more times
// helps nobody: permanent, left to an operator (skip its gap). A reason
// other than those two (set by another tool) is permanent too. appliedSeq
// is the key's, or -1 when unknown.
func Classify(d keyed.Domain, dl replay.DeadLetter, appliedSeq int64) Cause {
	if why := unreadable(d, dl, appliedSeq); why != "" {
		return Cause{Class: Permanent, Why: "unreadable: " + why}
	}
	switch dl.Reason {
	case ReasonMaxDelivery:
		return Cause{Class: Transient, Why: "its deliveries ran out while it was readable (an outage, lost locks)"}
	case ReasonExpired:
		return Cause{Class: Transient, Why: "it expired before it was processed (an outage or a backlog)"}
	}
	return Cause{Class: Permanent, Why: fmt.Sprintf("dead-lettered for %q, not by Service Bus's delivery count or expiry", dl.Reason)}
}

// Addressed reports whether dl names its key (a SessionId) and a seq ≥ 1.
func Addressed(dl replay.DeadLetter) bool { return unaddressed("", dl) == "" }

// WithAppliedSeq is Classify(d, dl, appliedSeq) from c, Classify(d, dl,
// -1), for a caller that keeps c rather than dl's body (AutoReplay's run):
// of an Addressed dead letter of seq seq, all the key's appliedSeq can add
// is that the seq is too far ahead to be parked.
func WithAppliedSeq(d keyed.Domain, c Cause, addressed bool, seq, appliedSeq int64) Cause {
	if addressed {
		if why := tooFarAhead(d.Noun(), seq, appliedSeq); why != "" {
			return Cause{Class: Permanent, Why: "unreadable: " + why}
		}
	}
	return c
}

// unreadable says why the processor of d would refuse m as unreadable (""
// when it would not).
func unreadable(d keyed.Domain, m replay.DeadLetter, appliedSeq int64) string {
	if why := unaddressed(d.Noun(), m); why != "" {
		return why
	}
	seq, _ := convoy.IntProperty(m.Properties[convoy.PropSeq])
	if why := tooFarAhead(d.Noun(), seq, appliedSeq); why != "" {
		return why
	}
	return unreadableBody(d, m)
}

// unaddressed says why m names no key (a noun) or seq ("" when it names
// both).
func unaddressed(noun string, m replay.DeadLetter) string {
	if m.SessionID == "" {
		return "no SessionId (" + noun + " id)"
	}
	if seq, ok := convoy.IntProperty(m.Properties[convoy.PropSeq]); !ok || seq < 1 {
		return "no readable seq"
	}
	return ""
}

// tooFarAhead says why seq is too far past the appliedSeq of its key (a
// noun) to be parked ("" when it is not, or appliedSeq is unknown: -1).
func tooFarAhead(noun string, seq, appliedSeq int64) string {
	if appliedSeq >= 0 && seq > appliedSeq+convoy.MaxParkAhead {
		return fmt.Sprintf("seq %d is more than %d past the %s's appliedSeq %d", seq, convoy.MaxParkAhead, noun, appliedSeq)
	}
	return ""
}

// unreadableBody says why m's body is not a command of its key as d reads
// it, the processor's ReadCommand: a valid body, of the key its SessionId
// names ("" when it is).
func unreadableBody(d keyed.Domain, m replay.DeadLetter) string {
	if _, err := d.ReadCommand(m.SessionID, m.Body); err != nil {
		return cut(err.Error(), maxWhy)
	}
	return ""
}

// maxWhy bounds what a cause quotes of a dead letter's body: a why is
// listed per dead letter and per blocked order.
const maxWhy = 120
