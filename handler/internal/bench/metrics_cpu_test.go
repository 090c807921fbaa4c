package bench_test

import (
	"compress/gzip"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync/atomic"
	"testing"

	collectormetrics "go.opentelemetry.io/proto/otlp/collector/metrics/v1"
	"google.golang.org/protobuf/proto"
)

// BenchmarkMetricsCPU (issue 45): the handler process's CPU per
// OrderProcessor message on BenchmarkHandlerCPU's workload (16 sessions of
// 300 messages, the host's encoding, real Azurite), in two modes, tracing
// off in both:
//
//   - off: no OTEL_* setting, so metrics.Setup builds nothing (a nil
//     recorder: a nil check per call);
//   - export: OTEL_EXPORTER_OTLP_METRICS_ENDPOINT at an OTLP/HTTP receiver
//     in this process (POST /v1/metrics, decoded), exporting every second
//     (OTEL_METRIC_EXPORT_INTERVAL=1000, sixty times the default); the CPU
//     is read once the receiver holds an export that counts every message
//     (messaging.client.consumed.messages), so that it includes exports.
//
// Each mode runs once per round in a handler process of its own, the order
// alternating from round to round; the ratio is the median of each round's
// export / off.
func BenchmarkMetricsCPU(b *testing.B) {
	const sessions, perOrder, rounds = 16, 300, 5
	az := sharedAzurite(b)
	recv := newMetricsReceiver(b)
	modes := []struct {
		name     string
		settings map[string]string
	}{
		{"off", nil},
		{"export", map[string]string{"OTEL_EXPORTER_OTLP_METRICS_ENDPOINT": recv.url + "/v1/metrics", "OTEL_METRIC_EXPORT_INTERVAL": "1000"}},
	}
	for i := range b.N {
		cpu := map[string][]float64{}
		var exportVsOff []float64
		for r := range rounds {
			perMsg := map[string]float64{}
			for k := range modes {
				m := modes[(r+k)%len(modes)]
				x := pipelineExtra{settings: m.settings}
				if m.name == "export" {
					recv.consumed.Store(0)
					x.settled = func() bool { return recv.consumed.Load() >= sessions*perOrder }
				}
				run := pipelineWith(b, az, fmt.Sprintf("metrics%s%d%d", m.name, i, r), sessions, perOrder, false, x)
				if got := recv.consumed.Load(); m.name == "export" && got != int64(run.messages) {
					b.Fatalf("export: the receiver counted %d consumed messages, want %d", got, run.messages)
				}
				perMsg[m.name] = run.handlerCPU.Seconds() / float64(run.messages)
				cpu[m.name] = append(cpu[m.name], perMsg[m.name])
			}
			b.Logf("round %d: CPU per message off %.0f µs, export %.0f µs", r, perMsg["off"]*1e6, perMsg["export"]*1e6)
			exportVsOff = append(exportVsOff, perMsg["export"]/perMsg["off"])
		}
		record(figure{name: "metrics_off_cpu_per_message", value: median(cpu["off"]) * 1e6, unit: "us",
			what: fmt.Sprintf("handler CPU per OrderProcessor message, no OTEL_* setting (median of %d runs)", rounds)})
		record(figure{name: "metrics_export_cpu_per_message", value: median(cpu["export"]) * 1e6, unit: "us",
			what: "the same exporting metrics over OTLP/HTTP every second to a receiver in the benchmark's process"})
		ratio("metrics_export_vs_off", median(exportVsOff),
			fmt.Sprintf("handler CPU per message, metrics exported / off, median of %d rounds' ratios (modes alternated); range %.2f–%.2f", rounds, slices.Min(exportVsOff), slices.Max(exportVsOff)), atMost(1.1))
	}
}

// metricsReceiver is an OTLP/HTTP metrics receiver that keeps the latest
// messaging.client.consumed.messages of OrderProcessor (cumulative: the
// handler's count since it started).
type metricsReceiver struct {
	url      string
	consumed atomic.Int64
}

func newMetricsReceiver(b *testing.B) *metricsReceiver {
	r := &metricsReceiver{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if req.Method != http.MethodPost || req.URL.Path != "/v1/metrics" {
			http.Error(w, "only POST /v1/metrics", http.StatusNotFound)
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
		var msg collectormetrics.ExportMetricsServiceRequest
		if err == nil {
			err = proto.Unmarshal(data, &msg)
		}
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		for _, rm := range msg.GetResourceMetrics() {
			for _, sm := range rm.GetScopeMetrics() {
				for _, m := range sm.GetMetrics() {
					if m.GetName() != "messaging.client.consumed.messages" {
						continue
					}
					var n int64
					for _, p := range m.GetSum().GetDataPoints() {
						n += p.GetAsInt() // with and without error.type
					}
					r.consumed.Store(n)
				}
			}
		}
		out, _ := proto.Marshal(&collectormetrics.ExportMetricsServiceResponse{})
		w.Header().Set("Content-Type", "application/x-protobuf")
		w.Write(out)
	}))
	b.Cleanup(srv.Close)
	r.url = srv.URL
	return r
}
