// Package servicebus is the azservicebus adapter: it sends order messages for the
// publisher (a convoy.Sender) and ledger documents for the publish command, and
// reads the orders queue's dead letters for replay.
package servicebus

import (
	"context"
	"errors"
	"fmt"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"

	"github.com/convoy-dev/convoy/handler/convoy"
	"github.com/convoy-dev/convoy/handler/fault"
	"github.com/convoy-dev/convoy/handler/tracing"

	"go.opentelemetry.io/otel/trace"
)

// Sender sends to one queue. Create one per queue per process and reuse it:
// it holds an AMQP link.
type Sender struct {
	queue  string
	sender *azservicebus.Sender
}

var _ convoy.Sender = (*Sender)(nil)

// NewSender returns a Sender for queue on client.
func NewSender(client *azservicebus.Client, queue string) (*Sender, error) {
	s, err := client.NewSender(queue, nil)
	if err != nil {
		return nil, fmt.Errorf("sender for queue %q: %w", queue, err)
	}
	return &Sender{queue: queue, sender: s}, nil
}

// Close closes the link.
func (s *Sender) Close(ctx context.Context) error { return s.sender.Close(ctx) }

// ToMessage is the order message (convoy.OrderMessage) as an
// azservicebus.Message; convoy.OrderMessage.Size is its size in a batch.
func ToMessage(m convoy.Envelope) *azservicebus.Message {
	contentType := convoy.ContentType
	return &azservicebus.Message{
		SessionID:             &m.SessionID,
		MessageID:             &m.MessageID,
		ContentType:           &contentType,
		ApplicationProperties: m.Properties(),
		Body:                  m.Body,
	}
}

// NewBatch implements convoy.Sender: a batch sized to the entity's maximum
// message size (256 KiB on Standard, up to 100 MiB on Premium). The
// messages added get the trace context of ctx's span (the publish or
// replay operation) in traceparent and Diagnostic-Id, where they carry
// none of their own (tracing.Stamp: a context already set is kept).
func (s *Sender) NewBatch(ctx context.Context) (convoy.Batch, error) {
	b, err := s.sender.NewMessageBatch(ctx, nil)
	if err != nil {
		return nil, classify(err, "create batch for queue "+s.queue)
	}
	return &batch{mb: b, trace: trace.SpanContextFromContext(ctx)}, nil
}

// SendBatch implements convoy.Sender.
func (s *Sender) SendBatch(ctx context.Context, b convoy.Batch) error {
	if err := s.sender.SendMessageBatch(ctx, b.(*batch).mb, nil); errors.Is(err, azservicebus.ErrMessageTooLarge) {
		// The batch was filled to the link's own limit: a bug, not bad input
		// (the ledger's seqs are allocated; it must not be recorded as rejected).
		return fault.Wrap(fault.Internal, err, fmt.Sprintf("send %d messages to queue %s", b.Len(), s.queue))
	} else if err != nil {
		return classify(err, fmt.Sprintf("send %d messages to queue %s", b.Len(), s.queue))
	}
	return nil
}

type batch struct {
	mb    *azservicebus.MessageBatch
	trace trace.SpanContext
}

func (b *batch) Add(m convoy.Envelope) error {
	m.TraceParent, m.DiagnosticID = tracing.Stamp(m.TraceParent, m.DiagnosticID, b.trace)
	err := b.mb.AddMessage(ToMessage(m), nil)
	if errors.Is(err, azservicebus.ErrMessageTooLarge) {
		return convoy.ErrBatchFull
	}
	return err
}

func (b *batch) Len() int { return int(b.mb.NumMessages()) }

// SendLedger sends a ledger document to the ledgers queue, with its ledgerId
// as MessageId so that the queue's duplicate detection drops a resend, and
// its stream as SessionId so that the ledgers of one stream are taken one
// after the other. It carries the trace context of ctx's span, if any, in
// traceparent and Diagnostic-Id: LedgerIngest continues that trace.
func (s *Sender) SendLedger(ctx context.Context, ledgerID, stream string, doc []byte) error {
	contentType := convoy.ContentType
	msg := &azservicebus.Message{MessageID: &ledgerID, SessionID: &stream, ContentType: &contentType, Body: doc}
	if tp, did := tracing.Stamp("", "", trace.SpanContextFromContext(ctx)); tp != "" {
		msg.ApplicationProperties = map[string]any{tracing.PropTraceParent: tp, tracing.PropDiagnosticID: did}
	}
	err := s.sender.SendMessage(ctx, msg, nil)
	if errors.Is(err, azservicebus.ErrMessageTooLarge) {
		return fault.Errorf(fault.TooLarge, "ledger %q (%d bytes) is larger than a message on queue %s may be: upload it over HTTP (LedgerUpload) or publish it with --direct", ledgerID, len(doc), s.queue)
	}
	if err != nil {
		return classify(err, "send ledger "+ledgerID)
	}
	return nil
}

// classify: every Service Bus failure is worth retrying later except a
// message that can never fit; access and missing-entity errors say what to fix.
func classify(err error, what string) error {
	var sbErr *azservicebus.Error
	if errors.As(err, &sbErr) {
		switch sbErr.Code {
		case azservicebus.CodeUnauthorizedAccess:
			return fault.Wrap(fault.Unavailable, err, what+": access denied (the identity needs Azure Service Bus Data Sender)")
		case azservicebus.CodeNotFound:
			return fault.Wrap(fault.Unavailable, err, what+": queue not found")
		}
	}
	if errors.Is(err, azservicebus.ErrMessageTooLarge) {
		return fault.Wrap(fault.TooLarge, err, what)
	}
	if why := unreachable(err); why != "" {
		what += ": " + why
	}
	return fault.Wrap(fault.Unavailable, err, what)
}
