package heal

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"strings"
	"testing"
	"time"
	"unicode/utf16"

	"github.com/convoy-dev/convoy/handler/convoy"
	"github.com/convoy-dev/convoy/handler/orders"
	"github.com/convoy-dev/convoy/handler/replay"
)

// TestHealthRecordFitsOneProperty (issue 37): the Health record is one
// string property of a Table entity, at most 64 KiB of UTF-16 (32,768
// characters of its ASCII JSON). With both surveys 250 runs into their
// third pass of 500 runs (so each keeps maxSegments segments, twice), order ids of
// 100 characters, 20 dead-letter reasons and every figure filled in, it
// still fits: what a pass keeps is bounded by maxSegments, not by the runs
// or the orders.
func TestHealthRecordFitsOneProperty(t *testing.T) {
	id := func(p string, i int) string { return fmt.Sprintf("%s%0100d", p, i)[:100] }
	now := time.Date(2026, 11, 21, 10, 0, 0, 0, time.UTC)
	var lag, blocked Pass
	for run := range 1250 {
		c := Counts{"n": 10_000, "ok": 2_000, "catching-up": 7_000, "stalled": 500, "blocked": 500, lagStalled2W: 100}
		var heads []OldestHead
		for i := range OldestHeadsShown {
			heads = append(heads, OldestHead{OrderID: id("h", run*100+i), Status: convoy.LagStalled, Backlog: 1 << 40, AppliedSeq: 1 << 40,
				HeadAgeSeconds: 123456.789, SurveyedAt: now})
		}
		lag.advance(id("o", (run%500+1)*10_000), c, heads, run%500 == 499, now.Add(time.Duration(run)*time.Minute))
		b := Counts{"n": 5000, blockedParked: 1 << 40}
		for _, k := range []string{"deadLetter/transient", "deadLetter/permanent", "deadLetterWithoutSeq/permanent", "notDeadLettered", "unknown"} {
			b[blockedMissing+k] = 1000
		}
		blocked.advance(fmt.Sprintf("2026-11-21T10:00:00.000Z|%s", id("b", (run%500+1)*5000)), b, nil, run%500 == 499, now)
	}
	dl := &DeadLetters{Total: 50_000, ByReason: map[string]int{}, Complete: true}
	for i := range maxReasonsInSummaries {
		dl.ByReason[strings.Repeat("r", 100)+fmt.Sprint(i)] = 1000
	}
	roll, _ := lag.rolling()
	f := &Figures{At: now, DeadLetters: dl, MissingBy: map[string]int{"deadLetter/transient": 1, "deadLetter/permanent": 1, "notDeadLettered": 1, "unknown": 1},
		OldestBlockedSince: now.Format(time.RFC3339Nano), LagPass: &lag, BlockedPass: &blocked,
		Lag: &LagFigures{At: now, Orders: int(roll["n"]), OldestHeads: lag.shownHeads(), Unread: strings.Repeat("x", 240),
			CriticalTime: &CriticalTimeFigures{Count: 1}, ByStatus: map[convoy.LagStatus]int{convoy.LagOK: 1}}}
	raw, err := json.Marshal(Health{Breaker: Breaker{Why: strings.Repeat("w", 300)}, LastRun: f})
	if err != nil {
		t.Fatal(err)
	}
	if len(raw) > 32<<10 {
		t.Fatalf("the record is %d characters, more than a Table property holds (32,768)", len(raw))
	}
	if len(lag.Segments) != maxSegments || len(lag.Last.Segments) != maxSegments {
		t.Fatalf("the lag pass keeps %d and %d segments, want %d each", len(lag.Segments), len(lag.Last.Segments), maxSegments)
	}
	t.Logf("the record: %d characters", len(raw))
}

// TestHealthRecordWorstCaseFits (issue 42): the record at its largest (every
// list and map as full as the code that fills it lets it be, built by that
// code; every string far past its bound and made of what JSON escapes
// most: '<', '>', '&' to six characters each, control characters, U+2028,
// invalid bytes) still fits one Table property, 64 KiB of UTF-16, in the
// JSON json.Marshal writes (as tablestore's PutHealth does). Its size is
// measured on that JSON, not by the bounding code's own reckoning.
func TestHealthRecordWorstCaseFits(t *testing.T) {
	nasty := func(i int) string { // about 10 KiB, distinct per i
		return fmt.Sprintf("%d", i) + strings.Repeat("<>&\"\\\x01\u2028\xff", 1200)
	}
	at := time.Date(2026, 11, 21, 10, 0, 0, 999999999, time.FixedZone("x", 5*3600+1800)) // nanoseconds, an offset: the longest RFC 3339
	// Every key missingKey can give, from notes of every kind.
	keys := map[string]bool{}
	for _, where := range []string{WhereDeadLetter, WhereDeadLetterNoSeq, WhereNotDeadLettered, WhereUnknown, "", nasty(0)} {
		for _, cause := range []string{"transient", "permanent", "", nasty(1)} {
			n, _ := encodeNote(Missing{Where: where, Cause: cause}, at, "")
			keys[missingKey(convoy.BlockedOrder{Note: n}, nil)] = true
		}
	}
	keys[missingKey(convoy.BlockedOrder{}, &Figures{DeadLettersUnreadable: nasty(2)})] = true
	var lag, blocked Pass
	for run := range 30 { // past maxSegments, into a second pass
		c := Counts{"n": math.MaxInt64, lagStalled2W: math.MaxInt64}
		for _, s := range []convoy.LagStatus{convoy.LagOK, convoy.LagCatchingUp, convoy.LagStalled, convoy.LagBlocked} {
			c[string(s)] = math.MaxInt64
		}
		var heads []OldestHead
		for i := range 2 * OldestHeadsShown {
			heads = append(heads, OldestHead{OrderID: nasty(run*100 + i), Status: convoy.LagStalled, Backlog: math.MaxInt64,
				AppliedSeq: math.MaxInt64, HeadAgeSeconds: math.MaxFloat64 / 2, SurveyedAt: at})
		}
		lag.advance(nasty(run), c, heads, run == 14, at.Add(time.Duration(run)))
		b := Counts{"n": math.MaxInt64, blockedParked: math.MaxInt64}
		for k := range keys {
			b[blockedMissing+k] = math.MaxInt64
		}
		blocked.advance(nasty(run), b, nil, run == 14, at.Add(time.Duration(run)))
	}
	// The reasons, as a run's peek counts them: more distinct ones than it keeps.
	q := map[int64]replay.DeadLetter{}
	for i := range 5 * maxReasonsInSummaries {
		q[int64(i+1)] = replay.DeadLetter{SequenceNumber: int64(i + 1), SessionID: nasty(i), MessageID: nasty(i), Reason: nasty(i)}
	}
	dls, err := ReadDeadLetters(context.Background(), orders.Domain, mapSource(q), 0)
	if err != nil {
		t.Fatal(err)
	}
	dls.Total, dls.Transient, dls.Permanent = math.MaxInt, math.MaxInt, math.MaxInt
	for k := range dls.ByReason {
		dls.ByReason[k] = math.MaxInt
	}
	missingBy := map[string]int{}
	for k := range keys {
		missingBy[k] = math.MaxInt
	}
	byStatus := map[convoy.LagStatus]int{}
	for _, s := range []convoy.LagStatus{convoy.LagOK, convoy.LagCatchingUp, convoy.LagStalled, convoy.LagBlocked} {
		byStatus[s] = math.MaxInt
	}
	h := Health{
		Breaker:   Breaker{Failures: math.MaxInt, OpenUntil: at, Why: nasty(3), Trips: math.MaxInt64},
		Replayed:  math.MaxInt64,
		Unwritten: &Unwritten{Since: at, Why: nasty(4)},
		LastRun: &Figures{At: at, DeadLetters: dls, DeadLettersUnreadable: nasty(5), Pending: math.MaxInt, Retrying: math.MaxInt,
			BlockedOrders: math.MaxInt, BlockedComplete: true, ParkedMessages: math.MaxInt64, MissingBy: missingBy,
			OldestBlockedSince: nasty(6), States: math.MaxInt, StatesComplete: true, Unreached: math.MaxInt, Deferred: math.MaxInt,
			BlockedPass: &blocked, LagPass: &lag,
			Lag: &LagFigures{At: at, Window: math.MaxInt64, Orders: math.MaxInt, Complete: true, ByStatus: byStatus,
				StalledTwoWindows: math.MaxInt, SurveyedThisPeriod: math.MaxInt, PeriodStartedAt: at, OldestSurveyAt: at,
				PeriodSeconds: math.MaxInt64, OrdersPerRun: math.MaxInt, OldestHeads: lag.shownHeads(),
				CriticalTime: &CriticalTimeFigures{Count: math.MaxInt64, P50Ms: math.MaxInt64, P99Ms: math.MaxInt64, MaxMs: math.MaxInt64, SinceSeconds: math.MaxInt64},
				Unread:       nasty(7)}},
	}
	h.bound()
	raw, err := json.Marshal(h)
	if err != nil {
		t.Fatal(err)
	}
	units := len(utf16.Encode([]rune(string(raw)))) // as Table Storage counts a string property
	t.Logf("the record at its largest: %d bytes of JSON, %d bytes of UTF-16", len(raw), 2*units)
	if 2*units > 64<<10 {
		t.Fatalf("the record at its largest is %d bytes of UTF-16, more than a Table property holds (65,536)", 2*units)
	}
	if len(dls.ByReason) > maxReasonsInSummaries+1 || len(keys) > 6 {
		t.Fatalf("%d reasons and %d missing keys kept: the lists are not bounded", len(dls.ByReason), len(keys))
	}
}

// mapSource is a dead-letter sub-queue to peek.
type mapSource map[int64]replay.DeadLetter

func (m mapSource) Peek(_ context.Context, from int64, n int) ([]replay.DeadLetter, error) {
	var out []replay.DeadLetter
	for s := from; len(out) < n && s <= int64(len(m)); s++ {
		if d, ok := m[s]; ok {
			out = append(out, d)
		}
	}
	return out, nil
}
func (mapSource) Receive(context.Context, int) ([]replay.DeadLetter, error) { return nil, nil }
func (mapSource) Complete(context.Context, replay.DeadLetter) error         { return nil }
func (mapSource) Abandon(context.Context, replay.DeadLetter) error          { return nil }
