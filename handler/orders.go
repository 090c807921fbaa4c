package handler

import (
	"context"
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
	"github.com/convoy-dev/convoy/handler/orders"
)

// processOrders is OrderProcessor: one message ("cardinality": "one") or a
// batch of one session's messages in order ("cardinality": "many").
//
// Success means every message was applied, rejected, parked or found to be a
// duplicate, durably. A message that cannot be read fails the invocation
// after the readable ones are processed, so Service Bus redelivers it and in
// the end dead-letters it; the order then waits (parked) behind its seq.
func (s *server) processOrders(ctx context.Context, c *call) (map[string]any, error) {
	raw, err := c.req.ServiceBusMessages("message")
	if err != nil {
		return nil, fault.Wrap(fault.Invalid, err, "unreadable Service Bus trigger payload")
	}
	c.consumed = len(raw)
	b := readOrderMessages(c, raw)
	unreadable := b.unreadable
	var failed []error
	for _, orderID := range b.order {
		msgs := b.bySession[orderID]
		res, err := s.Processor.Process(ctx, orderID, msgs)
		if err != nil {
			failed = append(failed, fmt.Errorf("order %q: %w", orderID, err))
			continue
		}
		applied := time.Now().UTC() // the commit that applied them just returned
		unreadable = append(unreadable, c.logProcessed(orderID, msgs, res, b.enqueued[orderID], applied)...)
	}
	if err := errors.Join(failed...); err != nil {
		return nil, err
	}
	if len(unreadable) > 0 {
		return nil, fault.Wrap(fault.Invalid, errors.Join(unreadable...), fmt.Sprintf("%d unreadable message(s)", len(unreadable)))
	}
	return nil, nil
}

// orderBatch is an invocation's messages read as order messages, by order.
type orderBatch struct {
	order      []string // sessions in order of first appearance
	bySession  map[string][]convoy.Message
	enqueued   map[string]map[int64]time.Time // by session and seq: when Service Bus accepted it
	unreadable []error                        // why each message that could not be read was not
}

// readOrderMessages reads raw as order messages, saying in c's outcome
// lines which could not be read.
func readOrderMessages(c *call, raw []invocation.Message) orderBatch {
	b := orderBatch{bySession: map[string][]convoy.Message{}, enqueued: map[string]map[int64]time.Time{}}
	for i, m := range raw {
		msg, err := orderMessage(m)
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
// orderID's msgs (res), applied at applied: one per message, then the
// order's blocking; it returns why each message the processor refused as
// unreadable was.
func (c *call) logProcessed(orderID string, msgs []convoy.Message, res convoy.Result, enqueued map[int64]time.Time, applied time.Time) []error {
	var refused []error
	ids := map[int64]string{}
	for _, m := range msgs {
		ids[m.Seq] = m.MessageID
	}
	for _, out := range res.Outcomes {
		c.metrics.Outcome(context.Background(), string(out.Disposition))
		if out.Disposition == convoy.Refused {
			c.outcome(slog.LevelWarn, "unreadable message", "sessionId", orderID, "seq", out.Seq, "messageId", ids[out.Seq], "error", out.Reason)
			refused = append(refused, fmt.Errorf("order %q: %s", orderID, out.Reason))
			continue
		}
		messageID := ids[out.Seq]
		if out.Drained {
			messageID = out.MessageID // received by an earlier call, which parked it
		}
		attrs := []any{"sessionId", orderID, "seq", out.Seq, "messageId", messageID, "outcome", string(out.Disposition)}
		if out.Reason != "" {
			attrs = append(attrs, "reason", out.Reason)
		}
		if out.Drained {
			attrs = append(attrs, "drained", true)
		}
		at := enqueued[out.Seq]
		if out.Drained {
			at = out.EnqueuedAt // received by an earlier call, which parked it
			c.drainedContext(orderID, out.Seq, out.TraceParent)
		}
		if out.Disposition == convoy.Applied && !at.IsZero() {
			crit := criticalTime(applied, at)
			attrs = append(attrs, "criticalTimeMs", crit.Milliseconds())
			c.metrics.CriticalTime(context.Background(), crit)
		}
		c.outcome(slog.LevelInfo, "order message", attrs...)
	}
	c.logBlocking(orderID, res)
	return refused
}

// logBlocking writes an order's blocked and unblocked lines: once per
// blocking, not on every message parked behind the gap. Both are facts of
// this call's commits; when it did both, the one that describes the order
// now comes last.
func (c *call) logBlocking(orderID string, res convoy.Result) {
	blocked := func() {
		c.outcome(slog.LevelWarn, "order blocked", "sessionId", orderID, "missingSeq", res.MissingSeq,
			"parked", res.Parked, "appliedSeq", res.AppliedSeq)
	}
	unblocked := func() {
		c.outcome(slog.LevelInfo, "order unblocked", "sessionId", orderID, "appliedSeq", res.AppliedSeq)
	}
	switch {
	case res.Blocked && res.Unblocked && res.MissingSeq != 0:
		unblocked()
		blocked()
	case res.Blocked && res.Unblocked:
		c.outcome(slog.LevelWarn, "order blocked", "sessionId", orderID, "parked", 0, "appliedSeq", res.AppliedSeq)
		unblocked()
	case res.Blocked:
		blocked()
	case res.Unblocked:
		unblocked()
	}
}

// criticalTime is a transaction's critical time (docs/operations.md, "Lag
// per order"): from when its message was enqueued to when it was applied;
// never negative (the two clocks differ).
func criticalTime(applied, enqueued time.Time) time.Duration {
	return max(applied.Sub(enqueued), 0)
}

// orderMessage reads a Service Bus message as an order message: SessionId is
// the order id, application properties seq (≥ 1) and last, the body
// {"transaction": {…}} for the same order.
func orderMessage(m invocation.Message) (convoy.Message, error) {
	if why := orders.CheckID(m.SessionID); why != "" {
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
	cmd, err := orders.Domain.ReadCommand(m.SessionID, m.Body)
	if err != nil {
		return convoy.Message{}, err
	}
	return convoy.Message{Seq: seq, Last: last, MessageID: m.MessageID, Command: cmd, EnqueuedAt: m.EnqueuedTimeUtc,
		TraceParent: traceParentOf(m)}, nil
}

// orderStatus is OrderStatus: GET /api/orders/{orderId}[?pageSize=N&continuation=T].
// The head and the first page of the order's transactions and rejections
// (pageSize of each, default and at most 1,000); a continuation in the
// answer when more follow, to pass back for the next page.
func (s *server) orderStatus(ctx context.Context, r httpRequest) (int, any, error) {
	id := r.Params["orderId"]
	if err := operator.CheckOrderID(id); err != nil {
		return 0, nil, err
	}
	size, token, err := historyParams(r.Query)
	if err != nil {
		return 0, nil, err
	}
	rec := &recordingReader{OrderReader: s.Orders}
	h, ok := s.Orders.(convoy.History)
	if !ok { // a reader without history: the head alone
		o, err := s.Orders.Load(ctx, id)
		if err != nil {
			return 0, nil, err
		}
		if o.Version == 0 {
			return 0, nil, fault.Errorf(fault.NotFound, "order %q has no state", id)
		}
		v := convoy.View{Order: o, Page: keyed.Page{Rows: []keyed.Row{}, Rejected: []keyed.Rejected{}}}
		if _, err := o.Bind(orders.Domain); err != nil {
			return 0, nil, err
		}
		return http.StatusOK, orderAnswer{View: orders.ViewOf(v), Lag: s.orderLag(ctx, o)}, nil
	}
	v, err := convoy.ReadView(ctx, orders.Domain, rec, h, id, token, size)
	if err != nil {
		return 0, nil, err
	}
	if _, cut := rec.order.NextParked(); cut && s.Processor != nil {
		// A drain was cut short and nothing else would resume it: this read
		// does (its failure is the next reader's to retry), then shows the
		// order as the drain left it.
		if _, err := s.Processor.Resume(ctx, id); err == nil {
			if v2, err := convoy.ReadView(ctx, orders.Domain, rec, h, id, token, size); err == nil {
				v = v2
			}
		}
	}
	return http.StatusOK, orderAnswer{View: orders.ViewOf(v), Lag: s.orderLag(ctx, rec.order)}, nil
}

// orderAnswer is OrderStatus's answer: the order's view and its lag.
type orderAnswer struct {
	orders.View
	Lag convoy.Lag `json:"lag"`
}

// recordingReader keeps the order ReadView loaded, whose head the lag needs.
type recordingReader struct {
	OrderReader
	order *convoy.Key
}

func (r *recordingReader) Load(ctx context.Context, id string) (*convoy.Key, error) {
	o, err := r.OrderReader.Load(ctx, id)
	r.order = o
	return o, err
}

// orderLag is o's lag (docs/operations.md, "Lag per order"): its head, and
// one query of the ledgers table (what was published to it). When that
// cannot be read the lag says why, and the answer is still the order's.
func (s *server) orderLag(ctx context.Context, o *convoy.Key) convoy.Lag {
	window := int64(s.LagWindow / time.Second)
	if s.Allocations == nil {
		return convoy.Lag{Window: window, Unavailable: "the ledgers table is not configured: what was published to the order is unknown"}
	}
	p, err := convoy.PublishedTo(ctx, s.Allocations, o.ID, o.AppliedSeq+1)
	if err != nil {
		return convoy.Lag{Window: window, Unavailable: "the ledgers table could not be read: " + err.Error()}
	}
	return convoy.OrderLag(o, p, time.Now().UTC(), s.LagWindow)
}

// historyParams reads OrderStatus's query: pageSize (1-1000) and
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
			return 0, "", fault.Errorf(fault.Invalid, "pageSize %s is not an integer between 1 and %d", orders.Quote(v[0]), convoy.MaxHistoryPageSize)
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
