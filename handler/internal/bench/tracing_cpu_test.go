package bench_test

import (
	"compress/gzip"
	"crypto/rand"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"slices"
	"strconv"
	"sync/atomic"
	"testing"

	"go.opentelemetry.io/otel/trace"
	collectortrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	"google.golang.org/protobuf/proto"
)

// BenchmarkTracingCPU (issue 28): the handler process's CPU per
// OrderProcessor message on BenchmarkHandlerCPU's workload (16 sessions of
// 300 messages, the host's encoding, real Azurite) in three modes, each
// message sent with the trace context of one sampled ledger publish span:
//
//   - off: no OTEL_* setting, so tracing.Setup builds nothing (the no-op
//     provider; the handler only reads the context and logs its ids);
//   - spans: OTEL_TRACES_EXPORTER=none, an SDK provider with no exporter:
//     every message gets a span of its own, made and exported nowhere;
//   - export: OTEL_EXPORTER_OTLP_ENDPOINT at an OTLP/HTTP receiver in this
//     process (POST /v1/traces, spans decoded and counted), the default
//     batch span processor; the CPU is read once the receiver holds a span
//     per message, so that it includes their export.
//
// Each mode runs once per round in a handler process of its own, the order
// rotated from round to round; the ratios are the median of each round's
// ratio to the off run of the same round. The run checks that the modes are
// what they say: off, every "order message" line names the sender's span;
// spans and export, each names a span of its own. The critical times
// (criticalTimeMs on those lines, from the host's Logs) are pooled over
// every run: all the messages are sent at once, so they are mostly the wait
// behind the backlog.
func BenchmarkTracingCPU(b *testing.B) {
	const sessions, perOrder, rounds = 16, 300, 5
	az := sharedAzurite(b)
	recv := newSpanReceiver(b)
	modes := []struct {
		name     string
		settings map[string]string
	}{
		{"off", nil},
		{"spans", map[string]string{"OTEL_TRACES_EXPORTER": "none"}},
		{"export", map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": recv.url}},
	}
	for i := range b.N {
		cpu := map[string][]float64{}
		var spansVsOff, exportVsOff, critical []float64
		var exported, exportMessages int64
		for r := range rounds {
			perMsg := map[string]float64{}
			for k := range modes {
				m := modes[(r+k)%len(modes)]
				parent := sampledContext()
				x := pipelineExtra{settings: m.settings, trace: parent}
				before := recv.spans.Load()
				if m.name == "export" {
					x.settled = func() bool { return recv.spans.Load()-before >= sessions*perOrder }
				}
				run := pipelineWith(b, az, fmt.Sprintf("trace%s%d%d", m.name, i, r), sessions, perOrder, false, x)
				if m.name == "export" {
					exported += recv.spans.Load() - before
					exportMessages += int64(run.messages)
				}
				times := checkTraceLines(b, m.name, run, parent)
				critical = append(critical, times...)
				perMsg[m.name] = run.handlerCPU.Seconds() / float64(run.messages)
				cpu[m.name] = append(cpu[m.name], perMsg[m.name])
			}
			b.Logf("round %d: CPU per message off %.0f µs, spans %.0f µs, export %.0f µs", r, perMsg["off"]*1e6, perMsg["spans"]*1e6, perMsg["export"]*1e6)
			spansVsOff = append(spansVsOff, perMsg["spans"]/perMsg["off"])
			exportVsOff = append(exportVsOff, perMsg["export"]/perMsg["off"])
		}
		if exported == 0 {
			b.Fatal("export mode: the receiver got no span")
		}
		off := median(cpu["off"])
		record(figure{name: "tracing_off_cpu_per_message", value: off * 1e6, unit: "us",
			what: fmt.Sprintf("handler CPU per OrderProcessor message, no OTEL_* setting (median of %d runs): the configuration of handler_cpu_per_message; what the off path costs against no tracing code is BenchmarkOrderInvocationTracing's", rounds)})
		record(figure{name: "tracing_spans_cpu_per_message", value: median(cpu["spans"]) * 1e6, unit: "us",
			what: "the same with OTEL_TRACES_EXPORTER=none: a span per message, made, exported nowhere"})
		record(figure{name: "tracing_export_cpu_per_message", value: median(cpu["export"]) * 1e6, unit: "us",
			what: "the same exporting over OTLP/HTTP to a receiver in the benchmark's process"})
		ratio("tracing_spans_vs_off", median(spansVsOff),
			fmt.Sprintf("spans made, not exported / off, median of %d rounds' ratios (modes interleaved)", rounds), target{})
		ratio("tracing_export_vs_off", median(exportVsOff),
			fmt.Sprintf("OTLP/HTTP export / off, median of %d rounds' ratios; range %.2f–%.2f", rounds, slices.Min(exportVsOff), slices.Max(exportVsOff)), atMost(1.2))
		ratio("tracing_export_spans_per_message", float64(exported)/float64(exportMessages),
			"spans the receiver got per message sent in export mode (one apply span each)", target{})
		if _, ok := figureValue("handler_cpu_per_message"); ok {
			h, _ := figureValue("handler_cpu_per_message")
			ratio("tracing_off_vs_handler_cpu", off*1e6/h,
				"tracing_off_cpu_per_message / handler_cpu_per_message of this run: the same configuration measured twice (the noise between runs; the off path's cost is below it)", target{})
		}
		slices.Sort(critical)
		pct := func(p float64) float64 { return critical[min(len(critical)-1, int(p*float64(len(critical))))] }
		what := fmt.Sprintf("critical time (enqueued to applied, criticalTimeMs of the handler's lines) over the %d messages of every run; all sent at once, so mostly the wait behind the backlog", len(critical))
		record(figure{name: "critical_time_p50_ms", value: pct(0.50), unit: "ms", what: what + ": median"})
		record(figure{name: "critical_time_p99_ms", value: pct(0.99), unit: "ms", what: "the same, 99th percentile"})
	}
}

// figureValue is a figure already recorded in this run.
func figureValue(name string) (float64, bool) {
	results.mu.Lock()
	defer results.mu.Unlock()
	for _, f := range results.figures {
		if f.name == name {
			return f.value, true
		}
	}
	return 0, false
}

// sampledContext is a new ledger publish span's context, sampled, as the
// publisher sends it with tracing on.
func sampledContext() trace.SpanContext {
	var cfg trace.SpanContextConfig
	rand.Read(cfg.TraceID[:])
	rand.Read(cfg.SpanID[:])
	cfg.TraceFlags = trace.FlagsSampled
	return trace.NewSpanContext(cfg)
}

var (
	orderLine    = regexp.MustCompile(`^order message .*outcome=applied`)
	spanIDField  = regexp.MustCompile(` spanId=([0-9a-f]{16})\b`)
	traceIDField = regexp.MustCompile(` traceId=([0-9a-f]{32})\b`)
	criticalMs   = regexp.MustCompile(` criticalTimeMs=([0-9]+)\b`)
)

// checkTraceLines checks that every message was applied in the sender's
// trace, under the sender's span when tracing is off and under a span of
// its own otherwise, and returns the critical times of the lines (ms).
func checkTraceLines(b *testing.B, mode string, run pipelineRun, parent trace.SpanContext) []float64 {
	b.Helper()
	var times []float64
	for _, l := range run.logs {
		if !orderLine.MatchString(l) {
			continue
		}
		tid, sid := traceIDField.FindStringSubmatch(l), spanIDField.FindStringSubmatch(l)
		if tid == nil || sid == nil || tid[1] != parent.TraceID().String() {
			b.Fatalf("%s: a line not in the sender's trace %s: %s", mode, parent.TraceID(), l)
		}
		if own := sid[1] != parent.SpanID().String(); own != (mode != "off") {
			b.Fatalf("%s: span of its own %v, want %v: %s", mode, own, mode != "off", l)
		}
		if c := criticalMs.FindStringSubmatch(l); c != nil {
			v, _ := strconv.ParseFloat(c[1], 64)
			times = append(times, v)
		}
	}
	if len(times) != run.messages {
		b.Fatalf("%s: %d applied lines with criticalTimeMs in the host's Logs, want %d", mode, len(times), run.messages)
	}
	return times
}

// spanReceiver is an OTLP/HTTP trace receiver that counts the spans it gets.
type spanReceiver struct {
	url   string
	spans atomic.Int64
}

func newSpanReceiver(b *testing.B) *spanReceiver {
	r := &spanReceiver{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if req.Method != http.MethodPost || req.URL.Path != "/v1/traces" {
			http.Error(w, "only POST /v1/traces", http.StatusNotFound)
			return
		}
		var body io.Reader = req.Body
		if req.Header.Get("Content-Encoding") == "gzip" {
			zr, err := gzip.NewReader(req.Body)
			if err != nil {
				http.Error(w, err.Error(), http.StatusBadRequest)
				return
			}
			body = zr
		}
		data, err := io.ReadAll(body)
		var msg collectortrace.ExportTraceServiceRequest
		if err == nil {
			err = proto.Unmarshal(data, &msg)
		}
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		for _, rs := range msg.GetResourceSpans() {
			for _, ss := range rs.GetScopeSpans() {
				r.spans.Add(int64(len(ss.GetSpans())))
			}
		}
		out, _ := proto.Marshal(&collectortrace.ExportTraceServiceResponse{})
		w.Header().Set("Content-Type", "application/x-protobuf")
		w.Write(out)
	}))
	b.Cleanup(srv.Close)
	r.url = srv.URL
	return r
}
