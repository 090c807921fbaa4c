package healsim

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/convoy-dev/convoy/handler"
	"github.com/convoy-dev/convoy/handler/convoy"
	"github.com/convoy-dev/convoy/handler/fault"
	"github.com/convoy-dev/convoy/handler/internal/memstore"
	"github.com/convoy-dev/convoy/handler/operator"
	"github.com/convoy-dev/convoy/handler/orders"
	"github.com/convoy-dev/convoy/handler/replay"
)

// deliver is one invocation of OrderProcessor as the Functions host makes
// it: a batch of one session's messages from the i-th queued (Service
// Bus's next when i < 0), handed to instance inst as processOrders hands
// them (the readable ones to one Process call; an unreadable or refused
// message fails the invocation after the others are processed), then every
// message of the batch completed on success, abandoned on failure.
func (w *world) deliver(ctx context.Context, inst, i int) {
	if len(w.queue) == 0 {
		return
	}
	if w.sbFault("receive", "orders") {
		return
	}
	if i < 0 {
		i = w.next()
	}
	ds := w.batchFrom(i, 1+w.r.IntN(4))
	order := ds[0].m.SessionID
	w.st.batches++
	w.st.deliveries += len(ds)
	locks := make([]int, len(ds))
	var msgs []convoy.Message
	var seqs []int64
	var failed error
	for j, d := range ds {
		d.lock++
		locks[j] = d.lock
		seqs = append(seqs, d.m.Seq)
		k := key(order, d.m.Seq)
		tx, derr := orders.DecodeBody(d.m.Body)
		switch {
		case derr != nil:
			failed = fmt.Errorf("seq %d unreadable: %w", d.m.Seq, derr)
		case w.flaky[k] > 0 && failed == nil:
			w.flaky[k]--
			failed = errors.New("the handler failed (an outage)")
		default:
			msgs = append(msgs, convoy.Message{Seq: d.m.Seq, Last: d.m.Last, MessageID: d.m.MessageID, Command: tx})
		}
	}
	if failed == nil || !strings.Contains(failed.Error(), "outage") {
		failed = errors.Join(failed, w.process(ctx, inst, order, msgs))
	}
	if failed != nil {
		w.note("instance %d: %s seqs %v failed: %v", inst, order, seqs, failed)
	}
	lost := w.sessionLockLost(order)
	for j, d := range ds {
		if w.settle(d, locks[j], failed == nil, lost) {
			w.rec.acked[key(order, d.m.Seq)] = true
		}
	}
}

// process is the Process call of a delivery, its messages in flight
// throughout (the record the skips are judged by).
func (w *world) process(ctx context.Context, inst int, order string, msgs []convoy.Message) error {
	if len(msgs) == 0 {
		return nil
	}
	for _, m := range msgs {
		if !w.corruptSeq(m.Seq) {
			w.rec.handed[order] = max(w.rec.handed[order], m.Seq)
		}
		k := key(order, m.Seq)
		if w.rec.inFlight[k] == nil {
			w.rec.inFlight[k] = &[instances]int{}
		}
		w.rec.inFlight[k][inst]++
	}
	defer func() {
		for _, m := range msgs {
			w.rec.inFlight[key(order, m.Seq)][inst]--
		}
	}()
	res, err := w.procs[inst].Process(ctx, order, msgs)
	if res.Commits > 1 {
		w.st.longDrains++
	}
	if err != nil {
		return err
	}
	w.note("instance %d: %s: %v", inst, order, res.Outcomes)
	var refused []error
	for _, out := range res.Outcomes {
		if out.Disposition == convoy.Refused {
			w.st.refused++
			refused = append(refused, fmt.Errorf("seq %d refused: %s", out.Seq, out.Reason))
		}
	}
	return errors.Join(refused...)
}

func (w *world) corruptSeq(seq int64) bool { return seq >= 3*convoy.MaxParkAhead }

// skipListed is an operator skipping the missing seq of a listed order.
func (w *world) skipListed(ctx context.Context, inst int) {
	page, err := convoy.ListBlocked(ctx, w.store, "", convoy.MaxBlockedPageSize)
	if err != nil || len(page.Orders) == 0 {
		return
	}
	o := page.Orders[w.r.IntN(len(page.Orders))]
	if w.patient(o) {
		ctx, cancel := w.skipContext(ctx)
		defer cancel()
		w.skip(ctx, inst, o.OrderID, o.MissingSeq)
	}
}

// skipContext is the context of an operator's skip: on a slow store, now
// and then a deadline a few round trips away, so that the skip lands and
// its drain stops short (a margin before the deadline, convoy.Skip), cut
// anywhere in the parked tail: a common way to a cut drain whose next seq
// is a dead letter (issue 42, item 1).
func (w *world) skipContext(ctx context.Context) (context.Context, context.CancelFunc) {
	if w.slowStore == 0 || w.r.IntN(100) >= 60 {
		return ctx, func() {}
	}
	return w.withDeadline(time.Duration(w.slowStore*(2+w.r.IntN(6))) * time.Millisecond)
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

// recordingSettler is the program's settler (operator.QueueReplayer on
// this world's dead-letter queue and store), keeping what it answered.
type recordingSettler struct {
	operator.QueueReplayer
	rep replay.Report
	err error
}

func (s *recordingSettler) SettleSkipped(ctx context.Context, orderID string, seq int64) (replay.Report, error) {
	s.rep, s.err = s.QueueReplayer.SettleSkipped(ctx, orderID, seq)
	return s.rep, s.err
}

// skip is SkipGap's code path: the skip, then its dead letter settled.
// Once the settlement answered with no fault in the way, no dead letter of
// the skipped seq is left (an outcome visible only after the action).
func (w *world) skip(ctx context.Context, inst int, orderID string, seq int64) {
	w.st.skips++
	outer := w.skipping
	w.skipping = inst
	res, err := operator.SkipGap(ctx, orders.Domain, w.procs[inst], orderID, strconv.FormatInt(seq, 10))
	w.skipping = outer
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
	settler := &recordingSettler{QueueReplayer: operator.QueueReplayer{Domain: orders.Domain, Options: replay.Options{Orders: w.store}, Open: func() (replay.Source, convoy.Sender, func(), error) {
		return w.dlq.reader(), sender{w}, func() {}, nil
	}}}
	if res.Draining != "" {
		w.st.skipsCut++
	}
	sb, interleaved := w.stepSB, w.stepInterleaved
	operator.SettleSkipped(ctx, settler, &res)
	w.note("instance %d: skipped %s seq %d (earlier %v, drained %v, draining %q, dead letter %+v)", inst, orderID, seq,
		res.SkippedEarlier, res.Drained, res.Draining, res.DeadLetter)
	clean := settler.err == nil && settler.rep.Incomplete == nil && w.stepSB == sb && w.stepInterleaved == interleaved && ctx.Err() == nil
	if clean && w.skipped(orderID, seq) {
		for _, m := range w.dlq.msgs {
			if m.SessionID == orderID && m.seq == seq {
				w.violate("order %s: seq %d is skipped and its skip's settlement answered with no fault, yet its dead letter %s is left",
					orderID, seq, m.MessageID)
			}
		}
	}
}

// skipped reports whether seq of orderID is stored as skipped by operator.
func (w *world) skipped(orderID string, seq int64) bool {
	defer w.hush()()
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

// healRun is one AutoReplay run on instance inst: as the timer invokes it
// (POST /AutoReplay through the instance's server, its figures read from
// the metrics line of its Logs) when viaTimer, else heal.RunOnce (a run
// started inside another). Then the checks of a run (checkRun).
func (w *world) healRun(inst int, viaTimer bool) {
	w.st.healRuns++
	w.inRun++
	outer := w.raced
	if w.inRun == 1 {
		w.raced = false
	}
	before := w.snapshotRun()
	faults, sb, interleaved := w.stepFaults, w.stepSB, w.stepInterleaved
	var metrics map[string]string
	if viaTimer {
		body := `{"Data":{"timer":{"Schedule":{"AdjustForDST":true},"ScheduleStatus":null,"IsPastDue":false}},"Metadata":{"sys":{"MethodName":"AutoReplay"}}}`
		ctx := context.Background()
		if w.inRun == 1 && w.depth == 0 {
			// The host may cancel the invocation mid-run (storeFault): a
			// cancellation, not a simulated deadline, which heal would
			// judge against the wall clock (its peek's and lag survey's
			// timers).
			var cancel context.CancelFunc
			ctx, cancel = context.WithCancel(ctx)
			was := w.ctx
			w.ctx, w.runCancel, w.runPeeked = ctx, cancel, false
			defer func() { cancel(); w.ctx, w.runCancel = was, nil }()
		}
		code, out := w.serve(ctx, inst, httptest.NewRequest(http.MethodPost, "/"+handler.FnAutoReplay, strings.NewReader(body)))
		metrics = metricsOf(out)
		if code != http.StatusOK {
			w.violate("AutoReplay's invocation answered %d: %s", code, out)
		}
		w.note("instance %d: AutoReplay run: %s", inst, strings.Join(logsOf(out), " | "))
	} else {
		r := w.healers[inst].RunOnce(context.Background())
		w.note("instance %d: AutoReplay run (inside another): %d replayed, %d failed, paused %q", inst, len(r.Replayed), len(r.Failed), r.Paused)
	}
	clean := w.stepFaults == faults && w.stepSB == sb && w.stepInterleaved == interleaved
	if w.inRun == 1 {
		w.checkRun(before, metrics, clean && !w.raced, !w.raced)
		w.raced = outer
	}
	w.inRun--
}

// logsOf are the Logs of an invocation's answer.
func logsOf(body string) []string {
	var out struct{ Logs []string }
	_ = json.Unmarshal([]byte(body), &out)
	return out.Logs
}

// metricsOf are the fields of the metrics line of an AutoReplay
// invocation's Logs (nil when it wrote none).
func metricsOf(body string) map[string]string {
	for _, l := range logsOf(body) {
		rest, ok := strings.CutPrefix(l, handler.LineMetrics+" ")
		if !ok {
			continue
		}
		out := map[string]string{}
		sc := bufio.NewScanner(strings.NewReader(rest))
		sc.Split(bufio.ScanWords)
		for sc.Scan() {
			if k, v, ok := strings.Cut(sc.Text(), "="); ok {
				out[k] = v
			}
		}
		return out
	}
	return nil
}

// healPass runs AutoReplay as many times as it takes to go through both
// indexes once from wherever the runs stand: a run goes on where the last
// one stopped, so ceil(n / per run) runs cover n entries from the start,
// and one more ends the pass under way. Then, the invariant of the lag
// survey's budget: every order in the active-orders index throughout was
// surveyed by those runs (an oracle apart from heal.Pass: the index's own
// reads, logged).
func (w *world) healPass() {
	active := w.active.ids()
	blocked, _, _ := w.mem.ScanBlocked(context.Background(), "", 1<<20)
	runs := max(ceilDiv(len(active), w.lagPerRun), ceilDiv(len(blocked), w.blockedPerRun)) + 1
	w.active.reset()
	for range runs {
		w.healRun(0, true)
		w.advance(time.Minute) // the schedule
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

// readStatus is OrderStatus (GET /api/orders/{orderId} on the instance's
// server): it reads the order and, when its next seq is parked (a drain
// cut short), resumes the drain.
func (w *world) readStatus(ctx context.Context, inst int, orderID string) {
	faults, sb, interleaved := w.stepFaults, w.stepSB, w.stepInterleaved
	code, body := w.serve(ctx, inst, httptest.NewRequest(http.MethodGet, "/api/orders/"+orderID, nil))
	deadline, _ := ctx.Deadline()
	clean := w.stepFaults == faults && w.stepSB == sb && w.stepInterleaved == interleaved && deadline.Sub(w.now) > time.Minute
	if _, cut := w.peek(orderID).NextParked(); cut && clean && code == http.StatusOK {
		// Every read of an order resumes its cut drain: with nothing
		// failing and time to spare, none is left.
		w.violate("GET /api/orders/%s answered 200 with nothing failing, and left its drain cut", orderID)
	}
	var v struct {
		AppliedSeq int64 `json:"appliedSeq"`
		Parked     int   `json:"parked"`
	}
	_ = json.Unmarshal([]byte(body), &v)
	w.note("instance %d: GET %s: %d, appliedSeq %d, %d parked", inst, orderID, code, v.AppliedSeq, v.Parked)
	if code == http.StatusInternalServerError {
		// Storage failing is a 503; a 500 is a bug (the server's recover
		// middleware turns a panic into one).
		w.violate("GET /api/orders/%s answered 500: %s", orderID, body)
	}
}

// quiesce stops the faults and heals everything, as a patient operator
// would: deliver what is queued, let AutoReplay run, check the blocked
// index, skip the gaps nothing can fill, settle the dead letters.
func (w *world) quiesce() {
	ctx := context.Background()
	w.ctx = ctx
	for round := 0; ; round++ {
		w.st.rounds++
		if round == 40 {
			w.violate("no quiescence after %d rounds: %d queued, %d dead letters", round, len(w.queue), len(w.dlq.msgs))
			for _, id := range w.orders {
				o := w.peek(id)
				st := orders.StateOf(o)
				w.violate("order %s: status %s, appliedSeq %d, %d parked, txCount %d", id, st.Status, o.AppliedSeq, o.ParkedCount, st.TxCount)
			}
			return
		}
		w.advance(time.Hour) // backoffs over, every lock expired
		for len(w.queue) > 0 {
			w.deliver(ctx, 0, 0)
		}
		w.healPass()
		if len(w.violations) > 0 {
			return
		}
		if len(w.queue) > 0 {
			continue
		}
		w.checkIndex(ctx)
		if len(w.violations) > 0 {
			return
		}
		page, _ := convoy.ListBlocked(ctx, w.store, "", convoy.MaxBlockedPageSize)
		if len(page.Orders) == 0 {
			w.advance(time.Hour)
			if p, err := replay.All(ctx, w.dlq.reader(), sender{w}, replay.AllOptions{Options: replay.Options{Orders: w.store}}); err == nil {
				w.note("replay of every dead letter: %d scanned", p.Scanned)
			}
			if len(w.queue) == 0 && w.settledDeadLetters() {
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
			if !w.poison[o.OrderID][o.MissingSeq] && o.MissingSeq <= int64(len(w.msgs[o.OrderID])) {
				// Every readable message is delivered in the end (a dead
				// letter of a transient cause is replayed): one that is
				// neither queued nor dead-lettered, and missing, was lost.
				w.violate("order %s is blocked on seq %d, a readable message neither queued nor dead-lettered: it was lost", o.OrderID, o.MissingSeq)
				return
			}
			w.skip(ctx, 1, o.OrderID, o.MissingSeq)
		}
	}
}

// settledDeadLetters: no dead letter is left but of corrupt messages
// (refused for ever: an operator deletes them).
func (w *world) settledDeadLetters() bool {
	for _, m := range w.dlq.msgs {
		if !w.corrupt[m.MessageID] {
			return false
		}
	}
	return true
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
