package amqp

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
)

// ErrTruncated: the input ends inside a value.
var ErrTruncated = errors.New("amqp: truncated value")

// maxDepth bounds nesting, so that hostile input cannot exhaust the stack.
const maxDepth = 64

// Unmarshal decodes the one value that b holds; bytes after it are an error.
func Unmarshal(b []byte) (any, error) {
	v, n, err := Decode(b)
	if err != nil {
		return nil, err
	}
	if n != len(b) {
		return nil, fmt.Errorf("amqp: %d bytes after the value", len(b)-n)
	}
	return v, nil
}

// Decode decodes the value at the start of b and returns it with the number
// of bytes it took.
func Decode(b []byte) (any, int, error) {
	d := decoder{b: b}
	v, err := d.value(0)
	return v, d.at, err
}

type decoder struct {
	b  []byte
	at int
}

func (d *decoder) take(n int) ([]byte, error) {
	if n < 0 || len(d.b)-d.at < n {
		return nil, ErrTruncated
	}
	p := d.b[d.at : d.at+n]
	d.at += n
	return p, nil
}

func (d *decoder) byte() (byte, error) {
	p, err := d.take(1)
	if err != nil {
		return 0, err
	}
	return p[0], nil
}

func (d *decoder) value(depth int) (any, error) {
	if depth > maxDepth {
		return nil, errors.New("amqp: values nested too deep")
	}
	code, err := d.byte()
	if err != nil {
		return nil, err
	}
	if code == tDescribed {
		desc, err := d.value(depth + 1)
		if err != nil {
			return nil, err
		}
		switch desc.(type) {
		case uint64, Symbol:
		default:
			return nil, fmt.Errorf("amqp: descriptor of type %T", desc)
		}
		v, err := d.value(depth + 1)
		if err != nil {
			return nil, err
		}
		return &Described{Descriptor: desc, Value: v}, nil
	}
	return d.body(code, depth)
}

// body decodes the value after its constructor code.
func (d *decoder) body(code byte, depth int) (any, error) {
	fixed := func(n int) ([]byte, error) { return d.take(n) }
	switch code {
	case tNull:
		return nil, nil
	case tTrue:
		return true, nil
	case tFalse:
		return false, nil
	case tUint0:
		return uint32(0), nil
	case tUlong0:
		return uint64(0), nil
	case tList0:
		return []any{}, nil
	}
	switch code {
	case tBool, tUbyte, tSmallUint, tSmallUlng, tByte, tSmallInt, tSmallLong:
		p, err := fixed(1)
		if err != nil {
			return nil, err
		}
		switch code {
		case tBool:
			if p[0] > 1 {
				return nil, fmt.Errorf("amqp: boolean byte %#x", p[0])
			}
			return p[0] == 1, nil
		case tUbyte:
			return p[0], nil
		case tSmallUint:
			return uint32(p[0]), nil
		case tSmallUlng:
			return uint64(p[0]), nil
		case tByte:
			return int8(p[0]), nil
		case tSmallInt:
			return int32(int8(p[0])), nil
		default:
			return int64(int8(p[0])), nil
		}
	case tUshort, tShort:
		p, err := fixed(2)
		if err != nil {
			return nil, err
		}
		if code == tUshort {
			return binary.BigEndian.Uint16(p), nil
		}
		return int16(binary.BigEndian.Uint16(p)), nil
	case tUint, tInt, tFloat, tChar:
		p, err := fixed(4)
		if err != nil {
			return nil, err
		}
		u := binary.BigEndian.Uint32(p)
		switch code {
		case tUint:
			return u, nil
		case tInt:
			return int32(u), nil
		case tFloat:
			return math.Float32frombits(u), nil
		default:
			return Char(u), nil
		}
	case tUlong, tLong, tDouble, tTimestamp:
		p, err := fixed(8)
		if err != nil {
			return nil, err
		}
		u := binary.BigEndian.Uint64(p)
		switch code {
		case tUlong:
			return u, nil
		case tLong:
			return int64(u), nil
		case tDouble:
			return math.Float64frombits(u), nil
		default:
			return Timestamp(int64(u)), nil
		}
	case tUUID:
		p, err := fixed(16)
		if err != nil {
			return nil, err
		}
		return UUID(p), nil
	case tVbin8, tStr8, tSym8, tVbin32, tStr32, tSym32:
		n, err := d.size(code == tVbin8 || code == tStr8 || code == tSym8)
		if err != nil {
			return nil, err
		}
		p, err := d.take(n)
		if err != nil {
			return nil, err
		}
		switch code {
		case tVbin8, tVbin32:
			return append([]byte(nil), p...), nil
		case tStr8, tStr32:
			return string(p), nil
		default:
			return Symbol(p), nil
		}
	case tList8, tList32, tMap8, tMap32, tArray8, tArray32:
		small := code == tList8 || code == tMap8 || code == tArray8
		size, err := d.size(small)
		if err != nil {
			return nil, err
		}
		start := d.at
		if len(d.b)-start < size {
			return nil, ErrTruncated
		}
		count, err := d.size(small)
		if err != nil {
			return nil, err
		}
		// Every element takes at least one byte, so a count beyond the
		// compound's size is a lie that must not size an allocation.
		if count > size {
			return nil, fmt.Errorf("amqp: compound of %d bytes claims %d elements", size, count)
		}
		inner := decoder{b: d.b[:start+size], at: d.at}
		var v any
		switch code {
		case tList8, tList32:
			v, err = inner.list(count, depth)
		case tMap8, tMap32:
			v, err = inner.mapOf(count, depth)
		default:
			v, err = inner.array(count, depth)
		}
		if err != nil {
			return nil, err
		}
		if inner.at != start+size {
			return nil, fmt.Errorf("amqp: compound of %d bytes holds %d", size, inner.at-start)
		}
		d.at = inner.at
		return v, nil
	}
	return nil, fmt.Errorf("amqp: unknown type code %#x", code)
}

func (d *decoder) size(small bool) (int, error) {
	if small {
		b, err := d.byte()
		return int(b), err
	}
	p, err := d.take(4)
	if err != nil {
		return 0, err
	}
	n := binary.BigEndian.Uint32(p)
	if n > math.MaxInt32 {
		return 0, fmt.Errorf("amqp: size %d", n)
	}
	return int(n), nil
}

func (d *decoder) list(count, depth int) ([]any, error) {
	out := make([]any, count)
	for i := range out {
		v, err := d.value(depth + 1)
		if err != nil {
			return nil, err
		}
		out[i] = v
	}
	return out, nil
}

func (d *decoder) mapOf(count, depth int) (Map, error) {
	if count%2 != 0 {
		return nil, fmt.Errorf("amqp: map of %d elements", count)
	}
	out := make(Map, count/2)
	for i := 0; i < count; i += 2 {
		k, err := d.value(depth + 1)
		if err != nil {
			return nil, err
		}
		v, err := d.value(depth + 1)
		if err != nil {
			return nil, err
		}
		switch k.(type) {
		case nil, []any, Map, Array, *Described, []byte:
			return nil, fmt.Errorf("amqp: map key of type %T", k)
		}
		out[k] = v
	}
	return out, nil
}

func (d *decoder) array(count, depth int) (Array, error) {
	code, err := d.byte()
	if err != nil {
		return nil, err
	}
	var desc any
	if code == tDescribed {
		if desc, err = d.value(depth + 1); err != nil {
			return nil, err
		}
		if code, err = d.byte(); err != nil {
			return nil, err
		}
	}
	out := make(Array, count)
	for i := range out {
		v, err := d.body(code, depth+1)
		if err != nil {
			return nil, err
		}
		if desc != nil {
			v = &Described{Descriptor: desc, Value: v}
		}
		out[i] = v
	}
	return out, nil
}
