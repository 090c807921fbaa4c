package amqp

import (
	"encoding/binary"
	"fmt"
	"io"
	"time"
)

// Descriptor codes of the performatives and the types they carry (part 2,
// sections 2.7, 2.8, 5.3; part 3, sections 3.4, 3.5).
const (
	CodeOpen        uint64 = 0x10
	CodeBegin       uint64 = 0x11
	CodeAttach      uint64 = 0x12
	CodeFlow        uint64 = 0x13
	CodeTransfer    uint64 = 0x14
	CodeDisposition uint64 = 0x15
	CodeDetach      uint64 = 0x16
	CodeEnd         uint64 = 0x17
	CodeClose       uint64 = 0x18
	CodeError       uint64 = 0x1d

	CodeReceived uint64 = 0x23
	CodeAccepted uint64 = 0x24
	CodeRejected uint64 = 0x25
	CodeReleased uint64 = 0x26
	CodeModified uint64 = 0x27
	CodeSource   uint64 = 0x28
	CodeTarget   uint64 = 0x29

	CodeSASLMechanisms uint64 = 0x40
	CodeSASLInit       uint64 = 0x41
	CodeSASLChallenge  uint64 = 0x42
	CodeSASLResponse   uint64 = 0x43
	CodeSASLOutcome    uint64 = 0x44
)

// Frame types.
const (
	FrameAMQP byte = 0
	FrameSASL byte = 1
)

// Protocol headers (part 2, section 2.2; part 5, section 5.3.1).
var (
	HeaderAMQP = []byte{'A', 'M', 'Q', 'P', 0, 1, 0, 0}
	HeaderSASL = []byte{'A', 'M', 'Q', 'P', 3, 1, 0, 0}
)

// MinMaxFrameSize is the largest frame every peer must accept (512 bytes).
const MinMaxFrameSize = 512

// Performative is a performative or any other described list: its
// descriptor code and its fields, in the order the specification lists them.
type Performative struct {
	Code   uint64
	Fields []any
}

// Field returns field i, nil when absent.
func (p *Performative) Field(i int) any {
	if p == nil || i >= len(p.Fields) {
		return nil
	}
	return p.Fields[i]
}

// Described returns p as a described list, trailing null fields left out.
func (p *Performative) Described() *Described {
	f := p.Fields
	for len(f) > 0 && f[len(f)-1] == nil {
		f = f[:len(f)-1]
	}
	return &Described{Descriptor: p.Code, Value: f}
}

// New returns a performative of code with fields.
func New(code uint64, fields ...any) *Performative { return &Performative{Code: code, Fields: fields} }

// AsPerformative reads v as a described list; nil when it is not one.
func AsPerformative(v any) *Performative {
	d, ok := v.(*Described)
	if !ok {
		return nil
	}
	code, ok := d.Descriptor.(uint64)
	if !ok {
		return nil
	}
	switch l := d.Value.(type) {
	case []any:
		return &Performative{Code: code, Fields: l}
	case nil:
		return &Performative{Code: code}
	}
	return nil
}

// Frame is one frame: an empty Body is a heartbeat.
type Frame struct {
	Type    byte
	Channel uint16
	Body    *Performative
	Payload []byte // a transfer's message bytes
}

// ReadFrame reads one frame of at most max bytes.
func ReadFrame(r io.Reader, max uint32) (Frame, error) {
	var head [8]byte
	if _, err := io.ReadFull(r, head[:]); err != nil {
		return Frame{}, err
	}
	size := binary.BigEndian.Uint32(head[:4])
	doff := uint32(head[4]) * 4
	if size < 8 || doff < 8 || doff > size {
		return Frame{}, fmt.Errorf("amqp: frame of size %d with data offset %d", size, doff)
	}
	if size > max {
		return Frame{}, fmt.Errorf("amqp: frame of %d bytes exceeds the maximum of %d", size, max)
	}
	rest := make([]byte, size-8)
	if _, err := io.ReadFull(r, rest); err != nil {
		return Frame{}, err
	}
	f := Frame{Type: head[5], Channel: binary.BigEndian.Uint16(head[6:8])}
	body := rest[doff-8:]
	if len(body) == 0 {
		return f, nil
	}
	v, n, err := Decode(body)
	if err != nil {
		return Frame{}, fmt.Errorf("amqp: frame body: %w", err)
	}
	if f.Body = AsPerformative(v); f.Body == nil {
		return Frame{}, fmt.Errorf("amqp: frame body is not a performative: %T", v)
	}
	f.Payload = body[n:]
	return f, nil
}

// AppendFrame appends the encoding of f.
func AppendFrame(b []byte, f Frame) ([]byte, error) {
	start := len(b)
	b = append(b, 0, 0, 0, 0, 2, f.Type, byte(f.Channel>>8), byte(f.Channel))
	if f.Body != nil {
		var err error
		if b, err = Append(b, f.Body.Described()); err != nil {
			return b, err
		}
		b = append(b, f.Payload...)
	}
	binary.BigEndian.PutUint32(b[start:], uint32(len(b)-start))
	return b, nil
}

// Error conditions of the specification (part 2, section 2.8.15 and after).
const (
	ErrInternal              Symbol = "amqp:internal-error"
	ErrNotFound              Symbol = "amqp:not-found"
	ErrUnauthorized          Symbol = "amqp:unauthorized-access"
	ErrDecode                Symbol = "amqp:decode-error"
	ErrNotImplemented        Symbol = "amqp:not-implemented"
	ErrNotAllowed            Symbol = "amqp:not-allowed"
	ErrInvalidField          Symbol = "amqp:invalid-field"
	ErrResourceLimit         Symbol = "amqp:resource-limit-exceeded"
	ErrFramingError          Symbol = "amqp:connection:framing-error"
	ErrMessageSizeExceed     Symbol = "amqp:link:message-size-exceeded"
	ErrTransferLimitExceeded Symbol = "amqp:link:transfer-limit-exceeded"
	ErrDetachForced          Symbol = "amqp:link:detach-forced"
	ErrConnectionForced      Symbol = "amqp:connection:forced"
)

// Error is an AMQP error (part 2, section 2.8.14).
type Error struct {
	Condition   Symbol
	Description string
	Info        Map
}

func (e *Error) Error() string { return string(e.Condition) + ": " + e.Description }

// Performative returns e as the described error list.
func (e *Error) Performative() *Performative {
	var info any
	if e.Info != nil {
		info = e.Info
	}
	return New(CodeError, e.Condition, e.Description, info)
}

// AsError reads an error from a field (nil when absent or not an error).
func AsError(v any) *Error {
	p := AsPerformative(v)
	if p == nil || p.Code != CodeError {
		return nil
	}
	e := &Error{}
	e.Condition, _ = p.Field(errorCondition).(Symbol)
	e.Description, _ = p.Field(errorDescription).(string)
	e.Info, _ = p.Field(errorInfo).(Map)
	return e
}

// Uint reads an unsigned integer field of any width.
func Uint(v any) (uint64, bool) {
	switch v := v.(type) {
	case uint8:
		return uint64(v), true
	case uint16:
		return uint64(v), true
	case uint32:
		return uint64(v), true
	case uint64:
		return v, true
	}
	return 0, false
}

// uint64Of reads an unsigned integer field, 0 when absent.
func uint64Of(v any) uint64 { u, _ := Uint(v); return u }

// Int reads a signed or unsigned integer of any width.
func Int(v any) (int64, bool) {
	switch v := v.(type) {
	case int8:
		return int64(v), true
	case int16:
		return int64(v), true
	case int32:
		return int64(v), true
	case int64:
		return v, true
	}
	if u, ok := Uint(v); ok && u <= 1<<63-1 {
		return int64(u), true
	}
	return 0, false
}

// Millis is a duration as AMQP milliseconds (a uint, as idle-time-out is).
func Millis(d time.Duration) uint32 { return uint32(d / time.Millisecond) }
