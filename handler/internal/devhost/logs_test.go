package devhost

import "testing"

// host.json's logging.logLevel as .NET applies it: the longest category
// prefix at a dot wins, then "default" (Information when absent).
func TestLogFilter(t *testing.T) {
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
		if got := f.Keeps(tc.category, tc.level); got != tc.kept {
			t.Errorf("%s at %s: kept %v, want %v", tc.category, tc.level, got, tc.kept)
		}
	}
	if none, _ := NewLogFilter(nil); !none.Keeps(CategoryConsole, LevelInformation) || none.Keeps(CategoryConsole, LevelDebug) {
		t.Error("without logLevel the default is Information")
	}
	if _, err := NewLogFilter(map[string]string{"default": "Loud"}); err == nil {
		t.Error("an unknown level was accepted")
	}
}

// stdout → Information; stderr → Error, or Warning when the line says "warn".
func TestConsoleLevel(t *testing.T) {
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
