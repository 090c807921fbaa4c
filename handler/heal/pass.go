package heal

import (
	"context"
	"encoding/json"
	"time"
)

// Pass is a survey's way through an index (the blocked orders', the active
// orders') across AutoReplay runs (issue 37): each run surveys at most its
// budget of entries, from where the last run stopped, so that a run costs
// what its budget says whatever the size of the index; a pass is one way
// through the whole index, ended by the run that reaches its end (a run
// never goes on from the start: with an index that did not change, every
// pass then stops at the same keys, and the figures below add up exactly).
// It is kept in the Health record, so that the next run, on any instance,
// goes on from it.
//
// What a survey shows covers one period: each entry as its latest survey
// found it. This pass's segments cover the index up to the cursor; the last
// complete pass's, less what this pass has surveyed again of them, stand
// for the rest until this pass reaches it (rolling).
type Pass struct {
	// After is the last key this pass surveyed ("": none yet).
	After string `json:"after,omitempty"`
	// StartedAt is when the pass began: when the last one ended (the first
	// pass: its first run).
	StartedAt time.Time `json:"startedAt"`
	Segments  []Segment `json:"segments,omitempty"`
	Last      *LastPass `json:"last,omitempty"`
	// Heads are the oldest heads this pass found (the lag survey's).
	Heads []OldestHead `json:"heads,omitempty"`
}

// LastPass is the last complete pass.
type LastPass struct {
	StartedAt time.Time    `json:"startedAt"`
	EndedAt   time.Time    `json:"endedAt"`
	Segments  []Segment    `json:"segments,omitempty"`
	Heads     []OldestHead `json:"heads,omitempty"`
}

// Segment is what one run's survey found in a range of the index's keys:
// after the last key of the segment before it (the first: from the
// index's start), up to and including To.
type Segment struct {
	To     string    `json:"t"`
	At     time.Time `json:"at"` // when it was surveyed (a segment of several runs: the first)
	Counts Counts    `json:"c"`
}

// Counts are a survey's figures over a segment, by name; "n" counts the
// entries surveyed, surveyUnread those skipped because their read failed.
type Counts map[string]int64

const surveyUnread = "unread"

func (c Counts) add(o Counts, sign int64) {
	for k, v := range o {
		c[k] += sign * v
	}
}

// clone is a copy of *p sharing nothing with it (the zero Pass for nil).
func (p *Pass) clone() Pass {
	if p == nil {
		return Pass{}
	}
	var c Pass
	raw, _ := json.Marshal(p)
	_ = json.Unmarshal(raw, &c)
	return c
}

// maxSegments bounds the segments a pass keeps (the Health record is one
// Table Storage property of at most 64 KiB: TestHealthRecordWorstCaseFits;
// 12 did not fit at the largest keys and counts, issue 42): past it, the
// last segment takes in the runs that follow, so that a pass's segments
// still stop at the same keys as the last one's.
const maxSegments = 8

// advance records a run's survey of the entries after p.After up to to,
// which found c (to is p.After when it worked through none: nothing is
// recorded), and, when end says the run reached the end of the index,
// closes the pass. Entries worked through that counted nothing (none still
// blocked, or left for the next pass) move the cursor too: otherwise a run
// of such entries only would leave it where it was, and the next run would
// stop at the same entries, for ever (issue 42).
func (p *Pass) advance(to string, c Counts, heads []OldestHead, end bool, now time.Time) {
	if p.StartedAt.IsZero() {
		p.StartedAt = now
	}
	if to != p.After {
		s := Segment{To: to, At: now, Counts: c}
		if n := len(p.Segments); n >= maxSegments {
			last := &p.Segments[n-1]
			last.To = to
			last.Counts.add(c, 1)
		} else {
			p.Segments = append(p.Segments, s)
		}
		p.After = to
		p.Heads = mergeHeads(p.Heads, heads, "")
	}
	if end {
		*p = Pass{StartedAt: now, Last: &LastPass{StartedAt: p.StartedAt, EndedAt: now, Segments: p.Segments, Heads: p.Heads}}
	}
}

// rolling sums the figures of the last period: this pass's segments, and
// of the last pass's, the part beyond the cursor (a segment that holds the
// cursor, less this pass's segments within it: exact when both passes
// stopped at the same keys, which they do over an index that did not
// change). oldest is the earliest survey counted.
func (p *Pass) rolling() (c Counts, oldest time.Time) {
	c = Counts{}
	see := func(at time.Time) {
		if oldest.IsZero() || at.Before(oldest) {
			oldest = at
		}
	}
	for _, s := range p.Segments {
		c.add(s.Counts, 1)
		see(s.At)
	}
	if p.Last == nil {
		return c, oldest
	}
	for i, s := range p.Last.Segments {
		if p.After != "" && s.To <= p.After {
			continue // surveyed again by this pass
		}
		rest := Counts{}
		rest.add(s.Counts, 1)
		for j, mine := range p.Segments {
			if from(p.Segments, j) >= from(p.Last.Segments, i) { // within s: this pass's segments all end at or before the cursor
				rest.add(mine.Counts, -1)
			}
		}
		if rest["n"] <= 0 {
			continue
		}
		for k, v := range rest {
			c[k] += max(v, 0)
		}
		see(s.At)
	}
	return c, oldest
}

// current is the period under way, as of a run at now: the entries this
// pass surveyed and when it began, or, when that run ended a pass (and
// began none yet), that pass's.
func (p *Pass) current(now time.Time) (surveyed int64, since time.Time) {
	if len(p.Segments) == 0 && p.Last != nil && p.Last.EndedAt.Equal(now) {
		for _, s := range p.Last.Segments {
			surveyed += s.Counts["n"]
		}
		return surveyed, p.Last.StartedAt
	}
	for _, s := range p.Segments {
		surveyed += s.Counts["n"]
	}
	return surveyed, p.StartedAt
}

// from is where segment i of segs begins (after that key).
func from(segs []Segment, i int) string {
	if i == 0 {
		return ""
	}
	return segs[i-1].To
}

// shownHeads are the oldest heads of the last period: this pass's, and the
// last pass's beyond the cursor.
func (p *Pass) shownHeads() []OldestHead {
	if p.Last == nil {
		return mergeHeads(nil, p.Heads, "")
	}
	return mergeHeads(p.Heads, p.Last.Heads, p.After)
}

// period is how long the last complete pass took: how often every entry
// is looked at (0 before a pass completed).
func (p *Pass) period() time.Duration {
	if p.Last == nil {
		return 0
	}
	return p.Last.EndedAt.Sub(p.Last.StartedAt)
}

// collect reads up to budget entries of an index after after, a page of at
// most indexPage at a time; end says it reached the index's end. What it
// read before ctx ended or a page failed is returned with the error.
func collect[E any](ctx context.Context, after string, budget int, scan func(context.Context, string, int) ([]E, bool, error), key func(E) string) ([]E, bool, error) {
	var out []E
	for len(out) < budget {
		page, more, err := scan(ctx, after, min(indexPage, budget-len(out)))
		if err != nil {
			return out, false, err
		}
		out = append(out, page...)
		if !more || len(page) == 0 {
			return out, true, nil
		}
		after = key(page[len(page)-1])
	}
	return out, false, nil
}

// done is how many of the entries a survey worked through in order before
// the first one it did not (its deadline, a failure): the cursor moves past
// those only, and the figures count those only.
func done(finished []bool) int {
	for i, ok := range finished {
		if !ok {
			return i
		}
	}
	return len(finished)
}

// over is f as a run writes it over stored, the record's figures as they
// stand: of each survey, the pass stored when it is ahead of f's (another
// run wrote it since this one read it), with that survey's figures, so
// that a slow run never moves a cursor back (the next run would survey the
// same orders again, and the figures would go back with it).
func (f *Figures) over(stored *Figures) *Figures {
	if stored == nil {
		return f
	}
	out := *f
	if f.BlockedPass.behind(stored.BlockedPass) {
		out.BlockedPass, out.BlockedComplete = stored.BlockedPass, stored.BlockedComplete
		out.BlockedOrders, out.ParkedMessages, out.MissingBy = stored.BlockedOrders, stored.ParkedMessages, stored.MissingBy
	}
	if f.LagPass.behind(stored.LagPass) {
		out.LagPass, out.Lag = stored.LagPass, stored.Lag
	}
	return &out
}

// behind reports whether p is behind q: of an earlier generation (the last
// complete pass, by when it ended), or of the same one with a cursor
// before q's. A missing pass is behind any.
func (p *Pass) behind(q *Pass) bool {
	switch {
	case q == nil:
		return false
	case p == nil:
		return true
	}
	if pg, qg := p.generation(), q.generation(); !pg.Equal(qg) {
		return pg.Before(qg)
	}
	return p.After < q.After
}

// generation is when the last complete pass ended (zero before the first).
func (p *Pass) generation() time.Time {
	if p.Last == nil {
		return time.Time{}
	}
	return p.Last.EndedAt
}
