// Package operator is what an operator does about a key (an order, an
// account) held up by a missing message, whichever transport asks and
// whatever its domain: replay a key's dead letters (only those of a
// transient cause; the others are left, and said why) or every key's, skip
// a key's missing seq, and complete the skipped seq's dead letter; and the
// answer each gives (Answer). The HTTP functions (package handler) and the
// command line (`convoy replay`, `convoy skip`) are thin clients of it: each
// maps an Answer's Outcome to its own terms, a status and Retry-After, or an
// exit code and a line on stderr.
//
// It sees only ports: a Replayer (QueueReplayer on the dead letters of a
// domain's queue, in the program), a Skipper (convoy.Processor), and the
// domain (keyed.Domain) whose keys and messages it reads.
package operator

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/convoy-dev/convoy/handler/fault"
	"github.com/convoy-dev/convoy/handler/keyed"
	"github.com/convoy-dev/convoy/handler/replay"
)

// Replayer replays the dead-lettered messages of a domain's keys
// (replay.Order and replay.All with the program's dead-letter source,
// sender and the domain's store: QueueReplayer).
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

// CheckID refuses an id that no key of d can have (an Invalid fault that
// names it as d's answers do: "orderId …").
func CheckID(d keyed.Domain, id string) error {
	if why := keyed.CheckID(id); why != "" {
		return fault.Errorf(fault.Invalid, "%s %s", IDName(d), why)
	}
	return nil
}

// IDName names the id of a key of d in routes, answers and log lines: its
// Noun and "Id" ("orderId", "accountId").
func IDName(d keyed.Domain) string { return d.Noun() + "Id" }

// engineIDName is how the engine's and the replay's types name a key's id
// in JSON (convoy.BlockedOrder, replay.Report): "orderId", the order
// domain's IDName, whatever the domain.
const engineIDName = "orderId"

// WithIDName is v's JSON with the engine's "orderId" members, of v or of
// each element of v when it is an array, named idName instead: a key's id
// as its domain names it. The rest is as json.Marshal writes it.
func WithIDName(v any, idName string) ([]byte, error) {
	raw, err := json.Marshal(v)
	if err != nil || idName == engineIDName || len(raw) == 0 {
		return raw, err
	}
	switch raw[0] {
	case '{':
		return renameMember(raw, idName)
	case '[':
		var elems []json.RawMessage
		if err := json.Unmarshal(raw, &elems); err != nil {
			return nil, err
		}
		out := []byte{'['}
		for i, e := range elems {
			if i > 0 {
				out = append(out, ',')
			}
			if len(e) > 0 && e[0] == '{' {
				if e, err = renameMember(e, idName); err != nil {
					return nil, err
				}
			}
			out = append(out, e...)
		}
		return append(out, ']'), nil
	}
	return raw, nil
}

// renameMember is the JSON object obj with its "orderId" member named
// idName, its members otherwise as written.
func renameMember(obj []byte, idName string) ([]byte, error) {
	ms, err := keyed.Members(obj)
	if err != nil {
		return nil, fmt.Errorf("rename %s: %w", engineIDName, err)
	}
	out := []byte{'{'}
	for i, m := range ms {
		if i > 0 {
			out = append(out, ',')
		}
		key := m.Key
		if key == engineIDName {
			key = idName
		}
		k, _ := json.Marshal(key)
		out = append(append(append(out, k...), ':'), m.Value...)
	}
	return append(out, '}'), nil
}

// OrderReplay is the report of an operator's replay of one key:
// replay.Report, with each dead letter the replay left dead-lettered and
// why (its "left" replaces the report's). Its JSON names the key's id as
// its domain does ("orderId", "accountId").
type OrderReplay struct {
	replay.Report
	Left []LeftDeadLetter `json:"left,omitempty"`
	// IDName names the key's id in the JSON ("": "orderId").
	IDName string `json:"-"`
}

// MarshalJSON writes the report with the key's id named IDName.
func (r OrderReplay) MarshalJSON() ([]byte, error) {
	type plain OrderReplay // its own fields, without this method
	name := r.IDName
	if name == "" {
		name = engineIDName
	}
	return WithIDName(plain(r), name)
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

// ReplayOrder replays the dead letters of key id of d with r: the one code
// path of the replay functions (ReplayOrder: POST
// /api/orders/{orderId}/replay, ReplayAccount) and `convoy replay`. Its
// answer is AnswerOf(the report, its Incomplete, the error).
func ReplayOrder(ctx context.Context, d keyed.Domain, r Replayer, id string) (OrderReplay, error) {
	out, err := replayKey(ctx, d, r, id)
	out.IDName = IDName(d)
	return out, err
}

func replayKey(ctx context.Context, d keyed.Domain, r Replayer, id string) (OrderReplay, error) {
	if err := CheckID(d, id); err != nil {
		return OrderReplay{Report: emptyReport(id)}, err
	}
	if x, ok := r.(ExplainingReplayer); ok {
		return x.ReplayOrder(ctx, id)
	}
	rep, err := r.Replay(ctx, id)
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
