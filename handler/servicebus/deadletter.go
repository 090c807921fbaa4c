package servicebus

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"

	"github.com/convoy-dev/convoy/handler/replay"
)

// DeadLetters reads a queue's dead-letter sub-queue with peek-lock. The
// dead-letter sub-queue of a session-enabled queue is not session-enabled.
// ReceiveMessages returns at most the number asked for and locks each
// message it returns for the queue's lock duration: other receivers do not
// see it until the lock expires or it is abandoned. PeekMessages sees every
// message, locked or not, and locks none.
//
// It uses two receivers, so that what a run gives back never comes back
// into it (docs/host-contract.md, "Locks of a closed receiver"):
//   - receiving, for Receive only. azservicebus grants its link credit for
//     each ReceiveMessages and never drains it: a receive that comes back
//     short (the last one of every scan) leaves credit on the link, and
//     Service Bus delivers whatever becomes available, an abandoned message
//     included, straight back into it (the SDK's releaser then releases it,
//     and it comes back again while credit lasts); one in flight when the
//     receiver closes stays locked until its lock expires, as does every
//     lock of a closed receiver. So a run's scan ends with EndReceive, which
//     closes this receiver (holding nothing then: what it received stays
//     locked by the run, to be settled by lock token), an Abandon closes it
//     too if still open, and a later Receive opens a new one.
//   - control, for peeks and every settlement, by lock token over the
//     entity's $management node (com.microsoft:update-disposition), which
//     Service Bus accepts for a message of an entity without sessions also
//     after the link that received it closed. It never receives, so its
//     link never has credit and nothing is ever delivered into it.
type DeadLetters struct {
	client  *azservicebus.Client
	queue   string
	control *azservicebus.Receiver

	mu        sync.Mutex
	receiving *azservicebus.Receiver // nil until a Receive, and again after EndReceive or an Abandon
	opened    bool                   // a Peek or Receive succeeded: the connection and links are up
}

var _ replay.Source = (*DeadLetters)(nil)

// receiveWait is how long Receive waits for the sub-queue to yield a batch.
const receiveWait = 5 * time.Second

var deadLetterReceiver = &azservicebus.ReceiverOptions{SubQueue: azservicebus.SubQueueDeadLetter, ReceiveMode: azservicebus.ReceiveModePeekLock}

// NewDeadLetters opens the dead-letter sub-queue of queue; Close it after one replay.
func NewDeadLetters(client *azservicebus.Client, queue string) (*DeadLetters, error) {
	r, err := client.NewReceiverForQueue(queue, deadLetterReceiver)
	if err != nil {
		return nil, fmt.Errorf("dead letters of queue %q: %w", queue, err)
	}
	return &DeadLetters{client: client, queue: queue, control: r}, nil
}

// Close closes both receivers. Every message this run received and did not
// settle is still locked (a closed receiver's locks last until they
// expire): a run abandons what it does not take before it closes.
func (d *DeadLetters) Close(ctx context.Context) error {
	err := d.endReceiving(ctx)
	return errors.Join(err, d.control.Close(ctx))
}

var _ replay.ReceiveEnder = (*DeadLetters)(nil)

// EndReceive implements replay.ReceiveEnder: a run's scan is over, so the
// receiving receiver closes (and with it the credit left on its link),
// holding nothing: what the run received it settles by lock token.
func (d *DeadLetters) EndReceive(ctx context.Context) error { return d.endReceiving(ctx) }

// endReceiving closes the receiving receiver, if open: its link and the
// credit left on it go, so nothing given back can come back into it.
func (d *DeadLetters) endReceiving(ctx context.Context) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.receiving == nil {
		return nil
	}
	r := d.receiving
	d.receiving = nil
	// Closed also when the run's own deadline has passed: a link left open
	// with credit would take back what the run then gives back.
	ctx, cancel := bounded(context.WithoutCancel(ctx))
	defer cancel()
	return r.Close(ctx)
}

// receiver is the receiving receiver, opened if need be.
func (d *DeadLetters) receiver() (*azservicebus.Receiver, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.receiving == nil {
		r, err := d.client.NewReceiverForQueue(d.queue, deadLetterReceiver)
		if err != nil {
			return nil, fmt.Errorf("dead letters of queue %q: %w", d.queue, err)
		}
		d.receiving = r
	}
	return d.receiving, nil
}

// Receive implements replay.Source: none when nothing arrives within a few seconds.
func (d *DeadLetters) Receive(ctx context.Context, max int) ([]replay.DeadLetter, error) {
	if !d.opened {
		// ReceiveMessages opens the connection and links within its wait,
		// so a namespace that accepts TCP and never answers would look
		// like an empty sub-queue. A peek of one message opens them first,
		// within OperationTimeout, and fails as what it is.
		if _, err := d.Peek(ctx, 0, 1); err != nil {
			return nil, err
		}
	}
	r, err := d.receiver()
	if err != nil {
		return nil, err
	}
	wait, cancel := context.WithTimeout(ctx, receiveWait)
	defer cancel()
	msgs, err := r.ReceiveMessages(wait, max, nil)
	if err != nil && !(errors.Is(err, context.DeadlineExceeded) && ctx.Err() == nil) {
		return nil, classify(err, "receive dead letters of queue "+d.queue)
	}
	d.opened = true
	return deadLetters(msgs), nil
}

// Peek implements replay.Source with PeekMessages: up to max dead letters
// from sequence number from on, locked by any receiver or not, none locked.
func (d *DeadLetters) Peek(ctx context.Context, from int64, max int) ([]replay.DeadLetter, error) {
	ctx, cancel := bounded(ctx)
	defer cancel()
	msgs, err := d.control.PeekMessages(ctx, max, &azservicebus.PeekMessagesOptions{FromSequenceNumber: &from})
	if err != nil {
		return nil, classify(err, "peek dead letters of queue "+d.queue)
	}
	d.opened = true
	out := deadLetters(msgs)
	for i := range out {
		out[i].Handle = nil // a peeked message cannot be settled
	}
	return out, nil
}

func deadLetters(msgs []*azservicebus.ReceivedMessage) []replay.DeadLetter {
	out := make([]replay.DeadLetter, len(msgs))
	for i, m := range msgs {
		out[i] = replay.DeadLetter{MessageID: m.MessageID, Properties: m.ApplicationProperties, Body: m.Body, Handle: m}
		if m.SequenceNumber != nil {
			out[i].SequenceNumber = *m.SequenceNumber
		}
		if m.SessionID != nil {
			out[i].SessionID = *m.SessionID
		}
		if m.DeadLetterReason != nil {
			out[i].Reason = *m.DeadLetterReason
		}
	}
	return out
}

// byLockToken is a received message reduced to its lock token: the SDK
// settles such a message over the receiver's $management link, never on a
// receive link (azservicebus's messageSettler: a message without its AMQP
// original is one "constructed just to settle with").
func byLockToken(m replay.DeadLetter) *azservicebus.ReceivedMessage {
	return &azservicebus.ReceivedMessage{LockToken: m.Handle.(*azservicebus.ReceivedMessage).LockToken}
}

// Complete implements replay.Source, by lock token.
func (d *DeadLetters) Complete(ctx context.Context, m replay.DeadLetter) error {
	ctx, cancel := bounded(ctx)
	defer cancel()
	if err := d.control.CompleteMessage(ctx, byLockToken(m), nil); err != nil {
		return classify(err, "complete dead letter "+m.MessageID)
	}
	return nil
}

// Abandon implements replay.Source, by lock token, once the receiving
// receiver is closed: given back while that receiver's link had credit, the
// message could be delivered straight back into it.
func (d *DeadLetters) Abandon(ctx context.Context, m replay.DeadLetter) error {
	// A close that fails (Service Bus gone) leaves the link to the SDK;
	// the abandon is tried all the same.
	_ = d.endReceiving(ctx)
	ctx, cancel := bounded(ctx)
	defer cancel()
	if err := d.control.AbandonMessage(ctx, byLockToken(m), nil); err != nil {
		return classify(err, "abandon dead letter "+m.MessageID)
	}
	return nil
}
