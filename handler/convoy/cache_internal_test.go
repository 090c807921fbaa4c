package convoy

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/convoy-dev/convoy/handler/keyed"
)

// stubRules are a minimal domain, as the order fold is (an internal test
// cannot import handler/orders, which imports convoy): a key is created,
// then each command adds an amount under a new id, a row by position and a
// row by id, which it guesses absent; the state counts and totals them.
type stubRules struct{}

type stubState struct {
	Open         bool
	Count, Total int64
}

type stubCmd struct {
	Create bool
	ID     string
	Amount int64
	Data   string
}

var stubDomain = keyed.Erase[stubState, stubCmd](stubRules{})

func (stubRules) Name() string { return "stub" }
func (stubRules) ReadCommand(string, []byte) (stubCmd, error) {
	return stubCmd{}, errors.New("the stub reads no bodies")
}

func (stubRules) Needs(s stubState, c stubCmd) keyed.Needs {
	if !s.Open || c.Create {
		return keyed.Needs{}
	}
	return keyed.Needs{Absent: []keyed.RowRef{{Collection: "x", ID: c.ID}}}
}

func (stubRules) Decide(s stubState, c stubCmd, rows keyed.Rows) (stubState, keyed.Writes, error) {
	switch {
	case c.Create && s.Open:
		return s, nil, keyed.Reject("already created")
	case c.Create:
		s.Open = true
		return s, nil, nil
	case !s.Open:
		return s, nil, keyed.Reject("not open")
	}
	if _, exists := rows.Get(keyed.RowRef{Collection: "x", ID: c.ID}); exists {
		return s, nil, keyed.Reject("%q already exists", c.ID)
	}
	pos := s.Count
	s.Count, s.Total = s.Count+1, s.Total+c.Amount
	entry := keyed.Props{{Name: "Id", Value: c.ID}, {Name: "Amount", Value: c.Amount}}
	if c.Data != "" {
		entry = append(entry, keyed.Prop{Name: "Data", Value: c.Data})
	}
	return s, keyed.Writes{}.Append("t", pos, entry).Insert("x", c.ID, keyed.Props{{Name: "Position", Value: pos}}), nil
}

func (stubRules) Tag(c stubCmd) keyed.Props { return keyed.Props{{Name: "Id", Value: c.ID}} }
func (stubRules) Version() int              { return 1 }

func (stubRules) EncodeState(s stubState) keyed.Props {
	return keyed.Props{{Name: "Open", Value: s.Open}, {Name: "Count", Value: s.Count}, {Name: "Total", Value: s.Total}}
}

func (stubRules) DecodeState(_ int, p keyed.Props) (stubState, error) {
	return stubState{Open: p.Bool("Open"), Count: p.Int("Count"), Total: p.Int("Total")}, nil
}

func (stubRules) EncodeCommand(c stubCmd) keyed.Props {
	p := keyed.Props{{Name: "Create", Value: c.Create}, {Name: "Id", Value: c.ID}, {Name: "Amount", Value: c.Amount}}
	if c.Data != "" {
		p = append(p, keyed.Prop{Name: "Data", Value: c.Data})
	}
	return p
}

func (stubRules) DecodeCommand(_ string, p keyed.Props) (stubCmd, error) {
	return stubCmd{Create: p.Bool("Create"), ID: p.String("Id"), Amount: p.Int("Amount"), Data: p.String("Data")}, nil
}

// Budget is the order domain's.
func (stubRules) Budget() keyed.Budget {
	return keyed.Budget{Writes: 2, Bytes: 64 << 10, ParkedBytes: 32 << 10}
}

// nullStore accepts every commit and holds nothing: enough for what the
// processor keeps in its cache.
type nullStore struct{}

func (nullStore) Load(_ context.Context, id string) (*Key, error) { return NewKey(id), nil }
func (nullStore) Row(context.Context, string, keyed.RowRef) (keyed.Props, bool, error) {
	return nil, false, nil
}
func (nullStore) Commit(context.Context, *Key, int64, *Change) error       { return nil }
func (nullStore) NoteFailure(context.Context, string, keyed.Failure) error { return nil }
func (nullStore) Parked(context.Context, string, int64, int) ([]Message, bool, error) {
	return nil, false, nil
}
func (nullStore) IsParked(context.Context, string, int64) (bool, error) { return false, nil }

// TestCachedOrderBounded (issue 27): however many rows a key has written,
// the key the cache holds between calls knows at most maxKnown of them and
// holds no history; its figures stay exact.
func TestCachedOrderBounded(t *testing.T) {
	p := NewProcessor(nullStore{}, ProcessorOptions{Domain: stubDomain})
	ctx := context.Background()
	seq := int64(1)
	if _, err := p.Process(ctx, "o-1", []Message{{Seq: 1, Command: stubCmd{Create: true}}}); err != nil {
		t.Fatal(err)
	}
	var want int64
	for call := range 50 {
		var msgs []Message
		for range 100 {
			seq++
			amount := seq
			want += amount
			msgs = append(msgs, Message{Seq: seq, Command: stubCmd{ID: fmt.Sprintf("t-%d", seq), Amount: amount}})
		}
		if _, err := p.Process(ctx, "o-1", msgs); err != nil {
			t.Fatal(err)
		}
		o := p.cache.get("o-1")
		if o == nil {
			t.Fatalf("call %d: the order is not cached", call)
		}
		if len(o.rows.rows) > maxKnown {
			t.Fatalf("call %d: the cached order knows %d rows, more than %d", call, len(o.rows.rows), maxKnown)
		}
		if s := o.State.(stubState); s.Count != seq-1 || s.Total != want {
			t.Fatalf("call %d: %d transactions totalling %d, want %d totalling %d", call, s.Count, s.Total, seq-1, want)
		}
	}
}

// TestCacheBoundedInBytes (issue 33): orders whose parked windows are full
// are large; the cache holds no more of them than CacheBytes, by their
// sizes, and counts what it holds exactly.
func TestCacheBoundedInBytes(t *testing.T) {
	const limit = 8 << 20
	p := NewProcessor(nullStore{}, ProcessorOptions{Domain: stubDomain, CacheBytes: limit})
	ctx := context.Background()
	data := `"` + strings.Repeat("x", 4<<10) + `"`
	for i := range 40 {
		id := fmt.Sprintf("o-%d", i)
		var msgs []Message
		for seq := int64(3); seq < 3+ParkedPageSize; seq++ {
			amount := seq
			msgs = append(msgs, Message{Seq: seq, Command: stubCmd{ID: fmt.Sprint("t-", seq), Amount: amount, Data: data}})
		}
		if _, err := p.Process(ctx, id, msgs); err != nil {
			t.Fatal(err)
		}
		if o := p.cache.get(id); o == nil || len(o.Parked) != ParkedPageSize {
			t.Fatalf("order %d: not cached with its window of %d", i, ParkedPageSize)
		}
		var held int64
		for _, e := range p.cache.byID {
			held += e.order.Size()
		}
		if held > limit || held != p.cache.bytes {
			t.Fatalf("after %d orders of %d B: the cache holds %d B (counted %d), more than %d", i+1, cachedSize(p, id), held, p.cache.bytes, limit)
		}
	}
}

// cachedSize is the size of the order id as cached.
func cachedSize(p *Processor, id string) int64 { return p.cache.get(id).Size() }
