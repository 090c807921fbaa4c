package healsim

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/convoy-dev/convoy/handler"
	"github.com/convoy-dev/convoy/handler/convoy"
	"github.com/convoy-dev/convoy/handler/heal"
	"github.com/convoy-dev/convoy/handler/internal/memstore"
	"github.com/convoy-dev/convoy/handler/orders"
	"github.com/convoy-dev/convoy/handler/replay"
)

// instances is how many instances of the function app run: each with its
// processor (and cache), its healer and its HTTP server.
const instances = 3

// world is one run: the store, the instances, the orders queue and its
// dead-letter sub-queue, the clock, the record of deliveries the oracles
// judge by, and what the run did.
type world struct {
	seed    uint64
	r       *rand.Rand
	jitter  *rand.Rand // the retry policies' jitter
	now     time.Time
	mem     *memstore.Store
	store   *checkedStore
	procs   [instances]*convoy.Processor
	healers [instances]*heal.Healer
	servers [instances]*echo.Echo
	// active is the active-orders index the processors write and each
	// AutoReplay run surveys, lagPerRun orders a run; blockedPerRun is the
	// blocked index entries a run verifies (small: a pass takes several
	// runs).
	active                   *surveyLog
	lagPerRun, blockedPerRun int
	queue                    []*delivery
	late                     []late               // sent later than the seqs after them
	sentIDs                  map[string]time.Time // MessageIds the queue saw, when (duplicate detection)
	dlq                      *deadLetters
	// msgs are each order's messages, seq 1..n (index seq-1); poison: the
	// seqs whose body no processor can read; flaky: handler failures left
	// before a seq's delivery gets through; corrupt: messages of a seq far
	// beyond MaxParkAhead (refused, then dead-lettered), by order.
	msgs    map[string][]convoy.Envelope
	poison  map[string]map[int64]bool
	flaky   map[string]int
	corrupt map[string]bool // by MessageId
	orders  []string        // ids, sorted
	// slowSession is an order whose calls overrun the session lock most
	// of the time (slowLockLoss percent of its batches; "": none).
	slowSession  string
	slowLockLoss int
	// storyLockLost, storyDies: the story's session loses its lock on
	// every batch; its instance dies after the next commit that leaves its
	// drain cut (story).
	storyLockLost, storyDies bool
	// slowStore: every store round trip takes up to this many
	// milliseconds more (a slow storage account; 0: none).
	slowStore int
	rec       record // the deliveries, as the queue saw them

	armed     bool // faults on
	quiet     bool // the oracles read the store: no hooks, no time passes
	depth     int  // 0: a top-level action; 1: one interleaved inside it
	busy      int  // the instance the top-level action uses (-1: none)
	skipping  int  // the instance whose skip is under way (-1: none)
	ctx       context.Context
	deadlines []*simDeadline
	inRun     int // AutoReplay runs under way (2: one inside another)
	// runCancel cancels the top-level AutoReplay invocation (the host
	// shutting down), once its peek of the dead letters is done
	// (runPeeked: the peek runs on a goroutine of heal's, racing a
	// cancellation).
	runCancel context.CancelFunc
	runPeeked bool
	raced     bool
	// What the current top-level step met: store faults and lost replies,
	// Service Bus faults, interleaved actions.
	stepFaults, stepSB, stepInterleaved int
	// stepDeadlined counts the store calls the step's deadline failed;
	// currentBefore are the blocked index entries of their orders' current
	// blocks when the step began (checkNoNewStale).
	stepDeadlined int
	currentBefore map[string]bool
	stepNo        int
	rolls         map[string]uint64
	violations    []string
	trace         []string
	verbose       bool
	st            stats
}

func newWorld(seed uint64, verbose bool) *world {
	w := &world{seed: seed, r: rand.New(rand.NewPCG(seed, 0x5eed)), jitter: rand.New(rand.NewPCG(seed, 0x717)),
		now: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC), mem: memstore.New(), msgs: map[string][]convoy.Envelope{},
		poison: map[string]map[int64]bool{}, flaky: map[string]int{}, corrupt: map[string]bool{}, rolls: map[string]uint64{},
		sentIDs: map[string]time.Time{}, busy: -1, skipping: -1, verbose: verbose, rec: newRecord()}
	w.dlq = &deadLetters{w: w, msgs: map[int64]*deadLetter{}}
	w.store = &checkedStore{Store: w.mem, w: w}
	w.mem.Fail = w.storeFault
	w.mem.LoseReply = w.loseReply
	w.active = &surveyLog{Ledgers: memstore.NewLedgers(), surveyed: map[string]bool{}}
	w.active.Now = w.clock
	w.active.Fail = func(op string) error { return w.storeFault("active."+op, "") }
	w.lagPerRun, w.blockedPerRun = 1+w.r.IntN(3), 1+w.r.IntN(3)
	for i := range instances {
		w.start(i)
	}
	orders := 2 + w.r.IntN(3)
	var first []convoy.Envelope
	for i := range orders {
		id := fmt.Sprintf("o-%d", i+1)
		w.orders = append(w.orders, id)
		w.msgs[id], w.poison[id] = w.newOrder(id)
		for _, m := range w.msgs[id] {
			if len(w.msgs[id]) >= 40 && (m.Seq == 1 || w.r.IntN(60) == 0) {
				// Sent later than the seqs after it (a stalled publisher):
				// a long parked tail builds behind it, whose drain takes
				// several commits and can be cut between them.
				at := 0.35 + 0.6*w.r.Float64()
				if m.Seq == 1 {
					at = 0.3 + 0.2*w.r.Float64() // the tail behind it then fills and drains in runs, behind the later late seqs
				}
				w.late = append(w.late, late{m: m, at: at})
				continue
			}
			first = append(first, m)
			if len(w.msgs[id]) < 40 && w.r.IntN(100) < 8 { // a long order's tail stays long
				w.flaky[key(id, m.Seq)] = 1 + w.r.IntN(4)
			}
		}
		if w.r.IntN(4) == 0 {
			first = append(first, w.corruptMessage(id))
		}
	}
	if w.r.IntN(2) == 0 {
		w.slowStore = 5 + w.r.IntN(30)
	}
	if w.r.IntN(2) == 0 {
		w.slowSession, w.slowLockLoss = w.orders[w.r.IntN(len(w.orders))], 60+w.r.IntN(35)
		for _, id := range w.orders {
			if len(w.msgs[id]) >= 40 {
				w.slowSession = id // a long parked tail: its calls are the slow ones
			}
		}
	}
	w.send(first, "")
	return w
}

// start starts (or restarts, losing its cache) instance i: its processor,
// its healer and its HTTP server, as the custom handler wires them.
func (w *world) start(i int) {
	p := convoy.NewProcessor(w.store, convoy.ProcessorOptions{Domain: orders.Domain, CacheSize: 1 + w.r.IntN(3), Index: w.store, Now: w.clock, Active: w.active,
		Retry: w.retryPolicy()})
	w.procs[i] = p
	w.healers[i] = heal.New(w.store, w.store, w.mem, func() (replay.Source, convoy.Sender, func(), error) {
		return w.dlq.reader(), sender{w}, func() {}, nil
	}, heal.Options{Domain: orders.Domain, Now: w.clock, Active: w.active, LagPerRun: w.lagPerRun, BlockedPerRun: w.blockedPerRun, Sequential: true,
		Resume: func(ctx context.Context, id string) (convoy.Result, error) {
			res, err := p.Resume(ctx, id)
			if errors.Is(err, convoy.ErrConflict) {
				// An AddTransaction the fresh load did not know, taken as
				// new, exists (convoy.Processor.Process): the commit fails,
				// and the order's next call looks its txIds up. Not a
				// fault, but the run leaves the drain to the next one when
				// its retry policy allows one attempt.
				w.stepFaults++
				w.note("resume of %s: %v", id, err)
			}
			if err == nil && res.Commits > 0 {
				w.st.resumed++
			}
			return res, err
		}})
	w.servers[i] = handler.New(handler.Deps{Domains: []handler.Domain{{Rules: orders.Domain, Processor: p, Keys: w.store, Blocked: w.store, Heal: w.healers[i]}},
		// Far off: the simulated deadline of the request's context is the
		// one that holds (a wall-clock one would not replay).
		Deadlines: map[string]time.Duration{handler.FnOrderStatus: 24 * time.Hour}})
}

func key(order string, seq int64) string { return order + "/" + strconv.FormatInt(seq, 10) }

// corruptMessage is a message of orderID whose seq lies far beyond
// MaxParkAhead of anything the order reaches: the processor refuses it,
// the delivery fails, and it ends dead-lettered for good.
func (w *world) corruptMessage(id string) convoy.Envelope {
	amount := int64(1)
	m, err := orders.NewOrderMessage("L", 1, 3*convoy.MaxParkAhead, false,
		orders.Transaction{OrderID: id, Op: orders.AddTransaction, TxID: "t-corrupt", Amount: &amount})
	if err != nil {
		panic(err)
	}
	m.MessageID = "L:" + id + ":corrupt"
	w.corrupt[m.MessageID] = true
	return m
}

// newOrder returns an order's messages: created first, then transactions
// added and modified (some breaking a rule), maybe deleted, maybe ended by
// "last"; a few seqs are poison (unreadable), never the last one (a poison
// tail blocks nothing, and no operator could skip it).
func (w *world) newOrder(id string) ([]convoy.Envelope, map[int64]bool) {
	n := 3 + w.r.IntN(12)
	long := w.r.IntN(3) == 0
	if long {
		// Its seq 1 comes late or never (poison): the drain behind it takes
		// several commits, and can be cut between them.
		n = 40 + w.r.IntN(160)
	}
	poison := map[int64]bool{}
	var out []convoy.Envelope
	var txIDs []string
	for seq := int64(1); seq <= int64(n); seq++ {
		tx := orders.Transaction{OrderID: id}
		amount := w.r.Int64N(2001) - 1000
		switch k := w.r.IntN(20); {
		case seq == 1:
			tx.Op, tx.Currency = orders.CreateOrder, "EUR"
		case k < 11 || len(txIDs) == 0:
			tx.Op, tx.TxID, tx.Amount = orders.AddTransaction, fmt.Sprintf("t-%d", w.r.IntN(int(seq)+1)), &amount
			txIDs = append(txIDs, tx.TxID)
		case k < 18:
			tx.Op, tx.TxID, tx.Amount = orders.ModifyTransaction, txIDs[w.r.IntN(len(txIDs))], &amount
		default:
			tx.Op = orders.DeleteOrder
		}
		m, err := orders.NewOrderMessage("L", int(seq), seq, seq == int64(n) && w.r.IntN(2) == 0, tx)
		if err != nil {
			panic(err)
		}
		m.MessageID = fmt.Sprintf("L:%s:%d", id, seq)
		density := 8
		if long {
			density = 0 // its parked tail comes in long runs
		}
		if seq > 1 && seq < int64(n) && w.r.IntN(100) < density || seq == 1 && long && w.r.IntN(4) == 0 {
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

// other is the instance an interleaved action uses: never the one the
// top-level action holds (its per-order lock would wait on itself).
func (w *world) other() int {
	if w.busy < 0 {
		return 0
	}
	return (w.busy + 1 + w.r.IntN(instances-1)) % instances
}

// step is one top-level action, then the checks of what must hold between
// actions.
func (w *world) step() {
	ctx, cancel := w.actionContext()
	w.ctx = ctx
	w.stepFaults, w.stepSB, w.stepInterleaved, w.stepDeadlined = 0, 0, 0, 0
	w.currentBefore = map[string]bool{}
	for key, stale := range w.currentEntries() {
		if !stale {
			w.currentBefore[key] = true
		}
	}
	w.stepNo++
	defer func() { cancel(); w.ctx, w.busy, w.deadlines = nil, -1, nil }()
	w.busy = w.r.IntN(instances)
	switch k := w.r.IntN(100); {
	case k < 62:
		w.deliver(ctx, w.busy, -1)
	case k < 69:
		w.skipListed(ctx, w.busy)
	case k < 72:
		w.replayOrder(ctx)
	case k < 77:
		w.ctx = context.Background() // AutoReplay's deadlines are the wall clock's (heal's peek and lag survey)
		w.healRun(w.busy, true)
	case k < 84:
		w.readStatus(ctx, w.busy, w.orders[w.r.IntN(len(w.orders))])
	case k < 88:
		w.note("instance %d restarts (its cache is lost)", w.busy)
		w.start(w.busy)
	default:
		d := time.Duration(1+w.r.IntN(60)) * time.Second
		w.advance(d)
		w.note("clock +%s", d)
	}
	w.checkBetween()
}

// interleave runs another actor's action in the middle of one: another
// instance processes a message of the same order, an operator skips or
// reads it, or replays its dead letters; inside an AutoReplay run, another
// instance's run.
func (w *world) interleave(orderID string) {
	w.st.interleaved++
	w.stepInterleaved++
	ctx := context.Background()
	inst := w.other()
	if w.inRun == 1 && w.roll("race|"+orderID) < 30 {
		w.st.racingRuns++
		w.raced = true
		w.healRun(inst, false)
		return
	}
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

// serve is one request to instance inst's HTTP server, in-process.
func (w *world) serve(ctx context.Context, inst int, req *http.Request) (int, string) {
	rec := httptest.NewRecorder()
	w.servers[inst].ServeHTTP(rec, req.WithContext(ctx))
	return rec.Code, rec.Body.String()
}

// late is a message sent when the run is a fraction at through its steps.
type late struct {
	m  convoy.Envelope
	at float64
}
