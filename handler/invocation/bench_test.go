package invocation_test

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/convoy-dev/convoy/handler/invocation"
)

// BenchmarkDecodeVsUnmarshal: decoding a batch invocation (double-encoded
// values, …Array keys) against a plain json.Unmarshal of the same payload.
func BenchmarkDecodeVsUnmarshal(b *testing.B) {
	payload := golden(b, "servicebus-batch.json")
	var base, subject time.Duration
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		t0 := time.Now()
		var generic map[string]any
		if err := json.Unmarshal(payload, &generic); err != nil {
			b.Fatal(err)
		}
		t1 := time.Now()
		r, err := invocation.Parse(payload)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := r.ServiceBusMessages("message"); err != nil {
			b.Fatal(err)
		}
		base, subject = base+t1.Sub(t0), subject+time.Since(t1)
	}
	b.ReportMetric(float64(subject)/float64(base), "x_json_unmarshal")
}
