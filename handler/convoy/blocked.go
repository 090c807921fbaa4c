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
type BlockedIndex interface {
	MarkBlocked(ctx context.Context, orderID string, since time.Time) error
	ClearBlocked(ctx context.Context, orderID string, since time.Time) error
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
// entry is checked against the order's head; stale entries are dropped from
// the page and removed from the index.
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
		if !ok || h.Parked == 0 || !h.BlockedSince.Equal(e.Since) {
			_ = idx.ClearBlocked(ctx, e.OrderID, e.Since) // stale: best effort, the next reader tries again
			continue
		}
		page.Orders = append(page.Orders, BlockedOrder{OrderID: h.OrderID, AppliedSeq: h.AppliedSeq, Parked: h.Parked,
			MissingSeq: h.AppliedSeq + 1, BlockedSince: timestamp(h.BlockedSince)})
	}
	if more && len(entries) > 0 {
		page.Continuation = base64.RawURLEncoding.EncodeToString([]byte(entries[len(entries)-1].Key))
	}
	return page, nil
}
