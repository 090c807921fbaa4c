package convoy

import (
	"context"

	"github.com/convoy-dev/convoy/handler/fault"
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
	// ParkedLoadSize of them (Order.AddParkedPage; Order.ParkedCount is the
	// head's count of them all), or NewOrder(id) (Version 0) if it has none;
	// not its transactions or rejections. The head is read with the parked
	// messages, so a Load that races a commit yields a Version that the next
	// Commit will find stale.
	Load(ctx context.Context, orderID string) (*Order, error)
	// Parked returns up to limit of the order's parked messages whose seq
	// is above after, ascending, and whether more follow.
	Parked(ctx context.Context, orderID string, after int64, limit int) ([]Message, bool, error)
	// IsParked reports whether the order has a message of seq parked: one
	// point read.
	IsParked(ctx context.Context, orderID string, seq int64) (bool, error)
	// Tx returns the stored transaction txID of the order, if any.
	Tx(ctx context.Context, orderID, txID string) (TxRecord, bool, error)
	// Commit atomically writes o's head (scalar state and ParkedCount, Version base+1) and the
	// records in c, if the stored Version is still base and every transaction
	// c adds is new; otherwise it writes nothing and returns an error wrapping
	// ErrConflict. c must touch at most MaxChangeRecords records. An error may
	// leave the outcome unknown: reload.
	Commit(ctx context.Context, o *Order, base int64, c *Change) error
}

// History reads an order's transactions and rejections a page at a time.
type History interface {
	// Transactions returns up to limit transactions from position from on,
	// in the order added, and whether more follow.
	Transactions(ctx context.Context, orderID string, from int64, limit int) ([]TxEntry, bool, error)
	// Rejections returns up to limit rejections of seq from on, ascending,
	// and whether more follow.
	Rejections(ctx context.Context, orderID string, from int64, limit int) ([]Rejection, bool, error)
}

// ErrConflict: another writer committed first. Transient: reload and retry.
var ErrConflict = &fault.Error{Code: fault.Unavailable, Message: "the order was changed concurrently"}
