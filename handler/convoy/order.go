package convoy

import (
	"cmp"
	"errors"
	"fmt"
	"maps"
	"time"
	"unicode/utf8"

	"github.com/convoy-dev/convoy/handler/fault"
	"github.com/convoy-dev/convoy/handler/keyed"
)

// ReasonSequenceComplete and ReasonSkipped are rejection reasons that
// callers may rely on.
const (
	ReasonSequenceComplete = "sequence complete"
	ReasonSkipped          = "skipped by operator"
)

// Rejection records a seq that was consumed without effect: a command its
// rules rejected, or a seq an operator skipped (its message never read: Tag
// is the domain's Tag of the zero command).
type Rejection = keyed.Rejected

// Key is the state of one key (an order, an account, a device) as one
// message needs it (issue 27): the engine's head (AppliedSeq, the version,
// the parked figures, critical times), the domain's state, and the lowest of
// the messages parked behind a gap (issue 33: parked.go). Its history (the
// domain's collections, rejections) stays in the store, read a page at a
// time; the few rows the key has read or written lately are remembered, at
// most maxKnown of them between calls (rows.go), so that what a key holds
// does not grow with its history.
type Key struct {
	ID       string
	Complete bool // a message marked last was applied: the sequence has ended
	// State is the domain's state of the key (keyed.Rules' S), nil until
	// decoded from StateProps (Decode).
	State any
	// StateProps is State as stored (keyed.Rules.EncodeState): what the
	// store writes into the head beside the engine's own properties. A
	// bound key keeps it only from a decision to its commit (Commit writes
	// it; the cache holds the decoded State alone).
	StateProps   keyed.Props
	StateVersion int   // the version StateProps was written at (0: never written)
	stateSize    int   // about how many bytes State takes in memory (Size)
	AppliedSeq   int64 // highest seq applied or rejected; all below it are too
	// Parked holds the lowest parked messages, the window: all of them
	// when ParkedCount says so, else at most ParkedPageSize (and
	// ParkedWindowBytes), the rest read a page at a time as a drain
	// reaches them (parked.go).
	Parked map[int64]Message
	// ParkedCount is how many messages are parked, in the window and beyond.
	ParkedCount int
	// ParkedLast is the highest parked seq; 0 if none, or not known (a head
	// written before it was kept): LastParked.
	ParkedLast   int64
	BlockedSince time.Time // when the current run of parked messages began; zero if none
	UpdatedAt    time.Time
	// AppliedAt is when AppliedSeq last advanced (a message applied or
	// rejected, or a seq skipped): the head's progress, which the lag's
	// status is judged by (Lag). Zero for a head written before it was kept.
	AppliedAt time.Time
	// Crit holds the critical times of its recently applied messages.
	Crit CriticalTimes
	// Version counts the key's commits; it is the store's compare-and-swap
	// token. 0 means the key has no stored state.
	Version int64
	// Failure is the last decision that failed (NoteFailure), kept by the
	// head while its seq is still ahead (Failing); zero if none.
	Failure keyed.Failure

	domain    keyed.Domain  // its rules (Bind)
	lagWindow time.Duration // Crit's window (ProcessorOptions.LagWindow)
	rows      knownRows     // rows looked up or written: a bounded working set
	window    parkedWindow  // what it knows of the parked messages beyond Parked
}

// NewKey returns the state of a key nothing has happened to.
func NewKey(id string) *Key {
	return &Key{ID: id, Parked: map[int64]Message{}}
}

// Bind gives o its domain's rules and decodes its state (Decode): the
// processor binds every key it loads; a store's Load leaves it unbound.
func (o *Key) Bind(d keyed.Domain) (*Key, error) {
	o.domain = d
	if o.State != nil {
		return o, nil
	}
	return o, o.Decode()
}

// Decode sets State from StateProps, upgrading the state of an older
// version (a key nothing has happened to decodes from no properties).
func (o *Key) Decode() error {
	version := o.StateVersion
	if version == 0 {
		version = o.domain.Version()
	}
	s, err := o.domain.DecodeState(version, o.StateProps)
	if err != nil {
		return fault.Wrap(fault.Internal, err, fmt.Sprintf("decode the state of %s %q", o.noun(), o.ID))
	}
	// The next commit writes the state at the current version (Encoded).
	o.State, o.stateSize, o.StateProps, o.StateVersion = s, propsSize(o.StateProps), nil, o.domain.Version()
	return nil
}

// Encoded sets StateProps, what the next commit writes, from State when no
// decision did since the last commit (a park, a rejection, a skip): every
// head holds the state's encoding, a key's first one too (as every head
// did before issue 43: the release before reads a head without Status as
// an order that is not new).
func (o *Key) Encoded() error {
	if o.StateProps != nil || o.domain == nil {
		return nil
	}
	p, err := o.domain.EncodeState(o.State)
	if err != nil {
		return fault.Wrap(fault.Internal, err, fmt.Sprintf("encode the state of %s %q", o.noun(), o.ID))
	}
	o.StateProps = p
	return nil
}

// noun is what a key of o's domain is called ("key" while unbound).
func (o *Key) noun() string {
	if o.domain == nil {
		return "key"
	}
	return o.domain.Noun()
}

// Head is the engine's head of o, as a domain's View shows it.
func (o *Key) Head() keyed.Head {
	return keyed.Head{ID: o.ID, Complete: o.Complete, AppliedSeq: o.AppliedSeq, Parked: o.ParkedCount,
		MissingSeq: o.MissingSeq(), BlockedSince: o.BlockedSince, UpdatedAt: o.UpdatedAt, Failing: o.Failing()}
}

// Failing is the failure of the decision of o's next seq, if the last one
// noted is of that seq (a decision that failed before the key moved on is
// no longer failing).
func (o *Key) Failing() *keyed.Failure {
	if o.Failure.Seq == 0 || o.Failure.Seq != o.AppliedSeq+1 {
		return nil
	}
	f := o.Failure
	return &f
}

// Needs returns the rows that deciding m would need and o does not know, if
// m is next in sequence: those it reads, and with verify those it guessed
// absent too (the commit otherwise checks them: it inserts the row, and
// fails if it exists).
func (o *Key) Needs(m Message, verify bool) ([]keyed.RowRef, error) {
	if m.Seq != o.AppliedSeq+1 || o.Complete {
		return nil, nil
	}
	cmd, err := o.command(m)
	if err != nil {
		return nil, nil // rejected in its turn: it needs nothing
	}
	n, err := o.domain.Needs(o.State, cmd)
	if err != nil {
		return nil, fault.Wrap(fault.Internal, err, fmt.Sprintf("the rows seq %d of %s %q needs", m.Seq, o.noun(), o.ID))
	}
	o.rows.lookedUp(n)
	var refs []keyed.RowRef
	for _, ref := range n.Read {
		if !o.rows.knows(ref) {
			refs = append(refs, ref)
		}
	}
	if verify {
		for _, ref := range n.Absent {
			if !o.rows.knows(ref) {
				refs = append(refs, ref)
			}
		}
	}
	return refs, nil
}

// Learn records what the store holds of ref: p, or nothing (found false).
func (o *Key) Learn(ref keyed.RowRef, p keyed.Props, found bool) { o.rows.learn(ref, p, found) }

// NextParked returns the parked message that is next in sequence, if it is
// in the window (when it has run out, NextPage says where the next page starts).
func (o *Key) NextParked() (Message, bool) {
	m, ok := o.Parked[o.AppliedSeq+1]
	return m, ok
}

// Forget keeps the maxKnown most recently used known rows: called between
// calls, when nothing uncommitted depends on the others.
func (o *Key) Forget() { o.rows.forget() }

// MissingSeq is the seq the order waits for when messages are parked, else 0.
func (o *Key) MissingSeq() int64 {
	if o.ParkedCount == 0 {
		return 0
	}
	return o.AppliedSeq + 1
}

// Clone returns a deep copy of o (its State is a value the rules never
// modify in place).
func (o *Key) Clone() *Key {
	c := *o
	c.Parked = maps.Clone(o.Parked)
	if c.Parked == nil {
		c.Parked = map[int64]Message{}
	}
	c.rows = o.rows.clone()
	c.Crit = o.Crit.Clone()
	return &c
}

// Disposition is what a message did.
type Disposition string

const (
	Applied   Disposition = "applied"   // its command took effect
	Rejected  Disposition = "rejected"  // it broke a rule of its domain; recorded, seq consumed
	Parked    Disposition = "parked"    // it arrived early and waits for the gap to fill
	Duplicate Disposition = "duplicate" // already applied, rejected or parked: no effect
	// Refused: its seq is more than MaxParkAhead past the order's appliedSeq.
	// No effect; the message is to be failed as unreadable (redelivered, then
	// dead-lettered), so that a corrupt seq cannot block its order forever.
	Refused Disposition = "refused"
)

// MaxParkAhead is how far past appliedSeq a message may be parked. Ledgers
// hold at most MaxLedgerTransactions (200,000 by default), so a real seq is
// never this far ahead of the order's progress; a seq further ahead is
// corrupt (or forged) and would leave the order blocked for good.
const MaxParkAhead = 1_000_000

// Outcome is what happened to one message.
type Outcome struct {
	Seq         int64
	Disposition Disposition
	Reason      string // for Rejected
	Drained     bool   // applied or rejected from the parked set
	// Of a drained message: what it carried when it was received (Message).
	MessageID   string
	EnqueuedAt  time.Time
	TraceParent string
}

func (out Outcome) String() string {
	s := fmt.Sprintf("seq %d %s", out.Seq, out.Disposition)
	if out.Drained {
		s += " (from parked)"
	}
	if out.Reason != "" {
		s += ": " + out.Reason
	}
	return s
}

// Receive applies the sequence rules to m: a duplicate changes nothing, an
// early message is parked, the next one is decided. It updates o and records
// the entity changes in c. It never drains parked messages: call DrainNext.
// An error (the decision failed) leaves o to be dropped.
func (o *Key) Receive(m Message, now time.Time, c *Change) (Outcome, error) {
	switch {
	case m.Seq <= o.AppliedSeq:
		return Outcome{Seq: m.Seq, Disposition: Duplicate}, nil
	case m.Seq > o.AppliedSeq+MaxParkAhead:
		return Outcome{Seq: m.Seq, Disposition: Refused, Reason: fmt.Sprintf("seq %d is more than %d past appliedSeq %d", m.Seq, MaxParkAhead, o.AppliedSeq)}, nil
	case m.Seq > o.AppliedSeq+1:
		if !o.park(m, now, c) {
			return Outcome{Seq: m.Seq, Disposition: Duplicate}, nil
		}
		o.UpdatedAt = now
		c.changed = true
		return Outcome{Seq: m.Seq, Disposition: Parked}, nil
	default:
		if _, parked := o.Parked[m.Seq]; parked {
			// Its drain was cut: the parked copy is applied by DrainNext,
			// this one changes nothing (applied too, it would orphan that row).
			return Outcome{Seq: m.Seq, Disposition: Duplicate}, nil
		}
		return o.apply(m, now, c)
	}
}

// DrainNext decides the parked message that is now next in sequence, if it
// is in the window: when the window has run out (NextPage), the caller adds
// the next page first (AddParkedPage).
func (o *Key) DrainNext(now time.Time, c *Change) (Outcome, bool, error) {
	m, ok := o.Parked[o.AppliedSeq+1]
	if !ok {
		return Outcome{}, false, nil
	}
	o.unpark(m, c)
	out, err := o.apply(m, now, c)
	if err != nil {
		return Outcome{}, false, err
	}
	out.Drained, out.MessageID, out.EnqueuedAt, out.TraceParent = true, m.MessageID, m.EnqueuedAt, m.TraceParent
	return out, true, nil
}

// Skip consumes seq, which must be the missing one, as rejected by an
// operator, so that the parked tail can drain. A parked seq was received:
// it is never skipped (its drain was cut; DrainNext applies it).
func (o *Key) Skip(seq int64, now time.Time, c *Change) error {
	if _, parked := o.Parked[seq]; parked {
		return fmt.Errorf("seq %d of %s %q was received and is parked, not missing: it drains instead", seq, o.noun(), o.ID)
	}
	if seq != o.AppliedSeq+1 || o.ParkedCount == 0 {
		return fmt.Errorf("seq %d is not the missing seq of %s %q", seq, o.noun(), o.ID)
	}
	o.reject(Message{Seq: seq}, nil, ReasonSkipped, now, c)
	return nil
}

// apply decides m (the next seq) by its domain's rules: applied, or
// rejected. A decision that fails (it panicked, or returned an error that is
// not a rejection) fails the call, and nothing of it is kept.
func (o *Key) apply(m Message, now time.Time, c *Change) (Outcome, error) {
	cmd, err := o.command(m)
	reason := ""
	switch {
	case err != nil && m.Oversize != "":
		reason = "parked without its command: " + err.Error()
	case err != nil:
		// A parked row this release cannot read: its seq is consumed, so
		// that the key goes on.
		reason = "the parked command cannot be read: " + err.Error()
	case o.Complete:
		reason = ReasonSequenceComplete
	}
	if reason != "" {
		o.reject(m, cmd, reason, now, c)
		o.finish(m, now, c)
		return Outcome{Seq: m.Seq, Disposition: Rejected, Reason: reason}, nil
	}
	next, writes, err := o.domain.Decide(o.State, cmd, rowsOf{o})
	if reason, ok := keyed.RejectionReason(err); ok {
		o.reject(m, cmd, reason, now, c)
		o.finish(m, now, c)
		return Outcome{Seq: m.Seq, Disposition: Rejected, Reason: reason}, nil
	}
	if err != nil {
		return Outcome{}, &DecisionError{Seq: m.Seq, Err: fault.Wrap(fault.Internal, err, fmt.Sprintf("decide seq %d of %s %q", m.Seq, o.noun(), o.ID))}
	}
	encoded, reason, err := o.check(next, writes)
	if err != nil {
		return Outcome{}, fault.Wrap(fault.Internal, err, fmt.Sprintf("encode the state of %s %q after seq %d", o.noun(), o.ID, m.Seq))
	}
	if reason != "" {
		o.reject(m, cmd, reason, now, c)
		o.finish(m, now, c)
		return Outcome{Seq: m.Seq, Disposition: Rejected, Reason: reason}, nil
	}
	o.State, o.StateProps, o.StateVersion, o.stateSize = next, encoded, o.domain.Version(), propsSize(encoded)
	for _, w := range writes {
		o.rows.wrote(w)
		c.write(w)
	}
	o.finish(m, now, c)
	return Outcome{Seq: m.Seq, Disposition: Applied}, nil
}

// command is m's command: as read from its body, or decoded from its parked row.
func (o *Key) command(m Message) (any, error) {
	if m.Oversize != "" {
		return nil, errors.New(m.Oversize)
	}
	if m.Command != nil {
		return m.Command, nil
	}
	return o.domain.DecodeCommand(o.ID, m.Stored)
}

func (o *Key) reject(m Message, cmd any, reason string, now time.Time, c *Change) {
	r := Rejection{Seq: m.Seq, Reason: cutReason(reason), Tag: o.domain.Tag(cmd)}
	if rowProblem(r.Tag, rejectedProps) != "" || r.Tag.WireSize() > rejectionBytes/2 {
		r.Tag = nil // a tag that cannot be stored: the reason still is
	}
	c.Rejections = append(c.Rejections, r)
	o.AppliedSeq, o.UpdatedAt, o.AppliedAt = m.Seq, now, now
	c.changed = true
}

// finish advances the checkpoint; last: true ends the sequence.
func (o *Key) finish(m Message, now time.Time, c *Change) {
	o.AppliedSeq, o.UpdatedAt, o.AppliedAt = m.Seq, now, now
	c.changed = true
	if !m.EnqueuedAt.IsZero() {
		o.Crit.Add(now, now.Sub(m.EnqueuedAt), cmp.Or(o.lagWindow, DefaultLagWindow))
	}
	if m.Last {
		o.Complete = true
	}
}

// maxReason bounds a rejection's reason, in bytes: a domain's reason may
// quote what it was given.
const maxReason = 1024

func cutReason(s string) string {
	if len(s) <= maxReason {
		return s
	}
	s = s[:maxReason]
	for !utf8.ValidString(s) {
		s = s[:len(s)-1]
	}
	return s + "…"
}

// DecisionError is a decision that failed: the rules panicked, or returned
// an error that is no rejection. Its message fails (retried, then
// dead-lettered) and the key waits; the processor notes it on the key's head
// (Store.NoteFailure) for the operator.
type DecisionError struct {
	Seq int64
	Err error
}

func (e *DecisionError) Error() string { return e.Err.Error() }
func (e *DecisionError) Unwrap() error { return e.Err }
