// Package keyed is the API a domain writes its per-key rules against: the
// rules of an order, an account, a device. The convoy engine
// (handler/convoy) applies each key's messages strictly in order and
// exactly once, parks early ones, drains them, records rejections and skips;
// a domain says only how one command changes one key's state.
//
// A domain is a value whose type satisfies Rules[S, C]: S is the state of
// one key, C a command (one message). Every method is deterministic and does
// no I/O: the engine calls Decide again after a conflict, on another
// instance, after a crash, and keyedtest.Conformance calls it twice and
// compares. docs/rules.md is the contract a domain signs.
package keyed

import (
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/convoy-dev/convoy/handler/fault"
)

// Rules are one domain's per-key logic.
type Rules[S, C any] interface {
	// Name names the domain ("orders", "accounts").
	Name() string

	// ReadCommand reads and validates the body of a message of key (its
	// SessionId). An error is permanent: the message is dead-lettered with
	// the error as its reason.
	ReadCommand(key string, body []byte) (C, error)

	// Needs lists the rows deciding c on s needs beyond the state (Needs).
	Needs(s S, c C) Needs

	// Decide folds c into s: the new state and its writes, or an error
	// made by Reject (the reason is recorded and the seq consumed, with no
	// other effect). Any other error, and a panic, fails the message: it is
	// retried, then dead-lettered, while the key waits.
	Decide(s S, c C, rows Rows) (S, Writes, error)

	// Tag is what a rejection of c records beside its seq and reason (the
	// order domain: its op and txId). Tag of the zero C labels a seq an
	// operator skipped, whose message was never read.
	Tag(c C) Props

	// The state's encoding: properties of the key's head row. Version is
	// the version Encode writes; Decode reads that one and every older one
	// (the upgrade), so that state written by the release before is read by
	// this one. A key nothing has happened to decodes from no properties.
	Version() int
	EncodeState(s S) Props
	DecodeState(version int, p Props) (S, error)

	// A parked command (it arrived early) is kept as the properties of its
	// parked row until its turn comes. At most Budget().ParkedBytes.
	EncodeCommand(c C) Props
	DecodeCommand(key string, p Props) (C, error)

	// Budget is what one decision may write (DefaultBudget when zero).
	Budget() Budget
}

// Needs lists the rows a decision needs. Read: rows to read (a row the
// engine knows already costs nothing). Absent: rows guessed absent, which
// costs no read: Decide sees them absent, and the decision's Insert of such
// a row fails the commit if the guess was wrong, after which the engine
// reads every guessed row before deciding again (its verify mode).
type Needs struct {
	Read, Absent []RowRef
}

// RowRef names one row of a key's collection: Collection is a short name
// ("x", "ref": letters and digits), ID the row's id within it.
type RowRef struct {
	Collection, ID string
}

// Row is one stored row of a collection.
type Row struct {
	ID    string
	Props Props
}

// Rows is what Needs asked for, as stored (or as the key's own commits left it).
type Rows interface {
	Get(ref RowRef) (Props, bool)
}

// Write is one row a decision writes: Insert a new row (the commit fails if
// it exists), or Merge properties into a row that exists (the properties
// not given are kept; the commit fails if it is missing).
type Write struct {
	Ref    RowRef
	Insert bool
	Props  Props
}

// Writes are a decision's writes, in order.
type Writes []Write

// Insert adds the row coll/id, which must not exist.
func (w Writes) Insert(coll, id string, p Props) Writes {
	return append(w, Write{Ref: RowRef{coll, id}, Insert: true, Props: p})
}

// Merge sets properties of the row coll/id, which must exist.
func (w Writes) Merge(coll, id string, p Props) Writes {
	return append(w, Write{Ref: RowRef{coll, id}, Props: p})
}

// Rejection is a command that broke a rule of its domain: it consumed its
// seq and had no effect. Its reason is recorded and shown.
type Rejection struct {
	Reason string
}

func (r *Rejection) Error() string { return r.Reason }

// Reject returns a Rejection whose reason is the formatted text.
func Reject(format string, args ...any) error {
	return &Rejection{Reason: fmt.Sprintf(format, args...)}
}

// RejectionReason returns the reason of a Rejection err is or wraps.
func RejectionReason(err error) (string, bool) {
	var r *Rejection
	if errors.As(err, &r) {
		return r.Reason, true
	}
	return "", false
}

// Position is the row id of the n-th row of a positional collection (0,
// 1, 2, …): a domain appends to it at the count it keeps in its state, and
// the read routes page it in that order (History).
func Position(n int64) string { return fmt.Sprintf("%010d", n) }

// Append adds the n-th row of the positional collection coll.
func (w Writes) Append(coll string, n int64, p Props) Writes { return w.Insert(coll, Position(n), p) }

// Budget is what one decision may write, which the engine enforces: a
// decision over it is recorded as a rejection that names the limit.
type Budget struct {
	Writes      int // rows, at most (MaxWrites)
	Bytes       int // their Props.WireSize, together, at most (MaxBytes)
	ParkedBytes int // the WireSize of a parked command's properties, at most (MaxParkedBytes)
}

// The engine's limits on a Budget: an entity-group transaction holds 100
// operations and 4 MiB; the engine keeps the head, the commit marker, an
// unpark and a rejection of each step to itself, and a commit holds at
// least one step with room for a full window of parked messages.
const (
	MaxWrites      = 32
	MaxBytes       = 1 << 20
	MaxParkedBytes = 32 << 10
)

// DefaultBudget is the Budget of a domain that states none.
var DefaultBudget = Budget{Writes: 8, Bytes: 256 << 10, ParkedBytes: 16 << 10}

// Limits of one row, Table Storage's: 1 MiB per entity (Props.Size), 64 KiB
// per property, 252 properties of which it keeps 3 (PartitionKey, RowKey,
// Timestamp).
const (
	MaxRowSize      = 1 << 20
	MaxPropertySize = 64 << 10
	MaxProperties   = 252 - 3
)

// Head is what the engine keeps of a key besides the domain's state: what
// a View shows around it.
type Head struct {
	ID           string
	Complete     bool  // its sequence ended (a message marked last)
	AppliedSeq   int64 // the highest seq applied, rejected or skipped; all below it are too
	Parked       int   // messages parked behind a gap
	MissingSeq   int64 // the seq it waits for while messages are parked, else 0
	BlockedSince time.Time
	UpdatedAt    time.Time
	// Failing is the decision that failed at the key's next seq (its rules
	// panicked or returned an error that is no rejection), while it does:
	// the message is retried, then dead-lettered, and the key waits.
	Failing *Failure
}

// Failure is a decision that failed: the seq it was for, why (the panic's
// or the error's message) and when it last did.
type Failure struct {
	Seq int64
	Why string
	At  time.Time
}

// Rejected is one rejection as stored: the seq it consumed, its reason, and
// its domain's Tag of the command (empty for a skipped seq).
type Rejected struct {
	Seq    int64
	Reason string
	Tag    Props
}

// Page is one page of a key's history: rows of its History collection in
// position order, its rejections by seq, and the continuation token of the
// next page ("" when this is the last).
type Page struct {
	Rows         []Row
	Rejected     []Rejected
	Continuation string
}

// Namer says what one key of a domain is called in the engine's messages
// and answers ("order": "order \"o-1\" has no state"); optional: a domain
// without it is called by its Name.
type Namer interface {
	Noun() string
}

// Viewer is what a domain shows of a key on the read routes (optional: a
// domain without it shows the head and its encoded state).
type Viewer[S any] interface {
	// History names the positional collection the read routes page ("" for
	// none) and how many rows it holds in s.
	History(s S) (collection string, count int64)
	// View is the JSON value the read routes answer for a key.
	View(head Head, s S, page Page) any
}

// Publisher is how a ledger document feeds a domain (optional): the
// publisher reads each entry of a ledger through it, validates the whole
// ledger before it sends anything, and measures each entry's message
// against the queue's limit.
type Publisher[C any] interface {
	// ReadEntry reads and validates the index-th entry of a ledger: the key
	// it is for, its command, and every problem (each naming index, one
	// per field at most). extra names the fields the ledger reads itself
	// ("last"): their values are returned in extras.
	ReadEntry(index int, raw []byte, extra ...string) (key string, c C, extras map[string]json.RawMessage, problems []fault.Problem)
	// Body is the message body that carries c (ReadCommand reads it back).
	Body(c C) ([]byte, error)
}
