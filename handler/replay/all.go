package replay

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"slices"

	"go.opentelemetry.io/otel/attribute"

	"github.com/convoy-dev/convoy/handler/convoy"
	"github.com/convoy-dev/convoy/handler/tracing"
)

// DefaultAllMax is how many dead letters one call of All receives by default.
const DefaultAllMax = 500

// AllOptions tune one call of All.
type AllOptions struct {
	Options
	// Max is how many dead letters this call receives at most (default
	// DefaultAllMax, at most MaxScan); the unplaceable ones the previous call
	// left at the head of the sub-queue come on top, up to MaxScan.
	Max int
	// Continuation is the previous call's Progress.Continuation ("" for the
	// first call).
	Continuation string
	// NoClosingPeek leaves out the peek that tells Done and Incomplete
	// apart (a caller that peeked the sub-queue already and knows what it
	// wants received): neither is then set, unless the scan limit was reached.
	NoClosingPeek bool
	// StopAt, when not 0, stops receiving once a dead letter with this
	// sequence number or a higher one was received (a caller that peeked
	// knows where the last dead letter it wants lies).
	StopAt int64
}

// Totals are counts since the first call of a replay of every dead letter.
type Totals struct {
	Calls      int64 `json:"calls"`
	Scanned    int64 `json:"scanned"`
	Replayed   int64 `json:"replayed"`
	Duplicates int64 `json:"duplicates"`
}

// Progress says what one call of All did.
type Progress struct {
	Scanned    int `json:"scanned"`    // distinct dead letters received by this call
	Replayed   int `json:"replayed"`   // re-sent and completed by this call
	Orders     int `json:"orders"`     // orders with a dead letter re-sent by this call
	Duplicates int `json:"duplicates"` // completed without re-sending: their order had applied them
	// Left counts the dead letters Options.Select did not choose: released
	// untouched.
	Left int `json:"left,omitempty"`
	// ByOrder says, for each order with a dead letter re-sent or completed
	// as a duplicate by this call, which seqs.
	ByOrder map[string]*OrderProgress `json:"-"`
	// Unplaceable dead letters stay dead-lettered (skip their gap);
	// UnplaceableIDs names the first few of this call.
	Unplaceable    int      `json:"unplaceable"`
	UnplaceableIDs []string `json:"unplaceableMessageIds,omitempty"`
	// Done: the sub-queue holds nothing placeable any more (as far as a
	// closing peek of the whole sub-queue shows).
	Done bool `json:"done"`
	// Incomplete is set when this call saw dead letters it could not
	// receive (locked by another reader), or could not get past the
	// unplaceable ones at the head of the sub-queue.
	Incomplete *Incomplete `json:"incomplete,omitempty"`
	Totals     Totals      `json:"totals"`
	// Continuation, present unless Done: pass it to the next call.
	Continuation string `json:"continuation,omitempty"`
}

const maxListedIDs = 20

// OrderProgress is what one call of All did for one order.
type OrderProgress struct {
	Replayed   []int64 // seqs re-sent, in order
	Duplicates []int64 // seqs completed as duplicates
}

func (p *Progress) order(id string) *OrderProgress {
	if p.ByOrder == nil {
		p.ByOrder = map[string]*OrderProgress{}
	}
	if p.ByOrder[id] == nil {
		p.ByOrder[id] = &OrderProgress{}
	}
	return p.ByOrder[id]
}

// All replays a bounded part of every placeable dead letter (see classify):
// it receives up to Max dead letters, completes the duplicates, holds the
// unplaceable ones until it returns, and re-sends the rest grouped by order
// and in seq order per order, completing each dead letter after its re-send.
// Call it again with Progress.Continuation until Done. A call whose receive
// comes back empty peeks the sub-queue before it says Done: dead letters it
// saw but could not receive (another reader holds them) make it Incomplete.
// On error, what was not replayed stays dead-lettered.
//
// Like Order, it keeps each message's trace context and links its span
// ("replay dead letters") to the context of every dead letter it acts on.
func All(ctx context.Context, src Source, sender convoy.Sender, opts AllOptions) (Progress, error) {
	ctx, span := tracing.Tracer().Start(ctx, "replay dead letters")
	p, err := all(ctx, src, sender, opts)
	endRun(span, err, attribute.Int("convoy.scanned", p.Scanned))
	return p, err
}

func all(ctx context.Context, src Source, sender convoy.Sender, opts AllOptions) (Progress, error) {
	tok, err := ParseContinuation(opts.Continuation)
	if err != nil {
		return Progress{}, err
	}
	limit := opts.maxScan()
	max := opts.Max
	if max <= 0 {
		max = min(DefaultAllMax, limit)
	}
	if max > limit {
		return Progress{}, errInvalid("max %d is above the scan limit of %d (setting ReplayScanLimit)", max, limit)
	}
	budget := min(max+tok.Skip, limit)
	p := Progress{Totals: tok.Totals}
	var held []DeadLetter
	defer func() { release(ctx, src, held) }()
	sc := newScan(src, budget)
	sc.stopAt = opts.StopAt
	err = sc.run(ctx)
	p.Scanned = len(sc.msgs)
	if err != nil {
		held = sc.msgs
		return p.finish(), err
	}
	state := newAppliedSeqs(opts.Orders)
	byOrder := map[string][]placed{}
	for i, m := range sc.msgs {
		if opts.Select != nil && !opts.Select(m) {
			p.Left++
			held = append(held, m)
			continue
		}
		pl, k, err := classify(ctx, state, m)
		if err != nil {
			held = append(held, sc.msgs[i:]...)
			for _, rest := range byOrder {
				held = append(held, dls(rest)...)
			}
			return p.finish(), err
		}
		switch k {
		case unplaceable:
			p.Unplaceable++
			if len(p.UnplaceableIDs) < maxListedIDs {
				p.UnplaceableIDs = append(p.UnplaceableIDs, m.MessageID)
			}
			held = append(held, m)
		case duplicate:
			if err := src.Complete(ctx, m); err != nil {
				held = append(held, sc.msgs[i+1:]...)
				for _, rest := range byOrder {
					held = append(held, dls(rest)...)
				}
				return p.finish(), fmt.Errorf("complete duplicate dead letter %s: %w", m.MessageID, err)
			}
			p.Duplicates++
			p.order(m.SessionID).Duplicates = append(p.order(m.SessionID).Duplicates, pl.msg.Seq)
		default:
			byOrder[m.SessionID] = append(byOrder[m.SessionID], pl)
		}
	}
	// What this call leaves (not selected, unplaceable) goes back at once,
	// not after the re-sends: another reader can take it meanwhile.
	release(ctx, src, held)
	held = nil
	orders := make([]string, 0, len(byOrder))
	for id := range byOrder {
		orders = append(orders, id)
	}
	slices.Sort(orders)
	for i, id := range orders {
		todo := byOrder[id]
		slices.SortStableFunc(todo, func(a, b placed) int { return compareSeq(a.msg.Seq, b.msg.Seq) })
		done, err := sendOrder(ctx, src, sender, todo)
		p.Replayed += done
		if done > 0 {
			p.Orders++
			for _, x := range todo[:done] {
				p.order(id).Replayed = append(p.order(id).Replayed, x.msg.Seq)
			}
		}
		if err != nil {
			held = append(held, dls(todo[done:])...)
			for _, rest := range orders[i+1:] {
				held = append(held, dls(byOrder[rest])...)
			}
			return p.finish(), fmt.Errorf("replay the dead letters of order %q: %w", id, err)
		}
	}
	skip := p.Unplaceable + p.Left
	if p.Scanned >= budget && !sc.stopped {
		if p.Replayed+p.Duplicates == 0 && budget >= limit {
			p.Incomplete = &Incomplete{ScanLimitReached: true, ScanLimit: limit,
				Reason: fmt.Sprintf("the first %d dead letters are all unplaceable: skip their orders' gaps and remove them, or raise ReplayScanLimit", limit)}
		}
	} else if !opts.NoClosingPeek {
		unseen, cut, err := notReceived(ctx, src, sc.received, peekLimit(limit), func(DeadLetter) bool { return true })
		if err != nil {
			return p.finish(), err
		}
		switch {
		case unseen > 0 && sc.cameRound:
			p.Incomplete = &Incomplete{ScanLimit: limit, NotReceived: unseen, PeekCutShort: cut,
				Reason: fmt.Sprintf("%d dead letters were not received: this call held dead letters longer than their lock lasts (they came back under new locks), so it stopped receiving: call again", unseen)}
		case unseen > 0 || cut:
			p.Incomplete = &Incomplete{ScanLimit: limit, NotReceived: unseen, PeekCutShort: cut,
				Reason: fmt.Sprintf("%d dead letters are locked by another reader (another replay) or arrived during this call: call again once it is done or its locks expire", unseen)}
		default:
			p.Done = true
		}
	}
	p = p.finish()
	if !p.Done {
		p.Continuation = Token{Totals: p.Totals, Skip: skip}.encode()
	}
	return p, nil
}

// finish adds this call to the totals.
func (p Progress) finish() Progress {
	p.Totals.Calls++
	p.Totals.Scanned += int64(p.Scanned)
	p.Totals.Replayed += int64(p.Replayed)
	p.Totals.Duplicates += int64(p.Duplicates)
	return p
}

// sendOrder re-sends one order's dead letters, in order, as few batches as
// fit, completing each batch's dead letters after it is sent; it returns how
// many were re-sent and completed.
func sendOrder(ctx context.Context, src Source, sender convoy.Sender, todo []placed) (int, error) {
	done := 0
	for done < len(todo) {
		b, err := sender.NewBatch(ctx)
		if err != nil {
			return done, err
		}
		n := 0
		for _, p := range todo[done:] {
			if err := b.Add(p.msg); errors.Is(err, convoy.ErrBatchFull) && n > 0 {
				break
			} else if err != nil {
				return done, fmt.Errorf("seq %d: %w", p.msg.Seq, err)
			}
			n++
		}
		if err := sender.SendBatch(ctx, b); err != nil {
			return done, err
		}
		n, err = completeAll(ctx, src, todo[done:done+n])
		done += n
		if err != nil {
			// Re-sent but still dead-lettered: the next run re-sends it
			// under the same MessageId (dropped as a duplicate) or finds
			// it applied, and completes it.
			return done, err
		}
	}
	return done, nil
}

// completeAll completes the dead-lettered copies of a batch just re-sent,
// releaseWorkers at a time (one round trip each); it returns how many of
// them, from the first, were completed before the first that failed.
func completeAll(ctx context.Context, src Source, ps []placed) (int, error) {
	errs := make([]error, len(ps))
	settleEach(len(ps), func(i int) { errs[i] = src.Complete(ctx, ps[i].m) })
	for i, err := range errs {
		if err != nil {
			return i, fmt.Errorf("complete the dead-lettered copy of seq %d: %w", ps[i].msg.Seq, err)
		}
	}
	return len(ps), nil
}

func dls(ps []placed) []DeadLetter {
	out := make([]DeadLetter, len(ps))
	for i, p := range ps {
		out[i] = p.m
	}
	return out
}

// Token is a continuation of All: what one call hands the next, the totals
// so far and how many unplaceable dead letters it left at the head of the
// sub-queue (the next call receives that many more, up to the scan limit).
type Token struct {
	V int `json:"v"`
	Totals
	Skip int `json:"skip"`
}

// Limits on a continuation token.
const (
	maxTokenLength = 512
	maxCount       = 1 << 50
)

func (c Token) encode() string {
	c.V = 1
	b, _ := json.Marshal(c)
	return base64.RawURLEncoding.EncodeToString(b)
}

// ParseContinuation checks a continuation token of All ("" is the first
// call); anything this package did not issue is an Invalid fault.
func ParseContinuation(s string) (Token, error) {
	if s == "" {
		return Token{V: 1}, nil
	}
	bad := func(why string) error {
		return errInvalid("continuation is not a token this function issued (%s): pass back the continuation of the previous answer unchanged, or none to start", why)
	}
	if len(s) > maxTokenLength {
		return Token{}, bad(fmt.Sprintf("longer than %d characters", maxTokenLength))
	}
	raw, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil {
		return Token{}, bad("not base64url")
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	var c Token
	if err := dec.Decode(&c); err != nil || dec.More() {
		return Token{}, bad("not its JSON")
	}
	switch {
	case c.V != 1:
		return Token{}, bad(fmt.Sprintf("version %d", c.V))
	case c.Calls < 1 || c.Calls > maxCount, c.Scanned < 0 || c.Scanned > maxCount,
		c.Replayed < 0 || c.Replayed > maxCount, c.Duplicates < 0 || c.Duplicates > maxCount:
		return Token{}, bad("a count out of range")
	case c.Skip < 0 || c.Skip > 1<<30:
		return Token{}, bad("skip out of range")
	}
	return c, nil
}
