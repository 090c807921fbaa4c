// Package tablestore keeps order state in Azure Table Storage: one partition
// per order, so that one entity-group transaction commits a step atomically.
//
// Rows of an order's partition (PartitionKey = order id):
//
//	h                      head: status, currency, appliedSeq, appliedAt, version, total, txCount, layout, …
//	p:<seq, 19 digits>     a parked message
//	r:<seq, 19 digits>     a rejection
//	t:<position, 10 digits> a transaction, in the order added
//	v:<version, 19 digits> commit marker: inserted (never replaced) by each commit
//	w:migration            how far the migration of a partition of the layout before got
//	x:<txId>               a transaction by its id: its position and amount
//
// What a message reads does not depend on the order's history (issue 27)
// nor on its parked tail (issue 33): the head and the parked rows are one
// RowKey range (h to p;), of which one query reads the head and the first
// convoy.ParkedLoadSize parked rows (the head counts them all: Parked, and
// keeps the highest: ParkedLast); a drain reads the next parked rows a page
// at a time (Parked), and a message beyond them is a duplicate if its row
// exists (IsParked: one point read); a ModifyTransaction's record is one point read of its x row; an
// AddTransaction's x row is inserted by the commit, which fails whole if the
// txId exists. Transactions and rejections are read a page at a time
// (History). Layout 2 is a head with Layout = 2 (its Total and TxCount are
// then kept, and every transaction has its x row); a head without it was
// written by a release before issue 27 (or by one again, in a rolling
// upgrade or a rollback: it replaces the head whole), and Load migrates the
// partition (migrate).
//
// The blocked-orders index is the partition "~blocked" ('~' is not in the
// order id alphabet): RowKey convoy.BlockedKey, oldest first.
//
// Compare-and-swap: each commit inserts the marker of the version it creates.
// Two writers from the same version both insert the same marker, and the
// transaction of the second fails whole; a writer from a stale version finds
// its marker already there. (Batch responses carry no ETags in the Go SDK, so
// an ETag-guarded head would need an extra read per message; markers need none.)
// Markers are never deleted, and Load does not read them.
package tablestore

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	"github.com/Azure/azure-sdk-for-go/sdk/data/aztables"

	"github.com/convoy-dev/convoy/handler/convoy"
	"github.com/convoy-dev/convoy/handler/fault"
	"github.com/convoy-dev/convoy/handler/keyed"
)

const (
	headKey      = "h"
	parkedPrefix = "p:"
	rejectPrefix = "r:"
	txPrefix     = "t:"
	markerPrefix = "v:"
	txIDPrefix   = "x:"
	// headRangeEnd ends the RowKey range of the head and the parked rows:
	// nothing sorts between "h" and "p:", and "p;" follows every "p:…".
	headRangeEnd = "p;"
	// layout is the Layout property of a head written since issue 27.
	layout = 2
)

// The SDK's own retries of one Table Storage request (the same azcore retry
// policy for the aztables client and for Batches), by who waits for it. The
// program builds a pair of clients for each (serve's newServer).
var (
	// ProcessorRetry, the SDK's defaults (no try timeout, 3 retries after
	// about 0.8 s, 1.6 s, 3.2 s), is for the processor and the publisher
	// (OrderProcessor, LedgerIngest, LedgerUpload) and the commands: they
	// retry a failed request within their TransientRetrySeconds
	// (fault.RetryPolicy), which ends the request in flight at that budget,
	// not earlier: a shorter try or fewer retries would end the budget early
	// (an invocation answers before it has retried as long as it may).
	ProcessorRetry = policy.RetryOptions{}
	// OperatorRetry is for the callers an operator waits on (OrderStatus,
	// BlockedOrders, HealthSummary, ReplayOrder, ReplayDeadLetters) and the
	// AutoReplay timer. Each try has 3 s: a healthy account answers a read,
	// a page of a query or an entity-group transaction in well under a
	// second, so 3 s cuts no normal request; a try cut short is retried
	// once, after about 0.2 s (at most 1 s). So with storage accepting
	// connections and never answering (Azurite paused with SIGSTOP) a
	// request fails in about 6 s, classified Unavailable, instead of holding
	// its caller to its deadline (AutoReplay's run: 60 s). Each caller
	// retries anyway (AutoReplay at its next run, an operator by calling
	// again), so the SDK only rides out a blip.
	OperatorRetry = policy.RetryOptions{
		MaxRetries:    1, // 0 would mean the SDK's default of 3
		TryTimeout:    3 * time.Second,
		RetryDelay:    200 * time.Millisecond,
		MaxRetryDelay: time.Second,
	}
)

// ClientOptions are the options of an aztables client whose requests retry
// as r (ProcessorRetry or OperatorRetry).
func ClientOptions(r policy.RetryOptions) *aztables.ClientOptions {
	return &aztables.ClientOptions{ClientOptions: *BatchOptions(r)}
}

// BatchOptions are the options of Batches retrying as r, the same as
// ClientOptions(r)'s.
func BatchOptions(r policy.RetryOptions) *azcore.ClientOptions {
	return &azcore.ClientOptions{Retry: r}
}

// Store is a convoy.Store on one table.
type Store struct {
	table   *aztables.Client
	batches *Batches // the same table's entity-group transactions
}

var _ convoy.Store = (*Store)(nil)

// New returns a Store on table, which is created on first use if missing;
// batches (Batches.Table of the same name) commits its transactions.
func New(table *aztables.Client, batches *Batches) *Store {
	return &Store{table: table, batches: batches}
}

// Load implements convoy.Store. One query reads the head and the first
// parked rows (one RowKey range, the head first; convoy.ParkedLoadSize of
// them); a head of the layout before issue 27 is migrated first (migrate).
func (s *Store) Load(ctx context.Context, orderID string) (*convoy.Key, error) {
	o, etag, legacy, err := s.loadHead(ctx, orderID)
	if err != nil || !legacy {
		return o, err
	}
	if err := s.migrate(ctx, o, etag); err != nil {
		return nil, err
	}
	return o, nil
}

// loadHead reads the head and the first convoy.ParkedLoadSize parked rows;
// legacy: the head is of the layout before issue 27 (etag: the head's).
func (s *Store) loadHead(ctx context.Context, orderID string) (o *convoy.Key, etag azcore.ETag, legacy bool, err error) {
	what := "load order " + orderID
	o = convoy.NewKey(orderID)
	filter := fmt.Sprintf("PartitionKey eq '%s' and RowKey ge '%s' and RowKey lt '%s'", escape(orderID), headKey, headRangeEnd)
	top := int32(1 + convoy.ParkedLoadSize) // the head and the rows; the head counts them all
	pager := s.table.NewListEntitiesPager(&aztables.ListEntitiesOptions{Filter: &filter, Top: &top})
	var head props
	var parked []convoy.Message
	for pager.More() && len(parked) < convoy.ParkedLoadSize {
		page, err := pager.NextPage(ctx)
		if err != nil {
			if tableAbsent(err) {
				return o, "", false, nil
			}
			return nil, "", false, classify(err, what)
		}
		for _, raw := range page.Entities {
			var e aztables.EDMEntity
			if err := json.Unmarshal(raw, &e); err != nil {
				return nil, "", false, fault.Wrap(fault.Internal, err, what)
			}
			switch {
			case e.RowKey == headKey:
				head, etag = props(e.Properties), azcore.ETag(e.ETag)
				decodeHead(o, head)
			case strings.HasPrefix(e.RowKey, parkedPrefix):
				parked = append(parked, decodeParked(props(e.Properties)))
			default:
				return nil, "", false, fault.Errorf(fault.Internal, "%s: unexpected row %q", what, e.RowKey)
			}
		}
	}
	if head == nil {
		return o, "", false, nil
	}
	parked = parked[:min(len(parked), convoy.ParkedLoadSize)]
	if _, ok := head["Parked"]; !ok {
		// A head written before it counted its parked rows: count them.
		if o.ParkedCount, o.ParkedLast, err = s.countParked(ctx, orderID, parked, len(parked) == convoy.ParkedLoadSize); err != nil {
			return nil, "", false, err
		}
	}
	more := o.ParkedCount > len(parked)
	if err := o.AddParkedPage(parked, more, nil); err != nil {
		return nil, "", false, fault.Wrap(fault.Unavailable, err, what)
	}
	return o, etag, head.int("Layout") < layout && o.Version > 0, nil
}

// countParked counts the order's parked rows and finds the highest seq:
// those of page when no more may follow (full: it may), else by a query of
// their keys alone.
func (s *Store) countParked(ctx context.Context, orderID string, page []convoy.Message, full bool) (int, int64, error) {
	if !full {
		if len(page) == 0 {
			return 0, 0, nil
		}
		return len(page), page[len(page)-1].Seq, nil
	}
	filter := fmt.Sprintf("PartitionKey eq '%s' and RowKey ge '%s' and RowKey lt '%s'", escape(orderID), parkedPrefix, headRangeEnd)
	sel := "RowKey"
	pager := s.table.NewListEntitiesPager(&aztables.ListEntitiesOptions{Filter: &filter, Select: &sel})
	n, last := 0, int64(0)
	for pager.More() {
		resp, err := pager.NextPage(ctx)
		if err != nil {
			return 0, 0, classify(err, "count the parked messages of order "+orderID)
		}
		for _, raw := range resp.Entities {
			var e struct{ RowKey string }
			if err := json.Unmarshal(raw, &e); err != nil {
				return 0, 0, fault.Wrap(fault.Internal, err, "count the parked messages of order "+orderID)
			}
			seq, err := strconv.ParseInt(strings.TrimPrefix(e.RowKey, parkedPrefix), 10, 64)
			if err != nil {
				return 0, 0, fault.Errorf(fault.Internal, "order %q: unexpected parked row %q", orderID, e.RowKey)
			}
			n, last = n+1, max(last, seq)
		}
	}
	return n, last, nil
}

// Parked implements convoy.Store: one query of the p rows above after.
func (s *Store) Parked(ctx context.Context, orderID string, after int64, limit int) ([]convoy.Message, bool, error) {
	filter := fmt.Sprintf("PartitionKey eq '%s' and RowKey gt '%s' and RowKey lt '%s'", escape(orderID), seqKey(parkedPrefix, max(after, 0)), headRangeEnd)
	return listUpTo(ctx, s.table, filter, limit, "read the parked messages of order "+orderID, func(raw []byte) (convoy.Message, error) {
		var e aztables.EDMEntity
		if err := json.Unmarshal(raw, &e); err != nil {
			return convoy.Message{}, err
		}
		return decodeParked(props(e.Properties)), nil
	})
}

// IsParked implements convoy.Store: one point read of the p row.
func (s *Store) IsParked(ctx context.Context, orderID string, seq int64) (bool, error) {
	_, err := s.table.GetEntity(ctx, orderID, seqKey(parkedPrefix, seq), nil)
	switch {
	case err == nil:
		return true, nil
	case isAbsent(err):
		return false, nil
	}
	return false, classify(err, fmt.Sprintf("read parked seq %d of order %q", seq, orderID))
}

// Row implements convoy.Store: one point read of the row.
func (s *Store) Row(ctx context.Context, orderID string, ref keyed.RowRef) (keyed.Props, bool, error) {
	what := fmt.Sprintf("read row %s:%s of %q", ref.Collection, ref.ID, orderID)
	resp, err := s.table.GetEntity(ctx, orderID, rowKey(ref), nil)
	switch {
	case isAbsent(err):
		return nil, false, nil
	case err != nil:
		return nil, false, classify(err, what)
	}
	var e aztables.EDMEntity
	if err := json.Unmarshal(resp.Value, &e); err != nil {
		return nil, false, fault.Wrap(fault.Internal, err, what)
	}
	return props(e.Properties).keyed(nil), true, nil
}

// NoteFailure implements convoy.Store: a merge of the head's failure
// properties, if the head exists (If-Match *: a key without state keeps
// none; its message's log lines say why).
func (s *Store) NoteFailure(ctx context.Context, orderID string, f keyed.Failure) error {
	body, err := json.Marshal(map[string]any{"PartitionKey": orderID, "RowKey": headKey,
		"FailedSeq": strconv.FormatInt(f.Seq, 10), "FailedSeq@odata.type": "Edm.Int64", "Failure": f.Why,
		"FailedAt": f.At.UTC().Format("2006-01-02T15:04:05.9999999Z"), "FailedAt@odata.type": "Edm.DateTime"})
	if err != nil {
		return fault.Wrap(fault.Internal, err, "note a failure")
	}
	existing := azcore.ETagAny
	_, err = s.table.UpdateEntity(ctx, body, &aztables.UpdateEntityOptions{IfMatch: &existing, UpdateMode: aztables.UpdateModeMerge})
	if err != nil && !isAbsent(err) {
		return classify(err, "note the failure of "+orderID)
	}
	return nil
}

// rowKey is the RowKey of a row of a domain's collection.
func rowKey(ref keyed.RowRef) string { return ref.Collection + ":" + ref.ID }

// Commit implements convoy.Store.
func (s *Store) Commit(ctx context.Context, o *convoy.Key, base int64, c *convoy.Change) error {
	if err := o.Encoded(); err != nil {
		return err
	}
	if n := c.Records(); n > convoy.MaxChangeRecords {
		return fault.Errorf(fault.Internal, "change touches %d records, more than %d", n, convoy.MaxChangeRecords)
	}
	err := withTable(ctx, s.table, func() error { return s.batches.submit(ctx, s.commitBody(o, base, c)) })
	if err == nil {
		return nil
	}
	if lostRace(err) {
		// The marker exists (someone committed this version) or a parked row
		// we meant to delete is gone: our view of the order is stale.
		return fmt.Errorf("order %q moved past version %d: %w", o.ID, base, convoy.ErrConflict)
	}
	return classify(err, "commit order "+o.ID)
}

// withTable runs fn, creating the table and running fn once more if it is
// missing (tables are created by Bicep in Azure; locally, on first use).
func withTable(ctx context.Context, table *aztables.Client, fn func() error) error {
	err := fn()
	if tableAbsent(err) {
		if _, cerr := table.CreateTable(ctx, nil); cerr != nil && tableCode(cerr) != aztables.TableAlreadyExists {
			return classify(cerr, "create table")
		}
		err = fn()
	}
	return err
}

// commitBody writes a commit's entity-group transaction: the marker of the
// new version (insert: the compare-and-swap), the head, then the rows the
// change adds or removes.
func (s *Store) commitBody(o *convoy.Key, base int64, c *convoy.Change) *batchBody {
	b := s.batches.newBody()
	e := b.insert(o.ID, markerKey(base+1))
	e.i64("AppliedSeq", o.AppliedSeq)
	e.time("At", o.UpdatedAt)
	e.end()
	e = b.upsert(o.ID, headKey)
	e.i32("Parked", int32(o.ParkedCount)) // all of them (Load reads the first few), and for head-only reads (blocked orders)
	if o.ParkedLast != 0 {
		e.i64("ParkedLast", o.ParkedLast)
	}
	e.bool("Complete", o.Complete)
	e.i64("AppliedSeq", o.AppliedSeq)
	e.i64("Version", base+1)
	e.i32("Layout", layout)
	e.time("UpdatedAt", o.UpdatedAt)
	if !o.BlockedSince.IsZero() {
		e.time("BlockedSince", o.BlockedSince)
	}
	if !o.AppliedAt.IsZero() { // absent from heads written before it was kept
		e.time("AppliedAt", o.AppliedAt)
	}
	if crit := convoy.EncodeCriticalTimes(o.Crit); crit != "" {
		e.str("Crit", crit)
	}
	if f := o.Failure; f.Seq > o.AppliedSeq { // still ahead: kept (NoteFailure)
		e.i64("FailedSeq", f.Seq)
		e.str("Failure", f.Why)
		e.time("FailedAt", f.At)
	}
	if o.StateVersion > 1 { // absent: version 1
		e.i32("StateVersion", int32(o.StateVersion))
	}
	e.props(o.StateProps)
	e.end()
	// The domain's rows: an insert fails the whole commit if the row exists;
	// a merge (If-Match *) if it is missing, and keeps what it does not write.
	for _, w := range c.Writes {
		write := b.merge
		if w.Insert {
			write = b.insert
		}
		e := write(o.ID, rowKey(w.Ref))
		e.props(w.Props)
		e.end()
	}
	for _, r := range c.Rejections {
		e := b.insert(o.ID, seqKey(rejectPrefix, r.Seq))
		e.i64("Seq", r.Seq)
		e.props(r.Tag)
		e.str("Reason", r.Reason)
		e.end()
	}
	for _, seq := range slices.Sorted(maps.Keys(c.Park)) {
		m := c.Park[seq]
		e := b.insert(o.ID, seqKey(parkedPrefix, seq))
		e.i64("Seq", m.Seq)
		e.bool("Last", m.Last)
		e.str("MessageId", m.MessageID)
		if m.Oversize != "" {
			e.str("Oversize", m.Oversize)
		}
		e.props(m.Stored)
		if !m.EnqueuedAt.IsZero() {
			e.time("EnqueuedAt", m.EnqueuedAt)
		}
		if m.TraceParent != "" {
			e.str("TraceParent", m.TraceParent)
		}
		e.end()
	}
	for _, seq := range slices.Sorted(maps.Keys(c.Unpark)) {
		b.delete(o.ID, seqKey(parkedPrefix, seq))
	}
	return b
}
