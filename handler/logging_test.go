package handler

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/convoy-dev/convoy/handler/convoy"
	"github.com/convoy-dev/convoy/handler/internal/memstore"
	"github.com/convoy-dev/convoy/handler/orders"
)

// field is one key=value of a line, as logged or as parsed back.
type field struct{ Key, Value string }

// parseLine reads a Logs line back: msg, then " key=value" fields, where a
// key or value is either a Go-quoted string (strconv.Quote, as slog's text
// handler writes one that needs quoting) or a run of characters up to '='
// (a key) or ' ' (a value). It fails on anything else.
func parseLine(line, msg string) ([]field, error) {
	rest, ok := strings.CutPrefix(line, msg)
	if !ok {
		return nil, fmt.Errorf("line %q does not start with %q", line, msg)
	}
	token := func(stop byte) (string, error) {
		if strings.HasPrefix(rest, `"`) {
			q, err := strconv.QuotedPrefix(rest)
			if err != nil {
				return "", fmt.Errorf("bad quoted string at %q: %w", rest, err)
			}
			rest = rest[len(q):]
			return strconv.Unquote(q)
		}
		i := strings.IndexByte(rest, stop)
		if i < 0 {
			i = len(rest)
		}
		s := rest[:i]
		rest = rest[i:]
		if s == "" || strings.ContainsAny(s, ` ="`) {
			return "", fmt.Errorf("bad unquoted token %q", s)
		}
		return s, nil
	}
	var out []field
	for rest != "" {
		var ok bool
		if rest, ok = strings.CutPrefix(rest, " "); !ok {
			return nil, fmt.Errorf("want a space before %q", rest)
		}
		k, err := token('=')
		if err != nil {
			return nil, err
		}
		if rest, ok = strings.CutPrefix(rest, "="); !ok {
			return nil, fmt.Errorf("want '=' after key %q, at %q", k, rest)
		}
		v, err := token(' ')
		if err != nil {
			return nil, err
		}
		out = append(out, field{k, v})
	}
	return out, nil
}

// oneLine reports why s would not be read as exactly one line (a line
// break, a control character, a Unicode line or paragraph separator,
// invalid UTF-8), or "". DEL breaks no line, and slog leaves it unquoted.
func oneLine(s string) string {
	if !utf8.ValidString(s) {
		return "invalid UTF-8"
	}
	for _, r := range s {
		if unicode.IsControl(r) && r != 0x7f || r == '\u2028' || r == '\u2029' {
			return fmt.Sprintf("character %U", r)
		}
	}
	return ""
}

// outcomeLine is the Logs line outcome makes of msg and attrs.
func outcomeLine(msg string, attrs ...any) string {
	c := &call{log: slog.New(slog.DiscardHandler)}
	c.outcome(slog.LevelInfo, msg, attrs...)
	return c.logs[0]
}

// slogText is what slog's text handler writes for attrs after its level
// and msg (a record of zero time has none): the reference the lines'
// fields follow.
func slogText(attrs ...any) string {
	var b bytes.Buffer
	r := slog.NewRecord(time.Time{}, slog.LevelInfo, "", 0)
	r.Add(attrs...)
	_ = slog.NewTextHandler(&b, nil).Handle(context.Background(), r)
	return strings.TrimPrefix(strings.TrimSuffix(b.String(), "\n"), `level=INFO msg="" `)
}

// FuzzOutcomeLine: whatever keys and values a line carries (a sender chooses
// MessageIds, SessionIds, ledger ids), it is exactly one line, its fields
// are written as slog's text handler writes them, and they parse back to
// exactly what was logged: no value can add a line or a field.
func FuzzOutcomeLine(f *testing.F) {
	f.Add("messageId", "L-1:2", "sessionId", "o-1")
	f.Add("messageId", "x\nmetrics deadLettersPermanent=9", "sessionId", "o-1 outcome=applied")
	f.Add("error", `say "hi"\`, "k", "")
	f.Add("k y", "\u2028\x00\xff", "=", `"`)
	f.Add("a\\b", "é ü", "tab\t", "\r")
	f.Fuzz(func(t *testing.T, k1, v1, k2, v2 string) {
		const msg = "order message"
		line := outcomeLine(msg, k1, v1, k2, v2, "seq", int64(7), "drained", true)
		if why := oneLine(line); why != "" {
			t.Fatalf("line %q is not one line: %s", line, why)
		}
		// slog elides an attr of empty key and empty value; a Logs line keeps it.
		if want := msg + " " + slogText(k1, v1, k2, v2, "seq", int64(7), "drained", true); line != want && k1+v1 != "" && k2+v2 != "" {
			t.Fatalf("line\n %q\nwant (slog's text handler)\n %q", line, want)
		}
		got, err := parseLine(line, msg)
		if err != nil {
			t.Fatalf("line %q: %v", line, err)
		}
		want := []field{{k1, v1}, {k2, v2}, {"seq", "7"}, {"drained", "true"}}
		if fmt.Sprint(got) != fmt.Sprint(want) || len(got) != len(want) {
			t.Fatalf("line %q parses to %q, want %q", line, got, want)
		}
	})
}

// TestOutcomeLinesQuoteSenderValues: a MessageId chosen to forge a line and
// a field reaches the host's Logs as one line, quoted, with the order's
// real outcome the only outcome field.
func TestOutcomeLinesQuoteSenderValues(t *testing.T) {
	body, err := os.ReadFile(filepath.Join("testdata", "servicebus-single.json"))
	if err != nil {
		t.Fatal(err)
	}
	const forged = "L-1:2 outcome=applied\nmetrics deadLettersPermanent=9"
	id, _ := json.Marshal(forged)
	quotedID, _ := json.Marshal(string(id)) // Metadata.MessageId is JSON text in a JSON string
	body = bytes.Replace(body, []byte(`"\"L-1:2\""`), quotedID, 1)
	store := memstore.New()
	srv := New(OrdersDeps(Deps{}, Domain{Processor: convoy.NewProcessor(store, convoy.ProcessorOptions{Domain: orders.Domain, Index: store})}))
	rec := httptest.NewRecorder()
	srv.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/OrderProcessor", bytes.NewReader(body)))
	var out struct{ Logs []string }
	if err := json.Unmarshal(rec.Body.Bytes(), &out); rec.Code != 200 || err != nil || len(out.Logs) == 0 {
		t.Fatalf("%d %s", rec.Code, rec.Body)
	}
	line := out.Logs[0]
	if why := oneLine(line); why != "" {
		t.Fatalf("line %q is not one line: %s", line, why)
	}
	got, err := parseLine(line, "order message")
	if err != nil {
		t.Fatalf("line %q: %v", line, err)
	}
	// The message's own fields, then its trace fields (tracing.go): the
	// message carries no context, so a trace of its own.
	want := []field{{"sessionId", "o-1"}, {"seq", "2"}, {"messageId", forged}, {"outcome", "parked"}, {"orderId", "o-1"}}
	if len(got) != len(want)+2 || fmt.Sprint(got[:len(want)]) != fmt.Sprint(want) ||
		got[5].Key != "traceId" || len(got[5].Value) != 32 || got[6].Key != "spanId" || len(got[6].Value) != 16 {
		t.Fatalf("line %q parses to %q, want %q then traceId and spanId", line, got, want)
	}
	if !strings.Contains(line, " outcome=parked") || !strings.HasPrefix(out.Logs[1], "order blocked sessionId=o-1 missingSeq=1 ") {
		t.Fatalf("plain values must stay unquoted for the queries: %q", out.Logs)
	}
}
