package devhost

import (
	"bytes"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"
)

// Log levels as the host's ILogger knows them.
type Level int

const (
	LevelTrace Level = iota
	LevelDebug
	LevelInformation
	LevelWarning
	LevelError
	LevelCritical
	LevelNone
)

var levelNames = []string{"Trace", "Debug", "Information", "Warning", "Error", "Critical", "None"}

func (l Level) String() string { return levelNames[l] }

func parseLevel(s string) (Level, error) {
	for i, n := range levelNames {
		if strings.EqualFold(n, s) {
			return Level(i), nil
		}
	}
	return 0, fmt.Errorf("%q is not a log level (%s)", s, strings.Join(levelNames, ", "))
}

// Log categories under which the host logs a custom handler's lines
// (docs/host-contract.md, "Logs").
const CategoryConsole = "Host.Function.Console"

// CategoryUser is where the Logs of a successful response go.
func CategoryUser(function string) string { return "Function." + function + ".User" }

// consoleLevel: a stdout line is Information; a stderr line Error, or
// Warning when it contains "warn" (the host's check, case-insensitive).
func consoleLevel(stderr bool, line string) Level {
	switch {
	case !stderr:
		return LevelInformation
	case strings.Contains(strings.ToLower(line), "warn"):
		return LevelWarning
	default:
		return LevelError
	}
}

// LogFilter is host.json's logging.logLevel: the longest category prefix
// (at a dot) decides the minimum level; "default" applies otherwise
// (Information when absent), as in .NET's logger filter rules.
type LogFilter struct {
	def    Level
	prefix map[string]Level
}

// NewLogFilter reads logging.logLevel.
func NewLogFilter(levels map[string]string) (LogFilter, error) {
	f := LogFilter{def: LevelInformation, prefix: map[string]Level{}}
	for cat, name := range levels {
		l, err := parseLevel(name)
		if err != nil {
			return LogFilter{}, fmt.Errorf("%s: %w", cat, err)
		}
		if strings.EqualFold(cat, "default") {
			f.def = l
		} else {
			f.prefix[strings.ToLower(cat)] = l
		}
	}
	return f, nil
}

// Min is the lowest level kept for category.
func (f LogFilter) Min(category string) Level {
	cat := strings.ToLower(category)
	best, min := -1, f.def
	for p, l := range f.prefix {
		if (cat == p || strings.HasPrefix(cat, p+".")) && len(p) > best {
			best, min = len(p), l
		}
	}
	return min
}

// keeps reports whether a line of level in category reaches Application Insights.
func (f LogFilter) keeps(category string, level Level) bool {
	return level != LevelNone && level >= f.Min(category)
}

// Trace is one log line as Application Insights would receive it.
type Trace struct {
	Category string
	Level    Level
	Message  string
}

// Telemetry collects what Application Insights would receive from the app
// and counts, per category, what host.json's filter drops.
type Telemetry struct {
	filter LogFilter

	mu      sync.Mutex
	kept    []Trace
	dropped map[string]int
	warned  map[string]bool
}

// maxTraces bounds the memory of a long-running emulation.
const maxTraces = 200_000

func newTelemetry(f LogFilter) *Telemetry {
	return &Telemetry{filter: f, dropped: map[string]int{}, warned: map[string]bool{}}
}

// record files one line; first is true the first time a category's lines
// are dropped, so the emulation can say so once.
func (t *Telemetry) record(tr Trace) (kept, first bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.filter.keeps(tr.Category, tr.Level) {
		if len(t.kept) < maxTraces {
			t.kept = append(t.kept, tr)
		}
		return true, false
	}
	key := tr.Category + "/" + tr.Level.String()
	t.dropped[key]++
	first = !t.warned[key]
	t.warned[key] = true
	return false, first
}

// Traces returns the lines Application Insights would have received, in order.
func (t *Telemetry) Traces() []Trace {
	t.mu.Lock()
	defer t.mu.Unlock()
	return append([]Trace(nil), t.kept...)
}

// Dropped returns, by "category/level", how many lines host.json's
// logging.logLevel dropped.
func (t *Telemetry) Dropped() map[string]int {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := map[string]int{}
	for k, v := range t.dropped {
		out[k] = v
	}
	return out
}

// droppedSummary is Dropped as one sorted line, for the emulation's log.
func (t *Telemetry) droppedSummary() string {
	d := t.Dropped()
	keys := make([]string, 0, len(d))
	for k := range d {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf("%s %d", k, d[k])
	}
	return strings.Join(parts, ", ")
}

// trace files a line with the app's telemetry and echoes it to the
// emulation's log, marked with where it ends up.
func (in *Instance) trace(t Trace) {
	kept, first := in.host.telemetry.record(t)
	if in.host.quiet {
		return
	}
	mark := "→ AI"
	if !kept {
		mark = "(not to AI)" // shown here all the same: only the telemetry filter leaves it out
	}
	fmt.Fprintf(in.host.opts.Log, "%s i%d %s %s [%s]: %s\n", time.Now().Format("15:04:05.000000"), in.ID, mark, t.Category, t.Level, t.Message)
	if first {
		in.logf("%s lines at %s are shown here marked (not to AI): host.json's logging.logLevel (minimum %s) keeps them from Application Insights",
			t.Category, t.Level, in.host.app.Logs.Min(t.Category))
	}
}

// consoleWriter turns the handler's output into console log lines, as the
// host reads stdout and stderr.
type consoleWriter struct {
	in     *Instance
	stderr bool
	mu     sync.Mutex
	buf    []byte
}

func (w *consoleWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.buf = append(w.buf, p...)
	for {
		i := bytes.IndexByte(w.buf, '\n')
		if i < 0 {
			return len(p), nil
		}
		line := strings.TrimRight(string(w.buf[:i]), "\r")
		w.buf = w.buf[i+1:]
		w.in.trace(Trace{Category: CategoryConsole, Level: consoleLevel(w.stderr, line), Message: line})
	}
}
