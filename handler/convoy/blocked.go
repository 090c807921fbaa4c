package convoy

import (
	"context"
	"encoding/base64"
	"fmt"
	"time"

	"github.com/convoy-dev/convoy/handler/fault"
	"github.com/convoy-dev/convoy/handler/keyed"
)

// Head is an order's scalar state, readable without its records.
type Head struct {
	OrderID      string
	AppliedSeq   int64
	Parked       int
	BlockedSince time.Time
	Version      int64
	AppliedAt    time.Time // Key.Progress: when the head last moved
	Crit         CriticalTimes
	Failure      keyed.Failure // Key.Failure
}

// BlockedIndex lists blocked orders, oldest first, without visiting every
// order: a page of the listing is one query of the index, whatever the
// number of orders, blocked or not.
//
// The entry lives in its own partition ("~blocked", so that one query lists
// it oldest first), apart from the order's, so it cannot join the order's
// entity-group transaction. The processor therefore writes it around each
// commit that changes whether the order is blocked, in three steps:
//
//  1. before the commit, the entry is made pending: written (a new block)
//     or marked (the block is about to end), naming the head Version that
//     the commit writes;
//  2. the commit;
//  3. after it, the entry is confirmed with the head's figures (the block
//     holds) or deleted (it ended). After every later commit that leaves
//     the order blocked, its figures are updated (parked count).
//
// A confirmed entry is listed as it is, without reading the order. A pending
// one is the trace of a commit in flight, or of a crash between the steps:
// its lister reads the head. Below the entry's Version, the commit has not
// landed (yet): neither listed nor removed (removing it was the race of
// issue 25, after which the commit landed and the order dropped out of every
// listing for good). At or past it, the head decides: blocked since the
// entry's time, the entry is listed and confirmed; otherwise it is stale and
// removed (unless written again since it was read). No clock is involved,
// unlike an "old enough to judge" bound, which a slow commit can outlast.
type BlockedIndex interface {
	// MarkBlocked writes the pending entry of an order that the commit
	// writing head version version blocks since since (replacing one with
	// the same key).
	MarkBlocked(ctx context.Context, orderID string, since time.Time, version int64) error
	// UpdateBlocked merges u into the entry of an order blocked since since,
	// only if it still has ETag etag ("*": whatever it has), and returns its
	// new ETag. An entry that is gone or changed is left as it is (no error,
	// no ETag): updates never bring an entry back.
	UpdateBlocked(ctx context.Context, orderID string, since time.Time, u BlockedUpdate, etag string) (string, error)
	// SetNotes replaces the notes of entries as ScanBlocked returned them,
	// many in few requests; an entry gone or changed since may be left as
	// it is (no error).
	SetNotes(ctx context.Context, notes []BlockedNote) error
	// ClearBlocked removes the entry of an order blocked since since, if it
	// still has ETag etag ("*": whatever it has), or else if it was not
	// marked for a commit after version upTo. The commit that ends a block
	// clears the entry its own update left, or one a reader confirmed
	// meanwhile, but not the entry of a new block of the same key in the
	// same millisecond that another instance marked meanwhile (keyedtest's
	// simulation found it deleted: the key missing from the blocked list).
	ClearBlocked(ctx context.Context, orderID string, since time.Time, etag string, upTo int64) error
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
	Version int64 // head version written by the commit that blocks (or unblocks); 0 if unknown (an entry of an earlier release)
	// Confirmed: the order was found blocked since Since at Version or
	// later, with AppliedSeq and Parked as given.
	Confirmed  bool
	AppliedSeq int64
	Parked     int
	// Note is what the healer last learnt about the missing message (its
	// JSON, opaque here); "" before anything was learnt.
	Note string
	ETag string // of the stored entry, for ClearStale and UpdateBlocked
}

// BlockedNote is a new note for an entry.
type BlockedNote struct {
	Entry BlockedEntry
	Note  string
}

// BlockedUpdate is what UpdateBlocked merges into an entry.
type BlockedUpdate struct {
	// Figures: set Confirmed, Version, AppliedSeq and Parked (a pending
	// mark sets Confirmed false and Version).
	Figures    bool
	Confirmed  bool
	Version    int64
	AppliedSeq int64
	Parked     int
	// Note, when not nil, replaces the entry's note.
	Note *string
}

// Stale reports whether e is an entry to remove, given the order's head h
// (the zero Head if the order has no state). It is stale only when the head
// is at or past the version whose commit was to block the order, and is not
// blocked since e.Since: that commit either landed and the block since ended,
// or lost to another commit and will never land (a retry blocks with a new
// entry). A head below e.Version means the commit is still to come.
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
	// Note is the index entry's note (BlockedEntry.Note), for the healer.
	Note string `json:"-"`
	// Failing is the failure of its missing seq's decision (Key.Failing),
	// when its head was read (a pending entry, or the AutoReplay survey).
	Failing *keyed.Failure `json:"-"`
}

// BlockedPage is one page of the listing.
type BlockedPage struct {
	Orders       []BlockedOrder `json:"orders"`
	Continuation string         `json:"continuation,omitempty"`
}

// MaxBlockedPageSize bounds a page of the listing.
const MaxBlockedPageSize = 500

// ListBlocked returns a page of blocked orders, oldest first: one query of
// the index, plus one head read per pending entry on the page (CheckEntries).
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
	if page.Orders, err = CheckEntries(ctx, idx, entries); err != nil {
		return BlockedPage{}, err
	}
	if more && len(entries) > 0 {
		page.Continuation = base64.RawURLEncoding.EncodeToString([]byte(entries[len(entries)-1].Key))
	}
	return page, nil
}

// CheckEntries turns scanned entries into blocked orders. A confirmed entry
// is listed as it is, unless its order has another entry among them (then
// both are checked as pending ones are). A pending one is checked against the order's head: an
// order blocked since the entry's time is listed, and its entry confirmed; a
// stale entry (BlockedEntry.Stale) is removed, unless written again since it
// was scanned; an entry whose commit has not landed (yet) is neither listed
// nor removed.
func CheckEntries(ctx context.Context, idx BlockedIndex, entries []BlockedEntry) ([]BlockedOrder, error) {
	return checkEntries(ctx, idx, entries, false)
}

// VerifyEntries is CheckEntries reading the head of confirmed entries too:
// a confirm is written after its commit under no condition, so it can land
// after another instance's commit ended the block (two instances on one
// order) and outlive it; the AutoReplay survey verifies every entry, so that
// none is listed longer than until its next run.
func VerifyEntries(ctx context.Context, idx BlockedIndex, entries []BlockedEntry) ([]BlockedOrder, error) {
	return checkEntries(ctx, idx, entries, true)
}

func checkEntries(ctx context.Context, idx BlockedIndex, entries []BlockedEntry, verify bool) ([]BlockedOrder, error) {
	// An order found in two entries is blocked once at most: the other
	// outlived its block (a confirm that landed after the commit that ended
	// it, whose clear failed). Its entries are read against the head, so
	// that it is listed once and the stale one goes, not at the next
	// AutoReplay survey only.
	of := map[string]int{}
	for _, e := range entries {
		of[e.OrderID]++
	}
	out := []BlockedOrder{}
	for _, e := range entries {
		if e.Confirmed && !verify && of[e.OrderID] == 1 {
			out = append(out, BlockedOrder{OrderID: e.OrderID, AppliedSeq: e.AppliedSeq, Parked: e.Parked,
				MissingSeq: e.AppliedSeq + 1, BlockedSince: timestamp(e.Since), Note: e.Note})
			continue
		}
		h, ok, err := idx.Head(ctx, e.OrderID)
		if err != nil {
			return nil, fmt.Errorf("check blocked entry %q: %w", e.OrderID, err)
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
		if !e.Confirmed || e.AppliedSeq != h.AppliedSeq || e.Parked != h.Parked {
			// Best effort: a reader that finds it still pending reads the head.
			_, _ = idx.UpdateBlocked(ctx, e.OrderID, e.Since, BlockedUpdate{Figures: true, Confirmed: true, Version: h.Version,
				AppliedSeq: h.AppliedSeq, Parked: h.Parked}, e.ETag)
		}
		b := BlockedOrder{OrderID: h.OrderID, AppliedSeq: h.AppliedSeq, Parked: h.Parked,
			MissingSeq: h.AppliedSeq + 1, BlockedSince: timestamp(h.BlockedSince), Note: e.Note}
		if f := h.Failure; f.Seq != 0 && f.Seq == b.MissingSeq {
			b.Failing = &f
		}
		out = append(out, b)
	}
	return out, nil
}
