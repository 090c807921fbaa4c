package keyed_test

import (
	"encoding/json"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/convoy-dev/convoy/handler/fault"
	"github.com/convoy-dev/convoy/handler/keyed"
)

func TestPropsCheckRefusesWhatTableStorageWouldNot(t *testing.T) {
	for _, c := range []struct {
		p    keyed.Props
		want string
	}{
		{keyed.Props{{Name: "A", Value: "x"}, {Name: "A", Value: "y"}}, "given twice"},
		{keyed.Props{{Name: "RowKey", Value: "x"}}, "reserved"},
		{keyed.Props{{Name: "A", Value: 3}}, "is a int"},
		{keyed.Props{{Name: "A", Value: 1.5}}, "is a float64"},
		{keyed.Props{{Name: "", Value: "x"}}, "is not a name"},
		{keyed.Props{{Name: "A", Value: "\xff"}}, "not valid UTF-8"},
	} {
		if err := c.p.Check(); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v: %v, want an error saying %q", c.p, err, c.want)
		}
	}
	ok := keyed.Props{{Name: "S", Value: "é"}, {Name: "I", Value: int64(1)}, {Name: "J", Value: int32(1)},
		{Name: "B", Value: true}, {Name: "T", Value: time.Unix(0, 0)}}
	if err := ok.Check(); err != nil {
		t.Fatal(err)
	}
}

func TestPropsSizeCountsUTF16AsTableStorageDoes(t *testing.T) {
	// "Understanding the Table service data model": 8 bytes per property,
	// its name's UTF-16 twice, a string's 4 + 2 per UTF-16 unit.
	p := keyed.Props{{Name: "Ab", Value: "😀x"}, {Name: "N", Value: int64(1)}}
	if got, want := p.Size(), (8+4+4+2*3)+(8+2+8); got != want {
		t.Fatalf("Size %d, want %d", got, want)
	}
}

func TestPropsMergeKeepsWhatItDoesNotWrite(t *testing.T) {
	p := keyed.Props{{Name: "A", Value: int64(1)}, {Name: "D", Value: "d"}}
	got := p.Merge(keyed.Props{{Name: "A", Value: int64(2)}, {Name: "B", Value: true}})
	if got.Int("A") != 2 || got.String("D") != "d" || !got.Bool("B") || p.Int("A") != 1 {
		t.Fatalf("merged %v (the original now %v)", got, p)
	}
}

type panics struct{}

func (panics) Name() string                                   { return "panics" }
func (panics) ReadCommand(string, []byte) (int, error)        { return 0, nil }
func (panics) Needs(int, int) keyed.Needs                     { return keyed.Needs{} }
func (panics) Tag(int) keyed.Props                            { return nil }
func (panics) Version() int                                   { return 1 }
func (panics) EncodeState(int) keyed.Props                    { return nil }
func (panics) DecodeState(int, keyed.Props) (int, error)      { return 0, nil }
func (panics) EncodeCommand(int) keyed.Props                  { return nil }
func (panics) DecodeCommand(string, keyed.Props) (int, error) { return 0, nil }
func (panics) Budget() keyed.Budget                           { return keyed.Budget{} }
func (panics) Decide(s, c int, _ keyed.Rows) (int, keyed.Writes, error) {
	if c == 0 {
		panic("division by zero")
	}
	return s + 10/c, nil, nil
}

func TestEraseTurnsAPanicIntoAnError(t *testing.T) {
	d := keyed.Erase[int, int](panics{})
	s, w, err := d.Decide(5, 0, nil)
	if err == nil || !strings.Contains(err.Error(), "division by zero") || s != 5 || w != nil {
		t.Fatalf("a panicking Decide: (%v, %v, %v), want the state unchanged and the panic as an error", s, w, err)
	}
	if s, _, err := d.Decide(5, 2, nil); err != nil || s != 10 {
		t.Fatalf("Decide(5, 2): %v %v", s, err)
	}
	if d.Budget() != keyed.DefaultBudget {
		t.Fatalf("a zero Budget is %v, want the default", d.Budget())
	}
}

func TestRejectIsARejection(t *testing.T) {
	reason, ok := keyed.RejectionReason(keyed.Reject("balance %d", 5))
	if !ok || reason != "balance 5" {
		t.Fatalf("%q %v", reason, ok)
	}
	if _, ok := keyed.RejectionReason(nil); ok {
		t.Fatal("nil is no rejection")
	}
}

// publishes is panics with a ledger entry: an entry or a command of 0 panics.
type publishes struct{ panics }

func (publishes) ReadEntry(index int, raw []byte, extra ...string) (string, int, map[string]json.RawMessage, []fault.Problem) {
	n, err := strconv.Atoi(string(raw))
	if err != nil {
		return "", 0, nil, []fault.Problem{{Index: index, Reason: "is no number"}}
	}
	if n == 0 {
		panic("entry zero")
	}
	return "k-" + string(raw), n, map[string]json.RawMessage{"extra": json.RawMessage(strings.Join(extra, ","))}, nil
}

func (publishes) Body(c int) ([]byte, error) { return []byte(strconv.Itoa(10 / c)), nil }

// TestErasePublisher: the erased domain reads a ledger entry and writes its
// body through the rules' Publisher, a panic of either being a problem of
// the entry or an error; rules that are no Publisher say so, and answer a
// problem and an error instead of a command and a body.
func TestErasePublisher(t *testing.T) {
	d := keyed.Erase[int, int](publishes{})
	if !d.Publishes() {
		t.Fatal("a Publisher's rules do not publish")
	}
	key, c, extras, ps := d.ReadEntry(3, []byte("7"), "last")
	if key != "k-7" || c != 7 || string(extras["extra"]) != "last" || ps != nil {
		t.Fatalf("ReadEntry: %q, %v, %s, %v", key, c, extras, ps)
	}
	if _, _, _, ps := d.ReadEntry(4, []byte("x")); len(ps) != 1 || ps[0].Index != 4 || ps[0].Reason != "is no number" {
		t.Fatalf("an unreadable entry: %+v", ps)
	}
	if _, c, _, ps := d.ReadEntry(5, []byte("0")); c != nil || len(ps) != 1 || ps[0].Index != 5 || !strings.Contains(ps[0].Reason, "entry zero") {
		t.Fatalf("a panicking ReadEntry: %v, %+v; want a problem of entry 5 with the panic", c, ps)
	}
	if b, err := d.Body(5); err != nil || string(b) != "2" {
		t.Fatalf("Body(5): %q, %v", b, err)
	}
	var p *keyed.PanicError
	if _, err := d.Body(0); !errors.As(err, &p) || !strings.Contains(err.Error(), "divide by zero") {
		t.Fatalf("a panicking Body: %v, want a PanicError", err)
	}
	if _, err := d.Body("7"); !errors.As(err, &p) {
		t.Fatalf("Body of another type's command: %v, want a PanicError", err)
	}

	none := keyed.Erase[int, int](panics{})
	if none.Publishes() {
		t.Fatal("rules that are no Publisher publish")
	}
	if _, c, _, ps := none.ReadEntry(2, []byte("7")); c != nil || len(ps) != 1 || ps[0].Index != 2 || !strings.Contains(ps[0].Reason, "cannot be in a ledger") {
		t.Fatalf("ReadEntry of rules that are no Publisher: %v, %+v", c, ps)
	}
	if _, err := none.Body(7); err == nil || !strings.Contains(err.Error(), "no Publisher") {
		t.Fatalf("Body of rules that are no Publisher: %v", err)
	}
}

// TestEraseCommands: the erased domain's list of commands gives back each
// command appended, at the index Append returned, and refuses a value of
// another type.
func TestEraseCommands(t *testing.T) {
	l := keyed.Erase[int, int](publishes{}).Commands(1)
	want := []int{7, 3, 7, 11} // beyond the capacity given
	for i, c := range want {
		if got := l.Append(c); got != i {
			t.Fatalf("Append(%d) = %d, want index %d", c, got, i)
		}
	}
	for i, c := range want {
		if got := l.At(i); got != c {
			t.Fatalf("At(%d) = %v, want %d", i, got, c)
		}
	}
	defer func() {
		if recover() == nil {
			t.Fatal("Append of a string to a list of ints did not panic")
		}
	}()
	l.Append("7")
}
