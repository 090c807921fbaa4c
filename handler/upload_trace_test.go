package handler_test

import (
	"bytes"
	"encoding/json"
	"net/http/httptest"
	"strings"
	"testing"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/convoy-dev/convoy/handler"
	"github.com/convoy-dev/convoy/handler/fault"
	"github.com/convoy-dev/convoy/handler/internal/ledgertest"
	"github.com/convoy-dev/convoy/handler/internal/memstore"
	"github.com/convoy-dev/convoy/handler/ledger"
	"github.com/convoy-dev/convoy/handler/tracing"
)

// TestLedgerUploadAnswersItsTraceId: an upload answers, and logs, the trace
// id of the ledger's trace, which is the one its publish span was recorded
// in: the client's traceparent's when it sent one, else a new trace's.
func TestLedgerUploadAnswersItsTraceId(t *testing.T) {
	rec := tracetest.NewSpanRecorder()
	t.Cleanup(tracing.SetTracerProvider(sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))))
	var logs bytes.Buffer
	srv := handler.New(handler.Deps{
		Ledgers: ledgertest.Publisher(memstore.NewLedgers(), &ledgertest.Sender{}, ledger.PublisherOptions{Retry: fault.RetryPolicy{MaxAttempts: 1}}),
		Logger:  handler.NewLogger("text", "info", &logs, &logs), MaxRequestBytes: 1 << 16,
	})
	doc := golden(t, "ledger-contract-example.json")
	for _, tc := range []struct{ name, traceParent, want string }{
		{"the client's trace", "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01", "0af7651916cd43dd8448eb211c80319c"},
		{"a trace of its own", "", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			logs.Reset()
			req := httptest.NewRequest("POST", "/api/ledgers", bytes.NewReader(doc))
			req.Header.Set("Content-Type", "application/json")
			if tc.traceParent != "" {
				req.Header.Set("traceparent", tc.traceParent)
			}
			w := httptest.NewRecorder()
			srv.ServeHTTP(w, req)
			var out map[string]any
			if err := json.Unmarshal(w.Body.Bytes(), &out); err != nil || w.Code >= 300 {
				t.Fatalf("upload: %d %s", w.Code, w.Body)
			}
			got, _ := out["traceId"].(string)
			spans := rec.Ended()
			span := spans[len(spans)-1]
			if span.Name() != "publish ledger" || got != span.SpanContext().TraceID().String() || (tc.want != "" && got != tc.want) {
				t.Fatalf("answered traceId %q; the last span %q is in trace %s (want %q)", got, span.Name(), span.SpanContext().TraceID(), tc.want)
			}
			if !strings.Contains(logs.String(), "function=LedgerUpload") || !strings.Contains(logs.String(), "traceId="+got) {
				t.Fatalf("no LedgerUpload line with traceId=%s:\n%s", got, logs.String())
			}
		})
	}
}
