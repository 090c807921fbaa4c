package amqp

import (
	"bytes"
	"reflect"
	"testing"
	"time"
)

// Encodings written out by hand from the specification's type table (part
// 1, section 1.6), not by Append: the oracle for both directions.
var specEncodings = []struct {
	name  string
	value any
	wire  []byte
}{
	{"null", nil, []byte{0x40}},
	{"true", true, []byte{0x41}},
	{"false", false, []byte{0x42}},
	{"ubyte", uint8(7), []byte{0x50, 7}},
	{"ushort", uint16(0x0102), []byte{0x60, 1, 2}},
	{"uint0", uint32(0), []byte{0x43}},
	{"smalluint", uint32(200), []byte{0x52, 200}},
	{"uint", uint32(0x01020304), []byte{0x70, 1, 2, 3, 4}},
	{"ulong0", uint64(0), []byte{0x44}},
	{"smallulong", uint64(5), []byte{0x53, 5}},
	{"ulong", uint64(0x0102030405060708), []byte{0x80, 1, 2, 3, 4, 5, 6, 7, 8}},
	{"byte", int8(-2), []byte{0x51, 0xfe}},
	{"short", int16(-2), []byte{0x61, 0xff, 0xfe}},
	{"smallint", int32(-3), []byte{0x54, 0xfd}},
	{"int", int32(1000), []byte{0x71, 0, 0, 0x03, 0xe8}},
	{"smalllong", int64(-1), []byte{0x55, 0xff}},
	{"long", int64(1 << 40), []byte{0x81, 0, 0, 1, 0, 0, 0, 0, 0}},
	{"timestamp", time.UnixMilli(1000).UTC(), []byte{0x83, 0, 0, 0, 0, 0, 0, 0x03, 0xe8}},
	{"uuid", UUID{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16}, []byte{0x98, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16}},
	{"vbin8", []byte{9, 8}, []byte{0xa0, 2, 9, 8}},
	{"str8", "hé", []byte{0xa1, 3, 'h', 0xc3, 0xa9}},
	{"sym8", Symbol("ab"), []byte{0xa3, 2, 'a', 'b'}},
	{"list0", []any{}, []byte{0x45}},
	{"list32", []any{true, uint8(1)}, []byte{0xd0, 0, 0, 0, 7, 0, 0, 0, 2, 0x41, 0x50, 1}},
	{"map32", Map{Symbol("k"): "v"}, []byte{0xd1, 0, 0, 0, 10, 0, 0, 0, 2, 0xa3, 1, 'k', 0xa1, 1, 'v'}},
	{"array32 of uint", Array{uint32(1), uint32(2)}, []byte{0xf0, 0, 0, 0, 13, 0, 0, 0, 2, 0x70, 0, 0, 0, 1, 0, 0, 0, 2}},
	{"described", &Described{Descriptor: uint64(0x24), Value: []any{}}, []byte{0x00, 0x53, 0x24, 0x45}},
}

func TestSpecEncodings(t *testing.T) {
	for _, c := range specEncodings {
		got, err := Marshal(c.value)
		if err != nil || !bytes.Equal(got, c.wire) {
			t.Errorf("%s: Marshal = % x, %v; want % x", c.name, got, err, c.wire)
		}
		v, err := Unmarshal(c.wire)
		if err != nil || !reflect.DeepEqual(v, c.value) {
			t.Errorf("%s: Unmarshal(% x) = %#v, %v; want %#v", c.name, c.wire, v, err, c.value)
		}
	}
}

// The compact forms other encoders write decode too (part 1, section 1.6.20 and after).
func TestCompactForms(t *testing.T) {
	for _, c := range []struct {
		wire []byte
		want any
	}{
		{[]byte{0xc0, 3, 2, 0x41, 0x42}, []any{true, false}},
		{[]byte{0xc1, 5, 2, 0xa3, 1, 'k', 0x40}, Map{Symbol("k"): nil}},
		{[]byte{0xe0, 4, 2, 0xa3, 1, 'a'}, nil}, // an array of 2 symbols with 1 byte: truncated
		{[]byte{0xe0, 6, 2, 0xa3, 1, 'a', 1, 'b'}, Array{Symbol("a"), Symbol("b")}},
		{[]byte{0xb1, 0, 0, 0, 1, 'x'}, "x"},
		{[]byte{0x56, 1}, true},
	} {
		v, err := Unmarshal(c.wire)
		if c.want == nil {
			if err == nil {
				t.Errorf("% x: no error", c.wire)
			}
			continue
		}
		if err != nil || !reflect.DeepEqual(v, c.want) {
			t.Errorf("% x: %#v, %v; want %#v", c.wire, v, err, c.want)
		}
	}
}

func TestMessageRoundTrip(t *testing.T) {
	m := &Message{
		Header:                []any{true, nil, uint32(5000)},
		MessageAnnotations:    Map{Symbol("x-opt-sequence-number"): int64(7)},
		Properties:            []any{"id-1", nil, nil, nil, "reply"},
		ApplicationProperties: Map{"seq": int64(3), "ok": true},
		Data:                  [][]byte{[]byte("body")},
	}
	b, err := m.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	got, err := UnmarshalMessage(b)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, m) {
		t.Fatalf("round trip:\n got %#v\nwant %#v", got, m)
	}
}

func TestFrameRoundTrip(t *testing.T) {
	f := Frame{Channel: 3, Body: New(CodeTransfer, uint32(1), uint32(2), []byte{1}, uint32(0), false, true), Payload: []byte("payload")}
	b, err := AppendFrame(nil, f)
	if err != nil {
		t.Fatal(err)
	}
	got, err := ReadFrame(bytes.NewReader(b), 1<<16)
	if err != nil {
		t.Fatal(err)
	}
	if got.Channel != 3 || got.Body.Code != CodeTransfer || string(got.Payload) != "payload" || got.Body.Field(5) != true {
		t.Fatalf("frame %+v", got)
	}
	if _, err := ReadFrame(bytes.NewReader(b), uint32(len(b)-1)); err == nil {
		t.Fatal("a frame over the maximum was read")
	}
}

// FuzzDecode: hostile bytes never panic, and what decodes re-encodes to
// something that decodes to the same value.
func FuzzDecode(f *testing.F) {
	for _, c := range specEncodings {
		f.Add(c.wire)
	}
	f.Add([]byte{0xd0, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff})
	f.Fuzz(func(t *testing.T, b []byte) {
		v, err := Unmarshal(b)
		if err != nil {
			return
		}
		again, err := Marshal(v)
		if err != nil {
			return // e.g. an array of mixed described values: decodable, not writable
		}
		w, err := Unmarshal(again)
		if err != nil {
			t.Fatalf("re-encoded % x does not decode: %v", again, err)
		}
		if !reflect.DeepEqual(normalize(v), normalize(w)) {
			t.Fatalf("%#v became %#v", v, w)
		}
	})
}

// FuzzMessage: hostile bytes never panic, and a message that decodes is
// written back to sections that decode to the same message.
func FuzzMessage(f *testing.F) {
	m := &Message{Properties: []any{"id"}, ApplicationProperties: Map{"a": int64(1)}, Data: [][]byte{[]byte("x")}}
	b, _ := m.Marshal()
	f.Add(b)
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := UnmarshalMessage(b)
		if err != nil {
			return
		}
		again, err := m.Marshal()
		if err != nil {
			return // e.g. an array of described values: decodable, not writable
		}
		w, err := UnmarshalMessage(again)
		if err != nil {
			t.Fatalf("re-encoded message does not decode: %v", err)
		}
		if !reflect.DeepEqual(sections(m), sections(w)) {
			t.Fatalf("%#v became %#v", m, w)
		}
	})
}

func sections(m *Message) any {
	return normalize([]any{trim(m.Header), m.DeliveryAnnotations, m.MessageAnnotations, trim(m.Properties),
		m.ApplicationProperties, m.Data, m.Value, m.HasValue, m.Sequence, m.Footer})
}

// normalize maps NaN floats to a marker so that DeepEqual compares them.
func normalize(v any) any {
	switch x := v.(type) {
	case float32:
		if x != x {
			return "NaN"
		}
	case float64:
		if x != x {
			return "NaN"
		}
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = normalize(e)
		}
		return out
	case Array:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = normalize(e)
		}
		return out
	case Map:
		out := Map{}
		for k, e := range x {
			out[normalize(k)] = normalize(e)
		}
		return out
	case *Described:
		return &Described{Descriptor: normalize(x.Descriptor), Value: normalize(x.Value)}
	}
	return v
}
