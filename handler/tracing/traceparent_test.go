package tracing

import (
	"context"
	"strings"
	"testing"

	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
)

const (
	tpA = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
	tpB = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00"
)

// otelExtract is the oracle: OpenTelemetry's own W3C propagator.
func otelExtract(v string) trace.SpanContext {
	return trace.SpanContextFromContext(propagation.TraceContext{}.Extract(context.Background(),
		propagation.MapCarrier{"traceparent": v}))
}

func TestParseTraceParent(t *testing.T) {
	for _, tc := range []struct {
		in, why string // why: a word of the error, "" when valid
	}{
		{tpA, ""},
		{tpB, ""},
		{"01-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01-extra", ""}, // a later version may add fields
		{"", "0 characters"},
		{"00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-0", "54 characters"},
		{"00-0AF7651916CD43DD8448EB211C80319C-b7ad6b7169203331-01", "trace id"},
		{"00-00000000000000000000000000000000-b7ad6b7169203331-01", "all zeros"},
		{"00-0af7651916cd43dd8448eb211c80319c-0000000000000000-01", "parent id is all zeros"},
		{"ff-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01", "version ff"},
		{"00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01-x", "nothing after"},
		{"00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-ff", "flag above"},
		{"00_0af7651916cd43dd8448eb211c80319c_b7ad6b7169203331_01", "separated"},
		{"|0af7651916cd43dd8448eb211c80319c.b7ad6b7169203331.1.", "53 characters"}, // a hierarchical Request-Id
		{"01-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01x", "flags"},
	} {
		sc, err := ParseTraceParent(tc.in)
		if tc.why == "" {
			if err != nil || FormatTraceParent(sc)[3:52] != tc.in[3:52] || !sc.IsRemote() {
				t.Errorf("ParseTraceParent(%q) = %v, %v; want it valid", tc.in, sc, err)
			}
		} else if err == nil || !strings.Contains(err.Error(), tc.why) || !strings.Contains(err.Error(), "not a W3C traceparent") {
			t.Errorf("ParseTraceParent(%q) error %v, want one saying %q", tc.in, err, tc.why)
		}
		if want := otelExtract(tc.in); want.IsValid() != (err == nil) || err == nil && !want.Equal(sc) {
			t.Errorf("ParseTraceParent(%q) = %v, %v; OpenTelemetry's propagator gives %v", tc.in, sc, err, want)
		}
	}
	if got := FormatTraceParent(mustParse(t, tpA)); got != tpA {
		t.Errorf("FormatTraceParent round trip: %q, want %q", got, tpA)
	}
}

func mustParse(t *testing.T, s string) trace.SpanContext {
	t.Helper()
	sc, err := ParseTraceParent(s)
	if err != nil {
		t.Fatal(err)
	}
	return sc
}

// FuzzParseTraceParent: whatever a producer or a client sends, the parser
// agrees with OpenTelemetry's propagator on what is valid and on the
// context, and what it accepts formats back to the same ids.
func FuzzParseTraceParent(f *testing.F) {
	for _, s := range []string{tpA, tpB, "", "00-", "01-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01-x",
		"ff-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01", "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-03",
		"00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-0\xff"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		sc, err := ParseTraceParent(s)
		want := otelExtract(s)
		if want.IsValid() != (err == nil) {
			t.Fatalf("ParseTraceParent(%q): error %v; OpenTelemetry's propagator: valid %v", s, err, want.IsValid())
		}
		if err != nil {
			if sc.IsValid() {
				t.Fatalf("ParseTraceParent(%q) returned a valid context with error %v", s, err)
			}
			if !strings.Contains(err.Error(), "not a W3C traceparent") || strings.ContainsAny(err.Error(), "\n\r") {
				t.Fatalf("ParseTraceParent(%q) error %q: want one line saying why", s, err)
			}
			return
		}
		if !want.Equal(sc) {
			t.Fatalf("ParseTraceParent(%q) = %v, OpenTelemetry's propagator %v", s, sc, want)
		}
		if got := FormatTraceParent(sc); got[:52] != "00"+s[2:52] {
			t.Fatalf("FormatTraceParent(ParseTraceParent(%q)) = %q", s, got)
		}
	})
}

func props(kv ...string) func(string) (string, bool) {
	m := map[string]string{}
	for i := 0; i < len(kv); i += 2 {
		m[kv[i]] = kv[i+1]
	}
	return func(k string) (string, bool) { v, ok := m[k]; return v, ok }
}

// TestFromProperties: traceparent first, then Diagnostic-Id, as the .NET
// SDK's MessagingClientDiagnostics reads them; an invalid value is skipped
// and reported, never fatal.
func TestFromProperties(t *testing.T) {
	for _, tc := range []struct {
		name     string
		get      func(string) (string, bool)
		want     string // traceparent of the context, "" for none
		from     string
		problems []string // a word of each problem
	}{
		{"none", props(), "", "", nil},
		{"traceparent only", props("traceparent", tpA), tpA, "traceparent", nil},
		{"Diagnostic-Id only", props("Diagnostic-Id", tpB), tpB, "Diagnostic-Id", nil},
		{"both: traceparent wins", props("traceparent", tpA, "Diagnostic-Id", tpB), tpA, "traceparent", nil},
		{"invalid traceparent: Diagnostic-Id", props("traceparent", "garbage", "Diagnostic-Id", tpB), tpB, "Diagnostic-Id", []string{"application property traceparent"}},
		{"hierarchical Diagnostic-Id", props("Diagnostic-Id", "|abc.1."), "", "", []string{"application property Diagnostic-Id"}},
		{"both invalid", props("traceparent", "x", "Diagnostic-Id", "y"), "", "", []string{"traceparent", "Diagnostic-Id"}},
		{"other case is another property", props("TraceParent", tpA, "diagnostic-id", tpB), "", "", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := FromProperties(tc.get)
			if got := FormatTraceParent(c.SpanContext); got != tc.want || c.From != tc.from {
				t.Errorf("context %q from %q, want %q from %q", got, c.From, tc.want, tc.from)
			}
			if len(c.Problems) != len(tc.problems) {
				t.Fatalf("problems %q, want %d", c.Problems, len(tc.problems))
			}
			for i, p := range tc.problems {
				if !strings.Contains(c.Problems[i], p) || !strings.Contains(c.Problems[i], "not a W3C traceparent") {
					t.Errorf("problem %q, want it to name %q and say why", c.Problems[i], p)
				}
			}
		})
	}
}

func TestFromHeader(t *testing.T) {
	if c := FromHeader(nil); c.SpanContext.IsValid() || c.Problems != nil {
		t.Errorf("no header: %+v", c)
	}
	if c := FromHeader([]string{tpA}); FormatTraceParent(c.SpanContext) != tpA {
		t.Errorf("one header: %+v", c)
	}
	if c := FromHeader([]string{tpA, tpB}); c.SpanContext.IsValid() || len(c.Problems) != 1 {
		t.Errorf("two headers: %+v, want none usable", c)
	}
	if c := FromHeader([]string{"00-xyz"}); c.SpanContext.IsValid() || len(c.Problems) != 1 || !strings.Contains(c.Problems[0], "header traceparent") {
		t.Errorf("invalid header: %+v", c)
	}
}

// TestStamp: a value already set is never overwritten; a message carrying
// its producer's context in one property gets the same in the other.
func TestStamp(t *testing.T) {
	ours := mustParse(t, "00-11111111111111111111111111111111-2222222222222222-01")
	oursTP := FormatTraceParent(ours)
	for _, tc := range []struct {
		name            string
		tp, did         string
		sc              trace.SpanContext
		wantTP, wantDID string
	}{
		{"empty: ours in both", "", "", ours, oursTP, oursTP},
		{"both set: untouched", tpA, tpB, ours, tpA, tpB},
		{"both set, invalid: untouched", "x", "y", ours, "x", "y"},
		{"traceparent only: copied", tpA, "", ours, tpA, tpA},
		{"Diagnostic-Id only: copied", "", tpB, ours, tpB, tpB},
		{"invalid traceparent kept, ours in Diagnostic-Id", "junk", "", ours, "junk", oursTP},
		{"invalid Diagnostic-Id kept, ours in traceparent", "", "|a.1.", ours, oursTP, "|a.1."},
		{"no context: nothing", "", "", trace.SpanContext{}, "", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tp, did := Stamp(tc.tp, tc.did, tc.sc)
			if tp != tc.wantTP || did != tc.wantDID {
				t.Errorf("Stamp(%q, %q) = %q, %q; want %q, %q", tc.tp, tc.did, tp, did, tc.wantTP, tc.wantDID)
			}
			// Whoever reads the result (traceparent first) finds what it
			// found before, when the producer had set a valid context.
			read := func(tp, did string) trace.SpanContext {
				var kv []string
				if tp != "" {
					kv = append(kv, PropTraceParent, tp)
				}
				if did != "" {
					kv = append(kv, PropDiagnosticID, did)
				}
				return FromProperties(props(kv...)).SpanContext
			}
			if before := read(tc.tp, tc.did); before.IsValid() && !read(tp, did).Equal(before) {
				t.Errorf("a reader finds %v, not the producer's %v", read(tp, did), before)
			}
		})
	}
}
