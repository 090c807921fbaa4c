// Package keyedtest tests a domain's rules (keyed.Rules) without a host or
// Azure, from a team's own module: Conformance checks the contract a domain
// signs (docs/rules.md), Simulate runs the real engine on an in-memory store
// under the faults Service Bus and Table Storage inflict and compares every
// key with the team's own fold.
package keyedtest

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/convoy-dev/convoy/handler/keyed"
)

// Generator returns the commands of one key, in seq order (seq 1 first),
// drawn from rng: the same rng state gives the same commands.
type Generator[C any] func(rng *rand.Rand, key string) []C

// Options tune Conformance and Simulate; the zero value works.
type Options struct {
	Seeds     int   // seeds to run; default 200 for Conformance, 30 for Simulate
	FirstSeed int64 // the first seed; default 1
	// Duration, if set, runs seeds from FirstSeed on until it has passed
	// (a soak), Seeds ignored.
	Duration time.Duration
	// OldStates are states as releases before this one wrote them: each
	// must decode (keyed.Rules.DecodeState of its version), and encode again
	// at the current version.
	OldStates []OldState
}

// OldState is a state as stored by an older version of the rules.
type OldState struct {
	Version int
	Props   keyed.Props
}

// run calls one with each seed the options name, until it fails.
func (o Options) run(t testing.TB, def int, one func(seed int64) error) {
	t.Helper()
	first, n := o.FirstSeed, o.Seeds
	if first == 0 {
		first = 1
	}
	if n <= 0 {
		n = def
	}
	end := time.Now().Add(o.Duration)
	seed := first
	for ; o.Duration > 0 && time.Now().Before(end) || o.Duration <= 0 && seed < first+int64(n); seed++ {
		if err := one(seed); err != nil {
			t.Fatalf("seed %d: %v (rerun with keyedtest.Options{FirstSeed: %d, Seeds: 1})", seed, err, seed)
		}
	}
	if o.Duration > 0 {
		t.Logf("seeds %d to %d passed", first, seed-1)
	}
}

// Conformance checks that r keeps the contract of docs/rules.md on the
// commands gen makes, folded in seq order through its own Decide:
//   - a decision is deterministic: deciding the same command on the same
//     state and rows twice gives the same state, writes and error;
//   - it reads only rows its Needs named;
//   - it stays within its Budget and Table Storage's limits (else the engine
//     would reject it, naming the limit);
//   - its state survives EncodeState/DecodeState, its commands
//     EncodeCommand/DecodeCommand (parked) and, when the rules are a
//     keyed.Publisher, Body/ReadCommand, each compared as values; Tag of any
//     command and of the zero one can be stored;
//   - every OldStates entry decodes and encodes again;
//   - a keyed.Viewer's view is JSON, and History counts the rows its
//     positional collection holds.
func Conformance[S, C any](t testing.TB, r keyed.Rules[S, C], gen Generator[C], opts Options) {
	t.Helper()
	for i, old := range opts.OldStates {
		s, err := r.DecodeState(old.Version, old.Props)
		if err != nil {
			t.Fatalf("old state %d (version %d) does not decode: %v", i, old.Version, err)
		}
		if err := r.EncodeState(s).Check(); err != nil {
			t.Fatalf("old state %d (version %d), upgraded, does not encode: %v", i, old.Version, err)
		}
	}
	if err := r.Tag(*new(C)).Check(); err != nil {
		t.Fatalf("Tag of the zero command (a skipped seq) cannot be stored: %v", err)
	}
	opts.run(t, 200, func(seed int64) error { return conform(r, gen, seed) })
}

// conform folds one key's commands of seed, checking each decision.
func conform[S, C any](r keyed.Rules[S, C], gen Generator[C], seed int64) error {
	rng := rand.New(rand.NewPCG(uint64(seed), 0x6b657965))
	key := fmt.Sprintf("k-%d", seed)
	s, err := r.DecodeState(r.Version(), nil)
	if err != nil {
		return fmt.Errorf("a new key's state (no properties) does not decode: %w", err)
	}
	rows := table{}
	for i, c := range gen(rng, key) {
		seq := i + 1
		if err := r.EncodeCommand(c).Check(); err != nil {
			return fmt.Errorf("seq %d: the command cannot be parked: %w", seq, err)
		}
		back, err := r.DecodeCommand(key, r.EncodeCommand(c))
		if err != nil {
			return fmt.Errorf("seq %d: the parked command does not decode: %w", seq, err)
		}
		if !reflect.DeepEqual(back, c) {
			return fmt.Errorf("seq %d: the parked command decodes to %+v, not %+v", seq, back, c)
		}
		// A command that has a body (one the publisher would send; a
		// generator may make others, to try Decide's own checks) reads back
		// from it as itself.
		if p, ok := any(r).(keyed.Publisher[C]); ok {
			if body, err := p.Body(c); err == nil {
				read, err := r.ReadCommand(key, body)
				if err != nil || !reflect.DeepEqual(read, c) {
					return fmt.Errorf("seq %d: the command's body %s reads back as %+v (%v), not %+v", seq, body, read, err, c)
				}
			}
		}
		if err := r.Tag(c).Check(); err != nil {
			return fmt.Errorf("seq %d: its Tag cannot be stored: %w", seq, err)
		}
		needs := r.Needs(s, c)
		seen := rows.seen(needs)
		next, writes, err := r.Decide(s, c, seen)
		again, writes2, err2 := r.Decide(s, c, rows.seen(needs))
		if !reflect.DeepEqual(next, again) || !reflect.DeepEqual(writes, writes2) || fmt.Sprint(err) != fmt.Sprint(err2) {
			return fmt.Errorf("seq %d: Decide is not deterministic: (%+v, %v, %v) then (%+v, %v, %v)", seq, next, writes, err, again, writes2, err2)
		}
		if len(seen.outside) > 0 {
			return fmt.Errorf("seq %d: Decide read %v, which its Needs did not name", seq, seen.outside)
		}
		if _, rejected := keyed.RejectionReason(err); rejected {
			continue
		}
		if err != nil {
			return fmt.Errorf("seq %d: Decide failed (the message would be retried, then dead-lettered): %w", seq, err)
		}
		if why := withinBudget(r.Budget(), writes); why != "" {
			return fmt.Errorf("seq %d: %s (the engine would reject it)", seq, why)
		}
		for _, w := range writes {
			if err := rows.write(w); err != nil {
				return fmt.Errorf("seq %d: %w (the commit would fail)", seq, err)
			}
		}
		p := r.EncodeState(next)
		if err := p.Check(); err != nil {
			return fmt.Errorf("seq %d: the state cannot be stored: %w", seq, err)
		}
		if p.Size() > keyed.MaxRowSize/2 {
			return fmt.Errorf("seq %d: the state takes %d bytes, more than half of an entity's 1 MiB", seq, p.Size())
		}
		back2, err := r.DecodeState(r.Version(), p)
		if err != nil {
			return fmt.Errorf("seq %d: the state does not decode: %w", seq, err)
		}
		if !reflect.DeepEqual(back2, next) {
			return fmt.Errorf("seq %d: the state %+v is stored and decoded as %+v", seq, next, back2)
		}
		s = back2
		if err := viewable(r, key, int64(seq), s, rows); err != nil {
			return fmt.Errorf("seq %d: %w", seq, err)
		}
	}
	return nil
}

// viewable checks a keyed.Viewer's view of s: it is JSON, and the count
// History gives of its positional collection is the rows appended to it.
func viewable[S, C any](r keyed.Rules[S, C], key string, seq int64, s S, rows table) error {
	v, ok := any(r).(keyed.Viewer[S])
	if !ok {
		return nil
	}
	if _, err := json.Marshal(v.View(keyed.Head{ID: key, AppliedSeq: seq}, s, keyed.Page{})); err != nil {
		return fmt.Errorf("the view is not JSON: %w", err)
	}
	coll, count := v.History(s)
	if coll == "" {
		return nil
	}
	n := int64(0)
	for ref := range rows {
		if ref.Collection == coll {
			n++
		}
	}
	if n != count {
		return fmt.Errorf("the view's History says %s holds %d rows; the decisions appended %d", coll, count, n)
	}
	return nil
}

// withinBudget returns why writes break budget b (or the engine's limits), or "".
func withinBudget(b keyed.Budget, writes keyed.Writes) string {
	if b == (keyed.Budget{}) {
		b = keyed.DefaultBudget
	}
	if len(writes) > min(b.Writes, keyed.MaxWrites) {
		return fmt.Sprintf("the decision writes %d rows, more than its budget of %d", len(writes), b.Writes)
	}
	bytes := 0
	for _, w := range writes {
		bytes += w.Props.WireSize()
		if err := w.Props.Check(); err != nil {
			return fmt.Sprintf("row %s/%s: %v", w.Ref.Collection, w.Ref.ID, err)
		}
	}
	if bytes > min(b.Bytes, keyed.MaxBytes) {
		return fmt.Sprintf("the decision writes %d bytes, more than its budget of %d", bytes, b.Bytes)
	}
	return ""
}

// table is one key's rows, as a commit leaves them.
type table map[keyed.RowRef]keyed.Props

func (t table) write(w keyed.Write) error {
	_, exists := t[w.Ref]
	switch {
	case w.Insert && exists:
		return fmt.Errorf("it inserts row %s/%s, which exists", w.Ref.Collection, w.Ref.ID)
	case !w.Insert && !exists:
		return fmt.Errorf("it merges into row %s/%s, which does not exist", w.Ref.Collection, w.Ref.ID)
	}
	t[w.Ref] = t[w.Ref].Merge(w.Props)
	return nil
}

// seen is the rows a decision sees: those its Needs named, and a record of
// any other it asked for.
func (t table) seen(n keyed.Needs) *seenRows {
	return &seenRows{t: t, named: slices.Concat(n.Read, n.Absent)}
}

type seenRows struct {
	t       table
	named   []keyed.RowRef
	outside []keyed.RowRef
}

func (s *seenRows) Get(ref keyed.RowRef) (keyed.Props, bool) {
	if !slices.Contains(s.named, ref) {
		s.outside = append(s.outside, ref)
		return nil, false
	}
	p, ok := s.t[ref]
	return p, ok
}
