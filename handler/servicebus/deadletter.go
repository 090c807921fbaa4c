package servicebus

import (
	"context"
	"errors"
	"fmt"
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
type DeadLetters struct {
	queue    string
	receiver *azservicebus.Receiver
	opened   bool // a Peek or Receive succeeded: the connection and links are up
}

var _ replay.Source = (*DeadLetters)(nil)

// receiveWait is how long Receive waits for the sub-queue to yield a batch.
const receiveWait = 5 * time.Second

// NewDeadLetters opens the dead-letter sub-queue of queue; Close it after one replay.
func NewDeadLetters(client *azservicebus.Client, queue string) (*DeadLetters, error) {
	r, err := client.NewReceiverForQueue(queue, &azservicebus.ReceiverOptions{
		SubQueue:    azservicebus.SubQueueDeadLetter,
		ReceiveMode: azservicebus.ReceiveModePeekLock,
	})
	if err != nil {
		return nil, fmt.Errorf("dead letters of queue %q: %w", queue, err)
	}
	return &DeadLetters{queue: queue, receiver: r}, nil
}

// Close closes the receiver; locks still held expire.
func (d *DeadLetters) Close(ctx context.Context) error { return d.receiver.Close(ctx) }

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
	wait, cancel := context.WithTimeout(ctx, receiveWait)
	defer cancel()
	msgs, err := d.receiver.ReceiveMessages(wait, max, nil)
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
	msgs, err := d.receiver.PeekMessages(ctx, max, &azservicebus.PeekMessagesOptions{FromSequenceNumber: &from})
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

// Complete implements replay.Source.
func (d *DeadLetters) Complete(ctx context.Context, m replay.DeadLetter) error {
	ctx, cancel := bounded(ctx)
	defer cancel()
	if err := d.receiver.CompleteMessage(ctx, m.Handle.(*azservicebus.ReceivedMessage), nil); err != nil {
		return classify(err, "complete dead letter "+m.MessageID)
	}
	return nil
}

// Abandon implements replay.Source.
func (d *DeadLetters) Abandon(ctx context.Context, m replay.DeadLetter) error {
	ctx, cancel := bounded(ctx)
	defer cancel()
	return d.receiver.AbandonMessage(ctx, m.Handle.(*azservicebus.ReceivedMessage), nil)
}
