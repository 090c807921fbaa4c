package handler

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/convoy-dev/convoy/handler/convoy"
	"github.com/convoy-dev/convoy/handler/fault"
	"github.com/convoy-dev/convoy/handler/invocation"
	"github.com/convoy-dev/convoy/handler/keyed"
	"github.com/convoy-dev/convoy/handler/operator"
)

// processKeys is d's processor function (OrderProcessor, AccountProcessor):
// one message ("cardinality": "one") or a batch of one session's messages
// in order ("cardinality": "many").
//
// Success means every message was applied, rejected, parked or found to be a
// duplicate, durably. A message that cannot be read fails the invocation
// after the readable ones are processed, so Service Bus redelivers it and in
// the end dead-letters it; the key then waits (parked) behind its seq.
func (s *server) processKeys(d *served) invocationFunc {
	return func(ctx context.Context, c *call) (map[string]any, error) {
		raw, err := c.req.ServiceBusMessages("message")
		if err != nil {
			return nil, fault.Wrap(fault.Invalid, err, "unreadable Service Bus trigger payload")
		}
		c.consumed = len(raw)
		b := readKeyMessages(c, d.Rules, raw)
		unreadable := b.unreadable
		var failed []error
		for _, id := range b.order {
			msgs := b.bySession[id]
			res, err := d.Processor.Process(ctx, id, msgs)
			if err != nil {
				failed = append(failed, fmt.Errorf("%s %q: %w", d.fns.Noun, id, err))
				continue
			}
			applied := time.Now().UTC() // the commit that applied them just returned
			unreadable = append(unreadable, c.logProcessed(d.fns.Noun, id, msgs, res, b.enqueued[id], applied)...)
		}
		if err := errors.Join(failed...); err != nil {
			return nil, err
		}
		if len(unreadable) > 0 {
			return nil, fault.Wrap(fault.Invalid, errors.Join(unreadable...), fmt.Sprintf("%d unreadable message(s)", len(unreadable)))
		}
		return nil, nil
	}
}

// keyBatch is an invocation's messages read as a domain's messages, by key.
type keyBatch struct {
	order      []string // sessions in order of first appearance
	bySession  map[string][]convoy.Message
	enqueued   map[string]map[int64]time.Time // by session and seq: when Service Bus accepted it
	unreadable []error                        // why each message that could not be read was not
}

// readKeyMessages reads raw as d's messages, saying in c's outcome lines
// which could not be read.
func readKeyMessages(c *call, d keyed.Domain, raw []invocation.Message) keyBatch {
	b := keyBatch{bySession: map[string][]convoy.Message{}, enqueued: map[string]map[int64]time.Time{}}
	for i, m := range raw {
		msg, err := keyMessage(d, m)
		if err != nil {
			c.outcome(slog.LevelWarn, "unreadable message", "index", i, "sessionId", m.SessionID, "messageId", m.MessageID, "error", err)
			c.logAt(slog.LevelDebug, "unreadable message body", "sessionId", m.SessionID, "messageId", m.MessageID, "deliveryCount", m.DeliveryCount, "body", string(m.Body))
			b.unreadable = append(b.unreadable, err)
			continue
		}
		if _, ok := b.bySession[m.SessionID]; !ok {
			b.order = append(b.order, m.SessionID)
		}
		b.bySession[m.SessionID] = append(b.bySession[m.SessionID], msg)
		if !m.EnqueuedTimeUtc.IsZero() {
			if b.enqueued[m.SessionID] == nil {
				b.enqueued[m.SessionID] = map[int64]time.Time{}
			}
			b.enqueued[m.SessionID][msg.Seq] = m.EnqueuedTimeUtc
		}
	}
	return b
}

// logProcessed writes the outcome lines of what the processor did with
// the msgs of key id, a noun (res), applied at applied: one per message,
// then the key's blocking; it returns why each message the processor
// refused as unreadable was.
func (c *call) logProcessed(noun, id string, msgs []convoy.Message, res convoy.Result, enqueued map[int64]time.Time, applied time.Time) []error {
	var refused []error
	ids := map[int64]string{}
	for _, m := range msgs {
		ids[m.Seq] = m.MessageID
	}
	for _, out := range res.Outcomes {
		c.metrics.Outcome(context.Background(), string(out.Disposition))
		if out.Disposition == convoy.Refused {
			c.outcome(slog.LevelWarn, "unreadable message", "sessionId", id, "seq", out.Seq, "messageId", ids[out.Seq], "error", out.Reason)
			refused = append(refused, fmt.Errorf("%s %q: %s", noun, id, out.Reason))
			continue
		}
		messageID := ids[out.Seq]
		if out.Drained {
			messageID = out.MessageID // received by an earlier call, which parked it
		}
		attrs := []any{"sessionId", id, "seq", out.Seq, "messageId", messageID, "outcome", string(out.Disposition)}
		if out.Reason != "" {
			attrs = append(attrs, "reason", out.Reason)
		}
		if out.Drained {
			attrs = append(attrs, "drained", true)
		}
		at := enqueued[out.Seq]
		if out.Drained {
			at = out.EnqueuedAt // received by an earlier call, which parked it
			c.drainedContext(id, out.Seq, out.TraceParent)
		}
		if out.Disposition == convoy.Applied && !at.IsZero() {
			crit := criticalTime(applied, at)
			attrs = append(attrs, "criticalTimeMs", crit.Milliseconds())
			c.metrics.CriticalTime(context.Background(), crit)
		}
		c.outcome(slog.LevelInfo, noun+" message", attrs...)
	}
	c.logBlocking(noun, id, res)
	return refused
}

// logBlocking writes a key's blocked and unblocked lines ("order blocked"):
// once per blocking, not on every message parked behind the gap. Both are
// facts of this call's commits; when it did both, the one that describes
// the key now comes last.
func (c *call) logBlocking(noun, id string, res convoy.Result) {
	blocked := func() {
		c.outcome(slog.LevelWarn, noun+" blocked", "sessionId", id, "missingSeq", res.MissingSeq,
			"parked", res.Parked, "appliedSeq", res.AppliedSeq)
	}
	unblocked := func() {
		c.outcome(slog.LevelInfo, noun+" unblocked", "sessionId", id, "appliedSeq", res.AppliedSeq)
	}
	switch {
	case res.Blocked && res.Unblocked && res.MissingSeq != 0:
		unblocked()
		blocked()
	case res.Blocked && res.Unblocked:
		c.outcome(slog.LevelWarn, noun+" blocked", "sessionId", id, "parked", 0, "appliedSeq", res.AppliedSeq)
		unblocked()
	case res.Blocked:
		blocked()
	case res.Unblocked:
		unblocked()
	}
}

// criticalTime is a message's critical time (docs/operations.md, "Lag
// per order"): from when its message was enqueued to when it was applied;
// never negative (the two clocks differ).
func criticalTime(applied, enqueued time.Time) time.Duration {
	return max(applied.Sub(enqueued), 0)
}

// keyMessage reads a Service Bus message as a message of d: SessionId is
// the key's id, application properties seq (≥ 1) and last, the body as d
// reads it (ReadCommand: for orders {"transaction": {…}} of the same order).
func keyMessage(d keyed.Domain, m invocation.Message) (convoy.Message, error) {
	if why := keyed.CheckID(m.SessionID); why != "" {
		return convoy.Message{}, fmt.Errorf("SessionId %s", why)
	}
	rawSeq, ok := m.ApplicationProperties[convoy.PropSeq]
	if !ok {
		return convoy.Message{}, errors.New("application property seq is missing")
	}
	seq, err := invocation.DecodeInt(rawSeq)
	if err != nil || seq < 1 {
		return convoy.Message{}, fmt.Errorf("application property seq %s is not an integer ≥ 1", string(rawSeq))
	}
	var last bool
	if rawLast, ok := m.ApplicationProperties[convoy.PropLast]; ok {
		if last, err = invocation.DecodeBool(rawLast); err != nil {
			return convoy.Message{}, fmt.Errorf("application property last: %w", err)
		}
	}
	cmd, err := d.ReadCommand(m.SessionID, m.Body)
	if err != nil {
		return convoy.Message{}, err
	}
	return convoy.Message{Seq: seq, Last: last, MessageID: m.MessageID, Command: cmd, EnqueuedAt: m.EnqueuedTimeUtc,
		TraceParent: traceParentOf(m)}, nil
}

// keyStatus is d's status function (OrderStatus): GET
// /api/<Name>/{<noun>Id}[?pageSize=N&continuation=T]. The head and the
// first page of the key's history and rejections (pageSize of each,
// default and at most 1,000), as the domain's View shows them, with the
// key's lag; a continuation in the answer when more follow, to pass back
// for the next page.
func (s *server) keyStatus(d *served) httpFunc {
	return func(ctx context.Context, r httpRequest) (int, any, error) {
		id := r.Params[d.fns.IDName]
		if err := operator.CheckID(d.Rules, id); err != nil {
			return 0, nil, err
		}
		size, token, err := historyParams(r.Query)
		if err != nil {
			return 0, nil, err
		}
		rec := &recordingReader{KeyReader: d.Keys}
		h, ok := d.Keys.(convoy.History)
		if !ok { // a reader without history: the head alone
			o, err := d.Keys.Load(ctx, id)
			if err != nil {
				return 0, nil, err
			}
			if o.Version == 0 {
				return 0, nil, fault.Errorf(fault.NotFound, "%s %q has no state", d.fns.Noun, id)
			}
			if _, err := o.Bind(d.Rules); err != nil {
				return 0, nil, err
			}
			v := convoy.View{Order: o, Page: keyed.Page{Rows: []keyed.Row{}, Rejected: []keyed.Rejected{}}}
			return http.StatusOK, keyAnswer{View: v.Value(), Lag: s.keyLag(ctx, d, o)}, nil
		}
		v, err := convoy.ReadView(ctx, d.Rules, rec, h, id, token, size)
		if err != nil {
			return 0, nil, err
		}
		if _, cut := rec.key.NextParked(); cut && d.Processor != nil {
			// A drain was cut short and nothing else would resume it: this read
			// does (its failure is the next reader's to retry), then shows the
			// key as the drain left it.
			if _, err := d.Processor.Resume(ctx, id); err == nil {
				if v2, err := convoy.ReadView(ctx, d.Rules, rec, h, id, token, size); err == nil {
					v = v2
				}
			}
		}
		return http.StatusOK, keyAnswer{View: v.Value(), Lag: s.keyLag(ctx, d, rec.key)}, nil
	}
}

// keyAnswer is a status function's answer: the domain's view of the key,
// with its lag as the last member ("lag").
type keyAnswer struct {
	View any
	Lag  convoy.Lag
}

// MarshalJSON writes the view's members, then "lag": for orders the answer
// OrderStatus always gave (orders.View and the lag, one object).
func (a keyAnswer) MarshalJSON() ([]byte, error) {
	view, err := json.Marshal(a.View)
	if err != nil {
		return nil, err
	}
	if len(view) < 2 || view[0] != '{' {
		return nil, fmt.Errorf("the domain's view is not a JSON object: %.40s", view)
	}
	lag, err := json.Marshal(a.Lag)
	if err != nil {
		return nil, err
	}
	out := append(view[:len(view)-1:len(view)-1], ","...)
	if len(view) == 2 { // {}
		out = out[:1]
	}
	out = append(append(append(out, `"lag":`...), lag...), '}')
	return out, nil
}

// recordingReader keeps the key ReadView loaded, whose head the lag needs.
type recordingReader struct {
	KeyReader
	key *convoy.Key
}

func (r *recordingReader) Load(ctx context.Context, id string) (*convoy.Key, error) {
	o, err := r.KeyReader.Load(ctx, id)
	r.key = o
	return o, err
}

// keyLag is o's lag (docs/operations.md, "Lag per order"): its head, and
// one query of the ledgers table (what was published to it). When that
// cannot be read the lag says why, and the answer is still the key's.
func (s *server) keyLag(ctx context.Context, d *served, o *convoy.Key) convoy.Lag {
	window := int64(s.LagWindow / time.Second)
	if d.Allocations == nil {
		return convoy.Lag{Window: window, Unavailable: "the ledgers table is not configured: what was published to the " + d.fns.Noun + " is unknown"}
	}
	p, err := convoy.PublishedTo(ctx, d.Allocations, o.ID, o.AppliedSeq+1)
	if err != nil {
		return convoy.Lag{Window: window, Unavailable: "the ledgers table could not be read: " + err.Error()}
	}
	return convoy.OrderLag(o, p, time.Now().UTC(), s.LagWindow)
}

// historyParams reads a status function's query: pageSize (1-1000) and
// continuation (a token this service issued), each at most once.
func historyParams(q url.Values) (size int, token string, err error) {
	for _, k := range []string{"pageSize", "continuation"} {
		if len(q[k]) > 1 {
			return 0, "", fault.Errorf(fault.Invalid, "%s is given %d times, at most once", k, len(q[k]))
		}
	}
	if v, ok := q["pageSize"]; ok {
		n, perr := strconv.Atoi(v[0])
		if perr != nil || n < 1 || n > convoy.MaxHistoryPageSize {
			return 0, "", fault.Errorf(fault.Invalid, "pageSize %s is not an integer between 1 and %d", keyed.Quote(v[0]), convoy.MaxHistoryPageSize)
		}
		size = n
	}
	if v, ok := q["continuation"]; ok {
		if v[0] == "" {
			return 0, "", fault.Errorf(fault.Invalid, "continuation is empty: omit it for the first page")
		}
		if _, perr := convoy.ParseHistoryCursor(v[0]); perr != nil {
			return 0, "", perr
		}
		token = v[0]
	}
	return size, token, nil
}
