package heal

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/convoy-dev/convoy/handler/convoy"
	"github.com/convoy-dev/convoy/handler/fault"
	"github.com/convoy-dev/convoy/handler/operator"
	"github.com/convoy-dev/convoy/handler/replay"
)

// replayDue claims the due orders and replays them in one pass; it returns
// how many messages were re-sent, and why the run failed ("" if it did not).
func (h *Healer) replayDue(ctx context.Context, dls *DeadLetters, blocked map[string]convoy.BlockedEntry, states map[string]State, now time.Time, r *Run) (int64, map[string]*replay.OrderProgress, string) {
	todo := dls.transientOrders()
	for i := range todo {
		_, todo[i].blocked = blocked[todo[i].orderID]
	}
	slices.SortStableFunc(todo, func(a, b candidate) int {
		switch {
		case a.blocked && !b.blocked:
			return -1
		case b.blocked && !a.blocked:
			return 1
		}
		return 0
	})
	// The run's window: the first MaxScan dead letters of the sub-queue,
	// which its one pass can receive. Orders with a dead letter due in it
	// are claimed; the others wait for a later run (the window moves as
	// what it replays is completed), unless nothing in it can be replayed:
	// then what lies beyond is never reached, and the run says so.
	windowEnd := dls.windowEnd(h.opts.MaxScan)
	claims := map[string]claim{}
	var beyond []string
	for _, c := range todo {
		if len(claims) >= h.opts.MaxOrders {
			r.Deferred++ // the rest wait for the next run
			continue
		}
		if c.qseq > windowEnd {
			beyond = append(beyond, c.orderID)
			continue
		}
		st, ok := states[c.orderID] // read by this run, with its ETag
		etag := st.ETag
		if !ok || st.Seq != c.seq {
			st = State{OrderID: c.orderID, Seq: c.seq, Replayed: st.Replayed}
		} else if now.Before(st.NextAttempt) {
			r.Waiting++
			continue
		}
		st.OrderID, st.ETag = c.orderID, ""
		st.Attempts++
		st.LastAttempt, st.NextAttempt = now, now.Add(h.opts.backoff(st.Attempts))
		// The claim: of two runs that read the same state, one writes it.
		etag, err := h.states.PutReplayState(ctx, st, etag)
		if err != nil {
			if fault.CodeOf(err) == fault.Conflict {
				r.Elsewhere++
				continue
			}
			return 0, nil, "storage is failing: " + cut(err.Error())
		}
		claims[c.orderID] = claim{st: st, etag: etag, left: dls.permanentOf(c.orderID)}
	}
	if len(beyond) > 0 && len(claims) == 0 && r.Waiting == 0 {
		why := fmt.Sprintf("its dead letters lie beyond the first %d of the dead-letter queue, none of which this run can replay (ReplayScanLimit): skip the gaps of the dead letters of a permanent cause, or raise ReplayScanLimit", h.opts.MaxScan)
		for _, id := range beyond {
			r.fail(id, why, h.opts.MaxOrders)
		}
	} else {
		r.Deferred += len(beyond)
	}
	if len(claims) == 0 {
		return 0, nil, ""
	}
	if deadline, ok := ctx.Deadline(); ok && time.Until(deadline) < h.opts.PassTimeout/2 {
		h.giveBack(ctx, claims, now, "")
		r.Deferred += len(claims) // the run's deadline came before its pass
		return 0, nil, ""
	}
	src, sender, close, err := h.open()
	if err != nil {
		h.giveBack(ctx, claims, now, "")
		return 0, nil, "Service Bus is failing: " + cut(err.Error())
	}
	defer close()
	pass, perr := replay.All(ctx, src, sender, replay.AllOptions{Options: replay.Options{MaxScan: h.opts.MaxScan, Orders: h.orders,
		Select: func(d replay.DeadLetter) bool {
			_, ok := claims[d.SessionID]
			return ok && operator.Classify(h.opts.Domain, d, -1).Class == operator.Transient
		}}, Max: h.opts.MaxScan, NoClosingPeek: true, StopAt: dls.lastTransientOf(claims)})
	var replayed int64
	unreached := []string{}
	ids := slices.Sorted(maps.Keys(claims))
	for _, id := range ids {
		c := claims[id]
		done := pass.ByOrder[id]
		if done == nil {
			unreached = append(unreached, id)
			continue
		}
		c.st.Replayed += int64(len(done.Replayed))
		replayed += int64(len(done.Replayed))
		_, _ = h.states.PutReplayState(ctx, c.st, c.etag) // best effort: the claim already holds the backoff
		if len(done.Replayed) > 0 {
			r.Replayed = append(r.Replayed, Replay{OrderID: id, Seqs: done.Replayed, Attempt: c.st.Attempts, Left: c.left,
				NextWait: h.opts.backoff(c.st.Attempts).String()})
		}
	}
	if perr != nil {
		for _, id := range unreached {
			r.fail(id, cut(perr.Error()), h.opts.MaxOrders)
		}
		return replayed, pass.ByOrder, "a replay failed: " + cut(perr.Error())
	}
	for _, id := range unreached {
		switch {
		case pass.Scanned >= h.opts.MaxScan:
			// Behind MaxScan dead letters it keeps (of a permanent cause, or
			// of orders not due): never reached however often it runs.
			r.fail(id, fmt.Sprintf(
				"its dead letters lie beyond the first %d of the dead-letter queue, which this run received and left (ReplayScanLimit): skip the gaps of the dead letters of a permanent cause, or raise ReplayScanLimit", h.opts.MaxScan), h.opts.MaxOrders)
		case ctx.Err() != nil:
			// The run's deadline came before its dead letters.
			r.Deferred++
			h.giveBack(ctx, map[string]claim{id: claims[id]}, now, "")
		default:
			// Locked by another reader (a replay by an operator): no
			// attempt; the claim is given back so that the next run tries.
			r.Elsewhere++
			h.giveBack(ctx, map[string]claim{id: claims[id]}, now, "")
		}
	}
	return replayed, pass.ByOrder, ""
}

// claim is an order's state as a run claimed it.
type claim struct {
	st   State
	etag string
	left int // dead letters of a permanent cause, left for an operator
}

// giveBack undoes claims: no attempt was made.
func (h *Healer) giveBack(ctx context.Context, claims map[string]claim, now time.Time, why string) {
	for _, c := range claims {
		c.st.Attempts--
		c.st.NextAttempt = now
		c.st.LastError = clip(why, maxWhyBytes)           // a state is one Table property
		_, _ = h.states.PutReplayState(ctx, c.st, c.etag) // best effort
	}
}

// afterPass brings a run's figures up to what its pass settled, and records
// in the entries of the blocked orders it replayed that their missing
// messages are on their way back.
func (h *Healer) afterPass(ctx context.Context, f *Figures, dls *DeadLetters, blocked map[string]convoy.BlockedEntry, states map[string]State, settled map[string]*replay.OrderProgress, now time.Time) {
	if len(settled) == 0 {
		return
	}
	var notes []convoy.BlockedNote
	for _, id := range slices.Sorted(maps.Keys(settled)) {
		p := settled[id]
		dls.settled(id, append(slices.Clone(p.Replayed), p.Duplicates...))
		if e, ok := blocked[id]; ok && len(p.Replayed) > 0 {
			n, _ := encodeNote(Missing{Where: WhereNotDeadLettered,
				Why: fmt.Sprintf("re-sent by AutoReplay at %s (seqs %v): on its way back to the order", now.UTC().Format(time.RFC3339), p.Replayed)}, now, "")
			e.ETag = "*" // its note was written by this run since it was read
			notes = append(notes, convoy.BlockedNote{Entry: e, Note: n})
		}
	}
	_ = h.blocked.SetNotes(ctx, notes) // best effort: the next run records where they are
	f.Pending, f.Retrying = dls.pending(states)
}

func (o Options) backoff(attempts int) time.Duration {
	return double(o.BackoffBase, attempts, o.BackoffMax)
}
