package devhost_test

import (
	"bytes"
	"context"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"go.opentelemetry.io/otel/trace"
	collectortrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/proto"

	"github.com/convoy-dev/convoy/handler/convoy"
	"github.com/convoy-dev/convoy/handler/internal/azurite"
	"github.com/convoy-dev/convoy/handler/internal/devbus"
	"github.com/convoy-dev/convoy/handler/internal/devhost"
)

// otlpSpan is a span as an OTLP/HTTP receiver got it.
type otlpSpan struct {
	Name, TraceID, SpanID, Parent string
	Attrs                         map[string]string
	Links                         []string // traceId-spanId
	Error                         bool
}

// otlpReceiver is an OTLP/HTTP trace receiver: it decodes what the real
// exporter posts to /v1/traces (protobuf ExportTraceServiceRequest).
type otlpReceiver struct {
	mu    sync.Mutex
	spans []otlpSpan
	bad   []string
}

func (r *otlpReceiver) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	body, _ := io.ReadAll(req.Body)
	var msg collectortrace.ExportTraceServiceRequest
	r.mu.Lock()
	defer r.mu.Unlock()
	if req.URL.Path != "/v1/traces" || req.Header.Get("Content-Type") != "application/x-protobuf" {
		r.bad = append(r.bad, req.Method+" "+req.URL.Path+" "+req.Header.Get("Content-Type"))
		http.Error(w, "not an OTLP/HTTP protobuf trace export", http.StatusBadRequest)
		return
	}
	if err := proto.Unmarshal(body, &msg); err != nil {
		r.bad = append(r.bad, err.Error())
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	for _, rs := range msg.GetResourceSpans() {
		for _, ss := range rs.GetScopeSpans() {
			for _, s := range ss.GetSpans() {
				r.spans = append(r.spans, decodeSpan(s))
			}
		}
	}
	out, _ := proto.Marshal(&collectortrace.ExportTraceServiceResponse{})
	w.Header().Set("Content-Type", "application/x-protobuf")
	_, _ = w.Write(out)
}

func decodeSpan(s *tracepb.Span) otlpSpan {
	o := otlpSpan{Name: s.GetName(), TraceID: hex.EncodeToString(s.GetTraceId()), SpanID: hex.EncodeToString(s.GetSpanId()),
		Parent: hex.EncodeToString(s.GetParentSpanId()), Attrs: map[string]string{},
		Error: s.GetStatus().GetCode() == tracepb.Status_STATUS_CODE_ERROR}
	for _, kv := range s.GetAttributes() {
		switch v := kv.GetValue().GetValue().(type) {
		case *commonpb.AnyValue_StringValue:
			o.Attrs[kv.GetKey()] = v.StringValue
		case *commonpb.AnyValue_IntValue:
			o.Attrs[kv.GetKey()] = fmt.Sprint(v.IntValue)
		case *commonpb.AnyValue_BoolValue:
			o.Attrs[kv.GetKey()] = fmt.Sprint(v.BoolValue)
		default:
			o.Attrs[kv.GetKey()] = kv.GetValue().String()
		}
	}
	for _, l := range s.GetLinks() {
		o.Links = append(o.Links, hex.EncodeToString(l.GetTraceId())+"-"+hex.EncodeToString(l.GetSpanId()))
	}
	return o
}

func (r *otlpReceiver) all() []otlpSpan {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]otlpSpan(nil), r.spans...)
}

// waitFor polls the spans received until done says they are all there
// (the exporter sends every 100 ms; 20 s is ample).
func (r *otlpReceiver) waitFor(ctx context.Context, t *testing.T, what string, done func([]otlpSpan) bool) []otlpSpan {
	t.Helper()
	ctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	for {
		spans := r.all()
		if done(spans) {
			return spans
		}
		select {
		case <-ctx.Done():
			for _, s := range spans {
				t.Logf("span %s %s/%s parent %s %v links %v", s.Name, s.TraceID, s.SpanID, s.Parent, s.Attrs, s.Links)
			}
			r.mu.Lock()
			t.Fatalf("%s: not received (%d spans; refused exports %q)", what, len(spans), r.bad)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// remoteContext is a producer's context of our own making.
func remoteContext(traceID, spanID string) trace.SpanContext {
	var cfg trace.SpanContextConfig
	_, _ = hex.Decode(cfg.TraceID[:], []byte(traceID))
	_, _ = hex.Decode(cfg.SpanID[:], []byte(spanID))
	cfg.TraceFlags = trace.FlagsSampled
	return trace.NewSpanContext(cfg)
}

func traceparent(sc trace.SpanContext) string {
	return "00-" + sc.TraceID().String() + "-" + sc.SpanID().String() + "-01"
}

// TestTraceFromLedgerToEveryApply runs the handler binary under the
// emulation with OTEL_EXPORTER_OTLP_ENDPOINT pointing at a receiver in the
// test, and checks what the real exporter sent:
//   - a ledger queued by a producer with a trace: its publish span continues
//     it, every order message sent carries the publish span's context in
//     traceparent and Diagnostic-Id, and every applied transaction has an
//     apply span whose parent is that context, one trace id in all;
//   - a message dead-lettered and replayed stays in that trace (the replay
//     span links to it), and so does the parked message it drains;
//   - a parked message drained by a message of another trace is applied in
//     its own trace, linked to the drainer's;
//   - a message redelivered after failed invocations: each delivery's span
//     has the message's context as parent;
//   - a producer of our own that sets Diagnostic-Id only is continued;
//   - an HTTP upload continues its request's traceparent header.
func TestTraceFromLedgerToEveryApply(t *testing.T) {
	t.Parallel()
	ctx := timeout(t, 2*time.Minute)
	recv := &otlpReceiver{}
	otlp := httptest.NewServer(recv)
	t.Cleanup(otlp.Close)
	e := startWith(t, stage(t, nil), azurite.Options{}, func(o *devhost.Options) {
		o.Settings["OTEL_EXPORTER_OTLP_ENDPOINT"] = otlp.URL
		o.Settings["OTEL_BSP_SCHEDULE_DELAY"] = "100" // ms: export at once
		o.Settings["OTEL_SERVICE_NAME"] = "convoy-e2e"
	})

	// A ledger of three orders, from a producer with a trace; o-c's seq 2
	// (index 5) fails every delivery and is dead-lettered.
	producer := remoteContext("11111111111111111111111111111111", "2222222222222222")
	var txs []string
	for _, o := range []string{"o-a", "o-b", "o-c"} {
		txs = append(txs, fmt.Sprintf(`{"orderId":%q,"op":"CreateOrder","currency":"EUR"}`, o))
	}
	for i := 1; i <= 2; i++ {
		for _, o := range []string{"o-a", "o-b", "o-c"} {
			txs = append(txs, fmt.Sprintf(`{"orderId":%q,"op":"AddTransaction","txId":"t-%d","amount":%d}`, o, i, i))
		}
	}
	doc := []byte(`{"ledgerId":"L-trace","transactions":[` + strings.Join(txs, ",") + `]}`)
	victim := convoy.MessageID("L-trace", 5)
	e.host.InjectFault(func(fn string, msgs []*devbus.Message) error {
		for _, m := range msgs {
			if m.MessageID == victim {
				return fmt.Errorf("injected: a dependency of %s is down", fn)
			}
		}
		return nil
	})
	e.publish(trace.ContextWithSpanContext(ctx, producer), doc)
	e.waitIdle(ctx)
	if dead := e.host.Queue("orders").DeadLetters(); len(dead) != 1 || dead[0].MessageID != victim {
		t.Fatalf("dead letters %+v, want %s", dead, victim)
	}
	e.host.InjectFault(nil)

	// The producer's trace continues: one publish span under it.
	spans := recv.waitFor(ctx, t, "the ledger's publish span", func(s []otlpSpan) bool {
		return len(find(s, "publish ledger", producer.TraceID().String())) == 1
	})
	publish := find(spans, "publish ledger", producer.TraceID().String())[0]
	if publish.Parent != producer.SpanID().String() || publish.Attrs["convoy.ledger_id"] != "L-trace" {
		t.Fatalf("publish span %+v, want the producer's span %s as parent", publish, producer.SpanID())
	}
	// Every order message sent carries the publish span's context, in both
	// properties (the queue's journal: what the broker received).
	want := "00-" + publish.TraceID + "-" + publish.SpanID + "-01"
	for _, m := range e.host.Queue("orders").Sent() {
		if m.Properties["traceparent"] != want || m.Properties["Diagnostic-Id"] != want {
			t.Fatalf("message %s sent with traceparent %v, Diagnostic-Id %v; want %s in both", m.MessageID, m.Properties["traceparent"], m.Properties["Diagnostic-Id"], want)
		}
	}

	// Replay the dead letter: it keeps its context, and the parked seq 3
	// it unblocks is applied in the same trace.
	var rep map[string]any
	if code := e.post(t, "/api/orders/o-c/replay", &rep); code != 200 || len(rep["replayed"].([]any)) != 1 {
		t.Fatalf("replay: %d %v", code, rep)
	}

	// A producer of our own that sets only Diagnostic-Id (older SDKs).
	older := remoteContext("33333333333333333333333333333333", "4444444444444444")
	m := rawOrderMessage("D:1", "o-d", "D", 1, `{"transaction":{"orderId":"o-d","op":"CreateOrder","currency":"EUR"}}`)
	m.ApplicationProperties["Diagnostic-Id"] = traceparent(older)
	// A message that can never be read: redelivered until dead-lettered,
	// every delivery in its trace.
	poison := remoteContext("55555555555555555555555555555555", "6666666666666666")
	p := rawOrderMessage("P:1", "o-p", "P", 1, `{"transaction":{"orderId":"o-p","op":"AddTransaction","txId":"t-1","amount":"a lot"}}`)
	p.ApplicationProperties["traceparent"] = traceparent(poison)
	e.send(ctx, "orders", m, p)

	// A message parked, then drained by a message of another trace: its
	// apply span is in its own trace, linked to the drainer's.
	parkedCtx := remoteContext("99999999999999999999999999999999", "aaaaaaaaaaaaaaaa")
	drainerCtx := remoteContext("bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb", "cccccccccccccccc")
	e2 := rawOrderMessage("E:2", "o-e", "E", 2, `{"transaction":{"orderId":"o-e","op":"AddTransaction","txId":"t-1","amount":1}}`)
	e2.ApplicationProperties["traceparent"] = traceparent(parkedCtx)
	e.send(ctx, "orders", e2)
	e.waitIdle(ctx)
	e1 := rawOrderMessage("E:1", "o-e", "E", 1, `{"transaction":{"orderId":"o-e","op":"CreateOrder","currency":"EUR"}}`)
	e1.ApplicationProperties["traceparent"] = traceparent(drainerCtx)
	e.send(ctx, "orders", e1)

	// An HTTP upload with a traceparent header.
	client := remoteContext("77777777777777777777777777777777", "8888888888888888")
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, e.host.URL()+"/api/ledgers", bytes.NewReader([]byte(
		`{"ledgerId":"L-http","transactions":[{"orderId":"o-h","op":"CreateOrder","currency":"EUR"},{"orderId":"o-h","op":"AddTransaction","txId":"t-1","amount":3}]}`)))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("traceparent", traceparent(client))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusAccepted {
		t.Fatalf("upload: %d", resp.StatusCode)
	}
	e.waitIdle(ctx)

	ledgerTrace := producer.TraceID().String()
	spans = recv.waitFor(ctx, t, "every apply span", func(s []otlpSpan) bool {
		return len(find(s, "apply", ledgerTrace)) == 9 && len(find(s, "apply", older.TraceID().String())) == 1 &&
			len(find(s, "order message", poison.TraceID().String())) >= 2 && len(find(s, "apply", client.TraceID().String())) == 2 &&
			len(find(s, "replay order", "")) == 1 && len(find(s, "apply", parkedCtx.TraceID().String())) == 1
	})
	// One trace: every transaction of the ledger applied once, under the
	// message's context (the publish span), the replayed and the drained
	// ones included.
	applied := map[string]otlpSpan{}
	for _, s := range find(spans, "apply", ledgerTrace) {
		if s.Parent != publish.SpanID {
			t.Errorf("apply span %v: parent %s, want the message's context %s", s.Attrs, s.Parent, publish.SpanID)
		}
		applied[s.Attrs["convoy.order_id"]+"/"+s.Attrs["convoy.seq"]] = s
	}
	for _, o := range []string{"o-a", "o-b", "o-c"} {
		for seq := 1; seq <= 3; seq++ {
			if _, ok := applied[fmt.Sprintf("%s/%d", o, seq)]; !ok {
				t.Errorf("no apply span for %s seq %d in the ledger's trace (%d apply spans)", o, seq, len(applied))
			}
		}
	}
	if s := applied["o-c/2"]; !strings.HasPrefix(s.Attrs["messaging.message.id"], victim+"#replay-") {
		t.Errorf("o-c seq 2 applied from %q, want the replayed copy", s.Attrs["messaging.message.id"])
	}
	if s := applied["o-c/3"]; s.Attrs["convoy.drained"] != "true" {
		t.Errorf("o-c seq 3: %v, want it drained by the replayed seq 2", s.Attrs)
	}
	replaySpan := find(spans, "replay order", "")[0]
	if len(replaySpan.Links) != 1 || replaySpan.Links[0] != ledgerTrace+"-"+publish.SpanID {
		t.Errorf("replay span links %v, want the dead letter's context %s-%s", replaySpan.Links, ledgerTrace, publish.SpanID)
	}
	// Diagnostic-Id only: continued.
	if s := find(spans, "apply", older.TraceID().String())[0]; s.Parent != older.SpanID().String() || s.Attrs["convoy.order_id"] != "o-d" {
		t.Errorf("apply of the Diagnostic-Id message: %+v, want parent %s", s, older.SpanID())
	}
	drained := find(spans, "apply", parkedCtx.TraceID().String())[0]
	if drained.Parent != parkedCtx.SpanID().String() || drained.Attrs["convoy.drained"] != "true" ||
		len(drained.Links) != 1 || !strings.HasPrefix(drained.Links[0], drainerCtx.TraceID().String()+"-") {
		t.Errorf("drained apply span %+v: want parent %s (its own message's context), a link into the drainer's trace %s",
			drained, parkedCtx.SpanID(), drainerCtx.TraceID())
	}
	// Redeliveries: each delivery's span under the message's context,
	// failed, with its delivery count.
	counts := map[string]bool{}
	for _, s := range find(spans, "order message", poison.TraceID().String()) {
		if s.Parent != poison.SpanID().String() || !s.Error || s.Attrs["convoy.outcome"] != "unreadable" {
			t.Errorf("delivery span %+v, want parent %s, failed, unreadable", s, poison.SpanID())
		}
		counts[s.Attrs["messaging.servicebus.message.delivery_count"]] = true
	}
	if !counts["1"] || !counts["2"] {
		t.Errorf("delivery counts %v, want the first delivery and a redelivery", counts)
	}
	// The upload continues the request's trace.
	up := find(spans, "publish ledger", client.TraceID().String())
	if len(up) != 1 || up[0].Parent != client.SpanID().String() {
		t.Fatalf("upload's publish span %+v, want parent %s", up, client.SpanID())
	}
	for _, s := range find(spans, "apply", client.TraceID().String()) {
		if s.Parent != up[0].SpanID {
			t.Errorf("upload's apply span %+v, want parent %s", s, up[0].SpanID)
		}
	}
	// The handler's log lines about the messages carry the trace.
	logText := e.log.String()
	if !strings.Contains(logText, "traceId="+ledgerTrace) || !strings.Contains(logText, "traceId="+older.TraceID().String()) {
		t.Errorf("the log has no line with the ledger's or the Diagnostic-Id message's trace id")
	}
}

// find returns the spans of name in traceID ("" any trace).
func find(spans []otlpSpan, name, traceID string) []otlpSpan {
	var out []otlpSpan
	for _, s := range spans {
		if s.Name == name && (traceID == "" || s.TraceID == traceID) {
			out = append(out, s)
		}
	}
	return out
}
