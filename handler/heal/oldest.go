package heal

import (
	"cmp"
	"slices"
	"time"
)

// oldestHeads keeps the OldestHeadsShown oldest heads a survey has seen,
// oldest first (equal ages by order id), as it goes: a survey of 10,000
// orders with a backlog holds ten, not 10,000 to sort.
type oldestHeads struct {
	heads []OldestHead
}

// olderHead orders heads by when their wait began (heads surveyed by
// different runs are compared by that, not by the age each run saw).
func olderHead(a, b OldestHead) int {
	return cmp.Or(a.since().Compare(b.since()), cmp.Compare(a.OrderID, b.OrderID))
}

func (h OldestHead) since() time.Time {
	return h.SurveyedAt.Add(-time.Duration(h.HeadAgeSeconds * float64(time.Second)))
}

// mergeHeads is the OldestHeadsShown oldest of mine and of those of last
// whose order ids lie after after ("": all), an order in both as in mine.
func mergeHeads(mine, last []OldestHead, after string) []OldestHead {
	var o oldestHeads
	seen := map[string]bool{}
	for _, h := range mine {
		o.add(h)
		seen[h.OrderID] = true
	}
	for _, h := range last {
		if !seen[h.OrderID] && (after == "" || h.OrderID > after) {
			o.add(h)
		}
	}
	return o.list()
}

func (o *oldestHeads) add(h OldestHead) {
	if o.heads == nil {
		o.heads = make([]OldestHead, 0, OldestHeadsShown)
	}
	if len(o.heads) == OldestHeadsShown {
		if olderHead(h, o.heads[len(o.heads)-1]) >= 0 {
			return // not among the oldest
		}
		o.heads = o.heads[:len(o.heads)-1]
	}
	i, _ := slices.BinarySearchFunc(o.heads, h, olderHead)
	o.heads = slices.Insert(o.heads, i, h)
}

// list is the heads kept, oldest first.
func (o *oldestHeads) list() []OldestHead { return o.heads }
