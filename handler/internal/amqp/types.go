// Package amqp is a small AMQP 1.0 codec and server-side connection engine,
// written from the OASIS AMQP 1.0 specification (parts 1, 2, 3 and 5: types,
// transport, messaging, SASL). It knows nothing of Service Bus: the local
// emulation (handler/internal/devbus) gives the links their meaning.
//
// Values decode to Go types: null → nil, boolean → bool, ubyte/ushort/uint/
// ulong → uint8/uint16/uint32/uint64, byte/short/int/long → int8/int16/int32/
// int64, float/double → float32/float64, char → Char, timestamp → time.Time
// (UTC, milliseconds), uuid → UUID, binary → []byte, string → string, symbol
// → Symbol, list → []any, map → Map, array → Array, a described value →
// *Described. Encoding takes the same types (and int as long).
package amqp

import (
	"fmt"
	"time"
)

// Symbol is an AMQP symbol (ASCII).
type Symbol string

// Char is an AMQP char (a UTF-32 code point).
type Char rune

// UUID is an AMQP uuid, in RFC 4122 byte order.
type UUID [16]byte

func (u UUID) String() string {
	return fmt.Sprintf("%x-%x-%x-%x-%x", u[0:4], u[4:6], u[6:8], u[8:10], u[10:16])
}

// Map is an AMQP map. Keys are comparable decoded values (string, Symbol,
// integers …); encoding writes the entries in no particular order.
type Map map[any]any

// Array is an AMQP array: every element has the same type.
type Array []any

// Described is a described value: a descriptor (a Symbol or uint64 code)
// and the value it describes.
type Described struct {
	Descriptor any
	Value      any
}

// Code returns the descriptor as a numeric code, or 0 for a symbolic one.
func (d *Described) Code() uint64 {
	c, _ := d.Descriptor.(uint64)
	return c
}

// Type codes (part 1, section 1.6).
const (
	tDescribed = 0x00
	tNull      = 0x40
	tTrue      = 0x41
	tFalse     = 0x42
	tBool      = 0x56
	tUbyte     = 0x50
	tUshort    = 0x60
	tUint      = 0x70
	tSmallUint = 0x52
	tUint0     = 0x43
	tUlong     = 0x80
	tSmallUlng = 0x53
	tUlong0    = 0x44
	tByte      = 0x51
	tShort     = 0x61
	tInt       = 0x71
	tSmallInt  = 0x54
	tLong      = 0x81
	tSmallLong = 0x55
	tFloat     = 0x72
	tDouble    = 0x82
	tChar      = 0x73
	tTimestamp = 0x83
	tUUID      = 0x98
	tVbin8     = 0xa0
	tVbin32    = 0xb0
	tStr8      = 0xa1
	tStr32     = 0xb1
	tSym8      = 0xa3
	tSym32     = 0xb3
	tList0     = 0x45
	tList8     = 0xc0
	tList32    = 0xd0
	tMap8      = 0xc1
	tMap32     = 0xd1
	tArray8    = 0xe0
	tArray32   = 0xf0
)

// Timestamp converts an AMQP timestamp (ms since the Unix epoch) to time.
func Timestamp(ms int64) time.Time { return time.UnixMilli(ms).UTC() }
