// Command otlpprint is a tiny OTLP/HTTP trace receiver for local use: it
// prints each span it receives as one line, so that a ledger's trace can be
// read next to make devhost without a tracing backend (docs/tracing.md):
//
//	go run ./handler/tracing/otlpprint                       # listens on 127.0.0.1:4318
//	OTEL_EXPORTER_OTLP_ENDPOINT=http://127.0.0.1:4318 make devhost
package main

import (
	"encoding/hex"
	"flag"
	"fmt"
	"io"
	"log"
	"net/http"
	"os"
	"slices"
	"strings"
	"sync"

	collectortrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/proto"
)

func main() {
	addr := flag.String("addr", "127.0.0.1:4318", "address to listen on (OTLP/HTTP's port is 4318)")
	flag.Parse()
	log.Printf("otlpprint: receiving OTLP/HTTP traces on http://%s/v1/traces", *addr)
	log.Fatal(http.ListenAndServe(*addr, receiver(os.Stdout)))
}

// receiver decodes OTLP/HTTP protobuf trace exports and prints their spans
// to w, one line each.
func receiver(w io.Writer) http.Handler {
	var mu sync.Mutex
	return http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/v1/traces" || r.Method != http.MethodPost {
			http.Error(rw, "only POST /v1/traces (OTLP/HTTP traces)", http.StatusNotFound)
			return
		}
		if ct := r.Header.Get("Content-Type"); ct != "application/x-protobuf" {
			http.Error(rw, "only application/x-protobuf (set OTEL_EXPORTER_OTLP_PROTOCOL=http/protobuf)", http.StatusUnsupportedMediaType)
			return
		}
		body, err := io.ReadAll(r.Body)
		var req collectortrace.ExportTraceServiceRequest
		if err == nil {
			err = proto.Unmarshal(body, &req)
		}
		if err != nil {
			http.Error(rw, err.Error(), http.StatusBadRequest)
			return
		}
		mu.Lock()
		for _, rs := range req.GetResourceSpans() {
			for _, ss := range rs.GetScopeSpans() {
				for _, s := range ss.GetSpans() {
					fmt.Fprintln(w, line(s))
				}
			}
		}
		mu.Unlock()
		out, _ := proto.Marshal(&collectortrace.ExportTraceServiceResponse{})
		rw.Header().Set("Content-Type", "application/x-protobuf")
		_, _ = rw.Write(out)
	})
}

// line is a span as one line: trace, span, parent, name, duration,
// attributes sorted by key, links, and the status when an error.
func line(s *tracepb.Span) string {
	parent := hex.EncodeToString(s.GetParentSpanId())
	if parent == "" {
		parent = "-"
	}
	var b strings.Builder
	fmt.Fprintf(&b, "trace=%x span=%x parent=%s name=%q ms=%.1f", s.GetTraceId(), s.GetSpanId(), parent, s.GetName(),
		float64(s.GetEndTimeUnixNano()-s.GetStartTimeUnixNano())/1e6)
	attrs := s.GetAttributes()
	slices.SortFunc(attrs, func(a, b *commonpb.KeyValue) int { return strings.Compare(a.GetKey(), b.GetKey()) })
	for _, kv := range attrs {
		fmt.Fprintf(&b, " %s=%s", kv.GetKey(), value(kv.GetValue()))
	}
	for _, l := range s.GetLinks() {
		fmt.Fprintf(&b, " link=%x-%x", l.GetTraceId(), l.GetSpanId())
	}
	if s.GetStatus().GetCode() == tracepb.Status_STATUS_CODE_ERROR {
		fmt.Fprintf(&b, " status=error error=%q", s.GetStatus().GetMessage())
	}
	return b.String()
}

func value(v *commonpb.AnyValue) string {
	switch x := v.GetValue().(type) {
	case *commonpb.AnyValue_StringValue:
		return fmt.Sprintf("%q", x.StringValue)
	case *commonpb.AnyValue_IntValue:
		return fmt.Sprint(x.IntValue)
	case *commonpb.AnyValue_BoolValue:
		return fmt.Sprint(x.BoolValue)
	case *commonpb.AnyValue_DoubleValue:
		return fmt.Sprint(x.DoubleValue)
	}
	return v.String()
}
