package convoy

import (
	"context"
	"fmt"
	"time"
)

// attempt is one try at applying messages to an order: the order as it
// evolves, the change not yet committed, and the outcomes of its steps.
type attempt struct {
	p             *Processor
	o             *Key
	change        Change
	outcomes      []Outcome  // of this attempt's steps; those before pending are committed
	pending       int        // index in outcomes of the first step not yet committed
	done          *committed // what the call's commits made durable so far
	storedBlocked time.Time  // BlockedSince as last committed
	verify        bool       // look up rows guessed absent too (Key.Needs)
	stop          time.Time  // a drain stops here (zero: never), leaving the rest parked (drainStop)
}

// lookup reads the stored rows that deciding m needs and the key does not
// know (Key.Needs: one point read each), with verify those guessed absent too.
func (a *attempt) lookup(ctx context.Context, m Message) error {
	if seq, ok := a.o.ParkedUnknown(m, &a.change); ok {
		// Beyond the parked window (issue 33): one point read says whether
		// it is parked already, a duplicate.
		parked, err := a.p.store.IsParked(ctx, a.o.ID, seq)
		if err != nil {
			return fmt.Errorf("read parked seq %d of %s %q: %w", seq, a.p.domain.Noun(), a.o.ID, err)
		}
		a.o.LearnParked(seq, parked)
	}
	refs, err := a.o.Needs(m, a.verify)
	if err != nil {
		return err
	}
	for _, ref := range refs {
		p, found, err := a.p.store.Row(ctx, a.o.ID, ref)
		if err != nil {
			return fmt.Errorf("read row %s/%s of %s %q: %w", ref.Collection, ref.ID, a.p.domain.Noun(), a.o.ID, err)
		}
		a.o.Learn(ref, p, found)
	}
	return nil
}

// begin starts an attempt on o, bound to the processor's domain.
func (p *Processor) begin(o *Key, done *committed) (*attempt, error) {
	o.lagWindow = p.lag
	if _, err := o.Bind(p.domain); err != nil {
		return nil, err
	}
	return &attempt{p: p, o: o, done: done, storedBlocked: o.BlockedSince}, nil
}

// fail ends an attempt that failed: what its commits made durable stays in
// the call's record; o may hold uncommitted steps, or a commit's outcome is
// unknown, so the cached state goes.
func (a *attempt) fail() {
	a.done.outcomes = append(a.done.outcomes, a.outcomes[:a.pending]...)
	a.p.cache.drop(a.o.ID)
}

// finish ends the successful attempt: the call's outcomes are those its
// earlier attempts committed, then this attempt's, less the duplicates that
// only an earlier attempt of this same call made so.
func (a *attempt) finish() Result {
	a.o.Forget() // what the order keeps between calls stays bounded
	a.p.cache.put(a.o)
	earlier := map[int64]bool{}
	for _, out := range a.done.outcomes {
		earlier[out.Seq] = true
	}
	res := Result{Outcomes: append([]Outcome{}, a.done.outcomes...), Commits: a.done.commits,
		Blocked: a.done.blocked, Unblocked: a.done.unblocked}
	for _, out := range a.outcomes {
		if out.Disposition == Duplicate && earlier[out.Seq] {
			continue
		}
		res.Outcomes = append(res.Outcomes, out)
	}
	res.AppliedSeq, res.MissingSeq, res.Parked = a.o.AppliedSeq, a.o.MissingSeq(), a.o.ParkedCount
	_, res.Draining = a.o.NextParked()
	return res
}

func (a *attempt) drain(ctx context.Context) error {
	for {
		if err := a.makeRoom(ctx); err != nil {
			return err
		}
		if err := a.nextPage(ctx); err != nil {
			return err
		}
		if m, ok := a.o.NextParked(); ok {
			if !a.stop.IsZero() && a.p.now().After(a.stop) {
				return nil // left parked: Result.Draining
			}
			if err := a.lookup(ctx, m); err != nil {
				return err
			}
		}
		out, ok, err := a.o.DrainNext(a.p.now(), &a.change)
		if err != nil || !ok {
			return err
		}
		a.outcomes = append(a.outcomes, out)
	}
}

// nextPage reads the next page of the parked tail when the window has run
// out and more are parked (issue 33).
func (a *attempt) nextPage(ctx context.Context) error {
	after, ok := a.o.NextPage()
	if !ok {
		return nil
	}
	page, more, err := a.p.store.Parked(ctx, a.o.ID, after, ParkedPageSize)
	if err != nil {
		return fmt.Errorf("read the parked messages of %s %q after seq %d: %w", a.p.domain.Noun(), a.o.ID, after, err)
	}
	return a.o.AddParkedPage(page, more, &a.change)
}

// makeRoom commits early when one more step might not fit; each commit is a
// consistent prefix of the work, so a failure after it loses nothing.
func (a *attempt) makeRoom(ctx context.Context) error {
	if a.change.hasRoom(budget(a.p.domain)) {
		return nil
	}
	return a.commit(ctx)
}

// commit writes the pending change, keeping the blocked index in step with
// it in the three steps of BlockedIndex: before a commit that blocks the
// order or ends its block, the entry is made pending under the version the
// commit writes; after it, the entry of a block that holds is confirmed with
// the head's figures, and the entry of a block that ended is removed. Once
// the commit succeeded, what it changed is recorded: the outcomes of its
// steps, and whether it blocked or unblocked the order.
func (a *attempt) commit(ctx context.Context) error {
	o := a.o
	if a.change.Empty() {
		a.pending = len(a.outcomes) // duplicates only: nothing to write, nothing to lose
		return nil
	}
	since, before := o.BlockedSince, a.storedBlocked
	begins := !since.IsZero() && !since.Equal(before) // this commit begins a run of parked messages
	ends := !before.IsZero() && !before.Equal(since)  // it drains the run begun at before
	ended := ""                                       // the ended run's entry's ETag, as the update below left it
	if idx := a.p.index; idx != nil {
		if begins {
			if err := idx.MarkBlocked(ctx, o.ID, since, o.Version+1); err != nil {
				return fmt.Errorf("index blocked %s %q: %w", a.p.domain.Noun(), o.ID, err)
			}
		}
		if ends {
			pending := BlockedUpdate{Figures: true, Version: o.Version + 1, AppliedSeq: o.AppliedSeq, Parked: o.ParkedCount}
			var err error
			if ended, err = idx.UpdateBlocked(ctx, o.ID, before, pending, "*"); err != nil {
				return fmt.Errorf("index %s %q as unblocking: %w", a.p.domain.Noun(), o.ID, err)
			}
		}
	}
	if err := a.p.store.Commit(ctx, o, o.Version, &a.change); err != nil {
		return fmt.Errorf("commit %s %q at version %d: %w", a.p.domain.Noun(), o.ID, o.Version, err)
	}
	o.Version++
	o.StateProps = nil // written: the cache keeps State alone
	a.done.commits++
	a.pending = len(a.outcomes)
	a.change = Change{}
	a.done.unblocked = a.done.unblocked || ends
	a.done.blocked = a.done.blocked || begins
	a.storedBlocked = since
	if idx := a.p.index; idx != nil {
		// Best effort: an entry left pending is checked by its next reader.
		if ends {
			if ended != "" {
				_ = idx.ClearBlocked(ctx, o.ID, before, ended, o.Version)
			}
		}
		if !since.IsZero() {
			_, _ = idx.UpdateBlocked(ctx, o.ID, since, BlockedUpdate{Figures: true, Confirmed: true, Version: o.Version,
				AppliedSeq: o.AppliedSeq, Parked: o.ParkedCount}, "*")
		}
	}
	return nil
}
