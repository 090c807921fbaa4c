package healsim

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"hash/fnv"
	"maps"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/convoy-dev/convoy/handler/convoy"
	"github.com/convoy-dev/convoy/handler/fault"
	"github.com/convoy-dev/convoy/handler/heal"
	"github.com/convoy-dev/convoy/handler/internal/convoytest"
	"github.com/convoy-dev/convoy/handler/internal/memstore"
	"github.com/convoy-dev/convoy/handler/operator"
	"github.com/convoy-dev/convoy/handler/replay"
)

var (
	seedFlag     = flag.Uint64("seed", 0, "run this one seed (the command a failing seed prints)")
	seedsFlag    = flag.Int("seeds", 0, "how many seeds to run (default 300, 200 under -race, 40 with -short)")
	durationFlag = flag.Duration("duration", 0, "run seeds until this much time has passed (make soak), whatever -seeds says")
	firstFlag    = flag.Uint64("first", 1, "the first seed")
)

// TestHealingSimulation runs the simulation over many seeds; a failing seed
// prints the one-line command that replays it.
func TestHealingSimulation(t *testing.T) {
	if *seedFlag != 0 {
		if st, err := simulate(*seedFlag, true); err != nil {
			t.Fatalf("seed %d: %v", *seedFlag, err)
		} else {
			t.Logf("seed %d: %s", *seedFlag, st)
		}
		return
	}
	seeds := *seedsFlag
	if seeds == 0 {
		seeds = defaultSeeds
		if testing.Short() {
			seeds = 40
		}
	}
	var total stats
	start := time.Now()
	n := 0
	for seed := *firstFlag; ; seed++ {
		if *durationFlag > 0 {
			if time.Since(start) > *durationFlag {
				break
			}
		} else if n >= seeds {
			break
		}
		st, err := simulate(seed, false)
		if err != nil {
			t.Fatalf("seed %d: %v\nreplay it: go test ./handler/internal/healsim -run TestHealingSimulation -v -seed=%d", seed, err, seed)
		}
		total.add(st)
		n++
	}
	t.Logf("%d seeds in %s: %s", n, time.Since(start).Round(time.Millisecond), total)
}

// stats are what a run did, to say that the faults were exercised.
type stats struct {
	strands, longDrains, deliveries, faults, lostReplies, interleaved, deadLettered, skips, skipsRefused, replays, healRuns, resumed, rounds int
}

func (s *stats) add(o stats) {
	s.deliveries += o.deliveries
	s.longDrains += o.longDrains
	s.strands += o.strands
	s.faults += o.faults
	s.lostReplies += o.lostReplies
	s.interleaved += o.interleaved
	s.deadLettered += o.deadLettered
	s.skips += o.skips
	s.skipsRefused += o.skipsRefused
	s.replays += o.replays
	s.healRuns += o.healRuns
	s.resumed += o.resumed
	s.rounds += o.rounds
}

func (s stats) String() string {
	return fmt.Sprintf("%d deliveries (%d of several commits), %d faults injected, %d lost replies, %d interleaved actions, %d dead-lettered, "+
		"%d skips (%d refused), %d replays, %d AutoReplay runs, %d drains resumed (%d steps ended with a drain cut), %d quiescence rounds",
		s.deliveries, s.longDrains, s.faults, s.lostReplies, s.interleaved, s.deadLettered, s.skips, s.skipsRefused, s.replays, s.healRuns, s.resumed, s.strands, s.rounds)
}

// maxDeliveries is the orders queue's MaxDeliveryCount in the simulation.
const maxDeliveries = 3

// world is one run: the store, two processor instances, the orders queue
// and its dead-letter sub-queue, the clock, and what the run did.
type world struct {
	seed   uint64
	r      *rand.Rand
	now    time.Time
	mem    *memstore.Store
	store  *checkedStore
	procs  [2]*convoy.Processor
	healer *heal.Healer
	// active is the active-orders index the processors write and each
	// AutoReplay run surveys, lagPerRun orders a run; blockedPerRun is the
	// blocked index entries a run verifies (small: a pass takes several
	// runs).
	active                   *surveyLog
	lagPerRun, blockedPerRun int
	queue                    []*delivery
	late                     []*delivery // sent three quarters through the run
	dlq                      *deadLetters
	// msgs are each order's messages, seq 1..n (index seq-1); poison: the
	// seqs whose body no processor can read; flaky: handler failures left
	// before a seq's delivery gets through.
	msgs   map[string][]convoy.OrderMessage
	poison map[string]map[int64]bool
	flaky  map[string]int
	orders []string // ids, sorted

	armed      bool // faults on
	depth      int  // 0: a top-level action; 1: one interleaved inside it
	busy       int  // the instance the top-level action uses (-1: none)
	cancel     context.CancelFunc
	rolls      map[string]uint64
	violations []string
	trace      []string
	verbose    bool
	st         stats
}

type delivery struct {
	m     convoy.OrderMessage
	count int
}

// simulate runs one seed; the error names the first invariant broken.
func simulate(seed uint64, verbose bool) (stats, error) {
	w := newWorld(seed, verbose)
	w.armed = true
	steps := 200 + w.r.IntN(300)
	for i := range steps {
		if i == steps*3/4 {
			w.queue, w.late = append(w.queue, w.late...), nil
		}
		w.step()
		for _, id := range w.orders {
			if _, cut := w.peek(id).NextParked(); cut {
				w.st.strands++
			}
		}
		if len(w.violations) > 0 {
			break
		}
	}
	w.armed = false
	if len(w.violations) == 0 {
		w.quiesce()
	}
	if len(w.violations) == 0 {
		w.checkFinal()
	}
	if len(w.violations) > 0 {
		last := w.trace[max(0, len(w.trace)-40):]
		return w.st, fmt.Errorf("%s\nthe run's last actions:\n  %s", strings.Join(w.violations, "\n"), strings.Join(last, "\n  "))
	}
	return w.st, nil
}

func newWorld(seed uint64, verbose bool) *world {
	w := &world{seed: seed, r: rand.New(rand.NewPCG(seed, 0x5eed)), now: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC),
		mem: memstore.New(), dlq: &deadLetters{msgs: map[int64]*deadLetter{}}, msgs: map[string][]convoy.OrderMessage{},
		poison: map[string]map[int64]bool{}, flaky: map[string]int{}, rolls: map[string]uint64{}, busy: -1, verbose: verbose}
	w.dlq.w = w
	w.store = &checkedStore{Store: w.mem, w: w}
	w.mem.Fail = w.fault
	w.mem.LoseReply = w.loseReply
	w.active = &surveyLog{Ledgers: memstore.NewLedgers(), surveyed: map[string]bool{}}
	w.active.Now = w.clock
	w.active.Fail = func(op string) error { return w.fault("active."+op, "") }
	w.lagPerRun, w.blockedPerRun = 1+w.r.IntN(3), 1+w.r.IntN(3)
	for i := range w.procs {
		w.procs[i] = w.newProcessor()
	}
	w.healer = heal.New(w.store, w.store, w.mem, func() (replay.Source, convoy.Sender, func(), error) {
		return w.dlq.reader(), sender{w}, func() {}, nil
	}, heal.Options{Now: w.clock, Active: w.active, LagPerRun: w.lagPerRun, BlockedPerRun: w.blockedPerRun, Sequential: true, Resume: func(ctx context.Context, id string) (convoy.Result, error) {
		res, err := w.procs[max(w.busy, 0)].Resume(ctx, id) // the run's own instance
		if err == nil && res.Commits > 0 {
			w.st.resumed++
		}
		return res, err
	}})
	orders := 2 + w.r.IntN(3)
	for i := range orders {
		id := fmt.Sprintf("o-%d", i+1)
		w.orders = append(w.orders, id)
		w.msgs[id], w.poison[id] = w.newOrder(id)
		for _, m := range w.msgs[id] {
			if m.Seq == 1 && len(w.msgs[id]) >= 40 {
				w.late = append(w.late, &delivery{m: m}) // sent after the rest: a stalled publisher
				continue
			}
			w.queue = append(w.queue, &delivery{m: m})
			if w.r.IntN(100) < 15 {
				w.flaky[key(id, m.Seq)] = 1 + w.r.IntN(4)
			}
		}
	}
	return w
}

func (w *world) newProcessor() *convoy.Processor {
	return convoy.NewProcessor(w.store, convoy.ProcessorOptions{CacheSize: 1 + w.r.IntN(3), Index: w.store, Now: w.clock, Active: w.active,
		Retry: fault.RetryPolicy{MaxAttempts: 1 + w.r.IntN(3), Initial: time.Microsecond, Max: time.Microsecond, MaxElapsed: time.Second}})
}

func (w *world) clock() time.Time { return w.now }

func key(order string, seq int64) string { return order + "/" + strconv.FormatInt(seq, 10) }

// newOrder returns an order's messages: created first, then transactions
// added and modified (some breaking a rule), maybe deleted, maybe ended by
// "last"; a few seqs are poison (unreadable), never the last one (a poison
// tail blocks nothing, and no operator could skip it).
func (w *world) newOrder(id string) ([]convoy.OrderMessage, map[int64]bool) {
	n := 3 + w.r.IntN(12)
	long := w.r.IntN(3) == 0
	if long {
		// Its seq 1 comes late or never (poison): the drain behind it takes
		// several commits, and can be cut between them.
		n = 40 + w.r.IntN(60)
	}
	poison := map[int64]bool{}
	var out []convoy.OrderMessage
	var txIDs []string
	for seq := int64(1); seq <= int64(n); seq++ {
		tx := convoy.Transaction{OrderID: id}
		amount := w.r.Int64N(2001) - 1000
		switch k := w.r.IntN(20); {
		case seq == 1:
			tx.Op, tx.Currency = convoy.CreateOrder, "EUR"
		case k < 11 || len(txIDs) == 0:
			tx.Op, tx.TxID, tx.Amount = convoy.AddTransaction, fmt.Sprintf("t-%d", w.r.IntN(int(seq)+1)), &amount
			txIDs = append(txIDs, tx.TxID)
		case k < 18:
			tx.Op, tx.TxID, tx.Amount = convoy.ModifyTransaction, txIDs[w.r.IntN(len(txIDs))], &amount
		default:
			tx.Op = convoy.DeleteOrder
		}
		m, err := convoy.NewOrderMessage("L", int(seq), seq, seq == int64(n) && w.r.IntN(2) == 0, tx)
		if err != nil {
			panic(err)
		}
		m.MessageID = fmt.Sprintf("L:%s:%d", id, seq)
		density := 8
		if long {
			density = 2 // its parked tail comes in long runs
		}
		if seq > 1 && seq < int64(n) && w.r.IntN(100) < density || seq == 1 && long && w.r.IntN(2) == 0 {
			poison[seq] = true
			m.Body = []byte(`{"transaction":`)
		}
		out = append(out, m)
	}
	return out, poison
}

func (w *world) note(format string, args ...any) {
	s := fmt.Sprintf("%s%s", strings.Repeat("  ", w.depth), fmt.Sprintf(format, args...))
	w.trace = append(w.trace, s)
	if w.verbose {
		fmt.Println(s)
	}
}

func (w *world) violate(format string, args ...any) {
	w.violations = append(w.violations, fmt.Sprintf(format, args...))
}

// roll is a number in [0, 100) drawn for the n-th call of what: a hash of
// the seed, what and n, so that what one order's operations draw does not
// depend on how the others' interleave.
func (w *world) roll(what string) int {
	n := w.rolls[what]
	w.rolls[what]++
	h := fnv.New64a()
	fmt.Fprintf(h, "%d|%s|%d", w.seed, what, n)
	return int(h.Sum64() % 100)
}

// fault is the store's Fail hook: now and then another actor's whole action
// runs first (an interleaving), a deadline fires, or the operation fails
// before it takes place.
func (w *world) fault(op, orderID string) error {
	// Every round trip to storage takes a millisecond at least: two commits
	// never share the millisecond that keys a block (convoy.BlockedKey).
	w.now = w.now.Add(time.Millisecond)
	if !w.armed {
		return nil
	}
	what := op + "|" + orderID
	if w.depth == 0 && w.roll("interleave|"+what) < 6 {
		w.depth++
		w.interleave(orderID)
		w.depth--
	}
	switch roll := w.roll(what); {
	case roll < 3 && w.depth == 0 && w.cancel != nil:
		w.st.faults++
		w.note("deadline fires before %s of %s", op, orderID)
		w.cancel()
		return context.DeadlineExceeded
	case roll < 9:
		w.st.faults++
		w.note("%s of %s fails", op, orderID)
		return fault.Errorf(fault.Unavailable, "injected: %s fails", op)
	}
	return nil
}

// loseReply is the store's LoseReply hook: the commit took place, its
// answer is lost.
func (w *world) loseReply(orderID string) bool {
	if !w.armed || w.roll("reply|"+orderID) >= 6 {
		return false
	}
	w.st.lostReplies++
	w.note("reply of a commit of %s lost", orderID)
	return true
}

// other is the instance an interleaved action uses: never the one the
// top-level action holds (its per-order lock would wait on itself).
func (w *world) other() int {
	if w.busy < 0 {
		return 0
	}
	return 1 - w.busy
}

// step is one top-level action.
func (w *world) step() {
	ctx, cancel := context.WithCancel(context.Background())
	w.cancel = cancel
	defer func() { cancel(); w.cancel, w.busy = nil, -1 }()
	w.busy = w.r.IntN(2)
	switch k := w.r.IntN(100); {
	case k < 65:
		w.deliver(ctx, w.busy, -1)
	case k < 67:
		w.skipListed(ctx, w.busy)
	case k < 72:
		w.replayOrder(ctx)
	case k < 77:
		w.busy = 0 // the instance whose timer runs AutoReplay
		w.healRun(ctx)
	case k < 84:
		w.readStatus(ctx, w.busy, w.orders[w.r.IntN(len(w.orders))])
	case k < 88:
		w.note("instance %d restarts (its cache is lost)", w.busy)
		w.procs[w.busy] = w.newProcessor()
	default:
		d := time.Duration(1+w.r.IntN(60)) * time.Second
		w.now = w.now.Add(d)
		w.note("clock +%s", d)
	}
}

// interleave runs another actor's action in the middle of one: the other
// instance processes a message of the same order, an operator skips or
// reads it, or replays its dead letters.
func (w *world) interleave(orderID string) {
	w.st.interleaved++
	ctx := context.Background()
	inst := w.other()
	switch k := w.roll("which|" + orderID); {
	case k < 65:
		w.deliver(ctx, inst, w.pendingOf(orderID))
	case k < 75:
		w.skipOrder(ctx, inst, orderID)
	case k < 90:
		w.readStatus(ctx, inst, orderID)
	default:
		w.replay(ctx, orderID)
	}
}

// pendingOf is the index in the queue of a random delivery of orderID, or
// -1 for any.
func (w *world) pendingOf(orderID string) int {
	var of []int
	for i, d := range w.queue {
		if d.m.SessionID == orderID {
			of = append(of, i)
		}
	}
	if len(of) == 0 {
		return -1
	}
	return of[w.roll("pick|"+orderID)%len(of)]
}

// next is the delivery Service Bus hands out next: the first queued of a
// random session (a session's messages come in order), now and then any.
func (w *world) next() int {
	if w.r.IntN(100) < 15 {
		return w.r.IntN(len(w.queue))
	}
	order := w.queue[w.r.IntN(len(w.queue))].m.SessionID
	return slices.IndexFunc(w.queue, func(d *delivery) bool { return d.m.SessionID == order })
}

// deliver hands the i-th queued delivery (Service Bus's next when i < 0) to
// an instance, as the Functions host would: a failure counts a delivery and
// leaves it first in its session, the last one dead-letters it; success
// completes it, and now and then Service Bus delivers it again (at least
// once).
func (w *world) deliver(ctx context.Context, inst, i int) {
	if len(w.queue) == 0 {
		return
	}
	if i < 0 {
		i = w.next()
	}
	d := w.queue[i]
	m := d.m
	w.st.deliveries++
	k := key(m.SessionID, m.Seq)
	var err error
	tx, derr := convoy.DecodeBody(m.Body)
	switch {
	case derr != nil:
		err = fmt.Errorf("unreadable: %w", derr)
	case w.flaky[k] > 0:
		w.flaky[k]--
		err = errors.New("the handler failed (an outage)")
	default:
		msg := convoy.Message{Seq: m.Seq, Last: m.Last, MessageID: m.MessageID, Tx: tx}
		var res convoy.Result
		res, err = w.procs[inst].Process(ctx, m.SessionID, []convoy.Message{msg})
		if err == nil {
			w.note("instance %d: %s seq %d: %v", inst, m.SessionID, m.Seq, res.Outcomes)
		}
		if res.Commits > 1 {
			w.st.longDrains++
		}
	}
	if err == nil || d.count+1 >= maxDeliveries {
		w.queue = slices.DeleteFunc(w.queue, func(x *delivery) bool { return x == d })
	}
	if err == nil {
		if w.r.IntN(100) < 10 {
			w.queue = append(w.queue, &delivery{m: m}) // delivered again
		}
		return
	}
	d.count++
	w.note("instance %d: %s seq %d delivery %d failed: %v", inst, m.SessionID, m.Seq, d.count, err)
	if d.count >= maxDeliveries {
		w.st.deadLettered++
		w.dlq.add(m)
	}
}

// skipListed is an operator skipping the missing seq of a listed order.
func (w *world) skipListed(ctx context.Context, inst int) {
	page, err := convoy.ListBlocked(ctx, w.store, "", convoy.MaxBlockedPageSize)
	if err != nil || len(page.Orders) == 0 {
		return
	}
	o := page.Orders[w.r.IntN(len(page.Orders))]
	if w.patient(o) {
		w.skip(ctx, inst, o.OrderID, o.MissingSeq)
	}
}

// patient: an operator skips a gap that has held its order for a while.
func (w *world) patient(o convoy.BlockedOrder) bool {
	since, err := time.Parse(time.RFC3339, o.BlockedSince)
	return err == nil && w.now.Sub(since) > 10*time.Minute
}

// skipOrder skips the order's missing seq as its listing says.
func (w *world) skipOrder(ctx context.Context, inst int, orderID string) {
	page, err := convoy.ListBlocked(ctx, w.store, "", convoy.MaxBlockedPageSize)
	if err != nil {
		return
	}
	for _, o := range page.Orders {
		if o.OrderID == orderID && w.patient(o) {
			w.skip(ctx, inst, orderID, o.MissingSeq)
		}
	}
}

// skip is SkipGap's code path: the skip, then its dead letter settled.
func (w *world) skip(ctx context.Context, inst int, orderID string, seq int64) {
	w.st.skips++
	res, err := operator.SkipGap(ctx, w.procs[inst], orderID, strconv.FormatInt(seq, 10))
	if err != nil {
		if fault.CodeOf(err) == fault.Conflict {
			w.st.skipsRefused++
			if w.skipped(orderID, seq) {
				w.violate("the skip of %s seq %d was refused (%v), yet the seq is skipped: an earlier skip landed, its answer was lost", orderID, seq, err)
			}
		}
		w.note("instance %d: skip %s seq %d: %v", inst, orderID, seq, err)
		return
	}
	// The program's settler, on this world's dead-letter queue and store.
	settler := operator.QueueReplayer{Options: replay.Options{Orders: w.store}, Open: func() (replay.Source, convoy.Sender, func(), error) {
		return w.dlq.reader(), sender{w}, func() {}, nil
	}}
	operator.SettleSkipped(ctx, settler, &res)
	w.note("instance %d: skipped %s seq %d (earlier %v, drained %v, draining %q, dead letter %+v)", inst, orderID, seq,
		res.SkippedEarlier, res.Drained, res.Draining, res.DeadLetter)
}

// skipped reports whether seq of orderID is stored as skipped by operator.
func (w *world) skipped(orderID string, seq int64) bool {
	armed := w.armed
	w.armed = false
	defer func() { w.armed = armed }()
	rs, _, err := w.mem.Rejections(context.Background(), orderID, seq, 1)
	return err == nil && len(rs) > 0 && rs[0].Seq == seq && rs[0].Reason == convoy.ReasonSkipped
}

// replayOrder is an operator replaying a random order's dead letters.
func (w *world) replayOrder(ctx context.Context) {
	w.replay(ctx, w.orders[w.r.IntN(len(w.orders))])
}

func (w *world) replay(ctx context.Context, orderID string) {
	w.st.replays++
	rep, err := replay.Order(ctx, w.dlq.reader(), sender{w}, orderID, replay.Options{Orders: w.store})
	w.note("replay %s: %d re-sent, %d duplicates, err %v", orderID, len(rep.Replayed), len(rep.Duplicates), err)
}

// healRun is one AutoReplay run.
func (w *world) healRun(ctx context.Context) {
	w.st.healRuns++
	r := w.healer.RunOnce(ctx)
	w.note("AutoReplay run: %d replayed, %d failed, paused %q", len(r.Replayed), len(r.Failed), r.Paused)
}

// healPass runs AutoReplay as many times as it takes to go through both
// indexes once from wherever the runs stand: a run goes on where the last
// one stopped, so ceil(n / per run) runs cover n entries from the start,
// and one more ends the pass under way. Then, the invariant of the lag
// survey's budget: every order in the active-orders index throughout was
// surveyed by those runs (an oracle apart from heal.Pass: the index's own
// reads, logged).
func (w *world) healPass(ctx context.Context) {
	active := w.active.ids()
	blocked, _, _ := w.mem.ScanBlocked(ctx, "", 1<<20)
	runs := max(ceilDiv(len(active), w.lagPerRun), ceilDiv(len(blocked), w.blockedPerRun)) + 1
	w.active.reset()
	for range runs {
		w.healRun(ctx)
		w.now = w.now.Add(time.Minute) // the schedule
	}
	still := w.active.ids()
	for _, id := range active {
		if slices.Contains(still, id) && !w.active.wasSurveyed(id) {
			w.violate("order %s was in the active-orders index throughout %d AutoReplay runs of %d orders each (%d in the index), and none surveyed it",
				id, runs, w.lagPerRun, len(active))
		}
	}
}

func ceilDiv(a, b int) int { return (a + b - 1) / b }

// surveyLog is the active-orders index, logging the orders the lag survey
// reads (it reads what was published to each order it surveys, once).
type surveyLog struct {
	*memstore.Ledgers
	mu       sync.Mutex
	surveyed map[string]bool
}

func (s *surveyLog) Published(ctx context.Context, orderID string, seq int64) (convoy.Published, error) {
	s.mu.Lock()
	s.surveyed[orderID] = true
	s.mu.Unlock()
	return s.Ledgers.Published(ctx, orderID, seq)
}

func (s *surveyLog) wasSurveyed(id string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.surveyed[id]
}

func (s *surveyLog) reset() {
	s.mu.Lock()
	defer s.mu.Unlock()
	clear(s.surveyed)
}

// ids are the orders in the index.
func (s *surveyLog) ids() []string {
	entries, _, _ := s.ScanActive(context.Background(), "", 1<<20)
	var out []string
	for _, e := range entries {
		out = append(out, e.OrderID)
	}
	return out
}

// readStatus is what OrderStatus does: read the order and, when its next
// seq is parked (a drain cut short), resume the drain.
func (w *world) readStatus(ctx context.Context, inst int, orderID string) {
	o, err := w.store.Load(ctx, orderID)
	if err != nil {
		return
	}
	if _, cut := o.NextParked(); cut {
		res, err := w.procs[inst].Resume(ctx, orderID)
		if err == nil && res.Commits > 0 {
			w.st.resumed++
		}
		w.note("instance %d: read %s, resumed its drain: appliedSeq %d, err %v", inst, orderID, res.AppliedSeq, err)
	}
}

// quiesce stops the faults and heals everything, as a patient operator
// would: deliver what is queued, let AutoReplay run, check the blocked
// index, skip the gaps nothing can fill, settle the dead letters.
func (w *world) quiesce() {
	ctx := context.Background()
	for round := 0; ; round++ {
		w.st.rounds++
		if round == 40 {
			w.violate("no quiescence after %d rounds: %d queued, %d dead letters", round, len(w.queue), len(w.dlq.msgs))
			for _, id := range w.orders {
				o := w.peek(id)
				txs, _, _ := w.mem.Transactions(ctx, id, 0, 1000)
				w.violate("order %s: status %s, appliedSeq %d, %d parked, txCount %d, stored transactions %v", id, o.Status, o.AppliedSeq, o.ParkedCount, o.TxCount, txs)
			}
			return
		}
		w.now = w.now.Add(time.Hour) // backoffs over, every lock expired
		for len(w.queue) > 0 {
			w.deliver(ctx, 0, 0)
		}
		w.healPass(ctx)
		if len(w.queue) > 0 {
			continue
		}
		w.checkIndex(ctx)
		if len(w.violations) > 0 {
			return
		}
		page, _ := convoy.ListBlocked(ctx, w.store, "", convoy.MaxBlockedPageSize)
		if len(page.Orders) == 0 {
			w.now = w.now.Add(time.Hour)
			if p, err := replay.All(ctx, w.dlq.reader(), sender{w}, replay.AllOptions{Options: replay.Options{Orders: w.store}}); err == nil {
				w.note("replay of every dead letter: %d scanned", p.Scanned)
			}
			if len(w.queue) == 0 && len(w.dlq.msgs) == 0 {
				return
			}
			continue
		}
		for _, o := range page.Orders {
			// The operator gives up on a missing message that nothing will
			// bring: not queued, not a dead letter AutoReplay replays.
			if w.coming(o.OrderID, o.MissingSeq) {
				continue
			}
			w.skip(ctx, 1, o.OrderID, o.MissingSeq)
		}
	}
}

// coming reports whether seq of orderID is queued or dead-lettered for a
// transient cause (AutoReplay brings it back).
func (w *world) coming(orderID string, seq int64) bool {
	for _, d := range w.queue {
		if d.m.SessionID == orderID && d.m.Seq == seq {
			return true
		}
	}
	for _, dl := range w.dlq.msgs {
		if dl.SessionID == orderID && dl.seq == seq && !w.poison[orderID][seq] {
			return true
		}
	}
	return false
}

// checkIndex: after AutoReplay runs that went through the blocked index
// once (healPass) with nothing in flight, the blocked index lists exactly
// the orders with parked messages, with their figures.
func (w *world) checkIndex(ctx context.Context) {
	page, err := convoy.ListBlocked(ctx, w.store, "", convoy.MaxBlockedPageSize)
	if err != nil {
		w.violate("list blocked orders: %v", err)
		return
	}
	listed := map[string]convoy.BlockedOrder{}
	for _, o := range page.Orders {
		if _, dup := listed[o.OrderID]; dup {
			w.violate("order %s is listed twice", o.OrderID)
		}
		listed[o.OrderID] = o
	}
	for _, id := range w.orders {
		o := w.peek(id)
		l, ok := listed[id]
		switch {
		case o.ParkedCount == 0 && ok:
			w.violate("order %s is listed blocked (missing %d) but has nothing parked (appliedSeq %d)", id, l.MissingSeq, o.AppliedSeq)
		case o.ParkedCount > 0 && !ok:
			w.violate("order %s has %d parked (appliedSeq %d) but is not listed blocked", id, o.ParkedCount, o.AppliedSeq)
		case ok && (l.AppliedSeq != o.AppliedSeq || l.Parked != o.ParkedCount):
			w.violate("order %s is listed with appliedSeq %d and %d parked; it has %d and %d", id, l.AppliedSeq, l.Parked, o.AppliedSeq, o.ParkedCount)
		}
	}
}

// checkFinal: every order's state is the fold of its messages, with only
// seqs never received skipped by an operator; nothing is parked, nothing
// dead-lettered is left.
func (w *world) checkFinal() {
	ctx := context.Background()
	for _, id := range w.orders {
		o := w.peek(id)
		v, err := convoy.ReadView(ctx, w.mem, w.mem, id, "", convoy.MaxHistoryPageSize)
		if err != nil {
			w.violate("read order %s: %v", id, err)
			continue
		}
		skipped := map[int64]bool{}
		for _, r := range v.Rejected {
			if r.Reason == convoy.ReasonSkipped {
				skipped[r.Seq] = true
			}
		}
		for seq := range w.poison[id] {
			if !skipped[seq] && seq <= v.AppliedSeq {
				w.violate("order %s: poison seq %d (never readable) is not skipped", id, seq)
			}
		}
		var msgs []convoy.Message
		for _, m := range w.msgs[id] {
			tx, _ := convoy.DecodeBody(m.Body)
			msgs = append(msgs, convoy.Message{Seq: m.Seq, Last: m.Last, Tx: tx})
		}
		if why := convoytest.Compare(v, convoytest.FoldSkipping(msgs, skipped)); why != "" {
			w.violate("order %s differs from the fold of its messages (skipped %v): %s", id, slices.Sorted(maps.Keys(skipped)), why)
		}
		if _, cut := o.NextParked(); cut || !o.BlockedSince.IsZero() || o.ParkedCount != 0 {
			w.violate("order %s: head and parked rows disagree: appliedSeq %d, %d parked, blocked since %v", id, o.AppliedSeq, o.ParkedCount, o.BlockedSince)
		}
	}
	if len(w.dlq.msgs) > 0 {
		w.violate("%d dead letter(s) left", len(w.dlq.msgs))
	}
}

// peek reads an order's durable state without hooks.
func (w *world) peek(id string) *convoy.Order {
	armed := w.armed
	w.armed = false
	defer func() { w.armed = armed }()
	o, err := w.mem.Load(context.Background(), id)
	if err != nil {
		panic(err)
	}
	return o
}

// checkedStore is the store the actors use: every commit that skips a seq
// is checked against the durable state it replaces (an oracle apart from
// convoy.Order.Skip): a seq that was received (applied, rejected or parked)
// must never be skipped.
type checkedStore struct {
	*memstore.Store
	w *world
}

func (s *checkedStore) Commit(ctx context.Context, o *convoy.Order, base int64, c *convoy.Change) error {
	var skips []int64
	for _, r := range c.Rejections {
		if r.Reason == convoy.ReasonSkipped {
			skips = append(skips, r.Seq)
		}
	}
	var before *convoy.Order
	if len(skips) > 0 {
		before = s.w.peek(o.ID)
	}
	err := s.Store.Commit(ctx, o, base, c)
	if landed := err == nil || errors.Is(err, memstore.ErrReplyLost); landed && before != nil {
		for _, seq := range skips {
			if _, parked := before.Parked[seq]; parked || seq <= before.AppliedSeq {
				s.w.violate("order %s: seq %d was skipped by operator though it was received (appliedSeq %d, parked: %v)", o.ID, seq, before.AppliedSeq, parked)
			}
		}
	}
	return err
}

// deadLetters is the orders queue's dead-letter sub-queue, with peek-lock as
// Service Bus keeps it: a received message is locked for the lock duration
// (in simulated time) to its receiver, and closing a receiver releases
// nothing.
type deadLetters struct {
	mu       sync.Mutex // replay settles in parallel
	w        *world
	msgs     map[int64]*deadLetter
	next     int64
	receiver int
}

type deadLetter struct {
	replay.DeadLetter
	seq         int64
	holder      int
	lockedUntil time.Time
}

// lockDuration is the queue's lock duration.
const lockDuration = 30 * time.Second

func (q *deadLetters) add(m convoy.OrderMessage) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.next++
	q.msgs[q.next] = &deadLetter{DeadLetter: replay.DeadLetter{SequenceNumber: q.next, MessageID: m.MessageID, SessionID: m.SessionID,
		Properties: m.Properties(), Body: m.Body, Reason: operator.ReasonMaxDelivery}, seq: m.Seq}
}

func (q *deadLetters) reader() *dlReader {
	q.receiver++
	return &dlReader{q: q, id: q.receiver}
}

func (q *deadLetters) sorted() []int64 { return slices.Sorted(maps.Keys(q.msgs)) }

type dlReader struct {
	q  *deadLetters
	id int
}

func (r *dlReader) Receive(_ context.Context, max int) ([]replay.DeadLetter, error) {
	r.q.mu.Lock()
	defer r.q.mu.Unlock()
	var out []replay.DeadLetter
	for _, s := range r.q.sorted() {
		m := r.q.msgs[s]
		if len(out) < max && !m.lockedUntil.After(r.q.w.now) {
			m.holder, m.lockedUntil = r.id, r.q.w.now.Add(lockDuration)
			d := m.DeadLetter
			d.Handle = r.id
			out = append(out, d)
		}
	}
	return out, nil
}

func (r *dlReader) Peek(_ context.Context, from int64, max int) ([]replay.DeadLetter, error) {
	r.q.mu.Lock()
	defer r.q.mu.Unlock()
	var out []replay.DeadLetter
	for _, s := range r.q.sorted() {
		if s >= from && len(out) < max {
			out = append(out, r.q.msgs[s].DeadLetter)
		}
	}
	return out, nil
}

func (r *dlReader) held(d replay.DeadLetter) (*deadLetter, error) {
	m, ok := r.q.msgs[d.SequenceNumber]
	if !ok || m.holder != r.id || !m.lockedUntil.After(r.q.w.now) {
		return nil, fault.Errorf(fault.Unavailable, "lock lost")
	}
	return m, nil
}

func (r *dlReader) Complete(_ context.Context, d replay.DeadLetter) error {
	r.q.mu.Lock()
	defer r.q.mu.Unlock()
	if _, err := r.held(d); err != nil {
		return err
	}
	delete(r.q.msgs, d.SequenceNumber)
	return nil
}

func (r *dlReader) Abandon(_ context.Context, d replay.DeadLetter) error {
	r.q.mu.Lock()
	defer r.q.mu.Unlock()
	m, err := r.held(d)
	if err != nil {
		return err
	}
	m.holder, m.lockedUntil = 0, time.Time{}
	return nil
}

// sender puts re-sent messages back into the orders queue.
type sender struct{ w *world }

type batch struct{ msgs []convoy.OrderMessage }

func (b *batch) Add(m convoy.OrderMessage) error { b.msgs = append(b.msgs, m); return nil }
func (b *batch) Len() int                        { return len(b.msgs) }

func (s sender) NewBatch(context.Context) (convoy.Batch, error) { return &batch{}, nil }

func (s sender) SendBatch(_ context.Context, b convoy.Batch) error {
	for _, m := range b.(*batch).msgs {
		s.w.queue = append(s.w.queue, &delivery{m: m})
	}
	return nil
}
