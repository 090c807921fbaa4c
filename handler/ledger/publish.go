package ledger

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/convoy-dev/convoy/handler/convoy"
	"github.com/convoy-dev/convoy/handler/fault"
	"github.com/convoy-dev/convoy/handler/keyed"
)

// Status of a ledger record.
type Status string

const (
	StatusPublishing Status = "publishing" // accepted; messages are being sent
	StatusPublished  Status = "published"  // every message was sent
	StatusRejected   Status = "rejected"   // invalid; nothing was sent
)

// Record is what Records keep about one ledger.
type Record struct {
	ID           string
	Hash         string
	Status       Status
	Transactions int
	Orders       int            // keys of the default domain (KeyCounts)
	Keys         map[string]int // keys of each other domain, by its Name (KeyCounts); nil when none
	Sent         int            // messages sent, in plan order: the progress checkpoint
	Error        string
	Problems     []fault.Problem
	UpdatedAt    time.Time
	// ETag is the version of the stored record this one was read as or
	// written as (set by the Store); SaveLedger replaces only that version.
	ETag string
}

// Records keep one record per ledger, whatever the domains of its entries.
// A record is never written blindly: created only if absent, replaced only
// if unchanged since read, so that no writer overwrites a record another is
// publishing.
type Records interface {
	// GetLedger returns the ledger's record, or nil if it has none.
	GetLedger(ctx context.Context, id string) (*Record, error)
	// CreateLedger stores a new record and sets r.ETag; ErrLedgerExists if
	// one is there.
	CreateLedger(ctx context.Context, r *Record) error
	// SaveLedger replaces the record (progress, status) if it is still the
	// version r.ETag names, and sets r.ETag to the new one; ErrLedgerChanged
	// if it was replaced (or removed) since.
	SaveLedger(ctx context.Context, r *Record) error
}

// Allocator keeps the sequence counters of one domain's keys, and their
// active index: each domain has its own, so that the same key id in two
// domains names two keys, with their own seqs.
type Allocator interface {
	// Allocate reserves count consecutive seqs of key for the ledger
	// ledgerID of content hash and returns the first. Idempotent: the same
	// ledger always gets the same numbers back; two ledgers never share one
	// and leave no hole between them. An allocation made for the same id
	// with another count or hash is ErrAllocationMismatch (a Conflict).
	Allocate(ctx context.Context, ledgerID, hash, key string, count int) (first int64, err error)
	// Activate writes the keys' entries in the active index
	// (convoy.ActiveIndex), after their seqs are allocated and before they
	// are sent, so that their lag is surveyed.
	Activate(ctx context.Context, keys []string) error
}

// Store is Records and one domain's Allocator on one table, as
// tablestore.Ledgers and memstore.Ledgers are (the order domain's keys
// unless scoped to another's).
type Store interface {
	Records
	Allocator
}

// ErrLedgerExists: CreateLedger found a record.
var ErrLedgerExists = errors.New("ledger record exists")

// ErrLedgerChanged: SaveLedger found another version of the record than
// the one it was given (or none).
var ErrLedgerChanged = errors.New("ledger record changed since it was read")

// ErrAllocationMismatch: the seqs of a key were allocated to a ledger of
// the same id but other content (count or hash). Wrapped in a fault.Conflict.
var ErrAllocationMismatch = errors.New("seqs were allocated to this ledger id for other content")

// AllocationMismatch is the error an Allocator of noun's keys ("order")
// returns for ErrAllocationMismatch.
func AllocationMismatch(noun, ledgerID, key string, count int, hash string, gotCount int, gotHash string) error {
	return fault.Wrap(fault.Conflict, ErrAllocationMismatch, fmt.Sprintf(
		"ledger %q: %s %q holds an allocation of %d seq(s) for content %.16s…, not %d for %.16s…",
		ledgerID, noun, key, gotCount, gotHash, count, hash))
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
	LedgerID     string `json:"ledgerId"`
	Transactions int    `json:"transactions"`
	// Orders counts the keys of the default domain (orders, the only one
	// before ledgers carried others), Keys those of each other domain the
	// ledger holds entries of, by its Name: Ledger.KeyCounts.
	Orders   int            `json:"orders"`
	Keys     map[string]int `json:"keys,omitempty"`
	Messages int            `json:"messages"`
	// Sent counts the ledger's messages by their domain's Name (their
	// queue's), when it was published now.
	Sent     map[string]int  `json:"-"`
	Outcome  string          `json:"outcome"`
	Error    string          `json:"error,omitempty"`
	Problems []fault.Problem `json:"problems,omitempty"`
}

// PublisherOptions tune a Publisher; the zero value works.
type PublisherOptions struct {
	Limits           Limits
	Retry            fault.RetryPolicy
	AllocParallelism int                   // concurrent per-key allocations; default DefaultAllocParallelism
	Progress         func(sent, total int) // called after each sent batch
	Now              func() time.Time
}

// DefaultAllocParallelism is how many keys' seqs a publish allocates at
// once. Each allocation is one Table transaction on its own key's
// partition, a round trip of milliseconds that waits on nothing the others
// do, so a ledger's allocation time falls about in proportion: a ledger of
// 1,000 orders de-batches in seconds (docs/publishing.md). More at once
// would hold more connections and requests per publish, and several
// publishes run at once (maxConcurrentSessions, 16).
const DefaultAllocParallelism = 16

// Route is where the entries of one domain go: the seqs of its keys and
// their active index (its Allocator, the domain's scope of the ledgers
// table), and its queue.
type Route struct {
	Domain
	Allocator Allocator
	Sender    convoy.Sender
	// BatchPerSession sends one session per batch (the queue is
	// partitioned); default mixed.
	BatchPerSession bool
}

// Publisher de-batches ledgers onto the queues of their entries' domains.
type Publisher struct {
	records Records
	routes  []Route  // a key's domain (keyOf.domain) indexes them
	domains []Domain // the routes', for Parse
	opts    PublisherOptions
}

// NewPublisher returns a Publisher of ledgers whose entries are of the
// domains of routes, the first being the default (Parse); it panics
// without a route, or with two of one domain (the registration is wrong).
func NewPublisher(records Records, routes []Route, opts PublisherOptions) *Publisher {
	if opts.AllocParallelism <= 0 {
		opts.AllocParallelism = DefaultAllocParallelism
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	p := &Publisher{records: records, routes: routes, opts: opts}
	for _, r := range routes {
		p.domains = append(p.domains, r.Domain)
	}
	if _, err := newReader(p.domains); err != nil {
		panic("ledger.NewPublisher: " + err.Error())
	}
	return p
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
	l, err := Parse(doc, p.opts.Limits, p.domains)
	if err == nil && sessionID != "" && l.Stream != sessionID {
		err = &rejection{ledgerID: l.ID, err: fault.Errorf(fault.Invalid, "the ledger's stream %s is not the SessionId %s it was queued with: "+
			"send a ledger with its stream as SessionId (convoy publish does), or it is not ordered with its stream",
			keyed.Quote(l.Stream), keyed.Quote(sessionID))}
	}
	if err != nil {
		return Summary{Outcome: OutcomeRejected, Error: fault.MessageOf(err), Problems: fault.ProblemsOf(err)}, err
	}
	var rec *Record
	if err := p.retry(ctx, func(ctx context.Context) (err error) { rec, err = p.begin(ctx, l); return err }); err != nil {
		return Summary{LedgerID: l.ID}, err
	}
	sum := Summary{LedgerID: l.ID, Transactions: l.Len(), Orders: rec.Orders, Keys: rec.Keys, Messages: l.Len(), Outcome: OutcomePublished}
	if rec.Status == StatusPublished {
		sum.Outcome = OutcomeAlreadyPublished
		return sum, nil
	}
	sum.Sent = map[string]int{}
	for i := range l.entries {
		sum.Sent[l.domains[l.key(i).domain].Rules.Name()]++
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
			err := p.records.SaveLedger(ctx, rec)
			if !errors.Is(err, ErrLedgerChanged) {
				return err
			}
			fresh, err := p.records.GetLedger(ctx, l.ID)
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
		existing, err := p.records.GetLedger(ctx, id)
		if err != nil {
			return err
		}
		if existing == nil {
			err = p.records.CreateLedger(ctx, rec)
		} else if existing.Status == StatusRejected {
			rec.ETag = existing.ETag
			err = p.records.SaveLedger(ctx, rec)
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
	rec, err := p.records.GetLedger(ctx, l.ID)
	if err != nil {
		return nil, err
	}
	fresh := func(etag string) *Record {
		defaults, others := l.KeyCounts()
		return &Record{ID: l.ID, Hash: l.Hash, Status: StatusPublishing, Transactions: l.Len(),
			Orders: defaults, Keys: others, UpdatedAt: p.opts.Now().UTC(), ETag: etag}
	}
	switch {
	case rec == nil:
		rec = fresh("")
		if err := p.records.CreateLedger(ctx, rec); errors.Is(err, ErrLedgerExists) {
			return nil, fault.Wrap(fault.Unavailable, err, "ledger "+l.ID+" was created concurrently")
		} else if err != nil {
			return nil, err
		}
	case rec.Status == StatusRejected:
		// A corrected ledger may reuse the id of a rejected one, if the
		// rejection is still what is recorded.
		rec = fresh(rec.ETag)
		if err := p.records.SaveLedger(ctx, rec); errors.Is(err, ErrLedgerChanged) {
			return nil, fault.Wrap(fault.Unavailable, err, "ledger "+l.ID+" was written concurrently")
		} else if err != nil {
			return nil, err
		}
	case !l.SameContent(rec.Hash):
		return nil, fault.Errorf(fault.Conflict, "ledger %q was already received with other content", l.ID)
	}
	return rec, nil
}

// plan is the send order: each domain's messages together, domains in
// order of first appearance; within a domain each key's messages together,
// keys in order of first appearance; each key's entries in ledger order (a
// ledger of orders alone: each order's, as before other domains). It is a
// pure function of the ledger, whatever the order the domains are
// registered in, so a checkpoint (a count) resumes it exactly.
type plan struct {
	keys  []int32 // the ledger's keys (Ledger.keys) in send order
	index []int32 // the ledger index of each message, in send order
	// By key: how many messages it has, the position of its first one, and
	// its first seq (once allocated).
	count, start []int32
	first        []int64
}

// newPlan orders the ledger's messages.
func newPlan(l *Ledger) plan {
	pl := plan{keys: make([]int32, 0, len(l.keys)), index: make([]int32, len(l.entries)),
		count: make([]int32, len(l.keys)), start: make([]int32, len(l.keys)), first: make([]int64, len(l.keys))}
	// The keys are in order of first appearance, so the domains' first keys are too.
	var domains []int
	for _, k := range l.keys {
		if !slices.Contains(domains, k.domain) {
			domains = append(domains, k.domain)
		}
	}
	for _, d := range domains {
		for k, key := range l.keys {
			if key.domain == d {
				pl.keys = append(pl.keys, int32(k))
			}
		}
	}
	for _, e := range l.entries {
		pl.count[e.key]++
	}
	var pos int32
	for _, k := range pl.keys {
		pl.start[k], pos = pos, pos+pl.count[k]
	}
	next := slices.Clone(pl.start)
	for i, e := range l.entries {
		pl.index[next[e.key]] = int32(i)
		next[e.key]++
	}
	return pl
}

// seq returns the seq of the message at position pos.
func (pl plan) seq(l *Ledger, pos int) int64 {
	k := l.entries[pl.index[pos]].key
	return pl.first[k] + int64(pos-int(pl.start[k]))
}

func (p *Publisher) allocate(ctx context.Context, l *Ledger) (plan, error) {
	pl := newPlan(l)
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(p.opts.AllocParallelism)
	for _, k := range pl.keys {
		key := l.keys[k]
		g.Go(func() error {
			return p.retry(gctx, func(ctx context.Context) (err error) {
				pl.first[k], err = p.routes[key.domain].Allocator.Allocate(ctx, l.ID, l.Hash, key.id, int(pl.count[k]))
				return err
			})
		})
	}
	if err := g.Wait(); err != nil {
		return plan{}, fmt.Errorf("allocate seqs for ledger %q: %w", l.ID, err)
	}
	for from := 0; from < len(pl.keys); { // a domain's keys are together
		d := l.keys[pl.keys[from]].domain
		var ids []string
		for ; from < len(pl.keys) && l.keys[pl.keys[from]].domain == d; from++ {
			ids = append(ids, l.keys[pl.keys[from]].id)
		}
		route := p.routes[d]
		if err := p.retry(ctx, func(ctx context.Context) error { return route.Allocator.Activate(ctx, ids) }); err != nil {
			return plan{}, fmt.Errorf("index the %s of ledger %q as active: %w", route.Rules.Name(), l.ID, err)
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

// sendBatch fills one batch from position from and sends it to the queue
// of that message's domain; it returns the position after the last message
// sent. A batch holds one domain's messages (one queue's), and with
// BatchPerSession one key's.
func (p *Publisher) sendBatch(ctx context.Context, l *Ledger, pl plan, from int) (int, error) {
	domain := l.key(int(pl.index[from])).domain
	route := p.routes[domain]
	b, err := route.Sender.NewBatch(ctx)
	if err != nil {
		return from, err
	}
	i := from
	for ; i < len(pl.index); i++ {
		if l.key(int(pl.index[i])).domain != domain {
			break
		}
		if route.BatchPerSession && i > from && l.entries[pl.index[i-1]].key != l.entries[pl.index[i]].key {
			break
		}
		m, err := l.message(route, int(pl.index[i]), pl.seq(l, i))
		if err != nil {
			return from, err
		}
		if err := b.Add(m); errors.Is(err, convoy.ErrBatchFull) {
			if b.Len() == 0 {
				// Parse measured this message against MaxMessageBytes before any
				// seq was allocated: the setting is above the queue's real limit.
				// Not a rejection (the seqs are taken): fail, so that the delivery
				// is retried and in the end dead-lettered, and the setting fixed.
				return from, fault.Errorf(fault.Internal, "transaction %d of ledger %q (%d bytes as sent) does not fit an empty batch: "+
					"the %s queue's message size limit is below the MaxMessageBytes it was measured against", pl.index[i], l.ID, m.Size(), route.Rules.Name())
			}
			break
		} else if err != nil {
			return from, err
		}
	}
	return i, route.Sender.SendBatch(ctx, b)
}

// message builds the message of the i-th entry, for its domain's queue.
func (l *Ledger) message(route Route, i int, seq int64) (convoy.Envelope, error) {
	e := l.entries[i]
	body, err := route.Rules.Body(l.command(e))
	if err != nil {
		return convoy.Envelope{}, fault.Wrap(fault.Internal, err, "encode message body")
	}
	return convoy.NewMessage(l.ID, i, seq, e.last, l.key(i).id, body), nil
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
