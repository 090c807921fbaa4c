package heal_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/convoy-dev/convoy/handler/convoy"
	"github.com/convoy-dev/convoy/handler/heal"
	"github.com/convoy-dev/convoy/handler/internal/memstore"
	"github.com/convoy-dev/convoy/handler/orders"
	"github.com/convoy-dev/convoy/handler/replay"
)

// interleaved is a run's StateStore that, as the run first writes the
// Health record, lets other runs go first (meanwhile), deterministically:
// a run that read the record at its start, and writes it after another
// run wrote it since.
type interleaved struct {
	heal.StateStore
	once      sync.Once
	meanwhile func()
}

func (s *interleaved) PutHealth(ctx context.Context, h heal.Health, etag string) (string, error) {
	s.once.Do(s.meanwhile)
	return s.StateStore.PutHealth(ctx, h, etag)
}

// activeOrders is an active-orders index of n orders o-000… (each caught
// up), which records the orders each survey reads.
func activeOrders(t *testing.T, f *fixture, n int) *surveyed {
	t.Helper()
	ctx := context.Background()
	ledgers := memstore.NewLedgers()
	ledgers.Now = f.clock.now
	all := ids("o", 0, n)
	for _, id := range all {
		if _, err := ledgers.Allocate(ctx, "L", "h", id, 1); err != nil {
			t.Fatal(err)
		}
	}
	if err := ledgers.Activate(ctx, all); err != nil {
		t.Fatal(err)
	}
	return &surveyed{Ledgers: ledgers}
}

// TestSlowRunKeepsTheCursorsOfFasterOnes (issue 42, item 3c): a slow run
// (A) read the record, and while it ran another instance's runs (B, twice)
// surveyed the first 4 of 8 orders and wrote their cursors. A's write
// moved them back to where A stopped (after the first 2), and the next run
// surveyed o-002 and o-003 a second time. The cursors never move back
// within a pass now: the next run goes on at o-004.
func TestSlowRunKeepsTheCursorsOfFasterOnes(t *testing.T) {
	ctx := context.Background()
	f := newFixture()
	index := activeOrders(t, f, 8)
	blocked := ids("b", 0, 8)
	f.block(t, blocked...)
	heads := &headsRead{Store: f.store}
	opts := heal.Options{Domain: orders.Domain, Now: f.clock.now, Active: index, LagPerRun: 2, BlockedPerRun: 2, Disabled: true, Sequential: true}
	open := func() (replay.Source, convoy.Sender, func(), error) { return f.q, f.sender, func() {}, nil }
	b := heal.New(heads, f.store, f.store, open, opts)
	var meanwhile []string
	slow := &interleaved{StateStore: f.store, meanwhile: func() {
		index.take() // A's
		for range 2 {
			f.clock.add(time.Minute)
			b.RunOnce(ctx)
		}
		meanwhile = index.take()
	}}
	heal.New(heads, f.store, slow, open, opts).RunOnce(ctx)
	if fmt.Sprint(meanwhile) != fmt.Sprint(ids("o", 0, 4)) {
		t.Fatalf("the runs meanwhile surveyed %v, want o-000…o-003", meanwhile)
	}
	index.take()
	heads.take()
	f.clock.add(time.Minute)
	b.RunOnce(ctx)
	if got := index.take(); fmt.Sprint(got) != fmt.Sprint(ids("o", 4, 6)) {
		t.Errorf("after the slow run wrote, the next run surveyed the active orders %v, want [o-004 o-005]", got)
	}
	stored, _, _, _ := f.store.Health(ctx)
	if p := stored.LastRun.BlockedPass; p == nil || !endsWith(p.After, blocked[5]) {
		t.Errorf("the blocked survey's cursor after the next run: %+v, want after %s", p, blocked[5])
	}
}

func endsWith(key, orderID string) bool {
	return len(key) > len(orderID) && key[len(key)-len(orderID)-1:] == "|"+orderID
}

// TestCloseClearsOnlyTheTripItSaw (issue 42, item 3c): a run (A) that
// succeeded closes the breaker; while it ran, another (B) found Service Bus
// failing and opened it. A's write cleared B's trip, and the next run
// replayed as if nothing had failed. A close now clears only the trip the
// run saw at its start: B's stands, and the next run pauses.
func TestCloseClearsOnlyTheTripItSaw(t *testing.T) {
	ctx := context.Background()
	f := newFixture()
	opts := heal.Options{Domain: orders.Domain, Now: f.clock.now, BreakerBase: time.Minute}
	down := &dlq{msgs: map[int64]replay.DeadLetter{}, locked: map[int64]bool{}, peekFail: errors.New("service bus down")}
	failing := heal.New(f.store, f.store, f.store, func() (replay.Source, convoy.Sender, func(), error) { return down, f.sender, func() {}, nil }, opts)
	var tripped heal.Run
	slow := &interleaved{StateStore: f.store, meanwhile: func() { tripped = failing.RunOnce(ctx) }}
	a := heal.New(f.store, f.store, slow, func() (replay.Source, convoy.Sender, func(), error) { return f.q, f.sender, func() {}, nil }, opts)
	if r := a.RunOnce(ctx); r.Paused != "" {
		t.Fatalf("A paused: %s", r.Paused)
	}
	if tripped.Paused == "" {
		t.Fatal("B did not trip the breaker")
	}
	s, err := a.Summarize(ctx)
	if err != nil || !s.AutoReplay.BreakerOpen {
		t.Fatalf("after A's close: %+v, %v; want B's trip to stand", s.AutoReplay, err)
	}
	f.clock.add(10 * time.Second)
	if r := heal.New(f.store, f.store, f.store, func() (replay.Source, convoy.Sender, func(), error) { return f.q, f.sender, func() {}, nil }, opts).RunOnce(ctx); r.Paused == "" {
		t.Error("the next run did not pause: B's trip was cleared")
	}
}
