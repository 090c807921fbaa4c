package tracing

import (
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"strings"
	"testing"

	"go.opentelemetry.io/otel"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
)

func env(kv ...string) func(string) string {
	m := map[string]string{}
	for i := 0; i < len(kv); i += 2 {
		m[kv[i]] = kv[i+1]
	}
	return func(k string) string { return m[k] }
}

// TestSetupOff: with no OTLP endpoint (or tracing switched off), no exporter
// is built, the global provider stays the no-op one and a span records
// nothing; what a message carries is still continued.
func TestSetupOff(t *testing.T) {
	before := otel.GetTracerProvider()
	for _, e := range []func(string) string{
		env(),
		env("OTEL_SERVICE_NAME", "x", "OTEL_EXPORTER_OTLP_HEADERS", "a=b"),
		env("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:1", "OTEL_SDK_DISABLED", "true"),
	} {
		cfg, shutdown, err := Setup(context.Background(), e)
		if err != nil || cfg.Enabled {
			t.Fatalf("Setup: %+v, %v; want off", cfg, err)
		}
		if err := shutdown(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	if otel.GetTracerProvider() != before {
		t.Fatalf("the global tracer provider was replaced with %T", otel.GetTracerProvider())
	}
	if _, ok := otel.GetTracerProvider().(*sdktrace.TracerProvider); ok {
		t.Fatal("an SDK provider is installed")
	}
	parent := mustParse(t, tpA)
	_, span := Start(context.Background(), "apply", parent)
	if span.IsRecording() || !span.SpanContext().Equal(parent) {
		t.Fatalf("off, with a parent: recording %v, context %v; want the parent's, not recording", span.IsRecording(), span.SpanContext())
	}
	_, root := Start(context.Background(), "publish", trace.SpanContext{})
	if root.IsRecording() || !root.SpanContext().IsValid() || root.SpanContext().IsSampled() {
		t.Fatalf("off, new trace: %v recording %v; want fresh ids, not sampled, not recording", root.SpanContext(), root.IsRecording())
	}
}

// TestSetupNoneRecords: OTEL_TRACES_EXPORTER=none makes spans (sampled,
// recording) and exports them nowhere, whatever endpoint is set. It runs in
// a child process of the test binary: Setup replaces the global provider,
// which TestSetupOff checks is untouched.
func TestSetupNoneRecords(t *testing.T) {
	if os.Getenv("TRACING_TEST_CHILD") != "none" {
		hit := make(chan string, 1)
		srv := httptest.NewServer(http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) {
			select {
			case hit <- r.URL.Path:
			default:
			}
		}))
		defer srv.Close()
		cmd := exec.Command(os.Args[0], "-test.run=^TestSetupNoneRecords$", "-test.v")
		cmd.Env = append(os.Environ(), "TRACING_TEST_CHILD=none", "TRACING_TEST_ENDPOINT="+srv.URL)
		if out, err := cmd.CombinedOutput(); err != nil || !strings.Contains(string(out), "--- PASS: TestSetupNoneRecords") {
			t.Fatalf("child: %v\n%s", err, out)
		}
		select {
		case path := <-hit:
			t.Fatalf("OTEL_TRACES_EXPORTER=none exported to %s", path)
		default:
		}
		return
	}
	cfg, shutdown, err := Setup(context.Background(), env("OTEL_TRACES_EXPORTER", "none",
		"OTEL_EXPORTER_OTLP_ENDPOINT", os.Getenv("TRACING_TEST_ENDPOINT")))
	if err != nil || cfg.Enabled || !cfg.Recording {
		t.Fatalf("Setup: %+v, %v; want spans recorded, no exporter", cfg, err)
	}
	_, span := Start(context.Background(), "apply", mustParse(t, tpA))
	if !span.IsRecording() || !span.SpanContext().IsSampled() || span.SpanContext().SpanID() == mustParse(t, tpA).SpanID() {
		t.Fatalf("span %v recording %v: want a sampled, recording span of its own", span.SpanContext(), span.IsRecording())
	}
	span.End()
	if err := shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
}

func TestSetupRefusesWhatItCannotExport(t *testing.T) {
	for _, tc := range []struct {
		env  func(string) string
		name string
	}{
		{env("OTEL_EXPORTER_OTLP_ENDPOINT", "http://x", "OTEL_EXPORTER_OTLP_PROTOCOL", "grpc"), "OTEL_EXPORTER_OTLP_PROTOCOL"},
		{env("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "http://x", "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "http/json"), "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL"},
		{env("OTEL_TRACES_EXPORTER", "zipkin"), "OTEL_TRACES_EXPORTER"},
	} {
		if _, _, err := Setup(context.Background(), tc.env); err == nil || !strings.Contains(err.Error(), tc.name) {
			t.Errorf("Setup: %v, want an error naming %s", err, tc.name)
		}
	}
}

// BenchmarkStartOff is what a span costs the processor with tracing off
// (no parent and with one); compare BenchmarkStartRecorded.
func BenchmarkStartOff(b *testing.B) {
	parent, _ := ParseTraceParent(tpA)
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		_, s := Start(ctx, "apply", parent)
		s.End()
	}
}
