package ledger

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/convoy-dev/convoy/handler/convoy"
	"github.com/convoy-dev/convoy/handler/fault"
	"github.com/convoy-dev/convoy/handler/orders"
)

// Status of a ledger record.
type Status string

const (
	StatusPublishing Status = "publishing" // accepted; messages are being sent
	StatusPublished  Status = "published"  // every message was sent
	StatusRejected   Status = "rejected"   // invalid; nothing was sent
)

// Record is what the Store keeps about one ledger.
type Record struct {
	ID           string
	Hash         string
	Status       Status
	Transactions int
	Orders       int
	Sent         int // messages sent, in plan order: the progress checkpoint
	Error        string
	Problems     []fault.Problem
	UpdatedAt    time.Time
	// ETag is the version of the stored record this one was read as or
	// written as (set by the Store); SaveLedger replaces only that version.
	ETag string
}

// Store keeps ledger records and per-order sequence counters. Records are
// never written blindly: created only if absent, replaced only if unchanged
// since read, so that no writer overwrites a record another is publishing.
type Store interface {
	// GetLedger returns the ledger's record, or nil if it has none.
	GetLedger(ctx context.Context, id string) (*Record, error)
	// CreateLedger stores a new record and sets r.ETag; ErrLedgerExists if
	// one is there.
	CreateLedger(ctx context.Context, r *Record) error
	// SaveLedger replaces the record (progress, status) if it is still the
	// version r.ETag names, and sets r.ETag to the new one; ErrLedgerChanged
	// if it was replaced (or removed) since.
	SaveLedger(ctx context.Context, r *Record) error
	// Allocate reserves count consecutive seqs of orderID for the ledger
	// ledgerID of content hash and returns the first. Idempotent: the same
	// ledger always gets the same numbers back; two ledgers never share one
	// and leave no hole between them. An allocation made for the same id
	// with another count or hash is ErrAllocationMismatch (a Conflict).
	Allocate(ctx context.Context, ledgerID, hash, orderID string, count int) (first int64, err error)
	// Activate writes the orders' entries in the active-orders index
	// (convoy.ActiveIndex), after their seqs are allocated and before they
	// are sent, so that their lag is surveyed.
	Activate(ctx context.Context, orderIDs []string) error
}

// ErrLedgerExists: CreateLedger found a record.
var ErrLedgerExists = errors.New("ledger record exists")

// ErrLedgerChanged: SaveLedger found another version of the record than
// the one it was given (or none).
var ErrLedgerChanged = errors.New("ledger record changed since it was read")

// ErrAllocationMismatch: the seqs of an order were allocated to a ledger of
// the same id but other content (count or hash). Wrapped in a fault.Conflict.
var ErrAllocationMismatch = errors.New("seqs were allocated to this ledger id for other content")

// AllocationMismatch is the error a Store returns for ErrAllocationMismatch.
func AllocationMismatch(ledgerID, orderID string, count int, hash string, gotCount int, gotHash string) error {
	return fault.Wrap(fault.Conflict, ErrAllocationMismatch, fmt.Sprintf(
		"ledger %q: order %q holds an allocation of %d seq(s) for content %.16s…, not %d for %.16s…",
		ledgerID, orderID, gotCount, gotHash, count, hash))
}

// SameAllocation tells whether an allocation row recorded (count, hash)
// matches a request. A row written before rows held a hash has none: its
// count must match.
func SameAllocation(count int, hash string, gotCount int, gotHash string) bool {
	return gotCount == count && (gotHash == "" || gotHash == hash)
}

// Outcomes in a Summary.
const (
	OutcomePublished        = "published"
	OutcomeAlreadyPublished = "already published"
	OutcomeRejected         = "rejected"
)

// Summary reports what Publish did.
type Summary struct {
	LedgerID     string          `json:"ledgerId"`
	Transactions int             `json:"transactions"`
	Orders       int             `json:"orders"`
	Messages     int             `json:"messages"`
	Outcome      string          `json:"outcome"`
	Error        string          `json:"error,omitempty"`
	Problems     []fault.Problem `json:"problems,omitempty"`
}

// PublisherOptions tune a Publisher; the zero value works.
type PublisherOptions struct {
	Limits           Limits
	Retry            fault.RetryPolicy
	AllocParallelism int                   // concurrent per-order allocations; default DefaultAllocParallelism
	BatchPerSession  bool                  // one session per batch (partitioned queues); default mixed
	Progress         func(sent, total int) // called after each sent batch
	Now              func() time.Time
}

// DefaultAllocParallelism is how many orders' seqs a publish allocates at
// once. Each allocation is one Table transaction on its own order's
// partition, a round trip of milliseconds that waits on nothing the others
// do, so a ledger's allocation time falls about in proportion: a ledger of
// 1,000 orders de-batches in seconds (docs/publishing.md). More at once
// would hold more connections and requests per publish, and several
// publishes run at once (maxConcurrentSessions, 16).
const DefaultAllocParallelism = 16

// Publisher de-batches ledgers onto the orders queue.
type Publisher struct {
	store  Store
	sender convoy.Sender
	opts   PublisherOptions
}

// NewPublisher returns a Publisher.
func NewPublisher(store Store, sender convoy.Sender, opts PublisherOptions) *Publisher {
	if opts.AllocParallelism <= 0 {
		opts.AllocParallelism = DefaultAllocParallelism
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	return &Publisher{store: store, sender: sender, opts: opts}
}

// Publish validates doc and sends one message per transaction, resuming
// after the last checkpoint if the ledger was interrupted before. The same
// ledger again is a no-op reporting the original outcome; the same id with
// other content is a Conflict. An invalid ledger is an Invalid error with
// every problem; nothing is sent.
func (p *Publisher) Publish(ctx context.Context, doc []byte) (Summary, error) {
	return p.PublishQueued(ctx, doc, "")
}

// PublishQueued is Publish for a ledger taken from the ledgers queue in
// session sessionID: the ledger's stream must be that SessionId (the
// session is what orders the stream's ledgers), else the ledger is Invalid.
// An empty sessionID checks nothing.
func (p *Publisher) PublishQueued(ctx context.Context, doc []byte, sessionID string) (Summary, error) {
	l, err := Parse(doc, p.opts.Limits)
	if err == nil && sessionID != "" && l.Stream != sessionID {
		err = &rejection{ledgerID: l.ID, err: fault.Errorf(fault.Invalid, "the ledger's stream %s is not the SessionId %s it was queued with: "+
			"send a ledger with its stream as SessionId (convoy publish does), or it is not ordered with its stream",
			orders.Quote(l.Stream), orders.Quote(sessionID))}
	}
	if err != nil {
		return Summary{Outcome: OutcomeRejected, Error: fault.MessageOf(err), Problems: fault.ProblemsOf(err)}, err
	}
	var rec *Record
	if err := p.retry(ctx, func(ctx context.Context) (err error) { rec, err = p.begin(ctx, l); return err }); err != nil {
		return Summary{LedgerID: l.ID}, err
	}
	sum := Summary{LedgerID: l.ID, Transactions: len(l.Entries), Orders: rec.Orders, Messages: len(l.Entries), Outcome: OutcomePublished}
	if rec.Status == StatusPublished {
		sum.Outcome = OutcomeAlreadyPublished
		return sum, nil
	}
	plan, err := p.allocate(ctx, l)
	if err != nil {
		return sum, err
	}
	if err := p.send(ctx, l, plan, rec); err != nil {
		return sum, err
	}
	if rec.Status == StatusPublished { // with the last checkpoint
		return sum, nil
	}
	rec.Status, rec.UpdatedAt = StatusPublished, p.opts.Now().UTC()
	return sum, p.save(ctx, l, rec)
}

// save writes the record's progress over the version it last read or
// wrote. If another delivery of the same ledger wrote it meanwhile (a lost
// lock, an upload of a ledger also queued), their progress is merged (the
// furthest checkpoint wins) and written again; if the record now holds other
// content, publishing stops with a Conflict.
func (p *Publisher) save(ctx context.Context, l *Ledger, rec *Record) error {
	return p.retry(ctx, func(ctx context.Context) error {
		for range 10 {
			err := p.store.SaveLedger(ctx, rec)
			if !errors.Is(err, ErrLedgerChanged) {
				return err
			}
			fresh, err := p.store.GetLedger(ctx, l.ID)
			if err != nil {
				return err
			}
			if fresh == nil || fresh.Status == StatusRejected || !l.SameContent(fresh.Hash) {
				return fault.Errorf(fault.Conflict, "ledger %q was replaced by other content while being published", l.ID)
			}
			rec.Sent, rec.ETag = max(rec.Sent, fresh.Sent), fresh.ETag
			if fresh.Status == StatusPublished {
				rec.Status = StatusPublished
			}
		}
		return fault.Errorf(fault.Unavailable, "save ledger %q: too much contention", l.ID)
	})
}

// RecordRejection stores that doc was refused (Publish's error), so that a ledger
// from the queue is acknowledged once and its problems can be looked up.
// A ledger without a readable id is recorded under its content hash.
func (p *Publisher) RecordRejection(ctx context.Context, doc []byte, refused error) (*Record, error) {
	id, hash := rejectedID(doc, refused)
	rec := &Record{ID: id, Hash: hash, Status: StatusRejected, Error: fault.MessageOf(refused),
		Problems: fault.ProblemsOf(refused), UpdatedAt: p.opts.Now().UTC()}
	return rec, p.retry(ctx, func(ctx context.Context) error {
		existing, err := p.store.GetLedger(ctx, id)
		if err != nil {
			return err
		}
		if existing == nil {
			err = p.store.CreateLedger(ctx, rec)
		} else if existing.Status == StatusRejected {
			rec.ETag = existing.ETag
			err = p.store.SaveLedger(ctx, rec)
		} else {
			return nil // a valid ledger with this id exists: leave it alone
		}
		if errors.Is(err, ErrLedgerExists) || errors.Is(err, ErrLedgerChanged) {
			// Written meanwhile (perhaps a valid ledger now being published): look again.
			return fault.Wrap(fault.Unavailable, err, "ledger "+id+" was written concurrently")
		}
		return err
	})
}

// begin finds or creates the ledger's record and checks idempotency.
func (p *Publisher) begin(ctx context.Context, l *Ledger) (*Record, error) {
	rec, err := p.store.GetLedger(ctx, l.ID)
	if err != nil {
		return nil, err
	}
	switch {
	case rec == nil:
		rec = &Record{ID: l.ID, Hash: l.Hash, Status: StatusPublishing, Transactions: len(l.Entries),
			Orders: len(l.Orders()), UpdatedAt: p.opts.Now().UTC()}
		if err := p.store.CreateLedger(ctx, rec); errors.Is(err, ErrLedgerExists) {
			return nil, fault.Wrap(fault.Unavailable, err, "ledger "+l.ID+" was created concurrently")
		} else if err != nil {
			return nil, err
		}
	case rec.Status == StatusRejected:
		// A corrected ledger may reuse the id of a rejected one, if the
		// rejection is still what is recorded.
		*rec = Record{ID: l.ID, Hash: l.Hash, Status: StatusPublishing, Transactions: len(l.Entries),
			Orders: len(l.Orders()), UpdatedAt: p.opts.Now().UTC(), ETag: rec.ETag}
		if err := p.store.SaveLedger(ctx, rec); errors.Is(err, ErrLedgerChanged) {
			return nil, fault.Wrap(fault.Unavailable, err, "ledger "+l.ID+" was written concurrently")
		} else if err != nil {
			return nil, err
		}
	case !l.SameContent(rec.Hash):
		return nil, fault.Errorf(fault.Conflict, "ledger %q was already received with other content", l.ID)
	}
	return rec, nil
}

// plan is the send order: each order's messages together, orders in order
// of first appearance, each order's transactions in ledger order. It is a
// pure function of the ledger, so a checkpoint (a count) resumes it exactly.
type plan struct {
	index []int   // ledger index of each message, in send order
	seq   []int64 // its seq
}

func (p *Publisher) allocate(ctx context.Context, l *Ledger) (plan, error) {
	byOrder := map[string][]int{}
	orders := l.Orders()
	for i, e := range l.Entries {
		byOrder[e.OrderID] = append(byOrder[e.OrderID], i)
	}
	firsts := make([]int64, len(orders))
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(p.opts.AllocParallelism)
	for k, id := range orders {
		g.Go(func() error {
			return p.retry(gctx, func(ctx context.Context) (err error) {
				firsts[k], err = p.store.Allocate(ctx, l.ID, l.Hash, id, len(byOrder[id]))
				return err
			})
		})
	}
	if err := g.Wait(); err != nil {
		return plan{}, fmt.Errorf("allocate seqs for ledger %q: %w", l.ID, err)
	}
	if err := p.retry(ctx, func(ctx context.Context) error { return p.store.Activate(ctx, orders) }); err != nil {
		return plan{}, fmt.Errorf("index the orders of ledger %q as active: %w", l.ID, err)
	}
	pl := plan{index: make([]int, 0, len(l.Entries)), seq: make([]int64, 0, len(l.Entries))}
	for k, id := range orders {
		for j, i := range byOrder[id] {
			pl.index = append(pl.index, i)
			pl.seq = append(pl.seq, firsts[k]+int64(j))
		}
	}
	return pl, nil
}

// send sends the plan from the record's checkpoint on, saving the checkpoint
// after each batch; the last one also marks the ledger published (one write).
// A crash re-sends at most one batch, with the same MessageIds (duplicate
// detection) and seqs (the processor drops duplicates).
func (p *Publisher) send(ctx context.Context, l *Ledger, pl plan, rec *Record) error {
	total := len(pl.index)
	for next := rec.Sent; next < total; {
		var end int
		err := p.retry(ctx, func(ctx context.Context) (err error) {
			end, err = p.sendBatch(ctx, l, pl, next)
			return err
		})
		if err != nil {
			// Say what was done and that a retry resumes: the checkpoint
			// keeps the seqs, so sending again is safe.
			return fault.Wrap(fault.CodeOf(err), err, fmt.Sprintf("ledger %q: %d of its %d messages sent, then %s; publishing it again resumes from message %d with the same seqs",
				l.ID, next, total, fault.MessageOf(err), next+1))
		}
		rec.Sent, rec.UpdatedAt = end, p.opts.Now().UTC()
		if end == total {
			rec.Status = StatusPublished
		}
		if err := p.save(ctx, l, rec); err != nil {
			return err
		}
		next = max(end, rec.Sent)
		if p.opts.Progress != nil {
			p.opts.Progress(end, total)
		}
	}
	return nil
}

// sendBatch fills one batch from position from and sends it; it returns the
// position after the last message sent.
func (p *Publisher) sendBatch(ctx context.Context, l *Ledger, pl plan, from int) (int, error) {
	b, err := p.sender.NewBatch(ctx)
	if err != nil {
		return from, err
	}
	i := from
	for ; i < len(pl.index); i++ {
		m, err := l.message(pl.index[i], pl.seq[i])
		if err != nil {
			return from, err
		}
		if p.opts.BatchPerSession && i > from && l.Entries[pl.index[i-1]].OrderID != m.SessionID {
			break
		}
		if err := b.Add(m); errors.Is(err, convoy.ErrBatchFull) {
			if b.Len() == 0 {
				// Parse measured this message against MaxMessageBytes before any
				// seq was allocated: the setting is above the queue's real limit.
				// Not a rejection (the seqs are taken): fail, so that the delivery
				// is retried and in the end dead-lettered, and the setting fixed.
				return from, fault.Errorf(fault.Internal, "transaction %d of ledger %q (%d bytes as sent) does not fit an empty batch: "+
					"the queue's message size limit is below the MaxMessageBytes it was measured against", pl.index[i], l.ID, m.Size())
			}
			break
		} else if err != nil {
			return from, err
		}
	}
	return i, p.sender.SendBatch(ctx, b)
}

// message builds the order message of the i-th transaction.
func (l *Ledger) message(i int, seq int64) (convoy.Envelope, error) {
	e := l.Entries[i]
	return orders.NewOrderMessage(l.ID, i, seq, e.Last, e.Transaction)
}

func (p *Publisher) retry(ctx context.Context, fn func(context.Context) error) error {
	return p.opts.Retry.Do(ctx, fn)
}

// rejectedID is the id a rejected document is recorded under: its ledgerId
// when readable, else its content hash.
func rejectedID(doc []byte, rejected error) (id, hash string) {
	hash = contentHash(doc)
	var r *rejection
	if errors.As(rejected, &r) {
		return r.ledgerID, hash
	}
	return "sha256-" + strings.ToLower(hash[:32]), hash
}

// rejection is the error of a ledger refused whole whose ledgerId could be
// read: it carries the id to the rejection's record, so that recording it
// does not parse the document again.
type rejection struct {
	ledgerID string
	err      error
}

func (r *rejection) Error() string { return r.err.Error() }
func (r *rejection) Unwrap() error { return r.err }
