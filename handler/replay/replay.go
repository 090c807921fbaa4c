// Package replay puts dead-lettered order messages back into their place:
// it re-sends them to the orders queue with their original SessionId, seq
// and body and a new MessageId, and completes each dead-lettered copy only
// after its re-send succeeded. Order replays one order's dead letters in seq
// order; All replays every placeable dead letter, grouped by order and in
// seq order per order, a bounded amount per call.
//
// A dead-letter sub-queue is read with peek-lock: what one run receives is
// locked and invisible to every other reader until it is completed,
// abandoned or its lock expires. A run therefore never concludes "nothing
// (more) to replay" from an empty receive alone: it peeks the sub-queue
// (peeking sees locked messages and locks none) and reports every dead
// letter it saw but could not receive (Incomplete). A dead letter a run
// holds longer than the queue's lock duration comes back from its next
// receive under a new lock: the run keeps it once, settles it with the new
// lock, and stops receiving there (see scan).
package replay

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/convoy-dev/convoy/handler/convoy"
	"github.com/convoy-dev/convoy/handler/fault"
	"github.com/convoy-dev/convoy/handler/tracing"
)

// DeadLetter is a message of a dead-letter sub-queue, locked by Receive (or
// only peeked: then Handle is nil and it cannot be settled).
type DeadLetter struct {
	SequenceNumber int64 // in the queue; a message dead-lettered again has a new one
	MessageID      string
	SessionID      string
	Properties     map[string]any
	Body           []byte
	Reason         string
	Handle         any // the adapter's lock
}

// Source reads a dead-letter sub-queue with peek-lock, as azservicebus's
// receiver on SubQueueDeadLetter does.
type Source interface {
	// Receive locks up to max messages that no reader holds; none when
	// there is none (or every one is locked).
	Receive(ctx context.Context, max int) ([]DeadLetter, error)
	// Peek returns up to max messages whose sequence number is at least
	// from, in sequence-number order, locked or not, without locking them.
	Peek(ctx context.Context, from int64, max int) ([]DeadLetter, error)
	Complete(ctx context.Context, m DeadLetter) error
	// Abandon gives m's lock back: another reader can receive it at once.
	// A run abandons only after its last Receive, and an adapter makes
	// sure that what it gives back cannot be delivered into a receive of
	// its own that is still open (servicebus.DeadLetters: a link left with
	// credit takes it straight back, and keeps it locked when it closes).
	Abandon(ctx context.Context, m DeadLetter) error
}

// OrderReader reads an order's state (convoy.Store).
type OrderReader interface {
	Load(ctx context.Context, orderID string) (*convoy.Key, error)
}

// DefaultMaxScan bounds the dead letters one run receives, and so holds
// locked, while it looks for what to replay (setting ReplayScanLimit).
const DefaultMaxScan = 5000

// receiveBatch is how many dead letters one receive asks for (a receive
// returns what has arrived: it needs no sizing by bytes).
const receiveBatch = 100

// A peek is one request whose answer holds every message it asked for, so
// a page is sized by bytes as well as by count: 250 dead letters of 256 KiB
// (64 MB) do not arrive within AutoReplay's read deadline (3 s) over a link
// slower than about 170 Mbit/s, and a page that never arrives leaves the
// sub-queue unread on every try (issue 42). 2 MiB arrive within 3 s from
// about 6 Mbit/s. The first page is sized for the largest message Service
// Bus Standard takes, the next ones for the largest seen so far.
const (
	peekBatch       = 250
	peekPageBytes   = 2 << 20
	maxMessageBytes = 256 << 10
	// messageOverhead: a message's headers and properties besides its body.
	messageOverhead = 1 << 10
)

// PeekPage is how many dead letters the next peek asks for, given the
// largest seen so far (MessageBytes; 0 before the first page).
func PeekPage(largest int) int {
	if largest == 0 {
		largest = maxMessageBytes
	}
	return max(1, min(peekBatch, peekPageBytes/largest))
}

// MessageBytes is about what m takes in a peek's answer.
func MessageBytes(m DeadLetter) int { return len(m.Body) + messageOverhead }

// Options tune a run; the zero value works.
type Options struct {
	// MaxScan bounds the dead letters a run receives (and holds locked);
	// its closing peek reads at most 10 times as many. Default DefaultMaxScan.
	MaxScan int
	// Orders, when set, is read for each order's appliedSeq: a dead letter
	// whose seq the order already applied is a duplicate, completed without
	// being re-sent. Without it every placeable dead letter is re-sent (the
	// processor then ignores the duplicates).
	Orders OrderReader
	// Select, when set, chooses which of the order's dead letters Order may
	// re-send: the others are left dead-lettered, untouched, and listed
	// under Report.Left (automatic replay leaves dead letters of a
	// permanent cause to an operator).
	Select func(DeadLetter) bool
}

func (o Options) maxScan() int {
	if o.MaxScan <= 0 {
		return DefaultMaxScan
	}
	return o.MaxScan
}

// Replayed is one message put back.
type Replayed struct {
	Seq          int64  `json:"seq"`
	MessageID    string `json:"messageId"`
	NewMessageID string `json:"newMessageId"`
	Reason       string `json:"deadLetterReason,omitempty"`
}

// Duplicate is a dead letter whose seq its order had already applied: it was
// completed without being re-sent.
type Duplicate struct {
	Seq       int64  `json:"seq"`
	MessageID string `json:"messageId"`
}

// Incomplete says why a run could not see every dead letter it looked for.
type Incomplete struct {
	// ScanLimitReached: the run received ScanLimit dead letters and stopped.
	ScanLimitReached bool `json:"scanLimitReached"`
	ScanLimit        int  `json:"scanLimit"`
	// NotReceived counts the dead letters (of the order, for Order) that the
	// closing peek saw but this run did not receive: locked by another
	// reader (another replay), beyond the scan limit, or dead-lettered while
	// the run went on.
	NotReceived int `json:"notReceived"`
	// PeekCutShort: the closing peek stopped at its limit (10 × the scan
	// limit) before the end of the sub-queue, so more may be unseen.
	PeekCutShort bool   `json:"peekCutShort,omitempty"`
	Reason       string `json:"reason"`
}

// LockedElsewhere reports whether running again later can finish the job:
// the run did not stop at its scan limit, so what it missed was locked by
// another reader or is new.
func (i *Incomplete) LockedElsewhere() bool { return i != nil && !i.ScanLimitReached }

// Report says what a replay of one order did.
type Report struct {
	OrderID  string     `json:"orderId"`
	Replayed []Replayed `json:"replayed"`
	// Duplicates are dead letters of the order whose seq it had applied
	// already: completed, not re-sent.
	Duplicates []Duplicate `json:"duplicates,omitempty"`
	// Unplaceable are the order's dead letters that cannot be put back (no
	// readable seq, or a seq past convoy.MaxParkAhead): they stay
	// dead-lettered (skip their gap instead).
	Unplaceable []string `json:"unplaceable,omitempty"`
	// Left are the order's dead letters that Options.Select did not choose:
	// they stay dead-lettered.
	Left []string `json:"left,omitempty"`
	// Scanned counts the distinct dead letters the run received.
	Scanned int `json:"scanned"`
	// Incomplete is set when the run could not see all of the order's dead
	// letters: "nothing replayed" then does not mean "nothing to replay".
	Incomplete *Incomplete `json:"incomplete,omitempty"`
}

// Order replays the dead letters of orderID. Messages of other orders are
// released untouched. On error, everything not yet replayed stays
// dead-lettered, and the report says what was.
//
// A re-sent message keeps the trace context of its dead letter, so that its
// apply stays in the ledger's trace; the run's own span ("replay order")
// links to the context of every dead letter it re-sent or completed as a
// duplicate (a skip settles its dead letter so).
func Order(ctx context.Context, src Source, sender convoy.Sender, orderID string, opts Options) (Report, error) {
	ctx, span := tracing.Tracer().Start(ctx, "replay order", trace.WithAttributes(attribute.String("convoy.order_id", orderID)))
	rep, err := order(ctx, src, sender, orderID, opts)
	endRun(span, err, attribute.Int("convoy.replayed", len(rep.Replayed)), attribute.Int("convoy.duplicates", len(rep.Duplicates)))
	return rep, err
}

// endRun ends a run's span with what it did.
func endRun(span trace.Span, err error, attrs ...attribute.KeyValue) {
	span.SetAttributes(attrs...)
	if err != nil {
		span.SetStatus(codes.Error, err.Error())
	}
	span.End()
}

// link adds the dead letter's own trace context to the run's span.
func link(ctx context.Context, msg convoy.Envelope, deadLetterID string) {
	span := trace.SpanFromContext(ctx)
	if !span.IsRecording() {
		return
	}
	tc := tracing.FromProperties(func(key string) (string, bool) {
		switch key {
		case tracing.PropTraceParent:
			return msg.TraceParent, msg.TraceParent != ""
		case tracing.PropDiagnosticID:
			return msg.DiagnosticID, msg.DiagnosticID != ""
		}
		return "", false
	})
	if tc.SpanContext.IsValid() {
		span.AddLink(trace.Link{SpanContext: tc.SpanContext, Attributes: []attribute.KeyValue{
			attribute.String("messaging.message.id", deadLetterID), attribute.Int64("convoy.seq", msg.Seq)}})
	}
}

func order(ctx context.Context, src Source, sender convoy.Sender, orderID string, opts Options) (Report, error) {
	rep := Report{OrderID: orderID, Replayed: []Replayed{}}
	limit := opts.maxScan()
	var mine, held []DeadLetter
	defer func() { release(ctx, src, held) }()
	// What there is, first: a peek locks nothing and answers at once, where
	// a receive that finds nothing waits (servicebus.DeadLetters: 5 s). The
	// scan then stops as soon as the last of this order's dead letters is
	// in hand, and a run for an order with none receives nothing. One
	// dead-lettered after the peek is the next run's.
	wanted, cut, err := peekWanted(ctx, src, peekLimit(limit), func(m DeadLetter) bool { return m.SessionID == orderID })
	if err != nil {
		return rep, err
	}
	if len(wanted) == 0 && !cut {
		return rep, nil
	}
	sc := newScan(src, limit)
	if !cut {
		sc.stopAt = slices.Max(wanted)
	}
	err = sc.run(ctx)
	rep.Scanned = len(sc.msgs)
	if err != nil {
		held = sc.msgs
		return rep, err
	}
	var others []DeadLetter
	for _, m := range sc.msgs {
		if m.SessionID == orderID {
			mine = append(mine, m)
		} else {
			others = append(others, m)
		}
	}
	// Other orders' dead letters go back at once, not after the re-sends:
	// another reader (a skip settling its seq, another replay) can take
	// them while this run goes on.
	release(ctx, src, others)
	unseen := 0
	for _, seq := range wanted {
		if !sc.received(seq) {
			unseen++
		}
	}
	if reached := rep.Scanned >= limit; unseen > 0 || cut {
		rep.Incomplete = &Incomplete{ScanLimitReached: reached, ScanLimit: limit, NotReceived: unseen, PeekCutShort: cut}
		switch {
		case reached:
			rep.Incomplete.Reason = fmt.Sprintf("the scan stopped at its limit of %d dead letters and %d of this order's lie beyond it (more may, past what a peek reads): replay every dead letter instead (POST /api/deadletters/replay or convoy replay --all), or raise ReplayScanLimit", limit, unseen)
		case unseen > 0 && sc.cameRound:
			rep.Incomplete.Reason = fmt.Sprintf("%d of this order's dead letters were not received: this run held dead letters longer than their lock lasts (they came back under new locks), so it stopped receiving: run again", unseen)
		case unseen > 0:
			rep.Incomplete.Reason = fmt.Sprintf("%d of this order's dead letters are locked by another reader (another replay): run again once it is done or its locks expire", unseen)
		default:
			rep.Incomplete.Reason = fmt.Sprintf("the dead-letter queue holds more than %d messages this run did not receive, some of this order's may be among them (locked by another reader): run again later", peekLimit(limit))
		}
	}

	state := newAppliedSeqs(opts.Orders)
	var todo []placed
	for i, m := range mine {
		if opts.Select != nil && !opts.Select(m) {
			rep.Left = append(rep.Left, m.MessageID)
			held = append(held, m)
			continue
		}
		p, k, err := classify(ctx, state, m)
		if err != nil {
			held = append(held, mine[i:]...)
			return rep, err
		}
		switch k {
		case unplaceable:
			rep.Unplaceable = append(rep.Unplaceable, m.MessageID)
			held = append(held, m)
		case duplicate:
			if err := src.Complete(ctx, m); err != nil {
				held = append(held, mine[i+1:]...)
				return rep, fmt.Errorf("complete duplicate dead letter %s: %w", m.MessageID, err)
			}
			rep.Duplicates = append(rep.Duplicates, Duplicate{Seq: p.msg.Seq, MessageID: m.MessageID})
		default:
			todo = append(todo, p)
		}
	}
	// What this run leaves (not selected, unplaceable) goes back at once too.
	release(ctx, src, held)
	held = nil
	slices.SortStableFunc(todo, func(a, b placed) int { return compareSeq(a.msg.Seq, b.msg.Seq) })
	for i, p := range todo {
		if err := send(ctx, sender, p.msg); err != nil {
			for _, rest := range todo[i:] {
				held = append(held, rest.m)
			}
			return rep, fmt.Errorf("re-send seq %d of order %q: %w", p.msg.Seq, orderID, err)
		}
		if err := src.Complete(ctx, p.m); err != nil {
			// Re-sent but still dead-lettered: a later replay re-sends it under
			// the same MessageId (dropped as a duplicate) and completes it.
			for _, rest := range todo[i:] {
				held = append(held, rest.m)
			}
			return rep, fmt.Errorf("complete the dead-lettered copy of seq %d: %w", p.msg.Seq, err)
		}
		rep.Replayed = append(rep.Replayed, Replayed{Seq: p.msg.Seq, MessageID: p.m.MessageID, NewMessageID: p.msg.MessageID, Reason: p.m.Reason})
	}
	return rep, nil
}

// peekLimit bounds the closing peek of a run whose scan limit is limit:
// peeking locks nothing and reads a page per round trip.
func peekLimit(limit int) int { return 10 * limit }

// notReceived peeks the whole sub-queue (up to limit messages) and counts
// the messages matching want that the run did not receive; cut reports that
// the peek stopped at limit before the end.
func notReceived(ctx context.Context, src Source, received func(seq int64) bool, limit int, want func(DeadLetter) bool) (n int, cut bool, err error) {
	seqs, cut, err := peekWanted(ctx, src, limit, want)
	for _, seq := range seqs {
		if !received(seq) {
			n++
		}
	}
	return n, cut, err
}

// peekWanted peeks the whole sub-queue (up to limit messages) and returns
// the sequence numbers of the messages matching want; cut reports that the
// peek stopped at limit before the end.
func peekWanted(ctx context.Context, src Source, limit int, want func(DeadLetter) bool) (seqs []int64, cut bool, err error) {
	var from int64
	largest := 0
	for peeked := 0; ; {
		if peeked >= limit {
			return seqs, true, nil
		}
		batch, err := src.Peek(ctx, from, min(PeekPage(largest), limit-peeked))
		if err != nil {
			return seqs, false, fmt.Errorf("peek dead letters: %w", err)
		}
		if len(batch) == 0 {
			return seqs, false, nil
		}
		peeked += len(batch)
		for _, m := range batch {
			largest = max(largest, MessageBytes(m))
			if want(m) {
				seqs = append(seqs, m.SequenceNumber)
			}
			from = max(from, m.SequenceNumber+1)
		}
	}
}

type kind int

const (
	placeable kind = iota
	duplicate
	unplaceable
)

type placed struct {
	m   DeadLetter
	msg convoy.Envelope
}

// classify decides what to do with a dead letter: placeable (its order can
// take it: a readable seq above the order's appliedSeq and within
// convoy.MaxParkAhead of it), duplicate (seq at or below appliedSeq) or
// unplaceable (no order id, no readable seq, or too far ahead).
func classify(ctx context.Context, state *appliedSeqs, m DeadLetter) (placed, kind, error) {
	msg, ok := orderMessage(m)
	if !ok {
		return placed{m: m}, unplaceable, nil
	}
	applied, err := state.get(ctx, m.SessionID)
	if err != nil {
		return placed{}, 0, err
	}
	p := placed{m: m, msg: msg}
	switch {
	case msg.Seq <= applied:
		link(ctx, msg, m.MessageID)
		return p, duplicate, nil
	case msg.Seq > applied+convoy.MaxParkAhead:
		return p, unplaceable, nil
	}
	link(ctx, msg, m.MessageID)
	return p, placeable, nil
}

// appliedSeqs caches each order's appliedSeq for one run. An order's
// appliedSeq only grows, so a cached value can only under-count duplicates.
type appliedSeqs struct {
	orders OrderReader
	seen   map[string]int64
}

func newAppliedSeqs(r OrderReader) *appliedSeqs {
	return &appliedSeqs{orders: r, seen: map[string]int64{}}
}

func (a *appliedSeqs) get(ctx context.Context, orderID string) (int64, error) {
	if a.orders == nil {
		return 0, nil
	}
	if v, ok := a.seen[orderID]; ok {
		return v, nil
	}
	o, err := a.orders.Load(ctx, orderID)
	if err != nil {
		return 0, fmt.Errorf("read order %q: %w", orderID, err)
	}
	a.seen[orderID] = o.AppliedSeq
	return o.AppliedSeq, nil
}

func compareSeq(a, b int64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

func send(ctx context.Context, sender convoy.Sender, m convoy.Envelope) error {
	b, err := sender.NewBatch(ctx)
	if err != nil {
		return err
	}
	if err := b.Add(m); err != nil {
		return err
	}
	return sender.SendBatch(ctx, b)
}

// releaseWorkers is how many abandons release has in flight at once: each
// is a round trip of its own (an SDK settles one message per call).
const releaseWorkers = 16

// settleEach runs settle(i) for i in [0, n), releaseWorkers at a time.
func settleEach(n int, settle func(i int)) {
	next := make(chan int)
	var wg sync.WaitGroup
	for range min(releaseWorkers, n) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				settle(i)
			}
		}()
	}
	for i := range n {
		next <- i
	}
	close(next)
	wg.Wait()
}

// releaseTimeout bounds release once the run's own context has ended (the
// locks are then released on a context of their own).
const releaseTimeout = 5 * time.Second

// release abandons msgs, releaseWorkers at a time, even when ctx has ended
// (a run cut short by its deadline still gives its locks back at once).
func release(ctx context.Context, src Source, msgs []DeadLetter) {
	if len(msgs) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), releaseTimeout)
	defer cancel()
	settleEach(len(msgs), func(i int) {
		_ = src.Abandon(ctx, msgs[i]) // a lock not released expires by itself
	})
}

// orderMessage rebuilds the order message from a dead letter, its trace
// context (traceparent, Diagnostic-Id) as it was; false when it has no
// order id or no readable seq.
func orderMessage(m DeadLetter) (convoy.Envelope, bool) {
	seq, ok := convoy.IntProperty(m.Properties[convoy.PropSeq])
	if !ok || seq < 1 || m.SessionID == "" {
		return convoy.Envelope{}, false
	}
	ledgerID, _ := m.Properties[convoy.PropLedgerID].(string)
	last, _ := m.Properties[convoy.PropLast].(bool)
	traceParent, _ := m.Properties[convoy.PropTraceParent].(string)
	diagnosticID, _ := m.Properties[convoy.PropDiagnosticID].(string)
	return convoy.Envelope{SessionID: m.SessionID, MessageID: ReplayID(m), LedgerID: ledgerID, Seq: seq, Last: last, Body: m.Body,
		TraceParent: traceParent, DiagnosticID: diagnosticID}, true
}

// errInvalid builds a fault for bad outside input.
func errInvalid(format string, args ...any) error {
	return fault.Errorf(fault.Invalid, format, args...)
}
