package bench_test

import (
	"fmt"
	"io"
	"os"
	"runtime"
	"strings"
	"sync"
	"testing"
	"text/tabwriter"
)

// A figure is one result of the suite.
type figure struct {
	name   string // BENCH name: lower_snake_case, stable from run to run
	value  float64
	unit   string // "ratio" for ratios
	what   string
	target target
}

// target is a figure's goal from issue 8; op "" means none.
type target struct {
	op    string // "<=" or ">="
	limit float64
}

func atMost(v float64) target  { return target{"<=", v} }
func atLeast(v float64) target { return target{">=", v} }
func above(v float64) target   { return target{">", v} }

func (t target) verdict(v float64) string {
	met := false
	switch t.op {
	case "":
		return ""
	case "<=":
		met = v <= t.limit
	case ">=":
		met = v >= t.limit
	case ">":
		met = v > t.limit
	}
	if met {
		return fmt.Sprintf("%s %g met", t.op, t.limit)
	}
	return fmt.Sprintf("%s %g MISSED", t.op, t.limit)
}

var results struct {
	mu      sync.Mutex
	figures []figure
}

// record keeps f, replacing an earlier figure of the same name (testing.B
// runs a benchmark more than once while it sizes b.N: the last run counts).
func record(f figure) {
	results.mu.Lock()
	defer results.mu.Unlock()
	for i := range results.figures {
		if results.figures[i].name == f.name {
			results.figures[i] = f
			return
		}
	}
	results.figures = append(results.figures, f)
}

func ratio(name string, v float64, what string, t target) {
	record(figure{name: name, value: v, unit: "ratio", what: what, target: t})
}

func TestMain(m *testing.M) {
	code := m.Run()
	printReport(os.Stdout)
	stopShared()
	os.Exit(code)
}

func printReport(w io.Writer) {
	results.mu.Lock()
	defer results.mu.Unlock()
	if len(results.figures) == 0 {
		return
	}
	fmt.Fprintln(w)
	for _, f := range results.figures {
		fmt.Fprintf(w, "BENCH %s %s %s\n", f.name, format(f.value), f.unit)
	}
	fmt.Fprintf(w, "\nmachine: %s/%s, %d CPUs (%s), %s\n\n", runtime.GOOS, runtime.GOARCH, runtime.NumCPU(), cpuModel(), runtime.Version())
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "figure\tvalue\ttarget\twhat it measures")
	for _, f := range results.figures {
		fmt.Fprintf(tw, "%s\t%s %s\t%s\t%s\n", f.name, format(f.value), f.unit, f.target.verdict(f.value), f.what)
	}
	tw.Flush()
}

func format(v float64) string {
	switch {
	case v >= 1000:
		return fmt.Sprintf("%.0f", v)
	case v >= 10:
		return fmt.Sprintf("%.1f", v)
	default:
		return fmt.Sprintf("%.3g", v)
	}
}

func cpuModel() string {
	data, _ := os.ReadFile("/proc/cpuinfo")
	for _, line := range strings.Split(string(data), "\n") {
		if name, ok := strings.CutPrefix(line, "model name"); ok {
			return strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(name), ":"))
		}
	}
	return "cpu unknown"
}
