package devhost

import (
	"log"
	"strings"
	"testing"
)

// host.json's logging.logLevel as .NET applies it: the longest category
// prefix at a dot wins, then "default" (Information when absent).
func TestLogFilter(t *testing.T) {
	t.Parallel()
	f, err := NewLogFilter(map[string]string{"default": "Warning", "Function": "Information", "Host.Function.Console": "Error"})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		category string
		level    Level
		kept     bool
	}{
		{CategoryUser("OrderProcessor"), LevelInformation, true},
		{CategoryConsole, LevelWarning, false}, // its own entry beats "default"
		{CategoryConsole, LevelError, true},
		{"Host.Results", LevelInformation, false},
		{"Functional", LevelInformation, false}, // a prefix only at a dot
		{"Host.Function.ConsoleX", LevelWarning, true},
	} {
		if got := f.keeps(tc.category, tc.level); got != tc.kept {
			t.Errorf("%s at %s: kept %v, want %v", tc.category, tc.level, got, tc.kept)
		}
	}
	if none, _ := NewLogFilter(nil); !none.keeps(CategoryConsole, LevelInformation) || none.keeps(CategoryConsole, LevelDebug) {
		t.Error("without logLevel the default is Information")
	}
	if _, err := NewLogFilter(map[string]string{"default": "Loud"}); err == nil {
		t.Error("an unknown level was accepted")
	}
}

// stdout → Information; stderr → Error, or Warning when the line says "warn".
func TestConsoleLevel(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		stderr bool
		line   string
		want   Level
	}{{false, "level=ERROR boom", LevelInformation}, {true, "level=WARN msg=x", LevelWarning}, {true, "Warning: x", LevelWarning}, {true, "level=ERROR", LevelError}} {
		if got := consoleLevel(tc.stderr, tc.line); got != tc.want {
			t.Errorf("stderr %v %q: %s, want %s", tc.stderr, tc.line, got, tc.want)
		}
	}
}

// TestTraceMarksWhereALineGoes: every line is shown; one host.json keeps
// from Application Insights is marked "(not to AI)", never "dropped" (a
// newcomer read that as lost), and the first of its kind says which setting.
func TestTraceMarksWhereALineGoes(t *testing.T) {
	t.Parallel()
	f, err := NewLogFilter(map[string]string{"Host.Function.Console": "Warning"})
	if err != nil {
		t.Fatal(err)
	}
	var out strings.Builder
	h := &Host{opts: Options{Log: &out}, log: log.New(&out, "devhost: ", 0), app: &App{Logs: f}, telemetry: newTelemetry(f)}
	in := &Instance{ID: 2, host: h, Group: "http"}
	in.trace(Trace{Category: CategoryConsole, Level: LevelInformation, Message: "custom handler listening"})
	in.trace(Trace{Category: CategoryConsole, Level: LevelInformation, Message: "again"})
	in.trace(Trace{Category: CategoryConsole, Level: LevelError, Message: "failed"})
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	want := []string{
		" i2 (not to AI) Host.Function.Console [Information]: custom handler listening",
		"devhost: instance 2 (http): Host.Function.Console lines at Information are shown here marked (not to AI): host.json's logging.logLevel (minimum Warning) keeps them from Application Insights",
		" i2 (not to AI) Host.Function.Console [Information]: again",
		" i2 → AI Host.Function.Console [Error]: failed",
	}
	if len(lines) != len(want) {
		t.Fatalf("lines:\n%s", out.String())
	}
	for i, w := range want {
		if !strings.HasSuffix(lines[i], w) || strings.Contains(lines[i], "dropped") {
			t.Errorf("line %d: %q, want it to end %q", i, lines[i], w)
		}
	}
}
