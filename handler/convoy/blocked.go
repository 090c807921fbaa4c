package convoy

import (
	"context"
	"encoding/base64"
	"fmt"
	"time"

	"github.com/convoy-dev/convoy/handler/fault"
)

// Head is an order's scalar state, readable without its records.
type Head struct {
	OrderID      string
	AppliedSeq   int64
	Parked       int
	BlockedSince time.Time
	Version      int64
}

// BlockedIndex lists blocked orders, oldest first, without visiting every
// order. It may over-include: an entry is written before the commit that
// blocks an order and removed after the one that unblocks it, so a crash in
// between leaves a stale entry, which ListBlocked checks and drops.
//
// The entry lives in its own partition ("~blocked", so that one query lists
// it oldest first), apart from the order's, so it cannot join the order's
// entity-group transaction. Instead it records the head Version that the
// commit which blocks the order writes: a lister that finds the head below
// that version knows the commit has not landed (yet), and the entry is
// pending, neither listed nor removed. No clock is involved, unlike an "old
// enough to judge" bound, which a slow or retried commit can outlast.
type BlockedIndex interface {
	// MarkBlocked writes the entry of an order that the commit writing head
	// version version blocks since since (replacing one with the same key).
	MarkBlocked(ctx context.Context, orderID string, since time.Time, version int64) error
	// ClearBlocked removes the entry of an order blocked since since, if any.
	ClearBlocked(ctx context.Context, orderID string, since time.Time) error
	// ClearStale removes e only if it is still as ScanBlocked returned it
	// (same ETag): an entry written again since is kept.
	ClearStale(ctx context.Context, e BlockedEntry) error
	// ScanBlocked returns up to limit entries after the key after ("" from
	// the start), oldest first, and whether more follow.
	ScanBlocked(ctx context.Context, after string, limit int) (entries []BlockedEntry, more bool, err error)
	// Head reads an order's head; ok is false when the order has no state.
	Head(ctx context.Context, orderID string) (h Head, ok bool, err error)
}

// BlockedEntry is one entry of a BlockedIndex.
type BlockedEntry struct {
	Key     string // sorts by Since, then OrderID
	OrderID string
	Since   time.Time
	Version int64  // head version written by the commit that blocks; 0 if unknown (an entry of an earlier release)
	ETag    string // of the stored entry, for ClearStale
}

// Stale reports whether e is an entry to remove, given the order's head h
// (the zero Head if the order has no state). It is stale only when the head
// is at or past the version whose commit was to block the order, and is not
// blocked since e.Since: that commit either landed and the block since ended,
// or lost to another commit and will never land (a retry blocks with a new
// entry). A head below e.Version means the commit is still to come: removing
// the entry then is the race of issue 25, where the commit lands after the
// lister and the blocked order drops out of every listing for good.
func (e BlockedEntry) Stale(h Head) bool {
	if h.Version < e.Version {
		return false
	}
	return h.Parked == 0 || !h.BlockedSince.Equal(e.Since)
}

// BlockedKey is the index key of an order blocked since since.
func BlockedKey(orderID string, since time.Time) string {
	return since.UTC().Format("2006-01-02T15:04:05.000Z") + "|" + orderID
}

// BlockedOrder is one row of the blocked-orders listing (docs/contract.md).
type BlockedOrder struct {
	OrderID      string `json:"orderId"`
	AppliedSeq   int64  `json:"appliedSeq"`
	Parked       int    `json:"parked"`
	MissingSeq   int64  `json:"missingSeq"`
	BlockedSince string `json:"blockedSince"`
}

// BlockedPage is one page of the listing.
type BlockedPage struct {
	Orders       []BlockedOrder `json:"orders"`
	Continuation string         `json:"continuation,omitempty"`
}

// MaxBlockedPageSize bounds a page of the listing.
const MaxBlockedPageSize = 500

// ListBlocked returns a page of blocked orders, oldest first. Each index
// entry is checked against the order's head: an order blocked since the
// entry's time is listed; a stale entry (BlockedEntry.Stale) is removed from
// the index, unless written again since it was scanned; an entry whose
// blocking commit has not landed yet is neither listed nor removed.
func ListBlocked(ctx context.Context, idx BlockedIndex, continuation string, pageSize int) (BlockedPage, error) {
	if pageSize <= 0 || pageSize > MaxBlockedPageSize {
		return BlockedPage{}, fault.Errorf(fault.Invalid, "pageSize must be between 1 and %d", MaxBlockedPageSize)
	}
	after := ""
	if continuation != "" {
		raw, err := base64.RawURLEncoding.DecodeString(continuation)
		if err != nil {
			return BlockedPage{}, fault.Errorf(fault.Invalid, "continuation is not a token this service issued")
		}
		after = string(raw)
	}
	entries, more, err := idx.ScanBlocked(ctx, after, pageSize)
	if err != nil {
		return BlockedPage{}, err
	}
	page := BlockedPage{Orders: []BlockedOrder{}}
	for _, e := range entries {
		h, ok, err := idx.Head(ctx, e.OrderID)
		if err != nil {
			return BlockedPage{}, fmt.Errorf("check blocked order %q: %w", e.OrderID, err)
		}
		if !ok {
			h = Head{OrderID: e.OrderID} // no state: version 0
		}
		if e.Stale(h) {
			_ = idx.ClearStale(ctx, e) // best effort, the next reader tries again
			continue
		}
		if h.Parked == 0 || !h.BlockedSince.Equal(e.Since) {
			continue // pending: its commit has not landed (yet)
		}
		page.Orders = append(page.Orders, BlockedOrder{OrderID: h.OrderID, AppliedSeq: h.AppliedSeq, Parked: h.Parked,
			MissingSeq: h.AppliedSeq + 1, BlockedSince: timestamp(h.BlockedSince)})
	}
	if more && len(entries) > 0 {
		page.Continuation = base64.RawURLEncoding.EncodeToString([]byte(entries[len(entries)-1].Key))
	}
	return page, nil
}
