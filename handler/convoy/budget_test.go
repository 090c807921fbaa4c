package convoy_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/convoy-dev/convoy/handler/convoy"
	"github.com/convoy-dev/convoy/handler/fault"
	"github.com/convoy-dev/convoy/handler/internal/memstore"
	"github.com/convoy-dev/convoy/handler/keyed"
)

// probe is a domain whose commands say what their decision does: panic,
// write Rows rows of Bytes bytes each, grow the state by StateBytes, or
// carry Pad bytes (its parked size).
type probe struct{}

type probeState struct{ N, Pad int64 }

type probeCmd struct {
	Panic                   bool
	Rows, Bytes, StateBytes int
	Pad                     string
	InsertAgain             bool // insert the row "a/1" (written by the first command that does)
}

func (probe) Name() string                                 { return "probes" }
func (probe) ReadCommand(string, []byte) (probeCmd, error) { return probeCmd{}, nil }
func (probe) Tag(probeCmd) keyed.Props                     { return nil }
func (probe) Version() int                                 { return 1 }
func (probe) Budget() keyed.Budget {
	return keyed.Budget{Writes: 2, Bytes: 64 << 10, ParkedBytes: 4 << 10}
}
func (probe) EncodeCommand(c probeCmd) keyed.Props { return keyed.Props{{Name: "Pad", Value: c.Pad}} }
func (probe) DecodeCommand(_ string, p keyed.Props) (probeCmd, error) {
	return probeCmd{Pad: p.String("Pad")}, nil
}

// EncodeState spreads the padding over properties of 16 KiB.
func (probe) EncodeState(s probeState) keyed.Props {
	p := keyed.Props{{Name: "N", Value: s.N}}
	for i := int64(0); i*16<<10 < s.Pad; i++ {
		p = append(p, keyed.Prop{Name: fmt.Sprintf("Pad%d", i), Value: strings.Repeat("s", int(min(16<<10, s.Pad-i*16<<10)))})
	}
	return p
}
func (probe) DecodeState(_ int, p keyed.Props) (probeState, error) {
	s := probeState{N: p.Int("N")}
	for _, q := range p {
		if v, ok := q.Value.(string); ok {
			s.Pad += int64(len(v))
		}
	}
	return s, nil
}

func (probe) Needs(s probeState, c probeCmd) keyed.Needs {
	if c.InsertAgain {
		return keyed.Needs{Absent: []keyed.RowRef{{Collection: "a", ID: "1"}}}
	}
	return keyed.Needs{}
}

func (probe) Decide(s probeState, c probeCmd, _ keyed.Rows) (probeState, keyed.Writes, error) {
	if c.Panic {
		panic("assignment to entry in nil map") // as a bug of the rules would
	}
	s.N++
	s.Pad += int64(c.StateBytes)
	var w keyed.Writes
	for i := range c.Rows {
		w = w.Append("s", s.N*100+int64(i), keyed.Props{{Name: "V", Value: strings.Repeat("v", c.Bytes)}})
	}
	if c.InsertAgain {
		w = w.Insert("a", "1", nil)
	}
	return s, w, nil
}

func probeProcessor(store convoy.Store) *convoy.Processor {
	return convoy.NewProcessor(store, convoy.ProcessorOptions{Domain: keyed.Erase[probeState, probeCmd](probe{}),
		Retry: fault.RetryPolicy{MaxAttempts: 2}})
}

func process(t *testing.T, p *convoy.Processor, key string, seq int64, c probeCmd) convoy.Outcome {
	t.Helper()
	res, err := p.Process(context.Background(), key, []convoy.Message{{Seq: seq, MessageID: key, Command: c}})
	if err != nil {
		t.Fatalf("seq %d: %v", seq, err)
	}
	return res.Outcomes[len(res.Outcomes)-1]
}

func TestAPanickingDecisionFailsItsMessageAndWritesNothing(t *testing.T) {
	store := memstore.New()
	p := probeProcessor(store)
	process(t, p, "k", 1, probeCmd{Rows: 1, Bytes: 10})
	_, err := p.Process(context.Background(), "k", []convoy.Message{{Seq: 2, Command: probeCmd{Panic: true, Rows: 2}}})
	var pe *keyed.PanicError
	if !errors.As(err, &pe) || !strings.Contains(err.Error(), "assignment to entry in nil map") {
		t.Fatalf("a panicking decision: error %v, want the panic's message", err)
	}
	if fault.CodeOf(err) == fault.Invalid {
		t.Fatalf("a panic is not a permanent failure of the message: %v", err)
	}
	o, _ := store.Load(context.Background(), "k")
	if o.AppliedSeq != 1 || o.Version != 1 {
		t.Fatalf("after the panic: appliedSeq %d version %d, want 1 and 1 (nothing written)", o.AppliedSeq, o.Version)
	}
	// The head says why the key waits (the operator's page and blocked
	// list show it), also after a later message parks behind it.
	if f := o.Failing(); f == nil || f.Seq != 2 || !strings.Contains(f.Why, "the rules panicked: assignment to entry in nil map") {
		t.Fatalf("after the panic the head notes %+v, want seq 2 failing with the panic's message", o.Failure)
	}
	if out := process(t, p, "k", 3, probeCmd{}); out.Disposition != convoy.Parked {
		t.Fatalf("seq 3: %v", out)
	}
	if o, _ = store.Load(context.Background(), "k"); o.Failing() == nil {
		t.Fatalf("a commit that parks forgets why the key waits: %+v", o.Failure)
	}
	// The message, fixed (replayed), goes on, and nothing fails any more.
	if out := process(t, p, "k", 2, probeCmd{}); out.Disposition != convoy.Applied {
		t.Fatalf("seq 2 after the panic: %v", out)
	}
	if o, _ = store.Load(context.Background(), "k"); o.AppliedSeq != 3 || o.Failing() != nil {
		t.Fatalf("after the fix: appliedSeq %d, failing %+v; want 3 and nothing failing", o.AppliedSeq, o.Failing())
	}
}

func TestADecisionOverItsBudgetIsRejectedNamingTheLimit(t *testing.T) {
	p := probeProcessor(memstore.New())
	cases := []struct {
		cmd  probeCmd
		want string
	}{
		{probeCmd{Rows: 3}, "writes 3 rows, more than its budget of 2"},
		{probeCmd{Rows: 2, Bytes: 20 << 10}, "more than its budget of 65536"},
		{probeCmd{Rows: 1, Bytes: 40 << 10}, "takes more than 64 KiB"},
		{probeCmd{StateBytes: 1 << 20}, "more than an entity holds (1 MiB)"},
	}
	for i, c := range cases {
		out := process(t, p, "k", int64(i+1), c.cmd)
		if out.Disposition != convoy.Rejected || !strings.Contains(out.Reason, c.want) {
			t.Errorf("%+v: %v, want rejected for %q", c.cmd, out, c.want)
		}
	}
	if out := process(t, p, "k", int64(len(cases)+1), probeCmd{Rows: 2, Bytes: 100}); out.Disposition != convoy.Applied {
		t.Fatalf("a decision within budget after the rejections: %v", out)
	}
}

func TestAParkedCommandOverItsBudgetIsRejectedInItsTurn(t *testing.T) {
	store := memstore.New()
	p := probeProcessor(store)
	if out := process(t, p, "k", 2, probeCmd{Pad: strings.Repeat("x", 8<<10)}); out.Disposition != convoy.Parked {
		t.Fatalf("seq 2 early: %v", out)
	}
	process(t, p, "k", 3, probeCmd{})
	res, err := probeProcessor(store).Process(context.Background(), "k", []convoy.Message{{Seq: 1, Command: probeCmd{}}})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, out := range res.Outcomes {
		got = append(got, out.String())
	}
	if len(res.Outcomes) != 3 || res.Outcomes[1].Disposition != convoy.Rejected || !strings.Contains(res.Outcomes[1].Reason, "more than the 4096 a parked command may") ||
		res.Outcomes[2].Disposition != convoy.Applied || res.AppliedSeq != 3 {
		t.Fatalf("the drain: %v, appliedSeq %d; want seq 2 rejected for its parked size, seq 3 applied", got, res.AppliedSeq)
	}
}

func TestInsertingARowTheKeyKnowsIsRejected(t *testing.T) {
	p := probeProcessor(memstore.New())
	process(t, p, "k", 1, probeCmd{InsertAgain: true})
	if out := process(t, p, "k", 2, probeCmd{InsertAgain: true}); out.Disposition != convoy.Rejected || !strings.Contains(out.Reason, "row a/1 exists") {
		t.Fatalf("a second insert of a/1: %v", out)
	}
}
