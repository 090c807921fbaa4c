package handler_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/http/httptest"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	collectormetrics "go.opentelemetry.io/proto/otlp/collector/metrics/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	metricspb "go.opentelemetry.io/proto/otlp/metrics/v1"
	"google.golang.org/protobuf/proto"

	"github.com/convoy-dev/convoy/handler"
	"github.com/convoy-dev/convoy/handler/accounts"
	"github.com/convoy-dev/convoy/handler/convoy"
	"github.com/convoy-dev/convoy/handler/fault"
	"github.com/convoy-dev/convoy/handler/heal"
	"github.com/convoy-dev/convoy/handler/internal/ledgertest"
	"github.com/convoy-dev/convoy/handler/internal/memstore"
	"github.com/convoy-dev/convoy/handler/ledger"
	"github.com/convoy-dev/convoy/handler/metrics"
	"github.com/convoy-dev/convoy/handler/orders"
)

// metricsReceiver is an OTLP/HTTP metrics receiver: it decodes what the
// real exporter posts to /v1/metrics (protobuf ExportMetricsServiceRequest).
type metricsReceiver struct {
	mu       sync.Mutex
	requests []*collectormetrics.ExportMetricsServiceRequest
	bad      []string
}

func (r *metricsReceiver) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	body, _ := io.ReadAll(req.Body)
	r.mu.Lock()
	defer r.mu.Unlock()
	var msg collectormetrics.ExportMetricsServiceRequest
	if req.URL.Path != "/v1/metrics" || req.Header.Get("Content-Type") != "application/x-protobuf" {
		r.bad = append(r.bad, req.Method+" "+req.URL.Path+" "+req.Header.Get("Content-Type"))
		http.Error(w, "not an OTLP/HTTP protobuf metrics export", http.StatusBadRequest)
		return
	}
	if err := proto.Unmarshal(body, &msg); err != nil {
		r.bad = append(r.bad, err.Error())
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	r.requests = append(r.requests, &msg)
	out, _ := proto.Marshal(&collectormetrics.ExportMetricsServiceResponse{})
	w.Header().Set("Content-Type", "application/x-protobuf")
	_, _ = w.Write(out)
}

// point is one data point as received: its attributes (key=value, sorted)
// and its value (a sum or gauge's value; a histogram's count, sum and
// bucket counts).
type point struct {
	attrs   string
	value   int64
	count   uint64
	sum     float64
	buckets []uint64
	bounds  []float64
}

// received is one instrument as received: its unit and kind.
type received struct {
	unit, kind string
	monotonic  bool
	points     map[string]point // by attrs
}

// instruments decodes what the receiver got: the last value of each
// instrument's points (cumulative temporality), and the service name of
// the resource.
func (r *metricsReceiver) instruments(t *testing.T) (map[string]*received, string) {
	t.Helper()
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.bad) > 0 {
		t.Fatalf("refused exports: %q", r.bad)
	}
	got, service := map[string]*received{}, ""
	for _, req := range r.requests {
		for _, rm := range req.GetResourceMetrics() {
			for _, kv := range rm.GetResource().GetAttributes() {
				if kv.GetKey() == "service.name" {
					service = kv.GetValue().GetStringValue()
				}
			}
			for _, sm := range rm.GetScopeMetrics() {
				for _, m := range sm.GetMetrics() {
					in := got[m.GetName()]
					if in == nil {
						in = &received{unit: m.GetUnit(), points: map[string]point{}}
						got[m.GetName()] = in
					}
					switch d := m.GetData().(type) {
					case *metricspb.Metric_Sum:
						in.kind, in.monotonic = "sum", d.Sum.GetIsMonotonic()
						for _, p := range d.Sum.GetDataPoints() {
							a := attrString(p.GetAttributes())
							in.points[a] = point{attrs: a, value: p.GetAsInt()}
						}
					case *metricspb.Metric_Gauge:
						in.kind = "gauge"
						for _, p := range d.Gauge.GetDataPoints() {
							a := attrString(p.GetAttributes())
							in.points[a] = point{attrs: a, value: p.GetAsInt()}
						}
					case *metricspb.Metric_Histogram:
						in.kind = "histogram"
						for _, p := range d.Histogram.GetDataPoints() {
							a := attrString(p.GetAttributes())
							in.points[a] = point{attrs: a, count: p.GetCount(), sum: p.GetSum(), buckets: p.GetBucketCounts(), bounds: p.GetExplicitBounds()}
						}
					default:
						in.kind = fmt.Sprintf("%T", d)
					}
				}
			}
		}
	}
	return got, service
}

func attrString(kvs []*commonpb.KeyValue) string {
	var s []string
	for _, kv := range kvs {
		var v string
		switch x := kv.GetValue().GetValue().(type) {
		case *commonpb.AnyValue_StringValue:
			v = x.StringValue
		case *commonpb.AnyValue_IntValue:
			v = fmt.Sprint(x.IntValue)
		default:
			v = kv.GetValue().String()
		}
		s = append(s, kv.GetKey()+"="+v)
	}
	sort.Strings(s)
	return strings.Join(s, " ")
}

// orderInvocation is a one-message OrderProcessor invocation as the host
// sends it: order id's message seq, enqueued at enqueued (to the second, as
// the host writes one message's).
func orderInvocation(orderID string, seq int64, enqueued time.Time) []byte {
	body := fmt.Sprintf(`{"transaction":{"orderId":%q,"op":"AddTransaction","txId":"t-%d","amount":%d}}`, orderID, seq, seq*10)
	if seq == 1 {
		body = fmt.Sprintf(`{"transaction":{"orderId":%q,"op":"CreateOrder","currency":"EUR"}}`, orderID)
	}
	return []byte(fmt.Sprintf(`{"Data":{"message":%q},"Metadata":{"MessageId":"\"L-m:%s-%d\"","SessionId":"\"%s\"","DeliveryCount":"1",`+
		`"EnqueuedTimeUtc":%q,"ApplicationProperties":{"seq":%d},"sys":{"MethodName":"OrderProcessor"}}}`,
		quoteJSON(body), orderID, seq, orderID, enqueued.UTC().Format("2006-01-02T15:04:05"), seq))
}

func quoteJSON(s string) string { return fmt.Sprintf("%q", s) }

// metricsSettings are the settings of a receiver at url, exporting only
// when flushed (the test's shutdown).
func metricsSettings(url string, more ...string) func(string) string {
	env := map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": url, "OTEL_METRIC_EXPORT_INTERVAL": "3600000", "OTEL_SERVICE_NAME": "convoy-metrics-test"}
	for i := 0; i+1 < len(more); i += 2 {
		env[more[i]] = more[i+1]
	}
	return func(k string) string { return env[k] }
}

// TestMetricsAtAReceiver drives the handler in process (as the host
// would: OrderProcessor, LedgerIngest, LedgerUpload and AutoReplay
// invocations) with metrics.Setup's recorder exporting to an OTLP/HTTP
// receiver in the test, and checks every instrument the real exporter
// sent against what the test sent: names, units, kinds, attributes and
// counts.
func TestMetricsAtAReceiver(t *testing.T) {
	t.Parallel()
	recv := &metricsReceiver{}
	otlp := httptest.NewServer(recv)
	t.Cleanup(otlp.Close)
	rec, cfg, shutdown, err := metrics.Setup(context.Background(), metricsSettings(otlp.URL))
	if err != nil || rec == nil || !cfg.Enabled {
		t.Fatalf("Setup: %v %+v %v", rec, cfg, err)
	}
	store, ledgers, sender := memstore.New(), memstore.NewLedgers(), &ledgertest.Sender{}
	run := heal.Run{Replayed: []heal.Replay{{OrderID: "o-r1"}, {OrderID: "o-r2"}}, Failed: []heal.Failure{{OrderID: "o-f", Error: "down"}}, FailedMore: 2,
		Summary: &heal.Summary{BlockedOrders: 3, ParkedMessages: 7, DeadLetters: &heal.DeadLetters{Total: 5, Transient: 4, Permanent: 1},
			Lag: &heal.LagFigures{Orders: 15, ByStatus: map[convoy.LagStatus]int{convoy.LagOK: 9, convoy.LagCatchingUp: 2, convoy.LagStalled: 1, convoy.LagBlocked: 3}}}}
	srv := handler.New(handler.OrdersDeps(handler.Deps{
		Ledgers: ledgertest.Publisher(ledgers, sender, ledger.PublisherOptions{Retry: fault.RetryPolicy{MaxAttempts: 1}}),
		Metrics: rec, LedgersQueue: "ledgers-q",
	}, handler.Domain{
		Processor: convoy.NewProcessor(store, convoy.ProcessorOptions{Domain: orders.Domain, Index: store}),
		Blocked:   store, Keys: store, Heal: fakeHealer{run: run}, Queue: "orders-q",
	}))
	post := func(path string, body []byte) int {
		t.Helper()
		w := httptest.NewRecorder()
		srv.ServeHTTP(w, httptest.NewRequest(http.MethodPost, path, strings.NewReader(string(body))))
		return w.Code
	}

	// Order o-a: seqs 1, 2, 3 applied, each enqueued 100 s ago; order o-b:
	// seq 2 parked, then again (a duplicate); one unreadable message (a
	// failed invocation).
	enqueued := time.Now().Add(-100 * time.Second)
	for seq := int64(1); seq <= 3; seq++ {
		if code := post("/OrderProcessor", orderInvocation("o-a", seq, enqueued)); code != 200 {
			t.Fatalf("o-a seq %d: %d", seq, code)
		}
	}
	for range 2 {
		if code := post("/OrderProcessor", orderInvocation("o-b", 2, enqueued)); code != 200 {
			t.Fatalf("o-b seq 2: %d", code)
		}
	}
	if code := post("/OrderProcessor", golden(t, "unreadable-no-seq.json")); code < 300 {
		t.Fatalf("unreadable: %d, want a failed invocation", code)
	}
	// Ledgers: one published (5 messages), the same again, one rejected;
	// an upload rejected.
	for _, name := range []string{"servicebus-ledger.json", "servicebus-ledger.json", "servicebus-ledger-invalid.json"} {
		if code := post("/LedgerIngest", golden(t, name)); code != 200 {
			t.Fatalf("LedgerIngest %s: %d", name, code)
		}
	}
	if code := post("/api/ledgers", []byte(`{"ledgerId":"L-up","transactions":[]}`)); code != 400 {
		t.Fatalf("upload of an empty ledger: %d, want 400", code)
	}
	if code := post("/AutoReplay", []byte(`{"Data":{"timer":{}},"Metadata":{"sys":{"MethodName":"AutoReplay"}}}`)); code != 200 {
		t.Fatalf("AutoReplay: %d", code)
	}
	if err := shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}

	got, service := recv.instruments(t)
	if service != "convoy-metrics-test" {
		t.Errorf("service.name %q, want OTEL_SERVICE_NAME's", service)
	}
	const (
		orders  = "faas.name=OrderProcessor faas.trigger=pubsub messaging.destination.name=orders-q messaging.operation.name=process messaging.operation.type=process messaging.system=servicebus"
		ledgerQ = "faas.name=LedgerIngest faas.trigger=pubsub messaging.destination.name=ledgers-q messaging.operation.name=process messaging.operation.type=process messaging.system=servicebus"
	)
	errOrders := "error.type=invalid " + orders
	type want struct {
		unit, kind string
		points     map[string]int64 // attrs → value (a histogram's count)
	}
	wants := map[string]want{
		metrics.ProcessDuration:  {"s", "histogram", map[string]int64{orders: 5, errOrders: 1, ledgerQ: 3}},
		metrics.ConsumedMessages: {"{message}", "sum", map[string]int64{orders: 5, errOrders: 1, ledgerQ: 3}},
		metrics.SentMessages: {"{message}", "sum", map[string]int64{
			"faas.name=LedgerIngest messaging.destination.name=orders-q messaging.operation.name=send messaging.operation.type=send messaging.system=servicebus": 5}},
		metrics.OrderMessages: {"{message}", "sum", map[string]int64{
			"convoy.outcome=applied faas.name=OrderProcessor messaging.destination.name=orders-q":   3,
			"convoy.outcome=parked faas.name=OrderProcessor messaging.destination.name=orders-q":    1,
			"convoy.outcome=duplicate faas.name=OrderProcessor messaging.destination.name=orders-q": 1}},
		metrics.CriticalTime: {"s", "histogram", map[string]int64{"faas.name=OrderProcessor messaging.destination.name=orders-q": 3}},
		metrics.Ledgers: {"{ledger}", "sum", map[string]int64{
			"convoy.outcome=published faas.name=LedgerIngest":         1,
			"convoy.outcome=already published faas.name=LedgerIngest": 1,
			"convoy.outcome=rejected faas.name=LedgerIngest":          1,
			"convoy.outcome=rejected faas.name=LedgerUpload":          1}},
		metrics.AutoReplays:    {"{order}", "sum", map[string]int64{"convoy.domain=orders convoy.outcome=replayed": 2, "convoy.domain=orders convoy.outcome=failed": 3}},
		metrics.BlockedOrders:  {"{order}", "gauge", map[string]int64{"convoy.domain=orders": 3}},
		metrics.ParkedMessages: {"{message}", "gauge", map[string]int64{"convoy.domain=orders": 7}},
		metrics.DeadLetters: {"{message}", "gauge", map[string]int64{"convoy.cause=transient convoy.domain=orders": 4,
			"convoy.cause=permanent convoy.domain=orders": 1}},
		metrics.LagOrders: {"{order}", "gauge", map[string]int64{"convoy.domain=orders convoy.lag.status=ok": 9, "convoy.domain=orders convoy.lag.status=catching-up": 2,
			"convoy.domain=orders convoy.lag.status=stalled": 1, "convoy.domain=orders convoy.lag.status=blocked": 3}},
	}
	for name, w := range wants {
		in := got[name]
		if in == nil {
			t.Errorf("%s: not received", name)
			continue
		}
		if in.unit != w.unit || in.kind != w.kind || (in.kind == "sum" && !in.monotonic) {
			t.Errorf("%s: unit %q kind %s (monotonic %v), want %q %s", name, in.unit, in.kind, in.monotonic, w.unit, w.kind)
		}
		gotPoints := map[string]int64{}
		for a, p := range in.points {
			gotPoints[a] = p.value
			if in.kind == "histogram" {
				gotPoints[a] = int64(p.count)
			}
		}
		if fmt.Sprint(gotPoints) != fmt.Sprint(w.points) {
			t.Errorf("%s: points\n%v\nwant\n%v", name, gotPoints, w.points)
		}
	}
	for name := range got {
		if _, ok := wants[name]; !ok {
			t.Errorf("%s: received, not expected", name)
		}
	}
	// The critical times: each 100 s (to the second the host gives, and
	// the time the test took), all three in the bucket (60 s, 120 s].
	if in := got[metrics.CriticalTime]; in != nil {
		for _, p := range in.points {
			if p.sum < 300 || p.sum > 330 {
				t.Errorf("critical time: sum %.1f s over %d, want about 3 × 100 s", p.sum, p.count)
			}
			for i, n := range p.buckets {
				if lo := bound(p.bounds, i-1); n != 0 && (lo != 60 || bound(p.bounds, i) != 120) {
					t.Errorf("critical time: %d in the bucket above %g s, want all in (60, 120]", n, lo)
				}
			}
		}
	}
}

func bound(b []float64, i int) float64 {
	if i < 0 || i >= len(b) {
		return -1
	}
	return b[i]
}

// TestMetricsOff: OTEL_METRICS_EXPORTER=none, or no endpoint, or
// OTEL_SDK_DISABLED: no recorder, no exporter, nothing sent, the handler
// works as without metrics.
func TestMetricsOff(t *testing.T) {
	t.Parallel()
	recv := &metricsReceiver{}
	otlp := httptest.NewServer(recv)
	t.Cleanup(otlp.Close)
	for _, env := range []func(string) string{
		metricsSettings(otlp.URL, "OTEL_METRICS_EXPORTER", "none"),
		metricsSettings(otlp.URL, "OTEL_SDK_DISABLED", "true"),
		metricsSettings("", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", otlp.URL),
	} {
		rec, cfg, shutdown, err := metrics.Setup(context.Background(), env)
		if err != nil || rec != nil || cfg.Enabled {
			t.Fatalf("Setup: %v %+v %v, want nothing built", rec, cfg, err)
		}
		store := memstore.New()
		srv := handler.New(handler.OrdersDeps(handler.Deps{Metrics: rec},
			handler.Domain{Processor: convoy.NewProcessor(store, convoy.ProcessorOptions{Domain: orders.Domain, Index: store}), Keys: store}))
		w := httptest.NewRecorder()
		srv.ServeHTTP(w, httptest.NewRequest(http.MethodPost, "/OrderProcessor", strings.NewReader(string(orderInvocation("o-a", 1, time.Now())))))
		if w.Code != 200 {
			t.Fatalf("OrderProcessor: %d %s", w.Code, w.Body)
		}
		if err := shutdown(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	if got, _ := recv.instruments(t); len(got) != 0 || len(recv.requests) != 0 {
		t.Fatalf("the receiver got %d exports", len(recv.requests))
	}
}

// TestSentMessagesByQueue: a ledger that mixes orders and accounts counts
// each message sent on its own domain's queue, as many as the document has
// entries of that domain (counted here from the document).
func TestSentMessagesByQueue(t *testing.T) {
	t.Parallel()
	recv := &metricsReceiver{}
	otlp := httptest.NewServer(recv)
	t.Cleanup(otlp.Close)
	rec, _, shutdown, err := metrics.Setup(context.Background(), metricsSettings(otlp.URL))
	if err != nil {
		t.Fatal(err)
	}
	ledgers := memstore.NewLedgers()
	pub := ledgertest.MixedPublisher(ledgers, ledgers.Keys("account"), &ledgertest.Sender{}, &ledgertest.Sender{}, ledger.PublisherOptions{Retry: fault.RetryPolicy{MaxAttempts: 1}})
	store := memstore.New()
	srv := handler.New(handler.Deps{Ledgers: pub, Metrics: rec, Domains: []handler.Domain{
		{Rules: orders.Domain, Processor: convoy.NewProcessor(store, convoy.ProcessorOptions{Domain: orders.Domain}), Keys: store, Blocked: store, Queue: "orders-q"},
		{Rules: accounts.Domain, Processor: convoy.NewProcessor(store, convoy.ProcessorOptions{Domain: accounts.Domain}), Keys: store, Blocked: store, Queue: "accounts-q"},
	}})
	doc := ledgertest.MixedDoc("L-mixed", 12, []string{"k-1", "k-2", "k-3"}, 0)
	var parsed struct {
		Transactions []map[string]any `json:"transactions"`
	}
	if err := json.Unmarshal(doc, &parsed); err != nil {
		t.Fatal(err)
	}
	want := map[string]int64{}
	for _, e := range parsed.Transactions {
		queue := "orders-q"
		if e["domain"] == "accounts" {
			queue = "accounts-q"
		}
		want["faas.name=LedgerUpload messaging.destination.name="+queue+" messaging.operation.name=send messaging.operation.type=send messaging.system=servicebus"]++
	}
	if len(want) != 2 {
		t.Fatalf("the document mixes no domains: %s", doc)
	}
	w := httptest.NewRecorder()
	srv.ServeHTTP(w, httptest.NewRequest(http.MethodPost, "/api/ledgers", strings.NewReader(string(doc))))
	if w.Code != http.StatusAccepted {
		t.Fatalf("upload: %d %s", w.Code, w.Body)
	}
	if err := shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	got, _ := recv.instruments(t)
	sent := map[string]int64{}
	if in := got[metrics.SentMessages]; in != nil {
		for attrs, p := range in.points {
			sent[attrs] = p.value
		}
	}
	if !maps.Equal(sent, want) {
		t.Errorf("sent messages %v, want %v", sent, want)
	}
}
