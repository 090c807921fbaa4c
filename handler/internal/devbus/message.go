package devbus

import (
	"encoding/json"
	"errors"
	"time"

	"github.com/convoy-dev/convoy/handler/internal/amqp"
)

// Message is a message in an emulated queue.
type Message struct {
	SequenceNumber int64 // queue-wide, from 1
	MessageID      string
	// SessionID is the message's SessionId; "" is a SessionId of its own
	// when EmptySessionID is set (Service Bus accepts an empty SessionId:
	// azservicebus's live test TestSessionReceiver_blankSessionIDs), and no
	// SessionId at all without it (refused on a session queue).
	SessionID        string
	EmptySessionID   bool
	ContentType      string
	Properties       map[string]any
	Body             []byte
	TimeToLive       time.Duration // 0: the queue's default
	EnqueuedTime     time.Time
	ExpiresAt        time.Time // zero: never
	DeliveryCount    int       // deliveries so far; 1 during the first
	DeadLetterReason string
	// DeadLetterDescription is the receiver's description of why it
	// dead-lettered the message (empty for the broker's own reasons).
	DeadLetterDescription string
	// State is the message's state as a peek (and a receive by sequence
	// number) reports it in x-opt-message-state: active, deferred or
	// scheduled.
	State MessageState
	// ScheduledEnqueueTime is when a scheduled message becomes active
	// (zero: sent to be active at once).
	ScheduledEnqueueTime time.Time
	// AMQP is the message as an AMQP client sent it (nil when it came from
	// the emulation itself): the AMQP face delivers it with the broker's
	// annotations added, every other section as sent.
	AMQP *amqp.Message

	properties json.RawMessage // Properties as JSON, written when the queue accepts the message (and when a settlement modifies them)
}

// hasSessionID reports whether the message carries a SessionId ("" included
// when EmptySessionID is set).
func (m *Message) hasSessionID() bool { return m.SessionID != "" || m.EmptySessionID }

// MessageState is a message's state as Service Bus reports it in the
// x-opt-message-state annotation (azservicebus message.go: MessageState).
type MessageState int32

// Message states (azservicebus MessageStateActive, …Deferred, …Scheduled).
const (
	StateActive    MessageState = 0
	StateDeferred  MessageState = 1
	StateScheduled MessageState = 2
)

// Dead-letter reasons, as Service Bus writes them.
const (
	ReasonMaxDelivery = "MaxDeliveryCountExceeded"
	ReasonExpired     = "TTLExpiredException"
)

// errLockLost: the session or message lock expired (or was taken by another
// receiver after it expired); completing fails and the messages come back.
var errLockLost = errors.New("lock lost: the lock expired before the messages were settled")

// errMessageNotFound: no deferred message has the sequence number asked for
// (.NET's ReceiveDeferredMessageAsync: "The specified sequence number does not
// correspond to a message that has been deferred", reason MessageNotFound).
var errMessageNotFound = errors.New("message not found: no deferred message has that sequence number")

// maxMessageIDLength is Service Bus's limit on a MessageId.
const maxMessageIDLength = 128

// PropertiesJSON is the message's application properties as JSON (an
// object, empty if it has none): written once when the queue accepts the
// message, so that each delivery to the host does not encode them again.
func (m *Message) PropertiesJSON() json.RawMessage {
	if m.properties == nil { // a Message the queue did not accept (tests)
		return propertiesJSON(m.Properties)
	}
	return m.properties
}

func propertiesJSON(props map[string]any) json.RawMessage {
	if props == nil {
		props = map[string]any{}
	}
	data, _ := json.Marshal(props)
	return data
}
