package handler

import (
	"context"
	"encoding/json"
	"log/slog"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/convoy-dev/convoy/handler/invocation"
	"github.com/convoy-dev/convoy/handler/tracing"
)

// Trace context of the messages a processor's invocation carries
// (docs/tracing.md).
//
// A domain's processor (OrderProcessor, AccountProcessor) continues the
// trace of each message: when the invocation is decoded, a span ("order
// message") starts per message, whose parent is the context the message
// carries (traceparent, else Diagnostic-Id; none: a new trace). The
// invocation's lines about a message (those naming its messageId, or its
// sessionId and seq) get the message's key (orderId, accountId), seq,
// traceId and spanId after their own fields, in the host's Logs and in the
// program's log alike; the outcome line names the span ("apply" for an
// applied message, else the outcome) and ends it. A parked message applied
// by this invocation (drained) gets an apply span of its own under the
// context it carried when it was received (kept with it while parked),
// linked to the span of the message that drained it; one parked before its
// context was kept goes under the drainer's. Spans still open when the
// invocation ends (it failed, or a message was refused) end with its error.

// tracedBinding is the trigger binding of a processor's messages.
const tracedBinding = "message"

// msgTrace is one message of the invocation and its span.
type msgTrace struct {
	orderID, messageID string
	seq                int64             // 0 when unreadable
	parent             trace.SpanContext // the context the message carries
	span               trace.Span
	ended              bool
}

// startMessageSpans starts a span per message of a processor's
// invocation. A trace context that cannot be used is logged and ignored.
func (c *call) startMessageSpans(ctx context.Context) {
	if c.processor == nil {
		return
	}
	msgs, err := c.req.ServiceBusMessages(tracedBinding)
	if err != nil {
		return // the function reports it
	}
	for _, m := range msgs {
		t := &msgTrace{orderID: m.SessionID, messageID: m.MessageID}
		if raw, ok := m.ApplicationProperties["seq"]; ok {
			t.seq, _ = invocation.DecodeInt(raw)
		}
		tc := tracing.FromProperties(propertyGetter(m.ApplicationProperties))
		for _, p := range tc.Problems {
			c.write(slog.LevelWarn, "trace context ignored", "sessionId", m.SessionID, "messageId", m.MessageID, "problem", p)
		}
		t.parent = tc.SpanContext
		_, t.span = tracing.Start(ctx, c.processor.Noun+" message", tc.SpanContext, trace.WithSpanKind(trace.SpanKindConsumer))
		if t.span.IsRecording() { // tracing off: nothing built
			t.span.SetAttributes(c.messageAttrs(m.SessionID, m.MessageID, t.seq, m.DeliveryCount)...)
		}
		c.msgs = append(c.msgs, t)
	}
}

// traceParentOf is the trace context m carries, as a traceparent ("" for
// none usable): what a parked message keeps (convoy.Message.TraceParent).
func traceParentOf(m invocation.Message) string {
	return tracing.FormatTraceParent(tracing.FromProperties(propertyGetter(m.ApplicationProperties)).SpanContext)
}

type drainedKey struct {
	orderID string
	seq     int64
}

// drainedContext records the trace context a drained message carried
// (traceparent, "" for none), for its apply span.
func (c *call) drainedContext(orderID string, seq int64, traceParent string) {
	sc, err := tracing.ParseTraceParent(traceParent)
	if traceParent == "" || err != nil {
		return
	}
	if c.drained == nil {
		c.drained = map[drainedKey]trace.SpanContext{}
	}
	c.drained[drainedKey{orderID, seq}] = sc
}

// messageAttrs are the span attributes of a message of key id: its key as
// convoy.<noun>_id (convoy.order_id).
func (c *call) messageAttrs(id, messageID string, seq, deliveryCount int64) []attribute.KeyValue {
	a := []attribute.KeyValue{
		attribute.String("messaging.system", "servicebus"),
		attribute.String("messaging.operation.type", "process"),
		attribute.String("messaging.message.id", messageID),
		attribute.String("faas.invocation_id", c.invocationID()),
		attribute.String("convoy."+c.processor.Noun+"_id", id),
		attribute.Int64("convoy.seq", seq),
	}
	if deliveryCount > 0 {
		a = append(a, attribute.Int64("messaging.servicebus.message.delivery_count", deliveryCount))
	}
	return a
}

// propertyGetter reads application properties as the host sends them
// (strings JSON-encoded, possibly twice); a value that is not a string is
// returned as its JSON text, so that the problem shows it.
func propertyGetter(props map[string]json.RawMessage) func(string) (string, bool) {
	return func(key string) (string, bool) {
		raw, ok := props[key]
		if !ok {
			return "", false
		}
		s, err := invocation.DecodeString(raw)
		if err != nil {
			return string(raw), true
		}
		return s, true
	}
}

func (c *call) invocationID() string {
	if len(c.attrs) >= 4 {
		if id, ok := c.attrs[3].(string); ok {
			return id
		}
	}
	return ""
}

// traceAttrs returns attrs with the fields of the message they are about
// appended (its key under the domain's IDName, orderId; seq, traceId,
// spanId); an outcome line also names and ends the message's span. Lines
// about no message of the invocation are returned as they are, but for a
// one-message invocation, whose every line is about its message.
func (c *call) traceAttrs(msg string, attrs []any) []any {
	if len(c.msgs) == 0 {
		return attrs
	}
	var sessionID, messageID, outcome string
	var seq int64
	var hasSeq, drained bool
	var errText string
	for i := 0; i+1 < len(attrs); i += 2 {
		k, _ := attrs[i].(string)
		switch v := attrs[i+1]; k {
		case "sessionId":
			sessionID, _ = v.(string)
		case "messageId":
			messageID, _ = v.(string)
		case "seq":
			seq, hasSeq = v.(int64)
		case "outcome":
			outcome, _ = v.(string)
		case "drained":
			drained, _ = v.(bool)
		case "error":
			if e, ok := v.(error); ok {
				errText = e.Error()
			} else {
				errText, _ = v.(string)
			}
		}
	}
	var t *msgTrace
	if drained { // not one of this invocation's messages: its drainer is the session's last
		t = c.findMessage(sessionID, "", 0, false)
	} else {
		t = c.findMessage(sessionID, messageID, seq, hasSeq)
	}
	if t == nil {
		return attrs
	}
	span, own := t.span, false
	if drained {
		own = true
		// A parked message applied now: its apply span goes under the
		// context it carried, else under the drainer's.
		parent := c.drained[drainedKey{t.orderID, seq}]
		if !parent.IsValid() {
			parent = t.parent
		}
		if !parent.IsValid() { // the drainer started a trace: stay in it
			parent = t.span.SpanContext()
		}
		_, span = tracing.Start(context.Background(), "apply", parent, trace.WithSpanKind(trace.SpanKindConsumer),
			trace.WithLinks(trace.Link{SpanContext: t.span.SpanContext()}))
	}
	out := append(attrs[:len(attrs):len(attrs)], c.processor.IDName, t.orderID)
	if !hasSeq && t.seq > 0 && (messageID != "" || len(c.msgs) == 1) && sessionID == t.orderID {
		out = append(out, "seq", t.seq)
	}
	sc := span.SpanContext()
	out = append(out, "traceId", sc.TraceID().String(), "spanId", sc.SpanID().String())
	switch {
	case outcome != "" && own && !span.IsRecording():
		span.End()
	case outcome != "" && own:
		span.SetAttributes(c.messageAttrs(t.orderID, messageID, seq, 0)...)
		span.SetAttributes(attribute.String("convoy.outcome", outcome), attribute.Bool("convoy.drained", true))
		span.End()
	case outcome != "" && !t.ended:
		t.span.SetName(spanName(outcome))
		t.span.SetAttributes(attribute.String("convoy.outcome", outcome))
		t.end(codes.Unset, "")
	case msg == "unreadable message" && !t.ended:
		t.span.SetAttributes(attribute.String("convoy.outcome", "unreadable"))
		t.end(codes.Error, errText)
	}
	return out
}

// findMessage: the message named by messageId (and sessionId), else the one
// of sessionId and seq, else the last of sessionId (the one whose
// processing the line reports), else the only one.
func (c *call) findMessage(sessionID, messageID string, seq int64, hasSeq bool) *msgTrace {
	var last *msgTrace
	for _, t := range c.msgs {
		switch {
		case messageID != "" && t.messageID == messageID && (sessionID == "" || t.orderID == sessionID):
			return t
		case messageID == "" && hasSeq && t.orderID == sessionID && t.seq == seq:
			return t
		case messageID == "" && sessionID != "" && t.orderID == sessionID:
			last = t
		}
	}
	if last != nil {
		return last
	}
	if len(c.msgs) == 1 && sessionID == "" && messageID == "" {
		return c.msgs[0]
	}
	return nil
}

func spanName(outcome string) string {
	if outcome == "applied" {
		return "apply"
	}
	return outcome
}

func (t *msgTrace) end(code codes.Code, description string) {
	if code != codes.Unset {
		t.span.SetStatus(code, description)
	}
	t.span.End()
	t.ended = true
}

// endMessageSpans ends the spans no outcome ended, with the invocation's
// error (it failed: the message comes back, in the same trace).
func (c *call) endMessageSpans(err error) {
	for _, t := range c.msgs {
		if t.ended {
			continue
		}
		if err != nil {
			t.end(codes.Error, err.Error())
		} else {
			t.end(codes.Unset, "")
		}
	}
}
