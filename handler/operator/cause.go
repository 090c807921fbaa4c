package operator

import (
	"fmt"

	"github.com/convoy-dev/convoy/handler/convoy"
	"github.com/convoy-dev/convoy/handler/orders"
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

// Classify tells a dead letter of a transient cause from one of a permanent
// cause: what an operator's replay re-sends (QueueReplayer.ReplayOrder),
// and what AutoReplay, which automates it, replays (package heal). The
// rule: a dead letter the processor could read (an order id, a seq ≥ 1
// within convoy.MaxParkAhead of the order's appliedSeq, a valid body of
// that order) was refused for nothing it carries, so its delivery count was
// spent by something outside it (storage or Service Bus down, locks lost)
// or it expired waiting (TTLExpiredException): transient, worth replaying.
// One the processor cannot read failed because of what it is, and failing
// it ten more times helps nobody: permanent, left to an operator (skip its
// gap). A reason other than those two (set by another tool) is permanent
// too. appliedSeq is the order's, or -1 when unknown.
func Classify(d replay.DeadLetter, appliedSeq int64) Cause {
	if why := unreadable(d, appliedSeq); why != "" {
		return Cause{Class: Permanent, Why: "unreadable: " + why}
	}
	switch d.Reason {
	case ReasonMaxDelivery:
		return Cause{Class: Transient, Why: "its deliveries ran out while it was readable (an outage, lost locks)"}
	case ReasonExpired:
		return Cause{Class: Transient, Why: "it expired before it was processed (an outage or a backlog)"}
	}
	return Cause{Class: Permanent, Why: fmt.Sprintf("dead-lettered for %q, not by Service Bus's delivery count or expiry", d.Reason)}
}

// Addressed reports whether d names its order (a SessionId) and a seq ≥ 1.
func Addressed(d replay.DeadLetter) bool { return unaddressed(d) == "" }

// WithAppliedSeq is Classify(d, appliedSeq) from c, Classify(d, -1), for a
// caller that keeps c rather than d's body (AutoReplay's run): of an
// Addressed dead letter of seq seq, all the order's appliedSeq can add is
// that the seq is too far ahead to be parked.
func WithAppliedSeq(c Cause, addressed bool, seq, appliedSeq int64) Cause {
	if addressed {
		if why := tooFarAhead(seq, appliedSeq); why != "" {
			return Cause{Class: Permanent, Why: "unreadable: " + why}
		}
	}
	return c
}

// unreadable says why the processor would refuse m as unreadable ("" when
// it would not).
func unreadable(m replay.DeadLetter, appliedSeq int64) string {
	if why := unaddressed(m); why != "" {
		return why
	}
	seq, _ := convoy.IntProperty(m.Properties[convoy.PropSeq])
	if why := tooFarAhead(seq, appliedSeq); why != "" {
		return why
	}
	return unreadableBody(m)
}

// unaddressed says why m names no order or seq ("" when it names both).
func unaddressed(m replay.DeadLetter) string {
	if m.SessionID == "" {
		return "no SessionId (order id)"
	}
	if seq, ok := convoy.IntProperty(m.Properties[convoy.PropSeq]); !ok || seq < 1 {
		return "no readable seq"
	}
	return ""
}

// tooFarAhead says why seq is too far past the order's appliedSeq to be
// parked ("" when it is not, or appliedSeq is unknown: -1).
func tooFarAhead(seq, appliedSeq int64) string {
	if appliedSeq >= 0 && seq > appliedSeq+convoy.MaxParkAhead {
		return fmt.Sprintf("seq %d is more than %d past the order's appliedSeq %d", seq, convoy.MaxParkAhead, appliedSeq)
	}
	return ""
}

// unreadableBody says why m's body is not a transaction of its order (""
// when it is).
func unreadableBody(m replay.DeadLetter) string {
	t, err := orders.DecodeBody(m.Body)
	if err != nil {
		return cut(err.Error(), maxWhy)
	}
	if t.OrderID != m.SessionID {
		return fmt.Sprintf("the body's orderId %q is not its SessionId", cut(t.OrderID, maxWhy))
	}
	return ""
}

// maxWhy bounds what a cause quotes of a dead letter's body: a why is
// listed per dead letter and per blocked order.
const maxWhy = 120
