package handler

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/convoy-dev/convoy/handler/convoy"
	"github.com/convoy-dev/convoy/handler/internal/memstore"
	"github.com/convoy-dev/convoy/handler/orders"
	"github.com/convoy-dev/convoy/handler/tracing"
)

const (
	traceA = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
	traceB = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
)

// hostString is a string as the host encodes it in Metadata: JSON text of
// JSON text.
func hostString(s string) json.RawMessage {
	once, _ := json.Marshal(s)
	twice, _ := json.Marshal(string(once))
	return twice
}

// orderInvocation is an OrderProcessor invocation of one CreateOrder
// message, its application properties as the host sends them: an object
// serialized as a JSON string, each string value JSON-encoded again.
func orderInvocation(orderID, messageID string, seq int64, props map[string]string) []byte {
	body := fmt.Sprintf(`{"transaction":{"orderId":%q,"op":"CreateOrder","currency":"EUR"}}`, orderID)
	ap := map[string]json.RawMessage{"seq": json.RawMessage(fmt.Sprint(seq)), "ledgerId": hostString("L")}
	for k, v := range props {
		ap[k] = hostString(v)
	}
	apText, _ := json.Marshal(ap)
	apString, _ := json.Marshal(string(apText))
	inv := map[string]any{
		"Data": map[string]json.RawMessage{"message": hostString(body)},
		"Metadata": map[string]json.RawMessage{
			"MessageId": hostString(messageID), "SessionId": hostString(orderID), "DeliveryCount": json.RawMessage(`"1"`),
			"ApplicationProperties": apString, "UserProperties": apString,
		},
	}
	b, _ := json.Marshal(inv)
	return b
}

// tracedServer is a handler whose program log is written in format to out,
// recording its spans.
func tracedServer(t *testing.T, format string, out *bytes.Buffer) (http.Handler, *tracetest.SpanRecorder) {
	rec := tracetest.NewSpanRecorder()
	t.Cleanup(tracing.SetTracerProvider(sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))))
	store := memstore.New()
	return New(OrdersDeps(Deps{Logger: NewLogger(format, "debug", out, out)},
		Domain{Processor: convoy.NewProcessor(store, convoy.ProcessorOptions{Domain: orders.Domain, Index: store})})), rec
}

func invoke(t *testing.T, h http.Handler, body []byte) (int, []string) {
	t.Helper()
	req := httptest.NewRequest(http.MethodPost, "/OrderProcessor", bytes.NewReader(body))
	req.Header.Set("X-Azure-Functions-InvocationId", "inv-1")
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	var out struct{ Logs []string }
	_ = json.Unmarshal(rec.Body.Bytes(), &out)
	return rec.Code, out.Logs
}

// programLines reads the program's log in either format back into fields.
func programLines(t *testing.T, format string, out *bytes.Buffer) []map[string]string {
	t.Helper()
	var lines []map[string]string
	for _, l := range strings.Split(strings.TrimSpace(out.String()), "\n") {
		m := map[string]string{}
		if format == "json" {
			var raw map[string]any
			if err := json.Unmarshal([]byte(l), &raw); err != nil {
				t.Fatalf("line %q: %v", l, err)
			}
			for k, v := range raw {
				m[k] = fmt.Sprint(v)
			}
		} else {
			fs, err := parseLine("x "+l, "x")
			if err != nil {
				t.Fatalf("line %q: %v", l, err)
			}
			for _, f := range fs {
				m[f.Key] = f.Value
			}
		}
		lines = append(lines, m)
	}
	return lines
}

// TestProcessorContinuesTheMessageTrace: which property wins, what a line
// about a message carries in both log formats, and that the apply span's
// parent is the message's context. The oracle is the context put on the
// message, compared with what the recorder and the log received.
func TestProcessorContinuesTheMessageTrace(t *testing.T) {
	for _, tc := range []struct {
		name    string
		props   map[string]string
		want    string // the parent context, "" for a new trace
		ignored string // a warning naming the property ignored
	}{
		{"traceparent", map[string]string{"traceparent": traceA}, traceA, ""},
		{"Diagnostic-Id only", map[string]string{"Diagnostic-Id": traceB}, traceB, ""},
		{"traceparent wins", map[string]string{"traceparent": traceA, "Diagnostic-Id": traceB}, traceA, ""},
		{"invalid traceparent ignored", map[string]string{"traceparent": "00-zz", "Diagnostic-Id": traceB}, traceB, "application property traceparent"},
		{"none: a new trace", nil, "", ""},
	} {
		for _, format := range []string{"text", "json"} {
			t.Run(tc.name+"/"+format, func(t *testing.T) {
				var out bytes.Buffer
				h, rec := tracedServer(t, format, &out)
				code, logs := invoke(t, h, orderInvocation("o-t", "L:0", 1, tc.props))
				if code != 200 || len(logs) != 1 {
					t.Fatalf("%d %q", code, logs)
				}
				spans := rec.Ended()
				if len(spans) != 1 || spans[0].Name() != "apply" {
					t.Fatalf("spans %v, want one apply span", spans)
				}
				apply := spans[0]
				parent, _ := tracing.ParseTraceParent(tc.want)
				if tc.want != "" && (apply.Parent().TraceID() != parent.TraceID() || apply.Parent().SpanID() != parent.SpanID() || !apply.Parent().IsRemote()) {
					t.Fatalf("apply span's parent %v, want the message's %s", apply.Parent(), tc.want)
				}
				if tc.want == "" && apply.Parent().IsValid() {
					t.Fatalf("apply span has parent %v, want a new trace", apply.Parent())
				}
				traceID, spanID := apply.SpanContext().TraceID().String(), apply.SpanContext().SpanID().String()
				var found, warned bool
				for _, l := range programLines(t, format, &out) {
					switch l["msg"] {
					case "order message":
						found = true
						for k, v := range map[string]string{"traceId": traceID, "spanId": spanID, "invocationId": "inv-1",
							"orderId": "o-t", "seq": "1", "function": "OrderProcessor", "outcome": "applied"} {
							if l[k] != v {
								t.Errorf("log line %v: %s=%q, want %q", l, k, l[k], v)
							}
						}
					case "trace context ignored":
						warned = tc.ignored != "" && strings.Contains(l["problem"], tc.ignored) &&
							strings.Contains(l["problem"], "not a W3C traceparent") && l["messageId"] == "L:0" && l["invocationId"] == "inv-1"
						if !warned {
							t.Errorf("warning %v", l)
						}
					}
				}
				if !found || warned != (tc.ignored != "") {
					t.Fatalf("outcome line found %v, warning %v (want %v):\n%s", found, warned, tc.ignored != "", out.String())
				}
				// The host's Logs carry the same trace fields.
				if !strings.Contains(logs[0], " orderId=o-t traceId="+traceID+" spanId="+spanID) {
					t.Fatalf("Logs line %q", logs[0])
				}
			})
		}
	}
}

// TestParkedAndDrainedStayInTheTrace: a message parked (its span named
// parked) and then applied when the gap fills (drained: an apply span of its
// own) stays in the trace it carried.
func TestParkedAndDrainedStayInTheTrace(t *testing.T) {
	var out bytes.Buffer
	h, rec := tracedServer(t, "text", &out)
	// seq 2 of an order whose seq 1 never came: parked; then seq 1 applies
	// and drains it.
	code, _ := invoke(t, h, orderInvocation("o-r", "L:1", 2, map[string]string{"traceparent": traceA}))
	if code != 200 {
		t.Fatal(code)
	}
	code, logs := invoke(t, h, orderInvocation("o-r", "L:0", 1, map[string]string{"Diagnostic-Id": traceA}))
	if code != 200 {
		t.Fatal(code)
	}
	want, _ := tracing.ParseTraceParent(traceA)
	names := map[string]int{}
	for _, s := range rec.Ended() {
		names[s.Name()]++
		if s.SpanContext().TraceID() != want.TraceID() || s.Parent().SpanID() != want.SpanID() {
			t.Errorf("span %s: trace %s parent %s, want %s", s.Name(), s.SpanContext().TraceID(), s.Parent().SpanID(), traceA)
		}
	}
	if names["parked"] != 1 || names["apply"] != 2 {
		t.Fatalf("spans %v, want parked then apply and a drained apply (logs %q)", names, logs)
	}
	// docs/tracing.md: every processor span names its message and the
	// invocation; the drained one is L:1, applied by the invocation of L:0.
	for _, s := range rec.Ended() {
		if !hasAttr(s, "convoy.drained") {
			continue
		}
		attrs := map[string]string{}
		for _, a := range s.Attributes() {
			attrs[string(a.Key)] = a.Value.String()
		}
		if attrs["messaging.message.id"] != "L:1" || attrs["faas.invocation_id"] == "" || attrs["convoy.seq"] != "2" {
			t.Errorf("the drained apply span's attributes %v: want messaging.message.id L:1, seq 2 and the invocation id", attrs)
		}
	}
	drainedLine := false
	for _, l := range logs {
		if strings.HasPrefix(l, "order message") && !strings.Contains(l, "traceId="+want.TraceID().String()) {
			t.Errorf("line %q, want the message's trace", l)
		}
		if strings.HasPrefix(l, "order message") && strings.Contains(l, "drained=true") {
			drainedLine = true
			if !strings.Contains(l, "messageId=L:1") {
				t.Errorf("the drained message's line %q does not name its messageId L:1", l)
			}
		}
	}
	if !drainedLine {
		t.Errorf("no line for the drained message in %q", logs)
	}
}

// TestDrainedWithoutContextStaysInTheDrainersTrace: messages without
// trace context; the one that fills the gap starts a trace, and the parked
// message it drains is applied in that trace.
func TestDrainedWithoutContextStaysInTheDrainersTrace(t *testing.T) {
	var out bytes.Buffer
	h, rec := tracedServer(t, "text", &out)
	if code, _ := invoke(t, h, orderInvocation("o-n", "L:1", 2, nil)); code != 200 {
		t.Fatal(code)
	}
	if code, _ := invoke(t, h, orderInvocation("o-n", "L:0", 1, nil)); code != 200 {
		t.Fatal(code)
	}
	var drainer, drained []string
	for _, s := range rec.Ended() {
		if s.Name() != "apply" {
			continue
		}
		if s.Attributes() != nil && hasAttr(s, "convoy.drained") {
			drained = append(drained, s.SpanContext().TraceID().String(), s.Parent().SpanID().String())
		} else {
			drainer = append(drainer, s.SpanContext().TraceID().String(), s.SpanContext().SpanID().String())
		}
	}
	if len(drainer) != 2 || len(drained) != 2 || drained[0] != drainer[0] || drained[1] != drainer[1] {
		t.Fatalf("drainer (trace, span) %v, drained (trace, parent) %v: want the drained apply under the drainer's span", drainer, drained)
	}
}

func hasAttr(s sdktrace.ReadOnlySpan, key string) bool {
	for _, a := range s.Attributes() {
		if string(a.Key) == key {
			return true
		}
	}
	return false
}

// TestTracingOffRecordsNothing: with the no-op provider (no OTEL_* set),
// the lines still carry the message's trace id, and the parent's span id
// (no span of our own is made).
func TestTracingOffRecordsNothing(t *testing.T) {
	store := memstore.New()
	var out bytes.Buffer
	h := New(OrdersDeps(Deps{Logger: NewLogger("json", "info", &out, &out)}, Domain{Processor: convoy.NewProcessor(store, convoy.ProcessorOptions{Domain: orders.Domain, Index: store})}))
	_, logs := invoke(t, h, orderInvocation("o-off", "L:0", 1, map[string]string{"Diagnostic-Id": traceB}))
	if len(logs) != 1 || !strings.HasSuffix(logs[0], " orderId=o-off traceId=4bf92f3577b34da6a3ce929d0e0e4736 spanId=00f067aa0ba902b7") {
		t.Fatalf("Logs %q", logs)
	}
	var line map[string]any
	_ = json.Unmarshal(bytes.SplitN(out.Bytes(), []byte("\n"), 2)[0], &line)
	if line["traceId"] != "4bf92f3577b34da6a3ce929d0e0e4736" || line["invocationId"] != "inv-1" {
		t.Fatalf("program log %v", line)
	}
}

// BenchmarkOrderInvocationTracing: an OrderProcessor invocation of one
// message carrying a trace context, with tracing off (the no-op provider:
// no OTEL_* setting) and with its spans recorded (made, not exported).
// Compare with BenchmarkOrderInvocationNoTraceContext: what reading and
// continuing the context costs when tracing is off.
func BenchmarkOrderInvocationTracing(b *testing.B) {
	for _, mode := range []string{"off", "recorded"} {
		b.Run(mode, func(b *testing.B) {
			if mode == "recorded" {
				b.Cleanup(tracing.SetTracerProvider(sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(tracetest.NewSpanRecorder()))))
			}
			benchInvocations(b, map[string]string{"traceparent": traceA, "Diagnostic-Id": traceA})
		})
	}
}

func BenchmarkOrderInvocationNoTraceContext(b *testing.B) {
	benchInvocations(b, nil)
}

func benchInvocations(b *testing.B, props map[string]string) {
	store := memstore.New()
	h := New(OrdersDeps(Deps{}, Domain{Processor: convoy.NewProcessor(store, convoy.ProcessorOptions{Domain: orders.Domain, Index: store})}))
	bodies := make([][]byte, b.N)
	for i := range bodies {
		bodies[i] = orderInvocation(fmt.Sprintf("o-%d", i), "L:0", 1, props)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		req := httptest.NewRequest(http.MethodPost, "/OrderProcessor", bytes.NewReader(bodies[i]))
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if rec.Code != 200 {
			b.Fatal(rec.Body.String())
		}
	}
}
