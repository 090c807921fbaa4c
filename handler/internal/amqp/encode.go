package amqp

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"time"
)

// Append appends the encoding of v to b.
func Append(b []byte, v any) ([]byte, error) {
	switch v := v.(type) {
	case nil:
		return append(b, tNull), nil
	case bool:
		if v {
			return append(b, tTrue), nil
		}
		return append(b, tFalse), nil
	case uint8:
		return append(b, tUbyte, v), nil
	case uint16:
		return binary.BigEndian.AppendUint16(append(b, tUshort), v), nil
	case uint32:
		switch {
		case v == 0:
			return append(b, tUint0), nil
		case v < 256:
			return append(b, tSmallUint, byte(v)), nil
		}
		return binary.BigEndian.AppendUint32(append(b, tUint), v), nil
	case uint64:
		switch {
		case v == 0:
			return append(b, tUlong0), nil
		case v < 256:
			return append(b, tSmallUlng, byte(v)), nil
		}
		return binary.BigEndian.AppendUint64(append(b, tUlong), v), nil
	case int8:
		return append(b, tByte, byte(v)), nil
	case int16:
		return binary.BigEndian.AppendUint16(append(b, tShort), uint16(v)), nil
	case int32:
		if v >= -128 && v <= 127 {
			return append(b, tSmallInt, byte(v)), nil
		}
		return binary.BigEndian.AppendUint32(append(b, tInt), uint32(v)), nil
	case int64:
		if v >= -128 && v <= 127 {
			return append(b, tSmallLong, byte(v)), nil
		}
		return binary.BigEndian.AppendUint64(append(b, tLong), uint64(v)), nil
	case int:
		return Append(b, int64(v))
	case float32:
		return binary.BigEndian.AppendUint32(append(b, tFloat), math.Float32bits(v)), nil
	case float64:
		return binary.BigEndian.AppendUint64(append(b, tDouble), math.Float64bits(v)), nil
	case Char:
		return binary.BigEndian.AppendUint32(append(b, tChar), uint32(v)), nil
	case time.Time:
		return binary.BigEndian.AppendUint64(append(b, tTimestamp), uint64(v.UnixMilli())), nil
	case UUID:
		return append(append(b, tUUID), v[:]...), nil
	case []byte:
		return appendVariable(b, tVbin8, tVbin32, v), nil
	case string:
		return appendVariable(b, tStr8, tStr32, []byte(v)), nil
	case Symbol:
		return appendVariable(b, tSym8, tSym32, []byte(v)), nil
	case []any:
		return appendList(b, v)
	case Map:
		return appendMap(b, v)
	case map[string]any:
		m := make(Map, len(v))
		for k, x := range v {
			m[k] = x
		}
		return appendMap(b, m)
	case Array:
		return appendArray(b, v)
	case *Described:
		b = append(b, tDescribed)
		b, err := Append(b, v.Descriptor)
		if err != nil {
			return b, err
		}
		return Append(b, v.Value)
	}
	return b, fmt.Errorf("amqp: cannot encode %T", v)
}

// Marshal returns the encoding of v.
func Marshal(v any) ([]byte, error) { return Append(nil, v) }

func appendVariable(b []byte, code8, code32 byte, v []byte) []byte {
	if len(v) < 256 {
		b = append(b, code8, byte(len(v)))
	} else {
		b = binary.BigEndian.AppendUint32(append(b, code32), uint32(len(v)))
	}
	return append(b, v...)
}

// appendCompound writes a list or map: 32-bit size and count, always (the
// 8-bit form would need the body's size before it is written).
func appendCompound(b []byte, code byte, count int, body func([]byte) ([]byte, error)) ([]byte, error) {
	b = append(b, code, 0, 0, 0, 0, 0, 0, 0, 0)
	at := len(b) - 8
	b, err := body(b)
	if err != nil {
		return b, err
	}
	binary.BigEndian.PutUint32(b[at:], uint32(len(b)-at-4))
	binary.BigEndian.PutUint32(b[at+4:], uint32(count))
	return b, nil
}

func appendList(b []byte, l []any) ([]byte, error) {
	if len(l) == 0 {
		return append(b, tList0), nil
	}
	return appendCompound(b, tList32, len(l), func(b []byte) ([]byte, error) {
		var err error
		for _, v := range l {
			if b, err = Append(b, v); err != nil {
				return b, err
			}
		}
		return b, nil
	})
}

func appendMap(b []byte, m Map) ([]byte, error) {
	return appendCompound(b, tMap32, 2*len(m), func(b []byte) ([]byte, error) {
		var err error
		for k, v := range m {
			if b, err = Append(b, k); err != nil {
				return b, err
			}
			if b, err = Append(b, v); err != nil {
				return b, err
			}
		}
		return b, nil
	})
}

// appendArray writes an array of one element type: each element is encoded
// on its own, in its widest form, and written without its constructor.
func appendArray(b []byte, a Array) ([]byte, error) {
	var code byte = tNull
	elems := make([][]byte, len(a))
	for i, v := range a {
		if _, ok := v.(*Described); ok {
			return b, errors.New("amqp: arrays of described values are not written")
		}
		e, err := appendWide(nil, v)
		if err != nil {
			return b, err
		}
		if i > 0 && e[0] != code {
			return b, fmt.Errorf("amqp: array of mixed types (%#x and %#x)", code, e[0])
		}
		code, elems[i] = e[0], e[1:]
	}
	return appendCompound(b, tArray32, len(a), func(b []byte) ([]byte, error) {
		b = append(b, code)
		for _, e := range elems {
			b = append(b, e...)
		}
		return b, nil
	})
}

// appendWide encodes v with a constructor that does not depend on its value,
// as an array's elements need.
func appendWide(b []byte, v any) ([]byte, error) {
	switch v := v.(type) {
	case bool:
		x := byte(0)
		if v {
			x = 1
		}
		return append(b, tBool, x), nil
	case uint32:
		return binary.BigEndian.AppendUint32(append(b, tUint), v), nil
	case uint64:
		return binary.BigEndian.AppendUint64(append(b, tUlong), v), nil
	case int32:
		return binary.BigEndian.AppendUint32(append(b, tInt), uint32(v)), nil
	case int64:
		return binary.BigEndian.AppendUint64(append(b, tLong), uint64(v)), nil
	case []byte:
		return append(binary.BigEndian.AppendUint32(append(b, tVbin32), uint32(len(v))), v...), nil
	case string:
		return append(binary.BigEndian.AppendUint32(append(b, tStr32), uint32(len(v))), v...), nil
	case Symbol:
		return append(binary.BigEndian.AppendUint32(append(b, tSym32), uint32(len(v))), v...), nil
	}
	return Append(b, v)
}
