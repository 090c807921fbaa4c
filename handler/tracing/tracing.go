// Package tracing gives the program one trace from a ledger to every apply
// (docs/tracing.md): W3C trace context on the Service Bus messages it sends
// and reads (traceparent and Diagnostic-Id, as the Azure SDKs carry it),
// and OpenTelemetry spans exported over OTLP/HTTP where the standard
// OTEL_EXPORTER_OTLP_* settings point. With none set, the global no-op
// tracer provider stays: no span is recorded or exported, and the program
// only reads and writes the context the messages carry.
package tracing

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync/atomic"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
)

// ScopeName is the instrumentation scope of the program's spans.
const ScopeName = "github.com/convoy-dev/convoy"

// tracer is the program's tracer: the global provider's (which delegates to
// the provider Setup installs), or the one SetTracerProvider gave.
var tracer atomic.Pointer[trace.Tracer]

func init() {
	t := otel.Tracer(ScopeName)
	tracer.Store(&t)
}

// Tracer is the program's tracer.
func Tracer() trace.Tracer { return *tracer.Load() }

// SetTracerProvider makes tp the program's provider and returns what
// restores the previous one: for tests that record spans.
func SetTracerProvider(tp trace.TracerProvider) (restore func()) {
	prev := tracer.Load()
	t := tp.Tracer(ScopeName)
	tracer.Store(&t)
	return func() { tracer.Store(prev) }
}

// Config is what Setup read from the environment.
type Config struct {
	Enabled   bool   // an exporter was built
	Recording bool   // spans are made: an exporter was built, or OTEL_TRACES_EXPORTER=none
	Endpoint  string // the setting that enabled it, for the startup line
}

// Setup installs the global tracer provider from the standard OpenTelemetry
// settings read with getenv (os.Getenv when nil):
//
//   - OTEL_EXPORTER_OTLP_TRACES_ENDPOINT or OTEL_EXPORTER_OTLP_ENDPOINT set:
//     an OTLP/HTTP (protobuf) exporter behind a batch span processor; the
//     exporter itself reads the other OTEL_EXPORTER_OTLP_* settings
//     (headers, timeout, compression, certificates), the SDK reads
//     OTEL_TRACES_SAMPLER*, OTEL_BSP_*, OTEL_SERVICE_NAME and
//     OTEL_RESOURCE_ATTRIBUTES;
//   - OTEL_TRACES_EXPORTER=none ("no automatically configured exporter",
//     as the specification words it and OpenTelemetry Go's autoexport
//     implements it): an SDK provider with no exporter, whatever endpoint
//     is set: spans are made (and sampled) as with an exporter, and
//     exported nowhere;
//   - no endpoint, or OTEL_SDK_DISABLED=true: nothing is installed (the
//     no-op provider stays) and shutdown does nothing.
//
// A protocol other than http/protobuf or an exporter other than otlp is
// refused, naming the setting. shutdown flushes the spans not yet exported.
func Setup(ctx context.Context, getenv func(string) string) (cfg Config, shutdown func(context.Context) error, err error) {
	if getenv == nil {
		getenv = os.Getenv
	}
	shutdown = func(context.Context) error { return nil }
	if strings.EqualFold(strings.TrimSpace(getenv("OTEL_SDK_DISABLED")), "true") {
		return cfg, shutdown, nil
	}
	switch exp := strings.TrimSpace(getenv("OTEL_TRACES_EXPORTER")); exp {
	case "none":
		tp := sdktrace.NewTracerProvider(sdktrace.WithResource(serviceResource(getenv)))
		otel.SetTracerProvider(tp)
		SetTracerProvider(tp)
		cfg.Recording = true
		return cfg, tp.Shutdown, nil
	case "", "otlp":
	default:
		return cfg, shutdown, fmt.Errorf("setting OTEL_TRACES_EXPORTER=%q: only otlp (over HTTP) or none is supported", exp)
	}
	for _, key := range []string{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_EXPORTER_OTLP_ENDPOINT"} {
		if v := strings.TrimSpace(getenv(key)); v != "" {
			cfg.Endpoint = key + "=" + v
			break
		}
	}
	if cfg.Endpoint == "" {
		return cfg, shutdown, nil
	}
	for _, key := range []string{"OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "OTEL_EXPORTER_OTLP_PROTOCOL"} {
		if v := strings.TrimSpace(getenv(key)); v != "" {
			if v != "http/protobuf" {
				return cfg, shutdown, fmt.Errorf("setting %s=%q: only http/protobuf is supported", key, v)
			}
			break
		}
	}
	exp, err := otlptracehttp.New(ctx)
	if err != nil {
		return cfg, shutdown, fmt.Errorf("OTLP trace exporter (%s): %w", cfg.Endpoint, err)
	}
	tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp), sdktrace.WithResource(serviceResource(getenv)))
	otel.SetTracerProvider(tp)
	SetTracerProvider(tp)
	cfg.Enabled, cfg.Recording = true, true
	return cfg, func(ctx context.Context) error {
		return errors.Join(tp.ForceFlush(ctx), tp.Shutdown(ctx))
	}, nil
}

func serviceResource(getenv func(string) string) *resource.Resource {
	res, err := resource.Merge(resource.Default(), resource.NewSchemaless(serviceName(getenv)))
	if err != nil {
		return resource.Default()
	}
	return res
}

// serviceName: OTEL_SERVICE_NAME, else the function app's name
// (WEBSITE_SITE_NAME), else convoy.
func serviceName(getenv func(string) string) attribute.KeyValue {
	for _, key := range []string{"OTEL_SERVICE_NAME", "WEBSITE_SITE_NAME"} {
		if v := strings.TrimSpace(getenv(key)); v != "" {
			return attribute.String("service.name", v)
		}
	}
	return attribute.String("service.name", "convoy")
}

// Start starts a span named name whose parent is parent when valid (a
// remote context read from a message or a request), else the span in ctx,
// else none (a new trace). When tracing is off and there is no parent, the
// span returned is non-recording but carries fresh ids, so that what it
// sends and logs still shares one trace id.
func Start(ctx context.Context, name string, parent trace.SpanContext, opts ...trace.SpanStartOption) (context.Context, trace.Span) {
	if parent.IsValid() {
		ctx = trace.ContextWithRemoteSpanContext(ctx, parent)
	}
	ctx, span := Tracer().Start(ctx, name, opts...)
	if !span.SpanContext().IsValid() {
		ctx = trace.ContextWithSpanContext(ctx, newSpanContext())
		span = trace.SpanFromContext(ctx)
	}
	return ctx, span
}
