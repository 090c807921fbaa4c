// Package replay puts an order's dead-lettered messages back into their
// place: it re-sends them to the orders queue in seq order, with their
// original SessionId, seq and body and a new MessageId, and completes each
// dead-lettered copy only after its re-send succeeded.
package replay

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/convoy-dev/convoy/handler/convoy"
)

// DeadLetter is a message of a dead-letter sub-queue, locked by Receive.
type DeadLetter struct {
	SequenceNumber int64 // in the queue; a message dead-lettered again has a new one
	MessageID      string
	SessionID      string
	Properties     map[string]any
	Body           []byte
	Reason         string
	Handle         any // the adapter's lock
}

// Source reads a dead-letter sub-queue with peek-lock.
type Source interface {
	// Receive locks up to max messages not yet received in this run; none
	// when the sub-queue has no more.
	Receive(ctx context.Context, max int) ([]DeadLetter, error)
	Complete(ctx context.Context, m DeadLetter) error
	Abandon(ctx context.Context, m DeadLetter) error
}

// MaxScan bounds the dead letters one replay holds locked while it looks
// for the order's messages.
const MaxScan = 5000

// Replayed is one message put back.
type Replayed struct {
	Seq          int64  `json:"seq"`
	MessageID    string `json:"messageId"`
	NewMessageID string `json:"newMessageId"`
	Reason       string `json:"deadLetterReason,omitempty"`
}

// Report says what a replay did.
type Report struct {
	OrderID  string     `json:"orderId"`
	Replayed []Replayed `json:"replayed"`
	// Unplaceable are the order's dead letters without a seq: they cannot be
	// put back in order and stay dead-lettered (skip their gap instead).
	Unplaceable []string `json:"unplaceable,omitempty"`
	Scanned     int      `json:"scanned"`
}

// ReplayID is the MessageId of a replayed copy. It is fixed per dead-lettered
// copy, so a replay re-run after a crash is dropped by duplicate detection,
// while a message dead-lettered again (a new sequence number) is replayed anew.
func ReplayID(m DeadLetter) string {
	return fmt.Sprintf("%s#replay-%d", m.MessageID, m.SequenceNumber)
}

// Order replays the dead letters of orderID. Messages of other orders are
// released untouched. On error, everything not yet replayed stays
// dead-lettered, and the report says what was.
func Order(ctx context.Context, src Source, sender convoy.Sender, orderID string) (Report, error) {
	rep := Report{OrderID: orderID, Replayed: []Replayed{}}
	var mine, others []DeadLetter
	defer func() { release(ctx, src, others) }()
	for rep.Scanned < MaxScan {
		batch, err := src.Receive(ctx, min(100, MaxScan-rep.Scanned))
		if err != nil {
			release(ctx, src, mine)
			return rep, fmt.Errorf("read dead letters: %w", err)
		}
		if len(batch) == 0 {
			break
		}
		rep.Scanned += len(batch)
		for _, m := range batch {
			if m.SessionID == orderID {
				mine = append(mine, m)
			} else {
				others = append(others, m)
			}
		}
	}
	type placed struct {
		m   DeadLetter
		msg convoy.OrderMessage
	}
	var todo []placed
	for _, m := range mine {
		msg, err := orderMessage(m)
		if err != nil {
			rep.Unplaceable = append(rep.Unplaceable, m.MessageID)
			others = append(others, m)
			continue
		}
		todo = append(todo, placed{m, msg})
	}
	slices.SortStableFunc(todo, func(a, b placed) int { return int(a.msg.Seq - b.msg.Seq) })
	for i, p := range todo {
		if err := send(ctx, sender, p.msg); err != nil {
			for _, rest := range todo[i:] {
				others = append(others, rest.m)
			}
			return rep, fmt.Errorf("re-send seq %d of order %q: %w", p.msg.Seq, orderID, err)
		}
		if err := src.Complete(ctx, p.m); err != nil {
			// Re-sent but still dead-lettered: a later replay re-sends it under
			// the same MessageId (dropped as a duplicate) and completes it.
			for _, rest := range todo[i:] {
				others = append(others, rest.m)
			}
			return rep, fmt.Errorf("complete the dead-lettered copy of seq %d: %w", p.msg.Seq, err)
		}
		rep.Replayed = append(rep.Replayed, Replayed{Seq: p.msg.Seq, MessageID: p.m.MessageID, NewMessageID: p.msg.MessageID, Reason: p.m.Reason})
	}
	return rep, nil
}

func send(ctx context.Context, sender convoy.Sender, m convoy.OrderMessage) error {
	b, err := sender.NewBatch(ctx)
	if err != nil {
		return err
	}
	if err := b.Add(m); err != nil {
		return err
	}
	return sender.SendBatch(ctx, b)
}

func release(ctx context.Context, src Source, msgs []DeadLetter) {
	for _, m := range msgs {
		_ = src.Abandon(ctx, m) // a lock not released expires by itself
	}
}

// orderMessage rebuilds the order message from a dead letter.
func orderMessage(m DeadLetter) (convoy.OrderMessage, error) {
	seq, ok := convoy.IntProperty(m.Properties[convoy.PropSeq])
	if !ok || seq < 1 {
		return convoy.OrderMessage{}, errors.New("no seq")
	}
	ledgerID, _ := m.Properties[convoy.PropLedgerID].(string)
	last, _ := m.Properties[convoy.PropLast].(bool)
	return convoy.OrderMessage{SessionID: m.SessionID, MessageID: ReplayID(m), LedgerID: ledgerID, Seq: seq, Last: last, Body: m.Body}, nil
}
