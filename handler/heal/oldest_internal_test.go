package heal

import (
	"cmp"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
)

// TestOldestHeadsKeepsTen (issue 33, item 6): the lag survey keeps the
// OldestHeadsShown oldest heads as it goes, never every order with a
// backlog (10,000 of them were kept and sorted to show 10), and shows the
// same ones, oldest first, as sorting them all would (equal ages by order
// id).
func TestOldestHeadsKeepsTen(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	var all []OldestHead
	var o oldestHeads
	for i := range 10_000 {
		h := OldestHead{OrderID: fmt.Sprintf("o-%05d", i), HeadAgeSeconds: float64(rng.IntN(5000)) / 10}
		all = append(all, h)
		o.add(h)
		if len(o.heads) > OldestHeadsShown || cap(o.heads) > 2*OldestHeadsShown {
			t.Fatalf("after %d heads, %d kept (capacity %d), want at most %d", i+1, len(o.heads), cap(o.heads), OldestHeadsShown)
		}
	}
	slices.SortFunc(all, func(a, b OldestHead) int {
		return cmp.Or(cmp.Compare(b.HeadAgeSeconds, a.HeadAgeSeconds), cmp.Compare(a.OrderID, b.OrderID))
	})
	if got, want := o.list(), all[:OldestHeadsShown]; !slices.Equal(got, want) {
		t.Fatalf("shown %v, want %v", got, want)
	}
	var few oldestHeads
	few.add(all[3])
	few.add(all[1])
	if got := few.list(); !slices.Equal(got, []OldestHead{all[1], all[3]}) {
		t.Fatalf("two heads shown as %v", got)
	}
}
