package metrics_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/convoy-dev/convoy/handler/metrics"
)

// TestOffCostsNothing: with metrics off (a nil Recorder) what the processor
// calls per message and per invocation allocates nothing.
func TestOffCostsNothing(t *testing.T) {
	var r *metrics.Recorder
	c, p := r.Consumer("OrderProcessor", "orders"), r.Publisher("LedgerIngest", "orders", "accounts")
	if c != nil || p != nil {
		t.Fatalf("off: consumer %v, publisher %v, want nil", c, p)
	}
	ctx := context.Background()
	allocs := testing.AllocsPerRun(1000, func() {
		c.Outcome(ctx, "applied")
		c.CriticalTime(ctx, time.Second)
		c.Processed(ctx, 1, time.Millisecond, "")
		c.Processed(ctx, 1, time.Millisecond, "invalid")
		p.Ledger(ctx, "published", map[string]int{"orders": 5})
		r.AutoReplayed(ctx, "orders", "replayed", 1)
		r.SetFigures(metrics.Figures{BlockedOrders: 1})
	})
	if allocs != 0 {
		t.Fatalf("off: %.1f allocations per message, want 0", allocs)
	}
}

// TestSetupRefuses: a protocol or an exporter the program does not speak
// stops it, naming the setting.
func TestSetupRefuses(t *testing.T) {
	for _, env := range []map[string]string{
		{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:1", "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"},
		{"OTEL_EXPORTER_OTLP_METRICS_ENDPOINT": "http://127.0.0.1:1/v1/metrics", "OTEL_EXPORTER_OTLP_METRICS_PROTOCOL": "http/json"},
		{"OTEL_METRICS_EXPORTER": "prometheus"},
		{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:1", "OTEL_METRIC_EXPORT_INTERVAL": "soon"},
	} {
		r, _, _, err := metrics.Setup(context.Background(), func(k string) string { return env[k] })
		if err == nil || r != nil {
			t.Errorf("%v: %v, want refused", env, err)
			continue
		}
		named := false
		for k := range env {
			named = named || (strings.Contains(err.Error(), k) && k != "OTEL_EXPORTER_OTLP_ENDPOINT" && k != "OTEL_EXPORTER_OTLP_METRICS_ENDPOINT")
		}
		if !named {
			t.Errorf("%v: %v does not name the setting", env, err)
		}
	}
}

// BenchmarkRecordPerMessage is what metrics on cost per applied message
// (an outcome and a critical time), and an invocation.
func BenchmarkRecordPerMessage(b *testing.B) {
	r, _, shutdown, err := metrics.Setup(context.Background(), func(k string) string {
		return map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:1", "OTEL_METRIC_EXPORT_INTERVAL": "3600000"}[k]
	})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Millisecond)
		defer cancel()
		_ = shutdown(ctx)
	})
	c := r.Consumer("OrderProcessor", "orders")
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		c.Outcome(ctx, "applied")
		c.CriticalTime(ctx, time.Second)
		c.Processed(ctx, 1, time.Millisecond, "")
	}
}

// TestFiguresByDomain: each domain's AutoReplay run sets its own figures,
// which the gauges report side by side under convoy.domain; a domain's
// next figures replace its own only.
func TestFiguresByDomain(t *testing.T) {
	reader := sdkmetric.NewManualReader()
	r, err := metrics.NewRecorder(sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader)))
	if err != nil {
		t.Fatal(err)
	}
	r.SetFigures(metrics.Figures{Domain: "orders", BlockedOrders: 3})
	r.SetFigures(metrics.Figures{Domain: "accounts", BlockedOrders: 5})
	r.SetFigures(metrics.Figures{Domain: "orders", BlockedOrders: 4})
	var rm metricdata.ResourceMetrics
	if err := reader.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	got := map[string]int64{}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			if m.Name != metrics.BlockedOrders {
				continue
			}
			for _, p := range m.Data.(metricdata.Gauge[int64]).DataPoints {
				d, _ := p.Attributes.Value(metrics.AttrDomain)
				got[d.AsString()] = p.Value
			}
		}
	}
	if want := map[string]int64{"orders": 4, "accounts": 5}; fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("blocked keys by domain %v, want %v", got, want)
	}
}
