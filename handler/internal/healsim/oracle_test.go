package healsim

import (
	"context"
	"errors"
	"maps"
	"slices"
	"strconv"
	"time"

	"github.com/convoy-dev/convoy/handler/convoy"
	"github.com/convoy-dev/convoy/handler/heal"
	"github.com/convoy-dev/convoy/handler/internal/convoytest"
	"github.com/convoy-dev/convoy/handler/internal/memstore"
	"github.com/convoy-dev/convoy/handler/internal/storetest"
	"github.com/convoy-dev/convoy/handler/operator"
	"github.com/convoy-dev/convoy/handler/orders"
)

// The oracles. Each judges the code under test by something it does not
// compute: the queue model's record of deliveries, the store's own rows
// read without hooks, convoytest's fold, the simulation's dead-letter
// queue.

// record is what the orders queue saw of each message (by order/seq),
// kept by the queue model, never read from the store.
type record struct {
	// acked: a Process call that held it succeeded and its completion
	// went through: its seq was decided for good.
	acked map[string]bool
	// inFlight: handed to a Process call not returned yet, by instance.
	inFlight map[string]*[instances]int
	// handed is the highest seq of each order ever handed to a Process
	// call (corrupt seqs aside): an order can only be blocked on a seq
	// below one that was received.
	handed map[string]int64
}

// flying are the deliveries of k in flight on each instance.
func (r record) flying(k string) [instances]int {
	if n := r.inFlight[k]; n != nil {
		return *n
	}
	return [instances]int{}
}

func newRecord() record {
	return record{acked: map[string]bool{}, inFlight: map[string]*[instances]int{}, handed: map[string]int64{}}
}

// hush turns the store's hooks off while an oracle reads it (no fault, no
// time passing, no interleaving), and returns what turns them back.
func (w *world) hush() func() {
	quiet := w.quiet
	w.quiet = true
	return func() { w.quiet = quiet }
}

// peek reads an order's durable state without hooks.
func (w *world) peek(id string) *convoy.Key {
	defer w.hush()()
	o, err := w.mem.Load(context.Background(), id)
	if err != nil {
		panic(err)
	}
	return o
}

// checkedStore is the store the actors use: every commit that landed (its
// answer lost or not) is checked against the rows it left, and every skip
// against the durable state it replaced and the record of deliveries.
type checkedStore struct {
	*memstore.Store
	w *world
}

func (s *checkedStore) Commit(ctx context.Context, o *convoy.Key, base int64, c *convoy.Change) error {
	var skips []int64
	for _, r := range c.Rejections {
		if r.Reason == convoy.ReasonSkipped {
			skips = append(skips, r.Seq)
		}
	}
	var before *convoy.Key
	if len(skips) > 0 && !s.w.quiet {
		before = s.w.peek(o.ID)
	}
	err := s.Store.Commit(ctx, o, base, c)
	if landed := err == nil || errors.Is(err, memstore.ErrReplyLost); landed && !s.w.quiet {
		s.w.afterCommit(o.ID, skips, before)
		if s.w.dies(o.ID) {
			return errInstanceDied
		}
	}
	return err
}

// errInstanceDied is what a call sees of its instance dying right after a
// commit landed (a host recycled, a SIGKILL): nothing more of the call
// happens, its delivery's lock expires. Not transient: the call does not
// retry it.
var errInstanceDied = errors.New("the instance died")

// dies reports whether the instance dies after a commit that left
// orderID's drain cut (its next seq parked): the drains cut between two
// commits that issue 42 is about, made common.
func (w *world) dies(orderID string) bool {
	if w.storyDies && orderID == storyOrder {
		if _, cut := w.peek(orderID).NextParked(); cut {
			w.storyDies = false
			w.note("the instance dies after a commit of %s that left its drain cut", orderID)
			return true
		}
	}
	if !w.armed || w.depth > 0 {
		return false
	}
	if _, cut := w.peek(orderID).NextParked(); !cut || w.roll("dies|"+orderID) >= 40 {
		return false
	}
	w.stepFaults++
	w.note("the instance dies after a commit of %s that left its drain cut", orderID)
	return true
}

// afterCommit: no parked row at or below appliedSeq, as many rows as the
// head counts (storetest.ParkedAboveApplied); and each seq the commit
// skipped was missing: not received before (applied, rejected or parked:
// the state the commit replaced), never acknowledged nor in flight (the
// queue's record), and skipped while its order was blocked (a later seq
// had been received).
func (w *world) afterCommit(orderID string, skips []int64, before *convoy.Key) {
	restore := w.hush()
	err := storetest.ParkedAboveApplied(context.Background(), w.mem, orderID)
	restore()
	if err != nil {
		w.violate("after a commit: %v", err)
	}
	for _, seq := range skips {
		k := key(orderID, seq)
		if _, parked := before.Parked[seq]; parked || seq <= before.AppliedSeq {
			w.violate("order %s: seq %d was skipped by operator though it was received (appliedSeq %d, parked: %v)", orderID, seq, before.AppliedSeq, parked)
		}
		if w.rec.acked[k] {
			w.violate("order %s: seq %d was skipped by operator though a delivery of it was processed and completed", orderID, seq)
		}
		for inst, n := range w.rec.flying(k) {
			switch {
			case n == 0:
			case inst == w.skipping:
				w.violate("order %s: seq %d was skipped by operator on instance %d while a delivery of it was being processed there", orderID, seq, inst)
			default:
				// Another instance's delivery of the very seq an operator
				// gives up on, at the same moment: nothing any instance
				// can see tells them apart, and the operator's choice wins
				// (the delivery finds the seq skipped, a duplicate; the
				// fold with it skipped is checked at the end).
				w.st.skipsRacingDelivery++
				w.note("  the skip of %s seq %d lands while instance %d processes a delivery of it", orderID, seq, inst)
			}
		}
		if w.rec.handed[orderID] <= seq {
			w.violate("order %s: seq %d was skipped by operator though the order was not blocked on it: no later seq was ever delivered (highest %d)",
				orderID, seq, w.rec.handed[orderID])
		}
	}
}

// checkBetween checks what holds between two top-level actions: a dead
// letter is locked only while a replay holds it, so none is once the
// action ended (unless a Service Bus call failed in it: a lock whose
// abandon or completion failed lasts until it expires, as in Service Bus).
func (w *world) checkBetween() {
	w.checkNoNewStale()
	w.checkListedOnce()
	if w.stepSB > 0 {
		return
	}
	for _, m := range w.dlq.locked() {
		if m.lockedIn != w.stepNo {
			continue // a lock an earlier action could not give back (a failed abandon) lasts until it expires
		}
		w.violate("dead letter %s (%s seq %d) is still locked by receiver %d after the action that received it ended",
			m.MessageID, m.SessionID, m.seq, m.holder)
	}
}

// checkNoNewStale: a step in which nothing failed (no store or Service
// Bus fault, no deadline, no other actor interleaved) clears the blocked
// index entry of every block it ended: an entry that was its order's
// current block when the step began is gone, or still current, after it.
// The oracle is the store's own rows: each entry against its order's head,
// read without hooks.
func (w *world) checkNoNewStale() {
	if w.stepFaults+w.stepSB+w.stepInterleaved+w.stepDeadlined > 0 {
		return
	}
	now := w.currentEntries()
	for key := range w.currentBefore {
		if stale, listed := now[key]; listed && stale {
			w.violate("a step with no fault ended the block of blocked index entry %s and left the entry", key)
		}
	}
}

// currentEntries maps the key of each blocked index entry to whether it
// outlived its block (its order's head is no longer blocked since its time);
// an entry whose commit has not landed (yet) is left out.
func (w *world) currentEntries() map[string]bool {
	defer w.hush()()
	ctx := context.Background()
	entries, _, err := w.mem.ScanBlocked(ctx, "", 1<<20)
	if err != nil {
		return nil
	}
	out := map[string]bool{}
	for _, e := range entries {
		h, ok, err := w.mem.Head(ctx, e.OrderID)
		if err != nil || !ok || h.Version < e.Version {
			continue
		}
		out[e.Key] = e.Stale(h)
	}
	return out
}

// checkListedOnce: between actions, whatever failed, the blocked list
// names an order once at most: a commit that ends one block and begins the
// next (its parked run drained, a later seq parked) ends the first's entry
// before the second's is written, and a reader never sees both (the order
// was blocked once at a time, as the simulation's own delivery of its
// seqs made it; an entry that outlived its block, a confirm landing after
// the commit that ended it whose clear failed, is read against the head by
// a list that finds its order twice: seed 781087206).
func (w *world) checkListedOnce() {
	defer w.hush()()
	page, err := convoy.ListBlocked(context.Background(), w.store, "", convoy.MaxBlockedPageSize)
	if err != nil {
		return
	}
	seen := map[string]bool{}
	for _, o := range page.Orders {
		if seen[o.OrderID] {
			w.violate("order %s is listed blocked twice", o.OrderID)
		}
		seen[o.OrderID] = true
	}
}

// runSnapshot is what an AutoReplay run starts from.
type runSnapshot struct {
	at        time.Time
	last      *heal.Figures
	resumable map[string]bool // orders whose next seq is parked, their entry within the run's budget, their missing seq not dead-lettered
}

func (w *world) snapshotRun() runSnapshot {
	defer w.hush()()
	ctx := context.Background()
	s := runSnapshot{at: w.now, resumable: map[string]bool{}}
	hl, _, _, err := w.mem.Health(ctx)
	if err == nil {
		s.last = hl.LastRun
	}
	// The entries the run's blocked survey verifies: BlockedPerRun from
	// the cursor on.
	after := ""
	if s.last != nil && s.last.BlockedPass != nil {
		after = s.last.BlockedPass.After
	}
	entries, _, _ := w.mem.ScanBlocked(ctx, after, w.blockedPerRun)
	for _, e := range entries {
		o, err := w.mem.Load(ctx, e.OrderID)
		if err != nil {
			continue
		}
		// Only the entry of the order's current block is verified as it:
		// another (a stale one, left by a commit that failed) is cleared
		// (seed 8052).
		current := e.Since.Equal(o.BlockedSince)
		if _, cut := o.NextParked(); cut && current && !w.deadLettered(o.ID, o.AppliedSeq+1) {
			s.resumable[o.ID] = true
		}
	}
	return s
}

// deadLettered reports whether the dead-letter queue holds seq of orderID.
func (w *world) deadLettered(orderID string, seq int64) bool {
	for _, m := range w.dlq.msgs {
		if m.SessionID == orderID && m.seq == seq {
			return true
		}
	}
	return false
}

// checkRun checks an AutoReplay run that recorded its figures: its survey
// cursors only moved forward within a pass (unless another run raced it:
// issue 42, 3c); and, when nothing failed in it, every order it found
// resumable is resumed, and when it surveyed the whole blocked index
// itself, its figures are the simulation's own count at that instant.
func (w *world) checkRun(before runSnapshot, metrics map[string]string, clean, alone bool) {
	defer w.hush()()
	ctx := context.Background()
	hl, _, _, err := w.mem.Health(ctx)
	if err != nil || hl.LastRun == nil || !hl.LastRun.At.Equal(before.at) {
		return // the run recorded nothing
	}
	f := hl.LastRun
	if alone && before.last != nil {
		w.checkCursor("blocked", before.last.BlockedPass, f.BlockedPass)
		w.checkCursor("lag", before.last.LagPass, f.LagPass)
	}
	if !clean {
		return
	}
	for id := range before.resumable {
		if o := w.peek(id); o.AppliedSeq >= 0 {
			if _, cut := o.NextParked(); cut {
				w.violate("order %s: its next seq %d is parked (a cut drain), and the AutoReplay run that verified its entry with no fault did not resume it",
					id, o.AppliedSeq+1)
			}
		}
	}
	if metrics != nil && wholePassBy(f.BlockedPass, before.at) {
		w.checkFigures(metrics)
	}
}

// checkCursor: within one pass (the same start), the cursor never moves
// back.
func (w *world) checkCursor(which string, was, is *heal.Pass) {
	if was == nil || is == nil || !was.StartedAt.Equal(is.StartedAt) {
		return
	}
	if is.After < was.After {
		w.violate("the %s survey's cursor moved back within a pass (started %s): from %q to %q", which, is.StartedAt, was.After, is.After)
	}
}

// wholePassBy reports whether the run at at surveyed a whole pass of the
// blocked index by itself: the pass it ended has no segment of another run.
func wholePassBy(p *heal.Pass, at time.Time) bool {
	if p == nil || p.Last == nil || len(p.Segments) > 0 || !p.Last.EndedAt.Equal(at) || !p.Last.StartedAt.Equal(at) && len(p.Last.Segments) == 0 {
		return false
	}
	for _, s := range p.Last.Segments {
		if !s.At.Equal(at) {
			return false
		}
	}
	return true
}

// checkFigures: the figures of the metrics line of a run that surveyed the
// whole blocked index with nothing failing are the simulation's count:
// the orders with parked rows and their rows, read from the store's rows
// (not its index, not its heads), and the dead letters the run's peek
// found less those its pass completed (the sub-queue now: nothing else
// touched it in a run with no interleaving), by cause as the simulation made them (an unreadable body is
// permanent; a seq too far ahead counts transient in these figures, which
// do not read the orders' appliedSeq).
func (w *world) checkFigures(metrics map[string]string) {
	ctx := context.Background()
	blocked, parked := 0, 0
	for _, id := range w.orders {
		rows, _, _ := w.mem.Parked(ctx, id, 0, 1<<20)
		if len(rows) > 0 {
			blocked++
			parked += len(rows)
		}
	}
	total, permanent := len(w.dlq.msgs), 0
	for _, m := range w.dlq.msgs {
		if w.poison[m.SessionID][m.seq] {
			permanent++
		}
	}
	want := map[string]int{"blockedOrders": blocked, "parkedMessages": parked, "deadLetters": total,
		"deadLettersPermanent": permanent, "deadLettersTransient": total - permanent}
	for _, k := range slices.Sorted(maps.Keys(want)) {
		if got, err := strconv.Atoi(metrics[k]); err != nil || got != want[k] {
			w.violate("AutoReplay's metrics line says %s=%s; the simulation counts %d", k, metrics[k], want[k])
		}
	}
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
	// The index itself, not as a reader's verification shows it: after
	// a pass of AutoReplay runs, each of which verifies its entries, no
	// entry is left of an order with nothing parked (a block never
	// cleared would cost every reader a head read for ever).
	restore := w.hush()
	raw, _, _ := w.mem.ScanBlocked(ctx, "", 1<<20)
	restore()
	entries := map[string]int{}
	for _, e := range raw {
		entries[e.OrderID]++
		o := w.peek(e.OrderID)
		switch {
		case o.ParkedCount == 0:
			w.violate("order %s has nothing parked (appliedSeq %d), yet its blocked index entry %s is still there after a pass of AutoReplay runs", e.OrderID, o.AppliedSeq, e.Key)
		case !e.Since.Equal(o.BlockedSince):
			// A block that ended (its run of parked messages drained, a
			// new one begun in the same commit) leaves no entry behind.
			w.violate("order %s is blocked since %s, yet its blocked index entry %s of a block since %s is still there after a pass of AutoReplay runs",
				e.OrderID, o.BlockedSince.Format(time.RFC3339Nano), e.Key, e.Since.Format(time.RFC3339Nano))
		}
	}
	for id, n := range entries {
		if n > 1 {
			w.violate("order %s has %d entries in the blocked index after a pass of AutoReplay runs: one block at a time", id, n)
		}
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
// dead-lettered is left but the corrupt messages.
func (w *world) checkFinal() {
	ctx := context.Background()
	defer w.hush()()
	for _, id := range w.orders {
		o := w.peek(id)
		cv, err := convoy.ReadView(ctx, orders.Domain, w.mem, w.mem, id, "", convoy.MaxHistoryPageSize)
		v := orders.ViewOf(cv)
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
			tx, _ := orders.DecodeBody(m.Body)
			msgs = append(msgs, convoy.Message{Seq: m.Seq, Last: m.Last, Command: tx})
		}
		if why := convoytest.Compare(cv, convoytest.FoldSkipping(msgs, skipped)); why != "" {
			w.violate("order %s differs from the fold of its messages (skipped %v): %s", id, slices.Sorted(maps.Keys(skipped)), why)
		}
		if _, cut := o.NextParked(); cut || !o.BlockedSince.IsZero() || o.ParkedCount != 0 {
			w.violate("order %s: head and parked rows disagree: appliedSeq %d, %d parked, blocked since %v", id, o.AppliedSeq, o.ParkedCount, o.BlockedSince)
		}
	}
	for _, m := range w.dlq.msgs {
		if c := operator.Classify(orders.Domain, m.DeadLetter, -1); !w.corrupt[m.MessageID] {
			w.violate("dead letter %s left (%s)", m.MessageID, c.Why)
		}
	}
}
