package handler

import (
	"bytes"
	"context"
	"log/slog"
	"net/http"

	"github.com/convoy-dev/convoy/handler/fault"
	"github.com/convoy-dev/convoy/handler/invocation"
	"github.com/convoy-dev/convoy/handler/ledger"
	"github.com/convoy-dev/convoy/handler/tracing"
)

// LedgerPublisher de-batches ledgers (ledger.Publisher).
type LedgerPublisher interface {
	Publish(ctx context.Context, doc []byte) (ledger.Summary, error)
	PublishQueued(ctx context.Context, doc []byte, sessionID string) (ledger.Summary, error)
	RecordRejection(ctx context.Context, doc []byte, rejection error) (*ledger.Record, error)
}

// ingestLedger is LedgerIngest: a ledger from the ledgers queue, whose
// session is the ledger's stream (the host hands this instance the stream's
// ledgers one at a time, in the order they were sent). A published
// (or already published) ledger completes the message; so does a bad one,
// once recorded, since redelivering it could never help. Only a transient
// failure fails the invocation, so that Service Bus redelivers the ledger and
// publishing resumes from its checkpoint.
func (s *server) ingestLedger(ctx context.Context, c *call) (map[string]any, error) {
	msgs, err := c.req.ServiceBusMessages("ledger")
	if err != nil {
		return nil, fault.Wrap(fault.Invalid, err, "unreadable Service Bus trigger payload")
	}
	c.consumed = len(msgs)
	for _, m := range msgs {
		if err := s.ingestOne(ctx, c, m); err != nil {
			return nil, err
		}
	}
	return nil, nil
}

// ingestOne publishes one queued ledger in a publish span that continues
// the trace its producer put on the message (traceparent, else
// Diagnostic-Id), or starts one; its order messages carry the span's
// context.
func (s *server) ingestOne(ctx context.Context, c *call, m invocation.Message) (err error) {
	tc := tracing.FromProperties(propertyGetter(m.ApplicationProperties))
	for _, p := range tc.Problems {
		c.outcome(slog.LevelWarn, "trace context ignored", "stream", m.SessionID, "messageId", m.MessageID, "problem", p)
	}
	ctx, span := ledger.StartPublish(ctx, tc.SpanContext, c.invocationID())
	var sum ledger.Summary
	defer func() { ledger.EndPublish(span, sum, err) }()
	ids := func() []any {
		sc := span.SpanContext()
		return []any{"traceId", sc.TraceID().String(), "spanId", sc.SpanID().String()}
	}
	sum, err = s.Ledgers.PublishQueued(ctx, m.Body, m.SessionID)
	pub := s.publishers[FnLedgerIngest]
	switch fault.CodeOf(err) {
	case "":
		pub.Ledger(ctx, sum.Outcome, s.sentBy(sum))
		c.outcome(slog.LevelInfo, "ledger "+sum.Outcome, append([]any{"ledgerId", sum.LedgerID, "stream", m.SessionID, "messageId", m.MessageID,
			"transactions", sum.Transactions, "orders", sum.Orders, "messages", sum.Messages}, ids()...)...)
	case fault.Invalid, fault.TooLarge:
		rec, rerr := s.Ledgers.RecordRejection(ctx, m.Body, err)
		if rerr != nil {
			return rerr
		}
		pub.Ledger(ctx, ledger.OutcomeRejected, nil)
		c.outcome(slog.LevelWarn, "ledger rejected", append([]any{"ledgerId", rec.ID, "stream", m.SessionID, "messageId", m.MessageID,
			"problems", len(rec.Problems), "error", fault.MessageOf(err)}, ids()...)...)
	case fault.Conflict:
		pub.Ledger(ctx, outcomeConflict, nil)
		c.outcome(slog.LevelError, "ledger rejected: its id was used for other content", append([]any{"ledgerId", sum.LedgerID,
			"messageId", m.MessageID, "error", fault.MessageOf(err)}, ids()...)...)
	default:
		return err
	}
	return nil
}

// uploadLedger is LedgerUpload: POST /api/ledgers. 202 when the ledger was
// published now, 200 when it had been already; 400 with every problem, 409
// when its id was used for other content, 413 too large, 503 retry later.
func (s *server) uploadLedger(ctx context.Context, r httpRequest) (int, any, error) {
	if len(bytes.TrimSpace(r.Body)) == 0 {
		return 0, nil, fault.Errorf(fault.Invalid, "the request body is empty: send the ledger as a JSON body with a Content-Length header "+
			"(the Functions host forwards a body only when Content-Length is above 0, so a chunked upload arrives empty)")
	}
	// The request's trace continues (a client's traceparent header);
	// without one the ledger starts its own.
	tc := tracing.FromHeader(r.Header.Values(tracing.HeaderTraceParent))
	for _, p := range tc.Problems {
		s.Logger.Warn("trace context ignored", "function", FnLedgerUpload, "invocationId", r.Header.Get("X-Azure-Functions-InvocationId"), "problem", p)
	}
	invocationID := r.Header.Get("X-Azure-Functions-InvocationId")
	ctx, span := ledger.StartPublish(ctx, tc.SpanContext, invocationID)
	sum, err := s.Ledgers.Publish(ctx, r.Body)
	ledger.EndPublish(span, sum, err)
	traceID := ledger.TraceIDOf(ctx)
	if out := uploadOutcome(err); out != "" {
		s.publishers[FnLedgerUpload].Ledger(ctx, out, nil)
	} else if err == nil {
		s.publishers[FnLedgerUpload].Ledger(ctx, sum.Outcome, s.sentBy(sum))
	}
	if err != nil {
		s.Logger.Warn("ledger upload failed", "function", FnLedgerUpload, "invocationId", invocationID, "error", fault.MessageOf(err), "traceId", traceID)
		return 0, nil, err
	}
	s.Logger.Info("ledger "+sum.Outcome, "function", FnLedgerUpload, "invocationId", invocationID, "ledgerId", sum.LedgerID,
		"transactions", sum.Transactions, "orders", sum.Orders, "messages", sum.Messages, "traceId", traceID)
	status := http.StatusAccepted
	if sum.Outcome == ledger.OutcomeAlreadyPublished {
		status = http.StatusOK
	}
	return status, ledger.Published{Summary: sum, TraceID: traceID}, nil
}

// outcomeConflict is the convoy.outcome of a ledger whose id was used for
// other content, in the metrics.
const outcomeConflict = "conflict"

// uploadOutcome is the convoy.outcome of an upload that failed with err
// ("" when it did not fail, or failed for a reason that says nothing of the
// ledger: storage or Service Bus down).
func uploadOutcome(err error) string {
	switch fault.CodeOf(err) {
	case fault.Invalid, fault.TooLarge:
		return ledger.OutcomeRejected
	case fault.Conflict:
		return outcomeConflict
	}
	return ""
}

// sentBy is the number of messages publishing sum's ledger sent, by queue:
// all of them when it was published now (a resumed publish re-sends what it
// had sent, which Service Bus's duplicate detection drops), none when it
// had been already.
func (s *server) sentBy(sum ledger.Summary) map[string]int {
	if sum.Outcome != ledger.OutcomePublished {
		return nil
	}
	sent := map[string]int{}
	for _, d := range s.domains {
		sent[d.Queue] += sum.Sent[d.fns.Name]
	}
	return sent
}
