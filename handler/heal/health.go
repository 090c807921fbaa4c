package heal

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/convoy-dev/convoy/handler/convoy"
	"github.com/convoy-dev/convoy/handler/fault"
)

// Health is the record every instance reads and AutoReplay's runs write, in
// Table Storage: on Flex Consumption the timer runs on instances of its own
// and the HTTP functions on others (docs/host-contract.md), so nothing an
// operator is shown may live in one instance's memory.
type Health struct {
	Breaker Breaker `json:"breaker"`
	// Replayed: messages re-sent by automatic replay, in all.
	Replayed int64 `json:"replayed"`
	// LastRun: the figures of the last run, nil before the first.
	LastRun *Figures `json:"lastRun,omitempty"`
	// Unwritten: since when the runs could not write their figures here,
	// and why; nil when the last run's were written (recordFailure).
	Unwritten *Unwritten `json:"unwritten,omitempty"`
}

// Unwritten is a failed write of the record, kept in the record as it
// stands: what is written then is small and bounded, so it can be written
// while the whole record could not (issue 42).
type Unwritten struct {
	Since time.Time `json:"since"`
	Why   string    `json:"why"`
}

// Breaker is the circuit breaker of automatic replay.
type Breaker struct {
	Failures  int       `json:"failures"` // failed runs in a row
	OpenUntil time.Time `json:"openUntil"`
	Why       string    `json:"why,omitempty"` // of the last failed run
	// Trips counts the failed runs ever recorded (never reset): a run that
	// succeeded closes the breaker only if no run failed since it read it.
	Trips int64 `json:"trips,omitempty"`
}

// Figures are what a run learnt by reading the dead-letter queue once, the
// whole blocked index and every auto-replay state.
type Figures struct {
	At time.Time `json:"at"`
	// DeadLetters are the counts of the one peek of the run; nil when the
	// queue could not be read (DeadLettersUnreadable says why).
	DeadLetters           *DeadLetters `json:"deadLetters,omitempty"`
	DeadLettersUnreadable string       `json:"deadLettersUnreadable,omitempty"`
	Pending               int          `json:"pending"`
	Retrying              int          `json:"retrying"`
	// The blocked orders, parked messages and where their missing messages
	// are, each blocked order as the latest run to verify it found it
	// (BlockedPass); BlockedComplete: those runs cover the whole index, and
	// this run was not cut short.
	BlockedOrders   int            `json:"blockedOrders"`
	BlockedComplete bool           `json:"blockedComplete"`
	ParkedMessages  int64          `json:"parkedMessages"`
	MissingBy       map[string]int `json:"missingBy"`
	// OldestBlockedSince is when the longest-blocked order was blocked.
	OldestBlockedSince string `json:"oldestBlockedSince,omitempty"`
	// States counts the auto-replay states read; StatesComplete says all.
	States         int  `json:"states"`
	StatesComplete bool `json:"statesComplete"`
	// Unreached counts the orders whose dead letters of a transient cause
	// the run's replay pass could not reach (beyond ReplayScanLimit, or
	// the deadline): they wait for the next run, and count as failures.
	Unreached int `json:"unreached"`
	// Deferred counts the orders due that the run left for a later one
	// (beyond its window, past MaxOrders, or its deadline).
	Deferred int `json:"deferred"`
	// Lag is the lag of the active orders (surveyLag); nil when not surveyed.
	Lag *LagFigures `json:"lag,omitempty"`
	// BlockedPass and LagPass are where the surveys of the blocked and the
	// active orders stand, for the next run to go on from.
	BlockedPass *Pass `json:"blockedPass,omitempty"`
	LagPass     *Pass `json:"lagPass,omitempty"`
}

// note is what a blocked order's index entry records about its missing
// message (convoy.BlockedEntry.Note): Missing as AutoReplay, a replay or a
// skip last learnt it.
type note struct {
	Missing
	LearntAt time.Time `json:"learntAt"`
}

// notLookedFor is the whereabouts of a missing message before any run
// looked for it.
const notLookedFor = "not looked for yet: each AutoReplay run reads the dead-letter queue once and records where every blocked order's missing message is"

// missingOf is the Missing recorded in a blocked order's note; last is the
// last run's figures (nil before the first).
func missingOf(o convoy.BlockedOrder, last *Figures) Missing {
	var n note
	if o.Note == "" || json.Unmarshal([]byte(o.Note), &n) != nil {
		if last != nil && last.DeadLettersUnreadable != "" {
			return Missing{Where: WhereUnknown, Why: last.DeadLettersUnreadable}
		}
		return Missing{Where: WhereUnknown, Why: notLookedFor}
	}
	m := n.Missing
	m.LearntAt = n.LearntAt.UTC().Format(time.RFC3339)
	if last != nil && last.DeadLettersUnreadable != "" && last.At.After(n.LearntAt) {
		m.Why += fmt.Sprintf(" (learnt at %s; since then %s)", m.LearntAt, last.DeadLettersUnreadable)
	}
	return m
}

// encodeNote is m as a note learnt at at; ok is false when it says what
// prev already says (no write needed).
func encodeNote(m Missing, at time.Time, prev string) (string, bool) {
	m = m.bounded()
	var old note
	if prev != "" && json.Unmarshal([]byte(prev), &old) == nil {
		a, _ := json.Marshal(old.Missing)
		b, _ := json.Marshal(m)
		if string(a) == string(b) {
			return prev, false
		}
	}
	raw, _ := json.Marshal(note{Missing: m, LearntAt: at.UTC()})
	return string(raw), true
}

// Learnt records what a replay or a skip learnt about the missing message
// of an order (a best effort: the next AutoReplay run records it anyway).
func Learnt(ctx context.Context, idx convoy.BlockedIndex, orderID string, m Missing, at time.Time) error {
	h, ok, err := idx.Head(ctx, orderID)
	if err != nil || !ok || h.BlockedSince.IsZero() {
		return err
	}
	n, _ := encodeNote(m, at, "")
	_, err = idx.UpdateBlocked(ctx, orderID, h.BlockedSince, convoy.BlockedUpdate{Note: &n}, "*")
	return err
}

// updateHealth applies change to the stored record under its ETag, reading
// it again after a conflict (a run and an HTTP call can write at once).
func updateHealth(ctx context.Context, s StateStore, change func(*Health)) (Health, error) {
	for try := 0; ; try++ {
		h, etag, _, err := s.Health(ctx)
		if err != nil {
			return h, err
		}
		change(&h)
		h.bound()
		if _, err = s.PutHealth(ctx, h, etag); err == nil || fault.CodeOf(err) != fault.Conflict || try == 3 {
			return h, err
		}
	}
}
