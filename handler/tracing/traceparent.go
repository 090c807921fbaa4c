package tracing

import (
	"fmt"
	"math/rand/v2"

	"go.opentelemetry.io/otel/trace"
)

// Where trace context travels (docs/tracing.md).
const (
	// PropTraceParent and PropDiagnosticID are the application properties a
	// Service Bus message carries its W3C traceparent in: the Azure SDKs
	// read traceparent first, then Diagnostic-Id (the older name, the only
	// one older SDKs set), and set both to the same value.
	PropTraceParent  = "traceparent"
	PropDiagnosticID = "Diagnostic-Id"
	// HeaderTraceParent is the W3C HTTP header.
	HeaderTraceParent = "traceparent"
)

// traceParentLen is the length of a version 00 traceparent:
// 2 + 1 + 32 + 1 + 16 + 1 + 2.
const traceParentLen = 55

// ParseTraceParent parses a W3C traceparent (version-traceid-parentid-flags,
// lowercase hex) from outside input, as OpenTelemetry's TraceContext
// propagator accepts it: version ff, a zero trace or parent id, upper-case
// hex, a version 00 value with anything after its flags or with flags above
// 03 are refused; a later version may add fields after a '-'. The error says
// what is wrong, with the value quoted (it may hold anything).
func ParseTraceParent(s string) (trace.SpanContext, error) {
	bad := func(why string) (trace.SpanContext, error) {
		if len(s) > 80 {
			return trace.SpanContext{}, fmt.Errorf("%q… (%d bytes) is not a W3C traceparent: %s", s[:80], len(s), why)
		}
		return trace.SpanContext{}, fmt.Errorf("%q is not a W3C traceparent: %s", s, why)
	}
	if len(s) < traceParentLen {
		return bad(fmt.Sprintf("%d characters, want 55 (00-<32 hex>-<16 hex>-<2 hex>)", len(s)))
	}
	if s[2] != '-' || s[35] != '-' || s[52] != '-' {
		return bad("want version-traceid-parentid-flags separated by '-'")
	}
	var ver [1]byte
	if !hexPart(ver[:], s[0:2]) {
		return bad("the version is not 2 lowercase hex digits")
	}
	if ver[0] == 0xff {
		return bad("version ff is invalid")
	}
	var cfg trace.SpanContextConfig
	if !hexPart(cfg.TraceID[:], s[3:35]) {
		return bad("the trace id is not 32 lowercase hex digits")
	}
	if !hexPart(cfg.SpanID[:], s[36:52]) {
		return bad("the parent id is not 16 lowercase hex digits")
	}
	var flags [1]byte
	if !hexPart(flags[:], s[53:55]) {
		return bad("the flags are not 2 lowercase hex digits")
	}
	switch {
	case ver[0] == 0 && len(s) != traceParentLen:
		return bad("version 00 has nothing after its flags")
	case ver[0] == 0 && flags[0] > 3:
		return bad("version 00 allows no flag above 03")
	case len(s) > traceParentLen && s[traceParentLen] != '-':
		return bad("the flags are not 2 lowercase hex digits")
	case !cfg.TraceID.IsValid():
		return bad("the trace id is all zeros")
	case !cfg.SpanID.IsValid():
		return bad("the parent id is all zeros")
	}
	cfg.TraceFlags = trace.TraceFlags(flags[0]) & (trace.FlagsSampled | trace.FlagsRandom)
	cfg.Remote = true
	return trace.NewSpanContext(cfg), nil
}

// hexPart decodes lowercase hex into dst; false on any other character.
func hexPart(dst []byte, s string) bool {
	for i := range dst {
		hi, ok1 := lowerHex(s[2*i])
		lo, ok2 := lowerHex(s[2*i+1])
		if !ok1 || !ok2 {
			return false
		}
		dst[i] = hi<<4 | lo
	}
	return true
}

func lowerHex(c byte) (byte, bool) {
	switch {
	case '0' <= c && c <= '9':
		return c - '0', true
	case 'a' <= c && c <= 'f':
		return c - 'a' + 10, true
	}
	return 0, false
}

// FormatTraceParent is sc as a version 00 traceparent ("" for an invalid
// context).
func FormatTraceParent(sc trace.SpanContext) string {
	if !sc.IsValid() {
		return ""
	}
	return "00-" + sc.TraceID().String() + "-" + sc.SpanID().String() + "-" + sc.TraceFlags().String()
}

// Context is the trace context found on a message or a request.
type Context struct {
	SpanContext trace.SpanContext // invalid when none was usable
	From        string            // the property or header it came from
	Problems    []string          // values present but unusable, each with why
}

// FromProperties returns a message's trace context from its application
// properties as the Azure SDKs read it (MessagingClientDiagnostics): a valid
// traceparent, else a valid Diagnostic-Id. get returns a property as a
// string, ok false when absent. A value present but not a W3C traceparent
// (a hierarchical Request-Id, a number, garbage) is skipped and reported in
// Problems, never fatal: a message is processed with or without a trace.
func FromProperties(get func(key string) (string, bool)) Context {
	var c Context
	for _, key := range []string{PropTraceParent, PropDiagnosticID} {
		v, ok := get(key)
		if !ok {
			continue
		}
		sc, err := ParseTraceParent(v)
		if err != nil {
			c.Problems = append(c.Problems, "application property "+key+": "+err.Error())
			continue
		}
		c.SpanContext, c.From = sc, key
		return c
	}
	return c
}

// FromHeader returns the trace context of an HTTP request's traceparent
// header values (none, or an invalid one, gives an invalid context and,
// for an invalid one, a problem).
func FromHeader(values []string) Context {
	var c Context
	switch len(values) {
	case 0:
		return c
	case 1:
		sc, err := ParseTraceParent(values[0])
		if err != nil {
			c.Problems = []string{"header traceparent: " + err.Error()}
			return c
		}
		c.SpanContext, c.From = sc, "header traceparent"
	default:
		// W3C: a request with several traceparent headers has none usable.
		c.Problems = []string{fmt.Sprintf("header traceparent: %d values, want one", len(values))}
	}
	return c
}

// Stamp returns a message's traceparent and Diagnostic-Id properties once
// stamped with sc, as the .NET SDK stamps on send: a value already set is
// never overwritten. When one of the two holds a valid context and the
// other is empty, the other gets the same value (so a message that carried
// only a Diagnostic-Id keeps its producer's trace, whoever reads it); when
// neither holds one, each empty one gets sc.
func Stamp(traceParent, diagnosticID string, sc trace.SpanContext) (string, string) {
	if traceParent != "" && diagnosticID != "" {
		return traceParent, diagnosticID
	}
	value := FormatTraceParent(sc)
	for _, have := range []string{traceParent, diagnosticID} {
		if have == "" {
			continue
		}
		if _, err := ParseTraceParent(have); err == nil {
			value = have
		}
	}
	if value == "" {
		return traceParent, diagnosticID
	}
	if traceParent == "" {
		traceParent = value
	}
	if diagnosticID == "" {
		diagnosticID = value
	}
	return traceParent, diagnosticID
}

// newSpanContext is a context of fresh random ids, not sampled: the trace
// a ledger starts when tracing is off, so that its messages and the log
// lines about them still share one trace id.
func newSpanContext() trace.SpanContext {
	var cfg trace.SpanContextConfig
	for !cfg.TraceID.IsValid() {
		hi, lo := rand.Uint64(), rand.Uint64()
		for i := range 8 {
			cfg.TraceID[i], cfg.TraceID[8+i] = byte(hi>>(56-8*i)), byte(lo>>(56-8*i))
		}
	}
	for !cfg.SpanID.IsValid() {
		v := rand.Uint64()
		for i := range 8 {
			cfg.SpanID[i] = byte(v >> (56 - 8*i))
		}
	}
	return trace.NewSpanContext(cfg)
}
