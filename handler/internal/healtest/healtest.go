// Package healtest is the conformance suite of heal.StateStore, run against
// the in-memory store and the Table Storage one on Azurite.
package healtest

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/convoy-dev/convoy/handler/fault"
	"github.com/convoy-dev/convoy/handler/heal"
)

// Run checks the StateStore contract: insert-only without an ETag, replace
// only under the current ETag, a fault.Conflict otherwise, and a listing.
func Run(t *testing.T, s heal.StateStore) {
	ctx := context.Background()
	id := "heal-" + time.Now().Format("150405.000000")
	if _, _, ok, err := s.ReplayState(ctx, id); ok || err != nil {
		t.Fatalf("state of an unknown order: ok %v, %v", ok, err)
	}
	at := time.Date(2026, 11, 21, 10, 0, 0, 0, time.UTC)
	st := heal.State{OrderID: id, Seq: 4, Attempts: 1, LastAttempt: at, NextAttempt: at.Add(time.Minute), Replayed: 2}
	tag, err := s.PutReplayState(ctx, st, "")
	if err != nil || tag == "" {
		t.Fatalf("insert: %q, %v", tag, err)
	}
	if _, err := s.PutReplayState(ctx, st, ""); fault.CodeOf(err) != fault.Conflict {
		t.Fatalf("a second insert: %v, want a conflict", err)
	}
	got, tag2, ok, err := s.ReplayState(ctx, id)
	if err != nil || !ok || tag2 != tag || got.Seq != 4 || got.Attempts != 1 || !got.NextAttempt.Equal(st.NextAttempt) || got.Replayed != 2 || got.OrderID != id {
		t.Fatalf("read back %+v %q %v %v, want %+v %q", got, tag2, ok, err, st, tag)
	}
	st.Attempts = 2
	tag3, err := s.PutReplayState(ctx, st, tag)
	if err != nil || tag3 == tag {
		t.Fatalf("replace under the ETag: %q, %v", tag3, err)
	}
	// Two runs that read the same state: the second writer loses.
	if _, err := s.PutReplayState(ctx, st, tag); fault.CodeOf(err) != fault.Conflict {
		t.Fatalf("replace under a stale ETag: %v, want a conflict", err)
	}
	all, _, err := s.ReplayStates(ctx, "", 1000)
	found := false
	for _, x := range all {
		found = found || (x.OrderID == id && x.Attempts == 2)
	}
	if err != nil || !found {
		t.Fatalf("listing %+v, %v: the state is missing", all, err)
	}
	// Removed only under its current ETag.
	if err := s.DeleteReplayState(ctx, id, tag); err != nil {
		t.Fatalf("delete under a stale ETag: %v, want nothing done", err)
	}
	if _, _, ok, _ := s.ReplayState(ctx, id); !ok {
		t.Fatal("a delete under a stale ETag removed the state")
	}
	if err := s.DeleteReplayState(ctx, id, tag3); err != nil {
		t.Fatal(err)
	}
	if _, _, ok, _ := s.ReplayState(ctx, id); ok {
		t.Fatal("the state is still there after its delete")
	}

	// The shared health record: insert-only without an ETag, replace under
	// the current one.
	h, htag, ok, err := s.Health(ctx)
	if err != nil {
		t.Fatal(err)
	}
	h.Replayed++
	h.Breaker = heal.Breaker{Failures: 2, OpenUntil: at, Why: "a reason"}
	newTag, err := s.PutHealth(ctx, h, htag)
	if err != nil || (ok && newTag == htag) {
		t.Fatalf("write the health record (existing %v): %q, %v", ok, newTag, err)
	}
	if _, err := s.PutHealth(ctx, h, htag); fault.CodeOf(err) != fault.Conflict {
		t.Fatalf("a write under a stale ETag: %v, want a conflict", err)
	}
	got2, tag4, ok, err := s.Health(ctx)
	if err != nil || !ok || tag4 != newTag || got2.Replayed != h.Replayed || got2.Breaker.Failures != 2 || !got2.Breaker.OpenUntil.Equal(at) || got2.Breaker.Why != "a reason" {
		t.Fatalf("read back %+v %q %v %v, want %+v %q", got2, tag4, ok, err, h, newTag)
	}
	limits(t, s, id, got2, tag4)
	trends(t, s)
}

// trends: the trend series, an entity of its own, insert-only without an
// ETag, replaced under the current one; at its largest (TrendsKept points
// of twelve-digit figures) it fits its one property, and a series of many
// more points than a run keeps is refused as Azure refuses it (the
// property past 64 KiB), the stored one left as it was.
func trends(t *testing.T, s heal.StateStore) {
	ctx := context.Background()
	tr, tag, ok, err := s.Trends(ctx)
	if err != nil {
		t.Fatal(err)
	}
	at := time.Date(2026, 11, 21, 10, 0, 0, 0, time.UTC)
	one := heal.TrendPoint{At: at, BlockedOrders: 2, ParkedMessages: 3, DeadTransient: -1, DeadPermanent: 1, LagOK: 5, LagCatchingUp: 6,
		LagStalled: 7, LagBlocked: 8, CriticalP50Ms: 120, CriticalP99Ms: 2300, Applied: 40, AppliedSeconds: 360, AppliedPartial: 1}
	tr.Points = append(tr.Points, one)
	newTag, err := s.PutTrends(ctx, tr, tag)
	if err != nil || (ok && newTag == tag) {
		t.Fatalf("write the trend series (existing %v): %q, %v", ok, newTag, err)
	}
	if _, err := s.PutTrends(ctx, tr, tag); fault.CodeOf(err) != fault.Conflict {
		t.Fatalf("a write of the series under a stale ETag: %v, want a conflict", err)
	}
	got, tag2, ok, err := s.Trends(ctx)
	if err != nil || !ok || tag2 != newTag || len(got.Points) != len(tr.Points) || got.Points[len(got.Points)-1] != one {
		t.Fatalf("read back %d points %q %v %v, want the last %+v, ETag %q", len(got.Points), tag2, ok, err, one, newTag)
	}
	worst := heal.Trends{}
	for i := range heal.TrendsKept {
		const w = 999_999_999_999
		worst.Points = append(worst.Points, heal.TrendPoint{At: time.Date(9999, 12, 31, 0, 0, i, 0, time.UTC), BlockedOrders: w, ParkedMessages: w,
			DeadTransient: w, DeadPermanent: w, LagOK: w, LagCatchingUp: w, LagStalled: w, LagBlocked: w, CriticalP50Ms: w, CriticalP99Ms: w,
			Applied: w, AppliedSeconds: w, AppliedPartial: w})
	}
	tag3, err := s.PutTrends(ctx, worst, tag2)
	if err != nil {
		t.Fatalf("the series at its largest (%d characters): %v, want it kept", len(worst.Encode()), err)
	}
	over := heal.Trends{Points: slices.Repeat(worst.Points, 2)}
	if _, err := s.PutTrends(ctx, over, tag3); fault.CodeOf(err) != fault.Internal {
		t.Fatalf("a series of %d characters (more than 32,768): %v, want a refusal (fault.Internal)", len(over.Encode()), err)
	}
	if got, tag4, _, err := s.Trends(ctx); err != nil || tag4 != tag3 || len(got.Points) != heal.TrendsKept || got.Points[0] != worst.Points[0] {
		t.Fatalf("after the refused write: %d points %q %v, want the series as it was", len(got.Points), tag4, err)
	}
}

// limits: Table Storage's, on the rows of a StateStore, as tablestore
// surfaces Azure's refusal (a 400: fault.Internal) and writing nothing. The
// record and a state are each one string property holding their JSON (as
// json.Marshal writes it: '<' as \u003c), of at most 64 KiB as UTF-16
// (32,768 units); an order id is a RowKey, without '/', '\', '#', '?' or
// control characters.
func limits(t *testing.T, s heal.StateStore, id string, h heal.Health, etag string) {
	ctx := context.Background()
	const maxUnits = 32 * 1024
	over := h
	over.Breaker.Why = strings.Repeat("<", maxUnits/6+1) // six units each in JSON
	if _, err := s.PutHealth(ctx, over, etag); fault.CodeOf(err) != fault.Internal {
		t.Fatalf("a record of more than %d UTF-16 units: %v, want a refusal (fault.Internal)", maxUnits, err)
	}
	if got, tag, _, err := s.Health(ctx); err != nil || tag != etag || got.Breaker.Why != h.Breaker.Why {
		t.Fatalf("after the refused write: %q (%d characters) %v, want the record as it was", tag, len(got.Breaker.Why), err)
	}
	fit := h
	fit.Breaker.Why = "x"
	raw, _ := json.Marshal(fit)
	fit.Breaker.Why = strings.Repeat("x", maxUnits-len(raw)+1) // the JSON: 32,768 units exactly
	tag, err := s.PutHealth(ctx, fit, etag)
	if err != nil {
		t.Fatalf("a record of %d UTF-16 units: %v, want it kept", maxUnits, err)
	}
	fit.Breaker.Why += "x"
	if _, err := s.PutHealth(ctx, fit, tag); fault.CodeOf(err) != fault.Internal {
		t.Fatalf("a record of %d UTF-16 units: %v, want a refusal (fault.Internal)", maxUnits+1, err)
	}
	st := heal.State{OrderID: id + "-limit", Seq: 1, LastError: strings.Repeat("e", maxUnits)}
	if _, err := s.PutReplayState(ctx, st, ""); fault.CodeOf(err) != fault.Internal {
		t.Fatalf("a state of more than %d UTF-16 units: %v, want a refusal (fault.Internal)", maxUnits, err)
	}
	for _, c := range []string{"/", "#", "?", `\`, "\x01"} {
		st := heal.State{OrderID: id + c + "x", Seq: 1}
		if _, err := s.PutReplayState(ctx, st, ""); fault.CodeOf(err) != fault.Internal {
			t.Fatalf("the state of order %q: %v, want a refusal (fault.Internal)", st.OrderID, err)
		}
	}
	if _, _, ok, err := s.ReplayState(ctx, id+"-limit"); ok || err != nil {
		t.Fatalf("a refused state was stored: %v, %v", ok, err)
	}
}
