package invocation

import (
	"encoding/json"
	"fmt"
	"time"
)

// Message is one Service Bus message as the trigger delivers it: only what
// the handler uses is decoded, so that metadata it does not need
// (EnqueuedTime*, ContentType, SequenceNumber, ExpiresAt*, …) can never fail
// an invocation, whatever form the host gives it.
type Message struct {
	Body          []byte
	SessionID     string
	MessageID     string
	DeliveryCount int64 // 1 on first delivery
	// EnqueuedTimeUtc is when Service Bus accepted the message; zero when
	// the host did not send it or sent it in a form not understood (it never
	// fails an invocation). One message's is to the second (the host's
	// DateTime form); a batch's carry fractions (docs/host-contract.md).
	EnqueuedTimeUtc       time.Time
	ApplicationProperties map[string]json.RawMessage // values keep their JSON types
}

// ServiceBusMessages returns the messages of a Service Bus trigger whose
// binding is named binding, for both cardinalities: one message (the default)
// or a batch ("cardinality": "many", recognised by the …Array metadata keys).
//
// The messages are decoded once per request: a second call (the trace
// context is read before the function runs) returns the same slice, which
// callers must not modify.
func (r *Request) ServiceBusMessages(binding string) ([]Message, error) {
	if msgs, ok := r.messages[binding]; ok {
		return msgs, nil
	}
	msgs, err := r.serviceBusMessages(binding)
	if err == nil {
		if r.messages == nil {
			r.messages = map[string][]Message{}
		}
		r.messages[binding] = msgs
	}
	return msgs, err
}

func (r *Request) serviceBusMessages(binding string) ([]Message, error) {
	raw, ok := lookup(r.Data, binding)
	if !ok {
		return nil, fmt.Errorf("no %q binding in Data", binding)
	}
	if _, batch := lookup(r.Metadata, "MessageIdArray"); batch {
		return r.batch(raw)
	}
	body, err := DecodeString(raw)
	if err != nil {
		return nil, fmt.Errorf("binding %s: %w", binding, err)
	}
	m := Message{Body: []byte(body)}
	if err := r.fillSingle(&m); err != nil {
		return nil, err
	}
	return []Message{m}, nil
}

func (r *Request) fillSingle(m *Message) error {
	var err error
	str := func(key string, dst *string) {
		if err == nil {
			*dst, _, err = r.MetadataString(key)
		}
	}
	str("SessionId", &m.SessionID)
	str("MessageId", &m.MessageID)
	if err != nil {
		return err
	}
	if raw, ok := lookup(r.Metadata, "DeliveryCount"); ok {
		if m.DeliveryCount, err = DecodeInt(raw); err != nil {
			return fmt.Errorf("metadata DeliveryCount: %w", err)
		}
	}
	if raw, ok := lookup(r.Metadata, "EnqueuedTimeUtc"); ok {
		m.EnqueuedTimeUtc = decodeTime(raw)
	}
	m.ApplicationProperties, err = r.applicationProperties()
	return err
}

// decodeTime is DecodeTime for metadata the sequence rules do not need: a
// value not understood is the zero time, never an error.
func decodeTime(raw json.RawMessage) time.Time {
	t, _ := DecodeTime(raw)
	return t
}

// applicationProperties prefers ApplicationProperties and falls back to its
// older copy UserProperties.
func (r *Request) applicationProperties() (map[string]json.RawMessage, error) {
	for _, key := range []string{"ApplicationProperties", "UserProperties"} {
		if raw, ok := lookup(r.Metadata, key); ok {
			m, err := DecodeObject(raw)
			if err != nil {
				return nil, fmt.Errorf("metadata %s: %w", key, err)
			}
			return m, nil
		}
	}
	return map[string]json.RawMessage{}, nil
}

// batch decodes "cardinality": "many": Data holds an array of bodies and each
// per-message key K arrives as KArray.
func (r *Request) batch(raw json.RawMessage) ([]Message, error) {
	bodies, err := DecodeArray(raw)
	if err != nil {
		return nil, fmt.Errorf("batch body: %w", err)
	}
	msgs := make([]Message, len(bodies))
	for i, b := range bodies {
		s, err := DecodeString(b)
		if err != nil {
			return nil, fmt.Errorf("batch body %d: %w", i, err)
		}
		msgs[i].Body = []byte(s)
	}
	column := func(key string, set func(m *Message, v json.RawMessage) error) error {
		raw, ok := lookup(r.Metadata, key+"Array")
		if !ok {
			return nil
		}
		vals, err := DecodeArray(raw)
		if err != nil {
			return fmt.Errorf("metadata %sArray: %w", key, err)
		}
		if len(vals) != len(msgs) {
			return fmt.Errorf("metadata %sArray has %d values for %d messages", key, len(vals), len(msgs))
		}
		for i, v := range vals {
			if isNull(v) {
				continue
			}
			if err := set(&msgs[i], v); err != nil {
				return fmt.Errorf("metadata %sArray[%d]: %w", key, i, err)
			}
		}
		return nil
	}
	setString := func(field func(*Message) *string) func(*Message, json.RawMessage) error {
		return func(m *Message, v json.RawMessage) (err error) {
			*field(m), err = DecodeString(v)
			return err
		}
	}
	setInt := func(field func(*Message) *int64) func(*Message, json.RawMessage) error {
		return func(m *Message, v json.RawMessage) (err error) {
			*field(m), err = DecodeInt(v)
			return err
		}
	}
	for _, c := range []struct {
		key string
		set func(*Message, json.RawMessage) error
	}{
		{"SessionId", setString(func(m *Message) *string { return &m.SessionID })},
		{"MessageId", setString(func(m *Message) *string { return &m.MessageID })},
		{"DeliveryCount", setInt(func(m *Message) *int64 { return &m.DeliveryCount })},
		{"ApplicationProperties", func(m *Message, v json.RawMessage) (err error) {
			m.ApplicationProperties, err = DecodeObject(v)
			return err
		}},
	} {
		if err := column(c.key, c.set); err != nil {
			return nil, err
		}
	}
	// Unused by the sequence rules: an array not understood is ignored.
	if raw, ok := lookup(r.Metadata, "EnqueuedTimeUtcArray"); ok {
		if vals, err := DecodeArray(raw); err == nil && len(vals) == len(msgs) {
			for i, v := range vals {
				msgs[i].EnqueuedTimeUtc = decodeTime(v)
			}
		}
	}
	for i := range msgs {
		if msgs[i].ApplicationProperties == nil {
			msgs[i].ApplicationProperties = map[string]json.RawMessage{}
		}
	}
	return msgs, nil
}
