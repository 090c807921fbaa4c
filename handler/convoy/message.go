package convoy

import (
	"context"
	"encoding/json"
	"errors"
	"strconv"
	"time"

	"github.com/convoy-dev/convoy/handler/keyed"
)

// The order message format (docs/contract.md, "Order message"): one place that
// both the publisher and the processor use.
const (
	PropLedgerID = "ledgerId" // application property: the ledger the transaction came from
	PropSeq      = "seq"      // application property: the order's own sequence number, from 1
	PropLast     = "last"     // application property: true on an end-of-sequence transaction
	ContentType  = "application/json"
)

// MessageID is the Service Bus MessageId of the index-th transaction of a
// ledger; a re-published ledger yields the same ids (duplicate detection).
func MessageID(ledgerID string, index int) string {
	return ledgerID + ":" + strconv.Itoa(index)
}

// IntProperty reads an integer application property (seq) whatever a
// transport made of it: int64 from azservicebus, float64 or json.Number after
// a JSON round trip, a string from a lenient sender.
func IntProperty(v any) (int64, bool) {
	switch n := v.(type) {
	case int64:
		return n, true
	case int32:
		return int64(n), true
	case int:
		return int64(n), true
	case float64:
		return int64(n), n == float64(int64(n))
	case json.Number:
		i, err := n.Int64()
		return i, err == nil
	case string:
		i, err := strconv.ParseInt(n, 10, 64)
		return i, err == nil
	}
	return 0, false
}

// Message is one message of a key as the processor sees it.
type Message struct {
	Seq       int64
	Last      bool
	MessageID string
	// Command is the domain's command (keyed.Rules' C) as read from the
	// message's body; nil for a parked message read back from the store,
	// whose command is Stored until decoded.
	Command any
	// Stored is the command as its parked row keeps it
	// (keyed.Rules.EncodeCommand), once parked.
	Stored keyed.Props
	// Oversize says why the command was parked without its properties:
	// they took more than its domain's ParkedBytes. Its turn rejects it
	// with that reason. "" for every other message.
	Oversize string
	// EnqueuedAt is when Service Bus enqueued it (its critical time starts
	// there); TraceParent the trace context it carried (W3C traceparent,
	// handler/tracing). Kept with a parked message, so that it is applied
	// later in its own trace, with its own critical time. Zero or "" when
	// unknown.
	EnqueuedAt  time.Time
	TraceParent string
}

// Envelope is one order message as it is sent to the orders queue
// (docs/contract.md, "Order message"): the one type the publisher, replay and the
// transports share.
type Envelope struct {
	SessionID string // the order id
	MessageID string // <ledgerId>:<index>, or a replay id
	LedgerID  string // application property ledgerId
	Seq       int64  // application property seq
	Last      bool   // application property last (omitted when false)
	Body      []byte // EncodeBody of the transaction
	// Trace context (W3C traceparent, handler/tracing), sent as the
	// application properties traceparent and Diagnostic-Id, each when set.
	TraceParent, DiagnosticID string
}

// Application properties of the trace context (handler/tracing).
const (
	PropTraceParent  = "traceparent"
	PropDiagnosticID = "Diagnostic-Id"
)

// NewMessage returns the message of the index-th entry of a ledger, for
// key (its SessionId), given its seq and its body.
func NewMessage(ledgerID string, index int, seq int64, last bool, key string, body []byte) Envelope {
	return Envelope{SessionID: key, MessageID: MessageID(ledgerID, index), LedgerID: ledgerID, Seq: seq, Last: last, Body: body}
}

// maxSizeSeq is the seq that gives a message its largest size, to measure a
// message before its seq is known (exact for any seq ≥ 128).
const maxSizeSeq = int64(1) << 62

// measureTraceParent stands for the trace context the sender stamps on a
// message (a version 00 traceparent is always 55 characters).
const measureTraceParent = "00-00000000000000000000000000000000-0000000000000000-00"

// MeasureMessage returns the size on the queue of the message that will
// carry the index-th entry of ledger ledgerID for key, whatever its seq,
// with the trace context the sender stamps on it.
func MeasureMessage(ledgerID string, index int, last bool, key string, body []byte) int {
	m := NewMessage(ledgerID, index, maxSizeSeq, last, key, body)
	m.TraceParent, m.DiagnosticID = measureTraceParent, measureTraceParent
	return m.Size()
}

// Properties returns the message's application properties.
func (m Envelope) Properties() map[string]any {
	p := map[string]any{PropLedgerID: m.LedgerID, PropSeq: m.Seq}
	if m.Last {
		p[PropLast] = true
	}
	if m.TraceParent != "" {
		p[PropTraceParent] = m.TraceParent
	}
	if m.DiagnosticID != "" {
		p[PropDiagnosticID] = m.DiagnosticID
	}
	return p
}

// Sizes as azservicebus counts them (MessageBatch.AddMessage, v1.x): a batch
// is the AMQP encoding of its first message without the body (the
// "envelope": message annotations, properties, application properties), plus
// for each message its full AMQP encoding wrapped as a binary value. A
// message fits the queue when a batch holding only it fits: Size() must not
// exceed the entity's maximum message size. The servicebus adapter's tests
// check these figures against the SDK's own MessageBatch.
//
// The SDK sets, per message: message-id (string), content-type (symbol),
// group-id = SessionId (string), an empty message-annotations map, the
// application properties, and one data section holding the body.

// EnvelopeBytes is what the first message of a batch adds besides its payload.
func (m Envelope) EnvelopeBytes() int {
	const (
		section    = 3 // descriptor: 0x00, smallulong, code
		map32      = 9 // map32 constructor, size, count
		list32     = 9 // list32 constructor, size, count
		null       = 1
		annotation = section + map32 // the empty message-annotations map
	)
	props := section + list32 + amqpString(len(m.MessageID)) +
		5*null + // user-id, to, subject, reply-to, correlation-id
		amqpString(len(ContentType)) + // content-type, a symbol: same sizes as a string
		3*null + // content-encoding, absolute-expiry-time, creation-time
		amqpString(len(m.SessionID)) // group-id
	app := section + map32 + amqpString(len(PropLedgerID)) + amqpString(len(m.LedgerID)) +
		amqpString(len(PropSeq)) + amqpLong(m.Seq)
	if m.Last {
		app += amqpString(len(PropLast)) + 1 // true
	}
	if m.TraceParent != "" {
		app += amqpString(len(PropTraceParent)) + amqpString(len(m.TraceParent))
	}
	if m.DiagnosticID != "" {
		app += amqpString(len(PropDiagnosticID)) + amqpString(len(m.DiagnosticID))
	}
	return annotation + props + app
}

// PayloadBytes is what the message adds to a batch: its whole encoding
// (envelope and data section) as a binary value.
func (m Envelope) PayloadBytes() int {
	encoded := m.EnvelopeBytes() + 3 + amqpString(len(m.Body)) // data section: descriptor, vbin
	if encoded < 256 {
		return 5 + encoded
	}
	return 8 + encoded
}

// Size is the message's size on the queue: a batch holding only it.
func (m Envelope) Size() int { return m.EnvelopeBytes() + m.PayloadBytes() }

// amqpString is the encoded size of a string, symbol or binary of n bytes
// (str8/sym8/vbin8 below 256 bytes, else the 32-bit forms).
func amqpString(n int) int {
	if n < 256 {
		return 2 + n
	}
	return 5 + n
}

// amqpLong is the encoded size of an int64 (smalllong or long).
func amqpLong(n int64) int {
	if n >= -128 && n < 128 {
		return 2
	}
	return 9
}

// Sender sends order messages in batches sized to the entity's limit.
// Implementation: servicebus (azservicebus), in Azure and against the local emulation alike.
type Sender interface {
	NewBatch(ctx context.Context) (Batch, error)
	SendBatch(ctx context.Context, b Batch) error
}

// Batch collects messages up to a size limit.
type Batch interface {
	// Add appends m, or returns ErrBatchFull if it does not fit.
	Add(m Envelope) error
	Len() int
}

// ErrBatchFull: the message does not fit in the batch.
var ErrBatchFull = errors.New("batch full")
