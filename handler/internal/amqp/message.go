package amqp

import (
	"fmt"
)

// Section descriptor codes of a message (part 3, section 3.2).
const (
	CodeHeader                uint64 = 0x70
	CodeDeliveryAnnotations   uint64 = 0x71
	CodeMessageAnnotations    uint64 = 0x72
	CodeProperties            uint64 = 0x73
	CodeApplicationProperties uint64 = 0x74
	CodeData                  uint64 = 0x75
	CodeAMQPSequence          uint64 = 0x76
	CodeAMQPValue             uint64 = 0x77
	CodeFooter                uint64 = 0x78
)

// Fields of the header and properties sections, by position.
const (
	HeaderDurable       = 0
	HeaderPriority      = 1
	HeaderTTL           = 2
	HeaderFirstAcquirer = 3
	HeaderDeliveryCount = 4

	PropMessageID          = 0
	PropUserID             = 1
	PropTo                 = 2
	PropSubject            = 3
	PropReplyTo            = 4
	PropCorrelationID      = 5
	PropContentType        = 6
	PropContentEncoding    = 7
	PropAbsoluteExpiryTime = 8
	PropCreationTime       = 9
	PropGroupID            = 10
	PropGroupSequence      = 11
	PropReplyToGroupID     = 12
)

// Message is an annotated message. Header and Properties keep every field
// as sent, so that a message passes through unchanged but for what the
// receiving side annotates.
type Message struct {
	Header                []any // nil: no header section
	DeliveryAnnotations   Map
	MessageAnnotations    Map
	Properties            []any // nil: no properties section
	ApplicationProperties Map
	Data                  [][]byte // data sections
	Value                 any      // an amqp-value body (HasValue)
	HasValue              bool
	Sequence              [][]any // amqp-sequence sections
	Footer                Map
}

// Prop returns properties field i (nil when absent).
func (m *Message) Prop(i int) any {
	if i >= len(m.Properties) {
		return nil
	}
	return m.Properties[i]
}

// SetProp sets properties field i.
func (m *Message) SetProp(i int, v any) {
	for len(m.Properties) <= i {
		m.Properties = append(m.Properties, nil)
	}
	m.Properties[i] = v
}

// HeaderField returns header field i (nil when absent).
func (m *Message) HeaderField(i int) any {
	if i >= len(m.Header) {
		return nil
	}
	return m.Header[i]
}

// SetHeader sets header field i.
func (m *Message) SetHeader(i int, v any) {
	for len(m.Header) <= i {
		m.Header = append(m.Header, nil)
	}
	m.Header[i] = v
}

// Annotate sets a message annotation.
func (m *Message) Annotate(key Symbol, v any) {
	if m.MessageAnnotations == nil {
		m.MessageAnnotations = Map{}
	}
	m.MessageAnnotations[key] = v
}

// Body returns the body's bytes: the data sections joined, or a binary or
// string amqp-value.
func (m *Message) Body() []byte {
	if m.HasValue {
		switch v := m.Value.(type) {
		case []byte:
			return v
		case string:
			return []byte(v)
		}
		return nil
	}
	var out []byte
	for _, d := range m.Data {
		out = append(out, d...)
	}
	return out
}

// Marshal encodes the message's sections in the specification's order.
func (m *Message) Marshal() ([]byte, error) {
	var b []byte
	var err error
	section := func(code uint64, v any) {
		if err == nil {
			b, err = Append(b, &Described{Descriptor: code, Value: v})
		}
	}
	if m.Header != nil {
		section(CodeHeader, trim(m.Header))
	}
	if m.DeliveryAnnotations != nil {
		section(CodeDeliveryAnnotations, m.DeliveryAnnotations)
	}
	if m.MessageAnnotations != nil {
		section(CodeMessageAnnotations, m.MessageAnnotations)
	}
	if m.Properties != nil {
		section(CodeProperties, trim(m.Properties))
	}
	if m.ApplicationProperties != nil {
		section(CodeApplicationProperties, m.ApplicationProperties)
	}
	for _, d := range m.Data {
		section(CodeData, d)
	}
	for _, s := range m.Sequence {
		section(CodeAMQPSequence, s)
	}
	if m.HasValue {
		section(CodeAMQPValue, m.Value)
	}
	if m.Footer != nil {
		section(CodeFooter, m.Footer)
	}
	return b, err
}

func trim(f []any) []any {
	for len(f) > 0 && f[len(f)-1] == nil {
		f = f[:len(f)-1]
	}
	return f
}

// UnmarshalMessage decodes a message from its sections.
func UnmarshalMessage(b []byte) (*Message, error) {
	m := &Message{}
	for len(b) > 0 {
		v, n, err := Decode(b)
		if err != nil {
			return nil, fmt.Errorf("amqp: message section: %w", err)
		}
		b = b[n:]
		d, ok := v.(*Described)
		var code uint64
		if ok {
			code, _ = d.Descriptor.(uint64)
		}
		if code < CodeHeader || code > CodeFooter {
			return nil, fmt.Errorf("amqp: message section %v is not a section", v)
		}
		bad := func() error { return fmt.Errorf("amqp: message section %#x holds %T", code, d.Value) }
		switch code {
		case CodeHeader, CodeProperties:
			l, ok := d.Value.([]any)
			if !ok {
				return nil, bad()
			}
			if code == CodeHeader {
				m.Header = l
			} else {
				m.Properties = l
			}
		case CodeDeliveryAnnotations, CodeMessageAnnotations, CodeApplicationProperties, CodeFooter:
			mp, ok := d.Value.(Map)
			if !ok && d.Value != nil {
				return nil, bad()
			}
			if mp == nil {
				mp = Map{}
			}
			switch code {
			case CodeDeliveryAnnotations:
				m.DeliveryAnnotations = mp
			case CodeMessageAnnotations:
				m.MessageAnnotations = mp
			case CodeApplicationProperties:
				for k := range mp {
					if _, ok := k.(string); !ok {
						return nil, fmt.Errorf("amqp: application property key of type %T", k)
					}
				}
				m.ApplicationProperties = mp
			default:
				m.Footer = mp
			}
		case CodeData:
			p, ok := d.Value.([]byte)
			if !ok {
				return nil, bad()
			}
			m.Data = append(m.Data, p)
		case CodeAMQPSequence:
			l, ok := d.Value.([]any)
			if !ok {
				return nil, bad()
			}
			m.Sequence = append(m.Sequence, l)
		case CodeAMQPValue:
			m.Value, m.HasValue = d.Value, true
		}
	}
	return m, nil
}
