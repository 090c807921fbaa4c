// Package operator is what an operator does about an order held up by a
// missing message, whichever transport asks: replay an order's dead letters
// (only those of a transient cause; the others are left, and said why) or
// every order's, skip an order's missing seq, and complete the skipped
// seq's dead letter; and the answer each gives (Answer). The HTTP functions
// (package handler) and the command line (`convoy replay`, `convoy skip`)
// are thin clients of it: each maps an Answer's Outcome to its own terms, a
// status and Retry-After, or an exit code and a line on stderr.
//
// It sees only ports: a Replayer (QueueReplayer on the orders queue's
// dead letters, in the program), a Skipper (convoy.Processor).
package operator

import (
	"context"

	"github.com/convoy-dev/convoy/handler/fault"
	"github.com/convoy-dev/convoy/handler/orders"
	"github.com/convoy-dev/convoy/handler/replay"
)

// Replayer replays dead-lettered order messages (replay.Order and
// replay.All with the program's dead-letter source, sender and order store:
// QueueReplayer).
type Replayer interface {
	Replay(ctx context.Context, orderID string) (replay.Report, error)
	// ReplayAll is one call of replay.All: max 0 is the default.
	ReplayAll(ctx context.Context, max int, continuation string) (replay.Progress, error)
}

// ExplainingReplayer is a Replayer that says why it left each dead letter
// it did not re-send (QueueReplayer); a Replayer without it is reported
// with the ids of Report.Left only.
type ExplainingReplayer interface {
	ReplayOrder(ctx context.Context, orderID string) (OrderReplay, error)
}

// CheckOrderID refuses an order id that no order can have (an Invalid fault).
func CheckOrderID(id string) error {
	if why := orders.CheckID(id); why != "" {
		return fault.Errorf(fault.Invalid, "orderId %s", why)
	}
	return nil
}

// OrderReplay is the report of an operator's replay of one order:
// replay.Report, with each dead letter the replay left dead-lettered and
// why (its "left" replaces the report's).
type OrderReplay struct {
	replay.Report
	Left []LeftDeadLetter `json:"left,omitempty"`
}

// LeftDeadLetter is a dead letter an operator's replay did not re-send: one
// of a permanent cause (Classify), which would only be dead-lettered again.
// Its gap is for SkipGap.
type LeftDeadLetter struct {
	MessageID string `json:"messageId"`
	Seq       int64  `json:"seq,omitempty"` // 0 when it has no readable seq
	Cause     string `json:"cause,omitempty"`
	Why       string `json:"why,omitempty"`
}

// ReplayOrder replays orderID's dead letters with r: the one code path of
// ReplayOrder (POST /api/orders/{orderId}/replay) and `convoy replay`. Its
// answer is AnswerOf(the report, its Incomplete, the error).
func ReplayOrder(ctx context.Context, r Replayer, orderID string) (OrderReplay, error) {
	if err := CheckOrderID(orderID); err != nil {
		return OrderReplay{Report: emptyReport(orderID)}, err
	}
	if x, ok := r.(ExplainingReplayer); ok {
		return x.ReplayOrder(ctx, orderID)
	}
	rep, err := r.Replay(ctx, orderID)
	out := OrderReplay{Report: rep}
	for _, id := range rep.Left {
		out.Left = append(out.Left, LeftDeadLetter{MessageID: id})
	}
	return out, err
}

// emptyReport is the report of a replay of orderID that replayed nothing
// (its "replayed" a list, never null).
func emptyReport(orderID string) replay.Report {
	return replay.Report{OrderID: orderID, Replayed: []replay.Replayed{}}
}

// cut shortens text quoted in a message to n bytes.
func cut(s string, n int) string {
	if len(s) > n {
		return s[:n] + "…"
	}
	return s
}

// maxQuoted bounds outside input quoted in a message (a seq as typed, a
// storage error).
const maxQuoted = 64
