package replay_test

import (
	"context"
	"testing"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/convoy-dev/convoy/handler/internal/ledgertest"
	"github.com/convoy-dev/convoy/handler/replay"
	"github.com/convoy-dev/convoy/handler/tracing"
)

const (
	traceA = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
	traceB = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
)

// TestReplayKeepsTraceContext: a re-sent message carries its dead letter's
// traceparent and Diagnostic-Id as they were (one of them only, too), and
// the run's span links to each context, for Order, for All and for a
// duplicate completed without a re-send (as a skip settles its dead letter).
func TestReplayKeepsTraceContext(t *testing.T) {
	rec := tracetest.NewSpanRecorder()
	t.Cleanup(tracing.SetTracerProvider(sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))))
	withTrace := func(m replay.DeadLetter, kv ...string) replay.DeadLetter {
		for i := 0; i < len(kv); i += 2 {
			m.Properties[kv[i]] = kv[i+1]
		}
		return m
	}
	ctx := context.Background()
	q := newDLQ(withTrace(dead(10, "o-1", int64(5)), "traceparent", traceA, "Diagnostic-Id", traceA),
		withTrace(dead(20, "o-1", int64(6)), "Diagnostic-Id", traceB),
		withTrace(dead(30, "o-2", int64(1)), "traceparent", traceB),
		withTrace(dead(40, "o-3", int64(1)), "traceparent", traceA))
	sender := &ledgertest.Sender{}
	if _, err := replay.Order(ctx, q, sender, "o-1", replay.Options{}); err != nil {
		t.Fatal(err)
	}
	if _, err := replay.All(ctx, q, sender, replay.AllOptions{Options: replay.Options{Select: func(d replay.DeadLetter) bool { return d.SessionID == "o-2" }}}); err != nil {
		t.Fatal(err)
	}
	// o-3 has applied seq 1: a duplicate, completed, never re-sent.
	if rep, err := replay.Order(ctx, q, sender, "o-3", replay.Options{Orders: orders{"o-3": 1}}); err != nil || len(rep.Duplicates) != 1 {
		t.Fatalf("%+v %v", rep, err)
	}
	want := map[string][2]string{"o-1/5": {traceA, traceA}, "o-1/6": {"", traceB}, "o-2/1": {traceB, ""}}
	msgs := sender.Messages()
	if len(msgs) != len(want) {
		t.Fatalf("sent %d messages, want %d", len(msgs), len(want))
	}
	for _, m := range msgs {
		key := m.SessionID + "/" + string(rune('0'+m.Seq))
		if w := want[key]; m.TraceParent != w[0] || m.DiagnosticID != w[1] {
			t.Errorf("%s sent with traceparent %q, Diagnostic-Id %q; want %q, %q", key, m.TraceParent, m.DiagnosticID, w[0], w[1])
		}
	}
	links := map[string][]string{}
	for _, s := range rec.Ended() {
		for _, l := range s.Links() {
			links[s.Name()] = append(links[s.Name()], tracing.FormatTraceParent(l.SpanContext))
		}
	}
	a, b := traceA, traceB
	if got := links["replay order"]; len(got) != 3 || got[0] != a || got[1] != b || got[2] != a {
		t.Errorf("replay order links %q, want o-1's two contexts and o-3's duplicate", got)
	}
	if got := links["replay dead letters"]; len(got) != 1 || got[0] != b {
		t.Errorf("replay dead letters links %q, want o-2's", got)
	}
}
