package convoy

import (
	"context"

	"github.com/convoy-dev/convoy/handler/fault"
	"github.com/convoy-dev/convoy/handler/keyed"
)

// Store keeps each order's state durably. Implementations: tablestore (Azure
// Table Storage) and memstore (tests); both pass storetest.Run.
//
// What a message costs does not depend on the order's history (issue 27)
// nor on how many messages it has parked (issue 33): Load reads the head and
// the first ParkedLoadSize parked messages, Tx one transaction, Parked the
// next page of parked messages as a drain reaches it, and the history is read
// a page at a time (History).
type Store interface {
	// Load returns the order's head and its lowest parked messages, up to
	// ParkedLoadSize of them (Key.AddParkedPage; Key.ParkedCount is the
	// head's count of them all), or NewKey(id) (Version 0) if it has none;
	// not its transactions or rejections. The head is read with the parked
	// messages, so a Load that races a commit yields a Version that the next
	// Commit will find stale.
	Load(ctx context.Context, orderID string) (*Key, error)
	// Parked returns up to limit of the order's parked messages whose seq
	// is above after, ascending, and whether more follow.
	Parked(ctx context.Context, orderID string, after int64, limit int) ([]Message, bool, error)
	// IsParked reports whether the order has a message of seq parked: one
	// point read.
	IsParked(ctx context.Context, orderID string, seq int64) (bool, error)
	// Row returns the properties of the key's row ref, if it exists: one
	// point read.
	Row(ctx context.Context, orderID string, ref keyed.RowRef) (keyed.Props, bool, error)
	// Commit atomically writes o's head (the engine's figures, Version
	// base+1, and StateProps, which o.Encoded sets first) and the records in c, if the stored Version is
	// still base and every row c inserts is new and every row it merges exists; otherwise it writes nothing and returns an error wrapping
	// ErrConflict. c must touch at most MaxChangeRecords records. An error may
	// leave the outcome unknown: reload.
	Commit(ctx context.Context, o *Key, base int64, c *Change) error
	// NoteFailure records on the key's head that the decision of f.Seq
	// failed, without a commit (the version stays): Load returns it as
	// Key.Failure, and each commit keeps it while its seq is still ahead.
	NoteFailure(ctx context.Context, orderID string, f keyed.Failure) error
}

// History reads a key's positional collections and rejections a page at a time.
type History interface {
	// Rows returns up to limit rows of the positional collection coll
	// (keyed.Position ids) from position from on, and whether more follow.
	Rows(ctx context.Context, orderID, coll string, from int64, limit int) ([]keyed.Row, bool, error)
	// Rejections returns up to limit rejections of seq from on, ascending,
	// and whether more follow.
	Rejections(ctx context.Context, orderID string, from int64, limit int) ([]Rejection, bool, error)
}

// ErrConflict: another writer committed first. Transient: reload and retry.
var ErrConflict = &fault.Error{Code: fault.Unavailable, Message: "the order was changed concurrently"}
