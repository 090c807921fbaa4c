package heal_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/convoy-dev/convoy/handler/convoy"
	"github.com/convoy-dev/convoy/handler/fault"
	"github.com/convoy-dev/convoy/handler/heal"
	"github.com/convoy-dev/convoy/handler/internal/memstore"
	"github.com/convoy-dev/convoy/handler/orders"
	"github.com/convoy-dev/convoy/handler/replay"
)

// headLog is the blocked index whose head reads are logged by order, and
// fail for ever for one order: the survey's own reads, an oracle apart
// from its cursor.
type headLog struct {
	*memstore.Store
	bad  string
	mu   sync.Mutex
	read map[string]int
}

func (s *headLog) Head(ctx context.Context, orderID string) (convoy.Head, bool, error) {
	s.mu.Lock()
	s.read[orderID]++
	s.mu.Unlock()
	if orderID == s.bad {
		return convoy.Head{}, false, fault.Errorf(fault.Unavailable, "injected: the head of %s cannot be read", orderID)
	}
	return s.Store.Head(ctx, orderID)
}

// TestBlockedSurveyGoesOnPastAnEntryItCannotVerify (issue 42, item 3b, the
// blocked survey's side): an entry whose order's head cannot be read is left
// for the next pass, and the cursor moves past it like past any other entry
// the run worked through. A run whose entries were none of them still
// blocked used to leave the cursor where it was, so that one unreadable
// order at one entry a run held the survey before it for ever.
func TestBlockedSurveyGoesOnPastAnEntryItCannotVerify(t *testing.T) {
	ctx := context.Background()
	f := newFixture()
	blocked := f.block(t, "o-1", "o-2", "o-3", "o-4") // oldest first: o-1 is the index's first entry
	index := &headLog{Store: f.store, bad: blocked[0].OrderID, read: map[string]int{}}
	h := heal.New(index, f.store, f.store, func() (replay.Source, convoy.Sender, func(), error) { return f.q, f.sender, func() {}, nil },
		heal.Options{Domain: orders.Domain, Now: f.clock.now, Disabled: true, Sequential: true, BlockedPerRun: 1})
	for range 5 { // a pass of 4 entries, one a run, and one run more
		h.RunOnce(ctx)
		f.clock.add(time.Minute)
	}
	for _, o := range blocked {
		if index.read[o.OrderID] == 0 {
			t.Errorf("%s was never verified in 5 runs of one entry over 4 (head reads: %v)", o.OrderID, index.read)
		}
	}
}
