package heal

import (
	"cmp"
	"slices"
)

// oldestHeads keeps the OldestHeadsShown oldest heads a survey has seen,
// oldest first (equal ages by order id), as it goes: a survey of 10,000
// orders with a backlog holds ten, not 10,000 to sort.
type oldestHeads struct {
	heads []OldestHead
}

func olderHead(a, b OldestHead) int {
	return cmp.Or(cmp.Compare(b.HeadAgeSeconds, a.HeadAgeSeconds), cmp.Compare(a.OrderID, b.OrderID))
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
