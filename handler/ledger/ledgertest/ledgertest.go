// Package ledgertest is the conformance suite every ledger.Store passes.
package ledgertest

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/convoy-dev/convoy/handler/fault"
	"github.com/convoy-dev/convoy/handler/ledger"
)

// Run runs the suite; every test uses its own ids.
func Run(t *testing.T, s ledger.Store) {
	prefix := fmt.Sprintf("lt%d", time.Now().UnixNano())
	t.Run("Records", func(t *testing.T) { testRecords(t, s, prefix+"-rec") })
	t.Run("AllocateIsIdempotent", func(t *testing.T) { testAllocate(t, s, prefix+"-alloc") })
	t.Run("RacingLedgersShareNoSeqAndLeaveNoHole", func(t *testing.T) { testRace(t, s, prefix+"-race") })
}

func testRecords(t *testing.T, s ledger.Store, id string) {
	ctx := context.Background()
	if r, err := s.GetLedger(ctx, id); err != nil || r != nil {
		t.Fatalf("unknown ledger: %+v, %v", r, err)
	}
	rec := &ledger.Record{ID: id, Hash: "abc", Status: ledger.StatusPublishing, Transactions: 5, Orders: 2,
		UpdatedAt: time.Date(2026, 11, 21, 10, 20, 30, 0, time.UTC)}
	if err := s.CreateLedger(ctx, rec); err != nil {
		t.Fatal(err)
	}
	if err := s.CreateLedger(ctx, rec); !errors.Is(err, ledger.ErrLedgerExists) {
		t.Fatalf("second create: %v, want ErrLedgerExists", err)
	}
	rec.Sent, rec.Status = 3, ledger.StatusRejected
	rec.Error, rec.Problems = "the ledger is invalid", []fault.Problem{{Index: 2, Field: "amount", Reason: "is required"}}
	if err := s.SaveLedger(ctx, rec); err != nil {
		t.Fatal(err)
	}
	got, err := s.GetLedger(ctx, id)
	if err != nil || !reflect.DeepEqual(got, rec) {
		t.Fatalf("read back %+v, %v\nwant %+v", got, err, rec)
	}
}

func testAllocate(t *testing.T, s ledger.Store, order string) {
	ctx := context.Background()
	first, err := s.Allocate(ctx, "L-a", order, 3)
	if err != nil || first != 1 {
		t.Fatalf("first allocation: %d, %v; want 1", first, err)
	}
	second, err := s.Allocate(ctx, "L-b", order, 2)
	if err != nil || second != 4 {
		t.Fatalf("second allocation: %d, %v; want 4", second, err)
	}
	again, err := s.Allocate(ctx, "L-a", order, 3)
	if err != nil || again != 1 {
		t.Fatalf("the first ledger again: %d, %v; want its original 1", again, err)
	}
	third, err := s.Allocate(ctx, "L-c", order, 1)
	if err != nil || third != 6 {
		t.Fatalf("third allocation: %d, %v; want 6", third, err)
	}
}

func testRace(t *testing.T, s ledger.Store, prefix string) {
	ctx := context.Background()
	const ledgers, orders = 6, 3
	type grant struct {
		ledger, order int
		first         int64
	}
	var mu sync.Mutex
	var grants []grant
	var wg sync.WaitGroup
	for l := range ledgers {
		for repeat := range 2 { // each ledger allocates twice, as a retried ledger on another instance would
			wg.Add(1)
			go func() {
				defer wg.Done()
				for o := range orders {
					first, err := s.Allocate(ctx, fmt.Sprintf("L-%d", l), fmt.Sprintf("%s-o%d", prefix, o), l+1)
					if err != nil {
						t.Errorf("ledger %d (try %d), order %d: %v", l, repeat, o, err)
						return
					}
					mu.Lock()
					grants = append(grants, grant{l, o, first})
					mu.Unlock()
				}
			}()
		}
	}
	wg.Wait()
	for o := range orders {
		firstOf := map[int]int64{}
		for _, g := range grants {
			if g.order != o {
				continue
			}
			if prev, ok := firstOf[g.ledger]; ok && prev != g.first {
				t.Fatalf("order %d: ledger %d got %d and %d", o, g.ledger, prev, g.first)
			}
			firstOf[g.ledger] = g.first
		}
		// The ranges [first, first+count) must tile 1..total with no overlap and no hole.
		var seqs []int64
		for l, first := range firstOf {
			for k := range int64(l + 1) {
				seqs = append(seqs, first+k)
			}
		}
		slices.Sort(seqs)
		for i, seq := range seqs {
			if seq != int64(i+1) {
				t.Fatalf("order %d: seqs %v are not 1..%d without overlap or hole", o, seqs, len(seqs))
			}
		}
	}
}
