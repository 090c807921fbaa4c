package convoy_test

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/convoy-dev/convoy/handler/convoy"
	"github.com/convoy-dev/convoy/handler/keyed"
	"github.com/convoy-dev/convoy/handler/orders"
)

var t0 = time.Date(2026, 11, 21, 10, 20, 30, 0, time.UTC)

func amt(n int64) *int64 { return &n }

func create(seq int64) convoy.Message {
	return convoy.Message{Seq: seq, Command: orders.Transaction{OrderID: "o-1", Op: orders.CreateOrder, Currency: "EUR"}}
}
func add(seq int64, tx string, n int64) convoy.Message {
	return convoy.Message{Seq: seq, Command: orders.Transaction{OrderID: "o-1", Op: orders.AddTransaction, TxID: tx, Amount: amt(n)}}
}
func modify(seq int64, tx string, n int64) convoy.Message {
	return convoy.Message{Seq: seq, Command: orders.Transaction{OrderID: "o-1", Op: orders.ModifyTransaction, TxID: tx, Amount: amt(n)}}
}
func del(seq int64) convoy.Message {
	return convoy.Message{Seq: seq, Command: orders.Transaction{OrderID: "o-1", Op: orders.DeleteOrder}}
}
func last(m convoy.Message) convoy.Message { m.Last = true; return m }

// receiveAll feeds msgs through the sequence rules, draining after each.
func receiveAll(t testing.TB, o *convoy.Key, msgs ...convoy.Message) []convoy.Outcome {
	t.Helper()
	outs, _ := receiveChange(t, o, msgs...)
	return outs
}

// lookup tells o what the store holds of the rows deciding m needs, as the
// processor does before each decision: o's store holds no rows but those o
// wrote itself, which it knows.
func lookup(o *convoy.Key, m convoy.Message) {
	refs, err := o.Needs(m, false)
	if err != nil {
		panic(err)
	}
	for _, ref := range refs {
		o.Learn(ref, nil, false)
	}
}

// receive is o.Receive of m, after its lookup.
func receive(t testing.TB, o *convoy.Key, m convoy.Message, c *convoy.Change) convoy.Outcome {
	t.Helper()
	lookup(o, m)
	out, err := o.Receive(m, t0, c)
	if err != nil {
		t.Fatalf("seq %d: %v", m.Seq, err)
	}
	return out
}

// drainNext is o.DrainNext, after the lookup of the parked message it decides.
func drainNext(t testing.TB, o *convoy.Key, c *convoy.Change) (convoy.Outcome, bool) {
	t.Helper()
	if m, ok := o.NextParked(); ok {
		lookup(o, m)
	}
	out, ok, err := o.DrainNext(t0, c)
	if err != nil {
		t.Fatalf("drain: %v", err)
	}
	return out, ok
}

// receiveChange is receiveAll, with the change that records its effects.
func receiveChange(t testing.TB, o *convoy.Key, msgs ...convoy.Message) ([]convoy.Outcome, *convoy.Change) {
	t.Helper()
	var outs []convoy.Outcome
	c := &convoy.Change{}
	for _, m := range msgs {
		outs = append(outs, receive(t, o, m, c))
		for {
			out, ok := drainNext(t, o, c)
			if !ok {
				break
			}
			outs = append(outs, out)
		}
	}
	return outs, c
}

// added returns the transactions a change writes (rows of the "t"
// collection, by position), in the order added.
func added(c *convoy.Change) []orders.TxEntry {
	var rows []keyed.Write
	for _, w := range c.Writes {
		if w.Ref.Collection == "t" {
			rows = append(rows, w)
		}
	}
	slices.SortFunc(rows, func(a, b keyed.Write) int { return strings.Compare(a.Ref.ID, b.Ref.ID) })
	var out []orders.TxEntry
	for _, w := range rows {
		out = append(out, orders.EntryOf(w.Props))
	}
	return out
}

func TestFold(t *testing.T) {
	tests := []struct {
		name         string
		msgs         []convoy.Message
		status       orders.Status
		total        int64
		complete     bool
		rejected     map[int64]string // seq → part of the reason
		dispositions string
	}{
		{"contract example", []convoy.Message{create(1), add(2, "t-1", 1250), modify(3, "t-1", 1200)},
			orders.StatusOpen, 1200, false, nil, "applied applied applied"},
		{"add before create", []convoy.Message{add(1, "t-1", 5), create(2)},
			orders.StatusOpen, 0, false, map[int64]string{1: "not open"}, "rejected applied"},
		{"duplicate txId", []convoy.Message{create(1), add(2, "t-1", 5), add(3, "t-1", 7)},
			orders.StatusOpen, 5, false, map[int64]string{3: "already exists"}, "applied applied rejected"},
		{"modify unknown", []convoy.Message{create(1), modify(2, "t-9", 5)},
			orders.StatusOpen, 0, false, map[int64]string{2: "does not exist"}, "applied rejected"},
		{"create twice", []convoy.Message{create(1), create(2)},
			orders.StatusOpen, 0, false, map[int64]string{2: "already created"}, "applied rejected"},
		{"after delete", []convoy.Message{create(1), add(2, "t-1", 5), del(3), add(4, "t-2", 1), del(5)},
			orders.StatusDeleted, 5, false, map[int64]string{4: "not open", 5: "not open"}, "applied applied applied rejected rejected"},
		{"last ends the sequence", []convoy.Message{create(1), last(add(2, "t-1", 5)), add(3, "t-2", 1)},
			orders.StatusOpen, 5, true, map[int64]string{3: convoy.ReasonSequenceComplete}, "applied applied rejected"},
		{"rejected last still completes", []convoy.Message{create(1), last(modify(2, "t-1", 5))},
			orders.StatusOpen, 0, true, map[int64]string{2: "does not exist"}, "applied rejected"},
		{"negative amounts", []convoy.Message{create(1), add(2, "t-1", -300), add(3, "t-2", 100)},
			orders.StatusOpen, -200, false, nil, "applied applied applied"},
		{"total up to 2^53 - 1 exactly", []convoy.Message{create(1), add(2, "a", 1e15), add(3, "b", 1e15), add(4, "c", 1e15),
			add(5, "d", 1e15), add(6, "e", 1e15), add(7, "f", 1e15), add(8, "g", 1e15), add(9, "h", 1e15), add(10, "i", 1e15),
			add(11, "j", 7_199_254_740_991)},
			orders.StatusOpen, 9_007_199_254_740_991, false, nil, "applied applied applied applied applied applied applied applied applied applied applied"},
		{"total beyond 2^53 - 1 by one", []convoy.Message{create(1), add(2, "a", 1e15), add(3, "b", 1e15), add(4, "c", 1e15),
			add(5, "d", 1e15), add(6, "e", 1e15), add(7, "f", 1e15), add(8, "g", 1e15), add(9, "h", 1e15), add(10, "i", 1e15),
			add(11, "j", 7_199_254_740_992), add(12, "k", -5)},
			orders.StatusOpen, 8_999_999_999_999_995, false, map[int64]string{11: "total would be 9007199254740992"},
			"applied applied applied applied applied applied applied applied applied applied rejected applied"},
		{"modify beyond the total, negative side", []convoy.Message{create(1), add(2, "a", -1e15), add(3, "b", -1e15), add(4, "c", -1e15),
			add(5, "d", -1e15), add(6, "e", -1e15), add(7, "f", -1e15), add(8, "g", -1e15), add(9, "h", -1e15), add(10, "i", -1e15),
			add(11, "j", 0), modify(12, "j", -7_199_254_740_992), modify(13, "a", 1e15)},
			orders.StatusOpen, -7_000_000_000_000_000, false, map[int64]string{12: "total would be -9007199254740992"},
			"applied applied applied applied applied applied applied applied applied applied applied rejected applied"},
		{"amount beyond 10^15 never folds in", []convoy.Message{create(1), add(2, "a", 1e15+1), add(3, "b", -1e15-1),
			add(4, "c", 9223372036854775807), add(5, "d", 1)},
			orders.StatusOpen, 1, false, map[int64]string{2: "beyond", 3: "beyond", 4: "beyond"}, "applied rejected rejected rejected applied"},
		{"duplicates and early arrivals", []convoy.Message{add(3, "t-1", 5), create(1), add(3, "t-1", 5), create(1), add(2, "t-0", 1), add(2, "t-0", 1)},
			orders.StatusOpen, 6, false, nil, "parked applied duplicate duplicate applied applied duplicate"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o, _ := convoy.NewKey("o-1").Bind(orders.Domain)
			outs, c := receiveChange(t, o, tt.msgs...)
			var disp []string
			for _, out := range outs {
				disp = append(disp, string(out.Disposition))
			}
			if got := strings.Join(disp, " "); got != tt.dispositions {
				t.Errorf("dispositions %q, want %q", got, tt.dispositions)
			}
			if s := orders.StateOf(o); s.Status != tt.status || s.Total != tt.total || o.Complete != tt.complete {
				t.Errorf("status %s total %d complete %v; want %s %d %v", s.Status, s.Total, o.Complete, tt.status, tt.total, tt.complete)
			}
			if len(c.Rejections) != len(tt.rejected) {
				t.Fatalf("rejected %+v, want seqs %v", c.Rejections, tt.rejected)
			}
			sum := int64(0)
			for _, r := range added(c) {
				sum += r.Amount
			}
			if total := orders.StateOf(o).Total; sum != total {
				t.Errorf("the transactions written total %d, the head says %d", sum, total)
			}
			for _, r := range c.Rejections {
				if want, ok := tt.rejected[r.Seq]; !ok || !strings.Contains(r.Reason, want) {
					t.Errorf("rejection %+v, want reason containing %q", r, want)
				}
			}
		})
	}
}

func TestParkedDrainInOrder(t *testing.T) {
	o, _ := convoy.NewKey("o-1").Bind(orders.Domain)
	receiveAll(t, o, add(4, "t-3", 3), add(2, "t-1", 1), add(3, "t-2", 2))
	if len(o.Parked) != 3 || o.MissingSeq() != 1 || !o.BlockedSince.Equal(t0) {
		t.Fatalf("after three early messages: parked %d missing %d blockedSince %v", len(o.Parked), o.MissingSeq(), o.BlockedSince)
	}
	outs, c := receiveChange(t, o, create(1))
	var seqs []int64
	for _, out := range outs {
		seqs = append(seqs, out.Seq)
	}
	if len(seqs) != 4 || seqs[0] != 1 || seqs[1] != 2 || seqs[2] != 3 || seqs[3] != 4 || !outs[3].Drained {
		t.Fatalf("drain order %v (%+v), want 1 2 3 4", seqs, outs)
	}
	if len(o.Parked) != 0 || !o.BlockedSince.IsZero() || o.AppliedSeq != 4 {
		t.Fatalf("after drain: %+v", o)
	}
	if txs := added(c); len(txs) != 3 || txs[0].TxID != "t-1" || txs[2].TxID != "t-3" || orders.StateOf(o).TxCount != 3 {
		t.Fatalf("transactions not in application order: %+v", txs)
	}
}

func TestSkip(t *testing.T) {
	o, _ := convoy.NewKey("o-1").Bind(orders.Domain)
	receiveAll(t, o, create(1), add(3, "t-2", 2), add(4, "t-3", 3))
	var c convoy.Change
	if err := o.Skip(3, t0, &c); err == nil {
		t.Fatal("skipping a parked seq succeeded")
	}
	if err := o.Skip(2, t0, &c); err != nil {
		t.Fatal(err)
	}
	for {
		if _, ok := drainNext(t, o, &c); !ok {
			break
		}
	}
	if o.AppliedSeq != 4 || orders.StateOf(o).Total != 5 || len(c.Rejections) != 1 || c.Rejections[0].Reason != convoy.ReasonSkipped {
		t.Fatalf("after skip: %+v", o)
	}
	if err := o.Skip(5, t0, &c); err == nil {
		t.Fatal("skipping when nothing is parked succeeded")
	}
}

func TestView(t *testing.T) {
	o, _ := convoy.NewKey("o-1").Bind(orders.Domain)
	receiveAll(t, o, create(1), add(2, "t-1", 1250), modify(3, "t-1", 1200), modify(4, "t-2", 1), add(6, "t-3", 1))
	v := orders.ViewOf(convoy.View{Order: o}) // the head: the history is the store's (ReadView)
	if v.OrderID != "o-1" || v.Status != "open" || v.Currency != "EUR" || v.AppliedSeq != 4 || v.Parked != 1 ||
		v.MissingSeq != 5 || v.Total != 1200 || len(v.Transactions) != 0 || len(v.Rejected) != 0 ||
		v.UpdatedAt != "2026-11-21T10:20:30Z" || v.BlockedSince != "2026-11-21T10:20:30Z" {
		t.Fatalf("view %+v", v)
	}
	o2, _ := convoy.NewKey("o-2").Bind(orders.Domain)
	empty := orders.ViewOf(convoy.View{Order: o2})
	if empty.Transactions == nil || empty.Rejected == nil {
		t.Fatal("empty lists must encode as [] not null")
	}
}

// TestReceiveOfAParkedNextSeqIsADuplicate (issue 42, item 1): when the next
// seq is parked (its drain was cut), receiving another copy of it changes
// nothing; DrainNext applies the parked one, whose row it consumes.
func TestReceiveOfAParkedNextSeqIsADuplicate(t *testing.T) {
	o, _ := convoy.NewKey("o-1").Bind(orders.Domain)
	receiveAll(t, o, create(1))
	c := &convoy.Change{}
	receive(t, o, add(3, "t-3", 5), c)
	receive(t, o, add(2, "t-2", 7), c) // applied; 3 is now next, parked: a cut drain
	if _, cut := o.NextParked(); !cut {
		t.Fatal("the setup left no parked next seq")
	}
	if out := receive(t, o, add(3, "t-3", 5), c); out.Disposition != convoy.Duplicate {
		t.Fatalf("a copy of the parked next seq: %v, want duplicate", out)
	}
	out, ok := drainNext(t, o, c)
	if total := orders.StateOf(o).Total; !ok || out.Disposition != convoy.Applied || o.AppliedSeq != 3 || o.ParkedCount != 0 || total != 12 {
		t.Fatalf("the drain: %v %v; appliedSeq %d, %d parked, total %d; want 3, 0, 12", out, ok, o.AppliedSeq, o.ParkedCount, total)
	}
	if len(c.Park) != 0 || len(c.Unpark) != 0 {
		t.Fatalf("seq 3 parked and drained in one change leaves rows: park %v, unpark %v", c.Park, c.Unpark)
	}
}
