package replay_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/convoy-dev/convoy/handler/convoy"
	"github.com/convoy-dev/convoy/handler/fault"
	"github.com/convoy-dev/convoy/handler/internal/ledgertest"
	"github.com/convoy-dev/convoy/handler/replay"
)

// fakeDLQ is a dead-letter sub-queue with peek-lock and injected failures.
// Locks are per run: a message locked by one run is invisible to the others
// (as with real receivers), and only the run holding it can settle it. Each
// receive of a message locks it anew (its Handle is that lock); a lock can
// be made to expire (expire), and then settles nothing, as on Service Bus.
type fakeDLQ struct {
	mu           sync.Mutex
	msgs         map[int64]replay.DeadLetter // by sequence number
	locked       map[int64]*lock             // by sequence number: its current lock
	failComplete func(replay.DeadLetter) bool
	completed    []int64
	def          *run // the reader the fakeDLQ's own methods use
}

// lock is one receive's lock on a message: the Handle of what it returned.
type lock struct{ r *run }

// run is one reader of a fakeDLQ; beforePeek, if set, is called once before
// the run's first peek (to hold it there while another run goes);
// beforeReceive, if set, before each of its receives (the first is call 0).
type run struct {
	q             *fakeDLQ
	beforePeek    func()
	peeked        bool
	beforeReceive func(call int)
	receives      int
	batch         int // when set, a receive returns at most this many (fewer than asked, as a real one may)
}

func newDLQ(msgs ...replay.DeadLetter) *fakeDLQ {
	q := &fakeDLQ{msgs: map[int64]replay.DeadLetter{}, locked: map[int64]*lock{}}
	q.def = q.reader()
	for _, m := range msgs {
		q.msgs[m.SequenceNumber] = m
	}
	return q
}

// reader returns a new reader; the fakeDLQ itself is a reader of its own.
func (q *fakeDLQ) reader() *run { return &run{q: q} }

func (q *fakeDLQ) Receive(ctx context.Context, max int) ([]replay.DeadLetter, error) {
	return q.self().Receive(ctx, max)
}
func (q *fakeDLQ) Peek(ctx context.Context, from int64, max int) ([]replay.DeadLetter, error) {
	return q.self().Peek(ctx, from, max)
}
func (q *fakeDLQ) Complete(ctx context.Context, m replay.DeadLetter) error {
	return q.self().Complete(ctx, m)
}
func (q *fakeDLQ) Abandon(ctx context.Context, m replay.DeadLetter) error {
	return q.self().Abandon(ctx, m)
}

func (q *fakeDLQ) self() *run { return q.def }

func (q *fakeDLQ) sorted() []int64 {
	var seqs []int64
	for s := range q.msgs {
		seqs = append(seqs, s)
	}
	sort.Slice(seqs, func(a, b int) bool { return seqs[a] < seqs[b] })
	return seqs
}

// expire drops every lock r holds, as Service Bus does when a lock outlives
// the queue's LockDuration: the messages can be received again (under a new
// lock), and the lost lock settles nothing.
func (q *fakeDLQ) expire(r *run) {
	q.mu.Lock()
	defer q.mu.Unlock()
	for s, l := range q.locked {
		if l.r == r {
			delete(q.locked, s)
		}
	}
}

// holds reports whether m's Handle is the current lock on m and r's.
func (q *fakeDLQ) holds(r *run, m replay.DeadLetter) bool {
	l, ok := m.Handle.(*lock)
	return ok && l.r == r && q.locked[m.SequenceNumber] == l
}

func (r *run) Receive(_ context.Context, max int) ([]replay.DeadLetter, error) {
	if r.beforeReceive != nil {
		r.beforeReceive(r.receives)
	}
	r.receives++
	q := r.q
	q.mu.Lock()
	defer q.mu.Unlock()
	if r.batch > 0 {
		max = min(max, r.batch)
	}
	var out []replay.DeadLetter
	for _, s := range q.sorted() {
		if len(out) == max {
			break
		}
		if q.locked[s] == nil {
			l := &lock{r: r}
			q.locked[s] = l
			m := q.msgs[s]
			m.Handle = l
			out = append(out, m)
		}
	}
	return out, nil
}

func (r *run) Peek(_ context.Context, from int64, max int) ([]replay.DeadLetter, error) {
	if !r.peeked && r.beforePeek != nil {
		r.beforePeek()
	}
	r.peeked = true
	q := r.q
	q.mu.Lock()
	defer q.mu.Unlock()
	var out []replay.DeadLetter
	for _, s := range q.sorted() {
		if s >= from && len(out) < max {
			out = append(out, q.msgs[s])
		}
	}
	return out, nil
}

func (r *run) Complete(_ context.Context, m replay.DeadLetter) error {
	q := r.q
	q.mu.Lock()
	defer q.mu.Unlock()
	if !q.holds(r, m) {
		return errors.New("lock lost")
	}
	if q.failComplete != nil && q.failComplete(m) {
		return fault.Errorf(fault.Unavailable, "lock lost")
	}
	delete(q.msgs, m.SequenceNumber)
	delete(q.locked, m.SequenceNumber)
	q.completed = append(q.completed, m.SequenceNumber)
	return nil
}

func (r *run) Abandon(_ context.Context, m replay.DeadLetter) error {
	q := r.q
	q.mu.Lock()
	defer q.mu.Unlock()
	if !q.holds(r, m) {
		return errors.New("lock lost")
	}
	delete(q.locked, m.SequenceNumber)
	return nil
}

func (q *fakeDLQ) endRun(t *testing.T) {
	t.Helper()
	q.mu.Lock()
	defer q.mu.Unlock()
	if len(q.locked) != 0 {
		t.Fatalf("%d dead letters left locked after the run", len(q.locked))
	}
}

func dead(qseq int64, order string, seq any) replay.DeadLetter {
	props := map[string]any{"ledgerId": "L-1"}
	if seq != nil {
		props["seq"] = seq
	}
	return replay.DeadLetter{SequenceNumber: qseq, MessageID: fmt.Sprintf("L-1:%d", qseq), SessionID: order, Properties: props,
		Body: []byte(fmt.Sprintf(`{"transaction":{"orderId":%q,"op":"DeleteOrder"}}`, order)), Reason: "MaxDeliveryCountExceeded"}
}

func TestReplayInSeqOrder(t *testing.T) {
	ctx := context.Background()
	q := newDLQ(dead(40, "o-1", int64(7)), dead(10, "o-2", int64(3)), dead(30, "o-1", float64(5)), dead(20, "o-1", nil), dead(50, "o-1", "6"))
	sender := &ledgertest.Sender{}
	rep, err := replay.Order(ctx, q, sender, "o-1", replay.Options{})
	if err != nil {
		t.Fatal(err)
	}
	q.endRun(t)
	var seqs []int64
	for _, m := range sender.Messages() {
		seqs = append(seqs, m.Seq)
		if m.SessionID != "o-1" || m.LedgerID != "L-1" || m.MessageID == "" {
			t.Fatalf("replayed %+v", m)
		}
	}
	if fmt.Sprint(seqs) != "[5 6 7]" || len(rep.Replayed) != 3 || rep.Scanned != 5 {
		t.Fatalf("replayed seqs %v, report %+v", seqs, rep)
	}
	if len(rep.Unplaceable) != 1 || rep.Unplaceable[0] != "L-1:20" {
		t.Fatalf("unplaceable %v, want the message without seq", rep.Unplaceable)
	}
	if _, ok := q.msgs[10]; !ok {
		t.Fatal("another order's dead letter was consumed")
	}
	if _, ok := q.msgs[20]; !ok {
		t.Fatal("the unplaceable dead letter was consumed")
	}
	again, err := replay.Order(ctx, q, sender, "o-1", replay.Options{})
	if err != nil || len(again.Replayed) != 0 || len(sender.Messages()) != 3 {
		t.Fatalf("a second replay: %+v, %v, %d sent in all", again, err, len(sender.Messages()))
	}
}

// TestReplayPartialFailure: the re-send fails half-way, then a completion
// fails after its re-send; replaying again finishes the job. Every dead
// letter ends completed exactly once, and every re-sent copy of one dead
// letter carries the same MessageId (the queue drops the duplicate).
func TestReplayPartialFailure(t *testing.T) {
	ctx := context.Background()
	var all []replay.DeadLetter
	for i := range 8 {
		all = append(all, dead(int64(100+i), "o-1", int64(i+1)))
	}
	q := newDLQ(all...)
	sends := 0
	sender := &ledgertest.Sender{Fail: func(op string) error {
		if op == "send" {
			sends++
			if sends == 4 {
				return fault.Errorf(fault.Unavailable, "namespace unreachable")
			}
		}
		return nil
	}}
	rep, err := replay.Order(ctx, q, sender, "o-1", replay.Options{})
	q.endRun(t)
	if err == nil || len(rep.Replayed) != 3 || len(q.msgs) != 5 {
		t.Fatalf("after a failed re-send: %v, %d replayed, %d still dead-lettered", err, len(rep.Replayed), len(q.msgs))
	}
	q.failComplete = func(m replay.DeadLetter) bool { return m.SequenceNumber == 105 }
	rep, err = replay.Order(ctx, q, sender, "o-1", replay.Options{})
	q.endRun(t)
	if err == nil || len(rep.Replayed) != 2 || len(q.msgs) != 3 {
		t.Fatalf("after a failed completion: %v, %+v, %d still dead-lettered", err, rep, len(q.msgs))
	}
	q.failComplete = nil
	rep, err = replay.Order(ctx, q, sender, "o-1", replay.Options{})
	q.endRun(t)
	if err != nil || len(q.msgs) != 0 {
		t.Fatalf("the last replay: %v, %d still dead-lettered", err, len(q.msgs))
	}
	bySeq := map[int64]map[string]bool{}
	for _, m := range sender.Messages() {
		if bySeq[m.Seq] == nil {
			bySeq[m.Seq] = map[string]bool{}
		}
		bySeq[m.Seq][m.MessageID] = true
	}
	for seq := int64(1); seq <= 8; seq++ {
		if len(bySeq[seq]) != 1 {
			t.Fatalf("seq %d was re-sent under %d MessageIds, want exactly 1: %v", seq, len(bySeq[seq]), bySeq[seq])
		}
	}
	seen := map[int64]bool{}
	for _, s := range q.completed {
		if seen[s] {
			t.Fatalf("dead letter %d completed twice", s)
		}
		seen[s] = true
	}
	if len(seen) != 8 {
		t.Fatalf("%d dead letters completed, want 8", len(seen))
	}
}

var _ convoy.Sender = (*ledgertest.Sender)(nil)

// orders is an OrderReader with fixed appliedSeqs.
type orders map[string]int64

func (o orders) Load(_ context.Context, id string) (*convoy.Key, error) {
	return &convoy.Key{ID: id, AppliedSeq: o[id]}, nil
}

// TestReplayScanLimit: more dead letters than one scan receives. When the
// order's own lie beyond the limit, the report says so (not "nothing to
// replay") and nothing stays locked; when they all lie within it, the
// replay is complete although the limit was reached.
func TestReplayScanLimit(t *testing.T) {
	ctx := context.Background()
	var all []replay.DeadLetter
	for i := range 6 {
		all = append(all, dead(int64(10+i), fmt.Sprintf("other-%d", i), int64(1)))
	}
	all = append(all, dead(20, "late", int64(1)), dead(21, "late", int64(2)), dead(5, "early", int64(4)))
	q := newDLQ(all...)
	sender := &ledgertest.Sender{}
	rep, err := replay.Order(ctx, q, sender, "late", replay.Options{MaxScan: 3})
	q.endRun(t)
	if err != nil {
		t.Fatal(err)
	}
	inc := rep.Incomplete
	if inc == nil || !inc.ScanLimitReached || inc.NotReceived != 2 || inc.LockedElsewhere() || len(rep.Replayed) != 0 || rep.Scanned != 3 {
		t.Fatalf("report %+v (incomplete %+v), want the scan limit reached with 2 of the order's dead letters beyond it", rep, inc)
	}
	if inc.Reason == "" || len(sender.Messages()) != 0 {
		t.Fatalf("reason %q, %d sent", inc.Reason, len(sender.Messages()))
	}
	rep, err = replay.Order(ctx, q, sender, "early", replay.Options{MaxScan: 3})
	q.endRun(t)
	if err != nil || rep.Incomplete != nil || len(rep.Replayed) != 1 {
		t.Fatalf("an order within the limit: %+v, %v; want it replayed and complete", rep, err)
	}
}

// TestTwoReplaysAtOnce: a replay of o-1 receives every dead letter, gives
// o-2's back as soon as its scan is over and holds its own until it is
// done. Meanwhile a replay of o-2 replays o-2's, and a second replay of o-1
// does not answer "nothing to replay" but reports o-1's locked elsewhere;
// run again after the first, it finds nothing left. Nothing is lost or
// doubled.
func TestTwoReplaysAtOnce(t *testing.T) {
	ctx := context.Background()
	q := newDLQ(dead(1, "o-1", int64(1)), dead(2, "o-2", int64(1)), dead(3, "o-1", int64(2)), dead(4, "o-2", int64(2)))
	sender := &ledgertest.Sender{}
	first := q.reader()
	hold, resume := make(chan struct{}), make(chan struct{})
	var held atomic.Bool
	sender.Fail = func(string) error { // the first replay's first re-send waits
		if held.CompareAndSwap(false, true) {
			close(hold)
			<-resume
		}
		return nil
	}
	var wg sync.WaitGroup
	var repA replay.Report
	var errA error
	wg.Go(func() { repA, errA = replay.Order(ctx, first, sender, "o-1", replay.Options{}) })
	select { // o-1's replay has scanned: it holds o-1's two
	case <-hold:
	case <-time.After(5 * time.Second):
		t.Fatal("the first replay never re-sent")
	}
	repB, err := replay.Order(ctx, q.reader(), sender, "o-2", replay.Options{})
	if err != nil || repB.Incomplete != nil || len(repB.Replayed) != 2 {
		t.Fatalf("o-2 while o-1's replay runs: %+v, %v; want o-2's two replayed (o-1's replay gave them back)", repB, err)
	}
	again, err := replay.Order(ctx, q.reader(), sender, "o-1", replay.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if inc := again.Incomplete; inc == nil || !inc.LockedElsewhere() || inc.NotReceived != 2 || len(again.Replayed) != 0 {
		t.Fatalf("o-1 while o-1's replay holds its dead letters: %+v (incomplete %+v), want 2 locked elsewhere", again, inc)
	}
	close(resume)
	wg.Wait()
	if errA != nil || repA.Incomplete != nil || len(repA.Replayed) != 2 {
		t.Fatalf("o-1: %+v, %v", repA, errA)
	}
	again, err = replay.Order(ctx, q.reader(), sender, "o-1", replay.Options{})
	q.endRun(t)
	if err != nil || again.Incomplete != nil || len(again.Replayed) != 0 || len(q.msgs) != 0 || len(sender.Messages()) != 4 {
		t.Fatalf("o-1 again: %+v, %v; %d left, %d sent", again, err, len(q.msgs), len(sender.Messages()))
	}
}

// TestDuplicatesAndUnplaceable: with the orders' state, a dead letter whose
// seq the order applied is completed without a re-send; one past
// MaxParkAhead stays dead-lettered as unplaceable.
func TestDuplicatesAndUnplaceable(t *testing.T) {
	ctx := context.Background()
	// Applied seq 5: 3 and 5 are duplicates; 6 and 5+MaxParkAhead (the
	// farthest a message may park ahead) are replayed; one further is not.
	q := newDLQ(dead(1, "o-1", int64(3)), dead(2, "o-1", int64(6)), dead(3, "o-1", int64(5+convoy.MaxParkAhead+1)),
		dead(4, "o-1", int64(5)), dead(5, "o-1", int64(5+convoy.MaxParkAhead)))
	sender := &ledgertest.Sender{}
	rep, err := replay.Order(ctx, q, sender, "o-1", replay.Options{Orders: orders{"o-1": 5}})
	q.endRun(t)
	if err != nil {
		t.Fatal(err)
	}
	var d, r []int64
	for _, e := range rep.Duplicates {
		d = append(d, e.Seq)
	}
	for _, e := range rep.Replayed {
		r = append(r, e.Seq)
	}
	slices.Sort(d)
	slices.Sort(r)
	if !slices.Equal(d, []int64{3, 5}) ||
		!slices.Equal(r, []int64{6, 5 + convoy.MaxParkAhead}) || len(rep.Unplaceable) != 1 || len(sender.Messages()) != 2 {
		t.Fatalf("duplicates %v, replayed %v, report %+v, %d sent", d, r, rep, len(sender.Messages()))
	}
	if _, ok := q.msgs[3]; !ok || len(q.msgs) != 1 {
		t.Fatalf("left dead-lettered: %v, want only the unplaceable one", q.msgs)
	}
}

// TestReplayIDBounded: the MessageId of a replay, of a replay of that
// replay and so on stays within 128 characters and keeps its root, even for
// the longest ledger ids and sequence numbers; distinct copies get distinct ids.
func TestReplayIDBounded(t *testing.T) {
	long := strings.Repeat("L", 100) + ":199999"
	ids := map[string]bool{}
	for _, start := range []string{"L-1:3", long, strings.Repeat("é", 80)} {
		id := start
		for i := range 5 {
			seq := int64(math.MaxInt64 - i)
			if i%2 == 1 {
				seq = int64(i + 1)
			}
			next := replay.ReplayID(replay.DeadLetter{MessageID: id, SequenceNumber: seq})
			if len(next) > replay.MaxMessageIDLength || !utf8.ValidString(next) {
				t.Fatalf("replay %d of %q: %q (%d characters)", i+1, start, next, len(next))
			}
			if !strings.HasSuffix(next, fmt.Sprintf("#replay-%d", seq)) || strings.Count(next, "#replay-") != 1 {
				t.Fatalf("replay %d of %q: %q, want one #replay-<sequence number> suffix", i+1, start, next)
			}
			if again := replay.ReplayID(replay.DeadLetter{MessageID: id, SequenceNumber: seq}); again != next {
				t.Fatalf("not deterministic: %q, %q", next, again)
			}
			if ids[next] {
				t.Fatalf("%q issued twice", next)
			}
			ids[next] = true
			id = next
		}
	}
	if got := replay.ReplayID(replay.DeadLetter{MessageID: "L-1:3#replay-17", SequenceNumber: 45}); got != "L-1:3#replay-45" {
		t.Fatalf("a replay of a replay: %q, want L-1:3#replay-45", got)
	}
}

// TestReplaySelect: dead letters Options.Select does not choose stay
// dead-lettered, unlocked, listed under Left; the chosen ones are re-sent.
func TestReplaySelect(t *testing.T) {
	ctx := context.Background()
	poison := dead(2, "o-1", int64(4))
	poison.Reason = "Poisoned"
	q := newDLQ(dead(1, "o-1", int64(3)), poison, dead(3, "o-1", int64(5)))
	sender := &ledgertest.Sender{}
	rep, err := replay.Order(ctx, q, sender, "o-1", replay.Options{Select: func(m replay.DeadLetter) bool { return m.Reason != "Poisoned" }})
	q.endRun(t)
	if err != nil {
		t.Fatal(err)
	}
	var seqs []int64
	for _, m := range sender.Messages() {
		seqs = append(seqs, m.Seq)
	}
	if fmt.Sprint(seqs) != "[3 5]" || len(rep.Left) != 1 || rep.Left[0] != poison.MessageID {
		t.Fatalf("re-sent seqs %v, report %+v", seqs, rep)
	}
	if _, ok := q.msgs[2]; !ok || len(q.msgs) != 1 {
		t.Fatalf("left dead-lettered: %v, want only the one not selected", q.msgs)
	}
}

// expiring returns a reader of q whose locks expire before its receive
// number from (0 is the first), and before every later one too when every
// is set: what it received comes back from its next receive under new locks.
func expiring(q *fakeDLQ, from int, every bool) *run {
	r := q.reader()
	r.beforeReceive = func(call int) {
		if call == from || every && call > from {
			q.expire(r)
		}
	}
	return r
}

// sentOnce fails unless the dead letters with sequence numbers want were
// each completed once and re-sent once, and nothing else was.
func sentOnce(t *testing.T, q *fakeDLQ, sender *ledgertest.Sender, want ...int64) {
	t.Helper()
	completed := slices.Clone(q.completed)
	slices.Sort(completed)
	if !slices.Equal(completed, want) {
		t.Fatalf("completed dead letters %v, want %v once each", q.completed, want)
	}
	var ids []string
	for _, m := range sender.Messages() {
		ids = append(ids, m.MessageID)
	}
	slices.Sort(ids)
	var wantIDs []string
	for _, s := range want {
		wantIDs = append(wantIDs, fmt.Sprintf("L-1:%d#replay-%d", s, s))
	}
	if !slices.Equal(ids, wantIDs) {
		t.Fatalf("re-sent %v, want %v once each", ids, wantIDs)
	}
}

// TestReplayLockExpired: a run holds its dead letters longer than the lock
// duration, so what it received comes back from its next receive under a
// new lock. Each such dead letter is replayed once, completed with its
// newest lock (the fake refuses a lost one), counted once, and the scan
// stops there, even when every receive brings back expired ones; the other
// order's dead letter is released with its newest lock (endRun).
func TestReplayLockExpired(t *testing.T) {
	for _, tc := range []struct {
		name     string
		every    bool
		batch    int
		msgs     []replay.DeadLetter
		want     []int64 // completed and re-sent
		scanned  int
		notRecvd int // the order's dead letters the run did not receive
	}{
		{name: "once", msgs: []replay.DeadLetter{dead(1, "o-1", int64(1)), dead(2, "o-2", int64(1)), dead(3, "o-1", int64(2))},
			want: []int64{1, 3}, scanned: 3},
		{name: "before every receive", every: true, msgs: []replay.DeadLetter{dead(1, "o-1", int64(1)), dead(2, "o-2", int64(1)), dead(3, "o-1", int64(2))},
			want: []int64{1, 3}, scanned: 3},
		{name: "before the run received all", batch: 2, msgs: []replay.DeadLetter{dead(1, "o-1", int64(1)), dead(2, "o-1", int64(2)), dead(3, "o-1", int64(3))},
			want: []int64{1, 2}, scanned: 2, notRecvd: 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			q := newDLQ(tc.msgs...)
			r := expiring(q, 1, tc.every)
			r.batch = tc.batch
			sender := &ledgertest.Sender{}
			rep, err := replay.Order(context.Background(), r, sender, "o-1", replay.Options{})
			if err != nil {
				t.Fatalf("%v (report %+v)", err, rep)
			}
			if r.receives > 2 {
				t.Fatalf("%d receives: the scan went on after its locks expired and a dead letter came back", r.receives)
			}
			q.endRun(t)
			sentOnce(t, q, sender, tc.want...)
			if rep.Scanned != tc.scanned || len(rep.Replayed) != len(tc.want) {
				t.Fatalf("report %+v, want %d scanned and %d replayed", rep, tc.scanned, len(tc.want))
			}
			switch inc := rep.Incomplete; {
			case tc.notRecvd == 0 && inc != nil:
				t.Fatalf("incomplete %+v, want complete", inc)
			case tc.notRecvd > 0 && (inc == nil || inc.NotReceived != tc.notRecvd || !inc.LockedElsewhere() || inc.Reason == ""):
				t.Fatalf("incomplete %+v, want %d not received, to be run again", inc, tc.notRecvd)
			}
		})
	}
}

// lockedAtSend is a sender that, at each send, notes how many dead letters
// of q other than the run's own are still locked.
type lockedAtSend struct {
	ledgertest.Sender
	q      *fakeDLQ
	mine   func(replay.DeadLetter) bool
	counts []int
}

func (s *lockedAtSend) SendBatch(ctx context.Context, b convoy.Batch) error {
	s.q.mu.Lock() // sends are one at a time: counts needs no lock of its own
	n := 0
	for seq := range s.q.locked {
		if !s.mine(s.q.msgs[seq]) {
			n++
		}
	}
	s.q.mu.Unlock()
	s.counts = append(s.counts, n)
	return s.Sender.SendBatch(ctx, b)
}

// ender is a reader that records whether its receiving had ended when it
// was first asked to abandon a message.
type ender struct {
	*run
	mu                                        sync.Mutex
	ended, abandonedAfterEnd, abandonedBefore bool
}

func (e *ender) EndReceive(context.Context) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.ended = true
	return nil
}

func (e *ender) Receive(ctx context.Context, max int) ([]replay.DeadLetter, error) {
	e.mu.Lock()
	ended := e.ended
	e.mu.Unlock()
	if ended {
		return nil, errors.New("receive after the scan ended")
	}
	return e.run.Receive(ctx, max)
}

func (e *ender) Abandon(ctx context.Context, m replay.DeadLetter) error {
	e.mu.Lock()
	if e.ended {
		e.abandonedAfterEnd = true
	} else {
		e.abandonedBefore = true
	}
	e.mu.Unlock()
	return e.run.Abandon(ctx, m)
}

// TestReleasedBeforeResends (issue 33, item 5): what a run received and does
// not take (other orders' dead letters, those Select leaves, the
// unplaceable) goes back before its first re-send, not when it returns, and
// only once its receiving ended (ReceiveEnder): another reader can take it
// while the run goes on, and nothing it gives back comes into its own
// receive.
func TestReleasedBeforeResends(t *testing.T) {
	ctx := context.Background()
	msgs := []replay.DeadLetter{dead(1, "o-2", int64(1)), dead(2, "o-1", int64(1)), dead(3, "o-1", "x"),
		dead(4, "o-3", int64(2)), dead(5, "o-1", int64(2)), dead(6, "o-1", int64(3))}
	notThree := func(d replay.DeadLetter) bool { return d.SequenceNumber != 6 }
	q := newDLQ(msgs...)
	sender := &lockedAtSend{q: q, mine: func(d replay.DeadLetter) bool {
		return d.SessionID == "o-1" && d.SequenceNumber != 3 && d.SequenceNumber != 6
	}}
	src := &ender{run: q.reader()}
	rep, err := replay.Order(ctx, src, sender, "o-1", replay.Options{Select: notThree})
	q.endRun(t)
	if err != nil || len(rep.Replayed) != 2 || len(rep.Unplaceable) != 1 || len(rep.Left) != 1 {
		t.Fatalf("replay of o-1: %+v, %v", rep, err)
	}
	if len(sender.counts) != 2 || slices.Max(sender.counts) != 0 {
		t.Fatalf("dead letters not taken still locked at each re-send: %v, want none", sender.counts)
	}
	if !src.ended || src.abandonedBefore || !src.abandonedAfterEnd {
		t.Fatalf("receiving ended %v, abandoned before it ended %v, after %v: want every abandon after the end", src.ended, src.abandonedBefore, src.abandonedAfterEnd)
	}

	q = newDLQ(msgs...)
	sender = &lockedAtSend{q: q, mine: func(d replay.DeadLetter) bool { return d.SequenceNumber != 3 && d.SequenceNumber != 6 }}
	src = &ender{run: q.reader()}
	p, err := replay.All(ctx, src, sender, replay.AllOptions{Options: replay.Options{Select: notThree}})
	q.endRun(t)
	if err != nil || p.Replayed != 4 || p.Unplaceable != 1 || p.Left != 1 {
		t.Fatalf("replay of every dead letter: %+v, %v", p, err)
	}
	if len(sender.counts) == 0 || slices.Max(sender.counts) != 0 {
		t.Fatalf("dead letters not taken still locked at each re-send: %v, want none", sender.counts)
	}
	if !src.ended || src.abandonedBefore || !src.abandonedAfterEnd {
		t.Fatalf("receiving ended %v, abandoned before it ended %v, after %v: want every abandon after the end", src.ended, src.abandonedBefore, src.abandonedAfterEnd)
	}
}

// TestReplayStopsWhenItsDeadLettersAreInHand: a receive that finds nothing
// is what waits on Service Bus (servicebus.DeadLetters: 5 s), so a replay
// peeks first and never makes one when it knows where its dead letters are:
// it stops receiving as soon as the last of them is in hand, and an order
// with none receives nothing.
func TestReplayStopsWhenItsDeadLettersAreInHand(t *testing.T) {
	ctx := context.Background()
	q := newDLQ(dead(1, "o-1", int64(2)), dead(2, "o-2", int64(1)), dead(3, "o-1", int64(3)), dead(4, "o-2", int64(2)))
	r := q.reader()
	r.batch = 1 // one message per receive, as a quiet link may give them
	rep, err := replay.Order(ctx, r, &ledgertest.Sender{}, "o-1", replay.Options{})
	if err != nil || len(rep.Replayed) != 2 || rep.Incomplete != nil {
		t.Fatalf("replay of o-1: %+v, %v", rep, err)
	}
	if r.receives != 3 {
		t.Fatalf("%d receives for dead letters at 1 and 3 of 4 (one at a time): want 3, none past the last of o-1's", r.receives)
	}
	none := q.reader()
	if rep, err := replay.Order(ctx, none, &ledgertest.Sender{}, "o-3", replay.Options{}); err != nil || len(rep.Replayed) != 0 || none.receives != 0 {
		t.Fatalf("replay of an order without dead letters: %+v, %v after %d receives, want none", rep, err, none.receives)
	}
	q.endRun(t)
}

// narrowLink is a sub-queue reached over a slow link: a peek's answer is
// one response, and one that would carry more than maxBytes does not arrive
// within the caller's deadline.
type narrowLink struct {
	*fakeDLQ
	maxBytes int
	asked    []int
}

func (l *narrowLink) Peek(ctx context.Context, from int64, max int) ([]replay.DeadLetter, error) {
	l.asked = append(l.asked, max)
	page, err := l.fakeDLQ.Peek(ctx, from, max)
	size := 0
	for _, m := range page {
		size += len(m.Body) + len(m.MessageID) + 200 // what headers and properties add, about
	}
	if size > l.maxBytes {
		return nil, fault.Errorf(fault.Unavailable, "a peek of %d messages (%d bytes) did not arrive in time", len(page), size)
	}
	return page, err
}

// TestReplayPeeksLargeDeadLettersInPagesThatArrive (issue 42, item 3a, on
// the operator's path): a replay's peeks of a sub-queue of 250 KB dead
// letters ask for pages that arrive over a link that brings 4 MB before the
// deadline; pages of 250 (64 MB) never arrived and the replay failed on
// every try.
func TestReplayPeeksLargeDeadLettersInPagesThatArrive(t *testing.T) {
	ctx := context.Background()
	var msgs []replay.DeadLetter
	pad := strings.Repeat("x", 250<<10)
	for i := range int64(40) {
		m := dead(i+1, "o-1", i+1)
		m.Body = []byte(fmt.Sprintf(`{"transaction":{"orderId":"o-1","op":"DeleteOrder","data":%q}}`, pad))
		msgs = append(msgs, m)
	}
	link := &narrowLink{fakeDLQ: newDLQ(msgs...), maxBytes: 4 << 20}
	sender := &ledgertest.Sender{}
	rep, err := replay.Order(ctx, link, sender, "o-1", replay.Options{})
	if err != nil || len(rep.Replayed) != 40 {
		t.Fatalf("replay over a narrow link: %d replayed, %v (peeks asked for %v); want all 40", len(rep.Replayed), err, link.asked)
	}
}
