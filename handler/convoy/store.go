package convoy

import (
	"context"

	"github.com/convoy-dev/convoy/handler/fault"
)

// Store keeps each order's state durably. Implementations: tablestore (Azure
// Table Storage) and memstore (tests); both pass storetest.Run.
type Store interface {
	// Load returns the order's stored state, or NewOrder(id) (Version 0) if it
	// has none. The head is read before the records, so a Load that races a
	// commit yields a Version that the next Commit will find stale.
	Load(ctx context.Context, orderID string) (*Order, error)
	// Commit atomically writes o's head (scalar state, Version base+1) and the
	// records in c, if the stored Version is still base; otherwise it writes
	// nothing and returns an error wrapping ErrConflict. c must touch at most
	// MaxChangeRecords records. An error may leave the outcome unknown: reload.
	Commit(ctx context.Context, o *Order, base int64, c *Change) error
}

// ErrConflict: another writer committed first. Transient: reload and retry.
var ErrConflict = &fault.Error{Code: fault.Unavailable, Message: "the order was changed concurrently"}
