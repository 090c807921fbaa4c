package main

import (
	"bytes"
	"context"
	"net/http/httptest"
	"strings"
	"testing"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
)

// TestPrintsWhatTheExporterSends: spans from the real OTLP/HTTP exporter
// come out one line each, child under parent.
func TestPrintsWhatTheExporterSends(t *testing.T) {
	var out bytes.Buffer
	srv := httptest.NewServer(receiver(&out))
	defer srv.Close()
	ctx := context.Background()
	exp, err := otlptracehttp.New(ctx, otlptracehttp.WithEndpointURL(srv.URL+"/v1/traces"))
	if err != nil {
		t.Fatal(err)
	}
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	pctx, parent := tp.Tracer("t").Start(ctx, "publish ledger")
	_, child := tp.Tracer("t").Start(pctx, "apply")
	child.SetAttributes(attribute.String("convoy.order_id", "o-1"), attribute.Int64("convoy.seq", 2))
	child.End()
	parent.End()
	if err := tp.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) != 2 {
		t.Fatalf("printed %q, want two lines", out.String())
	}
	p, c := parent.SpanContext(), child.SpanContext()
	wantChild := "trace=" + c.TraceID().String() + " span=" + c.SpanID().String() + " parent=" + p.SpanID().String() + ` name="apply"`
	if !strings.HasPrefix(lines[0], wantChild) || !strings.Contains(lines[0], ` convoy.order_id="o-1" convoy.seq=2`) {
		t.Fatalf("line %q, want it to start %q with the attributes", lines[0], wantChild)
	}
	if !strings.Contains(lines[1], " parent=- name=\"publish ledger\"") {
		t.Fatalf("line %q: the root span", lines[1])
	}
}
