package ledger

import (
	"context"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/convoy-dev/convoy/handler/fault"
	"github.com/convoy-dev/convoy/handler/tracing"
)

// StartPublish starts a ledger's publish span under parent (none: a new
// trace): LedgerIngest, LedgerUpload and `convoy publish --direct` (no
// invocation id) alike; EndPublish ends it with what was published.
func StartPublish(ctx context.Context, parent trace.SpanContext, invocationID string) (context.Context, trace.Span) {
	ctx, span := tracing.Start(ctx, "publish ledger", parent, trace.WithSpanKind(trace.SpanKindProducer))
	if span.IsRecording() {
		span.SetAttributes(attribute.String("messaging.system", "servicebus"), attribute.String("messaging.operation.type", "send"))
		if invocationID != "" {
			span.SetAttributes(attribute.String("faas.invocation_id", invocationID))
		}
	}
	return ctx, span
}

// EndPublish ends a span StartPublish started.
func EndPublish(span trace.Span, sum Summary, err error) {
	if !span.IsRecording() {
		return
	}
	span.SetAttributes(attribute.String("convoy.ledger_id", sum.LedgerID), attribute.String("convoy.outcome", sum.Outcome),
		attribute.Int("convoy.transactions", sum.Transactions), attribute.Int("convoy.orders", sum.Orders),
		attribute.Int("messaging.batch.message_count", sum.Messages))
	for name, n := range sum.Keys { // the keys of each other domain, as convoy.orders are the default's
		span.SetAttributes(attribute.Int("convoy."+name, n))
	}
	if err != nil {
		span.SetStatus(codes.Error, fault.MessageOf(err))
	}
	span.End()
}

// Published is a publish's answer: what was published, and the trace id of
// the ledger's trace (the spans' trace id, the Application Insights
// operation id, the traceId of every log line about its messages), so that
// whoever published it can look it up.
type Published struct {
	Summary
	TraceID string `json:"traceId"`
}

// TraceIDOf is the trace id of the span in ctx ("" when none).
func TraceIDOf(ctx context.Context) string {
	if sc := trace.SpanContextFromContext(ctx); sc.HasTraceID() {
		return sc.TraceID().String()
	}
	return ""
}
