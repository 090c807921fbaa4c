package heal_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf16"

	"github.com/convoy-dev/convoy/handler/convoy"
	"github.com/convoy-dev/convoy/handler/fault"
	"github.com/convoy-dev/convoy/handler/heal"
	"github.com/convoy-dev/convoy/handler/internal/memstore"
	"github.com/convoy-dev/convoy/handler/orders"
	"github.com/convoy-dev/convoy/handler/replay"
)

// tableLimits is memstore refusing, as Table Storage does, a Health record
// whose one string property is more than limit bytes of UTF-16 (64 KiB:
// 32K characters), in the JSON tablestore's PutHealth writes. Test-local:
// memstore accepts any size today (another change makes it enforce Table
// Storage's limits itself). With newFigures set, it refuses as well every
// write of figures other than the stored ones (as if they were too large),
// and takes the rest.
type tableLimits struct {
	*memstore.Store
	limit      int
	mu         sync.Mutex
	newFigures bool
}

func (s *tableLimits) PutHealth(ctx context.Context, h heal.Health, etag string) (string, error) {
	raw, _ := json.Marshal(h) // as tablestore.PutHealth: '<', '>' and '&' escaped
	if n := 2 * len(utf16.Encode([]rune(string(raw)))); n > s.limit || s.refused(ctx, h) {
		return "", fault.Errorf(fault.Invalid, "PropertyValueTooLarge: the property is %d bytes, more than %d", n, s.limit)
	}
	return s.Store.PutHealth(ctx, h, etag)
}

func (s *tableLimits) refused(ctx context.Context, h heal.Health) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	stored, _, _, _ := s.Store.Health(ctx)
	return s.newFigures && h.LastRun != nil && (stored.LastRun == nil || !h.LastRun.At.Equal(stored.LastRun.At))
}

func (s *tableLimits) refuseFigures(on bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.newFigures = on
}

// longReasons dead-letters one message for each of 20 orders, with a
// reason of kilobytes made of what JSON escapes six-fold (other tools write
// exception text there): 20 × 4,000 characters escaped to 24,000 each.
func longReasons(q *dlq) {
	for i := range 20 {
		q.add(fmt.Sprintf("x-%02d", i), 1, fmt.Sprintf("%02d ", i)+strings.Repeat("<a href=\"x\">&amp;</a>", 200), "")
	}
}

// TestLongReasonsDoNotFreezeTheRecord (issue 42, item 2): with dead letters
// whose reasons are kilobytes of '<', '>' and '&', the record grew past
// what one Table property holds; its write failed, silently, and every run
// surveyed the same orders again from the same cursors. Each run now
// writes it, and both surveys go on: the runs read 2 orders each of 6,
// each order once (the oracle: the orders in the indexes, by key).
func TestLongReasonsDoNotFreezeTheRecord(t *testing.T) {
	ctx := context.Background()
	f := newFixture()
	longReasons(f.q)
	blocked := ids("b", 0, 6)
	f.block(t, blocked...)
	ledgers := memstore.NewLedgers()
	ledgers.Now = f.clock.now
	active := ids("o", 0, 6)
	for _, id := range active {
		if _, err := ledgers.Allocate(ctx, "L", "h", id, 1); err != nil {
			t.Fatal(err)
		}
	}
	if err := ledgers.Activate(ctx, active); err != nil {
		t.Fatal(err)
	}
	lagRead := &surveyed{Ledgers: ledgers}
	heads := &headsRead{Store: f.store}
	store := &tableLimits{Store: f.store, limit: 64 << 10}
	h := heal.New(heads, f.store, store, func() (replay.Source, convoy.Sender, func(), error) { return f.q, f.sender, func() {}, nil },
		heal.Options{Domain: orders.Domain, Now: f.clock.now, Active: lagRead, LagPerRun: 2, BlockedPerRun: 2, Disabled: true, Sequential: true})
	var lagSeen []string
	for run := range 3 {
		r := h.RunOnce(ctx)
		lagSeen = append(lagSeen, lagRead.take()...)
		stored, _, ok, err := f.store.Health(ctx)
		if err != nil || !ok || stored.LastRun == nil || !stored.LastRun.At.Equal(f.clock.now()) || r.Unrecorded != "" {
			t.Fatalf("run %d: the record not written (%v; %s)", run+1, err, r.Unrecorded)
		}
		// The blocked survey's cursor: after the run's second order; the
		// third run ends the pass.
		pass := stored.LastRun.BlockedPass
		ended := pass.Last != nil && pass.Last.EndedAt.Equal(f.clock.now())
		if run < 2 && !strings.HasSuffix(pass.After, "|"+blocked[2*run+1]) || run == 2 && (pass.After != "" || !ended) {
			t.Fatalf("run %d: the blocked survey's cursor is %q (a pass ended now: %t), want after %s", run+1, pass.After, ended, blocked[2*run+1])
		}
		f.clock.add(time.Minute)
	}
	if fmt.Sprint(lagSeen) != fmt.Sprint(active) {
		t.Fatalf("the lag survey read %v in 3 runs, want each of %v once", lagSeen, active)
	}
	if n := heads.take(); n < len(blocked) {
		t.Fatalf("the blocked survey read %d heads in 3 runs, want at least %d", n, len(blocked))
	}
}

// TestUnwrittenRecordIsVisible (issue 42, item 2): a run that cannot write
// the record says so (Run.Unrecorded, its own line), and so does the
// summary on any instance, with since when: the first failed run's time,
// kept through the runs that fail after it, and gone once a run writes it.
func TestUnwrittenRecordIsVisible(t *testing.T) {
	ctx := context.Background()
	f := newFixture()
	f.q.add("o-1", 2, "OperatorMoved", "")
	store := &tableLimits{Store: f.store, limit: 64 << 10}
	open := func() (replay.Source, convoy.Sender, func(), error) { return f.q, f.sender, func() {}, nil }
	h := heal.New(f.store, f.store, store, open, heal.Options{Domain: orders.Domain, Now: f.clock.now, Disabled: true})
	other := heal.New(f.store, f.store, store, open, heal.Options{Domain: orders.Domain, Now: f.clock.now, Disabled: true}) // another instance

	if r := h.RunOnce(ctx); r.Unrecorded != "" { // a record to stand
		t.Fatal(r.Unrecorded)
	}
	f.clock.add(time.Minute)
	since := f.clock.now().UTC().Format(time.RFC3339)
	store.refuseFigures(true) // the note of the failure is taken
	for range 2 {
		r := h.RunOnce(ctx)
		if !strings.Contains(r.Unrecorded, "since "+since) || !strings.Contains(r.Unrecorded, "PropertyValueTooLarge") ||
			r.Summary == nil || r.Summary.RecordFailingSince != since || !strings.Contains(r.Summary.RecordFailingWhy, "PropertyValueTooLarge") {
			t.Fatalf("a run that could not write the record: %q, summary %+v; want it to say so, since %s", r.Unrecorded, r.Summary, since)
		}
		s, err := other.Summarize(ctx)
		if err != nil || s.RecordFailingSince != since || !strings.Contains(s.RecordFailingWhy, "PropertyValueTooLarge") {
			t.Fatalf("another instance's summary: %+v, %v; want the record failing since %s", s, err, since)
		}
		f.clock.add(time.Minute)
	}
	store.refuseFigures(false)
	if r := h.RunOnce(ctx); r.Unrecorded != "" || r.Summary.RecordFailingSince != "" {
		t.Fatalf("a run that wrote the record: %q, failing since %q", r.Unrecorded, r.Summary.RecordFailingSince)
	}
	if s, err := other.Summarize(ctx); err != nil || s.RecordFailingSince != "" || s.RecordFailingWhy != "" {
		t.Fatalf("after a write: %+v, %v", s, err)
	}
}
