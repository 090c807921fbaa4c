package heal

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/convoy-dev/convoy/handler/convoy"
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
