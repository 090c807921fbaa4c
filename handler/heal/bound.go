package heal

import (
	"unicode/utf8"

	"github.com/convoy-dev/convoy/handler/convoy"
)

// The Health record is one string property of one Table entity: at most
// 64 KiB of UTF-16, which its JSON (as json.Marshal writes it: '<', '>' and
// '&' escaped to six characters each, control characters too) never
// exceeds while it is at most 32 KiB of UTF-8 (each byte of UTF-8 is at
// most one UTF-16 unit of two bytes). Every string the record keeps is cut
// to a bound of its JSON's bytes, and every list and map it keeps is
// bounded by the code that fills it, so that the whole record fits at its
// largest (TestHealthRecordWorstCaseFits); a record that did not fit would
// fail every write, and freeze the surveys (issue 42).
const (
	// maxReasonBytes bounds a dead-letter reason (other tools write
	// exception text of kilobytes there), as DeadLetters.ByReason counts it
	// and as a blocked order's note quotes it.
	maxReasonBytes = 128
	// maxWhyBytes bounds a sentence saying why (the breaker's, the
	// unreadable sub-queue's, the lag survey's unread orders', the record's
	// own failed write).
	maxWhyBytes = 400
	// maxKeyBytes bounds an order id and an index key the record keeps
	// (a cursor, a segment's end): a blocked key is a timestamp of 24
	// characters, '|' and an order id of at most orders.MaxIDLength (100)
	// characters of [A-Za-z0-9._-].
	maxKeyBytes = 128
)

// clip is s cut so that its JSON is at most n bytes, quotes included,
// ending with "…" when cut.
func clip(s string, n int) string {
	if jsonCost(s)+2 <= n {
		return s
	}
	return prefixCosting(s, n-2-len("…")) + "…"
}

// clipKey is an index key cut like clip, but with no marker: a prefix of a
// key sorts before it, so a cursor cut short makes a survey look at some
// entries again rather than skip any ("…" sorts after every ASCII key).
func clipKey(s string) string {
	if jsonCost(s)+2 <= maxKeyBytes {
		return s
	}
	return prefixCosting(s, maxKeyBytes-2)
}

// prefixCosting is the longest prefix of s (whole runes) whose JSON costs
// at most n bytes, quotes excluded.
func prefixCosting(s string, n int) string {
	used := 0
	for i, r := range s {
		_, size := utf8.DecodeRuneInString(s[i:])
		c := runeCost(r, size)
		if used+c > n {
			return s[:i]
		}
		used += c
	}
	return s
}

// jsonCost is the bytes of s's JSON as json.Marshal writes it, quotes
// excluded (an upper bound: \b, \f, \n, \r and \t cost 2, counted as 6).
func jsonCost(s string) int {
	n := 0
	for i, r := range s {
		_, size := utf8.DecodeRuneInString(s[i:])
		n += runeCost(r, size)
	}
	return n
}

// runeCost is what one rune of a string costs in json.Marshal's output:
// "\u003c" for '<', '>' and '&', control characters, U+2028 and U+2029,
// and an invalid byte (as "\ufffd"); two for '"' and '\'.
func runeCost(r rune, size int) int {
	switch {
	case r == utf8.RuneError && size == 1, r < 0x20, r == '<', r == '>', r == '&', r == '\u2028', r == '\u2029':
		return 6
	case r == '"', r == '\\':
		return 2
	}
	return size
}

// bound cuts every string of the record to its bound (the lists and maps
// are bounded where they are filled: maxReasonsInSummaries, maxSegments,
// OldestHeadsShown, the keys of missingKey and of the lag's statuses).
func (h *Health) bound() {
	h.Breaker.Why = clip(h.Breaker.Why, maxWhyBytes)
	if u := h.Unwritten; u != nil {
		u.Why = clip(u.Why, maxWhyBytes)
	}
	f := h.LastRun
	if f == nil {
		return
	}
	f.DeadLettersUnreadable = clip(f.DeadLettersUnreadable, maxWhyBytes)
	f.OldestBlockedSince = clipKey(f.OldestBlockedSince)
	f.MissingBy = clipKeys(f.MissingBy)
	if d := f.DeadLetters; d != nil {
		d.ByReason = clipKeys(d.ByReason)
	}
	if l := f.Lag; l != nil {
		l.Unread = clip(l.Unread, maxWhyBytes)
		boundHeads(l.OldestHeads)
	}
	f.BlockedPass.bound()
	f.LagPass.bound()
}

func (p *Pass) bound() {
	if p == nil {
		return
	}
	p.After = clipKey(p.After)
	boundSegments(p.Segments)
	boundHeads(p.Heads)
	if p.Last != nil {
		boundSegments(p.Last.Segments)
		boundHeads(p.Last.Heads)
	}
}

func boundSegments(segs []Segment) {
	for i := range segs {
		segs[i].To = clipKey(segs[i].To)
		segs[i].Counts = clipKeys(segs[i].Counts)
	}
}

func boundHeads(heads []OldestHead) {
	for i := range heads {
		heads[i].OrderID = clipKey(heads[i].OrderID)
		heads[i].Status = convoy.LagStatus(clipKey(string(heads[i].Status)))
	}
}

// clipKeys is m with its keys cut like clipKey, adding up the counts of
// keys cut to the same one (m itself when none is too long).
func clipKeys[V int | int64](m map[string]V) map[string]V {
	long := false
	for k := range m {
		long = long || clipKey(k) != k
	}
	if !long {
		return m
	}
	out := make(map[string]V, len(m))
	for k, v := range m {
		out[clipKey(k)] += v
	}
	return out
}

// bounded is m with its strings cut to their bounds: a blocked order's note
// is one string property of its index entry, written by a run, a replay or
// a skip, and quotes reasons and errors that other tools wrote.
func (m Missing) bounded() Missing {
	m.MessageID = clipKey(m.MessageID)
	m.DeadLetterReason = clip(m.DeadLetterReason, maxReasonBytes)
	m.Why = clip(m.Why, maxWhyBytes)
	if st := m.AutoReplay; st != nil {
		c := *st
		c.LastError = clip(c.LastError, maxWhyBytes)
		m.AutoReplay = &c
	}
	return m
}
