package heal

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/convoy-dev/convoy/handler/convoy"
	"github.com/convoy-dev/convoy/handler/operator"
)

// blockedParallelism is how many blocked index entries a run verifies at
// once (a head read each, and a resume for some).
const blockedParallelism = 16

// DefaultBlockedPerRun is how many entries of the blocked index a run
// verifies at most (the app setting AutoReplayBlockedPerRun defaults to
// it): every blocked order up to 5,000 is looked at every run, 100,000
// every 20 runs.
const DefaultBlockedPerRun = 5000

// survey verifies up to BlockedPerRun entries of the blocked index, from
// where the last run stopped (pass; until ctx ends): it resumes cut drains,
// records each blocked order's whereabouts where they changed, and sums it
// all up, each blocked order as its latest survey found it (Pass.rolling);
// the oldest blocked order is read from the index's first page. It also
// removes the states of orders with nothing left to replay. It returns the
// figures, the entries it found blocked, and the pass as it leaves it.
func (h *Healer) survey(ctx context.Context, dls *DeadLetters, dlErr error, states map[string]State, now time.Time, pass Pass) (*Figures, map[string]convoy.BlockedEntry, error) {
	f := &Figures{At: now, DeadLetters: dls, States: len(states), StatesComplete: true}
	if dlErr != nil {
		f.DeadLettersUnreadable = dlErr.Error()
	}
	first, _, err := h.blocked.ScanBlocked(ctx, "", firstBlocked)
	if err != nil {
		return nil, nil, fmt.Errorf("list blocked orders: %w", err)
	}
	entries, end, err := collect(ctx, pass.After, h.opts.BlockedPerRun, h.blocked.ScanBlocked, func(e convoy.BlockedEntry) string { return e.Key })
	if err != nil && (len(entries) == 0 || ctx.Err() == nil) {
		return nil, nil, fmt.Errorf("list blocked orders: %w", err)
	}
	// Each entry verified against its order's head (convoy.VerifyEntries),
	// and its drain resumed when its missing seq is not a dead letter (maybe
	// parked: a drain cut short), by its place in entries.
	listed := make([]*convoy.BlockedOrder, len(entries))
	finished := make([]bool, len(entries))
	var mu sync.Mutex
	work := make(chan int)
	var wg sync.WaitGroup
	for range min(h.parallel(blockedParallelism), len(entries)) {
		wg.Go(func() {
			for i := range work {
				if ctx.Err() != nil {
					continue
				}
				os, err := convoy.VerifyEntries(ctx, h.blocked, entries[i:i+1])
				if err == nil && len(os) > 0 { // otherwise pending, stale or unreadable now: the next pass looks again
					o, still := os[0], true
					if dls == nil || dls.Missing(o.OrderID, o.MissingSeq, o.AppliedSeq).Where != WhereDeadLetter {
						o, still = h.resume(ctx, o)
					}
					if still {
						listed[i] = &o
					}
				}
				mu.Lock()
				finished[i] = ctx.Err() == nil
				mu.Unlock()
			}
		})
	}
	for i := range entries {
		work <- i
	}
	close(work)
	wg.Wait()

	n := done(finished)
	var notes []convoy.BlockedNote
	blocked := map[string]convoy.BlockedEntry{}
	counts := Counts{}
	for i, e := range entries[:n] {
		o := listed[i]
		if o == nil {
			continue
		}
		blocked[o.OrderID] = e
		if dls != nil {
			m := dls.Missing(o.OrderID, o.MissingSeq, o.AppliedSeq)
			if f := o.Failing; f != nil {
				// Its decision fails (the rules panicked or failed): that is
				// why it waits, whatever became of its message.
				m.Cause, m.Why = operator.Permanent, "its decision fails: "+f.Why
			}
			if st, ok := states[o.OrderID]; ok {
				st.ETag = ""
				m.AutoReplay = &st
			}
			if note, changed := encodeNote(m, now, e.Note); changed {
				notes = append(notes, convoy.BlockedNote{Entry: e, Note: note})
				o.Note = note
			}
		}
		counts["n"]++
		counts[blockedParked] += int64(o.Parked)
		counts[blockedMissing+missingKey(*o, f)]++
	}
	_ = h.blocked.SetNotes(ctx, notes) // best effort: the next run writes what this one could not
	to := pass.After
	if n > 0 {
		to = entries[n-1].Key
	}
	cutShort := n < len(entries) || err != nil
	pass.advance(to, counts, nil, end && !cutShort, now)
	all, _ := pass.rolling()
	f.BlockedPass = &pass
	f.BlockedComplete = pass.Last != nil && !cutShort
	f.BlockedOrders, f.ParkedMessages, f.MissingBy = int(all["n"]), all[blockedParked], map[string]int{}
	for k, v := range all {
		if where, ok := strings.CutPrefix(k, blockedMissing); ok && v > 0 {
			f.MissingBy[where] = int(v)
		}
	}
	if oldest, err := convoy.CheckEntries(ctx, h.blocked, first); err == nil && len(oldest) > 0 {
		f.OldestBlockedSince = oldest[0].BlockedSince // the index is oldest first
	}
	if dls != nil {
		f.Pending, f.Retrying = dls.pending(states)
		due := map[string]bool{}
		for _, c := range dls.transientOrders() {
			due[c.orderID] = true
		}
		// States of orders with nothing left to replay: removed once their
		// backoff is over (a dead letter that comes back later starts over).
		// A peek that did not read the whole sub-queue cannot tell that of an
		// order it did not see: its state goes once its backoff has been
		// over for BackoffMax (all it could still tell is how far to double
		// the next wait), so that the states a run reads are bounded by the
		// settings (the orders claimed in that time, and the peek's), not by
		// the orders ever replayed.
		for id, st := range states {
			over := !now.Before(st.NextAttempt) && (dls.Complete || !now.Before(st.NextAttempt.Add(h.opts.BackoffMax)))
			if !due[id] && over && ctx.Err() == nil {
				_ = h.states.DeleteReplayState(ctx, id, st.ETag) // best effort: the next run tries again
			}
		}
	}
	return f, blocked, nil
}

// Blocked counts' names in a Pass's segments (besides "n"): parked
// messages, and blocked orders by where their missing message is.
const (
	blockedParked  = "parked"
	blockedMissing = "missing:"
)

// firstBlocked is how many entries of the index's first page a run checks
// for the oldest blocked order (a pending one costs a head read).
const firstBlocked = 10

// resume resumes o's drain when its missing seq proves parked; it returns
// o as the drain left it, and whether it is still blocked.
func (h *Healer) resume(ctx context.Context, o convoy.BlockedOrder) (convoy.BlockedOrder, bool) {
	if h.opts.Resume == nil {
		return o, true
	}
	res, err := h.opts.Resume(ctx, o.OrderID)
	if err != nil || res.AppliedSeq == o.AppliedSeq {
		return o, true // nothing parked at its missing seq (or unreadable now: the next run tries)
	}
	if res.Parked == 0 {
		return o, false
	}
	o.AppliedSeq, o.Parked, o.MissingSeq = res.AppliedSeq, res.Parked, res.AppliedSeq+1
	return o, true
}
