package memstore

import (
	"fmt"
	"strings"
	"testing"

	"github.com/convoy-dev/convoy/handler/fault"
)

// TestEntityLimits holds the entity check to the documented limits
// (limits.go), with sizes worked out here by hand. The limits Azurite does
// not enforce (the entity's size, the number of properties) and no store
// method can reach (every entity memstore models has a few properties, each
// at most 64 KiB) are tested only here.
func TestEntityLimits(t *testing.T) {
	str := func(n int, s string) func(*entity) { return func(e *entity) { e.str("S", strings.Repeat(s, n)) } }
	props := func(n int) func(*entity) {
		return func(e *entity) {
			for i := range n {
				e.i32(fmt.Sprintf("P%d", i))
			}
		}
	}
	// 16 strings of 32,759 units under two-letter names: 8 (the entity:
	// 4 + 2×len("p"+"r")) + 16×(8 + 2×2 + 4 + 2×32,759) = 1,048,552 bytes;
	// an Int32 "B" adds 8 + 2 + 4 = 14 (1,048,566), a Boolean "C" 8 + 2 + 1
	// = 11 more (1,048,577: one byte over 1 MiB).
	full := func(more ...func(*entity)) func(*entity) {
		return func(e *entity) {
			for i := range 16 {
				e.str(fmt.Sprintf("A%c", 'a'+i), strings.Repeat("x", 32_759))
			}
			for _, m := range more {
				m(e)
			}
		}
	}
	for _, tc := range []struct {
		name   string
		pk, rk string
		fill   func(*entity)
		ok     bool
	}{
		{"a string of 32,768 ASCII characters (64 KiB as UTF-16)", "p", "r", str(32_768, "a"), true},
		{"a string of 32,769 ASCII characters", "p", "r", str(32_769, "a"), false},
		{"32,768 × é: 64 KiB as UTF-16 (and as UTF-8)", "p", "r", str(32_768, "é"), true},
		{"16,384 × U+1F600: two UTF-16 units each, 64 KiB", "p", "r", str(16_384, "😀"), true},
		{"16,385 × U+1F600: 16,385 characters, 64 KiB + 4 bytes", "p", "r", str(16_385, "😀"), false},
		{"252 properties", "p", "r", props(252), true},
		{"253 properties", "p", "r", props(253), false},
		{"an entity of 1,048,566 bytes", "p", "r", full(func(e *entity) { e.i32("B") }), true},
		{"an entity of 1,048,577 bytes", "p", "r", full(func(e *entity) { e.i32("B") }, func(e *entity) { e.bool("C") }), false},
		{"a PartitionKey of 512 characters (1 KiB)", strings.Repeat("k", 512), "r", props(0), true},
		{"a PartitionKey of 513 characters", strings.Repeat("k", 513), "r", props(0), false},
		{"a RowKey of 512 characters", "p", strings.Repeat("k", 512), props(0), true},
		{"a RowKey of 513 characters", "p", strings.Repeat("k", 513), props(0), false},
		{"a RowKey of 256 × U+1F600 (1 KiB)", "p", strings.Repeat("😀", 256), props(0), true},
		{"a RowKey of 257 × U+1F600", "p", strings.Repeat("😀", 257), props(0), false},
	} {
		e := newEntity(tc.pk, tc.rk)
		tc.fill(e)
		if err := e.check(); (err == nil) != tc.ok || (err != nil && fault.CodeOf(err) != fault.Internal) {
			t.Errorf("%s: %v, want accepted %v (refused as fault.Internal)", tc.name, err, tc.ok)
		}
	}
	for _, c := range []rune{'/', '\\', '#', '?', 0, 0x1f, 0x7f, 0x80, 0x9f} {
		for _, keys := range [][2]string{{"a" + string(c), "r"}, {"p", string(c) + "b"}} {
			if err := newEntity(keys[0], keys[1]).check(); fault.CodeOf(err) != fault.Internal {
				t.Errorf("keys %q: %v, want refused", keys, err)
			}
		}
	}
	for _, c := range []rune{' ', '~', '|', '\'', 0x7e, 0xa0, 'é'} {
		if err := newEntity("a"+string(c), string(c)+"b").check(); err != nil {
			t.Errorf("keys with %q: %v, want accepted", c, err)
		}
	}
}

// TestGroupLimits: 100 operations, and a payload of 4 MiB counted in the
// bytes sent (UTF-8, JSON-escaped), not the entities' UTF-16 sizes.
func TestGroupLimits(t *testing.T) {
	ops := func(n int) *group {
		g := &group{}
		for range n {
			g.write(newEntity("p", "r"))
		}
		return g
	}
	if err := ops(100).check(); err != nil {
		t.Errorf("100 operations: %v", err)
	}
	if err := ops(101).check(); fault.CodeOf(err) != fault.Internal {
		t.Errorf("101 operations: %v, want refused", err)
	}
	// 32,000 × € is 64,000 bytes as UTF-16, 96,000 in UTF-8: 43 of them
	// send 4,128,000 bytes (less than 4 MiB, 4,194,304, by 66,304 for the
	// framing), 44 of them 4,224,000.
	euros := func(n int, s string) *group {
		g := &group{}
		for range n {
			g.write(newEntity("p", "r").str("D", strings.Repeat(s, 32_000)))
		}
		return g
	}
	if err := euros(43, "€").check(); err != nil {
		t.Errorf("43 × 96,000 bytes: %v", err)
	}
	if err := euros(44, "€").check(); fault.CodeOf(err) != fault.Internal {
		t.Errorf("44 × 96,000 bytes: %v, want refused", err)
	}
	// A control character is sent as \u00XX: 6 bytes.
	if err := euros(22, "\x01").check(); fault.CodeOf(err) != fault.Internal {
		t.Errorf("22 × 32,000 control characters (4,224,000 bytes in JSON): %v, want refused", err)
	}
}
