package devbus

import (
	"fmt"
	"time"

	"github.com/convoy-dev/convoy/handler/internal/amqp"
)

// A message between its AMQP form (what clients send and receive) and the
// queue's Message.

// Broker-written descriptions of its own dead-letter reasons, as the table
// in service-bus-dead-letter-queues.md ("Moving messages to the DLQ") gives them.
var brokerDescriptions = map[string]string{
	ReasonMaxDelivery: "Message couldn't be consumed after maximum delivery attempts.",
	ReasonExpired:     "The message expired and was dead lettered.",
}

// fromAMQP is a received message as the queue keeps it.
func fromAMQP(m *amqp.Message) Message {
	out := Message{AMQP: m, Body: m.Body(), Properties: map[string]any{}}
	switch id := m.Prop(amqp.PropMessageID).(type) {
	case string:
		out.MessageID = id
	case amqp.UUID:
		out.MessageID = id.String()
	case uint64:
		out.MessageID = fmt.Sprint(id)
	case []byte:
		out.MessageID = fmt.Sprintf("%x", id)
	}
	// A group-id present and empty is the empty SessionId (accepted by
	// Service Bus: TestSessionReceiver_blankSessionIDs); absent (null) is none.
	if gid, ok := m.Prop(amqp.PropGroupID).(string); ok {
		out.SessionID, out.EmptySessionID = gid, gid == ""
	}
	// A send that carries x-opt-scheduled-enqueue-time schedules the message
	// (message-sequencing.md: "set the ScheduledEnqueueTimeUtc property on
	// the message before sending"; azservicebus's testScheduleMessages).
	if at, ok := m.MessageAnnotations[scheduledEnqueueTime].(time.Time); ok {
		out.ScheduledEnqueueTime = at
	}
	if ct, ok := m.Prop(amqp.PropContentType).(amqp.Symbol); ok {
		out.ContentType = string(ct)
	}
	for k, v := range m.ApplicationProperties {
		out.Properties[k.(string)] = v
	}
	if ttl, ok := amqp.Uint(m.HeaderField(amqp.HeaderTTL)); ok && ttl > 0 {
		out.TimeToLive = time.Duration(ttl) * time.Millisecond
	}
	return out
}

// toAMQP is a queued message as a receiver gets it: as sent, with the
// broker's header delivery count (previous deliveries), annotations and,
// for a dead letter, its reason and description as application properties.
func toAMQP(m *Message, lockedUntil time.Time, token *amqp.UUID) ([]byte, error) {
	var out amqp.Message
	if m.AMQP != nil {
		out = *m.AMQP
		out.Header = append([]any(nil), m.AMQP.Header...)
		out.Properties = append([]any(nil), m.AMQP.Properties...)
	} else {
		out.Data = [][]byte{m.Body}
		out.SetProp(amqp.PropMessageID, m.MessageID)
		if m.hasSessionID() {
			out.SetProp(amqp.PropGroupID, m.SessionID)
		}
		if m.ContentType != "" {
			out.SetProp(amqp.PropContentType, amqp.Symbol(m.ContentType))
		}
	}
	if out.Properties == nil { // azservicebus reads the header only when properties are present
		out.Properties = []any{}
	}
	out.SetHeader(amqp.HeaderDeliveryCount, uint32(max(m.DeliveryCount-1, 0)))
	props := amqp.Map{}
	for k, v := range m.Properties {
		props[k] = v
	}
	if m.DeadLetterReason != "" {
		desc := m.DeadLetterDescription
		if desc == "" {
			desc = brokerDescriptions[m.DeadLetterReason]
		}
		props["DeadLetterReason"], props["DeadLetterErrorDescription"] = m.DeadLetterReason, desc
	}
	if len(props) > 0 {
		out.ApplicationProperties = props
	}
	ann := amqp.Map{}
	for k, v := range out.MessageAnnotations {
		if v != nil { // a sender's null broker annotations are replaced, not passed on
			ann[k] = v
		}
	}
	ann[amqp.Symbol("x-opt-sequence-number")] = m.SequenceNumber
	ann[amqp.Symbol("x-opt-enqueued-time")] = m.EnqueuedTime
	if !lockedUntil.IsZero() {
		ann[amqp.Symbol("x-opt-locked-until")] = lockedUntil
	}
	if m.State != StateActive {
		// x-opt-message-state: 1 deferred, 2 scheduled (azservicebus
		// message.go, newReceivedMessage; @azure/service-bus likewise).
		ann[amqp.Symbol("x-opt-message-state")] = int32(m.State)
	}
	if !m.ScheduledEnqueueTime.IsZero() {
		ann[scheduledEnqueueTime] = m.ScheduledEnqueueTime
	}
	out.MessageAnnotations = ann
	if token != nil {
		out.DeliveryAnnotations = amqp.Map{amqp.Symbol("x-opt-lock-token"): *token}
	}
	return out.Marshal()
}

// netGUID is a lock token in .NET's Guid.ToByteArray order, as Service Bus
// writes it in a delivery tag (the SDKs swap it back).
func netGUID(u [16]byte) []byte {
	b := u
	b[0], b[1], b[2], b[3] = u[3], u[2], u[1], u[0]
	b[4], b[5] = u[5], u[4]
	b[6], b[7] = u[7], u[6]
	return b[:]
}

// ticks is t as .NET ticks (100 ns since 0001-01-01), as Service Bus
// writes com.microsoft:locked-until-utc.
func ticks(t time.Time) int64 { return t.UnixMilli()*10_000 + 621_355_968_000_000_000 }
